import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

/// An LSM tree killed (SIGKILL) at each of its crash points, in a child process: after every kill it reopens to
/// exactly the writes of its last durable flush, its runs verify, and the open leaves no leftover file.
@Suite struct LSMCrashTests {
    @Test func killedAtEveryCrashPointReopensToItsLastFlush() async throws {
        let dir = TempDir("lsm-crash")
        let path = dir.sub("tree")
        let seed: UInt64 = 42
        let points = [
            "lsm.flush.written:1", "lsm.manifest.appended:1", "lsm.merge.written:1", "lsm.manifest.appended:2",
            "replace.synced:3", "replace.renamed:2", "lsm.flush.written:3", "lsm.merge.written:4",
            "lsm.manifest.appended:5", "replace.synced:7",
        ]
        var previous = 0
        for (round, point) in points.enumerated() {
            let environment = ProcessInfo.processInfo.environment.merging(["CLOUDLET_CRASH_AT": point]) { $1 }
            let writer = try builtExecutable("cloudlet-crash-writer")
            let child = try await ThreadBridge.offload {
                try SpawnedProcess.run(writer, ["--data", path, "--mode", "lsm", "--seed", "\(seed)"], environment: environment)
            }
            #expect(
                child.reason == .uncaughtSignal && child.status == SIGKILL,
                "round \(round): \(point) was not reached")

            let tree = try LSMTree(directory: path, configuration: LSMCrashWorkload.configuration)
            let flushed = LSMCrashWorkload.index(tree.logPosition)
            #expect(flushed >= previous, "round \(round) (\(point)): the log position went back")
            previous = flushed
            let content = Dictionary(uniqueKeysWithValues: try tree.scan().map { ($0.key, $0.value) })
            #expect(content == LSMCrashWorkload.model(through: flushed, seed: seed), "round \(round) (\(point))")
            #expect(tree.verify().isEmpty, "round \(round) (\(point))")
            let live = Set(tree.runs.map { SortedRunFile.name($0.fileNumber) })
            let names = try FileManager.default.contentsOfDirectory(atPath: path)
            #expect(names.filter { $0.hasSuffix(".run") || $0.hasSuffix(".tmp") }.allSatisfy(live.contains), "round \(round): \(names)")
            #expect(names.filter { $0.hasPrefix("MANIFEST-") }.count == 1)
            tree.close()
        }
        #expect(previous > 0)
    }
}
