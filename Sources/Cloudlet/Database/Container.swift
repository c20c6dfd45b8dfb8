import CloudletConcurrency
import CloudletCore

/// A container (`iCloud.com.example.app`): two environments, each with a public database, a private database
/// per user and a shared database per user, and a schema.
public struct Container: Sendable {
    public let identifier: String
    let store: CloudletStore

    /// The database of `scope` as `access` sees it: the public one, or the caller's own private or shared one
    /// (a private or shared database needs a signed-in user). Every call through the handle is checked against
    /// `access` (``Database``'s one authorization rule).
    /// - Throws: `authenticationRequired` for a private or shared database without a user; `invalidArguments` for
    ///   a malformed user name.
    public func database(_ scope: DatabaseScope, access: AccessContext, environment: Environment = .development) throws
        -> Database
    {
        let owner: String
        switch scope {
        case .public: owner = defaultOwnerName
        case .private, .shared:
            guard let user = access.userRecordName else {
                throw CloudletError(.authenticationRequired, "the \(scope.rawValue) database needs a signed-in user, not \(access)")
            }
            try Names.validateUser(user)
            owner = user
        }
        return Database(
            id: DatabaseID(container: identifier, environment: environment, scope: scope, owner: owner), access: access,
            store: store)
    }

    /// The public database: one per container and environment, readable by everyone; `user` is who writes
    /// (`__defaultOwner__`: the embedding application itself).
    public func publicDatabase(user: String = defaultOwnerName, environment: Environment = .development) -> Database {
        Database(
            id: DatabaseID(container: identifier, environment: environment, scope: .public, owner: defaultOwnerName),
            access: .user(user), store: store)
    }

    /// The private database of `user`: only that user's records and custom zones.
    public func privateDatabase(user: String = defaultOwnerName, environment: Environment = .development) throws
        -> Database
    {
        try database(.private, access: .user(user), environment: environment)
    }

    /// The shared database of `user`: zones other users shared with them.
    public func sharedDatabase(user: String = defaultOwnerName, environment: Environment = .development) throws
        -> Database
    {
        try database(.shared, access: .user(user), environment: environment)
    }

    /// The database of `scope` for `user` (a signed-in user; see ``database(_:access:environment:)``).
    public func database(_ scope: DatabaseScope, user: String = defaultOwnerName, environment: Environment = .development)
        throws -> Database
    {
        try database(scope, access: .user(user), environment: environment)
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
        return try await ThreadBridge.offload {
            try store.changeCatalog { st in
                let m = try st.schema.deployment(container: identifier) + st.security.deployment(container: identifier)
                return (m, m.count)
            }
        }
    }

    /// Resets the development schema to production's: types, fields and index flags only development has are
    /// forgotten (records are kept; their development-only indexes are dropped).
    public func resetDevelopmentSchema() async throws {
        try store.checkOpen()
        let store = self.store, identifier = self.identifier
        try await ThreadBridge.offload {
            try store.changeSchema { _ in ([.schemaReset(container: identifier)], ()) }
        }
    }
}
