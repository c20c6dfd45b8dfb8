import Foundation
import Synchronization

/// Runs `count` real threads (not the two-thread cooperative pool, nor GCD's core-sized width) that start
/// together, and returns when all have finished. Blocking calls such as fsync belong on threads like these.
enum WorkerThreads {
    /// What the threads hand back; shared with them through the class reference.
    private final class Outcome<Result: Sendable>: Sendable {
        let results: Mutex<[Result?]>
        let firstError = Mutex<BenchError?>(nil)
        init(count: Int) { results = Mutex([Result?](repeating: nil, count: count)) }
    }

    /// Runs `body(worker)` for `worker` in `0..<count`, each on its own thread, all released at the same moment.
    /// Returns the seconds from release to the end of the last thread and each worker's result, in worker order.
    /// Throws the first error any thread threw (the others still run to their end).
    static func run<Result: Sendable>(
        count: Int, _ body: @escaping @Sendable (Int) throws -> Result
    ) throws -> (seconds: Double, results: [Result]) {
        let ready = DispatchGroup()
        let done = DispatchGroup()
        let start = DispatchSemaphore(value: 0)
        let outcome = Outcome<Result>(count: count)
        for worker in 0..<count {
            ready.enter()
            done.enter()
            let thread = Thread {
                ready.leave()
                start.wait()
                do {
                    let result = try body(worker)
                    outcome.results.withLock { $0[worker] = result }
                } catch {
                    let failure = error as? BenchError ?? BenchError(.engine, "worker \(worker): \(error)")
                    outcome.firstError.withLock { if $0 == nil { $0 = failure } }
                }
                done.leave()
            }
            thread.name = "bench-worker-\(worker)"
            thread.start()
        }
        ready.wait()
        let clock = Stopwatch()
        for _ in 0..<count { start.signal() }
        done.wait()
        let seconds = clock.elapsed
        if let error = outcome.firstError.withLock({ $0 }) { throw error }
        return (seconds, outcome.results.withLock { $0.compactMap { $0 } })
    }
}
