-- Signed GET /v1/sign-ins/start links are single use across replicas (behaviour §3): each link's
-- signature hash is recorded when it is used; rows go once the link has expired.
CREATE TABLE sign_in_start_links (
    signature_hash  bytea PRIMARY KEY,              -- SHA-256 of the link's signature
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_start_links_expires_idx ON sign_in_start_links (expires_at);
