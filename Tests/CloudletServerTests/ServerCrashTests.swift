import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// SIGKILL a `cloudlet serve` child in the middle of concurrent HTTP writes: after a restart every write it
/// acknowledged (HTTP 200 with the record saved) is there.
@Suite struct ServerCrashTests {
    @Test func everyAcknowledgedWriteSurvivesSIGKILL() async throws {
        let dir = TempDir("server-crash")
        let data = dir.sub("store")
        var apiToken = "", webToken = ""
        var acknowledged: [String: String] = [:]  // record name → change tag
        for round in 0..<3 {
            let serve = try await ServeChild.start(data: data)
            if round == 0 {
                apiToken = try #require(serve.apiToken)
                webToken = try #require(serve.webAuthToken)
            }
            let path = "/database/1/iCloud.com.example.app/development/private/records/modify?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webToken)"
            let acks = AckLog()
            // 8 writer threads, each on its own keep-alive connection, 1–3 records per request, until the server is
            // killed under them (a writer stops at its first failed request).
            let writers = DispatchGroup()
            for w in 0..<8 {
                writers.enter()
                let url = serve.url
                Thread.detachNewThread {
                    defer { writers.leave() }
                    guard let connection = try? BlockingHTTPConnection(url) else { return }
                    var i = 0
                    while true {
                        let names = (0...(i % 3)).map { "r\(round)-w\(w)-\(i)-\($0)" }
                        let body = String(repeating: "z", count: (i * 53) % 900)
                        let ops = names.map { createOp($0, fields: #""writer":{"value":\#(w)},"body":{"value":"\#(body)"}"#) }
                        guard let r = try? connection.post(path, #"{"operations":[\#(ops.joined(separator: ","))]}"#) else { return }
                        if r.status == 200, let records = (try? JSONParser.parse(r.body))?["records"]?.arrayValue {
                            for rec in records {
                                if let name = rec["recordName"]?.stringValue, let tag = rec["recordChangeTag"]?.stringValue {
                                    acks.add(name, tag)
                                }
                            }
                        }
                        i += 1
                    }
                }
            }
            let target = [150, 400, 60][round]
            let deadline = Date().addingTimeInterval(15)
            while acks.count < target && Date() < deadline { try await Task.sleep(for: .milliseconds(2)) }
            await serve.child.stop(SIGKILL)
            #expect(serve.child.process.terminationReason == .uncaughtSignal, "round \(round): the server died on its own")
            await withCheckedContinuation { c in writers.notify(queue: .global()) { c.resume() } }
            acknowledged.merge(acks.all) { $1 }
            #expect(acks.count >= target, "round \(round): only \(acks.count) writes acknowledged")
        }

        // Restart and look every acknowledged record up, 200 at a time.
        let serve = try await ServeChild.start(data: data)
        let lookup = "\(serve.url)/database/1/iCloud.com.example.app/development/private/records/lookup?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webToken)"
        let names = acknowledged.keys.sorted()
        var missing: [String] = []
        for start in stride(from: 0, to: names.count, by: 200) {
            let chunk = names[start..<min(start + 200, names.count)]
            let r = try await HTTP.post(lookup, #"{"records":[\#(chunk.map { #"{"recordName":"\#($0)"}"# }.joined(separator: ","))]}"#)
            #expect(r.records.count == chunk.count, "\(r)")
            for (name, rec) in zip(chunk, r.records) where rec["recordChangeTag"]?.stringValue != acknowledged[name] {
                missing.append(name)
            }
        }
        #expect(missing.isEmpty, "\(missing.count) of \(names.count) acknowledged records lost, e.g. \(missing.prefix(5))")
        await serve.child.stop(SIGTERM)
        #expect(serve.child.process.terminationStatus == 0)
    }
}

/// Acknowledged writes, from many threads. `@unchecked Sendable`: `acks` is guarded by `lock`.
private final class AckLog: @unchecked Sendable {
    private let lock = NSLock()
    private var acks: [String: String] = [:]
    func add(_ name: String, _ tag: String) { lock.withLock { acks[name] = tag } }
    var count: Int { lock.withLock { acks.count } }
    var all: [String: String] { lock.withLock { acks } }
}
