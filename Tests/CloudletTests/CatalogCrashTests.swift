import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The catalog under SIGKILL: a writer that adds schema fields just in time in every partition and saves
/// subscriptions (`cloudlet-crash-writer --mode catalog`) is killed again and again; after each reopen every
/// acknowledged record is there with its field in the schema, and every acknowledged subscription is there.
/// The writer saves subscriptions only among each writer's first 20 saves of a round, so that notifications do not
/// grow with saves × subscriptions when a starved test lets the writers run for the full 10 s of a round.
@Suite(.serialized) struct CatalogCrashTests {
    @Test func everyAcknowledgedFieldAndSubscriptionSurvivesSIGKILL() async throws {
        let exe = try builtExecutable("cloudlet-crash-writer")
        let dir = TempDir("catalog-crash")
        let data = dir.sub("store")
        var rng = SeededRandom(seed: 7)
        var acked: [(zone: String, name: String)] = []
        var subscriptions: [String] = []
        // Four writers and short rounds: enough to kill mid-commit many times, light enough not to starve the
        // timing-sensitive tests that run next to this one.
        for round in 0..<5 {
            let output = try await crashWriterOutput(
                exe, ["--data", data, "--prefix", "r\(round)", "--mode", "catalog", "--partitions", "4", "--writers", "4"],
                lines: Int.random(in: 20...150, using: &rng), round: round)
            for line in output {
                let parts = line.split(separator: " ").map(String.init)
                if parts.first == "ack" { acked.append((parts[1], parts[2])) }
                if parts.first == "sub" { subscriptions.append(parts[1]) }
            }
            let store = try await CloudletStore.open(at: data)
            let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
            let schema = store.catalog.snapshot().schema.recordType(
                SchemaKey(container: "iCloud.com.example.crash", environment: .development), "Entry")
            var missing: [String] = []
            for (zone, name) in acked {
                // <prefix>-<writer>-<i>: field f_<prefix>_<writer>_<i % 16> = i.
                let parts = name.split(separator: "-").map(String.init)
                let i = Int(parts[2])!
                let field = "f_\(parts[0])_\(parts[1])_\(i % 16)"
                guard let r = try? await db.record(for: RecordID(recordName: name, zoneID: ZoneID(zoneName: zone))) else {
                    missing.append("record \(zone)/\(name)")
                    continue
                }
                #expect(r[field] == .int64(Int64(i)), "\(name)")
                if schema?.fields[field] != FieldType(.int64) { missing.append("field \(field) of \(name)") }
            }
            let saved = Set(try await db.subscriptions().map(\.id))
            for id in subscriptions where !saved.contains(id) { missing.append("subscription \(id)") }
            #expect(missing.isEmpty, "round \(round): \(missing.count) acknowledged writes lost, e.g. \(missing.prefix(5))")
            let version = store.catalog.snapshot().version
            for p in store.partitions { #expect(p.state.withLock { $0.catalogVersion } <= version) }
            try await store.close()
        }
        #expect(acked.count > 20 && subscriptions.count > 3, "the writers acknowledged too little to test anything")
    }
}
