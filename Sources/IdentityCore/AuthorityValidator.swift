import Foundation
import Synchronization

/// Authority validation without network calls (behaviour §1 "Authority", MSAL "authority
/// validation" / `knownAuthorities`).
///
/// Accepted: the well-known AAD hosts over https on port 443 with any tenant; any other host
/// (B2C, CIAM, custom domains, loopback test authorities) only when it matches an entry of
/// `knownAuthorities`. `http` only when `allowHTTPLoopback` is set, the host is 127.0.0.1,
/// localhost or [::1], and it matches a known entry or the default authority.
public struct AuthorityValidator: Sendable {
    struct KnownEntry: Sendable, Hashable {
        let scheme: String
        let host: String
        let port: Int
        /// Lower-cased path segments the authority's path must start with (empty: any).
        let pathPrefix: [String]
    }

    let known: [KnownEntry]
    let allowHTTPLoopback: Bool
    /// Authorities this validator accepted, by their text: a forced refresh validates the
    /// account's authority again, and the same text always gives the same answer here (parsing
    /// it was 27k instructions of each forced refresh, behaviour §10).
    let accepted = AcceptedAuthorities()

    /// - Parameters:
    ///   - knownAuthorities: URLs (`https://host[:port][/path]`: scheme, host and port must
    ///     match, the path is a whole-segment prefix) or bare hosts (`https://host:443`, any
    ///     path).
    ///   - allowHTTPLoopback: accept `http` for loopback hosts (tests with the emulator).
    ///   - defaultAuthority: the configured default authority (`TOKENRELAY_AUTHORITY`); it
    ///     counts as known (its whole path is the prefix), so an emulator on
    ///     `http://127.0.0.1:port/tenant` or a B2C default needs no extra entry.
    /// - Throws: `AuthorityError` naming an entry that cannot be parsed.
    public init(knownAuthorities: [String], allowHTTPLoopback: Bool, defaultAuthority: String? = nil) throws(AuthorityError) {
        var entries: [KnownEntry] = []
        var all = knownAuthorities
        if let defaultAuthority {
            guard defaultAuthority.contains("://") else {
                throw AuthorityError(detail: "the default authority must be an absolute URL")
            }
            all.append(defaultAuthority)
        }
        for raw in all {
            let text = raw.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            let parsed = try ParsedURL.parse(text.contains("://") ? text : "https://" + text)
            guard text.contains("://") || parsed.segments.isEmpty else {
                throw AuthorityError(detail: "known authority '\(text)' has a path but no scheme")
            }
            entries.append(
                KnownEntry(
                    scheme: parsed.scheme, host: parsed.host, port: parsed.port,
                    pathPrefix: Self.withoutTFP(parsed.segments.map { $0.lowercased() })))
        }
        self.known = entries
        self.allowHTTPLoopback = allowHTTPLoopback
    }

    /// Validates and canonicalises an authority URL.
    /// - Parameter url: e.g. `https://login.microsoftonline.com/common`,
    ///   `https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_susi`.
    /// - Returns: the canonical `Authority`.
    /// - Throws: `AuthorityError` (→ 400 `invalid_authority`) when malformed, not https, or
    ///   neither well-known nor known.
    public func validate(_ url: String) throws(AuthorityError) -> Authority {
        if let authority = accepted.authority(for: url) { return authority }
        let authority = try checked(url)
        accepted.remember(authority, for: url)
        return authority
    }

    /// ``validate(_:)`` from the text.
    private func checked(_ url: String) throws(AuthorityError) -> Authority {
        let parsed = try ParsedURL.parse(Self.trimmingBlanks(url))
        if parsed.scheme == "http" {
            guard allowHTTPLoopback else { throw AuthorityError(detail: "authority must use https") }
            guard ["127.0.0.1", "localhost", "[::1]"].contains(parsed.host) else {
                throw AuthorityError(detail: "http is allowed only for loopback authorities")
            }
        }
        let wellKnown = parsed.scheme == "https" && parsed.port == 443 && Authority.wellKnownHosts.contains(parsed.host)
        if !wellKnown {
            let lowerSegments = Self.withoutTFP(parsed.segments.map { $0.lowercased() })
            let matches = known.contains { entry in
                entry.scheme == parsed.scheme && entry.host == parsed.host && entry.port == parsed.port
                    && lowerSegments.starts(with: entry.pathPrefix)
            }
            guard matches else {
                throw AuthorityError(detail: "authority host '\(parsed.host)' is not a well-known or configured known authority")
            }
        }
        return try Self.makeAuthority(parsed)
    }

    /// `url` without the blanks around it (`CharacterSet.whitespaces`). The usual URL (an ASCII
    /// letter first and an ASCII non-blank last) is returned as it is, without Foundation's
    /// trimming: a forced refresh validates the account's authority once (issue 30).
    static func trimmingBlanks(_ url: String) -> String {
        if let first = url.utf8.first, let last = url.utf8.last, first < 0x80, last < 0x80, first != UInt8(ascii: " "),
            first != UInt8(ascii: "\t"), last != UInt8(ascii: " "), last != UInt8(ascii: "\t")
        {
            return url
        }
        return url.trimmingCharacters(in: .whitespaces)
    }

    /// Splits the path into tenant and policy and detects the type.
    /// `*.b2clogin.com`, a `tfp` segment or a `B2C_1_`/`B2C_1A_` policy segment → b2c;
    /// `*.ciamlogin.com` → ciam; otherwise aad.
    static func makeAuthority(_ parsed: ParsedURL) throws(AuthorityError) -> Authority {
        var segments = parsed.segments
        var hasTFP = false
        if let first = segments.first, first.lowercased() == "tfp" {
            hasTFP = true
            segments.removeFirst()
        }
        // Tolerate the v2 suffixes people paste (`/v2.0`, `/oauth2/v2.0/...`).
        if let index = segments.firstIndex(where: { ["v2.0", "oauth2"].contains($0.lowercased()) }) {
            segments.removeSubrange(index...)
        }
        // A tenant is a GUID, a domain name or common/organizations/consumers: it starts with a
        // letter or digit (`_control` or `-x` is no tenant, and would name other paths of a host).
        if let first = segments.first?.utf8.first, !first.isASCIIAlphanumeric {
            throw AuthorityError(detail: "an authority's tenant starts with a letter or digit")
        }
        let policyLooking = segments.count > 1 && Self.isB2CPolicy(segments[1])
        let type: AuthorityType
        if parsed.host.hasSuffix(".b2clogin.com") || hasTFP || policyLooking {
            type = .b2c
        } else if parsed.host.hasSuffix(".ciamlogin.com") {
            type = .ciam
        } else {
            type = .aad
        }
        switch type {
        case .b2c:
            guard segments.count == 2 else {
                throw AuthorityError(detail: "a B2C authority is https://{host}/[tfp/]{tenant}/{policy}")
            }
            return Authority(
                scheme: parsed.scheme, host: parsed.host, port: parsed.port,
                tenant: segments[0], policy: segments[1], type: .b2c)
        case .ciam, .aad:
            if segments.isEmpty, type == .ciam {
                // MSAL: `https://contoso.ciamlogin.com/` means tenant contoso.onmicrosoft.com.
                let name = parsed.host.split(separator: ".").first.map(String.init) ?? parsed.host
                return Authority(
                    scheme: parsed.scheme, host: parsed.host, port: parsed.port,
                    tenant: "\(name).onmicrosoft.com", policy: nil, type: .ciam)
            }
            guard segments.count == 1 else {
                throw AuthorityError(detail: segments.isEmpty ? "authority has no tenant" : "authority path must be /{tenant}")
            }
            return Authority(
                scheme: parsed.scheme, host: parsed.host, port: parsed.port,
                tenant: segments[0], policy: nil, type: type)
        }
    }

    /// B2C's optional leading `tfp` segment does not take part in prefix matching.
    static func withoutTFP(_ segments: [String]) -> [String] {
        segments.first == "tfp" ? Array(segments.dropFirst()) : segments
    }

    static func isB2CPolicy(_ segment: String) -> Bool {
        let lower = segment.lowercased()
        return lower.hasPrefix("b2c_1_") || lower.hasPrefix("b2c_1a_")
    }
}

/// The authorities one ``AuthorityValidator`` accepted, by their text, at most ``capacity`` of
/// them (then it starts again) and only texts of at most ``longestText`` bytes: accounts name a
/// few authorities each, a deployment a few hundred, and callers choose the texts (a request's
/// `authority`), so both bounds keep it under a megabyte (behaviour §10.8).
final class AcceptedAuthorities: Sendable {
    static let capacity = 512
    /// Longest text remembered, in bytes; an authority URL is well under it.
    static let longestText = 512
    private let byText = Mutex<[String: Authority]>([:])

    func authority(for text: String) -> Authority? {
        byText.withLock { $0[text] }
    }

    func remember(_ authority: Authority, for text: String) {
        guard text.utf8.count <= Self.longestText else { return }
        byText.withLock { byText in
            if byText.count >= Self.capacity { byText.removeAll(keepingCapacity: true) }
            byText[text] = authority
        }
    }

    /// Texts remembered now.
    var count: Int { byText.withLock { $0.count } }
}

/// A minimal absolute-URL splitter for authorities (RFC 3986 §3): no userinfo, query or
/// fragment allowed.
struct ParsedURL: Sendable, Equatable {
    let scheme: String
    let host: String
    let port: Int
    let segments: [String]

    /// RFC 3986 §2.3 `unreserved`: ALPHA / DIGIT / "-" / "." / "_" / "~".
    static func isUnreserved(_ byte: UInt8) -> Bool {
        byte.isASCIIAlphanumeric || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }

    /// What a host (lower-cased) may hold: a name, an IPv4 or a bracketed IPv6 literal.
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "["),
            UInt8(ascii: "]"), UInt8(ascii: ":"):
            true
        default: false
        }
    }

    /// The URL's parts. Searched on its UTF-8 bytes, not by `Character` and Foundation's
    /// `range(of:)`: a forced refresh validates the account's authority, and that took 80k
    /// instructions (callgrind, issue 30). Every character these checks look for is ASCII, and
    /// a non-ASCII one anywhere but the scheme is refused, so the answers are the same.
    static func parse(_ text: String) throws(AuthorityError) -> ParsedURL {
        guard let schemeEnd = Self.schemeSeparator(in: Substring(text)) else { throw AuthorityError(detail: "authority must be an absolute URL") }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw AuthorityError(detail: "authority scheme must be https") }
        let rest = text[schemeEnd.upperBound...]
        guard !rest.utf8.contains(UInt8(ascii: "?")), !rest.utf8.contains(UInt8(ascii: "#")) else {
            throw AuthorityError(detail: "authority must not have a query or fragment")
        }
        let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
        let hostPort = String(rest[..<slash])
        guard !hostPort.utf8.contains(UInt8(ascii: "@")), !hostPort.isEmpty else { throw AuthorityError(detail: "authority host is missing or has userinfo") }
        var host: String
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw AuthorityError(detail: "bad IPv6 literal") }
            host = String(hostPort[...close])
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw AuthorityError(detail: "bad authority host")
            }
        } else if let colon = hostPort.firstIndex(of: ":") {
            host = String(hostPort[..<colon])
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        host = host.lowercased()
        guard !host.isEmpty, host.utf8.allSatisfy(Self.isHostByte) else { throw AuthorityError(detail: "bad authority host") }
        var port = scheme == "http" ? 80 : 443
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else { throw AuthorityError(detail: "bad authority port") }
            port = value
        }
        let segments = rest[slash...].utf8.split(separator: UInt8(ascii: "/")).map { String(Substring($0)) }
        // Tenants, policies and the v2 suffixes are all RFC 3986 unreserved text. Anything else
        // went into the token and authorize URLs as given: a line break, `..`, raw non-ASCII.
        for segment in segments {
            guard segment != ".", segment != "..", segment.utf8.allSatisfy(Self.isUnreserved) else {
                throw AuthorityError(detail: "an authority path segment may hold only letters, digits, '-', '.', '_' and '~'")
            }
        }
        return ParsedURL(scheme: scheme, host: host, port: port, segments: segments)
    }

    /// The range of the first `://` in `text`, found byte by byte.
    private static func schemeSeparator(in text: Substring) -> Range<String.Index>? {
        let bytes = text.utf8
        var index = bytes.startIndex
        while let colon = bytes[index...].firstIndex(of: UInt8(ascii: ":")) {
            let first = bytes.index(after: colon)
            if first != bytes.endIndex, bytes[first] == UInt8(ascii: "/") {
                let second = bytes.index(after: first)
                if second != bytes.endIndex, bytes[second] == UInt8(ascii: "/") { return colon..<bytes.index(after: second) }
            }
            index = first
        }
        return nil
    }
}
