-- Account events (behaviour §12 Webhooks and events) and the keep-alive job's lease.
--
-- account_events is a transactional outbox: each row is inserted in the same transaction as the
-- account change it reports, so an event exists iff its change committed. `seq` orders events
-- for GET /v1/events and webhook deliveries; writers take a transaction-scoped advisory lock
-- just before inserting (the insert is the last statement of their transaction), so rows commit
-- in `seq` order and a reader paging by `seq` never skips one that commits late.
CREATE TABLE account_events (
    account_id    text NOT NULL,                    -- no foreign key: account.deleted outlives its account
    seq           bigserial NOT NULL UNIQUE,
    event_id      text NOT NULL UNIQUE,             -- `evt_…`, stable across redeliveries
    type          text NOT NULL CHECK (type IN ('account.interaction_required', 'account.recovered', 'account.deleted',
                                                'account.keepalive_failed')),
    realm         text,                             -- the account's tenant when the event was written
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    data          jsonb NOT NULL DEFAULT '{}',
    delivered_at  timestamptz,                      -- when the webhook receiver acknowledged it (2xx)
    PRIMARY KEY (account_id, seq)
);
CREATE INDEX account_events_undelivered_idx ON account_events (seq) WHERE delivered_at IS NULL;

-- Background jobs that one replica at a time runs for a long while (the keep-alive pass paces
-- its STS calls over minutes): a lease renewed while the job runs, so no session state or
-- open transaction is needed (pgbouncer in transaction mode, behaviour §8).
CREATE TABLE job_leases (
    job         text PRIMARY KEY,
    holder      text NOT NULL,
    expires_at  timestamptz NOT NULL
);

-- Keep-alive candidates: refresh tokens by the time they were last redeemed (updated_at).
CREATE INDEX refresh_tokens_updated_idx ON refresh_tokens (client_id, updated_at);
