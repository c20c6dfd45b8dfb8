import Cloudlet

extension Credentials {
    /// A user as `users/discover` and `cloudlet user list` show them.
    public struct UserProfile: Sendable, Hashable {
        public var user: User
        public var email: String?
        /// Whether the user opted in to be found by other users (`cloudlet user add --discoverable`).
        public var discoverable: Bool
    }

    /// Every user, sorted by name.
    public func users() async throws -> [UserProfile] {
        try await records(ofType: "User").compactMap { r -> UserProfile? in
            guard let name = r["name"]?.stringValue, let urn = r["userRecordName"]?.stringValue else { return nil }
            return UserProfile(
                user: User(name: name, userRecordName: urn), email: r["email"]?.stringValue,
                discoverable: r["discoverable"]?.int64Value == 1)
        }.sorted { $0.user.name < $1.user.name }
    }

    /// The discoverable users matching `lookups` (an email address, case-insensitive, or a userRecordName each),
    /// each at most once, in the order asked; users who did not opt in are never found.
    public func discover(emails: [String], userRecordNames: [String]) async throws -> [UserProfile] {
        let found = try await users().filter(\.discoverable)
        var out: [UserProfile] = []
        for e in emails {
            if let u = found.first(where: { $0.email == e.lowercased() }), !out.contains(u) { out.append(u) }
        }
        for n in userRecordNames {
            if let u = found.first(where: { $0.user.userRecordName == n }), !out.contains(u) { out.append(u) }
        }
        return out
    }
}
