#if canImport(Glibc)
import Glibc
#endif

/// How ``FileSystem/open(_:options:)`` opens a file. The empty set opens an existing file for reading and writing.
public struct OpenOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Create the file (mode 0644) if it does not exist (`O_CREAT`).
    public static let create = OpenOptions(rawValue: 1 << 0)
    /// Cut the file to zero bytes on open (`O_TRUNC`).
    public static let truncate = OpenOptions(rawValue: 1 << 1)
    /// Open for reading only (`O_RDONLY`); writes fail with `EBADF`.
    public static let readOnly = OpenOptions(rawValue: 1 << 2)
}

/// A failed file-system call: which call, on which path, and the `errno` it returned.
///
/// The only error of the file layer (typed throws); the log turns it into a ``CloudletError`` that names the segment.
public struct FileSystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call that failed: `open`, `pread`, `pwrite`, `fdatasync`, `ftruncate`, `rename`…
    public var operation: String
    /// The file or directory it was called on.
    public var path: String
    /// The `errno` it failed with.
    public var errno: Int32

    public init(operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// `strerror(errno)`, e.g. "Input/output error".
    public var errnoText: String { String(cString: strerror(errno)) }

    public var description: String { "\(operation) \(path): \(errnoText) (errno \(errno))" }
}

/// The few file-system calls the storage layer makes, so that tests can swap the real disk for an in-memory one
/// or inject faults (`InMemoryFileSystem` and `FaultInjectingFileSystem` of the CloudletTestSupport target).
/// Modelled on LevelDB's `Env`.
///
/// Paths are absolute or relative POSIX paths joined with `/`.
public protocol FileSystem: Sendable {
    /// Opens (and with `.create` creates) a file.
    func open(_ path: String, options: OpenOptions) throws(FileSystemError) -> any File
    /// The names (not paths) of the entries of a directory, without `.` and `..`, in no particular order.
    func listDirectory(_ path: String) throws(FileSystemError) -> [String]
    /// Creates a directory and any missing parents; succeeds if it exists.
    func createDirectory(_ path: String) throws(FileSystemError)
    /// Renames a file, atomically replacing `to` if it exists (`rename(2)`). Durable only after ``fsyncDirectory(_:)``.
    func rename(_ from: String, to: String) throws(FileSystemError)
    /// Removes a file (`unlink(2)`). Durable only after ``fsyncDirectory(_:)``.
    func remove(_ path: String) throws(FileSystemError)
    /// Makes the directory's entries (creations, renames, removals) durable (`fsync` of the directory).
    func fsyncDirectory(_ path: String) throws(FileSystemError)
    /// Whether a file or directory exists at `path`.
    func fileExists(_ path: String) -> Bool
    /// Locks the file at `path` without waiting, as `flock(2)` with `LOCK_NB` does: `exclusive`ly, or shared with
    /// other shared holders. An exclusive lock opens the file for reading and writing, creating it if missing; a
    /// shared one opens it read-only (creating it only if missing). Fails with `EWOULDBLOCK` while a conflicting
    /// lock is held — by another process or by another ``FileLock`` of this one. The lock lasts until
    /// ``FileLock/release()`` or the end of the process.
    func lockFile(_ path: String, exclusive: Bool) throws(FileSystemError) -> any FileLock
}

/// A lock taken by ``FileSystem/lockFile(_:exclusive:)``.
public protocol FileLock: AnyObject, Sendable {
    /// The locked file, open for as long as the lock is held (the holder may note who it is in it).
    var file: any File { get }
    /// Releases the lock and closes ``file``. Idempotent.
    func release()
}

/// An open file. Safe to use from several threads at once: reads and writes are positioned (`pread`/`pwrite`).
public protocol File: AnyObject, Sendable {
    /// The path it was opened with.
    var path: String { get }
    /// Reads into `buffer` from `offset` until it is full or the file ends; returns the number of bytes read
    /// (less than `buffer.count` only at end of file).
    func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int
    /// Writes all of `bytes` at `offset`, extending the file if needed.
    func pwrite(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError)
    /// Makes the file's data (and its size) durable.
    func fdatasync() throws(FileSystemError)
    /// Sets the file's size; durable after ``fdatasync()``.
    func truncate(to size: UInt64) throws(FileSystemError)
    /// The file's current size in bytes.
    func size() throws(FileSystemError) -> UInt64
    /// Closes the file. Idempotent; any other call afterwards fails with `EBADF`.
    func close() throws(FileSystemError)
    /// Hints that `count` bytes at `offset` will be read soon (`posix_fadvise(WILLNEED)`), so that the disk reads
    /// them while the caller works on what it has. Never fails; a no-op where there is no disk.
    func prefetch(at offset: UInt64, count: Int)
    /// Hints that the `count` bytes written at `offset` may go to the disk now (`sync_file_range(WRITE)`: starts
    /// their writeback and does not wait for it), so that a later ``fdatasync()`` has less left to do. Not a
    /// durability step. Never fails; a no-op where there is no disk.
    func startWriteback(at offset: UInt64, count: Int)
    /// A new descriptor of the same open file (close-on-exec), for code that hands the file to C (the HTTP front end
    /// sends asset downloads from it); the caller closes it. Nil where the file has no descriptor (in memory).
    func duplicateDescriptor() -> Int32?
    /// The file's first `count` bytes mapped read-only (``MappedRegion``), for reads without a system call; nil where
    /// the file system cannot map (in memory, fault-injecting) or `mmap` fails — the caller then reads with ``pread(into:at:)``.
    /// Only for files that do not shrink while mapped.
    func mapReadOnly(count: Int) -> MappedRegion?
}

extension File {
    public func prefetch(at offset: UInt64, count: Int) {}
    public func startWriteback(at offset: UInt64, count: Int) {}
    public func duplicateDescriptor() -> Int32? { nil }
    public func mapReadOnly(count: Int) -> MappedRegion? { nil }
}

extension File {
    /// Reads up to `count` bytes at `offset`; fewer only at end of file.
    public func read(at offset: UInt64, count: Int) throws(FileSystemError) -> [UInt8] {
        // Read into uninitialized storage (zero-filling it first cost a memset per read: 1 MiB a segment window).
        // The initializer only rethrows untyped errors, so the typed error travels in a Result.
        var failure: FileSystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            switch Result(catching: { () throws(FileSystemError) in try pread(into: UnsafeMutableRawBufferPointer(buffer), at: offset) }) {
            case .success(let n): initialized = n
            case .failure(let error):
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: [UInt8], at offset: UInt64) throws(FileSystemError) {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(FileSystemError) in try pwrite(buffer, at: offset) }
        }.get()
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64) throws(FileSystemError) {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(FileSystemError) in try pwrite(buffer, at: offset) }
        }.get()
    }
}

extension FileSystem {
    /// The whole content of the file at `path`.
    public func readFile(_ path: String) throws(FileSystemError) -> [UInt8] {
        let file = try open(path, options: .readOnly)
        // Only read: a failed close loses nothing.
        defer { try? file.close() }
        return try file.read(at: 0, count: Int(try file.size()))
    }

    /// Opens the file a ``lockFile(_:exclusive:)`` locks: for reading and writing, created if missing, when
    /// `exclusive`; else read-only (a read-only file system cannot have a writer), created only if missing.
    package func openForLocking(_ path: String, exclusive: Bool) throws(FileSystemError) -> any File {
        if exclusive { return try open(path, options: .create) }
        do throws(FileSystemError) { return try open(path, options: .readOnly) } catch {
            guard error.errno == ENOENT else { throw error }
            return try open(path, options: .create)
        }
    }

    /// Copies the file at `from` to `to` (created or emptied) and makes the copy durable: its data fdatasync'd, its
    /// name fsync'd into its directory.
    public func copyFile(_ from: String, to: String) throws(FileSystemError) {
        let bytes = try readFile(from)
        let copy = try open(to, options: [.create, .truncate])
        do throws(FileSystemError) {
            try copy.write(bytes, at: 0)
            try copy.fdatasync()
        } catch {
            try? copy.close()
            throw error
        }
        try copy.close()
        try fsyncDirectory(Path.parent(to))
    }
}

/// Path helpers shared by the file systems and the log (`package`: the test file systems use them too).
package enum Path {
    /// `directory/name`.
    package static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// The directory part of a path (`"."` for a bare name, `"/"` for a top-level entry).
    package static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The last component of a path.
    package static func name(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// Drops repeated and trailing slashes (`a//b/` → `a/b`), keeping a lone `/`.
    package static func normalize(_ path: String) -> String {
        var out = ""
        var lastWasSlash = false
        for c in path {
            if c == "/" {
                if !lastWasSlash { out.append(c) }
                lastWasSlash = true
            } else {
                out.append(c)
                lastWasSlash = false
            }
        }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out
    }
}
