-- Reading the audit trail, its retention, and token provenance (behaviour §12 Audit; issue 28
-- part 5).
--
-- GET /v1/audit pages audit_events by id with optional filters on actor, action, account and
-- time; TOKENRELAY_AUDIT_RETENTION_DAYS deletes the oldest rows by time (the keep-alive pass).
CREATE INDEX audit_events_occurred_idx ON audit_events (occurred_at);
CREATE INDEX audit_events_account_idx ON audit_events (account_id, id) WHERE account_id IS NOT NULL;
CREATE INDEX audit_events_actor_idx ON audit_events (actor, id);

-- Every access token the service obtains from the token endpoint, by its `uti` claim (the token
-- identifier of Entra's sign-in logs): whose it is, for what, until when, and the API key id of
-- the request that made the service ask (NULL for background work: keep-alive, refresh-ahead).
-- Written in the statement that stores the token. Opaque tokens (no JWS, no `uti`) have no row.
-- Keys lead with account_id like every token table (docs/failover.md: co-located with the
-- account's rows, so the statement storing a token stays on one shard); reading by `uti` alone
-- (GET /v1/audit?uti=, an operator's question) uses the second index. No foreign key: the record
-- outlives the account, as the audit trail does.
CREATE TABLE token_provenance (
    account_id   text NOT NULL,               -- an account id, `app:<tenant>` or `obo:<…>` for grant tokens
    uti          text NOT NULL,
    scopes       text NOT NULL,               -- granted scopes, canonical, space-separated
    expires_at   timestamptz NOT NULL,
    obtained_at  timestamptz NOT NULL DEFAULT now(),
    obtained_by  text,                        -- API key id, `sign-in-link`, `import`, or NULL
    PRIMARY KEY (account_id, uti)
);
CREATE INDEX token_provenance_uti_idx ON token_provenance (uti);
CREATE INDEX token_provenance_obtained_idx ON token_provenance (obtained_at);

-- Which API keys were given each token, and how often: counted in each replica's memory and
-- added here in the batches of token_issuance_counts (never a write per request).
CREATE TABLE token_receipts (
    account_id   text NOT NULL,
    uti          text NOT NULL,
    key_id       text NOT NULL,
    count        bigint NOT NULL CHECK (count >= 0),
    last_at      timestamptz NOT NULL,
    PRIMARY KEY (account_id, uti, key_id)
);
CREATE INDEX token_receipts_uti_idx ON token_receipts (uti);
CREATE INDEX token_receipts_last_idx ON token_receipts (last_at);
