/// What an API key may do (SPEC §7, §12 Permissions).
public enum Permission: String, Sendable, CaseIterable {
    case tokensAcquire = "tokens:acquire"
    case accountsRead = "accounts:read"
    case accountsWrite = "accounts:write"
    case downstreamCall = "downstream:call"
    case admin
}
