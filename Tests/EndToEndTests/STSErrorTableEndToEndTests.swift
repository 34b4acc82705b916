import Foundation
import Testing
import TokenRelayTesting

/// Every row of the STS-error table (behaviour §4, `STSErrorMapping.table`) through the real binaries:
/// the emulator answers the row's response shape, TokenRelay answers the row's problem, and the
/// refresh token survives or dies as the row says. The expectations are written here, apart from
/// the table, so a changed row fails a test.
@Suite("STS error table through the whole stack", .serialized)
struct STSErrorTableEndToEndTests {
    /// What a row does to the caller and to the refresh token.
    enum Outcome: String, CaseIterable, Sendable {
        case dead, policy, canceled, credential, badScope, badAuthority, badRequest, transient, nonRetryable, throttled

        var status: Int {
            switch self {
            case .dead, .policy: 409
            case .canceled, .badScope, .badAuthority: 400
            case .credential, .badRequest, .nonRetryable: 502
            case .transient: 503
            case .throttled: 429
            }
        }

        var error: String {
            switch self {
            case .dead, .policy: "interaction_required"
            case .canceled: "user_canceled"
            case .badScope: "invalid_scope"
            case .badAuthority: "invalid_authority"
            case .credential, .badRequest, .nonRetryable: "upstream_error"
            case .transient: "upstream_unavailable"
            case .throttled: "throttled"
            }
        }
    }

    /// One row: what the STS sends and what must come of it.
    struct Row: Sendable, CustomTestStringConvertible {
        enum Match: Sendable {
            case aadsts(Int), aadb2c(Int), suberror(String), error(String)
            /// A code as the platform sends it with `invalid_grant`, whatever the outcome.
            case grant(Int)
        }

        let match: Match
        let outcome: Outcome
        var testDescription: String { "\(match) → \(outcome.rawValue)" }

        /// The HTTP status the STS answers with.
        var stsStatus: Int {
            switch outcome {
            case .credential: 401
            case .transient: 503
            case .nonRetryable: 500
            default: 400
            }
        }

        /// The STS's OAuth `error` for a code row.
        var stsError: String {
            switch outcome {
            case .dead, .policy: "invalid_grant"
            case .canceled: "access_denied"
            case .credential: "invalid_client"
            case .badScope: "invalid_scope"
            case .badAuthority, .badRequest: "invalid_request"
            case .transient: "temporarily_unavailable"
            case .nonRetryable: "server_error"
            case .throttled: "invalid_grant"
            }
        }

        /// The emulator fault producing this row's response.
        var fault: [String: Any] {
            var fault: [String: Any] = ["endpoint": "token", "username": "alice@contoso.example", "status": stsStatus]
            switch match {
            case .aadsts(let code):
                fault.merge(["error": stsError, "error_codes": [code], "error_description": "Emulated table row."]) { $1 }
            case .grant(let code):
                fault.merge(["error": "invalid_grant", "error_codes": [code], "error_description": "Emulated table row."]) { $1 }
            case .aadb2c(let code):
                // B2C: the code only in error_description (case 08).
                fault.merge(["error": stsError, "error_codes": [code], "error_description": "Emulated table row.", "b2c": true]) { $1 }
            case .suberror(let suberror):
                fault["body"] = #"{"error":"invalid_grant","error_description":"Emulated table row.","suberror":"\#(suberror)"}"#
            case .error(let error):
                fault["body"] = #"{"error":"\#(error)","error_description":"Emulated table row."}"#
                fault["status"] = ["invalid_client": 401, "temporarily_unavailable": 503, "server_error": 500][error] ?? 400
            }
            return fault
        }

        var codes: [Int]? {
            switch match {
            case .aadsts(let code), .aadb2c(let code), .grant(let code): [code]
            default: nil
            }
        }

        /// The suberror the problem must carry verbatim (the emulator adds the platform's own for 700082 and 50076).
        var suberror: String? {
            switch match {
            case .suberror(let value): value
            case .aadsts(700082): "bad_token"
            case .aadsts(50076): "basic_action"
            case .aadsts(65001): "consent_required"
            default: nil
            }
        }
    }

    static func rows(
        _ outcome: Outcome, aadsts: [Int] = [], grant: [Int] = [], aadb2c: [Int] = [], suberrors: [String] = [], errors: [String] = []
    ) -> [Row] {
        aadsts.map { Row(match: .aadsts($0), outcome: outcome) } + grant.map { Row(match: .grant($0), outcome: outcome) }
            + aadb2c.map { Row(match: .aadb2c($0), outcome: outcome) }
            + suberrors.map { Row(match: .suberror($0), outcome: outcome) } + errors.map { Row(match: .error($0), outcome: outcome) }
    }

    static let table: [Row] =
        rows(
            // 9002313 with invalid_grant is the refresh token itself (cases/30); with invalid_request, in .badRequest, it is not.
            .dead, aadsts: [700082, 70008, 700081, 700084, 50173, 70043, 50089, 50133, 50132, 70000, 50057, 50034, 50085], grant: [9002313],
            aadb2c: [90080, 90129], suberrors: ["bad_token", "token_expired"], errors: ["invalid_grant"])
        + rows(
            .policy,
            aadsts: [
                50076, 50079, 50074, 50072, 50078, 50158, 65001, 53000, 53001, 53002, 53003, 53004, 50055, 50125, 70044, 50058, 16000, 50105,
                50097, 50199, 50005, 50129, 50020, 90072, 50053, 50140, 50143,
            ],
            aadb2c: [90077, 90118, 90088],
            suberrors: [
                "basic_action", "additional_action", "message_only", "consent_required", "login_required", "user_password_expired",
                "protection_policy_required", "client_mismatch",
            ],
            errors: ["interaction_required", "consent_required", "login_required"])
        + rows(.canceled, aadsts: [65004], aadb2c: [90091], errors: ["access_denied"])
        + rows(
            .credential, aadsts: [7000215, 7000222, 700016, 700027, 700024, 7000218, 7000112, 70001, 70002, 50012], aadb2c: [90079, 90081],
            errors: ["invalid_client", "unauthorized_client"])
        + rows(.badScope, aadsts: [70011, 28000, 28003, 500011, 50001], aadb2c: [90012, 90117], errors: ["invalid_scope", "invalid_resource"])
        // 7000012 comes with invalid_grant (cases/33): the caller's authority, the refresh token kept.
        + rows(.badAuthority, aadsts: [90002], grant: [7000012])
        + rows(
            .badRequest, aadsts: [65005, 900144, 9002313, 54005, 50011, 65002, 90014], aadb2c: [90086], errors: ["invalid_request", "unsupported_grant_type"])
        + rows(.transient, aadsts: [90033], aadb2c: [90085], errors: ["temporarily_unavailable", "server_error"])
        + rows(.nonRetryable, aadsts: [90036])
        + rows(.throttled, aadsts: [50196], errors: ["slow_down"])

    @Test("every row: problem, status, suberror, sts_error_codes, and whether the refresh token survived", arguments: Outcome.allCases)
    func rowsOf(_ outcome: Outcome) async throws {
        let stack = try await TokenRelayStack(name: "e2e_table_\(outcome.rawValue.lowercased())", environment: ["TOKENRELAY_MAX_ATTEMPTS": "1"])
        defer { stack.stop() }
        var id = try await stack.signInAccountId()
        for (index, row) in Self.table.enumerated() where row.outcome == outcome {
            let queued = try await stack.control("POST", "/_control/faults", json: row.fault)
            #expect(queued.status == 201, "\(row): \(queued.text)")
            let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["Row\(index).Read"]])
            let json = refused.json
            #expect(refused.status == outcome.status, "\(row): \(refused.text)")
            #expect(json["error"] as? String == outcome.error, "\(row)")
            #expect(json["type"] as? String == "urn:tokenrelay:problem:\(outcome.error)", "\(row)")
            #expect(json["suberror"] as? String == row.suberror, "\(row): \(refused.text)")
            #expect(json["sts_error_codes"] as? [Int] == row.codes, "\(row): \(refused.text)")
            if outcome == .transient || outcome == .throttled {
                #expect(refused.headers["Retry-After"] != nil, "\(row): Retry-After is always carried")
            }

            // Did the refresh token survive? Another resource, asked for after the refusal.
            let before = try await stack.emulatorCount()
            let other = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
            switch outcome {
            case .dead:
                #expect(json["account_state"] as? String == "interaction_required", "\(row)")
                #expect((json["sign_in_url"] as? String)?.contains("/v1/sign-ins/start?") == true, "\(row)")
                #expect(other.status == 409, "\(row): the account is interaction_required: \(other.text)")
                #expect(other.json["account_state"] as? String == "interaction_required", "\(row)")
                #expect(try await stack.emulatorCount() == before, "\(row): a dead refresh token is never sent again")
                id = try await stack.signInAccountId()
            case .policy:
                #expect(json["account_state"] as? String == "active", "\(row)")
                #expect((json["sign_in_url"] as? String)?.contains("/v1/sign-ins/start?") == true, "\(row)")
                #expect(other.status == 200, "\(row): the refresh token was kept: \(other.text)")
            default:
                #expect(json["sign_in_url"] == nil, "\(row)")
                #expect(other.status == 200, "\(row): the refresh token was kept: \(other.text)")
            }
        }
    }
}
