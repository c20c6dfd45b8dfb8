import Dispatch
import Synchronization

/// Calls the async engine from civetweb's threads: starts a task and blocks the calling thread until it is done.
///
/// Only for threads we own (civetweb workers, the CLI's main thread before it enters async code): blocking a
/// thread of Swift's cooperative pool, which has one thread per core, would stall every task.
enum EngineBridge {
    static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = ResultBox<T>()
        Task {
            do { box.finish(.success(try await body())) } catch { box.finish(.failure(error)) }
        }
        return try box.wait()
    }
}

/// One task's result, handed to the thread waiting for it.
private final class ResultBox<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(_ r: Result<T, any Error>) {
        result.withLock { $0 = r }
        done.signal()
    }

    func wait() throws -> T {
        done.wait()
        return try result.withLock { $0! }.get()
    }
}
