@testable import CloudletConcurrency
import Foundation
import Synchronization
import Testing

@Suite("BlockingThreads: threads of our own for blocking work")
struct BlockingThreadsTests {
    /// A gate jobs block on until it opens (a long-poll or a slow disk standing in).
    final class Gate: Sendable {
        private let semaphore = DispatchSemaphore(value: 0)
        func wait() { semaphore.wait() }
        func open(_ waiters: Int) { for _ in 0..<waiters { semaphore.signal() } }
    }

    final class Counter: Sendable {
        private let count = Atomic<Int>(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    @Test("a job never waits behind blocked ones while the pool is under its cap: 50 blocked jobs, then one more runs")
    func jobsDoNotWaitBehindBlockedOnes() async throws {
        let pool = BlockingThreads(name: "test.blocking", maxThreads: 64)
        let gate = Gate()
        let blocked = 50
        let running = Counter()
        let tasks = (0..<blocked).map { _ in
            Task {
                await pool.run {
                    running.add()
                    gate.wait()
                }
            }
        }
        // Until every job runs (a thread counted but not yet in its job would be idle, and could take the next one).
        while running.value < blocked { try? await Task.sleep(for: .milliseconds(1)) }
        // Every blocked job holds a thread, and the next one still runs (on a thread of its own) before any ends.
        let ran = await pool.run { ThreadBridge.thread }
        #expect(ran == .blocking, "a pool thread is one that may block")
        #expect(pool.threadCount == blocked + 1)
        gate.open(blocked)
        for t in tasks { await t.value }
    }

    @Test("a pool thread carries the pool's name in the kernel (what top -H, gdb and crash reports show), even when started from a cooperative thread")
    func threadsAreNamedAfterThePool() async {
        let pool = BlockingThreads(name: "test.named", maxThreads: 4)
        // Submitted from a task: the thread that starts the pool's thread is one of Swift's cooperative threads.
        let name = await pool.run { ThreadName.current }
        #expect(name == "test.named")
    }

    @Test("at the cap, jobs queue (none starts while every thread is busy) and all run once threads come free")
    func capQueuesJobs() async {
        let pool = BlockingThreads(name: "test.cap", maxThreads: 2)
        let gate = Gate()
        let order = Mutex<[Int]>([])
        let blockers = (0..<2).map { _ in Task { await pool.run { gate.wait() } } }
        // Wait until both threads run their blocker: the queued jobs below cannot start before the gate opens.
        while pool.threadCount < 2 { try? await Task.sleep(for: .milliseconds(1)) }
        let queued = (0..<20).map { i in
            let s = DispatchSemaphore(value: 0)
            pool.submit {
                order.withLock { $0.append(i) }
                s.signal()
            }
            return s
        }
        #expect(order.withLock { $0.isEmpty }, "no job ran while both threads were blocked")
        #expect(pool.threadCount == 2)
        gate.open(2)
        for s in queued { await withCheckedContinuation { c in Thread.detachNewThread { s.wait(); c.resume() } } }
        for b in blockers { await b.value }
        let ran = order.withLock { $0 }
        #expect(ran.sorted() == Array(0..<20))
    }

    @Test("idle threads end after the idle timeout")
    func idleThreadsEnd() async {
        let pool = BlockingThreads(name: "test.idle", maxThreads: 8, idleTimeout: 0.05)
        let gate = Gate()
        let tasks = (0..<4).map { _ in Task { await pool.run { gate.wait() } } }
        while pool.threadCount < 4 { try? await Task.sleep(for: .milliseconds(1)) }
        gate.open(4)
        for t in tasks { await t.value }
        let deadline = ContinuousClock.now + .seconds(30)  // a guard against hanging, not a timing assertion
        while pool.threadCount > 0, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        #expect(pool.threadCount == 0)
    }

    @Test("errors thrown by the work come back to the caller, typed")
    func errorsComeBack() async {
        struct Failure: Error { var code: Int }
        let pool = BlockingThreads(name: "test.errors")
        do throws(Failure) {
            try await pool.run { () throws(Failure) in throw Failure(code: 7) }
            Issue.record("no error")
        } catch {
            #expect(error.code == 7)
        }
    }
}
