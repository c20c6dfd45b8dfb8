import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Shares under SIGKILL: a writer that saves records with their shares in one commit, has them accepted and ends some
/// (`cloudlet-crash-writer --mode shares`) is killed again and again; after each reopen every acknowledged root and
/// share is there (unless acknowledged ended), every share record's root exists, and the catalog's shares are exactly
/// the zones' share records.
@Suite(.serialized) struct ShareCrashTests {
    @Test func sharesAndTheirRootsStayTogetherAndTheCatalogAgreesAfterSIGKILL() async throws {
        let exe = try builtExecutable("cloudlet-crash-writer")
        let dir = TempDir("share-crash")
        let data = dir.sub("store")
        var rng = SeededRandom(seed: 17)
        var acked: [String: String] = [:]  // name → zone
        var accepted: Set<String> = []
        var ending: Set<String> = []
        var ended: Set<String> = []
        for round in 0..<4 {
            let output = try await crashWriterOutput(
                exe, ["--data", data, "--prefix", "r\(round)", "--mode", "shares", "--writers", "4"],
                lines: Int.random(in: 20...120, using: &rng), round: round)
            for line in output {
                let parts = line.split(separator: " ").map(String.init)
                guard parts.count == 3 else { continue }
                switch parts[0] {
                case "ack": acked[parts[2]] = parts[1]
                case "accepted": accepted.insert(parts[2])
                case "ending": ending.insert(parts[2])
                case "ended": ended.insert(parts[2])
                default: break
                }
            }
            let store = try await CloudletStore.open(at: data)
            let alice = try store.container("iCloud.com.example.crash").privateDatabase(user: "alice")
            var problems: [String] = []
            for (name, zoneName) in acked {
                let zone = ZoneID(zoneName: zoneName, ownerName: "alice")
                if (try? await alice.record(for: RecordID(recordName: name, zoneID: zone))) == nil { problems.append("root \(name) lost") }
                let share = try? await alice.share(for: RecordID(recordName: name + "-share", zoneID: zone))
                if share == nil && !ending.contains(name) { problems.append("share of \(name) lost") }
                if share != nil && ended.contains(name) { problems.append("share of \(name) ended but back") }
                if let share, accepted.contains(name), share.participant("bob")?.acceptance != .accepted {
                    problems.append("bob's acceptance of \(name) lost")
                }
            }
            // The catalog's shares are exactly the share records, each with its root.
            let catalog = store.catalog.snapshot().shares
            for z in 0..<4 {
                let zone = ZoneID(zoneName: "S\(z)", ownerName: "alice")
                let key = ZoneKey(container: "iCloud.com.example.crash", environment: .development, owner: "alice", zoneName: zone.zoneName)
                guard (try? await alice.zone(for: zone)) != nil else { continue }
                var token: ChangeToken? = nil
                var all: [RecordChange] = []
                repeat {
                    let page = try await alice.zoneChanges(zone, since: token, resultsLimit: 200, maxBytes: nil)
                    all += page.changes
                    token = page.token
                    if !page.moreComing { break }
                } while true
                var records: [String: Share] = [:]
                for case .changed(let r) in all where r.recordType == Share.recordType { records[r.recordName] = try Share(record: r) }
                if catalog.shares(in: key) != records {
                    problems.append("zone \(zone.zoneName): catalog has \(catalog.shares(in: key).count) shares, the zone \(records.count) share records, not the same")
                }
                for s in records.values {
                    if (try? await alice.record(for: RecordID(recordName: s.rootRecordName!, zoneID: zone))) == nil {
                        problems.append("share \(s.id.recordName) without its root")
                    }
                }
            }
            #expect(problems.isEmpty, "round \(round): \(problems.count) problems, e.g. \(problems.prefix(5))")
            try await store.close()
        }
        #expect(acked.count > 20 && !accepted.isEmpty && !ended.isEmpty, "the writers did too little to test anything")
    }
}
