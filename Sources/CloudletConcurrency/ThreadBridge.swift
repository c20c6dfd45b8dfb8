import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The two bridges between threads that may block and Swift concurrency, whose cooperative pool has one thread per
/// core and must never block: a blocked cooperative thread stalls every task.
///
/// - ``wait(_:)``: a thread we own (a front-end worker, a benchmark thread) calls async code and waits for it.
/// - ``offload(_:)``: async code runs blocking work (file I/O, fsync, recovery) on a thread outside the pool.
public enum ThreadBridge {
    /// Runs `body` to completion and returns what it returns (or throws what it throws); the calling thread blocks
    /// until it is done.
    ///
    /// `body` starts as an immediate task (SE-0472): it runs on the calling thread up to its first suspension, so
    /// a body that never suspends (a cached lookup) runs start to finish here, with no hop to another thread and
    /// back (two thread wake-ups). After a suspension (waiting for a group commit's fdatasync, for a partition's
    /// busy writer, an actor) it goes on on ``DedicatedExecutor/requests`` (its executor preference, SE-0417, which
    /// its child tasks and the default actors it calls inherit), so whoever completes the wait (the committer, for
    /// 32 waiters at once) only enqueues, and the body finishes even while every thread of the cooperative pool is
    /// blocked — before, it went on on the pool, and a server's writes stalled when tests elsewhere held the pool.
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
        let outer = thread
        thread = .waiting
        Task.immediate(executorPreference: DedicatedExecutor.requests) {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            done.signal()
        }
        thread = outer
        admission.signal()
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Runs synchronous engine code (a blocking lookup, `Database.recordsBlocking`) on the calling thread under the
    /// same admission as a ``wait(_:)`` body's first part: at most one such thread per core at a time, so that 32
    /// front-end workers on 2 cores do not fight over a partition's lock (measured in issue 19: without it the lock's
    /// slow path took 6.5 % of the server's CPU and lookups at 32 connections fell by a third). Work inside that may
    /// sleep gives the permit back meanwhile (``blocking(_:)``). Only for threads that may block.
    @available(*, noasync, message: "blocks the calling thread")
    public static func admitted<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        admission.wait()
        let outer = thread
        thread = .waiting
        defer {
            thread = outer
            admission.signal()
        }
        return try body()
    }

    /// One permit per core, shared by every waiting thread.
    static let admission = DispatchSemaphore(value: ProcessInfo.processInfo.activeProcessorCount)

    /// Runs blocking `work` on a thread outside the cooperative pool and returns (or throws) its result; the calling
    /// task suspends meanwhile. Several calls run at once, each on a thread of its own.
    ///
    /// When the calling task runs on a thread that may block — the first part of a ``wait(_:)`` body, on the thread
    /// that waits, or an offloaded job — `work` runs right there: a point read of a cached or page-cached record then
    /// costs the read, not three thread switches (to a blocking thread, back to the pool, back to the waiter). The
    /// waiting thread's admission permit is given back meanwhile, so that a read that goes to the disk does not keep
    /// another thread from running.
    public static func offload<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        switch thread {
        case .blocking: return try work()
        case .waiting:
            admission.signal()
            defer { admission.wait() }
            return try work()
        case .pool: break
        }
        return try await BlockingThreads.shared.run(work)
    }

    /// Whether the calling thread may block: a thread of our own (a front-end worker, a benchmark thread, a
    /// partition's writer, the committer), a thread of ``BlockingThreads``, or the first part of a ``wait(_:)`` body —
    /// anything but a task running on the cooperative pool (or on another executor that must not block, such as the
    /// main actor's).
    ///
    /// The engine asks before it runs blocking work inline: where this is false the work goes to a thread made for
    /// it (``offload(_:)``, a partition's writer).
    public static var mayBlock: Bool {
        thread != .pool || !withUnsafeCurrentTask { $0 != nil }
    }

    /// Runs `body`, which blocks the calling thread for a while (a wait for a stalled writer, for a partition's
    /// writer to finish a job), giving the admission permit of a ``wait(_:)`` body back meanwhile, so that other
    /// waiting threads are not held up by one that sleeps. Elsewhere it just runs `body`.
    public static func blocking<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard thread == .waiting else { return try body() }
        admission.signal()
        defer { admission.wait() }
        return try body()
    }

    /// What the current thread is, as far as blocking goes.
    enum ThreadKind: Int {
        /// A thread of the cooperative pool (or any other): must not block.
        case pool = 0
        /// Running the first part of a ``wait(_:)`` body, holding an admission permit: may block.
        case waiting = 1
        /// A thread of ``BlockingThreads``: may block.
        case blocking = 2
    }

    /// The current thread's kind: a thread-specific value (pthread key).
    static var thread: ThreadKind {
        get { ThreadKind(rawValue: Int(bitPattern: pthread_getspecific(threadKey))) ?? .pool }
        set { pthread_setspecific(threadKey, UnsafeRawPointer(bitPattern: newValue.rawValue)) }
    }

    private nonisolated(unsafe) static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()
}
