import IdentityCore

/// Everything route handlers call; built once by `AppDependencies`. Routes take their stores
/// from here and build none.
struct AppServices: Sendable {
    let configuration: Configuration
    let store: TokenStore
    /// The account-event outbox (`GET /v1/events`).
    let events: AccountEventStore
    let tokens: SilentAcquisition
    let grants: GrantTokenService
    let signIns: SignInService
    let downstream: DownstreamService
    let authorities: AuthorityValidator
    let health: HealthChecks
    let metrics: Metrics
    let audit: AuditStore
    /// Token answers per (key, account), written in batches (behaviour §12 Audit). Always set by
    /// `AppDependencies`; optional only so that the routes' `issuance?.record` stays as it is
    /// while the request-pipeline change is under way.
    let issuance: IssuanceCounter?
    /// Tenant suspension and the tenant listing (behaviour §12 Tenants).
    let tenants: TenantStore
    /// This replica's suspended tenants; a route's own change is applied here at once.
    let suspensions: TenantSuspensions
}

/// The route table: every route TokenRelay serves (the OpenAPI parity test reads it).
enum Routes {
    /// The API's routes; with `operations`, `/healthz`, `/readyz` and `/metrics` too (false when
    /// they are served on `TOKENRELAY_MANAGEMENT_LISTEN`, ``management(_:)``).
    static func make(_ services: AppServices, operations: Bool = true) -> Router {
        var router = Router()
        if operations { OperationsRoutes.register(on: &router, services) }
        SignInRoutes.register(on: &router, services)
        SignInStartRoutes.register(on: &router, services)
        AccountRoutes.register(on: &router, services)
        EventRoutes.register(on: &router, services)
        TenantRoutes.register(on: &router, services)
        TokenRoutes.register(on: &router, services)
        GrantTokenRoutes.register(on: &router, services)
        DownstreamRoutes.register(on: &router, services)
        return router
    }

    /// `/healthz`, `/readyz` and `/metrics` alone, for the management listener.
    static func management(_ services: AppServices) -> Router {
        var router = Router()
        OperationsRoutes.register(on: &router, services)
        return router
    }
}
