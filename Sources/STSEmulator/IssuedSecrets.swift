import Foundation

/// Every secret the emulator handed out, newest last, so tests can look for them where they must
/// never appear (a database dump, the service's logs). Bounded: each kind keeps the newest
/// ``capacity`` values, so a benchmark's millions of tokens cost little memory.
struct IssuedSecrets: Sendable {
    static let capacity = 2_000

    private(set) var accessTokens: [String] = []
    private(set) var refreshTokens: [String] = []
    private(set) var idTokens: [String] = []
    private(set) var codes: [String] = []

    /// Where each value is also appended, one per line (`--record-issued`), or nil.
    var recordFile: FileHandle?

    enum Kind { case accessToken, refreshToken, idToken, code }

    mutating func record(_ value: String, _ kind: Kind) {
        func append(_ list: inout [String]) {
            if list.count >= Self.capacity { list.removeFirst(list.count - Self.capacity + 1) }
            list.append(value)
        }
        recordFile?.write(Data((value + "\n").utf8))
        switch kind {
        case .accessToken: append(&accessTokens)
        case .refreshToken: append(&refreshTokens)
        case .idToken: append(&idTokens)
        case .code: append(&codes)
        }
    }

    var json: JSONValue {
        .object([
            ("access_tokens", .array(accessTokens.map(JSONValue.string))), ("refresh_tokens", .array(refreshTokens.map(JSONValue.string))),
            ("id_tokens", .array(idTokens.map(JSONValue.string))), ("codes", .array(codes.map(JSONValue.string))),
        ])
    }
}
