import Foundation

/// Threads of the client's own for work that blocks for as long as a request takes: `curl_easy_perform` (up to a
/// long-poll's minute) and a notification websocket's read loop (as long as the stream lives).
///
/// Not Dispatch's queues (``ThreadBridge/offload(_:)``): on Linux their pool grows slowly past one thread a core,
/// so a few long-polls and websockets held every thread and the requests that would have ended them waited behind
/// them (found with several clients in one process). Here a job never waits for another: an idle thread takes it,
/// or a new one is started; a thread idle for 30 s ends.
final class RequestThreads: @unchecked Sendable {
    static let shared = RequestThreads()

    /// `@unchecked Sendable`: `jobs` and `idle` are only touched under `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var idle = 0

    /// Runs `work` on a thread of the pool and returns what it returns.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            submit { c.resume(with: Result(catching: work)) }
        }
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        // An idle thread for every queued job, or one more thread: a job never waits behind a running one.
        let start = idle < jobs.count
        if !start { condition.signal() }
        condition.unlock()
        if start {
            let t = Thread { [self] in loop() }
            t.name = "cloudlet.client"
            t.start()
        }
    }

    private func loop() {
        condition.lock()
        while true {
            if let job = jobs.first {
                jobs.removeFirst()
                condition.unlock()
                job()
                condition.lock()
                continue
            }
            idle += 1
            let woke = condition.wait(until: Date(timeIntervalSinceNow: 30))
            idle -= 1
            if !woke && jobs.isEmpty { break }
        }
        condition.unlock()
    }
}
