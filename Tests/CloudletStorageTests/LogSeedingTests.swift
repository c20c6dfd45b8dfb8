import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@Suite("Log snapshots for seeding: one moment's files, held open, ending at the durable end")
struct LogSeedingTests {
    /// Writes the snapshot's files (segments up to their sizes, marker and horizon) into `dir`, as a seeded node does.
    private func copy(_ snapshot: LogSnapshot, to dir: String) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for s in snapshot.segments {
            var bytes: [UInt8] = []
            while UInt64(bytes.count) < s.size { bytes += try s.read(offset: UInt64(bytes.count), count: 1000) }
            #expect(UInt64(bytes.count) == s.size)
            try Data(bytes).write(to: URL(fileURLWithPath: dir + "/" + s.name))
        }
        if let m = snapshot.marker { try Data(m).write(to: URL(fileURLWithPath: dir + "/" + CompactionMarker.fileName)) }
        if let h = snapshot.horizon { try Data(h).write(to: URL(fileURLWithPath: dir + "/" + CompactionHorizon.fileName)) }
    }

    @Test("a snapshot outlives the compaction that deletes its segments, and copies into a log that opens at its durable end")
    func snapshotSurvivesCompaction() async throws {
        try await withTempDirectory { dir in
            let source = dir + "/source"
            let (log, staged) = try LogCompactionTests.makeLog(source)
            try log.roll()
            let first = try log.snapshotForSeeding()
            defer { first.close() }
            #expect(first.durableLSN == staged.last!.lsn && first.marker == nil)
            let held = first.segments.map { source + "/" + $0.name }

            // The log goes on: more frames, then a compaction replaces (deletes) the segments the snapshot holds.
            try stageAll(log, (0..<5).map { [UInt8](repeating: UInt8($0), count: 30) })
            let writer = try LogCompactionTests.compact(log) { $0 % 2 == 0 }
            _ = try log.installCompaction(writer)
            #expect(held.contains { !FileManager.default.fileExists(atPath: $0) }, "the compaction deleted held segments")

            // The snapshot's copy is the log as it was: every frame up to its durable end, nothing after.
            try copy(first, to: dir + "/copy")
            let (copied, frames) = try openCollecting(dir + "/copy", config(segmentSize: 400, durability: .os))
            expectSame(frames, staged)
            #expect(copied.lastLSN == first.durableLSN)
            try copied.close()

            // A snapshot of the compacted log carries its marker: the copy opens as the same compacted log.
            let second = try log.snapshotForSeeding()
            defer { second.close() }
            #expect(second.marker != nil && second.generation == 1)
            try copy(second, to: dir + "/copy2")
            let (copied2, _) = try openCollecting(dir + "/copy2", config(segmentSize: 400, durability: .os))
            #expect(copied2.compactionMarker == log.compactionMarker)
            #expect(copied2.lastLSN == second.durableLSN && second.durableLSN == log.durableLSN)
            try copied2.close()
            try log.close()
        }
    }
}
