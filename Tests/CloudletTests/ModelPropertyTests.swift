import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The simplest possible model of a database's records: zone → name → record. Implements the modify semantics
/// directly, without logs, indexes or overlays.
struct RecordModel {
    var zones: [String: [String: Record]] = ["_defaultZone": [:]]

    /// Expected error codes (nil = success) of a batch in one zone; applies it when it succeeds.
    mutating func apply(_ ops: [RecordOperation], zone: String, atomic: Bool) -> [CloudletError.Code?] {
        guard var records = zones[zone] else { return ops.map { _ in .zoneNotFound } }
        let before = records
        var codes: [CloudletError.Code?] = []
        var seen: Set<String> = []
        for op in ops {
            let name = op.recordID.recordName
            guard seen.insert(name).inserted else { codes.append(.invalidArguments); continue }
            let current = records[name]
            switch op {
            case .create(let r):
                if current != nil { codes.append(.recordExists); continue }
                records[name] = r
            case .update(let r), .replace(let r):
                guard let current else { codes.append(.unknownItem); continue }
                guard current.changeTag == r.changeTag else { codes.append(.serverRecordChanged); continue }
                var n = r
                if case .update = op { n.fields = current.fields.merging(r.fields) { $1 } }
                records[name] = n
            case .forceUpdate(let r):
                var n = r
                if let current { n.fields = current.fields.merging(r.fields) { $1 } }
                records[name] = n
            case .forceReplace(let r):
                records[name] = r
            case .delete(_, let tag):
                guard let current else { codes.append(.unknownItem); continue }
                guard current.changeTag == tag else { codes.append(.serverRecordChanged); continue }
                cascadeDelete(name, in: &records)
            case .forceDelete:
                guard current != nil else { codes.append(.unknownItem); continue }
                cascadeDelete(name, in: &records)
            }
            codes.append(nil)
        }
        if atomic && zone != "_defaultZone" && codes.contains(where: { $0 != nil }) {
            zones[zone] = before
            return codes.map { $0 ?? .batchRequestFailed }
        }
        zones[zone] = records
        return codes
    }

    private func cascadeDelete(_ name: String, in records: inout [String: Record]) {
        var queue = [name]
        while let t = queue.popLast() {
            guard records.removeValue(forKey: t) != nil else { continue }
            for (n, r) in records where r.fields.values.contains(where: { $0.references.contains { $0.action == .deleteSelf && $0.recordName == t } }) {
                queue.append(n)
            }
        }
    }
}

@Suite struct ModelPropertyTests {
    @Test(arguments: [UInt64(1), 2, 3, 0xC0FFEE])
    func randomOperationSequencesMatchTheModel(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("model")
        var store = try await openStore(dir, partitions: Int(seed % 3) + 1)
        var model = RecordModel()
        let names = (0..<12).map { "r\($0)" }
        let zoneNames = ["_defaultZone", "A", "B"]

        for step in 0..<150 {
            var db = try store.container(testContainer).privateDatabase(user: "u")
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < 4 {
                // Zone churn: create or delete a custom zone.
                let z = ["A", "B"].randomElement(using: &rng)!
                if model.zones[z] == nil {
                    try await db.createZone(ZoneID(zoneName: z))
                    model.zones[z] = [:]
                } else {
                    try await db.deleteZone(ZoneID(zoneName: z))
                    model.zones[z] = nil
                }
                continue
            }
            if roll < 7 {
                // Reopen: everything must survive.
                try await store.close()
                store = try await openStore(dir)
                db = try store.container(testContainer).privateDatabase(user: "u")
            }
            let zone = zoneNames.randomElement(using: &rng)!
            let zid = ZoneID(zoneName: zone)
            let atomic = Bool.random(using: &rng)
            var ops: [RecordOperation] = []
            for _ in 0..<Int.random(in: 1...5, using: &rng) {
                let name = names.randomElement(using: &rng)!
                var r = Record(recordType: "Item", recordName: name, zoneID: zid)
                r["n"] = .int64(Int64.random(in: 0..<1000, using: &rng))
                if Bool.random(using: &rng) { r["s"] = .string("v\(step)") }
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    r["up"] = .reference(Reference(recordName: names.randomElement(using: &rng)!, action: .deleteSelf))
                }
                let current = model.zones[zone]?[name]
                let tag = Int.random(in: 0..<5, using: &rng) == 0 ? "stale" : (current?.changeTag ?? "none")
                r.changeTag = tag
                switch Int.random(in: 0..<7, using: &rng) {
                case 0: ops.append(.create(r))
                case 1: ops.append(.update(r))
                case 2: ops.append(.replace(r))
                case 3: ops.append(.forceUpdate(r))
                case 4: ops.append(.forceReplace(r))
                case 5: ops.append(.delete(r.id, changeTag: tag))
                default: ops.append(.forceDelete(r.id))
                }
            }
            let expected = model.apply(ops, zone: zone, atomic: atomic)
            let results = try await db.modify(ops, atomic: atomic)
            #expect(results.map(\.code) == expected, "seed \(seed) step \(step): \(ops.map(\.operationType)) in \(zone)")
            // Keep the model's change tags and stamps equal to the engine's.
            for r in results { if let rec = r.record { model.zones[zone]?[rec.recordName] = rec } }
            if results.map(\.code) != expected { break }
        }

        // Compare the whole state.
        let db = try store.container(testContainer).privateDatabase(user: "u")
        for zone in zoneNames {
            let zid = ZoneID(zoneName: zone)
            guard let records = model.zones[zone] else {
                await expectError(.zoneNotFound) { try await db.zone(for: zid) }
                continue
            }
            for name in names {
                let got = try? await db.record(for: RecordID(recordName: name, zoneID: zid))
                #expect(got?.fields == records[name]?.fields, "seed \(seed): \(name) in \(zone)")
                #expect(got?.changeTag == records[name]?.changeTag, "seed \(seed): tag of \(name) in \(zone)")
            }
        }
        try await store.close()
    }
}
