import CloudletCore

/// Bit-exact comparison of decoded values: `==` on `Double` says `nan != nan` and `0.0 == -0.0`, which would
/// hide exactly the codec bugs these tests look for.
extension FieldValue {
    func isBitwiseEqual(to other: FieldValue) -> Bool {
        switch (self, other) {
        case (.double(let a), .double(let b)):
            return a.bitPattern == b.bitPattern
        case (.location(let a), .location(let b)):
            return a.isBitwiseEqual(to: b)
        case (.list(let sa, let a), .list(let sb, let b)):
            return sa == sb && a.count == b.count && zip(a, b).allSatisfy { $0.isBitwiseEqual(to: $1) }
        default:
            return self == other
        }
    }
}

extension Location {
    func isBitwiseEqual(to other: Location) -> Bool {
        func same(_ a: Double?, _ b: Double?) -> Bool { a?.bitPattern == b?.bitPattern }
        return same(latitude, other.latitude) && same(longitude, other.longitude)
            && same(horizontalAccuracy, other.horizontalAccuracy) && same(verticalAccuracy, other.verticalAccuracy)
            && same(altitude, other.altitude) && same(speed, other.speed) && same(course, other.course)
            && timestamp == other.timestamp
    }
}

extension Record {
    func isBitwiseEqual(to other: Record) -> Bool {
        guard id == other.id, recordType == other.recordType, changeTag == other.changeTag,
            created == other.created, modified == other.modified, fields.count == other.fields.count
        else { return false }
        return fields.allSatisfy { name, value in other.fields[name].map { value.isBitwiseEqual(to: $0) } ?? false }
    }
}
