/// Typed access to the members of a request object; every failure is a `BAD_REQUEST` naming the member by its
/// path in the request (`operations[3].record.recordName`).
extension Dictionary where Key == String, Value == JSONValue {
    /// The member `key` converted by `extract`; nil when absent or null; `BAD_REQUEST` ("… must be `expected`,
    /// not …") when `extract` fails.
    private func member<T>(_ key: String, at path: String, _ expected: String, _ extract: (JSONValue) -> T?) throws
        -> T?
    {
        guard let v = self[key], v != .null else { return nil }
        guard let t = extract(v) else {
            throw APIError.badRequest("\(Self.join(path, key)) must be \(expected), not \(v.kindDescription)")
        }
        return t
    }

    public func string(_ key: String, at path: String) throws -> String? { try member(key, at: path, "a string") { $0.stringValue } }
    public func bool(_ key: String, at path: String) throws -> Bool? { try member(key, at: path, "true or false") { $0.boolValue } }
    public func int(_ key: String, at path: String) throws -> Int64? {
        if case .number(let n)? = self[key], n.isInteger, n.int64 == nil {
            throw APIError.badRequest("\(Self.join(path, key)) must be an integer of 64 bits, not \(n.text.prefix(40))")
        }
        return try member(key, at: path, "an integer") { $0.numberValue?.int64 }
    }
    /// A finite number (`1e999` does not fit a double).
    public func double(_ key: String, at path: String) throws -> Double? {
        try member(key, at: path, "a finite number") { v in v.numberValue.map(\.double).flatMap { $0.isFinite ? $0 : nil } }
    }
    public func array(_ key: String, at path: String) throws -> [JSONValue]? {
        try member(key, at: path, "an array") { $0.arrayValue }
    }
    /// The request's required top-level list (`operations`, `records`…) of at most `limit` items; `BAD_REQUEST`
    /// when it is missing or longer, saying to split the request.
    public func requiredList(_ key: String, limit: Int, per unit: String) throws -> [JSONValue] {
        guard let items = try array(key, at: "") else { throw APIError.badRequest("\(key) is missing") }
        guard items.count <= limit else {
            throw APIError.badRequest("\(items.count) \(key) in one \(unit); the limit is \(limit) (split the request)")
        }
        return items
    }
    public func object(_ key: String, at path: String) throws -> [String: JSONValue]? {
        try member(key, at: path, "an object") { $0.objectValue }
    }

    /// An array of strings (`desiredKeys`); nil when absent or null.
    public func strings(_ key: String, at path: String) throws -> [String]? {
        guard let items = try array(key, at: path) else { return nil }
        return try items.enumerated().map { i, item in
            guard case .string(let s) = item else {
                throw APIError.badRequest("\(Self.join(path, key))[\(i)] must be a string, not \(item.kindDescription)")
            }
            return s
        }
    }

    public static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : path + "." + key }
}

extension JSONValue {
    /// This value as an object, or a `BAD_REQUEST` naming `path`.
    public func requireObject(at path: String) throws -> [String: JSONValue] {
        guard case .object(let o) = self else {
            throw APIError.badRequest("\(path.isEmpty ? "the request body" : path) must be a JSON object, not \(kindDescription)")
        }
        return o
    }
}
