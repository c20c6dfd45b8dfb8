import Foundation
import Testing

/// Runs `body` with a fresh directory under the temp dir (mkdtemp), removed afterwards.
func withTempDirectory<R>(_ body: (String) async throws -> R) async rethrows -> R {
    var template = Array((NSTemporaryDirectory() + "cloudlet-storage-XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let made = mkdtemp(buffer.baseAddress!) else { fatalError("mkdtemp failed: errno \(errno)") }
        return String(cString: made)
    }
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

/// A small deterministic generator (SplitMix64), so a failure reproduces from the seed among its test arguments.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `count` random (incompressible) bytes.
func randomBytes(_ count: Int, _ rng: inout SeededRandom) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}
