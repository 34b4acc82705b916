-- A takeover re-reads the row before it redeems (issue 31, behaviour §2.6, ADR 0012 "After a
-- database outage"): a claim whose owner already holds the lease (a takeover waiting for the
-- previous holder's pending rotation) renews it and returns the token and generation stored now,
-- instead of being told the lease is held. Owners are unique to one claim, so no other claim
-- reaches that branch; a free lease's claim is the same single UPDATE as in migration 0021.
-- Same arguments and columns as migration 0021: replaced in place, and a replica still running
-- the previous release (which never claims twice with one owner) is unaffected.
CREATE OR REPLACE FUNCTION tokenrelay_claim_refresh(
    p_account text, p_client text, p_environment text, p_realm text, p_check_cache boolean, p_scopes text,
    p_min_expires_on bigint, p_accept_refresh_due boolean, p_now bigint, p_owner text, p_lease_seconds double precision)
RETURNS TABLE (key_id text, nonce bytea, ciphertext bytea, claimed_generation bigint, fresh boolean, has_token boolean,
               lease_seconds_left double precision, taken_over_from text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_owner text;
    v_expired boolean;
    v_left double precision;
BEGIN
    IF p_check_cache AND EXISTS (
        SELECT 1 FROM access_tokens a
        WHERE a.account_id = p_account AND a.client_id = p_client AND a.environment = p_environment AND a.realm = p_realm
          AND string_to_array(a.target, ' ') @> string_to_array(p_scopes, ' ') AND a.expires_on >= p_min_expires_on
          AND (p_accept_refresh_due OR a.refresh_on IS NULL OR a.refresh_on > p_now)) THEN
        RETURN QUERY SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bigint, true, true, NULL::double precision, NULL::text;
        RETURN;
    END IF;
    -- READ COMMITTED: a claim that committed first makes this UPDATE re-check the row and match nothing.
    RETURN QUERY
        UPDATE refresh_tokens r SET lease_owner = p_owner, lease_expires_at = now() + make_interval(secs => p_lease_seconds)
        WHERE r.account_id = p_account AND r.client_id = p_client AND r.lease_owner IS NULL
        RETURNING r.key_id, r.nonce, r.ciphertext, r.generation, false, true, NULL::double precision, NULL::text;
    IF FOUND THEN RETURN; END IF;
    SELECT r.lease_owner, r.lease_expires_at <= now(), greatest(0, extract(epoch FROM r.lease_expires_at - now()))::double precision
    INTO v_owner, v_expired, v_left
    FROM refresh_tokens r WHERE r.account_id = p_account AND r.client_id = p_client;
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bigint, false, false, NULL::double precision, NULL::text;
        RETURN;
    END IF;
    IF v_owner = p_owner THEN
        -- This claim's own lease, expired or not: renewed, with what is stored now.
        RETURN QUERY
            UPDATE refresh_tokens r SET lease_expires_at = now() + make_interval(secs => p_lease_seconds)
            WHERE r.account_id = p_account AND r.client_id = p_client AND r.lease_owner = p_owner
            RETURNING r.key_id, r.nonce, r.ciphertext, r.generation, false, true, NULL::double precision, NULL::text;
        IF FOUND THEN RETURN; END IF;
        v_left := 0;  -- taken meanwhile: claim again at once
    ELSIF v_expired THEN
        RETURN QUERY
            UPDATE refresh_tokens r SET lease_owner = p_owner, lease_expires_at = now() + make_interval(secs => p_lease_seconds)
            WHERE r.account_id = p_account AND r.client_id = p_client AND r.lease_owner = v_owner AND r.lease_expires_at <= now()
            RETURNING r.key_id, r.nonce, r.ciphertext, r.generation, false, true, NULL::double precision, v_owner;
        IF FOUND THEN RETURN; END IF;
        v_left := 0;  -- another claim took it first (or it was released meanwhile): claim again at once
    END IF;
    -- Released between the UPDATE and the SELECT (v_owner null): no wait either.
    RETURN QUERY SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bigint, false, true, COALESCE(v_left, 0), NULL::text;
END
$$;
