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

/// The replica and shutdown settings (behaviour §8, §11, §12).
@Suite("Replica settings")
struct ReplicaConfigurationTests {
    @Test("Defaults: LISTEN on the main URL, 30 s cache TTL, 10 s shutdown; each can be set")
    func defaultsAndValues() throws {
        let defaults = try ConfigurationLoader(environment: ConfigurationTests.valid).load()
        #expect(defaults.database.listenURL == nil)
        #expect(defaults.tokens.cacheTTLSeconds == 30)
        #expect(defaults.http.shutdownTimeoutSeconds == 10)
        var environment = ConfigurationTests.valid
        environment["TOKENRELAY_DATABASE_LISTEN_URL"] = "postgresql://direct/tokenrelay"
        environment["TOKENRELAY_CACHE_TTL_S"] = "5"
        environment["TOKENRELAY_SHUTDOWN_TIMEOUT_S"] = "0"
        let set = try ConfigurationLoader(environment: environment).load()
        #expect(set.database.listenURL == "postgresql://direct/tokenrelay")
        #expect(set.tokens.cacheTTLSeconds == 5)
        #expect(set.http.shutdownTimeoutSeconds == 0)
    }

    @Test("An unusable value stops start-up naming the setting", arguments: [("TOKENRELAY_CACHE_TTL_S", "0"), ("TOKENRELAY_SHUTDOWN_TIMEOUT_S", "-1")])
    func invalid(name: String, value: String) {
        var environment = ConfigurationTests.valid
        environment[name] = value
        #expect(throws: ConfigurationError.self) { try ConfigurationLoader(environment: environment).load() }
        do {
            _ = try ConfigurationLoader(environment: environment).load()
        } catch let error as ConfigurationError {
            #expect(error.setting == name)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
