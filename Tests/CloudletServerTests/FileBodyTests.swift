import Cloudlet
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// Response bodies sent from a file by the front end's loop (`HTTPResponse.file`, `eh_conn_send_file`: how asset
/// downloads are sent): byte-exact over plain HTTP and TLS, ranges of a file, keep-alive afterwards, a slow reader
/// that holds no worker, a file shorter than promised, and a client that leaves in the middle.
@Suite struct FileBodyTests {
    /// A file of `count` seeded pseudo-random bytes in `dir`.
    static func makeFile(_ dir: TempDir, _ count: Int, seed: UInt64 = 7) throws -> (path: String, bytes: [UInt8]) {
        var g = SeededRandom(seed: seed)
        var bytes = [UInt8](repeating: 0, count: count)
        for i in 0..<count { bytes[i] = UInt8(truncatingIfNeeded: g.next() >> 13) }
        let path = dir.path + "/body.bin"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    /// A response whose body is `length` bytes of the file at `path` from `offset`.
    static func fileResponse(_ path: String, offset: Int64 = 0, length: Int64) -> HTTPResponse {
        var r = HTTPResponse(status: 200, contentType: "application/octet-stream", body: [])
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        precondition(fd >= 0, "open \(path): errno \(errno)")
        r.file = HTTPFileBody(descriptor: fd, offset: offset, length: length)
        return r
    }

    static func listener(
        tls: HTTPListener.TLSFiles? = nil, threads: Int = 2, _ respond: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws -> HTTPListener {
        var options = HTTPListener.Options()
        options.port = 0
        options.threads = threads
        options.tls = tls
        options.outputBufferBytes = 256 << 10
        // Longer than the test clients' 10 s receive timeout: a connection closed by the server here was not closed
        // for being idle or stalled.
        options.keepAliveTimeoutMs = 60_000
        let l = HTTPListener(options: options, log: { _ in }, handler: respond)
        try l.start()
        return l
    }

    /// Splits a raw answer into its head and its body bytes.
    static func split(_ raw: [UInt8]) -> (head: String, body: [UInt8]) {
        let marker: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = (0...(max(0, raw.count - 4))).first(where: { Array(raw[$0..<min(raw.count, $0 + 4)]) == marker }) else {
            return (String(decoding: raw, as: UTF8.self), [])
        }
        return (String(decoding: raw[..<end], as: UTF8.self), Array(raw[(end + 4)...]))
    }

    /// Reads from `s` until the server closes or `limit` bytes arrived, `piece` bytes per `recv`, sleeping `pause`
    /// microseconds between reads; `closed` when the read ended at the server's close (not the receive timeout).
    static func readWithEnd(_ s: RawSocket, limit: Int, piece: Int = 65536, pause: UInt32 = 0) -> (bytes: [UInt8], closed: Bool) {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: piece)
        while out.count < limit {
            let n = chunk.withUnsafeMutableBytes { recv(s.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return (out, n == 0 || errno == ECONNRESET) }
            out += chunk[0..<n]
            if pause > 0 { usleep(pause) }
        }
        return (out, false)
    }

    static func read(_ s: RawSocket, limit: Int, piece: Int = 65536, pause: UInt32 = 0) -> [UInt8] {
        readWithEnd(s, limit: limit, piece: piece, pause: pause).bytes
    }

    @Test(arguments: [false, true])
    func aFileBodyArrivesByteExactWholeAndInPartAndTheConnectionIsKeptAlive(tls: Bool) async throws {
        let dir = TempDir("file-body")
        // Not a multiple of the loop's 512 KiB read: the last piece is short.
        let (path, bytes) = try Self.makeFile(dir, (9 << 20) + 12_345)
        let files = tls ? try await TestCertificate.make(in: dir.path) : nil
        let l = try Self.listener(tls: files.map { HTTPListener.TLSFiles(certificate: $0.0, key: $0.1) }) { request in
            if request.path == "/part" { return Self.fileResponse(path, offset: 1_000_001, length: 5_000_000) }
            return Self.fileResponse(path, length: Int64(bytes.count))
        }
        defer { l.stop() }
        let scheme = tls ? "https" : "http"
        var args = ["-sS", "--fail"]
        if let files { args += ["--cacert", files.0] }
        // One curl, two URLs: the second request goes on the same connection after the first body.
        args += ["-o", dir.path + "/whole", "\(scheme)://127.0.0.1:\(l.port)/whole"]
        args += ["-o", dir.path + "/part", "\(scheme)://127.0.0.1:\(l.port)/part", "-w", "%{num_connects}\n"]
        let r = try await ChildProcess.run("/usr/bin/curl", args)
        #expect(r.status == 0, "\(r)")
        #expect(r.out == ["1", "0"], "connections opened per request: \(r.out)")
        let whole = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path + "/whole")))
        let part = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path + "/part")))
        #expect(whole.count == bytes.count)
        #expect(SHA256Stream.hex(of: whole) == SHA256Stream.hex(of: bytes))
        #expect(part.count == 5_000_000)
        #expect(part == Array(bytes[1_000_001..<6_000_001]))
    }

    @Test func aClientThatReadsSlowlyGetsEveryByteAndHoldsNoWorker() async throws {
        try await FrontEndTests.onThread { c in
            let dir = TempDir("file-body-slow")
            let (path, bytes) = try Self.makeFile(dir, 8 << 20)
            // One worker: if the slow download held it, the plain request below would never be answered.
            let l = try Self.listener(threads: 1) { request in
                request.path == "/file" ? Self.fileResponse(path, length: Int64(bytes.count)) : .text("ok")
            }
            defer { l.stop() }
            let slow = try RawSocket(port: l.port, receiveBuffer: 16 << 10)
            try slow.send("GET /file HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            usleep(200_000)  // its body is queued up to the output cap, and the client reads nothing yet
            let answer = try FrontEndTests.get(l.port, "/plain")
            c.expect(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("ok"), "while a download is stalled: \(answer)")
            // Now it reads, in small pieces with pauses, and gets every byte.
            let (head, body) = Self.split(Self.read(slow, limit: .max, piece: 16 << 10, pause: 200))
            c.expect(head.hasPrefix("HTTP/1.1 200 ") && head.contains("Content-Length: \(bytes.count)"), head)
            c.expect(body.count == bytes.count, "\(body.count) of \(bytes.count) bytes")
            c.expect(body == bytes, "the bytes differ")
        }
    }

    @Test func aFileShorterThanItsLengthClosesTheConnectionAndTheServerGoesOn() async throws {
        try await FrontEndTests.onThread { c in
            let dir = TempDir("file-body-short")
            let (path, bytes) = try Self.makeFile(dir, 700_000)
            let l = try Self.listener { request in
                request.path == "/file" ? Self.fileResponse(path, length: Int64(bytes.count) + 5_000) : .text("ok")
            }
            defer { l.stop() }
            let s = try RawSocket(port: l.port)
            try s.send("GET /file HTTP/1.1\r\nHost: test\r\n\r\n")  // keep-alive asked for: only the close ends it
            let got = Self.readWithEnd(s, limit: .max)
            let (head, body) = Self.split(got.bytes)
            c.expect(head.contains("Content-Length: \(bytes.count + 5_000)"), head)
            c.expect(body == bytes, "\(body.count) bytes")  // what the file had,
            c.expect(got.closed, "then the server closed the connection (not the client's receive timeout)")
            let answer = try FrontEndTests.get(l.port, "/plain")
            c.expect(answer.hasSuffix("ok"), answer)
        }
    }

    @Test func aClientThatLeavesInTheMiddleReleasesTheFile() async throws {
        try await FrontEndTests.onThread { c in
            let dir = TempDir("file-body-leave")
            let path = dir.path + "/sparse.bin"
            let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
            c.expect(fd >= 0 && ftruncate(fd, 256 << 20) == 0, "making the file")
            close(fd)
            let opened = Mutex<Int32>(-1)
            let l = try Self.listener { request in
                guard request.path == "/file" else { return .text("ok") }
                var r = HTTPResponse(status: 200, contentType: "application/octet-stream", body: [])
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                opened.withLock { $0 = fd }
                r.file = HTTPFileBody(descriptor: fd, offset: 0, length: 256 << 20)
                return r
            }
            defer { l.stop() }
            do {
                let s = try RawSocket(port: l.port)
                try s.send("GET /file HTTP/1.1\r\nHost: test\r\n\r\n")
                let got = Self.read(s, limit: 2 << 20)
                c.expect(got.count >= 2 << 20, "\(got.count) bytes before leaving")
            }  // closed here, 254 MiB early
            let descriptor = opened.withLock { $0 }
            // The loop notices at its next write and closes the file: its descriptor no longer names it.
            func stillOpen() -> Bool {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")) == path
            }
            for _ in 0..<200 where stillOpen() { usleep(50_000) }
            c.expect(!stillOpen(), "descriptor \(descriptor) still open on the file")
            let answer = try FrontEndTests.get(l.port, "/plain")
            c.expect(answer.hasSuffix("ok"), answer)
        }
    }
}
