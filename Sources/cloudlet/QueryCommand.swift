import CloudletWire
import Cloudlet
import CloudletCommandLine
import CloudletCore
import CloudletServer
import Foundation

/// `cloudlet query`: runs a query against a store directory, or explains its plan.
enum QueryCommand {
    static let help = """
        USAGE: cloudlet query --data DIR --container ID --type T [--predicate P] [--sort F[:desc],…] [--limit N]
                              [--database public|private|shared] [--user U] [--environment E]
                              [--zone Z | --zone-wide] [--continue MARKER] [--explain] [--count] [--json]

        Queries records of type T. P is an NSPredicate-style format string, e.g.
          "kind == 'book' AND price < 20", "self CONTAINS 'coffee'", "tags CONTAINS 'red' OR price BETWEEN {1, 5}",
          "modificationDate > CAST('2025-01-01T00:00:00Z', 'NSDate')".
        Without --predicate every record of the type matches.

        OPTIONS:
          --sort F[:desc],…   sort descriptors (ascending unless :desc); ties by record name
          --limit N           results per page (default and maximum 200); a continuation marker is printed when
                              more follow: pass it to --continue
          --database D        public (default), private or shared; --user U names the owner of a private or
                              shared database: a user's name (`cloudlet user add NAME`) or userRecordName
          --environment E     development (default) or production
          --zone Z            the zone to search (default _defaultZone); --zone-wide searches every zone
          --explain           print how the query would run (index, candidates, in-memory sort) without running it
          --count             print the number of matching records (with --explain: how the count would run)
          --json              records (or the plan) as JSON, in the shape of CloudKit's records/query response

        In development a query on a field without the index it needs adds the index (as CloudKit does); in
        production it fails naming the field.
        """

    static func run(_ args: [String]) async throws {
        let o = try CommandLineOptions(
            args,
            valued: [
                "--data", "--container", "--type", "--predicate", "--sort", "--limit", "--database", "--user",
                "--environment", "--zone", "--continue",
            ], flags: ["--zone-wide", "--explain", "--count", "--json"], positional: true, help: help)
        guard o.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(o.positional[0])'") }
        let type = try o.required("--type", "T")
        let predicate: CloudletCore.Predicate
        do { predicate = try o["--predicate"].map { try CloudletCore.Predicate(format: $0) } ?? .all } catch let e as CloudletError where e.cause is PredicateSyntaxError {
            throw UsageError(message: e.message)
        }
        let sorts = try (o["--sort"] ?? "").split(separator: ",").map { spec -> QuerySort in
            let parts = spec.split(separator: ":").map { String($0).trimmingCharacters(in: .whitespaces) }
            guard parts.count <= 2, let field = parts.first, !field.isEmpty else {
                throw UsageError(message: "bad --sort '\(spec)': use FIELD or FIELD:asc or FIELD:desc")
            }
            switch parts.count == 2 ? parts[1].lowercased() : "asc" {
            case "asc": return QuerySort(field)
            case "desc": return QuerySort(field, ascending: false)
            default: throw UsageError(message: "bad --sort '\(spec)': the direction is asc or desc")
            }
        }
        let limit = try o.integer("--limit", in: 1...Int.max)
        let scope = try o["--database"].map { s -> DatabaseScope in
            guard let d = DatabaseScope(rawValue: s) else {
                throw UsageError(message: "--database must be public, private or shared, not '\(s)'")
            }
            return d
        } ?? .public
        let env = try StoreOptions.environment(o)
        if o.has("--zone-wide") && o["--zone"] != nil { throw UsageError(message: "use --zone or --zone-wide, not both") }

        let store = try await StoreOptions.open(o)
        defer { try? store.closeNow() }
        let container = try StoreOptions.container(o, store)
        // A user as `cloudlet user add` named them, or by their userRecordName.
        var owner = o["--user"] ?? defaultOwnerName
        if let name = o["--user"] {
            if let user = try await Credentials(store: store).user(named: name) {
                owner = user.userRecordName
            } else if scope != .public {
                ServerConfiguration.standardError("note: no user is named '\(name)': reading the database of the owner with that record name")
            }
        }
        let db = try container.database(scope, user: owner, environment: env)
        let query = Query(recordType: type, predicate: predicate, sortDescriptors: sorts)
        let zone = ZoneID(zoneName: o["--zone"] ?? ZoneID.defaultZoneName)
        let zoneWide = o.has("--zone-wide")
        do {
            if o.has("--explain") {
                let plan = o.has("--count")
                    ? try await db.explainCount(query, zoneID: zone, zoneWide: zoneWide)
                    : try await db.explain(query, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit)
                if o.has("--json") { printJSON { QueryPlanCoding.write(plan, to: &$0) } } else { print(plan) }
            } else if o.has("--count") {
                let n = try await db.count(query, zoneID: zone, zoneWide: zoneWide)
                if o.has("--json") { printJSON { w in w.object { $0.member("count", Int64(n)) } } } else { print(n) }
            } else {
                let page = try await db.query(
                    query, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit,
                    continuationMarker: o["--continue"].map(QueryCursor.init(marker:)))
                if o.has("--json") {
                    printJSON { w in
                        w.object { w in
                            w.key("records")
                            w.array { w in
                                for r in page.records { RecordCoding.write(r, to: &w, desiredKeys: nil, numbersAsStrings: false) }
                            }
                            if let c = page.cursor { w.member("continuationMarker", c.marker) }
                        }
                    }
                } else {
                    for r in page.records { print(RecordText.line(r)) }
                    print("(\(page.records.count) record\(page.records.count == 1 ? "" : "s"))")
                    if let c = page.cursor { print("more: --continue \(c.marker)") }
                    for n in page.plan.notes { print("note: \(n)") }
                }
            }
        } catch let e as CloudletError where e.code == .invalidArguments {
            try? store.closeNow()
            CLI.fail(e.message, code: 65)
        }
    }

    /// Prints what `write` writes (CloudKit Web Services' shapes, as the server sends them).
    static func printJSON(_ write: (inout JSONWriter) -> Void) {
        var w = JSONWriter()
        write(&w)
        print(String(decoding: w.bytes, as: UTF8.self))
    }
}

/// Records as one line of text.
enum RecordText {
    static func line(_ r: Record) -> String {
        let fields = r.fields.keys.sorted().map { "\($0)=\(text(r.fields[$0]!))" }.joined(separator: " ")
        return "\(r.recordName)\(r.id.zoneID.isDefault ? "" : "@\(r.id.zoneID.zoneName)")  \(fields)"
    }

    static func text(_ v: FieldValue) -> String {
        switch v {
        case .string(let s): return "\"\(s)\""
        case .int64(let i): return "\(i)"
        case .double(let d): return "\(d)"
        case .bytes(let b): return "<\(b.count) bytes>"
        case .timestamp(let t):
            return ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(t) / 1000))
        case .location(let l): return "(\(l.latitude), \(l.longitude))"
        case .reference(let r): return "→\(r.recordName)"
        case .asset(let a): return "asset:\(a.fileChecksum.prefix(12))"
        case .list(_, let items): return "[" + items.map(text).joined(separator: ", ") + "]"
        }
    }
}
