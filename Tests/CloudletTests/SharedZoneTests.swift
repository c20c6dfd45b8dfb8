import CloudletCore
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import Cloudlet

/// A participant's writes are checked where they are committed (``SharedZone/check(_:lookup:)`` in the batch
/// planner, under the partition's writer lock): races with the owner ending the share or deleting its root cannot
/// let a write through that the zone as committed would refuse. Each race is staged with ``TestHooks``: the
/// participant's `modify` pauses after it has grouped its operations — where the check used to be done — while the
/// owner acts.
@Suite struct SharedZoneTests {
    let dir = TempDir("shared-zone")
    /// The shared trip of the engine's sharing tests.
    let fixture = SharingTests()

    @Test func aParticipantsWriteRacingTheEndOfTheShareIsRefusedWhenTheShareEndedBeforeItCommits() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, _) = try await fixture.acceptedTrip(store)
        let t1 = RecordID(recordName: "t1", zoneID: zone)
        var edited = try await bob.record(for: t1)
        edited.fields["title"] = "bob's, after the end"
        let ran = onceBeforeCommit(store) { try await alice.deleteShare(share.id) }
        let result = try await bob.modify([.update(edited)])[0]
        #expect(ran.value)
        #expect(result.code == .zoneNotFound, "\(result)")
        #expect(try await alice.record(for: t1).fields["title"] == .string("Lisbon"))
        #expect(try await alice.record(for: t1).modified?.userRecordName == "alice")
    }

    @Test func aParticipantsChildRacingACascadeThroughTheOwnersDeleteSelfReferenceLeavesNoOrphan() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, _) = try await fixture.acceptedTrip(store)
        // t1, the shared root, goes when alice's "plan" goes (a DELETE_SELF reference); that ends the share.
        _ = try await alice.save(Record(recordType: "Plan", recordName: "plan", zoneID: zone))
        var t1 = try await alice.record(for: RecordID(recordName: "t1", zoneID: zone))
        t1["plan"] = .reference(Reference(recordName: "plan", action: .deleteSelf))
        _ = try await alice.save(t1)
        let ran = onceBeforeCommit(store) { try await alice.deleteRecord(RecordID(recordName: "plan", zoneID: zone)) }
        let result = try await bob.modify([.create(fixture.child("day1", of: "t1", zone))])[0]
        #expect(ran.value)
        #expect(result.error != nil, "\(result)")
        await expectError(.unknownItem) { try await alice.record(for: RecordID(recordName: "day1", zoneID: zone)) }
        await expectError(.unknownItem) { try await alice.share(for: share.id) }
    }

    @Test func aParticipantsBatchIsCheckedAsItsEarlierOperationsLeaveTheZone() async throws {
        let store = try await openStore(dir)
        let (alice, _, zone, bob, _) = try await fixture.acceptedTrip(store)
        // A child and its own child in one batch: the second is shared through the first, new in the same batch.
        let both = try await bob.modify([.create(fixture.child("day1", of: "t1", zone)), .create(fixture.child("stop1", of: "day1", zone))])
        #expect(both.allSatisfy { $0.error == nil }, "\(both)")
        // alice's root references bob's day1 with DELETE_SELF: bob deleting day1 takes the root with it (a cascade from
        // a participant's deletion, which ends the share); a child of the root later in the same batch is refused.
        var t1 = try await alice.record(for: RecordID(recordName: "t1", zoneID: zone))
        t1["first"] = .reference(Reference(recordName: "day1", action: .deleteSelf))
        _ = try await alice.save(t1)
        let results = try await bob.modify([.forceDelete(RecordID(recordName: "day1", zoneID: zone)), .create(fixture.child("day2", of: "t1", zone))])
        #expect(results[1].code == .permissionFailure, "\(results)")
        #expect(results[0].code == .batchRequestFailed, "\(results)")
        #expect(try await alice.record(for: RecordID(recordName: "t1", zoneID: zone)).recordName == "t1")
        await expectError(.unknownItem) { try await alice.record(for: RecordID(recordName: "day2", zoneID: zone)) }
    }
}
