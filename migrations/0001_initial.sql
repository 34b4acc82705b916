-- TokenRelay initial schema (behaviour §1, §3, §7, §8, §12).
-- Every token table leads with its owner key (account_id) so the data can later be partitioned or
-- distributed by account without a redesign. Token columns hold AES-256-GCM ciphertexts only:
-- key_id names the ring key, nonce is the 96-bit GCM nonce, ciphertext ends with the 16-byte tag.

CREATE TABLE accounts (
    account_id        text PRIMARY KEY,             -- opaque, stable, never parsed
    client_id         text NOT NULL,
    environment       text NOT NULL,                -- canonical authority host (cache partition)
    home_account_id   text,                         -- {uid}.{utid} from client_info; null for imports
    realm             text NOT NULL,                -- tenant id the account signed in to
    local_account_id  text,                         -- home oid
    username          text,                         -- preferred_username, else (B2C) first of emails
    name              text,
    authority         text NOT NULL,                -- authority URL the account signed in with
    authority_type    text NOT NULL CHECK (authority_type IN ('aad', 'b2c', 'ciam')),
    state             text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'interaction_required')),
    id_token_claims   jsonb NOT NULL DEFAULT '{}',  -- the non-secret standard claims only
    created_at        timestamptz NOT NULL DEFAULT now(),
    last_used_at      timestamptz,
    UNIQUE (client_id, environment, home_account_id)
);
CREATE INDEX accounts_username_idx ON accounts (lower(username), account_id);
CREATE INDEX accounts_home_account_idx ON accounts (home_account_id);

-- One refresh token per (account, client_id). generation increases on every rotation so that a
-- writer can compare-and-swap and never bring back a superseded token.
CREATE TABLE refresh_tokens (
    account_id   text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
    client_id    text NOT NULL,
    key_id       text NOT NULL,
    nonce        bytea NOT NULL,
    ciphertext   bytea NOT NULL,
    family_id    text,                              -- the wire field foci, for information
    generation   bigint NOT NULL DEFAULT 1,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, client_id)
);

-- Access token cache entries: (account, environment, realm, client_id, target scope set).
CREATE TABLE access_tokens (
    account_id      text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
    environment     text NOT NULL,
    realm           text NOT NULL,
    client_id       text NOT NULL,
    target          text NOT NULL,                  -- lower-cased canonical scopes, space separated
    scopes          text NOT NULL,                  -- canonical scopes as granted, space separated
    key_id          text NOT NULL,
    nonce           bytea NOT NULL,
    ciphertext      bytea NOT NULL,
    expires_on      bigint NOT NULL,                -- unix seconds
    ext_expires_on  bigint,
    refresh_on      bigint,
    cached_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, environment, realm, client_id, target)
);

-- Pending sign-ins (authorization code flow with PKCE). The state value itself is never stored:
-- only its SHA-256. A row is consumed (deleted) by its one callback.
CREATE TABLE sign_ins (
    state_hash           bytea PRIMARY KEY,
    sign_in_id           text NOT NULL UNIQUE,
    authority            text NOT NULL,
    scopes               text NOT NULL,
    nonce                text NOT NULL,
    verifier_key_id      text NOT NULL,
    verifier_nonce       bytea NOT NULL,
    verifier_ciphertext  bytea NOT NULL,
    redirect_after       text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    expires_at           timestamptz NOT NULL
);
CREATE INDEX sign_ins_expires_idx ON sign_ins (expires_at);

-- Caller credentials: trk_<key_id>_<secret>; only SHA-256 of the secret is kept.
CREATE TABLE api_keys (
    key_id        text PRIMARY KEY,
    name          text NOT NULL,
    secret_hash   bytea NOT NULL,
    permissions   text[] NOT NULL,
    tenants       text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);

-- Append-only audit trail (behaviour §12 Audit).
CREATE TABLE audit_events (
    id           bigserial PRIMARY KEY,
    occurred_at  timestamptz NOT NULL DEFAULT now(),
    actor        text NOT NULL,                     -- API key id, or 'bootstrap' / 'cli'
    action       text NOT NULL,
    account_id   text,
    outcome      text NOT NULL,
    detail       jsonb NOT NULL DEFAULT '{}'
);
