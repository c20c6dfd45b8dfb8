import CloudletConcurrency
import CloudletCore

extension Container {
    /// Adds index flags to a field of the development schema (production changes only by ``deploySchema()``). The
    /// indexes are built in the background over the records already there; ``CloudletStore/waitForIndexBuilds()``
    /// waits for them.
    /// - Throws: `invalidArguments` naming the type or field if the schema lacks it, or if the flags do not fit the
    ///   field's type (SEARCHABLE on a non-string, SORTABLE on a list, anything on an ASSET).
    public func addIndexes(_ flags: IndexFlags, recordType: String, field: String) async throws {
        try store.checkOpen()
        let key = SchemaKey(container: identifier, environment: .development)
        let store = self.store
        try await ThreadBridge.offload {
            try store.changeSchema { schema in
                (try schema.indexAdditions(key, recordType: recordType, field: field, flags), ())
            }
        }
    }
}
