import Foundation
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

@testable import IdentityCore

/// The account object's guest and import fields (behaviour §3, §12 Accounts).
@Suite("Account object: tenant profiles, imports")
struct AccountObjectTests {
    static func record(home: String?, realm: String, profiles: [TenantProfile]? = nil) -> AccountRecord {
        AccountRecord(
            accountId: "acc_1", clientId: "c", environment: "login.microsoftonline.com", homeAccountId: home, realm: realm, localAccountId: "oid",
            username: "erin@contoso.example", name: "Erin", authority: "https://login.microsoftonline.com/\(realm)", authorityType: .aad,
            state: .active, idTokenClaims: #"{"tid":"t1","oid":"oid"}"#, createdAt: "2026-11-29T00:00:00Z", lastUsedAt: nil,
            tenantProfiles: profiles)
    }

    @Test("Stored profiles are listed home first; tenant_id matches any of them")
    func guestProfiles() throws {
        let text = #"[{"realm":"t1","local_account_id":"oid","is_home":true},{"realm":"t2","local_account_id":"guest-oid","is_home":false}]"#
        let profiles = try #require(TenantProfile.list(from: text))
        #expect(
            profiles == [
                TenantProfile(realm: "t1", localAccountId: "oid", isHome: true), TenantProfile(realm: "t2", localAccountId: "guest-oid", isHome: false),
            ])
        let account = Self.record(home: "oid.t1", realm: "t1", profiles: profiles)
        #expect(account.isIn(tenant: "T2"))
        #expect(account.isIn(tenant: "t1"))
        #expect(!account.isIn(tenant: "t3"))
        let json = try #require(JSONSerialization.jsonObject(with: Data(account.jsonBytes)) as? [String: Any])
        let listed = try #require(json["tenant_profiles"] as? [[String: Any]])
        #expect(listed.map { $0["realm"] as? String } == ["t1", "t2"])
        #expect(listed.map { $0["is_home"] as? Bool } == [true, false])
        #expect((json["id_token_claims"] as? [String: Any])?["tid"] as? String == "t1")
        #expect(json["local_account_id"] as? String == "oid")
    }

    @Test("Without stored profiles: one synthesized from the realm, none for an import not yet redeemed")
    func fallbackProfiles() throws {
        #expect(Self.record(home: "oid.t1", realm: "t1").tenantProfiles == [TenantProfile(realm: "t1", localAccountId: "oid", isHome: true)])
        #expect(Self.record(home: "oid.t1", realm: "t2").tenantProfiles.first?.isHome == false)
        let imported = Self.record(home: nil, realm: "organizations")
        #expect(imported.tenantProfiles.isEmpty)
        let json = try #require(JSONSerialization.jsonObject(with: Data(imported.jsonBytes)) as? [String: Any])
        #expect(json["home_account_id"] is NSNull)
        #expect(TenantProfile.list(from: nil) == nil)
        #expect(TenantProfile.list(from: "not json") == nil)
    }
}
