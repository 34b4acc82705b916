import CryptoBridge
import Foundation
import HTTPCommon
import Testing
import TokenRelayTesting

@testable import STSEmulator

/// The emulator's certificate client authentication (RFC 7523 §3): each check of the assertion
/// has its own AADSTS answer.
@Suite("Emulator: certificate client assertions")
struct ClientAssertionTests {
    static let files = Result { try TestCertificate() }
    static let tokenURL = EmulatorHarness.base + "/" + EmulatorHarness.contoso + "/oauth2/v2.0/token"
    static let now = 1_800_000_000

    struct Material {
        let key: RSAPrivateKey
        let certificate: X509Certificate
    }

    static func material() throws -> Material {
        let files = try Self.files.get()
        let pem = try String(contentsOfFile: files.combinedPath, encoding: .utf8)
        return Material(key: try RSAPrivateKey(pem: pem), certificate: try X509Certificate(pem: pem))
    }

    static func assertion(
        _ material: Material, alg: String = "PS256", thumbprint: String? = nil, aud: String = tokenURL, iss: String = EmulatorHarness.clientID,
        exp: Int = now + 600, jti: String = UUID().uuidString
    ) throws -> String {
        var header: [String: Any] = ["alg": alg, "typ": "JWT"]
        if alg == "PS256" {
            header["x5t#S256"] = thumbprint ?? material.certificate.sha256Thumbprint
        } else {
            header["x5t"] = thumbprint ?? material.certificate.sha1Thumbprint
        }
        let claims: [String: Any] = ["aud": aud, "iss": iss, "sub": iss, "jti": jti, "nbf": now, "iat": now, "exp": exp]
        let input =
            Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: header))) + "."
            + Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        let signature = try material.key.sign(Array(input.utf8), algorithm: alg == "PS256" ? .ps256 : .rs256)
        return input + "." + Base64URL.encode(signature)
    }

    static func request(_ harness: EmulatorHarness, _ assertion: String) async -> (status: Int, code: Int?) {
        let response = await harness.postForm(
            "/\(EmulatorHarness.contoso)/oauth2/v2.0/token",
            [
                ("client_id", EmulatorHarness.clientID), ("grant_type", "client_credentials"), ("scope", "https://graph.microsoft.com/.default"),
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", assertion),
            ])
        return (response.status, JSONValue.parse(response.body)?["error_codes"]?.arrayValue?.first?.intValue)
    }

    @Test("A good PS256 or RS256 assertion authenticates; a replayed jti does not")
    func accepted() async throws {
        let material = try Self.material()
        let harness = try EmulatorHarness(clientCertificate: material.certificate)
        let good = try Self.assertion(material)
        #expect(await Self.request(harness, good).status == 200)
        #expect(await Self.request(harness, try Self.assertion(material, alg: "RS256")).status == 200)
        let replayed = await Self.request(harness, good)
        #expect(replayed.status == 401 && replayed.code == 700023)
    }

    @Test("Wrong thumbprint, audience, issuer, lifetime or key are refused with the platform's codes")
    func refused() async throws {
        let material = try Self.material()
        let harness = try EmulatorHarness(clientCertificate: material.certificate)
        let other = try RSAPrivateKey.generate()
        let cases: [(String, String, Int)] = [
            ("thumbprint", try Self.assertion(material, thumbprint: Base64URL.encode(SHA256.hash([1, 2, 3]))), 700027),
            ("audience", try Self.assertion(material, aud: "https://login.microsoftonline.com/other/oauth2/v2.0/token"), 700027),
            ("issuer", try Self.assertion(material, iss: "someone-else"), 700021),
            ("expired", try Self.assertion(material, exp: Self.now - 400), 700024),
            ("signature", try Self.assertion(Material(key: other, certificate: material.certificate)), 700027),
        ]
        for (name, assertion, code) in cases {
            let answer = await Self.request(harness, assertion)
            #expect(answer.status == 401, "\(name)")
            #expect(answer.code == code, "\(name)")
        }
        let unregistered = try EmulatorHarness()
        #expect(await Self.request(unregistered, try Self.assertion(material)).code == 700027)
    }
}
