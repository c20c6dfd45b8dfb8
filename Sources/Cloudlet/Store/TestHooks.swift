import Synchronization

/// Points where a test can pause the engine to set up a race deterministically (a participant's write checked and
/// about to commit while the owner ends the share). Empty, they cost one lock per call that has one.
package final class TestHooks: Sendable {
    /// Called by ``Database/modify(_:atomic:assetRule:)`` after it has grouped the operations by zone, before it
    /// commits them.
    private let beforeModifyCommit = Mutex<(@Sendable () async -> Void)?>(nil)

    package init() {}

    /// Sets (nil: clears) the hook run before a modify commits.
    package func setBeforeModifyCommit(_ hook: (@Sendable () async -> Void)?) { beforeModifyCommit.withLock { $0 = hook } }

    func runBeforeModifyCommit() async {
        if let hook = beforeModifyCommit.withLock({ $0 }) { await hook() }
    }
}
