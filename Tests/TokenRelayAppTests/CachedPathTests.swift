import Foundation
import HTTPCommon
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// The pieces that make the cached silent path fast (behaviour §10) must give the same bytes and
/// the same decisions as the general code they stand in for.
@Suite("Cached silent path")
struct CachedPathTests {
    static func foundationEncoded(_ value: JSONValue) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func written(_ value: JSONValue) -> String {
        String(decoding: JSONWriter.encode(value), as: UTF8.self)
    }

    static var allControls: String {
        var text = ""
        for value in 0..<0x20 { text.unicodeScalars.append(Unicode.Scalar(UInt8(value))) }
        return text
    }

    // MARK: JSONWriter

    @Test("A character to escape is found at every position of a long string (the scan works in 64-byte blocks)")
    func escapesFoundAnywhere() {
        for length in [1, 63, 64, 65, 128, 200] {
            for position in [0, length / 2, length - 1] {
                for special in ["\"", "\\", "\n", "\u{1}"] {
                    var text = String(repeating: "a", count: length)
                    let index = text.index(text.startIndex, offsetBy: position)
                    text.replaceSubrange(index...index, with: special)
                    let found = JSONWriter.needsEscaping(text.utf8.span)
                    #expect(found, "\(length) \(position)")
                }
            }
            let plain = String(repeating: "é~/", count: length)
            let found = JSONWriter.needsEscaping(plain.utf8.span)
            #expect(!found)
        }
    }

    @Test("Strings are escaped per RFC 8259 §7")
    func escaping() {
        #expect(Self.written(.string(#"say "hi""#)) == #""say \"hi\"""#)
        #expect(Self.written(.string(#"C:\dir"#)) == #""C:\\dir""#)
        #expect(Self.written(.string("a\nb\rc\td\u{8}e\u{C}f")) == #""a\nb\rc\td\be\ff""#)
        #expect(Self.written(.string("\u{0}\u{1}\u{1f}")) == #""\u0000\u0001\u001f""#)
        #expect(Self.written(.string("/é\u{7f}\u{2028}😀")) == "\"/é\u{7f}\u{2028}😀\"")
        #expect(Self.written(.string("")) == #""""#)
    }

    @Test(
        "Bytes equal JSONEncoder's (sortedKeys, withoutEscapingSlashes)",
        arguments: [
            JSONValue.string(allControls + #"/"\é😀"#),
            .number(1_700_000_000), .number(-0.0), .number(0.1), .number(1e20), .number(1e15), .number(9.5e15), .number(-42),
            .number(2.5), .number(1e-7), .number(123_456_789_012_345_680),
            .bool(true), .null, .array([]), .object([:]),
            .object(
                Dictionary(
                    uniqueKeysWithValues: ["b", "a", "B", "é", "e\u{301}x", "f", "a10", "a9", "\u{10000}", "\u{ff5e}"].enumerated().map {
                        ($1, JSONValue.number(Double($0)))
                    })),
            .object([
                "nested": .object(["list": .array([.string("x"), .null, .bool(false), .object(["k\"ey": .string("v\\")])])]),
                "claims": .object(["xms_cc": .array([.string("cp1")]), "acrs": .object(["essential": .bool(true), "values": .array([.string("c1")])])]),
            ]),
        ])
    func matchesFoundation(_ value: JSONValue) throws {
        #expect(Self.written(value) == (try Self.foundationEncoded(value)))
    }

    @Test("A non-finite number gives {} as the encoder's failure did")
    func nonFinite() {
        #expect(Self.written(.object(["n": .number(.nan)])) == "{}")
        #expect(Self.written(.array([.number(.infinity)])) == "{}")
    }

    // MARK: Server-thread body reader

    static let authorities = try! AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false)

    /// The one reading of a silent body, or its problem.
    static func read(_ body: String, contentType: String = "application/json") -> Result<(SilentTokenRequest, String?), RelayError> {
        Result { () throws(RelayError) in try TokenRoutes.read(JSONBodyTests.request(body, contentType: contentType), authorities: authorities) }
    }

    static func same(_ lhs: SilentTokenRequest, _ rhs: SilentTokenRequest) -> Bool {
        lhs.account == rhs.account && lhs.scopes.canonical == rhs.scopes.canonical && lhs.authority?.url == rhs.authority?.url
            && lhs.claims == rhs.claims && lhs.forceRefresh == rhs.forceRefresh && lhs.minTTLSeconds == rhs.minTTLSeconds
            && lhs.allowPartial == rhs.allowPartial
    }

    static let bodies = [
        #"{"account_id": "acc-1", "scopes": ["User.Read"]}"#,
        #" { "scopes" : [ "User.Read" , "mail.read" ] , "account_id":"é-1" } "#,
        #"{"account_id":"a","scopes":["https://graph.microsoft.com/User.Read"],"correlation_id":"c-1"}"#,
        #"{"account_id":"a","scopes":["User.Read"],"correlation_id":""}"#,
        "{\"account_id\":\"a\",\n\t\"scopes\":[\"User.Read Mail.Read\"]}\r\n",
        #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":86400,"force_refresh":false,"allow_partial":true}"#,
        #"{"account_id":"","scopes":["User.Read"]}"#, #"{"account_id":"a"}"#, #"{"scopes":["User.Read"]}"#,
        #"{"account_id":"a","scopes":[]}"#, #"{"account_id":"a","scopes":["openid"]}"#, #"{"account_id":"a","scopes":["User.Read", " "]}"#,
        #"{"account_id":"a","scopes":["User.Read","https://vault.azure.net/x"]}"#, #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":86401}"#,
        #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":-1}"#, #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1.5}"#,
        #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":null}"#, #"{"account_id":"a","scopes":["User.Read"],"force_refresh":"yes"}"#,
        #"{"account_id":"a","scopes":["User.Read"],"force_refresh":1}"#, #"{"account_id":"a","scopes":["User.Read"],"correlation_id":7}"#,
        #"{"account_id":"a","scopes":["User.Read"],"username":"u"}"#, #"{"account_id":"a","scopes":["User.Read"],"claims":{}}"#,
        #"{"account_id":"a","scopes":["User.Read"],}"#, #"{"account_id":"a","scopes":["User.Read"]} x"#,
        #"{"account_id":"a","account_id":"b","scopes":["User.Read"]}"#, #"{"account_id":"a","scopes":["User.Read"],"scopes":"x"}"#,
        #"{"account_id":"a","scopes":["User.Read"],"authority":"https://login.microsoftonline.com/common"}"#, "", "{}", "[]", "3",
    ]

    @Test("A remembered reading equals the first reading, and a refused body is refused alike every time", arguments: bodies)
    func rememberedReadingAgrees(_ body: String) {
        let first = Self.read(body)
        for _ in 0..<2 {
            switch (first, Self.read(body)) {
            case (.success(let lhs), .success(let rhs)): #expect(Self.same(lhs.0, rhs.0) && lhs.1 == rhs.1, "\(body)")
            case (.failure(let lhs), .failure(let rhs)):
                #expect(lhs.status == rhs.status && lhs.detail == rhs.detail && lhs.extensions == rhs.extensions, "\(body)")
            default: Issue.record("the second reading differs: \(body)")
            }
        }
    }

    @Test("A member named twice is refused by the remembered reading too, naming the member")
    func duplicateMembers() throws {
        for body in [
            #"{"account_id":"first","account_id":"last","scopes":["User.Read"]}"#,
            #"{"account_id":"a","scopes":["User.Read"],"scopes":"User.Read"}"#,
        ] {
            for _ in 0..<2 {
                guard case .failure(let refused) = Self.read(body) else { Issue.record("accepted \(body)"); continue }
                #expect(refused.status == 400)
                #expect(refused.extensions["field"] == .string(body.contains(#""account_id":"last""#) ? "account_id" : "scopes"))
            }
        }
    }

    @Test("A correlation id is never remembered; a remembered body still needs a JSON content type")
    func memoisedBodies() throws {
        let plain = #"{"account_id":"memo-a","scopes":["User.Read","Mail.Read"]}"#
        let first = try Self.read(plain).get()
        let again = try Self.read(plain).get()
        #expect(Self.same(first.0, again.0) && first.1 == nil && again.1 == nil)
        for id in ["c-1", "c-2"] {
            let named = #"{"account_id":"memo-a","scopes":["User.Read"],"correlation_id":"\#(id)"}"#
            #expect(try Self.read(named).get().1 == id)
            #expect(try Self.read(named).get().1 == id)
        }
        for type in ["text/plain", "application/jsonx", "application/json; charset=latin1", "application/json;charset=\"UTF-16\""] {
            guard case .failure(let problem) = Self.read(plain, contentType: type) else { Issue.record("accepted \(type)"); continue }
            #expect(problem.status == 415)
        }
        for type in ["Application/JSON", "application/problem+json", "application/json; charset=utf-8"] {
            #expect(throws: Never.self) { try Self.read(plain, contentType: type).get() }
        }
    }

    @Test("Bodies that differ only in invalid UTF-8 are not read as one remembered body")
    func invalidUTF8NotConflated() {
        let valid = Array(#"{"account_id":"x\#u{FFFD}","scopes":["User.Read"]}"#.utf8)
        var invalid = Array(#"{"account_id":"x"#.utf8) + [0xFF] + Array(#"","scopes":["User.Read"]}"#.utf8)
        func reading(_ bytes: [UInt8]) -> Result<(SilentTokenRequest, String?), RelayError> {
            let request = HTTPRequest(method: "POST", path: "/v1/tokens/silent", headers: ["Content-Type": "application/json"], body: bytes)
            return Result { () throws(RelayError) in try TokenRoutes.read(request, authorities: Self.authorities) }
        }
        #expect((try? reading(valid).get()) != nil)
        #expect((try? reading(invalid).get()) == nil)
        invalid.removeAll()
    }

    // MARK: Token answer

    /// The token answer as a JSON value: the oracle the hand-written bytes are checked against.
    static func tokenJSON(_ result: SilentTokenResult, correlationId: String, allowPartial: Bool, owner: String? = nil) -> JSONValue {
        var members: [String: JSONValue] = [
            "access_token": .string(result.token.secret),
            "token_type": .string("Bearer"),
            "expires_on": .number(Double(result.token.expiresOn)),
            "ext_expires_on": .number(Double(result.token.extExpiresOn ?? result.token.expiresOn)),
            "scopes": .array(result.token.scopes.map(JSONValue.string)),
            "account": result.account.json(owner: owner),
            "source": .string(result.source.rawValue),
            "correlation_id": .string(correlationId),
        ]
        if allowPartial && !result.declinedScopes.isEmpty {
            members["declined_scopes"] = .array(result.declinedScopes.map(JSONValue.string))
        }
        if result.extendedLifetime { members["extended_lifetime"] = .bool(true) }
        return .object(members)
    }

    static func account(claims: String, externalIds: [String: String] = [:]) -> AccountRecord {
        AccountRecord(
            accountId: "acc-1", clientId: "client", environment: "login.microsoftonline.com", homeAccountId: "oid.tid", realm: "tid",
            localAccountId: "oid", username: "alice@contoso.example", name: "Alice \"Al\" Ö", authority: "https://login.microsoftonline.com/tid",
            authorityType: .aad, state: .active, idTokenClaims: claims, createdAt: "2026-01-01T00:00:00Z", lastUsedAt: nil,
            externalIds: externalIds)
    }

    @Test("The token answer's account shows the caller's owner's external id, written into the cached bytes", arguments: ["team-a", "team-b", nil])
    func tokenBodyExternalId(owner: String?) {
        let token = StoredAccessToken(
            accountId: "acc-1", environment: "login.microsoftonline.com", realm: "tid", clientId: "client", scopes: ["User.Read"], secret: "eyJ0",
            expiresOn: 1_900_000_000, extExpiresOn: nil, refreshOn: nil)
        // A claim value that spells the member must not be mistaken for it.
        let account = Self.account(claims: #"{"name":"\"external_id\":null"}"#, externalIds: ["team-a": #"crm "7" \ x"#, "team-c": "other"])
        let result = SilentTokenResult(token: token, account: account, source: .cache, declinedScopes: [])
        let bytes = TokenRoutes.tokenBody(result, correlationId: "c", allowPartial: false, owner: owner)
        #expect(String(decoding: bytes, as: UTF8.self) == Self.written(Self.tokenJSON(result, correlationId: "c", allowPartial: false, owner: owner)))
        let parsed = JSONValue.parse(String(decoding: bytes, as: UTF8.self))
        #expect(parsed?["account"]?["external_id"] == (owner == "team-a" ? .string(#"crm "7" \ x"#) : .null))
    }

    @Test("The token answer's bytes are those of its JSON value", arguments: [false, true])
    func tokenBody(allowPartial: Bool) {
        let token = StoredAccessToken(
            accountId: "acc-1", environment: "login.microsoftonline.com", realm: "tid", clientId: "client",
            scopes: ["User.Read", "https://graph.microsoft.com/Mail.Read"], secret: "eyJ0\"x\\y", expiresOn: 1_900_000_000,
            extExpiresOn: allowPartial ? nil : 1_900_003_600, refreshOn: nil)
        var result = SilentTokenResult(
            token: token, account: Self.account(claims: #"{"oid":"oid","tid":"tid","roles":["a","b"],"n":3,"nested":{"z":1,"a":null}}"#),
            source: .cache, declinedScopes: ["Mail.Send"])
        result.extendedLifetime = !allowPartial
        let bytes = TokenRoutes.tokenBody(result, correlationId: "corr\n\"id\"", allowPartial: allowPartial)
        #expect(
            String(decoding: bytes, as: UTF8.self) == Self.written(Self.tokenJSON(result, correlationId: "corr\n\"id\"", allowPartial: allowPartial)))
    }

    @Test("An account's claims are parsed once and its cached bytes match its JSON")
    func accountBytes() {
        let account = Self.account(claims: #"{"tid":"tid","name":"A"}"#)
        #expect(account.claims == .object(["tid": .string("tid"), "name": .string("A")]))
        #expect(account.json(owner: nil)["id_token_claims"] == account.claims)
        #expect(account.jsonBytes == JSONWriter.encode(account.json(owner: nil)))
        #expect(Self.account(claims: "not json").claims == .object([:]))
    }

    // MARK: Scopes, memory cache, caller, correlation id

    @Test("Remembered scope sets equal ScopeRules' and errors still name their field")
    func requestedScopes() throws {
        let memo = RequestedScopes()
        for _ in 0..<2 {
            #expect(
                try memo.normalize(scopes: ["User.Read", "mail.read"], resource: nil)
                    == ScopeRules.requested(scopes: ["User.Read", "mail.read"], resource: nil))
            #expect(try memo.normalize(scopes: nil, resource: "https://vault.azure.net").canonical == ["https://vault.azure.net/.default"])
            #expect(throws: ScopeError.self) { try memo.normalize(scopes: ["openid"], resource: nil) }
            #expect(throws: ScopeError.self) { try memo.normalize(scopes: [" "], resource: nil) }
            #expect(throws: ScopeError.self) { try memo.normalize(scopes: ["User.Read"], resource: "https://x") }
        }
        for index in 0..<(RequestedScopes.capacity + 5) {
            #expect(try memo.normalize(scopes: ["Scope\(index).Read"], resource: nil).canonical == ["Scope\(index).Read"])
        }
    }

    @Test("The memory cache serves a superset of the requested scopes, case-insensitively")
    func memoryCacheSuperset() {
        let cache = MemoryTokenCache()
        let token = StoredAccessToken(
            accountId: "a", environment: "env", realm: "r", clientId: "c", scopes: ["https://graph.microsoft.com/User.Read", "Mail.Read"],
            secret: "s", expiresOn: 100, extExpiresOn: nil, refreshOn: nil)
        cache.store(token, now: 0)
        #expect(cache.lookup(accountId: "a", environment: "env", realm: "r", scopes: ScopeSet(normalizing: ["user.read"])) == token)
        #expect(cache.lookup(accountId: "a", environment: "env", realm: "r", scopes: ScopeSet(normalizing: ["User.Read", "MAIL.READ"])) == token)
        #expect(cache.lookup(accountId: "a", environment: "env", realm: "r", scopes: ScopeSet(normalizing: ["Mail.Send"])) == nil)
        #expect(cache.lookup(accountId: "a", environment: "env", realm: "other", scopes: ScopeSet(normalizing: ["User.Read"])) == nil)
        let longer = StoredAccessToken(
            accountId: "a", environment: "env", realm: "r", clientId: "c", scopes: ["User.Read"], secret: "t", expiresOn: 200, extExpiresOn: nil,
            refreshOn: nil)
        cache.store(longer, now: 0)
        #expect(cache.lookup(accountId: "a", environment: "env", realm: "r", scopes: ScopeSet(normalizing: ["User.Read"])) == longer)  // later expiry wins
        let overlapping = StoredAccessToken(
            accountId: "a", environment: "env", realm: "r", clientId: "c", scopes: ["user.read"], secret: "u", expiresOn: 150, extExpiresOn: nil,
            refreshOn: nil)
        cache.store(overlapping, now: 0)  // same scope as `longer` (case-insensitive): replaces it
        #expect(cache.lookup(accountId: "a", environment: "env", realm: "r", scopes: ScopeSet(normalizing: ["User.Read"])) == overlapping)
    }

    @Test(
        "Bearer tokens are read as the general rule reads them",
        arguments: [
            ("Bearer trk_abc_def", "trk_abc_def"), ("bearer x", "x"), ("BEARER x", "x"), ("Bearer  x", "x"), ("Bearer x ", "x"),
            ("Bearer a b", "a b"), ("Bearer\tx", nil), ("Bearerx", nil), ("Bearer\u{0}x", nil), ("Bearer ", nil), ("Basic x", nil),
            (" Bearer x", "x"), ("Bearer \u{a0}x", "x"), ("Bearer é", "é"),
        ] as [(String, String?)])
    func bearer(_ header: String, _ expected: String?) {
        #expect(APIKeyAuthenticator.bearerToken(header).map(String.init) == expected)
    }

    @Test(
        "A client-request-id or X-Correlation-ID is taken only when it is printable ASCII of at most 128 bytes, as the body's correlation_id",
        arguments: [
            ("abc-123", true), ("  padded  ", true), ("a\u{1}b", false), ("a\u{7F}b", false), ("a\u{1B}[31mb", false), ("a\tb", false),
            ("a\r\nb", false), ("é", false), (String(repeating: "x", count: 128), true), (String(repeating: "x", count: 129), false),
        ] as [(String, Bool)])
    func headerCorrelationIds(_ value: String, _ taken: Bool) {
        // Control characters were taken and echoed in the answer's client-request-id.
        for name in ["client-request-id", "X-Correlation-ID"] {
            let id = AppHTTPHandler.correlationId(HTTPHeaders([(name, value)]))
            #expect((id == value.trimmingCharacters(in: .whitespaces)) == taken, "\(name): \(value.debugDescription) → \(id)")
        }
    }

    @Test(
        "Request-Timeout is decimal seconds above 0 and at most 120",
        arguments: [
            ("2", 2.0), (" 0.5 ", 0.5), ("120", 120.0), ("0x10", nil), ("1e1", nil), ("inf", nil), ("nan", nil), ("0", nil), ("-1", nil),
            ("121", nil), ("1.2.3", nil), ("", nil), ("00005", 5.0),
        ] as [(String, Double?)])
    func requestTimeout(_ text: String, _ expected: Double?) {
        // 0x10 and 1e1 were taken as 16 and 10 seconds.
        #expect((try? AppHTTPHandler.requestTimeout(HTTPHeaders([("Request-Timeout", text)]), default: 30)) == expected, "\(text.debugDescription)")
    }

    /// As the query integers say it: a number past the bound is "at most 120" however many digits
    /// it has (400 digits were "must be a positive number").
    @Test("Request-Timeout past 120 is 'at most 120 seconds' however many digits it has; other text is 'a positive number'")
    func requestTimeoutDetail() {
        func detail(_ text: String) -> String? {
            do {
                _ = try AppHTTPHandler.requestTimeout(HTTPHeaders([("Request-Timeout", text)]), default: 30)
                return nil
            } catch { return (error as? RelayError)?.detail }
        }
        for text in ["121", "1" + String(repeating: "0", count: 400), String(repeating: "9", count: 400) + ".5"] {
            #expect(detail(text) == "'Request-Timeout' may be at most 120 seconds.", "\(text.prefix(12))")
        }
        for text in ["0", "abc", "0x10", "-1", "0.0"] {
            #expect(detail(text) == "'Request-Timeout' must be a positive number of seconds.", "\(text)")
        }
    }

    @Test("New correlation ids are lower-case random version-4 UUIDs")
    func correlationIds() throws {
        var seen = Set<String>()
        for _ in 0..<200 {
            let id = AppHTTPHandler.newCorrelationId()
            let uuid = try #require(UUID(uuidString: id))
            #expect(uuid.uuidString.lowercased() == id)
            let bytes = Array(id.utf8)
            #expect(bytes[14] == UInt8(ascii: "4"))
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(bytes[19]))
            seen.insert(id)
        }
        #expect(seen.count == 200)
    }

    @Test("The silent-body memo reads a body once per exact bytes: a byte's difference is read again; a correlation_id is never remembered")
    func silentBodyMemo() throws {
        let memo = SilentBodyMemo()
        let authorities = try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false)
        var reads = 0
        func request(_ text: String) throws -> SilentTokenRequest {
            try memo.request(body: Array(text.utf8)) { bytes throws(RelayError) in
                reads += 1
                let body = try JSONBody(bytes: bytes)
                return (try TokenRoutes.parseSilent(body, authorities: authorities), try body.correlationId())
            }.0
        }
        let first = try request(#"{"account_id":"acc_1","scopes":["User.Read"]}"#)
        let again = try request(#"{"account_id":"acc_1","scopes":["User.Read"]}"#)
        #expect(reads == 1)
        #expect(again.scopes.canonical == first.scopes.canonical)
        let other = try request(#"{"account_id":"acc_2","scopes":["User.Read"]}"#)
        #expect(reads == 2)
        guard case .accountId(let id) = other.account else {
            Issue.record("not an account id: \(other.account)")
            return
        }
        #expect(id == "acc_2")
        for _ in 0..<2 { _ = try request(#"{"account_id":"acc_1","scopes":["User.Read"],"correlation_id":"c1"}"#) }
        #expect(reads == 4)
    }

    @Test("A JSON answer has one Content-Type, application/json, and keeps the other headers it was given")
    func jsonAnswerHeaders() {
        let answer = HTTPResponse.json(201, bytes: Array("{}".utf8), headers: ["content-type": "text/plain", "Location": "/v1/x"])
        #expect(answer.headers.values(for: "Content-Type") == ["application/json"])
        #expect(answer.headers["Location"] == "/v1/x")
        #expect(answer.headers.count == 2)
    }

    // MARK: Metrics

    @Test("Labels render sorted by name, values escaped (backslash, double quote, line feed); one label as it is")
    func labelRendering() {
        let metrics = Metrics()
        metrics.increment("tokenrelay_test_total", ["b": "2", "a": "x\\y\"z\nw", "c": "é"])
        metrics.increment("tokenrelay_test_total", ["only": "v\""])
        let text = metrics.render()
        #expect(text.contains(#"tokenrelay_test_total{a="x\\y\"z\nw",b="2",c="é"} 1"#))
        #expect(text.contains(#"tokenrelay_test_total{only="v\""} 1"#))
    }

    @Test("Counter handles add to the same series and render as increments do")
    func counterHandles() {
        let viaHandles = Metrics()
        let viaIncrement = Metrics()
        let ok = viaHandles.counter("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "200"])
        _ = viaHandles.counter("tokenrelay_http_requests_total", ["route": "/healthz", "status": "200"])  // never bumped: not shown
        _ = viaHandles.counter("tokenrelay_never_total")
        #expect(viaHandles.render() == viaIncrement.render())
        for _ in 0..<3 { ok.increment() }
        viaHandles.increment("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "200"])
        viaHandles.increment("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "404"])
        viaHandles.increment("tokenrelay_token_cache_total", ["outcome": "hit", "layer": "memory"], by: 2)
        for _ in 0..<4 { viaIncrement.increment("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "200"]) }
        viaIncrement.increment("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "404"])
        viaIncrement.increment("tokenrelay_token_cache_total", ["outcome": "hit", "layer": "memory"], by: 2)
        #expect(viaHandles.value("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "200"]) == 4)
        #expect(viaHandles.render() == viaIncrement.render())
        #expect(viaHandles.render().contains(#"tokenrelay_http_requests_total{route="/v1/tokens/silent",status="200"} 4"#))
        #expect(!viaHandles.render().contains("/healthz"))
        #expect(ok === viaHandles.counter("tokenrelay_http_requests_total", ["status": "200", "route": "/v1/tokens/silent"]))
    }

    @Test("Histogram handles render as observations through observe do, and add to them")
    func histogramHandles() {
        let viaHandle = Metrics()
        let viaObserve = Metrics()
        let series = viaHandle.histogram("tokenrelay_http_request_duration_seconds", ["route": "/v1/tokens/silent"])
        for seconds in [0.0001, 0.0005, 0.003, 0.2, 20] {
            series.observe(seconds)
            viaObserve.observe("tokenrelay_http_request_duration_seconds", ["route": "/v1/tokens/silent"], seconds: seconds)
        }
        viaHandle.observe("tokenrelay_http_request_duration_seconds", ["route": "/v1/tokens/silent"], seconds: 1)
        viaObserve.observe("tokenrelay_http_request_duration_seconds", ["route": "/v1/tokens/silent"], seconds: 1)
        #expect(viaHandle.render() == viaObserve.render())
        #expect(viaHandle.render().contains(#"tokenrelay_http_request_duration_seconds_count{route="/v1/tokens/silent"} 6"#))
    }

    /// A counter with labels had no sample until its first increment, so `increase()` missed that
    /// one and an alert on it could not fire for it (found by the new-user try).
    @Test("A counter's label values known up front show 0 from start-up, then count; unknown values appear when they happen")
    func knownSeriesStartAtZero() {
        let metrics = Metrics()
        metrics.describeOperations()
        let text = metrics.render()
        for series in [
            #"tokenrelay_sts_requests_total{grant="refresh_token",outcome="interaction_required"} 0"#,
            #"tokenrelay_sts_requests_total{grant="urn:ietf:params:oauth:grant-type:jwt-bearer",outcome="success"} 0"#,
            #"tokenrelay_throttled_total{reason="upstream",target="sts"} 0"#,
            #"tokenrelay_token_cache_total{layer="memory",outcome="hit"} 0"#,
            #"tokenrelay_refresh_total{outcome="takeover_refused"} 0"#,
            #"tokenrelay_refresh_claims_total{result="taken_over"} 0"#,
            #"tokenrelay_grant_token_cache_total{grant="obo",layer="none",outcome="miss"} 0"#,
            "tokenrelay_refresh_coalesced_total 0",
            "tokenrelay_refresh_lease_waits_total 0",
        ] {
            #expect(text.contains(series + "\n"), "\(series)")
        }
        // Routes and statuses are not known up front: none is made up.
        #expect(!text.contains("tokenrelay_http_requests_total{"))
        metrics.increment("tokenrelay_refresh_total", ["outcome": "takeover_refused"])
        metrics.memoryCacheHits.increment()
        let after = metrics.render()
        #expect(after.contains(#"tokenrelay_refresh_total{outcome="takeover_refused"} 1"#))
        #expect(after.contains(#"tokenrelay_token_cache_total{layer="memory",outcome="hit"} 1"#))
        #expect(after.components(separatedBy: "tokenrelay_refresh_total{outcome=\"takeover_refused\"}").count == 2, "one sample per series")
    }

    @Test("Label values are escaped per the exposition format")
    func labelEscaping() {
        let metrics = Metrics()
        metrics.increment("tokenrelay_retries_total", ["target": "a\\b\"c\nd"])
        #expect(metrics.render().contains(#"tokenrelay_retries_total{target="a\\b\"c\nd"} 1"#))
    }
}
