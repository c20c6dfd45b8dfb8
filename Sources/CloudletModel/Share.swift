import CloudletCore

/// A share (CloudKit's `CKShare`, a record of type `cloudkit.share` in a custom zone of its owner's private database):
/// who besides the owner may see and change the records it covers.
///
/// Two kinds: a *hierarchy share* covers its ``rootRecordName`` (a record of the same zone); a *zone-wide share*
/// (record name ``zoneWideShareName``) covers every record of its zone. Participants see the covered records in their
/// shared database once they accepted the share (``Participant/Acceptance/accepted``).
public struct Share: Sendable, Hashable {
    /// CloudKit's record type of a share.
    public static let recordType = "cloudkit.share"
    /// The record name of a zone-wide share (`CKRecordNameZoneWideShare`).
    public static let zoneWideShareName = "cloudkit.zoneshare"
    /// At most this many participants, the owner included (CloudKit's limit).
    public static let maxParticipants = 100

    /// What a participant (or anyone holding the URL, for ``Share/publicPermission``) may do.
    public enum Permission: String, Sendable, Hashable, CaseIterable {
        case none = "NONE"
        case readOnly = "READ_ONLY"
        case readWrite = "READ_WRITE"
    }

    /// A participant's part in a share (Web Services `type`).
    public enum ParticipantType: String, Sendable, Hashable, CaseIterable {
        case owner = "OWNER"
        /// Invited by the owner.
        case user = "USER"
        /// Joined by the share's URL, with its public permission.
        case publicUser = "PUBLIC_USER"
    }

    /// One user of a share.
    public struct Participant: Sendable, Hashable {
        public enum Acceptance: String, Sendable, Hashable, CaseIterable {
            case pending = "PENDING"
            case accepted = "ACCEPTED"
            case removed = "REMOVED"
        }

        /// The user's record name (`userIdentity.userRecordName`).
        public var userRecordName: String
        /// The address the owner invited them by, when they did (`lookupInfo.emailAddress`), kept as given.
        public var emailAddress: String?
        public var type: ParticipantType
        public var permission: Permission
        public var acceptance: Acceptance

        public init(
            userRecordName: String, emailAddress: String? = nil, type: ParticipantType = .user,
            permission: Permission = .readOnly, acceptance: Acceptance = .pending
        ) {
            self.userRecordName = userRecordName
            self.emailAddress = emailAddress
            self.type = type
            self.permission = permission
            self.acceptance = acceptance
        }
    }

    /// The share record's ID: its name and the owner's zone.
    public var id: RecordID
    /// The record the share covers with its descendants; nil for a zone-wide share.
    public var rootRecordName: String?
    /// What anyone with the URL may do (`publicPermission`); other than ``Permission/none``, any signed-in user may
    /// join as a ``ParticipantType/publicUser``, and participants can no longer be edited.
    public var publicPermission: Permission
    /// Everyone in the share but the owner (the owner is ``owner``).
    public var participants: [Participant]
    /// The owner's user record name.
    public var owner: String
    /// The short ID a share's URL carries (`shortGUID`), given when the share is saved with `createShortGUID`.
    public var shortGUID: String?
    /// Changes on every save (`recordChangeTag`); nil for a share never saved.
    public var changeTag: String?

    /// A hierarchy share of `root` (a record of the owner's private database).
    public init(root: RecordID, recordName: String? = nil, publicPermission: Permission = .none, participants: [Participant] = []) {
        id = RecordID(recordName: recordName ?? "share-" + root.recordName, zoneID: root.zoneID)
        rootRecordName = root.recordName
        self.publicPermission = publicPermission
        self.participants = participants
        owner = root.zoneID.ownerName
        shortGUID = nil
        changeTag = nil
    }

    /// A zone-wide share of `zoneID`.
    public init(zone zoneID: ZoneID, publicPermission: Permission = .none, participants: [Participant] = []) {
        id = RecordID(recordName: Self.zoneWideShareName, zoneID: zoneID)
        rootRecordName = nil
        self.publicPermission = publicPermission
        self.participants = participants
        owner = zoneID.ownerName
        shortGUID = nil
        changeTag = nil
    }

    public var isZoneWide: Bool { rootRecordName == nil }

    /// The participant entry of `user`, if any.
    public func participant(_ user: String) -> Participant? { participants.first { $0.userRecordName == user } }

    /// What `user` may do with the covered records as things stand: the owner everything, an accepted participant
    /// their permission, anyone else nothing.
    public func permission(of user: String) -> Permission {
        if user == owner { return .readWrite }
        guard let p = participant(user), p.acceptance == .accepted else { return .none }
        return p.permission
    }

    /// Whether the share covers the record named `name` (the share record itself included).
    public func covers(_ name: String) -> Bool { rootRecordName.map { $0 == name } ?? true || name == id.recordName }
}

/// A share saved together with record operations (`modify(_:saving:atomic:assetRule:)` of the embedded database): in
/// its zone's commit, after the zone's records, so that a share and its root saved together are saved or not together.
public struct ShareSave: Sendable, Hashable {
    public var share: Share
    /// Give the share a short GUID (and so a URL) when it has none.
    public var createShortGUID: Bool

    public init(_ share: Share, createShortGUID: Bool = true) {
        self.share = share
        self.createShortGUID = createShortGUID
    }
}

/// What ``Share`` resolution tells a user who holds a share's short ID (`records/resolve`): the share as they may see
/// it, their own part, and the root record when they may read it and asked for it.
public struct ShareMetadata: Sendable, Hashable {
    public var share: Share
    /// The caller's participant entry (nil: not in the share); the owner is reported as ``Share/ParticipantType/owner``.
    public var callerParticipant: Share.Participant?
    public var rootRecord: Record?

    public init(share: Share, callerParticipant: Share.Participant?, rootRecord: Record?) {
        self.share = share
        self.callerParticipant = callerParticipant
        self.rootRecord = rootRecord
    }
}
