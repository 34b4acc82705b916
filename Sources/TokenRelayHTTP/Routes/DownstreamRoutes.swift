import HTTPCommon
import TokenRelayAcquisition
import TokenRelayBase

/// `{GET,HEAD,POST,PUT,PATCH,DELETE} /v1/downstream/{api}/{path}` with one identity header:
/// `X-Account-Id`, `X-App-Only: true` or `X-On-Behalf-Of-Assertion` (behaviour §6, §12 Downstream).
package enum DownstreamRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        // The query is the downstream API's: passed on as sent (behaviour §6.2).
        router.add(DownstreamService.relayedMethods, "/v1/downstream/{api}/{path...}", access: .requires(.downstreamCall), query: .any) { request in
            let headers = request.http.headers
            let identity = try DownstreamIdentity.from(headers)
            return try await services.downstream.relay(
                DownstreamService.Call(
                    api: request.parameter("api"), path: request.parameter("path"), method: request.http.method,
                    query: request.http.query, headers: headers, body: request.http.body, identity: identity),
                context: request.context)
        }
    }
}
