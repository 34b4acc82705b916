import Synchronization

/// Byte buffers for response bodies, used again once the server has sent them.
///
/// The server bridge sends a body from its own storage (no copy) and gives the buffer back here
/// when the request has completed; an answer written into a buffer taken from here reuses that
/// storage. A token answer (2 KB and more) is a
/// large-chunk allocation, which `malloc` answers with a consolidation of its small free chunks:
/// allocating and freeing it were about 1.7k instructions of a cached answer (behaviour §10).
///
/// Bounded: at most ``keptCount`` buffers of at most ``largestKept`` bytes each are held (a Graph
/// body of megabytes is freed, not kept).
public final class BodyBuffers: Sendable {
    /// The buffers the server bridge gives back.
    public static let shared = BodyBuffers()

    /// Most buffers held.
    public static let keptCount = 64
    /// Smallest capacity kept, in bytes: smaller buffers come from `malloc`'s small bins, cheaply.
    public static let smallestKept = 1024
    /// Largest capacity kept, in bytes.
    public static let largestKept = 16 << 10

    private let free = Mutex<[[UInt8]]>([])

    public init() {}

    /// An empty buffer, with the capacity of one given back earlier when there is one.
    public func take() -> [UInt8] {
        free.withLock { $0.popLast() } ?? []
    }

    /// Keeps `buffer`'s storage for a later ``take()``, emptied, when its capacity is within the
    /// bounds and fewer than ``keptCount`` are held; else it is freed.
    public func giveBack(_ buffer: consuming [UInt8]) {
        guard (Self.smallestKept...Self.largestKept).contains(buffer.capacity) else { return }
        // Emptied in place: the parameter is the only reference to a sent answer's storage (a
        // copy would share it, and `removeAll(keepingCapacity:)` of a shared array allocates anew).
        buffer.removeAll(keepingCapacity: true)
        let emptied = consume buffer
        free.withLock { held in
            if held.count < Self.keptCount { held.append(emptied) }
        }
    }

    /// Buffers held now.
    public var count: Int { free.withLock { $0.count } }
}
