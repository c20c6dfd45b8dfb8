import Foundation
import Synchronization

/// A task executor with threads of its own, for tasks that must keep running when Swift's cooperative pool is busy
/// or blocked: the server's websocket pushers and long polls, which wait for notifications and then only queue
/// bytes (``push``), and the async work of blocking callers such as the front end's workers (``requests``). Start them with `Task(executorPreference: DedicatedExecutor.push) { … }`; what they await is resumed here,
/// never on the pool (two threads on our machines, which any blocking code elsewhere can stall for seconds).
///
/// Jobs run in the order they were enqueued, on ``threadCount`` threads (so not serially: a task's own steps never
/// overlap, but two tasks may run at once). Code that runs here must not block, like code on the pool: these threads
/// are few and shared by every pusher. ``ThreadBridge/mayBlock`` is false on them, so the engine offloads its
/// blocking work as it does from the pool.
///
/// ``schedule(after:_:)`` runs a short action at a deadline (the timeout of a long poll) on the same threads, so a
/// timeout does not depend on the pool either (`Task.sleep` resumes through the global executor).
public final class DedicatedExecutor: TaskExecutor, @unchecked Sendable {
    /// The executor of the server's notification pushers and long polls.
    public static let push = DedicatedExecutor(name: "cloudlet-push", threads: 2)

    /// The executor of what a ``ThreadBridge/wait(_:)`` body does after its first suspension — a front-end request's
    /// async work once a commit or a partition's writer resumes it — so that a request finishes while the
    /// cooperative pool is held by blocking code elsewhere. One thread per core, as the pool has.
    public static let requests = DedicatedExecutor(
        name: "cloudlet-requests", threads: max(2, ProcessInfo.processInfo.activeProcessorCount))

    public let name: String
    public let threadCount: Int

    /// A pending ``schedule(after:_:)`` action; cancel it with ``cancel(_:)``.
    public struct Timer: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Due: Comparable {
        var deadline: ContinuousClock.Instant
        var id: UInt64
        static func < (a: Due, b: Due) -> Bool { (a.deadline, a.id) < (b.deadline, b.id) }
    }

    /// `@unchecked Sendable`: everything below is touched only under `condition`.
    private let condition = NSCondition()
    private var jobs = FIFO<UnownedJob>()
    /// Deadlines, a binary min-heap; an entry whose action is no longer in `actions` was cancelled.
    private var heap: [Due] = []
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextID: UInt64 = 0
    private var started = false
    /// The threads' `pthread_self()`.
    private var threads: Set<UInt> = []
    private let ran = Atomic<Int>(0)

    public init(name: String, threads: Int = 2) {
        precondition(threads > 0, "an executor needs a thread")
        self.name = name
        self.threadCount = threads
    }

    /// Jobs run so far (tests: a task ran here).
    public var jobsRun: Int { ran.load(ordering: .relaxed) }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        startIfNeeded()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `action` (short, non-blocking: it resumes a continuation) on one of the executor's threads once
    /// `delay` has passed, unless cancelled first.
    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Timer {
        condition.lock()
        startIfNeeded()
        nextID += 1
        let id = nextID
        actions[id] = action
        push(Due(deadline: .now + delay, id: id))
        condition.broadcast()  // the new deadline may be the earliest: sleepers recompute
        condition.unlock()
        return Timer(id: id)
    }

    /// Cancels a scheduled action; true when it had not run (and now never will).
    @discardableResult
    public func cancel(_ timer: Timer) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return actions.removeValue(forKey: timer.id) != nil
    }

    /// Scheduled actions not yet run or cancelled.
    public var pendingTimers: Int {
        condition.lock()
        defer { condition.unlock() }
        return actions.count
    }

    /// Starts the threads on first use (under `condition`). They live as long as the process, as the pool's do.
    private func startIfNeeded() {
        guard !started else { return }
        started = true
        for i in 0..<threadCount {
            let threadName = threadCount == 1 ? name : "\(name)-\(i)"
            // Named from inside (see ThreadName): otherwise it keeps the name of the thread that started it.
            Thread { [self] in loop(named: threadName) }.start()
        }
    }

    /// Whether the calling thread is one of this executor's.
    public var isCurrentThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return threads.contains(UInt(pthread_self()))
    }

    private func loop(named threadName: String) {
        ThreadName.setCurrent(threadName)
        let unowned = asUnownedTaskExecutor()
        condition.lock()
        threads.insert(UInt(pthread_self()))
        while true {
            // Timers first: a due timeout is as urgent as any job.
            if let due = heap.first, due.deadline <= .now {
                pop()
                if let action = actions.removeValue(forKey: due.id) {
                    condition.unlock()
                    action()
                    condition.lock()
                }
                continue
            }
            if let job = jobs.popFirst() {
                condition.unlock()
                ran.add(1, ordering: .relaxed)
                job.runSynchronously(on: unowned)
                condition.lock()
                continue
            }
            // Cancelled timers are dropped as they come up; an idle thread sleeps until the next deadline.
            while let due = heap.first, actions[due.id] == nil { pop() }
            if let due = heap.first {
                let left = (due.deadline - .now).components
                let seconds = Double(left.seconds) + Double(left.attoseconds) / 1e18
                _ = condition.wait(until: Date(timeIntervalSinceNow: max(seconds, 0)))
            } else {
                condition.wait()
            }
        }
    }

    // MARK: - The heap (under `condition`)

    private func push(_ d: Due) {
        heap.append(d)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i] < heap[parent] else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private func pop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && heap[l] < heap[m] { m = l }
            if r < heap.count && heap[r] < heap[m] { m = r }
            if m == i { return }
            heap.swapAt(i, m)
            i = m
        }
    }
}
