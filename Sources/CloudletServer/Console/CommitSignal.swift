import Cloudlet
import CloudletCore
import Dispatch
import Synchronization

/// Wakes a console feed's pusher when a durable commit may have changed what it shows: a record saved or deleted
/// in zone `zone` (any database of the container's environment: a shared database's zones are another user's), or
/// with `zone` nil any record or zone change of the container's environment. A false alarm costs one read of the
/// feed; a missed commit would cost a change never shown, so when the store's commit stream ends (a listener that
/// fell too far behind) the signal fires and listens again.
final class CommitSignal: Sendable {
    private let pending = Mutex(false)
    private let semaphore = DispatchSemaphore(value: 0)
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
        let first = pending.withLock { p in
            defer { p = true }
            return !p
        }
        if first { semaphore.signal() }
    }

    /// Waits up to `seconds` for a matching commit since the last wait returned true; true if there was one.
    func wait(seconds: Double) -> Bool {
        guard semaphore.wait(timeout: .now() + seconds) == .success else { return false }
        pending.withLock { $0 = false }
        return true
    }

    /// Stops listening.
    func cancel() { task.withLock { $0?.cancel() } }
}
