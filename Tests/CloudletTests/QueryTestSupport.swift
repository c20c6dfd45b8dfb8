import CloudletCore
import Foundation

@testable import Cloudlet

// Foundation has a Predicate and a Comparator too; in this test module the names mean Cloudlet's.
typealias Predicate = CloudletCore.Predicate
typealias Comparator = CloudletCore.Comparator

/// The model order of query results, written independently of the engine's sort keys: per descriptor, a missing
/// value first (ascending) and otherwise `FieldOrder.compare`; a distance sort puts records without the location
/// last; ties by record name then zone name, in the direction of the last descriptor.
func modelLess(_ a: Record, _ b: Record, _ descriptors: [QuerySort]) -> Bool {
    func value(_ r: Record, _ f: String) -> FieldValue? {
        if let s = SystemField(rawValue: f) { return s.value(in: r) }
        return r.fields[f]
    }
    for d in descriptors {
        var c: Int
        if let here = d.relativeLocation {
            let da = value(a, d.field).flatMap { v -> Double? in if case .location(let l) = v { Geo.distanceKilometres(l, here) } else { nil } }
            let db = value(b, d.field).flatMap { v -> Double? in if case .location(let l) = v { Geo.distanceKilometres(l, here) } else { nil } }
            switch (da, db) {
            case (nil, nil): c = 0
            case (nil, _): c = 1
            case (_, nil): c = -1
            case (let x?, let y?): c = x < y ? -1 : x == y ? 0 : 1
            }
        } else {
            switch (value(a, d.field), value(b, d.field)) {
            case (nil, nil): c = 0
            case (nil, _): c = -1
            case (_, nil): c = 1
            case (let x?, let y?): c = FieldOrder.compare(x, y) ?? 0
            }
        }
        if c != 0 { return d.ascending ? c < 0 : c > 0 }
    }
    let asc = descriptors.last?.ascending ?? true
    if a.recordName != b.recordName { return asc ? a.recordName < b.recordName : a.recordName > b.recordName }
    return asc ? a.id.zoneID.zoneName < b.id.zoneID.zoneName : a.id.zoneID.zoneName > b.id.zoneID.zoneName
}

/// The point `km` away from `from` in direction `bearing` (degrees clockwise from north) on the sphere that
/// `Geo.distanceKilometres` measures on, longitude wrapped to -180…180.
func destination(from: Location, km: Double, bearing: Double) -> Location {
    let r = km / 6371.0088
    let b = bearing * .pi / 180
    let lat1 = from.latitude * .pi / 180
    let lon1 = from.longitude * .pi / 180
    let lat2 = asin(min(1, max(-1, sin(lat1) * cos(r) + cos(lat1) * sin(r) * cos(b))))
    let lon2 = lon1 + atan2(sin(b) * sin(r) * cos(lat1), cos(r) - sin(lat1) * sin(lat2))
    var lon = lon2 * 180 / .pi
    while lon > 180 { lon -= 360 }
    while lon < -180 { lon += 360 }
    return Location(latitude: lat2 * 180 / .pi, longitude: lon)
}

/// The brute-force ranking of a query without sort descriptors whose predicate searches tokens (nil for any other):
/// BM25 with the statistics of `corpus` (the live records of the zones searched), counted here record by record.
func modelRanking(_ p: Predicate, sorts: [QuerySort], searchable: Set<String>, corpus: [Record]) -> BM25? {
    let terms = RankTerm.of(p, searchable: searchable)
    guard sorts.isEmpty, !terms.isEmpty else { return nil }
    var stats = RankStats(records: corpus.count)
    for f in Set(terms.map(\.field)) {
        var totals = TextTotals()
        for r in corpus { totals.add(TextDocument(IndexedField.value(f, in: r)), 1) }
        stats.fields[f] = totals
    }
    for t in terms {
        let prefix = TextTokenizer.prefix(of: t.token).map(String.init)
        stats.frequencies[t] = corpus.filter { r in
            let tokens = TextDocument(IndexedField.value(t.field, in: r)).frequencies.keys
            return prefix.map { p in tokens.contains { $0.hasPrefix(p) } } ?? tokens.contains(t.token)
        }.count
    }
    return BM25(terms: terms, stats: stats)
}

/// The order of a ranked query: higher scores first, ties by record name, then zone name.
func rankedLess(_ a: Record, _ b: Record, _ bm25: BM25) -> Bool {
    let (x, y) = (bm25.score(a), bm25.score(b))
    if x != y { return x > y }
    if a.recordName != b.recordName { return a.recordName < b.recordName }
    return a.id.zoneID.zoneName < b.id.zoneID.zoneName
}
