import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// The first silent acquisition of an imported (ADAL) account (behaviour §3 import, §12 Accounts):
/// its refresh token is redeemed once under the account's redemption lease (ADR 0012: nothing
/// of PostgreSQL held while the STS answers), `home_account_id` comes from `client_info` (never
/// built here), the rest of the identity from the id_token, and when another account already
/// has that `home_account_id` the import merges into it.
extension SilentAcquisition {
    /// The audit actor of an import completed by work no API key asked for (the keep-alive job,
    /// a background refresh); a request's own key id otherwise (behaviour §12 Audit).
    package static let backgroundActor = "import"

    /// Redeems an imported account's refresh token once and records who it belongs to.
    /// - Returns: the token and the account now holding it (the survivor after a merge); nil when
    ///   another request completed the import meanwhile (the caller resolves the account again).
    /// - Throws: `RelayError`: `interaction_required` (the imported refresh token is dead or absent),
    ///   `server_declined_scopes`, 502 when the response names no user, the STS's problems.
    package func completeImport(_ imported: AccountRecord, request: SilentTokenRequest, context: RequestContext) async throws -> SilentTokenResult? {
        let authority: Authority
        do {
            authority = try authorities.validate(imported.authority)
        } catch {
            throw RelayError(
                .interactionRequired, "The imported account's authority is no longer accepted (\(error.detail)); sign the user in.",
                extensions: ["account_state": .string(imported.state.rawValue)])
        }
        let claims = try mergedClaims(request.claims)
        let scopes = request.scopes
        let accountId = imported.accountId
        let executor = self.executor
        let owner = RefreshExecutor.newLeaseOwner()
        func interaction(_ problem: RelayError) -> RelayError {
            var problem = problem
            // behaviour §12: every problem that asks for interaction carries a sign_in_url.
            if problem.code == .interactionRequired {
                problem.signInHint = SignInHint(
                    account: imported, scopes: request.scopes.canonical, claims: SignInHint.claims(for: problem, requested: request.claims),
                    authority: request.authority?.url)
            }
            return problem
        }

        // 1. The lease, as a refresh takes it; another request's redemption of it is waited for.
        var claimed: (token: String, generation: Int64)?
        while claimed == nil {
            let claim = RefreshClaimRequest(
                accountId: accountId, environment: imported.environment, realm: imported.realm, scopes: scopes, checkCache: false,
                acceptRefreshDue: false, minimumExpiresOn: 0, now: now(), owner: owner, leaseSeconds: executor.leaseSeconds)
            switch try await store.claimRefresh(claim) {
            case .claimed(let token, let generation, _):
                claimed = (executor.pendingRotations.token(for: accountId, replacing: generation) ?? token, generation)
            case .heldElsewhere(let secondsLeft):
                guard context.remainingSeconds > 0 else { throw RelayError(AcquisitionError.leaseWaitTimeout) }
                await executor.waitForHolder(accountId: accountId, secondsLeftOnLease: secondsLeft, deadline: context.deadline)
                guard try await store.isPendingImport(accountId: accountId) else { return nil }
            case .freshTokenStored:
                continue
            case .noRefreshToken:
                forgetInMemory(accountId)
                guard try await store.isPendingImport(accountId: accountId) else { return nil }
                throw interaction(
                    RelayError(
                        .interactionRequired, "The imported refresh token is gone; the user must sign in.", extensions: ["account_state": .string("active")]))
            }
        }
        guard let (refreshToken, generation) = claimed else { return nil }
        // Every way out below stores, releases or deletes before returning; until then a shutdown releases it.
        executor.held.hold(accountId: accountId, owner: owner)
        defer { executor.held.ended(owner: owner) }
        guard try await store.isPendingImport(accountId: accountId) else {
            try? await store.releaseRefreshLease(accountId: accountId, owner: owner)
            return nil
        }

        // 2. The STS, with nothing of PostgreSQL held.
        let response: TokenResponse
        let redemption = executor.redemptionContext(context)
        let redeemed = await executor.keepingLeaseAlive(accountId: accountId, owner: owner) {
            await sts.redeem(refreshToken: refreshToken, authority: authority, scopes: scopes, claims: claims, context: redemption, account: accountId)
        }
        switch redeemed {
        case .failure(.unavailable(let problem)):
            try? await store.releaseRefreshLease(accountId: accountId, owner: owner)
            executor.recordFailure(.unavailable(problem), accountId: accountId)
            throw problem
        case .failure(.rejected(let failure)):
            executor.recordFailure(.rejected(failure), accountId: accountId)
            if failure.disposition == .refreshTokenDead {
                _ = try await store.markRefreshTokenDead(accountId: accountId, generation: generation, stsErrorCodes: failure.stsErrorCodes)
            } else {
                try? await store.releaseRefreshLease(accountId: accountId, owner: owner)
            }
            forgetInMemory(accountId)
            throw interaction(RelayError(failure, requestedScopes: scopes))
        case .success(let tokens):
            response = tokens
        }

        // 3. One short transaction: the fenced rotation and the account's identity (or the merge).
        let rotation = RotationWrite(
            response, accountId: accountId, tenantId: Self.identity(of: response, environment: authority.environment)?.realm ?? authority.tenant,
            generation: generation, redeemed: refreshToken, accessToken: nil, notifyAccessTokensReplaced: false)
        guard let identity = Self.identity(of: response, environment: authority.environment) else {
            // Kept as an import: the rotated refresh token is stored, the next request tries again.
            _ = await executor.persistAlone(rotation)
            throw RelayError(.upstreamError, "The token response has no readable client_info; home_account_id cannot be known.", status: 502)
        }
        let granted = ScopeRules.granted(response.scope, requested: scopes)
        let realm = authority.isMultiTenant ? identity.realm : authority.tenant.lowercased()
        let token = StoredAccessToken(
            response, accountId: accountId, environment: identity.environment, realm: realm, clientId: clientId, scopes: granted.canonical, issuedAt: now(),
            obtainedBy: context.caller ?? Self.backgroundActor)
        let store = self.store
        let clientId = self.clientId
        let completion: ImportCompletion?
        do {
            completion = try await store.database.transaction { connection -> ImportCompletion? in
                // Serialises with a sign-in of the same user merging meanwhile (short: no STS call inside).
                try TokenStore.lockRefresh(in: connection, accountId: accountId, clientId: clientId)
                guard try store.isPendingImport(in: connection, accountId: accountId),
                    try store.writeRotation(in: connection, rotation) != .fencedOut
                else { return nil }
                return try store.completeImport(
                    in: connection, importedId: accountId, identity: identity, refreshToken: rotation.rotatedRefreshToken ?? refreshToken,
                    familyId: response.foci, accessToken: token, actor: context.caller ?? Self.backgroundActor)
            }
        } catch {
            forgetInMemory(accountId)
            // The COMMIT failed after the STS answered: the rotated refresh token is kept.
            _ = await executor.persistAlone(rotation)
            throw error
        }
        // Whatever happened, this replica's view of the imported account is stale now.
        forgetInMemory(accountId)
        executor.waiters.wake(accountId: accountId)
        guard let completion else {
            try? await store.releaseRefreshLease(accountId: accountId, owner: owner)
            return nil
        }
        logger.info(
            completion.merged ? "account.import_merged" : "account.import_completed",
            ["account.id": completion.account.accountId, "import.account_id": accountId, "correlation.id": context.correlationId])
        if completion.merged { forgetInMemory(completion.account.accountId) }
        memory.store(completion.accessToken, now: now())
        let declined = ScopeRules.declined(requested: scopes, granted: granted)
        return try SilentPlan.answer(
            completion.accessToken, declined: declined, account: completion.account, source: .refresh, allowPartial: request.allowPartial)
    }

    /// `home_account_id` from `client_info`; realm, oid, username and name from the id_token's
    /// claims. The id_token came straight from the token endpoint over TLS, so its claims are
    /// read without a signature check (as MSAL does for token responses).
    package static func identity(of response: TokenResponse, environment: String) -> LearnedIdentity? {
        guard let text = response.clientInfo, let clientInfo = try? ClientInfo.decode(text) else { return nil }
        let claims = response.idToken.flatMap { try? JWT.parse($0) }.map { IDTokenClaims($0.claims) }
        return LearnedIdentity(
            environment: environment, homeAccountId: clientInfo.homeAccountId, realm: claims?.tid ?? clientInfo.utid, localAccountId: claims?.oid,
            username: claims?.username, name: claims?.name, idTokenClaims: claims.map(\.publicJSON) ?? "{}")
    }
}
