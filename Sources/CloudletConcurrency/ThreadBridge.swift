import Dispatch
import Synchronization

/// The two bridges between threads that may block and Swift concurrency, whose cooperative pool has one thread per
/// core and must never block: a blocked cooperative thread stalls every task.
///
/// - ``wait(_:)``: a thread we own (a civetweb worker, a benchmark thread) calls async code and waits for it.
/// - ``offload(_:)``: async code runs blocking work (file I/O, fsync, recovery) on a thread outside the pool.
public enum ThreadBridge {
    /// Runs `body` as a task on the cooperative pool and blocks the calling thread until it is done; returns what it
    /// returns (or throws what it throws).
    ///
    /// The task runs on the pool, not on the calling thread: however many threads call in (32 benchmark writers,
    /// civetweb's workers), at most one per core runs engine code at a time, so the partition locks are not fought
    /// over by more threads than cores. Running the task's jobs on the calling thread instead (an SE-0417 executor
    /// preference) saves two thread wake-ups per call, but measured 3.5x slower under 32 concurrent writers (8.9k vs
    /// 31k durable saves/s on 2 cores) and no faster for cached reads.
    ///
    /// Only for threads that may block: the calling thread blocks until `body` is done. Never call it from async
    /// code (it would block a thread of the cooperative pool).
    @available(*, noasync, message: "blocks the calling thread; async code awaits the call instead")
    public static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

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
