import Foundation
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

extension Configuration {
    /// A complete configuration that reaches nothing: a database no one listens on, a public
    /// authority that is never called, a throw-away key ring, port 0. For tests that build the
    /// service to inspect it (routes, services, permissions) without serving.
    static func offline() -> Configuration {
        var configuration = Configuration()
        configuration.database.url = "postgresql://nobody@127.0.0.1:1/none"
        configuration.identity.clientId = "00000000-0000-0000-0000-000000000001"
        configuration.identity.authority = "https://login.microsoftonline.com/common"
        configuration.encryption.keys = "k1:" + Data(repeating: 7, count: 32).base64EncodedString()
        configuration.http.listenPort = 0
        return configuration
    }
}
