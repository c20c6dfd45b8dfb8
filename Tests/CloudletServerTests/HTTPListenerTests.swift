import Cloudlet
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// The listener on its own: handler threads, bodies, and stopping.
@Suite struct HTTPListenerTests {
    /// Starts a listener on port 0 whose handler answers with `respond`.
    static func listener(maxBody: Int = 1 << 20, _ respond: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws
        -> HTTPListener
    {
        var options = HTTPListener.Options()
        options.port = 0
        options.threads = 4
        options.maxBodySize = maxBody
        let l = HTTPListener(options: options, log: { _ in }, handler: respond)
        try l.start()
        return l
    }

    /// A started listener on port 0 that streams the bodies of paths under `/up/` to `respond`.
    static func streamingListener(_ respond: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws -> HTTPListener {
        var options = HTTPListener.Options()
        options.port = 0
        options.threads = 2
        options.streamedPathPrefix = "/up/"
        let l = HTTPListener(options: options, log: { _ in }, handler: respond)
        try l.start()
        return l
    }

    @Test func handlersRunOnThreadsWithAFullSizeStack() async throws {
        let l = try Self.listener { _ in .text(String(HTTPListener.currentThreadStackSize)) }
        defer { l.stop() }
        let r = try await HTTP.get("http://127.0.0.1:\(l.port)/")
        // The workers are made with a 4 MiB stack (the engine's recursion and Swift's frames need more than 100 KiB).
        #expect(Int(r.text) ?? 0 >= HTTPListener.workerStackSize, "\(r)")
        #expect(HTTPListener.workerStackSize == 4 << 20)
    }

    @Test func bodiesArriveWholeAndOversizedOnesAreFlagged() async throws {
        let l = try Self.listener(maxBody: 1000) { req in
            .text("\(req.method) \(req.path) \(req.query) \(req.body.count) \(req.oversizedBodyLength.map(String.init) ?? "-")")
        }
        defer { l.stop() }
        let base = "http://127.0.0.1:\(l.port)"
        #expect(try await HTTP.post(base + "/a/b?x=1&y=%2F", String(repeating: "q", count: 1000)).text == "POST /a/b x=1&y=%2F 1000 -")
        #expect(try await HTTP.post(base + "/big", String(repeating: "q", count: 1001)).text == "POST /big  0 1001")
        // A chunked body (no Content-Length) is bounded the same way.
        let chunked = try await ChildProcess.run(
            "/usr/bin/curl", ["-sS", "-H", "Transfer-Encoding: chunked", "--data-binary", String(repeating: "c", count: 900), base + "/c"])
        #expect(chunked.out.first == "POST /c  900 -", "\(chunked)")
        let tooLong = try await ChildProcess.run(
            "/usr/bin/curl", ["-sS", "-H", "Transfer-Encoding: chunked", "--data-binary", String(repeating: "c", count: 5000), base + "/c"])
        #expect(tooLong.out.first?.hasPrefix("POST /c  0 ") == true, "\(tooLong)")
    }

    /// A streamed body's handler gets full pieces: every read but the last fills its 256 KiB buffer, however the
    /// bytes arrived (the loop wakes the handler only once a piece is there, not once per socket read).
    @Test func aStreamedBodyIsReadInFullPieces() async throws {
        let l = try Self.streamingListener { req in
            guard let stream = req.bodyStream else { return .text("not streamed") }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 << 10, alignment: 16)
            defer { buffer.deallocate() }
            var sizes: [Int] = []
            while let n = try? stream.read(into: buffer), n > 0 { sizes.append(n) }
            return .text(sizes.map(String.init).joined(separator: ","))
        }
        defer { l.stop() }
        let size = 5 * (256 << 10) + 1000
        let r = try await HTTP.send("POST", "http://127.0.0.1:\(l.port)/up/x", body: [UInt8](repeating: 7, count: size))
        #expect(r.text == Array(repeating: String(256 << 10), count: 5).joined(separator: ",") + ",1000", "\(r.text)")
    }

    /// The loop reads a streamed body straight into the buffer the handler takes (`eh_body_take`), never past the
    /// body's end: every byte arrives once and in order, in pieces of at least what the handler asked for (at most
    /// what the loop reads ahead), and a request pipelined right behind the body on the same connection is read as a
    /// request of its own.
    @Test func aStreamedBodyIsTakenWholeAndTheNextRequestAfterIt() throws {
        let l = try Self.streamingListener { req in
            guard let stream = req.bodyStream else { return .text("plain \(String(decoding: req.body, as: UTF8.self))") }
            let hash = SHA256Stream()
            var sizes: [Int] = []
            while let piece = try? stream.nextPiece(atLeast: 256 << 10), piece.count > 0 {
                hash.update(piece)
                sizes.append(piece.count)
            }
            return .text("\(sizes.map(String.init).joined(separator: ",")) \(hash.finishHex())")
        }
        defer { l.stop() }
        var rng = SplitMix64(state: 8)
        let body = (0..<(3 * (256 << 10) + 12_345)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let connection = try BlockingHTTPConnection("http://127.0.0.1:\(l.port)")
        for _ in 0..<2 {  // twice: the connection is kept, and its second body goes the same way
            let answers = try connection.pipeline([("/up/x", body), ("/after", Array("next".utf8))])
            #expect(answers.map(\.status) == [200, 200])
            let answer = String(decoding: answers[0].body, as: UTF8.self).split(separator: " ")
            // Every piece but the last has the 256 KiB asked for, and none more than the 512 KiB the loop reads ahead.
            let pieces = answer.first?.split(separator: ",").compactMap { Int($0) } ?? []
            #expect(pieces.reduce(0, +) == body.count && pieces.allSatisfy { $0 <= 512 << 10 }, "\(pieces)")
            #expect(pieces.dropLast().allSatisfy { $0 >= 256 << 10 }, "\(pieces)")
            #expect(answer.last.map(String.init) == SHA256Stream.hex(of: body))
            #expect(String(decoding: answers[1].body, as: UTF8.self) == "plain next")
        }
    }

    @Test func queryParametersArePercentDecoded() {
        let r = HTTPRequest(method: "GET", path: "/", query: "a=1&ckAPIToken=ab%2Bc%3D&empty=&flag")
        #expect(r.queryParameter("ckAPIToken") == "ab+c=")
        #expect(r.queryParameter("a") == "1" && r.queryParameter("empty") == "" && r.queryParameter("flag") == "")
        #expect(r.queryParameter("missing") == nil)
        let prefixes = HTTPRequest(method: "GET", path: "/", query: "ckAPITokenX=1&&=v&ckAPI=2&ckAPIToken=t")
        #expect(prefixes.queryParameter("ckAPIToken") == "t" && prefixes.queryParameter("ckAPI") == "2")
        #expect(prefixes.queryParameter("") == "v")
    }

    @Test func stoppingTakesMillisecondsWithOrWithoutIdleConnections() async throws {
        let l = try Self.listener { _ in .text("ok") }
        let r = try await ChildProcess.run("/usr/bin/curl", ["-sS", "http://127.0.0.1:\(l.port)/"])  // closes its connection
        #expect(r.out.first == "ok")
        var started = ContinuousClock.now
        l.stop()
        #expect(ContinuousClock.now - started < .milliseconds(1000))
        l.stop()  // idempotent

        // A keep-alive connection left idle holds no worker: the loop closes it at once.
        let idle = try Self.listener { _ in .text("ok") }
        let connection = try BlockingHTTPConnection("http://127.0.0.1:\(idle.port)")
        #expect(try connection.post("/", "").status == 200)
        started = ContinuousClock.now
        idle.stop()
        #expect(ContinuousClock.now - started < .milliseconds(1000))
    }
}
