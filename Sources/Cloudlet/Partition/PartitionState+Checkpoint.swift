import CloudletCore
import CloudletStorage

/// Encodings of a partition's derived state: the state flushed with the key directory (format 4), and the
/// checkpoints of format-3 stores, read once to migrate them (docs/record-format.md, "Checkpoint payload").
extension PartitionState {
    /// Version 5 (this one) says of each record's slot whether it holds a record block (``Commit/Slot/block``), and
    /// no longer stores change tags (derived: ``RecordEntry/changeTag``). Version 4 is read with every slot a
    /// version-1 one (no release before version 5 wrote
    /// record blocks). Version 4 brought the compaction generation, the live-byte accounting, each record's indexed
    /// values and the partition's catalog-version mark; schema and subscriptions moved to the catalog (version 3
    /// held them in partition 0). A checkpoint older than version 4 is ignored: the log is replayed from the start,
    /// which rebuilds everything.
    static let checkpointVersion: UInt8 = 5
    /// The oldest version read.
    static let oldestReadableCheckpointVersion: UInt8 = 4

    /// The partition's state besides the key directory's records: written into the directory's memtable at each
    /// flush (``KeyDirectory/freeze(state:sequence:)``), so it lands in the same run as the records it goes with,
    /// and read back on open (docs/index-layer.md, "Flushed state"). Small: a few words per zone, per segment and
    /// per index. Version 8 (this one) adds each full-text index's totals per zone, with the postings' values
    /// (``TextPosting``) that version 7 lacked: a version-7 state is read and its text indexes given both
    /// (``IndexState/migrateTextPostings(keys:sequence:)``). Version 7 held index definitions and record counts only,
    /// the indexes' contents being key ranges of the directory; version 6 held every indexed record's values, and is
    /// migrated when read (``migrateIndexes(_:checkpoint:)``).
    static let stateVersion: UInt8 = 8
    /// The oldest flushed state read.
    static let oldestReadableStateVersion: UInt8 = 6

    func encodeState() -> [UInt8] {
        var w = ByteWriter(capacity: 1 << 12)
        w.u8(Self.stateVersion)
        w.u64(lastLSN)
        w.u64(purgedThroughLSN)
        w.u32(compactionGeneration)
        let summaries = keys.allSummaries
        w.varint(summaries.count)
        for (key, zone) in summaries {
            Commit.encode(key, into: &w)
            w.u64(zone.createdLSN)
            w.u64(zone.lastChangeLSN)
            w.varint(zone.liveCount)
            w.varint(zone.entryCount)
            encode(zoneCreations[key], into: &w)
        }
        w.varint(deletedZones.count)
        for (key, d) in deletedZones {
            Commit.encode(key, into: &w)
            w.u64(d.lsn)
            w.svarint(d.time)
            encode(zoneDeletions[key], into: &w)
        }
        w.varint(segmentLive.count)
        for (segment, live) in segmentLive {
            w.u64(segment)
            w.svarint(live)
        }
        if let mark = catalogMark {
            w.bool(true)
            w.u64(mark.version)
            w.u64(mark.lsn)
            w.u64(mark.span.segment)
            w.u32(mark.span.cost)
        } else {
            w.bool(false)
        }
        indexes.encode(into: &w)
        return w.bytes
    }

    private func encode(_ span: LiveSpan?, into w: inout ByteWriter) {
        w.bool(span != nil)
        if let span {
            w.u64(span.segment)
            w.u32(span.cost)
        }
    }

    private static func decodeSpan(_ r: inout ByteReader) throws -> LiveSpan? {
        try r.bool() ? LiveSpan(segment: try r.u64(), cost: try r.u32()) : nil
    }

    /// Reads what ``encodeState()`` wrote, over the key directory's runs `base` (the records).
    package static func decodeState(_ bytes: [UInt8], base: LSMReadView) throws -> PartitionState {
        var r = ByteReader(bytes, what: "flushed partition state")
        let v = try r.u8()
        guard (oldestReadableStateVersion...stateVersion).contains(v) else {
            throw CloudletError.corruption("flushed partition state: unknown version \(v)")
        }
        var s = PartitionState()
        s.lastLSN = try r.u64()
        s.purgedThroughLSN = try r.u64()
        s.compactionGeneration = try r.u32()
        var summaries: [ZoneKey: ZoneSummary] = [:]
        for _ in 0..<(try r.length()) {
            let key = try Commit.decodeZone(&r)
            var zone = ZoneSummary(createdLSN: try r.u64())
            zone.lastChangeLSN = try r.u64()
            // Counts, not byte lengths: a zone may hold more records than the state has bytes.
            zone.liveCount = try r.int()
            zone.entryCount = try r.int()
            summaries[key] = zone
            s.zoneCreations[key] = try decodeSpan(&r)
        }
        s.setDirectory(KeyDirectory(base: base, summaries: summaries))
        for _ in 0..<(try r.length()) {
            let key = try Commit.decodeZone(&r)
            s.deletedZones[key] = (try r.u64(), try r.svarint())
            s.zoneDeletions[key] = try decodeSpan(&r)
        }
        for _ in 0..<(try r.length(unit: 9)) { s.segmentLive[try r.u64()] = try r.svarint() }
        if try r.bool() {
            s.catalogMark = CatalogMark(
                version: try r.u64(), lsn: try r.u64(), span: LiveSpan(segment: try r.u64(), cost: try r.u32()))
        }
        switch v {
        case stateVersion: s.indexes = try IndexState.decode(&r)
        case 7: try s.migrateTextPostings(try IndexState.decode(&r, textTotals: false))
        default: try s.migrateIndexes(&r, checkpoint: false)
        }
        guard r.isAtEnd else { throw CloudletError.corruption("flushed partition state: \(r.remaining) trailing bytes") }
        return s
    }

    /// Decodes a checkpoint payload; nil for a payload of an older version (to be ignored).
    package static func decodeCheckpoint(_ bytes: [UInt8], next: FramePosition?) throws -> PartitionState? {
        var r = ByteReader(bytes, what: "checkpoint")
        let v = try r.u8()
        if v < oldestReadableCheckpointVersion { return nil }
        guard v <= checkpointVersion else { throw CloudletError.corruption("checkpoint: unknown version \(v)") }
        var s = PartitionState()
        s.lastLSN = try r.u64()
        s.purgedThroughLSN = try r.u64()
        s.compactionGeneration = try r.u32()
        s.nextPosition = next
        let zoneCount = try r.length()
        for _ in 0..<zoneCount {
            let key = try Commit.decodeZone(&r)
            let created = try r.u64()
            let lastChange = try r.u64()
            if try r.bool() { s.zoneCreations[key] = LiveSpan(segment: try r.u64(), cost: try r.u32()) }
            let n = try r.length()
            var entries: [(name: String, entry: RecordEntry)] = []
            entries.reserveCapacity(n)
            for _ in 0..<n {
                let name = try r.string()
                let lsn = try r.u64()
                let index = try r.u32()
                let time = try r.svarint()
                let deleted = try r.bool()
                let type = try r.string()
                var e = RecordEntry(
                    lsn: lsn, index: index, position: FramePosition(segment: try r.u64(), offset: try r.u64(), length: try r.u32()),
                    slot: Commit.Slot(offset: 0, length: 0), recordType: type, deleted: deleted,
                    time: time, deleteSelfTargets: [], cost: try r.u32())
                if !deleted {
                    let offset = try r.u32()
                    let length = try r.u32()
                    if v >= 5, try r.bool() {
                        e.slot = Commit.Slot(block: Int(offset)..<(Int(offset) + Int(length)), recordLength: Int(try r.u32()))
                    } else {
                        e.slot = Commit.Slot(offset: offset, length: length)
                    }
                    if v < 5 { _ = try r.string() }  // the change tag, derived since
                    let t = try r.length()
                    for _ in 0..<t { e.deleteSelfTargets.append(try r.string()) }
                }
                entries.append((name, e))
            }
            try s.loadZone(key, createdLSN: created, lastChangeLSN: lastChange, entries: entries)
        }
        let deletedCount = try r.length()
        for _ in 0..<deletedCount {
            let key = try Commit.decodeZone(&r)
            s.deletedZones[key] = (try r.u64(), try r.svarint())
            let span = LiveSpan(segment: try r.u64(), cost: try r.u32())
            if span.cost > 0 || span.segment > 0 { s.zoneDeletions[key] = span }
        }
        let liveCount = try r.length(unit: 9)
        for _ in 0..<liveCount { s.segmentLive[try r.u64()] = try r.svarint() }
        if try r.bool() {
            s.catalogMark = CatalogMark(
                version: try r.u64(), lsn: try r.u64(), span: LiveSpan(segment: try r.u64(), cost: try r.u32()))
        }
        try s.migrateIndexes(&r, checkpoint: true)
        guard r.isAtEnd else { throw CloudletError.corruption("checkpoint: \(r.remaining) trailing bytes") }
        return s
    }
}
