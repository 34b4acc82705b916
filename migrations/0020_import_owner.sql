-- Whose import an account is: the API key owner (api_keys.name, or 'bootstrap') that imported
-- it. Until a redemption confirms the user (home_account_id set from client_info), the username
-- of an import is unproven: such an account is listed and found by username only for that owner,
-- and a later import of the same username replaces only that owner's pending import (behaviour
-- §3.6). Null for sign-ins and for imports written before this migration (seen by every owner).
ALTER TABLE accounts ADD COLUMN imported_by text;
