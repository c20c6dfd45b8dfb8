import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Health, metrics, the access log, concurrency, and a restart on the same data directory.
@Suite struct ServerLifecycleTests {
    @Suite(.liveServer) struct Observability {
        @Test func healthNamesTheStore() async throws {
            let s = try live
            let r = try await HTTP.get(s.server.url + "/cloudlet/health")
            #expect(r.status == 200)
            #expect(r.json["status"]?.stringValue == "ok")
            #expect(r.json["storeID"]?.stringValue == s.store.metadata.storeID)
        }

        @Test func metricsCountRequestsByRouteAndStatusWithStoreCounters() async throws {
            let s = try live
            _ = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(unique("m")))]}"#)
            _ = try await HTTP.post(s.url("records/lookup", as: nil), #"{"records":[]}"#)
            let denied = try await HTTP.get(s.server.url + "/cloudlet/metrics")
            #expect(denied.status == 403 && denied.serverErrorCode == "ACCESS_DENIED", "\(denied)")
            let r = try await HTTP.send("GET", s.server.url + "/cloudlet/metrics", headers: HTTP.bearer(s.adminToken))
            #expect(r.status == 200)
            let lines = r.text.split(separator: "\n").map(String.init)
            func value(_ prefix: String) -> Double? {
                lines.first { $0.hasPrefix(prefix + " ") }.flatMap { Double($0.split(separator: " ").last!) }
            }
            #expect(value(#"cloudlet_http_requests_total{route="records/modify",status="200"}"#) ?? 0 >= 1, "\(r.text)")
            #expect(value(#"cloudlet_http_requests_total{route="records/lookup",status="421"}"#) ?? 0 >= 1)
            #expect(value(#"cloudlet_http_request_duration_seconds_count{route="records/modify"}"#) ?? 0 >= 1)
            #expect(lines.contains { $0.hasPrefix(#"cloudlet_http_request_duration_seconds_bucket{route="records/modify",le="+Inf"}"#) })
            #expect(value("cloudlet_store_commits_total") ?? 0 >= 1)
            #expect(value("cloudlet_store_fsyncs_total") != nil)
            #expect(value("cloudlet_store_records") ?? 0 >= 1)
            #expect(value("cloudlet_store_log_bytes_written_total") ?? 0 > 0)
            #expect(value("cloudlet_store_log_bytes") ?? 0 > 0)
            #expect(value("cloudlet_compactions_total") != nil && value("cloudlet_compaction_bytes_reclaimed_total") != nil)
            #expect(lines.contains("# TYPE cloudlet_http_request_duration_seconds histogram"))
            #expect(value(#"cloudlet_background_errors_total{job="checkpoint"}"#) == 0)
            #expect(value("cloudlet_store_read_only") == 0)
        }

        @Test func theAccessLogHasOneLinePerRequestWithoutTokens() async throws {
            let s = try live
            let marker = unique("logged")
            _ = try await HTTP.post(s.url("records/lookup") + "&marker=\(marker)", #"{"records":[]}"#)
            _ = try await HTTP.get(s.server.url + "/cloudlet/health?\(marker)")
            let lines = s.logLines.all
            let lookup = try #require(lines.first { $0.contains("/private/records/lookup 200 ") })
            let parts = lookup.split(separator: " ")
            #expect(parts.count == 6, "\(lookup)")
            #expect(parts[0].hasSuffix("Z") && parts[1] == "127.0.0.1" && parts[2] == "POST" && parts[5].hasSuffix("ms"))
            #expect(lines.contains { $0.contains("GET /cloudlet/health 200 ") })
            #expect(!lines.contains { $0.contains(s.apiToken) || $0.contains(s.alice.token) || $0.contains(marker) })
        }

        @Test func concurrentWritersAreAllServed() async throws {
            let s = try live
            let prefix = unique("conc")
            let statuses = try await withThrowingTaskGroup(of: [String?].self) { group in
                for w in 0..<24 {
                    group.addTask {
                        var out: [String?] = []
                        for i in 0..<5 {
                            let r = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp("\(prefix)-\(w)-\(i)"))]}"#)
                            out.append(r.status == 200 ? r.records.first?["serverErrorCode"]?.stringValue : "HTTP \(r.status)")
                        }
                        return out
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(statuses.count == 120 && statuses.allSatisfy { $0 == nil }, "\(statuses.compactMap { $0 })")
        }
    }

    @Test func dataAndCredentialsSurviveARestart() async throws {
        let dir = TempDir("restart")
        var config = ServerConfiguration()
        config.port = 0
        config.log = nil
        let store = try await CloudletStore.open(at: dir.sub("store"))  // fsync durability, as served
        let creds = Credentials(store: store)
        let apiToken = try await creds.createAPIToken(container: LiveServer.container)
        let (_, webToken) = try await creds.createUser(name: "carol")
        let server = try Server(store: store, configuration: config)
        try server.start()
        func url(_ server: Server, _ op: String, db: String = "private") -> String {
            "\(server.url)/database/1/\(LiveServer.container)/development/\(db)/\(op)?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webToken)"
        }
        _ = try await HTTP.post(url(server, "zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Kept"}}}]}"#)
        let saved = try await HTTP.post(
            url(server, "records/modify"), #"{"zoneID":{"zoneName":"Kept"},"operations":[\#(createOp("k1")),\#(createOp("k2"))]}"#)
        let pub = try await HTTP.post(url(server, "records/modify", db: "public"), #"{"operations":[\#(createOp("p1"))]}"#)
        let tags = saved.records.compactMap { $0["recordChangeTag"]?.stringValue } + pub.records.compactMap { $0["recordChangeTag"]?.stringValue }
        #expect(tags.count == 3, "\(saved) \(pub)")
        server.stop()
        try await store.close()

        // The lock is released: the administrative CLI can open the stopped server's directory.
        let cli = try await ChildProcess.run(try cloudletExecutable(), ["user", "add", "dave", "--data", dir.sub("store")])
        #expect(cli.status == 0, "\(cli.err)")

        let reopened = try await CloudletStore.open(at: dir.sub("store"))
        let again = try Server(store: reopened, configuration: config)
        try again.start()
        let records = try await HTTP.post(
            url(again, "records/lookup"), #"{"zoneID":{"zoneName":"Kept"},"records":[{"recordName":"k1"},{"recordName":"k2"}]}"#)
        let pubAgain = try await HTTP.post(url(again, "records/lookup", db: "public"), #"{"records":[{"recordName":"p1"}]}"#)
        #expect((records.records + pubAgain.records).compactMap { $0["recordChangeTag"]?.stringValue } == tags, "\(records) \(pubAgain)")
        let zones = try await HTTP.get(url(again, "zones/list"))
        #expect(zones.zones.contains { $0["zoneID"]?["zoneName"]?.stringValue == "Kept" })
        again.stop()
        try await reopened.close()
    }

    @Test func aSecondServerOnTheSamePortFailsClearly() async throws {
        let s = try await LiveServer.start()
        var config = ServerConfiguration()
        config.port = s.server.port
        config.log = nil
        let second = try Server(store: s.store, configuration: config)
        #expect(throws: ServerSetupError.self) { try second.start() }
        do { try second.start() } catch let e as ServerSetupError { #expect(e.message.contains("cannot listen on 127.0.0.1:\(s.server.port)")) }
        await s.shutdown()
    }
}
