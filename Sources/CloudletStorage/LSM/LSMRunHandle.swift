#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// A live run's reader, shared by the tree and every read view and merge that uses it. Reference-counted by ARC:
/// once a merge has replaced the run (``markObsolete()``), the file is deleted when the last holder lets go, so a
/// merge never deletes a file a view still reads.
final class LSMRunHandle: Sendable {
    let metadata: LSMRunMetadata
    let reader: SortedRunReader
    private let fileSystem: any FileSystem
    private let errors: LSMErrorSink
    private let obsolete = Atomic<Bool>(false)

    init(metadata: LSMRunMetadata, reader: SortedRunReader, fileSystem: any FileSystem, errors: LSMErrorSink) {
        self.metadata = metadata
        self.reader = reader
        self.fileSystem = fileSystem
        self.errors = errors
    }

    /// The run is no longer in the tree's version: delete its file once nobody holds it.
    func markObsolete() { obsolete.store(true, ordering: .releasing) }

    deinit {
        reader.close()
        guard obsolete.load(ordering: .acquiring) else { return }
        reader.cache?.removeAll(fileNumber: reader.cacheID)
        do throws(FileSystemError) { try fileSystem.remove(reader.path) } catch {
            // Not fatal (the next open deletes it as a leftover), but not to be hidden either.
            errors.record(CloudletError.io(error, "deleting merged-away run \(reader.path)"), fatal: false)
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
/// since the merge started.
struct RateLimiter {
    let bytesPerSecond: Int?
    private var start = Self.now()
    private var bytes = 0

    init(bytesPerSecond: Int?) { self.bytesPerSecond = bytesPerSecond }

    mutating func consumed(_ n: Int) {
        guard let rate = bytesPerSecond, rate > 0 else { return }
        bytes += n
        let due = Double(bytes) / Double(rate)
        let elapsed = Self.now() - start
        if due > elapsed { Self.sleep(due - elapsed) }
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
