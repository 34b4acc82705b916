-- The refresh engine's two statements (ADR 0012) as functions, so that each is one short call
-- whose inner statements PL/pgSQL plans once per server connection and then reuses: parsing and
-- planning the same multi-part statement on every refresh cost more than running it
-- (measured with log_min_duration_statement: about 0.8 of 1.1 ms per refresh). Plain function
-- calls work through pgbouncer in transaction mode, where named prepared statements do not.
-- Each call is one autocommit statement: all of it happens, or none of it.

-- Claims the redemption lease of (p_account, p_client) unless a usable access token is stored
-- (p_check_cache). One row: the sealed token and its generation when claimed; else `fresh`
-- (a usable token is stored), `has_token` false (no refresh token), or the seconds left on the
-- lease someone else holds.
CREATE OR REPLACE FUNCTION tokenrelay_claim_refresh(
    p_account text, p_client text, p_environment text, p_realm text, p_check_cache boolean, p_scopes text,
    p_min_expires_on bigint, p_accept_refresh_due boolean, p_now bigint, p_owner text, p_lease_seconds double precision)
RETURNS TABLE (key_id text, nonce bytea, ciphertext bytea, claimed_generation bigint, fresh boolean, has_token boolean,
               lease_seconds_left double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF p_check_cache AND EXISTS (
        SELECT 1 FROM access_tokens a
        WHERE a.account_id = p_account AND a.client_id = p_client AND a.environment = p_environment AND a.realm = p_realm
          AND string_to_array(a.target, ' ') @> string_to_array(p_scopes, ' ') AND a.expires_on >= p_min_expires_on
          AND (p_accept_refresh_due OR a.refresh_on IS NULL OR a.refresh_on > p_now)) THEN
        RETURN QUERY SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bigint, true, true, NULL::double precision;
        RETURN;
    END IF;
    -- READ COMMITTED: a claim that committed first makes this UPDATE re-check the row and match nothing.
    RETURN QUERY
        UPDATE refresh_tokens r SET lease_owner = p_owner, lease_expires_at = now() + make_interval(secs => p_lease_seconds)
        WHERE r.account_id = p_account AND r.client_id = p_client AND (r.lease_owner IS NULL OR r.lease_expires_at <= now())
        RETURNING r.key_id, r.nonce, r.ciphertext, r.generation, false, true, NULL::double precision;
    IF FOUND THEN RETURN; END IF;
    RETURN QUERY
        SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bigint, false, true,
               greatest(0, extract(epoch FROM r.lease_expires_at - now()))::double precision
        FROM refresh_tokens r WHERE r.account_id = p_account AND r.client_id = p_client;
    IF FOUND THEN RETURN; END IF;
    RETURN QUERY SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bigint, false, false, NULL::double precision;
END
$$;

-- The fenced write of one redemption's answer: the refresh token row changes only if it is still
-- at p_generation; then the lineage gains a link (when the STS rotated the token), the access
-- token replaces the entries it overlaps (when given), the lease is released and waiters are
-- notified. `already_stored`: an earlier attempt of this same write committed (its answer was
-- lost with the connection): the link after p_generation replaced the redeemed token with this
-- answer's token.
CREATE OR REPLACE FUNCTION tokenrelay_store_rotation(
    p_account text, p_client text, p_generation bigint, p_key_id text, p_nonce bytea, p_ciphertext bytea, p_family_id text,
    p_redeemed_fingerprint text, p_new_fingerprint text, p_channel text, p_released_payload text, p_replaced_payload text,
    p_at_environment text, p_at_realm text, p_at_target text, p_at_scopes text, p_at_key_id text, p_at_nonce bytea,
    p_at_ciphertext bytea, p_at_expires_on bigint, p_at_ext_expires_on bigint, p_at_refresh_on bigint)
RETURNS TABLE (stored_generation bigint, already_stored boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    stored bigint;
BEGIN
    UPDATE refresh_tokens r SET
        key_id = COALESCE(p_key_id, r.key_id), nonce = COALESCE(p_nonce, r.nonce), ciphertext = COALESCE(p_ciphertext, r.ciphertext),
        family_id = COALESCE(p_family_id, r.family_id),
        generation = r.generation + CASE WHEN p_key_id IS NULL THEN 0 ELSE 1 END,
        rotated_at = CASE WHEN p_key_id IS NULL THEN r.rotated_at ELSE now() END,
        replaced_fingerprint = CASE WHEN p_key_id IS NULL THEN r.replaced_fingerprint ELSE p_redeemed_fingerprint END,
        updated_at = now(), lease_owner = NULL, lease_expires_at = NULL
    WHERE r.account_id = p_account AND r.client_id = p_client AND r.generation = p_generation
    RETURNING r.generation INTO stored;
    IF stored IS NULL THEN
        RETURN QUERY SELECT NULL::bigint, EXISTS (
            SELECT 1 FROM refresh_token_lineage l
            WHERE l.account_id = p_account AND l.client_id = p_client AND l.generation = p_generation + 1
              AND l.replaced_fingerprint = p_redeemed_fingerprint AND l.fingerprint = p_new_fingerprint);
        RETURN;
    END IF;
    IF p_key_id IS NOT NULL THEN
        INSERT INTO refresh_token_lineage (account_id, client_id, generation, fingerprint, replaced_fingerprint, cause)
        VALUES (p_account, p_client, stored, p_new_fingerprint, p_redeemed_fingerprint, 'rotation')
        ON CONFLICT (account_id, client_id, generation) DO NOTHING;
        DELETE FROM refresh_token_lineage l WHERE l.account_id = p_account AND l.client_id = p_client AND l.generation <= stored - 10;
    END IF;
    IF p_at_target IS NOT NULL THEN
        -- MSAL's overlap rule: an entry whose scopes overlap the new one's is replaced.
        DELETE FROM access_tokens a
        WHERE a.account_id = p_account AND a.environment = p_at_environment AND a.realm = p_at_realm AND a.client_id = p_client
          AND a.target <> p_at_target AND string_to_array(a.target, ' ') && string_to_array(p_at_target, ' ');
        INSERT INTO access_tokens (account_id, environment, realm, client_id, target, scopes, key_id, nonce, ciphertext, expires_on,
                                   ext_expires_on, refresh_on)
        VALUES (p_account, p_at_environment, p_at_realm, p_client, p_at_target, p_at_scopes, p_at_key_id, p_at_nonce, p_at_ciphertext,
                p_at_expires_on, p_at_ext_expires_on, p_at_refresh_on)
        ON CONFLICT (account_id, environment, realm, client_id, target) DO UPDATE SET
            scopes = EXCLUDED.scopes, key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
            expires_on = EXCLUDED.expires_on, ext_expires_on = EXCLUDED.ext_expires_on, refresh_on = EXCLUDED.refresh_on,
            cached_at = now();
    END IF;
    PERFORM pg_notify(p_channel, p_released_payload);
    IF p_replaced_payload IS NOT NULL THEN PERFORM pg_notify(p_channel, p_replaced_payload); END IF;
    RETURN QUERY SELECT stored, false;
END
$$;
