import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@Suite("Log scanner")
struct LogScannerTests {
    @Test("scans every frame across segments, reports a torn tail without truncating it")
    func scanReportsTornTail() async throws {
        try await withTempDirectory { dir in
            let (log, _) = try openCollecting(dir, config(segmentSize: 300))
            let payloads = (0..<20).map { i in i % 4 == 0 ? compressibleBytes(600, tag: i) : [UInt8](repeating: UInt8(i), count: 50) }
            let staged = try stageAll(log, payloads)
            let last = log.segments().last!
            try log.close()

            var frames: [Frame] = []
            var report = try LogScanner(directory: dir).forEachFrame { frames.append($0) }
            expectSame(frames, staged)
            #expect(report.tornTail == nil && report.lastLSN == 20)

            let cut = last.size - 3
            try PosixFileSystem().open(last.path, options: []).truncate(to: cut)
            frames = []
            report = try LogScanner(directory: dir).forEachFrame { frames.append($0) }
            expectSame(frames, staged.dropLast())
            #expect(report.tornTail?.path == last.path)
            #expect(report.tornTail?.offset == staged[18].position.end)
            #expect(try fileSize(last.path) == cut)
        }
    }

    @Test("a directory that does not exist is an io error")
    func missingDirectory() {
        #expect(cloudletError { _ = try LogScanner(directory: "/nonexistent/cloudlet") }?.code == .io)
    }
}
