import Cloudlet
import CloudletCore
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
                              shared database
          --environment E     development (default) or production
          --zone Z            the zone to search (default _defaultZone); --zone-wide searches every zone
          --explain           print how the query would run (index, candidates, in-memory sort) without running it
          --count             print the number of matching records
          --json              records (or the plan) as JSON, in the shape of CloudKit's records/query response

        In development a query on a field without the index it needs adds the index (as CloudKit does); in
        production it fails naming the field.
        """

    static func run(_ args: [String]) async throws {
        let o = try Options(
            args,
            valued: [
                "--data", "--container", "--type", "--predicate", "--sort", "--limit", "--database", "--user",
                "--environment", "--zone", "--continue",
            ], flags: ["--zone-wide", "--explain", "--count", "--json"], help: help)
        guard o.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(o.positional[0])'") }
        guard let type = o["--type"] else { throw UsageError(message: "--type T is required") }
        let predicate: CloudletCore.Predicate
        do { predicate = try o["--predicate"].map { try CloudletCore.Predicate(format: $0) } ?? .all } catch let e as PredicateSyntaxError {
            throw UsageError(message: e.description)
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
        let limit = try o["--limit"].map { s -> Int in
            guard let n = Int(s), n >= 1 else { throw UsageError(message: "--limit needs a number ≥ 1, not '\(s)'") }
            return n
        }
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
        let db = try container.database(scope, user: o["--user"] ?? defaultOwnerName, environment: env)
        let query = Query(recordType: type, predicate: predicate, sortDescriptors: sorts)
        let zone = ZoneID(zoneName: o["--zone"] ?? ZoneID.defaultZoneName)
        let zoneWide = o.has("--zone-wide")
        do {
            if o.has("--explain") {
                let plan = try await db.explain(query, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit)
                if o.has("--json") { try printJSON(RecordJSON.plan(plan)) } else { print(plan) }
            } else if o.has("--count") {
                let n = try await db.count(query, zoneID: zone, zoneWide: zoneWide)
                if o.has("--json") { try printJSON(["count": n]) } else { print(n) }
            } else {
                let page = try await db.query(
                    query, zoneID: zone, zoneWide: zoneWide, resultsLimit: limit,
                    continuationMarker: o["--continue"].map(QueryCursor.init(marker:)))
                if o.has("--json") {
                    var out: [String: Any] = ["records": page.records.map(RecordJSON.record)]
                    if let c = page.cursor { out["continuationMarker"] = c.marker }
                    try printJSON(out)
                } else {
                    for r in page.records { print(RecordJSON.line(r)) }
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

    static func printJSON(_ object: Any) throws {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        print(String(decoding: data, as: UTF8.self))
    }
}

/// Records and plans as JSON in CloudKit Web Services' shapes (`{value, type}` fields, timestamps in ms), and as
/// one-line text.
enum RecordJSON {
    static func record(_ r: Record) -> [String: Any] {
        var out: [String: Any] = [
            "recordName": r.recordName, "recordType": r.recordType,
            "zoneID": ["zoneName": r.id.zoneID.zoneName, "ownerRecordName": r.id.zoneID.ownerName],
            "fields": r.fields.mapValues { ["value": value($0), "type": $0.type.description] },
        ]
        if let tag = r.changeTag { out["recordChangeTag"] = tag }
        if let c = r.created { out["created"] = stamp(c) }
        if let m = r.modified { out["modified"] = stamp(m) }
        return out
    }

    static func stamp(_ s: RecordStamp) -> [String: Any] {
        ["timestamp": s.timestamp, "userRecordName": s.userRecordName, "deviceID": s.deviceID]
    }

    static func value(_ v: FieldValue) -> Any {
        switch v {
        case .string(let s): return s
        case .int64(let i): return i
        case .double(let d): return d
        case .bytes(let b): return Data(b).base64EncodedString()
        case .timestamp(let t): return t
        case .location(let l):
            var out: [String: Any] = ["latitude": l.latitude, "longitude": l.longitude]
            if let x = l.horizontalAccuracy { out["horizontalAccuracy"] = x }
            if let x = l.verticalAccuracy { out["verticalAccuracy"] = x }
            if let x = l.altitude { out["altitude"] = x }
            if let x = l.speed { out["speed"] = x }
            if let x = l.course { out["course"] = x }
            if let x = l.timestamp { out["timestamp"] = x }
            return out
        case .reference(let r): return ["recordName": r.recordName, "action": r.action.cloudKitName]
        case .asset(let a):
            var out: [String: Any] = ["fileChecksum": a.fileChecksum, "size": a.size]
            if let receipt = a.receipt { out["receipt"] = receipt }
            return out
        case .list(_, let items): return items.map(value)
        }
    }

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

    static func plan(_ p: QueryPlan) -> [String: Any] {
        [
            "zones": p.zones.map { z in
                [
                    "zoneName": z.zoneID.zoneName, "access": z.access, "indexedFields": z.indexedFields,
                    "candidates": z.candidates, "recordsOfType": z.recordsOfType, "order": z.order,
                    "sortedInMemory": z.sortedInMemory,
                ] as [String: Any]
            },
            "notes": p.notes,
        ]
    }
}
