import Foundation
import Synchronization
import TokenRelayBase
import TokenRelayStore

/// Rotated refresh tokens the STS returned but this replica could not store yet (the database
/// went away between the STS answer and COMMIT).
///
/// While one is held, a refresh in this replica stores it before anything else (its fenced write,
/// then redeems it: strict rotation would refuse the stored token it superseded once the grace has
/// passed), and a background task keeps trying to store it. An entry applies only while the stored
/// generation is still the one it replaces: once anything newer is stored, it is ignored and dropped.
package final class PendingRotations: Sendable {
    package struct Entry: Sendable {
        package let token: String
        /// The generation of the stored refresh token this one replaces.
        package let replacing: Int64
        /// The fenced write that stores it (refresh token alone); nil for an entry held without one.
        package let write: RotationWrite?

        package init(token: String, replacing: Int64, write: RotationWrite? = nil) {
            self.token = token
            self.replacing = replacing
            self.write = write
        }
    }

    private let entries = Mutex<[String: Entry]>([:])

    /// Seconds the background task keeps trying to store a rotation. Default 300.
    package let persistWindowSeconds: Double

    package init(persistWindowSeconds: Double = 300) {
        self.persistWindowSeconds = persistWindowSeconds
    }

    package func hold(_ entry: Entry, accountId: String) {
        entries.withLock { $0[accountId] = entry }
    }

    /// The held token that replaces the stored generation `generation`, if any.
    package func token(for accountId: String, replacing generation: Int64) -> String? {
        entry(for: accountId, replacing: generation)?.token
    }

    /// The held rotation that replaces the stored generation `generation`, if any.
    package func entry(for accountId: String, replacing generation: Int64) -> Entry? {
        entries.withLock { entries in
            guard let entry = entries[accountId] else { return nil }
            guard entry.replacing == generation else {
                // Something newer was stored: this rotation is history.
                if generation > entry.replacing { entries[accountId] = nil }
                return nil
            }
            return entry
        }
    }

    /// Drops the entry for `accountId` if it is still the one replacing `generation`.
    package func release(accountId: String, replacing generation: Int64) {
        entries.withLock { entries in
            if entries[accountId]?.replacing == generation { entries[accountId] = nil }
        }
    }

    package var count: Int { entries.withLock { $0.count } }
}
