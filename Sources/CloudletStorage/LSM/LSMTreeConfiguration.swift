/// How an ``LSMTree`` behaves. Every default is documented; they suit a partition's derived indexes (keys of tens
/// of bytes, values of tens to hundreds).
public struct LSMTreeConfiguration: Sendable {
    /// How runs are written (block size, restart interval, bloom bits, compression).
    public var run = SortedRunConfiguration()
    /// The manifest's behaviour (rewrite size, read-only).
    public var manifest = Manifest.Configuration()
    /// The block cache shared by the tree's readers; nil makes one of ``blockCacheCapacity`` bytes.
    public var blockCache: BlockCache?
    /// Bytes of the block cache the tree makes when ``blockCache`` is nil. Default 8 MiB.
    public var blockCacheCapacity = 8 << 20
    /// ``LSMTree/needsFlush`` turns true once the memtable holds this many bytes. Default 4 MiB.
    public var memtableSize = 4 << 20
    /// Level-0 runs that trigger a merge of level 0 into level 1. Default 4.
    public var level0MergeTrigger = 4
    /// With background merges, a flush that leaves this many level-0 runs waits until merging brings them below
    /// it (or fails): every read looks at every level-0 run, so they must not pile up faster than merges go.
    /// Must be above ``level0MergeTrigger``. Default 12.
    public var level0StopTrigger = 12
    /// Bytes level 1 may hold before one of its runs is merged down; each deeper level may hold
    /// ``levelSizeMultiplier`` times more. Default 10 MiB.
    public var level1Size: UInt64 = 10 << 20
    /// Default 10.
    public var levelSizeMultiplier: UInt64 = 10
    /// A merge into level 1 closes an output run once it reaches about this size and starts the next; each deeper
    /// level's runs are ``targetRunSizeMultiplier`` times larger (``targetRunSize(level:)``). Default 2 MiB.
    public var targetRunSize: UInt64 = 2 << 20
    /// How much larger a level's runs are than the level above's (RocksDB's `target_file_size_multiplier`), so that
    /// a large tree has tens of runs, not hundreds: with the defaults, 2 MiB at level 1, 8 at 2, 32 at 3, 64 from
    /// 4 on (``maxTargetRunSize``). A merge streams its inputs; what it holds grows with its output run: the run's
    /// index and a key hash per entry for the filter (8 bytes an entry, ~1 % of the run's bytes at index sizes),
    /// so the cap bounds a merge's memory. 1: every level alike. Default 4.
    public var targetRunSizeMultiplier: UInt64 = 4
    /// The largest ``targetRunSize(level:)``. Default 64 MiB.
    public var maxTargetRunSize: UInt64 = 64 << 20
    /// Merges between levels ≥ 1 write at most this many bytes a second (nil: as fast as they can) while level 0
    /// is below ``level0MergeTrigger``; merges out of level 0, which flushes wait for, and any merge while level 0 is
    /// at its trigger, are never limited. Default 16 MiB/s.
    public var mergeBytesPerSecond: Int? = 16 << 20
    /// Whether a background thread merges runs as flushes add them. Off, merges happen only in
    /// ``LSMTree/mergeUntilIdle()``. Default true.
    public var backgroundMerges = true

    public init() {}

    /// The size at which a merge into `level` (≥ 1) closes an output run: ``targetRunSize`` times
    /// ``targetRunSizeMultiplier`` for each level below 1, at most ``maxTargetRunSize`` (and at least
    /// ``targetRunSize``).
    public func targetRunSize(level: Int) -> UInt64 {
        var size = targetRunSize
        let cap = max(targetRunSize, maxTargetRunSize)
        for _ in 1..<max(1, level) {
            let (next, overflow) = size.multipliedReportingOverflow(by: max(1, targetRunSizeMultiplier))
            size = overflow ? cap : min(next, cap)
        }
        return size
    }

    /// The byte budget of level `level` (≥ 1).
    func maxBytes(level: Int) -> UInt64 {
        var size = level1Size
        for _ in 1..<max(1, level) { size = size.multipliedReportingOverflow(by: levelSizeMultiplier).partialValue }
        return size
    }
}

/// What an ``LSMTree`` holds and has done, for metrics and `cloudlet-tool stats`.
public struct LSMTreeStatistics: Sendable {
    /// The active memtable's approximate size and key count.
    public var memtableBytes = 0
    public var memtableEntries = 0
    /// Memtables being flushed.
    public var immutableMemtables = 0
    /// Run count and bytes per level (index = level).
    public var runsPerLevel: [Int] = []
    public var bytesPerLevel: [UInt64] = []
    /// Flushes and merges completed since the tree was opened.
    public var flushes = 0
    public var merges = 0
    /// Bytes written by merges (run files).
    public var mergeBytesWritten: UInt64 = 0
    public var blockCache = BlockCache.Statistics()
    /// The error that stopped background merging (or failed a flush), if any.
    public var backgroundError: String?
}
