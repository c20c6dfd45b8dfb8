import Foundation
import Testing

@testable import CloudletServer

/// The access log's line, written byte by byte (``RequestLog/line(_:status:seconds:at:)``): the documented format,
/// with the time in milliseconds printed as `Double`'s own description printed it before.
@Suite struct RequestLogTests {
    /// 2026-11-30T12:34:56.789Z.
    static let time = timespec(tv_sec: 1_796_042_096, tv_nsec: 789_400_000)

    @Test func theLineHasTheDocumentedFormat() {
        let request = HTTPRequest(method: "POST", path: "/database/1/c/development/private/records/modify", remoteAddress: "127.0.0.1")
        #expect(
            RequestLog.line(request, status: 200, seconds: 0.001234, at: Self.time)
                == "2026-11-30T12:34:56.789Z 127.0.0.1 POST /database/1/c/development/private/records/modify 200 1.234ms")
        #expect(RequestLog.timestamp(Self.time) == "2026-11-30T12:34:56.789Z")
        // A path with non-ASCII characters is written as its UTF-8, whole.
        let named = HTTPRequest(method: "GET", path: "/share/Zürich-✈︎", remoteAddress: "::1")
        #expect(RequestLog.line(named, status: 404, seconds: 0, at: Self.time) == "2026-11-30T12:34:56.789Z ::1 GET /share/Zürich-✈︎ 404 0.0ms")
    }

    @Test func millisecondsArePrintedAsDoubleDescribesThem() {
        let request = HTTPRequest(method: "GET", path: "/", remoteAddress: "a")
        let cases: [Double] = [
            0, 0.000_000_4, 0.000_001, 0.000_005, 0.000_05, 0.000_5, 0.001, 0.001_2, 0.001_234_6, 0.012, 0.1, 0.999_999_6, 1, 12.345_678,
            3_600.5, 86_400 * 365,
        ]
        for seconds in cases {
            let ms = (seconds * 1_000_000).rounded() / 1000
            let line = RequestLog.line(request, status: 200, seconds: seconds, at: Self.time)
            #expect(line.hasSuffix(" 200 \(ms)ms"), "\(seconds) s: \(line)")
        }
    }
}
