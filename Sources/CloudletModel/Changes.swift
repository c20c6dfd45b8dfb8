import CloudletCore

/// One entry of a zone's change feed.
public enum RecordChange: Sendable, Hashable {
    /// The record as it is now (created or changed since the token).
    case changed(Record)
    /// The record was deleted since the token (a tombstone).
    case deleted(RecordID, recordType: String)

    public var recordID: RecordID {
        switch self {
        case .changed(let r): r.id
        case .deleted(let id, _): id
        }
    }
}

/// A page of a zone's changes (CloudKit `changes/zone`, `CKFetchRecordZoneChangesOperation`).
public struct ZoneChanges: Sendable {
    /// Each changed record once, at its latest version, and each deletion, in commit order.
    public var changes: [RecordChange]
    /// Pass to the next call. After a page with `moreComing`, it resumes right after the page's last change.
    public var token: ChangeToken
    /// More changes are waiting: call again with ``token``.
    public var moreComing: Bool
    /// What the page's changes cost its byte budget (`maxBytes`): the stored sizes of its records, and each
    /// tombstone's name plus 64.
    public var byteCount: Int = 0

    public init(changes: [RecordChange], token: ChangeToken, moreComing: Bool, byteCount: Int = 0) {
        self.changes = changes
        self.token = token
        self.moreComing = moreComing
        self.byteCount = byteCount
    }
}

/// A page of a database's zone changes (CloudKit `changes/database`).
public struct DatabaseChanges: Sendable {
    /// Zones created or holding changed records since the token.
    public var changedZones: [ZoneID]
    /// Zones deleted since the token.
    public var deletedZones: [ZoneID]
    public var token: ChangeToken
    public var moreComing: Bool

    public init(changedZones: [ZoneID], deletedZones: [ZoneID], token: ChangeToken, moreComing: Bool) {
        self.changedZones = changedZones
        self.deletedZones = deletedZones
        self.token = token
        self.moreComing = moreComing
    }
}
