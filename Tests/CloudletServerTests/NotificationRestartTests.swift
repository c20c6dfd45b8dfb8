import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// A long-poll client of a `cloudlet serve` process that is stopped and started again: with `after` = the last
/// notification ID it got (and a new courier token: those live as long as the process) it receives what it
/// missed, with no gap.
@Suite struct NotificationRestartTests {
    @Test func aLongPollClientResumesAcrossAServeRestartWithoutAGap() async throws {
        let dir = TempDir("notify-restart")
        let data = dir.sub("store")
        var serve = try await ServeChild.start(data: data)
        let apiToken = try #require(serve.apiToken)
        let webToken = try #require(serve.webAuthToken)
        func url(_ base: String, _ op: String) -> String {
            "\(base)/database/1/iCloud.com.example.app/development/private/\(op)?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webToken)"
        }
        func courier(_ base: String) async throws -> String {
            let token = try await HTTP.post(url(base, "tokens/create"), #"{"apnsEnvironment":"development"}"#)
            return try #require(token.json["webcourierURL"]?.stringValue, "\(token)")
        }
        let zone = #"{"zoneName":"Feed"}"#
        _ = try await HTTP.post(url(serve.url, "zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":\#(zone)}}]}"#)
        let sub = try await HTTP.post(
            url(serve.url, "subscriptions/modify"),
            #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"feed","subscriptionType":"zone","zoneID":\#(zone)}}]}"#)
        #expect(sub.status == 200, "\(sub)")
        func write(_ base: String, _ names: [String]) async throws {
            let ops = names.map { createOp($0) }.joined(separator: ",")
            let r = try await HTTP.post(url(base, "records/modify"), #"{"zoneID":\#(zone),"operations":[\#(ops)]}"#)
            #expect(r.status == 200, "\(r)")
        }
        /// Polls until `count` notifications after `after` have come (or 10 polls).
        func poll(_ courier: String, after: String?, count: Int) async throws -> (names: [String], gap: Bool, last: String?) {
            var names: [String] = []
            var gap = false
            var position = after
            for _ in 0..<10 where names.count < count {
                let r = try await HTTP.get(courier + "&timeout=5" + (position.map { "&after=\($0)" } ?? ""))
                #expect(r.status == 200, "\(r)")
                gap = gap || r.json["gap"] == .bool(true)
                names += (r.json["notifications"]?.arrayValue ?? []).compactMap { $0["recordName"]?.stringValue }
                position = r.json["next"]?.stringValue ?? position
            }
            return (names, gap, position)
        }
        try await write(serve.url, ["a", "b"])
        let first = try await poll(try await courier(serve.url), after: nil, count: 2)
        #expect(first.names == ["a", "b"])
        // Written while the client is away; then the server stops and starts again.
        try await write(serve.url, ["c", "d"])
        await serve.child.stop(SIGTERM)
        #expect(serve.child.process.terminationStatus == 0)
        serve = try await ServeChild.start(data: data)
        try await write(serve.url, ["e"])
        let resumed = try await poll(try await courier(serve.url), after: first.last, count: 3)
        #expect(resumed.names == ["c", "d", "e"])
        #expect(!resumed.gap)
        await serve.child.stop(SIGTERM)
    }
}
