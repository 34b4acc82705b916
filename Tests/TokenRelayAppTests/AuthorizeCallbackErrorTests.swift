import IdentityCore
import Testing

@testable import TokenRelayApp

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
}
