/// How a store compacts its logs online (``StoreConfiguration/compaction``). Every default is the production
/// setting.
///
/// A partition compacts when the dead bytes of its sealed segments (superseded record versions, purged tombstones,
/// records of deleted zones) reach both ``minDeadBytes`` and ``minDeadRatio`` of those segments. Compaction copies
/// the live frames into new segments off the writer lock, at most ``bytesPerSecond``, then swaps them in with a
/// pause of the writers proportional to the live records it moved (about 0.5 µs each: 100 ms for 200,000 records in
/// a release build; ``CloudletStore/statistics`` reports the longest).
public struct CompactionConfiguration: Sendable, Hashable {
    /// Compact in the background when the thresholds are met. Default true. ``CloudletStore/compact(includeActiveSegment:bytesPerSecond:progress:)``
    /// works either way.
    public var automatic: Bool = true
    /// The share of dead bytes in the sealed segments that starts a compaction. Default 0.5 (like Kafka's
    /// `min.cleanable.dirty.ratio`).
    public var minDeadRatio: Double = 0.5
    /// The dead bytes that start a compaction, at least. Default 64 MiB (one segment of the default size).
    public var minDeadBytes: Int = 64 << 20
    /// The bytes per second compaction reads (and about as many it writes), at most; 0 for no limit. Default 32 MiB/s,
    /// a fraction of a disk's sequential bandwidth, so that foreground I/O keeps most of it.
    public var bytesPerSecond: Int = 32 << 20

    public init() {}

    /// No automatic compaction (explicit calls still compact).
    public static var manual: CompactionConfiguration {
        var c = CompactionConfiguration()
        c.automatic = false
        return c
    }
}
