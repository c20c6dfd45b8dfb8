import CloudletClient
import CloudletCore
import CloudletWire

/// A client of etcd v3's JSON gateway (`/v3/...` over HTTP, etcd 3.4 as Debian's `etcd-server` ships it): keys,
/// leases and compare-and-swap transactions — what the cluster's coordinator needs, no more. Keys and values are
/// bytes (base64 on the wire); int64 fields arrive as JSON strings, as the gateway writes them.
///
/// Every call throws `SERVICE_UNAVAILABLE` naming the endpoint when etcd cannot be reached or answers with an error.
public struct EtcdClient: Sendable {
    /// The gateway's base URL, e.g. `http://127.0.0.1:2379`.
    public let endpoint: String
    let transport: any HTTPTransport

    /// `url`: `etcd://host:port` or `http://host:port`.
    public init(url: String, transport: any HTTPTransport = CurlTransport()) {
        var base = url
        if base.hasPrefix("etcd://") { base = "http://" + base.dropFirst("etcd://".count) }
        while base.hasSuffix("/") { base.removeLast() }
        endpoint = base
        self.transport = transport
    }

    /// One key as etcd stores it.
    public struct KeyValue: Sendable, Hashable {
        public var key: String
        public var value: [UInt8]
        /// The revision that created the key (unchanged by later puts; a deleted and re-created key gets a new one).
        public var createRevision: Int64
        public var modRevision: Int64
        /// The lease the key is attached to (0: none).
        public var lease: Int64
    }

    // MARK: Keys

    /// Sets `key` (under `lease` when non-zero); returns the revision of the put.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8], lease: Int64 = 0) async throws -> Int64 {
        let answer = try await call("/v3/kv/put", Self.putRequest(key, value, lease: lease))
        return Self.revision(answer)
    }

    /// The key, or nil.
    public func get(_ key: String) async throws -> KeyValue? {
        try await range(.members(["key": .string(Base64.encode(Array(key.utf8)))])).first
    }

    /// Every key starting with `prefix`, in key order.
    public func list(prefix: String) async throws -> [KeyValue] {
        try await range(.members(["key": .string(Self.b64(prefix)), "range_end": .string(Base64.encode(Self.prefixEnd(prefix)))]))
    }

    /// Deletes `key`; returns how many keys went (0 or 1).
    @discardableResult
    public func delete(_ key: String) async throws -> Int64 {
        let answer = try await call("/v3/kv/deleterange", .members(["key": .string(Self.b64(key))]))
        return Self.int(answer["deleted"]) ?? 0
    }

    /// Creates `key` under `lease` only if it does not exist (compare-and-swap on its create revision being 0).
    /// Returns the revision that created it (the new key's create revision), or nil when the key existed.
    public func create(_ key: String, _ value: [UInt8], lease: Int64) async throws -> Int64? {
        let txn: JSONValue = .members([
            "compare": .array([.members([
                "key": .string(Self.b64(key)), "target": .string("CREATE"), "result": .string("EQUAL"),
                "create_revision": .string("0"),
            ])]),
            "success": .array([.members(["request_put": Self.putRequest(key, value, lease: lease)])]),
        ])
        let answer = try await call("/v3/kv/txn", txn)
        guard answer["succeeded"]?.boolValue == true else { return nil }
        return Self.revision(answer)
    }

    /// Deletes `key` only if its create revision is `createRevision` (a leader resigning its own term, not a
    /// successor's). Returns whether it did.
    @discardableResult
    public func delete(_ key: String, ifCreatedAt createRevision: Int64) async throws -> Bool {
        let txn: JSONValue = .members([
            "compare": .array([.members([
                "key": .string(Self.b64(key)), "target": .string("CREATE"), "result": .string("EQUAL"),
                "create_revision": .string(String(createRevision)),
            ])]),
            "success": .array([.members(["request_delete_range": .members(["key": .string(Self.b64(key))])])]),
        ])
        return try await call("/v3/kv/txn", txn)["succeeded"]?.boolValue == true
    }

    /// Replaces `key`'s value only if it was last written at `modRevision` (compare-and-swap; no lease). Returns
    /// the revision that wrote it, or nil when someone else wrote the key since.
    public func put(_ key: String, _ value: [UInt8], ifModifiedAt modRevision: Int64) async throws -> Int64? {
        let txn: JSONValue = .members([
            "compare": .array([.members([
                "key": .string(Self.b64(key)), "target": .string("MOD"), "result": .string("EQUAL"),
                "mod_revision": .string(String(modRevision)),
            ])]),
            "success": .array([.members(["request_put": Self.putRequest(key, value, lease: 0)])]),
        ])
        let answer = try await call("/v3/kv/txn", txn)
        guard answer["succeeded"]?.boolValue == true else { return nil }
        return Self.revision(answer)
    }

    // MARK: Leases

    /// Grants a lease of `ttl` seconds; returns its ID.
    public func grantLease(ttl: Int) async throws -> Int64 {
        let answer = try await call("/v3/lease/grant", .members(["TTL": .string(String(ttl))]))
        guard let id = Self.int(answer["ID"]), id != 0 else {
            throw CloudletError(.serviceUnavailable, "etcd at \(endpoint) granted no lease: \(answer.serialized())")
        }
        return id
    }

    /// Renews the lease; returns false when it no longer exists (expired or revoked).
    public func keepAlive(_ lease: Int64) async throws -> Bool {
        let answer = try await call("/v3/lease/keepalive", .members(["ID": .string(String(lease))]))
        return (Self.int(answer["result"]?["TTL"]) ?? 0) > 0
    }

    /// Revokes the lease, deleting every key attached to it.
    public func revokeLease(_ lease: Int64) async throws {
        _ = try await call("/v3/lease/revoke", .members(["ID": .string(String(lease))]))
    }

    // MARK: Wire

    private func range(_ request: JSONValue) async throws -> [KeyValue] {
        let answer = try await call("/v3/kv/range", request)
        return try (answer["kvs"]?.arrayValue ?? []).map { kv in
            guard let key = kv["key"]?.stringValue.flatMap(Base64.decode) else {
                throw CloudletError(.serviceUnavailable, "etcd at \(endpoint) answered a range with a key that is not base64")
            }
            return KeyValue(
                key: String(decoding: key, as: UTF8.self), value: kv["value"]?.stringValue.flatMap(Base64.decode) ?? [],
                createRevision: Self.int(kv["create_revision"]) ?? 0, modRevision: Self.int(kv["mod_revision"]) ?? 0,
                lease: Self.int(kv["lease"]) ?? 0)
        }
    }

    private func call(_ path: String, _ body: JSONValue) async throws -> JSONValue {
        let request = HTTPClientRequest(
            method: "POST", url: endpoint + path, headers: [("Content-Type", "application/json")],
            body: Array(body.serialized().utf8))
        let response: HTTPClientResponse
        do { response = try await transport.send(request) } catch let failure as TransportFailure {
            throw CloudletError(.serviceUnavailable, "etcd at \(endpoint) unreachable (\(path)): \(failure.message)", cause: failure)
        }
        let parsed = try? JSONParser.parse(response.body)
        guard response.status == 200, let parsed else {
            let text = String(decoding: response.body.prefix(300), as: UTF8.self)
            throw CloudletError(.serviceUnavailable, "etcd at \(endpoint) answered \(path) with HTTP \(response.status): \(text)")
        }
        if let error = parsed["error"]?.stringValue {
            throw CloudletError(.serviceUnavailable, "etcd at \(endpoint) refused \(path): \(error)")
        }
        return parsed
    }

    private static func putRequest(_ key: String, _ value: [UInt8], lease: Int64) -> JSONValue {
        .members([
            "key": .string(b64(key)), "value": .string(Base64.encode(value)),
            "lease": lease == 0 ? nil : .string(String(lease)),
        ])
    }

    private static func b64(_ s: String) -> String { Base64.encode(Array(s.utf8)) }

    /// The smallest key after every key with `prefix` (etcd's range end for a prefix).
    static func prefixEnd(_ prefix: String) -> [UInt8] {
        var end = Array(prefix.utf8)
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0]
    }

    /// The gateway writes int64s as strings, small ones sometimes as numbers.
    static func int(_ v: JSONValue?) -> Int64? {
        if let s = v?.stringValue { return Int64(s) }
        return v?.int64Value
    }

    private static func revision(_ answer: JSONValue) -> Int64 { int(answer["header"]?["revision"]) ?? 0 }
}
