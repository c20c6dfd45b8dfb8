import CloudletCore
import CloudletMaintenance
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The logical content of a partition's state: everything but where things are on disk.
struct LogicalView: Equatable, CustomStringConvertible {
    var zones: [String: String] = [:]
    var deleted: [String: String] = [:]
    var schema: [String] = []
    var purgedThrough: UInt64 = 0
    var lastLSN: UInt64 = 0

    init(_ st: PartitionState) throws {
        for key in st.keys.zoneKeys {
            let zone = st.zone(key)!
            var lines = ["created \(zone.createdLSN) lastChange \(zone.lastChangeLSN) live \(zone.liveCount)"]
            for (name, e) in try st.records(in: key).all() {
                lines.append(
                    "\(name) \(e.lsn).\(e.index) \(e.changeTag) \(e.recordType) \(e.deleted) \(e.time) \(e.deleteSelfTargets.sorted())")
            }
            lines.append("changes \(try st.changes(in: key, after: .zero).all().map { "\($0.entry.lsn).\($0.entry.index)" })")
            zones[key.description] = lines.joined(separator: "\n")
        }
        for (key, d) in st.deletedZones { deleted[key.description] = "\(d.lsn) \(d.time)" }
        // Schemas are the catalog's (Catalog/); what a partition keeps of it is the catalog version it used.
        schema = ["catalog version \(st.catalogVersion)"]
        purgedThrough = st.purgedThroughLSN
        lastLSN = st.lastLSN
    }

    var description: String {
        (zones.sorted { $0.key < $1.key }.map { "\($0.key):\n\($0.value)" } + deleted.map { "deleted \($0)" }).joined(separator: "\n")
    }
}

/// A full replay of a partition's log from scratch (no checkpoint).
func replayFromScratch(_ directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws -> PartitionState {
    var st = PartitionState()
    try LogScanner(directory: directory, fileSystem: fileSystem).forEachFrame { frame in
        let (commit, slots, sizes) = try Commit.decode(frame.payload)
        try st.apply(commit, lsn: frame.lsn, position: frame.position, slots: slots, costs: Commit.costs(sizes: sizes, frameLength: frame.position.length))
    }
    return st
}

@Suite struct CompactionTests {
    let zone = ZoneID(zoneName: "Work")

    func config(segmentSize: Int = 8 << 10) -> StoreConfiguration {
        var c = StoreConfiguration(durability: .os)
        c.segmentSize = segmentSize
        c.compaction = .manual
        return c
    }

    /// Everything a client can see of the test database: each record, zone changes from scratch, database changes.
    func observe(_ store: CloudletStore, pageSize: Int = 7) async throws -> [String] {
        let db = try store.container(testContainer).privateDatabase(user: "u")
        var out: [String] = []
        for z in try await db.zones() {
            var token: ChangeToken?
            repeat {
                let page = try await db.zoneChanges(z.id, since: token, resultsLimit: pageSize)
                for c in page.changes {
                    switch c {
                    case .changed(let r): out.append("\(z.id.zoneName) \(r.recordName) \(r.changeTag!) \(r.fields.sorted { $0.key < $1.key })")
                    case .deleted(let id, let type): out.append("\(z.id.zoneName) \(id.recordName) deleted \(type)")
                    }
                }
                token = page.token
                if !page.moreComing { break }
            } while true
        }
        let dbChanges = try await db.databaseChanges()
        out.append("db changed \(dbChanges.changedZones.map(\.zoneName)) deleted \(dbChanges.deletedZones.map(\.zoneName))")
        return out
    }

    /// Overwrites, deletes (default zone included), a deleted and re-created zone, a cascade.
    func churn(_ store: CloudletStore, passes: Int = 6) async throws {
        let db = try store.container(testContainer).privateDatabase(user: "u")
        try await db.createZone(zone)
        try await db.createZone(ZoneID(zoneName: "Gone"))
        _ = try await db.save(note("g1", zone: ZoneID(zoneName: "Gone")))
        for pass in 0..<passes {
            var ops: [RecordOperation] = []
            for i in 0..<30 {
                var r = note("n\(i)", zone: zone, title: String(repeating: "p\(pass)", count: 20), count: Int64(pass))
                if i % 7 == 0 { r["parent"] = .reference(Reference(recordName: "n0", action: .deleteSelf)) }
                ops.append(.forceReplace(r))
            }
            _ = try await db.modify(ops)
            for i in 0..<10 { _ = try await db.modify([.forceReplace(note("d\(i)", title: "pass \(pass)", count: Int64(i)))]) }
        }
        try await db.deleteRecord(RecordID(recordName: "d3"))
        try await db.deleteRecord(RecordID(recordName: "n5", zoneID: zone))
        try await db.deleteZone(ZoneID(zoneName: "Gone"))
        try await db.createZone(ZoneID(zoneName: "Gone"))
        _ = try await db.save(note("g2", zone: ZoneID(zoneName: "Gone")))
        try await db.deleteZone(ZoneID(zoneName: "Gone"))
    }

    @Test func compactionKeepsEveryRecordFeedAndTokenAndShrinksTheLog() async throws {
        let dir = TempDir("compact")
        let path = dir.sub("store")
        var store = try await CloudletStore.open(at: path, configuration: config())
        try await churn(store)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let oldToken = try await db.zoneChanges(zone, resultsLimit: 5).token
        let before = try await observe(store)
        let viewBefore = try LogicalView(store.partitions[0].state.withLock { $0 })
        let bytesBefore = store.statistics.logBytes
        #expect(store.statistics.deadBytes > 0)

        let reports = try await store.compact(includeActiveSegment: true)
        #expect(reports.count == 1 && reports[0].framesDropped > 0 && reports[0].bytesAfter < reports[0].bytesBefore)
        #expect(try await observe(store) == before)
        #expect(try LogicalView(store.partitions[0].state.withLock { $0 }) == viewBefore)
        #expect(store.statistics.logBytes < bytesBefore / 2)
        // What is left is live but for segment headers and rounding.
        #expect(store.statistics.deadBytes < 200, "\(store.statistics)")
        #expect(store.statistics.compactions == 1)
        // Writes continue after the compacted range.
        _ = try await db.save(note("after", zone: zone))
        let afterPage = try await db.zoneChanges(zone, since: oldToken, resultsLimit: 200)
        #expect(afterPage.changes.last?.recordID.recordName == "after")
        try await store.close()

        // Reopened from its checkpoint, and replayed from scratch: the same.
        store = try await CloudletStore.open(at: path, configuration: config())
        #expect(store.statistics.framesReplayed == 0)
        let reopened = try LogicalView(store.partitions[0].state.withLock { $0 })
        try await store.close()
        let pdir = path + "/p0000"
        for f in try FileManager.default.contentsOfDirectory(atPath: pdir) where f.hasSuffix(".ckpt") {
            try FileManager.default.removeItem(atPath: pdir + "/" + f)
        }
        #expect(try LogicalView(try replayFromScratch(pdir)) == reopened)
        store = try await CloudletStore.open(at: path, configuration: config())
        let observed = try await observe(store)
        #expect(observed.count == before.count + 1)
        let rdb = try store.container(testContainer).privateDatabase(user: "u")
        #expect(try await rdb.zoneChanges(zone, since: oldToken, resultsLimit: 200).changes.map(\.recordID) == afterPage.changes.map(\.recordID))
        try await store.close()
    }

    @Test func aReaderHoldingAPositionFromBeforeTheSwapRereadsIt() async throws {
        let dir = TempDir("compact-read")
        var c = config()
        c.recordCacheSize = 0
        let store = try await CloudletStore.open(at: dir.sub("store"), configuration: c)
        try await churn(store, passes: 3)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let key = try db.key(zone)
        let p = store.partitions[0]
        let stale = try #require(try p.state.withLock { try $0.entry(key, "n3") })
        try await store.compact(includeActiveSegment: true)
        let moved = try #require(try p.state.withLock { try $0.entry(key, "n3") })
        #expect(moved.position != stale.position && moved.change == stale.change)
        let r = try p.readDurable(key, "n3", stale)
        #expect(r.changeTag == stale.changeTag)
        try await store.close()
    }

    @Test(arguments: [1, 2, 3, 4])
    func randomHistoriesCompactToTheSameState(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("compact-prop")
        var c = config(segmentSize: 4 << 10)
        c.tombstoneRetention = 3600
        let store = try await CloudletStore.open(at: dir.sub("store"), configuration: c)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let zones = [ZoneID.default, ZoneID(zoneName: "A"), ZoneID(zoneName: "B")]
        for step in 0..<400 {
            let z = zones[Int.random(in: 0..<3, using: &rng)]
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<3 where !z.isDefault:
                try await db.createZone(z)
            case 3..<5 where !z.isDefault:
                try? await db.deleteZone(z)
            case 5..<25:
                try? await db.deleteRecord(RecordID(recordName: "r\(Int.random(in: 0..<12, using: &rng))", zoneID: z))
            case 25..<28:
                // Forget every tombstone so far (as if the retention window had passed).
                _ = try await store.purgeTombstones(olderThan: -10)
            case 28..<31:
                try await store.compact(includeActiveSegment: Bool.random(using: &rng))
            default:
                if !z.isDefault { try await db.createZone(z) }
                _ = try await db.modify([.forceReplace(note("r\(Int.random(in: 0..<12, using: &rng))", zone: z, title: "s\(step)", count: Int64(step)))])
            }
        }
        let live = try LogicalView(store.partitions[0].state.withLock { $0 })
        // One page per zone: a page token older than the purge horizon expires (see the change-feed note).
        let observed = try await observe(store, pageSize: 200)
        try await store.compact(includeActiveSegment: true)
        #expect(try LogicalView(store.partitions[0].state.withLock { $0 }) == live, "seed \(seed)")
        #expect(try await observe(store, pageSize: 200) == observed, "seed \(seed)")
        let accounted = store.partitions[0].state.withLock { $0.segmentLive }
        try await store.close()
        let replayed = try replayFromScratch(dir.sub("store") + "/p0000")
        #expect(try LogicalView(replayed) == live, "seed \(seed): a replay of the compacted log differs")
        #expect(replayed.segmentLive.filter { $0.value != 0 } == accounted.filter { $0.value != 0 }, "seed \(seed)")
    }
}

/// Online compaction: a store with many overwrites compacts itself while writers and readers run.
@Suite struct OnlineCompactionTests {
    /// The last value each writer acknowledged for each of its records, and what readers saw.
    final class Model: @unchecked Sendable {  // every access holds `lock`
        let lock = NSLock()
        var acknowledged: [String: Int64] = [:]
        var errors: [String] = []
        var writersDone = 0
        var writing: Bool { lock.withLock { writersDone < 3 } }
        func ack(_ name: String, _ v: Int64) { lock.withLock { acknowledged[name] = v } }
        func fail(_ s: String) { lock.withLock { errors.append(s) } }
    }

    @Test func writersAndReadersRunWhileTheStoreCompactsItself() async throws {
        let dir = TempDir("online")
        var c = StoreConfiguration(durability: .os)
        c.segmentSize = 8 << 10
        c.recordCacheSize = 0  // every read goes to the log, across swaps
        c.compaction.minDeadBytes = 32 << 10
        c.compaction.minDeadRatio = 0.4
        c.compaction.bytesPerSecond = 4 << 20
        let store = try await CloudletStore.open(at: dir.sub("store"), configuration: c)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let zone = ZoneID(zoneName: "Hot")
        try await db.createZone(zone)
        let model = Model()
        let deadline = Date().addingTimeInterval(2.5)
        await withTaskGroup(of: Void.self) { group in
            for w in 0..<3 {
                group.addTask {
                    var v: Int64 = 0
                    // Enough overwrites to make compaction worth it, however slow a loaded machine is.
                    while Date() < deadline || v < 400 {
                        v += 1
                        let name = "w\(w)-\(Int(v) % 25)"
                        var r = Record(recordType: "Hot", recordName: name, zoneID: zone)
                        r["v"] = .int64(v)
                        r["pad"] = .string(String(repeating: "\(w)", count: 300))
                        do {
                            _ = try await db.modify([.forceReplace(r)])
                            model.ack(name, v)
                        } catch { model.fail("write \(name): \(error)") }
                    }
                    model.lock.withLock { model.writersDone += 1 }
                }
            }
            for reader in 0..<2 {
                group.addTask {
                    var seen: [String: Int64] = [:]
                    var i = reader
                    while model.writing {
                        i += 7
                        let name = "w\(i % 3)-\(i % 25)"
                        do {
                            let r = try await db.record(for: RecordID(recordName: name, zoneID: zone))
                            let v = r["v"]!.int64Value!
                            if v < seen[name, default: 0] { model.fail("read \(name): version \(v) after \(seen[name]!)") }
                            seen[name] = v
                        } catch let e as CloudletError where e.code == .unknownItem {
                            // Not written yet: let the writers run. (A miss never suspends, and a first save now
                            // waits for its record type's catalog commit before its record exists; on a two-core
                            // machine two polling readers would otherwise hold every thread of the pool.)
                            await Task.yield()
                        } catch { model.fail("read \(name): \(error)") }
                    }
                }
            }
            group.addTask {
                var token: ChangeToken?
                while model.writing {
                    do { token = try await db.zoneChanges(zone, since: token).token } catch { model.fail("changes: \(error)") }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
        }
        #expect(model.errors.isEmpty, "\(model.errors.prefix(5))")
        // A compaction the last writes started may still be running: the checks below read the log directly.
        while store.statistics.compactionsRunning > 0 { try await Task.sleep(for: .milliseconds(5)) }
        // The trigger runs after commits; give a compaction the last writes asked for time to start and finish.
        for _ in 0..<400 where store.statistics.compactions == 0 { try await Task.sleep(for: .milliseconds(25)) }
        while store.statistics.compactionsRunning > 0 { try await Task.sleep(for: .milliseconds(5)) }
        let stats = store.statistics
        #expect(stats.compactions >= 1, "\(stats)")
        #expect(stats.compactionBytesReclaimed > 0 && stats.compactionLastError == nil, "\(stats)")
        for (name, v) in model.acknowledged {
            #expect(try await db.record(for: RecordID(recordName: name, zoneID: zone))["v"] == .int64(v), "\(name)")
        }
        // Content hash: the same after a final compaction and after reopening; verify finds nothing.
        let inspector = try StoreInspector(path: dir.sub("store"))
        let before = try inspector.hash(store: store, filter: InspectionFilter(), options: HashOptions())
        try await store.compact(includeActiveSegment: true)
        #expect(try inspector.hash(store: store, filter: InspectionFilter(), options: HashOptions()).store == before.store)
        #expect(before.records == model.acknowledged.count)
        try await store.close()
        let report = try inspector.verify(deep: true)
        #expect(report.isClean && report.findings.isEmpty, "\(report.findings)")
        #expect(try contentHash(dir.sub("store")) == before.store)
    }
}
