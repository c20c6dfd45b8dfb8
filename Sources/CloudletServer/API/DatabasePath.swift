import CloudletWire
import Cloudlet

/// The parts of `/database/1/{container}/{environment}/{database}/{operation}` — or of
/// `/database/1/{container}/{environment}/tokens/{create|register}`, Apple's documented path for tokens, which has no
/// database segment (the tokens belong to the user: read as the private database).
struct DatabasePath: Sendable {
    static let prefix = "/database/"

    var container: String
    var environment: Environment
    var scope: DatabaseScope
    /// What follows the database segment, e.g. `records/modify`.
    var operation: String

    init(container: String, environment: Environment, scope: DatabaseScope, operation: String) {
        self.container = container
        self.environment = environment
        self.scope = scope
        self.operation = operation
    }

    /// Parses a path that starts with ``prefix``. - Throws: `BAD_REQUEST` naming the segment that is wrong (the
    /// container's syntax is the engine's to check).
    init(_ path: String) throws {
        // Segment by segment over the UTF-8 bytes: by `Character` the split cost ~30 k instructions a request
        // (callgrind), and an array of the slices ~1 % of a lookup's server CPU (perf).
        var segments = Segments(rest: path.utf8[...])
        _ = segments.next()  // "" before the first slash
        _ = segments.next()  // "database"
        let version = segments.next(), container = segments.next(), env = segments.next()
        let databaseStart = segments.rest.startIndex
        let db = segments.next()
        // At least one segment after the database's: what is left is the operation.
        guard let version, let container, let env, let db, !segments.ended else {
            throw APIError.badRequest(
                "path '\(path)' is incomplete: expected /database/1/{container}/{environment}/{database}/{operation}")
        }
        guard version == "1" else {
            throw APIError.badRequest("protocol version '\(version)' in the path is not supported; use /database/1/")
        }
        self.container = String(container)  // validated by CloudletStore.container(_:)
        guard let e = Environment(rawValue: String(env)) else {
            throw APIError.badRequest("environment '\(env)' is not 'development' or 'production'")
        }
        environment = e
        if db == "tokens" {
            scope = .private
            operation = String(Substring(path.utf8[databaseStart...]))
            return
        }
        guard let s = DatabaseScope(rawValue: String(db)) else {
            throw APIError.badRequest("database '\(db)' is not 'public', 'private' or 'shared'")
        }
        scope = s
        // The rest of the path as it is (its segments joined again cost ~2 % of a lookup's CPU, perf).
        operation = String(Substring(segments.rest))
    }

    /// The segments of a path, one by one. A struct, not a nested function: captured variables put the state in a
    /// heap box behind dynamic exclusivity checks, which cost more than the split it replaces (perf).
    private struct Segments {
        var rest: Substring.UTF8View
        /// The last segment was returned: nothing is left, not even an empty segment.
        var ended = false

        /// The next segment (empty between two slashes, or after a trailing one), nil once none is left.
        mutating func next() -> Substring? {
            guard !ended else { return nil }
            guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else {
                ended = true
                return Substring(rest)
            }
            defer { rest = rest[rest.index(after: slash)...] }
            return Substring(rest[..<slash])
        }
    }
}
