import CryptoBridge
import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelaySignIn

/// `GET /v1/sign-ins/start` (behaviour §3): the signed, API-key-free form of `POST /v1/sign-ins`
/// that problems hand out as `sign_in_url`. A valid link is used once and answers 302 straight
/// to the authority's authorize URL. `HEAD` (link checkers, mail and chat previews) only checks
/// it: 204 for a link that would start a sign-in, without using it up.
package enum SignInStartRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("GET", "/v1/sign-ins/start", access: .open, query: .only(SignInStartLinks.queryParameters), page: true) { request in
            guard let links = services.signIns.links else {
                throw RelayError(.notFound, "Signed sign-in links are not enabled.")
            }
            let parameters: [String: String]
            let signature: [UInt8]
            do {
                (parameters, signature) = try links.verify(request.http.query)
            } catch let error as SignInStartLinks.Rejection {
                let code: ProblemCode = error.status == 403 ? .forbidden : .invalidRequest
                throw RelayError(code, error.detail, extensions: ["field": .string(error.field)])
            }
            let start = try startRequest(parameters, services: services)
            if request.http.method == "HEAD" {
                guard try await !services.store.isSignInStartLinkUsed(signatureHash: SHA256.hash(signature)) else {
                    throw RelayError(.forbidden, "This sign-in link was used already; ask for a new one.", extensions: ["field": .string("sig")])
                }
                return HTTPResponse(status: 204, headers: ["Cache-Control": "no-store"])
            }
            // Recorded before the sign-in starts: a link raced from two browsers starts one sign-in.
            guard try await services.store.claimSignInStartLink(signatureHash: SHA256.hash(signature), expiresAt: Int(parameters["expires"]!)!) else {
                throw RelayError(.forbidden, "This sign-in link was used already; ask for a new one.", extensions: ["field": .string("sig")])
            }
            var bound = start
            if let homeAccountId = bound.expectedHomeAccountId {
                // The account is named by the refusal of another user (behaviour §3.8).
                bound.expectedAccountId = try await services.store.accounts(homeAccountId: homeAccountId, limit: 1).first?.accountId
            }
            let started = try await services.signIns.start(bound)
            return HTTPResponse(status: 302, headers: ["Location": started.authorizeURL, "Cache-Control": "no-store"])
        }
    }

    /// The signed parameters as a sign-in, checked as `POST /v1/sign-ins` checks its body.
    package static func startRequest(_ parameters: [String: String], services: AppServices) throws -> SignInService.StartRequest {
        guard let scopeText = parameters["scopes"] else {
            throw RelayError(.invalidScope, "'scopes' is required.", extensions: ["field": .string("scopes")])
        }
        let scopes: ScopeSet
        do {
            scopes = try RequestedScopes.shared.normalize(scopes: scopeText.split(separator: " ").map(String.init), resource: nil)
        } catch {
            throw RelayError(.invalidScope, error.detail, extensions: ["field": .string("scopes")])
        }
        let authority = try parameters["authority"].map { text throws(RelayError) in try services.authorities.validate(text, field: "authority") }
        if let prompt = parameters["prompt"], !SignInRoutes.prompts.contains(prompt) {
            throw RelayError.invalidRequest(field: "prompt", "'prompt' must be one of select_account, login, consent, none.")
        }
        return SignInService.StartRequest(
            scopes: scopes, authority: authority, loginHint: parameters["login_hint"], prompt: parameters["prompt"], claims: parameters["claims"],
            redirectAfter: parameters["redirect_after"], startedBy: SignInService.linkActor, expectedHomeAccountId: parameters["home_account_id"],
            signInId: parameters["sign_in_id"])
    }
}
