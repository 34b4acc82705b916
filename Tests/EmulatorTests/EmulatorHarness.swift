import CryptoBridge
import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

/// Drives an emulator in-process: requests go straight to `respond(to:)`.
struct EmulatorHarness {
    static let contoso = "11111111-1111-1111-1111-111111111111"
    static let fabrikam = "22222222-2222-2222-2222-222222222222"
    static let b2cTenant = "33333333-3333-3333-3333-333333333333"
    static let clientID = "aaaaaaaa-1111-4000-8000-0000000c11e7"
    static let secret = "right-secret"
    static let base = "http://emulator.test"
    static let redirectURI = "http://localhost:8080/v1/sign-ins/callback"

    /// One key for every in-process emulator: RSA-2048 generation is the slow part of a test.
    static let sharedKey = Result { try SigningKey() }

    let emulator: IdentityPlatformEmulator
    let clock: ManualClock

    init(rotationGrace: Double = 2, clientCertificate: X509Certificate? = nil, scale: ScaleUsers? = nil) throws {
        var configuration = EmulatorConfiguration()
        configuration.directory.scale = scale
        configuration.clientCertificate = clientCertificate
        configuration.clientID = Self.clientID
        configuration.clientSecret = Self.secret
        configuration.issuerBase = Self.base
        configuration.rotationGraceSeconds = rotationGrace
        clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        emulator = IdentityPlatformEmulator(configuration: configuration, clock: clock, signingKey: try Self.sharedKey.get())
    }

    func get(_ path: String, query: [(String, String)] = [], headers: HTTPHeaders = HTTPHeaders()) async -> HTTPResponse {
        await emulator.respond(to: HTTPRequest(method: "GET", path: path, query: query.map { (name: $0.0, value: $0.1) }, headers: headers))
    }

    func postForm(_ path: String, _ fields: [(String, String)], headers: HTTPHeaders = HTTPHeaders()) async -> HTTPResponse {
        var h = headers
        h.set("Content-Type", "application/x-www-form-urlencoded")
        return await emulator.respond(
            to: HTTPRequest(method: "POST", path: path, headers: h, body: Array(FormEncoding.serialize(fields).utf8)))
    }

    func control(_ path: String, _ body: JSONValue, method: String = "POST") async -> HTTPResponse {
        await emulator.respond(to: HTTPRequest(method: method, path: "/_control/" + path, body: body.bytes))
    }

    func token(tenant: String = contoso, _ fields: [(String, String)], secret: String = secret, headers: HTTPHeaders = HTTPHeaders()) async
        -> HTTPResponse
    {
        await postForm("/\(tenant)/oauth2/v2.0/token", [("client_id", Self.clientID), ("client_secret", secret)] + fields, headers: headers)
    }

    /// Authorize with PKCE; returns the redirect's query and the verifier.
    func authorize(
        tenant: String = contoso, loginHint: String? = "alice@contoso.example",
        scope: String = "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.Read openid profile offline_access",
        nonce: String = "n-0S6_WzA2Mj", state: String = "st&=1", policy: String? = nil
    ) async throws -> (query: [String: String], verifier: String) {
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let challenge = Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
        var query = [
            ("client_id", Self.clientID), ("response_type", "code"), ("redirect_uri", Self.redirectURI), ("scope", scope),
            ("state", state), ("nonce", nonce), ("code_challenge", challenge), ("code_challenge_method", "S256"), ("client_info", "1"),
        ]
        if let loginHint { query.append(("login_hint", loginHint)) }
        let path = policy.map { "/\(tenant)/\($0)/oauth2/v2.0/authorize" } ?? "/\(tenant)/oauth2/v2.0/authorize"
        let response = await get(path, query: query)
        try #require(response.status == 302)
        let location = try #require(response.headers["Location"])
        let components = try #require(URLComponents(string: location))
        #expect(location.hasPrefix(Self.redirectURI + "?"))
        let items = (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }
        return (Dictionary(items, uniquingKeysWith: { a, _ in a }), verifier)
    }

    /// A full sign-in; returns the token response body.
    func signIn(
        _ username: String = "alice@contoso.example", tenant: String = contoso,
        scope: String = "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.Read openid profile offline_access"
    ) async throws -> JSONValue {
        let (query, verifier) = try await authorize(tenant: tenant, loginHint: username, scope: scope)
        let code = try #require(query["code"])
        let response = await token(
            tenant: tenant,
            [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI), ("code_verifier", verifier), ("scope", scope)])
        try #require(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return try #require(JSONValue.parse(response.body))
    }

    func refresh(_ refreshToken: String, scope: String = "https://graph.microsoft.com/User.Read openid profile offline_access", tenant: String = contoso)
        async -> HTTPResponse
    {
        await token(tenant: tenant, [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("scope", scope), ("client_info", "1")])
    }
}

/// JWT reading for tests, independent of the emulator's own code.
enum TestJWT {
    static func parts(_ token: String) throws -> (header: JSONValue, claims: JSONValue, signingInput: [UInt8], signature: [UInt8]) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        let header = try #require(Base64URL.decode(parts[0]).flatMap { JSONValue.parse($0) })
        let claims = try #require(Base64URL.decode(parts[1]).flatMap { JSONValue.parse($0) })
        let signature = try #require(Base64URL.decode(parts[2]))
        return (header, claims, Array((parts[0] + "." + parts[1]).utf8), signature)
    }

    /// Verifies against the JWKS the emulator publishes; returns the claims.
    static func verify(_ token: String, jwks: JSONValue) throws -> JSONValue {
        let (header, claims, input, signature) = try parts(token)
        let keys = try #require(jwks["keys"]?.arrayValue)
        let jwk = try #require(keys.first { $0["kid"] == header["kid"] })
        let key = try RSAPublicKey(
            modulus: try #require(Base64URL.decode(jwk["n"]?.stringValue ?? "")),
            exponent: try #require(Base64URL.decode(jwk["e"]?.stringValue ?? "")))
        try #require(key.verify(signature: signature, for: input, algorithm: .rs256), "signature does not verify")
        return claims
    }
}

/// Checks an Entra ID error body against the real shape of `cases/` (field set, order, and the
/// `AADSTSnnnn: ... Trace ID: ... Correlation ID: ... Timestamp: ...` description).
func expectEntraErrorShape(
    _ response: HTTPResponse, status: Int, error: String, code: Int, suberror: String? = nil, errorURI: Bool = true,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    #expect(response.status == status, sourceLocation: sourceLocation)
    #expect(response.headers["Content-Type"] == "application/json; charset=utf-8", sourceLocation: sourceLocation)
    #expect(response.headers["Cache-Control"] == "no-store, no-cache", sourceLocation: sourceLocation)
    let body = try #require(JSONValue.parse(response.body), sourceLocation: sourceLocation)
    guard case .object(let members) = body else {
        Issue.record("not an object", sourceLocation: sourceLocation)
        return
    }
    var keys = ["error", "error_description", "error_codes", "timestamp", "trace_id", "correlation_id"]
    if errorURI { keys.append("error_uri") }
    if suberror != nil { keys.append("suberror") }
    #expect(members.map(\.0) == keys, sourceLocation: sourceLocation)
    #expect(body["error"]?.stringValue == error, sourceLocation: sourceLocation)
    #expect(body["error_codes"] == [.int(code)], sourceLocation: sourceLocation)
    #expect(body["suberror"]?.stringValue == suberror, sourceLocation: sourceLocation)
    let trace = body["trace_id"]?.stringValue ?? "?"
    let correlation = body["correlation_id"]?.stringValue ?? "?"
    let timestamp = body["timestamp"]?.stringValue ?? "?"
    #expect(response.headers["x-ms-request-id"] == trace, sourceLocation: sourceLocation)
    #expect(timestamp.wholeMatch(of: /\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/) != nil, sourceLocation: sourceLocation)
    let description = body["error_description"]?.stringValue ?? ""
    #expect(description.hasPrefix("AADSTS\(code): "), sourceLocation: sourceLocation)
    let tail = /(?:\r\n| )Trace ID: (\S+)(?:\r\n| )Correlation ID: (\S+)(?:\r\n| )Timestamp: (.+)$/
    let match = try #require(description.firstMatch(of: tail), sourceLocation: sourceLocation)
    #expect(String(match.1) == trace && String(match.2) == correlation && String(match.3) == timestamp, sourceLocation: sourceLocation)
    if errorURI {
        #expect(body["error_uri"]?.stringValue == "https://login.microsoftonline.com/error?code=\(code)", sourceLocation: sourceLocation)
    }
}
