import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletWire
import Synchronization

/// Each user's storage quota on their private database (``ServerConfiguration/userQuota``): a `records/modify` whose
/// saves would take the database's live records (their stored sizes, ``Database/storageUsed()``) past it is refused
/// whole with `QUOTA_EXCEEDED`, nothing applied. Deletions always go through.
///
/// Measuring a database walks its records, so each user's usage is kept as an upper bound: measured exactly when
/// first needed, then raised by what each admitted request saves (a replaced or deleted version is not taken off).
/// Only a request the bound does not clear measures again — so a user far below the quota is never walked twice,
/// and one near it is measured exactly before being refused.
final class UserQuota: Sendable {
    let bytes: Int
    private let bounds = Mutex([String: Int]())

    init(bytes: Int) { self.bytes = bytes }

    /// Throws `QUOTA_EXCEEDED` unless `operations` fit in `db`'s quota (private databases only); returns what they
    /// add, for ``admitted(_:in:)``.
    func check(_ operations: [RecordOperation], in db: Database) throws -> Int {
        guard db.scope == .private else { return 0 }
        let adding = operations.reduce(0) { sum, op in
            switch op {
            case .create(let r), .update(let r), .forceUpdate(let r), .replace(let r), .forceReplace(let r):
                sum + RecordCodec.encode(r).count + r.recordName.utf8.count
            case .delete, .forceDelete: sum
            }
        }
        guard adding > 0 else { return 0 }
        let user = db.id.owner
        if let bound = bounds.withLock({ $0[user] }), bound + adding <= bytes { return adding }
        let used = try ThreadBridge.wait { try await db.storageUsed() }
        bounds.withLock { $0[user] = used }
        guard used + adding <= bytes else {
            throw APIError(
                "QUOTA_EXCEEDED",
                "the private database of '\(user)' holds \(used) bytes of its \(bytes)-byte quota; these records would add \(adding) "
                    + "(delete some records first)")
        }
        return adding
    }

    /// Raises `db`'s usage bound after a request that saved `added` bytes went through.
    func admitted(_ added: Int, in db: Database) {
        guard added > 0 else { return }
        bounds.withLock { $0[db.id.owner, default: 0] += added }
    }
}
