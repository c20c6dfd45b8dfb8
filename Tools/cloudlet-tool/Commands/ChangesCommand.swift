import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import Foundation

enum ChangesCommand: Command {
    static let help = """
        USAGE: cloudlet-tool changes --data DIR --container ID --zone NAME [--since TOKEN] [options]

        Replays a zone's change feed offline, exactly as a client fetching `changes/zone` would get it (the engine's
        zoneChanges on the store opened read-only): each changed record once at its latest version and each
        deletion, in commit order, then the token to continue from. Follows every page unless --limit is given.
        Read-only.

        OPTIONS
          --container ID    The container (required).
          --zone NAME       The zone (required; _defaultZone for the default zone).
          --env ENV         development (default) or production.
          --scope SCOPE     private (default), public or shared.
          --owner USER      The database's owner (private and shared; default __defaultOwner__).
          --since TOKEN     A change token (base64) a previous fetch returned; none: from the start.
          --limit N         Fetch one page of at most N changes (1…200).
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(["--container", "--zone", "--env", "--scope", "--owner", "--since", "--limit"]),
            flags: Common.flags, help: help)
        let common = try Common(o)
        let container = try o.required("--container", "ID")
        let zone = try o.required("--zone", "NAME")
        guard let env = Environment(rawValue: o["--env"] ?? "development") else { throw UsageError(message: "--env must be development or production") }
        guard let scope = DatabaseScope(rawValue: o["--scope"] ?? "private") else {
            throw UsageError(message: "--scope must be public, private or shared")
        }
        var token: ChangeToken?
        if let t = o["--since"] {
            guard let parsed = ChangeToken(base64: t) else { throw UsageError(message: "--since is not a base64 change token") }
            token = parsed
        }
        let limit = try o.int("--limit")
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }
        let store = try inspector.openStore()
        defer { try? store.closeNow() }
        let owner = o["--owner"] ?? defaultOwnerName
        let db: Database
        if container == CloudletStore.systemContainerIdentifier {
            db = store.systemDatabase()
        } else {
            db = try store.container(container).database(scope, user: owner, environment: env)
        }
        let zoneID = ZoneID(zoneName: zone, ownerName: owner)
        var count = 0
        while true {
            let page = try await db.zoneChanges(zoneID, since: token, resultsLimit: limit ?? Database.maxChangesPerPage)
            for change in page.changes {
                count += 1
                switch change {
                case .changed(let r):
                    let key = ZoneKey(database: db.id, zoneName: zone)
                    if common.json {
                        Out.line(ExportLines.record(r, zone: key, extra: [("change", .string("changed"))]))
                    } else {
                        Out.line("changed \(r.recordName) \(r.recordType) tag \(r.changeTag ?? "-") \(DumpCommand.fields(r))")
                    }
                case .deleted(let id, let type):
                    if common.json {
                        Out.json(.members([("change", .string("deleted")), ("recordName", .string(id.recordName)), ("recordType", .string(type))]))
                    } else {
                        Out.line("deleted \(id.recordName) \(type)")
                    }
                }
            }
            token = page.token
            if !page.moreComing || limit != nil {
                if common.json {
                    Out.json(.members([("token", .string(page.token.base64)), ("moreComing", .bool(page.moreComing)), ("changes", .int(count))]))
                } else {
                    Out.line("token \(page.token.base64)\(page.moreComing ? " (more coming)" : "") — \(count) change(s)")
                }
                return 0
            }
        }
    }
}
