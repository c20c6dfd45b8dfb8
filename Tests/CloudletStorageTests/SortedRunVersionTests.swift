import CloudletCore
import CloudletTestSupport
import Testing

@testable import CloudletStorage

/// Format version 2 changed the filter block (SortedRunFormat.md, "Versioning"): runs written before are read as
/// they are; a version this code does not know is refused.
@Suite("Sorted run format versions")
struct SortedRunVersionTests {
    private func write(_ entries: [LSMEntry], version: UInt16, _ fs: any FileSystem) throws -> String {
        let path = "/lsm/" + SortedRunFile.name(1)
        let writer = try SortedRunWriter(
            path: path, fileNumber: 1, configuration: SortedRunConfiguration(), fileSystem: fs, creator: "test",
            formatVersion: version)
        for entry in entries { try writer.add(entry) }
        try writer.finish()
        return path
    }

    private func entries() -> [LSMEntry] {
        var rng = SeededRandom(seed: SeededRandom.testSeed())
        return randomEntries(3000, &rng)
    }

    @Test("a run of format version 1 (spread bloom filter) reads as before: every key, no absent one, scans, verify")
    func versionOneRunsStillRead() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/lsm")
        let entries = entries()
        let path = try write(entries, version: 1, fs)
        let reader = try SortedRunReader(path: path, fileNumber: 1, fileSystem: fs)
        defer { reader.close() }
        #expect(reader.properties.formatVersion == 1)
        guard case .spread = try reader.filter() else {
            Issue.record("a version-1 run's filter was not read as the spread filter")
            return
        }
        for entry in entries { #expect(try reader.get(entry.key) == entry) }
        let present = Set(entries.map(\.key))
        var rng = SeededRandom(seed: 11)
        for _ in 0..<500 {
            let key = randomKey(&rng, maxLength: 14)
            if !present.contains(key) { #expect(try reader.get(key) == nil) }
        }
        #expect(try reader.makeIterator().entries() == entries)
        #expect(reader.verify().isEmpty)
    }

    @Test("a new run is format version 2, its filter the cache-local one")
    func newRunsAreVersionTwo() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/lsm")
        let entries = entries()
        let path = try writeRun(entries, directory: "/lsm", fileSystem: fs)
        let bytes = try fs.readFile(path)
        #expect(bytes.loadLE(UInt16.self, at: 8) == 2, "the header's version")
        #expect(bytes.loadLE(UInt16.self, at: bytes.count - 64 + 8) == 2, "the footer's version")
        let reader = try SortedRunReader(path: path, fileNumber: 1, fileSystem: fs)
        defer { reader.close() }
        #expect(reader.properties.formatVersion == 2)
        guard case .blocked = try reader.filter() else {
            Issue.record("a version-2 run's filter was not read as the cache-local filter")
            return
        }
        for entry in entries { #expect(try reader.get(entry.key) == entry) }
        #expect(reader.verify().isEmpty)
    }

    @Test("a run of an unknown version, or whose header and footer disagree on it, is refused as corrupt, naming the versions")
    func unknownOrMismatchedVersionsAreRefused() throws {
        let fs = InMemoryFileSystem()
        try fs.createDirectory("/lsm")
        let path = try write(entries(), version: 2, fs)
        let pristine = try fs.readFile(path)
        func patched(header: UInt16?, footer: UInt16?) -> [UInt8] {
            var bytes = pristine
            if let header {
                bytes.replaceSubrange(8..<10, with: [UInt8(header & 0xFF), UInt8(header >> 8)])
                let crc = CRC32C.checksum(bytes[0..<12])
                bytes.replaceSubrange(12..<16, with: (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) })
            }
            if let footer {
                let start = bytes.count - 64
                bytes.replaceSubrange((start + 8)..<(start + 10), with: [UInt8(footer & 0xFF), UInt8(footer >> 8)])
                let crc = CRC32C.checksum(bytes[start..<(start + 60)])
                bytes.replaceSubrange((start + 60)..<(start + 64), with: (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) })
            }
            return bytes
        }
        for (header, footer, message) in [
            (UInt16(3), UInt16(3), "unsupported format version 3"),
            (nil, 3, "unsupported format version 3"),
            (1, nil, "the footer's format version 2 is not the header's 1"),
        ] as [(UInt16?, UInt16?, String)] {
            try fs.replaceFile(path, with: patched(header: header, footer: footer))
            let error = cloudletError { _ = try SortedRunReader(path: path, fileNumber: 1, fileSystem: fs) }
            #expect(error?.code == .corruption, "header \(String(describing: header)) footer \(String(describing: footer))")
            #expect(error?.message.contains(message) == true, "\(String(describing: error))")
            #expect(error?.message.contains(path) == true)
        }
    }
}
