import CryptoBridge
import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    static let jwtBearerAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// Checks a certificate client assertion (RFC 7523 §3; identity platform "Microsoft identity
    /// platform application authentication certificate credentials"): type jwt-bearer, PS256 with
    /// `x5t#S256` or RS256 with `x5t` naming the registered certificate, a signature by its key,
    /// `aud` = this token endpoint, `iss` = `sub` = the client id, `nbf`/`exp` around now (5
    /// minutes of skew, as the platform allows), a `jti` not seen before.
    /// - Parameters:
    ///   - tokenURL: the URL the request was sent to (what `aud` must name).
    /// - Returns: nil when the assertion is good, else the platform's error (AADSTS700027,
    ///   700024, 700021, 700023).
    func clientAssertionError(_ form: TokenForm, clientID: String, tokenURL: String) -> STSError? {
        func invalid(_ reason: String) -> STSError {
            STSError(status: 401, error: "invalid_client", code: 700027, message: "Client assertion failed signature validation. [Reason - \(reason)]")
        }
        guard form["client_assertion_type"] == Self.jwtBearerAssertionType else {
            return STSError(
                status: 400, error: "invalid_request", code: 50027,
                message: "client_assertion_type must be '\(Self.jwtBearerAssertionType)'.")
        }
        guard let assertion = form["client_assertion"] else { return .missingParameter("client_assertion") }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = Base64URLText.decode(parts[0]), let header = JSONValue.parse(headerBytes),
            let claimsBytes = Base64URLText.decode(parts[1]), let claims = JSONValue.parse(claimsBytes),
            let signature = Base64URLText.decode(parts[2])
        else { return STSError(status: 400, error: "invalid_request", code: 50027, message: "JWT token is invalid or malformed.") }
        guard let certificate = configuration.clientCertificate else { return invalid("The key was not found.") }
        let algorithm: SignatureAlgorithm
        switch header["alg"]?.stringValue {
        case "PS256":
            guard header["x5t#S256"]?.stringValue == Base64URLText.encode(SHA256.hash(certificate.der)) else {
                return invalid("The key was not found.")
            }
            algorithm = .ps256
        case "RS256":
            let sha256 = header["x5t#S256"]?.stringValue == Base64URLText.encode(SHA256.hash(certificate.der))
            guard sha256 || header["x5t"]?.stringValue == Base64URLText.encode(SHA1.hash(certificate.der)) else {
                return invalid("The key was not found.")
            }
            algorithm = .rs256
        default:
            return invalid("The signing algorithm is not supported.")
        }
        guard certificate.publicKey.verify(signature: signature, for: Array((parts[0] + "." + parts[1]).utf8), algorithm: algorithm) else {
            return invalid("The signature is invalid.")
        }
        guard claims["iss"]?.stringValue == clientID, claims["sub"]?.stringValue == clientID else {
            return STSError(
                status: 401, error: "invalid_client", code: 700021, message: "Client assertion application identifier doesn't match 'client_id' parameter.")
        }
        guard claims["aud"]?.stringValue?.lowercased() == tokenURL.lowercased() else {
            return invalid("The audience '\(claims["aud"]?.stringValue ?? "")' is not this token endpoint.")
        }
        let now = Int(clock.now().timeIntervalSince1970)
        let skew = 300
        guard let exp = claims["exp"]?.intValue, exp + skew > now, (claims["nbf"]?.intValue ?? now) - skew <= now else {
            return STSError(
                status: 401, error: "invalid_client", code: 700024,
                message: "Client assertion is not within its valid time range. Current time: \(Timestamps.sts(clock.now())).")
        }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else { return invalid("The assertion has no jti.") }
        let fresh = state.withLock { $0.clientAssertionIDs.insert(jti).inserted }
        guard fresh else {
            return STSError(
                status: 401, error: "invalid_client", code: 700023, message: "Client assertion has already been used (replayed jti '\(jti)').")
        }
        return nil
    }
}
