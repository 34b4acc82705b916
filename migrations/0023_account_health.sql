-- Account health (behaviour §3.8, issue 28 part 4): the last failed refresh of each account, as the
-- STS-error table classified it. Written at most once a minute for the same failure; never
-- cleared: a later refresh (refresh_tokens.updated_at after last_failure_at) makes it history,
-- so the failure is "current" only while no refresh or sign-in has succeeded since.
ALTER TABLE accounts
    ADD COLUMN last_failure_at       timestamptz,
    ADD COLUMN last_failure_class    text CHECK (last_failure_class IN ('transient', 'user_action', 'admin_action', 'configuration')),
    ADD COLUMN last_failure_error    text,           -- the STS's OAuth error, verbatim (null: none, e.g. unreachable)
    ADD COLUMN last_failure_codes    integer[],      -- AADSTS / AADB2C numbers, in the answer's order
    ADD COLUMN last_failure_suberror text;

-- GET /v1/accounts?failure_class= walks the accounts of one class in account_id order.
CREATE INDEX accounts_failure_class_idx ON accounts (last_failure_class, account_id) WHERE last_failure_class IS NOT NULL;
