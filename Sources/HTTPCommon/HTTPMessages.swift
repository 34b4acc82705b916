/// A request as the server bridge hands it to the application: the whole body read.
public struct HTTPRequest: Sendable {
    /// Upper-case method, e.g. `GET`.
    public var method: String
    /// The path without the query (`/v1/accounts/abc`), percent-decoded by the server except
    /// `%2F`, `%25` and `%00`, which stay as sent (``pathKeepsEscaped(_:)``): every `/` in it
    /// separates segments, and a segment is decoded by ``decodedSegment(_:)``.
    public var path: String
    /// Query parameters in order, percent-decoded (`?a=1&a=2` gives two entries).
    public var query: [(name: String, value: String)]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// True when the body exceeded the server's limit; `body` is then empty and the handler
    /// should answer 413 without reading it.
    public var bodyExceededLimit: Bool
    /// The peer's address, e.g. `127.0.0.1`, when known.
    public var remoteAddress: String?
    /// The protocol version of the request line (`HTTP/1.1`, `HTTP/1.0`); nil for a request made
    /// in memory (tests), which carries no request line.
    public var version: String?
    /// What the server counted of `headers` while reading them (``HeaderFieldFacts``); nil for a
    /// request made in memory, whose fields are then read again where a rule needs them.
    public var fieldFacts: HeaderFieldFacts?

    public init(
        method: String, path: String, query: [(name: String, value: String)] = [], headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [], bodyExceededLimit: Bool = false, remoteAddress: String? = nil, version: String? = nil,
        fieldFacts: HeaderFieldFacts? = nil
    ) {
        self.fieldFacts = fieldFacts
        self.version = version
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.bodyExceededLimit = bodyExceededLimit
        self.remoteAddress = remoteAddress
    }

    /// Bytes of the request target as decoded: the path, plus `?`, `=` and `&` and every query
    /// name and value. At most the bytes on the wire (percent-decoding only shrinks).
    public var targetBytes: Int {
        var count = path.utf8.count
        for item in query { count += item.name.utf8.count + item.value.utf8.count + 2 }
        return count
    }

    /// Bytes of the header section as sent: each field's name and value plus `": "` and CRLF.
    public var headerFieldBytes: Int { headers.fieldBytes }

    /// Whether the server leaves the escape of `byte` encoded in ``path``: `/` (a decoded one
    /// would separate segments, RFC 3986 §2.2), `%` (a decoded one could then read as an escape)
    /// and NUL (the path crosses the C boundary as a C string).
    public static func pathKeepsEscaped(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "/") || byte == UInt8(ascii: "%") || byte == 0
    }

    /// One segment of ``path`` fully decoded: its `%2F` (either case) and `%25` as `/` and `%`.
    /// `%00` stays three characters.
    public static func decodedSegment(_ segment: Substring) -> String {
        guard segment.utf8.contains(UInt8(ascii: "%")) else { return String(segment) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(segment.utf8.count)
        var rest = segment.utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "%"), rest.count >= 2 else {
                bytes.append(byte)
                continue
            }
            let high = rest[rest.startIndex], low = rest[rest.index(after: rest.startIndex)]
            if high == UInt8(ascii: "2"), low | 0x20 == UInt8(ascii: "f") {
                bytes.append(UInt8(ascii: "/"))
            } else if high == UInt8(ascii: "2"), low == UInt8(ascii: "5") {
                bytes.append(UInt8(ascii: "%"))
            } else {
                bytes.append(byte)
                continue
            }
            rest = rest.dropFirst(2)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A path as the request line would carry it, made into a ``path``: every escape decoded but
    /// those ``pathKeepsEscaped(_:)`` keeps, as the server does (a path given inside another, the
    /// downstream relay's `{path}` decoded once, behaviour §6.2).
    public static func serverDecodedPath(_ raw: String) -> String {
        guard raw.utf8.contains(UInt8(ascii: "%")) else { return raw }
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let utf8 = Array(raw.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count, let high = hex(utf8[index + 1]), let low = hex(utf8[index + 2]),
                !pathKeepsEscaped(high << 4 | low)
            {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The first value of query parameter `name`, or nil.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }
}

/// A complete response: status, headers and body bytes.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The `client-request-id` field naming the request (behaviour §8), sent after ``headers``
    /// (the server bridge and ``sentHeaders`` both put it there). Apart from them because nearly
    /// every answer carries it: a list shared by many answers (the token answer's fixed fields)
    /// stays shared, where adding the field would copy it for every answer.
    public var clientRequestId: String?

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], clientRequestId: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.clientRequestId = clientRequestId
    }

    /// The header fields as sent: ``headers``, then `client-request-id` when ``clientRequestId`` is set.
    public var sentHeaders: HTTPHeaders {
        guard let clientRequestId else { return headers }
        var sent = headers
        sent.add("client-request-id", clientRequestId)
        return sent
    }

    /// Whether the answer names its request: ``clientRequestId``, or a `client-request-id` among
    /// ``headers`` (a relayed downstream answer's own).
    public var carriesClientRequestId: Bool { clientRequestId != nil || headers.contains("client-request-id") }
}
