import HTTPCommon

/// `{GET,HEAD,POST,PUT,PATCH,DELETE} /v1/downstream/{api}/{path}` with `X-Account-Id` (SPEC §6,
/// §12 Downstream).
enum DownstreamRoutes {
    static func register(on router: inout Router, _ services: AppServices) {
        router.add(DownstreamService.relayedMethods, "/v1/downstream/{api}/{path...}", access: .requires(.downstreamCall)) { request in
            let headers = request.http.headers
            guard let accountId = headers["X-Account-Id"], !accountId.isEmpty else {
                if headers.contains("X-On-Behalf-Of-Assertion") || headers.contains("X-App-Only") {
                    throw Problem.invalidRequest(
                        field: "X-Account-Id", "On-behalf-of and app-only downstream calls are not available yet; send 'X-Account-Id'.")
                }
                throw Problem.invalidRequest(field: "X-Account-Id", "Name the account whose token is used with the 'X-Account-Id' header.")
            }
            return try await services.downstream.relay(
                DownstreamService.Call(
                    api: request.parameter("api"), path: request.parameter("path"), method: request.http.method,
                    query: request.http.query, headers: headers, body: request.http.body, accountId: accountId),
                context: request.context)
        }
    }
}
