internal import CMicroHTTPD
internal import Glibc
import HTTPCommon

/// What the first access-handler call learns from a request's head in one pass over its fields
/// (behaviour §7.4): the fields themselves, the framing refusal if there is one, the declared
/// length and whether the client waits for `100 Continue`.
///
/// libmicrohttpd 0.9.75 is lenient where RFC 9112 asks a server to refuse: it frames a body by
/// `Transfer-Encoding` and passes a `Content-Length` beside it on, reads a body of an unknown
/// coding until the connection closes (and "unknown" is any value but its own spelling, see
/// ``isChunked(_:)``), accepts chunked on HTTP/1.0, takes a bare LF for a line's
/// end, and joins a folded line (obs-fold) onto the previous field's *name*. The first four are
/// seen in the fields; the last two only in how the head lies in memory: libmicrohttpd parses it
/// in place, replacing each CRLF by two NULs (a bare LF by one), the colon by a NUL, and keeping
/// pointers to each name and value. So a well-framed head is exactly: the version, two NULs,
/// then per field its name, a NUL, blanks, its value, two NULs; then two NULs more, and the head
/// ends (`MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE` bytes after the method). Any other distance
/// is a bare LF (one NUL), a NUL inside a value (libmicrohttpd cut the value there), or a folded
/// line (libmicrohttpd moved the name it grew elsewhere in its pool). Only pointers are compared,
/// and bytes are read only between two positions already known to lie in the head.
struct HeadReading {
    /// A field value read as a number between optional spaces and tabs (OWS, RFC 9110 §5.6.3),
    /// as `Content-Length` is written; nil when it is not one. On the value's bytes in place
    /// (a `String` and a `Substring` per request cost more than the rest of the field's reading).
    static func number(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        if start < end, bytes[start] == UInt8(ascii: "+") { start += 1 }
        guard start < end else { return nil }
        // 18 digits cannot overflow; longer ones are read as `Int(_:)` reads them.
        guard end - start <= 18 else { return Int(String(decoding: bytes[start..<end], as: UTF8.self)) }
        var value = 0
        for index in start..<end {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value * 10 + Int(digit)
        }
        return value
    }

    var headers: HTTPHeaders
    var fieldFacts = HeaderFieldFacts()
    var refusal: HTTPHeadRefusal?
    /// The first `Content-Length`, or 0 when absent or unparsable (libmicrohttpd refuses a malformed one with 400).
    var contentLength = 0
    var expectsContinue = false

    /// What the walk keeps between fields.
    fileprivate struct Walk {
        var reading: HeadReading
        /// Where the previous line's value (or the version) ended; nil when the layout is not checked.
        var lineEnd: UnsafePointer<CChar>?
        var headStart: UnsafePointer<CChar>
        var headEnd: UnsafePointer<CChar>
        /// The previous field's name as it lies in the head (a `String` of it is made only for a refusal).
        var previousName: UnsafeRawBufferPointer?
        var hasContentLength = false
        var transferCodings: [Substring] = []
        var transferEncodingFields = 0
        /// The first `Transfer-Encoding` value is one libmicrohttpd frames as chunked (``isChunked(_:)``).
        var libmicrohttpdReadsChunked = false
        var expectations: [Substring] = []
        /// Where the fields are written, during the walk.
        var writer: UnsafeMutablePointer<HTTPHeaders.FieldWriter>?
    }

    /// Reads the head of the request on `connection`, whose request line's method and version
    /// libmicrohttpd passed to the access handler, into `headers` (empty; a buffer kept from the
    /// connection's previous request).
    static func read(
        _ connection: OpaquePointer, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?, into headers: consuming HTTPHeaders
    ) -> HeadReading {
        let size = cmhd_connection_header_size(connection)
        let start = method ?? UnsafePointer(bitPattern: 1)!
        var walk = Walk(reading: HeadReading(headers: HTTPHeaders()), headStart: start, headEnd: start + max(0, size))
        // The layout is checked only when the version lies inside the head (it always does for a
        // request line with a version: libmicrohttpd points into the line it parsed).
        if let method, let version, size > 0, version > method, version < walk.headEnd {
            walk.lineEnd = version + strlen(version)
        }
        // The fields are written into room reserved once: a field takes its name's and value's
        // bytes and 10 more in the list, and at least its name and value and 3 more (the colon's
        // NUL, the CRLF's two) in the head libmicrohttpd parsed in place, so the head's size and
        // 7 per field is room enough. (With no iterator, libmicrohttpd only counts the fields.)
        let fieldCount = Int(max(0, MHD_get_connection_values(connection, .HEADER_KIND, nil, nil)))
        let fitted = headers.appendFields(room: max(0, size) + 7 * fieldCount) { writer in
            withUnsafeMutablePointer(to: &writer) { writer in
                walk.writer = writer
                _ = withUnsafeMutablePointer(to: &walk) {
                    MHD_get_connection_values_n(connection, .HEADER_KIND, readField, $0)
                }
                walk.writer = nil
            }
        }
        if !fitted {
            // Not as parsed in place (no size known, a name libmicrohttpd grew elsewhere for a
            // folded line): the fields appended one by one.
            _ = withUnsafeMutablePointer(to: &headers) {
                MHD_get_connection_values_n(connection, .HEADER_KIND, appendField, $0)
            }
        }
        var reading = walk.reading
        reading.headers = consume headers
        if reading.refusal == nil, let lineEnd = walk.lineEnd, lineEnd + 4 != walk.headEnd {
            reading.refusal = lineRefusal(distance: walk.headEnd - lineEnd, expected: 4, after: walk.previousName.map(text))
        }
        if reading.refusal == nil { reading.refusal = framingRefusal(walk, version: version) }
        return reading
    }

    /// The refusal for a line whose end is `distance` bytes from where its value ended (`expected`
    /// for CRLF), after the field `name` (nil: the request line).
    fileprivate static func lineRefusal(distance: Int, expected: Int, after name: String?) -> HTTPHeadRefusal {
        let name = name.map(QuotedText.shown)
        let line = name.map { "The '\($0)' line" } ?? "The request line"
        if distance > 0 && distance < expected {
            return HTTPHeadRefusal(status: 400, field: name, reason: "\(line) of the request head ends with a bare LF; lines end with CRLF (RFC 9112 §2.2).")
        }
        // More bytes than a CRLF: a NUL cut the value short, or the line after it was not read
        // as a field (libmicrohttpd ends the head at a line with an empty name, `: x`).
        return HTTPHeadRefusal(
            status: 400, field: name,
            reason: "\(line) of the request head holds a NUL, or is followed by a line with an empty field name (RFC 9110 §5.5, §5.1).")
    }

    /// RFC 9112 §6.1 and §6.3 on `Transfer-Encoding` and `Content-Length`; RFC 9110 §10.1.1 on `Expect`.
    private static func framingRefusal(_ walk: Walk, version: UnsafePointer<CChar>?) -> HTTPHeadRefusal? {
        if walk.transferEncodingFields > 0 {
            let field = "Transfer-Encoding"
            if let version, strcmp(version, "HTTP/1.0") == 0 {
                return HTTPHeadRefusal(status: 400, field: field, reason: "An HTTP/1.0 request cannot carry Transfer-Encoding (RFC 9112 §6.1).")
            }
            if walk.hasContentLength {
                return HTTPHeadRefusal(
                    status: 400, field: field, reason: "The request carries both Content-Length and Transfer-Encoding; send one (RFC 9112 §6.1, §6.3).")
            }
            // The one value both readings frame alike: one field, libmicrohttpd's spelling.
            if walk.transferEncodingFields == 1 && walk.libmicrohttpdReadsChunked { return expectationRefusal(walk) }
            let codings = walk.transferCodings.map(asciiLowercased)
            guard codings.last == "chunked", codings.dropLast().allSatisfy({ $0 != "chunked" }) else {
                return HTTPHeadRefusal(
                    status: 400, field: field,
                    reason: "Transfer-Encoding must end with chunked, applied once; the body's length cannot be told (RFC 9112 §6.3).")
            }
            if codings.count > 1 {
                return HTTPHeadRefusal(status: 501, field: field, reason: "Only the chunked transfer coding is implemented (RFC 9112 §6.1).")
            }
            // A list RFC 9110 §5.6.1 reads as chunked alone (`chunked,`, `chunked `, `, chunked`)
            // that libmicrohttpd would not frame: it would wait for the connection to close.
            return HTTPHeadRefusal(
                status: 400, field: field,
                reason: "Transfer-Encoding must be exactly 'chunked', with no other text (blanks after it, commas), for this server to frame the body.")
        }
        return expectationRefusal(walk)
    }

    /// RFC 9110 §10.1.1 on `Expect`.
    private static func expectationRefusal(_ walk: Walk) -> HTTPHeadRefusal? {
        if !walk.expectations.isEmpty, walk.expectations.contains(where: { $0.lowercased() != "100-continue" }) {
            return HTTPHeadRefusal(status: 417, field: "Expect", reason: "The only expectation met is 100-continue (RFC 9110 §10.1.1).")
        }
        return nil
    }

    /// Whether libmicrohttpd 0.9.75 frames a body whose (first) `Transfer-Encoding` value is
    /// `value` as chunked: `parse_connection_headers` compares the value, leading blanks already
    /// skipped, to `chunked` whole, ignoring the case of ASCII letters only
    /// (`MHD_str_equal_caseless_`); any other value (`chunked,`, `chunked ` with a blank after
    /// it) is read until the connection closes.
    static func isChunked(_ value: UnsafeRawBufferPointer) -> Bool {
        value.count == 7 && zip(value, "chunked".utf8).allSatisfy { byte, letter in byte | 0x20 == letter }
    }

    /// `text` with ASCII letters only in lowercase: a coding is a token, and Unicode's lowercasing
    /// reads the Kelvin sign (U+212A) as `k`, a `chunked` libmicrohttpd does not.
    fileprivate static func asciiLowercased(_ text: Substring) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Bytes of the head as text (a field's name or value, for a refusal or a rare field).
    fileprivate static func text(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The members of a comma-separated field value, without blanks around them; empty members dropped.
    fileprivate static func members(_ value: String) -> [Substring] {
        value.split(separator: ",").map { member in
            let trimmed = member.drop { $0 == " " || $0 == "\t" }
            return trimmed.dropLast(trimmed.reversed().prefix { $0 == " " || $0 == "\t" }.count)
        }.filter { !$0.isEmpty }
    }
}

/// Whether `name` (of `count` bytes) is one of the field names most requests carry, spelled
/// exactly so: a token without checking its bytes one by one (a tenth of the head's reading).
private func isCommonName(_ name: UnsafePointer<CChar>, _ count: Int) -> Bool {
    func exactly(_ literal: StaticString) -> Bool {
        count == literal.utf8CodeUnitCount && memcmp(name, literal.utf8Start, count) == 0
    }
    switch count {
    case 4: return exactly("Host") || exactly("host")
    case 6: return exactly("Accept") || exactly("accept")
    case 10: return exactly("User-Agent") || exactly("Connection") || exactly("user-agent")
    case 12: return exactly("Content-Type") || exactly("content-type")
    case 13: return exactly("Authorization") || exactly("authorization")
    case 14: return exactly("Content-Length") || exactly("content-length")
    case 15: return exactly("Accept-Encoding") || exactly("accept-encoding")
    default: return false
    }
}

/// Whether `name` (of `count` bytes) is `expected` in any ASCII case.
private func named(_ name: UnsafePointer<CChar>, _ count: Int, _ expected: StaticString) -> Bool {
    guard count == expected.utf8CodeUnitCount else { return false }
    return strncasecmp(name, UnsafeRawPointer(expected.utf8Start).assumingMemoryBound(to: CChar.self), count) == 0
}

/// MHD_KeyValueIteratorN of ``HeadReading/read(_:method:version:)``: one field, in the order sent.
private func readField(
    _ walkPointer: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ keySize: Int,
    _ value: UnsafePointer<CChar>?, _ valueSize: Int
) -> MHD_Result {
    guard let walkPointer, let key else { return .NO }
    let walk = walkPointer.assumingMemoryBound(to: HeadReading.Walk.self)
    let nameBytes = UnsafeRawBufferPointer(start: key, count: keySize)
    let valueBytes = UnsafeRawBufferPointer(start: valueSize > 0 ? value : nil, count: valueSize > 0 && value != nil ? valueSize : 0)
    walk.pointee.writer?.pointee.add(name: nameBytes, value: valueBytes)
    let isContentLength = named(key, keySize, "Content-Length")
    walk.pointee.reading.fieldFacts.count(
        name: nameBytes, isHost: named(key, keySize, "Host"), isContentLength: isContentLength, valueCount: valueSize,
        knownToken: isCommonName(key, keySize))
    guard walk.pointee.reading.refusal == nil else { return .YES }

    if let lineEnd = walk.pointee.lineEnd, let value {
        let head = walk.pointee
        // The previous line ends with CRLF (two NULs) and this field's name starts right after.
        if key != lineEnd + 2 || lineEnd[0] != 0 || lineEnd[1] != 0 {
            if key > lineEnd && key < head.headEnd {
                walk.pointee.reading.refusal = HeadReading.lineRefusal(
                    distance: key - lineEnd, expected: 2, after: head.previousName.map(HeadReading.text))
            } else {
                // The name is not where its line is: libmicrohttpd grew it elsewhere for a folded
                // line (and the name it holds now has the folded text in it: not named).
                walk.pointee.reading.refusal = HTTPHeadRefusal(
                    status: 400, field: nil, reason: "A header field is folded onto the next line (obs-fold), which is refused (RFC 9112 §5.2).")
            }
            return .YES
        }
        // Name, the colon's NUL, blanks, value: anything else is a folded line.
        let colon = key + keySize
        guard value > colon, value < head.headEnd, colon[0] == 0,
            (1..<(value - colon)).allSatisfy({ colon[$0] == 0x20 || colon[$0] == 0x09 })
        else {
            walk.pointee.reading.refusal = HTTPHeadRefusal(
                status: 400, field: nil, reason: "A header field is folded onto the next line (obs-fold), which is refused (RFC 9112 §5.2).")
            return .YES
        }
        walk.pointee.lineEnd = value + valueSize
        walk.pointee.previousName = nameBytes
    }
    // RFC 9110 §5.5: CR, LF and NUL are never part of a field value (LF and NUL end it here).
    if let value, valueSize > 0, memchr(value, 0x0D, valueSize) != nil {
        let name = QuotedText.shown(HeadReading.text(nameBytes))
        walk.pointee.reading.refusal = HTTPHeadRefusal(
            status: 400, field: name, reason: "The value of '\(name)' holds a CR; a field value may not (RFC 9110 §5.5).")
        return .YES
    }
    if isContentLength {
        if !walk.pointee.hasContentLength {
            walk.pointee.reading.contentLength = value.flatMap { HeadReading.number(UnsafeRawBufferPointer(start: $0, count: valueSize)) } ?? 0
        }
        walk.pointee.hasContentLength = true
    } else if named(key, keySize, "Transfer-Encoding") {
        walk.pointee.transferEncodingFields += 1
        if walk.pointee.transferEncodingFields == 1 { walk.pointee.libmicrohttpdReadsChunked = HeadReading.isChunked(valueBytes) }
        let members = HeadReading.members(HeadReading.text(valueBytes))
        // An empty value names no coding: the length cannot be told.
        walk.pointee.transferCodings += members.isEmpty ? [""] : members
    } else if named(key, keySize, "Expect") {
        let members = HeadReading.members(HeadReading.text(valueBytes))
        walk.pointee.expectations += members.isEmpty ? [""] : members
        walk.pointee.reading.expectsContinue = walk.pointee.reading.expectsContinue || members.contains { $0.lowercased() == "100-continue" }
    }
    return .YES
}

/// MHD_KeyValueIteratorN appending each field to the ``HTTPHeaders`` at `headersPointer`, in order.
private func appendField(
    _ headersPointer: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ keySize: Int,
    _ value: UnsafePointer<CChar>?, _ valueSize: Int
) -> MHD_Result {
    guard let headersPointer, let key else { return .NO }
    let valueBytes = UnsafeRawBufferPointer(start: valueSize > 0 ? value : nil, count: valueSize > 0 && value != nil ? valueSize : 0)
    headersPointer.assumingMemoryBound(to: HTTPHeaders.self).pointee.add(name: UnsafeRawBufferPointer(start: key, count: keySize), value: valueBytes)
    return .YES
}
