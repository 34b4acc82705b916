-- Per-key scope patterns (behaviour §7, §12 Permissions): case-insensitive globs over the scopes a
-- key may request; empty = every scope. Allowed tenants already live in api_keys.tenants.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scope_patterns text[] NOT NULL DEFAULT '{}';
