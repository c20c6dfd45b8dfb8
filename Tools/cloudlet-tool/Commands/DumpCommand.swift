import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum DumpCommand: Command {
    static let help = """
        USAGE: cloudlet-tool dump --data DIR [--catalog] [--log | --frames] [filters] [--tombstones] [--json]

        Prints records, one per line (JSON lines with --json, in the export format plus partition, lsn and index):
          (default)   the current version of every record, in log order;
          --log       every mutation in the log, superseded ones included, each marked live or dead — also on a
                      store that does not open (problems are reported on stderr);
          --frames    every frame: position, LSN, epoch, sizes, compression, mutations (live ones).
        With --catalog, the catalog instead of the records: every record type (fields, index flags) and
        subscription; with --log or --frames, the catalog's log (its entries are marked "catalog"). Read-only.

        OPTIONS
          --log             Every mutation of the log.
          --frames          Every frame.
          --tombstones      Show deletions (record tombstones; zone deletions with --log) too.
          --catalog         The catalog (schemas, subscriptions) or, with --log/--frames, its log.
        \(FilterOptions.help)
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(FilterOptions.valued),
            flags: Common.flags.union(["--log", "--frames", "--tombstones", "--catalog"]), help: help)
        let common = try Common(o)
        var filter = try FilterOptions.parse(o)
        filter.includeTombstones = o.has("--tombstones")
        if o.has("--log") && o.has("--frames") { throw UsageError(message: "--log and --frames exclude each other") }
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }

        if o.has("--catalog") { return try catalog(o, common: common, filter: filter, inspector: inspector) }

        if o.has("--log") || o.has("--frames") {
            // Liveness when the store opens; the log alone otherwise.
            let store = try? inspector.openStore()
            defer { try? store?.closeNow() }
            let states = store.map { inspector.states(of: $0) }
            return try printLog(o, common: common) { frames, mutations in
                try inspector.dumpLog(
                    filter: filter, states: states, frames: frames, mutations: mutations, progress: Progress.handler)
            }
        }

        let store = try inspector.openStore()
        defer { try? store.closeNow() }
        try inspector.forEachCurrent(in: store, filter: filter, progress: Progress.handler) { r in
            if common.json {
                let extra: [(String, JSONValue?)] = [("partition", .int(r.partition)), ("lsn", .int(r.lsn)), ("index", .int(r.index))]
                if let record = r.record {
                    Out.line(ExportLines.record(record, zone: r.zone, extra: extra))
                } else {
                    Out.json(
                        .members(
                            [("kind", .string("tombstone"))] + ExportLines.location(r.zone) + extra + [
                                ("recordName", .string(r.recordName)), ("recordType", .string(r.recordType)),
                                ("deleted", .int(r.time)),
                            ]))
                }
            } else if let record = r.record {
                Out.line("\(r.zone.canonicalName) \(record.recordName) \(record.recordType) tag \(record.changeTag ?? "-") LSN \(r.lsn).\(r.index) \(fields(record))")
            } else {
                Out.line("\(r.zone.canonicalName) \(r.recordName) \(r.recordType) DELETED LSN \(r.lsn).\(r.index)")
            }
        }
        return 0
    }

    /// `--frames` / `--log` of a partition's or the catalog's log: `dump` walks it, handing each frame and mutation to
    /// the printers asked for; its findings go to stderr, and an error among them exits 65.
    static func printLog(
        _ o: CommandLineOptions, common: Common,
        _ dump: (((DumpedFrame) throws -> Void)?, ((DumpedMutation) throws -> Void)?) throws -> [VerifyReport.Finding]
    ) throws -> Int32 {
        let findings = try dump(
            o.has("--frames") ? { f in common.json ? Out.json(json(f)) : Out.line(text(f)) } : nil,
            o.has("--log") ? { m in common.json ? Out.json(json(m)) : Out.line(text(m)) } : nil)
        Out.flush()
        for f in findings { warn(VerifyCommand.describe(f)) }
        return findings.contains { $0.severity == .error } ? 65 : 0
    }

    /// `dump --catalog`: the catalog's entries, or with --log/--frames its log.
    static func catalog(_ o: CommandLineOptions, common: Common, filter: InspectionFilter, inspector: StoreInspector) throws -> Int32 {
        if o.has("--log") || o.has("--frames") {
            return try printLog(o, common: common) { frames, mutations in
                try inspector.dumpCatalogLog(filter: filter, frames: frames, mutations: mutations, progress: Progress.handler)
            }
        }
        let store = try inspector.openStore()
        defer {
            do { try store.closeNow() } catch { warn("closing the store: \(error)") }
        }
        for e in inspector.catalogEntries(in: store, container: filter.container) {
            if let t = e.recordType {
                guard filter.recordType == nil || filter.recordType == t.name else { continue }
                let fields = t.fields.keys.sorted().map { f in
                    "\(f) \(t.fields[f]!)" + (t.indexes[f].map { $0.isEmpty ? "" : " \($0)" } ?? "")
                }
                let systemFlags = t.indexes.keys.filter { t.fields[$0] == nil }.sorted().map { "\($0) \(t.indexes[$0]!)" }
                let composites = t.composites.keys.sorted().map { "INDEX \(t.composites[$0]!)" }
                if common.json {
                    Out.json(
                        .members([
                            ("kind", .string(e.kind.rawValue)), ("container", .string(e.container)),
                            ("environment", .string(e.environment.rawValue)), ("recordType", .string(t.name)),
                            ("fields", .members(t.fields.keys.sorted().map { ($0, .string("\(t.fields[$0]!)")) })),
                            ("indexes", .members(t.indexes.keys.sorted().map { ($0, .string("\(t.indexes[$0]!)")) })),
                            ("compositeIndexes", .members(t.composites.keys.sorted().map { ($0, .string("\(t.composites[$0]!)")) })),
                        ]))
                } else {
                    Out.line("type \(e.container)/\(e.environment.rawValue) \(t.name) (\((fields + systemFlags + composites).joined(separator: ", ")))")
                }
            } else if let sub = e.subscription {
                guard filter.owner == nil || filter.owner == e.owner else { continue }
                let scope = e.scope?.rawValue ?? "", owner = e.owner ?? "", user = e.user ?? ""
                if common.json {
                    Out.json(
                        .members([
                            ("kind", .string(e.kind.rawValue)), ("container", .string(e.container)),
                            ("environment", .string(e.environment.rawValue)), ("scope", .string(scope)),
                            ("owner", .string(owner)), ("user", .string(user)), ("subscriptionID", .string(sub.id)),
                            ("subscription", .string("\(sub.kind)")),
                        ]))
                } else {
                    Out.line("subscription \(e.container)/\(e.environment.rawValue)/\(scope)/\(owner) \(user) \(sub.id): \(sub.kind)")
                }
            }
        }
        return 0
    }

    /// `p3`, or `catalog` for the catalog's log.
    static func logName(_ partition: Int) -> String {
        partition == VerifyReport.catalogPartition ? "catalog" : "p\(partition)"
    }

    static func fields(_ r: Record) -> String {
        "{" + r.fields.sorted { $0.key < $1.key }.map { "\($0.key): \(ExportLines.valueText($0.value))" }.joined(separator: ", ") + "}"
    }

    static func text(_ f: DumpedFrame) -> String {
        let live = f.liveMutations.map { " (\($0) live)" } ?? ""
        return "\(logName(f.partition)) \(f.segment)@\(f.offset)+\(f.length) LSN \(f.lsn) epoch \(f.epoch) type \(f.type)\(f.compressed ? " lz4" : "") payload \(f.payloadBytes) B, \(f.mutations) mutation(s)\(live) \(f.zones.map(\.canonicalName).joined(separator: " "))"
    }

    static func json(_ f: DumpedFrame) -> JSONValue {
        .members([
            "partition": .int(f.partition), "segment": .string(f.segment), "offset": .int(f.offset), "length": .int(f.length),
            "lsn": .int(f.lsn), "epoch": .int(f.epoch), "type": .int(f.type), "compressed": .bool(f.compressed),
            "payloadBytes": .int(f.payloadBytes), "mutations": .int(f.mutations),
            "liveMutations": f.liveMutations.map { .int($0) }, "zones": .array(f.zones.map { .string($0.canonicalName) }),
        ])
    }

    static func text(_ m: DumpedMutation) -> String {
        let live = m.live.map { $0 ? " live" : " dead" } ?? ""
        var s = "\(logName(m.partition)) LSN \(m.lsn).\(m.index) \(m.segment)@\(m.offset) \(m.kind.rawValue)\(live)"
        if let z = m.zone { s += " \(z.canonicalName)" }
        if let n = m.recordName { s += " \(n)" }
        if let t = m.recordType, m.kind != .schemaField { s += " \(t)" }
        if let r = m.record { s += " tag \(r.changeTag ?? "-") \(fields(r))" }
        if let d = m.detail { s += " \(d)" }
        return s
    }

    static func json(_ m: DumpedMutation) -> JSONValue {
        var members: [(String, JSONValue?)] = [
            ("kind", .string(m.kind.rawValue)), ("partition", .int(m.partition)), ("lsn", .int(m.lsn)),
            ("index", .int(m.index)), ("epoch", .int(m.epoch)), ("segment", .string(m.segment)), ("offset", .int(m.offset)),
        ]
        if let live = m.live { members.append(("live", .bool(live))) }
        if let z = m.zone { members += ExportLines.location(z) }
        if let r = m.record, let z = m.zone {
            if case .object(let rec)? = try? JSONValue.parse(ExportLines.record(r, zone: z)) {
                let keep = ["recordName", "recordType", "recordChangeTag", "created", "modified", "fields"]
                members += keep.map { ($0, rec[$0]) }
            }
        } else {
            if let n = m.recordName { members.append(("recordName", .string(n))) }
            if let t = m.recordType { members.append(("recordType", .string(t))) }
        }
        if let t = m.time { members.append(("time", .int(t))) }
        if let d = m.detail { members.append(("detail", .string(d))) }
        return .members(members)
    }
}
