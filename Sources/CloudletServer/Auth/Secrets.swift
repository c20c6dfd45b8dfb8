import Cloudlet
import CloudletCore
import COpenSSL

/// Random secrets and their SHA-256 fingerprints (OpenSSL's `RAND_bytes` and EVP). Only fingerprints are stored.
enum Secrets {
    /// A new secret: 32 random bytes as 64 lowercase hex characters (the shape of a CloudKit API token).
    static func newToken() throws -> String { hex(try randomBytes(32)) }

    /// `count` bytes from OpenSSL's CSPRNG. - Throws: if the generator is not seeded (never on Linux with getrandom).
    static func randomBytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&out, Int32(count)) == 1 else {
            throw CloudletError(.internalError, "OpenSSL RAND_bytes failed: the random generator is not available")
        }
        return out
    }

    /// SHA-256 of the UTF-8 bytes of `secret`, as 64 lowercase hex characters.
    static func fingerprint(_ secret: String) -> String { hex(sha256(Array(secret.utf8))) }

    static func sha256(_ data: [UInt8]) -> [UInt8] {
        let s = SHA256Stream()
        s.update(data)
        return s.finish()
    }

    static func hex(_ bytes: [UInt8]) -> String { SHA256Stream.hex(bytes) }

    /// HMAC-SHA256 of `data` under `key` (OpenSSL's EVP_Q_mac).
    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let done = key.withUnsafeBytes { k in
            data.withUnsafeBytes { d in
                EVP_Q_mac(
                    nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count, d.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    d.count, &out, out.count, &length)
            }
        }
        precondition(done != nil && length == 32, "HMAC-SHA256 failed")
        return out
    }

    /// Compares secrets without stopping at the first difference (lengths are not secret).
    static func constantTimeEqual<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// Whether `s` looks like one of our secrets (64 hex characters); anything else is rejected before hashing.
    static func isWellFormed(_ s: String) -> Bool {
        s.utf8.count == 64 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}
