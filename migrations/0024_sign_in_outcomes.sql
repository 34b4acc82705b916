-- Sign-ins bound to their account and followed by their caller (behaviour §3.8, §3.9, issue 33).
--
-- A sign-in row now outlives its callback: the callback marks it `redeeming` (its state used up,
-- the PKCE verifier wiped) and then `completed` (with the account and whether the sign-in made
-- it) or `failed` (with the problem, as JSON without secrets), so GET /v1/sign-ins/{sign_in_id}
-- can answer on any replica. Rows still go an hour after they expire (with each new sign-in).
-- A row an older replica writes during a rolling upgrade has the defaults (pending, unbound);
-- an older replica's callback deletes the row, and the sign-in then reads as unknown (404).
ALTER TABLE sign_ins
    ADD COLUMN status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'redeeming', 'completed', 'failed')),
    -- The user the sign-in is for (`home_account_id`) and that account's id: any other user is
    -- refused with 409 user_mismatch. Null: open to any user.
    ADD COLUMN expected_home_account_id text,
    ADD COLUMN expected_account_id text,
    ADD COLUMN account_id text,
    ADD COLUMN account_created boolean,
    ADD COLUMN problem jsonb,
    ADD COLUMN finished_at timestamptz,
    ALTER COLUMN verifier_key_id DROP NOT NULL,
    ALTER COLUMN verifier_nonce DROP NOT NULL,
    ALTER COLUMN verifier_ciphertext DROP NOT NULL;

-- Events for what succeeded (account.signed_in) and for a failed sign-in (sign_in.failed), which
-- may name no account: account_id may be null, and seq (unique, not null) identifies a row.
ALTER TABLE account_events DROP CONSTRAINT account_events_pkey;
ALTER TABLE account_events ALTER COLUMN account_id DROP NOT NULL;
ALTER TABLE account_events DROP CONSTRAINT account_events_type_check;
ALTER TABLE account_events ADD CONSTRAINT account_events_type_check CHECK (type IN (
    'account.interaction_required', 'account.recovered', 'account.deleted', 'account.keepalive_failed', 'account.signed_in', 'sign_in.failed'));
