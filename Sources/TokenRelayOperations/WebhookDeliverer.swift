import CryptoBridge
import Foundation
import HTTPClientBridge
import HTTPCommon
import IdentityCore
import PostgresBridge
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// Delivers account events to `TOKENRELAY_WEBHOOK_URL` (behaviour §12 Webhooks and events): each event
/// as a JSON POST signed with `TokenRelay-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`,
/// in outbox order, at least once (a receiver dedupes on the event `id`, which never changes).
///
/// One replica delivers at a time: the one holding the `webhook` job lease (`JobLeaseStore`,
/// ADR 0007). A batch reads the oldest undelivered events in one statement, then POSTs each with
/// no connection, transaction or lock held (behaviour §8) and marks it delivered after its 2xx in one
/// statement. The lease is renewed before every POST; when that fails (another replica took it
/// over) the batch stops. The first failure ends the batch, so a later event never overtakes an
/// earlier one; the next batch waits an exponential backoff with jitter (IdentityCore's
/// `RetryPolicy` caps) for as long as the receiver stays down. The lease is released after every
/// batch, so it is free while this replica is idle, backs off or stops.
///
/// Delivery begins where the first replica with a webhook URL started on the database
/// (``AccountEventStore/beginDelivery()``, `webhook_delivery`): events from before that moment
/// are never POSTed (issue 10 item 12).
package struct WebhookDeliverer: Service {
    package let database: Database
    package let leases: JobLeaseStore
    package let url: String
    package let secret: [UInt8]
    package let http: HTTPClient
    package let policy: RetryPolicy
    package let metrics: Metrics
    package let logger: Logger
    /// This replica's (and run's) name in the lease.
    package let holder = "replica_" + RandomToken.make(bytes: 9)

    package static let leaseName = "webhook"
    /// Events sent per batch (one read).
    package static let batchSize = 50
    /// Seconds one POST may take.
    package static let attemptTimeout = 10.0
    /// Seconds the lease lasts: six POST timeouts, as it is renewed before every POST. A replica
    /// that dies while delivering holds the events up for at most this long.
    package static let leaseSeconds = 60
    /// Seconds between looks for new events while idle.
    package static let pollInterval = 1.0

    package init(database: Database, url: String, secret: String, http: HTTPClient, maxBackoffSeconds: Int, metrics: Metrics, logger: Logger) {
        self.database = database
        leases = JobLeaseStore(database: database)
        self.url = url
        self.secret = Array(secret.utf8)
        self.http = http
        policy = RetryPolicy(target: .downstream(idempotent: true), maxAttempts: .max, baseDelay: 1, maxDelay: Double(maxBackoffSeconds))
        self.metrics = metrics
        self.logger = logger
    }

    /// How one batch ended.
    package enum BatchResult: Sendable, Equatable {
        /// Nothing waits, or another replica holds the delivery lease.
        case idle
        /// `count` events delivered, all of the batch.
        case delivered(count: Int)
        /// The receiver refused or could not be reached after `count` deliveries.
        case failed(count: Int)
        /// The lease could not be renewed (another replica has it) or the task was cancelled,
        /// after `count` deliveries.
        case stopped(count: Int)
    }

    /// Records where delivery begins, once per database (``AccountEventStore/beginDelivery()``);
    /// `serve` calls it before it accepts requests, so no event of this run is from "before".
    package func beginDelivery() async throws {
        let after = try await AccountEventStore(database: database).beginDelivery()
        logger.info("webhook.delivery_begins", ["events.after_seq": String(after)])
    }

    /// Runs until the task is cancelled (a batch in flight then stops and releases the lease).
    package func run() async {
        let events = AccountEventStore(database: database)
        var failures = 0
        var begun = false
        while !Task.isCancelled {
            var wait = Self.pollInterval
            do {
                // Normally done before serving; again here when the database was down then.
                if !begun {
                    try await beginDelivery()
                    begun = true
                }
                if try await events.hasUndelivered() {
                    switch try await deliverBatch() {
                    case .idle, .stopped: break
                    case .delivered(let count):
                        failures = 0
                        if count == Self.batchSize { wait = 0 }
                    case .failed:
                        failures += 1
                        // Equal jitter: never less than half the cap, so a down receiver is not hammered.
                        let cap = policy.backoffCap(afterAttempt: failures)
                        wait = cap / 2 + Double.random(in: 0..<1) * cap / 2
                    }
                }
            } catch {
                logger.warn("webhook.batch_failed", ["error": String(describing: type(of: error))])
            }
            if wait > 0 { try? await Task.sleep(for: .seconds(wait)) }
        }
    }

    /// Takes the lease, delivers undelivered events in order until one fails or the batch is
    /// done, and releases the lease (the next batch, even one that follows at once, takes it again).
    package func deliverBatch() async throws -> BatchResult {
        guard try await leases.acquire(job: Self.leaseName, holder: holder, seconds: Self.leaseSeconds) else { return .idle }
        let result: Result<BatchResult, any Error>
        do { result = .success(try await deliverHoldingLease()) } catch { result = .failure(error) }
        try? await leases.release(job: Self.leaseName, holder: holder)
        return try result.get()
    }

    private func deliverHoldingLease() async throws -> BatchResult {
        let events = AccountEventStore(database: database)
        let pending = try await events.undelivered(limit: Self.batchSize)
        guard !pending.isEmpty else { return .idle }
        var delivered = 0
        for event in pending {
            if delivered > 0 {
                // Renewed before every POST but the first (just taken), so the lease cannot lapse
                // while one is in flight; lost means another replica delivers from here.
                guard !Task.isCancelled, try await leases.acquire(job: Self.leaseName, holder: holder, seconds: Self.leaseSeconds) else {
                    return .stopped(count: delivered)
                }
            }
            guard await post(event) else { return Task.isCancelled ? .stopped(count: delivered) : .failed(count: delivered) }
            try await events.markDelivered(seq: event.seq)
            delivered += 1
        }
        return .delivered(count: delivered)
    }

    /// One signed POST; true on a 2xx answer.
    private func post(_ event: AccountEvent) async -> Bool {
        let body = JSONWriter.encode(event.json)
        // Real time, never a test's: the receiver checks it against its own clock.
        let timestamp = RelayClock.system.seconds
        var headers = HTTPHeaders()
        headers.set("Content-Type", "application/json")
        headers.set("TokenRelay-Signature", Self.signature(body: body, timestamp: timestamp, secret: secret))
        headers.set("TokenRelay-Event-Id", event.id)
        headers.set("TokenRelay-Event-Type", event.type)
        let outcome: String
        do {
            let response = try await http.execute(HTTPClientRequest(method: "POST", url: url, headers: headers, body: body, timeout: Self.attemptTimeout))
            outcome = (200..<300).contains(response.status) ? "delivered" : "refused"
            if outcome != "delivered" { logger.warn("webhook.delivery_refused", ["event.id": event.id, "http.status": String(response.status)]) }
        } catch {
            // Cut off by shutdown: not the receiver's failure; the event stays undelivered.
            if Task.isCancelled { return false }
            outcome = "unreachable"
            logger.warn("webhook.delivery_unreachable", ["event.id": event.id])
        }
        metrics.increment("tokenrelay_webhook_deliveries_total", ["outcome": outcome])
        return outcome == "delivered"
    }

    /// `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">` (the scheme Stripe and others use).
    /// - Parameters:
    ///   - body: the exact bytes sent.
    ///   - timestamp: unix seconds, also signed so a receiver can refuse old replays.
    package static func signature(body: [UInt8], timestamp: Int, secret: [UInt8]) -> String {
        let mac = HMACSHA256.authenticationCode(for: Array("\(timestamp).".utf8) + body, key: secret)
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}
