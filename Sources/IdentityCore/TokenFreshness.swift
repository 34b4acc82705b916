/// The times of a cached access token, unix seconds.
public struct CachedTokenTimes: Sendable, Equatable {
    public let expiresOn: Int
    /// `now + ext_expires_in` at issue; outage fallback only.
    public let extExpiresOn: Int?
    /// `now + refresh_in` at issue; proactive refresh after it.
    public let refreshOn: Int?

    public init(expiresOn: Int, extExpiresOn: Int? = nil, refreshOn: Int? = nil) {
        self.expiresOn = expiresOn
        self.extExpiresOn = extExpiresOn
        self.refreshOn = refreshOn
    }
}

/// Whether a cached access token may be served (behaviour §1 "Access token cache entry", §5
/// `ext_expires_on`, §12 "Token requests"; MSAL's 5-minute expiry margin and `refresh_in`
/// proactive refresh, MSAL ObjC common PR #975).
public enum TokenFreshness: Sendable, Equatable {
    /// Serve it.
    case fresh
    /// Serve it and start one background refresh (past `refresh_on`).
    case refreshDue
    /// Do not serve it; refresh.
    case expired
    /// Not servable normally (within the margin or past `expires_on`) but before
    /// `ext_expires_on`: serve only, flagged, when the STS is unavailable and
    /// `allow_extended_lifetime` is set.
    case extendedOnly

    /// - Parameters:
    ///   - t: the entry's times.
    ///   - now: current unix time, seconds.
    ///   - expirySkew: margin before `expires_on`, seconds (default 300 in configuration).
    ///   - minTTL: the request's `min_ttl_s`, seconds (0 when absent).
    /// - Returns: `fresh`/`refreshDue` iff `expires_on − now ≥ max(expirySkew, minTTL)`.
    public static func evaluate(_ t: CachedTokenTimes, now: Int, expirySkew: Int, minTTL: Int) -> TokenFreshness {
        if t.expiresOn - now >= max(expirySkew, minTTL) {
            if let refreshOn = t.refreshOn, now >= refreshOn { return .refreshDue }
            return .fresh
        }
        if let ext = t.extExpiresOn, now < ext { return .extendedOnly }
        return .expired
    }
}
