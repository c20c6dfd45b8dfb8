import CloudletCore
import CloudletStorage
import Synchronization
import Foundation  // log

/// One term a ranked query scores: a token, or a prefix (``TextTokenizer/searchTerms(_:)``, `"swi*"`), searched for
/// in one field (`self CONTAINS` searches each SEARCHABLE field).
struct RankTerm: Sendable, Hashable, Comparable {
    var field: String
    var token: String

    static func < (a: RankTerm, b: RankTerm) -> Bool { (a.field, a.token) < (b.field, b.token) }

    /// The terms of the token searches of `p` that are not negated, sorted; `searchable` is what `self CONTAINS`
    /// searches.
    static func of(_ p: CloudletCore.Predicate, searchable: Set<String>) -> [RankTerm] {
        var out: Set<RankTerm> = []
        func walk(_ p: CloudletCore.Predicate) {
            switch p {
            case .comparison(let c) where c.comparator == .containsAllTokens || c.comparator == .containsAnyTokens:
                let fields = c.field == fullTextField ? Array(searchable) : [c.field]
                for t in Set(c.value.stringValue.map(TextTokenizer.searchTerms) ?? []) {
                    for f in fields { out.insert(RankTerm(field: f, token: t)) }
                }
            case .and(let ps), .or(let ps): ps.forEach(walk)
            default: break
            }
        }
        walk(p)
        return out.sorted()
    }
}

/// The collection statistics a ranked query scores with: the records of the type, each searched field's totals
/// (``TextTotals``: its average length) and each term's document frequency — summed over the zones searched. The
/// first page gathers them (``QueryPlanner/rankStatistics(_:frequencies:)``) and its continuation marker carries
/// them, so every page scores with the same ones: a record's score then depends on its own postings alone, and the
/// pages of a query neither repeat nor skip a record because others were saved or deleted in between (as a field
/// sort does).
struct RankStats: Sendable, Equatable {
    var records = 0
    /// Per field: the records with at least one token in it, and their tokens (from the full-text index's totals, or
    /// counted in the records while the index builds).
    var fields: [String: TextTotals] = [:]
    /// Per term: the records with the token in the field.
    var frequencies: [RankTerm: Int] = [:]

    mutating func add(_ o: RankStats) {
        records += o.records
        for (f, t) in o.fields {
            fields[f, default: TextTotals()].documents += t.documents
            fields[f, default: TextTotals()].tokens += t.tokens
        }
        for (t, n) in o.frequencies { frequencies[t, default: 0] += n }
    }

    func encode(into w: inout ByteWriter) {
        w.varint(records)
        w.varint(fields.count)
        for (f, t) in fields.sorted(by: { $0.key < $1.key }) {
            w.string(f)
            w.varint(t.documents)
            w.varint(t.tokens)
        }
        w.varint(frequencies.count)
        for (t, n) in frequencies.sorted(by: { $0.key < $1.key }) {
            w.string(t.field)
            w.string(t.token)
            w.varint(n)
        }
    }

    static func decode(_ r: inout ByteReader) throws -> RankStats {
        var s = RankStats(records: try r.int())
        for _ in 0..<(try r.length(unit: 3)) {
            s.fields[try r.string()] = TextTotals(documents: try r.int(), tokens: try r.int())
        }
        for _ in 0..<(try r.length(unit: 3)) {
            s.frequencies[RankTerm(field: try r.string(), token: try r.string())] = try r.int()
        }
        return s
    }
}

/// Okapi BM25 (k1 = 1.2, b = 0.75; idf `ln(1 + (N − df + 0.5) / (df + 0.5))`, never negative, as Lucene has it):
/// how a full-text query without sort descriptors orders its matches, best first (CloudKit returns them in no
/// particular order). A record's score sums, over the query's terms, `idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b ·
/// len / avgdl))`, with `tf` the token's occurrences in the field and `len` the field's tokens (``TextPosting``),
/// `avgdl` the field's average length and `N` the type's records (``RankStats``). Ties go by record name, then zone.
struct BM25: Sendable {
    static let k1 = 1.2
    static let b = 0.75

    let terms: [RankTerm]
    let stats: RankStats
    private let idf: [Double]
    private let averageLength: [Double?]

    init(terms: [RankTerm], stats: RankStats) {
        self.terms = terms
        self.stats = stats
        let n = Double(max(stats.records, 1))
        idf = terms.map { t in
            guard let df = stats.frequencies[t].map(Double.init) else { return 1 }
            return log(1 + (n - df + 0.5) / (df + 0.5))
        }
        averageLength = terms.map { t in
            stats.fields[t.field].flatMap { $0.documents > 0 ? Double($0.tokens) / Double($0.documents) : nil }
        }
    }

    /// Term `i`'s part of a record's score, given its posting there.
    func weight(_ i: Int, _ p: TextPosting) -> Double {
        let tf = Double(p.frequency)
        let norm = averageLength[i].map { 1 - Self.b + Self.b * Double(p.length) / $0 } ?? 1
        return idf[i] * tf * (Self.k1 + 1) / (tf + Self.k1 * norm)
    }

    /// `r`'s score, from its values (the same as its postings give).
    func score(_ r: Record) -> Double {
        var docs: [String: TextDocument] = [:]
        var s = 0.0
        for (i, t) in terms.enumerated() {
            let d = docs[t.field] ?? TextDocument(IndexedField.value(t.field, in: r))
            docs[t.field] = d
            if let p = d.posting(t.token) { s += weight(i, p) }
        }
        return s
    }

    /// The sort key of a score: higher scores first (a distance key of its negation; 0 for none).
    static func key(_ score: Double) -> [UInt8] { SortKey.distance(score > 0 ? -score : 0) }
}

/// Where a ranked query's plan leaves the scorer it made while merging the postings (``PreparedQuery/pendingStats``),
/// for the page's marker.
final class RankedBy: Sendable {
    let scorer = Mutex<BM25?>(nil)
}
