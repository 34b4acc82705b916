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
import TokenRelayUpstream

@Suite("Request bodies name the offending field")
struct JSONBodyTests {
    static func request(_ body: String, contentType: String = "application/json") -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/v1/tokens/silent", headers: ["Content-Type": contentType], body: Array(body.utf8))
    }

    static func problem(_ body: String, contentType: String = "application/json") -> RelayError? {
        do {
            let parsed = try JSONBody(request(body, contentType: contentType))
            _ = try TokenRoutes.parseSilent(parsed, authorities: try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false))
            return nil
        } catch {
            return error as? RelayError
        }
    }

    /// `min_ttl_s` of 1e20 or 99999999999999999999 was "must be an integer" (found by the new-user
    /// try): an integer field says whether the value is no integer or one out of its range.
    @Test("An integer field says 'must be an integer' for a fraction or text, 'out of range' for a whole number past its range, however large")
    func integerOrOutOfRange() {
        func detail(_ value: String) -> String? {
            Self.problem(#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":\#(value)}"#)?.detail
        }
        let outOfRange = "'min_ttl_s' is out of range: it must be from 0 to 86400 seconds."
        for value in ["1e20", "99999999999999999999", "1e15", "86401", "-1", "-1e300", "9223372036854775808"] {
            #expect(detail(value) == outOfRange, "\(value)")
        }
        for value in ["1.5", "\"60\"", "true", "[1]", "0.000001"] {
            #expect(detail(value) == "'min_ttl_s' must be an integer.", "\(value)")
        }
        for value in ["0", "86400", "60.0", "null"] {
            #expect(detail(value) == nil, "\(value)")
        }
        #expect(Self.problem(#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1e20}"#)?.extensions["field"] == .string("min_ttl_s"))
    }

    @Test("A query integer (limit, wait) says 'must be an integer' for other text, 'out of range' for digits past its range")
    func queryIntegerOrOutOfRange() {
        func detail(_ limit: String) -> String? {
            do {
                _ = try HTTPRequest(method: "GET", path: "/v1/accounts", query: [("limit", limit)]).pageLimit()
                return nil
            } catch {
                #expect(error.extensions["field"] == .string("limit"))
                return error.detail
            }
        }
        for text in ["0", "201", "-5", "99999999999999999999", "-0", "000", "0201", "-05"] {
            #expect(detail(text) == "'limit' is out of range: it must be from 1 to 200.", "\(text)")
        }
        for text in ["", "abc", "+5", " 5", "5.0", "1e2", "-", "0x5", "5 "] {
            #expect(detail(text) == "'limit' must be an integer (decimal digits) from 1 to 200.", "\(text)")
        }
        #expect(detail("200") == nil && detail("1") == nil)
        // Leading zeros are decimal digits, read as Request-Timeout reads them (`02` was refused as no integer).
        #expect(detail("02") == nil && detail("0200") == nil)
        #expect((try? HTTPRequest(method: "GET", path: "/v1/accounts", query: [("limit", "007")]).pageLimit()) == 7)
        #expect((try? IntegerText.parse("000", field: "wait", in: 0...120)) == 0)
        #expect((try? IntegerText.parse("0", field: "wait", in: 0...120)) == 0)
    }

    @Test("Content types other than JSON are 415")
    func unsupportedMediaType() {
        #expect(Self.problem("{}", contentType: "text/plain")?.code == .unsupportedMediaType)
        #expect(Self.problem(#"{"account_id":"a","scopes":["User.Read"]}"#, contentType: "application/json; charset=utf-8") == nil)
    }

    /// RFC 8259 §8.1: JSON exchanged between systems is UTF-8. A body declared in another charset
    /// was read as UTF-8 all the same (found by the new-user try).
    @Test("A charset other than UTF-8 is 415 naming Content-Type, quoted or not, any case, on any JSON media type; other parameters are ignored")
    func charsetParameter() {
        let body = #"{"account_id":"a","scopes":["User.Read"]}"#
        for type in [
            "application/json; charset=latin1", "application/json;charset=ISO-8859-1", "application/json; CHARSET=\"utf-16\"",
            "application/problem+json; charset=us-ascii", "application/json; foo=bar; charset=utf8", "application/json; charset=",
            "application/json; charset=\"utf-8", "application/json; charset",
        ] {
            let problem = Self.problem(body, contentType: type)
            #expect(problem?.code == .unsupportedMediaType, "\(type)")
            #expect(problem?.extensions["field"] == .string("Content-Type"), "\(type)")
        }
        for type in [
            "application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON; Charset=\"Utf-8\"",
            "application/json ; charset = utf-8", "application/json; foo=bar", "application/json;", "application/problem+json; charset=utf-8",
        ] {
            #expect(Self.problem(body, contentType: type) == nil, "\(type)")
        }
    }

    /// An empty identifier named nothing and was looked up: `account_id: ""` on a sign-in was
    /// 404 `account_not_found` (found by the new-user try).
    @Test("An empty identifier in a body is 400 naming it, on every route that takes one")
    func emptyIdentifiers() {
        for field in ["account_id", "home_account_id", "username"] {
            let problem = Self.problem(#"{"\#(field)":"","scopes":["User.Read"]}"#)
            #expect(problem?.code == .invalidRequest && problem?.extensions["field"] == .string(field), "\(field): \(String(describing: problem))")
        }
        let tenant = Self.problem(#"{"username":"a@b.example","tenant_id":"","scopes":["User.Read"]}"#)
        #expect(tenant?.code == .invalidRequest && tenant?.extensions["field"] == .string("tenant_id"), "\(String(describing: tenant))")
    }

    /// `JSONSerialization` read these, and RFC 8259 refuses them: a duplicate member in UTF-32 went
    /// past the duplicate check (it reads UTF-8) and the last value was used.
    @Test("Bodies in UTF-16 or UTF-32, or with a comma before } or ], are 400 naming body; commas inside strings are fine")
    func strictText() throws {
        let duplicate = #"{"account_id":"carol","account_id":"alice","scopes":["User.Read"]}"#
        func problem(_ bytes: [UInt8]) -> RelayError? {
            do {
                _ = try JSONBody(bytes: bytes)
                return nil
            } catch { return error }
        }
        let utf16LE = duplicate.utf16.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
        let utf16BE: [UInt8] = [0xFE, 0xFF] + duplicate.utf16.flatMap { [UInt8(truncatingIfNeeded: $0 >> 8), UInt8(truncatingIfNeeded: $0)] }
        let utf32LE = duplicate.unicodeScalars.flatMap { scalar in (0..<4).map { UInt8(truncatingIfNeeded: scalar.value >> (8 * $0)) } }
        let utf32BE = duplicate.unicodeScalars.flatMap { scalar in (0..<4).reversed().map { UInt8(truncatingIfNeeded: scalar.value >> (8 * $0)) } }
        let byteOrderMark: [UInt8] = [0xFF, 0xFE, 0x7B, 0x7D]
        // A NUL after UTF-8 text is no other encoding: "not valid JSON" (``NotJSONTextTests``).
        for bytes in [utf16LE, utf16BE, utf32LE, utf32BE, byteOrderMark] {
            let refused = try #require(problem(bytes), "\(bytes.prefix(8))")
            #expect(refused.extensions["field"] == .string("body"))
            #expect(refused.detail.contains("UTF-8"), "\(refused.detail)")
        }
        for text in [#"{"account_id":"a","scopes":["User.Read"],}"#, #"{"scopes":["User.Read",]}"#, "{\"a\":[1 ,\n ]}"] {
            let refused = try #require(problem(Array(text.utf8)), "\(text)")
            #expect(refused.extensions["field"] == .string("body"), "\(text)")
            #expect(refused.detail.contains("comma"), "\(refused.detail)")
        }
        #expect(problem(Array(#"{"a":",}","b":[",]"],"c":"\",}"}"#.utf8)) == nil)
        #expect(problem(Array(#"{"a":[1,2],"b":{}}"#.utf8)) == nil)
    }

    /// A body nested past `JSONSerialization`'s depth was "not valid JSON" (new-user try).
    @Test("Nesting past 512 levels is 400 naming the top-level member it is in (body when the body is no object); 512 levels are read")
    func nestingDepth() throws {
        func problem(_ text: String) -> RelayError? {
            do {
                _ = try JSONBody(bytes: Array(text.utf8))
                return nil
            } catch { return error }
        }
        func nested(_ levels: Int) -> String { String(repeating: "[", count: levels) + String(repeating: "]", count: levels) }
        #expect(problem(#"{"a":1,"claims":\#(nested(511))}"#) == nil)
        let deep = try #require(problem(#"{"a":{"b":"{[["},"claims":\#(nested(512)),"z":1}"#))
        #expect(deep.extensions["field"] == .string("claims"))
        #expect(deep.detail == "'claims' is nested deeper than 512 levels of objects and arrays.")
        #expect(try #require(problem(nested(513))).extensions["field"] == .string("body"))
        #expect(try #require(problem(#"{"a\u0062":\#(nested(600))}"#)).extensions["field"] == .string("body"))
    }

    @Test(
        "Each malformed body is 400 naming its field",
        arguments: [
            (#"{"#, "body"),
            (#"[1]"#, "body"),
            (#"{"scopes":["User.Read"]}"#, "account_id"),
            (#"{"account_id":"a","username":"u","scopes":["User.Read"]}"#, "account_id"),
            (#"{"account_id":7,"scopes":["User.Read"]}"#, "account_id"),
            (#"{"account_id":"a","scopes":"User.Read"}"#, "scopes"),
            (#"{"account_id":"a","scopes":["User.Read"],"force_refresh":"yes"}"#, "force_refresh"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":-1}"#, "min_ttl_s"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1.5}"#, "min_ttl_s"),
            // Out of a Double's range: `JSONSerialization` refuses the whole text ("not valid JSON", `body`, before).
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1e400}"#, "min_ttl_s"),
            (#"{"account_id":"a","tenant_id":"t","scopes":["User.Read"]}"#, "tenant_id"),
            (#"{"account_id":"a","scopes":["User.Read"],"extra":1}"#, "extra"),
            (#"{"account_id":"a","scopes":["User.Read"],"authority":"https://evil.example/x"}"#, "authority"),
            (#"{"account_id":"a"}"#, "scopes"),
            (#"{"account_id":"a","scopes":["User.Read"],"resource":"https://graph.microsoft.com"}"#, "resource"),
        ])
    func namedField(body: String, field: String) {
        let problem = Self.problem(body)
        #expect(problem != nil)
        #expect(problem?.extensions["field"] == .string(field), "\(String(describing: problem))")
        #expect(problem?.status == 400)
    }

    @Test("A valid body becomes a request with normalised scopes")
    func valid() throws {
        let body = try JSONBody(
            Self.request(
                #"{"username":"Alice@Contoso.example","tenant_id":"t1.example","scopes":["https://graph.microsoft.com/User.Read","openid"],"min_ttl_s":600,"allow_partial":true}"#
            ))
        let request = try TokenRoutes.parseSilent(body, authorities: try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false))
        #expect(request.account == .username("Alice@Contoso.example", tenantId: "t1.example"))
        #expect(request.scopes.canonical == ["User.Read"])
        #expect(request.minTTLSeconds == 600)
        #expect(request.allowPartial)
    }
}

@Suite("A member named twice is refused, naming it (behaviour §4.5)")
struct DuplicateMemberTests {
    static func field(_ body: String) -> String? {
        do {
            _ = try JSONBody(bytes: Array(body.utf8))
            return nil
        } catch {
            return error.extensions["field"].flatMap { if case .string(let name) = $0 { name } else { nil } }
        }
    }

    @Test(
        "Each repeated member is named by its path",
        arguments: [
            (#"{"scopes":["User.Read"],"scopes":["Mail.Read"]}"#, "scopes"),
            // The same value twice is still two members: the count, not the values, tells.
            (#"{"account_id":"a","scopes":["User.Read"],"account_id":"a"}"#, "account_id"),
            (#"{"account_id":"a","claims":{"access_token":{},"access_token":{}}}"#, "claims.access_token"),
            (#"{"items":[{"name":"x"},{"name":"y","name":"z"}]}"#, "items.1.name"),
            // A name spelled with escapes is still the same name.
            (#"{"scopes":[],"sc\u006fpes":[]}"#, "scopes"),
            (#"{"a\"b":1,"a\u0022b":2}"#, #"a"b"#),
            (#"{"x":"say \"hi\"","x":"again"}"#, "x"),
        ])
    func named(_ body: String, _ member: String) {
        #expect(Self.field(body) == member, "\(body)")
    }

    @Test(
        "Objects without a repeated member are read as before",
        arguments: [
            #"{"account_id":"a","scopes":["User.Read"]}"#,
            #"{"items":[{"name":"x"},{"name":"y"}]}"#,
            #"{"a":{"name":1},"b":{"name":2}}"#,
            #"{"quote":"a \"quoted\" word","other":"\u0022"}"#,
            #"{"a\"b":1,"a\"c":2}"#,
        ])
    func accepted(_ body: String) {
        #expect(Self.field(body) == nil, "\(body)")
    }
}

@Suite("A number no Double holds is named by its member's path (behaviour §4.5)")
struct OutOfRangeNumberTests {
    @Test(
        "Each member holding a number out of range is named; text that is not JSON is still body",
        arguments: [
            (#"{"min_ttl_s":1e400}"#, "min_ttl_s"),
            (#"{"min_ttl_s":-1E+400,"account_id":"a"}"#, "min_ttl_s"),
            (#"{"a":"1e400","b":true,"c":null,"d":[1,2,{"e":-2e999}]}"#, "d.2.e"),
            (#"{"scopes":["User.Read",1e400]}"#, "scopes.1"),
            // Two: the first in sorted order, whatever the hashing.
            (#"{"z":1e400,"m":{"x":1},"b":9e999}"#, "b"),
            (#"{"min_ttl_s":1e400"#, "body"),
            (#"{"min_ttl_s":1e400,}"#, "body"),
            ("1e400", "body"),
        ])
    func named(_ body: String, _ field: String) {
        #expect(DuplicateMemberTests.field(body) == field, "\(body)")
    }
}

/// A `\u` escape of half a surrogate pair makes `JSONSerialization` refuse the whole text, and the
/// walk that names out-of-range numbers named the member as "a number out of range" (new-user
/// attack: `{"account_id": "\ud800", ...}` on the silent route).
@Suite("A string with a lone surrogate escape is named by its member, as not Unicode (behaviour §4.5)")
struct LoneSurrogateTests {
    @Test(
        "Each member holding a lone surrogate is named, and the detail says what is wrong with it",
        arguments: [
            (#"{"account_id":"\ud800","scopes":["User.Read"]}"#, "account_id"),
            (#"{"account_id":"a","scopes":["\udc00"]}"#, "scopes.0"),
            (#"{"claims":{"x":"a\ud83dz"}}"#, "claims.x"),
        ])
    func named(_ body: String, _ field: String) {
        do {
            _ = try JSONBody(bytes: Array(body.utf8))
            Issue.record("accepted: \(body)")
        } catch {
            #expect(error.extensions["field"] == .string(field), "\(body)")
            #expect(!error.detail.contains("number"), "\(body): \(error.detail)")
            #expect(error.detail.contains("surrogate"), "\(body): \(error.detail)")
        }
    }

    @Test("A valid surrogate pair is read; a number out of range is still called one")
    func pairsAndNumbers() throws {
        let body = try JSONBody(bytes: Array(#"{"name":"\ud83d\ude00"}"#.utf8))
        #expect(body.members["name"] == .string("\u{1F600}"))
        do {
            _ = try JSONBody(bytes: Array(#"{"a":"\ud800","b":1e400}"#.utf8))
            Issue.record("accepted")
        } catch {
            #expect(error.extensions["field"] == .string("a"))
        }
        do {
            _ = try JSONBody(bytes: Array(#"{"min_ttl_s":1e400}"#.utf8))
            Issue.record("accepted")
        } catch {
            #expect(error.detail == "'min_ttl_s' is a number out of range.")
        }
    }
}

/// `JSONSerialization` refuses these texts, and the walk that names a number out of range or a
/// lone surrogate took each for one: a raw tab in a scope was "'scopes.0' is not Unicode text",
/// `1.` "'min_ttl_s' is a number out of range", a trailing NUL "not UTF-8" (new-user attack).
@Suite("Text that is no JSON is 400 naming body and says why, not blamed on a member (behaviour §4.5)")
struct NotJSONTextTests {
    static func problem(_ bytes: [UInt8]) -> RelayError? {
        do {
            _ = try JSONBody(bytes: bytes)
            return nil
        } catch { return error }
    }

    @Test(
        "Raw control characters in strings, unknown escapes, numbers outside RFC 8259 §6, a NUL and a lone surrogate in a name",
        arguments: [
            ("{\"account_id\":\"a\",\"scopes\":[\"User.Read\tMail.Read\"]}", "control character"),
            ("{\"account_id\":\"a\",\"scopes\":[\"User.Read\nMail.Read\"]}", "control character"),
            ("{\"account_id\":\"a\u{1F}\",\"scopes\":[\"User.Read\"]}", "control character"),
            (#"{"account_id":"\x41","scopes":["User.Read"]}"#, "escape"),
            (#"{"account_id":"\u12","scopes":["User.Read"]}"#, "escape"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1.}"#, "'1.' is not a JSON number"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":-}"#, "'-' is not a JSON number"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1e}"#, "'1e' is not a JSON number"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":00}"#, "'00' is not a JSON number"),
            (#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":-01}"#, "'-01' is not a JSON number"),
            (#"{"min_ttl_s":.5}"#, "'.5' is not a JSON number"),
            (#"{"min_ttl_s":+1}"#, "'+1' is not a JSON number"),
            (#"{"claims":{"x":[1,1.e5]}}"#, "'1.e5' is not a JSON number"),
            ("{\"account_id\":\"a\",\"scopes\":[\"User.Read\"]}\u{0}", "NUL"),
            (#"{"\ud800":1}"#, "member name is not Unicode text"),
            (#"{"claims":{"a\udc00b":1}}"#, "member name is not Unicode text"),
        ])
    func named(_ text: String, _ reason: String) throws {
        let refused = try #require(Self.problem(Array(text.utf8)), "\(text)")
        #expect(refused.extensions["field"] == .string("body"), "\(text): \(refused)")
        #expect(refused.detail.hasPrefix("The request body is not valid JSON"), "\(text): \(refused.detail)")
        #expect(refused.detail.contains(reason), "\(text): \(refused.detail)")
        #expect(!refused.detail.contains("range") && !refused.detail.contains("UTF-8"), "\(text): \(refused.detail)")
    }

    @Test("Every token RFC 8259 allows is still read, and the cases the member walk was written for still name their member")
    func validTokensAndNamedMembers() throws {
        let body = try JSONBody(bytes: Array(#"{"a":[0,-0,1.5,-0.5e+3,2E-2,10],"b":"\t\"\\\/\b\f\n\r\u00e9\ud83d\ude00","\ud83d\ude00":1}"#.utf8))
        #expect(body.members["a"] == .array([.number(0), .number(0), .number(1.5), .number(-500), .number(0.02), .number(10)]))
        #expect(body.members["\u{1F600}"] == .number(1))
        let surrogate = try #require(Self.problem(Array(#"{"account_id":"a","scopes":["\udc00"]}"#.utf8)))
        #expect(surrogate.extensions["field"] == .string("scopes.0") && surrogate.detail.contains("surrogate"), "\(surrogate)")
        let range = try #require(Self.problem(Array(#"{"min_ttl_s":-1E+400}"#.utf8)))
        #expect(range.extensions["field"] == .string("min_ttl_s") && range.detail == "'min_ttl_s' is a number out of range.", "\(range)")
    }
}
