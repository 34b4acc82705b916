import CryptoBridge
import Foundation
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// Signed `GET /v1/sign-ins/start` URLs (behaviour §3, §12 Problems: `sign_in_url`).
///
/// The query holds the sign-in parameters, `expires` (unix seconds, at most 10 minutes ahead),
/// a random `nonce` (so two links minted in the same second differ) and `sig`: base64url
/// HMAC-SHA256 over the canonical query (every other parameter, sorted by name, form-encoded,
/// joined by `&`). The HMAC key is derived from each key of the encryption key ring as
/// HMAC-SHA256(key, "sign-in-start"), so no new secret setting exists; links are signed with
/// the first key and accepted under any key of the ring (a rotation does not break links in
/// flight). Single use is enforced by the caller through the database (`TokenStore`).
///
/// A link carries the `sign_in_id` its sign-in will have (behaviour §3.9: the problem names it,
/// so the caller can follow the sign-in before anyone opens the link) and, for an account whose
/// user is known, its `home_account_id` (§3.8: the callback refuses any other user). The id is
/// made here, without a database write, and proves itself: `si_` and base64url of 12 random
/// bytes, the link's `expires` (4 bytes, big-endian), 8 bytes of HMAC over both (the id is
/// ours) and 8 bytes of HMAC over both and the API key id the problem was answered to (that key
/// may read the sign-in, §3.9), each under the link key.
package struct SignInStartLinks: Sendable {
    /// A link is valid this long (seconds), the lifetime of a sign-in (behaviour §3).
    package static let lifetimeSeconds = 600
    /// The parameters a link may carry besides `sig`.
    package static let parameters: Set<String> = Set(queryParameters).subtracting(["sig"])
    /// Every parameter of a link's query, `sig` included: what `GET /v1/sign-ins/start` takes.
    package static let queryParameters = [
        "scopes", "authority", "login_hint", "prompt", "claims", "redirect_after", "home_account_id", "sign_in_id", "expires", "nonce", "sig",
    ]

    /// The key ring in use now (SIGHUP replaces it, behaviour §11): a key dropped from it stops
    /// signing and verifying links at once.
    private let ring: @Sendable () -> KeyRing
    private let baseURL: @Sendable () -> String
    private let now: @Sendable () -> Int

    /// - Parameters:
    ///   - ring: the encryption key ring in use; each key yields one link key.
    ///   - baseURL: `TOKENRELAY_PUBLIC_BASE_URL` or the bound address, without a trailing slash.
    ///   - now: unix seconds.
    package init(ring: @escaping @Sendable () -> KeyRing, baseURL: @escaping @Sendable () -> String, now: @escaping @Sendable () -> Int) {
        self.ring = ring
        self.baseURL = baseURL
        self.now = now
    }

    /// Links under a fixed ring.
    package init(ring: KeyRing, baseURL: @escaping @Sendable () -> String, now: @escaping @Sendable () -> Int) {
        self.init(ring: { ring }, baseURL: baseURL, now: now)
    }

    /// The derived HMAC keys of the current ring (``RingSigner``, purpose `sign-in-start`); the first signs.
    private var keys: [[UInt8]] { RingSigner(ring: ring, purpose: "sign-in-start").keys }

    /// The path of the links, as the service receives it.
    package static let path = "/v1/sign-ins/start"

    /// A fresh signed URL for `hint`, valid for `lifetimeSeconds`, the `sign_in_id` of the
    /// sign-in it starts, and the bytes of its request target as sent (the path and the
    /// percent-encoded query), for the caller to hand out only a link within the request-target
    /// limit (behaviour §7.4). The encoded target is counted, not the decoded one the service
    /// checks: it is never the smaller, and it is what a proxy in front and libmicrohttpd's
    /// connection memory hold (`"`, `{` and `,` of claims take three bytes each there).
    /// - Parameter reader: the API key id the link is handed to (it may read the sign-in); nil
    ///   on an open route (only `accounts:read` keys may).
    package func mint(_ hint: SignInHint, reader: String?) -> (url: String, signInId: String, targetBytes: Int) {
        let expires = now() + Self.lifetimeSeconds
        let signInId = mintSignInId(expires: expires, reader: reader)
        var query: [(String, String)] = [("scopes", hint.scopes.joined(separator: " ")), ("sign_in_id", signInId)]
        if let value = hint.homeAccountId { query.append(("home_account_id", value)) }
        if let value = hint.loginHint { query.append(("login_hint", value)) }
        if let value = hint.claims { query.append(("claims", value)) }
        if let value = hint.authority { query.append(("authority", value)) }
        if let value = hint.prompt { query.append(("prompt", value)) }
        if let value = hint.redirectAfter { query.append(("redirect_after", value)) }
        query.append(("expires", String(expires)))
        query.append(("nonce", RandomToken.make(bytes: 12)))
        let canonical = Self.canonical(query)
        let signature = Base64URL.encode(HMACSHA256.authenticationCode(for: Array(canonical.utf8), key: keys[0]))
        let target = Self.path + "?" + canonical + "&sig=" + signature
        return (baseURL() + target, signInId, target.utf8.count)
    }

    /// What a link's `sign_in_id` says of itself (see the type's comment).
    package struct LinkSignInId: Sendable, Equatable {
        /// The link's `expires` (unix seconds): the sign-in is `expired` after it unless the link started it.
        package let expires: Int
        /// Whether `reader` (the key id it was checked for) is the key the link was handed to.
        package let isReader: Bool
    }

    /// Reads a `sign_in_id` minted by ``mint(_:reader:)`` under any key of the ring.
    /// - Returns: nil for any other id (a `POST /v1/sign-ins` id, a forged or unknown one).
    package func linkSignInId(_ id: String, reader: String?) -> LinkSignInId? {
        guard id.hasPrefix("si_"), let bytes = Base64URL.decodeCanonical(String(id.dropFirst(3))), bytes.count == 32 else { return nil }
        let body = Array(bytes[0..<16])
        for key in keys {
            guard ConstantTime.equals(Self.idTag(body, key: key, reader: nil), Array(bytes[16..<24])) else { continue }
            let expires = body[12..<16].reduce(0) { $0 << 8 | Int($1) }
            // No key (an open route) reads nothing by the id alone, whatever key-less link it names.
            let isReader = reader.map { ConstantTime.equals(Self.idTag(body, key: key, reader: $0), Array(bytes[24..<32])) } ?? false
            return LinkSignInId(expires: expires, isReader: isReader)
        }
        return nil
    }

    private func mintSignInId(expires: Int, reader: String?) -> String {
        var body = SecureRandom.bytes(12)
        body += [
            UInt8(truncatingIfNeeded: expires >> 24), UInt8(truncatingIfNeeded: expires >> 16), UInt8(truncatingIfNeeded: expires >> 8),
            UInt8(truncatingIfNeeded: expires),
        ]
        let key = keys[0]
        return "si_" + Base64URL.encode(body + Self.idTag(body, key: key, reader: nil) + Self.idTag(body, key: key, reader: reader ?? ""))
    }

    /// 8 bytes of HMAC-SHA256 over `body` (the id's own tag), or over `body` and the reader's key id.
    private static func idTag(_ body: [UInt8], key: [UInt8], reader: String?) -> [UInt8] {
        let message = reader.map { Array("reader:".utf8) + body + Array($0.utf8) } ?? Array("id:".utf8) + body
        return Array(HMACSHA256.authenticationCode(for: message, key: key).prefix(8))
    }

    /// Why a link is refused: the field to name and whether it is 400 (malformed) or 403 (forged,
    /// expired).
    package struct Rejection: Error, Equatable {
        package let status: Int
        package let field: String
        package let detail: String

        package init(status: Int, field: String, detail: String) {
            self.status = status
            self.field = field
            self.detail = detail
        }
    }

    /// Checks the signature and the expiry of a link's query.
    /// - Parameter query: the query items as received (repeated names are refused).
    /// - Returns: the signed parameters by name, and the signature bytes (recorded for single use).
    /// - Throws: `Rejection`: 400 for a missing or repeated parameter, an unknown name, a bad
    ///   `expires`; 403 `sig` when the signature does not match, 403 `expires` when expired or
    ///   further ahead than 10 minutes.
    package func verify(_ query: [(name: String, value: String)]) throws(Rejection) -> (parameters: [String: String], signature: [UInt8]) {
        var parameters: [String: String] = [:]
        var signatureText: String?
        for item in query {
            if item.name == "sig" {
                guard signatureText == nil else { throw Rejection(status: 400, field: "sig", detail: "'sig' appears twice.") }
                signatureText = item.value
                continue
            }
            guard Self.parameters.contains(item.name) else {
                throw Rejection(status: 400, field: item.name, detail: "'\(item.name)' is not a sign-in link parameter.")
            }
            guard parameters[item.name] == nil else { throw Rejection(status: 400, field: item.name, detail: "'\(item.name)' appears twice.") }
            parameters[item.name] = item.value
        }
        guard let signatureText, let signature = Base64URL.decodeCanonical(signatureText), signature.count == SHA256.byteCount else {
            throw Rejection(status: 400, field: "sig", detail: "The link carries no valid 'sig'.")
        }
        guard let expiresText = parameters["expires"], let expires = Int(expiresText) else {
            throw Rejection(status: 400, field: "expires", detail: "The link carries no valid 'expires'.")
        }
        let canonical = Array(Self.canonical(parameters.map { ($0.key, $0.value) }).utf8)
        guard keys.contains(where: { ConstantTime.equals(HMACSHA256.authenticationCode(for: canonical, key: $0), signature) }) else {
            throw Rejection(status: 403, field: "sig", detail: "The link's signature does not match its parameters.")
        }
        let current = now()
        guard expires >= current else { throw Rejection(status: 403, field: "expires", detail: "The link has expired; ask for a new one.") }
        guard expires <= current + Self.lifetimeSeconds + 5 else {
            throw Rejection(status: 403, field: "expires", detail: "'expires' may be at most 10 minutes ahead.")
        }
        return (parameters, signature)
    }

    /// Every parameter sorted by name (then value), form-encoded, joined by `&`.
    package static func canonical(_ items: [(String, String)]) -> String {
        FormEncoding.query(items.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 })
    }
}
