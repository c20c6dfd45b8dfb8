import CloudletConcurrency
import CloudletCore
import CloudletMaintenance
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// `cloudlet-tool compact` as a process: what it gives back, what it keeps, and a SIGKILL at any point.
@Suite(.serialized) struct ToolCompactionTests {
    let zone = ZoneID(zoneName: "Work")

    /// Record `i` as written by pass `pass`: ~330 bytes, half incompressible.
    func record(_ i: Int, pass: Int) -> Record {
        var rng = SeededRandom(seed: UInt64(i * 1000 + pass + 1))
        var r = Record(recordType: "Item", recordName: "r\(i)", zoneID: i % 3 == 0 ? .default : zone)
        r["n"] = .int64(Int64(i))
        r["blob"] = .bytes((0..<160).map { _ in UInt8.random(in: 0...255, using: &rng) })
        r["text"] = .string("record \(i) of pass \(pass) " + String(repeating: "lorem ipsum ", count: 12))
        return r
    }

    /// Loads 300 records in batches of 20 per zone, for each of `passes` (every pass replaces every record with
    /// that pass's version), then deletes two records. Returns a zone change token taken part way through the last
    /// pass.
    @discardableResult
    func load(_ path: String, passes: Range<Int>, segmentSize: Int = 16 << 10) async throws -> ChangeToken? {
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig(segmentSize: segmentSize))
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        try await db.createZone(zone)
        var token: ChangeToken?
        for pass in passes {
            for start in stride(from: 0, to: 300, by: 60) {
                let batch = (start..<(start + 60)).map { record($0, pass: passes.last!) }
                for z in [ZoneID.default, zone] {
                    let mine = batch.filter { $0.id.zoneID == z }
                    var ops = mine.map { RecordOperation.forceReplace($0) }
                    // Earlier passes write the same names with other contents.
                    if pass != passes.last! { ops = mine.map { .forceReplace(record(Int($0["n"]!.int64Value!), pass: pass)) } }
                    _ = try await db.modify(ops)
                }
                // Part way through the last pass: later changes are some of the zone's records.
                if pass == passes.last! && start == 120 { token = try await db.zoneChanges(zone, resultsLimit: 200).token }
            }
        }
        try await db.deleteRecord(RecordID(recordName: "r1", zoneID: zone))
        try await db.deleteRecord(RecordID(recordName: "r3"))
        try await store.close()
        return token
    }

    /// Records and zone feeds as the engine serves them.
    func observe(_ path: String, since token: ChangeToken?) async throws -> (records: [String], feed: [String], fromToken: [String]) {
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        defer { try? store.closeNow() }
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        var records: [String] = []
        for i in 0..<300 {
            let z = i % 3 == 0 ? ZoneID.default : zone
            if let r = try? await db.record(for: RecordID(recordName: "r\(i)", zoneID: z)) {
                records.append("\(r.recordName) \(r.changeTag!) \(RecordCodec.encode(r).hashValue)")
            }
        }
        func drain(_ from: ChangeToken?) async throws -> [String] {
            var out: [String] = []
            var t = from
            repeat {
                let page = try await db.zoneChanges(zone, since: t, resultsLimit: 50)
                out += page.changes.map { c in
                    switch c {
                    case .changed(let r): "\(r.recordName) \(r.changeTag!)"
                    case .deleted(let id, _): "\(id.recordName) deleted"
                    }
                }
                t = page.token
                if !page.moreComing { break }
            } while true
            return out
        }
        return (records, try await drain(nil), token == nil ? [] : try await drain(token))
    }

    @Test func aClusterNodesStoreIsCompactedOnlyUpToItsStoredHorizonWithoutForce() async throws {
        let dir = TempDir("tool-compact-cluster")
        try await load(dir.path, passes: 0..<2)
        try "cloudlet\n6f1c\n".write(toFile: dir.path + "/CLUSTER", atomically: true, encoding: .utf8)
        let log = dir.path + "/p0000"
        let before = try await tool("hash", "--data", dir.path, "--json")
        // No horizon stored yet: nothing every replica is known to hold, so nothing is compacted.
        let nothing = try await tool("compact", "--data", dir.path)
        #expect(nothing.code == 0, "\(nothing.stderr)")
        #expect(nothing.stdout.contains("compaction horizon"), "\(nothing.stdout)")
        #expect(try CompactionMarker.load(directory: log) == nil)
        // With one, up to it (and no purge: that would be a frame no other replica has).
        let store = try await CloudletStore.open(at: dir.path, configuration: StoreConfiguration(durability: .os))
        let last = store.partitions[0].log.lastLSN
        try await store.close()
        try CompactionHorizon.write(last / 2, directory: log)
        let bounded = try await tool("compact", "--data", dir.path)
        #expect(bounded.code == 0, "\(bounded.stderr)")
        let marker = try #require(try CompactionMarker.load(directory: log))
        #expect(marker.coveredThrough <= last / 2 && marker.epochs != nil)
        #expect(try await tool("hash", "--data", dir.path, "--json").stdout == before.stdout)
        // --force: all of it.
        let forced = try await tool("compact", "--data", dir.path, "--force")
        #expect(forced.code == 0, "\(forced.stderr)")
        #expect(try #require(try CompactionMarker.load(directory: log)).coveredThrough > last / 2)
        #expect(try await tool("hash", "--data", dir.path, "--json").stdout == before.stdout)
    }

    @Test func afterTenOverwritePassesCompactComesWithin20PercentOfAFreshLoad() async throws {
        let dir = TempDir("tool-10x")
        let overwritten = dir.sub("overwritten")
        let fresh = dir.sub("fresh")
        let token = try await load(overwritten, passes: 0..<10)
        try await load(fresh, passes: 9..<10)
        let before = try await observe(overwritten, since: token)
        #expect(before.fromToken.count > 0 && before.fromToken.count < before.feed.count)
        let hash = try await tool("hash", "--data", overwritten)
        let sizeBefore = try directorySize(overwritten)

        let dry = try await tool("compact", "--data", overwritten, "--dry-run", "--json").json()
        let planned = try #require(dry["partitions"]?.arrayValue?.first?["bytesAfter"]?.int64Value)
        let run = try await tool("compact", "--data", overwritten, "--json")
        #expect(run.code == 0, "\(run)")
        let result = try run.json()
        let after = try #require(result["bytesAfter"]?.int64Value)
        #expect(Double(planned) >= Double(after) * 0.9 && Double(planned) <= Double(after) * 1.1, "dry run \(planned) vs \(after)")

        let compactedSize = try directorySize(overwritten)
        let freshSize = try directorySize(fresh)
        #expect(Double(compactedSize) <= 1.2 * Double(freshSize), "compacted \(compactedSize) vs fresh \(freshSize) (was \(sizeBefore))")
        #expect(sizeBefore > 5 * compactedSize)
        #expect(try await tool("hash", "--data", overwritten).stdout == hash.stdout)
        #expect(try await tool("verify", "--data", overwritten, "--deep").code == 0)
        let observed = try await observe(overwritten, since: token)
        #expect(observed.records == before.records)
        #expect(observed.feed == before.feed)
        #expect(observed.fromToken == before.fromToken, "an old token still works")
        // Compacting a compacted store changes nothing but the generation.
        let again = try await tool("compact", "--data", overwritten)
        #expect(again.code == 0 && again.stdout.contains("(generation 2); reclaimed") && again.stdout.contains("0 dropped"), "\(again)")
        #expect(try await tool("hash", "--data", overwritten).stdout == hash.stdout)
    }

    @Test func compactionKilledAtEveryStepAlwaysLeavesAVerifiableStoreWithTheSameHash() async throws {
        let dir = TempDir("tool-kill")
        let path = dir.sub("store")
        try await load(path, passes: 0..<8)
        // Where the child kills itself (`CrashPoint`): every step of the swap, and frames at random through the copy
        // (nil: a frame of this round's compaction).
        var rng = SeededRandom(seed: 99)
        let points: [String?] =
            ["compaction.finished", "compaction.swapped", "compaction.removed", "replace.synced", "replace.synced:2", "replace.renamed"]
            + [String?](repeating: nil, count: 10)
        for (round, named) in points.enumerated() {
            // New garbage every round, so that every run has something to compact.
            let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
            let db = try store.container(testContainer).privateDatabase(user: "alice")
            let work = (0..<300).filter { $0 % 3 != 0 }
            for batch in 0..<3 {
                _ = try await db.modify(work[(batch * 60)..<(batch * 60 + 60)].map { .forceReplace(record($0, pass: 100 + round)) })
            }
            try await store.close()
            let expected = try contentHash(path)
            var point = named ?? ""
            if named == nil {
                let frames = try #require(
                    try await tool("compact", "--data", path, "--dry-run", "--json").json()["partitions"]?.arrayValue?
                        .compactMap { $0["framesRead"]?.int64Value }.reduce(0, +))
                point = "compaction.frame:\(Int.random(in: 1...Int(frames), using: &rng))"
            }

            let environment = ProcessInfo.processInfo.environment.merging(["CLOUDLET_CRASH_AT": point]) { $1 }
            let tool = try toolExecutable()
            let child = try await ThreadBridge.offload {
                try SpawnedProcess.run(tool, ["compact", "--data", path, "--no-progress"], environment: environment)
            }
            #expect(child.reason == .uncaughtSignal && child.status == SIGKILL, "round \(round): \(point) was not reached")

            let report = try StoreInspector(path: path).verify(deep: round % 4 == 0)
            #expect(report.isClean, "round \(round) (killed at \(point)): \(report.findings)")
            #expect(try contentHash(path) == expected, "round \(round) (killed at \(point)): the content changed")
        }
        // The tool agrees, and the engine opens it (cleaning up leftovers) with the same content.
        let verify = try await tool("verify", "--data", path, "--deep")
        #expect(verify.code == 0, "\(verify)")
        let expected = try contentHash(path)
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        try await store.close()
        #expect(try contentHash(path) == expected)
        #expect(try await tool("verify", "--data", path).stdout.contains("0 warning(s)"))
    }
}
