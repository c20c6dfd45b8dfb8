/// When a staged frame counts as durable.
public enum Durability: String, Sendable {
    /// After the group holding it was written and `fdatasync`ed (the default): survives a power failure.
    case fsync
    /// After the group holding it was written to the OS (`pwrite`): survives a process crash, not a power failure.
    /// Segment creation and sealing are still synced, so a power failure loses a suffix, never the log's shape.
    /// For bulk loads and tests.
    case os
}

/// How a partition's ``Log`` writes. Every default is the production setting.
public struct LogConfiguration: Sendable {
    /// When a frame counts as durable. Default ``Durability/fsync``.
    public var durability: Durability = .fsync
    /// A segment rolls when the next frame would end past this many bytes (header included). A segment always
    /// holds at least one frame, so a bigger frame gets a segment of its own. Default 64 MiB.
    public var segmentSize: Int = 64 << 20
    /// Payloads of at least this many bytes are LZ4-compressed; the compressed form is kept only if it saves at
    /// least 1/8 of the bytes. Default 256.
    public var compressionThreshold: Int = 256
    /// The leader epoch ``Log/stage(type:payload:compressible:admitOverLimit:)`` stamps into new frames until
    /// ``Log/lead(epoch:)`` changes it. Default 1.
    public var epoch: UInt64 = 1
    /// ``Log/stage(type:payload:)`` blocks while this many bytes are staged but not yet written (backpressure).
    /// Default 256 MiB.
    public var maxPendingBytes: Int = 256 << 20
    /// Open without truncating, repairing or writing anything; ``Log/stage(type:payload:)`` throws `.readOnly`.
    /// Default false.
    public var readOnly: Bool = false
    /// A replica's log (`cloudlet serve --cluster`): compaction takes in only segments at or below
    /// ``Log/compactionLimit``, which starts at the directory's ``CompactionHorizon`` (0 without one) and is raised by
    /// the replication layer (``Log/raiseCompactionLimit(to:persist:)``). Default false: no limit.
    public var boundedCompaction: Bool = false
    /// Reads of records and frames load from a read-only mapping of their segment (``MappedRegion``) instead of a
    /// `pread` each, for at most this many segments at a time (the least recently read one is unmapped past that):
    /// at most this many × ``segmentSize`` bytes of address space, whose pages are the OS page cache's — counted in
    /// the process's `RssFile`, never in `RssAnon`, and given back by the kernel under memory pressure. 0: never map.
    /// Only where the file system maps (``File/mapReadOnly(count:)``). Default 1,024 (64 GiB of address space at the
    /// default segment size): a bound of 8 made uniform reads of a 10 M-record log (~70 segments) map one segment and
    /// unmap another on almost every read (Benchmarks/README.md, "Mapping every segment").
    public var mappedSegments: Int = 1024

    public init() {}
}
