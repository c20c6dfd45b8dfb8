import CloudletWire
import Cloudlet
import Testing

@testable import CloudletServer

/// `DatabasePath` parses a path segment by segment (issue 19: no array of slices per request); it must answer as the
/// split-based parser before it did, errors included. `reference(_:)` is that parser, kept here as the oracle.
@Suite struct DatabasePathTests {
    /// The parser as it was before (commit f0b8900): split the UTF-8 bytes by "/" into an array of slices.
    static func reference(_ path: String) throws -> DatabasePath {
        let parts = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst(2)
            .map { Substring($0) }[...]
        guard parts.count >= 5 else {
            throw APIError.badRequest(
                "path '\(path)' is incomplete: expected /database/1/{container}/{environment}/{database}/{operation}")
        }
        var it = parts.makeIterator()
        let version = it.next()!
        guard version == "1" else {
            throw APIError.badRequest("protocol version '\(version)' in the path is not supported; use /database/1/")
        }
        let container = String(it.next()!)
        let env = it.next()!
        guard let environment = Environment(rawValue: String(env)) else {
            throw APIError.badRequest("environment '\(env)' is not 'development' or 'production'")
        }
        let db = it.next()!
        if db == "tokens" {
            return DatabasePath(
                container: container, environment: environment, scope: .private,
                operation: String(Substring(path.utf8[parts[parts.startIndex + 3].startIndex...])))
        }
        guard let scope = DatabaseScope(rawValue: String(db)) else {
            throw APIError.badRequest("database '\(db)' is not 'public', 'private' or 'shared'")
        }
        return DatabasePath(
            container: container, environment: environment, scope: scope,
            operation: String(Substring(path.utf8[parts[parts.startIndex + 4].startIndex...])))
    }

    /// What a parse gave, comparable: the four parts, or the error's code and reason.
    static func outcome(_ parse: () throws -> DatabasePath) -> String {
        do {
            let p = try parse()
            return "ok \(p.container) | \(p.environment.rawValue) | \(p.scope.rawValue) | \(p.operation)"
        } catch let e as APIError {
            return "error \(e.serverErrorCode): \(e.reason)"
        } catch {
            return "other \(error)"
        }
    }

    static let paths: [String] = {
        let c = "iCloud.com.example.app"
        var paths = [
            "/database/1/\(c)/development/private/records/lookup",
            "/database/1/\(c)/production/public/records/modify",
            "/database/1/\(c)/development/shared/records/query",
            "/database/1/\(c)/development/private/zones/list",
            "/database/1/\(c)/development/private/",  // empty operation
            "/database/1/\(c)/development/private//",
            "/database/1/\(c)/development/private/records/lookup/",
            "/database/1/\(c)/development/private/a/b/c/d",
            "/database/1/\(c)/development/tokens/create",
            "/database/1/\(c)/development/tokens/register",
            "/database/1/\(c)/development/tokens/",
            "/database/1/\(c)/development/tokens",  // incomplete
            "/database/1/\(c)/development/private",  // incomplete
            "/database/1/\(c)/development/",
            "/database/1/\(c)/development",
            "/database/1/\(c)/",
            "/database/1/\(c)",
            "/database/1/",
            "/database/1",
            "/database/",
            "/database",
            "/database/2/\(c)/development/private/records/lookup",  // version
            "/database//\(c)/development/private/records/lookup",
            "/database/1.0/\(c)/development/private/records/lookup",
            "/database/1/\(c)/staging/private/records/lookup",  // environment
            "/database/1/\(c)/Development/private/records/lookup",
            "/database/1/\(c)//private/records/lookup",
            "/database/1/\(c)/development/secret/records/lookup",  // database
            "/database/1/\(c)/development//records/lookup",
            "/database/1/\(c)/development/PRIVATE/records/lookup",
            "/database/1//development/private/records/lookup",  // empty container (the engine's to refuse)
            "/database/1/a b/development/private/records/lookup",
            "/database/1/\(c)/development/private/récords/lööküp",  // non-ASCII
            "/database/1/ünïcode/development/public/x",
            "/database/1/\(c)/development/public/x\u{0}y",
        ]
        // Every prefix of a full path, and the full path with each byte dropped.
        let full = "/database/1/\(c)/development/private/records/lookup"
        for n in 0...full.utf8.count { paths.append(String(decoding: full.utf8.prefix(n), as: UTF8.self)) }
        for i in 0..<full.utf8.count {
            var bytes = Array(full.utf8)
            bytes.remove(at: i)
            paths.append(String(decoding: bytes, as: UTF8.self))
        }
        return paths
    }()

    @Test func answersAsTheSplitBasedParserDid() {
        var ok = 0
        for path in Self.paths where path.hasPrefix("/database") {
            let new = Self.outcome { try DatabasePath(path) }
            let old = Self.outcome { try Self.reference(path) }
            #expect(new == old, "\(path)")
            if new.hasPrefix("ok ") { ok += 1 }
        }
        // The list has paths of both kinds, so both answers were compared.
        #expect(ok >= 10 && ok < Self.paths.count)
    }

    @Test func partsOfAPath() throws {
        let p = try DatabasePath("/database/1/iCloud.a.b/production/shared/records/changes")
        #expect(p.container == "iCloud.a.b" && p.environment == .production && p.scope == .shared && p.operation == "records/changes")
        let t = try DatabasePath("/database/1/iCloud.a.b/development/tokens/create")
        #expect(t.scope == .private && t.operation == "tokens/create")
    }
}
