#if canImport(Glibc)
import Glibc
#endif
import CloudletStorage
import Synchronization

/// Wraps another file system and makes chosen calls fail, for tests of the failure paths (LevelDB's
/// `fault_injection_test.cc`): fail the Nth `fdatasync` with `EIO`, tear a write part-way (the process "dies":
/// every later write and sync fails), fail every write with `ENOSPC`, fail every creation of a file, or stall every
/// `fdatasync` (a slow disk).
///
/// Counting starts when a fault is armed; faults fire once (except ``failWrites(errno:matching:)``) and are cleared
/// by ``clearFaults()``. Each fault may be limited to the paths a predicate accepts (`matching`: only checkpoint
/// files, only the log's segments…); calls on other paths neither fire it nor count towards it.
public final class FaultInjectingFileSystem: FileSystem {
    /// Which paths a fault applies to.
    public typealias PathFilter = @Sendable (String) -> Bool

    struct Faults {
        /// Fail the fdatasync call this many calls from now (1 = the next one).
        var fdatasyncCountdown: Int?
        var fdatasyncErrno: Int32 = EIO
        var fdatasyncPaths: PathFilter?
        /// Tear the pwrite call this many calls from now, keeping `tearKeep` bytes of it.
        var tearCountdown: Int?
        var tearKeep = 0
        var tearPaths: PathFilter?
        /// Every pwrite fails with this errno, after writing its first `writeKeep` bytes.
        var writeErrno: Int32?
        var writeKeep = 0
        var writePaths: PathFilter?
        /// Every open that creates a file on a path `createPaths` accepts fails with this errno.
        var createErrno: Int32?
        var createPaths: PathFilter?
        /// After a torn write nothing gets written or synced any more.
        var dead = false
        var fdatasyncCalls = 0
        var fdatasyncCallsByPath: [String: Int] = [:]
        var writeCalls = 0
        var directorySyncCalls = 0
        /// `startWriteback` calls: the byte ranges, by path.
        var writebacksByPath: [String: [Range<UInt64>]] = [:]
        var bytesReadByPath: [String: Int] = [:]
    }

    /// The file system underneath, where the bytes really go.
    public let base: any FileSystem
    let faults = Mutex(Faults())
    /// Whether fdatasync calls wait, on which paths, and how many wait now (a Monitor rather than the Mutex: they
    /// sleep until it changes).
    let stalled = Monitor(Stall())

    struct Stall {
        var on = false
        var paths: PathFilter?
        var waiting = 0

        func holds(_ path: String) -> Bool { on && (paths?(path) ?? true) }
    }

    public init(wrapping base: any FileSystem) {
        self.base = base
    }

    /// Makes the `nth` fdatasync from now (1 = the next) on a path `matching` accepts (nil: any) fail with `errno`,
    /// without syncing anything.
    public func failFdatasync(nth: Int = 1, errno: Int32 = EIO, matching paths: PathFilter? = nil) {
        precondition(nth >= 1)
        faults.withLock {
            $0.fdatasyncCountdown = nth
            $0.fdatasyncErrno = errno
            $0.fdatasyncPaths = paths
        }
    }

    /// Tears the `nth` pwrite from now (1 = the next) on a path `matching` accepts (nil: any): only its first
    /// `bytes` bytes reach the file underneath, the call fails with `EIO`, and every later pwrite and fdatasync (on
    /// any path) fails too, as if the process had died mid-write.
    public func tearWrite(nth: Int = 1, keeping bytes: Int, matching paths: PathFilter? = nil) {
        precondition(nth >= 1 && bytes >= 0)
        faults.withLock {
            $0.tearCountdown = nth
            $0.tearKeep = bytes
            $0.tearPaths = paths
        }
    }

    /// Makes every pwrite from now on to a path `matching` accepts (nil: any) fail with `errno` (a full disk by
    /// default) until ``clearFaults()``, after writing its first `bytes` bytes (a disk that filled up mid-write).
    public func failWrites(errno: Int32 = ENOSPC, keeping bytes: Int = 0, matching paths: PathFilter? = nil) {
        precondition(bytes >= 0)
        faults.withLock {
            $0.writeErrno = errno
            $0.writeKeep = bytes
            $0.writePaths = paths
        }
    }

    /// Makes every open with `.create` from now on of a path `matching` accepts (nil: any) fail with `errno` (no space
    /// for a new inode by default) until ``clearFaults()``, creating nothing.
    public func failCreates(errno: Int32 = ENOSPC, matching paths: PathFilter? = nil) {
        faults.withLock {
            $0.createErrno = errno
            $0.createPaths = paths
        }
    }

    /// Makes every fdatasync from now on on a path `matching` accepts (nil: any) wait until ``resumeFdatasync()``,
    /// then go on as usual: a stalled disk, for tests of what happens while the committer (or an index flush) is
    /// stuck.
    public func stallFdatasync(matching paths: PathFilter? = nil) {
        stalled.withLock {
            $0.on = true
            $0.paths = paths
        }
    }

    /// Lets stalled fdatasync calls go on.
    public func resumeFdatasync() {
        stalled.withLock {
            $0.on = false
            $0.paths = nil
        }
        stalled.broadcast(.progress)
    }

    /// How many fdatasync calls are waiting for ``resumeFdatasync()`` now.
    public var stalledFdatasyncCalls: Int { stalled.withLock { $0.waiting } }

    /// Disarms every fault (a torn write's "death" and a stall included).
    public func clearFaults() {
        faults.withLock {
            $0.fdatasyncCountdown = nil
            $0.tearCountdown = nil
            $0.writeErrno = nil
            $0.createErrno = nil
            $0.dead = false
        }
        resumeFdatasync()
    }

    /// How many fdatasync calls went through this wrapper (failed ones included).
    public var fdatasyncCount: Int { faults.withLock { $0.fdatasyncCalls } }
    /// How many fdatasync calls on the file at `path` went through this wrapper (failed ones included).
    public func fdatasyncCount(of path: String) -> Int { faults.withLock { $0.fdatasyncCallsByPath[path] ?? 0 } }
    /// How many pwrite calls went through this wrapper (failed ones included).
    public var writeCount: Int { faults.withLock { $0.writeCalls } }
    /// Bytes read (pread) from the file at `path` through this wrapper.
    public func bytesRead(of path: String) -> Int { faults.withLock { $0.bytesReadByPath[path] ?? 0 } }

    /// The ranges whose writeback was started (``File/startWriteback(at:count:)``) on the file at `path`, in order.
    public func writebacks(of path: String) -> [Range<UInt64>] { faults.withLock { $0.writebacksByPath[path] ?? [] } }

    /// `fsyncDirectory` calls so far (counted whether or not a fault is armed).
    public var directorySyncCount: Int { faults.withLock { $0.directorySyncCalls } }

    public func open(_ path: String, options: OpenOptions) throws(FileSystemError) -> any File {
        if options.contains(.create), let errno = faults.withLock({ f in (f.createPaths?(path) ?? true) ? f.createErrno : nil }) {
            throw FileSystemError(operation: "open", path: path, errno: errno)
        }
        return FaultyFile(base: try base.open(path, options: options), fileSystem: self)
    }

    public func listDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.listDirectory(path) }
    public func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    public func rename(_ from: String, to: String) throws(FileSystemError) { try base.rename(from, to: to) }
    public func remove(_ path: String) throws(FileSystemError) { try base.remove(path) }
    public func fsyncDirectory(_ path: String) throws(FileSystemError) {
        faults.withLock { $0.directorySyncCalls += 1 }
        try base.fsyncDirectory(path)
    }
    public func fileExists(_ path: String) -> Bool { base.fileExists(path) }
    public func lockFile(_ path: String, exclusive: Bool) throws(FileSystemError) -> any FileLock {
        try base.lockFile(path, exclusive: exclusive)
    }

    /// What a pwrite of `count` bytes may do: all of it, a prefix then fail, or fail.
    enum WriteDecision {
        case proceed
        /// Write the first `keep` bytes, then fail with `errno`.
        case tear(keep: Int, errno: Int32)
        case fail(Int32)
    }

    func decideWrite(count: Int, path: String) -> WriteDecision {
        faults.withLock { f in
            f.writeCalls += 1
            if f.dead { return .fail(EIO) }
            if let e = f.writeErrno, f.writePaths?(path) ?? true {
                return f.writeKeep > 0 ? .tear(keep: min(f.writeKeep, count), errno: e) : .fail(e)
            }
            if let n = f.tearCountdown, f.tearPaths?(path) ?? true {
                if n > 1 {
                    f.tearCountdown = n - 1
                } else {
                    f.tearCountdown = nil
                    f.dead = true
                    return .tear(keep: min(f.tearKeep, count), errno: EIO)
                }
            }
            return .proceed
        }
    }

    /// The errno the next fdatasync must fail with, if any (after waiting out a stall).
    func decideFdatasync(path: String) -> Int32? {
        let held = stalled.withLock { s in
            guard s.holds(path) else { return false }
            s.waiting += 1
            return true
        }
        if held { stalled.withLock(waitingOn: .progress, until: { !$0.holds(path) }) { $0.waiting -= 1 } }
        return faults.withLock { f in
            f.fdatasyncCalls += 1
            f.fdatasyncCallsByPath[path, default: 0] += 1
            if f.dead { return EIO }
            guard let n = f.fdatasyncCountdown, f.fdatasyncPaths?(path) ?? true else { return nil }
            if n > 1 {
                f.fdatasyncCountdown = n - 1
                return nil
            }
            f.fdatasyncCountdown = nil
            return f.fdatasyncErrno
        }
    }
}

/// A file of a ``FaultInjectingFileSystem``. Sendable: both stored properties are immutable references to
/// Sendable objects; the fault state lives behind the file system's mutex.
final class FaultyFile: File {
    let base: any File
    let fileSystem: FaultInjectingFileSystem

    init(base: any File, fileSystem: FaultInjectingFileSystem) {
        self.base = base
        self.fileSystem = fileSystem
    }

    var path: String { base.path }

    func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        let n = try base.pread(into: buffer, at: offset)
        fileSystem.faults.withLock { $0.bytesReadByPath[path, default: 0] += n }
        return n
    }

    func pwrite(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        switch fileSystem.decideWrite(count: bytes.count, path: path) {
        case .proceed:
            try base.pwrite(bytes, at: offset)
        case .tear(let keep, let errno):
            if keep > 0 { try base.pwrite(UnsafeRawBufferPointer(rebasing: bytes[0..<keep]), at: offset) }
            throw FileSystemError(operation: "pwrite", path: path, errno: errno)
        case .fail(let e):
            throw FileSystemError(operation: "pwrite", path: path, errno: e)
        }
    }

    func fdatasync() throws(FileSystemError) {
        if let e = fileSystem.decideFdatasync(path: path) { throw FileSystemError(operation: "fdatasync", path: path, errno: e) }
        try base.fdatasync()
    }

    // Hints pass through to the file underneath (the defaults of `File` would drop them).
    func startWriteback(at offset: UInt64, count: Int) {
        fileSystem.faults.withLock { $0.writebacksByPath[path, default: []].append(offset..<(offset + UInt64(count))) }
        base.startWriteback(at: offset, count: count)
    }

    func prefetch(at offset: UInt64, count: Int) { base.prefetch(at: offset, count: count) }
    func duplicateDescriptor() -> Int32? { base.duplicateDescriptor() }

    func truncate(to size: UInt64) throws(FileSystemError) { try base.truncate(to: size) }
    func size() throws(FileSystemError) -> UInt64 { try base.size() }
    func close() throws(FileSystemError) { try base.close() }
}
