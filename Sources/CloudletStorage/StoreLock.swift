#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// Lock files this process holds, so that a second lock in the same process is refused at once (see `StoreLock`).
private let heldInProcess = Mutex<Set<String>>([])

/// An exclusive lock on a store directory, held for as long as a process has the store open:
/// `flock(LOCK_EX | LOCK_NB)` on `DIR/LOCK`, with the holder's pid written in the file for the error message.
///
/// `flock` locks belong to an open file description, so a second `StoreLock` on the same directory fails in the
/// same process too. The lock goes away with the process; the `LOCK` file stays (removing it would race with a
/// new holder).
///
/// Offline readers (`cloudlet-tool info`, `verify`…) take the lock *shared* (``init(sharedOn:)``): several of them
/// can look at a store at once, but not while a process has it open for writing, and no writer can open it
/// while they look.
public final class StoreLock: Sendable {
    /// The locked directory.
    public let directory: String
    /// The locked file; closing it releases the lock.
    private let file: PosixFile
    private let released = Atomic<Bool>(false)

    static let fileName = "LOCK"

    /// Takes the lock shared (`flock(LOCK_SH | LOCK_NB)`) on an existing store directory. Throws `.locked` naming the
    /// writer's pid if a process holds it exclusively, `.io` if the file cannot be opened or locked. The pid of a
    /// shared holder is not recorded.
    public init(sharedOn directory: String) throws {
        self.directory = Path.normalize(directory)
        lockPath = ""
        let path = Path.join(self.directory, Self.fileName)
        let fs = PosixFileSystem()
        do throws(FileSystemError) {
            do throws(FileSystemError) { file = try fs.openFile(path, options: .readOnly) } catch {
                // A store never opened for writing has no LOCK yet; a read-only file system cannot have a writer.
                guard error.errno == ENOENT else { throw error }
                file = try fs.openFile(path, options: .create)
            }
        } catch {
            throw CloudletError.io(error, "opening lock file \(path)")
        }
        do throws(FileSystemError) {
            try retryingEINTR("flock", path) { flock(file.fd, LOCK_SH | LOCK_NB) }
        } catch {
            let holder = (try? file.read(at: 0, count: 32)).flatMap { bytes in
                pid_t(String(decoding: bytes, as: UTF8.self).split(separator: "\n").first ?? "")
            }
            try? file.close()
            guard error.errno == EWOULDBLOCK else { throw CloudletError.io(error, "locking \(path)") }
            throw CloudletError(
                .locked,
                "store directory \(self.directory) is open for writing by another process (pid \(holder.map(String.init) ?? "unknown")); stop it first")
        }
    }

    /// Takes the lock, creating the directory if missing. Throws `.locked` naming the holder's pid if another
    /// process (or another `StoreLock` of this one) holds it, `.io` if the file cannot be opened or locked.
    public init(directory: String) throws {
        self.directory = Path.normalize(directory)
        let path = Path.join(self.directory, Self.fileName)
        guard heldInProcess.withLock({ $0.insert(path).inserted }) else {
            throw CloudletError(
                .locked,
                "store directory \(self.directory) is locked by another process (pid \(getpid())), which is this "
                    + "process: the store is already open here")
        }
        do {
            file = try Self.acquire(path, directory: self.directory)
        } catch {
            heldInProcess.withLock { _ = $0.remove(path) }
            throw error
        }
        lockPath = path
    }

    /// The path registered in `heldInProcess` (empty for a shared lock, which is not registered).
    private let lockPath: String

    /// Opens and locks the file. A child process this one just forked holds our open files (and so our old
    /// lock) until it execs; when the file names this process as the holder and no lock of ours is open, that is
    /// what happened: retry for a moment instead of failing.
    private static func acquire(_ path: String, directory: String) throws -> PosixFile {
        var attempts = 0
        while true {
            do {
                return try tryAcquire(path, directory: directory)
            } catch let e as CloudletError where e.code == .locked && e.message.contains("which is this process") && attempts < 200 {
                attempts += 1
                usleep(10_000)
            }
        }
    }

    private static func tryAcquire(_ path: String, directory: String) throws -> PosixFile {
        let file: PosixFile
        do throws(FileSystemError) {
            try PosixFileSystem().createDirectory(directory)
            file = try PosixFileSystem().openFile(path, options: .create)
        } catch {
            throw CloudletError.io(error, "opening lock file \(path)")
        }
        do throws(FileSystemError) {
            try retryingEINTR("flock", path) { flock(file.fd, LOCK_EX | LOCK_NB) }
        } catch {
            let holder = (try? file.read(at: 0, count: 32)).flatMap { bytes in
                pid_t(String(decoding: bytes, as: UTF8.self).split(separator: "\n").first ?? "")
            }
            // Shared holders only (offline readers) if a shared lock is still available.
            let readersOnly = error.errno == EWOULDBLOCK && flock(file.fd, LOCK_SH | LOCK_NB) == 0
            try? file.close()
            guard error.errno == EWOULDBLOCK else { throw CloudletError.io(error, "locking \(path)") }
            if readersOnly {
                throw CloudletError(
                    .locked, "store directory \(directory) is being read by an offline tool (cloudlet-tool); try again when it is done")
            }
            let ours = holder == getpid() ? ", which is this process" : ""
            throw CloudletError(
                .locked,
                "store directory \(directory) is locked by another process (pid \(holder.map(String.init) ?? "unknown"))\(ours)")
        }
        // The pid is only for the message of the next would-be holder; failing to record it does not weaken the lock.
        try? file.truncate(to: 0)
        try? file.write(Array("\(getpid())\n".utf8), at: 0)
        return file
    }

    /// Releases the lock. Idempotent.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Unlock before closing: a child process forked meanwhile (before its exec closes the descriptor) shares the
        // open file description, and closing our descriptor alone would leave the lock held until that exec.
        _ = flock(file.fd, LOCK_UN)
        try? file.close()
        heldInProcess.withLock { _ = $0.remove(lockPath) }
    }

    deinit { release() }
}
