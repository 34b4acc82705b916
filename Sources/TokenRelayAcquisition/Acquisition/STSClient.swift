import CryptoBridge
import Foundation
import HTTPClientBridge
import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayUpstream

/// Why a token-endpoint call did not produce tokens.
package enum STSCallError: Error, Sendable {
    /// The STS answered with an error the mapping table classified (behaviour §4).
    case rejected(STSFailure)
    /// No usable answer: network failure, timeout, retries spent, deadline passed; the problem is ready to send.
    case unavailable(RelayError)
}

/// Calls an authority's token endpoint (`/oauth2/v2.0/token`, RFC 6749 §4.1.3, §6) with the
/// confidential client's credential, under the one retry policy (behaviour §5): 429/503 honour
/// `Retry-After`, a 5xx without it or a network error is retried once, non-retryable errors never.
package struct STSClient: Sendable {
    package let http: RetryingHTTPClient
    package let clientId: String
    package let credential: ClientCredential
    package let maxAttempts: Int
    package let maxRetryAfterSeconds: Int
    package let metrics: Metrics
    /// Retry-After answers of this replica's STS calls (behaviour §5 throttle memory); an account's
    /// entries go with the account's other memories (``ReplicaMemory/forget(account:)``).
    package let throttle = ThrottleMemory()
    /// Told of every accepted and every rejected client credential (behaviour §12 Health).
    package var credentialHealth: CredentialHealth? = nil

    package init(
        http: RetryingHTTPClient, clientId: String, credential: ClientCredential, maxAttempts: Int, maxRetryAfterSeconds: Int, metrics: Metrics,
        credentialHealth: CredentialHealth? = nil
    ) {
        self.http = http
        self.clientId = clientId
        self.credential = credential
        self.maxAttempts = maxAttempts
        self.maxRetryAfterSeconds = maxRetryAfterSeconds
        self.metrics = metrics
        self.credentialHealth = credentialHealth
    }

    /// Redeems `grant` (e.g. `grant_type=refresh_token`, `refresh_token=...`) at `authority`.
    /// - Parameters:
    ///   - scopes: the one resource's scopes; OIDC scopes are added by `ScopeSet.wireValue`.
    ///   - claims: a claims request (JSON text) sent as the `claims` parameter.
    ///   - account: who the grant is for, for the throttle memory (the account id); nil: the
    ///     SHA-256 of the grant's values (an assertion, the app itself).
    /// - Throws: `STSCallError`; `rejected` 429 `throttled` without a network call while the
    ///   throttle memory says to wait for this (client, authority, scopes, account). With several
    ///   client credentials (behaviour §7.5) a rejected one (`clientCredentialRejected`) hands the
    ///   request to the next; only the last one's rejection is thrown.
    package func redeem(
        grant: [(String, String)], authority: Authority, scopes: ScopeSet?, claims: String?, context: RequestContext, account: String? = nil
    ) async throws(STSCallError) -> TokenResponse {
        let scopesKey = scopes?.cacheKey ?? ""
        let throttleKey =
            if let account {
                ThrottleMemory.stsKey(clientId: clientId, authority: authority.tokenEndpoint, scopes: scopesKey, account: account)
            } else {
                ThrottleMemory.stsKey(clientId: clientId, authority: authority.tokenEndpoint, scopes: scopesKey, grantDigest: Self.grantDigest(grant))
            }
        // Asked before the form is built: a held-back request signs no client assertion.
        do { try upstream.admit(throttleKey, target: "sts") } catch { throw .rejected(.heldBack(error)) }
        // Several credentials: a rejected one hands the same request to the next (Microsoft.Identity.Web's
        // ClientCredentials). The STS checks the client before the grant, so the grant is still unspent.
        let order = credential.attemptOrder(at: http.clock.now())
        for (attempt, index) in order.enumerated() {
            let isLast = attempt == order.count - 1
            func movingOn(_ codes: [Int]) {
                let next = String(order[attempt + 1] + 1)
                credential.rejected(index, stsErrorCodes: codes, at: http.clock.now())
                metrics.increment("tokenrelay_client_credential_fallbacks_total", ["from": String(index + 1), "to": next])
                http.logger.warn(
                    "credential.fallback", ["from": String(index + 1), "to": next, "sts.error_codes": codes.map(String.init).joined(separator: ",")])
            }
            let fields: [(String, String)]
            do {
                fields = try credential.formFields(at: index, tokenEndpoint: authority.tokenEndpoint, now: Int(http.clock.now().timeIntervalSince1970))
            } catch {
                // A credential that cannot be used here (an assertion file never readable) moves on too.
                if isLast { throw .unavailable(error) }
                movingOn([])
                continue
            }
            do throws(STSCallError) {
                let tokens = try await redeem(
                    grant: grant, authority: authority, scopes: scopes, claims: claims, context: context, throttleKey: throttleKey, credential: fields)
                credential.accepted(index, at: http.clock.now())
                return tokens
            } catch {
                guard case .rejected(let failure) = error, failure.disposition == .clientCredentialRejected, !isLast else { throw error }
                movingOn(failure.stsErrorCodes)
            }
        }
        throw .unavailable(RelayError(.upstreamError, "No client credential is configured.", status: 502))
    }

    /// One token request with one credential's client-authentication `fields`, under the retry policy.
    private func redeem(
        grant: [(String, String)], authority: Authority, scopes: ScopeSet?, claims: String?, context: RequestContext, throttleKey: ThrottleMemory.Key,
        credential fields: [(String, String)]
    ) async throws(STSCallError) -> TokenResponse {
        var form = [("client_id", clientId)] + grant + fields
        if let scopes { form.append(("scope", scopes.wireValue)) }
        if let claims { form.append(("claims", claims)) }
        form.append(("client_info", "1"))
        var headers: HTTPHeaders = ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"]
        if context.correlationIdIsGUID {
            headers.add("client-request-id", context.correlationId)
            headers.add("return-client-request-id", "true")
        }
        let grantType = grant.first { $0.0 == "grant_type" }?.1 ?? "unknown"
        let request = HTTPClientRequest(method: "POST", url: authority.tokenEndpoint, headers: headers, body: FormEncoding.bytes(form))
        let policy = RetryPolicy(target: .sts, maxAttempts: maxAttempts, maxRetryAfter: maxRetryAfterSeconds)
        func classified(_ response: HTTPClientResponse) -> STSFailure {
            STSErrorMapping.classify(status: response.status, headers: response.headers.map { ($0.name, $0.value) }, body: response.body, now: http.clock.now())
        }

        let final: RetryingHTTPClient.Final
        let started = ContinuousClock.now
        defer {
            let elapsed = ContinuousClock.now - started
            metrics.observe(
                "tokenrelay_sts_request_duration_seconds", ["grant": grantType],
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        do {
            final = try await upstream.send(request, throttleKey: throttleKey, policy: policy, target: "sts", context: context) { attempt in
                switch attempt {
                case .success(let response) where response.status == 200:
                    return .response(status: 200, retryAfterSeconds: nil, nonRetryable: false)
                case .success(let response):
                    let failure = classified(response)
                    metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": failure.problem.rawValue])
                    return .response(status: response.status, retryAfterSeconds: failure.retryAfterSeconds, nonRetryable: !failure.isRetryable)
                case .failure(let error):
                    metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": error.kind.rawValue])
                    return .init(error)
                }
            }
        } catch {
            switch error {
            case .heldBack(let held): throw .rejected(.heldBack(held))
            case .problem(let problem): throw .unavailable(problem)
            }
        }

        switch (final.last, final.decision) {
        case (.success(let response), .accept) where response.status == 200:
            credentialHealth?.accepted()
            guard let tokens = try? TokenResponse.parse(response.body) else {
                metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": "malformed"])
                throw .unavailable(RelayError(.upstreamError, "The identity provider's token response could not be read.", status: 502))
            }
            metrics.increment("tokenrelay_sts_requests_total", ["grant": grantType, "outcome": "success"])
            return tokens
        case (.success(let response), .giveUp(let retryAfter)):
            let failure = classified(response)
            credentialHealth?.observe(failure)
            let seconds = max(1, retryAfter ?? failure.retryAfterSeconds ?? 1)
            if failure.disposition == .throttled {
                metrics.increment("tokenrelay_throttled_total", ["target": "sts", "reason": "upstream"])
                throw .rejected(failure.withRetryAfter(seconds))
            }
            if failure.disposition != .transient { throw .rejected(failure) }
            // The STS's codes and ids travel with the 503 too (behaviour §4.3).
            throw .unavailable(RelayError(failure.withRetryAfter(seconds)))
        case (.success(let response), _):
            let failure = classified(response)
            credentialHealth?.observe(failure)
            // behaviour §12: `throttled` and `upstream_unavailable` always carry Retry-After, even when a
            // 400 body (AADSTS50196, slow_down) throttles without one.
            if failure.disposition == .throttled || failure.disposition == .transient {
                throw .rejected(failure.withRetryAfter(max(1, failure.retryAfterSeconds ?? 1)))
            }
            throw .rejected(failure)
        case (.failure, .giveUp(let retryAfter)):
            throw .unavailable(RelayError.unavailable("The identity provider is unavailable.", retryAfterSeconds: max(1, retryAfter ?? 1)))
        case (.failure, _):
            throw .unavailable(RelayError.unavailable("The identity provider could not be reached.", retryAfterSeconds: 1))
        }
    }
}

extension STSClient {
    /// The token endpoint's client: the retry loop behind this client's throttle memory.
    package var upstream: ThrottledHTTPClient { ThrottledHTTPClient(retrying: http, memory: throttle) }

    /// A stable, non-secret stand-in for who a grant is for (never the credential itself).
    package static func grantDigest(_ grant: [(String, String)]) -> String {
        let values = grant.filter { $0.0 != "grant_type" }.map { $0.0 + "=" + $0.1 }.joined(separator: "&")
        return SHA256.hash(Array(values.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }
}

extension STSFailure {
    /// 429 `throttled` for a request the throttle memory held back: nothing was sent (behaviour §5).
    package static func heldBack(_ held: ThrottledHTTPClient.HeldBack) -> STSFailure {
        STSFailure(
            disposition: .throttled, problem: .throttled, status: 429, retryAfterSeconds: held.remainingSeconds,
            detail: "The identity provider asked to wait (HTTP \(held.status) with Retry-After); identical requests are held back until then.")
    }

    /// The same failure telling the caller to wait `seconds`.
    package func withRetryAfter(_ seconds: Int) -> STSFailure {
        STSFailure(
            disposition: disposition, problem: problem, status: status, field: field, error: error, suberror: suberror, stsErrorCodes: stsErrorCodes,
            mostSpecificCode: mostSpecificCode, failureClass: failureClass, claims: claims,
            traceId: traceId, correlationId: correlationId, retryAfterSeconds: seconds, detail: detail)
    }
}

/// `application/x-www-form-urlencoded` (WHATWG URL §5): what the token endpoint reads.
package enum FormEncoding {
    package static func encode(_ pairs: [(String, String)]) -> String {
        String(decoding: bytes(pairs), as: UTF8.self)
    }

    /// ``encode(_:)``'s UTF-8, for a request body (without a `String` made and read back).
    package static func bytes(_ pairs: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 } * 5 / 4)
        for (index, (name, value)) in pairs.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            append(name, to: &out)
            out.append(UInt8(ascii: "="))
            append(value, to: &out)
        }
        return out
    }

    package static func escape(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        append(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` escaped into `out`, byte by byte of its UTF-8: the unreserved bytes as they are,
    /// space as `+`, every other byte `%XX` (upper-case hex). Foundation's percent encoding
    /// through `NSString` cost about 4% of a forced refresh's CPU (the refresh token is long).
    /// Runs of unreserved bytes (most of a token) are copied whole: an `append` per byte cost
    /// about 10 instructions a byte (behaviour §10).
    private static func append(_ text: String, to out: inout [UInt8]) {
        let bytes = Array(text.utf8)
        var start = 0
        for (index, byte) in bytes.enumerated() where !isUnreserved(byte) {
            out.append(contentsOf: bytes[start..<index])
            start = index + 1
            if byte == UInt8(ascii: " ") {
                out.append(UInt8(ascii: "+"))
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigit(byte >> 4))
                out.append(hexDigit(byte & 0x0F))
            }
        }
        out.append(contentsOf: bytes[start...])
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
            true
        default: false
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    /// A URL query component (RFC 3986 unreserved characters kept, everything else escaped).
    package static func queryEscape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"))!
    }

    package static func query(_ pairs: [(String, String)]) -> String {
        pairs.map { queryEscape($0.0) + "=" + queryEscape($0.1) }.joined(separator: "&")
    }
}
