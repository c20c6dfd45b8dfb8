import CloudletCore

/// A range of a composite index (``CompositeIndex``): records equal on the index's first `prefix` fields, and —
/// when `ranged` — within a range of the next one.
struct CompositeRange: Sendable, Hashable {
    /// The index's name.
    var index: String
    /// The value keys of the records equal on the prefix: the prefix's parts of their keys.
    var prefixKey: [UInt8]
    /// The value keys read: `lo ..< hi` (hi nil: to the end of the index).
    var lo: [UInt8]
    var hi: [UInt8]?
    /// How many of the index's fields the equalities fix.
    var prefix: Int
    /// Whether a range on field `prefix` narrows it further.
    var ranged: Bool
    /// Whether the range holds exactly the records the predicate matches (every comparison of an AND answered by
    /// it, each by exact keys): a count can be read off it.
    var exact: Bool

    var valueRange: IndexKeyspace.ValueRange { .between(lo, hi) }
}

/// Comparisons an index answers by key ranges, and their keys.
enum ExactKey {
    /// The one ``SortKey`` every value of a field of type `t` that compares equal to `v` has (``FieldOrder``); nil
    /// when there is none: strings under EQUALS (case-insensitive) when `equality`, a value that does not convert
    /// exactly to the field's type (5.5 for an INT64, an integer beyond 2^53 for a DOUBLE, NaN), lists.
    static func key(_ v: FieldValue, fieldType t: FieldType, equality: Bool) -> [UInt8]? {
        guard !t.isList else { return nil }
        let exactInteger = 9_007_199_254_740_992.0  // 2^53: integers up to it are exact doubles
        switch (t.scalar, v) {
        case (.int64, .int64), (.timestamp, .timestamp), (.bytes, .bytes), (.reference, .reference):
            return SortKey.encode(v)
        case (.int64, .double(let d)):
            guard d.magnitude < exactInteger, d == d.rounded() else { return nil }
            return SortKey.encode(.int64(Int64(d)))
        case (.double, .double(let d)):
            return d.isNaN ? nil : SortKey.encode(v)
        case (.double, .int64(let x)):
            guard Double(x.magnitude) < exactInteger else { return nil }
            return SortKey.encode(.double(Double(x)))
        case (.reference, .string(let s)):
            // References compare with strings by record name, exactly (EQUALS too).
            return SortKey.encode(.string(s))
        case (.string, .string), (.string, .reference):
            return equality ? nil : SortKey.encode(v)
        default:
            return nil
        }
    }

    /// The range of one field's parts of keys that the comparisons `cs` (ANDed, each with its value's exact key)
    /// select, for parts made by `part` (a composite index's escaped and perhaps inverted part, or an ordered index's
    /// bare ``SortKey``): `lo ..< hi`, hi nil for no bound. Records lacking the field (the missing key) are never in
    /// it. Nil when `cs` has a comparator other than =, <, <=, >, >=.
    static func range(
        _ cs: [(Comparator, [UInt8])], descending: Bool, escaped: Bool
    ) -> (lo: [UInt8], hi: [UInt8]?)? {
        func part(_ k: [UInt8]) -> [UInt8] {
            guard escaped else { return k }
            var out: [UInt8] = []
            CompositeMaintainer.append(k, descending: descending, to: &out)
            return out
        }
        // The smallest part after every part starting with `p`: an escaped part is prefix-free (and has a byte below
        // FF: its rank, inverted or not), a bare key of a string may be extended by a longer string (`p · 00` is
        // then the next key).
        func past(_ p: [UInt8]) -> [UInt8] { escaped ? SortKey.successor(p)! : p + [0] }
        var lo: [UInt8] = []
        var hi: [UInt8]?
        func raise(_ l: [UInt8]) { if SortKey.less(lo, l) { lo = l } }
        func lower(_ h: [UInt8]?) {
            guard let h else { return }
            if hi.map({ SortKey.less(h, $0) }) ?? true { hi = h }
        }
        for (op, k) in cs {
            let p = part(k)
            // Every present value of a typed field has the same rank byte; the missing key's part sorts before
            // (ascending) or after (descending) them.
            let rank = part([k[0]])
            let firstOfRank = Array(rank.prefix(1))
            let pastRank = SortKey.successor(firstOfRank)
            switch (op, descending) {
            case (.equals, _): raise(p); lower(past(p))
            case (.greaterThanOrEquals, false): raise(p)
            case (.greaterThan, false): raise(past(p))
            case (.lessThan, false): raise(firstOfRank); lower(p)
            case (.lessThanOrEquals, false): raise(firstOfRank); lower(past(p))
            case (.greaterThanOrEquals, true): lower(past(p))
            case (.greaterThan, true): lower(p)
            case (.lessThan, true): raise(past(p)); lower(pastRank)
            case (.lessThanOrEquals, true): raise(p); lower(pastRank)
            default: return nil
            }
        }
        return (lo, hi)
    }
}

extension QueryPlanner {
    /// The ready composite indexes of the query's type.
    var composites: [IndexDefinition] {
        st.indexes.fields(zone, q.query.recordType).map(\.definition).filter { $0.kind == .composite && ready($0) }
    }

    /// The composite index named `name`, if it is ready.
    func composite(_ name: String) -> IndexDefinition? { composites.first { $0.field == name } }

    /// The best composite range for the comparisons `conjuncts` (an AND's, or one): for each ready composite index,
    /// the equalities on its leading fields and the ranges on the next one; the range with the most equalities (then
    /// a range) wins. Nil when no index has an equality on its first field.
    func compositeSource(_ conjuncts: [Predicate]) -> CompositeRange? {
        var comparisons: [Comparison] = []
        for p in conjuncts { if case .comparison(let c) = p { comparisons.append(c) } }
        let simple = comparisons.count == conjuncts.count
        var best: CompositeRange?
        for d in composites.sorted(by: { $0.field < $1.field }) {
            // The comparisons the range answers exactly: a lone equality on each field of the prefix, the ranges on
            // the next field.
            var answered = 0
            var prefixKey: [UInt8] = []
            var prefix = 0
            for (i, c) in d.components.enumerated() {
                let eqs = comparisons.filter { $0.field == c.field && $0.comparator == .equals }
                guard let t = q.fieldType(c.field) else { break }
                // A STRING before the last field is filed case-folded, as the equality index files it: an equality
                // finds the records EQUALS matches by case (a reference's name: a superset), never counted off it.
                let folded = t == FieldType(.string) && i < d.components.count - 1
                let keys = eqs.lazy.compactMap { e -> [UInt8]? in
                    if folded { return (e.value.stringValue ?? e.value.referenceValue?.recordName).map(CompositeMaintainer.foldedKey) }
                    return ExactKey.key(e.value, fieldType: t, equality: true)
                }
                guard let k = keys.first else { break }
                CompositeMaintainer.append(k, descending: c.descending, to: &prefixKey)
                prefix += 1
                if eqs.count == 1 && !folded { answered += 1 }
            }
            guard prefix > 0 else { continue }
            var r = CompositeRange(
                index: d.field, prefixKey: prefixKey, lo: prefixKey, hi: SortKey.successor(prefixKey), prefix: prefix,
                ranged: false, exact: false)
            // Ranges on the next field, unless it is a folded STRING (not in its order).
            if prefix < d.components.count, let t = q.fieldType(d.components[prefix].field),
                t != FieldType(.string) || prefix == d.components.count - 1
            {
                let next = d.components[prefix]
                var keyed: [(Comparator, [UInt8])] = []
                for c in comparisons where c.field == next.field {
                    guard [.lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals].contains(c.comparator),
                        let k = ExactKey.key(c.value, fieldType: t, equality: false)
                    else { continue }
                    keyed.append((c.comparator, k))
                }
                if !keyed.isEmpty, let (lo, hi) = ExactKey.range(keyed, descending: next.descending, escaped: true) {
                    r.lo = prefixKey + lo
                    r.hi = hi.map { prefixKey + $0 } ?? SortKey.successor(prefixKey)
                    r.ranged = true
                    answered += keyed.count
                }
            }
            r.exact = simple && answered == comparisons.count
            if best.map({ ($0.prefix, $0.ranged ? 1 : 0) < (r.prefix, r.ranged ? 1 : 0) }) ?? true { best = r }
        }
        return best
    }

    /// The walk of a composite range in the order of a sort on the field after its equalities — when that field is
    /// the index's last (with fields after it, records equal on it would come in their order, not by name).
    func compositeWalk(_ r: CompositeRange) -> WalkSource? {
        let descriptors = q.order.descriptors
        guard descriptors.count == 1, let s = descriptors.first, s.relativeLocation == nil, let d = composite(r.index),
            r.prefix == d.components.count - 1, d.components[r.prefix].field == s.field
        else { return nil }
        var w = WalkSource(field: nil, ascending: s.ascending != d.components[r.prefix].descending, keyed: true)
        w.bounds = r.valueRange
        w.composite = CompositeWalk(definition: d, component: r.prefix, prefixKey: r.prefixKey)
        return w
    }

    /// How many records match when the predicate is answered exactly by an index (a composite range whose
    /// equalities and range are the whole predicate, an equality or a range on one field's ordered index with exact
    /// keys), counted from the index without reading a record, and the index range counted; nil otherwise. `src` is
    /// the plan's source: a composite range that answers the whole predicate is counted even when it lost to `src`.
    func exactCount(_ src: CandidateSource) throws -> (Int, CandidateSource)? {
        let p = q.query.predicate
        let conjuncts: [Predicate] = if case .and(let ps) = p { ps } else { [p] }
        // A composite range made from the whole predicate, when it answers all of it (the plan's source may be
        // another index, or a range made for one comparison of an AND: exact for that comparison alone).
        if let r = compositeSource(conjuncts), r.exact { return (try estimate(.composite(r), keepingNames: false), .composite(r)) }
        switch src {
        case .equality(let f, let keys, false) where keys.count == 1:
            // One key of a field whose equality keys are exact: numbers, timestamps, bytes (not strings or
            // references, whose keys are case-folded).
            guard case .comparison(let c) = p, c.comparator == .equals, c.field == f, let t = q.fieldType(f),
                [.int64, .double, .timestamp, .bytes].contains(t.scalar),
                ExactKey.key(c.value, fieldType: t, equality: true) != nil
            else { return nil }
            return (try estimate(src, keepingNames: false), src)
        case .range(let f, _, _, false):
            // Comparisons on one field, all of them answered by the ordered index with exact keys.
            guard let t = q.fieldType(f) else { return nil }
            var keyed: [(Comparator, [UInt8])] = []
            for x in conjuncts {
                guard case .comparison(let c) = x, c.field == f, c.comparator != .equals || t.scalar != .string,
                    let k = ExactKey.key(c.value, fieldType: t, equality: c.comparator == .equals)
                else { return nil }
                keyed.append((c.comparator, k))
            }
            guard let (lo, hi) = ExactKey.range(keyed, descending: false, escaped: false) else { return nil }
            let exact = CandidateSource.range(field: f, lo: lo, hi: hi, prefix: false)
            return (try estimate(exact, keepingNames: false), exact)
        default:
            return nil
        }
    }
}

/// A walk of a composite index's range (``QueryPlanner/compositeWalk(_:)``).
struct CompositeWalk: Sendable {
    var definition: IndexDefinition
    /// The field sorted by: the one after the equalities.
    var component: Int
    /// The equalities' parts of every key in the range.
    var prefixKey: [UInt8]

    /// The sort key (``SortKey``) of an entry: its sorted field's part (the last field's, which is its SortKey).
    func sortKey(_ valueKey: [UInt8]) -> [UInt8]? {
        CompositeMaintainer(components: definition.components).fieldKey(valueKey, field: component)
    }

    /// The value key of record `name` at sort key `key` (a continuation point).
    func valueKey(sortKey key: [UInt8], name: String) -> [UInt8] {
        let m = CompositeMaintainer(components: definition.components)
        var out = prefixKey
        CompositeMaintainer.append(key, descending: definition.components[component].descending, to: &out)
        if m.namesDescend { CompositeMaintainer.append(Array(name.utf8), descending: true, to: &out) }
        return out
    }
}
