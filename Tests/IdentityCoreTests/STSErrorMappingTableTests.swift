import Foundation
import Testing

@testable import IdentityCore

/// The expected outcome of one table row, written independently of the table so a changed
/// row fails a test.
struct ExpectedRow: Sendable, CustomTestStringConvertible {
    let match: STSErrorMapping.Match
    let disposition: STSFailure.Disposition
    let problem: ProblemCode
    let status: Int

    var testDescription: String { "\(match) → \(disposition.rawValue) (\(problem.rawValue) \(status))" }

    /// A response that exercises exactly this row.
    var response: (status: Int, body: String) {
        switch match {
        case .code(let code), .grantCode(let code):
            let httpStatus = disposition == .transient || disposition == .nonRetryableServer ? 500 : (disposition == .clientCredentialRejected ? 401 : 400)
            // A code row of a request the platform refused comes with invalid_request (so its
            // grantCode row, if any, is not the one read); the rest with invalid_grant.
            let error = if case .code = match, disposition == .badRequest { "invalid_request" } else { "invalid_grant" }
            switch code {
            case .aadsts(let n):
                return (
                    httpStatus, #"{"error":"\#(error)","error_description":"AADSTS\#(n): Text. Trace ID: t-1 Correlation ID: c-1","error_codes":[\#(n)]}"#
                )
            case .aadb2c(let n):
                return (httpStatus, #"{"error":"\#(error)","error_description":"AADB2C\#(n): Text.\r\nCorrelation ID: c-1"}"#)
            }
        case .suberror(let suberror):
            return (400, #"{"error":"invalid_grant","error_description":"Text.","suberror":"\#(suberror)"}"#)
        case .error(let error):
            let httpStatus = error == "invalid_client" ? 401 : 400
            return (httpStatus, #"{"error":"\#(error)","error_description":"Text."}"#)
        }
    }
}

let dead = (STSFailure.Disposition.refreshTokenDead, ProblemCode.interactionRequired, 409)
let policy = (STSFailure.Disposition.interactionRequired, ProblemCode.interactionRequired, 409)
let canceled = (STSFailure.Disposition.userCanceled, ProblemCode.userCanceled, 400)
let credential = (STSFailure.Disposition.clientCredentialRejected, ProblemCode.upstreamError, 502)
let badScope = (STSFailure.Disposition.badRequest, ProblemCode.invalidScope, 400)
let badAuthority = (STSFailure.Disposition.badRequest, ProblemCode.invalidAuthority, 400)
let badRequest = (STSFailure.Disposition.badRequest, ProblemCode.upstreamError, 502)
let badAssertion = (STSFailure.Disposition.badRequest, ProblemCode.invalidRequest, 400)
let transient = (STSFailure.Disposition.transient, ProblemCode.upstreamUnavailable, 503)
let nonRetryable = (STSFailure.Disposition.nonRetryableServer, ProblemCode.upstreamError, 502)
let throttled = (STSFailure.Disposition.throttled, ProblemCode.throttled, 429)

func expect(_ match: STSErrorMapping.Match, _ o: (STSFailure.Disposition, ProblemCode, Int)) -> ExpectedRow {
    ExpectedRow(match: match, disposition: o.0, problem: o.1, status: o.2)
}

/// The table as the tests expect it: every row of `STSErrorMapping.table`, once.
let expectedRows: [ExpectedRow] = [
    expect(.code(.aadsts(700082)), dead), expect(.code(.aadsts(70008)), dead), expect(.code(.aadsts(700081)), dead),
    expect(.code(.aadsts(700084)), dead), expect(.code(.aadsts(50173)), dead), expect(.code(.aadsts(70043)), dead),
    expect(.code(.aadsts(50089)), dead), expect(.code(.aadsts(50133)), dead), expect(.code(.aadsts(50132)), dead),
    expect(.code(.aadsts(70000)), dead), expect(.code(.aadsts(50057)), dead), expect(.code(.aadsts(50034)), dead),
    expect(.code(.aadb2c(90080)), dead), expect(.code(.aadb2c(90129)), dead), expect(.code(.aadsts(50085)), dead),
    expect(.grantCode(.aadsts(9002313)), dead),
    expect(.code(.aadsts(50097)), policy), expect(.code(.aadsts(50199)), policy), expect(.code(.aadsts(50005)), policy),
    expect(.code(.aadsts(50129)), policy), expect(.code(.aadsts(50020)), policy), expect(.code(.aadsts(90072)), policy),
    expect(.code(.aadsts(50053)), policy), expect(.code(.aadsts(50140)), policy), expect(.code(.aadsts(50143)), policy),
    expect(.code(.aadsts(50076)), policy), expect(.code(.aadsts(50079)), policy), expect(.code(.aadsts(50074)), policy),
    expect(.code(.aadsts(50072)), policy), expect(.code(.aadsts(50078)), policy), expect(.code(.aadsts(50158)), policy),
    expect(.code(.aadsts(65001)), policy), expect(.code(.aadsts(53000)), policy), expect(.code(.aadsts(53001)), policy),
    expect(.code(.aadsts(53002)), policy), expect(.code(.aadsts(53003)), policy), expect(.code(.aadsts(53004)), policy),
    expect(.code(.aadsts(50055)), policy), expect(.code(.aadsts(50125)), policy), expect(.code(.aadsts(70044)), policy),
    expect(.code(.aadsts(50058)), policy), expect(.code(.aadsts(16000)), policy), expect(.code(.aadsts(50105)), policy),
    expect(.code(.aadb2c(90077)), policy), expect(.code(.aadb2c(90118)), policy), expect(.code(.aadb2c(90088)), policy),
    expect(.code(.aadsts(65004)), canceled), expect(.code(.aadb2c(90091)), canceled),
    expect(.code(.aadsts(7000215)), credential), expect(.code(.aadsts(7000222)), credential),
    expect(.code(.aadsts(700016)), credential), expect(.code(.aadsts(700027)), credential),
    expect(.code(.aadsts(700024)), credential), expect(.code(.aadsts(7000218)), credential),
    expect(.code(.aadsts(7000112)), credential), expect(.code(.aadsts(70001)), credential),
    expect(.code(.aadsts(70002)), credential), expect(.code(.aadsts(50012)), credential),
    expect(.code(.aadb2c(90079)), credential), expect(.code(.aadb2c(90081)), credential),
    expect(.code(.aadsts(50001)), badScope), expect(.code(.aadb2c(90012)), badScope), expect(.code(.aadb2c(90117)), badScope),
    expect(.code(.aadsts(90002)), badAuthority), expect(.code(.aadsts(7000012)), badAuthority),
    expect(.grantCode(.aadsts(500133)), badAssertion), expect(.grantCode(.aadsts(50013)), badAssertion),
    expect(.grantCode(.aadsts(50027)), badAssertion), expect(.code(.aadsts(54005)), badRequest), expect(.code(.aadsts(50011)), badRequest),
    expect(.code(.aadsts(65002)), badRequest), expect(.code(.aadsts(90014)), badRequest), expect(.code(.aadb2c(90086)), badRequest),
    expect(.code(.aadb2c(90085)), transient),
    expect(.code(.aadsts(70011)), badScope), expect(.code(.aadsts(28000)), badScope), expect(.code(.aadsts(28003)), badScope),
    expect(.code(.aadsts(500011)), badScope), expect(.code(.aadsts(65005)), badRequest),
    expect(.code(.aadsts(900144)), badRequest), expect(.code(.aadsts(9002313)), badRequest),
    expect(.code(.aadsts(90033)), transient), expect(.code(.aadsts(90036)), nonRetryable),
    expect(.code(.aadsts(50196)), throttled),
    expect(.suberror("bad_token"), dead), expect(.suberror("token_expired"), dead),
    expect(.suberror("basic_action"), policy), expect(.suberror("additional_action"), policy),
    expect(.suberror("message_only"), policy), expect(.suberror("consent_required"), policy),
    expect(.suberror("login_required"), policy), expect(.suberror("user_password_expired"), policy),
    expect(.suberror("protection_policy_required"), policy), expect(.suberror("client_mismatch"), policy),
    expect(.error("interaction_required"), policy), expect(.error("consent_required"), policy),
    expect(.error("login_required"), policy), expect(.error("access_denied"), canceled),
    expect(.error("invalid_client"), credential), expect(.error("unauthorized_client"), credential),
    expect(.error("temporarily_unavailable"), transient), expect(.error("server_error"), transient),
    expect(.error("slow_down"), throttled), expect(.error("invalid_scope"), badScope),
    expect(.error("invalid_resource"), badScope), expect(.error("invalid_request"), badRequest),
    expect(.error("unsupported_grant_type"), badRequest), expect(.error("invalid_grant"), dead),
]

@Suite("STS error table: one test per row")
struct STSErrorMappingTableTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test("row", arguments: expectedRows)
    func row(_ expected: ExpectedRow) throws {
        let rule = try #require(STSErrorMapping.rule(for: expected.match), "the table has no row for \(expected.match)")
        #expect(rule.disposition == expected.disposition)
        #expect(rule.problem == expected.problem)
        let (status, body) = expected.response
        let failure = STSErrorMapping.classify(status: status, headers: [], body: Array(body.utf8), now: now)
        #expect(failure.disposition == expected.disposition)
        #expect(failure.problem == expected.problem)
        #expect(failure.status == expected.status)
        #expect(failure.refreshTokenIsDead == (expected.disposition == .refreshTokenDead))
        #expect(failure.field == rule.field)
        #expect(failure.failureClass == rule.failureClass)
        switch expected.match {
        case .code(let code), .grantCode(let code):
            #expect(failure.stsErrorCodes == [code.number])
            #expect(failure.mostSpecificCode == code.number)
            #expect(failure.detail.hasPrefix("\(code):"))
        case .suberror(let suberror):
            #expect(failure.suberror == suberror)
        case .error:
            break
        }
    }

    /// The rows an administrator of the user's tenant must act on; every other row's class
    /// follows its disposition (written here apart from the table).
    static let adminRows: Set<STSErrorMapping.Match> = [
        .code(.aadsts(50057)), .code(.aadsts(50034)), .code(.aadsts(53002)), .code(.aadsts(53003)), .code(.aadsts(16000)),
        .code(.aadsts(50105)), .code(.aadsts(50020)), .code(.aadsts(90072)), .suberror("message_only"),
    ]

    @Test("every row has a health class (admin_action for the administrator's rows, else by disposition) and a source")
    func classAndSourceColumns() {
        for rule in STSErrorMapping.table {
            let expected: FailureClass =
                if Self.adminRows.contains(rule.match) {
                    .adminAction
                } else {
                    switch rule.disposition {
                    case .refreshTokenDead, .interactionRequired, .userCanceled: .userAction
                    case .clientCredentialRejected, .badRequest: .configuration
                    case .transient, .throttled, .nonRetryableServer: .transient
                    }
                }
            #expect(rule.failureClass == expected, "\(rule)")
            #expect(!rule.source.description.isEmpty, "\(rule)")
            if case .recorded(let id) = rule.source, let code = rule.match.code {
                #expect(id.contains(String(code.number)) || id.hasPrefix("29-"), "\(rule) cites \(id)")
            }
        }
    }

    @Test("every table row has an expectation and no row is listed twice")
    func tableIsCovered() {
        let tableMatches = STSErrorMapping.table.map(\.match)
        #expect(Set(tableMatches).count == tableMatches.count)
        #expect(Set(tableMatches) == Set(expectedRows.map(\.match)))
        #expect(expectedRows.count == STSErrorMapping.table.count)
    }
}

@Suite("STS error classification: precedence")
struct STSErrorPrecedenceTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func classify(_ status: Int, _ body: String, headers: [(String, String)] = []) -> STSFailure {
        STSErrorMapping.classify(status: status, headers: headers, body: Array(body.utf8), now: now)
    }

    @Test("invalid_grant with an unknown code keeps the refresh token")
    func unknownCodeKeepsToken() {
        let failure = classify(400, #"{"error":"invalid_grant","error_description":"AADSTS123456: New policy.","error_codes":[123456]}"#)
        #expect(failure.disposition == .interactionRequired)
        #expect(!failure.refreshTokenIsDead)
    }

    @Test("AADSTS9002313 is a dead refresh token with invalid_grant, our malformed request with invalid_request")
    func malformedDependsOnError() {
        let description = #""error_description":"AADSTS9002313: Invalid request. Request is malformed or invalid.","error_codes":[9002313]"#
        let grant = classify(400, #"{"error":"invalid_grant","# + description + "}")
        #expect(grant.disposition == .refreshTokenDead)
        #expect(grant.problem == .interactionRequired)
        let request = classify(400, #"{"error":"invalid_request","# + description + "}")
        #expect(request.disposition == .badRequest)
        #expect(request.problem == .upstreamError)
        #expect(!request.refreshTokenIsDead)
    }

    @Test("the most specific code decides, not error_codes[0]: the umbrella code first, the reason after it")
    func mostSpecificCodeDecides() {
        // A credential family code before a policy code: the policy is what happened.
        let policy = classify(400, #"{"error":"invalid_grant","error_codes":[70002,50076]}"#)
        #expect(policy.disposition == .interactionRequired)
        #expect(policy.mostSpecificCode == 50076)
        // An unknown reason after a known umbrella: the umbrella is all that is known.
        let umbrella = classify(401, #"{"error":"invalid_client","error_codes":[7000215,123456]}"#)
        #expect(umbrella.disposition == .clientCredentialRejected)
        #expect(umbrella.mostSpecificCode == 7000215)
        #expect(umbrella.stsErrorCodes == [7000215, 123456])
    }

    @Test("an assertion code names 'assertion' only with invalid_grant; with invalid_request it is our client assertion")
    func assertionCodesNeedInvalidGrant() {
        let user = classify(400, #"{"error":"invalid_grant","error_codes":[50027]}"#)
        #expect(user.problem == .invalidRequest)
        #expect(user.field == "assertion")
        let ours = classify(400, #"{"error":"invalid_request","error_codes":[50027]}"#)
        #expect(ours.problem == .upstreamError)
        #expect(ours.field == nil)
    }

    @Test("a known code wins over the suberror")
    func codeBeatsSuberror() {
        let failure = classify(400, #"{"error":"invalid_grant","error_codes":[50076],"suberror":"bad_token"}"#)
        #expect(failure.disposition == .interactionRequired)
    }

    @Test("unknown code with suberror bad_token is dead")
    func suberrorDecidesUnknownCode() {
        let failure = classify(400, #"{"error":"invalid_grant","error_codes":[999999],"suberror":"bad_token"}"#)
        #expect(failure.disposition == .refreshTokenDead)
    }

    @Test("429 is throttled whatever the body says")
    func status429() {
        let failure = classify(429, #"{"error":"invalid_grant","error_codes":[700082]}"#, headers: [("Retry-After", "5")])
        #expect(failure.disposition == .throttled)
        #expect(failure.retryAfterSeconds == 5)
        #expect(!failure.refreshTokenIsDead)
    }

    @Test("a 5xx with a dead-token code is transient, never deletes the token")
    func serverErrorNeverDeletes() {
        let failure = classify(503, #"{"error":"invalid_grant","error_codes":[700082]}"#, headers: [("retry-after", "3")])
        #expect(failure.disposition == .transient)
        #expect(failure.retryAfterSeconds == 3)
        #expect(failure.status == 503)
    }

    @Test("a 500 saying non-retriable in words is non-retryable")
    func nonRetryableByText() {
        let failure = classify(500, #"{"error":"server_error","error_description":"AADSTS99999: A non-retriable error."}"#)
        #expect(failure.disposition == .nonRetryableServer)
    }

    @Test("a 502 HTML body is transient")
    func htmlBody() {
        let failure = classify(502, "<html><body>Bad gateway</body></html>")
        #expect(failure.disposition == .transient)
        #expect(failure.detail == "The identity provider answered HTTP 502.")
    }

    @Test("a 400 without a body is our fault: 502 upstream_error")
    func emptyBody() {
        let failure = classify(400, "")
        #expect(failure.disposition == .badRequest)
        #expect(failure.problem == .upstreamError)
    }

    @Test("invalid_client with an unknown code is still a credential error")
    func invalidClientUnknownCode() {
        let failure = classify(401, #"{"error":"invalid_client","error_codes":[7777777]}"#)
        #expect(failure.disposition == .clientCredentialRejected)
    }

    @Test("trace and correlation ids fall back to the headers")
    func headerIds() {
        let failure = classify(
            400, #"{"error":"invalid_grant"}"#, headers: [("X-MS-Request-Id", "trace-h"), ("Client-Request-Id", "corr-h")])
        #expect(failure.traceId == "trace-h")
        #expect(failure.correlationId == "corr-h")
    }

    @Test("claims in an error body are decoded, JSON text or base64")
    func claimsInBody() {
        let json = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
        let base64 = Data(json.utf8).base64EncodedString()
        let asText = classify(400, #"{"error":"interaction_required","claims":"{\"access_token\":{\"acrs\":{\"essential\":true,\"value\":\"c1\"}}}"}"#)
        #expect(asText.claims == json)
        let asBase64 = classify(400, #"{"error":"interaction_required","claims":"\#(base64)"}"#)
        #expect(asBase64.claims == json)
        #expect(asBase64.disposition == .interactionRequired)
    }

    @Test("the detail never carries the trace line or the raw body")
    func detailIsSafe() {
        let failure = classify(
            400, #"{"error":"invalid_grant","error_description":"AADSTS70000: The provided grant is invalid. Trace ID: abc Correlation ID: def"}"#)
        #expect(failure.detail == "AADSTS70000: The provided grant is invalid.")
    }
}
