import HTTPCommon
import IdentityCore

/// Reads the usual `POST /v1/tokens/silent` body straight into a request, without building a
/// JSON dictionary first: the cached silent path (SPEC §10) spent a tenth of its time there.
///
/// Only the common shape is taken: one JSON object whose members are `account_id` (a non-empty
/// string), `scopes` (an array of strings) and optionally `min_ttl_s` (0…86400 written as plain
/// digits), `force_refresh`, `allow_partial` (booleans) and `correlation_id` (a string), each
/// once, strings without escapes, and scopes that `ScopeRules` accepts. For such a body the
/// result equals what `TokenRoutes.parseSilent` gives; anything else gives nil, and the general
/// parser decides (and words any error).
struct SilentRequestScanner {
    /// The request and the body's non-empty `correlation_id`, if any.
    struct Scanned {
        let request: SilentTokenRequest
        let correlationId: String?
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    static func scan(_ request: HTTPRequest, scopes: RequestedScopes = .shared) -> Scanned? {
        guard let contentType = request.headers["Content-Type"], JSONBody.isPlainJSON(contentType) else { return nil }
        return request.body.withUnsafeBufferPointer { buffer in
            var scanner = SilentRequestScanner(buffer)
            return scanner.object(scopes: scopes)
        }
    }

    private mutating func object(scopes normalizer: RequestedScopes) -> Scanned? {
        var accountId: String?
        var scopes: [String]?
        var minTTL: Int?
        var forceRefresh: Bool?
        var allowPartial: Bool?
        var correlationId: String?
        guard skip(UInt8(ascii: "{")) else { return nil }
        repeat {
            guard let key = string(), skip(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "account_id" where accountId == nil:
                guard let text = string(), !text.isEmpty else { return nil }
                accountId = text
            case "scopes" where scopes == nil:
                scopes = stringArray()
                if scopes == nil { return nil }
            case "min_ttl_s" where minTTL == nil:
                minTTL = smallInteger()
                if minTTL == nil { return nil }
            case "force_refresh" where forceRefresh == nil:
                forceRefresh = boolean()
                if forceRefresh == nil { return nil }
            case "allow_partial" where allowPartial == nil:
                allowPartial = boolean()
                if allowPartial == nil { return nil }
            case "correlation_id" where correlationId == nil:
                correlationId = string()
                if correlationId == nil { return nil }
            default:
                return nil
            }
        } while skip(UInt8(ascii: ","))
        guard skip(UInt8(ascii: "}")) else { return nil }
        skipWhitespace()
        guard index == bytes.count, let accountId, let scopes, let set = try? normalizer.normalize(scopes: scopes, resource: nil) else { return nil }
        let request = SilentTokenRequest(
            account: .accountId(accountId), scopes: set, authority: nil, claims: nil, forceRefresh: forceRefresh ?? false,
            minTTLSeconds: minTTL ?? 0, allowPartial: allowPartial ?? false)
        return Scanned(request: request, correlationId: correlationId.flatMap { $0.isEmpty ? nil : $0 })
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D { index += 1 }
    }

    /// Skips whitespace, then `byte` if it is next.
    private mutating func skip(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// A string without escapes or control characters, valid UTF-8.
    private mutating func string() -> String? {
        guard skip(UInt8(ascii: "\"")) else { return nil }
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                let text = UnsafeBufferPointer(rebasing: bytes[start..<index - 1])
                // ASCII is valid UTF-8 as it stands; only other bytes need the full validation.
                return ascii ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
            }
            guard byte >= 0x20, byte != UInt8(ascii: "\\") else { return nil }
            ascii = ascii && byte < 0x80
            index += 1
        }
        return nil
    }

    private mutating func stringArray() -> [String]? {
        guard skip(UInt8(ascii: "[")) else { return nil }
        var items: [String] = []
        if skip(UInt8(ascii: "]")) { return items }
        repeat {
            guard let item = string() else { return nil }
            items.append(item)
        } while skip(UInt8(ascii: ","))
        return skip(UInt8(ascii: "]")) ? items : nil
    }

    /// 0…86400 as plain digits without leading zeros.
    private mutating func smallInteger() -> Int? {
        skipWhitespace()
        let start = index
        var value = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9"), index - start < 6 {
            value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            index += 1
        }
        let digits = index - start
        guard digits > 0, digits < 6, !(digits > 1 && bytes[start] == UInt8(ascii: "0")), value <= 86_400 else { return nil }
        // A fraction or exponent would make it another number (or an error): not ours.
        if index < bytes.count,
            bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")
                || bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9")
        {
            return nil
        }
        return value
    }

    private mutating func boolean() -> Bool? {
        skipWhitespace()
        for (word, value) in [("true", true), ("false", false)] {
            let utf8 = word.utf8
            if bytes.count - index >= utf8.count, UnsafeBufferPointer(rebasing: bytes[index..<index + utf8.count]).elementsEqual(utf8) {
                index += utf8.count
                return value
            }
        }
        return nil
    }
}
