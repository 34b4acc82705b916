import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayDownstream
import TokenRelayOperations
import TokenRelaySignIn
import TokenRelayStore

/// Everything route handlers call; built once by `AppDependencies`. Routes take their stores
/// from here and build none.
package struct AppServices: Sendable {
    package let configuration: Configuration
    package let store: TokenStore
    /// The account-event outbox (`GET /v1/events`).
    package let events: AccountEventStore
    package let tokens: SilentAcquisition
    package let grants: GrantTokenService
    package let signIns: SignInService
    package let downstream: DownstreamService
    package let authorities: AuthorityValidator
    package let health: HealthChecks
    package let metrics: Metrics
    package let audit: AuditStore
    /// Token answers per (key, account), written in batches (behaviour §12 Audit). Always set by
    /// `AppDependencies`; optional only so that the routes' `issuance?.record` stays as it is
    /// while the request-pipeline change is under way.
    package let issuance: IssuanceCounter?
    /// Tenant suspension and the tenant listing (behaviour §12 Tenants).
    package let tenants: TenantStore
    /// This replica's suspended tenants; a route's own change is applied here at once.
    package let suspensions: TenantSuspensions
    /// Signs and checks the cursors of `GET /v1/events` and `GET /v1/audit` (``PageCursor``).
    package let cursors: RingSigner
    /// Where spans go (behaviour §8.11); nil when `TOKENRELAY_OTLP_ENDPOINT` is unset.
    package let tracer: Tracer?

    package init(
        configuration: Configuration, store: TokenStore, events: AccountEventStore, tokens: SilentAcquisition, grants: GrantTokenService,
        signIns: SignInService, downstream: DownstreamService, authorities: AuthorityValidator, health: HealthChecks, metrics: Metrics, audit: AuditStore,
        issuance: IssuanceCounter?, tenants: TenantStore, suspensions: TenantSuspensions, cursors: RingSigner, tracer: Tracer? = nil
    ) {
        self.configuration = configuration
        self.store = store
        self.events = events
        self.tokens = tokens
        self.grants = grants
        self.signIns = signIns
        self.downstream = downstream
        self.authorities = authorities
        self.health = health
        self.metrics = metrics
        self.audit = audit
        self.issuance = issuance
        self.tenants = tenants
        self.suspensions = suspensions
        self.cursors = cursors
        self.tracer = tracer
    }
}

/// The route table: every route TokenRelay serves (the OpenAPI parity test reads it).
package enum Routes {
    /// The API's routes; with `operations`, `/healthz`, `/readyz` and `/metrics` too (false when
    /// they are served on `TOKENRELAY_MANAGEMENT_LISTEN`, ``management(_:)``).
    package static func make(_ services: AppServices, operations: Bool = true) -> Router {
        var router = Router()
        if operations { OperationsRoutes.register(on: &router, services) }
        SignInRoutes.register(on: &router, services)
        SignInStartRoutes.register(on: &router, services)
        AccountRoutes.register(on: &router, services)
        EventRoutes.register(on: &router, services)
        TenantRoutes.register(on: &router, services)
        AuditRoutes.register(on: &router, services)
        TokenRoutes.register(on: &router, services)
        GrantTokenRoutes.register(on: &router, services)
        DownstreamRoutes.register(on: &router, services)
        return router
    }

    /// `/healthz`, `/readyz` and `/metrics` alone, for the management listener.
    package static func management(_ services: AppServices) -> Router {
        var router = Router()
        OperationsRoutes.register(on: &router, services)
        return router
    }
}
