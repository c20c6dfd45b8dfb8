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
    /// `body` becomes a task whose executor preference (SE-0417) is an executor owned by the calling thread. The
    /// task's first job — the body up to its first suspension — runs on the calling thread: a body that never
    /// suspends (a cached lookup) runs start to finish here, with no hop to the cooperative pool and back (two
    /// thread wake-ups). After a suspension (waiting for a group commit's fdatasync) the task goes on on the pool,
    /// so whoever completes the wait (the committer, for 32 waiters at once) only enqueues, and never wakes 32
    /// threads one by one.
    ///
    /// At most one first job per core runs at a time (`admission`, taken before and released after it, never
    /// while holding a lock), as on the pool: with 32 threads running engine code on 2 cores the partition lock was
    /// fought over by 32 and durable saves fell from 31k/s to 8.9k/s.
    ///
    /// Measured during issue 11 (`cloudlet-bench`, `Benchmarks/http`): against running everything on the pool, the
    /// same durable saves with 32 writers and a third more single-connection lookups over HTTP.
    ///
    /// Only for threads that may block. Never call it from async code (it would block a thread of the cooperative
    /// pool).
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

/// The executor preference of one ``ThreadBridge/wait(_:)``: its first job runs on the thread that called
/// ``runJobs(until:)`` (once it holds a permit of `admission`), later ones on the cooperative pool.
private final class CallerExecutor: TaskExecutor {
    private let queue = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    private let started = Atomic<Bool>(false)
    /// One permit per core, shared by every waiting thread.
    static let admission = DispatchSemaphore(value: ProcessInfo.processInfo.activeProcessorCount)

    func enqueue(_ job: consuming ExecutorJob) {
        // The first job (the body up to its first suspension) runs here; later ones, resumed by whoever completed a
        // wait, go to the pool.
        if started.exchange(true, ordering: .relaxed) {
            globalConcurrentExecutor.enqueue(job)
            return
        }
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
                Self.admission.wait()
                job.runSynchronously(on: asUnownedTaskExecutor())
                Self.admission.signal()
            }
            if done() { return }
        }
    }
}
