import Dispatch
import Synchronization

/// The two bridges between threads that may block and Swift concurrency, whose cooperative pool has one thread per
/// core and must never block: a blocked cooperative thread stalls every task.
///
/// - ``wait(_:)``: a thread we own (a civetweb worker, a benchmark thread) calls async code and waits for it.
/// - ``offload(_:)``: async code runs blocking work (file I/O, fsync, recovery) on a thread outside the pool.
public enum ThreadBridge {
    /// Runs `body` to completion and returns what it returns (or throws what it throws), on the calling thread.
    ///
    /// `body` becomes a task whose executor preference (SE-0417) is an executor owned by the calling thread, which
    /// runs the task's jobs itself until the task is done. A body that never suspends (a cached lookup) runs start to
    /// finish here: no hop to the cooperative pool and back, which costs two thread wake-ups. One that suspends
    /// (waiting for a group commit's fdatasync) is resumed by whoever completes the wait, which hands the job back to
    /// this thread. Child tasks of `body` run here too; unstructured tasks it starts do not.
    ///
    /// Only for threads that may block: the calling thread blocks until `body` is done. Never call it from async
    /// code (it would block a thread of the cooperative pool).
    @available(*, noasync, message: "blocks the calling thread; async code awaits the call instead")
    public static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let executor = CallerExecutor()
        let result = Mutex<Result<T, any Error>?>(nil)
        Task(executorPreference: executor) {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            executor.wake()
        }
        executor.runJobs { result.withLock { $0 != nil } }
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

/// A task executor whose jobs run on the one thread that called ``runJobs(until:)``.
private final class CallerExecutor: TaskExecutor {
    private let queue = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.append(job) }
        ready.signal()
    }

    /// Wakes ``runJobs(until:)`` to check its condition.
    func wake() { ready.signal() }

    /// Runs jobs as they are enqueued, on this thread, until `done()` holds.
    func runJobs(until done: () -> Bool) {
        while true {
            ready.wait()
            while let job = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
            if done() { return }
        }
    }
}
