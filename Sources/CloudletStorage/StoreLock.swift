#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// Lock files this process holds on the real disk, so that a second lock in the same process is refused at once
/// (see `StoreLock`). Other file systems keep their locks in a table of the process already.
private let heldInProcess = Mutex<Set<String>>([])

/// An exclusive lock on a store directory, held for as long as a process has the store open: an exclusive
/// ``FileSystem/lockFile(_:exclusive:)`` (`flock(LOCK_EX | LOCK_NB)` on the real disk) on `DIR/LOCK`, with the
/// holder's pid written in the file for the error message.
///
/// `flock` locks belong to an open file description, so a second `StoreLock` on the same directory fails in the
/// same process too. The lock goes away with the process; the `LOCK` file stays (removing it would race with a
/// new holder).
///
/// Offline readers (`cloudlet-tool info`, `verify`…) take the lock *shared* (``init(sharedOn:fileSystem:)``):
/// several of them can look at a store at once, but not while a process has it open for writing, and no writer can
/// open it while they look.
public final class StoreLock: Sendable {
    /// The locked directory.
    public let directory: String
    /// The file system the lock file is on.
    public let fileSystem: any FileSystem
    private let held: any FileLock
    /// The path registered in `heldInProcess` (nil for a shared lock or another file system: not registered).
    private let registered: String?
    private let released = Atomic<Bool>(false)

    static let fileName = "LOCK"

    /// Takes the lock shared on an existing store directory. Throws `.locked` naming the writer's pid if a process
    /// holds it exclusively, `.io` if the file cannot be opened or locked. The pid of a shared holder is not
    /// recorded.
    public init(sharedOn directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
        registered = nil
        let path = Path.join(self.directory, Self.fileName)
        do throws(FileSystemError) {
            held = try fileSystem.lockFile(path, exclusive: false)
        } catch {
            guard error.errno == EWOULDBLOCK else { throw CloudletError.io(error, "locking \(path)") }
            let holder = Self.holder(path, fileSystem)
            throw CloudletError(
                .locked,
                "store directory \(self.directory) is open for writing by another process (pid \(holder.map(String.init) ?? "unknown")); stop it first")
        }
    }

    /// Takes the lock, creating the directory if missing. Throws `.locked` naming the holder's pid if another
    /// process (or another `StoreLock` of this one) holds it, `.io` if the file cannot be opened or locked.
    public init(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
        let path = Path.join(self.directory, Self.fileName)
        let realDisk = fileSystem is PosixFileSystem
        if realDisk {
            guard heldInProcess.withLock({ $0.insert(path).inserted }) else {
                throw CloudletError(
                    .locked,
                    "store directory \(self.directory) is locked by another process (pid \(getpid())), which is this "
                        + "process: the store is already open here")
            }
        }
        do {
            held = try Self.acquire(path, directory: self.directory, fileSystem: fileSystem, retryingForks: realDisk)
        } catch {
            if realDisk { heldInProcess.withLock { _ = $0.remove(path) } }
            throw error
        }
        registered = realDisk ? path : nil
    }

    /// Opens and locks the file. On the real disk, a child process this one just forked holds our open files (and
    /// so our old lock) until it execs; when the file names this process as the holder and no lock of ours is open,
    /// that is what happened: retry for a moment instead of failing.
    private static func acquire(
        _ path: String, directory: String, fileSystem: any FileSystem, retryingForks: Bool
    ) throws -> any FileLock {
        var attempts = 0
        while true {
            do {
                return try tryAcquire(path, directory: directory, fileSystem: fileSystem)
            } catch let e as CloudletError
                where retryingForks && e.code == .locked && e.message.contains("which is this process") && attempts < 200
            {
                attempts += 1
                usleep(10_000)
            }
        }
    }

    private static func tryAcquire(_ path: String, directory: String, fileSystem: any FileSystem) throws -> any FileLock {
        let lock: any FileLock
        do throws(FileSystemError) {
            try fileSystem.createDirectory(directory)
            lock = try fileSystem.lockFile(path, exclusive: true)
        } catch {
            guard error.errno == EWOULDBLOCK else { throw CloudletError.io(error, "locking \(path)") }
            let holder = holder(path, fileSystem)
            // Shared holders only (offline readers) if a shared lock is still available.
            if let shared = try? fileSystem.lockFile(path, exclusive: false) {
                shared.release()
                throw CloudletError(
                    .locked, "store directory \(directory) is being read by an offline tool (cloudlet-tool); try again when it is done")
            }
            let ours = holder == getpid() ? ", which is this process" : ""
            throw CloudletError(
                .locked,
                "store directory \(directory) is locked by another process (pid \(holder.map(String.init) ?? "unknown"))\(ours)")
        }
        // The pid is only for the message of the next would-be holder; failing to record it does not weaken the lock.
        // Written over the old one as a fixed 16 bytes (the pid, a newline, spaces), longer than any pid line, so
        // no truncation is needed: on ext4 a truncate to zero is a journalled metadata change that cost an open
        // milliseconds on a busy disk.
        try? lock.file.write(Self.pidRecord(getpid()), at: 0)
        return lock
    }

    /// `pid` and a newline, padded with spaces to 16 bytes.
    static func pidRecord(_ pid: pid_t) -> [UInt8] {
        let line = Array("\(pid)\n".utf8)
        return line + [UInt8](repeating: 0x20, count: max(0, 16 - line.count))
    }

    /// The pid the lock file names, if it can be read (only for an error message).
    private static func holder(_ path: String, _ fileSystem: any FileSystem) -> pid_t? {
        guard let file = try? fileSystem.open(path, options: .readOnly) else { return nil }
        defer { try? file.close() }
        return (try? file.read(at: 0, count: 32)).flatMap { bytes in
            pid_t(String(decoding: bytes, as: UTF8.self).split(separator: "\n").first ?? "")
        }
    }

    /// Releases the lock. Idempotent.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        held.release()
        if let registered { heldInProcess.withLock { _ = $0.remove(registered) } }
    }

    deinit { release() }
}
