import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@testable import Cloudlet

/// A key directory over an LSM tree on an in-memory file system, flushed, merged and reopened as a partition does.
struct DirectoryHarness {
    let fs = InMemoryFileSystem()
    var tree: LSMTree
    var dir = KeyDirectory()
    var flushes = 0

    init() throws {
        var config = LSMTreeConfiguration()
        config.backgroundMerges = false
        config.run.blockSize = 256  // many blocks even for a small directory
        tree = try LSMTree(directory: "/index", fileSystem: fs, configuration: config)
    }

    /// Flushes the memtable to a run, as ``Partition/flushIndex(force:)`` does.
    mutating func flush(sequence: UInt64) throws {
        let memtable = dir.freeze(state: [1, 2, 3], sequence: sequence)
        try tree.flush(memtable, logPosition: Array("\(sequence)".utf8))
        dir.flushed(base: tree.runsView())
        flushes += 1
    }

    mutating func merge() throws {
        try tree.mergeUntilIdle()
        dir.rebase(tree.runsView())
    }

    /// Flushes, closes the tree and opens it again: the directory then reads only runs from the file system.
    mutating func reopen(sequence: UInt64) throws {
        try flush(sequence: sequence)
        let summaries = dir.allSummaries
        let config = tree.configuration
        tree.close()
        tree = try LSMTree(directory: "/index", fileSystem: fs, configuration: config)
        #expect(try tree.runsView().get(DirectoryKey.state) == [1, 2, 3], "the state flushed last is read back")
        dir = KeyDirectory(base: tree.runsView(), summaries: summaries)
    }
}

/// The key directory against a plain model: a dictionary of entries per zone, the change order derived by sorting.
@Suite struct KeyDirectoryTests {
    static let zones = [
        ZoneKey(container: "iCloud.test", environment: .development, owner: "alice", zoneName: ZoneID.defaultZoneName),
        ZoneKey(container: "iCloud.test", environment: .development, owner: "alice", zoneName: "Z"),
    ]

    static func entry(lsn: UInt64, index: UInt32, deleted: Bool, targets: [String] = []) -> RecordEntry {
        RecordEntry(
            lsn: lsn, index: index, position: FramePosition(segment: 1, offset: lsn * 100, length: 100),
            slot: Commit.Slot(offset: 0, length: deleted ? 0 : 10), recordType: "T", deleted: deleted, time: Int64(lsn),
            deleteSelfTargets: targets, cost: 1)
    }

    /// Current changes after `point`, from the model: every entry with a later change point, in change order.
    static func modelChanges(_ model: [String: RecordEntry], after point: ChangePoint) -> [String] {
        model.filter { $0.value.change > point }.sorted { $0.value.change < $1.value.change }.map(\.key)
    }

    @Test("random puts, deletes, purges, moves, zone removals, flushes, merges and reopens match the model",
        arguments: [UInt64(1), 2, 0xC0FFEE])
    func randomOperationsMatchTheModel(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var h = try DirectoryHarness()
        var model: [ZoneKey: [String: RecordEntry]] = [:]
        let custom = Self.zones[1]
        let created = h.dir.createZone(custom, lsn: 1)
        let again = h.dir.createZone(custom, lsn: 2)
        #expect(created && !again, "a held zone is not created again")
        model[custom] = [:]
        var lsn: UInt64 = 1
        for step in 0..<3000 {
            lsn += 1
            let z = Self.zones[Int.random(in: 0...1, using: &rng)]
            let name = "r\(Int.random(in: 0..<40, using: &rng))"
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<60:
                let targets = Bool.random(using: &rng) ? ["r\(Int.random(in: 0..<40, using: &rng))"] : []
                let e = Self.entry(lsn: lsn, index: UInt32.random(in: 0..<3, using: &rng), deleted: false, targets: targets)
                let old = try h.dir.put(z, name, e)
                #expect(old == model[z]?[name], "seed \(seed) step \(step)")
                model[z, default: [:]][name] = e
            case 60..<88:
                let e = Self.entry(lsn: lsn, index: 0, deleted: true)
                let old = try h.dir.put(z, name, e)
                #expect(old == model[z]?[name], "seed \(seed) step \(step)")
                model[z, default: [:]][name] = e
            case 88..<89:
                // The custom zone goes and comes back (a default zone is not removed this way).
                let removed = try h.dir.removeZone(custom, lsn: lsn)
                #expect(removed.map { $0.count } == model[custom]?.count, "seed \(seed) step \(step)")
                _ = h.dir.createZone(custom, lsn: lsn)
                model[custom] = [:]
            case 89..<90:
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: try h.flush(sequence: lsn)
                case 1: try h.merge()
                default: try h.reopen(sequence: lsn)
                }
            case 90..<95:
                let through = lsn - min(lsn, UInt64.random(in: 0..<50, using: &rng))
                let dropped = try h.dir.purgeTombstones(through: through, lsn: lsn)
                var expected = 0
                for (k, records) in model {
                    let gone = records.filter { $0.value.deleted && $0.value.lsn <= through }
                    expected += gone.count
                    for n in gone.keys { model[k]![n] = nil }
                    if k.zoneName == ZoneID.defaultZoneName && model[k]!.isEmpty { model[k] = nil }
                }
                #expect(dropped.count == expected, "seed \(seed) step \(step)")
            default:
                guard let current = model[z]?[name] else { continue }
                let stale = Bool.random(using: &rng)
                let change = stale ? ChangePoint(lsn: current.lsn + 1, index: 0) : current.change
                let to = FramePosition(segment: 9, offset: lsn, length: 7)
                let moved = try h.dir.move(z, name, change, to: to, slot: current.slot, cost: 2, sequence: lsn)
                #expect(moved == !stale, "seed \(seed) step \(step): only the current version moves")
                if moved {
                    model[z]![name]!.position = to
                    model[z]![name]!.cost = 2
                }
            }
            if step % 100 == 99 { try check(h.dir, model, seed: seed, step: step, rng: &rng) }
        }
        try check(h.dir, model, seed: seed, step: -1, rng: &rng)
        try h.reopen(sequence: lsn + 1)
        try check(h.dir, model, seed: seed, step: -2, rng: &rng)
        #expect(h.flushes > 5 && h.tree.runs.count > 0, "the run went through flushes")
        #expect(h.tree.verify().isEmpty)
    }

    func check(_ dir: KeyDirectory, _ model: [ZoneKey: [String: RecordEntry]], seed: UInt64, step: Int, rng: inout SplitMix64) throws {
        #expect(Set(dir.zoneKeys) == Set(model.keys), "seed \(seed) step \(step)")
        #expect(dir.liveCount == model.values.reduce(0) { $0 + $1.values.filter { !$0.deleted }.count })
        for (z, records) in model {
            let summary = dir.zone(z)
            #expect(summary?.entryCount == records.count, "seed \(seed) step \(step)")
            #expect(summary?.liveCount == records.values.filter { !$0.deleted }.count, "seed \(seed) step \(step)")
            let entries = try dir.entries(in: z).all()
            #expect(entries.map(\.name) == records.keys.sorted(), "seed \(seed) step \(step): in name order")
            #expect(Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0.entry) }) == records)
            if let after = records.keys.randomElement(using: &rng) {
                #expect(try dir.entries(in: z, after: after).all().map(\.name) == records.keys.sorted().filter { $0 > after })
            }
            for n in 0..<40 {
                #expect(try dir.entry(z, "r\(n)") == records["r\(n)"], "seed \(seed) step \(step): r\(n)")
                let sources = Set(records.filter { !$0.value.deleted && $0.value.deleteSelfTargets.contains("r\(n)") }.keys)
                #expect(try dir.deleteSelfSources(in: z, referencing: "r\(n)") == sources, "seed \(seed) step \(step)")
            }
            let points = [ChangePoint.zero] + records.values.map(\.change)
            let from = points.randomElement(using: &rng)!
            #expect(try dir.changes(in: z, after: from).all().map(\.name) == Self.modelChanges(records, after: from), "seed \(seed) step \(step)")
        }
        let tombstones = model.flatMap { z, records in records.filter { $0.value.deleted }.map { ($0.value.lsn, z, $0.key) } }
        #expect(try dir.tombstones(through: .max).map(\.point.lsn) == tombstones.map(\.0).sorted(), "seed \(seed) step \(step)")
    }

    @Test("the change index keeps only current changes, in order, across a flush")
    func changesSkipSupersededVersions() throws {
        var h = try DirectoryHarness()
        let z = Self.zones[1]
        _ = h.dir.createZone(z, lsn: 1)
        // 3000 overwrites of two records, half before a flush: the index holds one change per record.
        for i in 0..<3000 {
            try h.dir.put(z, i % 2 == 0 ? "a" : "b", Self.entry(lsn: UInt64(i + 2), index: 0, deleted: false))
            if i == 1500 { try h.flush(sequence: UInt64(i + 2)) }
        }
        #expect(h.dir.zone(z)!.changeIndexCount == 2)
        #expect(try h.dir.changes(in: z, after: .zero).all().map(\.name) == ["a", "b"])
        #expect(try h.dir.changes(in: z, after: ChangePoint(lsn: 3000, index: 0)).all().map(\.name) == ["b"])
        #expect(try h.dir.changes(in: z, after: ChangePoint(lsn: 3001, index: 0)).all().map(\.name) == [])
        #expect(try h.dir.changes(in: Self.zones[0], after: .zero).all().map(\.name) == [], "a zone not held has no changes")
    }

    @Test("removing a zone returns its entries and leaves no key of it, flushed or not")
    func removingAZoneReturnsItsEntries() throws {
        var h = try DirectoryHarness()
        let z = Self.zones[1]
        _ = h.dir.createZone(z, lsn: 1)
        try h.dir.put(z, "a", Self.entry(lsn: 2, index: 0, deleted: false, targets: ["b"]))
        try h.flush(sequence: 2)
        try h.dir.put(z, "b", Self.entry(lsn: 3, index: 0, deleted: true))
        let removed = try h.dir.removeZone(z, lsn: 4).map { Set($0.map(\.lsn)) }
        #expect(removed == [2, 3])
        #expect(try h.dir.zone(z) == nil && h.dir.entry(z, "a") == nil && h.dir.liveCount == 0)
        #expect(try h.dir.removeZone(z, lsn: 5) == nil)
        // Re-created, the zone starts empty: nothing of the old incarnation shows through from the run.
        _ = h.dir.createZone(z, lsn: 6)
        #expect(try h.dir.entries(in: z).all().isEmpty && h.dir.deleteSelfSources(in: z, referencing: "b").isEmpty)
        #expect(try h.dir.changes(in: z, after: .zero).all().isEmpty && h.dir.tombstones(through: .max).isEmpty)
    }
}
