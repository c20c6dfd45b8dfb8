import Cloudlet
import CloudletClient
import CloudletCore
import CloudletServer
import CloudletTestSupport
import Foundation
import Testing

/// The client against a real server over loopback: batches past the server's limits, notifications through the web
/// courier, cancellation of a request in flight, TLS with a private CA, an unreachable server, and whose data a
/// web auth token reaches.
@Suite struct LiveClientTests {
    @Test func aNonAtomicBatchOverTheRequestLimitIsSentInPartsAndAnAtomicOneIsRefusedWhole() async throws {
        try await withFixture { f in
            let db = f.remote()
            let n = CloudletLimits.operationsPerRequest + 50
            let ops: [RecordOperation] = (0..<n).map { i in
                .forceReplace(Record(recordType: "Item", recordName: "item-\(i)", fields: ["i": .int64(Int64(i))]))
            }
            let saved = try await db.modify(ops, atomic: false)
            #expect(saved.count == n && saved.allSatisfy { $0.record != nil })
            #expect(saved.map(\.recordID.recordName) == ops.map(\.recordID.recordName))
            // Lookups past the per-request limit, one name twice.
            let ids = ops.map(\.recordID) + [ops[0].recordID]
            let found = try await db.records(for: ids)
            #expect(found.count == ids.count && found.allSatisfy { (try? $0.get()) != nil })
            #expect(try found[n].get().fields["i"] == .int64(0))

            // Atomic: never split, so the server's limit comes back as the error.
            do {
                _ = try await db.modify(ops, atomic: true)
                Issue.record("an atomic batch over the limit was accepted")
            } catch let e as CloudletError {
                #expect(e.code == .limitExceeded || e.code == .invalidArguments, "\(e)")
                #expect(e.message.contains("\(CloudletLimits.operationsPerRequest)"), "\(e)")
            }
        }
    }

    @Test func notificationsArriveThroughTheCourierAndResumeAfterThePositionGiven() async throws {
        try await withFixture { f in
            let db = f.remote()
            let zone = ZoneID(zoneName: "inbox")
            _ = try await db.createZone(zone)
            _ = try await db.saveSubscription(
                Subscription(id: "new-notes", kind: .query(recordType: "Note", predicate: .all, zoneID: zone), firesOn: [.create]))
            let before = try await db.notifications(wait: 0)
            _ = try await db.save(Record(recordType: "Note", recordName: "hello", zoneID: zone, fields: ["t": .string("x")]))
            let batch = try await db.notifications(after: before.next, wait: 10)
            #expect(batch.notifications.map(\.recordID.recordName) == ["hello"], "\(batch.notifications)")
            #expect(batch.notifications.first?.reason == .recordCreated && batch.notifications.first?.subscriptionID == "new-notes")
            #expect(batch.notifications.first?.recordID.zoneID.zoneName == "inbox")
            let nothing = try await db.notifications(after: batch.next, wait: 0)
            #expect(nothing.notifications.isEmpty && !nothing.gap)

            // `limit` cuts a batch and `next` resumes right after the last one kept.
            for i in 0..<3 { _ = try await db.save(Record(recordType: "Note", recordName: "n\(i)", zoneID: zone)) }
            var got: [String] = []
            var position = batch.next
            for _ in 0..<10 where got.count < 3 {
                let page = try await db.notifications(after: position, limit: 1, wait: 5)
                #expect(page.notifications.count <= 1)
                got += page.notifications.map(\.recordID.recordName)
                position = page.next
            }
            #expect(got == ["n0", "n1", "n2"])
        }
    }

    /// The first notification event of `db`'s live feed after `start`, or nil within `seconds`.
    static func firstEvent(_ db: RemoteDatabase, after start: NotificationID, whileDoing work: () async throws -> Void)
        async throws -> NotificationEvent?
    {
        let events = db.notificationEvents(after: start)
        try await work()
        return try await withThrowingTaskGroup(of: NotificationEvent?.self) { group in
            group.addTask {
                for try await e in events { return e }
                return nil
            }
            group.addTask {
                try await Task.sleep(nanoseconds: 15_000_000_000)
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
    }

    @Test func notificationsArePushedOverTheWebsocketAsTheyHappen() async throws {
        try await withFixture { f in
            let db = f.remote()
            _ = try await db.saveSubscription(
                Subscription(id: "all-notes", kind: .query(recordType: "Note", predicate: .all, zoneID: nil), desiredKeys: ["t"]))
            let start = try await db.notifications(wait: 0).next
            let event = try await Self.firstEvent(db, after: start) {
                _ = try await f.embedded().save(Record(recordType: "Note", recordName: "pushed", fields: ["t": .string("x")]))
            }
            guard case .notification(let n)? = event else {
                Issue.record("no notification over the websocket: \(String(describing: event))")
                return
            }
            #expect(n.recordID.recordName == "pushed" && n.subscriptionID == "all-notes" && n.reason == .recordCreated)
            #expect(n.fields["t"] == .string("x"))
            // Resuming after it: nothing more is waiting, and the next one arrives.
            let next = try await Self.firstEvent(db, after: n.id) {
                _ = try await f.embedded().save(Record(recordType: "Note", recordName: "second"))
            }
            guard case .notification(let m)? = next else { Issue.record("no second notification: \(String(describing: next))"); return }
            #expect(m.recordID.recordName == "second")
        }
    }

    @Test func cancellingTheCallingTaskCancelsALongPoll() async throws {
        try await withFixture { f in
            let db = f.remote()
            let start = try await db.notifications(wait: 0)
            // Nothing will arrive: uncancelled, the poll would return an empty batch after its wait. (The server only
            // notices the dropped connection when that wait ends, so shutting it down takes that long: kept short.)
            let poll = Task { try await db.notifications(after: start.next, wait: 6) }
            try await Task.sleep(nanoseconds: 300_000_000)
            poll.cancel()
            do {
                let batch = try await poll.value
                Issue.record("the poll ran to its end: \(batch.notifications.count) notifications")
            } catch is CancellationError {
            } catch {
                Issue.record("expected CancellationError, got \(error)")
            }
            // The client still works afterwards.
            #expect(try await db.zones().contains { $0.id.isDefault })
        }
    }

    @Test func eachWebAuthTokenReachesItsOwnUsersPrivateDatabase() async throws {
        try await withFixture { f in
            let alice = f.remote()
            let bob = f.client(token: f.bob.token).container(ClientFixture.container).privateDatabase
            _ = try await alice.save(Record(recordType: "Note", recordName: "secret"))
            let bobs = try await bob.records(for: [RecordID(recordName: "secret")])
            #expect(bobs[0].errorCode == "unknownItem")
            // An unknown token is refused with CloudKit's code.
            let stranger = f.client(token: "not-a-token").container(ClientFixture.container).privateDatabase
            do {
                _ = try await stranger.zones()
                Issue.record("an unknown web auth token was accepted")
            } catch let e as CloudletError {
                #expect(e.code == .authenticationRequired || e.code == .authenticationFailed, "\(e)")
            }
        }
    }

    @Test func aServerKeyClientSignsItsRequestsAndActsOnThePublicDatabaseAsTheDeveloper() async throws {
        let dir = TempDir("client-s2s")
        let key = dir.sub("key.pem"), pub = dir.sub("pub.pem")
        for args in [["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key], ["ec", "-in", key, "-pubout", "-out", pub]] {
            let r = try await ChildProcess.run("/usr/bin/openssl", args)
            try #require(r.status == 0, "openssl \(args[0]): \(r.err)")
        }
        try await withFixture { f in
            let keyID = try await Credentials(store: f.store).addServerKey(
                container: ClientFixture.container, pem: try String(contentsOfFile: pub, encoding: .utf8))
            let serverKey = try ServerKey(keyID: keyID, privateKeyPEM: try String(contentsOfFile: key, encoding: .utf8))
            let client = CloudletClient(url: f.server.url, serverKey: serverKey)
            let db = client.container(ClientFixture.container).publicDatabase
            let saved = try await db.save(Record(recordType: "Announcement", recordName: "welcome", fields: ["text": .string("hi")]))
            #expect(saved.created?.userRecordName == defaultOwnerName, "\(String(describing: saved.created))")
            // The developer may change any public record, a user's included.
            let users = f.client().container(ClientFixture.container).publicDatabase
            let alices = try await users.save(Record(recordType: "Announcement", recordName: "by-alice"))
            var edit = alices
            edit["text"] = .string("edited by the server")
            #expect(try await db.save(edit).fields["text"] == .string("edited by the server"))
            let page = try await db.query(Query(recordType: "Announcement"))
            #expect(Set(page.records.map(\.recordName)) == ["welcome", "by-alice"])
            // No private databases for a key.
            do {
                _ = try await client.container(ClientFixture.container).privateDatabase.zones()
                Issue.record("a server key read a private database")
            } catch let e as CloudletError {
                #expect(e.code == .permissionFailure || e.code == .authenticationRequired || e.code == .authenticationFailed, "\(e)")
            }
            // A key the server does not know is refused.
            let stranger = CloudletClient(
                url: f.server.url,
                serverKey: try ServerKey(keyID: "unknown-key", privateKeyPEM: try String(contentsOfFile: key, encoding: .utf8)),
                configuration: .init(retry: .never))
            do {
                _ = try await stranger.container(ClientFixture.container).publicDatabase.record(for: saved.id)
                Issue.record("an unknown key was accepted")
            } catch let e as CloudletError {
                #expect(e.code == .authenticationFailed && e.message.contains("unknown"), "\(e)")
            }
        }
        #expect(throws: CloudletError.self) { try ServerKey(keyID: "k", privateKeyPEM: "not a key") }
    }

    @Test func anUnreachableServerIsServiceUnavailableNamingTheAddress() async throws {
        // A port nothing listens on: bind one, note it, close it.
        let port = try await withFixture { f in f.server.port }
        let client = CloudletClient(
            url: "http://127.0.0.1:\(port)", apiToken: "t", configuration: .init(retry: RetryPolicy(maxAttempts: 2, initialDelay: 0.001)))
        do {
            _ = try await client.container("iCloud.x").publicDatabase.zones()
            Issue.record("a closed port answered")
        } catch let e as CloudletError {
            #expect(e.code == .serviceUnavailable, "\(e)")
            #expect(e.message.contains("127.0.0.1:\(port)") && !e.message.contains("ckAPIToken"), "\(e)")
        }
    }

    @Test func httpsWorksWithThePrivateCAGivenAndFailsWithoutIt() async throws {
        let dir = TempDir("client-tls")
        let (cert, key) = try await TestCertificate.make(in: dir.path)
        try await withFixture(configure: { c in
            c.tlsCertificatePath = cert
            c.tlsKeyPath = key
        }) { f in
            #expect(f.server.url.hasPrefix("https://"))
            let trusted = f.client(configuration: .init(caFile: cert)).container(ClientFixture.container).privateDatabase
            let start = try await trusted.notifications(wait: 0).next
            _ = try await trusted.saveSubscription(Subscription(id: "tls", kind: .query(recordType: "Note", predicate: .all, zoneID: nil)))
            var saved: Record?
            let event = try await Self.firstEvent(trusted, after: start) {
                saved = try await trusted.save(Record(recordType: "Note", recordName: "over-tls"))
            }
            #expect(saved?.changeTag != nil)
            // The notification websocket goes over TLS too (wss://, the same CA).
            if case .notification(let n)? = event { #expect(n.recordID.recordName == "over-tls") } else {
                Issue.record("no notification over wss: \(String(describing: event))")
            }
            let untrusted = f.client(configuration: .init(retry: .never)).container(ClientFixture.container).privateDatabase
            do {
                _ = try await untrusted.zones()
                Issue.record("a certificate from an unknown CA was trusted")
            } catch let e as CloudletError {
                #expect(e.code == .authenticationFailed && e.message.lowercased().contains("certificate"), "\(e)")
            }
        }
    }
}
