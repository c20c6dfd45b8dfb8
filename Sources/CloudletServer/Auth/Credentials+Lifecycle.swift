import Cloudlet

/// Listing and revoking tokens, removing users, and giving users new web auth tokens.
extension Credentials {
    /// An API token or admin credential as `cloudlet token list` shows it: never the secret, only the start of its
    /// SHA-256 (the ID `token revoke` takes).
    public struct TokenInfo: Sendable, Hashable {
        public enum Kind: String, Sendable { case api, admin }
        public var kind: Kind
        /// The first 16 hex digits of the token's SHA-256.
        public var id: String
        /// The container an API token grants; nil for an admin credential.
        public var container: String?
        /// When it was created (ms since 1970).
        public var created: Int64?
    }

    /// Every API token and admin credential, sorted by kind, container and ID.
    public func tokens() async throws -> [TokenInfo] {
        var out: [TokenInfo] = []
        for (type, kind) in [("APIToken", TokenInfo.Kind.api), ("AdminToken", .admin)] {
            for r in try await records(ofType: type) {
                let fingerprint = r.recordName.split(separator: ".", maxSplits: 1).last.map(String.init) ?? ""
                out.append(TokenInfo(
                    kind: kind, id: String(fingerprint.prefix(16)), container: r["container"]?.stringValue, created: r.created?.timestamp))
            }
        }
        return out.sorted { ($0.kind.rawValue, $0.container ?? "", $0.id) < ($1.kind.rawValue, $1.container ?? "", $1.id) }
    }

    /// Revokes the API token or admin credential whose SHA-256 starts with `id` (at least 8 hex digits, as
    /// `tokens()` lists it). - Throws: `unknownItem` when none does, `invalidArguments` when several do or `id` is
    /// too short.
    public func revokeToken(_ id: String) async throws {
        let id = id.lowercased()
        guard id.utf8.count >= 8, id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            throw CloudletError.invalid("token ID '\(id)' is invalid: give at least 8 hex digits, as `cloudlet token list` shows them")
        }
        var matches: [Record] = []
        for type in ["APIToken", "AdminToken"] {
            matches += try await records(ofType: type).filter { ($0.recordName.split(separator: ".").last ?? "").hasPrefix(id) }
        }
        guard !matches.isEmpty else { throw CloudletError(.unknownItem, "no API token or admin credential has ID '\(id)'") }
        guard matches.count == 1 else { throw CloudletError.invalid("token ID '\(id)' matches \(matches.count) tokens; give more digits") }
        try await commit([.forceDelete(matches[0].id)])
    }

    /// Removes user `name` and every web auth token of theirs. Their private database's records stay in the store
    /// (a user created again gets a new userRecordName, and so a new, empty private database).
    /// - Throws: `unknownItem` for a user that does not exist.
    public func removeUser(_ name: String) async throws {
        guard try await user(named: name) != nil else { throw CloudletError(.unknownItem, "there is no user named '\(name)'") }
        let tokens = try await webAuthTokens(of: name)
        try await commit([.forceDelete(RecordID(recordName: "user." + name, zoneID: Self.zone))] + tokens.map { .forceDelete($0.id) })
    }

    /// Gives user `name` a new web auth token and revokes every other one of theirs; the new one lives for the user's
    /// token lifetime (`ttl` replaces it: seconds; nil keeps it). Returns the new token (shown once).
    public func rotateWebAuthToken(of name: String, ttl: Int64? = nil) async throws -> String {
        guard var userRecord = try await lookup("user." + name),
            let urn = userRecord["userRecordName"]?.stringValue
        else { throw CloudletError(.unknownItem, "there is no user named '\(name)'") }
        if let ttl {
            guard ttl > 0 else { throw CloudletError.invalid("the web auth token lifetime must be positive, not \(ttl) s") }
            userRecord["tokenTTL"] = .int64(ttl)
        }
        let old = try await webAuthTokens(of: name)
        let token = try Secrets.newToken()
        var fresh = Record(
            recordType: "WebAuthToken", recordName: "web." + Secrets.fingerprint(token), zoneID: Self.zone,
            fields: ["userName": .string(name), "userRecordName": .string(urn)])
        if let lifetime = userRecord["tokenTTL"]?.int64Value { fresh["expires"] = .int64(Self.now() + lifetime * 1000) }
        try await commit([.forceUpdate(userRecord), .create(fresh)] + old.map { .forceDelete($0.id) })
        return token
    }

    /// Exchanges a web auth token that is still valid for a new one (the old one dies): how a client keeps a
    /// token with a lifetime alive. Returns the new token and when it expires. - Throws: `authenticationFailed`
    /// for an unknown or expired token.
    public func refreshWebAuthToken(_ secret: String) async throws -> (token: String, expires: Int64?) {
        guard let (user, expires) = try await webAuthToken(secret), expires.map({ $0 > Self.now() }) ?? true else {
            throw CloudletError(.authenticationFailed, "the ckWebAuthToken is not valid or has expired; ask for a new one")
        }
        let lifetime = try await lookup("user." + user.name)?["tokenTTL"]?.int64Value
        let token = try Secrets.newToken()
        var fresh = Record(
            recordType: "WebAuthToken", recordName: "web." + Secrets.fingerprint(token), zoneID: Self.zone,
            fields: ["userName": .string(user.name), "userRecordName": .string(user.userRecordName)])
        let newExpiry = lifetime.map { Self.now() + $0 * 1000 }
        if let newExpiry { fresh["expires"] = .int64(newExpiry) }
        try await commit([.create(fresh), .forceDelete(RecordID(recordName: "web." + Secrets.fingerprint(secret), zoneID: Self.zone))])
        return (token, newExpiry)
    }

    /// The web auth token records of user `name`.
    private func webAuthTokens(of name: String) async throws -> [Record] {
        try await records(ofType: "WebAuthToken").filter { $0["userName"]?.stringValue == name }
    }

    /// Every record of `type` in zone `Auth`.
    func records(ofType type: String) async throws -> [Record] {
        var out: [Record] = []
        var cursor: QueryCursor?
        do {
            repeat {
                let page = try await store.systemDatabase().query(
                    Query(recordType: type), zoneID: Self.zone, continuationMarker: cursor, maxBytes: nil)
                out += page.records
                cursor = page.cursor
            } while cursor != nil
        } catch let e as CloudletError where e.code == .zoneNotFound {}
        return out
    }
}
