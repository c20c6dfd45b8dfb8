import Foundation

/// The access log: one line per request,
///
///     2026-11-30T12:34:56.789Z 127.0.0.1 POST /database/1/iCloud.com.example.app/development/private/records/modify 200 1.234ms
///
/// (UTC time, client address, method, path, status, milliseconds from the request read to the response ready).
/// The query string is never logged: it carries the API and web auth tokens.
struct RequestLog: Sendable {
    let sink: @Sendable (String) -> Void

    func record(_ request: HTTPRequest, status: Int, seconds: Double) {
        let ms = (seconds * 1_000_000).rounded() / 1000
        sink("\(Self.timestamp()) \(request.remoteAddress) \(request.method) \(request.path) \(status) \(ms)ms")
    }

    /// Now, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = tm()
        var seconds = ts.tv_sec
        gmtime_r(&seconds, &t)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(t.tm_year + 1900)-\(pad(t.tm_mon + 1, 2))-\(pad(t.tm_mday, 2))T\(pad(t.tm_hour, 2)):"
            + "\(pad(t.tm_min, 2)):\(pad(t.tm_sec, 2)).\(pad(Int32(ts.tv_nsec / 1_000_000), 3))Z"
    }
}
