/// An authority that is malformed or not allowed. Maps to 400 `invalid_authority` (behaviour §4).
/// `detail` names what is wrong and is safe to show to the caller.
public struct AuthorityError: Error, Sendable, Equatable, CustomStringConvertible {
    public let detail: String
    public init(detail: String) { self.detail = detail }
    public var description: String { "invalid authority: \(detail)" }
}
