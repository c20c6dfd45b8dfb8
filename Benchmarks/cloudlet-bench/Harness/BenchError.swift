#if canImport(Glibc)
import Glibc
#endif

/// The one error type of the benchmark tool. Its code picks the exit status (sysexits.h).
struct BenchError: Error, Sendable, CustomStringConvertible {
    enum Code: Sendable {
        /// Bad command line. Exit 64.
        case usage
        /// The operating system refused an I/O call. Exit 74.
        case io
        /// An engine under test failed (a SQLite error, a Cloudlet error). Exit 1.
        case engine
    }

    var code: Code
    /// Names what failed and why.
    var message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// An I/O error naming the call, the path and errno's text.
    static func io(_ call: String, _ path: String, errno e: Int32 = errno) -> BenchError {
        BenchError(.io, "\(call) '\(path)': \(String(cString: strerror(e)))")
    }

    var exitStatus: Int32 {
        switch code {
        case .usage: 64
        case .io: 74
        case .engine: 1
        }
    }

    var description: String { message }
}
