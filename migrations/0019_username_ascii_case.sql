-- Usernames (user principal names, email-shaped sign-in names) are compared as the identity
-- platform compares them: ASCII letters in any case, every other byte exactly (behaviour §12
-- Accounts). lower() under the database's collation is Unicode-aware: it folded the Turkish
-- dotted İ (U+0130) and the Kelvin sign (U+212A) onto ASCII i and k, so `ALİCE@contoso.example`
-- found alice. Under the "C" collation lower() changes ASCII letters only; the lookups use that
-- expression (TokenStore.usernameKey), and so does this index.
DROP INDEX IF EXISTS accounts_username_idx;
CREATE INDEX accounts_username_ascii_idx ON accounts (lower(username COLLATE "C"), account_id);
