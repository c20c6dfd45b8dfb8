/// Typed access to the members of a request object; every failure is a `BAD_REQUEST` naming the member by its
/// path in the request (`operations[3].record.recordName`).
extension Dictionary where Key == String, Value == JSONValue {
    /// A string member; nil when absent or null.
    func string(_ key: String, at path: String) throws -> String? {
        switch self[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let v?: throw APIError.badRequest("\(Self.join(path, key)) must be a string, not \(v.kindDescription)")
        }
    }

    /// A boolean member; nil when absent or null.
    func bool(_ key: String, at path: String) throws -> Bool? {
        switch self[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case let v?: throw APIError.badRequest("\(Self.join(path, key)) must be true or false, not \(v.kindDescription)")
        }
    }

    /// An integer member; nil when absent or null.
    func int(_ key: String, at path: String) throws -> Int64? {
        switch self[key] {
        case nil, .null?: return nil
        case .number(let n)? where n.int64 != nil: return n.int64
        case let v?: throw APIError.badRequest("\(Self.join(path, key)) must be an integer, not \(v.kindDescription)")
        }
    }

    /// An array member; nil when absent or null.
    func array(_ key: String, at path: String) throws -> [JSONValue]? {
        switch self[key] {
        case nil, .null?: return nil
        case .array(let a)?: return a
        case let v?: throw APIError.badRequest("\(Self.join(path, key)) must be an array, not \(v.kindDescription)")
        }
    }

    /// An object member; nil when absent or null.
    func object(_ key: String, at path: String) throws -> [String: JSONValue]? {
        switch self[key] {
        case nil, .null?: return nil
        case .object(let o)?: return o
        case let v?: throw APIError.badRequest("\(Self.join(path, key)) must be an object, not \(v.kindDescription)")
        }
    }

    /// An array of strings (`desiredKeys`); nil when absent or null.
    func strings(_ key: String, at path: String) throws -> [String]? {
        guard let items = try array(key, at: path) else { return nil }
        return try items.enumerated().map { i, item in
            guard case .string(let s) = item else {
                throw APIError.badRequest("\(Self.join(path, key))[\(i)] must be a string, not \(item.kindDescription)")
            }
            return s
        }
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : path + "." + key }
}

extension JSONValue {
    /// This value as an object, or a `BAD_REQUEST` naming `path`.
    func requireObject(at path: String) throws -> [String: JSONValue] {
        guard case .object(let o) = self else {
            throw APIError.badRequest("\(path.isEmpty ? "the request body" : path) must be a JSON object, not \(kindDescription)")
        }
        return o
    }
}
