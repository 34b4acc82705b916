import IdentityCore
import PostgresBridge
import TokenRelayBase

/// Where an access token came from (behaviour §12 Audit, token provenance): one `token_provenance`
/// row per token obtained, written by the statement that stores the token, so a token is never
/// stored without it (migration 0022).
package enum TokenProvenance {
    /// A data-modifying CTE named `provenance` that records the token of parameters `$first` …
    /// `$first+4` (``parameters(of:)``); nothing when `$first` (the `uti`) is null. A token already
    /// recorded (a retried write) keeps its first row.
    package static func cte(first: Int) -> String {
        let p = (first..<first + 5).map { "$\($0)" }
        return """
            provenance AS (
              INSERT INTO token_provenance (uti, account_id, scopes, expires_at, obtained_by)
              SELECT \(p[0])::text, \(p[1])::text, \(p[2])::text, to_timestamp(\(p[3])::int8), \(p[4])::text WHERE \(p[0])::text IS NOT NULL
              ON CONFLICT (account_id, uti) DO NOTHING)
            """
    }

    /// The five parameters of ``cte(first:)`` for `token` (all null without a token or a `uti`).
    /// - Parameter target: `token`'s scopes normalised, when the caller has them already.
    package static func parameters(of token: StoredAccessToken?, target: ScopeSet? = nil) -> [PostgresParameter] {
        guard let token, let uti = token.uti else { return Array(repeating: .null, count: 5) }
        return [
            .text(uti), .text(token.accountId), .text((target ?? ScopeSet(normalizing: token.scopes)).canonical.joined(separator: " ")),
            .int(Int64(token.expiresOn)), TokenStore.optional(token.obtainedBy),
        ]
    }
}
