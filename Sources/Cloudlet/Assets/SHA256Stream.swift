import COpenSSL

/// An incremental SHA-256 (OpenSSL's EVP interface): feed bytes as they arrive, read the digest once at the end.
/// Not thread-safe: one owner at a time.
package final class SHA256Stream {
    private let context: OpaquePointer

    package init() {
        context = EVP_MD_CTX_new()!
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "EVP_DigestInit_ex(SHA-256) failed")
    }

    deinit { EVP_MD_CTX_free(context) }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "EVP_DigestUpdate failed")
    }

    package func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The digest of everything fed so far. Call once.
    package func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var n: UInt32 = 0
        precondition(EVP_DigestFinal_ex(context, &out, &n) == 1 && n == 32, "EVP_DigestFinal_ex failed")
        return Array(out.prefix(32))
    }

    /// The digest as 64 lowercase hex digits (an asset's `fileChecksum`).
    package func finishHex() -> String { Self.hex(finish()) }

    /// SHA-256 of `bytes`, as 64 lowercase hex digits.
    package static func hex(of bytes: [UInt8]) -> String {
        let s = SHA256Stream()
        s.update(bytes)
        return s.finishHex()
    }

    private static let digits = Array("0123456789abcdef".utf8)

    package static func hex(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
