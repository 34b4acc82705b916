import TokenRelayAcquisition
import TokenRelayBase

extension RelayError.InputFields {
    /// The members `body` chose them with; `tenant_id` counts only where it chooses the
    /// authority (on `/v1/tokens/silent` it narrows a username lookup).
    package init(_ body: JSONBody, tenantChoosesAuthority: Bool) {
        self.init()
        if body.has("resource") { scopes = "resource" }
        if tenantChoosesAuthority && body.has("tenant_id") && !body.has("authority") { authority = "tenant_id" }
    }
}
