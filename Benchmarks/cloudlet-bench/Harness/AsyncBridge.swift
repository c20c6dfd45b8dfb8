import Dispatch
import Synchronization

/// Runs async engine work from a benchmark thread (never a cooperative-pool thread) and waits for its result: the
/// one bridge every Cloudlet-side engine and workload uses.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let r: Result<T, any Error>
        do { r = .success(try await body()) } catch { r = .failure(error) }
        box.withLock { $0 = r }
        done.signal()
    }
    done.wait()
    return try box.withLock { $0! }.get()
}
