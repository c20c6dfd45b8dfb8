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

    /// Runs `body` on each element in turn and returns each call's duration in seconds, in order.
    static func timeEach<S: Sequence>(_ elements: S, _ body: (S.Element) throws -> Void) rethrows -> [Double] {
        var durations: [Double] = []
        durations.reserveCapacity(elements.underestimatedCount)
        for e in elements { durations.append(try time { try body(e) }) }
        return durations
    }

    /// ``timeEach(_:_:)`` for an async `body` (a loop run in one task).
    static func timeEach<S: Sequence>(_ elements: S, _ body: (S.Element) async throws -> Void) async rethrows -> [Double] {
        var durations: [Double] = []
        durations.reserveCapacity(elements.underestimatedCount)
        for e in elements {
            let t = Stopwatch()
            try await body(e)
            durations.append(t.elapsed)
        }
        return durations
    }
}

/// CPU time spent, which a machine shared with other work inflates far less than wall time.
enum CPUClock {
    /// User and system CPU seconds of the process (`RUSAGE_SELF`) or of the calling thread (`RUSAGE_THREAD`, 1,
    /// which Glibc's module leaves out: it is declared only under `_GNU_SOURCE`).
    static func seconds(thread: Bool = false) -> Double {
        var usage = rusage()
        guard getrusage(thread ? 1 : __rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
