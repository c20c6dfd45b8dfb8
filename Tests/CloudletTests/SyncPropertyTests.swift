import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// A client that keeps a copy of a database with change tokens, as a CloudKit app would.
struct SyncClient {
    var dbToken: ChangeToken?
    var zoneTokens: [String: ChangeToken] = [:]
    var zones: [String: [String: [String: FieldValue]]] = [:]

    mutating func sync(_ db: Database, rng: inout SeededRandom) async throws {
        // After an expired database token, every zone is fetched again and zones not seen are dropped.
        var seen: Set<String>? = nil
        while true {
            let page: DatabaseChanges
            do {
                page = try await db.databaseChanges(since: dbToken, resultsLimit: Int.random(in: 1...4, using: &rng))
            } catch let e as CloudletError where e.code == .changeTokenExpired {
                dbToken = nil
                seen = []
                continue
            }
            seen?.formUnion(page.changedZones.map(\.zoneName))
            for z in page.deletedZones {
                zones[z.zoneName] = nil
                zoneTokens[z.zoneName] = nil
            }
            for z in page.changedZones { try await syncZone(db, z.zoneName, rng: &rng) }
            dbToken = page.token
            if !page.moreComing { break }
        }
        if let seen {
            for z in zones.keys where !seen.contains(z) {
                zones[z] = nil
                zoneTokens[z] = nil
            }
        }
    }

    mutating func syncZone(_ db: Database, _ name: String, rng: inout SeededRandom) async throws {
        while true {
            let page: ZoneChanges
            do {
                page = try await db.zoneChanges(
                    ZoneID(zoneName: name), since: zoneTokens[name], resultsLimit: Int.random(in: 1...7, using: &rng))
            } catch let e as CloudletError where e.code == .changeTokenExpired {
                zones[name] = [:]
                zoneTokens[name] = nil
                continue
            } catch let e as CloudletError where e.code == .zoneNotFound {
                return  // deleted meanwhile; the database feed will say so
            }
            let names = page.changes.map(\.recordID.recordName)
            #expect(Set(names).count == names.count, "a record appears twice in one page: \(names)")
            for c in page.changes {
                switch c {
                case .changed(let r): zones[name, default: [:]][r.recordName] = r.fields
                case .deleted(let id, _): zones[name, default: [:]][id.recordName] = nil
                }
            }
            if zones[name] == nil { zones[name] = [:] }
            zoneTokens[name] = page.token
            if !page.moreComing { return }
        }
    }
}

@Suite struct SyncPropertyTests {
    @Test(arguments: [UInt64(7), 8, 9])
    func aSyncingClientEndsWithExactlyTheServersState(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let dir = TempDir("sync")
        var store = try await openStore(dir, partitions: 2)
        var client = SyncClient()
        let zoneNames = ["Z0", "Z1", "Z2"]
        let names = (0..<10).map { "r\($0)" }
        var live: Set<String> = []
        for step in 0..<160 {
            let db = try store.container(testContainer).privateDatabase(user: "u")
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<6:
                let z = zoneNames.randomElement(using: &rng)!
                if live.contains(z) {
                    try await db.deleteZone(ZoneID(zoneName: z))
                    live.remove(z)
                } else {
                    try await db.createZone(ZoneID(zoneName: z))
                    live.insert(z)
                }
            case 6..<9:
                try await store.close()
                store = try await openStore(dir)
            case 9..<11:
                _ = try await store.purgeTombstones(olderThan: -1)
            case 11..<30:
                try await client.sync(db, rng: &rng)
            default:
                guard let z = live.randomElement(using: &rng) else { continue }
                var ops: [RecordOperation] = []
                for name in names.shuffled(using: &rng).prefix(Int.random(in: 1...4, using: &rng)) {
                    let id = RecordID(recordName: name, zoneID: ZoneID(zoneName: z))
                    if Bool.random(using: &rng) {
                        ops.append(.forceUpdate(Record(recordType: "Item", id: id, fields: ["v": .int64(Int64(step))])))
                    } else {
                        ops.append(.forceDelete(id))
                    }
                }
                _ = try await db.modify(ops, atomic: false)
            }
        }
        let db = try store.container(testContainer).privateDatabase(user: "u")
        try await client.sync(db, rng: &rng)
        // The server's state, read directly.
        var server: [String: [String: [String: FieldValue]]] = [:]
        for z in live {
            server[z] = [:]
            for name in names {
                if let r = try? await db.record(for: RecordID(recordName: name, zoneID: ZoneID(zoneName: z))) {
                    server[z]![name] = r.fields
                }
            }
        }
        #expect(client.zones == server, "seed \(seed)")
        try await store.close()
    }
}
