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

/// What the sign-in callback answers for an `error` the browser brings back (RFC 6749 §4.1.2.1).
@Suite("Sign-in callback errors")
struct AuthorizeCallbackErrorTests {
    @Test("The protocol's error codes map to their problems; anything outside its grammar is 400 naming error, not echoed")
    func callbackErrors() {
        #expect(SignInService.authorizeProblem(error: "access_denied", description: "").code == .userCanceled)
        #expect(SignInService.authorizeProblem(error: "consent_required", description: "").code == .interactionRequired)
        let unknown = SignInService.authorizeProblem(error: "temporarily_unavailable", description: "AADSTS50000: try later")
        #expect(unknown.status == 502 && unknown.detail.contains("temporarily_unavailable"))
        // These were a 502 whose detail held them ("The authority answered '<script>'.").
        for forged in ["<script>", "a\"b", "a\\b", "x\u{1}", "é", "a b", "", String(repeating: "e", count: 65)] {
            let problem = SignInService.authorizeProblem(error: forged, description: "")
            #expect(problem.status == 400, "\(forged.debugDescription)")
            #expect(problem.extensions["field"] == .string("error"))
            #expect(forged.isEmpty || !problem.detail.contains(forged))
        }
    }

    @Test("Scopes or an authority the authority refused are 400 invalid_scope / invalid_authority, as from the token endpoint (they were 502 upstream_error)")
    func refusedScopesAndAuthority() {
        let cases: [(error: String, description: String, code: ProblemCode)] = [
            ("invalid_scope", "AADSTS70011: The provided value for the input parameter 'scope' is not valid.", .invalidScope),
            ("invalid_scope", "", .invalidScope),
            ("invalid_request", "AADSTS90002: Tenant 'nope' not found.", .invalidAuthority),
            ("invalid_request", "AADSTS28000: Provide value for the input parameter scope.", .invalidScope),
        ]
        for (error, description, code) in cases {
            let problem = SignInService.authorizeProblem(error: error, description: description)
            #expect(problem.code == code, "\(error) \(description)")
            #expect(problem.status == 400, "\(error) \(description)")
        }
        // What is not the request's fault stays a 502.
        #expect(SignInService.authorizeProblem(error: "invalid_request", description: "AADSTS50011: redirect URI mismatch").status == 502)
        #expect(SignInService.authorizeProblem(error: "unauthorized_client", description: "").status == 502)
    }
}
