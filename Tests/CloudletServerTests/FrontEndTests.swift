import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import CloudletServer

/// The event-driven front end under abuse: request framing (smuggling), timeouts for headers and bodies, the
/// per-peer connection cap, connections that hold no thread (slowloris, websockets, long polls), and clients that
/// never read their answers.
@Suite struct FrontEndTests {
    /// A listener on port 0 with 2 workers (so that anything holding a worker shows), answering with `respond`.
    static func listener(
        _ configure: (inout HTTPListener.Options) -> Void = { _ in }, webSockets: [WebSocketEndpoint] = [],
        respond: @escaping @Sendable (HTTPRequest) -> HTTPResponse = { _ in .text("ok") }
    ) throws -> HTTPListener {
        var options = HTTPListener.Options()
        options.port = 0
        options.threads = 2
        configure(&options)
        let l = HTTPListener(options: options, log: { _ in }, webSockets: webSockets, handler: respond)
        try l.start()
        return l
    }

    /// Runs `body` (blocking socket calls) on a thread of its own, not on the cooperative pool, which the listener's
    /// pushers and long polls need; what `body` checks is recorded as the test's issues once it returns (an
    /// `#expect` on another thread would not be attributed to the test).
    static func onThread(_ body: @escaping @Sendable (Checks) throws -> Void) async throws {
        let checks = Checks()
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, Error>) in
            Thread.detachNewThread {
                do {
                    try body(checks)
                    done.resume()
                } catch {
                    done.resume(throwing: error)
                }
            }
        }
        for (message, location) in checks.failures { Issue.record(Comment(rawValue: message), sourceLocation: location) }
    }

    /// Expectations checked off the test's task.
    final class Checks: Sendable {
        private let recorded = Mutex<[(String, SourceLocation)]>([])

        func expect(_ condition: Bool, _ message: @autoclosure () -> String = "", sourceLocation: SourceLocation = #_sourceLocation) {
            guard !condition else { return }
            let text = "Expectation failed" + (message().isEmpty ? "" : ": " + message())
            recorded.withLock { $0.append((text, sourceLocation)) }
        }

        var failures: [(String, SourceLocation)] { recorded.withLock { $0 } }
    }

    /// The paths the handler was called for.
    final class Seen: Sendable {
        private let paths = Mutex<[String]>([])
        func add(_ p: String) { paths.withLock { $0.append(p) } }
        var all: [String] { paths.withLock { $0 } }
    }

    /// A GET on a new connection that closes; the whole answer.
    static func get(_ port: Int, _ path: String = "/", source: String? = nil) throws -> String {
        let s = try RawSocket(port: port, source: source)
        try s.send("GET \(path) HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        return s.readToEnd()
    }

    struct Framing: Sendable, CustomTestStringConvertible {
        var name: String
        var request: String
        var status: Int
        var testDescription: String { name }
    }

    static let smuggled = "GET /smuggled HTTP/1.1\r\nHost: test\r\n\r\n"

    static let framings: [Framing] = [
        Framing(
            name: "two different Content-Length headers",
            request: "POST /a HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 44\r\n\r\nhello" + smuggled,
            status: 400),
        Framing(
            name: "two equal Content-Length headers",
            request: "POST /a HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello" + smuggled,
            status: 400),
        Framing(
            name: "Content-Length with Transfer-Encoding: chunked",
            request: "POST /a HTTP/1.1\r\nHost: test\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
            status: 400),
        Framing(
            name: "a Transfer-Encoding other than chunked",
            request: "POST /a HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: gzip\r\n\r\n" + smuggled, status: 400),
        Framing(
            name: "a Content-Length after the 100th header line",
            request: "POST /a HTTP/1.1\r\nHost: test\r\n" + (0..<100).map { "X-\($0): y\r\n" }.joined()
                + "Content-Length: 44\r\n\r\n" + smuggled,
            status: 431),
        Framing(
            name: "headers past 32 KiB",
            request: "GET /a HTTP/1.1\r\nHost: test\r\nX-Big: \(String(repeating: "b", count: 40_000))\r\n\r\n", status: 431),
        Framing(name: "a request line without a version (HTTP/0.9)", request: "GET /a\r\n\r\n", status: 505),
        Framing(name: "HTTP/2.0 in an HTTP/1 request line", request: "GET /a HTTP/2.0\r\nHost: test\r\n\r\n", status: 505),
        Framing(name: "an unknown method", request: "BREW /a HTTP/1.1\r\nHost: test\r\n\r\n", status: 400),
        Framing(name: "a space in a header name", request: "GET /a HTTP/1.1\r\nHost: test\r\nBad Name: x\r\n\r\n", status: 400),
        Framing(
            name: "a chunk size that is not hex",
            request: "POST /a HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", status: 400),
        Framing(name: "an Expect other than 100-continue", request: "GET /a HTTP/1.1\r\nHost: test\r\nExpect: tea\r\n\r\n", status: 417),
    ]

    @Test(arguments: framings)
    func malformedFramingGetsAJSONErrorAndNothingRuns(_ framing: Framing) async throws {
        try await Self.onThread { c in
            let seen = Seen()
            let l = try Self.listener(respond: { r in
                seen.add(r.path)
                return .text("ok")
            })
            defer { l.stop() }
            let s = try RawSocket(port: l.port)
            try s.send(framing.request)
            let answer = s.readToEnd()  // and the server closes the connection
            c.expect(answer.hasPrefix("HTTP/1.1 \(framing.status) "), "\(answer)")
            c.expect(answer.contains("Content-Type: application/json"), "\(answer)")
            c.expect(answer.contains(#""serverErrorCode":"BAD_REQUEST","reason":""#), "\(answer)")
            c.expect(answer.contains("Connection: close"), "\(answer)")
            c.expect(seen.all.isEmpty, "the handler ran for \(seen.all)")
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrderAndHeadGetsNoBody() async throws {
        try await Self.onThread { c in
            let l = try Self.listener(respond: { r in .text("\(r.method) \(r.path) \(r.body.count)") })
            defer { l.stop() }
            let s = try RawSocket(port: l.port)
            try s.send(
                "GET /one HTTP/1.1\r\nHost: test\r\n\r\nHEAD /two HTTP/1.1\r\nHost: test\r\n\r\n"
                    + "POST /three HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
            let answers = s.readToEnd()
            let expected =
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 10\r\n\r\nGET /one 0"
                + "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 11\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: close\r\n\r\n"
                + "POST /three 3"
            c.expect(answers == expected, "\(answers)")
        }
    }

    @Test func expect100ContinueIsAnsweredBeforeTheBodyIsSent() async throws {
        try await Self.onThread { c in
            let l = try Self.listener(respond: { r in .text(String(decoding: r.body, as: UTF8.self)) })
            defer { l.stop() }
            let s = try RawSocket(port: l.port)
            try s.send("POST /a HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
            let interim = s.read(until: "\r\n\r\n")
            c.expect(interim == "HTTP/1.1 100 Continue\r\n\r\n", "\(interim)")
            try s.send("hello")
            let answer = s.readToEnd()
            c.expect(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("hello"), "\(answer)")
        }
    }

    @Test func aBodyShorterThanAnnouncedTimesOutWithTheBodyTimeout() async throws {
        try await Self.onThread { c in
            let seen = Seen()
            let l = try Self.listener({ $0.bodyTimeoutMs = 300 }, respond: { r in
                seen.add(r.path)
                return .text("ok")
            })
            defer { l.stop() }
            let s = try RawSocket(port: l.port, receiveTimeout: 10)
            try s.send("POST /a HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000\r\n\r\n0123456789")
            let answer = s.readToEnd()  // the socket gives up after 10 s: the body timeout must come first
            c.expect(answer.hasPrefix("HTTP/1.1 408 ") && s.closedByServer, "\(answer)")
            c.expect(answer.contains(#""serverErrorCode":"REQUEST_TIMEOUT""#), "\(answer)")
            c.expect(seen.all.isEmpty)
        }
    }

    @Test func halfSentHeadersTimeOutWithTheHeaderTimeout() async throws {
        try await Self.onThread { c in
            let l = try Self.listener { $0.headerTimeoutMs = 300 }
            defer { l.stop() }
            let s = try RawSocket(port: l.port, receiveTimeout: 10)
            try s.send("GET /a HTTP/1.1\r\nHost: test\r\nX-Slow: ")
            let answer = s.readToEnd()
            c.expect(answer.hasPrefix("HTTP/1.1 408 "), "\(answer)")
            c.expect(answer.contains(#""serverErrorCode":"REQUEST_TIMEOUT""#), "\(answer)")
        }
    }

    @Test("the timeout sweep looks at a few connections per tick, round robin, and still times out every one, also as others leave")
    func aSweepInSlicesStillTimesOutEveryConnection() async throws {
        try await Self.onThread { c in
            // 4 connections a 100 ms tick, 40 half-sent requests: each is looked at once a second.
            let l = try Self.listener {
                $0.headerTimeoutMs = 300
                $0.keepAliveTimeoutMs = 60_000
                $0.sweepBudget = 4
            }
            defer { l.stop() }
            var held: [RawSocket] = []
            for i in 0..<40 {
                let s = try RawSocket(port: l.port, receiveTimeout: 20)
                try s.send("GET /slow\(i) HTTP/1.1\r\nHost: test\r\nX-Slow: ")
                held.append(s)
            }
            // Then 8 keep-alive connections with nothing due for a minute, ahead of the slow ones in the server's
            // list: a sweep that started over from the head each tick would never get past them.
            var idle: [RawSocket] = []
            for i in 0..<8 {
                let s = try RawSocket(port: l.port, receiveTimeout: 20)
                try s.send("GET /idle\(i) HTTP/1.1\r\nHost: test\r\n\r\n")
                c.expect(s.read(until: "ok").hasPrefix("HTTP/1.1 200 "))
                idle.append(s)
            }
            // Every fifth client leaves: its connection unlinks, wherever the sweep's place is.
            var left = Set<Int>()
            for i in stride(from: 0, to: 40, by: 5) {
                _ = shutdown(held[i].fd, Int32(SHUT_RDWR))
                left.insert(i)
            }
            for (i, s) in held.enumerated() where !left.contains(i) {
                let answer = s.readToEnd()
                c.expect(answer.hasPrefix("HTTP/1.1 408 "), "connection \(i): \(answer)")
            }
            // And the server still answers.
            let fresh = try Self.get(l.port, "/fresh")
            c.expect(fresh.hasPrefix("HTTP/1.1 200 "), "\(fresh)")
        }
    }

    @Test func threeHundredSlowlorisConnectionsFromOnePeerLeaveANewClientServed() async throws {
        try await Self.onThread { c in
            let l = try Self.listener()
            defer { l.stop() }
            var held: [RawSocket] = []
            for i in 0..<320 {
                let s = try RawSocket(port: l.port)
                try s.send("GET /slow\(i) HTTP/1.1\r\nHost: test\r\nX-Slow: ")
                held.append(s)
            }
            let answer = try Self.get(l.port, "/fresh")
            c.expect(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("ok"), "\(answer)")
            // The slow ones are still open, waiting for their header timeout: nothing refused them.
            try held[0].send("\r\n\r\n")
            c.expect(held[0].read(until: "ok").hasPrefix("HTTP/1.1 200 "))
        }
    }

    @Test func aPeerPastItsConnectionCapIsRefusedWith503WhileOthersAreServed() async throws {
        try await Self.onThread { c in
            let l = try Self.listener { $0.maxConnectionsPerPeer = 3 }
            defer { l.stop() }
            var held = try (0..<3).map { _ in try RawSocket(port: l.port, source: "127.0.0.2") }
            let refused = try Self.get(l.port, source: "127.0.0.2")
            c.expect(refused.hasPrefix("HTTP/1.1 503 "), "\(refused)")
            c.expect(refused.contains(#""serverErrorCode":"SERVICE_UNAVAILABLE""#), "\(refused)")
            let other = try Self.get(l.port, source: "127.0.0.3")
            c.expect(other.hasPrefix("HTTP/1.1 200 "), "\(other)")
            // Once one of the three closes, the peer is served again (the loop notices the close within moments).
            held.removeLast()
            var again = ""
            for _ in 0..<50 {
                again = try Self.get(l.port, source: "127.0.0.2")
                if again.hasPrefix("HTTP/1.1 200 ") { break }
                usleep(50_000)
            }
            c.expect(again.hasPrefix("HTTP/1.1 200 "), "\(again)")
        }
    }

    @Test func openWebsocketsAndWaitingLongPollsHoldNoWorker() async throws {
        try await Self.onThread { c in
            let pushers = Atomic<Int>(0)
            let feed = WebSocketEndpoint(path: "/ws") { _ in
                { connection in
                    pushers.add(1, ordering: .relaxed)
                    while !connection.isClosed { try? await Task.sleep(for: .milliseconds(100)) }
                }
            }
            let l = try Self.listener(webSockets: [feed], respond: { r in
                if r.path == "/poll" {
                    return .later {
                        try? await Task.sleep(for: .seconds(60))
                        return .text("late")
                    }
                }
                return .text("ok")
            })
            defer { l.stop() }
            var held: [RawSocket] = []
            for _ in 0..<120 {
                let s = try RawSocket(port: l.port)
                let head = try s.webSocketHandshake("/ws")
                c.expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")
                c.expect(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "\(head)")  // RFC 6455's example
                held.append(s)
            }
            for _ in 0..<120 {
                let s = try RawSocket(port: l.port)
                try s.send("GET /poll HTTP/1.1\r\nHost: test\r\n\r\n")
                held.append(s)
            }
            // 2 workers, 240 held connections: a plain request is still answered.
            let answer = try Self.get(l.port, "/plain")
            c.expect(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("ok"), "\(answer)")
            // The tasks start soon after — unless the cooperative pool they run on is held by other suites of a
            // parallel test run (seen in CI: nothing for 4 s); the bound is only for a failure.
            for _ in 0..<6_000 where pushers.load(ordering: .relaxed) < 120 { usleep(20_000) }
            let started = pushers.load(ordering: .relaxed)
            c.expect(started == 120, "\(started) pushers running")
        }
    }

    @Test func aClientThatNeverReadsCannotGrowTheServersOutputBuffer() async throws {
        try await Self.onThread { c in
            let accepted = Atomic<Int>(0)
            let ended = Atomic<Bool>(false)
            let l = try Self.listener({
                $0.outputBufferBytes = 256 << 10
                $0.keepAliveTimeoutMs = 500  // a write stalled this long closes the connection
            }, respond: { _ in
                var r = HTTPResponse(status: 200, contentType: "application/octet-stream", body: [])
                r.stream = HTTPResponseStream(length: 1 << 30) { send in
                    let piece = [UInt8](repeating: 7, count: 64 << 10)
                    while piece.withUnsafeBytes({ send($0) }) { accepted.add(piece.count, ordering: .relaxed) }
                    ended.store(true, ordering: .releasing)
                }
                return r
            })
            defer { l.stop() }
            let s = try RawSocket(port: l.port, receiveBuffer: 16 << 10)
            try s.send("GET /big HTTP/1.1\r\nHost: test\r\n\r\n")
            for _ in 0..<600 where !ended.load(ordering: .acquiring) { usleep(50_000) }
            let writerEnded = ended.load(ordering: .acquiring)
            c.expect(writerEnded, "the writer should be released once the stalled client is dropped")
            // What the handler got rid of: the output buffer plus the kernel's socket buffers, not the 1 GiB.
            let bytes = accepted.load(ordering: .relaxed)
            c.expect(bytes < 16 << 20, "\(bytes) bytes accepted")
        }
    }

    @Test func aWebsocketClientThatNeverReadsIsDroppedOnceItsBacklogPassesTheCap() async throws {
        try await Self.onThread { c in
            let sent = Atomic<Int>(0)
            let refused = Atomic<Bool>(false)
            let feed = WebSocketEndpoint(path: "/ws") { _ in
                { connection in
                    let message = [UInt8](repeating: UInt8(ascii: "m"), count: 32 << 10)
                    while connection.send(message) {
                        sent.add(message.count, ordering: .relaxed)
                        await Task.yield()
                    }
                    refused.store(true, ordering: .releasing)
                }
            }
            let l = try Self.listener({ $0.outputBufferBytes = 64 << 10 }, webSockets: [feed])
            defer { l.stop() }
            let s = try RawSocket(port: l.port, receiveBuffer: 16 << 10)
            let head = try s.webSocketHandshake("/ws")
            c.expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")
            // The kernel's socket buffers take a few MB first; on a busy machine the pusher gets there slowly (its
            // task shares the cooperative pool with every suite of a parallel run: over 30 s in CI once).
            for _ in 0..<2_400 where !refused.load(ordering: .acquiring) { usleep(50_000) }
            let sendFailed = refused.load(ordering: .acquiring)
            c.expect(sendFailed, "send should fail once the backlog passes the cap")
            let bytes = sent.load(ordering: .relaxed)
            c.expect(bytes < 16 << 20, "\(bytes) bytes queued")
        }
    }
}
