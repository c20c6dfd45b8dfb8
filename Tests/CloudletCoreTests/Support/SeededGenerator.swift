import Foundation

/// A small, seedable random number generator (SplitMix64) so property tests can be replayed from a printed seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The seed for a property test: `CLOUDLET_TEST_SEED` (decimal or 0x-hex) if set, otherwise a fresh random one.
    static func testSeed() -> UInt64 {
        if let text = ProcessInfo.processInfo.environment["CLOUDLET_TEST_SEED"] {
            let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            if let parsed { return parsed }
        }
        return UInt64.random(in: .min ... .max)
    }
}
