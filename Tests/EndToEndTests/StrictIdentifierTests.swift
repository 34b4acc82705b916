import Foundation
import Testing
import TokenRelayTesting

/// Identifiers compared as the platform compares them, and key ids nobody created costing no
/// database read (issue 32, "Strict at the edges"; behaviour §7.1, §12 Accounts).
@Suite("Strict identifiers", .serialized)
struct StrictIdentifierTests {
    static func usernames(_ answer: TestResponse) -> [String] {
        (answer.json["accounts"] as? [[String: Any]] ?? []).compactMap { $0["username"] as? String }
    }

    static func query(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "@.-_")))!
    }

    @Test(
        "Usernames match in ASCII case only: the Turkish dotted İ, the Kelvin sign and every other non-ASCII character whose lower case is ASCII find nobody; ASCII case still matches; non-ASCII letters are exact"
    )
    func usernamesAreASCIICaseInsensitiveOnly() async throws {
        let stack = try await TokenRelayStack(name: "e2e_usernames")
        defer { stack.stop() }
        _ = try await stack.signInAccountId("alice@contoso.example")
        _ = try await StackHelpers.signIn(
            stack, "carol@fabrikam.example", authority: "\(stack.emulator.baseURL)/\(StackHelpers.fabrikam)", scopes: ["User.Read"])
        let authority = "\(stack.emulator.baseURL)/\(stack.tenantId)"
        let imported = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "josé@contoso.example", "refresh_token": "x", "authority": authority])
        #expect(imported.status == 201, "\(imported.text)")

        // Observed: both found alice and carol (PostgreSQL's lower() under the database's
        // collation maps U+0130 to i and U+212A to k).
        for lookalike in [
            "ALİCE@contoso.example", "alİce@contoso.example", "carol@fabri\u{212A}am.example", "\u{212A}arol@fabrikam.example",
            "JOSÉ@contoso.example",
        ] {
            let listed = try await stack.request("GET", "/v1/accounts?username=" + Self.query(lookalike))
            #expect(listed.status == 200 && Self.usernames(listed).isEmpty, "\(lookalike): \(listed.text)")
            let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["username": lookalike, "scopes": ["User.Read"]])
            #expect(silent.status == 404, "\(lookalike): \(silent.text)")
        }
        for (asked, found) in [
            ("ALICE@CONTOSO.EXAMPLE", "alice@contoso.example"), ("Carol@FabriKam.Example", "carol@fabrikam.example"),
            ("JOSé@CONTOSO.EXAMPLE", "josé@contoso.example"),
        ] {
            let listed = try await stack.request("GET", "/v1/accounts?username=" + Self.query(asked))
            #expect(Self.usernames(listed) == [found], "\(asked): \(listed.text)")
        }
        let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["username": "ALICE@contoso.example", "scopes": ["User.Read"]])
        #expect(silent.status == 200, "\(silent.text)")
        // The kind, in the database itself: every character outside ASCII whose lower case under
        // the database's collation is ASCII stays itself under the comparison the service uses.
        let folded = try await stack.withDatabase { connection in
            try connection.query(
                """
                SELECT count(*) AS n FROM (SELECT chr(c) AS ch FROM generate_series(128, 65533) c WHERE c NOT BETWEEN 55296 AND 57343) s
                WHERE lower(ch COLLATE "C") <> ch
                """
            ).rows.first?.int("n")
        }
        #expect(folded == 0)
    }

    @Test("An import no redemption has confirmed is seen by its importer only: it never makes another owner's username look-up ambiguous")
    func unprovenImportsStayWithTheirOwner() async throws {
        let stack = try await TokenRelayStack(name: "e2e_unproven_import")
        defer { stack.stop() }
        let fabrikam = "\(stack.emulator.baseURL)/\(StackHelpers.fabrikam)"
        let carol = try #require(
            try await StackHelpers.signIn(stack, "carol@fabrikam.example", authority: fabrikam, scopes: ["User.Read"])["account_id"] as? String)
        let other = try await StackHelpers.createKey(stack, name: "other", permissions: ["accounts:write", "accounts:read", "tokens:acquire"])
        let otherAuth = StackHelpers.bearer(other.key)
        // Someone else's refresh token under carol's username: its redemption fails, the account stays active.
        let imported = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "carol@fabrikam.example", "refresh_token": "x", "authority": fabrikam],
            headers: otherAuth, authenticated: false)
        #expect(imported.status == 201, "\(imported.text)")
        let importedId = try #require(imported.json["account_id"] as? String)
        let byOther = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["username": "carol@fabrikam.example", "scopes": ["User.Read"]], headers: otherAuth, authenticated: false)
        #expect(byOther.status != 200, "\(byOther.text)")

        // Observed: 409 ambiguous_account listing both ids for every other owner, until the import was deleted.
        let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["username": "carol@fabrikam.example", "scopes": ["User.Read"]])
        #expect(silent.status == 200, "\(silent.text)")
        let listed = try await stack.request("GET", "/v1/accounts?username=carol%40fabrikam.example")
        #expect((listed.json["accounts"] as? [[String: Any]])?.compactMap { $0["account_id"] as? String } == [carol], "\(listed.text)")
        let all = try await stack.request("GET", "/v1/accounts")
        #expect(!((all.json["accounts"] as? [[String: Any]]) ?? []).contains { $0["account_id"] as? String == importedId }, "\(all.text)")
        // Its importer sees it, beside the signed-in carol.
        let own = try await stack.request("GET", "/v1/accounts?username=carol%40fabrikam.example", headers: otherAuth, authenticated: false)
        #expect(Set((own.json["accounts"] as? [[String: Any]])?.compactMap { $0["account_id"] as? String } ?? []) == [carol, importedId], "\(own.text)")
        // Another owner's import of the same username is its own, never a replacement of this one.
        let again = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "carol@fabrikam.example", "refresh_token": "y", "authority": fabrikam])
        #expect(again.status == 201 && again.json["account_id"] as? String != importedId, "\(again.text)")
    }

    @Test(
        "An import no redemption has confirmed is named by its account_id for its importer only: to another owner every route answers it as an unknown id, from memory too"
    )
    func unprovenImportsAreUnknownByIdToOtherOwners() async throws {
        let stack = try await TokenRelayStack(name: "e2e_unproven_import_id")
        defer { stack.stop() }
        let fabrikam = "\(stack.emulator.baseURL)/\(StackHelpers.fabrikam)"
        let importer = StackHelpers.bearer(
            try await StackHelpers.createKey(stack, name: "importer", permissions: ["accounts:write", "accounts:read", "tokens:acquire", "downstream:call"])
                .key)
        let imported = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "carol@fabrikam.example", "refresh_token": "x", "authority": fabrikam],
            headers: importer, authenticated: false)
        #expect(imported.status == 201, "\(imported.text)")
        let importedId = try #require(imported.json["account_id"] as? String)
        // The importer's own requests put the account in this replica's memory (AccountCache),
        // which the other owner's requests below read first.
        let own = try await stack.request("GET", "/v1/accounts/\(importedId)", headers: importer, authenticated: false)
        #expect(own.status == 200, "\(own.text)")
        let ownSilent = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": importedId, "scopes": ["User.Read"]], headers: importer, authenticated: false)
        #expect(ownSilent.status != 404, "\(ownSilent.text)")

        // Observed before: 200 with the account, a silent answer and a deletion for any key.
        let unknown = "acc_" + String(repeating: "A", count: 22)
        for id in [importedId, unknown] {
            let read = try await stack.request("GET", "/v1/accounts/\(id)")
            #expect(read.status == 404 && read.json["error"] as? String == "account_not_found", "\(id): \(read.text)")
            for _ in 0..<2 {
                let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
                #expect(silent.status == 404 && silent.json["error"] as? String == "account_not_found", "\(id): \(silent.text)")
            }
            let relayed = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
            #expect(relayed.status == 404 && relayed.json["error"] as? String == "account_not_found", "\(id): \(relayed.text)")
            let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["account_id": id, "scopes": ["User.Read"]])
            #expect(signIn.status == 404 && signIn.json["field"] as? String == "account_id", "\(id): \(signIn.text)")
            let deleted = try await stack.request("DELETE", "/v1/accounts/\(id)")
            #expect(deleted.status == 204, "\(id): \(deleted.text)")
        }
        // The other owner's deletion deleted nothing: the importer still has it.
        let still = try await stack.request("GET", "/v1/accounts/\(importedId)", headers: importer, authenticated: false)
        #expect(still.status == 200, "\(still.text)")
        // An import written before imports recorded their owner (migration 0020) is seen by all.
        try await stack.withDatabase { connection in
            _ = try connection.query("UPDATE accounts SET imported_by = NULL WHERE account_id = $1", [.text(importedId)])
        }
        let legacy = try await stack.request("GET", "/v1/accounts/\(importedId)")
        #expect(legacy.status == 200, "\(legacy.text)")
    }

    @Test("A key id nobody created is refused without a database read; a key created meanwhile works at once")
    func unknownKeyIdsCostNoRead() async throws {
        try await StatementStatistics.withServer { statistics in
            let stack = try await TokenRelayStack(name: "e2e_unknown_key_ids", databaseURL: statistics.postgres.url)
            defer { stack.stop() }
            func keyReads() async throws -> Int64 {
                try await statistics.serviceStatements().filter { $0.query.contains("FROM api_keys") && $0.query.contains("key_id = $1") }.map(\.calls)
                    .reduce(0, +)
            }
            func randomKey() -> String {
                "trk_" + String(UUID().uuidString.lowercased().filter { $0.isLetter || $0.isNumber }.prefix(12)) + "_" + UUID().uuidString
            }
            // The directory loads once notifications flow: wait for an unknown id to cost nothing.
            var settled = false
            for _ in 0..<50 where !settled {
                try await statistics.reset()
                _ = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer \(randomKey())"], authenticated: false)
                settled = try await keyReads() == 0
                if !settled { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(settled, "an unknown key id was still read from the database after 5 s")
            try await statistics.reset()
            for _ in 0..<50 {
                let answer = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer \(randomKey())"], authenticated: false)
                #expect(answer.status == 401)
            }
            // Observed before: one read per new id (50).
            #expect(try await keyReads() == 0)
            // A key made by the CLI (another process) is known to the replica through its notification.
            let created = try await stack.runCommand(["api-keys", "create", "--name", "fresh", "--permissions", "accounts:read"])
            let key = try #require(created.output.range(of: #"trk_[a-z0-9]+_[A-Za-z0-9_-]+"#, options: .regularExpression).map { String(created.output[$0]) })
            let answer = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer \(key)"], authenticated: false)
            #expect(answer.status == 200, "\(answer.text)")
        }
    }
}
