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
        /// A server-to-server key of the container (requests signed with the `openssl` command line).
        case serverKey
        var description: String { rawValue }
    }

    enum Place: String, CaseIterable, CustomStringConvertible {
        case `public`
        /// Alice's private database (every request names her as the zone owner).
        case alicePrivate
        /// The shared database, aiming at a zone of alice's that she shared with nobody (SharingAPITests covers shares).
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
        //                          none   apiToken  alice  bob      member  admin  serverKey
        .public: [
            .lookup: [             "401", "r403",   "ok",  "r403",  "ok",   "401", "ok"],
            .query: [              "401", "hidden", "ok",  "hidden", "ok",  "401", "ok"],
            .create: [             "401", "421",    "ok",  "ok",    "ok",   "401", "ok"],
            .update: [             "401", "421",    "ok",  "r403",  "ok",   "401", "ok"],
            .delete: [             "401", "421",    "ok",  "r403",  "ok",   "401", "ok"],
            .zones: [              "401", "ok",     "ok",  "ok",    "ok",   "401", "ok"],
            .changes: [            "401", "hidden", "ok",  "hidden", "ok",  "401", "ok"],
            .subscriptions: [      "401", "421",    "ok",  "ok",    "ok",   "401", "403"],
            .notifications: [      "401", "421",    "ok",  "ok",    "ok",   "401", "403"],
            .admin: [              "403", "403",    "403", "403",   "403",  "ok", "403"],
        ],
        .alicePrivate: [
            .lookup: [             "401", "421",    "ok",  "rZ",    "rZ",   "401", "403"],
            .query: [              "401", "421",    "ok",  "Z",     "Z",    "401", "403"],
            .create: [             "401", "421",    "ok",  "rZ",    "rZ",   "401", "403"],
            .update: [             "401", "421",    "ok",  "rZ",    "rZ",   "401", "403"],
            .delete: [             "401", "421",    "ok",  "rZ",    "rZ",   "401", "403"],
            .zones: [              "401", "421",    "ok",  "rZ",    "rZ",   "401", "403"],
            .changes: [            "401", "421",    "ok",  "rZ",    "rZ",   "401", "403"],
            .subscriptions: [      "401", "421",    "ok",  "ok",    "ok",   "401", "403"],
            .notifications: [      "401", "421",    "ok",  "ok",    "ok",   "401", "403"],
            .admin: [              "403", "403",    "403", "403",   "403",  "ok", "403"],
        ],
        .shared: [
            .lookup: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401", "403"],
            .query: [              "401", "421",    "Z",   "Z",     "Z",    "401", "403"],
            .create: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401", "403"],
            .update: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401", "403"],
            .delete: [             "401", "421",    "rZ",  "rZ",    "rZ",   "401", "403"],
            .zones: [              "401", "421",    "rZ",  "rZ",    "rZ",   "401", "403"],
            .changes: [            "401", "421",    "rZ",  "rZ",    "rZ",   "401", "403"],
            .subscriptions: [      "401", "421",    "ok",  "ok",    "ok",   "401", "403"],
            .notifications: [      "401", "421",    "ok",  "ok",    "ok",   "401", "403"],
            // The admin reaches the route; alice has no zone in her shared database.
            .admin: [              "403", "403",    "403", "403",   "403",  "Z", "403"],
        ],
    ]

    @Test func everyCallerGetsExactlyWhatTheTableSaysInEveryDatabase() async throws {
        let s = try live
        let carol = try await Self.setUp(s)
        let dir = TempDir("isolation")
        let key = try await ServerKeyTests.addKey(s, dir, "isolation")
        var mismatches: [String] = []
        for place in Place.allCases {
            for op in Operation.allCases {
                let row = try #require(Self.expected[place]?[op], "no row for \(place) \(op)")
                for (caller, want) in zip(Caller.allCases, row) {
                    let got = try await outcome(s, caller, place, op, memberToken: carol.token, key: key, dir: dir)
                    if got != want { mismatches.append("\(place) \(op) as \(caller): expected \(want), got \(got)") }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) cells differ:\n\(mismatches.joined(separator: "\n"))")
    }

    /// Runs one cell: alice first makes the record the operation aims at (a fresh one, so that cells do not disturb
    /// each other), then the caller does the operation.
    func outcome(
        _ s: LiveServer, _ caller: Caller, _ place: Place, _ op: Operation, memberToken: String, key: ServerKeyTests.Key,
        dir: TempDir
    ) async throws -> String {
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
        case .none, .serverKey: base = "\(s.server.url)/database/1/\(LiveServer.container)/development/\(db)/"
        case .admin:
            base = "\(s.server.url)/database/1/\(LiveServer.container)/development/\(db)/"
            headers = HTTP.bearer(s.adminToken)
        case .apiToken, .alice, .bob, .member: base = ""
        }
        func url(_ operation: String) -> String {
            switch caller {
            case .none, .admin, .serverKey: base + operation
            case .apiToken: s.url(operation, db: db, as: nil)
            case .alice: s.url(operation, db: db, as: "alice")
            case .bob: s.url(operation, db: db, as: "bob")
            case .member: s.url(operation, db: db, as: memberToken)
            }
        }
        func send(_ method: String, _ operation: String, _ body: String) async throws -> Reply {
            if caller == .serverKey {
                return try await ServerKeyTests.signed(s, key, dir, operation, body: body, db: db, method: method)
            }
            return try await HTTP.send(method, url(operation), body: method == "GET" ? nil : Array(body.utf8), headers: headers)
        }
        let reply: Reply
        switch op {
        case .lookup:
            reply = try await send("POST", "records/lookup", #"{"records":[{"recordName":"\#(target)","zoneID":\#(zone)}]}"#)
        case .query:
            reply = try await send("POST", "records/query", #"{"zoneID":\#(zone),"query":{"recordType":"\#(type)"}}"#)
        case .create, .update, .delete:
            let name = op == .create ? unique("c") : target
            let kind = op == .create ? "create" : op == .update ? "forceUpdate" : "forceDelete"
            let record = op == .delete
                ? #"{"recordName":"\#(name)","zoneID":\#(zone)}"#
                : #"{"recordName":"\#(name)","recordType":"\#(type)","zoneID":\#(zone),"fields":{"body":{"value":"y"}}}"#
            reply = try await send("POST", "records/modify", #"{"zoneID":\#(zone),"operations":[{"operationType":"\#(kind)","record":\#(record)}]}"#)
        case .zones:
            reply = try await send("POST", "zones/lookup", #"{"zones":[\#(zone)]}"#)
        case .changes:
            reply = try await send("POST", "changes/zone", #"{"zones":[{"zoneID":\#(zone)}]}"#)
        case .subscriptions:
            reply = try await send("GET", "subscriptions/list", "")
        case .notifications:
            reply = try await send("POST", "tokens/create", #"{"apnsEnvironment":"development"}"#)
        case .admin:
            // The caller's own credentials, whatever they are, on an admin route.
            var adminURL = "\(s.server.url)/cloudlet/admin/query/explain?container=\(LiveServer.container)&database=\(db)"
            if place != .public { adminURL += "&user=alice" }
            switch caller {
            case .none, .admin, .serverKey: break
            case .apiToken: adminURL += "&ckAPIToken=\(s.apiToken)"
            case .alice: adminURL += "&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.alice.token)"
            case .bob: adminURL += "&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.bob.token)"
            case .member: adminURL += "&ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(memberToken)"
            }
            reply = try await HTTP.send(
                "POST", adminURL, body: Array(#"{"zoneID":\#(zone),"query":{"recordType":"\#(type)"}}"#.utf8), headers: headers)
        }
        let result = classify(reply, op, target: target)
        // A denied update or delete left alice's record as it was.
        if (op == .update || op == .delete) && result != "ok" {
            let after = try await HTTP.post(
                s.url("records/lookup", db: place == .public ? "public" : "private"), #"{"records":[{"recordName":"\#(target)"}]}"#)
            if after.records.first?["fields"]?["body"]?["value"]?.stringValue != "x" { return "\(result), yet the record changed" }
        }
        return result
    }

    /// The table's word for a reply (see ``expected``).
    func classify(_ reply: Reply, _ op: Operation, target: String) -> String {
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

    @Test func anUnknownContainerIsAnsweredLikeAKnownOtherOne() async throws {
        let s = try live
        let known = try await HTTP.post(s.url("records/lookup", db: "public", as: nil, container: LiveServer.otherContainer), #"{"records":[]}"#)
        let unknown = try await HTTP.post(s.url("records/lookup", db: "public", as: nil, container: "iCloud.com.example.nowhere"), #"{"records":[]}"#)
        #expect(known.status == 403 && known.serverErrorCode == "ACCESS_DENIED", "\(known)")
        #expect(unknown.status == known.status && unknown.serverErrorCode == known.serverErrorCode, "\(unknown)")
        #expect(unknown.reason.replacingOccurrences(of: "iCloud.com.example.nowhere", with: LiveServer.otherContainer) == known.reason)
    }

    @Test func aDeleteResultNamesTheZoneOwnerAsEveryOtherResultDoes() async throws {
        let s = try live
        let n = unique("owner")
        let created = try await HTTP.post(s.url("records/modify"), #"{"operations":[\#(createOp(n))]}"#)
        let owner = created.records.first?["zoneID"]?["ownerRecordName"]?.stringValue
        #expect(owner == s.alice.user.userRecordName, "\(created)")
        let deleted = try await HTTP.post(
            s.url("records/modify"), #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"\#(n)"}}]}"#)
        #expect(deleted.records.first?["deleted"]?.boolValue == true, "\(deleted)")
        #expect(deleted.records.first?["zoneID"]?["ownerRecordName"]?.stringValue == owner, "\(deleted)")
    }

    @Test func tokensCreateAndRegisterAnswerAtApplesPathWithoutADatabaseSegment() async throws {
        let s = try live
        let base = "\(s.server.url)/database/1/\(LiveServer.container)/development/tokens/"
        let auth = "?ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.alice.token)"
        let created = try await HTTP.post(base + "create" + auth, #"{"apnsEnvironment":"development"}"#)
        #expect(created.status == 200 && created.json["webcourierURL"]?.stringValue != nil, "\(created)")
        // The old path with a database segment still works.
        #expect(try await HTTP.post(s.url("tokens/create"), #"{"apnsEnvironment":"development"}"#).status == 200)
        // register: a token of the client's making becomes a courier token of the caller's notifications.
        let mine = unique("device-token-") + "0123456789"
        let registered = try await HTTP.post(base + "register" + auth, #"{"apnsToken":"\#(mine)"}"#)
        #expect(registered.status == 200 && registered.json["apnsToken"]?.stringValue == mine, "\(registered)")
        let poll = try await HTTP.get(try #require(registered.json["webcourierURL"]?.stringValue) + "&timeout=0")
        #expect(poll.status == 200, "\(poll)")
        // Another user cannot take it over; a user is needed; the token is checked.
        let bob = try await HTTP.post(base + "register?ckAPIToken=\(s.apiToken)&ckWebAuthToken=\(s.bob.token)", #"{"apnsToken":"\#(mine)"}"#)
        #expect(bob.status == 403 && bob.serverErrorCode == "ACCESS_DENIED", "\(bob)")
        let anonymous = try await HTTP.post(base + "register?ckAPIToken=\(s.apiToken)", #"{"apnsToken":"\#(mine)"}"#)
        #expect(anonymous.status == 421, "\(anonymous)")
        let short = try await HTTP.post(base + "register" + auth, #"{"apnsToken":"abc"}"#)
        #expect(short.status == 400 && short.reason.contains("apnsToken"), "\(short)")
    }

    @Test func usersDiscoverFindsOnlyUsersWhoOptedIn() async throws {
        let s = try live
        let credentials = Credentials(store: s.store)
        let tag = unique("d").replacingOccurrences(of: "-", with: "")
        let dave = try await credentials.createUser(name: "dave" + tag, email: "Dave.\(tag)@example.com", discoverable: true).user
        let erin = try await credentials.createUser(name: "erin" + tag, email: "erin.\(tag)@example.com").user
        func names(_ r: Reply) -> [String] { r.json["users"]?.arrayValue?.compactMap { $0["userRecordName"]?.stringValue } ?? [] }

        let all = try await HTTP.get(s.url("users/discover", db: "public"))
        #expect(all.status == 200 && names(all).contains(dave.userRecordName) && !names(all).contains(erin.userRecordName), "\(all)")
        let byEmail = try await HTTP.post(
            s.url("users/discover", db: "public"),
            #"{"lookupInfos":[{"emailAddress":"DAVE.\#(tag)@EXAMPLE.COM"},{"emailAddress":"erin.\#(tag)@example.com"},{"userRecordName":"\#(erin.userRecordName)"},{"phoneNumber":"+15550100"}]}"#)
        #expect(names(byEmail) == [dave.userRecordName], "\(byEmail)")
        let identity = byEmail.json["users"]?.arrayValue?.first
        #expect(identity?["lookupInfo"]?["emailAddress"]?.stringValue == "dave.\(tag)@example.com")
        #expect(identity?["nameComponents"]?["givenName"]?.stringValue == dave.name)
        // The older lookups, at the path with a database segment as CloudKit JS sends them.
        let email = try await HTTP.post(s.url("users/lookup/email", db: "public"), #"{"users":[{"emailAddress":"dave.\#(tag)@example.com"}]}"#)
        #expect(names(email) == [dave.userRecordName] && email.json["users"]?.arrayValue?.first?["firstName"]?.stringValue == dave.name, "\(email)")
        let id = try await HTTP.post(
            s.url("users/lookup/id", db: "public"), #"{"users":[{"userRecordName":"\#(erin.userRecordName)"},{"userRecordName":"\#(dave.userRecordName)"}]}"#)
        #expect(names(id) == [dave.userRecordName], "\(id)")
        let contacts = try await HTTP.post(
            s.url("users/lookup/contacts", db: "public"), #"{"contacts":[{"emailAddresses":["nobody@example.com","dave.\#(tag)@example.com"]}]}"#)
        #expect(names(contacts) == [dave.userRecordName], "\(contacts)")
        // For signed-in users only.
        let anonymous = try await HTTP.get(s.url("users/discover", db: "public", as: nil))
        #expect(anonymous.status == 421 && anonymous.serverErrorCode == "AUTHENTICATION_REQUIRED", "\(anonymous)")
    }
}
