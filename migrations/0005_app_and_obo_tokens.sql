-- App (client credentials) and on-behalf-of tokens (behaviour §2, §12 Token requests and owners).
-- Like every token table these lead with their owner key: `app:{tenant}` for the service's own
-- tokens, `obo:{hex sha256 of the assertion}` for on-behalf-of tokens. Token columns hold
-- AES-256-GCM ciphertexts only (key_id, 96-bit nonce, ciphertext with its tag), sealed with
-- additional data binding them to (owner, kind, client_id).

-- Access tokens of both grants: (owner, environment, realm, client_id, target scope set).
CREATE TABLE grant_access_tokens (
    owner             text NOT NULL,
    environment       text NOT NULL,
    realm             text NOT NULL,
    client_id         text NOT NULL,
    target            text NOT NULL,                -- lower-cased canonical scopes, space separated
    scopes            text NOT NULL,                -- canonical scopes as granted, space separated
    key_id            text NOT NULL,
    nonce             bytea NOT NULL,
    ciphertext        bytea NOT NULL,
    expires_on        bigint NOT NULL,              -- unix seconds
    ext_expires_on    bigint,
    refresh_on        bigint,
    owner_expires_on  bigint,                       -- OBO: the assertion's exp; no use after it
    cached_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, environment, realm, client_id, target)
);
CREATE INDEX grant_access_tokens_owner_expiry_idx ON grant_access_tokens (owner_expires_on) WHERE owner_expires_on IS NOT NULL;

-- Refresh tokens returned by on-behalf-of exchanges, one per (owner, environment, client_id):
-- redeemed for other scopes or once the access token expires, while the assertion is valid.
CREATE TABLE obo_refresh_tokens (
    owner             text NOT NULL,
    environment       text NOT NULL,
    realm             text NOT NULL,
    client_id         text NOT NULL,
    key_id            text NOT NULL,
    nonce             bytea NOT NULL,
    ciphertext        bytea NOT NULL,
    owner_expires_on  bigint NOT NULL,              -- the assertion's exp
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, environment, client_id)
);
CREATE INDEX obo_refresh_tokens_owner_expiry_idx ON obo_refresh_tokens (owner_expires_on);
