import CloudletConcurrency
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// The front end's worker pool keeps four workers per core running (`HTTPListener.Options.runningThreads`):
/// CPU-bound requests queue for the running workers instead of waking every worker, a worker that blocks (a
/// suspended `ThreadBridge.wait`, `ThreadBridge.blocking`) makes room for another, and a queue that does not move
/// wakes one more worker anyway. See docs/front-end.md.
@Suite struct WorkerPoolTests {
    /// How many handlers run at once, and the most seen.
    final class Concurrency: Sendable {
        private let state = Mutex((now: 0, most: 0, arrived: 0))
        func enter() {
            state.withLock {
                $0.now += 1
                $0.arrived += 1
                $0.most = max($0.most, $0.now)
            }
        }
        func leave() { state.withLock { $0.now -= 1 } }
        var most: Int { state.withLock { $0.most } }
        var arrived: Int { state.withLock { $0.arrived } }
    }

    /// Sends `count` GETs at once, each on its own connection and thread (not `concurrentPerform`, which runs as
    /// many at once as there are cores); their answers.
    static func getAll(_ port: Int, count: Int) -> [String] {
        let answers = Mutex([String](repeating: "", count: count))
        let group = DispatchGroup()
        for i in 0..<count {
            group.enter()
            Thread.detachNewThread {
                let answer = (try? FrontEndTests.get(port, "/r\(i)")) ?? "no connection"
                answers.withLock { $0[i] = answer }
                group.leave()
            }
        }
        group.wait()
        return answers.withLock { $0 }
    }

    /// Spins on the CPU for `duration` (wall clock): a handler that neither blocks nor yields.
    static func spin(_ duration: Duration) {
        let end = ContinuousClock.now + duration
        var x = 0
        while ContinuousClock.now < end { x &+= 1 }
        _ = x
    }

    @Test func cpuBoundRequestsRunOnNoMoreWorkersThanTheRunningTarget() async throws {
        let seen = Concurrency()
        let l = try FrontEndTests.listener({
            $0.threads = 8
            $0.runningThreads = 1
            $0.wakeForStalledQueue = false  // only the pool's rule counts here, not its safety net
        }) { _ in
            seen.enter()
            defer { seen.leave() }
            Self.spin(.milliseconds(5))
            return .text("ok")
        }
        defer { l.stop() }
        try await FrontEndTests.onThread { check in
            let answers = Self.getAll(l.port, count: 8)
            check.expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") }, "every request answered: \(answers)")
            check.expect(seen.arrived == 8)
            // Every worker woken per request, as before, ran up to 8 handlers at once here.
            check.expect(seen.most == 1, "at most 1 handler at once with runningThreads 1, saw \(seen.most)")
        }
    }

    enum Block: String, CaseIterable, Sendable {
        /// `ThreadBridge.blocking { … }`: a handler that says it blocks.
        case blocking
        /// `ThreadBridge.wait { … }` whose body suspends: the worker sleeps until the body ends.
        case suspendedWait
    }

    @Test(arguments: Block.allCases)
    func aWorkerThatBlocksMakesRoomForAnother(_ block: Block) async throws {
        let seen = Concurrency()
        let count = 3
        let l = try FrontEndTests.listener({
            $0.threads = 4
            $0.runningThreads = 1
            $0.wakeForStalledQueue = false  // the room must come from the blocked worker's notice
        }) { _ in
            seen.enter()
            defer { seen.leave() }
            // Each handler waits (up to 20 s, then fails) until all of them run at once: with one running worker
            // that only works if a blocked worker lets the next one in.
            let deadline = ContinuousClock.now + .seconds(20)
            let together: Bool
            switch block {
            case .blocking:
                together = ThreadBridge.blocking {
                    while seen.arrived < count && ContinuousClock.now < deadline { usleep(1000) }
                    return seen.arrived >= count
                }
            case .suspendedWait:
                together = (try? ThreadBridge.wait {
                    while seen.arrived < count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
                    return seen.arrived >= count
                }) ?? false
            }
            return .text(together ? "together" : "alone")
        }
        defer { l.stop() }
        try await FrontEndTests.onThread { check in
            let answers = Self.getAll(l.port, count: count)
            check.expect(answers.allSatisfy { $0.hasSuffix("together") }, "all \(count) handlers ran at once: \(answers)")
        }
    }

    @Test func aQueueBehindAWorkerBlockedWithoutNoticeStillMoves() async throws {
        let seen = Concurrency()
        let l = try FrontEndTests.listener({
            $0.threads = 4
            $0.runningThreads = 1
        }) { _ in
            seen.enter()
            defer { seen.leave() }
            // Blocks without telling the pool (a plain sleep): only the stalled-queue wake lets the second in.
            let deadline = ContinuousClock.now + .seconds(20)
            while seen.arrived < 2 && ContinuousClock.now < deadline { usleep(1000) }
            return .text(seen.arrived >= 2 ? "together" : "alone")
        }
        defer { l.stop() }
        try await FrontEndTests.onThread { check in
            let answers = Self.getAll(l.port, count: 2)
            check.expect(answers.allSatisfy { $0.hasSuffix("together") }, "both handlers ran at once: \(answers)")
        }
    }
}
