import Foundation
import HTTPClientBridge
import HTTPCommon
import IdentityCore

/// Why a token-endpoint call did not produce tokens.
enum STSCallError: Error, Sendable {
    /// The STS answered with an error the mapping table classified (SPEC §4).
    case rejected(STSFailure)
    /// No usable answer: network failure, timeout, retries spent, deadline passed; the problem is ready to send.
    case unavailable(Problem)
}

/// Calls an authority's token endpoint (`/oauth2/v2.0/token`, RFC 6749 §4.1.3, §6) with the
/// confidential client's credential, under the one retry policy (SPEC §5): 429/503 honour
/// `Retry-After`, a 5xx without it or a network error is retried once, non-retryable errors never.
struct STSClient: Sendable {
    let http: HTTPClient
    let clientId: String
    let clientSecret: String?
    let maxAttempts: Int
    let maxRetryAfterSeconds: Int
    let metrics: Metrics
    let logger: Logger

    /// Redeems `grant` (e.g. `grant_type=refresh_token`, `refresh_token=...`) at `authority`.
    /// - Parameters:
    ///   - scopes: the one resource's scopes; OIDC scopes are added by `ScopeSet.wireValue`.
    ///   - claims: a claims request (JSON text) sent as the `claims` parameter.
    /// - Throws: `STSCallError`.
    func redeem(
        grant: [(String, String)], authority: Authority, scopes: ScopeSet?, claims: String?, context: RequestContext
    ) async throws(STSCallError) -> TokenResponse {
        var form = [("client_id", clientId)] + grant
        if let clientSecret { form.append(("client_secret", clientSecret)) }
        if let scopes { form.append(("scope", scopes.wireValue)) }
        if let claims { form.append(("claims", claims)) }
        form.append(("client_info", "1"))
        var headers: HTTPHeaders = ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"]
        if context.correlationIdIsGUID {
            headers.add("client-request-id", context.correlationId)
            headers.add("return-client-request-id", "true")
        }
        let grantType = grant.first { $0.0 == "grant_type" }?.1 ?? "unknown"
        let request = HTTPClientRequest(method: "POST", url: authority.tokenEndpoint, headers: headers, body: Array(FormEncoding.encode(form).utf8))
        let policy = RetryPolicy(target: .sts, maxAttempts: maxAttempts, maxRetryAfter: maxRetryAfterSeconds)

        var attempt = 1
        while true {
            let remaining = context.remainingSeconds
            guard remaining > 0.05 else {
                throw .unavailable(
                    Problem(
                        .upstreamUnavailable, "The request deadline passed before the identity provider answered.", status: 504,
                        extensions: ["retry_after_s": .number(1)], headers: ["Retry-After": "1"]))
            }
            var attemptRequest = request
            attemptRequest.timeout = min(remaining, 30)
            let outcome: RetryPolicy.Outcome
            var failure: STSFailure?
            do {
                let response = try await http.execute(attemptRequest)
                if response.status == 200 {
                    do {
                        let tokens = try TokenResponse.parse(response.body)
                        metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": "success"])
                        return tokens
                    } catch {
                        metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": "malformed"])
                        throw STSCallError.unavailable(Problem(.upstreamError, "The identity provider's token response could not be read.", status: 502))
                    }
                }
                let classified = STSErrorMapping.classify(
                    status: response.status, headers: response.headers.map { ($0.name, $0.value) }, body: response.body, now: Date())
                failure = classified
                metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": classified.problem.rawValue])
                let retryable = classified.disposition == .transient || classified.disposition == .throttled
                outcome = .response(status: response.status, retryAfterSeconds: classified.retryAfterSeconds, nonRetryable: !retryable)
            } catch let error as HTTPClientError {
                metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": error.kind.rawValue])
                outcome = error.kind == .timedOut ? .timedOut : .networkError(requestSent: error.requestSent)
            } catch let error as STSCallError {
                throw error
            } catch {
                outcome = .networkError(requestSent: true)
            }

            switch policy.decide(attempt: attempt, outcome: outcome, deadlineRemaining: context.remainingSeconds, random: Double.random(in: 0..<1)) {
            case .retry(let delay):
                metrics.increment("tokenrelay_retries_total", ["target": "sts"])
                logger.info(
                    "sts.retry", ["sts.attempt": String(attempt), "retry.delay_s": String(format: "%.2f", delay), "correlation.id": context.correlationId])
                try? await Task.sleep(for: .seconds(delay))
                attempt += 1
            case .accept:
                if let failure { throw .rejected(failure) }
                throw .unavailable(Problem.unavailable("The identity provider could not be reached.", retryAfterSeconds: 1))
            case .giveUp(let retryAfter):
                let seconds = max(1, retryAfter ?? failure?.retryAfterSeconds ?? 1)
                if let failure, failure.disposition == .throttled {
                    metrics.increment("tokenrelay_throttled_total", ["target": "sts"])
                    throw .rejected(failure.withRetryAfter(seconds))
                }
                if let failure, failure.disposition != .transient { throw .rejected(failure) }
                throw .unavailable(Problem.unavailable("The identity provider is unavailable.", retryAfterSeconds: seconds))
            }
        }
    }
}

extension STSFailure {
    /// The same failure telling the caller to wait `seconds`.
    func withRetryAfter(_ seconds: Int) -> STSFailure {
        STSFailure(
            disposition: disposition, problem: problem, status: status, error: error, suberror: suberror, stsErrorCodes: stsErrorCodes, claims: claims,
            traceId: traceId, correlationId: correlationId, retryAfterSeconds: seconds, detail: detail)
    }
}

/// `application/x-www-form-urlencoded` (WHATWG URL §5): what the token endpoint reads.
enum FormEncoding {
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._*")

    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved)!.replacingOccurrences(of: "%20", with: "+")
    }

    /// A URL query component (RFC 3986 unreserved characters kept, everything else escaped).
    static func queryEscape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"))!
    }

    static func query(_ pairs: [(String, String)]) -> String {
        pairs.map { queryEscape($0.0) + "=" + queryEscape($0.1) }.joined(separator: "&")
    }
}
