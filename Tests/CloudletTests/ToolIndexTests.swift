import CloudletCore
import CloudletMaintenance
import CloudletStorage
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import Cloudlet

/// `cloudlet-tool verify`, `info` and `stats` on the index of a store of format 4 (`p*/index`, the key directory's
/// LSM tree): what they report of a sound one, and how they name a damaged or stale one.
@Suite(.serialized) struct ToolIndexTests {
    /// Partition 0's index directory.
    func indexDirectory(_ store: String) -> String { store + "/p0000/index" }

    /// The run files of partition 0's index, by name, with their sizes.
    func runs(_ store: String) throws -> [(name: String, size: UInt64)] {
        try FileManager.default.contentsOfDirectory(atPath: indexDirectory(store)).filter { $0.hasSuffix(SortedRunFile.suffix) }
            .sorted().map { name in
                let attributes = try FileManager.default.attributesOfItem(atPath: indexDirectory(store) + "/" + name)
                return (name, try #require(attributes[.size] as? UInt64))
            }
    }

    /// The data blocks of a run file.
    func dataBlocks(_ path: String) throws -> [BlockHandle] {
        let reader = try SortedRunReader(path: path, fileNumber: SortedRunFile.number(fileName: Path.name(path)) ?? 0)
        defer { reader.close() }
        return try reader.dataBlocks
    }

    /// The error findings of a `verify --json` run as (file, offset, message).
    func errors(_ run: ToolRun) throws -> Set<String> {
        Set(try run.json()["findings"]?.arrayValue?.filter { $0["severity"]?.stringValue == "error" }.map {
            "\($0["file"]?.stringValue ?? "") \($0["offset"]?.int64Value ?? -1) \($0["message"]?.stringValue ?? "")"
        } ?? [])
    }

    /// Runs `verify` on a damaged store: it fails (exit 65) and prints `expected`; `verify --deep` fails with the
    /// same errors (the full replay agrees that nothing else is wrong). Returns the text run and the JSON one.
    func verifyFails(_ path: String, printing expected: String) async throws -> (text: ToolRun, json: ToolRun) {
        let text = try await tool("verify", "--data", path)
        #expect(text.code == 65 && text.stdout.hasPrefix("error:"), "\(text)")
        #expect(text.stdout.contains(expected), "\(text)")
        let json = try await tool("verify", "--data", path, "--json")
        #expect(try json.json()["ok"]?.boolValue == false)
        let deep = try await tool("verify", "--data", path, "--deep", "--json")
        #expect(deep.code == 65)
        #expect(try errors(deep) == errors(json), "\(deep)")
        return (text, json)
    }

    /// `verify --deep` finds nothing wrong any more, and the content is what it was (`hash`).
    func expectRebuilt(_ path: String, hash: String) async throws {
        let after = try await tool("verify", "--data", path, "--deep")
        #expect(after.code == 0 && !after.stdout.contains("warning:"), "\(after)")
        #expect(try contentHash(path) == hash)
    }

    /// Opens the store read-write, as a server would, and returns what opening found and worked around.
    func openReadWrite(_ path: String) async throws -> [String] {
        let store = try await CloudletStore.open(at: path, configuration: toolStoreConfig())
        let findings = store.statistics.recoveryFindings
        try await store.close()
        return findings
    }

    @Test func verifyChecksTheIndexOfACleanStoreAndFindsNothing() async throws {
        let dir = TempDir("tool-index-clean")
        let path = dir.sub("store")
        try await buildSample(path)
        let files = try runs(path)
        #expect(!files.isEmpty)

        let text = try await tool("verify", "--data", path)
        #expect(text.code == 0 && text.stdout.hasPrefix("ok:"), "\(text)")
        #expect(text.stdout.contains("index (p*/index): \(files.count) run(s)"), "\(text)")
        #expect(!text.stdout.contains("warning:") && !text.stdout.contains("error:"))

        let run = try await tool("verify", "--data", path, "--json")
        let json = try run.json()
        #expect(json["ok"]?.boolValue == true && json["findings"]?.arrayValue?.isEmpty == true, "\(run)")
        let p0 = try #require(json["partitions"]?.arrayValue?.first)
        #expect(p0["index"]?.int64Value == 0, "the partition number keeps its key")
        #expect(p0["indexDirectory"]?.stringValue == indexDirectory(path))
        #expect(p0["indexRuns"]?.int64Value == Int64(files.count))
        #expect(p0["indexBytes"]?.int64Value == Int64(files.reduce(0) { $0 + $1.size }))
        let lastLSN = try #require(p0["lastLSN"]?.int64Value)
        #expect(p0["flushedLSN"]?.int64Value == lastLSN, "closing flushed the index at the log's end")
        #expect(p0["checkpointLSN"]?.int64Value == lastLSN, "the next open replays nothing")
        // 35 records and 1 tombstone, each checked against its frame.
        #expect(p0["entriesChecked"]?.int64Value == 36)

        let deep = try await tool("verify", "--data", path, "--deep", "--json")
        let deepFindings = try deep.json()["findings"]?.arrayValue
        #expect(deep.code == 0 && deepFindings?.isEmpty == true, "\(deep)")
        let deepText = try await tool("verify", "--data", path, "--deep")
        #expect(deepText.code == 0 && deepText.stdout.contains("full replay compared") && !deepText.stdout.contains("warning:"), "\(deepText)")
    }

    enum IndexDamage: String, CaseIterable, CustomTestStringConvertible {
        /// A byte of the newest run's header flipped: the run does not open.
        case runHeader
        /// A byte flipped in the newest run's last data block, which holds the flushed state.
        case lastDataBlock
        /// CURRENT gone: the index cannot be read.
        case currentLost
        var testDescription: String { rawValue }
    }

    @Test(arguments: IndexDamage.allCases)
    func verifyNamesTheDamagedIndexFileAndAReadWriteOpenRebuildsIt(_ damage: IndexDamage) async throws {
        let dir = TempDir("tool-index-damage")
        let path = dir.sub("store")
        try await buildSample(path)
        let hash = try contentHash(path)
        let newest = try #require(try runs(path).last).name
        let runPath = indexDirectory(path) + "/" + newest
        let expected: String
        switch damage {
        case .runHeader:
            try xorByte(runPath, at: 4, with: 0x55)
            expected = "error: partition 0, index run index/\(newest): the index does not open: sorted run \(runPath) offset 0: bad header magic"
        case .lastDataBlock:
            let block = try #require(try dataBlocks(runPath).last)
            try xorByte(runPath, at: block.offset + block.size / 2, with: 0x10)
            expected = "error: partition 0, index run index/\(newest), offset \(block.offset): damaged index run: "
        case .currentLost:
            try FileManager.default.removeItem(atPath: indexDirectory(path) + "/CURRENT")
            expected = "error: partition 0, index file index/CURRENT: the index has no CURRENT file"
        }

        let (text, run) = try await verifyFails(path, printing: expected)
        #expect(text.stdout.contains("a read-write open (or `cloudlet-tool repair`) sets the index aside and rebuilds it from the log"))
        let named = damage == .currentLost ? "CURRENT" : newest
        #expect(try run.json()["findings"]?.arrayValue?.contains { $0["file"]?.stringValue == named && $0["severity"]?.stringValue == "error" } == true, "\(run)")

        let findings = try await openReadWrite(path)
        #expect(findings.count == 1 && findings[0].hasPrefix("partition 0: set aside the index \(indexDirectory(path))"), "\(findings)")
        #expect(findings.first?.hasSuffix("and rebuilt it from the log") == true)
        try await expectRebuilt(path, hash: hash)
    }

    /// A damaged block that opening does not read (only the block holding the flushed state is read then): verify
    /// names it, and repair rebuilds the index.
    @Test func verifyNamesADamagedBlockOfAnIndexRunAndRepairRebuildsTheIndex() async throws {
        let dir = TempDir("tool-index-block")
        let path = dir.sub("store")
        let generated = try await tool("generate", "--data", path, "--records", "600", "--record-size", "100", "--segment-size", "64k")
        #expect(generated.code == 0, "\(generated)")
        let hash = try contentHash(path)
        let largest = try #require(try runs(path).max { $0.size < $1.size }).name
        let runPath = indexDirectory(path) + "/" + largest
        let blocks = try dataBlocks(runPath)
        #expect(blocks.count > 2)
        let victim = blocks[blocks.count / 2]
        try xorByte(runPath, at: victim.offset + 3)

        let (text, _) = try await verifyFails(
            path, printing: "error: partition 0, index run index/\(largest), offset \(victim.offset): damaged index run: ")
        #expect(text.stdout.contains("`cloudlet-tool repair` rebuilds the index from the log"))

        let repair = try await tool("repair", "--data", path, "--backup", dir.sub("backup"))
        #expect(repair.code == 0 && repair.stdout.contains("wrote a new index"), "\(repair)")
        #expect(FileManager.default.fileExists(atPath: dir.sub("backup") + "/p0000/index/" + largest), "the damaged index was saved")
        try await expectRebuilt(path, hash: hash)
    }

    @Test func verifyWarnsThatAnIndexFlushedBeforeACompactionIsRebuiltOnOpen() async throws {
        let dir = TempDir("tool-index-stale")
        let path = dir.sub("store")
        try await buildSample(path)
        let old = dir.sub("old-index")
        try FileManager.default.copyItem(atPath: indexDirectory(path), toPath: old)
        #expect(try await tool("compact", "--data", path).code == 0)
        try FileManager.default.removeItem(atPath: indexDirectory(path))
        try FileManager.default.moveItem(atPath: old, toPath: indexDirectory(path))

        let text = try await tool("verify", "--data", path, "--deep")
        #expect(text.code == 0, "a stale index is no damage: \(text)")
        #expect(text.stdout.contains("warning: partition 0, index manifest index/MANIFEST-"), "\(text)")
        #expect(text.stdout.contains("flushed under compaction generation 0, the log is at 1: the next open rebuilds the index from the log"))
        let p0 = try #require(try await tool("verify", "--data", path, "--json").json()["partitions"]?.arrayValue?.first)
        #expect(p0["compactionGeneration"]?.int64Value == 1 && p0["indexGeneration"]?.int64Value == 0)
        #expect(p0["checkpointLSN"] == nil && p0["entriesChecked"]?.int64Value == 0, "an open replays the whole log")
        let info = try #require(try await tool("info", "--data", path, "--json").json()["partitions"]?.arrayValue?.first)
        #expect(info["indexUsed"]?.boolValue == false)
        #expect(info["indexProblem"]?.stringValue?.contains("compaction generation 0") == true)

        let findings = try await openReadWrite(path)
        #expect(findings.count == 1 && findings[0].contains("set aside the index"), "\(findings)")
        let after = try await tool("verify", "--data", path, "--json")
        let q0 = try #require(try after.json()["partitions"]?.arrayValue?.first)
        let afterFindings = try after.json()["findings"]?.arrayValue
        #expect(after.code == 0 && afterFindings?.isEmpty == true, "\(after)")
        #expect(q0["indexGeneration"]?.int64Value == 1 && q0["entriesChecked"]?.int64Value == 36)
    }

    /// What a store of format 3 without a checkpoint looks like: no index. Verify replays the whole log, info says
    /// so, and a read-write open writes the index.
    @Test func aStoreWithoutAnIndexVerifiesByAFullReplay() async throws {
        let dir = TempDir("tool-index-none")
        let path = dir.sub("store")
        try await buildSample(path)
        try FileManager.default.removeItem(atPath: indexDirectory(path))

        let run = try await tool("verify", "--data", path, "--deep", "--json")
        let json = try run.json()
        #expect(run.code == 0 && json["findings"]?.arrayValue?.isEmpty == true, "\(run)")
        let p0 = try #require(json["partitions"]?.arrayValue?.first)
        #expect(p0["indexDirectory"] == nil && p0["flushedLSN"] == nil && p0["checkpointLSN"] == nil)
        #expect(p0["entriesChecked"]?.int64Value == 0)
        let info = try await tool("info", "--data", path)
        #expect(info.code == 0 && info.stdout.contains("no index: opening replays the whole log"), "\(info)")

        #expect(try await openReadWrite(path).isEmpty)
        let after = try #require(try await tool("verify", "--data", path, "--json").json()["partitions"]?.arrayValue?.first)
        #expect(after["indexRuns"]?.int64Value ?? 0 >= 1 && after["entriesChecked"]?.int64Value == 36)
    }

    @Test func infoAndStatsDescribeEachPartitionsIndex() async throws {
        let dir = TempDir("tool-index-info")
        let path = dir.sub("store")
        try await buildSample(path)
        let files = try runs(path)
        let size = files.reduce(0) { $0 + $1.size }

        let info = try await tool("info", "--data", path)
        #expect(info.code == 0, "\(info)")
        #expect(info.stdout.contains("  index (index/): \(files.count) run(s) (level 0: "), "\(info)")
        #expect(info.stdout.contains("35 record(s), 1 tombstone(s), used"))
        #expect(info.stdout.contains("opening replays 0 frame(s) after the index's flush"))
        let ij = try await tool("info", "--data", path, "--json").json()
        let p0 = try #require(ij["partitions"]?.arrayValue?.first)
        let lastLSN = try #require(p0["lastLSN"]?.int64Value)
        #expect(p0["index"]?.int64Value == 0 && p0["indexDirectory"]?.stringValue == indexDirectory(path))
        #expect(p0["indexRuns"]?.int64Value == Int64(files.count) && p0["indexBytes"]?.int64Value == Int64(size))
        let levels = try #require(p0["indexLevels"]?.arrayValue)
        #expect(levels.compactMap { $0["runs"]?.int64Value }.reduce(0, +) == Int64(files.count))
        #expect(levels.compactMap { $0["bytes"]?.int64Value }.reduce(0, +) == Int64(size))
        #expect(p0["flushedLSN"]?.int64Value == lastLSN && p0["indexGeneration"]?.int64Value == 0)
        #expect(p0["indexRecords"]?.int64Value == 35 && p0["indexTombstones"]?.int64Value == 1)
        #expect(p0["indexUsed"]?.boolValue == true && p0["indexProblem"] == nil)
        #expect(p0["indexManifest"]?.stringValue?.hasPrefix("MANIFEST-") == true)
        #expect(p0["checkpoints"]?.arrayValue?.isEmpty == true)

        let stats = try await tool("stats", "--data", path)
        #expect(stats.code == 0 && stats.stdout.contains("  index (index/): \(files.count) run(s)"), "\(stats)")
        let sj = try await tool("stats", "--data", path, "--json").json()
        let s0 = try #require(sj["partitions"]?.arrayValue?.first)
        #expect(s0["index"]?.int64Value == 0)
        #expect(s0["indexRuns"]?.int64Value == Int64(files.count) && s0["indexBytes"]?.int64Value == Int64(size))
        #expect(s0["flushedLSN"]?.int64Value == lastLSN)
        #expect(s0["indexRecords"]?.int64Value == s0["records"]?.int64Value && s0["indexTombstones"]?.int64Value == s0["tombstones"]?.int64Value)
        #expect(s0["keyDirectoryEntries"]?.int64Value == 36)
    }
}
