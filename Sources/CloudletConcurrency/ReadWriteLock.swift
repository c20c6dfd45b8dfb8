#if canImport(Glibc)
import Glibc
#endif

/// A value read by many threads at once and written rarely, behind a `pthread_rwlock_t`: readers do not wait for
/// each other (a `Mutex` made the server's 32 workers queue for its token cache on every request, up to 4 % of a
/// lookup's CPU in futex calls). Readers must not write; writers wait for the readers in flight.
///
/// `@unchecked Sendable`: `value` is only touched under `lock`.
public final class ReadWriteLock<Value>: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        precondition(pthread_rwlock_init(lock, nil) == 0, "pthread_rwlock_init failed")
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` with shared access: other readers may run at once.
    public func read<T>(_ body: (borrowing Value) throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(value)
    }

    /// Runs `body` with exclusive access.
    public func write<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(&value)
    }
}
