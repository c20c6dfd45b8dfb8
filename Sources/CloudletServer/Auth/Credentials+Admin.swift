import Cloudlet

extension Credentials {
    /// Creates an admin credential and returns its secret (shown once; only its SHA-256 is kept). It authorizes
    /// every `/cloudlet/admin/*` route and `/cloudlet/metrics`, for every container of the server; sent as
    /// `Authorization: Bearer <token>` (or the `ckAdminToken` query parameter).
    public func createAdminToken() async throws -> String {
        let secret = try Secrets.newToken()
        try await commit([
            .create(Record(recordType: "AdminToken", recordName: "admin." + Secrets.fingerprint(secret), zoneID: Self.zone)),
            marker(),
        ])
        return secret
    }

    /// Whether `secret` is an admin credential.
    public func isAdminToken(_ secret: String) async throws -> Bool {
        guard Secrets.isWellFormed(secret) else { return false }
        return try await lookup("admin." + Secrets.fingerprint(secret)) != nil
    }

    /// The name of the user whose `userRecordName` is `userRecordName`, or nil (a scan of the users: for listings).
    public func name(ofUserRecordName userRecordName: String) async throws -> String? {
        try await users().first { $0.user.userRecordName == userRecordName }?.user.name
    }

    /// The user named `name` (as given to `cloudlet user add`), or nil.
    public func user(named name: String) async throws -> User? {
        guard (try? Self.validateUserName(name)) != nil, let r = try await lookup("user." + name),
            let urn = r["userRecordName"]?.stringValue
        else { return nil }
        return User(name: name, userRecordName: urn)
    }
}
