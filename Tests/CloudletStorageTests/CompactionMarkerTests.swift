import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletStorage

@Suite("The compaction marker's epoch history (format 2), old markers (format 1), and the compaction horizon file")
struct CompactionMarkerTests {
    @Test("a marker with an epoch history reads back equal, and a format-1 marker still reads (history unknown)")
    func roundTrips() async throws {
        try await withTempDirectory { dir in
            let fs = PosixFileSystem()
            let epochs = [EpochStart(epoch: 2, firstLSN: 1), EpochStart(epoch: 9, firstLSN: 40), EpochStart(epoch: 12, firstLSN: 41)]
            let marker = CompactionMarker(generation: 3, coveredThrough: 57, epochs: epochs)
            try marker.write(directory: dir, fileSystem: fs)
            #expect(try CompactionMarker.load(directory: dir) == marker)
            #expect(marker.epoch(at: 40) == 9 && marker.epoch(at: 57) == 12 && marker.epoch(at: 39) == 2)
            // A marker written before the history existed: 32 bytes, format version 1.
            let old = CompactionMarker(generation: 4, coveredThrough: 80)
            #expect(old.encoded().count == 32 && old.encoded()[8] == 1)
            try old.write(directory: dir, fileSystem: fs)
            let read = try #require(try CompactionMarker.load(directory: dir))
            #expect(read.generation == 4 && read.coveredThrough == 80 && read.epochs == nil)
        }
    }

    @Test("a damaged or inconsistent epoch history is corruption")
    func refusesDamage() throws {
        let good = CompactionMarker(
            generation: 1, coveredThrough: 10, epochs: [EpochStart(epoch: 1, firstLSN: 1), EpochStart(epoch: 5, firstLSN: 6)]
        ).encoded()
        var flipped = good
        flipped[40] ^= 1
        #expect(throws: CloudletError.self) { try CompactionMarker.parse(flipped, path: "m") }
        #expect(throws: CloudletError.self) { try CompactionMarker.parse(Array(good.dropLast()), path: "m") }
        // Entries out of order, or past the covered range, even with a matching checksum.
        for bad in [
            [EpochStart(epoch: 5, firstLSN: 1), EpochStart(epoch: 1, firstLSN: 6)],
            [EpochStart(epoch: 1, firstLSN: 1), EpochStart(epoch: 5, firstLSN: 11)],
        ] {
            let bytes = CompactionMarker(generation: 1, coveredThrough: 10, epochs: bad).encoded()
            let error = try #require(throws: CloudletError.self) { try CompactionMarker.parse(bytes, path: "m") }
            #expect(error.code == .corruption)
        }
    }

    @Test("compaction records the epoch of every frame it covers, dropped ones too, and carries an older marker's on")
    func compactionRecordsEpochs() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config(segmentSize: 400, durability: .os))
            for epoch in [1, 4, 6] as [UInt64] {
                try log.lead(epoch: epoch)
                _ = try stageAll(log, (0..<10).map { [UInt8](repeating: UInt8($0), count: 60) })
            }
            try log.flush()
            try log.roll()
            // Keep only epoch 6's last frame: epochs 1 and 4 survive only in the marker.
            let writer = try LogCompactionTests.compact(log) { $0 == 30 }
            try log.installCompaction(writer)
            let expected = [EpochStart(epoch: 1, firstLSN: 1), EpochStart(epoch: 4, firstLSN: 11), EpochStart(epoch: 6, firstLSN: 21)]
            #expect(log.compactionMarker?.epochs == expected)
            // A second generation (over the first's segments and new ones) carries the first's history on.
            try log.lead(epoch: 8)
            _ = try stageAll(log, (0..<10).map { [UInt8](repeating: UInt8($0), count: 60) })
            try log.flush()
            try log.roll()
            try log.installCompaction(try LogCompactionTests.compact(log) { _ in false })
            #expect(log.compactionMarker?.epochs == expected + [EpochStart(epoch: 8, firstLSN: 31)])
            try log.close()
        }
    }

    @Test("a bounded log compacts only segments at or below its limit, which starts at its stored horizon")
    func boundedCompaction() async throws {
        try await withTempDirectory { dir in
            var c = config(segmentSize: 400, durability: .os)
            c.boundedCompaction = true
            let (log, _) = try openCollecting(dir, c)
            _ = try stageAll(log, (0..<40).map { [UInt8](repeating: UInt8($0), count: 60) })
            try log.flush()
            try log.roll()
            #expect(log.compactionLimit == 0)
            #expect(try log.beginCompaction() == nil, "nothing is compactable before the horizon moves")
            try log.raiseCompactionLimit(to: 5, persist: true)
            try log.raiseCompactionLimit(to: 20, persist: false)
            try log.raiseCompactionLimit(to: 3, persist: false)
            #expect(log.compactionLimit == 20, "the limit never goes down")
            #expect(try CompactionHorizon.load(directory: dir) == 5)
            let writer = try LogCompactionTests.compact(log) { _ in true }
            // A compaction stores the limit it goes by before it starts.
            #expect(try CompactionHorizon.load(directory: dir) == 20)
            #expect(writer.coveredThrough <= 20 && writer.coveredThrough > 0)
            try log.installCompaction(writer)
            #expect(try log.beginCompaction() == nil, "no segment past the covered prefix is below the limit yet")
            try log.close()
            #expect(try CompactionHorizon.load(directory: dir) == 20)
            let (reopened, _) = try openCollecting(dir, c)
            #expect(reopened.compactionLimit == 20)
            try reopened.close()
        }
    }
}
