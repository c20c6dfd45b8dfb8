#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a pthread mutex, with two condition variables to wait on.
///
/// `Synchronization.Mutex` has no condition variable, and the committer thread, ``Log/waitDurableBlocking(_:)``
/// and the backpressure of ``Log/stage(type:payload:)`` all need to sleep until the state changes, so the log
/// keeps its state here instead.
///
/// `package`: CloudletTestSupport's `FaultInjectingFileSystem` stalls `fdatasync` calls on one.
///
/// `@unchecked Sendable`: `state` is only read or written between `pthread_mutex_lock` and
/// `pthread_mutex_unlock` of `mutex` (inside ``withLock(_:)`` and ``withLock(waitingOn:until:_:)``).
package final class Monitor<State>: @unchecked Sendable {
    /// Which condition variable to wait on or signal.
    package enum Condition: Int {
        /// Work for the committer: frames staged, or the log closing.
        case work = 0
        /// Progress for everyone else: frames became durable, buffer space freed, the log failed or closed (or,
        /// in `FaultInjectingFileSystem`, a stall ended).
        case progress = 1
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let conditions: UnsafeMutablePointer<pthread_cond_t>
    private var state: State

    package init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        conditions = .allocate(capacity: 2)
        conditions.initialize(repeating: pthread_cond_t(), count: 2)
        pthread_cond_init(conditions, nil)
        pthread_cond_init(conditions + 1, nil)
    }

    deinit {
        pthread_cond_destroy(conditions)
        pthread_cond_destroy(conditions + 1)
        conditions.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the state locked.
    package func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Locks, sleeps on `condition` until `ready` holds, then runs `body` still holding the lock.
    package func withLock<R>(
        waitingOn condition: Condition, until ready: (borrowing State) -> Bool, _ body: (inout State) throws -> R
    ) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(state) { pthread_cond_wait(conditions + condition.rawValue, mutex) }
        return try body(&state)
    }

    /// Wakes one thread waiting on `condition`.
    package func signal(_ condition: Condition) { pthread_cond_signal(conditions + condition.rawValue) }

    /// Wakes every thread waiting on `condition`.
    package func broadcast(_ condition: Condition) { pthread_cond_broadcast(conditions + condition.rawValue) }
}
