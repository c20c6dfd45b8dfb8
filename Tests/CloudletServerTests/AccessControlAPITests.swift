import CloudletWire
import Cloudlet
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletServer

/// Who may do what over HTTP: the public database's security roles, private databases, the admin credential.
@Suite(.liveServer, .serialized) struct AccessControlAPITests {
    /// `Secret` records: readable and writable by their creator and the `Editors` role, creatable by any user.
    static let schema = """
        DEFINE SCHEMA
            CREATE ROLE Editors;
            RECORD TYPE Secret (body STRING QUERYABLE, GRANT READ, WRITE TO "_creator", GRANT CREATE TO "_icloud",
                GRANT READ, WRITE TO Editors);
        """

    /// The schema imported, and a user `carol` in role `Editors` (created through the running server's store, as
    /// `cloudlet user add` and the admin API would).
    static func setUp(_ s: LiveServer) async throws -> (user: Credentials.User, token: String) {
        let imported = try await HTTP.send(
            "POST", "\(s.server.url)/cloudlet/admin/schema/import?container=\(LiveServer.container)", body: Array(schema.utf8),
            headers: HTTP.bearer(s.adminToken))
        #expect(imported.status == 200, "\(imported)")
        let carol: (user: Credentials.User, webAuthToken: String)
        if let existing = try await Credentials(store: s.store).user(named: "carol") {
            carol = (existing, "")
            Issue.record("carol exists already: \(existing)")
        } else {
            carol = try await Credentials(store: s.store).createUser(name: "carol")
        }
        let added = try await HTTP.send(
            "POST", "\(s.server.url)/cloudlet/admin/roles/add-member?container=\(LiveServer.container)&role=Editors&user=carol",
            headers: HTTP.bearer(s.adminToken))
        #expect(added.status == 200 && added.json["members"]?.arrayValue == [.string(carol.user.userRecordName)], "\(added)")
        return (carol.user, carol.webAuthToken)
    }

    // MARK: - The isolation table

    enum Caller: String, CaseIterable, CustomStringConvertible {
        /// No credential at all.
        case none
        /// The container's API token alone.
        case apiToken
        /// The creator of the records the operations aim at.
        case alice
        /// Another user.
        case bob
        /// A member of the `Editors` role.
        case member
        /// The admin credential alone.
        case admin
        var description: String { rawValue }
    }

    enum Place: String, CaseIterable, CustomStringConvertible {
        case `public`
        /// Alice's private database (every request names her as the zone owner).
        case alicePrivate
        /// The shared database, aiming at a zone of alice's (nothing is shared: sharing does not exist yet).
        case shared
        var description: String { rawValue }
    }

    enum Operation: String, CaseIterable, CustomStringConvertible {
        case lookup, query, create, update, delete, zones, changes, subscriptions, notifications, admin
        var description: String { rawValue }
    }

    /// `ok`; `hidden` (200, but alice's record is not in it); `401` AUTHENTICATION_FAILED, `421`
    /// AUTHENTICATION_REQUIRED, `403` ACCESS_DENIED for the request; `r403` ACCESS_DENIED, `rZ` ZONE_NOT_FOUND for
    /// the record or zone in a 200 response; `Z` ZONE_NOT_FOUND for the request.
    static let expected: [Place: [Operation: [String]]] = [
        //                          none   apiToken  alice  bob      member  admin
        .public: [
            .lookup: [             "401", "r403",   "ok",  "r403",  "ok",   "401"],
            .query: [              "401", "hidden", "ok",  "hidden", "ok",  "401"],
            .create: [             "401", "421",    "ok",  "ok",    "ok",   "401"],
            .update: [             "401", "421",    "ok",  "r403",  "ok",   "401"],
            .delete: [             "401", "421",    "ok",  "r403",  "ok",   "401"],
            .zones: [              "401", "ok",     "ok",  "ok",    "ok",   "401"],
            .changes: [            "401", "hidden", "ok",  "hidden", "ok",  "401"],
            .subscriptions: [      "401", "421",    "ok",  "ok",    "ok",   "401"],
            .notifications: [      "401", "421",    "ok",  "ok",    "ok",   "401"],
            .admin: [              "403", "403",    "403", "403",   "403",  "ok"],
        ],
        .alicePrivate: [
            .lookup: [             "401", "421",    "ok",  "rZ",    "rZ",   "401"],
            .query: [              "401", "421",    "ok",  "Z",     "Z",    "401"],
            .create: [             "401", "421",    "ok",  "rZ",    "rZ",   "401"],
            .update: [             "401", "421",    "ok",  "rZ",    "rZ",   "401"],
            .delete: [             "401", "421",    "ok",  "rZ",    "rZ",   "401"],
            .zones: [              "401", "421",    "ok",  "rZ",    "rZ",   "401"],
            .changes: [            "401", "421",    "ok",  "rZ",    "rZ",   "401"],
            .subscriptions: [      "401", "421",    "ok",  "ok",    "ok",   "401"],
            .notifications: [      "401", "421",    "ok",  "ok",    "ok",   "401"],
            .admin: [              "403", "403",    "403", "403",   "403",  "ok"],
        ],
        .shared: [
            .lookup: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401"],
            .query: [              "401", "421",    "Z",   "Z",     "Z",    "401"],
            .create: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401"],
            .update: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401"],
            .delete: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401"],
            .zones: [              "401", "421",    "rZ",  "rZ",    "rZ",   "401"],
            .changes: [            "401", "421",    "rZ",  "rZ",    "rZ",   "401"],
            .subscriptions: [      "401", "421",    "ok",  "ok",    "ok",   "401"],
            .notifications: [      "401", "421",    "ok",  "ok",    "ok",   "401"],
            // The admin reaches the route; alice has no zone in her shared database.
            .admin: [              "403", "403",    "403", "403",   "403",  "Z"],
        ],
    ]

    @Test func everyCallerGetsExactlyWhatTheTableSaysInEveryDatabase() async throws {
        let s = try live
        let carol = try await Self.setUp(s)
        var mismatches: [String] = []
        for place in Place.allCases {
            for op in Operation.allCases {
                let row = try #require(Self.expected[place]?[op], "no row for \(place) \(op)")
                for (caller, want) in zip(Caller.allCases, row) {
                    let got = try await outcome(s, caller, place, op, memberToken: carol.token)
                    if got != want { mismatches.append("\(place) \(op) as \(caller): expected \(want), got \(got)") }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) cells differ:\n\(mismatches.joined(separator: "\n"))")
    }

    /// Runs one cell: alice first makes the record the operation aims at (a fresh one, so that cells do not disturb
    /// each other), then the caller does the operation.
    func outcome(_ s: LiveServer, _ caller: Caller, _ place: Place, _ op: Operation, memberToken: String) async throws -> String {
        let db = place == .public ? "public" : place == .alicePrivate ? "private" : "shared"
        let type = place == .public ? "Secret" : "Note"
        let zone = place == .public ? #"{"zoneName":"_defaultZone"}"#
            : place == .alicePrivate ? #"{"zoneName":"_defaultZone","ownerRecordName":"\#(s.alice.user.userRecordName)"}"#
            : #"{"zoneName":"Trips","ownerRecordName":"\#(s.alice.user.userRecordName)"}"#
        let target = unique("t")
        let made = try await HTTP.post(
            s.url("records/modify", db: place == .public ? "public" : "private"),
            #"{"operations":[{"operationType":"create","record":{"recordName":"\#(target)","recordType":"\#(type)","fields":{"body":{"value":"x"}}}}]}"#)
        #expect(made.status == 200 && made.records.first?["serverErrorCode"] == nil, "\(made)")

        let base: String
        var headers: [String: String] = [:]
        switch caller {
        case .none: base = "\(s.server.url)/database/1/\(LiveServer.container)/development/\(db)/"
        case .admin:
            base = "\(s.server.url)/database/1/\(LiveServer.container)/development/\(db)/"
            headers = HTTP.bearer(s.adminToken)
        case .apiToken, .alice, .bob, .member: base = ""
        }
        func url(_ operation: String) -> String {
            switch caller {
            case .none, .admin: base + operation
            case .apiToken: s.url(operation, db: db, as: nil)
            case .alice: s.url(operation, db: db, as: "alice")
            case .bob: s.url(operation, db: db, as: "bob")
            case .member: s.url(operation, db: db, as: memberToken)
            }
        }
        let reply: Reply
        switch op {
        case .lookup:
            reply = try await HTTP.send("POST", url("records/lookup"), body: Array(#"{"records":[{"recordName":"\#(target)","zoneID":\#(zone)}]}"#.utf8), headers: headers)
        case .query:
            reply = try await HTTP.send("POST", url("records/query"), body: Array(#"{"zoneID":\#(zone),"query":{"recordType":"\#(type)"}}"#.utf8), headers: headers)
        case .create, .update, .delete:
            let name = op == .create ? unique("c") : target
            let kind = op == .create ? "create" : op == .update ? "forceUpdate" : "forceDelete"
            let record = op == .delete
                ? #"{"recordName":"\#(name)","zoneID":\#(zone)}"#
                : #"{"recordName":"\#(name)","recordType":"\#(type)","zoneID":\#(zone),"fields":{"body":{"value":"y"}}}"#
            reply = try await HTTP.send(
                "POST", url("records/modify"), body: Array(#"{"zoneID":\#(zone),"operations":[{"operationType":"\#(kind)","record":\#(record)}]}"#.utf8),
                headers: headers)
        case .zones:
            reply = try await HTTP.send("POST", url("zones/lookup"), body: Array(#"{"zones":[\#(zone)]}"#.utf8), headers: headers)
        case .changes:
            reply = try await HTTP.send("POST", url("changes/zone"), body: Array(#"{"zones":[{"zoneID":\#(zone)}]}"#.utf8), headers: headers)
        case .subscriptions:
            reply = try await HTTP.send("GET", url("subscriptions/list"), headers: headers)
        case .notifications:
            reply = try await HTTP.send("POST", url("tokens/create"), body: Array(#"{"apnsEnvironment":"development"}"#.utf8), headers: headers)
        case .admin:
            // The caller's own credentials, whatever they are, on an admin route.
            var adminURL = "\(s.server.url)/cloudlet/admin/query/explain?container=\(LiveServer.container)&database=\(db)"
            if place != .public { adminURL += "&user=alice" }
            switch caller {
            case .none, .admin: break
            case .apiToken: adminURL += "&ckAPIToken=\(s.apiToken)"
            case .alice: adminURL += "&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.alice.token)"
            case .bob: adminURL += "&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.bob.token)"
            case .member: adminURL += "&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(memberToken)"
            }
            reply = try await HTTP.send(
                "POST", adminURL, body: Array(#"{"zoneID":\#(zone),"query":{"recordType":"\#(type)"}}"#.utf8), headers: headers)
        }
        // Alice's record must be untouched unless she, or a caller the roles let write, changed it.
        if reply.status != 200 {
            let code = reply.serverErrorCode ?? "?"
            switch (reply.status, code) {
            case (401, "AUTHENTICATION_FAILED"): return "401"
            case (421, "AUTHENTICATION_REQUIRED"): return "421"
            case (403, "ACCESS_DENIED"): return "403"
            case (404, "ZONE_NOT_FOUND"): return "Z"
            default: return "\(reply.status) \(code): \(reply.reason)"
            }
        }
        let item = reply.records.first ?? reply.zones.first
        if let code = item?["serverErrorCode"]?.stringValue {
            switch code {
            case "ACCESS_DENIED": return "r403"
            case "ZONE_NOT_FOUND": return "rZ"
            default: return "r\(code): \(item?["reason"]?.stringValue ?? "")"
            }
        }
        switch op {
        case .query:
            return reply.records.contains { $0["recordName"]?.stringValue == target } ? "ok" : "hidden"
        case .changes:
            let records = reply.zones.first?["records"]?.arrayValue ?? []
            return records.contains { $0["recordName"]?.stringValue == target } ? "ok" : "hidden"
        default:
            return "ok"
        }
    }

    // MARK: - Roles and the admin credential

    @Test func aPublicRecordIsChangedOrDeletedOnlyByItsCreatorWhateverTheOperation() async throws {
        let s = try live
        let n = unique("pub")
        let made = try await HTTP.post(s.url("records/modify", db: "public"), #"{"operations":[\#(createOp(n))]}"#)
        let tag = try #require(made.records.first?["recordChangeTag"]?.stringValue, "\(made)")
        for kind in ["update", "forceUpdate", "replace", "forceReplace", "delete", "forceDelete"] {
            let r = try await HTTP.post(
                s.url("records/modify", db: "public", as: "bob"),
                #"{"operations":[{"operationType":"\#(kind)","record":{"recordName":"\#(n)","recordType":"Note","recordChangeTag":"\#(tag)","fields":{"title":{"value":"bob's"}}}}]}"#)
            #expect(r.status == 200 && r.records.first?["serverErrorCode"]?.stringValue == "ACCESS_DENIED", "\(kind): \(r)")
        }
        let read = try await HTTP.post(s.url("records/lookup", db: "public", as: nil), #"{"records":[{"recordName":"\#(n)"}]}"#)
        #expect(read.records.first?["fields"]?["title"]?["value"]?.stringValue == "t", "\(read)")
    }

    @Test func everyAdminRouteAndTheMetricsNeedTheAdminCredential() async throws {
        let s = try live
        let userQuery = "container=\(LiveServer.container)&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.alice.token)"
        for route in Route.allCases where route.rawValue.hasPrefix("cloudlet/admin/") || route == .metrics {
            for method in route.methods {
                let r = try await HTTP.send(method, "\(s.server.url)/\(route.rawValue)?\(userQuery)", body: method == "POST" ? [] : nil)
                #expect(r.status == 403 && r.serverErrorCode == "ACCESS_DENIED", "\(method) \(route.rawValue): \(r)")
            }
        }
        // The database parameter of query/explain is one name, never a path.
        let sneaky = try await HTTP.send(
            "POST", "\(s.server.url)/cloudlet/admin/query/explain?container=\(LiveServer.container)&database=private/../public",
            body: Array(#"{"query":{"recordType":"Note"}}"#.utf8), headers: HTTP.bearer(s.adminToken))
        #expect(sneaky.status == 400 && sneaky.reason.contains("'private/../public'"), "\(sneaky)")
        let removed = try await HTTP.send(
            "POST", "\(s.server.url)/cloudlet/admin/roles/remove-member?container=\(LiveServer.container)&role=Nobody&user=alice",
            headers: HTTP.bearer(s.adminToken))
        #expect(removed.status == 400 && removed.reason.contains("'Nobody'"), "\(removed)")
    }
}
