import CloudletCore

/// A field and an index kind on it: one index of a record type.
struct FieldKind: Hashable, Sendable, Comparable {
    var field: String
    var kind: IndexKind

    static func < (a: FieldKind, b: FieldKind) -> Bool { (a.field, a.kind.rawValue) < (b.field, b.kind.rawValue) }
}

/// An entry of an ordered index: a value's ``SortKey`` and the record's name.
struct OrderedEntry: Comparable, Sendable {
    var key: [UInt8]
    var name: String

    static func < (a: OrderedEntry, b: OrderedEntry) -> Bool {
        let c = SortKey.compare(a.key, b.key)
        return c != 0 ? c < 0 : a.name < b.name
    }
}

/// Key → names of the records filed under it: the shape of the equality, full-text and spatial indexes.
struct Postings<Key: Hashable & Sendable>: Sendable {
    var postings: [Key: Set<String>] = [:]

    mutating func insert<S: Sequence>(_ keys: S, _ name: String) where S.Element == Key {
        for k in keys { postings[k, default: []].insert(name) }
    }

    mutating func remove<S: Sequence>(_ keys: S, _ name: String) where S.Element == Key {
        for k in keys {
            postings[k]?.remove(name)
            if postings[k]?.isEmpty == true { postings[k] = nil }
        }
    }

    func count(_ keys: [Key]) -> Int { keys.reduce(0) { $0 + (postings[$1]?.count ?? 0) } }

    func names(_ keys: [Key]) -> Set<String> {
        var out: Set<String> = []
        for k in keys { if let p = postings[k] { out.formUnion(p) } }
        return out
    }
}

/// QUERYABLE: value key → records holding it (each list member filed on its own).
typealias EqualityIndex = Postings<EqualityKey>
/// SEARCHABLE: token → records.
typealias TextIndex = Postings<String>
/// Spatial, for LOCATION fields: grid cell (``GeoCells``) → records.
typealias SpatialIndex = Postings<UInt64>

/// The tokens a SEARCHABLE index files a STRING or LIST<STRING> value under (``TextTokenizer``); none for other types.
func textTokens(_ v: FieldValue) -> Set<String> {
    switch v {
    case .string(let s): return Set(TextTokenizer.tokens(s))
    case .list(.string, let items):
        var out: Set<String> = []
        for case .string(let s) in items { out.formUnion(TextTokenizer.tokens(s)) }
        return out
    default: return []
    }
}

/// The cells a spatial index files a LOCATION under; none for other values.
func spatialCells(_ v: FieldValue) -> [UInt64] {
    guard case .location(let l) = v else { return [] }
    return GeoCells.cells(l)
}

/// SORTABLE (and QUERYABLE strings, for BEGINS_WITH): (key, name) entries in order. A record without the field is
/// filed under the missing key, so walking the index in order visits every record of the type.
struct OrderedIndex: Sendable {
    var entries = SortedBlockList<OrderedEntry>()

    static func keys(_ v: FieldValue?) -> [[UInt8]] {
        if case .list(_, let items)? = v { return items.map { SortKey.encode($0) } }
        return [SortKey.encode(v)]
    }

    mutating func insert(_ v: FieldValue?, _ name: String) {
        for k in Self.keys(v) { entries.insert(OrderedEntry(key: k, name: name)) }
    }

    mutating func remove(_ v: FieldValue?, _ name: String) {
        for k in Self.keys(v) { entries.remove(OrderedEntry(key: k, name: name)) }
    }

    /// Positions of the keys in `lo ..< hi` (hi nil: to the end).
    func range(_ lo: [UInt8], _ hi: [UInt8]?) -> (SortedBlockList<OrderedEntry>.Index, SortedBlockList<OrderedEntry>.Index) {
        let start = entries.lowerBound(OrderedEntry(key: lo, name: ""))
        let end = hi.map { entries.lowerBound(OrderedEntry(key: $0, name: "")) } ?? entries.endIndex
        return (start, max(start, end))
    }

    func count(_ lo: [UInt8], _ hi: [UInt8]?) -> Int {
        let (a, b) = range(lo, hi)
        return entries.distance(from: a, to: b)
    }

    func names(_ lo: [UInt8], _ hi: [UInt8]?) -> Set<String> {
        let (a, b) = range(lo, hi)
        var out: Set<String> = []
        var i = a
        while i < b {
            out.insert(entries[i].name)
            i = entries.index(after: i)
        }
        return out
    }
}

/// The indexes of one record type in one zone: its live record names in order, each record's indexed values,
/// and one index per (field, kind) the partition defines for the type.
///
/// Each record's indexed values are kept (``stored``, compactly encoded) so that a change or deletion can remove
/// exactly the entries the previous version added, without reading it back from the log. An index insert or
/// removal is idempotent, which is what lets a background build and live commits both add the same record.
struct TypeIndexes: Sendable {
    /// Names of the type's live records, in order: the scan order, the default result order and the index for
    /// `recordName` ranges, prefixes and sorts. Loaded from the key directory's type index the first time a query
    /// or an index build needs them (``namesLoaded``), kept current from then on.
    var names = SortedBlockList<String>()
    /// Whether ``names`` holds every live record of the type (else it is empty and not maintained).
    var namesLoaded = false
    /// Field of each slot of ``stored``; append-only.
    var slots: [String] = []
    /// recordName → the values of its indexed fields (``StoredValues``): for each slot present, the value or
    /// "missing". A slot absent from a record's values means "not indexed yet" (the record predates the index and
    /// the build has not reached it).
    var stored: [String: [UInt8]] = [:]
    var equality: [String: EqualityIndex] = [:]
    var ordered: [String: OrderedIndex] = [:]
    var text: [String: TextIndex] = [:]
    var spatial: [String: SpatialIndex] = [:]

    var isEmpty: Bool { names.isEmpty && stored.isEmpty }

    /// Takes every live record name of the type (from the key directory's type index).
    mutating func loadNames(_ all: [String]) {
        names = SortedBlockList(sorted: all.sorted())
        namesLoaded = true
    }

    /// The value a record has for an indexed field: a record field or a system field.
    static func value(_ field: String, in r: Record) -> FieldValue? {
        if let s = SystemField(rawValue: field) { return s.value(in: r) }
        return r.fields[field]
    }

    func slotIndex(_ field: String) -> Int? { slots.firstIndex(of: field) }

    mutating func slot(_ field: String) -> Int {
        if let i = slots.firstIndex(of: field) { return i }
        slots.append(field)
        return slots.count - 1
    }

    /// The stored values of a record (empty if none).
    func values(_ name: String) -> StoredValues.Values {
        guard let b = stored[name] else { return [:] }
        // Only this type writes these bytes, so failing to read them back is a bug.
        do { return try StoredValues.decode(b) } catch { preconditionFailure("index values of '\(name)': \(error)") }
    }

    /// A record's value of `field` if it is stored: `.some(nil)` when the record lacks the field, nil when the
    /// value is not stored.
    func storedValue(_ name: String, _ field: String) -> FieldValue?? {
        guard let s = slotIndex(field) else { return nil }
        let v = values(name)
        return v[s]
    }

    /// A new version of a record (or a new record) with the type's current indexes `fields`.
    mutating func put(_ r: Record, fields: [FieldKind]) {
        let name = r.recordName
        if namesLoaded { names.insert(name) }
        guard !fields.isEmpty else {
            stored[name] = nil
            return
        }
        let old = stored[name] == nil ? nil : values(name)
        var new: StoredValues.Values = [:]
        for fk in fields where new[slot(fk.field)] == nil {
            new[slot(fk.field)] = .some(Self.value(fk.field, in: r))
        }
        for fk in fields {
            let s = slot(fk.field)
            let v = new[s]!
            if let o = old?[s] {
                if o == v { continue }
                erase(fk, o, name)
            }
            insert(fk, v, name)
        }
        stored[name] = StoredValues.encode(new)
    }

    /// A record deleted (or moved to another type).
    mutating func remove(_ name: String, fields: [FieldKind]) {
        if namesLoaded { names.remove(name) }
        guard stored[name] != nil else { return }
        let old = values(name)
        stored[name] = nil
        for fk in fields {
            guard let s = slotIndex(fk.field), let o = old[s] else { continue }
            erase(fk, o, name)
        }
    }

    /// Adds a record's value to one index (idempotent). `v` nil: the record lacks the field.
    mutating func insert(_ fk: FieldKind, _ v: FieldValue?, _ name: String) {
        switch fk.kind {
        case .equality: if let v { equality[fk.field, default: EqualityIndex()].insert(EqualityKey.keys(v), name) }
        case .ordered: ordered[fk.field, default: OrderedIndex()].insert(v, name)
        case .text: if let v { text[fk.field, default: TextIndex()].insert(textTokens(v), name) }
        case .spatial: if let v { spatial[fk.field, default: SpatialIndex()].insert(spatialCells(v), name) }
        }
    }

    /// Removes a record's value from one index (a no-op if it is not there).
    mutating func erase(_ fk: FieldKind, _ v: FieldValue?, _ name: String) {
        switch fk.kind {
        case .equality: if let v { equality[fk.field]?.remove(EqualityKey.keys(v), name) }
        case .ordered: ordered[fk.field]?.remove(v, name)
        case .text: if let v { text[fk.field]?.remove(textTokens(v), name) }
        case .spatial: if let v { spatial[fk.field]?.remove(spatialCells(v), name) }
        }
    }

    /// Forgets one index's entries.
    mutating func dropIndex(_ fk: FieldKind) {
        switch fk.kind {
        case .equality: equality[fk.field] = nil
        case .ordered: ordered[fk.field] = nil
        case .text: text[fk.field] = nil
        case .spatial: spatial[fk.field] = nil
        }
    }

    /// Adds a record that predates an index being built: indexes `v` and stores it unless the record already has
    /// a stored value for the field (then a commit has indexed it since, and that value is current).
    mutating func buildInsert(_ fk: FieldKind, _ v: FieldValue?, _ name: String) {
        var values = self.values(name)
        let s = slot(fk.field)
        if let current = values[s] {
            insert(fk, current, name)
            return
        }
        insert(fk, v, name)
        values[s] = .some(v)
        stored[name] = StoredValues.encode(values)
    }
}

/// The compact encoding of a record's indexed values: `count varint · count × (slot varint · present u8 · value
/// if present)`, values as ``RecordCodec`` encodes them.
enum StoredValues {
    /// slot → value, or `.some(nil)` when the record lacks the field.
    typealias Values = [Int: FieldValue?]

    static func encode(_ values: Values) -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        w.varint(values.count)
        for slot in values.keys.sorted() {
            w.varint(slot)
            if let v = values[slot]! {
                w.u8(1)
                RecordCodec.encode(v, into: &w)
            } else {
                w.u8(0)
            }
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> Values {
        var r = ByteReader(bytes, what: "index values")
        let n = try r.length(unit: 2)
        var out: Values = [:]
        for _ in 0..<n {
            let raw = try r.varint()
            guard raw < 1 << 20 else { throw CloudletError.corruption("index values: slot \(raw) out of range") }
            let slot = Int(raw)
            let present = try r.u8()
            switch present {
            case 0: out[slot] = .some(nil)
            case 1: out[slot] = .some(try RecordCodec.decodeValue(&r))
            default: throw CloudletError.corruption("index values: bad presence byte \(present)")
            }
        }
        guard r.isAtEnd else { throw CloudletError.corruption("index values: \(r.remaining) trailing bytes") }
        return out
    }
}
