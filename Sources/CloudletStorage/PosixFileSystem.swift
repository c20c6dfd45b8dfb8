#if canImport(Glibc)
import Glibc
#endif
import CloudletConcurrency
import Synchronization

/// The real file system: POSIX `open`/`pread`/`pwrite`/`fdatasync`, retrying on `EINTR` and looping over short
/// reads and writes, with the `errno` of every failure in the error.
public struct PosixFileSystem: FileSystem {
    public init() {}

    public func open(_ path: String, options: OpenOptions) throws(FileSystemError) -> any File {
        try openFile(path, options: options)
    }

    /// ``open(_:options:)`` with the concrete type, for callers that need the descriptor (``lockFile(_:exclusive:)``).
    func openFile(_ path: String, options: OpenOptions) throws(FileSystemError) -> PosixFile {
        var flags = O_CLOEXEC | (options.contains(.readOnly) ? O_RDONLY : O_RDWR)
        if options.contains(.create) { flags |= O_CREAT }
        if options.contains(.truncate) { flags |= O_TRUNC }
        return PosixFile(fd: try retryingEINTR("open", path) { Glibc.open(path, flags, 0o600) }, path: path)
    }

    public func listDirectory(_ path: String) throws(FileSystemError) -> [String] {
        guard let dir = opendir(path) else { throw FileSystemError(operation: "opendir", path: path, errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw FileSystemError(operation: "readdir", path: path, errno: errno) }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    public func createDirectory(_ path: String) throws(FileSystemError) {
        let path = Path.normalize(path)
        if mkdir(path, 0o700) == 0 { return }
        switch errno {
        case EEXIST:
            var st = stat()
            if stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return }
            throw FileSystemError(operation: "mkdir", path: path, errno: ENOTDIR)
        case ENOENT where path != "/" && path != ".":
            try createDirectory(Path.parent(path))
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw FileSystemError(operation: "mkdir", path: path, errno: errno)
            }
        case let e:
            throw FileSystemError(operation: "mkdir", path: path, errno: e)
        }
    }

    public func rename(_ from: String, to: String) throws(FileSystemError) {
        if Glibc.rename(from, to) != 0 { throw FileSystemError(operation: "rename to \(to)", path: from, errno: errno) }
    }

    public func remove(_ path: String) throws(FileSystemError) {
        if unlink(path) != 0 { throw FileSystemError(operation: "unlink", path: path, errno: errno) }
    }

    public func fsyncDirectory(_ path: String) throws(FileSystemError) {
        ThreadBridge.checkMayBlock("fsync of directory \(path)")
        let fd = try retryingEINTR("open directory", path) { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { Glibc.close(fd) }
        try retryingEINTR("fsync directory", path) { fsync(fd) }
    }

    public func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    public func lockFile(_ path: String, exclusive: Bool) throws(FileSystemError) -> any FileLock {
        // open(_:options:) makes nothing but PosixFiles.
        let file = try openForLocking(path, exclusive: exclusive) as! PosixFile
        do throws(FileSystemError) {
            try retryingEINTR("flock", path) { flock(file.fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) }
        } catch {
            // The lock was not taken; closing the descriptor can lose nothing.
            try? file.close()
            throw error
        }
        return PosixFileLock(file: file)
    }
}

/// An `flock` on an open file. Sendable: `posixFile` never changes and `released` is atomic.
final class PosixFileLock: FileLock {
    let posixFile: PosixFile
    private let released = Atomic<Bool>(false)

    init(file: PosixFile) { posixFile = file }

    var file: any File { posixFile }

    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Unlock before closing: a child process forked meanwhile (before its exec closes the descriptor) shares the
        // open file description, and closing our descriptor alone would leave the lock held until that exec. Once
        // unlocked, a failed close can lose nothing.
        _ = flock(posixFile.fd, LOCK_UN)
        try? posixFile.close()
    }

    deinit { release() }
}

/// A file descriptor. Sendable without a lock: `fd` and `path` never change, `closed` is atomic, and positioned
/// reads and writes on one descriptor are safe from several threads.
final class PosixFile: File {
    let fd: Int32
    let path: String
    private let closed = Atomic<Bool>(false)

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit {
        if !closed.load(ordering: .acquiring) { Glibc.close(fd) }
    }

    private func checkOpen(_ operation: String) throws(FileSystemError) {
        if closed.load(ordering: .acquiring) { throw FileSystemError(operation: operation, path: path, errno: EBADF) }
    }

    func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        try checkOpen("pread")
        ThreadBridge.checkMayBlock("pread of \(path)")
        var done = 0
        while done < buffer.count {
            let n = Glibc.pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n > 0 {
                done += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw FileSystemError(operation: "pread", path: path, errno: errno)
            }
        }
        return done
    }

    func mapReadOnly(count: Int) -> MappedRegion? {
        closed.load(ordering: .acquiring) ? nil : MappedRegion(fd: fd, count: count)
    }

    func pwrite(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        try checkOpen("pwrite")
        ThreadBridge.checkMayBlock("pwrite of \(path)")
        var done = 0
        while done < bytes.count {
            let n = Glibc.pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n > 0 {
                done += n
            } else if n == 0 {
                throw FileSystemError(operation: "pwrite", path: path, errno: EIO)
            } else if errno != EINTR {
                throw FileSystemError(operation: "pwrite", path: path, errno: errno)
            }
        }
    }

    func fdatasync() throws(FileSystemError) {
        try checkOpen("fdatasync")
        ThreadBridge.checkMayBlock("fdatasync of \(path)")
        try retryingEINTR("fdatasync", path) { Glibc.fdatasync(fd) }
    }

    func truncate(to size: UInt64) throws(FileSystemError) {
        try checkOpen("ftruncate")
        try retryingEINTR("ftruncate", path) { ftruncate(fd, off_t(size)) }
    }

    func size() throws(FileSystemError) -> UInt64 {
        try checkOpen("fstat")
        var st = stat()
        if fstat(fd, &st) != 0 { throw FileSystemError(operation: "fstat", path: path, errno: errno) }
        return UInt64(st.st_size)
    }

    func duplicateDescriptor() -> Int32? {
        if closed.load(ordering: .acquiring) { return nil }
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        return copy >= 0 ? copy : nil
    }

    func prefetch(at offset: UInt64, count: Int) {
        if !closed.load(ordering: .acquiring) { _ = posix_fadvise(fd, off_t(offset), off_t(count), POSIX_FADV_WILLNEED) }
    }

    func startWriteback(at offset: UInt64, count: Int) {
        if !closed.load(ordering: .acquiring) { _ = linuxSyncFileRange(fd, Int64(offset), Int64(count), 2 /* SYNC_FILE_RANGE_WRITE */) }
    }

    func close() throws(FileSystemError) {
        if closed.exchange(true, ordering: .acquiringAndReleasing) { return }
        // Linux releases the descriptor even when close fails with EINTR, so it is never retried.
        if Glibc.close(fd) != 0 && errno != EINTR { throw FileSystemError(operation: "close", path: path, errno: errno) }
    }
}

/// glibc's `sync_file_range(2)`, which the Glibc module leaves out (it is declared only under `_GNU_SOURCE`):
/// `int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags)`.
@_silgen_name("sync_file_range")
private func linuxSyncFileRange(_ fd: Int32, _ offset: Int64, _ count: Int64, _ flags: UInt32) -> Int32

/// Runs a system call that returns -1 and sets `errno` on failure, again while it fails with `EINTR`; returns
/// its result or throws its `errno`.
@discardableResult
func retryingEINTR(_ operation: String, _ path: String, _ call: () -> Int32) throws(FileSystemError) -> Int32 {
    while true {
        let rc = call()
        if rc >= 0 { return rc }
        if errno != EINTR { throw FileSystemError(operation: operation, path: path, errno: errno) }
    }
}
