/// A segment file of a log, as ``Log/segments()`` reports it.
public struct SegmentInfo: Sendable, Hashable {
    /// The file's path.
    public var path: String
    /// The LSN of its first frame (its id and file name).
    public var firstLSN: UInt64
    /// The LSN of its last written frame; `firstLSN - 1` while it holds none.
    public var lastLSN: UInt64
    /// Bytes written (header included).
    public var size: UInt64
    /// Whether it is immutable: a later segment exists (or it is compacted), so it was synced and will never be
    /// written again.
    public var sealed: Bool
    /// The compaction generation that wrote a compacted segment; nil for a regular one. A compacted segment's
    /// `lastLSN` is the last LSN it covers: its frames hold some of `firstLSN...lastLSN` (LogFormat.md).
    public var generation: UInt32?

    public init(path: String, firstLSN: UInt64, lastLSN: UInt64, size: UInt64, sealed: Bool, generation: UInt32? = nil) {
        self.path = path
        self.firstLSN = firstLSN
        self.lastLSN = lastLSN
        self.size = size
        self.sealed = sealed
        self.generation = generation
    }

    /// Whether compaction wrote it.
    public var isCompacted: Bool { generation != nil }

    /// How many LSNs it spans: the frames of a regular segment (a compacted one may hold fewer).
    public var frameCount: UInt64 { lastLSN + 1 - firstLSN }
}
