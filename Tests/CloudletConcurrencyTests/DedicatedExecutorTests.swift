@testable import CloudletConcurrency
import Foundation
import Synchronization
import Testing

@Suite("DedicatedExecutor: a task executor with threads of its own")
struct DedicatedExecutorTests {
    /// The calling thread's name in the kernel (a synchronous function: the thread is a property of sync code).
    static func threadName() -> String { ThreadName.current }

    @Test("a task that prefers it runs there, before and after it suspends, and may not block there")
    func tasksRunOnItsThreads() async throws {
        let executor = DedicatedExecutor(name: "test.dedicated", threads: 1)
        let (places, names) = await Task(executorPreference: executor) { () -> ([Bool], [String]) in
            let before = (executor.isCurrentThread, Self.threadName())
            await Task.yield()
            _ = await BlockingThreads.shared.run { 0 }  // resumed from a blocking thread
            let after = (executor.isCurrentThread, Self.threadName())
            #expect(!ThreadBridge.mayBlock)
            return ([before.0, after.0], [before.1, after.1])
        }.value
        #expect(places == [true, true])
        #expect(names == ["test.dedicated", "test.dedicated"])
        #expect(!executor.isCurrentThread)
        #expect(executor.jobsRun >= 2)
    }

    @Test("a scheduled action runs once its delay has passed; a cancelled one never runs")
    func timersRunAndCancel() async throws {
        let executor = DedicatedExecutor(name: "test.timers", threads: 1)
        let ran = Mutex<[Int]>([])
        let later = executor.schedule(after: .milliseconds(50)) { ran.withLock { $0.append(2) } }
        let cancelled = executor.schedule(after: .milliseconds(20)) { ran.withLock { $0.append(9) } }
        executor.schedule(after: .milliseconds(1)) { ran.withLock { $0.append(1) } }
        #expect(executor.cancel(cancelled))
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            executor.schedule(after: .milliseconds(100)) { c.resume() }
        }
        #expect(ran.withLock { $0 } == [1, 2])
        #expect(!executor.cancel(later), "it ran already")
        #expect(executor.pendingTimers == 0)
    }
}
