import Dispatch
import Synchronization

/// Calls the async engine from civetweb's threads, and runs it on the calling thread.
///
/// The call becomes a task whose executor preference (SE-0417) is a ``CallerExecutor`` owned by the calling
/// thread, which then runs the task's jobs itself until the task is done. An engine call that never suspends
/// (a cached lookup) runs start to finish on the civetweb thread: no hop to Swift's cooperative pool and back,
/// which cost two thread wake-ups per request. One that suspends (waiting for a group commit's fdatasync) is
/// resumed by whoever completes the wait, which hands the job back to this thread.
///
/// Only for threads we own (civetweb workers): the calling thread blocks until the call is done. Swift's
/// cooperative pool, which has one thread per core, is never blocked and never used by engine calls.
enum EngineBridge {
    static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
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
