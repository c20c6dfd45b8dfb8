import Testing

@testable import CloudletCore

@Test("powerOfTwo(atLeast:) is the smallest power of two at least n")
func powerOfTwoAtLeast() {
    #expect(Int.powerOfTwo(atLeast: 0) == 1 && Int.powerOfTwo(atLeast: 1) == 1)
    for n in 2...5000 {
        let p = Int.powerOfTwo(atLeast: n)
        #expect(p >= n && p / 2 < n && p & (p - 1) == 0, "n = \(n): \(p)")
    }
}
