import Cloudlet
import CloudletCore
import CloudletStorage

/// Space use of a store (`cloudlet-tool stats`, `compact --dry-run`): live and dead bytes per segment and per zone,
/// compression, tombstones, key directory sizes, each partition's index (runs per level, bytes, flushed LSN), and
/// what a compaction would leave.
///
/// A frame's bytes are spread over its mutations in proportion to their payload bytes; a mutation's share is live
/// while it is current (``PartitionState/isLive(_:lsn:index:)``) and dead once superseded, purged or in a deleted
/// zone — the same accounting that triggers online compaction.
package struct SpaceStats: Sendable {
    package struct Segment: Sendable {
        package var partition: Int
        package var name: String
        package var firstLSN: UInt64
        package var lastLSN: UInt64
        package var generation: UInt32?
        package var size: UInt64 = 0
        package var frames = 0
        package var liveBytes: UInt64 = 0
        /// Payload bytes once decompressed, and as stored.
        package var payloadBytes: UInt64 = 0
        package var storedPayloadBytes: UInt64 = 0
        /// Current record versions and tombstones it holds.
        package var records = 0
        package var tombstones = 0
        /// Mutations it holds that are no longer current.
        package var deadMutations = 0

        package var deadBytes: UInt64 { size > liveBytes ? size - liveBytes : 0 }
        /// Decompressed / stored payload bytes (1 when nothing compressed).
        package var compressionRatio: Double { storedPayloadBytes == 0 ? 1 : Double(payloadBytes) / Double(storedPayloadBytes) }
    }

    package struct Zone: Sendable {
        package var partition: Int
        package var key: ZoneKey
        package var records = 0
        package var tombstones = 0
        package var liveBytes: UInt64 = 0
        package var deadBytes: UInt64 = 0
        /// Key directory entries (records and tombstones) and their approximate size decoded (``entryBytes``).
        package var indexEntries = 0
        package var indexBytes = 0
        /// Change index entries (including stale ones not yet pruned).
        package var changeIndexEntries = 0
    }

    /// What a compaction of everything (the active segment too) would do.
    package struct Plan: Sendable {
        package var framesRead = 0
        package var framesDropped = 0
        package var framesCopied = 0
        package var framesRewritten = 0
        package var bytesBefore: UInt64 = 0
        /// Estimated: copied frames as they are, rewritten ones at their new payload size and the old compression
        /// ratio, plus segment headers.
        package var bytesAfter: UInt64 = 0

        package var bytesReclaimed: UInt64 { bytesBefore > bytesAfter ? bytesBefore - bytesAfter : 0 }
    }

    package struct Partition: Sendable {
        package var index: Int
        package var segments = 0
        package var bytes: UInt64 = 0
        package var liveBytes: UInt64 = 0
        package var deadBytes: UInt64 = 0
        package var records = 0
        package var tombstones = 0
        package var keyDirectoryEntries = 0
        package var keyDirectoryBytes = 0
        package var changeIndexEntries = 0
        /// The index on disk (`p*/index`) that holds the key directory; nil when there is none (a store of format 3
        /// opened read-only keeps it in memory).
        package var indexSummary: IndexSummary?
        package var plan = Plan()
    }

    package var segments: [Segment] = []
    package var zones: [Zone] = []
    package var partitions: [Partition] = []
    /// The catalog's log (not compacted: everything in it is its history) and version.
    package var catalogSegments = 0
    package var catalogBytes: UInt64 = 0
    package var catalogVersion: UInt64 = 0

    package var totalBytes: UInt64 { partitions.reduce(0) { $0 + $1.bytes } }
    package var deadBytes: UInt64 { partitions.reduce(0) { $0 + $1.deadBytes } }
    package var bytesAfterCompaction: UInt64 { partitions.reduce(0) { $0 + $1.plan.bytesAfter } }
}

extension StoreInspector {
    /// Walks every partition's log once against its current state. `segmentSize`: of the segments a compaction
    /// would write (only the count of their headers depends on it).
    package func spaceStats(
        store: CloudletStore, segmentSize: Int = StoreConfiguration().segmentSize, progress: ProgressHandler? = nil
    ) throws -> SpaceStats {
        var stats = SpaceStats()
        for p in store.partitions {
            let st = p.state.withLock { $0 }
            var part = SpaceStats.Partition(index: Int(p.id))
            part.indexSummary = indexSummary(partitionDirectory(Int(p.id)), generation: st.compactionGeneration)?.summary
            var zones: [ZoneKey: SpaceStats.Zone] = [:]
            for key in st.keys.zoneKeys {
                let zone = st.zone(key)!
                var z = SpaceStats.Zone(partition: Int(p.id), key: key)
                z.records = zone.liveCount
                z.tombstones = zone.entryCount - zone.liveCount
                z.indexEntries = zone.entryCount
                try st.records(in: key).forEach { name, e in z.indexBytes += Self.entryBytes(name: name, e) }
                z.changeIndexEntries = zone.changeIndexCount
                zones[key] = z
            }
            let segments = p.log.segments()
            let total = segments.reduce(UInt64(0)) { $0 + $1.size }
            var done: UInt64 = 0
            var plannedPayload: UInt64 = 0
            for info in segments {
                var seg = SpaceStats.Segment(
                    partition: Int(p.id), name: String(info.path.split(separator: "/").last!), firstLSN: info.firstLSN,
                    lastLSN: info.lastLSN, generation: info.generation, size: info.size)
                var reader = try SegmentFrameReader(info, fileSystem: fileSystem)
                while let frame = try reader.next() {
                    let plan = try FrameCompaction(frame, state: st)
                    seg.frames += 1
                    seg.payloadBytes += UInt64(frame.uncompressedLength)
                    seg.storedPayloadBytes += UInt64(frame.storedLength)
                    let costs = plan.costs
                    for (k, e) in plan.outline.entries.enumerated() {
                        let cost = UInt64(costs[k])
                        let zone = e.zone.map { plan.outline.zones[$0] }
                        if plan.live[k] && e.kind == .putRecord { seg.records += 1 }
                        if plan.live[k] && e.kind.isRecordDeletion { seg.tombstones += 1 }
                        if plan.live[k] { seg.liveBytes += cost } else { seg.deadMutations += 1 }
                        if let zone {
                            if zones[zone] == nil { zones[zone] = SpaceStats.Zone(partition: Int(p.id), key: zone) }
                            if plan.live[k] { zones[zone]!.liveBytes += cost } else { zones[zone]!.deadBytes += cost }
                        }
                    }
                    part.plan.framesRead += 1
                    switch plan.action {
                    case .drop: part.plan.framesDropped += 1
                    case .copy:
                        part.plan.framesCopied += 1
                        plannedPayload += UInt64(frame.position.length)
                    case .rewrite(let payload, _):
                        // Written as it is: a rewritten payload's records are compressed blocks already.
                        part.plan.framesRewritten += 1
                        plannedPayload += UInt64(FramePosition.headerSize) + UInt64(payload.count)
                    }
                    done += UInt64(frame.position.length)
                    if done & 0xFFFFF < UInt64(frame.position.length) {
                        progress?(InspectionProgress(phase: "stats partition \(p.id)", bytesDone: done, bytesTotal: total))
                    }
                }
                part.segments += 1
                part.bytes += seg.size
                part.liveBytes += seg.liveBytes
                part.deadBytes += seg.deadBytes
                stats.segments.append(seg)
            }
            part.plan.bytesBefore = part.bytes
            let files = max(1, (plannedPayload + UInt64(segmentSize) - 1) / UInt64(max(segmentSize, 1)))
            // The compacted segments, plus the new empty segment writes go to.
            part.plan.bytesAfter = plannedPayload + (files + 1) * UInt64(SegmentHeaderSize.bytes)
            for z in zones.values {
                part.records += z.records
                part.tombstones += z.tombstones
                part.keyDirectoryEntries += z.indexEntries
                part.keyDirectoryBytes += z.indexBytes
                part.changeIndexEntries += z.changeIndexEntries
            }
            stats.zones += zones.values
            stats.partitions.append(part)
        }
        stats.zones.sort { $0.key.canonicalName < $1.key.canonicalName }
        if let log = store.catalog.log {
            let segments = log.segments()
            stats.catalogSegments = segments.count
            stats.catalogBytes = segments.reduce(0) { $0 + $1.size }
        }
        stats.catalogVersion = store.catalog.snapshot().version
        return stats
    }

    /// Approximate size of one key directory entry once decoded: the entry, a slot for it and the strings that do
    /// not fit inline (Swift keeps strings of up to 15 UTF-8 bytes in the string value itself). The directory
    /// itself is on disk (the index) but for its newest writes.
    static func entryBytes(name: String, _ e: RecordEntry) -> Int {
        func heap(_ s: String) -> Int { s.utf8.count > 15 ? s.utf8.count + 32 : 0 }
        return MemoryLayout<RecordEntry>.stride + MemoryLayout<String>.stride + 8 + heap(name)
            + heap(e.recordType) + e.deleteSelfTargets.reduce(0) { $0 + 16 + heap($1) }
    }
}

/// The fixed sizes of the log format, for estimates.
enum SegmentHeaderSize { static let bytes = 48 }
