import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletWire
import Synchronization

/// Each user's storage quota on their private database (``ServerConfiguration/userQuota``): a `records/modify` whose
/// saves would take the database's live records (their stored sizes, ``Database/storageUsed()``) past it is refused
/// whole with `QUOTA_EXCEEDED`, nothing applied. Deletions always go through. Records a participant saves through
/// their shared database live in the owner's zone: they count against the owner's quota, as in CloudKit.
///
/// Measuring a database walks its records, so each user's usage is kept as an upper bound: measured exactly when
/// first needed, then raised by what each admitted request saves (a replaced or deleted version is not taken off).
/// Only a request the bound does not clear measures again — so a user far below the quota is never walked twice,
/// and one near it is measured exactly before being refused.
final class UserQuota: Sendable {
    let bytes: Int
    private let bounds = Mutex([String: Int]())

    init(bytes: Int) { self.bytes = bytes }

    /// Throws `QUOTA_EXCEEDED` unless `operations` fit in the quota of the private database(s) their records go to:
    /// `db`'s own, or for a shared database each zone owner's. Returns what they add per owner, for ``admitted(_:)``.
    func check(_ operations: [RecordOperation], in db: Database, container: Container) throws -> [String: Int] {
        guard db.scope != .public else { return [:] }
        var adding: [String: Int] = [:]
        for op in operations {
            switch op {
            case .create(let r), .update(let r), .forceUpdate(let r), .replace(let r), .forceReplace(let r):
                let owner = db.scope == .shared ? r.id.zoneID.ownerName : db.id.owner
                // A shared database holds no zone of its own user's or unowned: the engine refuses those records.
                if db.scope == .shared && (owner == db.id.owner || owner == defaultOwnerName) { continue }
                adding[owner, default: 0] += RecordCodec.encode(r).count + r.recordName.utf8.count
            case .delete, .forceDelete: break
            }
        }
        for (user, added) in adding.sorted(by: { $0.key < $1.key }) {
            if let bound = bounds.withLock({ $0[user] }), bound + added <= bytes { continue }
            // The owner's private database, measured as its owner (a participant's request may not read it whole).
            // (A malformed owner name measures nothing: the engine refuses the request's records in that zone.)
            guard let owner = db.scope == .private ? db : try? container.database(.private, access: .user(user), environment: db.id.environment)
            else { continue }
            let used = try ThreadBridge.wait { try await owner.storageUsed() }
            bounds.withLock { $0[user] = used }
            guard used + added <= bytes else {
                throw APIError(
                    "QUOTA_EXCEEDED",
                    "the private database of '\(user)' holds \(used) bytes of its \(bytes)-byte quota; these records would add \(added) "
                        + "(delete some records first)")
            }
        }
        return adding
    }

    /// Raises the owners' usage bounds after a request that saved `added` bytes (per owner) went through.
    func admitted(_ added: [String: Int]) {
        guard !added.isEmpty else { return }
        bounds.withLock { for (user, n) in added { $0[user, default: 0] += n } }
    }
}
