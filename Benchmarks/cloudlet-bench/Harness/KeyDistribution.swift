import CloudletCore

import Foundation

/// Which records a read or update workload touches, as a deterministic sequence of record indexes (the same on
/// every engine and every run). Sequences are built before the timed region.
enum KeyDistribution: Sendable, Equatable {
    /// Every index equally likely, drawn with replacement (LevelDB `readrandom`).
    case uniform
    /// Index of rank r drawn with probability ∝ 1/(r+1)^s (YCSB's Zipfian; s = 0.99 is YCSB's default), the ranks
    /// scattered over the indexes by a fixed permutation so that hot records are not the first ones loaded.
    case zipfian(s: Double)
    /// Each index once, in a shuffled order (`overwrite`: no record updated twice).
    case permutation

    /// `count` indexes in `0..<n`.
    func indexes(_ count: Int, of n: Int, seed: UInt64) -> [Int] {
        precondition(n > 0, "no records to choose from")
        var rng = SplitMix64(state: seed)
        switch self {
        case .uniform:
            return (0..<count).map { _ in Int(rng.next() % UInt64(n)) }
        case .zipfian(let s):
            let zipf = ZipfianGenerator(n: n, s: s)
            let scatter = Self.shuffled(n, &rng)
            return (0..<count).map { _ in scatter[zipf.next(&rng)] }
        case .permutation:
            precondition(count <= n, "a permutation of \(n) records has no \(count) distinct ones")
            return Array(Self.shuffled(n, &rng).prefix(count))
        }
    }

    /// 0..<n in Fisher–Yates order.
    static func shuffled(_ n: Int, _ rng: inout SplitMix64) -> [Int] {
        var a = Array(0..<n)
        for k in stride(from: n - 1, to: 0, by: -1) {
            a.swapAt(k, Int(rng.next() % UInt64(k + 1)))
        }
        return a
    }

    var label: String {
        switch self {
        case .uniform: "uniform"
        case .zipfian(let s): "Zipfian s=\(s)"
        case .permutation: "each once, shuffled"
        }
    }
}

/// Ranks `0..<n` with P(r) ∝ 1/(r+1)^s, by Gray et al.'s method ("Quickly generating billion-record synthetic
/// databases", SIGMOD 1994) as YCSB's `ZipfianGenerator` implements it: O(n) set-up, O(1) per draw, for s < 1.
struct ZipfianGenerator {
    let n: Int
    let s: Double
    private let zetaN: Double
    private let alpha: Double
    private let eta: Double
    private let halfPowS: Double

    init(n: Int, s: Double) {
        precondition(n >= 2 && s > 0 && s < 1, "Zipfian needs n ≥ 2 and 0 < s < 1")
        self.n = n
        self.s = s
        var zeta = 0.0
        for k in 1...n { zeta += 1 / pow(Double(k), s) }
        zetaN = zeta
        let zeta2 = 1 + 1 / pow(2, s)
        alpha = 1 / (1 - s)
        eta = (1 - pow(2 / Double(n), 1 - s)) / (1 - zeta2 / zeta)
        halfPowS = pow(0.5, s)
    }

    func next(_ rng: inout SplitMix64) -> Int {
        let u = Double(rng.next() >> 11) / Double(1 << 53)
        let uz = u * zetaN
        if uz < 1 { return 0 }
        if uz < 1 + halfPowS { return 1 }
        return min(n - 1, Int(Double(n) * pow(eta * u - eta + 1, alpha)))
    }
}
