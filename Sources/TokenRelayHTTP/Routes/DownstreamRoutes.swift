import HTTPCommon
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayDownstream

/// `{GET,HEAD,POST,PUT,PATCH,DELETE} /v1/downstream/{api}/{path}` with one identity header:
/// `X-Account-Id`, `X-App-Only: true` or `X-On-Behalf-Of-Assertion` (behaviour §6, §12 Downstream),
/// and the same relay at `/v1/downstream-encoded/{api}/{path}`, the form a generated client can
/// call (behaviour §6.2): there `{path}` is decoded once.
package enum DownstreamRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        // The query is the downstream API's: passed on as sent (behaviour §6.2).
        router.add(DownstreamService.relayedMethods, "/v1/downstream/{api}/{path...}", access: .requires(.downstreamCall), body: .raw, query: .any) { request in
            try await relay(request, path: request.parameter("path"), services)
        }
        // A generated client percent-encodes a path parameter, `/` included (openapi-python-client
        // since 0.28): `me/messages` arrives as `me%2Fmessages`, and an encoded `/` inside a Graph
        // id as `%252F`. Decoding each segment once gives the path the route above takes as sent.
        router.add(
            DownstreamService.relayedMethods, "/v1/downstream-encoded/{api}/{path...}", access: .requires(.downstreamCall), body: .raw, query: .any
        ) {
            request in
            try await relay(request, path: decodedOnce(request.parameter("path")), services)
        }
    }

    /// A remainder path (segments still holding their `%2F` and `%25`, ``HTTPRequest/path``)
    /// decoded once: each segment fully (which gives the API path as a request line would carry
    /// it), then that as the server decodes a path. `me%2Fmessages` → `me/messages`,
    /// `users%2Fa%252Fb` → `users/a%2Fb`, `users%2Fa%2540b` → `users/a@b`.
    package static func decodedOnce(_ path: String) -> String {
        HTTPRequest.serverDecodedPath(
            path.split(separator: "/", omittingEmptySubsequences: false).map(HTTPRequest.decodedSegment).joined(separator: "/"))
    }

    private static func relay(_ request: RouteRequest, path: String, _ services: AppServices) async throws -> HTTPResponse {
        let headers = request.http.headers
        let identity = try DownstreamIdentity.from(headers)
        return try await services.downstream.relay(
            DownstreamService.Call(
                api: request.parameter("api"), path: path, method: request.http.method, query: request.http.query, headers: headers,
                body: request.http.body, identity: identity),
            context: request.context)
    }
}
