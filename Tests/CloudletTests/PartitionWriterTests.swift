import CloudletConcurrency
import CloudletCore
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Cloudlet

/// A list jobs on other threads append to.
final class LockedList: Sendable {
    private let list = Mutex<[Int]>([])
    func append(_ i: Int) { list.withLock { $0.append(i) } }
    var items: [Int] { list.withLock { $0 } }
}

/// A gate a job waits at until the test opens it (a job that holds the writer busy).
private final class Gate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let passed = Atomic<Bool>(false)

    var entered: Bool { passed.load(ordering: .acquiring) }

    func pass() {
        passed.store(true, ordering: .releasing)
        semaphore.wait()
    }

    func open() { semaphore.signal() }
}

/// A counter tests share with jobs on other threads.
final class Counter: Sendable {
    private let atomic = Atomic<Int>(0)
    init() {}
    @discardableResult func add(_ n: Int = 1) -> Int { atomic.add(n, ordering: .relaxed).newValue }
    func subtract() { atomic.subtract(1, ordering: .relaxed) }
    var value: Int { atomic.load(ordering: .relaxed) }
}

/// Polls `condition` until it holds (a deadline only so that a broken build fails instead of hanging; no timing is
/// asserted).
func eventually(_ what: String, _ condition: () -> Bool) async throws {
    for _ in 0..<30_000 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(1))
    }
    Issue.record("never happened: \(what)")
    throw CancellationError()
}

@Suite("PartitionWriter: a partition's serial executor")
struct PartitionWriterTests {
    /// Starts a job on a thread of its own that holds `writer` until `gate` opens; returns once it runs.
    private func holdBusy(_ writer: PartitionWriter, _ gate: Gate) async throws {
        Thread.detachNewThread { _ = try? writer.runBlocking { gate.pass() } }
        try await eventually("the holding job runs") { gate.entered }
    }

    @Test("queued jobs run one at a time, in the order they were queued, on the writer's thread, never on the pool")
    func jobsRunInOrderOffThePool() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let gate = Gate()
        try await holdBusy(writer, gate)
        let log = LockedList()
        let running = Counter()
        let overlapped = Counter()
        let onPool = Counter()
        var tasks: [Task<Int, any Error>] = []
        for i in 0..<20 {
            tasks.append(Task {
                try await writer.run {
                    if running.add() > 1 { overlapped.add() }
                    if !ThreadBridge.mayBlock { onPool.add() }
                    log.append(i)
                    running.subtract()
                    return i
                }
            })
            // Queue them one after the other, so that their order is known.
            try await eventually("job \(i) is queued") { writer.statistics.waiting == i + 1 }
        }
        gate.open()
        for (i, t) in tasks.enumerated() { #expect(try await t.value == i) }
        #expect(log.items == Array(0..<20))
        #expect(overlapped.value == 0, "two jobs ran at once")
        #expect(onPool.value == 0, "a job ran on the cooperative pool")
        #expect(writer.statistics.queuedJobs == 20)
    }

    @Test("an idle writer runs the job of a caller that may block right on the caller's thread")
    func idleWriterRunsInline() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let caller = pthread_self()
        let ranHere = try writer.runBlocking { pthread_equal(pthread_self(), caller) != 0 }
        #expect(ranHere)
        #expect(writer.statistics.inlineJobs == 1)
        #expect(writer.statistics.queuedJobs == 0)
    }

    /// What `Partition.commit(untilDurable:)` rests on: the writer hands a queued job's outcome over and is free at
    /// once; the task wakes when the receiver resumes it, with what it resumes it with.
    @Test("a queued job's outcome goes to deliver on the writer's thread; the task waits until deliver resumes it, and the writer is free meanwhile")
    func deliveredOutcomeResumesTheTaskLater() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let held = Mutex<(@Sendable () -> Void)?>(nil)
        let deliveredOnPool = Counter()
        let returned = Counter()
        let task = Task {
            let r = try await writer.run({ 6 }) { outcome, resume in
                if !ThreadBridge.mayBlock { deliveredOnPool.add() }
                held.withLock { $0 = { resume(outcome.map { $0 * 7 }) } }
            }
            returned.add()
            return r
        }
        try await eventually("the outcome is delivered") { held.withLock { $0 != nil } }
        // The writer runs the next job while the first task still waits for its delivery to resume it.
        #expect(try await writer.run { 1 } == 1)
        #expect(returned.value == 0, "the task returned before deliver resumed it")
        held.withLock { $0 }!()
        #expect(try await task.value == 42)
        #expect(deliveredOnPool.value == 0, "deliver ran on the cooperative pool")
    }

    @Test("a task cancelled while it waits for its job's delivery stops with CancellationError; the late delivery is ignored")
    func cancelledWhileWaitingForDelivery() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let held = Mutex<(@Sendable () -> Void)?>(nil)
        let ran = Counter()
        let task = Task {
            try await writer.run({ ran.add() }) { outcome, resume in held.withLock { $0 = { resume(outcome) } } }
        }
        try await eventually("the outcome is delivered") { held.withLock { $0 != nil } }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        held.withLock { $0 }!()  // resumes nothing: the continuation was resumed once already
        #expect(ran.value == 1, "the job ran (it is not undone)")
    }

    @Test("a task cancelled while its delivering job runs stops with CancellationError once the job has run")
    func cancelledWhileDeliveringJobRuns() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let gate = Gate()
        let task = Task {
            try await writer.run({ gate.pass(); return 1 }) { _, _ in }  // never delivered
        }
        try await eventually("the job runs") { gate.entered }
        task.cancel()
        gate.open()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test("a job run inline (a caller that may block) returns its own outcome and is not delivered")
    func inlineJobIsNotDelivered() throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let delivered = Counter()
        let r = try ThreadBridge.wait {
            try await writer.run({ 5 }) { outcome, resume in
                delivered.add()
                resume(outcome)
            }
        }
        #expect(r == 5)
        #expect(delivered.value == 0)
        #expect(writer.statistics.inlineJobs == 1)
    }

    @Test("a task cancelled while its job is queued gets CancellationError, and the job never runs")
    func cancelledWhileQueued() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let gate = Gate()
        try await holdBusy(writer, gate)
        let ran = Counter()
        let task = Task { _ = try await writer.run { ran.add() } }
        try await eventually("the job is queued") { writer.statistics.waiting == 1 }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        gate.open()
        // A job queued after the cancelled one runs: the writer went past the gap.
        try await writer.run {}
        #expect(ran.value == 0, "the cancelled job ran")
        #expect(writer.statistics.cancelledJobs == 1)
    }

    @Test("a task cancelled before it submits its job gets CancellationError, and the job never runs")
    func cancelledBeforeSubmitting() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let ran = Counter()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            _ = try await writer.run { ran.add() }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ran.value == 0)
    }

    @Test("cancelling the task of a job that started does not stop it: the caller gets its result")
    func cancelledWhileRunning() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        defer { writer.close() }
        let gate = Gate()
        let task = Task { try await writer.run { gate.pass(); return 42 } }
        try await eventually("the job runs") { gate.entered }
        task.cancel()
        gate.open()
        #expect(try await task.value == 42)
    }

    @Test("a closed writer refuses jobs with readOnly")
    func closedWriterRefuses() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: .max)
        writer.close()
        await expectError(.readOnly) { try await writer.run {} }
        await expectError(.readOnly) { try writer.runBlocking {} }
    }

    @Test("a stall holds queued jobs while the memtable is at its limit and a flush runs; the flush's end lets them go")
    func stallHoldsJobsUntilTheFlushEnds() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: 100)
        defer { writer.close() }
        writer.flushStarted(memtableBytes: 0)
        writer.noteMemtable(bytes: 150)
        let ran = Counter()
        // A caller that may block is held too: the job goes to the queue instead of running inline.
        let blocking = Task.detached {
            try await ThreadBridge.offload { try writer.runBlocking { ran.add() } }
        }
        let queued = Task { _ = try await writer.run { ran.add() } }
        try await eventually("both jobs wait") { writer.statistics.waiting == 2 }
        #expect(writer.statistics.stalled)
        #expect(writer.statistics.stalls == 1)
        #expect(ran.value == 0)
        writer.flushFinished(failure: nil)
        _ = try await blocking.value
        _ = try await queued.value
        #expect(ran.value == 2)
        let stats = writer.statistics
        #expect(!stats.stalled && stats.stalls == 1 && stats.stalledNanoseconds > 0)
    }

    @Test("a failed flush fails the jobs its stall held with its error, without running them")
    func failedFlushReleasesStalledJobsWithItsError() async throws {
        let writer = PartitionWriter(name: "test", stallLimit: 100)
        defer { writer.close() }
        writer.flushStarted(memtableBytes: 0)
        writer.noteMemtable(bytes: 100)
        let ran = Counter()
        let task = Task { _ = try await writer.run { ran.add() } }
        try await eventually("the job waits") { writer.statistics.waiting == 1 }
        writer.flushFinished(failure: CloudletError(.readOnly, "partition test is read-only: flushing its index failed: EIO"))
        let error = await expectError(.readOnly) { try await task.value }
        #expect(error?.message.contains("flushing its index failed") == true)
        #expect(ran.value == 0)
    }
}
