import CloudletCore
import CloudletStorage

/// Checkpoint encoding of a partition's derived state (see docs/storage-format.md, "Checkpoint payload").
extension PartitionState {
    /// 2 adds index flags to the schema and the index section; version 1 checkpoints still load (no indexes).
    static let checkpointVersion: UInt8 = 2

    func encodeCheckpoint() -> [UInt8] {
        var w = ByteWriter(capacity: 1 << 16)
        w.u8(Self.checkpointVersion)
        w.u64(lastLSN)
        w.u64(purgedThroughLSN)
        w.varint(zones.count)
        for (key, zone) in zones {
            Commit.encode(key, into: &w)
            w.u64(zone.createdLSN)
            w.u64(zone.lastChangeLSN)
            w.varint(zone.records.count)
            for (name, e) in zone.records {
                w.string(name)
                w.u64(e.lsn)
                w.u32(e.index)
                w.svarint(e.time)
                w.bool(e.deleted)
                w.string(e.recordType)
                if !e.deleted {
                    w.u64(e.position.segment)
                    w.u64(e.position.offset)
                    w.u32(e.position.length)
                    w.u32(e.slot.offset)
                    w.u32(e.slot.length)
                    w.string(e.changeTag)
                    w.varint(e.deleteSelfTargets.count)
                    for t in e.deleteSelfTargets { w.string(t) }
                }
            }
        }
        w.varint(deletedZones.count)
        for (key, d) in deletedZones {
            Commit.encode(key, into: &w)
            w.u64(d.lsn)
            w.svarint(d.time)
        }
        w.varint(schema.types.count)
        for (key, types) in schema.types {
            w.string(key.container)
            w.u8(key.environment == .production ? 1 : 0)
            w.varint(types.count)
            for (name, t) in types {
                w.string(name)
                w.varint(t.fields.count)
                for (field, ft) in t.fields {
                    w.string(field)
                    w.u8(ft.tag)
                }
                w.varint(t.indexes.count)
                for (field, flags) in t.indexes {
                    w.string(field)
                    w.u8(flags.rawValue)
                }
            }
        }
        w.varint(subscriptions.count)
        for (who, subs) in subscriptions {
            who.encode(into: &w)
            w.varint(subs.count)
            for s in subs.values { Subscription.encode(s, into: &w) }
        }
        indexes.encode(into: &w)
        return w.bytes
    }

    static func decodeCheckpoint(_ bytes: [UInt8], next: FramePosition?) throws -> PartitionState {
        var r = ByteReader(bytes, what: "checkpoint")
        let v = try r.u8()
        guard v == 1 || v == checkpointVersion else { throw CloudletError.corruption("checkpoint: unknown version \(v)") }
        var s = PartitionState()
        s.lastLSN = try r.u64()
        s.purgedThroughLSN = try r.u64()
        s.nextPosition = next
        let zoneCount = try r.length()
        for _ in 0..<zoneCount {
            let key = try Commit.decodeZone(&r)
            var zone = ZoneState(createdLSN: try r.u64())
            let lastChange = try r.u64()
            let n = try r.length()
            zone.records.reserveCapacity(n)
            for _ in 0..<n {
                let name = try r.string()
                let lsn = try r.u64()
                let index = try r.u32()
                let time = try r.svarint()
                let deleted = try r.bool()
                let type = try r.string()
                var e = RecordEntry(
                    lsn: lsn, index: index, position: FramePosition(segment: 0, offset: 0, length: 0),
                    slot: Commit.Slot(offset: 0, length: 0), changeTag: "", recordType: type, deleted: deleted,
                    time: time, deleteSelfTargets: [])
                if !deleted {
                    e.position = FramePosition(segment: try r.u64(), offset: try r.u64(), length: try r.u32())
                    e.slot = Commit.Slot(offset: try r.u32(), length: try r.u32())
                    e.changeTag = try r.string()
                    let t = try r.length()
                    for _ in 0..<t { e.deleteSelfTargets.append(try r.string()) }
                }
                zone.put(name, e)
            }
            zone.pruneChanges()
            zone.lastChangeLSN = lastChange
            s.zones[key] = zone
        }
        let deletedCount = try r.length()
        for _ in 0..<deletedCount {
            let key = try Commit.decodeZone(&r)
            s.deletedZones[key] = (try r.u64(), try r.svarint())
        }
        let schemaCount = try r.length()
        for _ in 0..<schemaCount {
            let container = try r.string()
            let key = SchemaKey(container: container, environment: try r.u8() == 1 ? .production : .development)
            let typeCount = try r.length()
            var types: [String: RecordTypeSchema] = [:]
            for _ in 0..<typeCount {
                var t = RecordTypeSchema(name: try r.string())
                let fc = try r.length()
                for _ in 0..<fc {
                    let field = try r.string()
                    let tag = try r.u8()
                    guard let ft = FieldType(tag: tag) else { throw CloudletError.corruption("checkpoint: bad field type \(tag)") }
                    t.fields[field] = ft
                }
                if v >= 2 {
                    let ic = try r.length()
                    for _ in 0..<ic {
                        let field = try r.string()
                        t.indexes[field] = IndexFlags(rawValue: try r.u8())
                    }
                }
                types[t.name] = t
            }
            s.schema.types[key] = types
        }
        let subscribers = try r.length()
        for _ in 0..<subscribers {
            let who = try SubscriberID.decode(&r)
            let n = try r.length()
            for _ in 0..<n {
                let sub = try Subscription.decode(&r)
                s.subscriptions[who, default: [:]][sub.id] = sub
            }
        }
        if v >= 2 {
            s.indexes = try IndexState.decode(&r, zones: s.zones)
        } else {
            s.indexes = IndexState.withoutIndexes(s.zones)
        }
        guard r.isAtEnd else { throw CloudletError.corruption("checkpoint: \(r.remaining) trailing bytes") }
        return s
    }
}
