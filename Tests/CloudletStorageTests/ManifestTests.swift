import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("Manifest")
struct ManifestTests {
    private func run(_ number: UInt64, level: Int = 0, _ low: String = "a", _ high: String = "z", sequence: UInt64 = 1)
        -> LSMRunMetadata
    {
        LSMRunMetadata(
            fileNumber: number, level: level, smallestKey: Array(low.utf8), largestKey: Array(high.utf8),
            entryCount: 10, fileSize: 1000, maxSequence: sequence)
    }

    private func manifestPath(_ fs: InMemoryFileSystem) throws -> String {
        "/t/" + (try #require(try manifestNames(fs).first))
    }

    /// The names of the manifests in `/t`.
    private func manifestNames(_ fs: InMemoryFileSystem) throws -> [String] {
        try fs.listDirectory("/t").filter { $0.hasPrefix("MANIFEST-") }
    }

    /// Creates an (empty) run file for each number, so that the manifest finds them live.
    private func touch(_ fs: InMemoryFileSystem, _ numbers: UInt64...) {
        for n in numbers { fs.setContents(of: "/t/" + SortedRunFile.name(n), to: [1]) }
    }

    /// One edit per `i` in `edits`: adds a new run (log position `[i]`) and drops the oldest once more than `keeping`
    /// would be live.
    private func addRuns(_ edits: Range<Int>, to manifest: Manifest, _ fs: InMemoryFileSystem, keeping: Int) throws {
        for i in edits {
            let n = manifest.newFileNumber()
            touch(fs, n)
            let removed = manifest.current.runs.count >= keeping ? [manifest.current.runs[0].fileNumber] : []
            try manifest.apply(ManifestEdit(logPosition: [UInt8(i)], addedRuns: [run(n, sequence: UInt64(i))], removedRuns: removed))
        }
    }

    @Test("reopening applies every edit: runs, log position, counters")
    func reopen() throws {
        let fs = InMemoryFileSystem()
        let manifest = try Manifest(directory: "/t", fileSystem: fs)
        #expect(manifest.current.runs.isEmpty && manifest.openReport.manifest == nil)
        let a = manifest.newFileNumber()
        let b = manifest.newFileNumber()
        touch(fs, a, b)
        try manifest.apply(ManifestEdit(logPosition: [1, 2, 3], addedRuns: [run(a, sequence: 5)]))
        try manifest.apply(ManifestEdit(logPosition: [4], addedRuns: [run(b, sequence: 9)]))
        let c = manifest.newFileNumber()
        touch(fs, c)
        let after = try manifest.apply(ManifestEdit(addedRuns: [run(c, level: 1, sequence: 9)], removedRuns: [a, b]))
        #expect(after.runs.map(\.fileNumber) == [c] && after.logPosition == [4] && after.lastSequence == 9)
        manifest.close()
        fs.crash()

        let reopened = try Manifest(directory: "/t", fileSystem: fs)
        #expect(reopened.current.runs == after.runs)
        #expect(reopened.current.logPosition == [4])
        #expect(reopened.current.lastSequence == 9)
        #expect(reopened.openReport.tornTail == nil && reopened.openReport.editCount == 4)
        #expect(reopened.newFileNumber() > c)
        // The old manifest was replaced by a fresh one; the runs a and b removed by the last edit were deleted.
        let names = try fs.listDirectory("/t").sorted()
        #expect(names.filter { $0.hasPrefix("MANIFEST-") }.count == 1)
        #expect(names.contains(SortedRunFile.name(c)) && !names.contains(SortedRunFile.name(a)))
    }

    @Test("a torn last edit is ignored and reported; the edits before it stand")
    func tornTail() throws {
        for keep in [3, 8, 20] {
            let fs = InMemoryFileSystem()
            let manifest = try Manifest(directory: "/t", fileSystem: fs)
            touch(fs, 100, 101)
            try manifest.apply(ManifestEdit(logPosition: [1], addedRuns: [run(100)]))
            let path = try manifestPath(fs)
            let good = try #require(fs.contents(of: path))
            try manifest.apply(ManifestEdit(logPosition: [2], addedRuns: [run(101)]))
            let full = try #require(fs.contents(of: path))
            manifest.close()
            fs.setContents(of: path, to: Array(full[0..<(good.count + keep)]))  // the second append, torn

            let reopened = try Manifest(directory: "/t", fileSystem: fs)
            #expect(reopened.current.runs.map(\.fileNumber) == [100], "keeping \(keep)")
            #expect(reopened.current.logPosition == [1])
            #expect(reopened.openReport.tornTail?.contains("offset \(good.count)") == true)
            #expect(!fs.fileExists("/t/" + SortedRunFile.name(101)), "an unreferenced run is a leftover")
            // A fresh manifest holds the state, so the next open sees no torn tail.
            reopened.close()
            #expect(try Manifest(directory: "/t", fileSystem: fs).openReport.tornTail == nil)
        }
    }

    @Test("damage in the middle is corruption naming the manifest and offset")
    func middleCorruption() throws {
        let fs = InMemoryFileSystem()
        let manifest = try Manifest(directory: "/t", fileSystem: fs)
        touch(fs, 100, 101, 102)
        for n in [100, 101, 102] as [UInt64] { try manifest.apply(ManifestEdit(addedRuns: [run(n)])) }
        manifest.close()
        let path = try manifestPath(fs)
        var bytes = try #require(fs.contents(of: path))
        let firstEdit = 16 + 8 + ManifestEditSize.snapshot(bytes)
        bytes[firstEdit + 12] ^= 0x40  // inside the first appended edit
        fs.setContents(of: path, to: bytes)
        let error = cloudletError { _ = try Manifest(directory: "/t", fileSystem: fs) }
        #expect(error?.code == .corruption)
        #expect(error?.message.contains(path) == true && error?.message.contains("offset \(firstEdit)") == true)
        #expect(fs.contents(of: path) == bytes, "a failed open changes nothing")
        // CURRENT naming a missing manifest is corruption too.
        fs.setContents(of: "/t/CURRENT", to: Array("MANIFEST-00000000000000000777\n".utf8))
        #expect(cloudletError { _ = try Manifest(directory: "/t", fileSystem: fs) }?.code == .corruption)
    }

    @Test("leftover run files, temp files and old manifests are removed on open")
    func leftovers() throws {
        let fs = InMemoryFileSystem()
        let manifest = try Manifest(directory: "/t", fileSystem: fs)
        touch(fs, 5)
        try manifest.apply(ManifestEdit(addedRuns: [run(5)]))
        manifest.close()
        touch(fs, 6, 7)  // written by a flush or merge that never reached the manifest
        fs.setContents(of: "/t/" + SortedRunFile.name(8) + ".tmp", to: [0])
        fs.setContents(of: "/t/MANIFEST-00000000000000000099", to: [0])
        fs.setContents(of: "/t/CURRENT.tmp", to: [0])
        fs.setContents(of: "/t/unrelated.txt", to: [0])
        let reopened = try Manifest(directory: "/t", fileSystem: fs)
        #expect(
            reopened.openReport.removedFiles.sorted() == [
                SortedRunFile.name(6), SortedRunFile.name(7), SortedRunFile.name(8) + ".tmp", "CURRENT.tmp",
                "MANIFEST-00000000000000000099",
            ]
        )
        let names = Set(try fs.listDirectory("/t"))
        #expect(names.contains(SortedRunFile.name(5)) && names.contains("unrelated.txt") && names.contains("CURRENT"))
        #expect(!names.contains("CURRENT.tmp"))
        #expect(names.filter { $0.hasPrefix("MANIFEST-") }.count == 1 && !names.contains("MANIFEST-00000000000000000099"))
        #expect(reopened.current.runs.map(\.fileNumber) == [5])
    }

    @Test("an intact manifest under the rewrite size is reopened without writing anything and takes the next edits; a longer one is rewritten at open")
    func reopenWritesNothing() throws {
        let fs = InMemoryFileSystem()
        let manifest = try Manifest(directory: "/t", fileSystem: fs)
        for n in UInt64(1)...4 {
            touch(fs, n)
            try manifest.apply(ManifestEdit(logPosition: [UInt8(n)], addedRuns: [run(n, sequence: n)]))
        }
        manifest.close()
        func snapshot() -> [String: [UInt8]] {
            let names = (try? fs.listDirectory("/t")) ?? []
            return Dictionary(uniqueKeysWithValues: names.map { ($0, fs.contents(of: "/t/" + $0) ?? []) })
        }
        let before = snapshot()
        let reopened = try Manifest(directory: "/t", fileSystem: fs)
        #expect(reopened.openReport.reused && reopened.openReport.removedFiles.isEmpty)
        #expect(snapshot() == before, "opening wrote, renamed or deleted nothing")
        #expect(Set(reopened.current.runs.map(\.fileNumber)) == [1, 2, 3, 4] && reopened.current.logPosition == [4])
        touch(fs, 5)
        try reopened.apply(ManifestEdit(logPosition: [5], removedRuns: [1]))
        reopened.close()
        let manifests = try manifestNames(fs)
        #expect(manifests == before.keys.filter { $0.hasPrefix("MANIFEST-") }, "the edit went into the same manifest")

        // Past the rewrite size, the open writes a fresh manifest of one snapshot.
        var small = Manifest.Configuration()
        small.rewriteSize = 40
        let third = try Manifest(directory: "/t", fileSystem: fs, configuration: small)
        #expect(!third.openReport.reused && third.openReport.editCount == 6)
        #expect(Set(third.current.runs.map(\.fileNumber)) == [2, 3, 4] && third.current.logPosition == [5])
        let fresh = try manifestNames(fs)
        #expect(fresh.count == 1 && fresh != manifests)
        third.close()
        let fourth = try Manifest(directory: "/t", fileSystem: fs)
        #expect(fourth.openReport.editCount == 1 && Set(fourth.current.runs.map(\.fileNumber)) == [2, 3, 4])
        fourth.close()
    }

    @Test("a large manifest is rewritten as one snapshot, and reopens the same")
    func rewrite() throws {
        let fs = InMemoryFileSystem()
        var configuration = Manifest.Configuration()
        configuration.rewriteSize = 2000
        let manifest = try Manifest(directory: "/t", fileSystem: fs, configuration: configuration)
        try addRuns(0..<200, to: manifest, fs, keeping: 4)
        let version = manifest.current
        let manifests = try manifestNames(fs)
        #expect(manifests.count == 1)
        #expect(try #require(fs.contents(of: "/t/" + manifests[0])).count <= 2000 + 200)
        manifest.close()
        let reopened = try Manifest(directory: "/t", fileSystem: fs, configuration: configuration)
        #expect(reopened.current.runs == version.runs && reopened.current.logPosition == [199])
    }

    @Test("a clean close rewrites a manifest of many edits as its snapshot (the next open replays one record); a short one is kept")
    func closeRewritesALongManifest() throws {
        let fs = InMemoryFileSystem()
        var configuration = Manifest.Configuration()
        configuration.closeRewriteSize = 50
        let manifest = try Manifest(directory: "/t", fileSystem: fs, configuration: configuration)
        // Each edit adds a run and drops the oldest past 3: the edits outgrow a snapshot of 3 runs.
        try addRuns(0..<40, to: manifest, fs, keeping: 3)
        let version = manifest.current
        let before = try manifestNames(fs)
        manifest.close()
        let after = try manifestNames(fs)
        #expect(after.count == 1 && after != before, "close wrote a fresh manifest and removed the old one")
        let reopened = try Manifest(directory: "/t", fileSystem: fs, configuration: configuration)
        #expect(reopened.openReport.editCount == 1 && reopened.openReport.reused)
        #expect(reopened.current.runs == version.runs && reopened.current.logPosition == [39])
        #expect(reopened.current.nextFileNumber >= version.nextFileNumber)
        let snapshotLength = try #require(fs.contents(of: "/t/" + after[0])).count

        // One more edit: not twice the snapshot — kept as it is (however short the size limit).
        try addRuns(40..<41, to: reopened, fs, keeping: 3)
        let grown = try #require(fs.contents(of: "/t/" + after[0])).count
        #expect(grown > 50 && grown - snapshotLength < snapshotLength / 2, "over the close rewrite size, far from twice the snapshot (\(grown), \(snapshotLength))")
        reopened.close()
        #expect(try manifestNames(fs) == after)
        let third = try Manifest(directory: "/t", fileSystem: fs, configuration: configuration)
        #expect(third.openReport.editCount == 2 && third.current.logPosition == [40])
        third.close()
    }

    @Test("a failed fdatasync fails the edit, refuses later ones, and the edit is not there after a crash")
    func fsyncFailure() throws {
        let memory = InMemoryFileSystem()
        let fs = FaultInjectingFileSystem(wrapping: memory)
        let manifest = try Manifest(directory: "/t", fileSystem: fs)
        touch(memory, 1_000, 1_001)
        try manifest.apply(ManifestEdit(logPosition: [1], addedRuns: [run(1_000)]))
        fs.failFdatasync(nth: 1)
        let error = cloudletError { try manifest.apply(ManifestEdit(logPosition: [2], addedRuns: [run(1_001)])) }
        #expect(error?.code == .io && error?.message.contains("manifest") == true)
        #expect(manifest.current.logPosition == [1])
        #expect(cloudletError { try manifest.apply(ManifestEdit(logPosition: [3])) }?.code == .readOnly)
        memory.crash()
        let reopened = try Manifest(directory: "/t", fileSystem: memory)
        #expect(reopened.current.runs.map(\.fileNumber) == [1_000] && reopened.current.logPosition == [1])
    }

    @Test("a directory with runs but no CURRENT is refused")
    func runsWithoutCurrent() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/t")
        touch(fs, 3)
        #expect(cloudletError { _ = try Manifest(directory: "/t", fileSystem: fs) }?.code == .corruption)
    }
}

/// Sizes inside a manifest file, for tests that damage a chosen record.
enum ManifestEditSize {
    /// The payload length of the first record (the snapshot), read from its header.
    static func snapshot(_ bytes: [UInt8]) -> Int {
        Int(bytes[16]) | Int(bytes[17]) << 8 | Int(bytes[18]) << 16 | Int(bytes[19]) << 24
    }
}
