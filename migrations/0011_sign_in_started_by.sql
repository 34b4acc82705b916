-- Who started each pending sign-in (behaviour §12 Audit: every audit row names the caller's key id):
-- the API key id of POST /v1/sign-ins (`bootstrap` for the bootstrap key), or `sign-in-link`
-- for a signed GET /v1/sign-ins/start link, which carries no API key. The callback, which has
-- no API key either, writes it into the sign_in.completed audit row. Null for rows written by
-- an older replica during a rolling upgrade (audited as `sign-in`).
ALTER TABLE sign_ins ADD COLUMN started_by text;
