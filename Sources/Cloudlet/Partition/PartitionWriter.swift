import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Dispatch
import Synchronization

/// A partition's writer: the serial executor every write job of the partition runs on — plan, stage, apply —
/// one at a time, in the order they were submitted (GRDB's serial queue behind async APIs). docs/concurrency.md
/// describes the whole model.
///
/// **Who runs a job.** A job runs right on the caller's thread when the writer is idle, nothing is queued, the
/// writer is not stalled and the caller may block (``ThreadBridge/mayBlock``: a thread of our own, the first part
/// of a ``ThreadBridge/wait(_:)`` body, a blocking caller): the common uncontended commit then costs no thread
/// switch at all. Otherwise the job is queued and the writer's own thread runs it, draining the queue job after
/// job; an async caller suspends meanwhile (no thread of the cooperative pool is held), a blocking caller blocks.
/// So a job never runs on the cooperative pool, and may read the disk, wait for room in the log or for a stall to
/// end.
///
/// **Cancellation.** A task cancelled while its job is queued stops waiting with `CancellationError`, and its job
/// never runs. A job that started runs to its end: a commit it staged is not undone (it is, or will be, durable).
///
/// **Write stall.** Commits fill the key directory's memtable, which is flushed in the background once it holds
/// ``StoreConfiguration/memtableSize`` bytes (``Partition/flushIndex(force:)``). A flush can take long (the index's
/// level 0 waits for merges), and writers keep filling a fresh memtable meanwhile; once that one holds
/// ``stallLimit`` bytes while the flush still runs, no further job starts until the flush ends (RocksDB's
/// `max_write_buffer_number` of 2): queued callers wait, async ones suspended. A failed flush ends the stall with
/// its error, which every job then waiting gets (the partition is read-only from then on). Stalls are counted in
/// ``statistics``.
///
/// Sendable: every stored property is immutable; the mutable state lives in `core`'s monitor.
final class PartitionWriter: Sendable {
    /// What ``run(_:deliver:)`` does with a queued job's outcome: called with it and with what resumes the task.
    typealias Delivery<R> = @Sendable (Result<R, any Error>, @escaping @Sendable (Result<R, any Error>) -> Void) -> Void

    /// The state shared with the writer's thread (which holds it, not the writer, so that dropping the writer
    /// stops the thread).
    private let core: Core

    /// `name` names the thread; `stallLimit`: memtable bytes at which writes stall while a flush runs (`.max`:
    /// never).
    init(name: String, stallLimit: Int) {
        core = Core(name: name, stallLimit: stallLimit)
    }

    deinit { close() }

    /// Runs `job` on the writer and returns (or throws) what it returns; the calling task suspends while the job
    /// waits or runs elsewhere. Throws `CancellationError` if the task is cancelled before the job starts (it
    /// then never runs), `.readOnly` once the writer is closed, a failed flush's error if the job was held by a
    /// stall that ended with it.
    func run<R: Sendable>(_ job: @escaping @Sendable () throws -> R) async throws -> R {
        try await run(job, deliver: nil)
    }

    /// ``run(_:)`` whose queued job, once run, hands its outcome to `deliver` on the writer's thread instead of
    /// resuming the task there: `deliver` resumes it (calls its second argument) when it sees fit — a commit, once
    /// its frame is durable, from the committer's thread. The task then wakes once for the job and its wait, not
    /// twice. A job run inline (on a caller that may block) returns as ``run(_:)`` does: `deliver` is not called.
    ///
    /// Cancellation: a queued job never runs (`CancellationError`); a task cancelled once its job has run — while
    /// it waits for the delivery, or during the job — stops waiting with `CancellationError` (what the job did
    /// stays), unless the delivery resumed it first. So the caller sees what ``run(_:)`` followed by a cancellable
    /// wait would give it.
    func run<R: Sendable>(
        _ job: @escaping @Sendable () throws -> R, deliver: Delivery<R>?
    ) async throws -> R {
        try Task.checkCancellation()
        if ThreadBridge.mayBlock, try core.claim() {
            defer { core.release(inline: true) }
            return try job()
        }
        let ticket = Ticket()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<R, any Error>) in
                if let deliver {
                    // Resumed by whichever comes first: the delivery, or a cancellation once the job has run.
                    let once = ResumeOnce(c)
                    ticket.delivers = true
                    ticket.body = { deliver(Result(catching: job)) { once.resume(with: $0) } }
                    ticket.fail = { once.resume(with: .failure($0)) }
                } else {
                    ticket.body = { c.resume(with: Result(catching: job)) }
                    ticket.fail = { c.resume(throwing: $0) }
                }
                core.enqueue(ticket)
            }
        } onCancel: {
            core.cancel(ticket)
        }
    }

    /// ``run(_:)`` for threads that may block (offline tools, background work, a server's worker): the calling
    /// thread runs `job` itself when it can, else blocks until the writer's thread has run it.
    func runBlocking<R>(_ job: () throws -> R) throws -> R {
        ThreadBridge.checkMayBlock("a blocking write to partition \(core.name)")
        if try core.claim() {
            defer { core.release(inline: true) }
            return try job()
        }
        return try withoutActuallyEscaping(job) { job in
            // The caller sleeps until the ticket is done, so what the job touches is handed over and back.
            let box = UncheckedBox<Result<R, any Error>?>(nil)
            let done = DispatchSemaphore(value: 0)
            let ticket = Ticket()
            // Let go of `job` before waking the caller, whichever thread ends the ticket: it must not outlive this
            // call (withoutActuallyEscaping checks).
            let unchecked = UncheckedBox<(() throws -> R)?>(job)
            ticket.body = {
                box.value = Result(catching: unchecked.take()!)
                done.signal()
            }
            ticket.fail = { error in
                _ = unchecked.take()
                box.value = .failure(error)
                done.signal()
            }
            core.enqueue(ticket)
            ThreadBridge.blocking { done.wait() }
            return try box.value!.get()
        }
    }

    // MARK: - Write stall

    /// Called by a commit under the partition's lock: the key directory's memtable now holds `bytes`.
    func noteMemtable(bytes: Int) { core.update { $0.memtableBytes = bytes } }

    /// Called under the partition's lock when a flush froze the memtable; `bytes`: what the fresh one holds.
    func flushStarted(memtableBytes bytes: Int) {
        core.update { s in
            s.flushing = true
            s.memtableBytes = bytes
        }
    }

    /// The flush ``flushStarted(memtableBytes:)`` announced is over: jobs held by a stall go on — or, when it failed
    /// (`failure`), get that error without running.
    func flushFinished(failure: (any Error)?) { core.flushFinished(failure: failure) }

    // MARK: - State

    var statistics: PartitionWriterStatistics { core.monitor.withLock { $0.statisticsNow() } }

    /// Stops taking jobs (later ones throw `.readOnly`), lets the queued ones run, and stops the thread.
    /// Idempotent.
    func close() { core.close() }
}

/// What a partition's writer did (``PartitionWriter/statistics``), summed over partitions in ``StoreStatistics``.
package struct PartitionWriterStatistics: Sendable, Equatable {
    /// Jobs run on their caller's thread, and on the writer's own.
    package var inlineJobs = 0
    package var queuedJobs = 0
    /// Jobs whose task was cancelled while they were queued (never run).
    package var cancelledJobs = 0
    /// Write stalls since the store was opened, and the time jobs spent held by them.
    package var stalls = 0
    package var stalledNanoseconds: UInt64 = 0
    /// Whether writes are stalled now.
    package var stalled = false
    /// The key directory's active memtable, as of the last commit or flush.
    package var memtableBytes = 0
    /// Jobs waiting now.
    package var waiting = 0
}

extension PartitionWriter {
    /// One job, queued or running: what runs it and what fails it. `@unchecked Sendable`: `body` and `fail` are set
    /// before the ticket is queued and read only by whoever dequeues it, both under `core`'s monitor; `phase` is
    /// read and written only under that monitor.
    fileprivate final class Ticket: @unchecked Sendable {
        enum Phase { case new, queued, running, cancelled }
        var phase = Phase.new
        var body: () -> Void = {}
        var fail: (any Error) -> Void = { _ in }
        /// A ``PartitionWriter/run(_:deliver:)`` job: its `fail` may follow its body (a cancellation while it waits
        /// for the delivery); set before it is queued.
        var delivers = false
        /// Its task was cancelled while the job ran (a delivering job only), and whether the job has run.
        var cancelledWhileRunning = false
        var ran = false
    }

    /// A continuation resumed by the first of several who may: the rest are ignored.
    fileprivate final class ResumeOnce<R: Sendable>: Sendable {
        private let continuation: CheckedContinuation<R, any Error>
        private let resumed = Atomic<Bool>(false)

        init(_ continuation: CheckedContinuation<R, any Error>) { self.continuation = continuation }

        func resume(with outcome: Result<R, any Error>) {
            guard !resumed.exchange(true, ordering: .acquiringAndReleasing) else { return }
            continuation.resume(with: outcome)
        }
    }

    fileprivate struct State {
        var queue: [Ticket] = []
        /// Tickets before this index were dequeued.
        var head = 0
        /// A job is running (inline or on the thread).
        var busy = false
        var closed = false
        var thread: NativeThread?
        let stallLimit: Int
        var memtableBytes = 0
        var flushing = false
        /// When the stall under way started to hold a job.
        var stallStarted: UInt64?
        var stats = PartitionWriterStatistics()

        var waiting: Int { queue.count - head }
        var isStalled: Bool { flushing && memtableBytes >= stallLimit }

        mutating func pop() -> Ticket {
            let t = queue[head]
            head += 1
            if head >= 64 && head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
            return t
        }

        /// Starts or ends the stall clock: a stall holds jobs from when one waits behind it until it lifts.
        mutating func noteStall() {
            if isStalled && waiting > 0 && stallStarted == nil {
                stallStarted = DispatchTime.now().uptimeNanoseconds
                stats.stalls += 1
            } else if !isStalled, let started = stallStarted {
                stats.stalledNanoseconds += DispatchTime.now().uptimeNanoseconds - started
                stallStarted = nil
            }
        }

        func statisticsNow() -> PartitionWriterStatistics {
            var s = stats
            s.stalled = stallStarted != nil
            if let started = stallStarted { s.stalledNanoseconds += DispatchTime.now().uptimeNanoseconds - started }
            s.memtableBytes = memtableBytes
            s.waiting = waiting
            return s
        }
    }

    /// The monitor and the thread's loop. Sendable: `monitor` guards the state; `name` and `stallLimit` are constants.
    fileprivate final class Core: Sendable {
        let name: String
        let monitor: Monitor<State>

        init(name: String, stallLimit: Int) {
            self.name = name
            monitor = Monitor(State(stallLimit: stallLimit))
        }

        /// Makes the caller the runner of the next job if nothing is running, queued or stalled; throws once closed.
        func claim() throws -> Bool {
            try monitor.withLock { s in
                if s.closed { throw closedError() }
                guard !s.busy && s.waiting == 0 && !s.isStalled else { return false }
                s.busy = true
                s.stats.inlineJobs += 1
                return true
            }
        }

        /// The job that ``claim()`` (`inline`) or the thread took (`ticket`) is over: the thread takes the queued
        /// ones. A delivering ticket whose task was cancelled while it ran fails with `CancellationError` now.
        func release(inline: Bool, ticket: Ticket? = nil) {
            let (more, cancelled) = monitor.withLock { s in
                s.busy = false
                ticket?.ran = true
                return (s.waiting > 0, ticket?.cancelledWhileRunning ?? false)
            }
            if cancelled { ticket?.fail(CancellationError()) }
            if more && inline { monitor.signal(.work) }
        }

        func enqueue(_ ticket: Ticket) {
            let refused: (any Error)? = monitor.withLock { s in
                if ticket.phase == .cancelled { return CancellationError() }
                if s.closed { return closedError() }
                if s.thread == nil {
                    do { s.thread = try NativeThread(name: "cloudlet-writer-\(name)") { [self] in loop() } } catch {
                        return error
                    }
                }
                ticket.phase = .queued
                s.queue.append(ticket)
                s.stats.queuedJobs += 1
                s.noteStall()
                return nil
            }
            if let refused { return ticket.fail(refused) }
            monitor.signal(.work)
        }

        /// The task of `ticket` was cancelled: a queued job leaves the queue and fails with `CancellationError`; one
        /// not queued yet never will be; one running goes on — and a delivering one's task then stops waiting for its
        /// delivery (``run(_:deliver:)``).
        func cancel(_ ticket: Ticket) {
            let failNow = monitor.withLock { s -> Bool in
                switch ticket.phase {
                case .new:
                    ticket.phase = .cancelled
                    return false
                case .queued:
                    ticket.phase = .cancelled
                    if let i = s.queue[s.head...].firstIndex(where: { $0 === ticket }) { s.queue.remove(at: i) }
                    s.stats.cancelledJobs += 1
                    s.noteStall()
                    return true
                case .running:
                    // A delivering job's task stops waiting for the delivery: now if the job has run, else as soon
                    // as it has (the loop checks).
                    guard ticket.delivers else { return false }
                    ticket.cancelledWhileRunning = true
                    return ticket.ran
                case .cancelled:
                    return false
                }
            }
            if failNow { ticket.fail(CancellationError()) }
        }

        func update(_ change: (inout State) -> Void) {
            let lifted = monitor.withLock { s in
                let was = s.isStalled
                change(&s)
                s.noteStall()
                return was && !s.isStalled
            }
            if lifted { monitor.signal(.work) }
        }

        func flushFinished(failure: (any Error)?) {
            let failed: [Ticket] = monitor.withLock { s in
                let held = s.stallStarted != nil
                s.flushing = false
                s.noteStall()
                // The jobs the stall held fail with the flush's error: the partition takes no writes any more.
                guard let _ = failure, held else { return [] }
                let tickets = Array(s.queue[s.head...])
                s.queue = []
                s.head = 0
                for t in tickets { t.phase = .running }
                return tickets
            }
            monitor.signal(.work)
            if let failure { for t in failed { t.fail(failure) } }
        }

        func close() {
            let thread = monitor.withLock { s -> NativeThread? in
                s.closed = true
                return s.thread
            }
            monitor.broadcast(.work)
            thread?.join()
        }

        /// The writer's thread: runs queued jobs one after the other, sleeping while there is none or the writer is
        /// stalled (or busy with an inline job); ends once closed and drained.
        private func loop() {
            while true {
                let next: Ticket? = monitor.withLock(
                    waitingOn: .work,
                    until: { s in (s.closed && s.waiting == 0) || (!s.busy && s.waiting > 0 && !s.isStalled) }
                ) { s in
                    guard s.waiting > 0 else { return nil }
                    s.busy = true
                    let t = s.pop()
                    t.phase = .running
                    return t
                }
                guard let next else { return }
                next.body()
                release(inline: false, ticket: next)
            }
        }

        private func closedError() -> CloudletError { CloudletError(.readOnly, "partition \(name) is closed") }
    }
}

/// A value handed between threads that a semaphore orders. `@unchecked Sendable`: only the thread that creates it
/// and the one that runs its ticket touch it, one after the other (the semaphore orders them).
private final class UncheckedBox<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

extension UncheckedBox {
    /// The value, leaving nil behind.
    func take<W>() -> W? where T == W? {
        defer { value = nil }
        return value
    }
}
