import Cloudlet
import COpenSSL

/// An ECDSA P-256 public key (a CloudKit server-to-server key), parsed and checked by OpenSSL.
///
/// `@unchecked Sendable`: the `EVP_PKEY` is never changed after init; OpenSSL allows concurrent verifications with
/// one key (each has its own `EVP_MD_CTX`).
final class ECPublicKey: @unchecked Sendable {
    private let key: OpaquePointer
    /// The key's DER `SubjectPublicKeyInfo`.
    let der: [UInt8]

    /// Parses a PEM public key (`-----BEGIN PUBLIC KEY-----`, as `openssl ec -pubout` writes it).
    /// - Throws: `invalidArguments` naming what is wrong: not a PEM public key, not EC, not P-256.
    init(pem: String) throws {
        let bytes = Array(pem.utf8)
        let parsed: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        ERR_clear_error()
        guard let parsed else {
            throw CloudletError.invalid(
                "the key is not a PEM public key (-----BEGIN PUBLIC KEY-----); make one from the private key with "
                    + "`openssl ec -in eckey.pem -pubout`")
        }
        guard EVP_PKEY_is_a(parsed, "EC") == 1 else {
            EVP_PKEY_free(parsed)
            throw CloudletError.invalid("the key is not an elliptic-curve key; server-to-server keys are ECDSA P-256 (prime256v1)")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(parsed, &name, name.count, &length) == 1,
            ["prime256v1", "P-256", "secp256r1"].contains(String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        else {
            EVP_PKEY_free(parsed)
            throw CloudletError.invalid("the key is not on curve P-256 (prime256v1); server-to-server keys are ECDSA P-256")
        }
        let size = i2d_PUBKEY(parsed, nil)
        var der = [UInt8](repeating: 0, count: Int(max(size, 0)))
        let written = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = buf.baseAddress
            return i2d_PUBKEY(parsed, &p)
        }
        guard size > 0, written == size else {
            EVP_PKEY_free(parsed)
            throw CloudletError(.internalError, "OpenSSL could not encode the public key")
        }
        key = parsed
        self.der = der
    }

    deinit { EVP_PKEY_free(key) }

    /// The key ID Cloudlet gives the key: the SHA-256 of its DER encoding, 64 lowercase hex digits (the shape of
    /// CloudKit's key IDs), so adding the same key twice names it the same.
    var keyID: String { Secrets.hex(Secrets.sha256(der)) }

    /// Whether `signature` (DER ECDSA, as `openssl dgst -sha256 -sign` and CloudKit's clients make it) is this key's
    /// ECDSA-SHA256 signature of `message`.
    func verify(signature: [UInt8], of message: [UInt8]) -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(ctx)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
    }
}
