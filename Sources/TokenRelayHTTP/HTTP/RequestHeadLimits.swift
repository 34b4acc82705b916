import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayUpstream

/// TokenRelay's own rules and limits on a request's head, checked first for every request: field
/// names are tokens, one `Host`, `Content-Length`s that agree (RFC 9112 §3.2, §5.1, §6.3), and a
/// request target or header section too large is a problem+json answer (414 `uri_too_long`,
/// 431 `header_fields_too_large`; behaviour §7.4, RFC 9110 §15.5.15, RFC 6585 §5) rather than
/// libmicrohttpd's bare page or a closed connection.
///
/// Both limits together stay well under the connection's 24 KiB memory
/// (``HTTPServerConfiguration/connectionMemoryLimitBytes``): a head within them always leaves
/// libmicrohttpd room to send the answer, and a head past them up to about 23 KiB still reaches
/// this check. The target's limit is nginx's request line (8 KiB); the header fields' 12 KiB is
/// what fits beside it (libmicrohttpd zeroes all of it after every request: see
/// ``HTTPServerConfiguration/connectionMemoryLimitBytes``).
package enum RequestHeadLimits {
    /// Most bytes of the request target, path and query as decoded (``HTTPRequest/targetBytes``).
    package static let maxTargetBytes = 8192
    /// Most bytes of the header section (``HTTPRequest/headerFieldBytes``).
    package static let maxHeaderFieldBytes = 12288

    /// - Throws: `RelayError` 400 `invalid_request` naming a field whose name is not a token (e.g.
    ///   whitespace before the colon), naming `Host` when an HTTP/1.1 request has none or any
    ///   request has two (RFC 9112 §3.2), or naming `Content-Length` when two of them disagree
    ///   (the connection is then closed), or naming `client-request-id` or `X-Correlation-ID`
    ///   when either is sent twice; 414 `uri_too_long`, or 431 `header_fields_too_large` naming
    ///   the largest header field in `field`.
    package static func check(_ request: HTTPRequest) throws(RelayError) {
        let facts = request.fieldFacts ?? HeaderFieldFacts(counting: request.headers)
        // The server counted the fields as it read them: the fields are walked again only to
        // name the one at fault, or to compare Content-Length values when there are several.
        if !facts.namesAreTokens, let field = request.headers.first(where: { !isToken($0.name) }) {
            // `Name : value` reached us as the field `Name ` (RFC 9112 §5.1: MUST be 400).
            let name = QuotedText.shown(field.name.trimmingCharacters(in: .whitespaces))
            throw RelayError.invalidRequest(field: name, "The header field name '\(name)' holds whitespace or a delimiter (RFC 9112 §5.1).")
        }
        // libmicrohttpd 0.9.75 frames the body by one Content-Length and passes both on: a
        // proxy in front that used the other would see a different request (RFC 9112 §6.3).
        if facts.contentLengthFields > 1 {
            let lengths = request.headers.filter { $0.name.caseInsensitiveEquals("Content-Length") }.map { $0.value.trimmingCharacters(in: .whitespaces) }
            if lengths.contains(where: { $0 != lengths[0] }) {
                var problem = RelayError.invalidRequest(field: "Content-Length", "The request has Content-Length fields that disagree.")
                problem.closesConnection = true
                throw problem
            }
        }
        if request.targetBytes > maxTargetBytes {
            throw RelayError(.uriTooLong, "The request target (path and query) exceeds \(maxTargetBytes) bytes.")
        }
        if facts.headerFieldBytes > maxHeaderFieldBytes {
            let largest = request.headers.max { $0.name.utf8.count + $0.value.utf8.count < $1.name.utf8.count + $1.value.utf8.count }
            throw RelayError(
                .headerFieldsTooLarge, "The request's header fields exceed \(maxHeaderFieldBytes) bytes.",
                extensions: largest.map { ["field": .string(QuotedText.shown($0.name))] } ?? [:])
        }
        // libmicrohttpd refuses two Host fields only in its strict mode, and a missing one never.
        if facts.hostFields > 1 || (facts.hostFields == 0 && request.version == "HTTP/1.1") {
            throw RelayError.invalidRequest(field: "Host", "An HTTP/1.1 request must carry one Host header, and no request two.")
        }
        // A correlation id names one request (behaviour §8): with two, the first was taken, and the
        // logs, the answer and the identity platform saw one id while a proxy logged the other.
        if request.headers.mayCarryCorrelationId {
            for name in HTTPHeaders.correlationIdNames { _ = try request.headers.only(name) }
        }
    }

    /// Whether `name` is a non-empty token (RFC 9110 §5.6.2).
    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(\.isHTTPTokenCharacter)
    }
}

extension HeaderFieldFacts {
    /// The facts of `headers` counted here, for a request made in memory (tests, the in-process
    /// mode), which no server read.
    init(counting headers: HTTPHeaders) {
        self.init()
        for field in headers {
            var name = field.name
            name.withUTF8 { bytes in
                count(
                    name: UnsafeRawBufferPointer(bytes), isHost: field.name.caseInsensitiveEquals("Host"),
                    isContentLength: field.name.caseInsensitiveEquals("Content-Length"), valueCount: field.value.utf8.count)
            }
        }
    }
}

extension HTTPHeaders {
    /// The fields that name a request's correlation id, in the order they are taken (behaviour §8).
    static let correlationIdNames = ["client-request-id", "X-Correlation-ID"]

    /// Whether a field of either name may be present: most requests carry neither, and a length
    /// check per field settles that without comparing names.
    var mayCarryCorrelationId: Bool { containsName(ofLength: 17) || containsName(ofLength: 16) }
}
