import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("Log: staging, durability, replay, reads")
struct LogTests {
    /// A mix of payloads: compressible large ones, incompressible large ones, small ones and empty ones.
    static func mixedPayloads(count: Int, seed: UInt64) -> (payloads: [[UInt8]], compressible: Set<Int>) {
        var rng = SeededRandom(seed: seed)
        var payloads: [[UInt8]] = []
        var compressible: Set<Int> = []
        for i in 0..<count {
            switch i % 5 {
            case 0:
                payloads.append(compressibleBytes(300 + Int.random(in: 0..<3000, using: &rng), tag: i))
                compressible.insert(i)
            case 1: payloads.append(randomBytes(400 + Int.random(in: 0..<600, using: &rng), &rng))
            case 2: payloads.append([])
            case 3: payloads.append(compressibleBytes(255, tag: i))  // below the threshold: stored as is
            default: payloads.append(randomBytes(Int.random(in: 1..<100, using: &rng), &rng))
            }
        }
        return (payloads, compressible)
    }

    @Test("round trip: stage, wait, reopen and replay everything; readFrame at the returned positions")
    func roundTrip() async throws {
        try await withTempDirectory { dir in
            let (payloads, compressible) = Self.mixedPayloads(count: 150, seed: 42)
            var (log, replayed) = try openCollecting(dir, config())
            #expect(replayed.isEmpty)
            var staged: [Staged] = []
            for (i, payload) in payloads.enumerated() {
                let (lsn, position) = try log.stage(type: UInt8(1 + i % 3), payload: payload)
                staged.append(Staged(lsn: lsn, position: position, type: UInt8(1 + i % 3), payload: payload))
                if i % 10 == 9 { try await log.waitDurable(lsn) }
            }
            try await log.waitDurable(staged.last!.lsn)
            #expect(staged.map(\.lsn) == Array(1...UInt64(payloads.count)))
            #expect(log.durableLSN == UInt64(payloads.count))
            #expect(log.lastLSN == UInt64(payloads.count))
            #expect(log.stats.commits == payloads.count)
            #expect(log.stats.compressedFrames == compressible.count)

            for (i, s) in staged.enumerated() {
                let frame = try log.readFrame(at: s.position)
                #expect(frame.lsn == s.lsn && frame.payload == s.payload && frame.type == s.type)
                #expect(frame.isCompressed == compressible.contains(i), "LSN \(s.lsn), \(s.payload.count) bytes")
                #expect(frame.epoch == 1)
            }
            let compressedBytes = staged.enumerated().filter { compressible.contains($0.offset) }
            #expect(compressedBytes.allSatisfy { Int($0.element.position.length) < 32 + $0.element.payload.count })
            try log.close()

            (log, replayed) = try openCollecting(dir, config())
            expectSame(replayed, staged)
            #expect(log.lastLSN == UInt64(payloads.count))
            #expect(log.recovery.tornTail == nil)
            let next = try log.stage(type: 1, payload: [1, 2, 3])
            #expect(next.lsn == UInt64(payloads.count) + 1)
            #expect(next.position.offset == staged.last!.position.end)
            try log.flush()
            #expect(try log.readFrame(at: staged[17].position).payload == staged[17].payload)
            try log.close()
        }
    }

    @Test("segments roll at segmentSize, each holds at least one frame, replay crosses them")
    func segmentRolling() async throws {
        try await withTempDirectory { dir in
            let segmentSize = 512
            var rng = SeededRandom(seed: 7)
            var payloads = (0..<120).map { _ in randomBytes(Int.random(in: 20..<120, using: &rng), &rng) }
            payloads.insert(randomBytes(2000, &rng), at: 60)  // bigger than a segment: a segment of its own
            var (log, _) = try openCollecting(dir, config(segmentSize: segmentSize))
            let staged = try stageAll(log, payloads)
            let segments = log.segments()
            #expect(segments.count > 10)
            #expect(segments.first!.firstLSN == 1 && segments.last!.lastLSN == UInt64(payloads.count))
            for (i, segment) in segments.enumerated() {
                #expect(segment.sealed == (i < segments.count - 1))
                #expect(segment.frameCount >= 1)
                #expect(segment.size <= UInt64(segmentSize) || segment.frameCount == 1)
                #expect(try fileSize(segment.path) == segment.size)
                if i > 0 { #expect(segment.firstLSN == segments[i - 1].lastLSN + 1) }
            }
            for s in staged {
                let segment = segments.first { $0.firstLSN == s.position.segment }
                #expect(segment.map { (s.lsn >= $0.firstLSN) && (s.lsn <= $0.lastLSN) } == true)
            }
            let big = staged[60]
            #expect(segments.contains { $0.firstLSN == big.lsn && $0.lastLSN == big.lsn })
            try log.close()

            let replayed: [Frame]
            (log, replayed) = try openCollecting(dir, config(segmentSize: segmentSize))
            expectSame(replayed, staged)
            #expect(log.segments().map(\.firstLSN) == segments.map(\.firstLSN))
            try log.close()
        }
    }

    /// Where the checkpoint is taken: mid-segment, right after the last frame of a segment, or at the very end.
    enum HintCase: String, CaseIterable, CustomTestStringConvertible {
        case midSegment, endOfSegment, endOfLog
        var testDescription: String { rawValue }
    }

    @Test("startHint + afterLSN replay only the tail", arguments: HintCase.allCases)
    func startHintReplaysTail(_ hintCase: HintCase) async throws {
        try await withTempDirectory { dir in
            var rng = SeededRandom(seed: 99)
            let payloads = (0..<60).map { _ in randomBytes(Int.random(in: 30..<90, using: &rng), &rng) }
            var (log, _) = try openCollecting(dir, config(segmentSize: 600))
            let staged = try stageAll(log, payloads)
            let segments = log.segments()
            try log.close()
            let checkpoint: Staged
            switch hintCase {
            case .midSegment:
                checkpoint = staged.first { s in
                    segments.contains { $0.firstLSN < s.lsn && s.lsn < $0.lastLSN && $0.firstLSN > 1 }
                }!
            case .endOfSegment: checkpoint = staged[Int(segments[2].lastLSN) - 1]
            case .endOfLog: checkpoint = staged.last!
            }
            let tail = staged.filter { $0.lsn > checkpoint.lsn }
            var replayed: [Frame]
            (log, replayed) = try openCollecting(
                dir, config(segmentSize: 600), afterLSN: checkpoint.lsn, startHint: checkpoint.position.next)
            expectSame(replayed, tail)
            #expect(log.recovery.usedStartHint)
            #expect(log.recovery.framesReplayed == tail.count)
            #expect(log.lastLSN == staged.last!.lsn)
            try log.close()

            // The same without a hint scans from the start but replays the same tail.
            (log, replayed) = try openCollecting(dir, config(segmentSize: 600), afterLSN: checkpoint.lsn)
            expectSame(replayed, tail)
            #expect(!log.recovery.usedStartHint)
            try log.close()

            // A hint that does not point at frame afterLSN + 1 is ignored, not trusted.
            let wrong = FramePosition(segment: checkpoint.position.segment, offset: 49, length: 0)
            (log, replayed) = try openCollecting(dir, config(segmentSize: 600), afterLSN: checkpoint.lsn, startHint: wrong)
            expectSame(replayed, tail)
            #expect(!log.recovery.usedStartHint)
            try log.close()
        }
    }

    @Test("an open with a start hint reads only the header of each segment before the replay start")
    func segmentsBeforeHintReadHeadersOnly() throws {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        var rng = SeededRandom(seed: 7)
        let payloads = (0..<60).map { _ in randomBytes(Int.random(in: 30..<90, using: &rng), &rng) }
        var (log, _) = try openCollecting("/log", config(segmentSize: 600), fileSystem: fs)
        let staged = try stageAll(log, payloads)
        let segments = log.segments()
        try log.close()
        try #require(segments.count >= 4)
        let checkpoint = staged.last!
        (log, _) = try openCollecting(
            "/log", config(segmentSize: 600), fileSystem: fs, afterLSN: checkpoint.lsn, startHint: checkpoint.position.next)
        #expect(log.recovery.usedStartHint)
        // Every segment before the one the hint points into (where replay starts) is checked by its header alone.
        let hinted = checkpoint.position.next.segment
        let before = segments.filter { $0.firstLSN < hinted }
        #expect(before.count >= 3)
        for segment in before {
            #expect(fs.bytesRead(of: segment.path) <= 48, "\(segment.path): its header, not a 1 MiB window")
        }
        try log.close()
    }

    @Test("a checkpoint beyond the end of the log is corruption")
    func afterLSNBeyondLog() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config())
            try stageAll(log, [[1], [2]])
            try log.close()
            let error = cloudletError { _ = try openCollecting(dir, config(), afterLSN: 5) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("ends at LSN 2") == true)
        }
    }

    @Test("readFrame of a damaged frame throws corruption naming the segment and offset")
    func readFrameDetectsFlippedByte() async throws {
        try await withTempDirectory { dir in
            var rng = SeededRandom(seed: 3)
            let (log, _) = try openCollecting(dir, config())
            let staged = try stageAll(log, (0..<10).map { _ in randomBytes(64, &rng) } + [compressibleBytes(4000, tag: 1)])
            let segment = log.segments()[0].path
            for target in [staged[4], staged[10]] {
                try flipByte(segment, at: target.position.offset + 40)
                let error = cloudletError { _ = try log.readFrame(at: target.position) }
                #expect(error?.code == .corruption)
                #expect(error?.message.contains("segment \(segment) offset \(target.position.offset):") == true)
                #expect(error?.message.contains("checksum mismatch") == true)
            }
            #expect(try log.readFrame(at: staged[5].position).payload == staged[5].payload)
            let wrongLength = FramePosition(
                segment: staged[5].position.segment, offset: staged[5].position.offset, length: staged[5].position.length + 1)
            #expect(cloudletError { _ = try log.readFrame(at: wrongLength) }?.code == .corruption)
            let beyond = FramePosition(segment: 1, offset: staged[10].position.end, length: 40)
            #expect(cloudletError { _ = try log.readFrame(at: beyond) }?.code == .invalidArguments)
            try log.close()
        }
    }

    @Test("read-only: replays, never writes, stage throws readOnly")
    func readOnly() async throws {
        try await withTempDirectory { dir in
            var (log, _) = try openCollecting(dir, config())
            let staged = try stageAll(log, [[1, 2], [3, 4, 5]])
            try log.close()
            let path = log.segments()[0].path
            var replayed: [Frame]
            (log, replayed) = try openCollecting(dir, config(readOnly: true))
            expectSame(replayed, staged)
            let error = cloudletError { _ = try log.stage(type: 1, payload: [9]) }
            #expect(error?.code == .readOnly)
            #expect(try log.readFrame(at: staged[1].position).payload == [3, 4, 5])
            try log.close()
            #expect(try fileSize(path) == staged[1].position.end)
        }
    }

    @Test("invalid uses are errors: type 0, waiting for an LSN never staged, staging after close")
    func invalidUses() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config())
            #expect(cloudletError { _ = try log.stage(type: 0, payload: [1]) }?.code == .invalidArguments)
            let (lsn, _) = try log.stage(type: 1, payload: [1])
            #expect(cloudletError { try log.waitDurableBlocking(lsn + 1) }?.code == .invalidArguments)
            try log.waitDurableBlocking(lsn)
            try log.close()
            try log.close()
            #expect(cloudletError { _ = try log.stage(type: 1, payload: [1]) }?.code == .readOnly)
        }
    }

    @Test("os durability acknowledges after the write without fdatasync; close syncs")
    func osDurability() async throws {
        let fs = InMemoryFileSystem()
        var (log, _) = try openCollecting("/os", config(durability: .os), fileSystem: fs)
        let staged = try stageAll(log, (0..<50).map { [UInt8](repeating: UInt8($0), count: 10) })
        #expect(log.durableLSN == 50)
        #expect(log.stats.fsyncs == 0)
        #expect(try log.readFrame(at: staged[20].position).payload == staged[20].payload)
        try log.close()
        fs.crash()
        var replayed: [Frame]
        (log, replayed) = try openCollecting("/os", config(durability: .os), fileSystem: fs)
        expectSame(replayed, staged)

        // Without close, a power failure loses what the OS had not written out.
        try stageAll(log, [[1], [2]])
        fs.crash()
        try? log.close()
        (log, replayed) = try openCollecting("/os", config(durability: .os), fileSystem: fs)
        expectSame(replayed, staged)
        try log.close()
    }
}
