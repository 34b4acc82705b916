/// A scope request that breaks behaviour §1's rules. Maps to 400 `invalid_scope`; `field` names
/// the request field (`scopes` or `resource`), `detail` is safe to show.
public struct ScopeError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let detail: String
    public init(field: String, detail: String) {
        self.field = field
        self.detail = detail
    }
    public var description: String { "invalid \(field): \(detail)" }
}
