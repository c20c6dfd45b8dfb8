import CloudletCore
import CloudletTestSupport
import Testing

@testable import CloudletStorage

@Suite("CRC32C.combine")
struct CRC32CCombineTests {
    @Test("combining the checksums of two parts equals the checksum of the whole")
    func combineMatchesDirect() {
        var rng = SeededRandom(seed: 17)
        for length in [0, 1, 7, 8, 24, 100, 4096, 100_000] {
            let bytes = randomBytes(length, &rng)
            for split in Set([0, length / 3, length]) {
                let a = Array(bytes[..<split])
                let b = Array(bytes[split...])
                let combined = CRC32C.combine(CRC32C.checksum(a), CRC32C.checksum(b), lengthB: b.count)
                #expect(combined == CRC32C.checksum(bytes), "length \(length) split \(split)")
            }
        }
    }
}
