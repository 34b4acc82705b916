import Foundation

/// Validates an id_token from the authorization-code redemption (behaviour §3 callback;
/// OpenID Connect Core §3.1.3.7; Microsoft identity platform "ID tokens: validate").
///
/// Checks, in order: `alg` is RS256 or PS256 (never `none`), the signature (through the
/// verifier), the issuer (`{tenantid}` in the discovery issuer replaced by the token's `tid`
/// for multi-tenant authorities), `aud` contains the client id (and `azp` equals it when
/// there are several audiences), the nonce, `exp` and `nbf` with the allowed clock skew.
public struct IDTokenValidator: Sendable {
    public let clientId: String
    /// Seconds of clock difference tolerated for `exp` / `nbf` (default 300).
    public let allowedClockSkew: Int

    public init(clientId: String, allowedClockSkew: Int = 300) {
        self.clientId = clientId
        self.allowedClockSkew = allowedClockSkew
    }

    /// - Parameters:
    ///   - token: the parsed id_token.
    ///   - expectedIssuer: the discovery document's `issuer` (may hold `{tenantid}`).
    ///   - nonce: the nonce sent in the authorize request; nil skips the check.
    ///   - now: current unix time, seconds.
    ///   - verifier: signature check against the authority's JWKS.
    /// - Returns: the claims.
    /// - Throws: `IDTokenError` naming the failed check.
    public func validate(
        _ token: JWT, expectedIssuer: String, nonce: String?, now: Int, verifier: any JWTSignatureVerifier
    ) throws(IDTokenError) -> IDTokenClaims {
        guard let algorithm = token.algorithm, ["RS256", "PS256"].contains(algorithm) else {
            throw IDTokenError(check: .algorithm, detail: "alg must be RS256 or PS256")
        }
        guard verifier.verify(algorithm: algorithm, keyId: token.keyId, signingInput: token.signingInput, signature: token.signature)
        else {
            throw IDTokenError(check: .signature, detail: "signature does not verify with the authority's keys")
        }
        let claims = IDTokenClaims(token.claims)
        var issuer = expectedIssuer
        if issuer.contains("{tenantid}") {
            guard let tid = claims.tid, !tid.isEmpty else {
                throw IDTokenError(check: .issuer, detail: "token has no tid for a multi-tenant issuer")
            }
            issuer = issuer.replacingOccurrences(of: "{tenantid}", with: tid)
        }
        guard claims.issuer == issuer else {
            throw IDTokenError(check: .issuer, detail: "iss '\(claims.issuer ?? "")' is not '\(issuer)'")
        }
        guard claims.audiences.contains(clientId) else {
            throw IDTokenError(check: .audience, detail: "aud does not contain the client id")
        }
        if claims.audiences.count > 1, token.claims["azp"]?.stringValue != clientId {
            throw IDTokenError(check: .audience, detail: "azp is not the client id")
        }
        if let nonce, claims.nonce != nonce {
            throw IDTokenError(check: .nonce, detail: "nonce does not match the sign-in")
        }
        guard let exp = claims.expiresAt else { throw IDTokenError(check: .expired, detail: "exp is missing") }
        guard now < exp + allowedClockSkew else { throw IDTokenError(check: .expired, detail: "token expired") }
        if let nbf = claims.notBefore, now + allowedClockSkew < nbf {
            throw IDTokenError(check: .notYetValid, detail: "token not valid yet (nbf)")
        }
        return claims
    }
}

/// An id_token that failed validation; `check` names the failed check, `detail` is safe to
/// log (no token text).
public struct IDTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Check: String, Sendable {
        case malformed, algorithm, signature, issuer, audience, nonce, expired, notYetValid = "not_yet_valid"
    }
    public let check: Check
    public let detail: String
    public init(check: Check, detail: String) {
        self.check = check
        self.detail = detail
    }
    public var description: String { "id_token \(check.rawValue) check failed: \(detail)" }
}
