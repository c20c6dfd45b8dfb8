import CloudletConcurrency
import Cloudlet
import CloudletCore
import Synchronization

/// Wakes a console feed's pusher when a durable commit may have changed what it shows: a record saved or deleted
/// in zone `zone` (any database of the container's environment: a shared database's zones are another user's), or
/// with `zone` nil any record or zone change of the container's environment. A false alarm costs one read of the
/// feed; a missed commit would cost a change never shown, so when the store's commit stream ends (a listener that
/// fell too far behind) the signal fires and listens again.
final class CommitSignal: Sendable {
    private struct State {
        /// A matching commit came while nobody waited.
        var pending = false
        /// The pusher waiting now.
        var waiter: CheckedContinuation<Bool, Never>?
    }
    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(store: CloudletStore, container: String, environment: Environment, zone: String?) {
        // Listening from here on: no commit after init returns is missed.
        let first = store.committedChanges()
        task.withLock { t in
            // On the pushers' executor, not the cooperative pool: a blocked pool must not hold back the console.
            t = Task(executorPreference: DedicatedExecutor.push) { [self] in
                var stream = first
                while true {
                    do {
                        for try await change in stream where change.events.contains(where: {
                            Self.matches($0, container: container, environment: environment, zone: zone)
                        }) {
                            fire()
                        }
                    } catch {}
                    if Task.isCancelled { return }
                    stream = store.committedChanges()
                    fire()
                }
            }
        }
    }

    static func matches(_ event: ChangeEvent, container: String, environment: Environment, zone: String?) -> Bool {
        let (db, zoneName): (DatabaseID, String)
        switch event {
        case .recordSaved(let d, let r): (db, zoneName) = (d, r.id.zoneID.zoneName)
        case .recordDeleted(let d, let id, _): (db, zoneName) = (d, id.zoneID.zoneName)
        case .zoneCreated(let d, let z), .zoneDeleted(let d, let z): (db, zoneName) = (d, z.zoneName)
        }
        return db.container == container && db.environment == environment && (zone == nil || zone == zoneName)
    }

    private func fire() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return w
        }
        waiter?.resume(returning: true)
    }

    /// Waits for a matching commit since the last wait returned true: true when there was one, false when the
    /// calling task was cancelled (its connection closed). No timeout, so an idle feed never wakes; holds no thread
    /// while it waits. One waiter at a time.
    func wait() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let ready = state.withLock { s -> Bool? in
                    if s.pending {
                        s.pending = false
                        return true
                    }
                    // A cancellation before this found no waiter to end (the flag is set before the handler runs).
                    if Task.isCancelled { return false }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            state.withLock { s -> CheckedContinuation<Bool, Never>? in
                defer { s.waiter = nil }
                return s.waiter
            }?.resume(returning: false)
        }
    }

    /// Stops listening.
    func cancel() { task.withLock { $0?.cancel() } }
}
