import Foundation
import IdentityCore
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// This replica's suspended tenants (behaviour §12 Tenants), without a database: which accounts
/// are of a tenant, case, the order of notifications and reloads, what memory drops.
@Suite("Tenant suspensions")
struct TenantSuspensionsTests {
    static let home = "11111111-1111-1111-1111-111111111111"
    static let guest = "22222222-2222-2222-2222-222222222222"

    static func account(realm: String, home: String?, profiles: [TenantProfile]? = nil) -> AccountRecord {
        AccountRecord(
            accountId: "acc_1", clientId: "c", environment: "login.microsoftonline.com", homeAccountId: home, realm: realm, localAccountId: "oid",
            username: "erin@contoso.example", name: "Erin", authority: "https://login.microsoftonline.com/\(realm)", authorityType: .aad,
            state: .active, idTokenClaims: "{}", createdAt: "2026-12-02T00:00:00Z", lastUsedAt: nil, tenantProfiles: profiles)
    }

    @Test("an account is of its realm, its home tenant (utid of home_account_id) and every profile's realm, lower-cased")
    func tenantsOfAnAccount() {
        let guestAccount = Self.account(
            realm: Self.guest.uppercased(), home: "oid." + Self.home.uppercased(),
            profiles: [TenantProfile(realm: Self.guest, localAccountId: "g", isHome: false)])
        #expect(guestAccount.tenantIds == [Self.home, Self.guest])
        #expect(Self.account(realm: Self.home, home: nil, profiles: []).tenantIds == [Self.home])
    }

    @Test("a suspended tenant refuses its accounts with 403 tenant_suspended naming it, whatever the case")
    func refuses() throws {
        let suspensions = TenantSuspensions()
        let guestAccount = Self.account(
            realm: Self.home, home: "oid." + Self.home, profiles: [TenantProfile(realm: Self.guest.uppercased(), localAccountId: "g", isHome: false)])
        #expect(suspensions.suspendedTenant(of: guestAccount) == nil)
        suspensions.apply(tenantId: Self.guest.uppercased(), suspended: true)
        #expect(suspensions.suspendedTenant(of: guestAccount) == Self.guest)
        #expect(suspensions.isSuspended(Self.guest))
        #expect(!suspensions.isSuspended(Self.home))
        #expect(throws: RelayError.self) { try suspensions.check(tenant: Self.guest.uppercased()) }
        do {
            try suspensions.check(guestAccount)
            Issue.record("not refused")
        } catch {
            #expect(error.code == .tenantSuspended && error.status == 403)
            #expect(error.extensions["tenant_id"] == .string(Self.guest))
        }
        suspensions.apply(tenantId: Self.guest, suspended: false)
        #expect(suspensions.suspendedTenant(of: guestAccount) == nil)
        try suspensions.check(tenant: Self.guest)
    }

    @Test("a reload read before a notification is not applied after it; a later one is")
    func reloadOrdering() {
        let suspensions = TenantSuspensions()
        let readAt = suspensions.generation
        suspensions.apply(tenantId: Self.home, suspended: true)
        // The read began before the suspension arrived: it must not undo it.
        #expect(!suspensions.replace(with: [], readAt: readAt))
        #expect(suspensions.tenants == [Self.home])
        #expect(suspensions.replace(with: [Self.guest.uppercased()], readAt: suspensions.generation))
        #expect(suspensions.tenants == [Self.guest])
    }

    @Test("memory is dropped once per tenant that becomes suspended, by a notification or a reload")
    func dropsOnSuspension() {
        let suspensions = TenantSuspensions()
        let dropped = Mutex<[String]>([])
        suspensions.onSuspended { tenant in dropped.withLock { $0.append(tenant) } }
        suspensions.apply(tenantId: Self.home, suspended: true)
        suspensions.apply(tenantId: Self.home, suspended: true)
        suspensions.replace(with: [Self.home, Self.guest], readAt: suspensions.generation)
        suspensions.apply(tenantId: Self.guest, suspended: false)
        #expect(dropped.withLock { $0 } == [Self.home, Self.guest])
    }

    @Test("memory forgets a tenant: accounts of it, access tokens in its realm, app and OBO tokens in its realm")
    func memoriesForgetATenant() {
        let accounts = AccountCache()
        let guestAccount = Self.account(
            realm: Self.home, home: "oid." + Self.home, profiles: [TenantProfile(realm: Self.guest, localAccountId: "g", isHome: false)])
        accounts.store(guestAccount, readMark: accounts.readMark)
        #expect(accounts.accountIds(ofTenant: Self.guest) == ["acc_1"])
        #expect(accounts.accountIds(ofTenant: "33333333-3333-3333-3333-333333333333").isEmpty)

        let now = Int(Date().timeIntervalSince1970)
        func token(_ owner: String, realm: String) -> StoredAccessToken {
            StoredAccessToken(
                accountId: owner, environment: "login.microsoftonline.com", realm: realm, clientId: "c", scopes: ["User.Read"], secret: "at",
                expiresOn: now + 3600, extExpiresOn: nil, refreshOn: nil)
        }
        let memory = MemoryTokenCache()
        memory.store(token("acc_1", realm: Self.guest.uppercased()), now: now)
        memory.store(token("acc_2", realm: Self.home), now: now)
        memory.removeAll(realm: Self.guest)
        #expect(memory.count == 1)
        let grants = GrantTokenMemory()
        grants.store(token("app:" + Self.guest, realm: Self.guest), now: now)
        grants.store(token("app:" + Self.home, realm: Self.home), now: now)
        grants.removeAll(realm: Self.guest)
        #expect(grants.count == 1)
    }

    @Test("tenant ids in paths: GUIDs in any case, lower-cased; anything else 400 naming tenant_id")
    func pathTenantIds() throws {
        #expect(try TenantRoutes.tenantId(Self.home.uppercased()) == Self.home)
        for bad in ["", "common", "contoso.onmicrosoft.com", "{11111111-1111-1111-1111-111111111111}", "11111111111111111111111111111111"] {
            #expect(throws: RelayError.self) { try TenantRoutes.tenantId(bad) }
            #expect((try? TenantRoutes.tenantId(bad)) == nil)
        }
        #expect(TenantRoutes.Cursor.decode(TenantRoutes.Cursor.encode(Self.home)) == Self.home)
        #expect(TenantRoutes.Cursor.decode("zz") == nil)
    }
}
