-- Token issuance per (API key, account), behaviour §12 Audit: counted in each replica's memory and
-- added here in batches (one UPSERT per batch), never a write per request. Leads with
-- account_id like every token table (behaviour §8). No foreign key: a batch must not fail because an
-- account was deleted meanwhile, and the audit record outlives the account.
CREATE TABLE token_issuance_counts (
    account_id  text NOT NULL,
    key_id      text NOT NULL,
    count       bigint NOT NULL CHECK (count >= 0),
    last_at     timestamptz NOT NULL,
    PRIMARY KEY (account_id, key_id)
);
