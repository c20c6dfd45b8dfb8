import CloudletCore
import CloudletStorage
import Testing

@testable import Cloudlet

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

    @Test(arguments: [UInt64(1), 2, 0xC0FFEE])
    func randomPutsDeletesPurgesAndMovesMatchTheModel(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var dir = KeyDirectory()
        var model: [ZoneKey: [String: RecordEntry]] = [:]
        let custom = Self.zones[1]
        let created = dir.createZone(custom, lsn: 1)
        let again = dir.createZone(custom, lsn: 2)
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
                let old = dir.put(z, name, e)
                #expect(old == model[z]?[name], "seed \(seed) step \(step)")
                model[z, default: [:]][name] = e
            case 60..<90:
                let e = Self.entry(lsn: lsn, index: 0, deleted: true)
                let old = dir.put(z, name, e)
                #expect(old == model[z]?[name], "seed \(seed) step \(step)")
                model[z, default: [:]][name] = e
            case 90..<95:
                let through = lsn - min(lsn, UInt64.random(in: 0..<50, using: &rng))
                let dropped = dir.purgeTombstones(through: through)
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
                let moved = dir.move(z, name, change, to: to, slot: current.slot, cost: 2)
                #expect(moved == !stale, "seed \(seed) step \(step): only the current version moves")
                if moved {
                    model[z]![name]!.position = to
                    model[z]![name]!.cost = 2
                }
            }
            if step % 100 == 99 { check(dir, model, seed: seed, step: step, rng: &rng) }
        }
        check(dir, model, seed: seed, step: -1, rng: &rng)
    }

    func check(_ dir: KeyDirectory, _ model: [ZoneKey: [String: RecordEntry]], seed: UInt64, step: Int, rng: inout SplitMix64) {
        #expect(Set(dir.zoneKeys) == Set(model.keys), "seed \(seed) step \(step)")
        #expect(dir.liveCount == model.values.reduce(0) { $0 + $1.values.filter { !$0.deleted }.count })
        for (z, records) in model {
            let summary = dir.zone(z)
            #expect(summary?.entryCount == records.count, "seed \(seed) step \(step)")
            #expect(summary?.liveCount == records.values.filter { !$0.deleted }.count, "seed \(seed) step \(step)")
            #expect(Dictionary(uniqueKeysWithValues: dir.entries(in: z).map { ($0.name, $0.entry) }) == records)
            for n in 0..<40 {
                #expect(dir.entry(z, "r\(n)") == records["r\(n)"], "seed \(seed) step \(step): r\(n)")
                let sources = Set(records.filter { !$0.value.deleted && $0.value.deleteSelfTargets.contains("r\(n)") }.keys)
                #expect(dir.deleteSelfSources(in: z, referencing: "r\(n)") == sources, "seed \(seed) step \(step)")
            }
            let points = [ChangePoint.zero] + records.values.map(\.change)
            let from = points.randomElement(using: &rng)!
            #expect(dir.changes(in: z, after: from).map(\.name) == Self.modelChanges(records, after: from), "seed \(seed) step \(step)")
        }
    }

    @Test func changesSkipSupersededVersionsAndKeepOrderAcrossPruning() {
        var dir = KeyDirectory()
        let z = Self.zones[1]
        _ = dir.createZone(z, lsn: 1)
        // 3000 overwrites of two records: stale changes outnumber current ones, so the index is pruned meanwhile.
        for i in 0..<3000 { dir.put(z, i % 2 == 0 ? "a" : "b", Self.entry(lsn: UInt64(i + 2), index: 0, deleted: false)) }
        #expect(dir.zone(z)!.changeIndexCount < 3000, "pruned")
        #expect(dir.changes(in: z, after: .zero).map(\.name) == ["a", "b"])
        #expect(dir.changes(in: z, after: ChangePoint(lsn: 3000, index: 0)).map(\.name) == ["b"])
        #expect(dir.changes(in: z, after: ChangePoint(lsn: 3001, index: 0)).map(\.name) == [])
        #expect(dir.changes(in: Self.zones[0], after: .zero).map(\.name) == [], "a zone not held has no changes")
    }

    @Test func removingAZoneReturnsItsEntries() {
        var dir = KeyDirectory()
        let z = Self.zones[1]
        _ = dir.createZone(z, lsn: 1)
        dir.put(z, "a", Self.entry(lsn: 2, index: 0, deleted: false))
        dir.put(z, "b", Self.entry(lsn: 3, index: 0, deleted: true))
        let removed = dir.removeZone(z).map { Set($0.map(\.name)) }
        #expect(removed == ["a", "b"])
        #expect(dir.zone(z) == nil && dir.entry(z, "a") == nil && dir.liveCount == 0)
        let again = dir.removeZone(z)
        #expect(again == nil)
    }
}
