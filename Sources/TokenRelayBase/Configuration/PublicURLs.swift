import Synchronization

/// The URLs browsers and callers use to reach this replica: the configured public base URL and
/// redirect URI, or ones built from the bound address once the server has started (so
/// `TOKENRELAY_LISTEN=127.0.0.1:0` works in tests).
package final class PublicURLs: Sendable {
    private let configuration: Configuration
    private let boundPort = Mutex<Int?>(nil)

    package init(configuration: Configuration) {
        self.configuration = configuration
    }

    package func serverStarted(port: Int) {
        boundPort.withLock { $0 = port }
    }

    package var baseURL: String {
        if let configured = configuration.http.publicBaseURL {
            return configured.hasSuffix("/") ? String(configured.dropLast()) : configured
        }
        let port = boundPort.withLock { $0 } ?? configuration.http.listenPort
        let host = configuration.http.listenHost == "0.0.0.0" ? "127.0.0.1" : configuration.http.listenHost
        return "http://\(host):\(port)"
    }

    /// `TOKENRELAY_REDIRECT_URI`, else `{base}/v1/sign-ins/callback`.
    package var redirectURI: String {
        configuration.identity.redirectURI ?? baseURL + "/v1/sign-ins/callback"
    }
}
