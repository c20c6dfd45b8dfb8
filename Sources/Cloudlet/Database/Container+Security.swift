import CloudletCore

extension Container {
    /// The security roles and grants of an environment's schema (the public database's; see ``SecurityPolicy``).
    public func securityPolicy(environment: Environment = .development) -> SecurityPolicy {
        store.catalog.snapshot().security.policy(SchemaKey(container: identifier, environment: environment))
    }

    /// The members of each custom role of this container (both environments), sorted.
    public func roleMembers() -> [String: [String]] {
        (store.catalog.snapshot().security.members[identifier] ?? [:]).mapValues { $0.sorted() }
    }

    /// Makes `user` a member of custom role `role` (created by `CREATE ROLE` in either environment's schema).
    /// Adding a member twice changes nothing.
    /// - Throws: `invalidArguments` for a built-in role, a role no schema creates, or a malformed user name.
    public func addRoleMember(_ user: String, role: String) async throws {
        try await changeMembership(user, role: role, added: true)
    }

    /// Removes `user` from custom role `role`. - Throws: as ``addRoleMember(_:role:)``; `unknownItem` when the user
    /// is not a member.
    public func removeRoleMember(_ user: String, role: String) async throws {
        try await changeMembership(user, role: role, added: false)
    }

    private func changeMembership(_ user: String, role: String, added: Bool) async throws {
        try store.checkOpen()
        try Names.validateUser(user)
        guard !SecurityPolicy.builtInRoles.contains(role) else {
            throw CloudletError.invalid("role '\(role)' is built in; its members are not listed")
        }
        let identifier = self.identifier
        let (_, version) = try await store.catalog.commit(waitingForRoom: { st in
            let declared = Environment.allCases.contains { st.security.policy(SchemaKey(container: identifier, environment: $0)).roles.contains(role) }
            guard declared else {
                throw CloudletError.invalid("role '\(role)' does not exist in the schema of \(identifier) (create it with CREATE ROLE \(role);)")
            }
            let member = st.security.members[identifier]?[role]?.contains(user) == true
            if !added && !member {
                throw CloudletError(.unknownItem, "user '\(user)' is not a member of role '\(role)'")
            }
            return (member == added ? [] : [.security(.member(container: identifier, role: role, user: user, added: added))], ())
        })
        try await store.catalog.waitDurable(version)
    }
}

extension Database {
    /// The security catalog to check this database's calls against: nil for a private or shared database (its
    /// user may do anything in it) and for the developer.
    var security: SecurityCatalog? {
        guard id.scope == .public, !SecurityCatalog.isDeveloper(access) else { return nil }
        return store.catalog.snapshot().security
    }

    var schemaKey: SchemaKey { SchemaKey(container: id.container, environment: id.environment) }

    /// Throws `permissionFailure` unless this handle's caller may read a public record of `recordType` created
    /// by `creator`.
    func requireReadable(_ name: String, recordType: String, creator: String?, in security: SecurityCatalog?) throws {
        guard let security else { return }
        guard security.permissions(schemaKey, recordType: recordType, for: access, creator: creator).contains(.read) else {
            throw CloudletError(
                .permissionFailure, "\(access) may not read record '\(name)' of type '\(recordType)' in the public database")
        }
    }

    /// Which records of `recordType` this handle's caller may read (all of them outside the public database).
    func readScope(_ recordType: String, in security: SecurityCatalog?) -> ReadScope {
        security?.readScope(schemaKey, recordType: recordType, for: access) ?? .all
    }
}
