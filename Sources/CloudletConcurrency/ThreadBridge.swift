import Dispatch
import Foundation
import Synchronization

/// The two bridges between threads that may block and Swift concurrency, whose cooperative pool has one thread per
/// core and must never block: a blocked cooperative thread stalls every task.
///
/// - ``wait(_:)``: a thread we own (a civetweb worker, a benchmark thread) calls async code and waits for it.
/// - ``offload(_:)``: async code runs blocking work (file I/O, fsync, recovery) on a thread outside the pool.
public enum ThreadBridge {
    /// Runs `body` to completion and returns what it returns (or throws what it throws); the calling thread blocks
    /// until it is done.
    ///
    /// `body` starts as an immediate task (SE-0472): it runs on the calling thread up to its first suspension, so
    /// a body that never suspends (a cached lookup) runs start to finish here, with no hop to the cooperative pool
    /// and back (two thread wake-ups). After a suspension (waiting for a group commit's fdatasync) it goes on on
    /// the pool, so whoever completes the wait (the committer, for 32 waiters at once) only enqueues.
    ///
    /// At most one calling thread per core runs its body's first part at a time (`admission`, taken before the task
    /// starts and released when it first suspends or ends — never while the body holds a lock), as on the pool:
    /// with 32 threads running engine code on 2 cores the partition lock was fought over by 32 and durable saves
    /// fell from 31k/s to 8.9k/s.
    ///
    /// Measured during issue 11 against the alternatives (a task on the pool; an executor preference for the
    /// calling thread, with or without admission): the same or more durable saves with 1 and 32 writers, and the
    /// fastest HTTP lookups at 1 connection.
    ///
    /// Only for threads that may block. Never call it from async code (it would block a thread of the cooperative
    /// pool).
    @available(*, noasync, message: "blocks the calling thread; async code awaits the call instead")
    public static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        admission.wait()
        Task.immediate {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            done.signal()
        }
        admission.signal()
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// One permit per core, shared by every waiting thread.
    static let admission = DispatchSemaphore(value: ProcessInfo.processInfo.activeProcessorCount)

    /// Runs blocking `work` on a thread outside the cooperative pool and returns (or throws) its result; the calling
    /// task suspends meanwhile. Several calls run at once, each on a thread of its own.
    public static func offload<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { c in
            blockingQueue.async { c.resume(returning: Result(catching: work)) }
        }
        return try result.get()
    }

    private static let blockingQueue = DispatchQueue(label: "cloudlet.blocking", attributes: .concurrent)
}
