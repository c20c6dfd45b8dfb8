import Foundation

/// Threads of our own for work that blocks: ``ThreadBridge/offload(_:)`` (file I/O, fsync, recovery) and the
/// client's requests (`curl_easy_perform`, up to a long-poll's minute; a notification websocket's read loop).
///
/// Not Dispatch's queues: on Linux their pool grows slowly past one thread a core, so a few long blocking jobs
/// held every thread and the short ones behind them waited — a client's long-polls starved the requests that
/// would have ended them, and a test's offload check once waited seconds behind other tests' blocked offloads.
/// Here a job waits for another only when ``maxThreads`` are busy: an idle thread takes it, or a new one is
/// started; a thread idle for ``idleTimeout`` ends.
public final class BlockingThreads: @unchecked Sendable {
    /// The pool the engine's offloads and the client's requests share.
    public static let shared = BlockingThreads(name: "cloudlet.blocking")

    public let name: String
    /// Threads at most; beyond that, jobs queue (a burst of thousands of blocking reads must not become thousands
    /// of threads).
    public let maxThreads: Int
    public let idleTimeout: TimeInterval

    /// `@unchecked Sendable`: `jobs`, `idle` and `threads` are only touched under `condition`.
    private let condition = NSCondition()
    private var jobs = FIFO<@Sendable () -> Void>()
    private var idle = 0
    private var threads = 0

    public init(name: String, maxThreads: Int = 512, idleTimeout: TimeInterval = 30) {
        precondition(maxThreads > 0, "a pool needs a thread")
        self.name = name
        self.maxThreads = maxThreads
        self.idleTimeout = idleTimeout
    }

    /// Threads alive now (running a job or idle).
    public var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    /// Runs `work` on a thread of the pool and returns (or throws) what it returns; the calling task suspends
    /// meanwhile.
    public func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { c in
            submit { c.resume(returning: Result(catching: work)) }
        }
        return try result.get()
    }

    /// Runs `job` on a thread of the pool, without waiting for it.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        // An idle thread for every queued job, or one more thread (up to the cap).
        let start = idle < jobs.count && threads < maxThreads
        if start { threads += 1 } else { condition.signal() }
        condition.unlock()
        if start {
            Thread { [self] in loop() }.start()
        }
    }

    private func loop() {
        // Named from inside (see ThreadName): otherwise it keeps the name of the thread that started it.
        ThreadName.setCurrent(name)
        ThreadBridge.thread = .blocking
        condition.lock()
        while true {
            if let job = jobs.popFirst() {
                condition.unlock()
                job()
                condition.lock()
                continue
            }
            idle += 1
            let woke = condition.wait(until: Date(timeIntervalSinceNow: idleTimeout))
            idle -= 1
            if !woke && jobs.isEmpty { break }
        }
        threads -= 1
        condition.unlock()
    }
}
