import Cloudlet

/// The field types of a container environment's schema, read at most once per request and only when a field
/// value comes without a `type`.
struct SchemaHints {
    let container: Container
    let environment: Environment
    private var types: [String: [String: FieldType]]?

    init(container: Container, environment: Environment) {
        self.container = container
        self.environment = environment
    }

    /// The type of `field` in `recordType`, if the schema has it.
    mutating func type(of field: String, in recordType: String) -> FieldType? {
        if types == nil {
            var t: [String: [String: FieldType]] = [:]
            for rt in container.schema(environment: environment) { t[rt.name] = rt.fields }
            types = t
        }
        return types![recordType]?[field]
    }
}
