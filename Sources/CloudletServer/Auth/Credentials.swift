import Cloudlet
import Foundation

/// The server's users and API tokens, kept as ordinary records in the store's system database
/// (``CloudletStore/systemDatabase()``, zone `Auth`), which no client request can address.
///
/// Secrets are never stored: a token's record is named after its SHA-256 fingerprint, so checking a token is one
/// record lookup by name. Layout of zone `Auth` (record name → type, fields):
///
/// | record name | type | fields |
/// |---|---|---|
/// | `container.<sha256 hex of the id>` | `Container` | `identifier` — a container that has an API token |
/// | `api.<sha256 hex>` | `APIToken` | `container` |
/// | `user.<name>` | `User` | `name`, `userRecordName`, `email`, `discoverable` (1: found by `users/discover`), `tokenTTL` (s) |
/// | `web.<sha256 hex>` | `WebAuthToken` | `userName`, `userRecordName`, `expires` (ms since 1970; absent: never) |
/// | `key.<key ID>` | `ServerKey` | `container`, `publicKey` (PEM), `revoked` — a server-to-server key |
/// | `admin.<sha256 hex>` | `AdminToken` | — (an admin credential: every `/cloudlet/admin/*` route and metrics) |
/// | `bootstrap` | `Bootstrap` | — (set once users or tokens were created; `cloudlet serve` then creates none) |
public struct Credentials: Sendable {
    public let store: CloudletStore

    public init(store: CloudletStore) { self.store = store }

    static let zone = ZoneID(zoneName: "Auth")
    /// Names of users given to `cloudlet user add`: letters, digits, `.`, `-`, `_`; 1–64 characters.
    static let maxUserNameLength = 64

    /// A user of the server: a name for people and a CloudKit-style `userRecordName` (`_` + 32 hex digits) that
    /// owns their private database.
    public struct User: Sendable, Hashable {
        public var name: String
        public var userRecordName: String
    }

    /// What ``bootstrapIfNeeded(container:userName:)`` created.
    public struct Bootstrap: Sendable {
        public var container: String
        public var apiToken: String
        public var user: User
        public var webAuthToken: String
    }

    private var db: Database { store.systemDatabase() }

    // MARK: - Creating

    /// Creates an API token for `container` and returns its secret (shown once; only its hash is kept).
    /// - Throws: ``CloudletError/Code/badContainer`` for an identifier that is not `iCloud.` + a reverse-DNS name.
    public func createAPIToken(container: String) async throws -> String {
        _ = try store.container(container)
        let secret = try Secrets.newToken()
        try await commit(apiTokenRecords(container: container, secret: secret) + [marker()])
        return secret
    }

    /// Creates a user and a web auth token for them; returns both (the token is shown once).
    /// - Throws: ``CloudletError/Code/invalidArguments`` for a bad name, ``CloudletError/Code/recordExists`` if the
    ///   name is taken.
    public func createUser(name: String, email: String? = nil, discoverable: Bool = false, tokenTTL: Int64? = nil) async throws
        -> (user: User, webAuthToken: String)
    {
        if let tokenTTL, tokenTTL <= 0 { throw CloudletError.invalid("the web auth token lifetime must be positive, not \(tokenTTL) s") }
        let user = try newUser(name)
        if let email {
            guard email.utf8.count <= 254, email.split(separator: "@").count == 2, !email.contains(" ") else {
                throw CloudletError.invalid("email address '\(email)' is invalid")
            }
        }
        let token = try Secrets.newToken()
        var ops = userRecords(user, token: token)
        if case .create(var r) = ops[0] {
            if let email { r["email"] = .string(email.lowercased()) }
            r["discoverable"] = .int64(discoverable ? 1 : 0)
            if let tokenTTL { r["tokenTTL"] = .int64(tokenTTL) }
            ops[0] = .create(r)
        }
        if let tokenTTL, case .create(var t) = ops[1] {
            t["expires"] = .int64(Self.now() + tokenTTL * 1000)
            ops[1] = .create(t)
        }
        try await commit(ops + [marker()])
        return (user, token)
    }

    /// On a store where no token or user was ever created: creates an API token for `container` and a user named
    /// `userName`, atomically. Returns nil (and creates nothing) otherwise.
    public func bootstrapIfNeeded(container: String, userName: String) async throws -> Bootstrap? {
        _ = try store.container(container)
        let user = try newUser(userName)
        if try await lookup("bootstrap") != nil { return nil }
        let apiToken = try Secrets.newToken()
        let webToken = try Secrets.newToken()
        do {
            // An exclusive marker: of two processes bootstrapping at once, one fails whole.
            try await commit(
                apiTokenRecords(container: container, secret: apiToken) + userRecords(user, token: webToken)
                    + [marker(exclusive: true)])
        } catch let e as CloudletError where e.code == .recordExists {
            return nil  // another process bootstrapped meanwhile
        }
        return Bootstrap(container: container, apiToken: apiToken, user: user, webAuthToken: webToken)
    }

    private func apiTokenRecords(container: String, secret: String) -> [RecordOperation] {
        [
            .forceUpdate(
                Record(
                    recordType: "Container", recordName: Self.containerRecordName(container), zoneID: Self.zone,
                    fields: ["identifier": .string(container)])),
            .create(
                Record(
                    recordType: "APIToken", recordName: "api." + Secrets.fingerprint(secret), zoneID: Self.zone,
                    fields: ["container": .string(container)])),
        ]
    }

    private func userRecords(_ user: User, token: String) -> [RecordOperation] {
        [
            .create(
                Record(
                    recordType: "User", recordName: "user." + user.name, zoneID: Self.zone,
                    fields: ["name": .string(user.name), "userRecordName": .string(user.userRecordName)])),
            .create(
                Record(
                    recordType: "WebAuthToken", recordName: "web." + Secrets.fingerprint(token), zoneID: Self.zone,
                    fields: ["userName": .string(user.name), "userRecordName": .string(user.userRecordName)])),
        ]
    }

    /// The record that says credentials exist: `forceUpdate`d by every creation, `create`d (`exclusive`) by the
    /// bootstrap.
    func marker(exclusive: Bool = false) -> RecordOperation {
        let r = Record(recordType: "Bootstrap", recordName: "bootstrap", zoneID: Self.zone)
        return exclusive ? .create(r) : .forceUpdate(r)
    }

    /// A new user named `name` with a random CloudKit-style `userRecordName`.
    private func newUser(_ name: String) throws -> User {
        try Self.validateUserName(name)
        return User(name: name, userRecordName: "_" + Secrets.hex(try Secrets.randomBytes(16)))
    }

    private func ensureZone() async throws {
        try await db.createZone(Self.zone)
    }

    /// Commits `ops` atomically (zone `Auth` is a custom zone); throws the first real failure.
    func commit(_ ops: [RecordOperation]) async throws {
        try await ensureZone()
        let results = try await db.modify(ops, atomic: true)
        if let failure = results.compactMap(\.error).first(where: { $0.code != .batchRequestFailed }) {
            if failure.code == .recordExists, let r = failure.serverRecord, r.recordType == "User" {
                throw CloudletError(.recordExists, "user '\(r["name"]?.stringValue ?? "")' already exists")
            }
            throw failure
        }
    }

    static func validateUserName(_ name: String) throws {
        let u = name.utf8
        guard !u.isEmpty, u.count <= maxUserNameLength,
            u.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D
                    || $0 == 0x2E || $0 == 0x5F
            })
        else {
            throw CloudletError.invalid(
                "user name '\(name)' is invalid: use 1–\(maxUserNameLength) letters, digits, '.', '-' or '_'")
        }
    }

    // MARK: - Checking

    /// The container an API token grants, or nil for an unknown token.
    public func container(forAPIToken secret: String) async throws -> String? {
        guard Secrets.isWellFormed(secret) else { return nil }
        return try await lookup("api." + Secrets.fingerprint(secret))?["container"]?.stringValue
    }

    /// The user a web auth token identifies, or nil for an unknown or expired token.
    public func user(forWebAuthToken secret: String) async throws -> User? {
        guard let (user, expires) = try await webAuthToken(secret), expires.map({ $0 > Self.now() }) ?? true else { return nil }
        return user
    }

    /// The user a web auth token identifies and when it expires (ms since 1970; nil: never), expired or not; nil
    /// for an unknown token.
    func webAuthToken(_ secret: String) async throws -> (user: User, expires: Int64?)? {
        guard Secrets.isWellFormed(secret), let r = try await lookup("web." + Secrets.fingerprint(secret)),
            let name = r["userName"]?.stringValue, let urn = r["userRecordName"]?.stringValue
        else { return nil }
        return (User(name: name, userRecordName: urn), r["expires"]?.int64Value)
    }

    /// Now, in ms since 1970.
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// Whether any API token was ever created for `container`.
    public func isKnownContainer(_ container: String) async throws -> Bool {
        try await lookup(Self.containerRecordName(container)) != nil
    }

    /// Container identifiers may be 255 characters, too long for a record name with a prefix: use a fingerprint.
    private static func containerRecordName(_ container: String) -> String {
        "container." + Secrets.fingerprint(container)
    }

    /// The record `name` of zone `Auth`, or nil when it (or the zone) does not exist.
    func lookup(_ name: String) async throws -> Record? {
        do {
            return try await db.record(for: RecordID(recordName: name, zoneID: Self.zone))
        } catch let e as CloudletError where e.code == .unknownItem || e.code == .zoneNotFound {
            return nil
        }
    }
}
