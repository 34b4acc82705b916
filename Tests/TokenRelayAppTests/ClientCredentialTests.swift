import CryptoBridge
import Foundation
import HTTPCommon
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

@Suite("Client credential: secret, certificate assertion, federated assertion file")
struct ClientCredentialTests {
    static let clientId = "6731de76-14a6-49ae-97bc-6eba6914391e"
    static let endpoint = "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    /// The time assertions are made at (unix seconds).
    static let now = 1_800_000_000
    static let valid: [String: String] = [
        "TOKENRELAY_CLIENT_ID": clientId,
        "TOKENRELAY_AUTHORITY": "https://login.microsoftonline.com/contoso.onmicrosoft.com",
        "TOKENRELAY_DATABASE_URL": "postgresql://localhost/tokenrelay",
        "TOKENRELAY_ENCRYPTION_KEYS": "k1:" + Data(repeating: 3, count: 32).base64EncodedString(),
    ]

    static func credential(_ extra: [String: String]) throws -> ClientCredential {
        try ClientCredential(configuration: ConfigurationLoader(environment: valid.merging(extra) { $1 }).load())
    }

    static func field(_ fields: [(String, String)], _ name: String) -> String? { fields.first { $0.0 == name }?.1 }

    @Test("A secret is sent as client_secret")
    func secret() throws {
        let fields = try Self.credential(["TOKENRELAY_CLIENT_SECRET": "s3cret"]).formFields(tokenEndpoint: Self.endpoint, now: Self.now)
        #expect(fields.map(\.0) == ["client_secret"])
        #expect(Self.field(fields, "client_secret") == "s3cret")
        #expect(try Self.credential([:]).formFields(tokenEndpoint: Self.endpoint, now: Self.now).isEmpty)
    }

    @Test(
        "A certificate signs a fresh client assertion per request (RFC 7523): header thumbprint, aud, iss, sub, jti, 10 minutes", arguments: ["PS256", "RS256"])
    func certificateAssertion(algorithm: String) async throws {
        let files = try await TestCertificate.make()
        defer { files.remove() }
        let credential = try Self.credential([
            "TOKENRELAY_CLIENT_CERTIFICATE": files.combinedPath, "TOKENRELAY_CLIENT_ASSERTION_ALGORITHM": algorithm.lowercased(),
        ])
        let certificate = try X509Certificate(pem: try String(contentsOfFile: files.certificatePath, encoding: .utf8))
        let fields = try credential.formFields(tokenEndpoint: Self.endpoint, now: 1_800_000_000)
        #expect(fields.map(\.0) == ["client_assertion_type", "client_assertion"])
        #expect(Self.field(fields, "client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        let jwt = try JWT.parse(try #require(Self.field(fields, "client_assertion")))
        #expect(jwt.algorithm == algorithm)
        if algorithm == "PS256" {
            #expect(jwt.header["x5t#S256"]?.stringValue == certificate.sha256Thumbprint)
            #expect(jwt.header["x5t#S256"]?.stringValue == (try files.sha256Thumbprint()))
        } else {
            #expect(jwt.header["x5t"]?.stringValue == certificate.sha1Thumbprint)
        }
        #expect(jwt.claims["aud"]?.stringValue == Self.endpoint)
        #expect(jwt.claims["iss"]?.stringValue == Self.clientId)
        #expect(jwt.claims["sub"]?.stringValue == Self.clientId)
        #expect(jwt.claims["nbf"]?.intValue == 1_800_000_000)
        #expect(jwt.claims["iat"]?.intValue == 1_800_000_000)
        #expect(jwt.claims["exp"]?.intValue == 1_800_000_600)
        #expect(certificate.publicKey.verify(signature: jwt.signature, for: jwt.signingInput, algorithm: algorithm == "PS256" ? .ps256 : .rs256))
        let again = try JWT.parse(Self.field(try credential.formFields(tokenEndpoint: Self.endpoint, now: Self.now), "client_assertion") ?? "")
        #expect(again.claims["jti"]?.stringValue != jwt.claims["jti"]?.stringValue)
        #expect(credential.certificateNotAfter ?? 0 > 1_800_000_000 - 10 * 365 * 86_400)
    }

    @Test("The assertion file is read for every request; an unreadable file falls back to the last good content")
    func assertionFile() async throws {
        let files = try await TestCertificate.make()
        defer { files.remove() }
        let path = files.directory + "/token"
        try "first.assertion.value".write(toFile: path, atomically: true, encoding: .utf8)
        let credential = try Self.credential(["TOKENRELAY_CLIENT_ASSERTION_FILE": path])
        #expect(Self.field(try credential.formFields(tokenEndpoint: Self.endpoint, now: Self.now), "client_assertion") == "first.assertion.value")
        try "second.assertion.value\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(Self.field(try credential.formFields(tokenEndpoint: Self.endpoint, now: Self.now), "client_assertion") == "second.assertion.value")
        try FileManager.default.removeItem(atPath: path)
        #expect(Self.field(try credential.formFields(tokenEndpoint: Self.endpoint, now: Self.now), "client_assertion") == "second.assertion.value")
        let never = ClientCredential(clientId: Self.clientId, kind: .assertionFile(path: path))
        #expect(throws: RelayError.self) { try never.formFields(tokenEndpoint: Self.endpoint, now: Self.now) }
    }

    /// A fractional `exp` (RFC 7519 §2 NumericDate) read as no `exp`: credential health said the
    /// file "holds no JWT with an exp claim" and stopped watching its expiry.
    @Test("The assertion file's exp is read as a NumericDate: an integer, or a fraction rounded down")
    func assertionFileExpiry() async throws {
        let files = try await TestCertificate.make()
        defer { files.remove() }
        let path = files.directory + "/token"
        try "first.assertion.value".write(toFile: path, atomically: true, encoding: .utf8)
        let credential = try Self.credential(["TOKENRELAY_CLIENT_ASSERTION_FILE": path])
        for (claims, expiry) in [(#"{"exp":2000}"#, 2000), (#"{"exp":2000.75}"#, 2000), (#"{"exp":"soon"}"#, nil) as (String, Int?)] {
            let payload = CryptoBridge.Base64URL.encode(Array(claims.utf8))
            try "eyJhbGciOiJSUzI1NiJ9.\(payload).c2ln".write(toFile: path, atomically: true, encoding: .utf8)
            #expect(credential.assertionExpiry(path) == expiry, "\(claims)")
        }
    }

    @Test("Start-up refuses two credentials, an unknown algorithm, a key that is not the certificate's, and an unreadable file")
    func configurationErrors() async throws {
        let files = try await TestCertificate.make()
        let other = try await TestCertificate.make()
        defer {
            files.remove()
            other.remove()
        }
        func setting(_ extra: [String: String]) -> String? {
            do {
                _ = try Self.credential(extra)
                return nil
            } catch let error as ConfigurationError {
                return error.setting
            } catch {
                return "\(error)"
            }
        }
        #expect(setting(["TOKENRELAY_CLIENT_SECRET": "s", "TOKENRELAY_CLIENT_CERTIFICATE": files.combinedPath]) == "TOKENRELAY_CLIENT_CERTIFICATE")
        #expect(
            setting(["TOKENRELAY_CLIENT_CERTIFICATE": files.combinedPath, "TOKENRELAY_CLIENT_ASSERTION_ALGORITHM": "ES256"])
                == "TOKENRELAY_CLIENT_ASSERTION_ALGORITHM")
        let mismatched = files.directory + "/mismatched.pem"
        try (String(contentsOfFile: other.keyPath, encoding: .utf8) + String(contentsOfFile: files.certificatePath, encoding: .utf8))
            .write(toFile: mismatched, atomically: true, encoding: .utf8)
        #expect(setting(["TOKENRELAY_CLIENT_CERTIFICATE": mismatched]) == "TOKENRELAY_CLIENT_CERTIFICATE")
        #expect(setting(["TOKENRELAY_CLIENT_CERTIFICATE": files.certificatePath]) == "TOKENRELAY_CLIENT_CERTIFICATE")
        #expect(setting(["TOKENRELAY_CLIENT_CERTIFICATE": "/nonexistent/cert.pem"]) == "TOKENRELAY_CLIENT_CERTIFICATE")
        #expect(setting(["TOKENRELAY_CLIENT_ASSERTION_FILE": "/nonexistent/token"]) == "TOKENRELAY_CLIENT_ASSERTION_FILE")
        // `_FILE` reads the PEM itself.
        #expect(setting(["TOKENRELAY_CLIENT_CERTIFICATE_FILE": files.combinedPath]) == nil)
    }

    /// The error a credential configuration gives at start-up: the setting and its reason.
    static func startupError(_ extra: [String: String]) -> (setting: String, reason: String)? {
        do {
            _ = try ConfigurationLoader(environment: valid.merging(extra) { $1 }).load()
            return nil
        } catch let error as ConfigurationError {
            return (error.setting, error.reason)
        } catch {
            return ("?", "\(error)")
        }
    }

    static func list(_ entries: [[String: String]]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: entries), as: UTF8.self)
    }

    @Test("TOKENRELAY_CLIENT_CREDENTIALS: an empty entry, an unreadable file, two fields, a list beside a single setting: start-up errors naming it")
    func credentialListErrors() async throws {
        let files = try await TestCertificate.make()
        defer { files.remove() }
        let cases: [([String: String], String)] = [
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["certificate": files.combinedPath], [:]])], "entry 2 is empty"),
            (
                ["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["certificate": files.combinedPath], ["certificate": "/nonexistent/new.pem"]])],
                "entry 2 (certificate): cannot read the PEM file"
            ),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["assertion_file": "/nonexistent/token"]])], "entry 1 (assertion_file): cannot read the file"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["secret_file": "/nonexistent/secret"]])], "entry 1 (secret_file): cannot read"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["secret": "a", "certificate": files.combinedPath]])], "entry 1 gives secret and certificate"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["secret": ""]])], "entry 1 (secret) must be a non-empty string"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["secret": "a", "secret_expires_at": "soon"]])], "entry 1 (secret_expires_at)"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["certficate": files.combinedPath]])], "unknown member 'certficate'"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": "[]"], "non-empty JSON array"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": "secret"], "non-empty JSON array"),
            (["TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["secret": "a"]]), "TOKENRELAY_CLIENT_SECRET": "b"], "not both"),
        ]
        for (environment, reason) in cases {
            let error = Self.startupError(environment)
            #expect(error?.setting == "TOKENRELAY_CLIENT_CREDENTIALS", "\(environment)")
            #expect(error?.reason.contains(reason) == true, "\(String(describing: error)) should say \(reason)")
            #expect(error?.reason.contains(files.combinedPath) != true)
        }
        #expect(Self.startupError(["TOKENRELAY_CLIENT_CREDENTIAL_FALLBACK_S": "0"])?.setting == "TOKENRELAY_CLIENT_CREDENTIAL_FALLBACK_S")
    }

    @Test("A credential list is tried in order; one that served after a rejection stays first for the fallback hold, then the first is tried again")
    func credentialListOrder() async throws {
        let files = try await TestCertificate.make()
        defer { files.remove() }
        let secretFile = files.directory + "/secret"
        try "from-file\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        let credential = try Self.credential([
            "TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["certificate": files.combinedPath], ["secret_file": secretFile], ["secret": "third"]]),
            "TOKENRELAY_CLIENT_CREDENTIAL_FALLBACK_S": "600",
        ])
        let start = Date(timeIntervalSince1970: TimeInterval(Self.now))
        #expect(credential.entries.map(\.label) == ["client certificate", "client secret", "client secret"])
        #expect(credential.attemptOrder(at: start) == [0, 1, 2])
        #expect(Self.field(try credential.formFields(at: 1, tokenEndpoint: Self.endpoint, now: Self.now), "client_secret") == "from-file")
        credential.rejected(0, stsErrorCodes: [700027], at: start)
        credential.accepted(1, at: start)
        #expect(credential.inUse(at: start.addingTimeInterval(599)).index == 1)
        #expect(credential.attemptOrder(at: start.addingTimeInterval(599)) == [1, 0, 2])
        #expect(Self.field(try credential.formFields(tokenEndpoint: Self.endpoint, now: Self.now + 599), "client_secret") == "from-file")
        #expect(credential.inUse(at: start.addingTimeInterval(601)).index == 0)
        credential.accepted(2, at: start)
        credential.accepted(0, at: start.addingTimeInterval(1))
        #expect(credential.inUse(at: start.addingTimeInterval(2)).index == 0)
    }
}

@Suite("Downstream identity headers and grant inputs")
struct DownstreamIdentityTests {
    @Test("Exactly one identity header")
    func identityHeaders() throws {
        #expect(try DownstreamIdentity.from(["X-Account-Id": "acc_1"]) == .account("acc_1"))
        #expect(try DownstreamIdentity.from(["x-app-only": "TRUE"]) == .app)
        #expect(try DownstreamIdentity.from(["X-On-Behalf-Of-Assertion": "Bearer a.b.c"]) == .onBehalfOf(assertion: "a.b.c"))
        #expect(try DownstreamIdentity.from(["X-On-Behalf-Of-Assertion": "a.b.c"]) == .onBehalfOf(assertion: "a.b.c"))
        let bad: [HTTPHeaders] = [
            [:], ["X-App-Only": "false"], ["X-Account-Id": ""], ["X-Account-Id": "a", "X-App-Only": "true"], ["X-On-Behalf-Of-Assertion": "Bearer "],
        ]
        for headers in bad {
            #expect(throws: RelayError.self) { try DownstreamIdentity.from(headers) }
        }
    }

    @Test("app_scopes default to {origin}/.default of base_url")
    func appScopes() throws {
        #expect(
            DownstreamAPI(baseURL: "https://graph.microsoft.com/v1.0", scopes: ["User.Read"], appScopes: nil).effectiveAppScopes == [
                "https://graph.microsoft.com/.default"
            ])
        #expect(DownstreamAPI(baseURL: "http://127.0.0.1:9090", scopes: ["x"], appScopes: nil).effectiveAppScopes == ["http://127.0.0.1:9090/.default"])
        #expect(DownstreamAPI(baseURL: "https://api.example/v2", scopes: ["x"], appScopes: ["api://app/.default"]).effectiveAppScopes == ["api://app/.default"])
        let parsed = try ConfigurationLoader.parseDownstreamAPIs(
            #"{"a": {"base_url": "https://a.example/", "scopes": ["s"], "app_scopes": ["api://a/.default"]}}"#)
        #expect(parsed["a"]?.appScopes == ["api://a/.default"])
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.parseDownstreamAPIs(#"{"a": {"base_url": "https://a.example", "scopes": ["s"], "app_scopes": "x"}}"#)
        }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.parseDownstreamAPIs(#"{"a": {"base_url": "https://a.example", "scopes": ["s"], "app_scopes": []}}"#)
        }
        // A scope a request would be refused (it was a 500 on every call to the API): refused at start-up, naming it.
        for (entry, member) in [
            (#""scopes": ["https:///User.Read"]"#, "a.scopes"), (#""scopes": ["s"], "app_scopes": ["/.default"]"#, "a.app_scopes"),
        ] {
            #expect {
                try ConfigurationLoader.parseDownstreamAPIs(#"{"a": {"base_url": "https://a.example", "# + entry + "}}")
            } throws: { error in
                (error as? ConfigurationError)?.setting == "TOKENRELAY_DOWNSTREAM_APIS" && "\(error)".contains(member)
            }
        }
    }

    @Test("An OBO assertion is read for exp and tid only; expired or malformed is 400 on 'assertion'")
    func assertionInspection() throws {
        func jwt(_ claims: String) -> String {
            "eyJhbGciOiJSUzI1NiJ9."
                + Data(claims.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_") + ".c2ln"
        }
        let (exp, tid) = try GrantTokenService.inspect(assertion: jwt(#"{"exp":2000,"tid":"t1"}"#), now: 1000)
        #expect(exp == 2000 && tid == "t1")
        // RFC 7519 §2: a NumericDate may be non-integer; it was "not a JWT with 'exp'".
        #expect(try GrantTokenService.inspect(assertion: jwt(#"{"exp":2000.5}"#), now: 1000).expiresOn == 2000)
        #expect(try GrantTokenService.inspect(assertion: jwt(#"{"exp":1001.25,"nbf":999.5,"iat":999.5}"#), now: 1000).expiresOn == 1001)
        for bad in [jwt(#"{"exp":1000}"#), jwt(#"{"exp":1000.5}"#), jwt(#"{"tid":"t"}"#), jwt(#"{"exp":"soon"}"#), "a.b", ""] {
            #expect {
                try GrantTokenService.inspect(assertion: bad, now: 1000)
            } throws: { error in
                (error as? RelayError)?.extensions["field"] == .string("assertion") && (error as? RelayError)?.status == 400
            }
        }
        #expect(GrantTokenService.hex([0x00, 0xab, 0xff]) == "00abff")
    }
}
