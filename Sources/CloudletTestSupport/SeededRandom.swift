import CloudletCore
import Foundation

/// The seeded, reproducible random number generator of the tests: CloudletCore's ``SplitMix64``, so that a failure
/// replays from the seed it prints.
public typealias SeededRandom = SplitMix64

extension SeededRandom {
    /// The seed for a property test: `CLOUDLET_TEST_SEED` (decimal or 0x-hex) if set, otherwise a fresh random one.
    public static func testSeed() -> UInt64 {
        if let text = ProcessInfo.processInfo.environment["CLOUDLET_TEST_SEED"] {
            let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            if let parsed { return parsed }
        }
        return UInt64.random(in: .min ... .max)
    }

    /// A number in `0..<n`.
    public mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    /// True `percent` times in 100.
    public mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
    /// One element of a non-empty array.
    public mutating func pick<T>(_ xs: [T]) -> T { xs[int(xs.count)] }
    /// Each element with probability ½, in order.
    public mutating func subset<T>(_ xs: [T]) -> [T] { xs.filter { _ in chance(50) } }
}
