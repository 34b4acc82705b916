import HTTPCommon
import PostgresBridge
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// The store-error table (`RelayError(_: StoreError)`): one test per row, and the one rendering
/// of any error at the edge (`RelayError(rendering:)`).
@Suite("Store errors rendered once, at the edge")
struct StoreErrorTests {
    @Test("A lost or refused connection is 503 upstream_unavailable with Retry-After 2; the libpq cause is logged, not shown")
    func unavailable() {
        let error = StoreError(PostgresError(code: .connectionFailure, function: "PQconnectdb", serverMessage: "could not connect"))
        #expect(error.code == .unavailable)
        let problem = RelayError(error)
        #expect(problem.status == 503)
        #expect(problem.code == .upstreamUnavailable)
        #expect(problem.headers["Retry-After"] == "2")
        #expect(problem.extensions["retry_after_s"] == .number(2))
        #expect(problem.cause?.contains("PQconnectdb") == true)
        #expect(!problem.detail.contains("PQconnectdb"))
    }

    @Test("U+0000 in a parameter is 400 invalid_request naming field input")
    func invalidInput() {
        let problem = RelayError(StoreError(PostgresError(code: .invalidParameter, function: "PQexecParams")))
        #expect(problem.status == 400)
        #expect(problem.code == .invalidRequest)
        #expect(problem.extensions["field"] == .string("input"))
    }

    @Test("Any other statement failure is 500 internal with the SQLSTATE kept for the log only")
    func failed() {
        let problem = RelayError(StoreError(PostgresError(code: .queryFailed, function: "PQexecParams", sqlState: "23505", serverMessage: "duplicate key")))
        #expect(problem.status == 500)
        #expect(problem.code == .internal)
        #expect(problem.cause?.contains("23505") == true)
        #expect(!problem.detail.contains("23505") && !problem.detail.contains("duplicate"))
    }

    @Test("Problem(rendering:) keeps problems, maps store and acquisition errors by their tables, anything else is 500")
    func rendering() {
        struct Unknown: Error {}
        #expect(RelayError(rendering: RelayError.accountNotFound()).code == .accountNotFound)
        #expect(RelayError(rendering: StoreError(PostgresError(code: .connectionFailure, function: "PQexec"))).status == 503)
        #expect(RelayError(rendering: AcquisitionError.leaseWaitTimeout).status == 503)
        #expect(RelayError(rendering: AcquisitionError.noRefreshToken).code == .interactionRequired)
        let other = RelayError(rendering: Unknown())
        #expect(other.status == 500)
        #expect(other.cause == "Unknown")
    }
}
