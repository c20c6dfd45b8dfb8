import Synchronization

/// Points where a test can pause the engine to set up a race deterministically (a participant's write checked and
/// about to commit while the owner ends the share). Empty, they cost one lock per call that has one.
package final class TestHooks: Sendable {
    /// Called by ``Database/modify(_:atomic:assetRule:)`` after it has grouped the operations by zone, before it
    /// commits them.
    private let beforeModifyCommit = Mutex<(@Sendable () async -> Void)?>(nil)

    /// When set, the catalog's copy of share changes is not staged after their partition commit: the state a crash
    /// leaves when the partition's log got the commit to disk and the catalog's did not (repaired at the next open).
    private let dropShareCatalogCopies = Mutex(false)

    package init() {}

    /// Sets whether share changes' catalog copies are dropped (``dropShareCatalogCopies``).
    package func setDropShareCatalogCopies(_ drop: Bool) { dropShareCatalogCopies.withLock { $0 = drop } }

    var dropsShareCatalogCopies: Bool { dropShareCatalogCopies.withLock { $0 } }

    /// Sets (nil: clears) the hook run before a modify commits.
    package func setBeforeModifyCommit(_ hook: (@Sendable () async -> Void)?) { beforeModifyCommit.withLock { $0 = hook } }

    func runBeforeModifyCommit() async {
        if let hook = beforeModifyCommit.withLock({ $0 }) { await hook() }
    }
}
