import COpenSSL
import CloudletCore
import Foundation

/// A server-to-server key: the key ID the server gave for its public half (`cloudlet key add`) and the ECDSA P-256
/// private key. A client made with one signs every request the way CloudKit's server-to-server clients do —
/// `X-Apple-CloudKit-Request-KeyID`, `X-Apple-CloudKit-Request-ISO8601Date` and `X-Apple-CloudKit-Request-SignatureV1`,
/// the base64 ECDSA-SHA256 signature of `date:base64(sha256(body)):subpath` (the path from `/database/`) — and
/// acts on the container's public database as its developer.
///
/// `@unchecked Sendable`: the `EVP_PKEY` is never changed after init, and each signature has its own context.
public final class ServerKey: @unchecked Sendable {
    public let keyID: String
    private let key: OpaquePointer

    /// - Parameter privateKeyPEM: the private key as `openssl ecparam -name prime256v1 -genkey` writes it (SEC1 `EC
    ///   PRIVATE KEY` or PKCS#8 `PRIVATE KEY`). - Throws: `invalidArguments` when it is not a P-256 private key.
    public init(keyID: String, privateKeyPEM: String) throws {
        self.keyID = keyID
        let bytes = Array(privateKeyPEM.utf8)
        let parsed: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let parsed else {
            throw CloudletError(.invalidArguments, "the server key is not a PEM private key (openssl ecparam -name prime256v1 -genkey)")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_is_a(parsed, "EC") == 1, EVP_PKEY_get_group_name(parsed, &name, name.count, &length) == 1,
            String(cString: name) == "prime256v1"
        else {
            EVP_PKEY_free(parsed)
            throw CloudletError(.invalidArguments, "the server key is not an ECDSA P-256 (prime256v1) key")
        }
        key = parsed
    }

    deinit { EVP_PKEY_free(key) }

    /// The three headers for a request with `body` to `subpath` (from `/database/`), signed now.
    func headers(body: [UInt8], subpath: String, now: Date = Date()) throws -> [(name: String, value: String)] {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        let date = formatter.string(from: now)
        var digest = [UInt8](repeating: 0, count: 32)
        _ = body.withUnsafeBufferPointer { SHA256($0.baseAddress, $0.count, &digest) }
        let message = Array("\(date):\(Base64.encode(digest)):\(subpath)".utf8)
        return [
            ("X-Apple-CloudKit-Request-KeyID", keyID), ("X-Apple-CloudKit-Request-ISO8601Date", date),
            ("X-Apple-CloudKit-Request-SignatureV1", Base64.encode(try sign(message))),
        ]
    }

    /// A DER ECDSA-SHA256 signature of `message`.
    private func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw CloudletError(.internalError, "EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, key) == 1 else {
            throw CloudletError(.internalError, "EVP_DigestSignInit failed")
        }
        var length = 0
        guard EVP_DigestSign(ctx, nil, &length, message, message.count) == 1 else {
            throw CloudletError(.internalError, "EVP_DigestSign (length) failed")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(ctx, &signature, &length, message, message.count) == 1 else {
            throw CloudletError(.internalError, "EVP_DigestSign failed")
        }
        return Array(signature[..<length])
    }
}
