import Dispatch

/// Runs blocking work (file I/O, fsync, recovery) off Swift's cooperative thread pool, which has only as many
/// threads as cores: a blocked cooperative thread stalls every task.
enum BlockingIO {
    private static let queue = DispatchQueue(label: "cloudlet.blocking-io", attributes: .concurrent)

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { c in
            queue.async { c.resume(with: Result { try work() }) }
        }
    }
}
