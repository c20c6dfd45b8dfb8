import Cloudlet
import Foundation

/// Server-to-server keys (CloudKit's ECDSA P-256 keys for server-side clients), kept in zone `Auth` as
/// `key.<key ID>` records of type `ServerKey`: `container`, `publicKey` (PEM), `revoked` (0 or 1).
extension Credentials {
    /// A server-to-server key as `cloudlet key list` shows it.
    public struct ServerKey: Sendable, Hashable {
        public var keyID: String
        public var container: String
        public var revoked: Bool
        /// When it was added (ms since 1970).
        public var created: Int64?
    }

    /// Adds the PEM public key `pem` (ECDSA P-256) for `container` and returns its key ID (the SHA-256 of the key:
    /// adding the same key again returns the same ID and changes nothing).
    /// - Throws: `invalidArguments` for a key that is not a P-256 public key, or one added for another container
    ///   or revoked (a revoked key cannot come back: make a new one); `badContainer` for a bad identifier.
    public func addServerKey(container: String, pem: String) async throws -> String {
        _ = try store.container(container)
        let key = try ECPublicKey(pem: pem)
        let id = key.keyID
        if let existing = try await serverKeyRecord(id) {
            let other = existing["container"]?.stringValue ?? ""
            guard other == container else {
                throw CloudletError.invalid("this key is already a server-to-server key of container '\(other)'; make a new key for '\(container)'")
            }
            guard existing["revoked"]?.int64Value != 1 else {
                throw CloudletError.invalid("key \(id) was revoked; a revoked key cannot be added again: make a new key")
            }
            return id
        }
        try await commit([
            .create(Record(
                recordType: "ServerKey", recordName: "key." + id, zoneID: Self.zone,
                fields: ["container": .string(container), "publicKey": .string(pem), "revoked": .int64(0)])),
            marker(),
        ])
        return id
    }

    /// The server-to-server keys (of `container`, or all), sorted by container and key ID.
    public func serverKeys(container: String? = nil) async throws -> [ServerKey] {
        let out = try await records(ofType: "ServerKey").compactMap { r -> ServerKey? in
            let c = r["container"]?.stringValue ?? ""
            guard container == nil || container == c else { return nil }
            return ServerKey(
                keyID: String(r.recordName.dropFirst(4)), container: c, revoked: r["revoked"]?.int64Value == 1,
                created: r.created?.timestamp)
        }
        return out.sorted { ($0.container, $0.keyID) < ($1.container, $1.keyID) }
    }

    /// Revokes a key: requests signed with it fail from now on. - Throws: `unknownItem` for a key ID never added.
    public func revokeServerKey(_ keyID: String) async throws {
        guard var r = try await serverKeyRecord(keyID) else {
            throw CloudletError(.unknownItem, "there is no server-to-server key '\(keyID)'")
        }
        r["revoked"] = .int64(1)
        try await commit([.forceUpdate(r)])
    }

    /// The container and public key of a key that is not revoked; nil for an unknown or revoked key.
    func activeServerKey(_ keyID: String) async throws -> (container: String, key: ECPublicKey)? {
        guard let r = try await serverKeyRecord(keyID), r["revoked"]?.int64Value != 1,
            let container = r["container"]?.stringValue, let pem = r["publicKey"]?.stringValue
        else { return nil }
        return (container, try ECPublicKey(pem: pem))
    }

    private func serverKeyRecord(_ keyID: String) async throws -> Record? {
        guard keyID.utf8.count == 64, keyID.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            return nil
        }
        return try await lookup("key." + keyID)
    }
}
