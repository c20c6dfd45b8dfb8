import CloudletCore
import CloudletStorage

/// What `cloudlet-tool info` shows of a store.
@_spi(Maintenance) public struct StoreInfo: Sendable {
    public struct Segment: Sendable {
        public var name: String
        public var firstLSN: UInt64
        /// Last LSN held (regular) or covered (compacted); nil when unknown (the store did not open).
        public var lastLSN: UInt64?
        public var size: UInt64
        public var generation: UInt32?
        /// The epoch in the header (nil: damaged header).
        public var epoch: UInt64?
    }

    public struct Checkpoint: Sendable {
        public var name: String
        public var lsn: UInt64
        public var size: UInt64
        public var generation: UInt32?
        /// What is wrong with it, or why it is not used.
        public var problem: String?
        /// Whether opening the store used it.
        public var used: Bool
    }

    public struct Zone: Sendable {
        public var partition: Int
        public var key: ZoneKey
        public var records: Int
        public var tombstones: Int
        public var createdLSN: UInt64
        public var lastChangeLSN: UInt64
    }

    public struct Partition: Sendable {
        public var index: Int
        public var directory: String
        public var segments: [Segment] = []
        public var marker: CompactionMarker?
        public var leftovers: [String] = []
        public var checkpoints: [Checkpoint] = []
        /// From the opened store (nil if it did not open).
        public var lastLSN: UInt64?
        public var framesReplayed: Int?
        public var purgedThroughLSN: UInt64?
        public var deletedZones: Int?
        public var sealedBytes: UInt64?
        public var deadBytes: UInt64?
    }

    public var metadata: StoreMetadata
    public var partitions: [Partition] = []
    public var zones: [Zone] = []
    /// The catalog: its log's files and what it holds.
    public var catalog: CatalogInfo?
    /// Why the store could not be opened read-only (then only the files are described).
    public var openError: String?

    public var logBytes: UInt64 { partitions.reduce(0) { $0 + $1.segments.reduce(0) { $0 + $1.size } } }
}

extension StoreInspector {
    /// Describes the store's files and, if it opens read-only, its derived state. Never fails on bad data: what
    /// cannot be read is reported in the result.
    public func info() throws -> StoreInfo {
        var info = StoreInfo(metadata: metadata)
        var store: CloudletStore?
        do { store = try openStore() } catch let e as CloudletError { info.openError = e.description }
        defer { try? store?.closeNow() }
        for p in 0..<partitionCount {
            let dir = partitionDirectory(p)
            var part = StoreInfo.Partition(index: p, directory: dir)
            let opened = store?.partitions[p]
            var lastLSNs: [UInt64: UInt64] = [:]
            if let opened { for s in opened.log.segments() { lastLSNs[s.firstLSN] = s.lastLSN } }
            if let layout = try? LogLayout.load(directory: dir, fileSystem: fileSystem) {
                part.marker = layout.marker
                part.leftovers = layout.leftovers
                for (i, file) in layout.segments.enumerated() {
                    let header = LogLayout.header(of: file.path, fileSystem: fileSystem)
                    let last =
                        lastLSNs[file.firstLSN] ?? header?.coveredThrough
                        ?? (i + 1 < layout.segments.count ? layout.segments[i + 1].firstLSN - 1 : nil)
                    part.segments.append(
                        StoreInfo.Segment(
                            name: String(file.path.split(separator: "/").last!), firstLSN: file.firstLSN, lastLSN: last,
                            size: header?.size ?? 0, generation: file.generation, epoch: header?.epoch))
                }
            }
            if let (files, _) = try? CheckpointStore(directory: dir, fileSystem: fileSystem).list() {
                for f in files {
                    var c = StoreInfo.Checkpoint(
                        name: String(f.path.split(separator: "/").last!), lsn: f.lsn, size: f.size, generation: nil,
                        problem: f.problem, used: opened?.checkpointLSN == f.lsn)
                    if f.problem == nil {
                        do {
                            if let st = try PartitionState.decodeCheckpoint(f.payload, next: f.next) {
                                c.generation = st.compactionGeneration
                                if st.compactionGeneration != (part.marker?.generation ?? 0) {
                                    c.problem = "taken under compaction generation \(st.compactionGeneration): ignored"
                                }
                            } else {
                                c.problem = "an older checkpoint format: ignored"
                            }
                        } catch let e as CloudletError {
                            c.problem = e.message
                        }
                    }
                    part.checkpoints.append(c)
                }
            }
            if let opened {
                part.lastLSN = opened.log.lastLSN
                part.framesReplayed = opened.framesReplayed
                let (dead, sealed) = opened.deadBytes()
                part.sealedBytes = sealed
                part.deadBytes = dead
                opened.state.withLock { st in
                    part.purgedThroughLSN = st.purgedThroughLSN
                    part.deletedZones = st.deletedZones.count
                    for (key, zone) in st.zones {
                        let tombstones = zone.records.count - zone.liveCount
                        info.zones.append(
                            StoreInfo.Zone(
                                partition: p, key: key, records: zone.liveCount, tombstones: tombstones,
                                createdLSN: zone.createdLSN, lastChangeLSN: zone.lastChangeLSN))
                    }
                }
            }
            info.partitions.append(part)
        }
        info.zones.sort { $0.key.canonicalName < $1.key.canonicalName }
        info.catalog = catalogInfo(store: store)
        return info
    }
}
