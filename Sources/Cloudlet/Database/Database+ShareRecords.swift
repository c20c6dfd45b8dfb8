import CloudletCore
import Foundation
import Synchronization

/// What one commit changes of a zone's shares: shares written (whole) as their `cloudkit.share` records, share records
/// deleted, and users whose access to the zone starts or ends.
struct ShareChanges: Sendable {
    var puts: [Share] = []
    var deletions: [String] = []
    var access: [(user: String, gone: Bool)] = []

    var isEmpty: Bool { puts.isEmpty && deletions.isEmpty && access.isEmpty }
}

/// Shares as records of their zone (docs/sharing.md, "Storage"): every share change is a `cloudkit.share` record put or
/// deletion in the owner's zone's partition, and the catalog's copy of it — what access checks read — is staged right
/// after that partition commit, under the same writer lock, so the catalog's staged shares of a zone always stand as
/// its share records do. A crash between the two logs' fsyncs is repaired when the store opens
/// (``CloudletStore/reconcileShareRecords()``).
extension Database {
    /// Commits share changes of zone `key`: `plan` runs under the zone's partition writer lock with the zone's shares
    /// as staged (``Catalog/stagedShares(in:)``) and the partition's state; its changes become record mutations of one
    /// partition commit (each share's change tag is its record's) and their catalog copy is staged right after.
    /// Returns the plan's result and the shares as written, after both commits are durable.
    /// - Throws: `zoneNotFound` when the zone is gone; what `plan` throws.
    func commitShares<R: Sendable>(
        _ key: ZoneKey, _ plan: @escaping @Sendable ([String: Share], PartitionState) throws -> (ShareChanges, R)
    ) async throws -> (result: R, saved: [Share]) {
        let partition = store.partition(for: key)
        let catalog = store.catalog
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        let stamp = RecordStamp(timestamp: now, userRecordName: user, deviceID: store.configuration.deviceID)
        let staging = StagedCatalogCommit()
        let hooks = store.testHooks
        let ((result, saved, _), lsn) = try await partition.commit(
            waitingForRoom: { st, lsn -> ([Mutation], (R, [Share], [Mutation])) in
                guard st.zone(key) != nil else {
                    throw CloudletError(.zoneNotFound, "zone '\(key.zoneName)' does not exist in the private database of '\(key.owner)'")
                }
                let (changes, result) = try plan(catalog.stagedShares(in: key), st)
                var mutations: [Mutation] = []
                var saved: [Share] = []
                for var s in changes.puts {
                    mutations.append(try Self.shareRecordMutation(&s, in: key, st: st, lsn: lsn, index: mutations.count, stamp: stamp))
                    saved.append(s)
                }
                for name in changes.deletions {
                    mutations.append(.deleteRecord(zone: key, recordName: name, recordType: Share.recordType, time: now, parent: nil))
                }
                return (mutations, (result, saved, Self.catalogCopy(of: changes, saved: saved, in: key, lsn: lsn)))
            },
            staged: { planned, _ in staging.stage(planned.2, in: catalog, hooks: hooks) })
        if let lsn { try await partition.waitDurable(lsn) }
        try await staging.waitDurable(catalog)
        return (result, saved)
    }

    /// The mutation writing share `s` as its record, the `index`th of commit `lsn` (which gives `s` its change tag),
    /// modified (and, when new, created) with `stamp`. - Throws: `recordExists` when a record of another type has the
    /// share's name.
    static func shareRecordMutation(
        _ s: inout Share, in key: ZoneKey, st: PartitionState, lsn: UInt64, index: Int, stamp: RecordStamp
    ) throws -> Mutation {
        let before = try st.entry(key, s.id.recordName)
        if let before, !before.deleted, before.recordType != Share.recordType {
            throw CloudletError(
                .recordExists, "record '\(s.id.recordName)' (\(before.recordType)) exists in zone '\(key.zoneName)': a share cannot take its name")
        }
        s.changeTag = ChangeTag.make(lsn: lsn, index: index)
        let created = before.flatMap { $0.deleted ? nil : $0.created } ?? stamp
        let record = s.record(changeTag: s.changeTag!, created: created, modified: stamp)
        return .putRecord(zone: key, record: record, encoded: RecordCodec.encode(record))
    }

    /// The catalog mutations that copy `changes` (with `saved`, the shares as written) of zone `key`, committed at
    /// partition LSN `lsn`.
    static func catalogCopy(of changes: ShareChanges, saved: [Share], in key: ZoneKey, lsn: UInt64) -> [Mutation] {
        saved.map { .security(.share(.recorded(key, $0, lsn: lsn))) }
            + changes.deletions.map { .security(.share(.delete(key, recordName: $0))) }
            + changes.access.map { .security(.share(.access(key, user: $0.user, lsn: lsn, gone: $0.gone))) }
    }

    /// The share changes a batch of zone `key` makes by deleting records (the mutations planned, `mutations`): a share
    /// whose root it deletes — explicitly or by a DELETE_SELF cascade — or whose record it deletes ends for everyone,
    /// in the same commit (its `deletions` name every ended share, those whose record the batch deletes itself too).
    /// Looks at the staged shares only when the batch deletes something.
    static func sharesEnded(by mutations: [Mutation], in key: ZoneKey, catalog: Catalog) -> ShareChanges {
        var deleted: Set<String> = []
        for m in mutations { if case .deleteRecord(_, let name, _, _, _) = m { deleted.insert(name) } }
        guard !deleted.isEmpty else { return ShareChanges() }
        let shares = catalog.stagedShares(in: key)
        guard !shares.isEmpty else { return ShareChanges() }
        let ended = shares.values.filter { s in deleted.contains(s.id.recordName) || s.rootRecordName.map(deleted.contains) == true }
        return ending(ended.sorted { $0.id.recordName < $1.id.recordName })
    }
}

/// The catalog commit staged after a partition commit (under its lock), and what the task that made it waits for.
final class StagedCatalogCommit: Sendable {
    private let outcome = Mutex<Result<UInt64, CloudletError>?>(nil)

    /// Stages `mutations` (nothing when empty). A failure (the catalog's log failed) is kept for ``waitDurable(_:)``:
    /// the partition commit stands, and the next open brings the catalog back in line with it.
    func stage(_ mutations: [Mutation], in catalog: Catalog, hooks: TestHooks) {
        guard !mutations.isEmpty, !hooks.dropsShareCatalogCopies else { return }
        let result: Result<UInt64, CloudletError>
        do {
            result = .success(try catalog.commitStaged { _ in (mutations, ()) }.version)
        } catch let e as CloudletError {
            result = .failure(e)
        } catch {
            result = .failure(CloudletError(.internalError, "staging share changes in the catalog: \(error)", cause: error))
        }
        outcome.withLock { $0 = result }
    }

    /// Waits until what was staged is durable; rethrows a failure to stage it.
    func waitDurable(_ catalog: Catalog) async throws {
        guard let outcome = outcome.withLock({ $0 }) else { return }
        try await catalog.waitDurable(try outcome.get())
    }
}
