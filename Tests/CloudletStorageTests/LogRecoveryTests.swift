import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@Suite("Log recovery: torn tails, corruption, missing segments")
struct LogRecoveryTests {
    /// Copies the files of `from` into the new directory `to`.
    static func copyDirectory(_ from: String, to: String) throws {
        try FileManager.default.createDirectory(atPath: to, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: from) {
            try FileManager.default.copyItem(atPath: from + "/" + name, toPath: to + "/" + name)
        }
    }

    /// A log whose last three frames are small, compressed and tiny, in one segment.
    static func makeLog(_ dir: String) throws -> [Staged] {
        var rng = SeededRandom(seed: 11)
        let (log, _) = try openCollecting(dir, config())
        var payloads = (0..<8).map { _ in randomBytes(Int.random(in: 10..<60, using: &rng), &rng) }
        payloads += [randomBytes(37, &rng), compressibleBytes(700, tag: 3), randomBytes(5, &rng)]
        let staged = try stageAll(log, payloads)
        try log.close()
        return staged
    }

    @Test("torn tail: a cut at every byte of the last 3 frames recovers the exact prefix and continues")
    func tornTailAtEveryOffset() async throws {
        try await withTempDirectory { root in
            let original = root + "/original"
            let staged = try Self.makeLog(original)
            #expect(staged[9].position.length < 700)  // the middle one of the last three is compressed
            let segmentName = "00000000000000000001.seg"
            let firstCut = staged[staged.count - 3].position.offset
            let end = staged.last!.position.end
            #expect(try fileSize(original + "/" + segmentName) == end)
            for cut in firstCut..<end {
                let dir = root + "/cut-\(cut)"
                try Self.copyDirectory(original, to: dir)
                try PosixFileSystem().open(dir + "/" + segmentName, options: []).truncate(to: cut)

                let survivors = staged.filter { $0.position.end <= cut }
                let goodEnd = survivors.last!.position.end
                let (log, replayed) = try openCollecting(dir, config())
                expectSame(replayed, survivors)
                #expect(log.lastLSN == survivors.last!.lsn, "cut at \(cut)")
                #expect(try fileSize(dir + "/" + segmentName) == goodEnd, "cut at \(cut)")
                #expect(log.recovery.tornTail?.offset == (cut == goodEnd ? nil : goodEnd), "cut at \(cut)")

                let (lsn, position) = try log.stage(type: 2, payload: [0xAB, 0xCD])
                #expect(lsn == survivors.last!.lsn + 1)
                #expect(position.offset == goodEnd)
                try log.close()
                var scanned: [Frame] = []
                try LogScanner(directory: dir).forEachFrame { scanned.append($0) }
                #expect(scanned.map(\.lsn) == Array(1...lsn), "cut at \(cut)")
                #expect(scanned.last?.payload == [0xAB, 0xCD])
                try FileManager.default.removeItem(atPath: dir)
            }
        }
    }

    /// Which byte of frame 5 (of 9, in the last segment) gets flipped.
    enum Flip: String, CaseIterable, CustomTestStringConvertible {
        case length, checksum, type, lsn, payload
        var byteOffset: UInt64 {
            switch self {
            case .length: 1
            case .checksum: 5
            case .type: 8
            case .lsn: 12
            case .payload: 40
            }
        }
        var testDescription: String { rawValue }
    }

    @Test("a flipped byte in a frame followed by others is corruption at that frame's offset", arguments: Flip.allCases)
    func flippedByteMidLog(_ flip: Flip) async throws {
        try await withTempDirectory { dir in
            var rng = SeededRandom(seed: 5)
            let (log, _) = try openCollecting(dir, config())
            let staged = try stageAll(log, (0..<9).map { _ in randomBytes(50, &rng) })
            let segment = log.segments()[0].path
            try log.close()
            let target = staged[4].position
            try flipByte(segment, at: target.offset + flip.byteOffset)

            let error = cloudletError { _ = try openCollecting(dir, config()) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("segment \(segment) offset \(target.offset):") == true, "\(String(describing: error))")
            #expect(error?.message.contains("follows at offset \(staged[5].position.offset)") == true)
            #expect(try fileSize(segment) == staged.last!.position.end, "nothing was truncated")
            // The offline scanner says the same.
            #expect(cloudletError { try LogScanner(directory: dir).forEachFrame { _ in } }?.message == error?.message)
        }
    }

    @Test("a flipped byte in a sealed segment is corruption even in its last frame")
    func flippedByteInSealedSegment() async throws {
        try await withTempDirectory { dir in
            var rng = SeededRandom(seed: 6)
            let (log, _) = try openCollecting(dir, config(segmentSize: 400))
            let staged = try stageAll(log, (0..<30).map { _ in randomBytes(60, &rng) })
            let segments = log.segments()
            try log.close()
            #expect(segments.count >= 3)
            let sealed = segments[1]
            let lastOfSealed = staged[Int(sealed.lastLSN) - 1].position
            try flipByte(sealed.path, at: lastOfSealed.offset + 36)
            let error = cloudletError { _ = try openCollecting(dir, config(segmentSize: 400)) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("segment \(sealed.path) offset \(lastOfSealed.offset):") == true)
        }
    }

    @Test("trailing garbage after the last frame of a sealed segment is corruption")
    func trailingGarbageInSealedSegment() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config(segmentSize: 300))
            try stageAll(log, (0..<12).map { [UInt8](repeating: UInt8($0), count: 70) })
            let sealed = log.segments()[0]
            try log.close()
            try PosixFileSystem().open(sealed.path, options: []).write([1, 2, 3, 4, 5], at: sealed.size)
            let error = cloudletError { _ = try openCollecting(dir, config(segmentSize: 300)) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("segment \(sealed.path) offset \(sealed.size): truncated frame header") == true)
        }
    }

    @Test("a deleted middle segment is corruption naming the gap")
    func deletedMiddleSegment() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config(segmentSize: 300))
            try stageAll(log, (0..<20).map { [UInt8](repeating: UInt8($0), count: 70) })
            let segments = log.segments()
            try log.close()
            #expect(segments.count >= 4)
            try FileManager.default.removeItem(atPath: segments[2].path)
            let error = cloudletError { _ = try openCollecting(dir, config(segmentSize: 300)) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains(segments[3].path) == true)
            #expect(error?.message.contains(segments[1].path) == true)
            #expect(error?.message.contains("LSNs \(segments[2].firstLSN)…\(segments[2].lastLSN) are missing") == true)
        }
    }

    @Test("a last segment cut short while being created gets its header back and takes the next frames")
    func unfinishedLastSegment() async throws {
        try await withTempDirectory { dir in
            var (log, _) = try openCollecting(dir, config())
            let staged = try stageAll(log, [[1], [2], [3]])
            try log.close()
            let next = dir + "/00000000000000000004.seg"
            for garbage in [[UInt8](), [0x43, 0x4C, 0x54], [UInt8](repeating: 0, count: 48), [UInt8](repeating: 7, count: 60)] {
                try PosixFileSystem().open(next, options: [.create, .truncate]).write(garbage, at: 0)
                // Read-only: replays, reports, changes nothing.
                var replayed: [Frame]
                (log, replayed) = try openCollecting(dir, config(readOnly: true))
                expectSame(replayed, staged)
                #expect(log.recovery.tornTail?.path == next)
                try log.close()
                #expect(try fileSize(next) == UInt64(garbage.count))

                (log, replayed) = try openCollecting(dir, config())
                expectSame(replayed, staged)
                #expect(log.recovery.rewroteSegmentHeader)
                #expect(try fileSize(next) == 48)
                let (lsn, position) = try log.stage(type: 1, payload: [4])
                #expect(lsn == 4 && position.segment == 4 && position.offset == 48)
                try log.close()
                (log, replayed) = try openCollecting(dir, config())
                #expect(replayed.map(\.lsn) == [1, 2, 3, 4])
                try log.close()
                try FileManager.default.removeItem(atPath: next)
            }
        }
    }

    @Test("a damaged header of a last segment that holds frames is corruption, not a torn creation")
    func damagedHeaderWithFrames() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config())
            try stageAll(log, [[1], [2], [3]])
            let path = log.segments()[0].path
            try log.close()
            try flipByte(path, at: 20)
            let error = cloudletError { _ = try openCollecting(dir, config()) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("segment \(path) offset 0: segment header checksum mismatch") == true)
        }
    }

    @Test("a segment of another partition is refused")
    func wrongPartition() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, partition: 1, config())
            try stageAll(log, [[1]])
            try log.close()
            let error = cloudletError { _ = try openCollecting(dir, partition: 2, config()) }
            #expect(error?.message.contains("belongs to partition 1, not 2") == true)
        }
    }
}
