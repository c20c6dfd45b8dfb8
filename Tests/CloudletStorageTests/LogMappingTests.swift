import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("Log: reads through mapped segments")
struct LogMappingTests {
    private func mapping(_ segments: Int, segmentSize: Int) -> LogConfiguration {
        var c = config(segmentSize: segmentSize)
        c.mappedSegments = segments
        return c
    }

    @Test("reads of many segments return the staged bytes and keep at most mappedSegments mapped; 0 maps none")
    func boundedMappings() async throws {
        try await withTempDirectory { dir in
            var rng = SeededRandom(seed: 11)
            let payloads = (0..<80).map { _ in randomBytes(Int.random(in: 40..<200, using: &rng), &rng) }
            for bound in [3, 0] {
                let sub = dir + "/bound\(bound)"
                let (log, _) = try openCollecting(sub, mapping(bound, segmentSize: 600))
                let staged = try stageAll(log, payloads)
                #expect(log.segments().count > 6)
                for s in staged.shuffled(using: &rng) {
                    let frame = try log.readFrame(at: s.position)
                    #expect(frame.lsn == s.lsn && frame.payload == s.payload)
                    let stored = try log.readStored(at: s.position, range: 0..<s.payload.count)
                    if !frame.isCompressed { #expect(stored == s.payload) }
                    #expect(log.mappedSegmentCount <= bound)
                }
                #expect(log.mappedSegmentCount == bound)
                try log.close()
                #expect(log.mappedSegmentCount == 0)
            }
        }
    }

    @Test("frames appended to the segment being written after it was mapped read back (one mapping at most)")
    func growingSegment() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, mapping(8, segmentSize: 1 << 20))
            var rng = SeededRandom(seed: 5)
            var staged: [Staged] = []
            for round in 0..<20 {
                staged += try stageAll(log, [randomBytes(100 + round, &rng)])
                // Every frame so far, the one just appended included, through the one mapping made at the first read.
                for s in staged { #expect(try log.readFrame(at: s.position).payload == s.payload) }
                #expect(log.mappedSegmentCount == 1)
            }
            try log.close()
        }
    }

    @Test("a byte changed on disk after the segment was mapped is corruption when the frame is read again")
    func damagedFrameThroughMapping() async throws {
        try await withTempDirectory { dir in
            var rng = SeededRandom(seed: 9)
            let (log, _) = try openCollecting(dir, mapping(8, segmentSize: 600))
            let staged = try stageAll(log, (0..<30).map { _ in randomBytes(120, &rng) })
            let victim = staged[3]
            #expect(try log.readFrame(at: victim.position).payload == victim.payload)
            #expect(log.mappedSegmentCount == 1)
            let path = log.segments().first { $0.firstLSN == victim.position.segment }!.path
            try flipByte(path, at: victim.position.offset + 40)
            let error = cloudletError { _ = try log.readFrame(at: victim.position) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("checksum mismatch") == true)
            #expect(try log.readFrame(at: staged[20].position).payload == staged[20].payload)
            try log.close()
        }
    }
}
