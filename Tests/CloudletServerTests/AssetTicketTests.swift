import Testing

@testable import CloudletServer

/// The signed tickets of asset URLs and receipts, and the `Range` header's parsing.
@Suite struct AssetTicketTests {
    private let signer = AssetSigner(key: Array(repeating: 7, count: 32))

    private func ticket(_ kind: AssetTicket.Kind, expires: Int64 = AssetSigner.now() + 60_000) -> AssetTicket {
        var t = AssetTicket(
            kind: kind, expires: expires, container: "iCloud.com.example.a", environment: "development",
            database: "private", owner: "alice", user: "alice")
        t.zone = "Photos"
        t.recordType = "Photo"
        t.field = "image"
        t.checksum = String(repeating: "ab", count: 32)
        t.size = 12
        return t
    }

    @Test func aSignedTicketVerifiesAndKeepsWhatItBinds() throws {
        let t = ticket(.receipt)
        let back = try signer.verify(signer.sign(t), kind: .receipt).get()
        #expect(back == t)
    }

    @Test func anotherKeyAKindOrAnyChangedCharacterIsNotGenuine() {
        let token = signer.sign(ticket(.upload))
        #expect(AssetSigner(key: Array(repeating: 8, count: 32)).verify(token, kind: .upload) == .failure(.notGenuine))
        #expect(signer.verify(token, kind: .receipt) == .failure(.notGenuine))
        #expect(signer.verify(token, kind: .download) == .failure(.notGenuine))
        for i in [0, 5, token.count / 2, token.count - 3] {
            var chars = Array(token)
            chars[i] = chars[i] == "x" ? "y" : "x"
            #expect(signer.verify(String(chars), kind: .upload) == .failure(.notGenuine), "character \(i) changed")
        }
        #expect(signer.verify("", kind: .upload) == .failure(.notGenuine))
        #expect(signer.verify(token + ".x", kind: .upload) == .failure(.notGenuine))
    }

    /// The signature's last character carries bits past the 32 bytes, which a lenient decoder ignores: then some
    /// other characters there decoded to the same signature and a changed URL still worked (a CI run's forged URL
    /// was served). Only the canonical spelling is accepted: any other last character is refused.
    @Test func everyOtherLastCharacterIsRefused() {
        let token = signer.sign(ticket(.download))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for c in alphabet where c != token.last {
            #expect(signer.verify(String(token.dropLast()) + String(c), kind: .download) == .failure(.notGenuine), "last character \(c)")
        }
        #expect((try? signer.verify(token, kind: .download).get()) != nil)
    }

    @Test func anExpiredTicketSaysWhen() {
        let t = ticket(.download, expires: 1_000)
        #expect(signer.verify(signer.sign(t), kind: .download) == .failure(.expired(at: 1_000)))
    }

    @Test(arguments: [
        ("bytes=0-9", AssetTransfer.ByteRange.part(0..<10)),
        ("bytes=90-", .part(90..<100)),
        ("bytes=95-200", .part(95..<100)),
        ("bytes=-10", .part(90..<100)),
        ("bytes=-500", .part(0..<100)),
        ("bytes=100-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=5-2", .whole),
        ("bytes=0-1,5-6", .whole),
        ("items=0-1", .whole),
        ("bytes=x-", .whole),
    ])
    func rangeHeaders(header: String, expected: AssetTransfer.ByteRange) {
        #expect(AssetTransfer.byteRange(header, size: 100) == expected)
    }
}
