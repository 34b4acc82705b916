import Testing

@testable import IdentityCore

@Suite("Scopes (behaviour §1, §12 canonical)")
struct ScopeTests {
    @Test("canonical: Graph short, others full, OIDC removed, sorted and de-duplicated case-insensitively")
    func canonical() {
        let set = ScopeSet(normalizing: [
            "https://graph.microsoft.com/User.Read", "user.read", "Mail.Read", "openid", "PROFILE", "offline_access", "email",
            "HTTPS://GRAPH.MICROSOFT.COM/Calendars.Read",
        ])
        #expect(set.canonical == ["Calendars.Read", "Mail.Read", "User.Read"])
        #expect(set.cacheKey == "calendars.read mail.read user.read")
        #expect(set.resource == "https://graph.microsoft.com")
        #expect(
            set.wireValue
                == "https://graph.microsoft.com/Calendars.Read https://graph.microsoft.com/Mail.Read https://graph.microsoft.com/User.Read openid profile offline_access"
        )
        #expect(set.resourceWireValue.hasPrefix("https://graph.microsoft.com/Calendars.Read"))
        #expect(ScopeSet.empty.wireValue == "openid profile offline_access")
        #expect(ScopeSet(normalizing: ["api://x//.default"]).wireValue == "api://x//.default openid profile offline_access")
        #expect(ScopeSet(normalizing: ["User.Read", "Mail.Read"]) == ScopeSet(normalizing: ["mail.read", "USER.READ"]))
    }

    @Test("other resources keep full URIs; /.default of Graph stays a full URI")
    func otherResources() {
        #expect(ScopeSet(normalizing: ["api://1111/access_as_user"]).canonical == ["api://1111/access_as_user"])
        #expect(ScopeSet(normalizing: ["api://1111/access_as_user"]).resource == "api://1111")
        #expect(ScopeSet(normalizing: ["https://graph.microsoft.com/.default"]).canonical == ["https://graph.microsoft.com/.default"])
        #expect(ScopeSet(normalizing: [".default"]).canonical == ["https://graph.microsoft.com/.default"])
    }

    @Test("superset is case-insensitive and prefix-insensitive")
    func superset() {
        let cached = ScopeSet(normalizing: ["User.Read", "Mail.Read"])
        #expect(cached.isSuperset(of: ScopeSet(normalizing: ["https://graph.microsoft.com/user.read"])))
        #expect(cached.isSuperset(of: cached))
        #expect(!cached.isSuperset(of: ScopeSet(normalizing: ["Files.Read"])))
        #expect(ScopeSet.empty.isEmpty)
    }

    @Test("requested: scopes are normalised, several per element are split")
    func requestedOK() throws {
        let set = try ScopeRules.requested(scopes: ["User.Read Mail.Read", "openid"], resource: nil)
        #expect(set.canonical == ["Mail.Read", "User.Read"])
    }

    @Test("requested: legacy resource becomes /.default, // when it ends with a slash")
    func legacyResource() throws {
        #expect(
            try ScopeRules.requested(scopes: nil, resource: "https://management.core.windows.net/").wireValue
                .hasPrefix("https://management.core.windows.net//.default "))
        #expect(
            try ScopeRules.requested(scopes: nil, resource: "https://graph.microsoft.com").canonical
                == ["https://graph.microsoft.com/.default"])
        #expect(try ScopeRules.requested(scopes: nil, resource: "api://1111").canonical == ["api://1111/.default"])
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        let scopes: [String]?
        let resource: String?
        let field: String
        var testDescription: String { "scopes=\(scopes ?? []) resource=\(resource ?? "nil") → \(field)" }
    }

    @Test(
        "requested: invalid combinations are invalid_scope before any network call",
        arguments: [
            Invalid(scopes: ["User.Read"], resource: "https://graph.microsoft.com", field: "resource"),
            Invalid(scopes: nil, resource: nil, field: "scopes"),
            Invalid(scopes: [], resource: nil, field: "scopes"),
            Invalid(scopes: ["openid", "profile", "offline_access", "email"], resource: nil, field: "scopes"),
            Invalid(scopes: ["User.Read", "api://1111/read"], resource: nil, field: "scopes"),
            Invalid(scopes: ["https://graph.microsoft.com/.default", "User.Read"], resource: nil, field: "scopes"),
            Invalid(scopes: ["User.Read", " "], resource: nil, field: "scopes"),
            Invalid(scopes: nil, resource: "  ", field: "resource"),
            Invalid(scopes: nil, resource: "https://graph.microsoft.com/.default", field: "resource"),
            Invalid(scopes: nil, resource: "api://1111/.DEFAULT", field: "resource"),
        ])
    func invalid(_ input: Invalid) {
        #expect {
            _ = try ScopeRules.requested(scopes: input.scopes, resource: input.resource)
        } throws: { error in
            (error as? ScopeError)?.field == input.field
        }
    }

    /// Each went to the platform (new-user attack): `/.default` on the app route was granted a
    /// token whose `aud` was empty; `https://graph.microsoft.com/` redeemed a refresh token.
    @Test(
        "requested: a scope naming no resource or host, or no permission, is invalid_scope naming scopes and its index",
        arguments: [
            (["/.default"], 0), (["https:///User.Read"], 0), (["api://"], 0), (["//x/.default"], 0), (["https://graph.microsoft.com/"], 0),
            (["User.Read", "Mail.Read https://graph.microsoft.com/"], 1), (["://x/.default"], 0), (["User.Read/"], 0), (["/x/.default"], 0),
        ])
    func malformedScope(_ scopes: [String], _ index: Int) {
        #expect {
            _ = try ScopeRules.requested(scopes: scopes, resource: nil)
        } throws: { error in
            guard let error = error as? ScopeError else { return false }
            return error.field == "scopes" && error.detail.hasPrefix("scopes[\(index)] '")
        }
    }

    @Test(
        "requested: a legacy resource naming no host is invalid_scope naming resource",
        arguments: ["https://", "/", "//x", "api:/"])
    func malformedResource(_ resource: String) {
        do {
            _ = try ScopeRules.requested(scopes: nil, resource: resource)
            Issue.record("accepted: \(resource)")
        } catch {
            #expect(error.field == "resource" && error.detail.hasPrefix("resource '\(resource)'"), "\(error)")
        }
    }

    /// The forms "Scopes and permissions in the Microsoft identity platform" and the daemon
    /// scenario's `//.default` note document.
    @Test(
        "requested: every documented scope form is still accepted",
        arguments: [
            ["User.Read"], ["https://graph.microsoft.com/User.Read"], ["api://00001111-aaaa-2222-bbbb-3333cccc4444/.default"],
            ["00001111-aaaa-2222-bbbb-3333cccc4444/.default"], ["offline_access", "openid", "User.Read"], ["https://database.windows.net//.default"],
            ["https://contoso.onmicrosoft.com/api/read"], ["api://contoso.com/productsapi/read"], [".default"], ["urn:contoso:api/read"],
            ["https://graph.microsoft.com/.default"], ["api://1111/access_as_user"],
        ])
    func documentedForms(_ scopes: [String]) throws {
        #expect(!(try ScopeRules.requested(scopes: scopes, resource: nil)).isEmpty)
    }

    @Test("granted: empty scope means the requested set; unprefixed means the requested resource")
    func granted() {
        let graph = ScopeSet(normalizing: ["User.Read"])
        #expect(ScopeRules.granted(nil, requested: graph) == graph)
        #expect(ScopeRules.granted("  ", requested: graph) == graph)
        let api = ScopeSet(normalizing: ["api://1111/read"])
        #expect(ScopeRules.granted("read openid", requested: api).canonical == ["api://1111/read"])
        #expect(ScopeRules.granted("api://1111/read", requested: api).canonical == ["api://1111/read"])
    }

    @Test("granted: a /.default request finds its cache entry again and reports no declines")
    func defaultScope() throws {
        let requested = try ScopeRules.requested(scopes: ["https://graph.microsoft.com/.default"], resource: nil)
        let granted = ScopeRules.granted("User.Read Mail.Read openid profile", requested: requested)
        #expect(granted.isSuperset(of: requested))
        #expect(granted.canonical == ["https://graph.microsoft.com/.default", "Mail.Read", "User.Read"])
        #expect(ScopeRules.declined(requested: requested, granted: ScopeRules.granted("Mail.Read", requested: requested)).isEmpty)
    }

    @Test("duplicates go however many scopes come first (a few compared in a list, more through a set); OIDC scopes in any case")
    func manyDuplicates() {
        let names = (1...12).map { "Scope\($0).Read" }
        let set = ScopeSet(normalizing: names + names.map { $0.uppercased() } + ["openid", "Offline_Access", "EMAIL profile"] + names.reversed())
        #expect(set.canonical == names.sorted { $0.lowercased() < $1.lowercased() })
        let few = ScopeSet(normalizing: ["b", "A", "B", "https://graph.microsoft.com/a", "api://x/C", "API://X/c"])
        #expect(few.canonical == ["A", "api://x/C", "b"])
    }

    @Test("A scope splits at its last / as a Character search finds it; ASCII text is searched on its bytes since issue 30")
    func lastSlash() {
        let samples = [
            "User.Read", "https://graph.microsoft.com/User.Read", "HTTPS://GRAPH.MICROSOFT.COM/Mail.Send", "https://management.core.windows.net//.default",
            "api://1111/read/write", "/", "a/", "/b", "a\r\n/b", "é/x", "x/é", "a/\u{301}b", "\u{600}/b", "a\u{200D}/b",
        ]
        for text in samples {
            let scope = Scope(text, defaultResource: "api://d")
            let reference: (resource: String, name: String) =
                if let slash = text.lastIndex(of: "/") {
                    (String(text[..<slash]), String(text[text.index(after: slash)...]))
                } else {
                    ("api://d", text)
                }
            let resource = reference.resource.lowercased() == Scope.graph ? Scope.graph : reference.resource
            #expect(scope.resource == resource && scope.name == reference.name, "\(text.debugDescription)")
        }
    }

    @Test("granted: the response's scope splits at each space however many, as before (issue 30 splits ASCII text on its bytes)")
    func grantedSplitsAtSpaces() {
        let api = ScopeSet(normalizing: ["api://1111/read"])
        #expect(ScopeRules.granted("  read   write openid ", requested: api).canonical == ["api://1111/read", "api://1111/write"])
        // Only a space splits here (a tab splits later, when normalised, unprefixed: Graph's), as before.
        #expect(ScopeRules.granted("read\twrite", requested: api).canonical == ["api://1111/read", "write"])
        #expect(ScopeRules.granted("réad write", requested: api).canonical == ["api://1111/réad", "api://1111/write"])
        // A combining mark after a space makes one Character of the two: not split there, so not
        // prefixed with the requested resource either (normalising splits it later), as before.
        #expect(ScopeRules.granted("read \u{301}write", requested: api).canonical == ["api://1111/read", "\u{301}write"])
    }

    @Test("A granted set normalised again from its canonical scopes is the same set (a refresh's write takes it as it is)")
    func grantedNormalisedAgain() throws {
        let requests = [
            ScopeSet(normalizing: ["User.Read"]), ScopeSet(normalizing: ["api://1111/read"]),
            try ScopeRules.requested(scopes: ["https://graph.microsoft.com/.default"], resource: nil),
            ScopeSet(normalizing: ["https://management.core.windows.net//.default"]),
        ]
        let answers: [String?] = [
            nil, "", "User.Read Mail.Read openid profile offline_access", "read write", "HTTPS://GRAPH.MICROSOFT.COM/Files.Read api://1111/x",
            "https://management.core.windows.net//user_impersonation", "a/b/c d//e",
        ]
        for requested in requests {
            for scope in answers {
                let granted = ScopeRules.granted(scope, requested: requested)
                let again = ScopeSet(normalizing: granted.canonical)
                #expect(again.canonical == granted.canonical && again.cacheKey == granted.cacheKey && again.wireValue == granted.wireValue)
            }
        }
    }

    @Test("declined: never the OIDC scopes (B2C grants no offline_access back)")
    func declinedNeverOIDC() {
        let requested = ScopeSet(normalizing: ["https://contoso.onmicrosoft.com/api/read", "offline_access", "openid"])
        let granted = ScopeRules.granted("https://contoso.onmicrosoft.com/api/read", requested: requested)
        #expect(ScopeRules.declined(requested: requested, granted: granted).isEmpty)
    }
}

@Suite("Scope request bounds")
struct ScopeBoundsTests {
    @Test("Too many scopes, an oversized scope or a control character is invalid_scope before any network call")
    func bounds() {
        let many = (0..<51).map { "S\($0)" }
        #expect(throws: ScopeError(field: "scopes", detail: "at most 50 scopes may be requested at once")) {
            try ScopeRules.requested(scopes: many, resource: nil)
        }
        #expect(throws: ScopeError.self) { try ScopeRules.requested(scopes: [String(repeating: "a", count: 257)], resource: nil) }
        #expect(throws: ScopeError.self) { try ScopeRules.requested(scopes: ["User.Read\u{0}"], resource: nil) }
        #expect(throws: ScopeError.self) { try ScopeRules.requested(scopes: nil, resource: "https://x/" + String(repeating: "a", count: 300)) }
        #expect((try? ScopeRules.requested(scopes: (0..<50).map { "S\($0)" }, resource: nil))?.canonical.count == 50)
        // The bound counts scopes, not elements: an element may hold several (it counted
        // elements, and 50 elements of 256 bytes named 2,100 scopes).
        let packed = (0..<2).map { element in (0..<26).map { "S\(element)_\($0)" }.joined(separator: " ") }
        #expect(throws: ScopeError(field: "scopes", detail: "at most 50 scopes may be requested at once")) {
            try ScopeRules.requested(scopes: packed, resource: nil)
        }
    }

    @Test("A scope holds only RFC 6749 scope-token bytes, and every whitespace splits, \\r\\n included")
    func scopeTokenGrammar() throws {
        // Split by Character, "\r\n" is one character and stayed inside the scope.
        #expect(try ScopeRules.requested(scopes: ["User.Read\r\nMail.Read"], resource: nil).canonical == ["Mail.Read", "User.Read"])
        #expect(try ScopeRules.requested(scopes: ["User.Read \t\nMail.Read\r"], resource: nil).canonical == ["Mail.Read", "User.Read"])
        #expect(ScopeSet(normalizing: ["a\r\nb"]).canonical == ["a", "b"])
        for bad in ["User.Read\u{1}", "User.Read\u{7F}", "User.Read\u{85}", "Us\"er", "Us\\er", "Usér.Read", "User.Read\u{2028}"] {
            #expect(throws: ScopeError.self, "\(bad.debugDescription)") { try ScopeRules.requested(scopes: [bad], resource: nil) }
        }
        #expect(throws: ScopeError(field: "resource", detail: "resource must be one non-empty resource URI")) {
            try ScopeRules.requested(scopes: nil, resource: "https://a.example\r\nhttps://b.example")
        }
        #expect(try ScopeRules.requested(scopes: ["api://x-y_z/read", "api://x-y_z/~.!$&'()*+,;=:@?#[]{}|"], resource: nil).canonical.count == 2)
    }
}
