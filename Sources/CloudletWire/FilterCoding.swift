import CloudletCore
import CloudletModel

/// `filterBy` lists on the wire (`records/query`, query subscriptions): CloudKit's `[{comparator, fieldName,
/// fieldValue: {value, type?}, distance?}]`, all ANDed, plus two Cloudlet extensions for what CloudKit cannot say:
///
/// - `{"or": [[filters…], [filters…], …]}`: matches when any of the inner lists (each ANDed) matches; `{"or": []}`
///   matches nothing.
/// - `{"not": [filters…]}`: matches when the inner list (ANDed) does not.
///
/// `distance` (NEAR) is in kilometres. Untyped values take their type from `fieldType` (the schema) when given,
/// else from the JSON (``FieldCoding``); for `IN`, `NOT_IN` and `LIST_CONTAINS_ANY`/`_ALL` (and their `NOT_`s) the
/// value is a list, and a scalar `type` tag with an array value is read as that type's list.
public enum FilterCoding {
    /// The predicate a `filterBy` list at `path` means: `.all` when absent, null or empty. References point into
    /// `zone`. - Throws: `BAD_REQUEST` naming the member (`query.filterBy[2].comparator`).
    public static func decode(_ json: JSONValue?, at path: String, zone: ZoneID) throws -> Predicate {
        try decode(json, at: path, zone: zone, fieldType: { _ in nil })
    }

    /// As ``decode(_:at:zone:)``, with the schema's type of each field for untyped values.
    public static func decode(
        _ json: JSONValue?, at path: String, zone: ZoneID, fieldType: (String) -> FieldType?
    ) throws -> Predicate {
        guard let json, json != .null else { return .all }
        guard case .array(let items) = json else {
            throw APIError.badRequest("\(path) must be an array of filters, not \(json.kindDescription)")
        }
        return try list(items, at: path, zone: zone, fieldType: fieldType)
    }

    private static func list(
        _ items: [JSONValue], at path: String, zone: ZoneID, fieldType: (String) -> FieldType?
    ) throws -> Predicate {
        let ps = try items.enumerated().map { i, item in
            try filter(item, at: "\(path)[\(i)]", zone: zone, fieldType: fieldType)
        }
        switch ps.count {
        case 0: return .all
        case 1: return ps[0]
        default: return .and(ps)
        }
    }

    private static func filter(
        _ json: JSONValue, at path: String, zone: ZoneID, fieldType: (String) -> FieldType?
    ) throws -> Predicate {
        let o = try json.requireObject(at: path)
        if let branches = try o.array("or", at: path) {
            return .or(
                try branches.enumerated().map { i, b in
                    let p = "\(path).or[\(i)]"
                    guard case .array(let inner) = b else {
                        throw APIError.badRequest("\(p) must be an array of filters, not \(b.kindDescription)")
                    }
                    return try list(inner, at: p, zone: zone, fieldType: fieldType)
                })
        }
        if let inner = try o.array("not", at: path) {
            return .not(try list(inner, at: path + ".not", zone: zone, fieldType: fieldType))
        }
        guard let name = try o.string("comparator", at: path) else {
            throw APIError.badRequest("\(path).comparator is missing")
        }
        guard let comparator = Comparator(rawValue: name) else {
            throw APIError.badRequest(
                "\(path).comparator '\(name)' is not a comparator (one of "
                    + Comparator.allCases.map(\.rawValue).joined(separator: ", ") + ")")
        }
        guard let field = try o.string("fieldName", at: path), !field.isEmpty else {
            throw APIError.badRequest("\(path).fieldName is missing")
        }
        guard var valueJSON = o["fieldValue"], valueJSON != .null else {
            throw APIError.badRequest("\(path).fieldValue is missing")
        }
        let wantsList = listOperand(comparator)
        // `{"value": [...], "type": "STRING"}` for IN: the list of that type.
        if wantsList, case .object(var v) = valueJSON, case .array? = v["value"], case .string(let t)? = v["type"],
            let ft = FieldType(cloudKitName: t), !ft.isList
        {
            v["type"] = .string(t + "_LIST")
            valueJSON = .object(v)
        }
        let known = SystemField(name: field)?.type ?? fieldType(field)
        let hint = operandType(comparator, field: known)
        let value = try FieldCoding.decode(valueJSON, at: path + ".fieldValue", schemaType: hint, zone: zone)
        let distance = try o.double("distance", at: path)
        if comparator == .near && distance == nil {
            throw APIError.badRequest("\(path).distance is missing: NEAR needs a radius in kilometres")
        }
        if let distance, distance < 0 {
            throw APIError.badRequest("\(path).distance must be a radius in kilometres of at least 0, not \(distance)")
        }
        return .comparison(Comparison(field, comparator, value, distance: distance))
    }

    /// Whether the comparator's operand is a list of values.
    public static func listOperand(_ c: Comparator) -> Bool {
        switch c {
        case .in, .notIn, .listContainsAny, .notListContainsAny, .listContainsAll, .notListContainsAll: true
        default: false
        }
    }

    /// The type an untyped operand is read as, given the field's type.
    public static func operandType(_ c: Comparator, field: FieldType?) -> FieldType? {
        switch c {
        case .near: return FieldType(.location)
        case .containsAllTokens, .containsAnyTokens, .beginsWith, .notBeginsWith, .listMemberBeginsWith,
            .notListMemberBeginsWith:
            return FieldType(.string)
        default:
            guard let field else { return nil }
            return FieldType(field.scalar, list: listOperand(c))
        }
    }

    // MARK: - Encoding

    /// Writes `p` as a `filterBy` array: the AND of comparisons as CloudKit's entries, OR and NOT as the `or` and
    /// `not` entries ``decode(_:at:zone:)`` reads (`.none` is `{"or": []}`).
    public static func write(_ p: Predicate, zone: ZoneID, to w: inout JSONWriter) {
        w.array { w in entries(p, zone: zone, to: &w) }
    }

    private static func entries(_ p: Predicate, zone: ZoneID, to w: inout JSONWriter) {
        switch p {
        case .all: break
        case .and(let ps): for q in ps { entries(q, zone: zone, to: &w) }
        case .comparison(let c):
            w.object { w in
                w.member("comparator", c.comparator.rawValue)
                w.member("fieldName", c.field)
                w.key("fieldValue")
                FieldCoding.write(c.value, to: &w, numbersAsStrings: false, zone: zone)
                if let d = c.distance {
                    w.key("distance")
                    w.double(d)
                }
            }
        case .none:
            w.object { w in
                w.key("or")
                w.array { _ in }
            }
        case .or(let ps):
            w.object { w in
                w.key("or")
                w.array { w in for q in ps { write(q, zone: zone, to: &w) } }
            }
        case .not(let q):
            w.object { w in
                w.key("not")
                write(q, zone: zone, to: &w)
            }
        }
    }
}
