import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    /// The tenant a user's tokens are issued in and the user's `oid` there: the home tenant and
    /// home `oid`, or, for a guest (Entra B2B) signed into another tenant, that tenant and the
    /// guest object id there. `client_info` always names the home tenant.
    func guestProfile(of user: TestUser, home: TestTenant, signedInto: TestTenant?) -> (tenant: TestTenant, objectID: String) {
        guard let signedInto, signedInto.id != home.id, let guest = signedInto.guest(named: user.username) else { return (home, user.objectID) }
        return (signedInto, guest.objectID)
    }

    /// `POST /_control/users/{username}/adal-refresh-token`: mints a refresh token as an ADAL-era
    /// app would hold one for this user (issued in the home tenant, no policy), for import tests.
    /// Answers `{"refresh_token": "..."}`; the token then redeems like any other.
    func mintADALRefreshToken(username: String) -> HTTPResponse {
        guard let (user, tenant) = configuration.directory.user(named: username) else {
            return Self.json(404, ["error": "not_found", "message": .string("unknown user \(username)")])
        }
        let token = opaqueToken(prefix: "AQABAAAAAAD")
        let now = clock.now()
        state.withLock { state in
            state.refreshTokens[token] = EmulatorState.RefreshTokenRecord(
                username: user.username, clientID: configuration.clientID, tenantID: tenant.id, policy: nil,
                generation: state.generation(for: user.username), issuedAt: now)
            state.chains[user.username.lowercased(), default: .init()].issued += 1
        }
        return Self.json(201, ["username": .string(user.username), "refresh_token": .string(token)])
    }
}
