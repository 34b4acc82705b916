import IdentityCore
import Testing

@Suite("Tenant names: a tenant id or a verified domain name")
struct TenantNameTests {
    @Test("GUIDs in either case and domain names are tenants; audiences, IP addresses and other text are not")
    func tenants() {
        for text in ["72f988bf-86f1-41af-91ab-2d7cd011db47", "72F988BF-86F1-41AF-91AB-2D7CD011DB47", "contoso.onmicrosoft.com", "contoso.com", "a-b.c0"] {
            #expect(TenantName.isTenant(text), "\(text)")
        }
        for text in [
            "notauuid", "", "common", "organizations", "consumers", "contoso", "contoso..com", ".contoso.com", "contoso.com.", "-contoso.com",
            "contoso-.com", "con toso.com", "contoso.com/x", "10.0.0.1", "72f988bf86f141af91ab2d7cd011db47", "72f988bf-86f1-41af-91ab-2d7cd011db4g",
            "{72f988bf-86f1-41af-91ab-2d7cd011db47}", "contosö.com", String(repeating: "a", count: 64) + ".com",
        ] {
            #expect(!TenantName.isTenant(text), "\(text)")
        }
        #expect(TenantName.isTenantId("72f988bf-86f1-41af-91ab-2d7cd011db47") && !TenantName.isTenantId("contoso.com"))
    }
}
