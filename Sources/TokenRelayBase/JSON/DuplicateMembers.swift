import Foundation
import Synchronization

/// Finds a member named twice in one JSON object, which `JSONSerialization` (our body reader,
/// ADR 0013) silently collapses to its last value. RFC 8259 §4 leaves such objects'
/// meaning to the reader; we refuse them instead (behaviour §4.5).
///
/// No parser of our own: Foundation's `JSONDecoder` reads the text (``JSONMemberWalk``), and its
/// `.custom` key decoding strategy is called once for every member of every object it opens,
/// duplicates included, with the member's full coding path. Decoding is slower than `JSONSerialization`, so
/// `JSONBody` calls this only when its cheap count of quotation marks says a member may be missing.
package enum DuplicateMembers {
    /// The dotted path (`scopes`, `claims.access_token`, `items.0.name`) of the first member
    /// named twice in its object, or nil when there is none or `JSONDecoder` cannot read `bytes`.
    package static func first(in bytes: [UInt8]) -> String? {
        let recorder = Recorder()
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .custom { path in
            recorder.saw(path)
            return path.last ?? JSONMemberWalk.MemberKey(stringValue: "")
        }
        _ = try? decoder.decode(JSONMemberWalk.self, from: Data(bytes))
        return recorder.duplicate
    }

    private final class Recorder: Sendable {
        private let state = Mutex<(seen: Set<String>, duplicate: String?)>(([], nil))

        func saw(_ path: [any CodingKey]) {
            let dotted = JSONMemberWalk.dotted(path)
            state.withLock { state in
                if !state.seen.insert(dotted).inserted, state.duplicate == nil { state.duplicate = dotted }
            }
        }

        var duplicate: String? { state.withLock { $0.duplicate } }
    }
}
