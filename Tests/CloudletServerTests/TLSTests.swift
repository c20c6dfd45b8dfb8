import Cloudlet
import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import CloudletServer

/// HTTPS on the front end (OpenSSL 3 through memory BIOs), checked with `curl --cacert` against a certificate made
/// for the test: TLS 1.2 and later, forward-secret AEAD suites only, HSTS on every answer.
@Suite struct TLSTests {
    /// Runs curl; returns (exit status, HTTP status, body).
    static func curl(_ args: [String]) async throws -> (status: Int32, http: Int, body: String) {
        let r = try await ChildProcess.run("/usr/bin/curl", ["-sS", "-w", "\n%{http_code}\n"] + args)
        let lines = r.out
        return (r.status, Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    /// A live server over HTTPS with a certificate made in `dir`; the certificate's path, for `curl --cacert`.
    static func httpsServer(_ dir: TempDir) async throws -> (LiveServer, cert: String) {
        let (cert, key) = try await TestCertificate.make(in: dir.path)
        let s = try await LiveServer.start { config in
            config.tlsCertificatePath = cert
            config.tlsKeyPath = key
        }
        return (s, cert)
    }

    @Test func servesHTTPSWithACertificateForItsAddress() async throws {
        let dir = TempDir("tls")
        let (s, cert) = try await Self.httpsServer(dir)
        try await withCleanup({ await s.shutdown() }) {
            #expect(s.server.url.hasPrefix("https://127.0.0.1:"))

            let health = try await Self.curl(["--cacert", cert, s.server.url + "/cloudlet/health"])
            #expect(health.status == 0 && health.http == 200 && health.body.contains(#""status":"ok""#), "\(health)")

            let n = unique("tls")
            let saved = try await Self.curl(["--cacert", cert, s.url("records/modify"), "-d", #"{"operations":[\#(createOp(n))]}"#])
            #expect(saved.http == 200 && saved.body.contains(#""recordName":"\#(n)""#), "\(saved)")
            let fetched = try await Self.curl(["--cacert", cert, s.url("records/lookup"), "-d", #"{"records":[{"recordName":"\#(n)"}]}"#])
            #expect(fetched.http == 200 && fetched.body.contains(#""recordChangeTag""#), "\(fetched)")

            // Without the CA the certificate is not trusted (curl exit 60); plain HTTP gets no answer.
            let untrusted = try await Self.curl([s.server.url + "/cloudlet/health"])
            #expect(untrusted.status == 60, "\(untrusted)")
            let plain = try await Self.curl([s.server.url.replacingOccurrences(of: "https:", with: "http:") + "/cloudlet/health"])
            #expect(plain.status != 0 && plain.http != 200, "\(plain)")
            // And the server is still fine after those.
            #expect(try await Self.curl(["--cacert", cert, s.server.url + "/cloudlet/health"]).http == 200)
            await s.shutdown()
        }
    }

    @Test func onlyTLS12AndLaterWithForwardSecretAEADSuitesAreOfferedAndAnswersCarryHSTS() async throws {
        let dir = TempDir("tls-suites")
        let (cert, key) = try await TestCertificate.make(in: dir.path)
        let s = try await LiveServer.start { config in
            config.tlsCertificatePath = cert
            config.tlsKeyPath = key
        }
        try await withCleanup({ await s.shutdown() }) {
            let health = s.server.url + "/cloudlet/health"
            let headers = try await ChildProcess.run("/usr/bin/curl", ["-sS", "-D", "-", "-o", "/dev/null", "--cacert", cert, health])
            #expect(headers.out.contains { $0.hasPrefix("Strict-Transport-Security: max-age=") }, "\(headers)")
            for good in ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305"] {
                let r = try await Self.curl(["--cacert", cert, "--tls-max", "1.2", "--ciphers", good, health])
                #expect(r.status == 0 && r.http == 200, "\(good): \(r)")
            }
            // No forward secrecy (RSA key exchange), CBC with SHA-1: refused in the handshake (curl exit 35).
            for bad in ["AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA", "AES256-SHA"] {
                let r = try await Self.curl(["--cacert", cert, "--tls-max", "1.2", "--ciphers", bad, health])
                #expect(r.status == 35, "\(bad): \(r)")
            }
            let old = try await Self.curl(["--cacert", cert, "--tlsv1.1", "--tls-max", "1.1", health])
            #expect(old.status != 0 && old.http != 200, "TLS 1.1: \(old)")
            let tls13 = try await Self.curl(["--cacert", cert, "--tlsv1.3", health])
            #expect(tls13.status == 0 && tls13.http == 200, "TLS 1.3: \(tls13)")
            await s.shutdown()
        }
    }

    @Test func anAssetUploadedAndDownloadedOverHTTPSIsByteExactWholeAndInPart() async throws {
        let dir = TempDir("tls-asset")
        let (s, cert) = try await Self.httpsServer(dir)
        try await withCleanup({ await s.shutdown() }) {
            var g = SeededRandom(seed: 15)
            let content = (0..<(6 << 20) + 777).map { _ in UInt8(truncatingIfNeeded: g.next() >> 7) }
            let source = dir.path + "/photo.bin"
            try Data(content).write(to: URL(fileURLWithPath: source))
            func json(_ args: [String]) async throws -> JSONValue {
                let r = try await Self.curl(["--cacert", cert] + args)
                #expect(r.status == 0 && r.http == 200, "\(r)")
                return try JSONParser.parse(Array(r.body.utf8))
            }
            let tokens = try await json([
                s.url("assets/upload"), "-d", #"{"tokens":[{"recordType":"Photo","fieldName":"image"}]}"#,
            ])
            let uploadURL = try #require(tokens["tokens"]?.arrayValue?.first?["url"]?.stringValue, "\(tokens)")
            let single = try #require(try await json([uploadURL, "--data-binary", "@" + source])["singleFile"])
            var w = JSONWriter()
            w.value(single)
            let saved = try await json([
                s.url("records/modify"), "-d",
                #"{"operations":[{"operationType":"create","record":{"recordName":"tls-photo","recordType":"Photo","fields":{"image":{"value":\#(String(decoding: w.bytes, as: UTF8.self)),"type":"ASSETID"}}}}]}"#,
            ])
            #expect(saved["records"]?.arrayValue?.first?["serverErrorCode"] == nil, "\(saved)")
            let found = try await json([s.url("records/lookup"), "-d", #"{"records":[{"recordName":"tls-photo"}]}"#])
            let url = try #require(
                found["records"]?.arrayValue?.first?["fields"]?["image"]?["value"]?["downloadURL"]?.stringValue, "\(found)"
            ).replacingOccurrences(of: "${f}", with: "photo.bin")
            let whole = try await ChildProcess.run("/usr/bin/curl", ["-sS", "--fail", "--cacert", cert, "-o", dir.path + "/whole", url])
            #expect(whole.status == 0, "\(whole)")
            let got = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path + "/whole")))
            #expect(got.count == content.count)
            #expect(SHA256Stream.hex(of: got) == SHA256Stream.hex(of: content))
            let part = try await ChildProcess.run(
                "/usr/bin/curl", ["-sS", "--fail", "--cacert", cert, "-r", "3000000-4999999", "-o", dir.path + "/part", url])
            #expect(part.status == 0, "\(part)")
            let gotPart = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path + "/part")))
            #expect(gotPart == Array(content[3_000_000..<5_000_000]))
            await s.shutdown()
        }
    }

    @Test func aStalledHandshakeIsDroppedAtTheHeaderTimeoutAndOthersAreServed() async throws {
        let dir = TempDir("tls-stall")
        let (cert, key) = try await TestCertificate.make(in: dir.path)
        var options = HTTPListener.Options()
        options.port = 0
        options.threads = 2
        options.headerTimeoutMs = 300
        options.tls = HTTPListener.TLSFiles(certificate: cert, key: key)
        let l = HTTPListener(options: options, log: { _ in }, handler: { _ in .text("ok") })
        try l.start()
        defer { l.stop() }
        // 100 connections that start a handshake (the first bytes of a ClientHello) and stall.
        let stalled = try (0..<100).map { _ in
            let s = try RawSocket(port: l.port, receiveTimeout: 10)
            try s.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            return s
        }
        let served = try await Self.curl(["--cacert", cert, "https://127.0.0.1:\(l.port)/"])
        #expect(served.status == 0 && served.body == "ok", "\(served)")
        // Each is closed by the server once the header timeout passes (not by the socket's own 10 s limit).
        for s in stalled.prefix(5) {
            let answer = s.readToEnd()
            #expect(answer.isEmpty && s.closedByServer, "\(answer)")
        }
    }

    @Test func aBadCertificateFailsToStartWithAReason() async throws {
        let dir = TempDir("tls-bad")
        let cert = dir.sub("cert.pem")
        try "not a certificate".write(toFile: cert, atomically: true, encoding: .utf8)
        let store = try await CloudletStore.open(at: dir.sub("store"), configuration: StoreConfiguration(durability: .os))
        var config = ServerConfiguration()
        config.port = 0
        config.log = nil
        config.tlsCertificatePath = cert
        config.tlsKeyPath = cert
        let server = try Server(store: store, configuration: config)
        do {
            try server.start()
            Issue.record("a server with a bad certificate started")
            server.stop()
        } catch let e as ServerSetupError {
            #expect(e.message.contains("cannot load TLS certificate \(cert)"), "\(e)")
        }
        var half = ServerConfiguration()
        half.tlsCertificatePath = cert
        #expect(throws: ServerSetupError.self) { _ = try Server(store: store, configuration: half) }
        try await store.close()
    }
}
