import CryptoBridge
import Foundation
import HTTPClientBridge
import HTTPCommon
import Testing

@testable import STSEmulator

@Suite("Emulator on a live server")
struct LiveServerTests {
    @Test func signInRefreshAndGraphOverHTTP() async throws {
        var configuration = EmulatorConfiguration()
        configuration.clientID = EmulatorHarness.clientID
        configuration.clientSecret = EmulatorHarness.secret
        let server = try EmulatorServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        #expect(server.port > 0)
        let line = try #require(JSONValue.parse(server.listeningLine))
        #expect(line["event"] == "listening" && line["port"]?.intValue == server.port)
        #expect(line["base_url"]?.stringValue == "http://127.0.0.1:\(server.port)")
        let base = server.baseURL
        let client = HTTPClient()
        defer { client.shutdown() }

        let discovery = try await client.execute(HTTPClientRequest(url: "\(base)/organizations/v2.0/.well-known/openid-configuration"))
        #expect(discovery.status == 200)
        #expect(JSONValue.parse(discovery.body)?["issuer"]?.stringValue == "\(base)/{tenantid}/v2.0")

        let verifier = "dBjftJeZ4CVP-mJ92K9.1uh-ZHtvI8tQhfkh~WnKBMPs"
        let challenge = Base64URLText.encode(CryptoBridgeSHA.hash(verifier))
        let authorizeURL =
            "\(base)/organizations/oauth2/v2.0/authorize?"
            + FormEncoding.serialize([
                ("client_id", EmulatorHarness.clientID), ("response_type", "code"), ("redirect_uri", EmulatorHarness.redirectURI),
                ("scope", "User.Read openid profile offline_access"), ("state", "s1"), ("code_challenge", challenge),
                ("code_challenge_method", "S256"), ("login_hint", "carol@fabrikam.example"), ("client_info", "1"),
            ])
        let redirect = try await client.execute(HTTPClientRequest(url: authorizeURL))
        #expect(redirect.status == 302)
        let location = try #require(redirect.headers["Location"])
        let code = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)

        let basic = Data("\(EmulatorHarness.clientID):\(EmulatorHarness.secret)".utf8).base64EncodedString()
        let tokenResponse = try await client.execute(
            HTTPClientRequest(
                method: "POST", url: "\(base)/organizations/oauth2/v2.0/token",
                headers: ["Content-Type": "application/x-www-form-urlencoded", "Authorization": "Basic \(basic)"],
                body: Array(
                    FormEncoding.serialize([
                        ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", EmulatorHarness.redirectURI),
                        ("code_verifier", verifier), ("scope", "User.Read openid profile offline_access"),
                    ]).utf8)))
        #expect(tokenResponse.status == 200)
        let body = try #require(JSONValue.parse(tokenResponse.body))
        let accessToken = try #require(body["access_token"]?.stringValue)

        let me = try await client.execute(HTTPClientRequest(url: "\(base)/v1.0/me", headers: ["Authorization": "Bearer \(accessToken)"]))
        #expect(me.status == 200)
        #expect(JSONValue.parse(me.body)?["userPrincipalName"] == "carol@fabrikam.example")

        let keys = try await client.execute(HTTPClientRequest(url: "\(base)/organizations/discovery/v2.0/keys"))
        let claims = try TestJWT.verify(try #require(body["id_token"]?.stringValue), jwks: try #require(JSONValue.parse(keys.body)))
        #expect(claims["iss"]?.stringValue == "\(base)/\(EmulatorHarness.fabrikam)/v2.0")

        let stats = try await client.execute(HTTPClientRequest(url: "\(base)/_control/stats"))
        #expect(JSONValue.parse(stats.body)?["token_requests"] == 1)
        #expect(JSONValue.parse(stats.body)?["graph_requests"] == 1)
    }

    @Test func configurationFromArgumentsAndEnvironment() throws {
        let configuration = try EmulatorConfiguration.parse(
            arguments: ["--host", "127.0.0.1", "--port=0", "--client-id", "cid", "--issuer-base", "http://x.test/"],
            environment: ["STS_EMULATOR_CLIENT_SECRET": "env-secret", "STS_EMULATOR_ROTATION_GRACE_SECONDS": "0.5", "STS_EMULATOR_PORT": "9"])
        #expect(configuration.port == 0 && configuration.clientID == "cid" && configuration.clientSecret == "env-secret")
        #expect(configuration.issuerBase == "http://x.test" && configuration.rotationGraceSeconds == 0.5)
        #expect(throws: EmulatorConfigurationError.self) { try EmulatorConfiguration.parse(arguments: ["--nope", "1"], environment: [:]) }
    }

    @Test func usersFileShape() throws {
        let json =
            #"{"tenants":[{"id":"44444444-4444-4444-4444-444444444444","domains":["x.example"],"users":[{"username":"eve@x.example","name":"Eve Example","oid":"eeeeeeee-0000-4000-8000-000000000001"}]}],"app_roles":{"api://x":["Read.All"]}}"#
        let directory = try Directory.decode(Array(json.utf8))
        #expect(directory.tenant(named: "X.EXAMPLE")?.users.first?.surname == "Example")
        #expect(directory.appRoles["api://x"] == ["Read.All"])
    }
}

enum CryptoBridgeSHA {
    static func hash(_ text: String) -> [UInt8] { SHA256Proxy.hash(Array(text.utf8)) }
}

typealias SHA256Proxy = CryptoBridge.SHA256
