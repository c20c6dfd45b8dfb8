import CloudletCore
import CloudletStorage
import Synchronization

/// A query resolved against the schema, ready to plan in each zone (Database+Query.swift).
struct PreparedQuery: Sendable {
    var query: Query
    var schemaKey: SchemaKey
    var order: SortOrder
    /// The type's SEARCHABLE fields: what `self CONTAINS` searches.
    var searchable: Set<String>
    /// The index kinds the query's comparisons and sorts require, by field (from their schema flags).
    var needed: [String: Set<IndexKind>]
    /// The record type's schema (its fields' types, for the exact keys of composite ranges and counts).
    var recordSchema: RecordTypeSchema? = nil
    /// A full-text query without sort descriptors: the terms it ranks its matches by (``BM25``; the order is then
    /// ``SortOrder/ranked``), nil otherwise.
    var rankTerms: [RankTerm]? = nil
    /// The scorer of a ranked query, once its statistics are known (``Database``'s `query`).
    var scorer: BM25? = nil
    /// A ranked query's statistics but the terms' document frequencies, which its one zone's plan counts as it merges
    /// the postings (one walk of them, not a count and then a merge), leaving the scorer it made in `rankedBy`.
    var pendingStats: RankStats? = nil
    var rankedBy: RankedBy? = nil

    func fieldType(_ field: String) -> FieldType? { recordSchema?.type(of: field) }

    /// The scorer a ranked query's pages use: given before planning, or made by its one zone's plan.
    var rankScorer: BM25? { scorer ?? rankedBy?.scorer.withLock { $0 } }

    /// Where `r` goes in the query's order.
    func position(_ r: Record, zoneName: String) -> QueryPosition {
        guard order.ranked else { return order.position(r, zoneName: zoneName) }
        return QueryPosition(keys: [BM25.key(rankScorer?.score(r) ?? 0)], recordName: r.recordName, zoneName: zoneName)
    }

    func matches(_ r: Record) -> Bool { query.predicate.matches(r, searchable: searchable) }
}

/// How a zone's candidates are found: an index lookup, or a union of lookups (OR).
indirect enum CandidateSource: Sendable {
    /// Matches nothing (FALSEPREDICATE, IN of an empty list, a search for stop words only).
    case nothing
    /// Equality index: records filed under any of `keys` (all of them, for LIST_CONTAINS_ALL).
    case equality(field: String, keys: [EqualityKey], all: Bool)
    /// Ordered index: keys in `lo ..< hi`.
    case range(field: String, lo: [UInt8], hi: [UInt8]?, prefix: Bool)
    /// The type's record names: `lo ... hi` (inclusive bounds), or those starting with `prefix`.
    case names(lo: String?, hi: String?, prefix: String?)
    /// Full-text index of each of `fields`: records with any (or all) of `tokens` in one of them.
    case text(fields: [String], tokens: [String], all: Bool)
    /// Spatial index: records in the cells covering a NEAR circle.
    case spatial(field: String, cells: [UInt64])
    /// Composite index: records equal on its leading fields, perhaps within a range of the next.
    case composite(CompositeRange)
    case union([CandidateSource])
}

/// What a query does in one zone, decided under the partition's lock (``QueryPlanner``) and carried out off it.
enum ZoneExecution: Sendable {
    case empty
    /// Read candidates in index order (record names, or an ordered index), evaluating each, until enough match.
    case walk(WalkSource)
    /// Candidates with their positions (sort keys from the indexes' kept values), already past the continuation
    /// point: sort them, then read in order until enough match.
    /// Their entries are looked up in `view` (the plan's read view) only for those read: most are never read.
    /// `sorted`: the candidates come in the query's order already (a ranked query's, sorted by score as it scored them).
    case keyed([(name: String, position: QueryPosition)], view: PartitionReadView, sorted: Bool = false)
    /// Candidates to read and evaluate; the matches are sorted in memory.
    case readAll([(name: String, entry: RecordEntry)])
    /// A count answered by an index: this many records match (``QueryPlanner/exactCount(_:)``).
    case counted(Int)
    /// A NEAR query sorted by distance: its circle's cells visited nearest first, a page's records read as soon as
    /// no unvisited cell can hold a nearer one.
    case nearest(NearestWalk)
}

/// A query with a NEAR on `field`, sorted by the distance of `field` from `center` (ascending, alone): the cells
/// covering the NEAR circle, by a lower bound of their distance from `center` (``GeoCells/lowerBoundKm(from:to:)``).
/// A record is placed by its kept location (no read), and read once every cell left is farther than it: an
/// incremental nearest-neighbour search, so a page of the nearest 100 reads about 100 records.
struct NearestWalk: Sendable {
    var field: String
    var center: Location
    var cells: [(cell: UInt64, lowerKm: Double)]
}

/// An ordered walk: the type's record names (`field` nil) or a SORTABLE index, forwards or backwards.
struct WalkSource: Sendable {
    var field: String?
    var ascending: Bool
    /// Whether positions carry a key (a sort by the field, or by recordName), or none (no sort descriptors).
    var keyed: Bool
    /// The value keys of `field`'s index walked (a range on the sorted field: the walk starts at its bound and
    /// ends at the other); nil: the whole index.
    var bounds: IndexKeyspace.ValueRange? = nil
    /// The only names that are candidates (every candidate of a selective predicate, counted in full while
    /// planning): the walk skips the others without looking them up or reading them. nil: every name.
    var members: Set<String>? = nil
    /// Walk in name order the names of these postings (``QueryPlanner/nameStream(_:after:inclusive:)``) rather
    /// than the type's every record (`field` nil, ascending).
    var stream: CandidateSource? = nil
    /// Walk this composite index's range (`bounds`) rather than an ordered index (`field` nil).
    var composite: CompositeWalk? = nil

    /// Whether every name the walk visits is a candidate (it is bounded by a range or made of postings), so a page
    /// reads its matches and stops, and the candidates it read are its count.
    var readsOnlyCandidates: Bool { bounds != nil || stream != nil }
}

/// Plans a query in one zone: picks the most selective usable index (estimating candidates by counting index keys),
/// and an order strategy that sorts in memory only what it must. Every candidate is still evaluated against the full
/// predicate (``Predicate/matches(_:searchable:)`` is the ground truth): an index only has to find a superset.
///
/// Reads the indexes through a read view's key directory (memtables and runs), by key-range scans: nothing is
/// copied into memory but what a query returns or sorts.
struct QueryPlanner {
    /// The partition as of one LSN: planning and a walk's batch each read one view.
    let st: PartitionReadView
    let zone: ZoneKey
    let q: PreparedQuery
    /// The zone's key prefix in the directory.
    private let zonePrefix: [UInt8]
    /// The counts this plan made, by index range, for a later count or lookup of the same range.
    private let counted = Counted()

    private final class Counted: Sendable {
        let ranges = Mutex<[CountedRange: Count]>([:])
    }

    /// A count of one index range: how many entries it read and, when that reached the range's end (under the
    /// count's cap), their names.
    private struct Count {
        var n: Int
        var names: Set<String>?
    }

    private struct CountedRange: Hashable {
        var field: String
        var kind: IndexKind
        var range: IndexKeyspace.ValueRange
    }

    init(state: PartitionReadView, zone: ZoneKey, query: PreparedQuery) {
        st = state
        self.zone = zone
        q = query
        zonePrefix = DirectoryKey.zone(zone)
    }

    var recordsOfType: Int { st.indexes.recordCount(zone, q.query.recordType) }

    func ready(_ field: String, _ kind: IndexKind) -> Bool {
        ready(IndexDefinition(schema: q.schemaKey, recordType: q.query.recordType, field: field, kind: kind))
    }

    func ready(_ d: IndexDefinition) -> Bool { st.indexes.status(d) == .ready }

    /// Whether every live record of the type has `field`'s value kept (some ready index covers the field).
    func valuesKept(_ field: String) -> Bool {
        field == SystemField.recordName.rawValue || IndexKind.allCases.contains { ready(field, $0) }
    }

    // MARK: - Candidate sources

    /// The cheapest index access for `p`, nil when it needs a scan.
    func source(_ p: Predicate, cap: Int = .max) throws -> CandidateSource? {
        switch p {
        case .all, .not: return nil
        case .none: return .nothing
        case .comparison(let c):
            // One equality: a composite range on it holds what the field's own index finds, so it is taken when it
            // walks in the query's order (or the field has no index), without counting either.
            guard let r = compositeSource([p]) else { return source(c) }
            return compositeWalk(r) != nil ? .composite(r) : source(c) ?? .composite(r)
        case .and(let ps):
            var best: (CandidateSource, Int)?
            // A composite range is never wider than its first equality's index: it wins a tie when it walks in the
            // query's order, and loses it otherwise (the single-field plans stay as they were).
            let composite = compositeSource(ps)
            var sources: [CandidateSource] = composite.flatMap { compositeWalk($0) != nil ? [.composite($0)] : nil } ?? []
            for child in ps {
                guard let s = try source(child, cap: cap) else { continue }
                if case .nothing = s { return .nothing }
                // Two ranges on one field (`x >= a AND x < b`): their intersection, which holds every match of both.
                if case .range(let f, let lo, let hi, false) = s,
                    let i = sources.firstIndex(where: { if case .range(f, _, _, false) = $0 { true } else { false } }),
                    case .range(_, let lo0, let hi0, _) = sources[i]
                {
                    let l = lo.lexicographicallyPrecedes(lo0) ? lo0 : lo
                    let h: [UInt8]? = switch (hi, hi0) {
                    case (nil, let b), (let b, nil): b
                    case (let a?, let b?): a.lexicographicallyPrecedes(b) ? a : b
                    }
                    if let h, !l.lexicographicallyPrecedes(h) { return .nothing }
                    sources[i] = .range(field: f, lo: l, hi: h, prefix: false)
                } else {
                    sources.append(s)
                }
            }
            if let composite, compositeWalk(composite) == nil { sources.append(.composite(composite)) }
            if sources.count == 1 { return sources[0] }
            for s in sources {
                let e = try estimate(s, cap: cap)
                if best == nil || e < best!.1 { best = (s, e) }
            }
            return best?.0
        case .or(let ps):
            var parts: [CandidateSource] = []
            for child in ps {
                guard let s = try source(child, cap: cap) else { return nil }
                if case .nothing = s { continue }
                parts.append(s)
            }
            return parts.isEmpty ? .nothing : parts.count == 1 ? parts[0] : .union(parts)
        }
    }

    func source(_ c: Comparison) -> CandidateSource? {
        let v = c.value
        if c.field == fullTextField {
            guard c.comparator == .containsAllTokens || c.comparator == .containsAnyTokens else { return nil }
            let tokens = Set(v.stringValue.map(TextTokenizer.searchTerms) ?? []).sorted()
            let fields = q.searchable.sorted()
            if tokens.isEmpty || fields.isEmpty { return .nothing }
            guard fields.allSatisfy({ ready($0, .text) }) else { return nil }
            return .text(fields: fields, tokens: tokens, all: c.comparator == .containsAllTokens)
        }
        if c.field == SystemField.recordName.rawValue, let s = nameSource(c) { return s }
        switch c.comparator {
        case .equals, .in, .listContains, .listContainsAny, .listContainsAll:
            let keys = EqualityKey.keys(v).filter { $0 != .notANumber }
            if ready(c.field, .equality) {
                if keys.isEmpty { return c.comparator == .listContainsAll ? nil : .nothing }
                return .equality(field: c.field, keys: keys, all: c.comparator == .listContainsAll)
            }
            // A SORTABLE-only number or timestamp: an equality is a one-key range.
            if c.comparator == .equals, v.stringValue == nil, v.referenceValue == nil, ready(c.field, .ordered),
                let b = SortKey.bound(v)
            {
                return .range(field: c.field, lo: b, hi: SortKey.successor(b), prefix: false)
            }
            return nil
        case .lessThan, .lessThanOrEquals:
            guard ready(c.field, .ordered), let b = SortKey.bound(v) else { return nil }
            // `< v` can stop before v's key, unless integers beyond 2^53 share v's rounded double.
            let exact = c.comparator == .lessThan && (v.int64Value.map { $0.magnitude <= 1 << 53 } ?? true)
            return .range(field: c.field, lo: [b[0]], hi: exact ? b : SortKey.successor(b), prefix: false)
        case .greaterThan, .greaterThanOrEquals:
            guard ready(c.field, .ordered), let b = SortKey.bound(v) else { return nil }
            return .range(field: c.field, lo: b, hi: SortKey.successor([b[0]]), prefix: false)
        case .beginsWith, .listMemberBeginsWith:
            guard ready(c.field, .ordered), let p = v.stringValue else { return nil }
            let lo = [SortKey.text] + Array(p.utf8)
            return .range(field: c.field, lo: lo, hi: SortKey.successor(lo), prefix: true)
        case .near:
            guard ready(c.field, .spatial), case .location(let l) = v, let d = c.distance else { return nil }
            return .spatial(field: c.field, cells: GeoCells.covering(l, km: d))
        case .containsAllTokens, .containsAnyTokens:
            guard ready(c.field, .text) else { return nil }
            let tokens = Set(v.stringValue.map(TextTokenizer.searchTerms) ?? []).sorted()
            if tokens.isEmpty { return .nothing }
            return .text(fields: [c.field], tokens: tokens, all: c.comparator == .containsAllTokens)
        default:
            return nil
        }
    }

    /// recordName comparisons the type's ordered record names answer (no index needed). EQUALS with a string is
    /// case-insensitive, so it needs the equality index (or a scan); with a reference it is exact.
    private func nameSource(_ c: Comparison) -> CandidateSource? {
        let name = c.value.stringValue ?? c.value.referenceValue?.recordName
        switch c.comparator {
        case .equals, .in, .listContains, .listContainsAny:
            if ready(c.field, .equality) {
                let keys = EqualityKey.keys(c.value)
                return keys.isEmpty ? .nothing : .equality(field: c.field, keys: keys, all: false)
            }
            if c.comparator == .equals, let r = c.value.referenceValue { return .names(lo: r.recordName, hi: r.recordName, prefix: nil) }
            return nil
        case .beginsWith:
            guard let p = c.value.stringValue else { return nil }
            return .names(lo: nil, hi: nil, prefix: p)
        case .lessThan, .lessThanOrEquals:
            guard let name else { return nil }
            return .names(lo: nil, hi: name, prefix: nil)
        case .greaterThan, .greaterThanOrEquals:
            guard let name else { return nil }
            return .names(lo: name, hi: nil, prefix: nil)
        default: return nil
        }
    }

    /// The full-text index's value keys a search term (``TextTokenizer/searchTerms(_:)``) reads: a token's own, or
    /// those of every token a prefix term (`"swi*"`) begins — one range, as the index orders its keys by token.
    static func textRange(_ term: String) -> IndexKeyspace.ValueRange {
        guard let prefix = TextTokenizer.prefix(of: term) else { return .exactly(Array(term.utf8)) }
        let lo = Array(prefix.utf8)
        return .between(lo, SortKey.successor(lo))
    }

    /// The cursor over index (`field`, `kind`)'s entries in `range`; nil if the index is not defined.
    private func scan(
        _ field: String, _ kind: IndexKind, _ range: IndexKeyspace.ValueRange, after: IndexEntry? = nil, inclusive: Bool = false,
        reverse: Bool = false
    ) -> IndexCursor? {
        guard let (d, subspace) = index(field, kind) else { return nil }
        return d.maintainer.scan(st.keys, subspace, range, after: after, inclusive: inclusive, reverse: reverse)
    }

    /// Index (`field`, `kind`) and its keys in this zone; nil if the index is not defined.
    private func index(_ field: String, _ kind: IndexKind) -> (IndexDefinition, IndexKeyspace.Subspace)? {
        let d = kind == .composite
            ? composite(field) : IndexDefinition(schema: q.schemaKey, recordType: q.query.recordType, field: field, kind: kind)
        guard let d, let subspace = st.indexes.subspace(d, zone: zone) else { return nil }
        return (d, subspace)
    }

    /// How many entries index (`field`, `kind`) holds in `range`, counting at most `cap`.
    /// Keeps the names it read when it reads the whole range, for ``names(_:_:_:)``.
    /// `keepingNames`: false for a count that is the query's answer (``exactCount(_:)``), which no plan reads names
    /// from; gathering them was most of such a count's time.
    private func count(
        _ field: String, _ kind: IndexKind, _ range: IndexKeyspace.ValueRange, cap: Int, keepingNames: Bool = true
    ) throws -> Int {
        let key = CountedRange(field: field, kind: kind, range: range)
        if let known = counted.ranges.withLock({ $0[key] }), known.names != nil || known.n >= cap { return min(known.n, cap) }
        if !keepingNames {
            // Each key is one (value key, record) pair: counted in the tree without decoding a name or making an entry.
            guard let (_, subspace) = index(field, kind) else { return 0 }
            let n = try st.keys.countKeys(subspace.keyRange(range), limit: cap)
            if n >= cap { counted.ranges.withLock { $0[key] = Count(n: n, names: nil) } }
            return n
        }
        guard var c = scan(field, kind, range) else { return 0 }
        var names: Set<String> = []
        var n = 0
        while n < cap, let e = try c.next() {
            names.insert(e.name)
            n += 1
        }
        counted.ranges.withLock { $0[key] = Count(n: n, names: n < cap ? names : nil) }
        return n
    }

    /// The names filed in index (`field`, `kind`) under value keys in `range`.
    private func names(_ field: String, _ kind: IndexKind, _ range: IndexKeyspace.ValueRange) throws -> Set<String> {
        if let read = counted.ranges.withLock({ $0[CountedRange(field: field, kind: kind, range: range)]?.names }) { return read }
        guard var c = scan(field, kind, range) else { return [] }
        var out: Set<String> = []
        while let e = try c.next() { out.insert(e.name) }
        return out
    }

    /// The type index's keys (`zone · 03 · type · name`) of names `lo ... hi` (inclusive bounds), or starting with
    /// `prefix`, and the length of the prefix before the name.
    private func typeIndexRange(_ lo: String?, _ hi: String?, _ prefix: String?) -> (LSMKeyRange, Int) {
        let p = DirectoryKey.typePrefix(zonePrefix, q.query.recordType)
        if let prefix {
            let lower = p + prefix.utf8
            return (LSMKeyRange(lower: lower, upper: DirectoryKey.successor(lower)), p.count)
        }
        let lower = lo.map { p + $0.utf8 } ?? p
        let upper = hi.map { p + $0.utf8 + [0] } ?? DirectoryKey.successor(p)
        return (LSMKeyRange(lower: lower, upper: upper), p.count)
    }

    /// A walk through the type's record names (the type index) in `lo ... hi` or with `prefix`, either way.
    private func typeNames(
        _ lo: String? = nil, _ hi: String? = nil, prefix: String? = nil, reverse: Bool = false
    ) -> (KeyDirectory.KeyCursor, Int) {
        let (range, n) = typeIndexRange(lo, hi, prefix)
        return (st.keys.indexCursor(range, reverse: reverse), n)
    }

    /// How many candidates `s` yields, counting index keys — at most `cap` a lookup (past it the count only has to
    /// show that the candidates are many: see ``plan(limit:after:)``).
    func estimate(_ s: CandidateSource, cap: Int = .max, keepingNames: Bool = true) throws -> Int {
        switch s {
        case .nothing: return 0
        case .equality(let f, let keys, let all):
            let counts = try keys.map { try count(f, .equality, .exactly($0.encoded), cap: cap, keepingNames: keepingNames) }
            return all ? counts.min() ?? 0 : counts.reduce(0, +)
        case .range(let f, let lo, let hi, _): return try count(f, .ordered, .between(lo, hi), cap: cap, keepingNames: keepingNames)
        case .composite(let r): return try count(r.index, .composite, r.valueRange, cap: cap, keepingNames: keepingNames)
        case .names(let lo, let hi, let prefix):
            var (c, _) = typeNames(lo, hi, prefix: prefix)
            var n = 0
            while n < cap, try c.next() != nil { n += 1 }
            return n
        case .text(let fields, let tokens, let all):
            let perToken = try tokens.map { t in try fields.reduce(0) { $0 + (try count($1, .text, Self.textRange(t), cap: cap)) } }
            return all ? perToken.min() ?? 0 : perToken.reduce(0, +)
        case .spatial(let f, let cells):
            return try cells.reduce(0) { $0 + (try count(f, .spatial, .exactly(IndexKeyspace.cellKey($1)), cap: cap)) }
        case .union(let parts): return try parts.reduce(0) { $0 + (try estimate($1, cap: cap)) }
        }
    }

    /// The candidates' names.
    func names(_ s: CandidateSource) throws -> Set<String> {
        switch s {
        case .nothing: return []
        case .equality(let f, let keys, let all):
            guard all else { return try keys.reduce(into: Set<String>()) { $0.formUnion(try names(f, .equality, .exactly($1.encoded))) } }
            var out: Set<String>?
            let counted = try keys.map { ($0, try count(f, .equality, .exactly($0.encoded), cap: .max)) }
            for (k, _) in counted.sorted(by: { $0.1 < $1.1 }) {
                let filed = try names(f, .equality, .exactly(k.encoded))
                out = out.map { $0.intersection(filed) } ?? filed
                if out!.isEmpty { break }
            }
            return out ?? []
        case .range(let f, let lo, let hi, _): return try names(f, .ordered, .between(lo, hi))
        case .composite(let r): return try names(r.index, .composite, r.valueRange)
        case .names(let lo, let hi, let prefix):
            var (c, n) = typeNames(lo, hi, prefix: prefix)
            var out: Set<String> = []
            while let e = try c.next() { out.insert(String(decoding: e.key[n...], as: UTF8.self)) }
            return out
        case .text(let fields, let tokens, let all):
            var out: Set<String>?
            for t in tokens {
                var withToken: Set<String> = []
                for f in fields { withToken.formUnion(try names(f, .text, Self.textRange(t))) }
                if all {
                    out = out.map { $0.intersection(withToken) } ?? withToken
                    if out!.isEmpty { break }
                } else {
                    out = (out ?? []).union(withToken)
                }
            }
            return out ?? []
        case .spatial(let f, let cells):
            return try cells.reduce(into: Set<String>()) { $0.formUnion(try names(f, .spatial, .exactly(IndexKeyspace.cellKey($1)))) }
        case .union(let parts): return try parts.reduce(into: Set<String>()) { $0.formUnion(try names($1)) }
        }
    }

    /// Whether ``nameStream(_:after:inclusive:)`` can yield `s`'s candidates in name order (all but an ordered
    /// index's range, whose names are in value order).
    func streams(_ s: CandidateSource) -> Bool {
        switch s {
        case .range, .composite: false
        case .union(let parts): parts.allSatisfy(streams)
        default: true
        }
    }

    /// `s`'s candidates in name order, from `start` on (`inclusive`) or after it, as postings are read; nil for
    /// a source ``streams(_:)`` rejects.
    func nameStream(_ s: CandidateSource, after start: String?, inclusive: Bool) throws -> (any NameStream)? {
        func posting(_ f: String, _ kind: IndexKind, _ key: [UInt8]) throws -> any NameStream {
            let from = start.map { IndexEntry(valueKey: key, name: $0) }
            guard let c = scan(f, kind, .exactly(key), after: from, inclusive: inclusive) else { return UnionStream([]) }
            return try PostingStream(c)
        }
        switch s {
        case .nothing: return UnionStream([])
        case .range, .composite: return nil
        case .equality(let f, let keys, let all):
            let postings = try keys.map { try posting(f, .equality, $0.encoded) }
            return all ? try IntersectionStream(postings) : UnionStream(postings)
        case .names(let lo, let hi, let prefix):
            var (range, n) = typeIndexRange(lo, hi, prefix)
            if let start {
                let at = DirectoryKey.typePrefix(zonePrefix, q.query.recordType) + start.utf8
                let bound = inclusive ? at : at + [0]
                if range.lower.map({ LSMKey.less($0, bound) }) ?? true { range.lower = bound }
            }
            return try TypeNameStream(st.keys.indexCursor(range), prefixCount: n)
        case .text(let fields, let tokens, let all):
            func termStream(_ f: String, _ t: String) throws -> any NameStream {
                guard TextTokenizer.prefix(of: t) != nil else { return try posting(f, .text, Array(t.utf8)) }
                // A prefix's postings are filed token by token: its names gathered and sorted.
                var found = try names(f, .text, Self.textRange(t)).sorted { NameOrder.compare($0, $1) < 0 }
                if let start { found.removeAll { NameOrder.compare($0, start) < (inclusive ? 0 : 1) } }
                return SortedNameStream(found)
            }
            let perToken = try tokens.map { t in UnionStream(try fields.map { try termStream($0, t) }) as any NameStream }
            return all ? try IntersectionStream(perToken) : UnionStream(perToken)
        case .spatial(let f, let cells):
            return UnionStream(try cells.map { try posting(f, .spatial, IndexKeyspace.cellKey($0)) })
        case .union(let parts):
            var streams: [any NameStream] = []
            for p in parts {
                guard let s = try nameStream(p, after: start, inclusive: inclusive) else { return nil }
                streams.append(s)
            }
            return UnionStream(streams)
        }
    }

    func describe(_ s: CandidateSource) -> (String, [String]) {
        switch s {
        case .nothing: return ("nothing (the predicate cannot match)", [])
        case .equality(let f, _, _): return ("equality index on '\(f)'", [f])
        case .range(let f, _, _, let prefix): return ("ordered index on '\(f)' [\(prefix ? "prefix" : "range")]", [f])
        case .names(_, _, let prefix): return ("record names of '\(q.query.recordType)' [\(prefix == nil ? "range" : "prefix")]", ["recordName"])
        case .text(let fields, _, _):
            return ("full-text index on \(fields.map { "'\($0)'" }.joined(separator: ", "))", fields)
        case .spatial(let f, let cells): return ("spatial index on '\(f)' (\(cells.count) cells)", [f])
        case .composite(let r):
            let fields = composite(r.index).map { Array($0.components.prefix(r.prefix + (r.ranged ? 1 : 0)).map(\.field)) } ?? []
            let what = "\(r.prefix) equalit\(r.prefix == 1 ? "y" : "ies")\(r.ranged ? " and a range" : "")"
            return ("composite index '\(r.index)' [\(what)]", fields)
        case .union(let parts):
            let d = parts.map(describe)
            return ("union of " + d.map { "(\($0.0))" }.joined(separator: ", "), Array(Set(d.flatMap(\.1))).sorted())
        }
    }

    // MARK: - Plans

    /// Decides how to answer in this zone. `limit` is how many matches are wanted (nil: all, for a count); `after`
    /// the continuation point.
    ///
    /// Candidates are counted up to a cap that depends on the page size and the type's records: past
    /// `sqrt(10 · wanted · records)` a walk in index order is cheaper than any sort of the candidates (see the costs
    /// below), so a larger count could not change the plan — and counting every key of an unselective range on
    /// each page would cost what the walk saves. A count (`limit` nil) reads every candidate and counts exactly;
    /// ``QueryPlan/Zone/candidates`` shows the capped count.
    ///
    /// For a plan that stops at the page, the candidates are counted (up to the page) only when `explaining`; a
    /// query that runs it reports the candidates its walk read instead (``Database``'s `run`).
    func plan(limit: Int?, after: QueryPosition?, explaining: Bool = false) throws -> (ZoneExecution, QueryPlan.Zone) {
        let all = recordsOfType
        let cap = limit.map { Self.countCap(wanted: $0 + 1, records: all) } ?? .max
        let src = try source(q.query.predicate, cap: cap)
        var info = QueryPlan.Zone(
            zoneID: zone.zoneID, access: "scan of '\(q.query.recordType)'", indexedFields: [], candidates: all,
            recordsOfType: all, order: "", sortedInMemory: false, examined: nil, matched: nil)
        if let src {
            (info.access, info.indexedFields) = describe(src)
            if case .nothing = src {
                info.candidates = 0
                info.order = "none needed"
                return (.empty, info)
            }
        }
        let descriptors = q.order.descriptors
        guard let limit else {
            if let src, let (n, counted) = try exactCount(src) {
                (info.access, info.indexedFields) = describe(counted)
                info.candidates = n
                info.order = "counted in the index, no record read"
                return (.counted(n), info)
            }
            if let src { info.candidates = try estimate(src, cap: cap) }
            info.order = "none needed (count)"
            return (.readAll(try withEntries(candidates(src))), info)
        }
        // (A ranked query is given its scorer, or its statistics but the frequencies, before it is planned; one that
        // was not scores with this zone's statistics.)
        if let terms = q.rankTerms {
            let given = try q.scorer ?? (q.pendingStats == nil ? BM25(terms: terms, stats: rankStatistics(terms).stats) : nil)
            if let ranked = try rankedCandidates(terms, given, src, after: after) {
                q.rankedBy?.scorer.withLock { $0 = ranked.scorer }
                info.candidates = ranked.candidates.count
                info.order = "ranked by BM25 from \(ranked.scored) posting\(ranked.scored == 1 ? "" : "s") (no record read), sorted in memory"
                info.sortedInMemory = true
                return (.keyed(ranked.candidates, view: st, sorted: true), info)
            }
            if given == nil {
                let made = BM25(terms: terms, stats: try rankStatistics(terms).stats)
                q.rankedBy?.scorer.withLock { $0 = made }
            }
            if let src { info.candidates = try estimate(src, cap: cap) }
            info.order = "ranked by BM25 from the records read (a full-text index is not ready)"
            info.sortedInMemory = true
            return (.readAll(try withEntries(candidates(src))), info)
        }
        if let n = nearestWalk(src) {
            info.order = "spatial index cells in distance order (\(n.cells.count) cells)"
            if let src { info.candidates = explaining ? try estimate(src, cap: cap) : 0 }
            return (.nearest(n), info)
        }
        var walk: WalkSource?
        if descriptors.isEmpty {
            walk = WalkSource(field: nil, ascending: true, keyed: false)
        } else if descriptors.count == 1, let d = descriptors.first, d.relativeLocation == nil {
            if d.field == SystemField.recordName.rawValue {
                walk = WalkSource(field: nil, ascending: d.ascending, keyed: true)
            } else if ready(d.field, .ordered) {
                walk = WalkSource(field: d.field, ascending: d.ascending, keyed: true)
            }
        }
        let wanted = limit + 1
        // Walks whose index already yields the candidates in the query's order: a page reads its matches and
        // stops, whatever the candidates number; they are counted only up to the page (for `explain`).
        if case .composite(let r)? = src, let w = compositeWalk(r) {
            info.order = "composite index '\(r.index)' within the range\(w.ascending ? "" : ", backwards")"
            info.candidates = explaining ? try estimate(.composite(r), cap: wanted) : 0
            return (.walk(w), info)
        }
        if var w = walk, let src {
            if let f = w.field, case .range(f, let lo, let hi, _) = src {
                w.bounds = .between(lo, hi)
                info.order = "ordered index on '\(f)' within the range\(w.ascending ? "" : ", backwards")"
            } else if w.field == nil, w.ascending, streams(src) {
                w.stream = src
                info.order = "index postings merged in record-name order"
            }
            if w.readsOnlyCandidates {
                info.candidates = explaining ? try estimate(src, cap: wanted) : 0
                return (.walk(w), info)
            }
        }
        if let src { info.candidates = try estimate(src, cap: cap) }
        let keysKept = descriptors.allSatisfy { valuesKept($0.field) }
        // Costs in records read: an index key stepped over or sorted in memory counts as a tenth of a read, a
        // record's kept values looked up (to sort by them) as half of one.
        let est = info.candidates
        // Every candidate's name is known when the count did not reach its cap: a walk of a sort index then only
        // looks up and reads the candidates it meets.
        let complete = src != nil && est < cap
        let stepped = min(all, wanted * all / max(est, 1))
        let walkCost = src == nil ? min(all, wanted) : complete && walk?.field != nil ? stepped / 10 + min(est, wanted) : stepped
        let lookupCost = descriptors.allSatisfy { $0.field == SystemField.recordName.rawValue } ? est / 10 : est / 2
        let keyedCost = keysKept ? lookupCost + min(est, wanted) : Int.max
        let readCost = est + est / 10
        if var walk, walkCost <= min(keyedCost, readCost) {
            if let f = walk.field {
                info.order = "ordered index on '\(f)'\(walk.ascending ? "" : ", backwards")"
                if !info.indexedFields.contains(f) { info.indexedFields.append(f) }
                if complete, let src {
                    walk.members = try names(src)
                    info.order += ", skipping non-candidates"
                }
            } else {
                info.order = "record names in order\(walk.ascending ? "" : ", backwards")"
            }
            return (.walk(walk), info)
        }
        let names = try candidates(src)
        if keysKept, let keyed = try keyedCandidates(names, after: after) {
            info.order = "sorted \(keyed.count) index key\(keyed.count == 1 ? "" : "s") in memory"
            info.sortedInMemory = true
            return (.keyed(keyed, view: st), info)
        }
        info.order = "sorted matching records in memory (\(names.count) read)"
        info.sortedInMemory = true
        return (.readAll(try withEntries(names)), info)
    }

    /// Candidate names (every live record of the type for a scan), in name order.
    ///
    /// The type index and the secondary indexes name live records only (a deletion or a change of type removes the
    /// record's keys in the same commit, in the same tree), so nothing is looked up here: whoever reads a candidate
    /// looks up its entry then, and skips one that has none.
    private func candidates(_ src: CandidateSource?) throws -> [String] {
        guard let src else {
            var (c, n) = typeNames()
            var out: [String] = []
            while let e = try c.next() { out.append(String(decoding: e.key[n...], as: UTF8.self)) }
            return out.sorted { NameOrder.compare($0, $1) < 0 }
        }
        return try names(src).sorted { NameOrder.compare($0, $1) < 0 }
    }

    /// `names` with their current entries in the plan's view; names without a live one are left out.
    private func withEntries(_ names: [String]) throws -> [(name: String, entry: RecordEntry)] {
        try names.compactMap { name in try st.entry(zone, name).flatMap { $0.deleted ? nil : (name, $0) } }
    }

    /// The count of candidates past which a walk in index order costs less than sorting them (``plan(limit:after:)``).
    static func countCap(wanted: Int, records: Int) -> Int {
        Int((10 * Double(wanted) * Double(max(records, 1))).squareRoot()) + wanted + 1
    }

    /// Candidates with positions built from kept index values, past `after`; nil if a value is missing (then the
    /// records must be read).
    private func keyedCandidates(_ names: [String], after: QueryPosition?) throws -> [(name: String, position: QueryPosition)]? {
        var out: [(name: String, position: QueryPosition)] = []
        out.reserveCapacity(names.count)
        let descriptors = q.order.descriptors
        for name in names {
            var keys: [[UInt8]] = []
            keys.reserveCapacity(descriptors.count)
            for (i, d) in descriptors.enumerated() {
                if d.field == SystemField.recordName.rawValue {
                    keys.append(q.order.key(i, .string(name)))
                } else {
                    let values = try IndexState.storedValues(st.keys, zonePrefix, q.query.recordType, name)
                    guard let kept = values?[d.field] else { return nil }
                    keys.append(q.order.key(i, kept))
                }
            }
            let p = QueryPosition(keys: keys, recordName: name, zoneName: zone.zoneName)
            if let after, q.order.compare(p, after) <= 0 { continue }
            out.append((name, p))
        }
        return out
    }

    // MARK: - Ranking

    /// This zone's part of a ranked query's statistics (``RankStats``): the type's records, and for each term whose
    /// full-text index is ready its field's totals and (`frequencies`) its postings counted. `unindexed`: the terms
    /// whose index is not ready, for the caller to count in the records (``typeRecords()``).
    func rankStatistics(_ terms: [RankTerm], frequencies: Bool = true) throws -> (stats: RankStats, unindexed: [RankTerm]) {
        var s = RankStats(records: recordsOfType)
        var unindexed: [RankTerm] = []
        for t in terms {
            let d = IndexDefinition(schema: q.schemaKey, recordType: q.query.recordType, field: t.field, kind: .text)
            guard ready(d), let totals = st.indexes.textTotals(d, zone: zone) else {
                unindexed.append(t)
                continue
            }
            s.fields[t.field] = totals
            guard frequencies else { continue }
            // A token files each record once; a prefix may file one under several of the tokens it begins.
            s.frequencies[t] = TextTokenizer.prefix(of: t.token) == nil
                ? try count(t.field, .text, .exactly(Array(t.token.utf8)), cap: .max, keepingNames: false)
                : try names(t.field, .text, Self.textRange(t.token)).count
        }
        return (s, unindexed)
    }

    /// Every live record of the type, with its entry, in name order.
    func typeRecords() throws -> [(name: String, entry: RecordEntry)] { try withEntries(candidates(nil)) }

    /// A ranked query's candidates past `after`, each placed by its score, read off the terms' postings (no record
    /// read); nil when a term's index is not ready. The candidates are the postings' names (any token, or every one
    /// for CONTAINS_ALL_TOKENS) when `src` is the terms' own full-text lookup, `src`'s names otherwise (a record
    /// without the terms scores 0). `scored`: the postings read.
    ///
    /// The terms' postings, each in name order, are merged: a name's score adds its terms' weights in term order (as
    /// ``BM25/score(_:)`` does, so the two agree to the bit), with no table of names. Without a `given` scorer the
    /// terms' frequencies are counted in the same walk (``PreparedQuery/pendingStats``), the postings kept until they
    /// are known; the scorer used is returned.
    private func rankedCandidates(_ terms: [RankTerm], _ given: BM25?, _ src: CandidateSource?, after: QueryPosition?) throws -> (
        candidates: [(name: String, position: QueryPosition)], scored: Int, scorer: BM25
    )? {
        guard terms.allSatisfy({ ready($0.field, .text) }) else { return nil }
        // The lookup's tokens by bit, when the postings read are its candidates.
        var bits: [String: UInt64]?
        var all = false
        if case .text(let fields, let tokens, let a)? = src, tokens.count <= 64,
            fields.allSatisfy({ f in tokens.allSatisfy { terms.contains(RankTerm(field: f, token: $0)) } })
        {
            bits = Dictionary(uniqueKeysWithValues: tokens.enumerated().map { ($1, UInt64(1) << UInt64($0)) })
            all = a
        }
        let full = bits?.values.reduce(0, |) ?? 0
        // A token's postings come from its cursor, a prefix's from the list `gathered` (read before the merge).
        var cursors: [IndexCursor?] = []
        var gathered: [(postings: [(name: [UInt8], value: [UInt8])], at: Int)?] = []
        func nextPosting(_ i: Int) throws -> (name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)? {
            guard let g = gathered[i] else { return try cursors[i]?.nextPosting() }
            guard g.at < g.postings.count else { return nil }
            gathered[i]!.at += 1
            return (g.postings[g.at].name[...], g.postings[g.at].value[...])
        }
        // Each term's current posting (its name, UTF-8, and value), where its cursor reads them; `live`: the terms
        // not yet done.
        var names: [ArraySlice<UInt8>] = []
        var values: [ArraySlice<UInt8>] = []
        var live: [Int] = []
        var termBits: [UInt64] = []
        for (i, t) in terms.enumerated() {
            if TextTokenizer.prefix(of: t.token) != nil {
                guard let g = try prefixPostings(t) else { return nil }
                cursors.append(nil)
                gathered.append((g, 0))
            } else {
                guard let c = scan(t.field, .text, .exactly(Array(t.token.utf8))) else { return nil }
                cursors.append(c)
                gathered.append(nil)
            }
            let head = try nextPosting(i)
            names.append(head?.name ?? [])
            values.append(head?.value ?? [])
            if head != nil { live.append(i) }
            termBits.append(bits?[t.token] ?? 0)
        }
        var scored = 0
        var ranked: [(score: Double, name: String)] = []
        var here: [Int] = []
        // Without a scorer: each term's postings counted, and each kept name's postings (in term order) held.
        var frequencies = [Int](repeating: 0, count: terms.count)
        var held: [(term: Int, posting: TextPosting)] = []
        var heldFrom: [Int] = []
        while !live.isEmpty {
            // The terms at the least name, in term order (`live` stays sorted).
            here.removeAll(keepingCapacity: true)
            for i in live {
                let c = here.isEmpty ? -1 : LSMKey.compare(names[i], names[here[0]])
                if c < 0 {
                    here.removeAll(keepingCapacity: true)
                    here.append(i)
                } else if c == 0 {
                    here.append(i)
                }
            }
            let at = here[0]
            var has: UInt64 = 0
            for i in here { has |= termBits[i] }
            scored += here.count
            let kept = bits == nil || (all ? has == full : has != 0)
            var score = 0.0
            if given == nil { heldFrom.append(held.count) }
            for i in here {
                if given == nil { frequencies[i] += 1 }
                guard kept else { continue }
                let p = try TextPosting.decode(values[i]) ?? unvaluedPosting(terms[i], String(decoding: names[at], as: UTF8.self))
                if let given { score += given.weight(i, p) } else { held.append((i, p)) }
            }
            if kept {
                ranked.append((score, String(decoding: names[at], as: UTF8.self)))
            } else if given == nil {
                heldFrom.removeLast()
            }
            for i in here {
                // Let go of the term's posting first: its cursor then rewrites the key in place, not a copy.
                (names[i], values[i]) = ([], [])
                if let next = try nextPosting(i) {
                    names[i] = next.name
                    values[i] = next.value
                } else {
                    live.removeAll { $0 == i }
                }
            }
        }
        let scorer: BM25
        if let given {
            scorer = given
        } else {
            var stats = q.pendingStats ?? RankStats()
            for (i, t) in terms.enumerated() { stats.frequencies[t] = frequencies[i] }
            scorer = BM25(terms: terms, stats: stats)
            heldFrom.append(held.count)
            for k in ranked.indices {
                var score = 0.0
                for (i, p) in held[heldFrom[k]..<heldFrom[k + 1]] { score += scorer.weight(i, p) }
                ranked[k].score = score
            }
        }
        if bits == nil {
            // Another lookup's candidates: each with its score (0 without the terms).
            let byName = Dictionary(ranked.map { ($0.name, $0.score) }, uniquingKeysWith: { a, _ in a })
            ranked = try candidates(src).map { (byName[$0] ?? 0, $0) }
        }
        // Best first, ties by name: the query's order within a zone (``SortOrder/ranked``).
        ranked.sort { $0.score != $1.score ? $0.score > $1.score : NameOrder.compare($0.name, $1.name) < 0 }
        var out: [(name: String, position: QueryPosition)] = []
        out.reserveCapacity(ranked.count)
        for (score, name) in ranked {
            let p = QueryPosition(keys: [BM25.key(score)], recordName: name, zoneName: zone.zoneName)
            if let after, q.order.compare(p, after) <= 0 { continue }
            out.append((name, p))
        }
        return (out, scored, scorer)
    }

    /// A prefix term's postings in name order, each name's summed over the tokens the prefix begins (the index files
    /// them token by token); an empty value where a key has none (written before postings had values). Nil if the
    /// index is not defined.
    private func prefixPostings(_ t: RankTerm) throws -> [(name: [UInt8], value: [UInt8])]? {
        guard var c = scan(t.field, .text, Self.textRange(t.token)) else { return nil }
        var byName: [String: TextPosting?] = [:]
        while let (e, value) = try c.nextWithValue() {
            let p = try TextPosting.decode(value)
            guard let known = byName[e.name] else {
                byName[e.name] = p
                continue
            }
            byName[e.name] = known.flatMap { k in p.map { TextPosting(frequency: k.frequency + $0.frequency, length: k.length) } }
        }
        return byName.map { (Array($0.key.utf8), $0.value?.encoded ?? []) }.sorted { LSMKey.less($0.name, $1.name) }
    }

    /// The posting of a key written without one (before flushed-state version 8, not yet rewritten), from the
    /// record's stored value.
    private func unvaluedPosting(_ t: RankTerm, _ name: String) throws -> TextPosting {
        let value = try IndexState.storedValues(st.keys, zonePrefix, q.query.recordType, name)?[t.field] ?? nil
        return TextDocument(value).posting(t.token) ?? TextPosting(frequency: 1, length: 1)
    }

    /// The cells-in-distance-order plan, when `src` is a NEAR's spatial index and the query is sorted by distance
    /// alone, ascending, on the same field, whose locations the index keeps.
    private func nearestWalk(_ src: CandidateSource?) -> NearestWalk? {
        guard case .spatial(let f, _)? = src, q.order.descriptors.count == 1, let d = q.order.descriptors.first,
            d.field == f, d.ascending, let center = d.relativeLocation, valuesKept(f),
            let circle = Self.nearCircle(q.query.predicate, field: f)
        else { return nil }
        let cells = GeoCells.covering(circle.center, km: circle.km, maxCells: GeoCells.maxCellsInDistanceOrder)
        return NearestWalk(
            field: f, center: center,
            cells: cells.map { ($0, GeoCells.lowerBoundKm(from: center, to: $0)) }.sorted { $0.lowerKm < $1.lowerKm })
    }

    /// A NEAR on `field` that every match satisfies (the predicate itself, or one of its AND's terms).
    static func nearCircle(_ p: Predicate, field: String) -> (center: Location, km: Double)? {
        switch p {
        case .comparison(let c) where c.comparator == .near && c.field == field:
            guard case .location(let l) = c.value, let km = c.distance else { return nil }
            return (l, km)
        case .and(let parts): return parts.lazy.compactMap { nearCircle($0, field: field) }.first
        default: return nil
        }
    }

    /// The records filed under `n`'s cells `range`, past `after`, placed by their kept locations (no entry looked
    /// up: a record's kept values exist while it lives), and the view they were read in. Those whose location is
    /// not kept (it should be: the plan needs the values kept) come as `unplaced`, with their live entries, for the
    /// caller to read and place.
    func nearestBatch(_ n: NearestWalk, _ range: Range<Int>, after: QueryPosition?) throws -> (
        placed: [(name: String, position: QueryPosition)], unplaced: [(name: String, entry: RecordEntry)], view: PartitionReadView
    ) {
        var placed: [(name: String, position: QueryPosition)] = []
        var unplaced: [(name: String, entry: RecordEntry)] = []
        guard let (_, subspace) = index(n.field, .spatial), !range.isEmpty else { return ([], [], st) }
        // The cells' keys in key order, read with one cursor that seeks to each cell's (`prefix · esc(cell) · 00 00`,
        // names follow): one scan of the tree for the batch, not one a cell.
        let prefixes = n.cells[range].map(\.cell).sorted().map { cell in
            var p = subspace.prefix
            IndexKeyspace.escape(IndexKeyspace.cellKey(cell), into: &p)
            return p
        }
        var cursor = st.keys.indexCursor(LSMKeyRange(lower: prefixes[0], upper: DirectoryKey.successor(prefixes[prefixes.count - 1])))
        // The key the last cell's walk stopped at (the first past it), which may be a later cell's first.
        var held: (key: [UInt8], value: ArraySlice<UInt8>)?
        for prefix in prefixes {
            var key: (key: [UInt8], value: ArraySlice<UInt8>)?
            if let h = held, !LSMKey.less(h.key, prefix) {
                key = h
            } else {
                try cursor.seek(prefix)
                key = try cursor.nextKeyValue()
            }
            while let (k, value) = key, k.starts(with: prefix) {
                let name = String(decoding: k[prefix.count...], as: UTF8.self)
                key = try cursor.nextKeyValue()
                // The key's own location (``SpatialMaintainer/entryValue(_:)``), else the record's stored value.
                let located = SpatialMaintainer.location(entryValue: value).map { FieldValue.location($0) }
                guard let kept = try located ?? IndexState.storedValues(st.keys, zonePrefix, q.query.recordType, name)?[n.field] else {
                    if let entry = try st.cachedEntry(zone, name), !entry.deleted { unplaced.append((name, entry)) }
                    continue
                }
                let p = QueryPosition(keys: [q.order.key(0, kept)], recordName: name, zoneName: zone.zoneName)
                if let after, q.order.compare(p, after) <= 0 { continue }
                placed.append((name, p))
            }
            guard key != nil else { break }
            held = key
        }
        return (placed, unplaced, st)
    }

    /// The next `max` records of a walk after `from` (the last entry visited) — or, at the start, after the
    /// continuation point `after`. Returns them with the last entry visited, nil when the walk is done.
    func walkBatch(_ w: WalkSource, from: IndexEntry?, after: QueryPosition?, max: Int) throws -> (
        items: [(name: String, entry: RecordEntry, position: QueryPosition)], last: IndexEntry?
    ) {
        var items: [(name: String, entry: RecordEntry, position: QueryPosition)] = []
        var last: IndexEntry?
        // The entries in the walk's direction: after the last one visited, or from the continuation point on (its
        // entry included: in a zone-wide query, the record of that name in a later zone comes after it).
        let inclusive = from == nil
        let next: () throws -> IndexEntry?
        if let c = w.composite {
            let start = from ?? after.map { IndexEntry(valueKey: c.valueKey(sortKey: $0.keys[0], name: $0.recordName), name: $0.recordName) }
            let range = w.bounds ?? .all
            guard var cursor = scan(c.definition.field, .composite, range, after: start, inclusive: inclusive, reverse: !w.ascending) else {
                return ([], nil)
            }
            next = { try cursor.next() }
        } else if let f = w.field {
            let start = from ?? after.map { IndexEntry(valueKey: $0.keys[0], name: $0.recordName) }
            guard var c = scan(f, .ordered, w.bounds ?? .all, after: start, inclusive: inclusive, reverse: !w.ascending) else {
                return ([], nil)
            }
            next = { try c.next() }
        } else if let src = w.stream {
            guard let names = try nameStream(src, after: from?.name ?? after?.recordName, inclusive: inclusive) else { return ([], nil) }
            next = {
                guard let name = names.current else { return nil }
                try names.advance()
                return IndexEntry(valueKey: w.keyed ? SortKey.encode(.string(name)) : [], name: name)
            }
        } else {
            var range = typeIndexRange(nil, nil, nil)
            if let start = from?.name ?? after?.recordName {
                let at = DirectoryKey.typePrefix(zonePrefix, q.query.recordType) + start.utf8
                if w.ascending { range.0.lower = inclusive ? at : at + [0] } else { range.0.upper = inclusive ? at + [0] : at }
            }
            var c = st.keys.indexCursor(range.0, reverse: !w.ascending)
            let n = range.1
            next = {
                guard let e = try c.next() else { return nil }
                let name = String(decoding: e.key[n...], as: UTF8.self)
                return IndexEntry(valueKey: w.keyed ? SortKey.encode(.string(name)) : [], name: name)
            }
        }
        while items.count < max, let e = try next() {
            last = e
            if let members = w.members, !members.contains(e.name) { continue }
            guard let entry = try st.cachedEntry(zone, e.name), !entry.deleted else { continue }
            var key = e.valueKey
            if let c = w.composite {
                guard let k = c.sortKey(e.valueKey) else {
                    throw CloudletError.corruption("composite index key \(LSMKey.printable(e.valueKey)) is malformed")
                }
                key = k
            }
            let p = QueryPosition(keys: w.keyed ? [key] : [], recordName: e.name, zoneName: zone.zoneName)
            if let after, q.order.compare(p, after) <= 0 { continue }
            items.append((e.name, entry, p))
        }
        return (items, try next() == nil ? nil : last)
    }
}

extension QueryPlanner {
    /// Fields the query needs an index on whose index is not ready in this partition (still building, or not
    /// defined here yet).
    func unready() -> [String] {
        q.needed.filter { field, kinds in !kinds.allSatisfy { ready(field, $0) } }.keys.sorted()
    }
}
