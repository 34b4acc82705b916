import PostgresBridge
import TokenRelayBase

/// Single use of signed sign-in links across replicas (behaviour §3, migration 0002).
extension TokenStore {
    /// Records the use of the link whose signature hashes to `signatureHash`.
    /// - Parameters:
    ///   - signatureHash: SHA-256 of the link's signature (the signature itself is not stored).
    ///   - expiresAt: the link's `expires` (unix seconds); the row may go after it.
    /// - Returns: true for the first use, false when the link was used before.
    package func claimSignInStartLink(signatureHash: [UInt8], expiresAt: Int) async throws -> Bool {
        try await database.run { connection in
            // Expired rows go with each new use, so the table stays small without a sweeper.
            _ = try connection.query("DELETE FROM sign_in_start_links WHERE expires_at < now() - interval '1 hour'")
            return try connection.query(
                "INSERT INTO sign_in_start_links (signature_hash, expires_at) VALUES ($1, to_timestamp($2)) ON CONFLICT DO NOTHING",
                [.bytes(signatureHash), .int(Int64(expiresAt))]
            ).affectedRows == 1
        }
    }

    /// Whether the link with this signature hash was used (claimed) already.
    /// - Throws: `StoreError` when the database is unreachable.
    package func isSignInStartLinkUsed(signatureHash: [UInt8]) async throws -> Bool {
        try await database.run { connection in
            try connection.query("SELECT 1 FROM sign_in_start_links WHERE signature_hash = $1", [.bytes(signatureHash)]).rows.first != nil
        }
    }
}
