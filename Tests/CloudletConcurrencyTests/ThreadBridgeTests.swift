import CloudletConcurrency
import Foundation
import Synchronization
import Testing

@Suite("ThreadBridge: blocking threads ↔ Swift concurrency")
struct ThreadBridgeTests {
    struct Failure: Error, Equatable { var code: Int }

    /// Runs `body` on a thread of its own (never the cooperative pool) and returns its result.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { c in Thread.detachNewThread { c.resume(returning: body()) } }
    }

    @Test("wait runs a body that never suspends on the calling thread, and goes on on the requests executor after a suspension")
    func waitStartsOnTheCallingThread() async {
        let (first, afterSuspension, onRequests) = await onThread {
            let caller = pthread_self()
            let ran = try? ThreadBridge.wait { () async throws -> (pthread_t, pthread_t, Bool) in
                let first = pthread_self()
                // Resumed from another thread once the task has suspended (a resume before that would let the body go
                // on right here): the rest of the body is enqueued on the task's executor preference.
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    Thread.detachNewThread {
                        usleep(20_000)
                        c.resume()
                    }
                }
                return (first, pthread_self(), DedicatedExecutor.requests.isCurrentThread)
            }
            return ran.map { (pthread_equal($0.0, caller) != 0, pthread_equal($0.1, caller) != 0, $0.2) } ?? (false, true, false)
        }
        #expect(first)
        #expect(!afterSuspension)
        #expect(onRequests)
    }

    @Test("however many threads wait, no more bodies run at once than the pool has threads")
    func waitBoundsConcurrency() async {
        final class Gauge: Sendable {
            let running = Atomic<Int>(0)
            let most = Atomic<Int>(0)
        }
        let gauge = Gauge()
        let threads = 16
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    await onThread {
                        _ = try? ThreadBridge.wait { () async -> Int in
                            let now = gauge.running.add(1, ordering: .relaxed).newValue
                            gauge.most.max(now, ordering: .relaxed)
                            // Busy, never suspending, for 5 ms: a body that holds its thread.
                            let end = DispatchTime.now().uptimeNanoseconds + 5_000_000
                            while DispatchTime.now().uptimeNanoseconds < end {}
                            gauge.running.subtract(1, ordering: .relaxed)
                            return now
                        }
                    }
                }
            }
        }
        let most = gauge.most.load(ordering: .relaxed)
        #expect(most >= 1 && most <= ProcessInfo.processInfo.activeProcessorCount, "\(most) bodies ran at once")
    }

    @Test("wait returns the result of a body that suspends, and throws what it throws")
    func waitAcrossSuspensions() async {
        let value = await onThread {
            try? ThreadBridge.wait { () async throws -> Int in
                try await Task.sleep(for: .milliseconds(20))
                async let a = Task.yield()
                await a
                return 42
            }
        }
        #expect(value == 42)
        let error = await onThread { () -> Failure? in
            do {
                _ = try ThreadBridge.wait { () async throws -> Int in
                    try await Task.sleep(for: .milliseconds(5))
                    throw Failure(code: 7)
                }
                return nil
            } catch {
                return error as? Failure
            }
        }
        #expect(error == Failure(code: 7))
    }

    @Test("many threads wait at once")
    func concurrentWaits() async {
        let total = await withTaskGroup(of: Int.self) { group in
            for i in 0..<16 {
                group.addTask {
                    await onThread {
                        (try? ThreadBridge.wait { () async throws -> Int in
                            try await Task.sleep(for: .milliseconds(1))
                            return i
                        }) ?? -1
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(total == (0..<16).reduce(0, +))
    }

    @Test("offload runs blocking work off the calling task and keeps its error type")
    func offload() async {
        // More blocking calls at once than the cooperative pool has threads: they must not wait for each other.
        final class Counter: Sendable { let value = Atomic<Int>(0) }
        let started = Counter()
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        let all = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await ThreadBridge.offload { () -> Bool in
                        started.value.add(1, ordering: .relaxed)
                        let deadline = Date().addingTimeInterval(10)
                        while started.value.load(ordering: .relaxed) < count && Date() < deadline { usleep(1000) }
                        return started.value.load(ordering: .relaxed) >= count
                    }
                }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(all)
        do throws(Failure) {
            try await ThreadBridge.offload { () throws(Failure) in throw Failure(code: 3) }
            Issue.record("no error")
        } catch {
            #expect(error.code == 3)
        }
    }

    @Test("offload runs inline on a thread that may block (a wait body's first part), elsewhere after a suspension")
    func offloadInline() async {
        let (inline, afterSuspension) = await onThread {
            let caller = pthread_self()
            let ran = try? ThreadBridge.wait { () async throws -> (pthread_t, pthread_t) in
                let first = await ThreadBridge.offload { pthread_self() }
                try await Task.sleep(for: .milliseconds(5))
                // On the pool now: the work goes to a blocking thread (which may be the very thread the
                // suspended task left; that it does not block the pool is `offload()`'s test).
                let second = await ThreadBridge.offload { pthread_self() }
                return (first, second)
            }
            return ran.map { (pthread_equal($0.0, caller) != 0, pthread_equal($0.1, caller) != 0) } ?? (false, true)
        }
        #expect(inline)
        #expect(!afterSuspension)
    }

    @Test("work offloaded inline gives the waiting thread's admission permit back: more of it runs at once than cores")
    func inlineOffloadReleasesThePermit() async {
        final class Counter: Sendable { let value = Atomic<Int>(0) }
        let inside = Counter()
        let count = ProcessInfo.processInfo.activeProcessorCount * 2 + 1
        let all = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await onThread {
                        (try? ThreadBridge.wait { () async -> Bool in
                            await ThreadBridge.offload { () -> Bool in
                                // A blocking wait for all of them to be here at once (a disk read standing in).
                                inside.value.add(1, ordering: .relaxed)
                                let deadline = Date().addingTimeInterval(10)
                                while inside.value.load(ordering: .relaxed) < count && Date() < deadline { usleep(1000) }
                                return inside.value.load(ordering: .relaxed) >= count
                            }
                        }) ?? false
                    }
                }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(all, "\(inside.value.load(ordering: .relaxed)) of \(count) got in")
    }

    @Test("admitted runs at most one body per core at once, and a body that blocks inside gives its permit back")
    func admittedBoundsConcurrentBodies() async {
        final class Counter: Sendable {
            let inside = Atomic<Int>(0)
            let most = Atomic<Int>(0)
            let blockedInside = Atomic<Int>(0)
        }
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let count = cores * 4
        // Each body stays a while (a read under a partition's lock standing in) and records how many are inside.
        let c = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await onThread {
                        ThreadBridge.admitted {
                            let now = c.inside.add(1, ordering: .relaxed).newValue
                            c.most.max(now, ordering: .relaxed)
                            usleep(2000)
                            c.inside.subtract(1, ordering: .relaxed)
                        }
                    }
                }
            }
        }
        #expect(c.most.load(ordering: .relaxed) <= cores, "\(c.most.load(ordering: .relaxed)) bodies at once on \(cores) cores")
        // Inside ThreadBridge.blocking (a disk read) the permit is given back: all of them get there at once.
        let all = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await onThread {
                        ThreadBridge.admitted {
                            ThreadBridge.blocking {
                                c.blockedInside.add(1, ordering: .relaxed)
                                let deadline = Date().addingTimeInterval(10)
                                while c.blockedInside.load(ordering: .relaxed) < count && Date() < deadline { usleep(1000) }
                                return c.blockedInside.load(ordering: .relaxed) >= count
                            }
                        }
                    }
                }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(all, "\(c.blockedInside.load(ordering: .relaxed)) of \(count) got in")
    }
}
