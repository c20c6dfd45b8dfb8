#if canImport(Glibc)
import Glibc
#endif

/// A file opened with POSIX `open`, written with `pwrite` (EINTR and short-write loops) and made durable with
/// `fdatasync`. Errors throw ``BenchError`` with code `.io`; the first failed sync ends the benchmark.
struct PosixFile: ~Copyable {
    let path: String
    private let fd: Int32

    /// Creates (or truncates) `path` for writing.
    init(creating path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError.io("open", path) }
        self.path = path
        self.fd = fd
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError.io("pwrite", path)
            }
            done += n
        }
    }

    func dataSync() throws {
        while fdatasync(fd) != 0 {
            if errno == EINTR { continue }
            throw BenchError.io("fdatasync", path)
        }
    }

    deinit { close(fd) }
}
