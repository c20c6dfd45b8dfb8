import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

@Suite(.serialized) struct CrashConsistencyTests {
    @Test func everyAcknowledgedWriteSurvivesSIGKILL() async throws {
        let exe = try builtExecutable("cloudlet-crash-writer")
        let dir = TempDir("crash")
        let data = dir.sub("store")
        var rng = SeededRandom(seed: 42)
        var acked: [(zone: String, name: String)] = []
        for round in 0..<12 {
            let child = try ChildProcess(exe, ["--data", data, "--prefix", "r\(round)"])
            // Let it run until a random number of acknowledgements (or a time limit), then kill it mid-write.
            let target = Int.random(in: 5...400, using: &rng)
            let deadline = Date().addingTimeInterval(10)
            while child.stdout.count < target + 1 && Date() < deadline { try await Task.sleep(for: .milliseconds(2)) }
            await child.stop(SIGKILL)
            let lines = child.stdout
            #expect(
                child.process.terminationReason == .uncaughtSignal,
                "round \(round): writer died on its own; stderr: \(child.stderr)")
            for line in lines where line.hasPrefix("ack ") {
                let parts = line.split(separator: " ")
                acked.append((String(parts[1]), String(parts[2])))
            }
            // Reopen (recovery of a torn tail included) and check every acknowledgement so far.
            let store = try await CloudletStore.open(at: data)
            let db = try store.container("iCloud.com.example.crash").privateDatabase(user: "crash")
            var missing: [String] = []
            for (zone, name) in acked {
                guard let r = try? await db.record(for: RecordID(recordName: name, zoneID: ZoneID(zoneName: zone))) else {
                    missing.append("\(zone)/\(name)")
                    continue
                }
                let seq = Int(name.split(separator: "-").last!)!
                #expect(r["seq"] == .int64(Int64(seq)))
                #expect(r["body"] == .string(String(repeating: "x", count: (seq * 37) % 700)))
            }
            #expect(missing.isEmpty, "round \(round): \(missing.count) acknowledged records lost, e.g. \(missing.prefix(5))")
            try await store.close()
        }
        #expect(acked.count > 12, "the writers acknowledged too little to test anything")
    }
}
