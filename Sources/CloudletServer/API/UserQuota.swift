import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletWire
import Synchronization

/// Each user's storage quota on their private database (``ServerConfiguration/userQuota``), in bytes of live records
/// *and the asset files they reference* (``Database/storageUsed()``: each reference counts the file's size against
/// the owner of the record's zone, as CloudKit counts an asset against the user who saved it).
///
/// - **Saves.** A `records/modify` whose saves would take the database past the quota is refused whole with
///   `QUOTA_EXCEEDED`, nothing applied. A saved record adds its stored size and the sizes of the assets it brings
///   *with a receipt* (a new reference: the receipt rule lets an asset without one through only when the record
///   already has it, so a record fetched and saved back adds no asset bytes). Deletions always go through. Records a
///   participant saves through their shared database live in the owner's zone: they count against the owner's
///   quota, as in CloudKit.
/// - **Uploads.** An upload to a private database's upload URL is refused with `QUOTA_EXCEEDED` (413) when its bytes
///   would not fit in what the user has left: before its body is read when it declares its length, else as soon as
///   it passes what is left; nothing is kept. (An upload for the public or a shared database is checked when it is
///   saved: its URL does not say whose quota it will count against.)
///
/// Measuring a database walks its records, so each user's usage is kept as an upper bound: measured exactly when
/// first needed, then raised by what each admitted request saves (a replaced or deleted version is not taken off).
/// Only a request the bound does not clear measures again — so a user far below the quota is never walked twice,
/// and one near it is measured exactly before being refused.
///
/// Requests in flight **reserve** what they add when they are admitted (``check(_:in:container:)``) until they end
/// (``finished(_:committed:)``): a request is admitted only when the bound, plus every reservation still in flight,
/// plus what it adds fits. So concurrent saves cannot together pass the quota, each having fitted alone.
final class UserQuota: Sendable {
    let bytes: Int
    private struct Usage {
        /// The kept upper bound of the database's usage (nil: not measured yet).
        var bound: Int?
        /// What admitted requests that have not ended yet add.
        var inFlight = 0
    }
    private let usage = Mutex([String: Usage]())

    init(bytes: Int) { self.bytes = bytes }

    /// Throws `QUOTA_EXCEEDED` unless `operations` fit in the quota of the private database(s) their records go to:
    /// `db`'s own, or for a shared database each zone owner's. Returns what they add per owner, reserved: pass it to
    /// ``finished(_:committed:)`` when the request ends, however it ends.
    func check(_ operations: [RecordOperation], in db: Database, container: Container) throws -> [String: Int] {
        guard db.scope != .public else { return [:] }
        var adding: [String: Int] = [:]
        for op in operations {
            switch op {
            case .create(let r), .update(let r), .forceUpdate(let r), .replace(let r), .forceReplace(let r):
                let owner = db.scope == .shared ? r.id.zoneID.ownerName : db.id.owner
                // A shared database holds no zone of its own user's or unowned: the engine refuses those records.
                if db.scope == .shared && (owner == db.id.owner || owner == defaultOwnerName) { continue }
                adding[owner, default: 0] += RecordCodec.encode(r).count + r.recordName.utf8.count + Self.newAssetBytes(r)
            case .delete, .forceDelete: break
            }
        }
        var reserved: [String: Int] = [:]
        do {
            for (user, added) in adding.sorted(by: { $0.key < $1.key }) {
                // (A malformed owner name measures nothing: the engine refuses the request's records in that zone.)
                if try reserve(added, for: user, db: db, container: container) { reserved[user] = added }
            }
        } catch {
            finished(reserved, committed: false)
            throw error
        }
        return reserved
    }

    /// Reserves `added` bytes of `user`'s quota (``held(by:adding:reserve:db:container:)``). False when there is no
    /// database to measure. - Throws: `QUOTA_EXCEEDED` when they do not fit.
    private func reserve(_ added: Int, for user: String, db: Database, container: Container) throws -> Bool {
        guard let h = try held(by: user, adding: added, reserve: true, db: db, container: container) else { return false }
        guard h.fits else {
            // What is in flight may already be in the measure (saves that committed while it was taken): counting it
            // again only errs on the side of the quota, and the next measure after they end is exact.
            let pending = h.inFlight > 0 ? " (and requests under way add \(h.inFlight))" : ""
            throw APIError(
                "QUOTA_EXCEEDED",
                "the private database of '\(user)' holds \(h.bound) bytes (records and assets) of its \(bytes)-byte quota\(pending); "
                    + "these records would add \(added) (delete some records first)")
        }
        return true
    }

    /// Ends the reservations ``check(_:in:container:)`` made; `committed`: the request's saves went through (then
    /// the kept bounds rise by them).
    func finished(_ reserved: [String: Int], committed: Bool) {
        guard !reserved.isEmpty else { return }
        usage.withLock { u in
            for (user, n) in reserved {
                u[user, default: Usage()].inFlight -= n
                if committed, let bound = u[user]?.bound { u[user]!.bound = bound + n }
            }
        }
    }

    /// The asset bytes a saved record brings as new references: the sizes of its assets that carry an upload receipt.
    static func newAssetBytes(_ r: Record) -> Int {
        r.fields.values.reduce(0) { sum, v in sum + v.assets.reduce(0) { $0 + ($1.receipt == nil ? 0 : Int($1.size)) } }
    }

    /// `user`'s usage bound, what requests in flight add, and whether `added` more bytes fit — against the kept bound
    /// when it has room, else against the usage measured now (and kept). With `reserve`, bytes that fit are reserved
    /// in the same step. Nil when there is no such database to measure.
    private func held(
        by user: String, adding added: Int, reserve: Bool, db: Database, container: Container
    ) throws -> (bound: Int, inFlight: Int, fits: Bool)? {
        let bytes = self.bytes
        func take(_ u: inout [String: Usage], measured: Int?) -> (bound: Int, inFlight: Int, fits: Bool)? {
            if let measured { u[user, default: Usage()].bound = measured }
            guard let entry = u[user], let bound = entry.bound else { return nil }
            let fits = bound + entry.inFlight + added <= bytes
            if fits && reserve { u[user]!.inFlight += added }
            return (bound, entry.inFlight, fits)
        }
        if let kept = usage.withLock({ take(&$0, measured: nil) }), kept.fits { return kept }
        guard let used = try measure(user, db: db, container: container) else { return nil }
        return usage.withLock { take(&$0, measured: used) }
    }

    /// Measures `user`'s private database exactly; nil when there is none.
    private func measure(_ user: String, db: Database, container: Container) throws -> Int? {
        // The owner's private database, measured as its owner (a participant's request may not read it whole).
        guard let owner = db.scope == .private ? db : try? container.database(.private, access: .user(user), environment: db.id.environment)
        else { return nil }
        return try ThreadBridge.wait { try await owner.storageUsed() }
    }

    /// How many bytes an upload to `user`'s private database may still bring (the quota minus the database's usage;
    /// at least 0). `declared`: the upload's declared length, if it has one; else it may be up to `limit` bytes (the
    /// usage is measured exactly unless the kept bound leaves room for that). - Throws: `QUOTA_EXCEEDED` (413) when
    /// `declared` bytes do not fit.
    func uploadAllowance(
        user: String, container: Container, environment: Environment, declared: Int64?, limit: Int64
    ) throws -> Int64 {
        let want = Int(clamping: declared ?? limit)
        let db = try container.database(.private, access: .user(user), environment: environment)
        let used = try held(by: user, adding: want, reserve: false, db: db, container: container).map { $0.bound + $0.inFlight } ?? 0
        let left = Int64(max(0, bytes - used))
        if let declared, declared > left { throw Self.uploadRefused(user: user, used: used, quota: bytes, size: "\(declared) bytes") }
        return left
    }

    /// The `QUOTA_EXCEEDED` answer to an upload that does not fit (`size`: how large it is, or "more than N bytes").
    static func uploadRefused(user: String, used: Int, quota: Int, size: String) -> APIError {
        APIError(
            "QUOTA_EXCEEDED",
            "the private database of '\(user)' holds \(used) bytes (records and assets) of its \(quota)-byte quota; "
                + "this upload of \(size) would pass it (delete some records first); nothing was kept",
            status: 413)
    }
}
