import CloudletCore

/// A container (`iCloud.com.example.app`): two environments, each with a public database, a private database
/// per user and a shared database per user, and a schema.
public struct Container: Sendable {
    public let identifier: String
    let store: CloudletStore

    /// The public database: one per container and environment, readable by everyone. `user` is who writes.
    public func publicDatabase(user: String = defaultOwnerName, environment: Environment = .development) -> Database {
        Database(id: DatabaseID(container: identifier, environment: environment, scope: .public, owner: defaultOwnerName),
                 user: user, store: store)
    }

    /// The private database of `user`: only that user's records and custom zones.
    public func privateDatabase(user: String = defaultOwnerName, environment: Environment = .development) throws
        -> Database
    {
        try Names.validateUser(user)
        return Database(
            id: DatabaseID(container: identifier, environment: environment, scope: .private, owner: user), user: user,
            store: store)
    }

    /// The shared database of `user`: zones other users shared with them.
    public func sharedDatabase(user: String = defaultOwnerName, environment: Environment = .development) throws
        -> Database
    {
        try Names.validateUser(user)
        return Database(
            id: DatabaseID(container: identifier, environment: environment, scope: .shared, owner: user), user: user,
            store: store)
    }

    /// The database of `scope` for `user`.
    public func database(_ scope: DatabaseScope, user: String = defaultOwnerName, environment: Environment = .development)
        throws -> Database
    {
        switch scope {
        case .public: publicDatabase(user: user, environment: environment)
        case .private: try privateDatabase(user: user, environment: environment)
        case .shared: try sharedDatabase(user: user, environment: environment)
        }
    }

    /// The record types of an environment's schema, sorted by name.
    public func schema(environment: Environment) -> [RecordTypeSchema] {
        let types = store.schemaSnapshot().types[SchemaKey(container: identifier, environment: environment)] ?? [:]
        return types.values.sorted { $0.name < $1.name }
    }

    /// Promotes the development schema to production: adds every record type, field and index flag production
    /// lacks, and builds the new indexes over production's records in the background. Additive only: a field whose
    /// type differs between the two, or anything production has that development lacks, is refused (naming it) and
    /// nothing changes.
    /// - Returns: how many types, fields and index changes were added.
    @discardableResult
    public func deploySchema() async throws -> Int {
        try store.checkOpen()
        let store = self.store, identifier = self.identifier
        return try await BlockingIO.run {
            try store.changeSchema { schema in
                let m = try schema.deployment(container: identifier)
                return (m, m.count)
            }
        }
    }

    /// Resets the development schema to production's: types, fields and index flags only development has are
    /// forgotten (records are kept; their development-only indexes are dropped).
    public func resetDevelopmentSchema() async throws {
        try store.checkOpen()
        let store = self.store, identifier = self.identifier
        try await BlockingIO.run {
            try store.changeSchema { _ in ([.schemaReset(container: identifier)], ()) }
        }
    }
}
