import CloudletConcurrency

/// The engine's name for ``ThreadBridge/offload(_:)``: blocking work (file I/O, fsync, recovery) runs off Swift's
/// cooperative thread pool, which has only as many threads as cores.
enum BlockingIO {
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await ThreadBridge.offload(work)
    }
}
