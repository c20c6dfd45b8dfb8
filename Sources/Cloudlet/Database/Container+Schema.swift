import CloudletConcurrency
import CloudletCore

extension Container {
    /// Adds index flags to a field of the development schema (production changes only by ``deploySchema()``). The
    /// indexes are built in the background over the records already there; ``CloudletStore/waitForIndexBuilds()``
    /// waits for them.
    /// - Throws: `invalidArguments` naming the type or field if the schema lacks it, or if the flags do not fit the
    ///   field's type (SEARCHABLE on a non-string, SORTABLE on a list, anything on an ASSET).
    public func addIndexes(_ flags: IndexFlags, recordType: String, field: String) async throws {
        try await changeDevelopmentSchema { schema, key in try schema.indexAdditions(key, recordType: recordType, field: field, flags) }
    }

    /// Declares a composite index on a record type of the development schema (a Cloudlet extension; the schema
    /// language's `INDEX name (…)`), built in the background over the records already there like any new index.
    /// - Throws: `invalidArguments` naming the index and field: a type or field the schema lacks, a field whose type
    ///   does not order (``CompositeIndex/componentTypes``), fewer than 2 or more than 8 fields, a field twice, an
    ///   invalid name, or a name the type already has for another index.
    public func addCompositeIndex(_ index: CompositeIndex, recordType: String) async throws {
        try await changeDevelopmentSchema { schema, key in try schema.compositeAddition(key, recordType: recordType, index) }
    }

    /// Removes a composite index from a record type of the development schema; every partition drops its keys.
    /// - Throws: `invalidArguments` if the type has no index of that name.
    public func removeCompositeIndex(named name: String, recordType: String) async throws {
        try await changeDevelopmentSchema { schema, key in try schema.compositeRemoval(key, recordType: recordType, index: name) }
    }

    private func changeDevelopmentSchema(_ plan: @escaping @Sendable (SchemaCatalog, SchemaKey) throws -> [Mutation]) async throws {
        try store.checkOpen()
        let key = SchemaKey(container: identifier, environment: .development)
        let store = self.store
        try await ThreadBridge.offload {
            try store.changeSchema { schema in (try plan(schema, key), ()) }
        }
    }
}
