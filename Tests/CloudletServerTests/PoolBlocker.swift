import Dispatch
import Foundation
import Synchronization

/// Holds every thread of Swift's cooperative pool with tasks that block on a gate, for tests that show something
/// still makes progress without the pool. Call from a thread of its own (never from a task: it waits); always
/// ``release()`` (the blockers also give up after 60 s, so a failed test cannot hold the pool for good).
final class PoolBlocker: Sendable {
    private let gate = DispatchSemaphore(value: 0)
    private let started = Atomic<Int>(0)
    private let probesRun = Atomic<Int>(0)
    private let blocking = Atomic<Int>(0)
    private let released = Atomic<Bool>(false)
    /// Probes run when the last one was left waiting behind the blockers.
    private let probesAtSaturation = Atomic<Int>(-1)

    /// Blocks one pool thread per core at once, then one more at a time until a probe task behind the blockers
    /// does not run; whether that point was reached (with at most 64 blockers).
    func saturate() -> Bool {
        while blocking.load(ordering: .relaxed) < 64 {
            let count = blocking.load(ordering: .relaxed)
            // One per core at first (the pool's width on Linux), all running at once; then one at a time.
            let more = count == 0 ? ProcessInfo.processInfo.activeProcessorCount : 1
            for _ in 0..<more {
                Task.detached { [self] in
                    started.add(1, ordering: .relaxed)
                    _ = gate.wait(timeout: .now() + 60)
                }
            }
            let target = count + more
            blocking.store(target, ordering: .relaxed)
            guard Self.eventually(seconds: 30, { started.load(ordering: .relaxed) >= target }) else { return false }
            let before = probesRun.load(ordering: .relaxed)
            Task.detached { [self] in probesRun.add(1, ordering: .relaxed) }
            // The probe runs at once unless every pool thread is blocked.
            if !Self.eventually(seconds: 0.3, { probesRun.load(ordering: .relaxed) > before }) {
                probesAtSaturation.store(before, ordering: .relaxed)
                return true
            }
        }
        return false
    }

    /// Whether the pool is still held: no probe task has run since ``saturate()`` found it full.
    var stillBlocked: Bool { probesRun.load(ordering: .relaxed) == probesAtSaturation.load(ordering: .relaxed) }

    /// Tasks started to block the pool.
    var blockers: Int { blocking.load(ordering: .relaxed) }

    /// Opens the gate for every blocker. Idempotent.
    func release() {
        guard !released.exchange(true, ordering: .relaxed) else { return }
        for _ in 0..<blocking.load(ordering: .relaxed) { gate.signal() }
    }

    deinit { release() }

    /// Polls (bounded: the limit only ends a failing test) until `condition` holds; whether it did.
    static func eventually(seconds: Double = 20, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            usleep(5_000)
        }
        return true
    }
}
