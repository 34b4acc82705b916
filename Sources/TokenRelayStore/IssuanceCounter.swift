import Foundation
import Synchronization
import TokenRelayBase

/// Counts token answers per (API key, account, token) in this replica's memory and writes them to
/// `token_issuance_counts` (per key and account) and `token_receipts` (per key and token `uti`)
/// in batches (behaviour §12 Audit: "never a write per request").
///
/// ``record(keyId:accountId:)`` runs on the cached fast path (behaviour §10): one lock and one
/// dictionary update, no I/O. A flush swaps the tallies out and adds them with one UPSERT per
/// batch; a failed flush puts them back for the next try. At most ``capacity`` distinct pairs
/// are held: beyond that, answers for new pairs are counted in `tokenrelay_issuance_dropped_total`
/// only.
package final class IssuanceCounter: Sendable {
    /// Who was given a token for whom, and which token (its `uti`; nil for an opaque token).
    package struct Pair: Hashable, Sendable {
        package let accountId: String
        package let keyId: String
        package let uti: String?
        /// `(uti ?? accountId).hashValue`: the token's `uti` alone (the account's id for an
        /// opaque token) tells pairs apart well enough, and hashing all three strings was most of
        /// counting a cached answer (behaviour §10). Equality still compares all three.
        private let hint: Int

        /// - Parameter utiHash: `uti.hashValue` when the caller has it already
        ///   (``StoredAccessToken/utiHash``); nil works it out.
        package init(accountId: String, keyId: String, uti: String? = nil, utiHash: Int? = nil) {
            self.accountId = accountId
            self.keyId = keyId
            self.uti = uti
            hint = uti.map { utiHash ?? $0.hashValue } ?? accountId.hashValue
        }

        package static func == (lhs: Pair, rhs: Pair) -> Bool {
            lhs.uti == rhs.uti && lhs.accountId == rhs.accountId && lhs.keyId == rhs.keyId
        }

        package func hash(into hasher: inout Hasher) {
            hasher.combine(hint)
        }
    }

    /// How many tokens, and the last answer's time (seconds since 1970).
    package struct Tally: Sendable, Equatable {
        package var count: Int64
        package var lastAt: Double
    }

    /// Rows per UPSERT statement.
    package static let batchSize = 2_000

    package let capacity: Int
    private let pending = Mutex<[Pair: Tally]>([:])
    private let dropped: Metrics.Counter
    private let metrics: Metrics
    private let clock: RelayClock

    /// - Parameters:
    ///   - capacity: the most distinct (key, account, token) tallies held between flushes.
    ///   - metrics: `tokenrelay_issuance_flushes_total`, `tokenrelay_issuance_dropped_total`.
    ///   - clock: the time an answer is counted at. Default the system's.
    package init(capacity: Int = 100_000, metrics: Metrics, clock: RelayClock = .system) {
        self.capacity = capacity
        self.clock = clock
        self.metrics = metrics
        metrics.describe(
            "tokenrelay_issuance_flushes_total", "counter", "Batched writes of token issuance counts by outcome (written, failed).",
            series: [["outcome": "written"], ["outcome": "failed"]])
        metrics.describe("tokenrelay_issuance_dropped_total", "counter", "Token answers not counted because the issuance tally was full.", series: [[:]])
        dropped = metrics.counter("tokenrelay_issuance_dropped_total")
    }

    /// Counts one token answer. Cheap: called on the server thread for cached answers.
    /// - Parameters:
    ///   - uti: the answered token's `uti` (``StoredAccessToken/uti``), nil for an opaque token.
    ///   - seconds: Unix time of the answer; nil means the clock's now.
    ///   - utiHash: ``StoredAccessToken/utiHash`` of the answered token, when known.
    package func record(keyId: String, accountId: String, uti: String? = nil, at seconds: Double? = nil, utiHash: Int? = nil) {
        let seconds = seconds ?? clock.unixTime
        let pair = Pair(accountId: accountId, keyId: keyId, uti: uti, utiHash: utiHash)
        let counted = pending.withLock { Self.add(Tally(count: 1, lastAt: seconds), for: pair, to: &$0, capacity: capacity) }
        if !counted { dropped.increment() }
    }

    /// Adds `tally` to the pair's (one hash lookup), or holds it as a new pair while fewer than
    /// `capacity` are held.
    /// - Returns: false when the tallies are full and the pair is new (nothing was added).
    private static func add(_ tally: Tally, for pair: Pair, to tallies: inout [Pair: Tally], capacity: Int) -> Bool {
        if let index = tallies.index(forKey: pair) {
            tallies.values[index].count += tally.count
            tallies.values[index].lastAt = max(tallies.values[index].lastAt, tally.lastAt)
            return true
        }
        guard tallies.count < capacity else { return false }
        tallies[pair] = tally
        return true
    }

    /// The tallies not yet written (tests, health).
    package var pendingCount: Int { pending.withLock { $0.count } }

    /// Writes every pending tally with `store`, one UPSERT per batch of ``batchSize`` pairs.
    /// What could not be written stays pending (merged with what arrived meanwhile).
    /// - Returns: whether everything pending was written.
    @discardableResult
    package func flush(to store: IssuanceStore) async -> Bool {
        let taken = pending.withLock { tallies -> [Pair: Tally] in
            defer { tallies = [:] }
            return tallies
        }
        guard !taken.isEmpty else { return true }
        var rows = Array(taken)
        while !rows.isEmpty {
            let batch = Array(rows.prefix(Self.batchSize))
            do {
                try await store.add(batch.map { ($0.key, $0.value) })
                rows.removeFirst(batch.count)
                metrics.increment("tokenrelay_issuance_flushes_total", ["outcome": "written"])
            } catch {
                metrics.increment("tokenrelay_issuance_flushes_total", ["outcome": "failed"])
                restore(rows)
                return false
            }
        }
        return true
    }

    /// Puts unwritten tallies back, within ``capacity``.
    private func restore(_ rows: [(key: Pair, value: Tally)]) {
        let lost = pending.withLock { tallies -> Int in
            var lost = 0
            for (pair, tally) in rows where !Self.add(tally, for: pair, to: &tallies, capacity: capacity) {
                lost += Int(tally.count)
            }
            return lost
        }
        if lost > 0 { metrics.increment("tokenrelay_issuance_dropped_total", by: Double(lost)) }
    }

    /// Flushes every `intervalSeconds` until cancelled.
    package func run(store: IssuanceStore, intervalSeconds: Int) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(intervalSeconds))
            if Task.isCancelled { return }
            await flush(to: store)
        }
    }
}
