#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// A live run, shared by the tree and every read view and merge that uses it. Reference-counted by ARC: once a
/// merge has replaced the run (``markObsolete()``), the file is deleted when the last holder lets go, so a merge
/// never deletes a file a view still reads.
///
/// The run's file is opened the first time a read needs it (``reader()``), not when the tree opens: opening a tree
/// of hundreds of runs then costs its manifest, not a few reads a run. Opening checks the header, footer and
/// properties against what the manifest says of the run; damage found then is reported like damage any later read
/// finds (the tree's ``SortedRunReader/onCorruption``), and the read fails.
final class LSMRunHandle: Sendable {
    let metadata: LSMRunMetadata
    let path: String
    /// The run's key in the tree's block cache (``SortedRunReader/cacheID``).
    let cacheID: UInt64
    private let open: @Sendable () throws -> SortedRunReader
    /// The reader once open: read without a lock (every point read asks each run it probes for it).
    private let opened = OnceReference<SortedRunReader>()
    /// Held while opening, so that two first reads open the file once.
    private let opening = Mutex(())
    private let cache: BlockCache?
    private let fileSystem: any FileSystem
    private let errors: LSMErrorSink
    private let obsolete = Atomic<Bool>(false)

    /// A run whose reader is already open (one a flush or merge has just written).
    init(metadata: LSMRunMetadata, reader: SortedRunReader, fileSystem: any FileSystem, errors: LSMErrorSink) {
        self.metadata = metadata
        path = reader.path
        cacheID = reader.cacheID
        cache = reader.cache
        open = { reader }
        _ = opened.storeIfNil(reader)
        self.fileSystem = fileSystem
        self.errors = errors
    }

    /// A run opened on first use by `open`.
    init(
        metadata: LSMRunMetadata, path: String, cacheID: UInt64, cache: BlockCache, fileSystem: any FileSystem,
        errors: LSMErrorSink, open: @escaping @Sendable () throws -> SortedRunReader
    ) {
        self.metadata = metadata
        self.path = path
        self.cacheID = cacheID
        self.cache = cache
        self.open = open
        self.fileSystem = fileSystem
        self.errors = errors
    }

    /// The run's reader, opened now if this is the first use (a damaged file throws `corruption`, every time).
    func reader() throws -> SortedRunReader {
        if let r = opened.load() { return r }
        return try opening.withLock { _ in
            if let r = opened.load() { return r }
            return opened.storeIfNil(try open())
        }
    }

    /// The run is no longer in the tree's version: delete its file once nobody holds it.
    func markObsolete() { obsolete.store(true, ordering: .releasing) }

    deinit {
        opened.load()?.close()
        guard obsolete.load(ordering: .acquiring) else { return }
        cache?.removeAll(fileNumber: cacheID)
        do throws(FileSystemError) { try fileSystem.remove(path) } catch {
            // Not fatal (the next open deletes it as a leftover), but not to be hidden either.
            errors.record(CloudletError.io(error, "deleting merged-away run \(path)"), fatal: false)
        }
    }
}

/// Where background work reports errors: the first fatal one stops the tree's writes and merges; non-fatal ones
/// (a file that could not be deleted) are kept for the statistics.
final class LSMErrorSink: Sendable {
    private struct State {
        var fatal: CloudletError?
        var other: [CloudletError] = []
    }
    private let state = Mutex(State())

    func record(_ error: CloudletError, fatal: Bool) {
        state.withLock { s in
            if fatal {
                if s.fatal == nil { s.fatal = error }
            } else if s.other.count < 16 {
                s.other.append(error)
            }
        }
    }

    var fatal: CloudletError? { state.withLock { $0.fatal } }
    var other: [CloudletError] { state.withLock { $0.other } }
}

/// Limits how fast merges write: after each chunk, sleeps until the bytes so far are no more than the rate allows
/// since the merge started — unless `urgent` says the merge is holding others up (flushes piling up in level 0
/// behind it), in which case it goes at full speed and the rate counts from then on. A sleep goes in slices of at
/// most ``slice`` seconds, asking `urgent` and `cancelled` (the tree is closing) again after each, so that neither
/// waits out a long sleep.
struct RateLimiter {
    let bytesPerSecond: Int?
    private let urgent: (() -> Bool)?
    private let cancelled: (() -> Bool)?
    private var start = Self.now()
    private var bytes = 0
    static let slice = 0.05

    init(bytesPerSecond: Int?, urgent: (() -> Bool)? = nil, cancelled: (() -> Bool)? = nil) {
        self.bytesPerSecond = bytesPerSecond
        self.urgent = urgent
        self.cancelled = cancelled
    }

    mutating func consumed(_ n: Int) {
        guard let rate = bytesPerSecond, rate > 0 else { return }
        bytes += n
        let due = Double(bytes) / Double(rate)
        while true {
            let elapsed = Self.now() - start
            guard due > elapsed, cancelled?() != true else { return }
            if let urgent, urgent() {
                start = Self.now()
                bytes = 0
                return
            }
            Self.sleep(min(due - elapsed, Self.slice))
        }
    }

    private static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    private static func sleep(_ seconds: Double) {
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}
