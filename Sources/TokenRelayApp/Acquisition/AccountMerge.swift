import Foundation
import IdentityCore
import Synchronization

/// The first silent acquisition of an imported (ADAL) account (SPEC §3 import, §12 Accounts):
/// its refresh token is redeemed under the account's refresh lock, `home_account_id` comes from
/// `client_info` (never built here), the rest of the identity from the id_token, and when
/// another account already has that `home_account_id` the import merges into it.
extension SilentTokenService {
    /// Redeems an imported account's refresh token once and records who it belongs to.
    /// - Returns: the token and the account now holding it (the survivor after a merge); nil when
    ///   another request completed the import meanwhile (the caller resolves the account again).
    /// - Throws: `Problem`: `interaction_required` (the imported refresh token is dead or absent),
    ///   `server_declined_scopes`, 502 when the response names no user, the STS's problems.
    func completeImport(_ imported: AccountRecord, request: SilentTokenRequest, context: RequestContext) async throws -> SilentTokenResult? {
        let authority: Authority
        do {
            authority = try authorities.validate(imported.authority)
        } catch {
            throw Problem(
                .interactionRequired, "The imported account's authority is no longer accepted (\(error.detail)); sign the user in.",
                extensions: ["account_state": .string(imported.state.rawValue)])
        }
        let claims = try mergedClaims(request.claims)
        let store = self.store
        let sts = self.sts
        let clientId = self.clientId
        let now = self.now
        let scopes = request.scopes
        let logger = self.logger
        // What the STS answered, kept outside the transaction: if it cannot commit after the
        // redemption, the rotated refresh token is stored on its own (as `refresh` does).
        let redeemed = Mutex<(response: TokenResponse, generation: Int64)?>(nil)
        let outcome: Result<(ImportCompletion, [String])?, Problem>
        do {
            outcome = try await importTransaction()
        } catch {
            forgetInMemory(imported.accountId)
            guard let (response, generation) = redeemed.withLock({ $0 }) else { throw error }
            try await persistRotation(response, accountId: imported.accountId, replacing: generation, after: error)
            throw error
        }

        @Sendable func importTransaction() async throws -> Result<(ImportCompletion, [String])?, Problem> {
            try await store.database.transaction { connection in
                try TokenStore.lockRefresh(in: connection, accountId: imported.accountId, clientId: clientId)
                guard try store.isPendingImport(in: connection, accountId: imported.accountId) else { return .success(nil) }
                guard let refreshToken = try store.refreshToken(in: connection, accountId: imported.accountId) else {
                    return .failure(
                        Problem(
                            .interactionRequired, "The imported refresh token is gone; the user must sign in.", extensions: ["account_state": .string("active")]
                        ))
                }
                let response: TokenResponse
                switch try sts.redeemWaiting(refreshToken: refreshToken.token, authority: authority, scopes: scopes, claims: claims, context: context) {
                case .failure(.unavailable(let problem)): return .failure(problem)
                case .failure(.rejected(let failure)):
                    if failure.disposition == .refreshTokenDead {
                        try store.markRefreshTokenDead(in: connection, accountId: imported.accountId, generation: refreshToken.generation)
                    }
                    return .failure(Problem(failure, requestedScopes: scopes))
                case .success(let tokens): response = tokens
                }
                redeemed.withLock { $0 = (response, refreshToken.generation) }
                // The rotated token first: the imported one may already be superseded at the STS.
                if let rotated = response.refreshToken, !rotated.isEmpty {
                    try store.saveRefreshToken(
                        in: connection, accountId: imported.accountId, token: rotated, familyId: response.foci, replacing: refreshToken.generation)
                }
                guard let identity = Self.identity(of: response, environment: authority.environment) else {
                    // Kept as an import: the rotated refresh token is stored, the next request tries again.
                    return .failure(Problem(.upstreamError, "The token response has no readable client_info; home_account_id cannot be known.", status: 502))
                }
                let granted = ScopeRules.granted(response.scope, requested: scopes)
                let realm = authority.isMultiTenant ? identity.realm : authority.tenant.lowercased()
                let token = StoredAccessToken(
                    response, accountId: imported.accountId, environment: authority.environment, realm: realm, clientId: clientId,
                    scopes: granted.canonical, issuedAt: now())
                let completion = try store.completeImport(
                    in: connection, importedId: imported.accountId, identity: identity, refreshToken: response.refreshToken ?? refreshToken.token,
                    familyId: response.foci, accessToken: token)
                logger.info(
                    completion.merged ? "account.import_merged" : "account.import_completed",
                    ["account.id": completion.account.accountId, "import.account_id": imported.accountId, "correlation.id": context.correlationId])
                return .success((completion, ScopeRules.declined(requested: scopes, granted: granted)))
            }
        }
        // Whatever happened, this replica's view of the imported account is stale now.
        forgetInMemory(imported.accountId)
        let (completion, declined): (ImportCompletion, [String])
        switch outcome {
        case .failure(var problem):
            // SPEC §12: every problem that asks for interaction carries a sign_in_url.
            if problem.code == .interactionRequired {
                problem.signInHint = SignInHint(
                    account: imported, scopes: request.scopes.canonical, claims: request.claims, authority: request.authority?.url)
            }
            throw problem
        case .success(nil): return nil
        case .success(let done?): (completion, declined) = done
        }
        if completion.merged { forgetInMemory(completion.account.accountId) }
        memory.store(completion.accessToken, now: now())
        return try answer(completion.accessToken, declined: declined, account: completion.account, source: .refresh, allowPartial: request.allowPartial)
    }

    /// `home_account_id` from `client_info`; realm, oid, username and name from the id_token's
    /// claims. The id_token came straight from the token endpoint over TLS, so its claims are
    /// read without a signature check (as MSAL does for token responses).
    static func identity(of response: TokenResponse, environment: String) -> LearnedIdentity? {
        guard let text = response.clientInfo, let clientInfo = try? ClientInfo.decode(text) else { return nil }
        let claims = response.idToken.flatMap { try? JWT.parse($0) }.map { IDTokenClaims($0.claims) }
        return LearnedIdentity(
            environment: environment, homeAccountId: clientInfo.homeAccountId, realm: claims?.tid ?? clientInfo.utid, localAccountId: claims?.oid,
            username: claims?.username, name: claims?.name, idTokenClaims: claims.map(SignInService.publicClaims) ?? "{}")
    }
}
