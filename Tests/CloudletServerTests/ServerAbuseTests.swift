import CloudletTestSupport
import CloudletWire
import Foundation
import Testing

@testable import CloudletServer

/// One request must never take the server down or make it build gigabytes: a child `cloudlet serve` gets hostile
/// numbers (NaN, ±infinity, negative, huge, non-numeric) in every route that reads one, duplicate zones and
/// records, and requests for far more record bytes than a response may carry — and still answers
/// `/cloudlet/health`, with its memory under a loose bound read from `/proc`.
@Suite struct ServerAbuseTests {
    static let container = "iCloud.com.example.app"

    /// A child server on a fresh store and the URLs of its routes for the first user.
    struct Child {
        let serve: ServeChild
        let api: String
        let web: String

        func url(_ op: String, db: String = "private") -> String {
            "\(serve.url)/database/1/\(ServerAbuseTests.container)/development/\(db)/\(op)?ckAPIToken=\(api)&ckWebAuthToken=\(web)"
        }

        /// The server is still up: alive as a process and answering health.
        func expectAlive(_ comment: Comment) async throws {
            #expect(serve.child.process.isRunning, comment)
            let health = try await HTTP.get("\(serve.url)/cloudlet/health")
            #expect(health.status == 200, comment)
        }

        /// `VmRSS` and `VmHWM` of the server process in bytes.
        func memory() throws -> (rss: Int, peak: Int) {
            let status = try String(contentsOfFile: "/proc/\(serve.child.process.processIdentifier)/status", encoding: .utf8)
            func kB(_ key: String) -> Int {
                let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") } ?? ""
                return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
            }
            return (kB("VmRSS"), kB("VmHWM"))
        }
    }

    static func start(_ dir: TempDir, extra: [String] = []) async throws -> Child {
        let serve = try await ServeChild.start(data: dir.sub("store"), extra: extra)
        return Child(serve: serve, api: try #require(serve.apiToken), web: try #require(serve.webAuthToken))
    }

    static func expectBadRequest(_ r: Reply, naming member: String, _ what: String) {
        #expect(r.status == 400, "\(what): \(r)")
        #expect(r.serverErrorCode == "BAD_REQUEST", "\(what): \(r)")
        #expect(r.reason.contains(member), "\(what): the reason should name '\(member)': \(r.reason)")
    }

    @Test func hostileNumbersGetABadRequestAndNeverCrashTheServer() async throws {
        let dir = TempDir("server-abuse-numbers")
        let s = try await Self.start(dir)
        defer { s.serve.child.stopBlocking(SIGTERM) }

        // The web courier: every spelling Double(String) accepts and more.
        let token = try await HTTP.post(s.url("tokens/create"), "{}")
        let apns = try #require(token.json["apnsToken"]?.stringValue, "\(token)")
        let poll = "\(s.serve.url)/cloudlet/notifications/poll?token=\(apns)"
        for bad in [
            "nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e309", "1e3", "-1", "61", "60.5", "0x10", "abc", "1.5.2",
            "99999999999999999999999999", "%20", "+5",
        ] {
            Self.expectBadRequest(try await HTTP.get(poll + "&timeout=" + bad), naming: "timeout", "timeout=\(bad)")
        }
        let ok = try await HTTP.get(poll + "&timeout=0")
        #expect(ok.status == 200, "\(ok)")
        // A position at the end of the sequence space (`next` carries the log's incarnation).
        let next = try #require(ok.json["next"]?.stringValue, "\(ok)")
        let incarnation = try #require(next.split(separator: "-").first)
        let far = try await HTTP.get(poll + "&timeout=0&after=\(incarnation)-18446744073709551615")
        #expect(far.status == 200, "\(far)")
        for bad in ["\(incarnation)-18446744073709551616", "-1", "x-1", "ffffffffffffffffff-1"] {
            Self.expectBadRequest(try await HTTP.get(poll + "&timeout=0&after=" + bad), naming: "after", "after=\(bad)")
        }
        try await s.expectAlive("after the courier parameters")

        // JSON numbers in every route that reads one. A number too large for 64 bits, one too large for a double,
        // NaN spelled as a string, negative, zero, fractions and wrong types.
        _ = try await HTTP.post(
            s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"z"}}}]}"#)
        let create = #"{"operations":[{"operationType":"create","record":{"recordName":"p","recordType":"Place","fields":{"n":{"value":1},"d":{"value":1.5},"t":{"value":1000,"type":"TIMESTAMP"},"at":{"value":{"latitude":1,"longitude":2}}}}}]}"#
        #expect(try await HTTP.post(s.url("records/modify"), create).status == 200)
        let limits = [
            "-1", "0", "1e999", "-1e999", "99999999999999999999999", "1.5", #""NaN""#, #""12""#, "true", "-9223372036854775808",
        ]
        for bad in limits {
            let query = #"{"query":{"recordType":"Place"},"resultsLimit":\#(bad)}"#
            Self.expectBadRequest(try await HTTP.post(s.url("records/query"), query), naming: "resultsLimit", "query resultsLimit \(bad)")
            let zone = #"{"zones":[{"zoneID":{"zoneName":"z"},"resultsLimit":\#(bad)}]}"#
            Self.expectBadRequest(try await HTTP.post(s.url("changes/zone"), zone), naming: "resultsLimit", "changes/zone \(bad)")
            let top = #"{"zones":[{"zoneID":{"zoneName":"z"}}],"resultsLimit":\#(bad)}"#
            Self.expectBadRequest(try await HTTP.post(s.url("changes/zone"), top), naming: "resultsLimit", "changes/zone top \(bad)")
            let records = #"{"zoneID":{"zoneName":"z"},"resultsLimit":\#(bad)}"#
            Self.expectBadRequest(try await HTTP.post(s.url("records/changes"), records), naming: "resultsLimit", "records/changes \(bad)")
            for op in ["changes/database", "zones/changes"] {
                Self.expectBadRequest(
                    try await HTTP.post(s.url(op), #"{"resultsLimit":\#(bad)}"#), naming: "resultsLimit", "\(op) \(bad)")
            }
        }
        // The largest 64-bit limit is clamped to the page maximum, not refused.
        let clamped = try await HTTP.post(s.url("records/query"), #"{"query":{"recordType":"Place"},"resultsLimit":9223372036854775807}"#)
        #expect(clamped.status == 200, "\(clamped)")

        // Field values of records/modify.
        let fieldCases: [(field: String, value: String, member: String)] = [
            ("n", #"{"value":1e999}"#, "fields.n"), ("n", #"{"value":99999999999999999999}"#, "fields.n"),
            ("n", #"{"value":"nan"}"#, "fields.n"), ("d", #"{"value":1e999}"#, "fields.d"),
            ("d", #"{"value":"NaN"}"#, "fields.d"), ("d", #"{"value":"-inf"}"#, "fields.d"),
            ("t", #"{"value":1e300,"type":"TIMESTAMP"}"#, "fields.t"), ("t", #"{"value":"nan","type":"TIMESTAMP"}"#, "fields.t"),
            ("at", #"{"value":{"latitude":1e999,"longitude":0}}"#, "latitude"),
            ("at", #"{"value":{"latitude":91,"longitude":0}}"#, "latitude"),
            ("at", #"{"value":{"latitude":0,"longitude":0,"altitude":-1e999}}"#, "altitude"),
        ]
        for c in fieldCases {
            let op = #"{"operations":[{"operationType":"forceUpdate","record":{"recordName":"p","recordType":"Place","fields":{"\#(c.field)":\#(c.value)}}}]}"#
            Self.expectBadRequest(try await HTTP.post(s.url("records/modify"), op), naming: c.member, "modify \(c.field)=\(c.value)")
        }
        // Numbers in filters: NEAR radii and comparison values.
        let filters: [(filter: String, member: String)] = [
            (#"{"comparator":"NEAR","fieldName":"at","fieldValue":{"value":{"latitude":0,"longitude":0}},"distance":-1}"#, "distance"),
            (#"{"comparator":"NEAR","fieldName":"at","fieldValue":{"value":{"latitude":0,"longitude":0}},"distance":1e999}"#, "distance"),
            (#"{"comparator":"NEAR","fieldName":"at","fieldValue":{"value":{"latitude":0,"longitude":0}},"distance":"nan"}"#, "distance"),
            (#"{"comparator":"EQUALS","fieldName":"n","fieldValue":{"value":99999999999999999999}}"#, "fieldValue"),
            (#"{"comparator":"LESS_THAN","fieldName":"d","fieldValue":{"value":1e999}}"#, "fieldValue"),
        ]
        for f in filters {
            let query = #"{"query":{"recordType":"Place","filterBy":[\#(f.filter)]}}"#
            Self.expectBadRequest(try await HTTP.post(s.url("records/query"), query), naming: f.member, "query \(f.filter)")
            Self.expectBadRequest(try await HTTP.post(s.url("records/count"), query), naming: f.member, "count \(f.filter)")
            let sub = #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"s","subscriptionType":"query","query":{"recordType":"Place","filterBy":[\#(f.filter)]}}}]}"#
            Self.expectBadRequest(try await HTTP.post(s.url("subscriptions/modify"), sub), naming: f.member, "subscription \(f.filter)")
        }
        // The sync tokens and markers clients hand back: garbage is refused, not trusted.
        let garbage = ["AAAA", "////////////////////////////////", "not base64!", String(repeating: "A", count: 4000)]
        for g in garbage {
            let zone = #"{"zones":[{"zoneID":{"zoneName":"z"},"syncToken":"\#(g)"}]}"#
            let r = try await HTTP.post(s.url("changes/zone"), zone)
            #expect(r.status == 200 && r.zones.first?["serverErrorCode"]?.stringValue == "BAD_REQUEST" || r.status == 400, "\(r)")
            let marker = try await HTTP.post(
                s.url("records/query"), #"{"query":{"recordType":"Place"},"continuationMarker":"\#(g)"}"#)
            Self.expectBadRequest(marker, naming: "continuationMarker", "marker \(g.prefix(10))")
        }
        try await s.expectAlive("after every hostile number")
    }

    /// The amplification of issue 10: one zone listed many times, and pages of large records. Each response holds
    /// at most the response budget plus one record; walking `moreComing` / markers yields every record once.
    @Test func responsesStayWithinTheByteBudget() async throws {
        let dir = TempDir("server-abuse-budget")
        let s = try await Self.start(dir)
        defer { s.serve.child.stopBlocking(SIGTERM) }
        let budget = ServerConfiguration.defaultResponseBudget
        let recordSize = 480_000
        let big = String(repeating: "x", count: recordSize)
        var names: [String: Set<String>] = [:]
        for zone in ["big1", "big2"] {
            let created = try await HTTP.post(
                s.url("zones/modify"), #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#)
            #expect(created.status == 200, "\(created)")
            for batch in 0..<4 {
                let batchNames = (0..<5).map { "\(zone)-\(batch)-\($0)" }
                let ops = batchNames.map { createOp($0, type: "Big", fields: #""body":{"value":"\#(big)"}"#) }
                let r = try await HTTP.post(
                    s.url("records/modify"), #"{"zoneID":{"zoneName":"\#(zone)"},"operations":[\#(ops.joined(separator: ","))]}"#)
                #expect(r.status == 200 && r.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(r.text.prefix(300))")
                names[zone, default: []].formUnion(batchNames)
            }
        }
        // What a response may weigh: the budget, one more record, and the JSON around them.
        let ceiling = budget + recordSize + 64 << 10

        // The same zone twice is refused, naming it.
        let twice = try await HTTP.post(
            s.url("changes/zone"), #"{"zones":[{"zoneID":{"zoneName":"big1"}},{"zoneID":{"zoneName":"big2"}},{"zoneID":{"zoneName":"big1"}}]}"#)
        Self.expectBadRequest(twice, naming: "zones[2]", "a zone listed twice")
        #expect(twice.reason.contains("big1"), "\(twice)")

        // changes/zone over both zones: one budget for the whole response, each record exactly once.
        var tokens: [String: String] = [:]
        var seen: [String: [String]] = [:]
        var pages = 0
        while pages < 40 {
            pages += 1
            let zones = ["big1", "big2"].map { z in
                #"{"zoneID":{"zoneName":"\#(z)"}\#(tokens[z].map { #","syncToken":"\#($0)""# } ?? "")}"#
            }
            let r = try await HTTP.post(s.url("changes/zone"), #"{"zones":[\#(zones.joined(separator: ","))]}"#)
            #expect(r.status == 200, "\(r)")
            #expect(r.body.count <= ceiling, "changes/zone page \(pages): \(r.body.count) bytes, over \(ceiling)")
            var more = false
            var inPage = 0
            for z in r.zones {
                let name = try #require(z["zoneID"]?["zoneName"]?.stringValue)
                tokens[name] = z["syncToken"]?.stringValue
                more = more || z["moreComing"]?.boolValue == true
                for rec in z["records"]?.arrayValue ?? [] { seen[name, default: []].append(rec["recordName"]?.stringValue ?? "?") }
                inPage += z["records"]?.arrayValue?.count ?? 0
            }
            #expect(inPage >= 1 || !more, "page \(pages) carries no record but says more are coming")
            if !more { break }
        }
        for zone in ["big1", "big2"] {
            #expect(seen[zone]?.count == names[zone]?.count, "\(zone): \(seen[zone]?.count ?? 0) changes for \(names[zone]?.count ?? 0) records")
            #expect(Set(seen[zone] ?? []) == names[zone], "\(zone)")
        }
        #expect(pages > 2, "40 records of 480 KB cannot fit in two 4 MiB pages")

        // records/changes (one zone) pages the same way.
        var token: String?
        var fromRecordsChanges: [String] = []
        for _ in 0..<40 {
            let r = try await HTTP.post(
                s.url("records/changes"), #"{"zoneID":{"zoneName":"big2"}\#(token.map { #","syncToken":"\#($0)""# } ?? "")}"#)
            #expect(r.status == 200 && r.body.count <= ceiling, "\(r.status), \(r.body.count) bytes")
            fromRecordsChanges += r.records.compactMap { $0["recordName"]?.stringValue }
            token = r.json["syncToken"]?.stringValue
            if r.json["moreComing"]?.boolValue != true { break }
        }
        #expect(fromRecordsChanges.sorted() == names["big2"]!.sorted())

        // records/query: markers until done, each page within the ceiling, each record once.
        var marker: String?
        var queried: [String] = []
        for _ in 0..<40 {
            let body = #"{"zoneID":{"zoneName":"big1"},"query":{"recordType":"Big"},"resultsLimit":200\#(marker.map { #","continuationMarker":"\#($0)""# } ?? "")}"#
            let r = try await HTTP.post(s.url("records/query"), body)
            #expect(r.status == 200, "\(r)")
            #expect(r.body.count <= ceiling, "query page: \(r.body.count) bytes")
            #expect(!r.records.isEmpty, "a page always carries a record")
            queried += r.records.compactMap { $0["recordName"]?.stringValue }
            marker = r.json["continuationMarker"]?.stringValue
            if marker == nil { break }
        }
        #expect(queried.count == names["big1"]!.count && Set(queried) == names["big1"], "\(queried.count) query results")

        // records/lookup: the records past the budget come back as per-record errors to fetch again.
        let ids = names["big1"]!.sorted()
        let lookupBody = #"{"zoneID":{"zoneName":"big1"},"records":[\#(ids.map { #"{"recordName":"\#($0)"}"# }.joined(separator: ","))]}"#
        let lookup = try await HTTP.post(s.url("records/lookup"), lookupBody)
        #expect(lookup.status == 200 && lookup.body.count <= ceiling, "\(lookup.status), \(lookup.body.count) bytes")
        let found = lookup.records.filter { $0["fields"] != nil }.count
        let deferred = lookup.records.filter { $0["reason"]?.stringValue?.contains("budget") == true }
        #expect(found >= 1 && found < ids.count, "\(found) records in one lookup")
        #expect(found + deferred.count == ids.count, "\(found) found, \(deferred.count) deferred of \(ids.count)")
        #expect(deferred.allSatisfy { $0["serverErrorCode"]?.stringValue == "BAD_REQUEST" }, "\(deferred.first.map { "\($0)" } ?? "")")
        let again = #"{"zoneID":{"zoneName":"big1"},"records":[{"recordName":"\#(ids[0])"},{"recordName":"\#(ids[1])"},{"recordName":"\#(ids[0])"}]}"#
        Self.expectBadRequest(try await HTTP.post(s.url("records/lookup"), again), naming: "records[2]", "a record looked up twice")

        // Sixteen clients ask for full pages and never read them.
        let request = #"{"zones":[{"zoneID":{"zoneName":"big1"}},{"zoneID":{"zoneName":"big2"}}]}"#
        let path = String(s.url("changes/zone").dropFirst(s.serve.url.count))
        let sockets = try (0..<16).map { _ in try UnreadConnection(s.serve.url, post: path, body: request) }
        try await Task.sleep(for: .seconds(3))
        let memory = try s.memory()
        try await s.expectAlive("with 16 clients not reading")
        for socket in sockets { socket.close() }
        // Loose guards against gigabytes, not a benchmark: 16 responses of the budget are ~64 MiB.
        #expect(memory.rss < 768 << 20, "resident \(memory.rss >> 20) MiB with 16 unread responses")
        #expect(memory.peak < 1024 << 20, "peak resident \(memory.peak >> 20) MiB")
        try await s.expectAlive("at the end")
    }
}

/// A client that sends one request and never reads the answer.
final class UnreadConnection {
    private var fd: Int32

    init(_ url: String, post path: String, body: String) throws {
        let parts = url.replacingOccurrences(of: "http://", with: "").split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]) else { throw ChildProcess.Failure(message: "bad URL \(url)") }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        // A small receive buffer, so the server cannot park the response in the kernel.
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        inet_pton(AF_INET, String(parts[0]), &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw ChildProcess.Failure(message: "connect: errno \(errno)") }
        let payload = Array(body.utf8)
        let bytes = Array("POST \(path) HTTP/1.1\r\nHost: \(parts[0])\r\nContent-Length: \(payload.count)\r\n\r\n".utf8) + payload
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    deinit { close() }
}
