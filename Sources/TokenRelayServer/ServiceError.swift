import TokenRelayBase

/// A failure of a service operation run outside HTTP (the command line), described in one line.
public struct ServiceError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
