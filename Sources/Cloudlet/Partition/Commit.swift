import CloudletCore

/// One mutation of a commit. A commit (one log frame) is an atomic list of these.
package enum Mutation: Sendable {
    /// A record's new version (its bytes carry the change tag and stamps). `encoded` is the record's
    /// ``RecordCodec`` encoding when the writer already has it (empty after decoding a commit).
    case putRecord(zone: ZoneKey, record: Record, encoded: [UInt8])
    /// A record removed (explicitly or by a DELETE_SELF cascade): leaves a tombstone, stamped with the deletion
    /// time (ms since 1970) so that the retention window can expire it. `parent`: the deleted version's parent, kept
    /// (kind ``MutationKind/deleteChild``) where a hierarchy share covers records through their parents, so that the
    /// shared database's change feed can tell its participants of the deletion; nil elsewhere (kind
    /// ``MutationKind/deleteRecord``).
    case deleteRecord(zone: ZoneKey, recordName: String, recordType: String, time: Int64, parent: String? = nil)
    case createZone(ZoneKey)
    /// Removes a zone and every record in it.
    case deleteZone(ZoneKey, time: Int64)
    /// A field (or, with no field, a record type) recorded in a container's schema. This and the schema reset, index
    /// flags and subscription mutations are catalog mutations: written to the catalog's log (``Catalog``), and to
    /// partition 0 only by format-1 stores.
    case schemaField(SchemaKey, recordType: String, field: String?, type: FieldType?)
    /// Development schema reset to production's.
    case schemaReset(container: String)
    /// Forget tombstones and deleted zones with LSN ≤ `through`: change tokens older than that expire.
    case purge(through: UInt64)
    /// Index flags in a schema, or an index a partition starts or stops maintaining (see ``IndexMutation``).
    case index(IndexMutation)
    /// A subscription created or replaced (catalog commits; partition 0 of a format-1 store).
    case saveSubscription(SubscriberID, Subscription)
    case deleteSubscription(SubscriberID, id: String)
    /// Security roles: a custom role, a record type's grants, a role member (catalog commits only).
    case security(SecurityMutation)
    /// The catalog version (catalog log LSN) a data commit was validated against, when newer than the one its
    /// partition recorded last (see ``Catalog``).
    case catalogVersion(UInt64)
}

/// A commit decoded from (or encoded into) a frame payload, with where each record's bytes sit in the payload
/// so the key directory can point a read at just that slice.
package struct Commit: Sendable {
    package static let frameType: UInt8 = 1
    /// The payload version written: 2 stores each record as a ``RecordBlock`` (checksummed, compressed on its own)
    /// in a frame stored uncompressed. Version 1 (the whole payload LZ4-compressed by the log, records bare) is
    /// still read.
    package static let version: UInt8 = 2
    /// The versions read.
    static let readableVersions: ClosedRange<UInt8> = 1...2

    package var mutations: [Mutation]
    /// The index of each of `mutations` in the commit as it was first written; nil when they are all there (0, 1,
    /// 2…). A compacted frame keeps only the live mutations of its commit and writes the others as skipped runs, so
    /// that the kept ones keep their index (change points, change tags and cache keys depend on it).
    var indices: [UInt32]?
    /// How many mutations the commit had when first written (skipped ones included).
    var count: Int

    init(mutations: [Mutation]) {
        self.mutations = mutations
        indices = nil
        count = mutations.count
    }

    /// The kept mutations of a commit of `count` mutations, at `indices` (increasing).
    init(mutations: [Mutation], indices: [UInt32], count: Int) {
        precondition(mutations.count == indices.count && indices.allSatisfy { Int($0) < count })
        self.mutations = mutations
        self.indices = indices.count == count ? nil : indices
        self.count = count
    }

    /// The index in the commit of `mutations[k]`.
    package func index(_ k: Int) -> UInt32 { indices?[k] ?? UInt32(k) }

    /// Byte range of each `putRecord`'s record inside the payload, by mutation index.
    package struct Slot: Sendable, Hashable {
        package var offset: UInt32
        package var length: UInt32
        /// The range holds a ``RecordBlock`` of a version-2 payload, stored as it is in its frame: readable on its
        /// own (``Log/readStored(at:range:)``). Otherwise the record's bare bytes in a version-1 payload, which is
        /// read (and decompressed) whole.
        package var block: Bool
        /// The record's ``RecordCodec`` length (`length` less the block's framing, or more when it is compressed):
        /// what the version costs a page's byte budget, known without reading it.
        package var recordLength: UInt32

        /// A version-1 slot: the record's bare bytes.
        package init(offset: UInt32, length: UInt32) {
            self.offset = offset
            self.length = length
            block = false
            recordLength = length
        }

        /// A record block at `range`, holding a record of `recordLength` bytes.
        init(block range: Range<Int>, recordLength: Int) {
            offset = UInt32(range.lowerBound)
            length = UInt32(range.count)
            block = true
            self.recordLength = UInt32(recordLength)
        }

        var range: Range<Int> { Int(offset)..<(Int(offset) + Int(length)) }
    }

    /// Encodes as `version · zoneCount · zones · mutationCount · mutations` (docs/record-format.md). Also returns
    /// the bytes each mutation takes in the payload (by position in `mutations`). `version` 1 writes what releases
    /// before record blocks wrote (for the upgrade tests).
    func encode(version: UInt8 = Commit.version) -> (payload: [UInt8], slots: [Int: Slot], sizes: [UInt32]) {
        precondition(Self.readableVersions.contains(version))
        var zones: [ZoneKey: Int] = [:]
        var zoneList: [ZoneKey] = []
        func index(_ z: ZoneKey) -> Int {
            if let i = zones[z] { return i }
            zones[z] = zoneList.count
            zoneList.append(z)
            return zoneList.count - 1
        }
        for m in mutations {
            switch m {
            case .putRecord(let z, _, _), .deleteRecord(let z, _, _, _, _), .createZone(let z), .deleteZone(let z, _): _ = index(z)
            case .schemaField, .schemaReset, .purge, .index, .saveSubscription, .deleteSubscription, .catalogVersion, .security: break
            }
        }
        var estimate = 64 + zoneList.count * 96
        for case .putRecord(_, _, let encoded) in mutations { estimate += encoded.count + 16 }
        var w = ByteWriter(capacity: estimate)
        w.u8(version)
        w.varint(zoneList.count)
        for z in zoneList { Self.encode(z, into: &w) }
        w.varint(count)
        var slots: [Int: Slot] = [:]
        var sizes: [UInt32] = []
        sizes.reserveCapacity(mutations.count)
        var nextIndex = 0
        for (i, m) in mutations.enumerated() {
            let index = Int(self.index(i))
            if index > nextIndex {
                w.u8(MutationKind.skipped.rawValue)
                w.varint(index - nextIndex)
            }
            nextIndex = index + 1
            let start = w.count
            defer { sizes.append(UInt32(w.count - start)) }
            w.u8(m.kind.rawValue)
            switch m {
            case .putRecord(let z, let record, let encoded):
                w.varint(zones[z]!)
                let bytes = encoded.isEmpty ? RecordCodec.encode(record) : encoded
                if version >= 2 {
                    slots[i] = Slot(block: RecordBlock.append(bytes, to: &w), recordLength: bytes.count)
                } else {
                    w.varint(bytes.count)
                    slots[i] = Slot(offset: UInt32(w.count), length: UInt32(bytes.count))
                    w.raw(bytes)
                }
            case .deleteRecord(let z, let name, let type, let time, let parent):
                w.varint(zones[z]!)
                w.string(name)
                w.string(type)
                w.svarint(time)
                if let parent { w.string(parent) }
            case .createZone(let z):
                w.varint(zones[z]!)
            case .deleteZone(let z, let time):
                w.varint(zones[z]!)
                w.svarint(time)
            case .schemaField(let key, let type, let field, let fieldType):
                w.string(key.container)
                w.u8(key.environment == .production ? 1 : 0)
                w.string(type)
                w.string(field ?? "")
                w.u8(fieldType?.tag ?? 0)
            case .schemaReset(let container):
                w.string(container)
            case .purge(let through):
                w.u64(through)
            case .index(let change):
                change.encode(into: &w)
            case .saveSubscription(let who, let sub):
                who.encode(into: &w)
                Subscription.encode(sub, into: &w)
            case .deleteSubscription(let who, let id):
                who.encode(into: &w)
                w.string(id)
            case .catalogVersion(let version):
                w.varint(version)
            case .security(let change):
                change.encode(into: &w)
            }
        }
        if count > nextIndex {
            w.u8(MutationKind.skipped.rawValue)
            w.varint(count - nextIndex)
        }
        return (w.bytes, slots, sizes)
    }

    /// Decodes a commit payload (``CommitPayloadReader``); `slots` are by position in `commit.mutations`, and `sizes`
    /// the bytes each kept mutation takes in the payload.
    package static func decode(_ payload: [UInt8]) throws -> (commit: Commit, slots: [Int: Slot], sizes: [UInt32]) {
        var reader = try CommitPayloadReader(payload, decodingRecords: true)
        let capacity = min(reader.count, reader.remaining)
        var mutations: [Mutation] = []
        mutations.reserveCapacity(capacity)
        var slots: [Int: Slot] = [:]
        var sizes: [UInt32] = []
        sizes.reserveCapacity(capacity)
        var indices: [UInt32] = []
        indices.reserveCapacity(capacity)
        while let (e, mutation) = try reader.next() {
            if let slot = e.slot { slots[mutations.count] = slot }
            mutations.append((consume mutation)!)
            indices.append(e.index)
            sizes.append(UInt32(e.range.count))
        }
        return (Commit(mutations: mutations, indices: indices, count: reader.count), slots, sizes)
    }

    /// A reader of the ``RecordCodec`` bytes of the record at `slot` of `payload`: the slice itself in a version-1
    /// payload, the checked (and decompressed) contents of a ``RecordBlock`` in a version-2 one. Throws `.corruption`.
    package static func recordReader(in payload: [UInt8], at slot: Slot, what: String) throws -> ByteReader {
        let range = slot.range
        guard range.upperBound <= payload.count else {
            throw CloudletError.corruption("\(what): bytes \(range) are outside the \(payload.count) bytes read")
        }
        if slot.block { return try RecordBlock.reader(payload, range, what: what) }
        return ByteReader(payload, from: range.lowerBound, to: range.upperBound, what: what)
    }

    /// The ``RecordCodec`` bytes of the record at `slot` of `payload` (``recordReader(in:at:what:)``).
    package static func recordBytes(in payload: [UInt8], at slot: Slot) throws -> ArraySlice<UInt8> {
        let r = try recordReader(in: payload, at: slot, what: "record")
        return r.buffer[r.offset..<r.end]
    }

    /// Spreads a frame's on-disk bytes over its mutations in proportion to the payload bytes each takes: what
    /// each one keeps alive in its segment (the accounting behind compaction's dead-byte ratio).
    package static func costs(sizes: [UInt32], frameLength: UInt32) -> [UInt32] {
        let total = sizes.reduce(UInt64(0)) { $0 + UInt64($1) }
        guard total > 0 else { return sizes.map { _ in 0 } }
        return sizes.map { UInt32(UInt64($0) * UInt64(frameLength) / total) }
    }

    /// `container · environment · scope · owner · zone`. The scope byte is what earlier releases keyed zones by;
    /// it is now derived from the owner (public for `__defaultOwner__`, private for a user), so the bytes of a key are
    /// the same as before, and it is checked on the way in, not used.
    static func encode(_ z: ZoneKey, into w: inout ByteWriter) {
        w.string(z.container)
        w.u8(z.environment == .production ? 1 : 0)
        w.u8(scopeTag(z.ownerDatabase.scope))
        w.string(z.owner)
        w.string(z.zoneName)
    }

    static func decodeZone(_ r: inout ByteReader) throws -> ZoneKey {
        let container = try r.string()
        let env: CloudletCore.Environment = try r.u8() == 1 ? .production : .development
        let scopeByte = try r.u8()
        let owner = try r.string()
        let name = try r.string()
        // No release ever wrote a zone of a shared database (it refuses writes), nor a public zone of a user.
        guard scopeByte == (owner == defaultOwnerName ? 0 : 1) else {
            throw CloudletError.corruption("commit payload: zone '\(name)' of owner '\(owner)' has scope byte \(scopeByte)")
        }
        return ZoneKey(container: container, environment: env, owner: owner, zoneName: name)
    }

    static func scopeTag(_ s: DatabaseScope) -> UInt8 {
        switch s {
        case .public: 0
        case .private: 1
        case .shared: 2
        }
    }

    static func scope(_ b: UInt8) -> DatabaseScope? {
        switch b {
        case 0: .public
        case 1: .private
        case 2: .shared
        default: nil
        }
    }
}
