import Cloudlet

/// `filterBy` on the wire: `[{comparator, fieldName, fieldValue: {value, type?}, distance?}]`, ANDed, as in
/// CloudKit's `records/query` and query subscriptions. `distance` (for NEAR) is in kilometres. Every fault is a
/// `BAD_REQUEST` naming the member.
enum FilterCoding {
    static func decode(_ json: JSONValue?, at path: String, zone: ZoneID) throws -> Predicate {
        guard let json, json != .null else { return .all }
        guard case .array(let items) = json else { throw APIError.badRequest("\(path) must be an array, not \(json.kindDescription)") }
        var parts: [Predicate] = []
        for (i, item) in items.enumerated() {
            let p = "\(path)[\(i)]"
            let o = try item.requireObject(at: p)
            guard let name = try o.string("comparator", at: p) else { throw APIError.badRequest("\(p).comparator is missing") }
            guard let comparator = Comparator(rawValue: name) else {
                throw APIError.badRequest(
                    "\(p).comparator '\(name)' is not one of " + Comparator.allCases.map(\.rawValue).joined(separator: ", "))
            }
            guard let field = try o.string("fieldName", at: p), !field.isEmpty else {
                throw APIError.badRequest("\(p).fieldName is missing")
            }
            guard let valueJSON = o["fieldValue"] else { throw APIError.badRequest("\(p).fieldValue is missing") }
            let value = try FieldCoding.decode(valueJSON, at: "\(p).fieldValue", schemaType: nil, zone: zone)
            var distance: Double?
            if comparator == .near {
                guard case .number(let n)? = o["distance"] else {
                    throw APIError.badRequest("\(p).distance (kilometres) is required for NEAR")
                }
                guard case .location = value else { throw APIError.badRequest("\(p).fieldValue must be a LOCATION for NEAR") }
                distance = n.double
            }
            parts.append(.comparison(Comparison(field, comparator, value, distance: distance)))
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    /// Writes a predicate back as `filterBy` (the AND of comparisons that the wire format can say).
    static func write(_ p: Predicate, zone: ZoneID, to w: inout JSONWriter) {
        let comparisons: [Comparison]
        switch p {
        case .all: comparisons = []
        case .comparison(let c): comparisons = [c]
        case .and(let ps): comparisons = ps.compactMap { if case .comparison(let c) = $0 { c } else { nil } }
        default: comparisons = p.comparisons
        }
        w.array { w in
            for c in comparisons {
                w.object { w in
                    w.member("comparator", c.comparator.rawValue)
                    w.member("fieldName", c.field)
                    w.key("fieldValue")
                    FieldCoding.write(c.value, to: &w, numbersAsStrings: false, zone: zone)
                    if let d = c.distance {
                        w.key("distance")
                        w.value(.number(JSONNumber(text: String(d), isInteger: false)))
                    }
                }
            }
        }
    }
}
