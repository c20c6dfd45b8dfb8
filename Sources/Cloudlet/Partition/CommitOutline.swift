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

    /// Parses `payload` (``CommitPayloadReader``); throws `.corruption` like ``Commit/decode(_:)`` for what does not
    /// parse (records are not checked beyond their type and name).
    static func parse(_ payload: [UInt8]) throws -> CommitOutline {
        var reader = try CommitPayloadReader(payload, decodingRecords: false)
        var entries: [Entry] = []
        while let (e, _) = try reader.next() { entries.append(e) }
        return CommitOutline(zones: reader.zones, entries: entries, count: reader.count)
    }

    /// What entry `e` keeps current while it is live (``PartitionState/isLive(_:lsn:index:)``).
    func liveTarget(_ e: Entry) -> LiveTarget {
        switch e.kind {
        case .putRecord, .deleteRecord, .deleteChild: .record(zones[e.zone!], e.name!)
        case .createZone: .zoneCreation(zones[e.zone!])
        case .deleteZone: .zoneDeletion(zones[e.zone!])
        case .catalogVersion: .catalogVersion
        case .schemaField, .schemaReset, .purge, .index, .saveSubscription, .deleteSubscription, .security, .skipped:
            e.legacyCatalog ? .never : .always
        }
    }

    /// The bytes each entry takes in the payload.
    var sizes: [UInt32] { entries.map { UInt32($0.range.count) } }

    /// A payload of the current version holding only the entries `keep` selects, each at its index (the others as
    /// skipped runs), with a zone table of the zones they use; their bytes are copied, not re-encoded — but for the
    /// records of a version-1 payload, which become record blocks. Returns the kept entries as they sit in the new
    /// payload.
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
                if let slot = e.slot, !slot.block {
                    // A version-1 put's body is `record length varint · record`.
                    moved.slot = Commit.Slot(
                        block: RecordBlock.append(Array(payload[slot.range]), to: &w), recordLength: slot.range.count)
                } else {
                    w.raw(payload[e.bodyStart..<e.range.upperBound])
                    moved.slot?.offset = UInt32(bodyStart + Int(e.slot!.offset) - e.bodyStart)
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
