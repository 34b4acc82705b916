-- ADAL imports and guest tenant profiles (behaviour §3 import, §12 Accounts).

-- One row per tenant an account signed into: a guest signed into several tenants is one account
-- (one home_account_id) with several profiles. Leads with account_id like every account table.
CREATE TABLE account_tenant_profiles (
    account_id        text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
    realm             text NOT NULL,                -- tenant id
    local_account_id  text,                         -- the user's oid in that tenant
    is_home           boolean NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, realm)
);
CREATE INDEX account_tenant_profiles_realm_idx ON account_tenant_profiles (realm, account_id);

-- Every signed-in account so far has its one profile.
INSERT INTO account_tenant_profiles (account_id, realm, local_account_id, is_home)
SELECT account_id, realm, local_account_id,
       home_account_id IS NULL OR home_account_id LIKE '%.' || realm
FROM accounts
ON CONFLICT DO NOTHING;

-- An imported account merged into a signed-in one keeps its account_id as an alias of the
-- survivor. Deleting the survivor deletes its aliases.
CREATE TABLE account_aliases (
    alias_account_id  text PRIMARY KEY,
    account_id        text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
    client_id         text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX account_aliases_account_idx ON account_aliases (account_id);

