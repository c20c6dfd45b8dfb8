import Foundation

/// This process's resident memory as Linux reports it in `/proc/self/status`: what is in RAM now (`VmRSS`) and
/// the most that ever was (`VmHWM`, the high-water mark), in bytes, and what is in RAM now split into the process's
/// own memory (`RssAnon`: heap, stacks) and pages of mapped files (`RssFile`: the executable, libraries, and files an
/// engine maps — Cloudlet's log segments, see `LogConfiguration.mappedSegments`). Mapped files count only for their
/// pages in RAM, which are the OS page cache's (shared, reclaimable); the page cache under `read`/`pread` does not
/// count at all. Linux has no high-water mark of `RssAnon` alone.
struct ProcessMemory: Sendable, Codable, Equatable {
    /// `VmRSS`: resident set size now.
    var residentBytes: Int
    /// `VmHWM`: peak resident set size since the process started.
    var peakBytes: Int
    /// `RssAnon`: the anonymous part of ``residentBytes`` now (0 where the kernel does not report it).
    var anonymousBytes: Int = 0
    /// `RssFile`: the file-backed part of ``residentBytes`` now (0 where the kernel does not report it).
    var fileBytes: Int = 0

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
        anonymousBytes = (kibibytes["RssAnon"] ?? 0) * 1024
        fileBytes = (kibibytes["RssFile"] ?? 0) * 1024
    }

    init(residentBytes: Int, peakBytes: Int) {
        self.residentBytes = residentBytes
        self.peakBytes = peakBytes
    }
}
