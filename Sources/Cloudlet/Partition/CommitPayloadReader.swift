import CloudletCore

/// The one parser of a commit payload (docs/record-format.md, "Commit payload"): reads the header (version, zone
/// table, mutation count) when made, then one mutation present in the payload per ``next()``, stepping over
/// skipped runs. ``Commit/decode(_:)`` and ``CommitOutline/parse(_:)`` are loops over it.
///
/// Every mutation comes with where it sits in the payload (a ``CommitOutline/Entry``) and, but for a put whose
/// record is not decoded, the ``Mutation`` itself. Throws `.corruption` for what does not parse.
struct CommitPayloadReader {
    /// The payload's zone table; ``CommitOutline/Entry/zone`` indexes it.
    let zones: [ZoneKey]
    /// Mutations in the commit as first written, skipped ones included.
    let count: Int
    /// Whether a put's record is decoded (``RecordCodec/decode(_:zoneID:)``) or only its type and name read.
    let decodesRecords: Bool
    /// The payload's version (``Commit/readableVersions``): from 2 on, puts hold ``RecordBlock``s.
    let version: UInt8
    private var r: ByteReader
    /// The index in the commit of the next mutation.
    private var index = 0

    /// Reads the payload's header.
    init(_ payload: [UInt8], decodingRecords: Bool) throws {
        var r = ByteReader(payload, what: "commit payload")
        let v = try r.u8()
        guard Commit.readableVersions.contains(v) else {
            throw CloudletError.corruption("commit payload: unknown version \(v)")
        }
        version = v
        let zoneCount = try r.length(unit: 5)
        var zones: [ZoneKey] = []
        zones.reserveCapacity(zoneCount)
        for _ in 0..<zoneCount { zones.append(try Commit.decodeZone(&r)) }
        let n = try r.varint()
        guard n <= UInt64(UInt32.max) else { throw CloudletError.corruption("commit payload: \(n) mutations") }
        self.zones = zones
        count = Int(n)
        decodesRecords = decodingRecords
        self.r = r
    }

    /// Bytes of the payload not read yet (an upper bound on the mutations left).
    var remaining: Int { r.remaining }

    /// The next mutation present in the payload, or nil once all `count` are accounted for (throwing if bytes are
    /// left). `mutation` is nil for a put when records are not decoded.
    ///
    /// Inlined, with ``body(of:)``, into the two loops over it: a ``Mutation`` is a few hundred bytes, and returned
    /// through each call it was copied at every step (Commit.decode ran 4% more instructions than when it parsed the
    /// payload itself, callgrind on `cloudlet-bench --filter recover-crash`; 1% inlined).
    @inline(__always)
    mutating func next() throws -> (entry: CommitOutline.Entry, mutation: Mutation?)? {
        while index < count {
            let start = r.offset
            let kind = try MutationKind(byte: r.u8())
            if kind == .skipped {
                let run = try r.varint()
                guard run >= 1, run <= UInt64(count - index) else {
                    throw CloudletError.corruption(
                        "commit payload: a skipped run of \(run) mutations at index \(index) of \(count)")
                }
                index += Int(run)
                continue
            }
            var e = CommitOutline.Entry(
                index: UInt32(index), kind: kind, zone: nil, name: nil, range: start..<start, bodyStart: r.offset)
            index += 1
            if kind.hasZone {
                let i = try r.varint()
                guard i < zones.count else {
                    throw CloudletError.corruption("commit payload: zone index \(i) out of range")
                }
                e.zone = Int(i)
                e.bodyStart = r.offset
            }
            let mutation = try body(of: &e)
            e.range = start..<r.offset
            return (e, mutation)
        }
        guard r.isAtEnd else { throw CloudletError.corruption("commit payload: \(r.remaining) trailing bytes") }
        return nil
    }

    /// Reads the body of the mutation `e` starts (its zone index already read): the layouts of ``MutationKind``.
    /// Sets the entry's record name, slot and whether it is a catalog mutation (``Mutation/isCatalogMutation``).
    @inline(__always)
    private mutating func body(of e: inout CommitOutline.Entry) throws -> Mutation? {
        switch e.kind {
        case .putRecord:
            let length = try r.length()
            let start = r.offset
            _ = try r.raw(length)
            var bytes: ByteReader
            if version >= 2 {
                bytes = ByteReader(try RecordBlock.unwrap(r.buffer, start..<r.offset), what: "record in commit payload")
                e.slot = Commit.Slot(block: start..<r.offset, recordLength: bytes.remaining)
            } else {
                bytes = ByteReader(r.buffer, from: start, to: r.offset, what: "record in commit payload")
                e.slot = Commit.Slot(offset: UInt32(start), length: UInt32(length))
            }
            if decodesRecords {
                let zone = zones[e.zone!]
                let record = try RecordCodec.decode(&bytes, zoneID: zone.zoneID)
                e.name = record.recordName
                return .putRecord(zone: zone, record: record, encoded: [])
            }
            _ = try bytes.u8()  // format version
            _ = try bytes.string()  // record type
            e.name = try bytes.string()
            return nil
        case .deleteRecord, .deleteChild:
            let name = try r.string()
            e.name = name
            return .deleteRecord(
                zone: zones[e.zone!], recordName: name, recordType: try r.string(), time: try r.svarint(),
                parent: e.kind == .deleteChild ? try r.string() : nil)
        case .createZone: return .createZone(zones[e.zone!])
        case .deleteZone: return .deleteZone(zones[e.zone!], time: try r.svarint())
        case .schemaField:
            e.legacyCatalog = true
            let container = try r.string()
            let env: CloudletCore.Environment = try r.u8() == 1 ? .production : .development
            let type = try r.string()
            let field = try r.string()
            let tag = try r.u8()
            let fieldType = tag == 0 ? nil : FieldType(tag: tag)
            if tag != 0 && fieldType == nil { throw CloudletError.corruption("commit payload: bad field type \(tag)") }
            return .schemaField(
                SchemaKey(container: container, environment: env), recordType: type, field: field.isEmpty ? nil : field,
                type: fieldType)
        case .schemaReset:
            e.legacyCatalog = true
            return .schemaReset(container: try r.string())
        case .purge: return .purge(through: try r.u64())
        case .index:
            let change = try IndexMutation.decode(&r)
            if change.isCatalogMutation { e.legacyCatalog = true }
            return .index(change)
        case .catalogVersion: return .catalogVersion(try r.varint())
        case .saveSubscription:
            e.legacyCatalog = true
            return .saveSubscription(try SubscriberID.decode(&r), try Subscription.decode(&r))
        case .deleteSubscription:
            e.legacyCatalog = true
            return .deleteSubscription(try SubscriberID.decode(&r), id: try r.string())
        case .security:
            e.legacyCatalog = true
            return .security(try SecurityMutation.decode(&r))
        case .skipped: preconditionFailure("a skipped run has no mutation")
        }
    }
}
