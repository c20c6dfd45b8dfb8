import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@Suite("Log compaction: compacted segments, the marker, the swap and its crash points")
struct LogCompactionTests {
    /// 40 frames over small segments; returns the log (open) and what was staged.
    static func makeLog(_ dir: String) throws -> (Log, [Staged]) {
        let (log, _) = try openCollecting(dir, config(segmentSize: 400, durability: .os))
        let payloads = (0..<40).map { i in i % 5 == 0 ? compressibleBytes(500, tag: i) : [UInt8](repeating: UInt8(i), count: 40 + i) }
        return (log, try stageAll(log, payloads))
    }

    /// Compacts every sealed segment keeping the frames `keep` accepts (copied byte for byte); returns the writer.
    static func compact(_ log: Log, keep: (UInt64) -> Bool) throws -> CompactionWriter {
        let writer = try #require(try log.beginCompaction())
        for input in writer.inputs {
            var reader = try SegmentFrameReader(input)
            while let frame = try reader.next() {
                writer.note(lsn: frame.lsn, epoch: frame.epoch)
                if keep(frame.lsn) { try writer.appendCopy(of: frame) }
            }
        }
        try writer.finish()
        return writer
    }

    @Test("kept frames keep their LSNs; gaps are legal; the log appends after the covered range; reads follow the swap")
    func compactAndReopen() async throws {
        try await withTempDirectory { dir in
            let (log, staged) = try Self.makeLog(dir)
            try log.roll()
            let covered = log.lastLSN
            let writer = try Self.compact(log) { $0 % 3 == 0 }
            let replaced = try log.installCompaction(writer)
            #expect(!replaced.isEmpty && replaced.allSatisfy { !FileManager.default.fileExists(atPath: $0) })
            #expect(
                log.compactionMarker
                    == CompactionMarker(generation: 1, coveredThrough: covered, epochs: [EpochStart(epoch: 1, firstLSN: 1)]))
            #expect(log.segments().first?.isCompacted == true)
            // The new positions read back.
            var positions: [UInt64: FramePosition] = [:]
            for s in log.segments() where s.isCompacted {
                var r = try SegmentFrameReader(s)
                while let f = try r.next() { positions[f.lsn] = f.position }
            }
            #expect(positions.keys.sorted() == staged.map(\.lsn).filter { $0 % 3 == 0 })
            for s in staged where s.lsn % 3 == 0 {
                #expect(try log.readFrame(at: positions[s.lsn]!).payload == s.payload)
            }
            let (next, _) = try log.stage(type: 1, payload: [1, 2, 3])
            #expect(next == covered + 1)
            try log.close()

            let (reopened, frames) = try openCollecting(dir, config(segmentSize: 400, durability: .os))
            expectSame(frames.dropLast(), staged.filter { $0.lsn % 3 == 0 }.map { s in
                var s = s
                s.position = positions[s.lsn]!
                return s
            })
            #expect(frames.last?.lsn == next)
            #expect(reopened.lastLSN == next)
            #expect(reopened.recovery.leftoverFiles.isEmpty)
            try reopened.close()
            let report = try LogWalker(directory: dir).walk { _ in }
            #expect(report.isClean && report.findings.isEmpty, "\(report.findings)")
            #expect(report.lastLSN == next)
        }
    }

    @Test("compacting everything, even nothing kept: the log reopens at the covered LSN and continues after it")
    func compactEverythingAway() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try Self.makeLog(dir)
            try log.roll()
            let covered = log.lastLSN
            try log.installCompaction(try Self.compact(log) { _ in false })
            try log.close()
            // Drop the empty active segment too: the log then ends with a compacted segment.
            for name in try FileManager.default.contentsOfDirectory(atPath: dir) where !name.contains("-g") && name.hasSuffix(".seg") {
                try FileManager.default.removeItem(atPath: dir + "/" + name)
            }
            let readOnly = try openCollecting(dir, config(readOnly: true))
            #expect(readOnly.1.isEmpty && readOnly.0.lastLSN == covered)
            try readOnly.0.close()
            let (reopened, frames) = try openCollecting(dir, config(segmentSize: 400, durability: .os))
            #expect(frames.isEmpty && reopened.lastLSN == covered)
            #expect(try reopened.stage(type: 1, payload: [9]).lsn == covered + 1)
            try reopened.close()
        }
    }

    @Test("a compaction that never took effect leaves files that readers ignore and a read-write open removes")
    func interruptedBeforeTheMarker() async throws {
        try await withTempDirectory { dir in
            let (log, staged) = try Self.makeLog(dir)
            let writer = try Self.compact(log) { $0 % 2 == 0 }
            let leftovers = writer.segments.map(\.path)
            try log.close()  // no install: as if killed before the marker
            var seen: [Frame] = []
            let report = try LogScanner(directory: dir).forEachFrame { seen.append($0) }
            #expect(seen.map(\.lsn) == staged.map(\.lsn))
            #expect(report.leftoverFiles == leftovers.sorted())
            let walk = try LogWalker(directory: dir).walk { _ in }
            #expect(walk.isClean && walk.findings.count == leftovers.count && walk.findings.allSatisfy { $0.severity == .warning })
            let (reopened, frames) = try openCollecting(dir, config(segmentSize: 400, durability: .os))
            #expect(frames.map(\.lsn) == staged.map(\.lsn))
            #expect(leftovers.allSatisfy { !FileManager.default.fileExists(atPath: $0) })
            // A later compaction uses a new generation, never the abandoned one's.
            let again = try #require(try reopened.beginCompaction())
            #expect(again.generation == 2)
            reopened.abandonCompaction(again)
            try reopened.close()
        }
    }

    @Test("after the marker, replaced segments that were not yet deleted are ignored and then removed")
    func interruptedAfterTheMarker() async throws {
        try await withTempDirectory { dir in
            let (log, staged) = try Self.makeLog(dir)
            try log.roll()
            let inputs = log.segments().filter(\.sealed)
            let backup = dir + "-copy"
            try FileManager.default.createDirectory(atPath: backup, withIntermediateDirectories: true)
            for s in inputs { try FileManager.default.copyItem(atPath: s.path, toPath: backup + "/" + (s.path as NSString).lastPathComponent) }
            try log.installCompaction(try Self.compact(log) { $0 % 2 == 1 })
            try log.close()
            // Put the replaced files back, as if the process died right after writing the marker.
            for s in inputs { try FileManager.default.copyItem(atPath: backup + "/" + (s.path as NSString).lastPathComponent, toPath: s.path) }
            try FileManager.default.removeItem(atPath: backup)
            var seen: [UInt64] = []
            try LogScanner(directory: dir).forEachFrame { seen.append($0.lsn) }
            #expect(seen == staged.map(\.lsn).filter { $0 % 2 == 1 })
            let (reopened, _) = try openCollecting(dir, config(segmentSize: 400, durability: .os))
            #expect(inputs.allSatisfy { !FileManager.default.fileExists(atPath: $0.path) })
            try reopened.close()
        }
    }

    @Test("the walker names a deleted compacted segment, a flipped byte and a damaged marker")
    func walkerFindings() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try Self.makeLog(dir)
            try log.roll()
            try log.installCompaction(try Self.compact(log) { _ in true })
            let compacted = log.segments().filter(\.isCompacted)
            try log.close()
            #expect(compacted.count >= 3)
            // A flipped byte in the middle compacted segment's second frame.
            var r = try SegmentFrameReader(compacted[1])
            _ = try r.next()
            let victim = try #require(try r.next())
            try flipByte(compacted[1].path, at: victim.position.offset + 40)
            var report = try LogWalker(directory: dir).walk { _ in }
            #expect(report.findings.map(\.path) == [compacted[1].path])
            #expect(report.findings.first?.offset == victim.position.offset)
            #expect(report.findings.first?.message.contains("checksum mismatch") == true)
            // A deleted compacted segment: its exact name and the missing LSNs.
            try FileManager.default.removeItem(atPath: compacted[2].path)
            report = try LogWalker(directory: dir).walk { _ in }
            let missing = try #require(report.findings.first { $0.path == compacted[2].path })
            #expect(missing.message.contains("LSNs \(compacted[2].firstLSN)…\(compacted[2].lastLSN) are missing"))
            #expect(cloudletError { _ = try openCollecting(dir, config(readOnly: true)) }?.code == .corruption)
            // A damaged marker.
            try flipByte(dir + "/" + CompactionMarker.fileName, at: 13)
            report = try LogWalker(directory: dir).walk { _ in }
            #expect(report.findings.first?.path == dir + "/" + CompactionMarker.fileName)
            #expect(cloudletError { _ = try LogLayout.load(directory: dir) }?.code == .corruption)
        }
    }
}
