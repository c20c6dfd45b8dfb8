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
        sink(Self.line(request, status: status, seconds: seconds, at: Self.now()))
    }

    /// The line of `request`, written byte by byte into one string of the right size: every request writes one, so
    /// it costs one allocation, not the dozen of string interpolation (issue 19: 2 % of the server's CPU under
    /// lookups went to formatting it).
    static func line(_ request: HTTPRequest, status: Int, seconds: Double, at time: timespec) -> String {
        let micros = (seconds * 1_000_000).rounded()
        // Beyond an exactly representable integer (never, for a request's time), Double's own text.
        guard micros >= 0 && micros < 1e15 else {
            return "\(timestamp(time)) \(request.remoteAddress) \(request.method) \(request.path) \(status) \(micros / 1000)ms"
        }
        let us = Int(micros)
        var fields = [request.remoteAddress, request.method, request.path]
        let capacity = 24 + fields.reduce(0) { $0 + $1.utf8.count + 1 } + 1 + 20 + 1 + 24 + 2
        return String(unsafeUninitializedCapacity: capacity) { out in
            var at = 0
            func put(_ byte: UInt8) {
                out[at] = byte
                at += 1
            }
            func put(digits value: Int, width: Int) {
                var v = value
                for i in stride(from: width - 1, through: 0, by: -1) {
                    out[at + i] = UInt8(truncatingIfNeeded: 48 + v % 10)
                    v /= 10
                }
                at += width
            }
            func put(number value: Int) {
                var width = 1
                var v = value
                while v >= 10 {
                    v /= 10
                    width += 1
                }
                put(digits: value, width: width)
            }
            writeTimestamp(time, put: put(_:), digits: put(digits:width:))
            for i in fields.indices {
                put(32)
                fields[i].withUTF8 { for b in $0 { put(b) } }
            }
            put(32)
            if status < 0 { put(45) }
            put(number: abs(status))
            put(32)
            // As Double's description of us / 1000 prints it: the integer part, then the fraction without trailing
            // zeros, at least one digit ("12.0ms", "1.234ms", "0.05ms").
            put(number: us / 1000)
            put(46)
            var fraction = us % 1000
            var width = 3
            while width > 1 && fraction % 10 == 0 {
                fraction /= 10
                width -= 1
            }
            put(digits: fraction, width: width)
            put(109)
            put(115)
            return at
        }
    }

    /// The wall clock now.
    static func now() -> timespec {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts
    }

    /// Now, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    static func timestamp() -> String { timestamp(now()) }

    /// `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
    static func timestamp(_ time: timespec) -> String {
        String(unsafeUninitializedCapacity: 32) { out in
            var at = 0
            writeTimestamp(
                time, put: { out[at] = $0; at += 1 },
                digits: { value, width in
                    var v = value
                    for i in stride(from: width - 1, through: 0, by: -1) {
                        out[at + i] = UInt8(truncatingIfNeeded: 48 + v % 10)
                        v /= 10
                    }
                    at += width
                })
            return at
        }
    }

    /// Writes `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (24 bytes for years 1000–9999) through `put` (one byte) and
    /// `digits` (a number zero-padded to a width).
    private static func writeTimestamp(_ time: timespec, put: (UInt8) -> Void, digits: (Int, Int) -> Void) {
        var t = tm()
        var seconds = time.tv_sec
        gmtime_r(&seconds, &t)
        digits(Int(t.tm_year) + 1900, 4)
        put(45)
        digits(Int(t.tm_mon) + 1, 2)
        put(45)
        digits(Int(t.tm_mday), 2)
        put(84)
        digits(Int(t.tm_hour), 2)
        put(58)
        digits(Int(t.tm_min), 2)
        put(58)
        digits(Int(t.tm_sec), 2)
        put(46)
        digits(Int(time.tv_nsec / 1_000_000), 3)
        put(90)
    }
}
