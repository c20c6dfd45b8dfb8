extension Int {
    /// The smallest power of two that is at least `n` (1 for `n` ≤ 1): table and filter sizes whose `mod` is a mask.
    package static func powerOfTwo(atLeast n: Int) -> Int {
        n <= 1 ? 1 : 1 << (Int.bitWidth - (n - 1).leadingZeroBitCount)
    }
}
