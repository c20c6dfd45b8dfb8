#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds (CLOCK_MONOTONIC); cheap enough to read around every operation.
struct Stopwatch {
    private let start: UInt64

    init() { start = Self.now() }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Seconds since `init`.
    var elapsed: Double { Double(Self.now() - start) / 1e9 }

    /// Runs `body` and returns how long it took, in seconds.
    static func time(_ body: () throws -> Void) rethrows -> Double {
        let t = Stopwatch()
        try body()
        return t.elapsed
    }
}
