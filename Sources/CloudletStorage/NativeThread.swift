#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// A joinable POSIX thread, for blocking work (pwrite, fdatasync) that must stay off Swift's cooperative pool,
/// which has only as many threads as cores.
package final class NativeThread: Sendable {
    private let handle: pthread_t
    private let joined = Atomic<Bool>(false)

    /// What the new thread runs; handed over through `pthread_create`'s context pointer.
    private final class Entry: Sendable {
        let body: @Sendable () -> Void
        init(body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts a thread running `body`; `name` is for the error if that fails (`pthread_setname_np` is not
    /// visible from Swift's Glibc module).
    package init(name: String, _ body: @escaping @Sendable () -> Void) throws {
        let context = Unmanaged.passRetained(Entry(body: body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let entry = Unmanaged<Entry>.fromOpaque(raw!).takeRetainedValue()
                entry.body()
                return nil
            }, context)
        guard rc == 0 else {
            Unmanaged<Entry>.fromOpaque(context).release()
            throw CloudletError.io("cannot start thread \(name)", errno: rc)
        }
        handle = thread
    }

    /// Waits for the thread to finish. Idempotent; must not be called from the thread itself.
    package func join() {
        if joined.exchange(true, ordering: .acquiringAndReleasing) { return }
        pthread_join(handle, nil)
    }

    deinit {
        if !joined.load(ordering: .acquiring) { pthread_detach(handle) }
    }
}
