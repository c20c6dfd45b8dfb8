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
        // Split by UTF-8 bytes: by `Character`, the split cost ~30 k instructions a request (callgrind).
        let parts = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst(2)
            .map { Substring($0) }[...]  // after "", "database"
        guard parts.count >= 5 else {
            throw APIError.badRequest(
                "path '\(path)' is incomplete: expected /database/1/{container}/{environment}/{database}/{operation}")
        }
        var it = parts.makeIterator()
        let version = it.next()!
        guard version == "1" else {
            throw APIError.badRequest("protocol version '\(version)' in the path is not supported; use /database/1/")
        }
        container = String(it.next()!)  // validated by CloudletStore.container(_:)
        let env = it.next()!
        guard let e = Environment(rawValue: String(env)) else {
            throw APIError.badRequest("environment '\(env)' is not 'development' or 'production'")
        }
        environment = e
        let db = it.next()!
        if db == "tokens" {
            scope = .private
            operation = String(Substring(path.utf8[parts[parts.startIndex + 3].startIndex...]))
            return
        }
        guard let s = DatabaseScope(rawValue: String(db)) else {
            throw APIError.badRequest("database '\(db)' is not 'public', 'private' or 'shared'")
        }
        scope = s
        // The rest of the path as it is (its segments joined again cost ~2 % of a lookup's CPU, perf).
        operation = String(Substring(path.utf8[parts[parts.startIndex + 4].startIndex...]))
    }
}
