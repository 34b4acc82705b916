-- Event retention and where webhook delivery begins (behaviour §11 TOKENRELAY_EVENTS_RETENTION_DAYS,
-- §12 Webhooks and events; issue 10 item 12; ADR 0007).
--
-- webhook_delivery holds one row, written when a replica with TOKENRELAY_WEBHOOK_URL first
-- starts on this database: events up to `after_seq` (those that existed then) are never POSTed,
-- so a receiver configured today gets today's events, not years of history. The row stays when
-- the URL is later removed or changed: "the first time" is once per database.
CREATE TABLE webhook_delivery (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    after_seq   bigint NOT NULL,                    -- events with seq ≤ this are never delivered
    began_at    timestamptz NOT NULL DEFAULT now()  -- when delivery began (for operators)
);

-- A database that already delivered events (a webhook in use before this migration) keeps
-- delivering where it was: from the oldest event not yet acknowledged.
INSERT INTO webhook_delivery (after_seq, began_at)
SELECT COALESCE((SELECT min(seq) - 1 FROM account_events WHERE delivered_at IS NULL), (SELECT max(seq) FROM account_events)), now()
WHERE EXISTS (SELECT 1 FROM account_events WHERE delivered_at IS NOT NULL);

-- The retention prune (the keep-alive job's pass) looks for the oldest events by time.
CREATE INDEX account_events_occurred_idx ON account_events (occurred_at);
