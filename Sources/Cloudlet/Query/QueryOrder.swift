import CloudletCore

/// A result's place in a query's order: its sort keys (one ``SortKey`` per descriptor), record name and zone.
struct QueryPosition: Sendable, Hashable {
    var keys: [[UInt8]]
    var recordName: String
    var zoneName: String
}

/// A query's total order: the sort descriptors, then record name, then zone name (for zone-wide queries). Ties go
/// in the direction of the last descriptor (ascending without descriptors), so that a single descending sort reads
/// its index backwards.
struct SortOrder: Sendable {
    var descriptors: [QuerySort]
    /// A full-text query without descriptors: by score (``BM25``), whose ``BM25/key(_:)`` is each position's only key,
    /// then record name and zone ascending.
    var ranked = false

    var tiesAscending: Bool { descriptors.last?.ascending ?? true }

    /// How many keys a position holds.
    var keyCount: Int { ranked ? 1 : descriptors.count }

    func compare(_ a: QueryPosition, _ b: QueryPosition) -> Int {
        if ranked, case let c = SortKey.compare(a.keys[0], b.keys[0]), c != 0 { return c }
        for (i, d) in descriptors.enumerated() {
            let c = SortKey.compare(a.keys[i], b.keys[i])
            if c != 0 { return d.ascending ? c : -c }
        }
        // Names compare by their bytes, as the indexes and the type index order them (record names are printable
        // ASCII, where this is `String`'s order too, at the cost of one memcmp).
        var c = NameOrder.compare(a.recordName, b.recordName).signum()
        if c == 0 { c = NameOrder.compare(a.zoneName, b.zoneName).signum() }
        return tiesAscending ? c : -c
    }

    func less(_ a: QueryPosition, _ b: QueryPosition) -> Bool { compare(a, b) < 0 }

    /// The key of `value` (of the descriptor's field) for descriptor `i`.
    func key(_ i: Int, _ value: FieldValue?) -> [UInt8] {
        let d = descriptors[i]
        if let here = d.relativeLocation {
            guard case .location(let l)? = value else { return SortKey.distance(nil) }
            return SortKey.distance(Geo.distanceKilometres(l, here))
        }
        return SortKey.encode(value)
    }

    /// A record's position.
    func position(_ r: Record, zoneName: String) -> QueryPosition {
        QueryPosition(
            keys: descriptors.indices.map { key($0, IndexedField.value(descriptors[$0].field, in: r)) },
            recordName: r.recordName, zoneName: zoneName)
    }
}

extension QueryCursor {
    static let version: UInt8 = 1

    /// `version u8 · query fingerprint u64 · key count varint · keys (bytes) · recordName string · zoneName string ·
    /// [ranking statistics (``RankStats``), for a ranked query] · CRC32C u32`, base64.
    init(query: UInt64, after p: QueryPosition, ranking: RankStats? = nil) {
        var w = ByteWriter(capacity: 64)
        w.u8(Self.version)
        w.u64(query)
        w.varint(p.keys.count)
        for k in p.keys { w.bytes(k) }
        w.string(p.recordName)
        w.string(p.zoneName)
        ranking?.encode(into: &w)
        w.u32(CRC32C.checksum(w.bytes))
        self.init(marker: Base64.encode(w.bytes))
    }

    /// The position this cursor resumes after, checked against the query it must belong to, and, for a `ranked`
    /// query, the statistics its pages score with.
    func resume(query: UInt64, keyCount: Int, ranked: Bool) throws -> (QueryPosition, RankStats?) {
        let bad = CloudletError.invalid("the continuation marker is malformed")
        guard let bytes = Base64.decode(marker), bytes.count >= 1 + 8 + 4 else { throw bad }
        let body = Array(bytes[..<(bytes.count - 4)])
        var tail = ByteReader(bytes, from: bytes.count - 4, what: "continuation marker")
        guard try tail.u32() == CRC32C.checksum(body) else { throw bad }
        var r = ByteReader(body, what: "continuation marker")
        guard try r.u8() == Self.version else { throw CloudletError.invalid("the continuation marker is of an unknown version") }
        guard try r.u64() == query else {
            throw CloudletError.invalid(
                "the continuation marker belongs to another query (record type, predicate, sort, zone or database differ)")
        }
        // The client's bytes, not ours: what does not decode is a bad request, never "corruption".
        do {
            let n = try r.length()
            guard n == keyCount else { throw bad }
            var keys: [[UInt8]] = []
            for _ in 0..<n { keys.append(try r.bytes()) }
            let p = QueryPosition(keys: keys, recordName: try r.string(), zoneName: try r.string())
            let stats = ranked ? try RankStats.decode(&r) : nil
            guard r.isAtEnd else { throw bad }
            return (p, stats)
        } catch let e as CloudletError where e.code == .corruption {
            throw bad
        }
    }
}

extension Query {
    /// A fingerprint of everything a continuation marker depends on: the store, database, zone scope, record type,
    /// predicate and sort.
    func fingerprint(store: UInt64, database: DatabaseID, zone: String?) -> UInt64 {
        var w = ByteWriter(capacity: 128)
        w.u64(store)
        w.u64(Fingerprint.of(database))
        w.string(zone ?? "*")
        w.string(recordType)
        PredicateCodec.encode(predicate, into: &w)
        w.varint(sortDescriptors.count)
        for d in sortDescriptors {
            w.string(d.field)
            w.bool(d.ascending)
            if let l = d.relativeLocation {
                w.u8(1)
                w.f64(l.latitude)
                w.f64(l.longitude)
            } else {
                w.u8(0)
            }
        }
        return Fingerprint.of([Base64.encode(w.bytes)])
    }
}
