import CloudletCore

/// The indexes of one zone, by record type.
struct ZoneIndexes: Sendable {
    var types: [String: TypeIndexes] = [:]
}

/// A partition's secondary indexes: which indexes it defines (and whether each is complete), and their contents per
/// zone and record type. Part of ``PartitionState``: changed only by ``PartitionState/apply(_:lsn:position:slots:)``
/// (live commits and replay alike) and by background builds, both under the partition's lock.
///
/// Behind a small surface (put, delete, drop zone, define, drop, and the lookups in ``QueryPlanner``) so that an
/// on-disk index can replace this in-memory one.
struct IndexState: Sendable {
    /// An index's status, and the LSN of the commit that defined it (tells a build of an earlier definition of
    /// the same index from the current one).
    struct Info: Sendable, Hashable {
        var status: IndexStatus
        var definedAt: UInt64
    }

    private(set) var definitions: [IndexDefinition: Info] = [:]
    /// The indexed (field, kind)s of each record type, for the write path.
    private(set) var byType: [TypeKey: [FieldKind]] = [:]
    var zones: [ZoneKey: ZoneIndexes] = [:]

    /// The indexes defined for records of `type` in zone `z`.
    func fields(_ z: ZoneKey, _ type: String) -> [FieldKind] {
        guard !byType.isEmpty else { return [] }
        return byType[TypeKey(schema: SchemaKey(zone: z), recordType: type)] ?? []
    }

    func status(_ d: IndexDefinition) -> IndexStatus? { definitions[d]?.status }

    /// The indexes still being built, with the LSN that defined each.
    var building: [(IndexDefinition, UInt64)] {
        definitions.filter { $0.value.status == .building }.map { ($0.key, $0.value.definedAt) }
    }

    func type(_ z: ZoneKey, _ type: String) -> TypeIndexes? { zones[z]?.types[type] }

    /// Whether the names of `type`'s records in zone `z` are in memory (``TypeIndexes/namesLoaded``).
    func namesLoaded(_ z: ZoneKey, _ type: String) -> Bool { zones[z]?.types[type]?.namesLoaded ?? false }

    mutating func loadNames(_ z: ZoneKey, _ type: String, _ names: [String]) {
        zones[z, default: ZoneIndexes()].types[type, default: TypeIndexes()].loadNames(names)
    }

    // MARK: - Write path (from PartitionState.apply)

    /// A record's new version; `old` is the key directory's entry before it.
    mutating func put(_ z: ZoneKey, _ r: Record, replacing old: RecordEntry?) {
        if let old, !old.deleted, old.recordType != r.recordType { delete(z, r.recordName, recordType: old.recordType) }
        let f = fields(z, r.recordType)
        zones[z, default: ZoneIndexes()].types[r.recordType, default: TypeIndexes()].put(r, fields: f)
    }

    mutating func delete(_ z: ZoneKey, _ name: String, recordType: String) {
        guard zones[z]?.types[recordType] != nil else { return }
        let f = fields(z, recordType)
        zones[z]!.types[recordType]!.remove(name, fields: f)
        if zones[z]!.types[recordType]!.isEmpty { zones[z]!.types[recordType] = nil }
    }

    mutating func dropZone(_ z: ZoneKey) { zones[z] = nil }

    mutating func apply(_ m: IndexMutation, lsn: UInt64) {
        switch m {
        case .flags: break  // the schema's business: the catalog's (a data partition ignores it)
        case .define(let d):
            guard definitions[d] == nil else { return }
            definitions[d] = Info(status: .building, definedAt: lsn)
            refresh(d.typeKey)
            forEachType(of: d) { $0.dropIndex(FieldKind(field: d.field, kind: d.kind)) }
        case .drop(let d):
            guard definitions.removeValue(forKey: d) != nil else { return }
            refresh(d.typeKey)
            forEachType(of: d) { $0.dropIndex(FieldKind(field: d.field, kind: d.kind)) }
        }
    }

    /// Marks an index complete (its build has added every record that predates it), if it is still the definition
    /// made at `definedAt`.
    mutating func markReady(_ d: IndexDefinition, definedAt: UInt64) {
        if definitions[d]?.definedAt == definedAt { definitions[d]!.status = .ready }
    }

    /// Adds a record that predates `d` to it (background build). The caller has checked, under the lock, that the
    /// record is still at the version `v` was read from.
    mutating func buildInsert(_ d: IndexDefinition, zone z: ZoneKey, name: String, value v: FieldValue?) {
        guard definitions[d] != nil, zones[z]?.types[d.recordType] != nil else { return }
        zones[z]!.types[d.recordType]!.buildInsert(FieldKind(field: d.field, kind: d.kind), v, name)
    }

    private mutating func refresh(_ tk: TypeKey) {
        let f = definitions.keys.filter { $0.typeKey == tk }.map { FieldKind(field: $0.field, kind: $0.kind) }.sorted()
        byType[tk] = f.isEmpty ? nil : f
    }

    private mutating func forEachType(of d: IndexDefinition, _ body: (inout TypeIndexes) -> Void) {
        for z in Array(zones.keys) where SchemaKey(zone: z) == d.schema && zones[z]!.types[d.recordType] != nil {
            body(&zones[z]!.types[d.recordType]!)
        }
    }

    // MARK: - Checkpoint

    /// Definitions with their status, then each record's indexed values (see docs/record-format.md). Index contents
    /// are not written: ``decode(_:zones:)`` rebuilds them from the values, without reading the log.
    func encode(into w: inout ByteWriter) {
        let defs = definitions.sorted { "\($0.key)" < "\($1.key)" }
        w.varint(defs.count)
        for (d, info) in defs {
            IndexMutation.encode(d, into: &w)
            w.u8(info.status.rawValue)
            w.u64(info.definedAt)
        }
        let withValues = zones.filter { $0.value.types.values.contains { !$0.stored.isEmpty } }
        w.varint(withValues.count)
        for (z, zi) in withValues {
            Commit.encode(z, into: &w)
            let types = zi.types.filter { !$0.value.stored.isEmpty }
            w.varint(types.count)
            for (name, t) in types {
                w.string(name)
                w.varint(t.slots.count)
                for s in t.slots { w.string(s) }
                w.varint(t.stored.count)
                for (recordName, values) in t.stored {
                    w.string(recordName)
                    w.bytes(values)
                }
            }
        }
    }

    /// Reads what ``encode(into:)`` wrote and rebuilds every ready index from the stored values. `legacy` (a format-3
    /// checkpoint, whose directory was just loaded whole): every type's names are taken from the directory and
    /// stored values of records it does not hold are left out. Otherwise (a flushed state, consistent with the
    /// directory's runs by construction) only the types with a ready index load their names, from the type index.
    static func decode(_ r: inout ByteReader, keys: KeyDirectory, legacy: Bool) throws -> IndexState {
        var s = IndexState()
        let defCount = try r.length()
        for _ in 0..<defCount {
            let d = try IndexMutation.decodeDefinition(&r)
            let st = try r.u8()
            guard let status = IndexStatus(rawValue: st) else { throw CloudletError.corruption("checkpoint: bad index status \(st)") }
            s.definitions[d] = Info(status: status, definedAt: try r.u64())
        }
        for tk in Set(s.definitions.keys.map(\.typeKey)) { s.refresh(tk) }
        if legacy {
            try s.rebuildNames(from: keys)
        } else {
            let ready = Set(s.definitions.filter { $0.value.status == .ready }.keys.map(\.typeKey))
            for z in keys.zoneKeys {
                for tk in ready where tk.schema == SchemaKey(zone: z) {
                    s.zones[z, default: ZoneIndexes()].types[tk.recordType, default: TypeIndexes()]
                        .loadNames(try keys.typeNames(in: z, type: tk.recordType))
                }
            }
        }
        let zoneCount = try r.length()
        for _ in 0..<zoneCount {
            let z = try Commit.decodeZone(&r)
            let typeCount = try r.length()
            for _ in 0..<typeCount {
                let type = try r.string()
                var t = s.zones[z]?.types[type] ?? TypeIndexes()
                let slotCount = try r.length()
                t.slots = []
                for _ in 0..<slotCount { t.slots.append(try r.string()) }
                let n = try r.length()
                t.stored.reserveCapacity(n)
                for _ in 0..<n {
                    let name = try r.string()
                    let values = try r.bytes()
                    _ = try StoredValues.decode(values)  // validate now; the indexes trust these bytes later
                    // Values of a record that is no longer live cannot be current: leave them out.
                    if legacy {
                        guard let e = try keys.entry(z, name), !e.deleted, e.recordType == type else { continue }
                    }
                    t.stored[name] = values
                }
                if !t.isEmpty { s.zones[z, default: ZoneIndexes()].types[type] = t }
            }
        }
        s.rebuildReadyIndexes()
        return s
    }

    /// Every type's record names, from the key directory.
    private mutating func rebuildNames(from directory: KeyDirectory) throws {
        for z in directory.zoneKeys {
            var byType: [String: [String]] = [:]
            try directory.entries(in: z).forEach { name, e in
                if !e.deleted { byType[e.recordType, default: []].append(name) }
            }
            for (type, names) in byType { zones[z, default: ZoneIndexes()].types[type, default: TypeIndexes()].loadNames(names) }
        }
    }

    /// Fills every ready index from the records' stored values (ordered indexes are bulk-built from sorted
    /// entries). A ready index missing some record's value is demoted to building, so a build completes it.
    private mutating func rebuildReadyIndexes() {
        var incomplete: Set<IndexDefinition> = []
        for z in Array(zones.keys) {
            let schema = SchemaKey(zone: z)
            for type in Array(zones[z]!.types.keys) {
                let ready = fields(z, type).filter {
                    definitions[IndexDefinition(schema: schema, recordType: type, field: $0.field, kind: $0.kind)]?.status == .ready
                }
                guard !ready.isEmpty else { continue }
                var t = zones[z]!.types[type]!
                zones[z]!.types[type] = nil  // mutate a unique copy
                var orderedEntries: [String: [OrderedEntry]] = [:]
                for name in t.names.all {
                    let values = t.values(name)
                    for fk in ready {
                        guard let slot = t.slotIndex(fk.field), let v = values[slot] else {
                            incomplete.insert(IndexDefinition(schema: schema, recordType: type, field: fk.field, kind: fk.kind))
                            continue
                        }
                        if fk.kind == .ordered {
                            for k in OrderedIndex.keys(v) { orderedEntries[fk.field, default: []].append(OrderedEntry(key: k, name: name)) }
                        } else {
                            t.insert(fk, v, name)
                        }
                    }
                }
                for fk in ready where fk.kind == .ordered {
                    var entries = orderedEntries[fk.field] ?? []
                    entries.sort()
                    var unique: [OrderedEntry] = []
                    unique.reserveCapacity(entries.count)
                    for e in entries where unique.last != e { unique.append(e) }
                    t.ordered[fk.field] = OrderedIndex(entries: SortedBlockList(sorted: unique))
                }
                zones[z]!.types[type] = t
            }
        }
        for d in incomplete {
            definitions[d]!.status = .building
            forEachType(of: d) { $0.dropIndex(FieldKind(field: d.field, kind: d.kind)) }
        }
    }
}
