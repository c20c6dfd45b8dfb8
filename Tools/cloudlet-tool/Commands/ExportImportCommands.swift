import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum ExportCommand: Command {
    static let help = """
        USAGE: cloudlet-tool export --data DIR [--output FILE] [--assets DIR] [filters]

        Writes the store's content as JSON lines, for backups and migrations: a header line, then the schema of each
        exported container (both environments), the custom zones, and every current record with all its fields
        (values typed as in CloudKit Web Services: {"type": "INT64", "value": 42}), created/modified stamps and
        change tag. `cloudlet-tool import` reads it back. Shares (`cloudkit.share` records) are not exported: they
        grant this server's users access. Read-only.

        OPTIONS
          --output FILE     Write to FILE (replaced when complete) instead of stdout.
          --assets DIR      Also copy the asset files the exported records reference into DIR (created if missing),
                            one file per content named by its SHA-256; the lines carry only checksums and sizes.
        \(FilterOptions.help)
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(FilterOptions.valued).union(["--output", "--assets"]), flags: Common.flags,
            help: help)
        let common = try Common(o)
        let filter = try FilterOptions.parse(o)
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }
        let store = try inspector.openStore()
        defer { try? store.closeNow() }
        let output = o["--output"]
        var replacement: FileReplacement?
        if let output {
            do throws(FileSystemError) { replacement = try FileReplacement(replacing: output) } catch {
                throw CloudletError.io("cannot create \(output)\(FileReplacement.temporarySuffix)", errno: error.errno)
            }
            Out.file = replacement?.file
        }
        Out.json(
            .members([
                ("kind", .string("store")), ("format", .string("cloudlet-export")), ("version", .int(1)),
                ("storeID", .string(inspector.metadata.storeID)),
                ("exported", .int(Int64(Date().timeIntervalSince1970 * 1000))),
            ]))
        for s in inspector.schema(in: store, container: filter.container) where filter.environment == nil || filter.environment == s.environment {
            for t in s.types {
                Out.json(
                    .members([
                        ("kind", .string("schema")), ("container", .string(s.container)),
                        ("environment", .string(s.environment.rawValue)), ("recordType", .string(t.name)),
                        ("fields", .object(t.fields.mapValues { .string($0.description) })),
                    ]))
            }
        }
        var zones = 0
        for z in inspector.zones(in: store, filter: filter) where z.zone.zoneName != ZoneID.defaultZoneName {
            Out.json(.members([("kind", .string("zone"))] + ExportLines.location(z.zone)))
            zones += 1
        }
        var records = 0
        var filter2 = filter
        filter2.includeTombstones = false
        let assetsDir = o["--assets"]
        if let assetsDir { try FileManager.default.createDirectory(atPath: assetsDir, withIntermediateDirectories: true) }
        var copied: Set<String> = []
        var missing: Set<String> = []
        try inspector.forEachCurrent(in: store, filter: filter2, progress: Progress.handler) { r in
            // Shares (cloudkit.share records) are access control between this server's users: not exported.
            guard let record = r.record, record.recordType != Share.recordType else { return }
            Out.line(ExportLines.record(record, zone: r.zone))
            records += 1
            guard let assetsDir else { return }
            for asset in record.fields.values.flatMap(\.assets) where !copied.contains(asset.fileChecksum) {
                guard store.assets.exists(asset.fileChecksum) else {
                    missing.insert(asset.fileChecksum)
                    continue
                }
                let target = assetsDir + "/" + asset.fileChecksum
                if !FileManager.default.fileExists(atPath: target) {
                    try FileManager.default.copyItem(atPath: store.assets.path(of: asset.fileChecksum), toPath: target)
                }
                copied.insert(asset.fileChecksum)
            }
        }
        Out.flush()
        if let replacement {
            Out.file = nil
            do throws(FileReplacementError) { try replacement.commit() } catch {
                throw CloudletError.io("cannot replace \(replacement.path): \(error)")
            }
        }
        Progress.clear()
        warn("exported \(records) record(s) and \(zones) custom zone(s)\(output.map { " to \($0)" } ?? "")")
        if let assetsDir { warn("copied \(copied.count) asset file(s) to \(assetsDir)") }
        if !missing.isEmpty { warn("warning: \(missing.count) referenced asset file(s) are missing from the store (see `verify`)") }
        return 0
    }
}

enum ImportCommand: Command {
    static let help = """
        USAGE: cloudlet-tool import --data DIR [--input FILE] [--assets DIR] [--partitions N]

        Loads JSON lines written by `cloudlet-tool export` into a stopped store (created if DIR holds none): schema
        lines add record types and fields, zone lines create custom zones, record lines save records — replacing a
        record of the same name — with their fields and created/modified stamps. Each record gets a new change tag
        (a tag from another store could collide with one of this store's). Lines of one zone are committed in
        batches; the import stops at the first bad line (exit 65), keeping what it committed before it.

        OPTIONS
          --input FILE      Read FILE (default: stdin).
          --assets DIR      Take the asset files the records reference, and the store lacks, from DIR (as `export
                            --assets` wrote it); each must hash to its name. Without it such records are imported
                            all the same, and reported.
          --batch N         Records per commit (default 200).
          --partitions N    Partition count of a store this creates (default 1).
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(["--input", "--batch", "--partitions", "--assets"]), flags: Common.flags,
            help: help)
        let common = try Common(o)
        let batchSize = max(1, try o.int("--batch") ?? 200)
        let input: FileHandle
        if let path = o["--input"] {
            guard let h = FileHandle(forReadingAtPath: path) else { throw CloudletError(.io, "cannot open \(path)") }
            input = h
        } else {
            input = FileHandle.standardInput
        }
        let inputSize = (try? input.seekToEnd()) ?? 0
        try? input.seek(toOffset: 0)
        let lock = try StoreLock(directory: common.data)
        var config = StoreConfiguration(durability: .os)
        config.compaction = .manual
        config.partitions = try o.int("--partitions") ?? 1
        let store = try CloudletStore(path: common.data, configuration: config, holding: lock)
        var batch: [Record] = []
        var batchZone: ZoneKey?
        var counts = (records: 0, zones: 0, types: 0, assets: 0)
        var missingAssets: Set<String> = []
        let assetsDir = o["--assets"]
        func flush() async throws {
            guard let zone = batchZone, !batch.isEmpty else { return }
            try await store.importRecords(batch, into: zone)
            counts.records += batch.count
            batch = []
        }
        var lineNumber = 0
        var readBytes: UInt64 = 0
        var pending = Data()
        do {
            while true {
                let chunk = input.readData(ofLength: 1 << 20)
                readBytes += UInt64(chunk.count)
                pending.append(chunk)
                var lines: [Data] = []
                while let nl = pending.firstIndex(of: 0x0A) {
                    lines.append(pending[pending.startIndex..<nl])
                    pending.removeSubrange(pending.startIndex...nl)
                }
                if chunk.isEmpty && !pending.isEmpty {
                    lines.append(pending)
                    pending = Data()
                }
                for line in lines {
                    lineNumber += 1
                    let text = String(decoding: line, as: UTF8.self)
                    if text.allSatisfy(\.isWhitespace) { continue }
                    do {
                        let j = try JSONValue.parse(text)
                        switch j["kind"]?.stringValue {
                        case "store":
                            guard j["format"]?.stringValue == "cloudlet-export", j["version"]?.int64Value == 1 else {
                                throw CloudletError.invalid("not a cloudlet-export version 1 header")
                            }
                        case "schema":
                            try await flush()
                            guard let container = j["container"]?.stringValue, let type = j["recordType"]?.stringValue,
                                let env = Environment(rawValue: j["environment"]?.stringValue ?? "development"),
                                case .object(let fields) = j["fields"] ?? .members([:])
                            else { throw CloudletError.invalid("a schema line needs container, environment, recordType, fields") }
                            var t = RecordTypeSchema(name: type)
                            for (f, v) in fields {
                                guard let tag = v.stringValue, let ft = FieldType(cloudKitName: tag) else {
                                    throw CloudletError.invalid("field '\(f)' of type '\(type)' has no valid type")
                                }
                                t.fields[f] = ft
                            }
                            try await store.importSchema(SchemaKey(container: container, environment: env), types: [t])
                            counts.types += 1
                        case "zone":
                            try await flush()
                            try await store.importZone(try ExportLines.zone(j))
                            counts.zones += 1
                        case "record":
                            let zone = try ExportLines.zone(j)
                            let record = try ExportLines.record(j, zone: zone)
                            for asset in record.fields.values.flatMap(\.assets) where !store.assets.exists(asset.fileChecksum) {
                                let source = assetsDir.map { $0 + "/" + asset.fileChecksum }
                                guard let source, FileManager.default.fileExists(atPath: source) else {
                                    missingAssets.insert(asset.fileChecksum)
                                    continue
                                }
                                let stored = try store.assets.importFile(source)
                                guard stored.checksum == asset.fileChecksum else {
                                    throw CloudletError.invalid("asset file \(source) does not hash to its name (it hashes to \(stored.checksum))")
                                }
                                counts.assets += 1
                            }
                            if zone != batchZone || batch.count >= batchSize { try await flush() }
                            batchZone = zone
                            batch.append(record)
                        case let other:
                            throw CloudletError.invalid("unknown line kind \(other.map { "'\($0)'" } ?? "(none)")")
                        }
                    } catch let e as JSONParser.Error {
                        throw CloudletError.invalid("line \(lineNumber): \(e)")
                    } catch let e as CloudletError {
                        throw CloudletError(e.code, "line \(lineNumber): \(e.message)")
                    }
                }
                Progress.update("import", done: readBytes, total: max(inputSize, readBytes))
                if chunk.isEmpty { break }
            }
            try await flush()
        } catch {
            try? await store.close()
            warn("imported \(counts.records) record(s) before the error")
            throw error
        }
        try await store.close()
        Progress.clear()
        warn("imported \(counts.records) record(s), \(counts.zones) zone(s), \(counts.types) record type(s)\(assetsDir == nil ? "" : ", \(counts.assets) asset file(s)") into \(common.data)")
        if !missingAssets.isEmpty {
            warn("warning: records reference \(missingAssets.count) asset file(s) this store lacks\(assetsDir == nil ? "; import them with --assets DIR" : " and \(assetsDir!) does not hold")")
        }
        return 0
    }
}
