-- Caller-chosen external ids (behaviour §3.7, §12 Accounts; issue 10 item 6). An external id is
-- unique per API key owner: the key's `name` (`bootstrap` for the bootstrap key), so a key rotated
-- under the same name keeps its external ids. An account has at most one per owner. Leads with
-- account_id like every account table; the account's deletion frees its external ids (cascade).
-- A new table, so the accounts table is not rewritten.
CREATE TABLE account_external_ids (
    account_id   text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
    owner        text NOT NULL,                     -- api_keys.name of the caller, or 'bootstrap'
    external_id  text NOT NULL,                     -- 1-128 printable ASCII but '/', never 'acc_…'
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, owner)
);
CREATE UNIQUE INDEX account_external_ids_owner_idx ON account_external_ids (owner, external_id);

-- The external id a pending sign-in gives its account when the callback completes, and whose
-- it is. Null for a sign-in without one, one a signed start link began (no API key, no owner),
-- and rows an older replica wrote during a rolling upgrade.
ALTER TABLE sign_ins ADD COLUMN external_id text, ADD COLUMN external_id_owner text;
