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
        /// The pusher waiting now, and which wait it is (a timeout resumes only its own wait).
        var waiter: CheckedContinuation<Bool, Never>?
        var waitNumber = 0
    }
    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(store: CloudletStore, container: String, environment: Environment, zone: String?) {
        // Listening from here on: no commit after init returns is missed.
        let first = store.committedChanges()
        task.withLock { t in
            t = Task { [self] in
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

    /// Waits up to `seconds` for a matching commit since the last wait returned true; true if there was one. Holds
    /// no thread while it waits. One waiter at a time.
    func wait(seconds: Double) async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let number = state.withLock { s -> Int? in
                if s.pending {
                    s.pending = false
                    return nil
                }
                s.waitNumber += 1
                s.waiter = c
                return s.waitNumber
            }
            guard let number else { return c.resume(returning: true) }
            Task {
                try? await Task.sleep(for: .seconds(seconds))
                let timedOut = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                    guard s.waitNumber == number, let w = s.waiter else { return nil }
                    s.waiter = nil
                    return w
                }
                timedOut?.resume(returning: false)
            }
        }
    }

    /// Stops listening.
    func cancel() { task.withLock { $0?.cancel() } }
}
