import Foundation
import Synchronization

/// A debug check that blocking work (a disk read or write, an fdatasync, a wait for durability, for room in a log,
/// for a partition's writer) never runs on a thread that must not block — a thread of Swift's cooperative pool,
/// which has one thread per core (``ThreadBridge/mayBlock``).
///
/// The engine calls ``ThreadBridge/checkMayBlock(_:)`` where it is about to block. In a debug build, when the
/// calling thread must not block, the call is recorded in the ``current`` check of the calling task, if it has
/// one; with `CLOUDLET_BLOCKING_CHECK=trap` in the environment it traps instead, wherever it happens (for a run of
/// the whole test suite). Release builds compile the check away.
///
/// ```swift
/// let check = BlockingCheck()
/// try await BlockingCheck.$current.withValue(check) { try await db.modify(ops) }
/// #expect(check.violations.isEmpty)
/// ```
///
/// The task-local is inherited by child tasks and by `Task {}`, not by detached tasks.
public final class BlockingCheck: Sendable {
    /// The check of the calling task: where violations of its tasks are recorded.
    @TaskLocal public static var current: BlockingCheck?

    private let recorded = Mutex<[String]>([])

    public init() {}

    /// What blocked where it must not, in the order it happened (each: the operation, as the engine named it).
    public var violations: [String] { recorded.withLock { $0 } }

    func record(_ operation: String) { recorded.withLock { $0.append(operation) } }

    /// `CLOUDLET_BLOCKING_CHECK=trap`: every violation traps, in every task.
    static let traps = ProcessInfo.processInfo.environment["CLOUDLET_BLOCKING_CHECK"] == "trap"
}

extension ThreadBridge {
    /// Debug builds: notes that `operation` is about to block the calling thread, which is a violation when the
    /// thread must not block (see ``BlockingCheck``). Release builds: nothing.
    @inlinable
    public static func checkMayBlock(_ operation: @autoclosure () -> String) {
        #if DEBUG
        checkMayBlockSlow(operation())
        #endif
    }

    @usableFromInline
    static func checkMayBlockSlow(_ operation: @autoclosure () -> String) {
        let check = BlockingCheck.current
        guard check != nil || BlockingCheck.traps, !mayBlock else { return }
        if BlockingCheck.traps { preconditionFailure("blocking on a thread of the cooperative pool: \(operation())") }
        check?.record(operation())
    }
}
