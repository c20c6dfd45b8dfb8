import Cloudlet
import CloudletCore
import CloudletStorage

/// What `cloudlet-tool info` shows of a store.
package struct StoreInfo: Sendable {
    package struct Segment: Sendable {
        package var name: String
        package var firstLSN: UInt64
        /// Last LSN held (regular) or covered (compacted); nil when unknown (the store did not open).
        package var lastLSN: UInt64?
        package var size: UInt64
        package var generation: UInt32?
        /// The epoch in the header (nil: damaged header).
        package var epoch: UInt64?
    }

    package struct Checkpoint: Sendable {
        package var name: String
        package var lsn: UInt64
        package var size: UInt64
        package var generation: UInt32?
        /// What is wrong with it, or why it is not used.
        package var problem: String?
        /// Whether opening the store used it.
        package var used: Bool
    }

    package struct Zone: Sendable {
        package var partition: Int
        package var key: ZoneKey
        package var records: Int
        package var tombstones: Int
        package var createdLSN: UInt64
        package var lastChangeLSN: UInt64
    }

    package struct Partition: Sendable {
        package var index: Int
        package var directory: String
        package var segments: [Segment] = []
        package var marker: CompactionMarker?
        package var leftovers: [String] = []
        /// The index (`p*/index`, store format 4); nil when there is none (a store of format 3).
        package var indexSummary: IndexSummary?
        /// Whether opening the store read its state from the index (nil if it did not open).
        package var indexUsed: Bool?
        /// Checkpoints: a store of format 3's (read once, to migrate it).
        package var checkpoints: [Checkpoint] = []
        /// From the opened store (nil if it did not open).
        package var lastLSN: UInt64?
        package var framesReplayed: Int?
        package var purgedThroughLSN: UInt64?
        package var deletedZones: Int?
        package var sealedBytes: UInt64?
        package var deadBytes: UInt64?
    }

    package var metadata: StoreMetadata
    package var partitions: [Partition] = []
    package var zones: [Zone] = []
    /// The catalog: its log's files and what it holds.
    package var catalog: CatalogInfo?
    /// Why the store could not be opened read-only (then only the files are described).
    package var openError: String?

    package var logBytes: UInt64 { partitions.reduce(0) { $0 + $1.segments.reduce(0) { $0 + $1.size } } }
}

extension StoreInspector {
    /// Describes the store's files and, if it opens read-only, its derived state. Never fails on bad data: what
    /// cannot be read is reported in the result.
    package func info() throws -> StoreInfo {
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
            let generation = part.marker?.generation ?? (try? CompactionMarker.load(directory: dir, fileSystem: fileSystem))??.generation ?? 0
            if let (summary, usable) = indexSummary(dir, generation: generation) {
                part.indexSummary = summary
                if let opened { part.indexUsed = usable && opened.index != nil && opened.checkpointLSN == summary.flushedLSN }
            }
            if let (files, _) = try? CheckpointStore(directory: dir, fileSystem: fileSystem).list() {
                for f in files {
                    var c = StoreInfo.Checkpoint(
                        name: String(f.path.split(separator: "/").last!), lsn: f.lsn, size: f.size, generation: nil,
                        problem: f.problem, used: part.indexUsed != true && opened?.checkpointLSN == f.lsn)
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
                    for key in st.keys.zoneKeys {
                        let zone = st.zone(key)!
                        let tombstones = zone.entryCount - zone.liveCount
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
