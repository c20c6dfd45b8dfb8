import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The public database's security roles (CloudKit's `_world`, `_icloud`, `_creator` and custom roles with
/// per-record-type grants), enforced by the engine for lookups, queries, counts, modifies, change feeds and
/// notifications.
@Suite struct SecurityRolesTests {
    let dir = TempDir("roles")

    /// A schema where `Secret` records are readable by their creator and the `Editors` role only, and writable by
    /// editors too.
    static let secretSchema = """
        DEFINE SCHEMA
            CREATE ROLE Editors;
            RECORD TYPE Secret (
                body STRING QUERYABLE,
                GRANT READ, WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ, WRITE TO Editors
            );
        """

    func secret(_ name: String, _ body: String = "x") -> Record {
        Record(recordType: "Secret", recordName: name, fields: ["body": .string(body)])
    }

    @Test func byDefaultOnlyTheCreatorMayChangeOrDeleteAPublicRecord() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let alice = try c.database(.public, access: .user("alice"))
        let bob = try c.database(.public, access: .user("bob"))
        let saved = try await alice.save(note("n1", title: "alice's"))
        // World READ: bob and anonymous callers read it.
        #expect(try await bob.record(for: saved.id).fields["title"] == .string("alice's"))
        #expect(try await c.database(.public, access: .anonymous).record(for: saved.id).recordName == "n1")
        var changed = saved
        changed.fields["title"] = "bob's"
        let ops: [RecordOperation] = [
            .update(changed), .forceUpdate(changed), .replace(changed), .forceReplace(changed),
            .delete(saved.id, changeTag: saved.changeTag!), .forceDelete(saved.id),
        ]
        for op in ops {
            let result = try await bob.modify([op])
            #expect(result[0].code == .permissionFailure, "\(op.operationType): \(result[0])")
        }
        // A stale change tag does not tell bob more than that he may not write.
        var stale = changed
        stale.changeTag = "stale"
        #expect(try await bob.modify([.update(stale)])[0].error?.serverRecord == nil)
        #expect(try await alice.record(for: saved.id).fields["title"] == .string("alice's"))
        // icloud CREATE: bob creates his own, and may change that one.
        let mine = try await bob.save(note("n2"))
        var mineChanged = mine
        mineChanged.fields["title"] = "edited"
        #expect(try await bob.modify([.update(mineChanged)])[0].error == nil)
        // The creator herself updates and deletes; the developer (a server key) may do anything.
        #expect(try await alice.modify([.update(changed)])[0].error == nil)
        let key = try c.database(.public, access: AccessContext(.serverKey("k")))
        #expect(try await key.modify([.forceDelete(mine.id)])[0].error == nil)
        #expect(try await alice.modify([.forceDelete(saved.id)])[0].error == nil)
        try await store.close()
    }

    @Test func customRolesGrantReadAndWriteAndHideEverythingElse() async throws {
        var store = try await openStore(dir)
        var c = try store.container(testContainer)
        try await c.importSchema(Self.secretSchema)
        let alice = try c.database(.public, access: .user("alice"))
        var bob = try c.database(.public, access: .user("bob"))
        _ = try await alice.save(secret("a1"))
        _ = try await alice.save(secret("a2"))
        _ = try await bob.save(secret("b1"))
        let all = Query(recordType: "Secret")
        // Bob reads only what he created: lookups are denied, queries and counts leave alice's out.
        let denied = try await bob.records(for: [RecordID(recordName: "a1"), RecordID(recordName: "b1")])
        #expect((try? denied[0].get()) == nil)
        if case .failure(let e) = denied[0] { #expect(e.code == .permissionFailure) }
        #expect(try denied[1].get().recordName == "b1")
        await expectError(.permissionFailure) { try await bob.record(for: RecordID(recordName: "a1")) }
        #expect(try await bob.query(all).records.map(\.recordName) == ["b1"])
        #expect(try await bob.count(all) == 1)
        #expect(try await bob.count(Query(recordType: "Secret", predicate: try Predicate(format: "body == 'x'"))) == 1)
        #expect(try await alice.count(all) == 2)
        let anonymous = try c.database(.public, access: .anonymous)
        #expect(try await anonymous.query(all).records.isEmpty)
        #expect(try await anonymous.count(all) == 0)
        #expect(try await bob.zoneChanges(.default).changes.map(\.recordID.recordName) == ["b1"])
        #expect(try await bob.modify([.forceDelete(RecordID(recordName: "a1"))])[0].code == .permissionFailure)
        // As an editor he reads and writes alice's; the membership survives a reopen.
        try await c.addRoleMember("bob", role: "Editors")
        try await store.close()
        store = try await openStore(dir)
        c = try store.container(testContainer)
        bob = try c.database(.public, access: .user("bob"))
        #expect(c.roleMembers() == ["Editors": ["bob"]])
        #expect(try await bob.query(all).records.map(\.recordName).sorted() == ["a1", "a2", "b1"])
        #expect(try await bob.count(all) == 3)
        #expect(try await bob.modify([.forceDelete(RecordID(recordName: "a2"))])[0].error == nil)
        try await c.removeRoleMember("bob", role: "Editors")
        #expect(try await bob.query(all).records.map(\.recordName) == ["b1"])
        await expectError(.unknownItem) { try await c.removeRoleMember("bob", role: "Editors") }
        await expectError(.invalidArguments) { try await c.addRoleMember("bob", role: "Nobody") }
        await expectError(.invalidArguments) { try await c.addRoleMember("bob", role: "_world") }
        try await store.close()
    }

    @Test func notificationsNeverCarryARecordTheSubscriberMayNotRead() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        try await c.importSchema(Self.secretSchema)
        let alice = try c.database(.public, access: .user("alice"))
        let bob = try c.database(.public, access: .user("bob"))
        try await bob.saveSubscription(Subscription(
            id: "secrets", kind: .query(recordType: "Secret", predicate: .all, zoneID: nil), firesOn: .all))
        _ = try await alice.save(secret("a1"))
        _ = try await bob.save(secret("b1"))
        // Bob's own record's notification comes after alice's commit: once it is there, alice's would be too.
        var seen: [String] = []
        var after: NotificationID?
        while !seen.contains("b1") {
            let batch = await store.notifications(container: testContainer, user: "bob", after: after, wait: 5)
            #expect(!batch.notifications.isEmpty, "bob's own notification never came")
            if batch.notifications.isEmpty { break }
            seen += batch.notifications.map(\.recordID.recordName)
            after = batch.notifications.last?.id
        }
        #expect(seen == ["b1"])
        try await store.close()
    }

    @Test func rolesAndGrantsAreImportedExportedDeployedAndReset() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let result = try await c.importSchema(Self.secretSchema)
        #expect(result.roles == ["Editors"])
        #expect(result.grants == ["Secret: GRANT READ, WRITE TO Editors, GRANT READ, WRITE TO _creator, GRANT CREATE TO _icloud"])
        let text = c.exportSchema()
        #expect(text.contains("CREATE ROLE Editors;"))
        #expect(text.contains("GRANT READ, WRITE TO Editors"))
        #expect(text.contains("GRANT CREATE TO \"_icloud\""))
        // The export reads back to the same policy, and importing it again changes nothing.
        #expect(try await c.importSchema(text).isEmpty)
        #expect(c.securityPolicy(environment: .production) == SecurityPolicy())
        try await c.deploySchema()
        #expect(c.securityPolicy(environment: .production) == c.securityPolicy(environment: .development))
        // A grant to a role nobody created is refused, naming it, and nothing of the text is applied.
        let bad = "DEFINE SCHEMA RECORD TYPE Other (x STRING, GRANT READ TO Ghosts);"
        let e = await expectError(.invalidArguments) { try await c.importSchema(bad) }
        #expect(e?.message.contains("'Ghosts'") == true)
        #expect(!c.schema(environment: .development).contains { $0.name == "Other" })
        // A development-only change goes away with a reset.
        try await c.importSchema("DEFINE SCHEMA CREATE ROLE Viewers; RECORD TYPE Secret (GRANT READ TO Viewers);")
        #expect(c.securityPolicy().roles == ["Editors", "Viewers"])
        try await c.resetDevelopmentSchema()
        #expect(c.securityPolicy() == c.securityPolicy(environment: .production))
        try await store.close()
    }

    @Test func theSchemaLanguageRefusesBadRoles() throws {
        for (text, message) in [
            ("DEFINE SCHEMA CREATE ROLE _world;", "built in"),
            ("DEFINE SCHEMA CREATE ROLE A; CREATE ROLE A;", "already created"),
            ("DEFINE SCHEMA RECORD TYPE T (GRANT DELETE TO A);", "expected READ, CREATE or WRITE"),
        ] {
            #expect(throws: CloudletError.self) { try SchemaLanguage.parse(text) }
            do { _ = try SchemaLanguage.parse(text) } catch let e as CloudletError {
                #expect(e.message.contains(message), "\(text): \(e.message)")
            }
        }
        let doc = try SchemaLanguage.parse("DEFINE SCHEMA RECORD TYPE T (GRANT READ TO \"_world\", GRANT WRITE, READ TO \"_world\");")
        #expect(doc.recordTypes[0].grants == ["_world": [.read, .write]])
    }

    @Test func theCatalogCheckpointKeepsRolesGrantsAndMembers() throws {
        var state = CatalogState()
        let dev = SchemaKey(container: testContainer, environment: .development)
        let changes: [SecurityMutation] = [
            .createRole(dev, role: "Editors"),
            .grants(dev, recordType: "Secret", grants: ["_creator": [.read, .write], "Editors": .all, "_world": []]),
            .member(container: testContainer, role: "Editors", user: "_bob", added: true),
        ]
        for m in changes { state.apply(.security(m)) }
        let decoded = try CatalogState.decodeCheckpoint(state.encodeCheckpoint(), next: nil)
        #expect(decoded.security == state.security)
        #expect(decoded.security.policy(dev).grants["Secret"]?["Editors"] == .all)
        // Without any, the section is not written: the checkpoint has its two sections (schema, subscriptions).
        let empty = CatalogState().encodeCheckpoint()
        #expect(empty[9] == 2, "\(empty)")  // version u8 · catalog version u64 · section count
        #expect(try CatalogState.decodeCheckpoint(empty, next: nil).security.isEmpty)
    }
}
