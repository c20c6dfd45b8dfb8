import CloudletCore

/// A local change the server refused because the record changed there since this device last saw it (or, for a
/// record created on both sides, because it exists there already).
public struct SyncConflict: Sendable {
    /// The record as this device saved it (nil: this device deleted it).
    public var local: Record?
    /// The record as the server has it now (nil: deleted on the server).
    public var server: Record?
    /// The record as this device last fetched or sent it: the common ancestor of both (nil if never synced).
    public var ancestor: Record?
}

/// What to do about a ``SyncConflict``.
public enum SyncResolution: Sendable {
    /// Keep the server's version (or deletion); the local change is dropped.
    case useServer
    /// Send this record, based on the server's version (its fields replace the server's whole record).
    case save(Record)
    /// Delete the record on the server too.
    case delete
}

/// Decides conflicts. The default, ``serverWins``, keeps what the server has, as `CKSyncEngine` apps usually do;
/// ``fieldwiseLastWriterWins`` keeps the fields this device changed since the ancestor and the server's others.
public struct SyncConflictResolver: Sendable {
    public let resolve: @Sendable (SyncConflict) -> SyncResolution

    public init(_ resolve: @escaping @Sendable (SyncConflict) -> SyncResolution) { self.resolve = resolve }

    public static let serverWins = SyncConflictResolver { _ in .useServer }

    /// Field by field: a field this device changed since the ancestor (set, changed or removed) takes this device's
    /// value; every other field keeps the server's. A record deleted on one side and changed on the other is kept
    /// with the change. Without an ancestor every local field counts as changed.
    public static let fieldwiseLastWriterWins = SyncConflictResolver { c in
        guard let local = c.local else { return .useServer }
        guard var merged = c.server else { return .save(local) }
        let before = c.ancestor?.fields ?? [:]
        for name in Set(local.fields.keys).union(before.keys) where local.fields[name] != before[name] {
            merged.fields[name] = local.fields[name]
        }
        return .save(merged)
    }
}
