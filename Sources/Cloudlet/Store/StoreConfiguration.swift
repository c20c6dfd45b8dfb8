import CloudletCore
import CloudletStorage

/// Options of an embedded store. Every default is what a production deployment should use.
public struct StoreConfiguration: Sendable {
    /// When a commit is acknowledged: `.fsync` (default) after `fdatasync` of its group; `.os` once written to the
    /// operating system (survives a process crash, not a power loss; for bulk loads and tests).
    public var durability: Durability = .fsync
    /// Number of partitions, fixed when a store is created (ignored when opening an existing store). Default 1.
    public var partitions: Int = 1
    /// Segment files roll at this size. Default 64 MiB.
    public var segmentSize: Int = 64 << 20
    /// A partition flushes its index (the key directory's memtable and the rest of its derived state) after this
    /// many bytes of log, which bounds what opening after a crash replays. Default 64 MiB.
    public var checkpointInterval: Int = 64 << 20
    /// A partition flushes its index once the key directory's memtable holds about this many bytes (a record's
    /// version costs roughly 250–300 bytes there). Default 32 MiB.
    public var memtableSize: Int = 32 << 20
    /// Writes to a partition stall (wait, async callers suspended) while the key directory's memtable holds this
    /// many bytes and the flush of the previous one still runs — a flush may wait long for the index's merges, and
    /// the memtable would otherwise grow without bound meanwhile (RocksDB's `max_write_buffer_number`). Nil (the
    /// default): twice ``memtableSize``. Stalls are counted in ``StoreStatistics/writeStalls``.
    public var writeStallSize: Int?
    /// Bytes of index blocks (the key directory's runs, all partitions) cached in memory. Default 32 MiB.
    public var indexCacheSize: Int = 32 << 20
    /// Decoded records kept in memory per partition. Default 10,000.
    public var recordCacheSize: Int = 10_000
    /// Key-directory entries of records read lately kept in memory per partition, so that reading a record again
    /// does not search the index's runs (about 200 bytes each: ~13 MiB at the default). 0 turns it off. Default
    /// 65,536.
    public var entryCacheSize: Int = 65_536
    /// Open without writing anything (no lock, no tail truncation); every write throws `readOnly`.
    public var readOnly: Bool = false
    /// A replica of a cluster (`cloudlet serve --cluster`): its partitions and its catalog follow their leaders
    /// each on their own stream, so after a crash the catalog may trail the schema versions the partitions' commits
    /// were validated against until it catches up; opening does not refuse that. Default false.
    ///
    /// A replica's partition logs are compacted (in the background and by
    /// ``CloudletStore/compact(includeActiveSegment:bytesPerSecond:progress:)``) only up to the cluster's compaction
    /// horizon — the highest LSN every replica is known to hold, fsynced and equal — which the replication layer
    /// raises (``LogConfiguration/boundedCompaction``; docs/replication.md, "Compaction"). Before it first does, and
    /// in a store that never joined a cluster's replication, nothing is compacted.
    public var replicated: Bool = false
    /// How long tombstones (deleted records and zones) are kept for change feeds, in seconds. A change token
    /// older than this gets `changeTokenExpired`. Default 30 days.
    public var tombstoneRetention: Double = 30 * 24 * 3600
    /// How long an asset file no record references is kept, in seconds from when it was last written or uploaded
    /// again: the window in which an upload's receipt can still be used in a save. The asset garbage collection
    /// (``CloudletStore/collectAssetGarbage(gracePeriod:)``) deletes only older ones. Keep it longer than the
    /// server's upload URL lifetime. Default 1 hour.
    public var assetGracePeriod: Double = 3600
    /// The most subscriptions one user may have in one database (their private or shared database, or their own
    /// subscriptions in the public one). A save that would pass it fails with `quotaExceeded` (`QUOTA_EXCEEDED`),
    /// and a batch of saves that would pass it saves none of them. Matching costs follow the subscriptions a commit
    /// can fire, but each one is kept in memory and checked against every record of its type and zone: this keeps
    /// one user from slowing everyone's notifications. Default 1,000.
    public var subscriptionsPerUser: Int = 1_000
    /// Bytes of notifications kept in the durable notification log (`notifications/`): past it the oldest are
    /// dropped, and a client asking from before them is told `gap` (resynchronize with change tokens). Default 64 MiB.
    public var notificationLogSize: Int = 64 << 20
    /// How long notifications are kept in the durable notification log, in seconds: older ones are dropped (whole
    /// segments at a time, so some live a little longer). Default 7 days.
    public var notificationRetention: Double = 7 * 24 * 3600
    /// Notifications kept in memory per user (container, environment): what a client reads without going to the
    /// durable log. A client asking from before the oldest kept — or from the start (`after` nil) once older ones
    /// were dropped — is told `gap`. Default 10,000.
    public var notificationsInMemory: Int = 10_000
    /// The device ID recorded in `created` / `modified` of records this process saves. Default `cloudlet`.
    public var deviceID: String = "cloudlet"
    /// Online compaction: when it starts and how fast it may go. Default: automatic at 50% dead bytes and at least
    /// 64 MiB of them, 32 MiB/s (see ``CompactionConfiguration``).
    public var compaction = CompactionConfiguration()
    /// The commit payload version written (docs/record-format.md): tests set 1 to write what releases before store
    /// format 3 wrote.
    package var commitPayloadVersion: UInt8 = Commit.version

    public init(durability: Durability = .fsync) { self.durability = durability }
}

extension StoreConfiguration {
    /// The memtable size at which writes stall while a flush runs (``writeStallSize``, by default twice
    /// ``memtableSize``).
    var writeStallMemtableSize: Int { writeStallSize ?? memtableSize.multipliedReportingOverflow(by: 2).partialValue }
}
