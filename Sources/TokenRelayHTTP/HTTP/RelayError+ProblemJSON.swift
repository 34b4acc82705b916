import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// The one render step of the service's errors (behaviour §4, §12): a ``RelayError`` decided by
/// any layer becomes the RFC 9457 problem a caller sees (`application/problem+json`).
///
/// `type` is `urn:tokenrelay:problem:{error}` and `error` the stable machine code. Extra members
/// (`field`, `suberror`, `sts_error_codes`, ...) come from `extensions`.
extension RelayError {
    /// Any error as the problem the caller sees: a problem as it is, the typed domain errors
    /// through their tables, anything else 500 (logged by the handler).
    package init(rendering error: any Error) {
        switch error {
        case let problem as RelayError: self = problem
        case let error as StoreError: self.init(error)
        case let error as AcquisitionError: self.init(error)
        default:
            self.init(.internal, "An unexpected error occurred.")
            cause = String(describing: type(of: error))
        }
    }

    /// The headers the error's facts make: `Retry-After`, `WWW-Authenticate`, `Allow`, `Connection`.
    package var headers: HTTPHeaders {
        var headers = HTTPHeaders()
        addHeaders(to: &headers)
        return headers
    }

    /// Adds ``headers`` to `headers` (each name once: none of them is there before). A list
    /// shared by many problems is left as it is when the error makes none (a 404), and copied
    /// once with room for them all otherwise.
    private func addHeaders(to headers: inout HTTPHeaders) {
        var reserved = false
        func add(_ name: String, _ value: String) {
            if !reserved {
                headers.reserveCapacity(forMoreFields: 4)
                reserved = true
            }
            headers.add(name, value)
        }
        if let retryAfterSeconds { add("Retry-After", String(retryAfterSeconds)) }
        if let challenge { add("WWW-Authenticate", challenge) }
        if let allowedMethods { add("Allow", allowedMethods.joined(separator: ", ")) }
        if closesConnection { add("Connection", "close") }
    }

    /// The problem's answer: its status, `Content-Type`, the headers of its facts, and
    /// `client-request-id` naming `correlationId` (behaviour §8), as the pipeline sends it.
    package func response(correlationId: String) -> HTTPResponse {
        // The field list made once, shared as it is or copied once (``addHeaders(to:)``).
        var headers = Self.contentType
        addHeaders(to: &headers)
        return HTTPResponse(status: status, headers: headers, body: body(correlationId: correlationId), clientRequestId: correlationId)
    }

    /// The RFC 9457 members, in UTF-8 key order as ``JSONWriter`` writes every object, and the
    /// extensions merged in: written straight into bytes, the standard members without a
    /// `JSONValue` each (hashing and sorting them was a fifth of a 401's cost, building them a
    /// tenth of a 404's; behaviour §10). The standard members win over an extension of the same name.
    package func body(correlationId: String) -> [UInt8] {
        if extensions.isEmpty, status == code.status, let closing = Self.closings[code] {
            // No extension to interleave, the code's own status: the members after `detail` are
            // the code's, made once (a 401 or 404 wrote nine pieces here; behaviour §10). Each
            // piece is its own constant: reading one member of a tuple of arrays copied (retained
            // and released) all of them, 33 reference counts per refusal.
            let detail = detail
            var out: [UInt8] = []
            out.reserveCapacity(correlationId.utf8.count + detail.utf8.count + closing.count + 32)
            out.append(contentsOf: Self.opening)
            JSONWriter.writeString(correlationId, into: &out)
            out.append(contentsOf: Self.detailAfterFirst)
            JSONWriter.writeString(detail, into: &out)
            out.append(contentsOf: closing)
            return out
        }
        let extra = extensions.isEmpty ? [] : JSONWriter.sortedKeys(extensions).filter { key in !Self.standardMembers.contains(key) }
        var out: [UInt8] = []
        out.reserveCapacity(320)
        out.append(UInt8(ascii: "{"))
        var nextExtra = 0
        var writable = true
        func name(_ key: String) {
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
        }
        /// The extensions whose names sort before `key` (all that are left when nil).
        func extras(before key: String?) {
            while nextExtra < extra.count, key.map({ extra[nextExtra].utf8.lexicographicallyPrecedes($0.utf8) }) ?? true {
                let key = extra[nextExtra]
                nextExtra += 1
                name(key)
                // A non-finite number has no JSON form: the whole body becomes "{}", as JSONWriter does.
                if !JSONWriter.write(extensions[key]!, into: &out) { writable = false }
            }
        }
        /// A standard member's name, made once as bytes (`"detail":`), after the extensions before it.
        func member(_ key: String, _ bytes: [UInt8]) {
            extras(before: key)
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: bytes)
        }
        let texts = Self.codeTexts[code]!
        member("correlation_id", Self.memberNames.correlationId)
        JSONWriter.writeString(correlationId, into: &out)
        member("detail", Self.memberNames.detail)
        JSONWriter.writeString(detail, into: &out)
        member("error", Self.memberNames.error)
        out.append(contentsOf: texts.error)
        member("status", Self.memberNames.status)
        out.append(contentsOf: String(status).utf8)
        member("title", Self.memberNames.title)
        out.append(contentsOf: texts.title)
        member("type", Self.memberNames.type)
        out.append(contentsOf: texts.type)
        extras(before: nil)
        out.append(UInt8(ascii: "}"))
        return writable ? out : Array("{}".utf8)
    }

    private static let standardMembers: Set<String> = ["correlation_id", "detail", "error", "status", "title", "type"]

    /// The standard members' names as JSON bytes with their colon, made once.
    private static let memberNames = (
        correlationId: encodedName("correlation_id"), detail: encodedName("detail"), error: encodedName("error"),
        status: encodedName("status"), title: encodedName("title"), type: encodedName("type")
    )

    /// A problem's `Content-Type` field, made once.
    private static let contentType: HTTPHeaders = ["Content-Type": "application/problem+json"]

    /// `{"correlation_id":` and `,"detail":`, the fast path's pieces before each value.
    private static let opening = [UInt8(ascii: "{")] + encodedName("correlation_id")
    private static let detailAfterFirst = [UInt8(ascii: ",")] + encodedName("detail")

    /// Each code's `error`, `title` and `type` values as JSON strings, made once.
    private static let codeTexts: [ProblemCode: (error: [UInt8], title: [UInt8], type: [UInt8])] = Dictionary(
        uniqueKeysWithValues: ProblemCode.allCases.map { code in (code, (encoded(code.rawValue), encoded(code.title), encoded(code.typeURI))) })

    /// Each code's members after `detail` in a problem with no extension and the code's own status
    /// (`,"error":…,"status":…,"title":…,"type":…}`), made once.
    private static let closings: [ProblemCode: [UInt8]] = Dictionary(
        uniqueKeysWithValues: ProblemCode.allCases.map { code in
            let texts = codeTexts[code]!
            var closing = [UInt8(ascii: ",")] + encodedName("error") + texts.error
            closing += [UInt8(ascii: ",")] + encodedName("status") + Array(String(code.status).utf8)
            closing += [UInt8(ascii: ",")] + encodedName("title") + texts.title + [UInt8(ascii: ",")] + encodedName("type") + texts.type + [UInt8(ascii: "}")]
            return (code, closing)
        })

    private static func encoded(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.writeString(text, into: &bytes)
        return bytes
    }

    private static func encodedName(_ name: String) -> [UInt8] { encoded(name) + [UInt8(ascii: ":")] }
}
