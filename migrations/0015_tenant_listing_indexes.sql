-- Listing accounts by tenant at scale (issue 13; behaviour §12 `tenant_id` filters). A page of
-- `GET /v1/accounts?tenant_id=` (and `token-relay accounts list --tenant-id`) reads account ids
-- of the tenant, in account_id order after the cursor, from these two indexes (the home realm,
-- and a guest's other profiles), instead of walking every account. lower() as the queries
-- compare: a realm is stored as the STS wrote it.
-- Plain CREATE INDEX: the Migrator runs each file in a transaction, where CONCURRENTLY is not
-- allowed. It blocks writes to the table while it builds (measured: a few seconds at 1,000,000
-- accounts, see bench/README.md "Scale"); an operator who cannot pause writes that long creates
-- them CONCURRENTLY by hand first: IF NOT EXISTS then makes this a no-op.
CREATE INDEX IF NOT EXISTS accounts_lower_realm_idx ON accounts (lower(realm), account_id);
CREATE INDEX IF NOT EXISTS account_tenant_profiles_lower_realm_idx ON account_tenant_profiles (lower(realm), account_id);
