import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// SIGKILL while records with assets are saved, records deleted and asset garbage collected (no grace window) all
/// at once: after reopening, every acknowledged record is there with its asset whole, no live record references a
/// missing or partial file, and no partial write is left.
@Suite(.serialized) struct AssetCrashTests {
    @Test func noAcknowledgedRecordLosesItsAssetToACrashOrToTheCollection() async throws {
        let exe = try builtExecutable("cloudlet-crash-writer")
        let dir = TempDir("asset-crash")
        let data = dir.sub("store")
        var rng = SeededRandom(seed: 15)
        var acked: [String: (zone: String, checksum: String)] = [:]
        var mayBeDeleted: Set<String> = []
        for round in 0..<8 {
            let child = try ChildProcess(exe, ["--data", data, "--prefix", "r\(round)", "--mode", "assets", "--writers", "4"])
            let target = Int.random(in: 5...150, using: &rng)
            let deadline = Date().addingTimeInterval(10)
            while child.stdout.count < target + 1 && Date() < deadline { try await Task.sleep(for: .milliseconds(2)) }
            await child.stop(SIGKILL)
            #expect(
                child.process.terminationReason == .uncaughtSignal,
                "round \(round): writer died on its own; stderr: \(child.stderr)")
            for line in child.stdout {
                let parts = line.split(separator: " ").map(String.init)
                switch parts.first {
                case "ack": acked[parts[2]] = (parts[1], parts[3])
                case "deleting": mayBeDeleted.insert(parts[2])
                default: break
                }
            }
            let store = try await CloudletStore.open(at: data)
            let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
            var lost: [String] = []
            for (name, (zone, checksum)) in acked where !mayBeDeleted.contains(name) {
                guard let r = try? await db.record(for: RecordID(recordName: name, zoneID: ZoneID(zoneName: zone))) else {
                    lost.append(name)
                    continue
                }
                #expect(r["image"]?.assets.first?.fileChecksum == checksum)
                #expect((try? store.assets.verify(checksum)) == true, "round \(round): \(name)'s asset \(checksum) is damaged")
            }
            #expect(lost.isEmpty, "round \(round): \(lost.count) acknowledged records lost, e.g. \(lost.prefix(5))")
            var dangling: [String] = []
            try store.forEachAsset { _, name, _, asset in
                if !store.assets.exists(asset.fileChecksum) { dangling.append(name) }
            }
            #expect(dangling.isEmpty, "round \(round): records referencing missing files: \(dangling.prefix(5))")
            let partial = (try? FileManager.default.contentsOfDirectory(atPath: store.assets.directory + "/tmp")) ?? []
            #expect(partial.isEmpty, "round \(round): partial writes left: \(partial)")
            try await store.close()
        }
        #expect(acked.count > 8, "the writers acknowledged too little to test anything")
    }
}
