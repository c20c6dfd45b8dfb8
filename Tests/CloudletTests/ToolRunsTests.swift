import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

/// `cloudlet-tool runs` on LSM directories and run files the tests build.
@Suite struct ToolRunsTests {
    /// A tree with runs on two levels, some deletions, a log position; returns the live keys and values.
    func buildTree(_ path: String) throws -> [String: String] {
        var configuration = LSMTreeConfiguration()
        configuration.run.blockSize = 256
        configuration.level0MergeTrigger = 2
        configuration.backgroundMerges = false
        let tree = try LSMTree(directory: path, configuration: configuration)
        var live: [String: String] = [:]
        var sequence: UInt64 = 0
        for round in 0..<3 {
            for i in 0..<100 {
                sequence += 1
                try tree.put(Array("key\(i)".utf8), Array("value \(i) round \(round)".utf8), sequence: sequence)
                live["key\(i)"] = "value \(i) round \(round)"
            }
            for i in stride(from: round, to: 100, by: 7) {
                sequence += 1
                try tree.delete(Array("key\(i)".utf8), sequence: sequence)
                live["key\(i)"] = nil
            }
            try tree.flush(logPosition: [0xAB, UInt8(round)])
            if round == 1 { try tree.mergeUntilIdle() }
        }
        tree.close()
        return live
    }

    @Test func verifyDumpAndStatsOfADirectoryAndARun() async throws {
        let dir = TempDir("tool-runs")
        let path = dir.sub("lsm")
        let live = try buildTree(path)

        let verify = try await tool("runs", "verify", path)
        #expect(verify.code == 0 && verify.stdout.contains("ok: 2 runs verified"), "\(verify)")

        let dump = try await tool("runs", "dump", path, "--json")
        #expect(dump.code == 0, "\(dump)")
        let entries = try dump.jsonLines()
        #expect(entries.count == live.count)
        let keys = entries.compactMap { $0["key"]?.stringValue }
        #expect(keys == live.keys.sorted().map { LSMKey.hex(Array($0.utf8)) })
        #expect(try await tool("runs", "dump", path, "--tombstones", "--json").jsonLines().count == 100)

        let stats = try await tool("runs", "stats", path, "--json")
        let json = try stats.json()
        #expect(json["levels"]?.arrayValue?.compactMap { $0["level"]?.int64Value } == [0, 1], "\(stats)")
        #expect(json["logPosition"]?.stringValue == "ab02")
        #expect(json["leftovers"]?.arrayValue?.isEmpty == true)

        let runFile = try #require(try FileManager.default.contentsOfDirectory(atPath: path).first { $0.hasSuffix(".run") })
        let single = try await tool("runs", "dump", path + "/" + runFile)
        #expect(single.code == 0 && !single.lines.isEmpty, "\(single)")
    }

    @Test func verifyNamesADamagedRunAndDumpRefusesIt() async throws {
        let dir = TempDir("tool-runs")
        let path = dir.sub("lsm")
        _ = try buildTree(path)
        let runFile = try #require(try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(".run") }.sorted().first)
        let runPath = path + "/" + runFile
        let handle = try #require(FileHandle(forUpdatingAtPath: runPath))
        try handle.seek(toOffset: 20)
        var byte = try #require(try handle.read(upToCount: 1))
        byte[0] ^= 0x55
        try handle.seek(toOffset: 20)
        try handle.write(contentsOf: byte)
        try handle.close()

        let verify = try await tool("runs", "verify", path)
        #expect(verify.code == 65, "\(verify)")
        #expect(verify.stdout.contains("sorted run \(runPath) offset 16:"), "\(verify)")
        let dump = try await tool("runs", "dump", path)
        #expect(dump.code == 65 && dump.stderr.contains(runPath), "\(dump)")
    }
}
