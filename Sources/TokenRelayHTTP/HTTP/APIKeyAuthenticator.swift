import CryptoBridge
import Foundation
import HTTPCommon
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// The authenticated caller of a request: its key id, permissions, tenant and scope limits, and
/// its request budget in this replica.
package struct Caller: Sendable {
    package let keyId: String
    /// Whose external ids the caller sees and sets (behaviour §3.7): the key's `name`
    /// (`api_keys.name`), shared by every key of that name, so a rotated key keeps them;
    /// ``APIKeyAuthenticator/bootstrapOwner`` for the bootstrap key.
    package var owner: String
    /// One bit per ``Permission`` (its index in `allCases`): a `Set<Permission>` hashed each
    /// permission's raw `String` on every check (behaviour §10).
    private let permissionBits: UInt8
    /// Tenants and scope patterns the key is limited to (behaviour §12 Permissions), and its
    /// owner, whose unconfirmed imports alone it sees (§3.6).
    package var access: KeyAccess = .unrestricted
    /// The key's token bucket when `TOKENRELAY_RATE_LIMIT_PER_KEY` is set.
    package var bucket: RateBucket?

    package init(keyId: String, owner: String, permissions: some Sequence<Permission>, access: KeyAccess = .unrestricted, bucket: RateBucket? = nil) {
        self.keyId = keyId
        self.owner = owner
        permissionBits = permissions.reduce(0) { $0 | Self.bit($1) }
        self.access = access
        self.bucket = bucket
    }

    private static func bit(_ permission: Permission) -> UInt8 {
        switch permission {
        case .tokensAcquire: 1
        case .accountsRead: 2
        case .accountsWrite: 4
        case .downstreamCall: 8
        case .admin: 16
        }
    }

    package func may(_ permission: Permission) -> Bool {
        permissionBits & (Self.bit(permission) | Self.bit(.admin)) != 0
    }

    /// Whether the key has one of `permissions` (admin has all).
    package func may(anyOf permissions: [Permission]) -> Bool {
        permissions.contains { may($0) }
    }

    /// Takes one request from the key's budget.
    /// - Throws: 429 `rate_limited` with `Retry-After` when the budget is spent.
    /// - Parameter now: ``RelayClock/monotonicNow()`` seconds, read only when the key has a budget.
    package func takeRequest(now: Double? = nil) throws(RelayError) {
        if let bucket, let wait = bucket.take(now: now ?? RelayClock.monotonicNow()) { throw RateBucket.rateLimited(wait: wait) }
    }
}

/// Checks `Authorization: Bearer trk_<keyid>_<secret>` (behaviour §7, §12): keys are stored as the
/// SHA-256 of the secret and compared in constant time. The bootstrap key
/// (`TOKENRELAY_BOOTSTRAP_API_KEY`) is an admin key held only in memory. Looked-up keys are
/// remembered for a short time so a hot caller costs no database round trip.
package final class APIKeyAuthenticator: Sendable {
    private struct CachedKey {
        let secretHash: [UInt8]?
        let caller: Caller?
        let fetchedAt: Date
        /// The whole `trk_<keyid>_<secret>` last verified against `secretHash`, compared in
        /// constant time: the same bytes are the same secret, so a hot key costs no SHA-256 (about
        /// a twentieth of a cached silent request, behaviour §10). Memory only, for at most twice
        /// `cacheTTL`; the process holds the encryption key ring and the cached access tokens the
        /// key unlocks, so a key it has just verified adds nothing a memory disclosure would not
        /// already give. The database keeps only the hash.
        var verifiedKey: [UInt8]? = nil
    }

    /// `TOKENRELAY_BOOTSTRAP_API_KEY`'s bytes (the configuration holds it too), compared in constant time.
    private let bootstrapKey: [UInt8]?
    private let keys: APIKeyStore
    /// Key ids → what the database said, on `Date.timeIntervalSinceReferenceDate`. An entry is
    /// trusted for `cacheTTL` after `fetchedAt`, and held as ``heldSeconds(_:)`` says.
    private let cache: ExpiringMap<String, CachedKey>
    /// Seconds a looked-up key (or its absence) is trusted before the database is asked again
    /// (`TOKENRELAY_CACHE_TTL_S`); a revocation notification drops it sooner (``forget(keyId:)``).
    package let cacheTTL: TimeInterval
    private let bootstrapCaller: Caller

    /// The owner of the bootstrap key's external ids (behaviour §3.7).
    package static let bootstrapOwner = "bootstrap"

    /// The key id the bootstrap key's requests are known by (audit actor, issuance counts, access
    /// log; behaviour §7.1): the `keyid` of `trk_<keyid>_<secret>` like any key's, `bootstrap`
    /// for a key of another form, which has none.
    package static func bootstrapKeyId(_ bootstrapKey: String?) -> String {
        bootstrapKey.flatMap { split(Substring($0)) }.map { String($0.keyId) } ?? "bootstrap"
    }

    /// Most key ids remembered at once (found or not).
    package let cacheLimit: Int
    private let clock: RelayClock
    /// Requests per second per key in this replica; 0 = no limit.
    package let rateLimitPerKey: Double
    /// The ids of every active key, when this replica holds them: an id outside it is refused
    /// without a database read (``KeyDirectory``). Nil: every unknown id is asked of the store.
    package let directory: KeyDirectory?

    /// - Parameters:
    ///   - bootstrapKey: `TOKENRELAY_BOOTSTRAP_API_KEY`, an admin key held only in memory.
    ///   - keys: the stored keys.
    ///   - cacheLimit: most key ids remembered at once (also bounds the rate buckets).
    ///   - rateLimitPerKey: `TOKENRELAY_RATE_LIMIT_PER_KEY`, requests per second; 0 = no limit.
    ///   - cacheTTL: `TOKENRELAY_CACHE_TTL_S`, seconds a looked-up key is trusted. Default 30.
    ///   - directory: the ids of every active key (``KeyDirectory``); nil: none.
    ///   - clock: the service's clock, for how long a key is trusted. Default the system's.
    package init(
        bootstrapKey: String?, keys: APIKeyStore, cacheLimit: Int = 10_000, rateLimitPerKey: Double = 0, cacheTTL: TimeInterval = 30,
        directory: KeyDirectory? = nil, clock: RelayClock = .system
    ) {
        self.directory = directory
        self.clock = clock
        self.cacheLimit = cacheLimit
        cache = ExpiringMap(capacity: max(1, cacheLimit))
        self.rateLimitPerKey = rateLimitPerKey
        self.cacheTTL = cacheTTL
        self.bootstrapKey = bootstrapKey.map { Array($0.utf8) }
        bootstrapCaller = Caller(
            keyId: Self.bootstrapKeyId(bootstrapKey), owner: Self.bootstrapOwner, permissions: Permission.allCases,
            access: KeyAccess(owner: Self.bootstrapOwner),
            bucket: rateLimitPerKey > 0 ? RateBucket(rate: rateLimitPerKey, now: RelayClock.monotonicNow()) : nil)
        self.keys = keys
    }

    /// The caller for `authorization`, or a 401 problem.
    package func authenticate(_ authorization: String?) async throws -> Caller {
        guard let presented = Self.bearerToken(authorization) else {
            throw Self.missingKey
        }
        if let bootstrapKey, ConstantTime.equals(utf8: presented, bootstrapKey) {
            return bootstrapCaller
        }
        guard let (keyId, secret) = Self.split(presented) else {
            throw Self.invalidKey
        }
        let id = String(keyId)
        // A key id no key has: refused without a database read.
        if directory?.certainlyUnknown(id) == true { throw Self.invalidKey }
        let entry = try await lookup(id)
        guard let storedHash = entry.secretHash, let caller = entry.caller,
            ConstantTime.equals(SHA256.hash(utf8: String(secret)), storedHash)
        else {
            throw Self.invalidKey
        }
        return caller
    }

    /// What memory alone says of an `Authorization` header.
    package enum MemoryVerdict: Sendable {
        /// The bootstrap key, or a key looked up less than `cacheTTL` ago whose secret matches.
        case caller(Caller)
        /// 401 without I/O: no bearer token, not a well-formed key, a key id remembered as
        /// unknown, or a remembered key whose secret does not match.
        case refused(RelayError)
        /// The database must be asked (``authenticate(_:)``).
        case unknown
    }

    /// The caller when memory alone can tell; the 401 ``authenticate(_:)`` would give when memory
    /// already knows it; else `.unknown`. `authorization` is the header's value.
    package func authenticateFromMemory(_ authorization: String?) -> MemoryVerdict {
        guard let authorization else { return .refused(Self.missingKey) }
        return authenticateFromMemory(value: authorization.utf8.span)
    }

    /// ``authenticateFromMemory(_:)`` of the request's `Authorization` field, read where it lies in
    /// `headers`: the credential is compared and cut in place, never made a `String` (one was made
    /// per request, behaviour §10).
    /// - Throws: `RelayError` 400 `invalid_request` naming `Authorization` when it is sent twice.
    package func authenticateFromMemory(_ headers: HTTPHeaders) throws(RelayError) -> MemoryVerdict {
        let verdict = headers.withFirstValue("Authorization") { value, repeated in
            repeated ? nil : authenticateFromMemory(value: value)
        }
        switch verdict {
        case nil: return .refused(Self.missingKey)
        case .some(nil): throw RelayError.headerSentTwice("Authorization")
        case .some(let verdict?): return verdict
        }
    }

    /// The verdict on an `Authorization` value's bytes.
    private func authenticateFromMemory(value: Span<UInt8>) -> MemoryVerdict {
        if let token = Self.bearerTokenRange(value) { return verdict(presented: value.extracting(token)) }
        // Another spelling of the scheme (blanks around the token): the general rule, on a `String`.
        guard let presented = Self.bearerToken(Self.string(value)) else { return .refused(Self.missingKey) }
        return verdict(presented: presented.utf8.span)
    }

    /// The verdict on a presented key's bytes (the token of `Bearer <token>`): the bootstrap key
    /// and a key verified before are recognised without a copy of the secret or a SHA-256.
    private func verdict(presented: Span<UInt8>) -> MemoryVerdict {
        if let bootstrapKey, ConstantTime.equals(presented, bootstrapKey) {
            return .caller(bootstrapCaller)
        }
        guard let parts = Self.splitRanges(presented) else { return .refused(Self.invalidKey) }
        // Ids are lower-case letters and digits (so UTF-8), and short enough to need no storage.
        let keyId = Self.string(presented.extracting(parts.keyId))
        let now = clock.date
        guard let cached = cache.value(for: keyId, now: now.timeIntervalSinceReferenceDate), now.timeIntervalSince(cached.fetchedAt) < cacheTTL else {
            // A key id no key has is refused here, without a database read (behaviour §7.1).
            if directory?.certainlyUnknown(keyId) == true { return .refused(Self.invalidKey) }
            return .unknown
        }
        guard let storedHash = cached.secretHash, let caller = cached.caller else { return .refused(Self.invalidKey) }
        if let verified = cached.verifiedKey, ConstantTime.equals(presented, verified) { return .caller(caller) }
        guard ConstantTime.equals(SHA256.hash(Self.bytes(presented.extracting(parts.secret))), storedHash) else {
            return .refused(Self.invalidKey)
        }
        let presentedBytes = Self.bytes(presented)
        cache.update(keyId, now: now.timeIntervalSinceReferenceDate) { entry in
            // Only onto the entry just checked: a re-read row starts unverified.
            if entry?.value.fetchedAt == cached.fetchedAt { entry?.value.verifiedKey = presentedBytes }
        }
        return .caller(caller)
    }

    /// A copy of borrowed bytes.
    private static func bytes(_ span: Span<UInt8>) -> [UInt8] {
        var copy: [UInt8] = []
        copy.reserveCapacity(span.count)
        for index in span.indices { copy.append(span[index]) }
        return copy
    }

    /// Borrowed bytes as a `String` (bytes that are not UTF-8 repaired, as `String(decoding:as:)` does).
    private static func string(_ span: Span<UInt8>) -> String {
        if let text = try? UTF8Span(validating: span) { return String(copying: text) }
        return String(decoding: bytes(span), as: UTF8.self)
    }

    private func lookup(_ keyId: String) async throws -> CachedKey {
        let checked = clock.date
        if let cached = cache.value(for: keyId, now: checked.timeIntervalSinceReferenceDate), checked.timeIntervalSince(cached.fetchedAt) < cacheTTL {
            return cached
        }
        let record = try await keys.activeKey(keyId)
        let now = clock.date
        // Bounded: well-formed but unknown key ids must not grow memory without limit.
        return cache.update(keyId, now: now.timeIntervalSinceReferenceDate) { held in
            // A key looked up again keeps its bucket: re-reading the row must not refill it.
            let bucket =
                held?.value.caller?.bucket
                ?? (rateLimitPerKey > 0 && record != nil ? RateBucket(rate: rateLimitPerKey, now: RelayClock.monotonicNow()) : nil)
            let entry = CachedKey(
                secretHash: record?.secretHash,
                caller: record.map {
                    Caller(
                        keyId: $0.keyId, owner: $0.name, permissions: $0.permissions,
                        access: KeyAccess(tenants: $0.tenants, scopePatterns: $0.scopePatterns, owner: $0.name), bucket: bucket)
                }, fetchedAt: now)
            held = .init(value: entry, expiresAt: now.timeIntervalSinceReferenceDate + heldSeconds(entry))
            return entry
        }
    }

    /// Seconds past `fetchedAt` an entry is held, which also orders what makes room when the cache
    /// is full (the entries ending soonest go): an unknown key id for `cacheTTL`; a key for
    /// `cacheTTL` more, so that every trusted key outlasts every unknown id (made-up ids cannot
    /// push real keys out), and a rate-limited key until its bucket, idle since the entry stopped
    /// being trusted, has refilled: re-reading the row keeps the bucket rather than refilling it
    /// early (one second more for a request that took its caller just before then).
    private func heldSeconds(_ entry: CachedKey) -> TimeInterval {
        guard let caller = entry.caller else { return cacheTTL }
        return 2 * cacheTTL + (caller.bucket.map { $0.capacity / $0.rate + 1 } ?? 0)
    }

    /// Forgets what this replica remembers of `keyId`, so its next use asks the database: call it
    /// when the key is revoked or changed (e.g. on a notification from another replica).
    package func forget(keyId: String) {
        cache.removeValue(for: keyId)
    }

    /// A key was created (a notification from the process that created it): its id joins the
    /// directory, and whatever this replica remembered of the id (an unknown id) is dropped.
    package func keyCreated(_ keyId: String) {
        directory?.created(keyId)
        cache.removeValue(for: keyId)
    }

    /// A key was revoked: forgotten, and out of the directory.
    package func keyRevoked(_ keyId: String) {
        directory?.revoked(keyId)
        forget(keyId: keyId)
    }

    /// Drops every remembered key (invalidation notifications may have been missed).
    package func forgetAll() {
        cache.removeAll()
    }

    /// Key ids remembered now (tests and metrics).
    package var cachedKeyCount: Int { cache.count }

    private static let bearer = Array("bearer".utf8)

    /// The token of `Bearer <token>` (the scheme in any case, RFC 6750 §2.1), a view of the
    /// header's own bytes; nil without one.
    package static func bearerToken(_ authorization: String?) -> Substring? {
        guard let authorization else { return nil }
        let utf8 = authorization.utf8
        if let token = bearerTokenRange(utf8.span) {
            return authorization[utf8.index(utf8.startIndex, offsetBy: token.lowerBound)...]
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : Substring(token)
    }

    /// Where the token lies in the usual `Bearer <token>` without stray whitespace, read without
    /// allocating (behaviour §10); nil for any other spelling, which takes the general rule of
    /// ``bearerToken(_:)``.
    private static func bearerTokenRange(_ bytes: Span<UInt8>) -> Range<Int>? {
        let bearer = Self.bearer.span  // the lazy global read once, not once per byte
        guard bytes.count > 7, bytes[6] == UInt8(ascii: " "), (0..<6).allSatisfy({ bytes[$0] | 0x20 == bearer[$0] }),
            bytes[7] > 0x20 && bytes[7] < 0x7F, bytes[bytes.count - 1] > 0x20 && bytes[bytes.count - 1] < 0x7F
        else { return nil }
        return 7..<bytes.count
    }

    /// `trk_<keyid>_<secret>`: split at the first two underscores; the secret may contain `_`.
    /// Both parts are views of `key`'s bytes.
    package static func split(_ key: Substring) -> (keyId: Substring, secret: Substring)? {
        guard let parts = splitRanges(key.utf8.span) else { return nil }
        let utf8 = key.utf8
        let keyIdStart = utf8.index(utf8.startIndex, offsetBy: parts.keyId.lowerBound)
        let keyIdEnd = utf8.index(keyIdStart, offsetBy: parts.keyId.count)
        return (Substring(utf8[keyIdStart..<keyIdEnd]), Substring(utf8[utf8.index(after: keyIdEnd)...]))
    }

    /// ``split(_:)`` as offsets in the key's bytes. On the bytes, through a span (the separators
    /// are ASCII, so every cut is at a scalar boundary): Character and generic collection
    /// algorithms were most of a 401's cost and half of a created key's check on a cached answer
    /// (behaviour §10).
    private static func splitRanges(_ bytes: Span<UInt8>) -> (keyId: Range<Int>, secret: Range<Int>)? {
        guard bytes.count > 4, bytes[0] == UInt8(ascii: "t"), bytes[1] == UInt8(ascii: "r"), bytes[2] == UInt8(ascii: "k"),
            bytes[3] == UInt8(ascii: "_")
        else { return nil }
        var underscore = 4
        while underscore < bytes.count, bytes[underscore] != UInt8(ascii: "_") {
            guard isKeyIdByte(bytes[underscore]) else { return nil }
            underscore += 1
        }
        guard underscore < bytes.count, underscore - 4 >= 8, underscore + 1 < bytes.count else { return nil }
        return (4..<underscore, underscore + 1..<bytes.count)
    }

    /// A byte of a key id: a lower-case letter or a digit (behaviour §7.1).
    package static func isKeyIdByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    /// The two refusals of a presented key, made once: a 401 made per request (its challenge set
    /// on a new error copies it) was a sixth of the refusal's own cost (behaviour §10).
    private static let missingKey = unauthenticated("Send an API key as 'Authorization: Bearer trk_<keyid>_<secret>'.")
    private static let invalidKey = unauthenticated("The API key is not valid.")

    package static func unauthenticated(_ detail: String) -> RelayError {
        var error = RelayError(.unauthenticated, detail)
        error.challenge = #"Bearer realm="tokenrelay""#
        return error
    }

    /// Why `name` cannot name a new key, or nil when it can. A key's name is its owner (behaviour
    /// §3.6, §3.7: the unconfirmed imports and external ids it made are that name's), shown by
    /// `api-keys list` and in audit rows: 1 to 256 bytes, not only blanks, no control or
    /// bidirectional formatting character, and not `bootstrap` in any case or spacing, the owner
    /// reserved for `TOKENRELAY_BOOTSTRAP_API_KEY` (a key so named would share its imports and
    /// external ids).
    package static func refusal(ofName name: String) -> String? {
        guard name.utf8.count <= 256, !name.containsControlCharacter, !name.containsBidiControl, name.contains(where: { !$0.isWhitespace })
        else { return "--name must be 1 to 256 characters without control or bidirectional formatting characters, not only blanks" }
        guard name.trimmingCharacters(in: .whitespaces).lowercased() != bootstrapOwner else {
            return "--name '\(bootstrapOwner)' is reserved: it is the owner of TOKENRELAY_BOOTSTRAP_API_KEY's imports and external ids"
        }
        return nil
    }

    /// Creates a key and returns the full `trk_<keyid>_<secret>` (shown once); only its hash is stored.
    /// - Parameters:
    ///   - name: the key's name and owner, as ``refusal(ofName:)`` allows.
    ///   - tenants: allowed tenant ids or domains; empty = every tenant.
    ///   - scopePatterns: allowed scope globs (case-insensitive); empty = every scope.
    /// - Throws: `RelayError` 400 `invalid_request` naming `name` when ``refusal(ofName:)`` refuses it.
    package static func create(
        name: String, permissions: [Permission], tenants: [String] = [], scopePatterns: [String] = [], store: APIKeyStore
    ) async throws -> (keyId: String, apiKey: String) {
        if let refusal = refusal(ofName: name) { throw RelayError.invalidRequest(field: "name", refusal) }
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        let keyId = String(decoding: SecureRandom.bytes(12).map { alphabet[Int($0) % alphabet.count] }, as: UTF8.self)
        let secret = RandomToken.make(bytes: 32)
        try await store.insert(
            keyId: keyId, name: name, secretHash: SHA256.hash(utf8: secret), permissions: permissions, tenants: tenants,
            scopePatterns: scopePatterns)
        return (keyId, "trk_\(keyId)_\(secret)")
    }
}
