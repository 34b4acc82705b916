import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase

/// An account's last failed refresh as stored (migration 0023, behaviour §3.8): the STS-error
/// table's class with the platform's own words. Nothing of a token.
package struct AccountFailure: Sendable, Equatable {
    package var failureClass: FailureClass
    /// The STS's OAuth `error`, verbatim; nil when it sent none (unreachable, a plain-text 429).
    package var error: String?
    package var stsErrorCodes: [Int]
    package var suberror: String?

    package init(failureClass: FailureClass, error: String? = nil, stsErrorCodes: [Int] = [], suberror: String? = nil) {
        self.failureClass = failureClass
        self.error = error
        self.stsErrorCodes = stsErrorCodes
        self.suberror = suberror
    }
}

/// Counts of accounts by `state` and the class of their current failure (`none` without one):
/// what the `tokenrelay_accounts` gauge shows.
package struct AccountHealthCounts: Sendable, Equatable {
    package struct Key: Sendable, Hashable {
        package var state: String
        package var failureClass: String

        package init(state: String, failureClass: String) {
            self.state = state
            self.failureClass = failureClass
        }
    }

    package var counts: [Key: Int]

    package init(counts: [Key: Int] = [:]) { self.counts = counts }
}

extension TokenStore {
    /// Entra ID's inactivity lifetime of a refresh token: unused this long it expires
    /// (AADSTS700082). ["Refresh tokens in the Microsoft identity platform": 90 days for all but
    /// single-page apps; "Configurable token lifetimes", `MaxInactiveTime` 90 days]
    package static let refreshTokenInactivityDays = 90

    /// SQL true when the account's stored failure is current: no refresh or sign-in stored a
    /// refresh token after it (`refresh_tokens.updated_at`).
    package static func failureIsCurrent(_ table: String) -> String {
        """
        (\(table).last_failure_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM refresh_tokens fr
          WHERE fr.account_id = \(table).account_id AND fr.updated_at > \(table).last_failure_at))
        """
    }

    /// Records the account's failed refresh. The same failure again within a minute, with no
    /// refresh stored since, writes nothing (a burst of refused requests is one write).
    package func recordFailure(accountId: String, _ failure: AccountFailure) async throws {
        let codes = "{" + failure.stsErrorCodes.map(String.init).joined(separator: ",") + "}"
        _ = try await database.run { connection in
            try connection.query(
                """
                UPDATE accounts SET last_failure_at = now(), last_failure_class = $2, last_failure_error = $3,
                  last_failure_codes = $4::integer[], last_failure_suberror = $5
                WHERE account_id = $1 AND (last_failure_at IS NULL OR last_failure_at < now() - interval '1 minute'
                  OR (last_failure_class, last_failure_error, last_failure_codes, last_failure_suberror)
                     IS DISTINCT FROM ($2::text, $3::text, $4::integer[], $5::text)
                  OR NOT \(Self.failureIsCurrent("accounts")))
                """,
                [.text(accountId), .text(failure.failureClass.rawValue), Self.optional(failure.error), .text(codes), Self.optional(failure.suberror)]
            )
        }
    }

    /// The `health` object of each account (behaviour §3.8), by account id: `last_refresh_at`,
    /// `last_used_at`, `last_failure` (or null), the estimated idle expiry of the refresh token
    /// and the next keep-alive (null when none is due: no refresh token, the account not
    /// `active`, or keep-alive off).
    /// - Parameters:
    ///   - keepAliveAfterDays: `TOKENRELAY_KEEPALIVE_AFTER_DAYS` (0: off).
    package func accountHealth(accountIds: [String], keepAliveAfterDays: Int) async throws -> [String: JSONValue] {
        try await Self.accountHealth(in: database, clientId: clientId, accountIds: accountIds, keepAliveAfterDays: keepAliveAfterDays)
    }

    /// ``accountHealth(accountIds:keepAliveAfterDays:)`` for the client `clientId` (nil: any
    /// client, as the CLI reads).
    package static func accountHealth(
        in database: Database, clientId: String?, accountIds: [String], keepAliveAfterDays: Int
    ) async throws -> [String: JSONValue] {
        guard !accountIds.isEmpty else { return [:] }
        let rows = try await database.run { connection in
            try connection.query(
                """
                SELECT a.account_id, a.state,
                  \(Self.utc("r.updated_at")) AS last_refresh_at, \(Self.utc("a.last_used_at")) AS last_used_at,
                  \(Self.utc("a.last_failure_at")) AS last_failure_at, a.last_failure_class, a.last_failure_error,
                  array_to_json(a.last_failure_codes)::text AS last_failure_codes, a.last_failure_suberror,
                  \(Self.failureIsCurrent("a")) AS failure_current,
                  \(Self.utc("r.updated_at + make_interval(days => \(Self.refreshTokenInactivityDays))")) AS idle_expiry_at,
                  CASE WHEN $3::int > 0 AND a.state = 'active' THEN \(Self.utc("r.updated_at + make_interval(days => $3::int)")) END AS next_keepalive_at
                FROM accounts a LEFT JOIN refresh_tokens r ON r.account_id = a.account_id AND r.client_id = a.client_id
                WHERE a.account_id = ANY($1::text[]) AND ($2::text IS NULL OR a.client_id = $2::text)
                """,
                [.text(APIKeyStore.arrayLiteral(accountIds)), Self.optional(clientId), .int(Int64(keepAliveAfterDays))]
            ).rows
        }
        var health: [String: JSONValue] = [:]
        for row in rows {
            guard let id = row.string("account_id") else { continue }
            func text(_ column: String) -> JSONValue { row.string(column).map(JSONValue.string) ?? .null }
            var failure: JSONValue = .null
            if let at = row.string("last_failure_at") {
                let codes = row.string("last_failure_codes").flatMap { JSONValue.parse($0) } ?? .array([])
                failure = .object([
                    "at": .string(at), "class": text("last_failure_class"), "error": text("last_failure_error"), "sts_error_codes": codes,
                    "suberror": text("last_failure_suberror"), "current": .bool(row.bool("failure_current") ?? false),
                ])
            }
            health[id] = .object([
                "last_refresh_at": text("last_refresh_at"), "last_used_at": text("last_used_at"), "last_failure": failure,
                "refresh_token_idle_expires_at": text("idle_expiry_at"), "next_keepalive_at": text("next_keepalive_at"),
            ])
        }
        return health
    }

    /// Accounts of this client by state and the class of their current failure, in one
    /// statement: what the periodic gauge refresh reads (never a scrape).
    package func accountHealthCounts() async throws -> AccountHealthCounts {
        let clientId = self.clientId
        let rows = try await database.run { connection in
            try connection.query(
                """
                SELECT a.state, CASE WHEN \(Self.failureIsCurrent("a")) THEN a.last_failure_class ELSE 'none' END AS failure_class,
                  count(*) AS n
                FROM accounts a WHERE a.client_id = $1 GROUP BY 1, 2
                """,
                [.text(clientId)]
            ).rows
        }
        var counts = AccountHealthCounts()
        for row in rows {
            guard let state = row.string("state"), let failureClass = row.string("failure_class") else { continue }
            counts.counts[.init(state: state, failureClass: failureClass), default: 0] += Int(row.int("n") ?? 0)
        }
        return counts
    }

    /// `to_char` of a `timestamptz` expression as RFC 3339 UTC (the store's one time format).
    static func utc(_ expression: String) -> String {
        "to_char((\(expression)) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
    }
}
