import Foundation

/// This process's resident memory as Linux reports it in `/proc/self/status`: what is in RAM now (`VmRSS`) and
/// the most that ever was (`VmHWM`, the high-water mark), in bytes. Mapped files count only for their pages in RAM;
/// the OS page cache under `read`/`pread` does not count at all.
struct ProcessMemory: Sendable, Codable, Equatable {
    /// `VmRSS`: resident set size now.
    var residentBytes: Int
    /// `VmHWM`: peak resident set size since the process started.
    var peakBytes: Int

    /// Reads `/proc/self/status` now.
    static func current() throws -> ProcessMemory {
        let path = "/proc/self/status"
        guard let status = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw BenchError(.io, "cannot read '\(path)' (resident memory is measured on Linux only)")
        }
        return try ProcessMemory(status: status)
    }

    /// Parses the text of a `/proc/<pid>/status` file (`VmRSS:\t  1234 kB`).
    init(status: String) throws {
        var kibibytes: [Substring: Int] = [:]
        for line in status.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\t" })
            if parts.count == 3, parts[2] == "kB", let n = Int(parts[1]) { kibibytes[parts[0]] = n }
        }
        guard let rss = kibibytes["VmRSS"], let hwm = kibibytes["VmHWM"] else {
            throw BenchError(.io, "/proc/self/status has no VmRSS or VmHWM line")
        }
        residentBytes = rss * 1024
        peakBytes = hwm * 1024
    }

    init(residentBytes: Int, peakBytes: Int) {
        self.residentBytes = residentBytes
        self.peakBytes = peakBytes
    }
}
