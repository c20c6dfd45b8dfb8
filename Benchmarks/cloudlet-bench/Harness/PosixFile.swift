#if canImport(Glibc)
import Glibc
#endif

/// A file opened with POSIX `open`, written with `pwrite` (EINTR and short-write loops) and made durable with
/// `fdatasync`, or read with `pread`. Errors throw ``BenchError`` with code `.io`; the first failed sync ends the benchmark.
struct PosixFile: ~Copyable {
    let path: String
    private let fd: Int32

    /// Creates (or truncates) `path` for writing.
    init(creating path: String) throws { try self.init(path, flags: O_WRONLY | O_CREAT | O_TRUNC) }

    /// Opens `path` for reading.
    init(readingFrom path: String) throws { try self.init(path, flags: O_RDONLY) }

    private init(_ path: String, flags: Int32) throws {
        let fd = open(path, flags | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError.io("open", path) }
        self.path = path
        self.fd = fd
    }

    /// Reads into `buffer` at `offset`: as many bytes as there are, up to its size (0 at the end).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int {
        try loop(buffer.count, "pread") { done in pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done)) }
    }

    /// Asks the kernel to drop the file's cached pages (`posix_fadvise(POSIX_FADV_DONTNEED)`; clean pages only, so
    /// sync first), so that the next reads come from the disk. Returns whether the call succeeded.
    func dropCachedPages() -> Bool { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws {
        let done = try loop(bytes.count, "pwrite") { done in pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
        guard done == bytes.count else { throw BenchError.io("pwrite (wrote nothing)", path) }
    }

    /// Calls `step` (given the bytes done so far) until `count` bytes are done or it returns 0 (the end of the file);
    /// retries on EINTR. Returns the bytes done.
    private func loop(_ count: Int, _ call: String, _ step: (Int) -> Int) throws -> Int {
        var done = 0
        while done < count {
            let n = step(done)
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError.io(call, path)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    func dataSync() throws {
        while fdatasync(fd) != 0 {
            if errno == EINTR { continue }
            throw BenchError.io("fdatasync", path)
        }
    }

    deinit { close(fd) }
}
