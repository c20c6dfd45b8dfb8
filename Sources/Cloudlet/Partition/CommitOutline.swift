import CloudletCore

/// A commit payload parsed only as far as compaction needs (docs/record-format.md, "Commit payload"): each
/// mutation's kind, zone, record name and byte range — no record is decoded. Compaction decides liveness from it
/// and rewrites a frame by copying the bytes of the mutations it keeps.
package struct CommitOutline {
    package struct Entry {
        /// The mutation's index in the commit as first written.
        var index: UInt32
        package var kind: MutationKind
        /// Index into ``CommitOutline/zones`` (kinds 1–4).
        package var zone: Int?
        /// The record's name (puts and deletes).
        var name: String?
        /// The mutation's bytes in the payload, kind byte included.
        var range: Range<Int>
        /// Where the bytes after the kind and zone index start (kinds 1–4).
        var bodyStart: Int
        /// A put's record bytes.
        var slot: Commit.Slot?
        /// A catalog mutation (schema, index flags, subscription) in a data partition's log: written there by
        /// format-1 stores, dead once the store is migrated (the catalog has its own log).
        var legacyCatalog = false
    }

    package var zones: [ZoneKey]
    package var entries: [Entry]
    /// Mutations in the commit as first written, skipped ones included.
    var count: Int

    /// Parses `payload`; throws `.corruption` like ``Commit/decode(_:)`` for what does not parse (records are not
    /// checked beyond their type and name).
    static func parse(_ payload: [UInt8]) throws -> CommitOutline {
        var r = ByteReader(payload, what: "commit payload")
        let v = try r.u8()
        guard v == Commit.version else { throw CloudletError.corruption("commit payload: unknown version \(v)") }
        let zoneCount = try r.length(unit: 5)
        var zones: [ZoneKey] = []
        zones.reserveCapacity(zoneCount)
        for _ in 0..<zoneCount { zones.append(try Commit.decodeZone(&r)) }
        let n = try r.varint()
        guard n <= UInt64(UInt32.max) else { throw CloudletError.corruption("commit payload: \(n) mutations") }
        var entries: [Entry] = []
        var index = 0
        func zone(_ r: inout ByteReader) throws -> Int {
            let i = try r.varint()
            guard i < zones.count else { throw CloudletError.corruption("commit payload: zone index \(i) out of range") }
            return Int(i)
        }
        while index < Int(n) {
            let start = r.offset
            let kind = try MutationKind(byte: r.u8())
            if kind == .skipped {
                let run = try r.varint()
                guard run >= 1, run <= n - UInt64(index) else {
                    throw CloudletError.corruption("commit payload: a skipped run of \(run) mutations at index \(index) of \(n)")
                }
                index += Int(run)
                continue
            }
            var e = Entry(index: UInt32(index), kind: kind, zone: nil, name: nil, range: start..<start, bodyStart: start + 1)
            index += 1
            switch kind {
            case .putRecord:
                e.zone = try zone(&r)
                e.bodyStart = r.offset
                let len = try r.length()
                let recordStart = r.offset
                var record = ByteReader(payload, from: recordStart, to: recordStart + len, what: "record in commit payload")
                _ = try record.u8()
                _ = try record.string()
                e.name = try record.string()
                _ = try r.raw(len)
                e.slot = Commit.Slot(offset: UInt32(recordStart), length: UInt32(len))
            case .deleteRecord:
                e.zone = try zone(&r)
                e.bodyStart = r.offset
                e.name = try r.string()
                _ = try r.string()
                _ = try r.svarint()
            case .createZone:
                e.zone = try zone(&r)
                e.bodyStart = r.offset
            case .deleteZone:
                e.zone = try zone(&r)
                e.bodyStart = r.offset
                _ = try r.svarint()
            case .schemaField:
                e.legacyCatalog = true
                _ = try r.string()
                _ = try r.u8()
                _ = try r.string()
                _ = try r.string()
                _ = try r.u8()
            case .schemaReset:
                e.legacyCatalog = true
                _ = try r.string()
            case .purge: _ = try r.u64()
            case .index:
                if case .flags = try IndexMutation.decode(&r) { e.legacyCatalog = true }
            case .catalogVersion: _ = try r.varint()
            case .saveSubscription:
                e.legacyCatalog = true
                _ = try SubscriberID.decode(&r)
                _ = try Subscription.decode(&r)
            case .deleteSubscription:
                e.legacyCatalog = true
                _ = try SubscriberID.decode(&r)
                _ = try r.string()
            case .skipped: preconditionFailure("a skipped run is read above")
            }
            e.range = start..<r.offset
            entries.append(e)
        }
        guard r.isAtEnd else { throw CloudletError.corruption("commit payload: \(r.remaining) trailing bytes") }
        return CommitOutline(zones: zones, entries: entries, count: Int(n))
    }

    /// Whether entry `e` of the commit at `lsn` is current in `st` (``PartitionState/isLive(_:lsn:index:)``).
    func isLive(_ e: Entry, lsn: UInt64, in st: PartitionState) -> Bool {
        switch e.kind {
        case .putRecord, .deleteRecord:
            return st.entry(zones[e.zone!], e.name!)?.change == ChangePoint(lsn: lsn, index: e.index)
        case .createZone: return st.zones[zones[e.zone!]]?.createdLSN == lsn
        case .deleteZone: return st.deletedZones[zones[e.zone!]]?.lsn == lsn
        case .catalogVersion: return st.catalogMark?.lsn == lsn
        case .schemaField, .schemaReset, .purge, .index, .saveSubscription, .deleteSubscription, .skipped:
            return !e.legacyCatalog
        }
    }

    /// The bytes each entry takes in the payload.
    var sizes: [UInt32] { entries.map { UInt32($0.range.count) } }

    /// A payload holding only the entries `keep` selects, each at its index (the others as skipped runs), with a zone
    /// table of the zones they use; their bytes are copied, not re-encoded. Returns the kept entries as they sit in
    /// the new payload.
    func rewrite(_ payload: [UInt8], keep: [Bool]) -> (payload: [UInt8], entries: [Entry]) {
        var zoneMap: [Int: Int] = [:]
        var newZones: [ZoneKey] = []
        for (k, e) in entries.enumerated() where keep[k] {
            if let z = e.zone, zoneMap[z] == nil {
                zoneMap[z] = newZones.count
                newZones.append(zones[z])
            }
        }
        var w = ByteWriter(capacity: payload.count)
        w.u8(Commit.version)
        w.varint(newZones.count)
        for z in newZones { Commit.encode(z, into: &w) }
        w.varint(count)
        var kept: [Entry] = []
        var next = 0
        for (k, e) in entries.enumerated() where keep[k] {
            if Int(e.index) > next {
                w.u8(MutationKind.skipped.rawValue)
                w.varint(Int(e.index) - next)
            }
            next = Int(e.index) + 1
            var moved = e
            let start = w.count
            if let z = e.zone {
                w.u8(e.kind.rawValue)
                w.varint(zoneMap[z]!)
                moved.zone = zoneMap[z]
                let bodyStart = w.count
                w.raw(payload[e.bodyStart..<e.range.upperBound])
                if let slot = e.slot {
                    moved.slot = Commit.Slot(offset: UInt32(bodyStart + Int(slot.offset) - e.bodyStart), length: slot.length)
                }
                moved.bodyStart = bodyStart
            } else {
                w.raw(payload[e.range])
            }
            moved.range = start..<w.count
            kept.append(moved)
        }
        if count > next {
            w.u8(MutationKind.skipped.rawValue)
            w.varint(count - next)
        }
        return (w.bytes, kept)
    }
}
