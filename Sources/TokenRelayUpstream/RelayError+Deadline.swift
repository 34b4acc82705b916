import TokenRelayBase

extension RelayError {
    /// 504 `upstream_unavailable` with `Retry-After: 1`: the caller's deadline passed before
    /// `target` (`sts`, `downstream`) answered (behaviour §5).
    package static func deadlinePassed(before target: String) -> RelayError {
        var error = RelayError(
            .upstreamUnavailable, "The request deadline passed before the \(target) answered.", status: 504,
            extensions: ["retry_after_s": .number(1)])
        error.retryAfterSeconds = 1
        return error
    }
}
