import Foundation

/// One challenge of a `WWW-Authenticate` header (RFC 9110 §11.6.1, §11.3).
///
/// The parser accepts quoted and unquoted parameter values, keeps `=` padding inside quoted
/// strings, and reads unquoted values up to the next comma (Graph sends
/// `authorization_uri=https://...` unquoted: case 18, msgraph-sdk-dotnet #1416).
public struct AuthenticationChallenge: Sendable, Equatable {
    /// The auth-scheme as sent (compare case-insensitively).
    public let scheme: String
    /// auth-params; names lower-cased, values unquoted. The first of repeated names wins.
    public let parameters: [String: String]
    /// A token68 credential instead of parameters, if sent.
    public let token68: String?

    public init(scheme: String, parameters: [String: String], token68: String? = nil) {
        self.scheme = scheme
        self.parameters = parameters
        self.token68 = token68
    }

    /// Parses every challenge in a header value (several challenges may share one value).
    /// - Parameter header: the `WWW-Authenticate` value.
    /// - Returns: the challenges in order; malformed parts are skipped, never thrown.
    public static func parse(_ header: String) -> [AuthenticationChallenge] {
        var parser = Parser(Array(header.unicodeScalars))
        return parser.challenges()
    }

    private struct Parser {
        let chars: [Unicode.Scalar]
        var index = 0

        init(_ chars: [Unicode.Scalar]) { self.chars = chars }

        var atEnd: Bool { index >= chars.count }
        var current: Unicode.Scalar? { atEnd ? nil : chars[index] }

        static func isTokenChar(_ c: Unicode.Scalar) -> Bool {
            switch c {
            case "a"..."z", "A"..."Z", "0"..."9": true
            case "!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~": true
            default: false
            }
        }

        static func isToken68Char(_ c: Unicode.Scalar) -> Bool {
            switch c {
            case "a"..."z", "A"..."Z", "0"..."9", "-", ".", "_", "~", "+", "/": true
            default: false
            }
        }

        mutating func skipSpaces() {
            while let c = current, c == " " || c == "\t" { index += 1 }
        }

        mutating func skipSpacesAndCommas() {
            while let c = current, c == " " || c == "\t" || c == "," { index += 1 }
        }

        mutating func token() -> String {
            var out = ""
            while let c = current, Self.isTokenChar(c) {
                out.unicodeScalars.append(c)
                index += 1
            }
            return out
        }

        /// Is the text at `index` `token OWS "="` followed by something other than `=`/end?
        func looksLikeParam() -> Bool {
            var i = index
            let start = i
            while i < chars.count, Self.isTokenChar(chars[i]) { i += 1 }
            guard i > start else { return false }
            while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 }
            guard i < chars.count, chars[i] == "=" else { return false }
            i += 1
            while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 }
            return i < chars.count && chars[i] != "=" && chars[i] != ","
        }

        mutating func value() -> String {
            if current == "\"" {
                index += 1
                var out = ""
                while let c = current, c != "\"" {
                    if c == "\\", index + 1 < chars.count {
                        index += 1
                    }
                    out.unicodeScalars.append(chars[index])
                    index += 1
                }
                if current == "\"" { index += 1 }
                return out
            }
            var out = ""
            while let c = current, c != ",", c != " ", c != "\t" {
                out.unicodeScalars.append(c)
                index += 1
            }
            return out
        }

        mutating func challenges() -> [AuthenticationChallenge] {
            var result: [AuthenticationChallenge] = []
            while true {
                skipSpacesAndCommas()
                if atEnd { break }
                let scheme = token()
                if scheme.isEmpty {
                    index += 1  // skip a stray character
                    continue
                }
                skipSpaces()
                var parameters: [String: String] = [:]
                var token68: String?
                if !looksLikeParam(), let c = current, Self.isToken68Char(c) {
                    // token68: 1*tchar68 *"=" then end or comma.
                    let start = index
                    while let c = current, Self.isToken68Char(c) { index += 1 }
                    while current == "=" { index += 1 }
                    skipSpaces()
                    if atEnd || current == "," {
                        token68 = String(String.UnicodeScalarView(chars[start..<index])).trimmingTrailingSpaces()
                    } else {
                        index = start
                    }
                }
                if token68 == nil {
                    while true {
                        skipSpacesAndCommas()
                        guard !atEnd, looksLikeParamOrEmpty() else { break }
                        let name = token().lowercased()
                        skipSpaces()
                        index += 1  // "="
                        skipSpaces()
                        let text = value()
                        if parameters[name] == nil { parameters[name] = text }
                    }
                }
                result.append(AuthenticationChallenge(scheme: scheme, parameters: parameters, token68: token68))
            }
            return result
        }

        /// `name=` possibly with an empty value (`realm=""` is handled by value()).
        func looksLikeParamOrEmpty() -> Bool {
            var i = index
            let start = i
            while i < chars.count, Self.isTokenChar(chars[i]) { i += 1 }
            guard i > start else { return false }
            while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 }
            return i < chars.count && chars[i] == "="
        }
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return s
    }
}
