-- Customer tenants switched off by an operator (issue 12 part 2; behaviour §12 Tenants). A row
-- means the tenant is suspended: every account of it (home tenant or any tenant profile) and every
-- app or on-behalf-of token in it is refused with 403 tenant_suspended until the row is deleted
-- (resume). Nothing else is touched: refresh tokens stay as they are, so a resume needs no sign-in.
-- The history (who suspended and resumed, when) is in audit_events. A tenant may be suspended
-- before any account of it signs in. Numbered 0016: 0015 belongs to another change.
CREATE TABLE tenant_suspensions (
    tenant_id     text PRIMARY KEY CHECK (tenant_id = lower(tenant_id)),  -- a GUID, lower-cased
    suspended_at  timestamptz NOT NULL DEFAULT now(),
    suspended_by  text NOT NULL                                             -- API key id, or 'cli'
);

-- GET /v1/tenants counts accounts per home tenant (the utid of home_account_id).
CREATE INDEX accounts_home_tenant_idx ON accounts (lower(split_part(home_account_id, '.', 2)));
