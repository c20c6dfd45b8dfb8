import Cloudlet
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation

/// Writes records until killed, printing `ack <zone> <name>` once each save is durable. The crash tests kill it
/// with SIGKILL and check that every acknowledged record is in the store after reopening.
///
/// A test helper, not a product: the crash-consistency tests (Tests/CloudletTests) depend on this target so that
/// it is built next to them.
@main
enum CrashWriter {
    static let help = """
        USAGE: cloudlet-crash-writer --data DIR [--writers N] [--prefix P] [--mode records|catalog|assets|notify|shares|lsm] [--partitions N]
                                     [--max N]

        Saves records named <P>-<writer>-<i> with 8 concurrent writers (into the default zone and a custom zone
        'Crash'), printing "ack <zone> <name>" after each save returns. Runs until killed.

        --mode catalog keeps the catalog busy: the records go to custom zones C0…C7 (spread over the partitions of
        a store created with --partitions N, default 4), each of a writer's first 16 records adds a field
        f_<P>_<writer>_<i> (INT64, just in time), and every 5th of its first 20 saves also saves zone subscription
        s-<P>-<writer>-<i>, printing "sub <id>" once it returns.

        --mode assets saves records "Photo" with an asset (1 byte to 150 KB, one of 23 contents, so that the same bytes
        are saved again and again) into the default zone and 'Crash', printing "ack <zone> <name> <checksum>"; every
        third save first deletes the writer's record of two saves before, printing "deleting <zone> <name>" before and
        "del <zone> <name>" after; and a task collects asset garbage with no grace window, over and over.

        --mode notify keeps the notification hub busy: a zone subscription 'all' to the custom zone 'Crash' (saved
        once), and records saved into it as in records mode, printing "ack Crash <name>" once each save returns (its
        notification may not have been written yet: the test checks it is there after the next open). With --max N
        each writer stops after N saves and the process waits to be killed (a test that reads slowly on a loaded
        machine must not let the writers run past what the hub keeps per user in memory).

        --mode shares saves, in alice's custom zones S0…S3, record <P>-<writer>-<i> (type Trip) and its share
        <P>-<writer>-<i>-share (bob invited READ_ONLY) in one modify, printing "ack <zone> <name>" once it returns;
        every 3rd save bob then accepts the share ("accepted <zone> <name>"), and every 4th alice ends the share of
        the writer's save two before, printing "ending <zone> <name>" before and "ended <zone> <name>" after.

        --mode lsm [--seed S] runs the LSM crash workload (CloudletTestSupport's LSMCrashWorkload) on an LSM tree in
        DIR: puts and deletes, a flush and merges every 50 writes, up to 5000 writes past the tree's log position,
        then exits 0 (the tests kill it before, at a CLOUDLET_CRASH_AT point).
        """

    static func main() async {
        do {
            try await run(Array(CommandLine.arguments.dropFirst()))
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(error is UsageError ? 64 : 1)
        }
    }

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// `--data DIR [--writers N] [--prefix P]`, or `--help`.
    static func options(_ args: [String]) throws -> [String: String] {
        if args.contains("--help") || args.contains("-h") {
            print(help)
            exit(0)
        }
        var values: [String: String] = [:]
        var rest = args[...]
        while let name = rest.popFirst() {
            guard ["--data", "--writers", "--prefix", "--mode", "--partitions", "--seed", "--max"].contains(name) else {
                throw UsageError(description: "unknown option \(name)")
            }
            guard let value = rest.popFirst() else { throw UsageError(description: "\(name) needs a value") }
            values[name] = value
        }
        return values
    }

    static func run(_ args: [String]) async throws {
        let o = try options(args)
        guard let dir = o["--data"] else { throw UsageError(description: "--data DIR is required") }
        let writers = Int(o["--writers"] ?? "8") ?? 8
        let prefix = o["--prefix"] ?? "w"
        switch o["--mode"] ?? "records" {
        case "records": break
        case "assets":
            try await assets(dir: dir, writers: writers, prefix: prefix)
            return
        case "notify":
            try await notify(dir: dir, writers: writers, prefix: prefix, max: Int(o["--max"] ?? "") ?? .max)
            return
        case "shares":
            try await shares(dir: dir, writers: writers, prefix: prefix)
            return
        case "catalog":
            try await catalog(dir: dir, writers: writers, prefix: prefix, partitions: Int(o["--partitions"] ?? "4") ?? 4)
            return
        case "lsm":
            let seed = UInt64(o["--seed"] ?? "1") ?? 1
            var isDirectory: ObjCBool = false
            if !FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            }
            try LSMCrashWorkload.run(directory: dir, seed: seed, writes: 5000)
            return
        case let other: throw UsageError(description: "--mode must be records, assets, catalog, notify, shares or lsm, not \(other)")
        }
        let store = try await CloudletStore.open(at: dir)
        let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
        try await db.createZone(ZoneID(zoneName: "Crash"))
        emit("ready")
        await runWriters(writers) { w, i in
            let zone = i % 2 == 0 ? ZoneID.default : ZoneID(zoneName: "Crash")
            let name = "\(prefix)-\(w)-\(i)"
            var r = Record(recordType: "Entry", recordName: name, zoneID: zone)
            r["writer"] = .int64(Int64(w))
            r["seq"] = .int64(Int64(i))
            r["body"] = .string(String(repeating: "x", count: (i * 37) % 700))
            _ = try await db.save(r)
            emit("ack \(zone.zoneName) \(name)")
        }
    }

    /// `--mode notify`: saves into a zone with a zone subscription, as fast as the writers go.
    static func notify(dir: String, writers: Int, prefix: String, max: Int = .max) async throws {
        let store = try await CloudletStore.open(at: dir)
        let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
        let zone = ZoneID(zoneName: "Crash")
        if (try? await db.subscription("all")) == nil {
            try await db.createZone(zone)
            try await db.saveSubscription(Subscription(id: "all", kind: .zone(zone)))
        }
        emit("ready")
        await runWriters(writers, max: max) { w, i in
            let name = "\(prefix)-\(w)-\(i)"
            _ = try await db.save(Record(recordType: "Entry", recordName: name, zoneID: zone, fields: ["seq": .int64(Int64(i))]))
            emit("ack Crash \(name)")
        }
        while true { try await Task.sleep(for: .seconds(3600)) }  // --max reached: wait to be killed
    }

    /// `--mode catalog`: writes that add schema fields just in time in every partition, and subscriptions.
    static func catalog(dir: String, writers: Int, prefix: String, partitions: Int) async throws {
        var config = StoreConfiguration()
        config.partitions = partitions
        let store = try await CloudletStore.open(at: dir, configuration: config)
        let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
        for z in 0..<8 { try await db.createZone(ZoneID(zoneName: "C\(z)")) }
        emit("ready")
        await runWriters(writers) { w, i in
            let zone = ZoneID(zoneName: "C\((w + i) % 8)")
            let name = "\(prefix)-\(w)-\(i)"
            var r = Record(recordType: "Entry", recordName: name, zoneID: zone)
            r["seq"] = .int64(Int64(i))
            r["f_\(prefix)_\(w)_\(i % 16)"] = .int64(Int64(i))
            _ = try await db.save(r)
            emit("ack \(zone.zoneName) \(name)")
            // Subscriptions only among a writer's first 20 saves: every zone subscription is notified of every later
            // save in its zone, so more would make the notifications grow with saves × subscriptions, round after
            // round (once a log of 100 MB that took minutes to match and reopen), without testing anything more.
            if i % 5 == 0 && i < 20 {
                let id = "s-\(prefix)-\(w)-\(i)"
                try await db.saveSubscription(Subscription(id: id, kind: .zone(zone)))
                emit("sub \(id)")
            }
        }
    }

    /// `--mode shares`: records saved with their shares in one commit, accepted and ended.
    static func shares(dir: String, writers: Int, prefix: String) async throws {
        let store = try await CloudletStore.open(at: dir)
        let c = try store.container("iCloud.com.example.crash")
        let alice = try c.privateDatabase(user: "alice")
        for z in 0..<4 { try await alice.createZone(ZoneID(zoneName: "S\(z)", ownerName: "alice")) }
        emit("ready")
        await runWriters(writers) { w, i in
            let zone = ZoneID(zoneName: "S\((w + i) % 4)", ownerName: "alice")
            let name = "\(prefix)-\(w)-\(i)"
            let root = RecordID(recordName: name, zoneID: zone)
            let share = Share(root: root, recordName: name + "-share", participants: [Share.Participant(userRecordName: "bob")])
            let (records, shares) = try await alice.modify(
                [.create(Record(recordType: "Trip", recordName: name, zoneID: zone, fields: ["seq": .int64(Int64(i))]))],
                saving: [ShareSave(share)])
            if let e = records[0].error { throw e }
            let saved = try shares[0].get()
            emit("ack \(zone.zoneName) \(name)")
            if i % 3 == 0 {
                try await c.publicDatabase(user: "bob").acceptShare(shortGUID: saved.shortGUID!)
                emit("accepted \(zone.zoneName) \(name)")
            }
            if i >= 2 && i % 4 == 0 {
                let old = "\(prefix)-\(w)-\(i - 2)"
                let oldZone = ZoneID(zoneName: "S\((w + i - 2) % 4)", ownerName: "alice")
                emit("ending \(oldZone.zoneName) \(old)")
                try await alice.deleteShare(RecordID(recordName: old + "-share", zoneID: oldZone))
                emit("ended \(oldZone.zoneName) \(old)")
            }
        }
    }

    /// The bytes of asset content `k` (0..<23): a size from 1 byte to 150 KB, seeded bytes.
    static func assetContent(_ k: Int) -> [UInt8] {
        var g = SeededRandom(seed: UInt64(k) + 1000)
        return (0..<(1 + (k * 7919) % 150_000)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }

    /// `--mode assets`: saves with assets (new and already stored bytes), deletions, and garbage collection with no
    /// grace window running all the while.
    static func assets(dir: String, writers: Int, prefix: String) async throws {
        let store = try await CloudletStore.open(at: dir)
        let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
        try await db.createZone(ZoneID(zoneName: "Crash"))
        emit("ready")
        Task.detached {
            while true {
                do { _ = try await store.collectAssetGarbage(gracePeriod: 0) } catch {
                    FileHandle.standardError.write(Data("error: gc: \(error)\n".utf8))
                    exit(1)
                }
            }
        }
        await runWriters(writers) { w, i in
            let zone = i % 2 == 0 ? ZoneID.default : ZoneID(zoneName: "Crash")
            if i >= 2 && i % 3 == 0 {
                let old = "\(prefix)-\(w)-\(i - 2)"
                emit("deleting \(zone.zoneName) \(old)")
                _ = try await db.modify([.forceDelete(RecordID(recordName: old, zoneID: zone))])
                emit("del \(zone.zoneName) \(old)")
            }
            let name = "\(prefix)-\(w)-\(i)"
            let k = (w * 7 + i) % 23
            var r = Record(recordType: "Photo", recordName: name, zoneID: zone)
            r["content"] = .int64(Int64(k))
            r["image"] = .asset(AssetReference(data: assetContent(k)))
            let saved = try await db.save(r)
            emit("ack \(zone.zoneName) \(name) \(saved["image"]!.assets[0].fileChecksum)")
        }
    }

    /// Runs `writers` tasks until the process is killed, each calling `write(writer, i)` for i = 0, 1, 2…; the first
    /// error is printed and ends the process with status 1.
    static func runWriters(_ writers: Int, max: Int = .max, _ write: @escaping @Sendable (Int, Int) async throws -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            for w in 0..<writers {
                group.addTask {
                    var i = 0
                    while i < max {
                        do { try await write(w, i) } catch {
                            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
                            exit(1)
                        }
                        i += 1
                    }
                }
            }
        }
    }

    /// Prints a line (`ready`, an `ack`, a `sub`) in one write(2), so that lines from concurrent writers never interleave.
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
