extension Problem {
    /// 504 `upstream_unavailable` with `Retry-After: 1`: the caller's deadline passed before
    /// `target` (`sts`, `downstream`) answered (behaviour §5).
    static func deadlinePassed(before target: String) -> Problem {
        Problem(
            .upstreamUnavailable, "The request deadline passed before the \(target) answered.", status: 504,
            extensions: ["retry_after_s": .number(1)], headers: ["Retry-After": "1"])
    }
}
