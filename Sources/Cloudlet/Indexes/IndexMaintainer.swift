import CloudletCore
import CloudletStorage

/// One kind of secondary index, in the shape of the FoundationDB Record Layer's `IndexMaintainer`: what a record's
/// values of the indexed fields file it under (``valueKeys(_:name:)``), the key puts and deletes a change of those values
/// makes (``update(old:new:name:in:)``) and a walk through the index's keys (``scan(_:_:_:after:inclusive:reverse:)``).
///
/// Every index is one key range of the partition's key directory (docs/index-layer.md, "Secondary indexes"):
/// `01 · zone · 04 · id (u32) · escaped value key · 00 00 · name` → empty, one key per (value key, record). The value
/// keys of each kind are byte strings whose order is the order the index is read in; escaping (``IndexKeyspace``)
/// keeps that order and makes the record name separable. Maintainers are stateless: the index's place in the tree
/// (``IndexKeyspace/Subspace``) is passed in.
protocol IndexMaintainer: Sendable {
    var kind: IndexKind { get }
    /// The value keys record `name` is filed under whose values of the index's fields
    /// (``IndexDefinition/sourceFields``, in order) are `values`, nil for a field the record lacks.
    func valueKeys(_ values: [FieldValue?], name: String) -> [[UInt8]]
}

/// The maintainer of an index on one field.
protocol FieldIndexMaintainer: IndexMaintainer {
    /// The value keys a record whose field holds `value` (nil: the record lacks the field) is filed under; none: not
    /// filed at all (an equality index skips records without the field, an ordered index files them under the
    /// missing key).
    func valueKeys(_ value: FieldValue?) -> [[UInt8]]
}

extension FieldIndexMaintainer {
    func valueKeys(_ values: [FieldValue?], name: String) -> [[UInt8]] { valueKeys(values[0]) }
}

/// What a change of one record does to one index: the keys to delete and the keys to put.
struct IndexUpdate: Sendable, Equatable {
    var deletes: [[UInt8]] = []
    var puts: [[UInt8]] = []

    var isEmpty: Bool { deletes.isEmpty && puts.isEmpty }
}

extension IndexMaintainer {
    /// The keys of record `name` in the index at `subspace` to delete and to put when its value keys
    /// (``IndexDefinition/valueKeys(_:name:)``) go from `old` to `new`; nil for a record not in the index (a new record,
    /// one deleted, one that predates the index and that its build has not reached). Keys both versions have are
    /// left alone.
    func update(old: [[UInt8]]?, new: [[UInt8]]?, name: String, in subspace: IndexKeyspace.Subspace) -> IndexUpdate {
        let before = Set(old ?? [])
        let after = Set(new ?? [])
        var u = IndexUpdate()
        for k in before.subtracting(after).sorted(by: LSMKey.less) { u.deletes.append(subspace.key(k, name)) }
        for k in after.subtracting(before).sorted(by: LSMKey.less) { u.puts.append(subspace.key(k, name)) }
        return u
    }

    /// The index's (value key, record name) pairs with value keys in `range`, in key order (backwards with
    /// `reverse`), starting after `continuation` (the last pair a previous scan returned; nil: from the range's start,
    /// or end) — or at it, if `inclusive`. Reads `directory` — the live one under the partition's lock, or a read
    /// view's — lazily.
    func scan(
        _ directory: KeyDirectory, _ subspace: IndexKeyspace.Subspace, _ range: IndexKeyspace.ValueRange,
        after continuation: IndexEntry? = nil, inclusive: Bool = false, reverse: Bool = false
    ) -> IndexCursor {
        var keys = subspace.keyRange(range)
        if let c = continuation {
            let at = subspace.key(c.valueKey, c.name)
            // Forwards the bound is a lower one, backwards an (exclusive) upper one; `at + [0]` is just past `at`.
            let bound = reverse == inclusive ? at + [0] : at
            if reverse {
                if keys.upper.map({ LSMKey.less(bound, $0) }) ?? true { keys.upper = bound }
            } else if keys.lower.map({ LSMKey.less($0, bound) }) ?? true {
                keys.lower = bound
            }
        }
        var namePrefix: [UInt8]?
        if !reverse, case .exactly(let v) = range {
            namePrefix = subspace.prefix
            IndexKeyspace.escape(v, into: &namePrefix!)
        }
        return IndexCursor(
            directory.indexCursor(keys, reverse: reverse), prefixCount: subspace.prefix.count, namePrefix: namePrefix)
    }
}

/// QUERYABLE: a record is filed under the ``EqualityKey`` of its value (of each member, for a list); a record without
/// the field is not filed.
struct EqualityMaintainer: FieldIndexMaintainer {
    var kind: IndexKind { .equality }
    func valueKeys(_ value: FieldValue?) -> [[UInt8]] { value.map { EqualityKey.keys($0).map(\.encoded) } ?? [] }
}

/// SORTABLE (and QUERYABLE strings, for BEGINS_WITH): a record is filed under the ``SortKey`` of its value (of each
/// member, for a list), a record without the field under the missing key — so walking the index in order visits
/// every record of the type.
struct OrderedMaintainer: FieldIndexMaintainer {
    var kind: IndexKind { .ordered }
    func valueKeys(_ value: FieldValue?) -> [[UInt8]] {
        if case .list(_, let items)? = value { return items.map { SortKey.encode($0) } }
        return [SortKey.encode(value)]
    }
}

/// SEARCHABLE: a record is filed under each token (``TextTokenizer``) of a STRING or LIST<STRING> value.
struct TextMaintainer: FieldIndexMaintainer {
    var kind: IndexKind { .text }
    func valueKeys(_ value: FieldValue?) -> [[UInt8]] { value.map { textTokens($0).map { Array($0.utf8) } } ?? [] }
}

/// Spatial, for LOCATION fields: a record is filed under its location's cell at each level (``GeoCells``), the cell
/// id big-endian.
struct SpatialMaintainer: FieldIndexMaintainer {
    var kind: IndexKind { .spatial }
    func valueKeys(_ value: FieldValue?) -> [[UInt8]] { value.map { spatialCells($0).map(IndexKeyspace.cellKey) } ?? [] }

    /// The value of each of a record's keys: the latitude and longitude of a LOCATION value (IEEE 754 doubles, little
    /// endian, 16 bytes), so that a walk in distance order places a candidate without reading its stored values;
    /// empty for a LIST<LOCATION> (no one distance: it sorts as a record without the field does). Keys written before
    /// this value existed are empty too: their readers fall back to the stored values.
    static func entryValue(_ value: FieldValue?) -> [UInt8] {
        guard case .location(let l)? = value else { return [] }
        var w = ByteWriter(capacity: 16)
        w.u64(l.latitude.bitPattern)
        w.u64(l.longitude.bitPattern)
        return w.bytes
    }

    /// The location an ``entryValue(_:)`` holds; nil for an empty one (or one of another length).
    static func location(entryValue v: ArraySlice<UInt8>) -> Location? {
        guard v.count == 16 else { return nil }
        // Read where the bytes lie (a block's, or a memtable entry's): one of these a candidate of a NEAR walk.
        return v.withUnsafeBytes { b in
            Location(
                latitude: Double(bitPattern: UInt64(littleEndian: b.loadUnaligned(fromByteOffset: 0, as: UInt64.self))),
                longitude: Double(bitPattern: UInt64(littleEndian: b.loadUnaligned(fromByteOffset: 8, as: UInt64.self))))
        }
    }
}

/// A composite index (``CompositeIndex``): a record is filed under one key, the tuple of its values of the index's
/// fields — each field's ``SortKey`` (the missing key for a field the record lacks, as the ordered index files it;
/// for a STRING before the last field, the case-folded key ``foldedKey(_:)``, since EQUALS on strings ignores case)
/// escaped and terminated as ``IndexKeyspace`` escapes value keys (`00` → `00 FF`, then `00 00`), every byte inverted
/// for a descending field — so that byte order is the order of the first field, then the second, and so on. When
/// the last field is descending, the record name follows, escaped and inverted as well: records equal on every field
/// then come in descending name order, which is how a descending sort orders ties (the name after the value key is
/// always ascending). Every record of the type is filed.
struct CompositeMaintainer: IndexMaintainer {
    var components: [IndexComponent]
    var kind: IndexKind { .composite }

    func valueKeys(_ values: [FieldValue?], name: String) -> [[UInt8]] {
        var key: [UInt8] = []
        for (i, (c, v)) in zip(components, values).enumerated() {
            Self.append(fieldKey(v, at: i), descending: c.descending, to: &key)
        }
        if namesDescend { Self.append(Array(name.utf8), descending: true, to: &key) }
        return [key]
    }

    /// Field `i`'s key for value `v`: its ``SortKey``, or for a STRING before the last field its ``foldedKey(_:)``.
    /// The fields before the last serve equalities, and the last one sorts and ranges: a string there keeps its
    /// order (Unicode scalars), one before it is filed as EQUALS compares it.
    func fieldKey(_ v: FieldValue?, at i: Int) -> [UInt8] {
        if i < components.count - 1, case .string(let s)? = v { return Self.foldedKey(s) }
        return SortKey.encode(v)
    }

    /// A string's key where it serves equalities: the text rank and its lowercased UTF-8, as the equality index
    /// folds it (``EqualityKey``); strings EQUALS finds equal by case share it.
    static func foldedKey(_ s: String) -> [UInt8] { [SortKey.text] + Array(s.lowercased().utf8) }

    /// Whether keys end with the record name inverted (the last field is descending).
    var namesDescend: Bool { components.last?.descending ?? false }

    /// Appends one field's part of a key: `sortKey` escaped and terminated, inverted if `descending`. Escaped keys
    /// are prefix-free, so inverting every byte reverses their order.
    static func append(_ sortKey: [UInt8], descending: Bool, to key: inout [UInt8]) {
        let start = key.count
        IndexKeyspace.escape(sortKey, into: &key)
        if descending { for i in start..<key.count { key[i] = ~key[i] } }
    }

    /// The part of `key` field `at` occupies, from `from` (the end of the previous part): its bytes as stored and
    /// the field's ``SortKey``; nil if the key ends first.
    static func part(_ key: [UInt8], from: Int, descending: Bool) -> (end: Int, sortKey: [UInt8])? {
        var out: [UInt8] = []
        var i = from
        let flip: UInt8 = descending ? 0xFF : 0
        while i + 1 < key.count {
            let b = key[i] ^ flip
            let next = key[i + 1] ^ flip
            if b == 0 {
                if next == 0 { return (i + 2, out) }
                guard next == 0xFF else { return nil }
                out.append(0)
                i += 2
            } else {
                out.append(b)
                i += 1
            }
        }
        return nil
    }

    /// Field `index`'s key (``fieldKey(_:at:)``) in a composite value key; nil if the key is malformed.
    func fieldKey(_ key: [UInt8], field index: Int) -> [UInt8]? {
        var at = 0
        for (i, c) in components.enumerated() {
            guard let (end, k) = Self.part(key, from: at, descending: c.descending) else { return nil }
            if i == index { return k }
            at = end
        }
        return nil
    }
}

/// One entry of an index: a value key and the record filed under it. Ordered as the index's keys are (value key,
/// then name, both as bytes).
struct IndexEntry: Sendable, Hashable, Comparable {
    var valueKey: [UInt8]
    var name: String

    static func < (a: IndexEntry, b: IndexEntry) -> Bool {
        let c = LSMKey.compare(a.valueKey, b.valueKey)
        return c != 0 ? c < 0 : LSMKey.less(Array(a.name.utf8), Array(b.name.utf8))
    }
}

/// A walk through an index's entries (``IndexMaintainer/scan(_:_:_:after:inclusive:reverse:)``), reading the tree as it goes:
/// each step may do I/O and throw (a damaged run is named, never answered from).
struct IndexCursor {
    private var keys: KeyDirectory.KeyCursor
    private let prefixCount: Int
    /// For a forward walk of one value key's entries: the key that value key's names follow
    /// (`prefix · esc(value key)`), which ``seek(name:)`` appends a name to. Nil otherwise.
    private let namePrefix: [UInt8]?

    fileprivate init(_ keys: KeyDirectory.KeyCursor, prefixCount: Int, namePrefix: [UInt8]? = nil) {
        self.keys = keys
        self.prefixCount = prefixCount
        self.namePrefix = namePrefix
    }

    /// The next entry, nil after the last.
    mutating func next() throws -> IndexEntry? {
        guard let key = try keys.nextKey() else { return nil }
        return try IndexKeyspace.entry(key, prefixCount: prefixCount)
    }

    /// The next entry with the value its key holds (a full-text index's ``TextPosting``; empty for other kinds), nil
    /// after the last.
    mutating func nextWithValue() throws -> (IndexEntry, [UInt8])? {
        guard let e = try keys.next() else { return nil }
        return (try IndexKeyspace.entry(e.key, prefixCount: prefixCount), e.value)
    }

    /// For a forward walk of one value key's entries (``seeksByName``): the next entry's record name (UTF-8) and the
    /// value its key holds, nil after the last — in place, nothing copied: let go of both before the next call (or
    /// it copies the key).
    mutating func nextPosting() throws -> (name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)? {
        guard let (key, value) = try keys.nextKeyValue() else { return nil }
        return (key[namePrefix!.count...], value)
    }

    /// The next entry's record name (its value key left undecoded), nil after the last.
    mutating func nextName() throws -> String? {
        guard let key = try keys.nextKey() else { return nil }
        if let namePrefix { return String(decoding: key[namePrefix.count...], as: UTF8.self) }
        return try IndexKeyspace.name(key, prefixCount: prefixCount)
    }

    /// Whether ``seek(name:)`` may be called: a forward walk of one value key's entries.
    var seeksByName: Bool { namePrefix != nil }

    /// Makes the next ``nextName()`` return the first name at least `name` (in byte order) filed under the value
    /// key, without stepping through those before it; never moves back. Requires ``seeksByName``.
    mutating func seek(name: String) throws {
        try keys.seek(namePrefix! + name.utf8)
    }
}

/// The secondary indexes' keys in a partition's key directory (docs/index-layer.md, "Secondary indexes"), under
/// each zone's prefix `01 · zone`:
/// - `04 · id (u32) · escaped value key · 00 00 · name` → empty: record `name` is filed under the value key in index
///   `id` (``IndexState/Info/id``, assigned when the index is defined);
/// - `05 · u32 length · type · name` → ``StoredValues``: the record's values of its type's indexed fields, what the
///   next change of the record deletes its keys by.
///
/// Escaping: every `00` byte of a value key is written `00 FF`, and the key ends with `00 00`; so escaped keys order
/// as the value keys do, none is a prefix of another, and the record name follows the terminator.
enum IndexKeyspace {
    static let indexTag: UInt8 = 0x04
    static let valuesTag: UInt8 = 0x05

    /// One index's keys in one zone: `01 · zone · 04 · id`.
    struct Subspace: Sendable, Hashable {
        let prefix: [UInt8]

        init(zone: [UInt8], id: UInt32) {
            var p = zone
            p.append(IndexKeyspace.indexTag)
            DirectoryKey.appendBE(&p, UInt64(id), 4)
            prefix = p
        }

        /// The key filing `name` under `valueKey`.
        func key(_ valueKey: [UInt8], _ name: String) -> [UInt8] {
            var k = prefix
            k.reserveCapacity(prefix.count + valueKey.count + name.utf8.count + 4)
            IndexKeyspace.escape(valueKey, into: &k)
            k += name.utf8
            return k
        }

        /// The tree's keys of the entries whose value keys are in `range`.
        func keyRange(_ range: ValueRange) -> LSMKeyRange {
            switch range {
            case .all: return LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix))
            case .exactly(let v):
                var lower = prefix
                IndexKeyspace.escape(v, into: &lower)
                return LSMKeyRange(lower: lower, upper: DirectoryKey.successor(lower))
            case .between(let lo, let hi):
                // Escaping keeps order, so [lo, hi) of value keys is [escaped lo, escaped hi) of the tree's keys.
                var lower = prefix
                IndexKeyspace.escape(lo, into: &lower)
                var upper = prefix
                if let hi { IndexKeyspace.escape(hi, into: &upper) } else { upper = DirectoryKey.successor(prefix) }
                return LSMKeyRange(lower: lower, upper: upper)
            }
        }
    }

    /// Which value keys a scan reads.
    enum ValueRange: Sendable, Hashable {
        case all
        /// Exactly this value key (the records filed under it).
        case exactly([UInt8])
        /// Value keys in `lo ..< hi` (hi nil: to the end).
        case between([UInt8], [UInt8]?)
    }

    /// `zone · 05 · u32 length · type`: the prefix of a type's stored values.
    static func valuesPrefix(_ zone: [UInt8], _ type: String) -> [UInt8] {
        var k = zone
        k.append(valuesTag)
        DirectoryKey.appendBE(&k, UInt64(type.utf8.count), 4)
        k += type.utf8
        return k
    }

    /// The key of a record's stored values.
    static func values(_ zone: [UInt8], _ type: String, _ name: String) -> [UInt8] { valuesPrefix(zone, type) + name.utf8 }

    /// A spatial cell's value key: its id, big-endian.
    static func cellKey(_ cell: UInt64) -> [UInt8] {
        var k: [UInt8] = []
        DirectoryKey.appendBE(&k, cell, 8)
        return k
    }

    /// Appends `bytes` escaped (`00` → `00 FF`) and the terminator `00 00`.
    static func escape(_ bytes: [UInt8], into key: inout [UInt8]) {
        for b in bytes {
            key.append(b)
            if b == 0 { key.append(0xFF) }
        }
        key.append(0)
        key.append(0)
    }

    /// The (value key, name) of an index key whose subspace prefix is `prefixCount` bytes.
    static func entry(_ key: [UInt8], prefixCount: Int) throws -> IndexEntry {
        let end = try terminator(key, prefixCount: prefixCount)
        var value: [UInt8] = []
        value.reserveCapacity(end - prefixCount)
        var i = prefixCount
        while i < end {
            value.append(key[i])
            i += key[i] == 0 ? 2 : 1  // `00 FF` is an escaped `00`
        }
        return IndexEntry(valueKey: value, name: String(decoding: key[(end + 2)...], as: UTF8.self))
    }

    /// The record name of an index key (what follows its escaped value key), the value key not decoded.
    static func name(_ key: [UInt8], prefixCount: Int) throws -> String {
        String(decoding: key[(try terminator(key, prefixCount: prefixCount) + 2)...], as: UTF8.self)
    }

    /// Where the `00 00` that ends the escaped value key of index key `key` starts (the subspace's prefix is its
    /// first `prefixCount` bytes).
    private static func terminator(_ key: [UInt8], prefixCount: Int) throws -> Int {
        var i = prefixCount
        while i + 1 < key.count {
            if key[i] != 0 {
                i += 1
            } else if key[i + 1] == 0 {
                return i
            } else {
                guard key[i + 1] == 0xFF else { break }
                i += 2
            }
        }
        throw CloudletError.corruption("secondary index key \(LSMKey.printable(key)) is malformed")
    }
}

extension EqualityKey {
    /// The value key an equality index files under: a tag byte (1 number, 2 timestamp, 3 text, 4 bytes, 5 location,
    /// 6 asset, 7 NaN) and the value: numbers and coordinates as IEEE-754 bits big-endian, timestamps as i64
    /// big-endian, text (case-folded) and asset checksums as UTF-8. Equal keys, equal bytes; no order is needed.
    var encoded: [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .number(let d):
            out = [1]
            DirectoryKey.appendBE(&out, d.bitPattern, 8)
        case .timestamp(let t):
            out = [2]
            DirectoryKey.appendBE(&out, UInt64(bitPattern: t), 8)
        case .text(let s):
            out = [3]
            out += s.utf8
        case .bytes(let b):
            out = [4]
            out += b
        case .location(let lat, let lon):
            out = [5]
            DirectoryKey.appendBE(&out, lat.bitPattern, 8)
            DirectoryKey.appendBE(&out, lon.bitPattern, 8)
        case .asset(let a):
            out = [6]
            out += a.utf8
        case .notANumber:
            out = [7]
        }
        return out
    }
}
