import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

/// Bit-at-a-time CRC-32C, the definition the table-driven implementation must agree with.
func referenceCRC32C(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        crc ^= UInt32(b)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    return ~crc
}

@Suite("CRC32C")
struct CRC32CTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        let crc: UInt32
        var testDescription: String { name }
    }

    /// RFC 3720 (iSCSI) appendix B.4 and the usual check value.
    static let vectors: [Vector] = [
        Vector(name: "empty", bytes: [], crc: 0),
        Vector(name: "\"123456789\"", bytes: Array("123456789".utf8), crc: 0xE306_9283),
        Vector(name: "32 zero bytes", bytes: [UInt8](repeating: 0, count: 32), crc: 0x8A91_36AA),
        Vector(name: "32 0xFF bytes", bytes: [UInt8](repeating: 0xFF, count: 32), crc: 0x62A8_AB43),
        Vector(name: "32 ascending bytes", bytes: Array(0..<32), crc: 0x46DD_794E),
        Vector(name: "32 descending bytes", bytes: Array((0..<32).reversed()), crc: 0x113F_DB5C),
    ]

    @Test("known vectors", arguments: vectors)
    func knownVectors(_ v: Vector) {
        #expect(CRC32C.checksum(v.bytes) == v.crc, "0x\(String(CRC32C.checksum(v.bytes), radix: 16))")
        #expect(referenceCRC32C(v.bytes) == v.crc, "the reference implementation itself")
        #expect(v.bytes.withUnsafeBytes { CRC32C.softwareChecksum($0) } == v.crc, "the tables")
    }

    @Test("the CPU's instructions are used exactly when the CPU says it has them")
    func hardwareDetection() throws {
        #if arch(x86_64)
            let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
            let flags = cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") } ?? ""
            #expect(CRC32C.usesHardware == flags.split(separator: " ").contains("sse4_2"))
        #elseif arch(arm64)
            let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
            let features = cpuinfo.split(separator: "\n").first { $0.hasPrefix("Features") } ?? ""
            #expect(CRC32C.usesHardware == features.split(separator: " ").contains("crc32"))
        #else
            #expect(!CRC32C.usesHardware)
        #endif
    }

    @Test("the CPU's instructions and the tables agree at every length, alignment and starting value")
    func hardwareMatchesTables() {
        var g = SeededRandom(seed: 11)
        let data = (0..<600).map { _ in UInt8.random(in: 0...255, using: &g) }
        data.withUnsafeBytes { all in
            for start in 0..<16 {
                for length in 0...(all.count - start) where length < 70 || length % 13 == 0 {
                    let piece = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    let from = UInt32.random(in: 0...UInt32.max, using: &g)
                    #expect(
                        CRC32C.checksum(piece, continuing: from) == CRC32C.softwareChecksum(piece, continuing: from),
                        "start \(start), length \(length), from \(from) (hardware: \(CRC32C.usesHardware))")
                }
            }
        }
    }

    @Test("array, slice and raw-buffer overloads agree")
    func overloads() {
        let bytes = Array("The quick brown fox jumps over the lazy dog".utf8)
        let whole = CRC32C.checksum(bytes)
        #expect(CRC32C.checksum(bytes[...]) == whole)
        #expect(bytes.withUnsafeBytes { CRC32C.checksum($0) } == whole)
        // A slice that does not start at index 0.
        let padded = [0xAA, 0xBB] + bytes + [0xCC]
        #expect(CRC32C.checksum(padded[2..<(2 + bytes.count)]) == whole)
    }

    @Test("the slicing-by-8 tables agree with the bitwise definition at every length and alignment")
    func matchesReference() {
        var g = SeededRandom(seed: 7)
        let data = (0..<300).map { _ in UInt8.random(in: 0...255, using: &g) }
        for start in 0..<8 {
            for length in 0...(data.count - start) where length < 40 || length % 17 == 0 {
                let piece = Array(data[start..<(start + length)])
                #expect(
                    CRC32C.checksum(data[start..<(start + length)]) == referenceCRC32C(piece),
                    "start \(start), length \(length)")
                #expect(
                    piece.withUnsafeBytes { CRC32C.softwareChecksum($0) } == referenceCRC32C(piece),
                    "tables: start \(start), length \(length)")
            }
        }
    }

    @Test("checksumming in pieces equals one shot, at random split points")
    func incremental() {
        let seed = SeededRandom.testSeed()
        var g = SeededRandom(seed: seed)
        for round in 0..<200 {
            let count = Int.random(in: 0...2_000, using: &g)
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &g) }
            let whole = CRC32C.checksum(bytes)
            let cuts = (0..<Int.random(in: 1...5, using: &g)).map { _ in Int.random(in: 0...count, using: &g) }.sorted()
            var crc: UInt32 = 0
            var from = 0
            for cut in cuts + [count] {
                crc = CRC32C.checksum(bytes[from..<cut], continuing: crc)
                from = cut
            }
            #expect(crc == whole, "round \(round), \(count) bytes cut at \(cuts), CLOUDLET_TEST_SEED=\(seed)")
        }
    }

    @Test("a single flipped bit changes the checksum")
    func detectsBitFlips() {
        let bytes = Array(repeating: UInt8(0x5A), count: 64)
        let good = CRC32C.checksum(bytes)
        for bit in 0..<(bytes.count * 8) {
            var bad = bytes
            bad[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(CRC32C.checksum(bad) != good, "bit \(bit)")
        }
    }
}
