import Dispatch
import Foundation

/// Turns the given signals from "terminate" into an event to wait for.
/// `@unchecked Sendable`: `sources` is immutable after init; `state` guards itself with its lock.
final class SignalWaiter: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]
    private let state = LockedState()

    init(_ signals: [Int32]) {
        var sources: [any DispatchSourceSignal] = []
        let state = state
        for s in signals {
            signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s, queue: .global())
            source.setEventHandler { state.fire(s) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// Waits for the first of the signals; returns it.
    func wait() async -> Int32 {
        await withCheckedContinuation { c in state.wait(c) }
    }
}

/// The first signal received and the task waiting for it. `@unchecked Sendable`: every member is guarded by `lock`.
private final class LockedState: @unchecked Sendable {
    private let lock = NSLock()
    private var fired: Int32?
    private var waiter: CheckedContinuation<Int32, Never>?

    func fire(_ s: Int32) {
        lock.lock()
        if fired == nil { fired = s }
        let w = waiter
        waiter = nil
        lock.unlock()
        w?.resume(returning: s)
    }

    func wait(_ c: CheckedContinuation<Int32, Never>) {
        lock.lock()
        if let fired {
            lock.unlock()
            c.resume(returning: fired)
            return
        }
        waiter = c
        lock.unlock()
    }
}
