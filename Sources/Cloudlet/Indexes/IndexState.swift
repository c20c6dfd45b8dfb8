import CloudletCore
import CloudletStorage

/// One index of a record type, as the write path needs it: its definition and where its keys are.
struct TypeIndex: Sendable, Hashable, Comparable {
    var definition: IndexDefinition
    /// The index's id (``IndexState/Info/id``): its keys are under `01 · zone · 04 · id`.
    var id: UInt32

    var field: String { definition.field }
    var kind: IndexKind { definition.kind }

    static func < (a: TypeIndex, b: TypeIndex) -> Bool { (a.field, a.kind.rawValue) < (b.field, b.kind.rawValue) }
}

/// A partition's secondary indexes: which indexes it defines (and whether each is complete), and how many live
/// records each zone holds of each type. Part of ``PartitionState``, written with each flush; small — a few words per
/// index and per (zone, type), never per record.
///
/// The indexes' contents are key ranges of the key directory (``IndexKeyspace``): one per index and zone, plus each
/// indexed record's values (what its next change deletes its keys by). They are maintained here, from
/// ``PartitionState/apply(_:lsn:position:slots:costs:)`` (live commits and replay alike) and by background builds
/// (``buildInsert(_:zone:name:values:keys:sequence:)``), both under the partition's lock, by each kind's
/// ``IndexMaintainer``; they are read through a read view's directory (``QueryPlanner``, ``IndexBuilder``).
struct IndexState: Sendable {
    /// An index's status, the LSN of the commit that defined it (tells a build of an earlier definition of the
    /// same index from the current one), and its id.
    struct Info: Sendable, Hashable {
        var status: IndexStatus
        var definedAt: UInt64
        /// Names the index's key range; assigned from ``IndexState/nextID`` when the index is defined, never reused (a
        /// redefined index starts from an empty range).
        var id: UInt32
    }

    private(set) var definitions: [IndexDefinition: Info] = [:]
    /// The indexes of each record type, for the write path.
    private(set) var byType: [TypeKey: [TypeIndex]] = [:]
    /// The id the next definition gets.
    private(set) var nextID: UInt32 = 1
    /// Live records per zone and type: what a scan of the type reads, without counting them.
    private(set) var recordCounts: [ZoneKey: [String: Int]] = [:]
    /// Each full-text index's totals per zone, by index id (BM25's average length; ``TextPosting``).
    private(set) var textTotals: [ZoneKey: [UInt32: TextTotals]] = [:]

    /// The indexes defined for records of `type` in zone `z`.
    func fields(_ z: ZoneKey, _ type: String) -> [TypeIndex] {
        guard !byType.isEmpty else { return [] }
        return byType[TypeKey(schema: SchemaKey(zone: z), recordType: type)] ?? []
    }

    func status(_ d: IndexDefinition) -> IndexStatus? { definitions[d]?.status }

    /// The indexes still being built, with the LSN that defined each.
    var building: [(IndexDefinition, UInt64)] {
        definitions.filter { $0.value.status == .building }.map { ($0.key, $0.value.definedAt) }
    }

    /// Where index `d`'s keys are in zone `z`; nil if it is not defined.
    func subspace(_ d: IndexDefinition, zone z: ZoneKey) -> IndexKeyspace.Subspace? {
        definitions[d].map { IndexKeyspace.Subspace(zone: DirectoryKey.zone(z), id: $0.id) }
    }

    /// How many live records of `type` zone `z` holds.
    func recordCount(_ z: ZoneKey, _ type: String) -> Int { recordCounts[z]?[type] ?? 0 }

    /// Full-text index `d`'s totals in zone `z` (zero when it files nothing there); nil if `d` is not a defined text
    /// index.
    func textTotals(_ d: IndexDefinition, zone z: ZoneKey) -> TextTotals? {
        guard d.kind == .text, let info = definitions[d] else { return nil }
        return textTotals[z]?[info.id] ?? TextTotals()
    }

    private mutating func addText(_ z: ZoneKey, _ id: UInt32, _ d: TextDocument, _ sign: Int) {
        guard d.length > 0 else { return }
        var t = textTotals[z]?[id] ?? TextTotals()
        t.add(d, sign)
        textTotals[z, default: [:]][id] = t.documents == 0 && t.tokens == 0 ? nil : t
        if textTotals[z]?.isEmpty == true { textTotals[z] = nil }
    }

    private mutating func count(_ z: ZoneKey, _ type: String, _ delta: Int) {
        let n = recordCount(z, type) + delta
        recordCounts[z, default: [:]][type] = n == 0 ? nil : n
        if recordCounts[z]?.isEmpty == true { recordCounts[z] = nil }
    }

    // MARK: - Write path (from PartitionState.apply)

    /// A record's new version `r`, written at `lsn`; `old` is the key directory's entry before it.
    mutating func put(_ z: ZoneKey, _ r: Record, replacing old: RecordEntry?, lsn: UInt64, keys: inout KeyDirectory) throws {
        let live = old.flatMap { $0.deleted ? nil : $0 }
        if let live { count(z, live.recordType, -1) }
        count(z, r.recordType, 1)
        let newIndexes = fields(z, r.recordType)
        let oldIndexes = live.map { fields(z, $0.recordType) } ?? []
        guard !newIndexes.isEmpty || !oldIndexes.isEmpty else { return }
        let zone = DirectoryKey.zone(z)
        let name = r.recordName
        let oldValues = oldIndexes.isEmpty ? nil : try Self.storedValues(keys, zone, live!.recordType, name)
        var newValues: StoredValues.Values = [:]
        for i in newIndexes {
            for f in i.definition.sourceFields where newValues[f] == nil { newValues[f] = .some(IndexedField.value(f, in: r)) }
        }
        let sameType = live?.recordType == r.recordType
        if sameType {
            for i in newIndexes { try write(i, old: oldValues, new: newValues, name, z, lsn, &keys) }
        } else {
            for i in oldIndexes { try write(i, old: oldValues, new: nil, name, z, lsn, &keys) }
            for i in newIndexes { try write(i, old: nil, new: newValues, name, z, lsn, &keys) }
            if !oldIndexes.isEmpty { keys.deleteIndexKey(IndexKeyspace.values(zone, live!.recordType, name), sequence: lsn) }
        }
        if newIndexes.isEmpty {
            if sameType { keys.deleteIndexKey(IndexKeyspace.values(zone, r.recordType, name), sequence: lsn) }
        } else if !sameType || oldValues != newValues {
            keys.putIndexKey(IndexKeyspace.values(zone, r.recordType, name), StoredValues.encode(newValues), sequence: lsn)
        }
    }

    /// A record deleted at `lsn`; `old` is the key directory's entry before the deletion.
    mutating func delete(_ z: ZoneKey, _ name: String, replacing old: RecordEntry?, lsn: UInt64, keys: inout KeyDirectory) throws {
        guard let old, !old.deleted else { return }
        count(z, old.recordType, -1)
        let indexes = fields(z, old.recordType)
        guard !indexes.isEmpty else { return }
        let zone = DirectoryKey.zone(z)
        let values = try Self.storedValues(keys, zone, old.recordType, name)
        for i in indexes { try write(i, old: values, new: nil, name, z, lsn, &keys) }
        keys.deleteIndexKey(IndexKeyspace.values(zone, old.recordType, name), sequence: lsn)
    }

    /// The zone was deleted: the key directory deleted every key of it, index keys included.
    mutating func dropZone(_ z: ZoneKey) {
        recordCounts[z] = nil
        textTotals[z] = nil
    }

    /// Applies one index's ``IndexMaintainer/update(old:new:name:in:)`` for a record whose stored values go from
    /// `old` to `new` (nil: not in the index) to the directory.
    private mutating func write(
        _ i: TypeIndex, old: StoredValues.Values?, new: StoredValues.Values?, _ name: String, _ z: ZoneKey, _ lsn: UInt64,
        _ keys: inout KeyDirectory
    ) throws {
        let d = i.definition
        let subspace = IndexKeyspace.Subspace(zone: DirectoryKey.zone(z), id: i.id)
        if d.kind == .text { return try writeText(i, old: old?[d.field], new: new?[d.field], name, z, subspace, lsn, &keys) }
        let filed = d.valueKeys(new, name: name)
        let u = d.maintainer.update(old: d.valueKeys(old, name: name), new: filed, name: name, in: subspace)
        for k in u.deletes { keys.deleteIndexKey(k, sequence: lsn) }
        if d.kind == .spatial {
            // Each key carries the location (``SpatialMaintainer/entryValue(_:)``): a record that moved within a cell
            // keeps that cell's key, whose value must move too — every key of the new value is put.
            let value = new?[d.field] ?? nil
            let moved = value != (old?[d.field] ?? nil)
            let puts = moved ? (filed ?? []).map { subspace.key($0, name) } : u.puts
            for k in puts { keys.putIndexKey(k, SpatialMaintainer.entryValue(value), sequence: lsn) }
            return
        }
        for k in u.puts { keys.putIndexKey(k, [], sequence: lsn) }
    }

    /// A full-text index's part of a change whose field value goes from `old` to `new` (`.none`: no value stored, the
    /// record is not in the index by its stored values; `.some(nil)`: the record lacks the field). Every key of the
    /// new value is put, with its ``TextPosting`` (a new length changes them all), so a record is filed under all its
    /// tokens or none; the totals lose the old document if the record was filed (its ``TextDocument/probe`` key is
    /// there: a record that predates a building index may have stored values without being filed yet) and gain the
    /// new one.
    private mutating func writeText(
        _ i: TypeIndex, old: FieldValue??, new: FieldValue??, _ name: String, _ z: ZoneKey, _ subspace: IndexKeyspace.Subspace,
        _ lsn: UInt64, _ keys: inout KeyDirectory
    ) throws {
        if let old, let new, old == new { return }
        let before = old.map { TextDocument($0) }
        let after = new.map { TextDocument($0) }
        if let before {
            if try Self.filed(before, name, subspace, keys) { addText(z, i.id, before, -1) }
            for t in before.frequencies.keys where after?.frequencies[t] == nil {
                keys.deleteIndexKey(subspace.key(Array(t.utf8), name), sequence: lsn)
            }
        }
        if let after { file(after, name, z, i.id, subspace, lsn, &keys) }
    }

    /// Whether record `name`, whose value of the field gives `doc`, is filed in the full-text index at `subspace`:
    /// whether its ``TextDocument/probe`` key is there (a record is filed under all its tokens or none).
    private static func filed(_ doc: TextDocument, _ name: String, _ subspace: IndexKeyspace.Subspace, _ keys: KeyDirectory) throws -> Bool {
        guard let probe = doc.probe else { return false }
        return try keys.indexValue(subspace.key(Array(probe.utf8), name)) != nil
    }

    /// Files record `name` under every token of `doc` with its posting in the full-text index `id` at `subspace`,
    /// and counts it in the index's totals for zone `z`.
    private mutating func file(
        _ doc: TextDocument, _ name: String, _ z: ZoneKey, _ id: UInt32, _ subspace: IndexKeyspace.Subspace, _ sequence: UInt64,
        _ keys: inout KeyDirectory
    ) {
        for (t, n) in doc.frequencies {
            keys.putIndexKey(subspace.key(Array(t.utf8), name), TextPosting(frequency: n, length: doc.length).encoded, sequence: sequence)
        }
        addText(z, id, doc, 1)
    }

    mutating func apply(_ m: IndexMutation, lsn: UInt64, keys: inout KeyDirectory) throws {
        switch m {
        case .flags, .composite: break  // the schema's business: the catalog's (a data partition ignores it)
        case .define(let d):
            guard definitions[d] == nil else { return }
            definitions[d] = Info(status: .building, definedAt: lsn, id: nextID)
            nextID += 1
            refresh(d.typeKey)
        case .drop(let d):
            guard let info = definitions.removeValue(forKey: d) else { return }
            refresh(d.typeKey)
            for z in textTotals.keys {
                textTotals[z]?[info.id] = nil
                if textTotals[z]?.isEmpty == true { textTotals[z] = nil }
            }
            // Its keys go now (there are no range deletions): a drop is rare (a development schema reset) and costs
            // what deleting a zone of its size costs. A type left without indexes loses its stored values too, so
            // that writes of unindexed types never look for any.
            let typeGone = byType[d.typeKey] == nil
            for z in keys.zoneKeys where SchemaKey(zone: z) == d.schema {
                let zone = DirectoryKey.zone(z)
                try Self.deleteAll(IndexKeyspace.Subspace(zone: zone, id: info.id).keyRange(.all), lsn, &keys)
                if typeGone {
                    let prefix = IndexKeyspace.valuesPrefix(zone, d.recordType)
                    try Self.deleteAll(LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix)), lsn, &keys)
                }
            }
        }
    }

    private static func deleteAll(_ range: LSMKeyRange, _ lsn: UInt64, _ keys: inout KeyDirectory) throws {
        var doomed: [[UInt8]] = []
        var cursor = keys.indexCursor(range)
        while let e = try cursor.next() { doomed.append(e.key) }
        for k in doomed { keys.deleteIndexKey(k, sequence: lsn) }
    }

    /// Marks an index complete (its build has added every record that predates it), if it is still the definition
    /// made at `definedAt`.
    mutating func markReady(_ d: IndexDefinition, definedAt: UInt64) {
        if definitions[d]?.definedAt == definedAt { definitions[d]!.status = .ready }
    }

    /// Adds a record that predates `d` to it (background build), as of `sequence` (the partition's last LSN): files
    /// it under its `values` of the index's fields and stores them — except those the record has a stored value for
    /// already (a commit indexed it since, and that value is current). Idempotent. The caller has checked, under the
    /// lock, that the record is still at the version `values` were read from.
    mutating func buildInsert(
        _ d: IndexDefinition, zone z: ZoneKey, name: String, values read: [String: FieldValue?], keys: inout KeyDirectory,
        sequence: UInt64
    ) throws {
        guard let info = definitions[d] else { return }
        let zone = DirectoryKey.zone(z)
        var values = try Self.storedValues(keys, zone, d.recordType, name) ?? [:]
        var added = false
        for f in d.sourceFields where values[f] == nil {
            values[f] = .some(read[f] ?? nil)
            added = true
        }
        if added {
            keys.putIndexKey(IndexKeyspace.values(zone, d.recordType, name), StoredValues.encode(values), sequence: sequence)
        }
        let subspace = IndexKeyspace.Subspace(zone: zone, id: info.id)
        if d.kind == .text {
            // Filed already (a commit since, or an earlier pass of the build): its keys and the totals are current.
            let doc = TextDocument(values[d.field] ?? nil)
            if try !Self.filed(doc, name, subspace, keys) { file(doc, name, z, info.id, subspace, sequence, &keys) }
            return
        }
        let value = d.kind == .spatial ? SpatialMaintainer.entryValue(values[d.field] ?? nil) : []
        for k in d.valueKeys(values, name: name) ?? [] { keys.putIndexKey(subspace.key(k, name), value, sequence: sequence) }
    }

    /// A record's stored values (nil: none stored).
    static func storedValues(_ keys: KeyDirectory, _ zone: [UInt8], _ type: String, _ name: String) throws -> StoredValues.Values? {
        try keys.indexValue(IndexKeyspace.values(zone, type, name)).map(StoredValues.decode)
    }

    private mutating func refresh(_ tk: TypeKey) {
        let f = definitions.filter { $0.key.typeKey == tk }.map { TypeIndex(definition: $0.key, id: $0.value.id) }.sorted()
        byType[tk] = f.isEmpty ? nil : f
    }

    // MARK: - Flushed state

    /// Definitions with their status and id, the next id, and the record counts per zone and type
    /// (docs/index-layer.md, "The flushed state"). Nothing per record: the contents are in the directory's runs.
    func encode(into w: inout ByteWriter) {
        let defs = definitions.sorted { "\($0.key)" < "\($1.key)" }
        w.varint(defs.count)
        for (d, info) in defs {
            IndexMutation.encode(d, into: &w)
            w.u8(info.status.rawValue)
            w.u64(info.definedAt)
            w.u32(info.id)
        }
        w.u32(nextID)
        w.varint(recordCounts.count)
        for (z, types) in recordCounts {
            Commit.encode(z, into: &w)
            w.varint(types.count)
            for (type, n) in types {
                w.string(type)
                w.varint(n)
            }
        }
        encodeTextTotals(into: &w)
    }

    /// The flushed state's last section: each full-text index's totals per zone.
    func encodeTextTotals(into w: inout ByteWriter) {
        w.varint(textTotals.count)
        for (z, byID) in textTotals {
            Commit.encode(z, into: &w)
            w.varint(byID.count)
            for (id, t) in byID {
                w.u32(id)
                w.varint(t.documents)
                w.varint(t.tokens)
            }
        }
    }

    /// Reads what ``encode(into:)`` wrote — without the full-text totals for a state of version 7, which
    /// ``migrateTextPostings(keys:sequence:)`` then derives.
    static func decode(_ r: inout ByteReader, textTotals withTotals: Bool = true) throws -> IndexState {
        var s = IndexState()
        for _ in 0..<(try r.length()) {
            let d = try IndexMutation.decodeDefinition(&r)
            let status = try decodeStatus(&r)
            s.definitions[d] = Info(status: status, definedAt: try r.u64(), id: try r.u32())
        }
        s.nextID = try r.u32()
        guard s.definitions.values.allSatisfy({ $0.id < s.nextID }) else {
            throw CloudletError.corruption("flushed partition state: an index id is not below the next id \(s.nextID)")
        }
        for tk in Set(s.definitions.keys.map(\.typeKey)) { s.refresh(tk) }
        for _ in 0..<(try r.length()) {
            let z = try Commit.decodeZone(&r)
            var types: [String: Int] = [:]
            for _ in 0..<(try r.length()) { types[try r.string()] = try r.int() }
            s.recordCounts[z] = types
        }
        guard withTotals else { return s }
        for _ in 0..<(try r.length()) {
            let z = try Commit.decodeZone(&r)
            var byID: [UInt32: TextTotals] = [:]
            for _ in 0..<(try r.length(unit: 6)) {
                let id = try r.u32()
                byID[id] = TextTotals(documents: try r.int(), tokens: try r.int())
            }
            s.textTotals[z] = byID
        }
        return s
    }

    /// Gives every full-text index's keys their ``TextPosting`` and derives the indexes' totals (``textTotals``), for a
    /// state read from a version that had neither (7 and before): each record of a text index's type with stored
    /// values, if filed (its ``TextDocument/probe`` key is there), has its keys put again with their postings and is
    /// counted. Work proportional to the text indexes, once: the caller flushes the result.
    mutating func migrateTextPostings(keys: inout KeyDirectory, sequence: UInt64) throws {
        textTotals = [:]
        let text = definitions.filter { $0.key.kind == .text }
        guard !text.isEmpty else { return }
        for z in keys.zoneKeys {
            let zone = DirectoryKey.zone(z)
            let schema = SchemaKey(zone: z)
            for (d, info) in text where d.schema == schema {
                let subspace = IndexKeyspace.Subspace(zone: zone, id: info.id)
                let prefix = IndexKeyspace.valuesPrefix(zone, d.recordType)
                var stored = keys.indexCursor(LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix)))
                var filed: [(name: String, doc: TextDocument)] = []
                while let e = try stored.next() {
                    let name = String(decoding: e.key[prefix.count...], as: UTF8.self)
                    let doc = TextDocument(try StoredValues.decode(e.value)[d.field] ?? nil)
                    if try Self.filed(doc, name, subspace, keys) { filed.append((name, doc)) }
                }
                for (name, doc) in filed { file(doc, name, z, info.id, subspace, sequence, &keys) }
            }
        }
    }

    private static func decodeStatus(_ r: inout ByteReader) throws -> IndexStatus {
        let st = try r.u8()
        guard let status = IndexStatus(rawValue: st) else { throw CloudletError.corruption("partition state: bad index status \(st)") }
        return status
    }

    // MARK: - Migration from the in-memory indexes

    /// Reads the secondary indexes of a flushed state of version 6 (`checkpoint` false) or of a format-3 checkpoint,
    /// which held every indexed record's values, and moves them into the key directory `keys` (whose records are
    /// loaded: runs, or a checkpoint's entries in its memtable) as of `sequence`: each record's stored values, the
    /// keys of every ready index, the record counts from the type index. A ready index missing some record's value
    /// is demoted to building, so that a build completes it. A checkpoint's values of records the directory no
    /// longer holds at that type are left out. Work proportional to the indexes, once: the caller flushes the result.
    static func migrate(_ r: inout ByteReader, keys: inout KeyDirectory, sequence: UInt64, checkpoint: Bool) throws -> IndexState {
        var s = IndexState()
        for _ in 0..<(try r.length()) {
            let d = try IndexMutation.decodeDefinition(&r)
            let status = try decodeStatus(&r)
            s.definitions[d] = Info(status: status, definedAt: try r.u64(), id: s.nextID)
            s.nextID += 1
        }
        for tk in Set(s.definitions.keys.map(\.typeKey)) { s.refresh(tk) }
        var incomplete: Set<IndexDefinition> = []
        for _ in 0..<(try r.length()) {
            let z = try Commit.decodeZone(&r)
            let zone = DirectoryKey.zone(z)
            for _ in 0..<(try r.length()) {
                let type = try r.string()
                var slots: [String] = []
                for _ in 0..<(try r.length()) { slots.append(try r.string()) }
                let ready = s.fields(z, type).filter { s.definitions[$0.definition]?.status == .ready }
                for _ in 0..<(try r.length()) {
                    let name = try r.string()
                    let bySlot = try StoredValues.decodeSlots(try r.bytes())
                    if checkpoint {
                        guard let e = try keys.entry(z, name), !e.deleted, e.recordType == type else { continue }
                    }
                    guard !s.fields(z, type).isEmpty else { continue }
                    var values: StoredValues.Values = [:]
                    for (slot, v) in bySlot {
                        guard slot < slots.count else { throw CloudletError.corruption("index values of '\(name)': slot \(slot) of \(slots.count)") }
                        values[slots[slot]] = .some(v)
                    }
                    keys.putIndexKey(IndexKeyspace.values(zone, type, name), StoredValues.encode(values), sequence: sequence)
                    for i in ready {
                        guard let filed = i.definition.valueKeys(values, name: name) else {
                            incomplete.insert(i.definition)
                            continue
                        }
                        let subspace = IndexKeyspace.Subspace(zone: zone, id: i.id)
                        for k in filed { keys.putIndexKey(subspace.key(k, name), [], sequence: sequence) }
                    }
                }
            }
        }
        // Record counts from the type index; a ready index must hold every live record of its type.
        for z in keys.zoneKeys {
            let zone = DirectoryKey.zone(z)
            let prefix = zone + [DirectoryKey.typeTag]
            var cursor = keys.indexCursor(LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix)))
            while let e = try cursor.next() {
                let (type, name) = try DirectoryKey.typeAndName(e.key, zoneCount: zone.count)
                s.count(z, type, 1)
                for i in s.fields(z, type) {
                    let d = i.definition
                    guard s.definitions[d]?.status == .ready, !incomplete.contains(d) else { continue }
                    if d.valueKeys(try storedValues(keys, zone, type, name), name: name) == nil { incomplete.insert(d) }
                }
            }
        }
        for d in incomplete { s.definitions[d]!.status = .building }
        return s
    }
}
