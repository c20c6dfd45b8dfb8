import CloudletCore
import Foundation

/// Order-preserving byte keys: comparing two keys' bytes orders their values as ``FieldOrder/compare(_:_:)`` does
/// (for values that compare), so one byte order serves SORTABLE indexes, in-memory sorts and continuation markers.
///
/// A key is a rank byte then the value: 0 missing (sorts first), 1 number (INT64 and DOUBLE together: the value as
/// an order-preserving double, then for INT64 the exact integer, so integers beyond 2^53 still order exactly),
/// 2 TIMESTAMP, 3 STRING or REFERENCE (UTF-8 bytes, which order as Unicode scalars), 4 BYTES, 5 anything that does
/// not order (LOCATION, ASSETID, lists).
enum SortKey {
    static let missing: UInt8 = 0
    static let number: UInt8 = 1
    static let timestamp: UInt8 = 2
    static let text: UInt8 = 3
    static let bytes: UInt8 = 4
    static let unordered: UInt8 = 5

    /// The key of a value (nil: the record lacks the field).
    static func encode(_ v: FieldValue?) -> [UInt8] {
        guard let v else { return [missing] }
        var out: [UInt8]
        switch v {
        case .int64(let x):
            out = [number]
            out.reserveCapacity(17)
            appendDouble(Double(x), to: &out)
            appendInt(x, to: &out)
        case .double(let d):
            out = [number]
            appendDouble(d, to: &out)
        case .timestamp(let t):
            out = [timestamp]
            appendInt(t, to: &out)
        case .string(let s):
            out = [text]
            out.append(contentsOf: s.utf8)
        case .reference(let r):
            out = [text]
            out.append(contentsOf: r.recordName.utf8)
        case .bytes(let b):
            out = [bytes]
            out.append(contentsOf: b)
        case .location, .asset, .list: out = [unordered]
        }
        return out
    }

    /// The key of a distance (for sorts by distance); nil (no location) sorts after every distance.
    static func distance(_ km: Double?) -> [UInt8] {
        guard let km else { return [unordered] }
        var out = [number]
        appendDouble(km, to: &out)
        return out
    }

    /// The coarsest key prefix shared by every value equal to `v` under ``FieldOrder`` (numbers drop the exact-integer
    /// tail, so 5 and 5.0 share it): the bound to start or end a range scan at. Nil when `v` cannot bound an index
    /// range (NaN, locations, assets, lists).
    static func bound(_ v: FieldValue) -> [UInt8]? {
        switch v {
        case .int64(let x):
            var out = [number]
            appendDouble(Double(x), to: &out)
            return out
        case .double(let d):
            guard !d.isNaN else { return nil }
            return encode(v)
        case .timestamp, .string, .reference, .bytes: return encode(v)
        case .location, .asset, .list: return nil
        }
    }

    /// The smallest key greater than every key starting with `prefix`; nil when there is none (no upper bound).
    static func successor(_ prefix: [UInt8]) -> [UInt8]? {
        var p = prefix
        while let last = p.last {
            if last < 0xFF {
                p[p.count - 1] = last + 1
                return p
            }
            p.removeLast()
        }
        return nil
    }

    /// Whether `a` orders before `b`.
    @inline(__always)
    static func less(_ a: [UInt8], _ b: [UInt8]) -> Bool { compare(a, b) < 0 }

    /// -1, 0 or 1: unsigned byte order, a prefix before its extensions.
    static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in
                let n = min(pa.count, pb.count)
                var i = 0
                while i < n {
                    if pa[i] != pb[i] { return pa[i] < pb[i] ? -1 : 1 }
                    i += 1
                }
                return pa.count == pb.count ? 0 : pa.count < pb.count ? -1 : 1
            }
        }
    }

    private static func appendDouble(_ d: Double, to out: inout [UInt8]) {
        var bits: UInt64
        if d.isNaN {
            bits = 0x7FF8_0000_0000_0000  // one NaN, above +infinity (FieldOrder puts NaN after everything)
        } else {
            bits = (d == 0 ? 0.0 : d).bitPattern  // -0 and +0 are equal
        }
        bits = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
        appendBigEndian(bits, to: &out)
    }

    private static func appendInt(_ x: Int64, to out: inout [UInt8]) {
        appendBigEndian(UInt64(bitPattern: x) ^ (1 << 63), to: &out)
    }

    private static func appendBigEndian(_ v: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }
}

/// The key a QUERYABLE (equality) index files a value under: values that EQUALS treats as equal share a key
/// (strings and reference names case-folded, INT64 and DOUBLE as one number). Different values may share a key
/// too; the query evaluates every candidate, so the index only has to find a superset.
enum EqualityKey: Hashable, Sendable {
    case number(Double)
    case notANumber
    case timestamp(Int64)
    case text(String)
    case bytes([UInt8])
    case location(Double, Double)
    case asset(String)

    init?(_ v: FieldValue) {
        switch v {
        case .int64(let x): self = .number(Double(x))
        case .double(let d): self = d.isNaN ? .notANumber : .number(d == 0 ? 0 : d)
        case .timestamp(let t): self = .timestamp(t)
        case .string(let s): self = .text(s.lowercased())
        case .reference(let r): self = .text(r.recordName.lowercased())
        case .bytes(let b): self = .bytes(b)
        case .location(let l): self = .location(l.latitude == 0 ? 0 : l.latitude, l.longitude == 0 ? 0 : l.longitude)
        case .asset(let a): self = .asset(a.fileChecksum)
        case .list: return nil
        }
    }

    /// The keys of a value: one for a scalar, one per member for a list.
    static func keys(_ v: FieldValue) -> [EqualityKey] {
        if case .list(_, let items) = v { return items.compactMap(EqualityKey.init) }
        return EqualityKey(v).map { [$0] } ?? []
    }
}

/// The cells of the spatial index: a grid at several levels (cells of 180/2^level degrees), each location filed in
/// one cell per level; a NEAR query reads the cells of the finest level that covers its circle in few cells.
enum GeoCells {
    static let levels: [Int] = [3, 6, 9, 12, 15]  // ~2500 km … ~600 m cells
    /// A query covers its circle with at most this many cells of one level (the coarsest level is always allowed).
    static let maxCellsPerQuery = 64

    static func size(_ level: Int) -> Double { 180 / Double(1 << level) }

    /// A cell's id: the level in the top byte, the column (longitude) from bit 28, the row (latitude) from bit 0.
    ///
    /// The three parts are added, not OR-ed, although they never overlap: Swift 6.3.1 miscompiles the OR form in
    /// optimized builds when it is computed over a `y0...y1` loop, as ``covering(_:km:)`` does (the SIL pass
    /// BoundsCheckOpts replaces the loop-invariant `level << 56 | x << 28` by 0, so every cell of a column but the
    /// first came out as a bare row number and a NEAR query read cells nothing is filed under — issue 13). Debug
    /// builds are not affected; `make test-release` runs the query and index tests optimized.
    static func cell(level: Int, x: Int, y: Int) -> UInt64 {
        UInt64(level) << 56 + UInt64(x) << 28 + UInt64(y)
    }

    /// The cell of `l` at each level.
    static func cells(_ l: Location) -> [UInt64] {
        guard l.latitude.isFinite, l.longitude.isFinite else { return [] }
        return levels.map { level in
            let s = size(level)
            let columns = 2 << level  // 360° of longitude
            let rows = 1 << level  // 180° of latitude
            let x = min(max(Int(((l.longitude + 180) / s).rounded(.down)), 0), columns - 1)
            let y = min(max(Int(((l.latitude + 90) / s).rounded(.down)), 0), rows - 1)
            return cell(level: level, x: x, y: y)
        }
    }

    /// Cells that together contain every location within `km` of `center` (a superset), at one level: the finest
    /// whose cells number at most `maxCells` (the coarsest level whatever their number).
    static func covering(_ center: Location, km: Double, maxCells: Int = maxCellsPerQuery) -> [UInt64] {
        guard center.latitude.isFinite, center.longitude.isFinite, km.isFinite, km >= 0 else { return [] }
        // Angular radius, with a little slack for rounding.
        let delta = km / 6371.0088 * (180 / Double.pi) * 1.0001 + 1e-9
        let latLo = center.latitude - delta
        let latHi = center.latitude + delta
        var lonRanges: [(Double, Double)]
        let phi = center.latitude * Double.pi / 180
        let sinDelta = sin(min(delta, 90) * Double.pi / 180)
        if latLo <= -90 || latHi >= 90 || delta >= 90 || sinDelta >= cos(phi) {
            lonRanges = [(-180, 180)]  // the circle reaches a pole: every longitude
        } else {
            let dLon = asin(sinDelta / cos(phi)) * 180 / Double.pi * 1.0001 + 1e-9
            let lo = center.longitude - dLon
            let hi = center.longitude + dLon
            if dLon >= 180 {
                lonRanges = [(-180, 180)]
            } else if lo < -180 {
                lonRanges = [(lo + 360, 180), (-180, hi)]
            } else if hi > 180 {
                lonRanges = [(lo, 180), (-180, hi - 360)]
            } else {
                lonRanges = [(lo, hi)]
            }
        }
        let clampedLo = max(latLo, -90)
        let clampedHi = min(latHi, 90)
        var chosen: [UInt64] = []
        for level in levels {
            let s = size(level)
            let columns = 2 << level
            let rows = 1 << level
            let y0 = min(max(Int(((clampedLo + 90) / s).rounded(.down)), 0), rows - 1)
            let y1 = min(max(Int(((clampedHi + 90) / s).rounded(.down)), 0), rows - 1)
            var xs: [(Int, Int)] = []
            var n = 0
            for (lo, hi) in lonRanges {
                let x0 = min(max(Int(((lo + 180) / s).rounded(.down)), 0), columns - 1)
                let x1 = min(max(Int(((hi + 180) / s).rounded(.down)), 0), columns - 1)
                xs.append((x0, x1))
                n += (x1 - x0 + 1) * (y1 - y0 + 1)
            }
            if n > maxCells && !chosen.isEmpty { break }
            var cells: [UInt64] = []
            cells.reserveCapacity(n)
            for (x0, x1) in xs {
                for x in x0...x1 {
                    for y in y0...y1 { cells.append(cell(level: level, x: x, y: y)) }
                }
            }
            chosen = cells
            if n > maxCells { break }
        }
        return chosen
    }

    /// A query sorted by distance visits its circle's cells nearest first and stops once its page is known, so it can
    /// afford finer cells than one that reads them all: at most this many (a posting seek each, made only for the
    /// cells it reaches).
    static let maxCellsInDistanceOrder = 1024

    /// The bounds of `cell` in degrees: `latitude` and `longitude` ranges (closed).
    static func box(_ cell: UInt64) -> (latitude: ClosedRange<Double>, longitude: ClosedRange<Double>) {
        let s = size(Int(cell >> 56))
        let x = Double((cell >> 28) & 0x0FFF_FFFF)
        let y = Double(cell & 0x0FFF_FFFF)
        return ((y * s - 90)...((y + 1) * s - 90), (x * s - 180)...((x + 1) * s - 180))
    }

    /// A lower bound of the distance in km from `point` to every location in `cell` (0 when it lies inside): the
    /// larger of two bounds. Along a great circle latitude changes by at most the arc's length, so the gap to the
    /// cell's latitudes is one; a path into the cell's longitudes meets one of its two edge meridians (or a pole,
    /// which is on both), so the smaller distance to those meridians' great circles — `asin(|sin Δλ| · cos φ)` — is
    /// the other. Slightly low rather than high (rounding), so that a visit in this order never passes a nearer
    /// location.
    static func lowerBoundKm(from point: Location, to cell: UInt64) -> Double {
        let b = box(cell)
        let latitudeGap = max(0, b.latitude.lowerBound - point.latitude, point.latitude - b.latitude.upperBound)
        var offset = (point.longitude - b.longitude.lowerBound).truncatingRemainder(dividingBy: 360)
        if offset < 0 { offset += 360 }
        var meridianGap = 0.0
        if offset > b.longitude.upperBound - b.longitude.lowerBound {
            let toRadians = Double.pi / 180
            let cosLatitude = cos(point.latitude * toRadians)
            func gap(_ edge: Double) -> Double {
                asin(min(1, abs(sin((point.longitude - edge) * toRadians)) * cosLatitude)) / toRadians
            }
            meridianGap = min(gap(b.longitude.lowerBound), gap(b.longitude.upperBound))
        }
        let km = max(latitudeGap, meridianGap) * Double.pi / 180 * Geo.earthRadiusKm
        return max(0, km * (1 - 1e-9) - 1e-6)
    }
}
