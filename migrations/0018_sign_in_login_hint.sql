-- The login_hint each pending sign-in sent to the authorize endpoint, so an interaction_required
-- answer of its callback can carry a sign_in_url for the same user (behaviour §3.2, §4.4: every
-- problem that asks for interaction carries one, with the username as login_hint). Not a secret:
-- it is the username the caller named, already in the authorize URL. Null when none was given,
-- and for rows an older replica wrote during a rolling upgrade (the link then has no login_hint).
ALTER TABLE sign_ins ADD COLUMN login_hint text;
