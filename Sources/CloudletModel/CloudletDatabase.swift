import CloudletCore

/// One database (public, a user's private, or a user's shared) as one caller sees it, whoever serves it: the
/// embedded engine (`Cloudlet.Database`) or a server over HTTP (the client library). Code written against this
/// protocol runs unchanged against either, the way GRDB's `DatabaseReader` / `DatabaseWriter` let code work with a
/// queue or a pool.
///
/// Every method is `async` and throws ``CloudletError`` only, with CloudKit's codes (`zoneNotFound`,
/// `serverRecordChanged` carrying the server's record, …); per-item failures of batch calls come back in their
/// results. The extension below gives the common arguments their defaults.
public protocol CloudletDatabase: Sendable {
    /// Public, private or shared.
    var scope: DatabaseScope { get }

    // MARK: Records

    /// A record by ID. - Throws: `unknownItem`, `zoneNotFound`.
    func record(for recordID: RecordID) async throws -> Record
    /// Several records; one result per ID, in order.
    func records(for recordIDs: [RecordID]) async throws -> [Result<Record, CloudletError>]
    /// CloudKit's `records/modify`: one result per operation, in order; `atomic` makes a custom zone's operations
    /// all or nothing.
    func modify(_ operations: [RecordOperation], atomic: Bool) async throws -> [RecordResult]

    // MARK: Queries

    /// A page of the records of a type matching a predicate, in the query's order; pass the page's cursor back for
    /// the next one.
    func query(
        _ query: Query, zoneID: ZoneID, zoneWide: Bool, resultsLimit: Int?, desiredKeys: [String]?,
        continuationMarker: QueryCursor?
    ) async throws -> QueryResults
    /// How many records match (beyond CloudKit).
    func count(_ query: Query, zoneID: ZoneID, zoneWide: Bool) async throws -> Int

    // MARK: Zones

    func createZone(_ zoneID: ZoneID) async throws -> RecordZone
    func zones() async throws -> [RecordZone]
    func zone(for zoneID: ZoneID) async throws -> RecordZone
    func deleteZone(_ zoneID: ZoneID) async throws

    // MARK: Change feeds

    /// A page of a zone's changes since `token` (nil: since the zone was created).
    func zoneChanges(
        _ zoneID: ZoneID, since token: ChangeToken?, resultsLimit: Int?, desiredKeys: [String]?,
        desiredRecordTypes: [String]?
    ) async throws -> ZoneChanges
    /// A page of the zones created, changed or deleted since `token` (private and shared databases).
    func databaseChanges(since token: ChangeToken?, resultsLimit: Int?) async throws -> DatabaseChanges

    // MARK: Subscriptions and notifications

    func saveSubscription(_ subscription: Subscription) async throws -> Subscription
    func subscriptions() async throws -> [Subscription]
    func subscription(_ id: String) async throws -> Subscription
    func deleteSubscription(_ id: String) async throws
    /// The caller's notifications after `position` (nil: all the log holds), waiting up to `wait` seconds when there
    /// are none yet.
    func notifications(after position: NotificationID?, limit: Int, wait: Double) async throws -> NotificationBatch
    /// The caller's notifications after `position` as they happen, until the stream is dropped (or the connection
    /// fails: the stream ends with the error, and a new one from the last ID seen resumes). The default long-polls
    /// ``notifications(after:limit:wait:)``; a server's client keeps a websocket open instead.
    func notificationEvents(after position: NotificationID?) -> AsyncThrowingStream<NotificationEvent, any Error>

    // MARK: Sharing (docs/sharing.md)

    /// Creates (``Share/changeTag`` nil) or replaces a share of a record or zone of this private database.
    func saveShare(_ share: Share, createShortGUID: Bool) async throws -> Share
    /// A share by its record ID: one of this private database's, or one this shared database's user accepted.
    func share(for recordID: RecordID) async throws -> Share
    /// Deletes a share: its owner ends it for everyone; a participant (shared database) leaves it.
    func deleteShare(_ shareID: RecordID) async throws
    /// What a share's short GUID names, for the caller (and its root record, when they may read it and ask).
    func resolveShare(shortGUID: String, fetchRootRecord: Bool) async throws -> ShareMetadata
    /// Joins the share a short GUID names; its zone then appears in the caller's shared database.
    func acceptShare(shortGUID: String) async throws -> ShareMetadata

    // MARK: Assets

    /// An asset's bytes, whole (an asset value of a record read through this database). - Throws: `unknownItem`
    /// when the file is not there.
    func assetData(_ asset: AssetReference) async throws -> [UInt8]
    /// Writes an asset's bytes to the file at `path` (replacing it), without holding them in memory.
    func downloadAsset(_ asset: AssetReference, to path: String) async throws
}

/// One event of a live notification feed (``CloudletDatabase/notificationEvents(after:)``).
public enum NotificationEvent: Sendable {
    case notification(RecordNotification)
    /// The feed could not cover everything after the position asked for (the server restarted, or the client fell
    /// too far behind): resynchronize with change tokens.
    case gap
}

extension CloudletDatabase {
    /// Long-polls ``notifications(after:limit:wait:)`` (30 s at a time) until the stream is dropped.
    public func notificationEvents(after position: NotificationID?) -> AsyncThrowingStream<NotificationEvent, any Error> {
        longPolledNotificationEvents(after: position)
    }

    /// The default ``notificationEvents(after:)``, for conformers that override it and sometimes fall back to it.
    public func longPolledNotificationEvents(after position: NotificationID?) -> AsyncThrowingStream<NotificationEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var position = position
                do {
                    while !Task.isCancelled {
                        let batch = try await notifications(after: position, limit: 200, wait: 30)
                        if batch.gap { continuation.yield(.gap) }
                        for n in batch.notifications { continuation.yield(.notification(n)) }
                        position = batch.next
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// ``saveShare(_:createShortGUID:)`` with a short GUID (and URL) for the share.
    @discardableResult
    public func saveShare(_ share: Share, createShortGUID: Bool = true) async throws -> Share {
        try await saveShare(share, createShortGUID: createShortGUID)
    }

    public func resolveShare(shortGUID: String, fetchRootRecord: Bool = false) async throws -> ShareMetadata {
        try await resolveShare(shortGUID: shortGUID, fetchRootRecord: fetchRootRecord)
    }

    /// Shares `root` (a record of a custom zone of this private database) and its descendants with `participants`: a
    /// hierarchy share, saved with a short GUID.
    @discardableResult
    public func share(
        root: RecordID, publicPermission: Share.Permission = .none, participants: [Share.Participant] = []
    ) async throws -> Share {
        try await saveShare(Share(root: root, publicPermission: publicPermission, participants: participants), createShortGUID: true)
    }

    /// Adds an invited participant to the share `shareID` (or changes their permission; a removed one is invited again).
    @discardableResult
    public func addParticipant(_ user: String, permission: Share.Permission, to shareID: RecordID) async throws -> Share {
        var s = try await share(for: shareID)
        if let i = s.participants.firstIndex(where: { $0.userRecordName == user }) {
            s.participants[i].permission = permission
            if s.participants[i].acceptance == .removed { s.participants[i].acceptance = .pending }
        } else {
            s.participants.append(Share.Participant(userRecordName: user, permission: permission))
        }
        return try await saveShare(s, createShortGUID: true)
    }

    /// Removes a participant of the share `shareID`: they stay listed with acceptance REMOVED (as in CloudKit) and no
    /// longer see its records; ``addParticipant(_:permission:to:)`` invites them again.
    @discardableResult
    public func removeParticipant(_ user: String, from shareID: RecordID) async throws -> Share {
        var s = try await share(for: shareID)
        guard let i = s.participants.firstIndex(where: { $0.userRecordName == user }) else {
            throw CloudletError(.unknownItem, "'\(user)' is not a participant of share '\(shareID.recordName)'")
        }
        s.participants[i].acceptance = .removed
        return try await saveShare(s, createShortGUID: true)
    }

    /// Saves a record with a save policy (CloudKit's `savePolicy`): a new record (no change tag) is created, one
    /// with a change tag replaces the server's if the tag is current; `.changedKeys` / `.allKeys` overwrite.
    /// - Returns: the record as saved, with its new change tag.
    @discardableResult
    public func save(_ record: Record, policy: SavePolicy = .ifServerRecordUnchanged) async throws -> Record {
        let op: RecordOperation
        switch policy {
        case .ifServerRecordUnchanged: op = record.changeTag == nil ? .create(record) : .replace(record)
        case .changedKeys: op = .forceUpdate(record)
        case .allKeys: op = .forceReplace(record)
        }
        guard let saved = try await one(op).record else {
            throw CloudletError(.internalError, "saving record '\(record.recordName)' returned no record")
        }
        return saved
    }

    /// Deletes a record (whatever its change tag, or only if `changeTag` is current) and the records that reference
    /// it with DELETE_SELF.
    public func deleteRecord(_ recordID: RecordID, changeTag: String? = nil) async throws {
        _ = try await one(changeTag.map { .delete(recordID, changeTag: $0) } ?? .forceDelete(recordID))
    }

    private func one(_ op: RecordOperation) async throws -> RecordResult {
        let result = try await modify([op], atomic: true)[0]
        if let e = result.error { throw e }
        return result
    }

    public func modify(_ operations: [RecordOperation], atomic: Bool = true) async throws -> [RecordResult] {
        try await modify(operations, atomic: atomic)
    }

    public func query(
        _ query: Query, zoneID: ZoneID = .default, zoneWide: Bool = false, resultsLimit: Int? = nil,
        desiredKeys: [String]? = nil, continuationMarker: QueryCursor? = nil
    ) async throws -> QueryResults {
        try await self.query(
            query, zoneID: zoneID, zoneWide: zoneWide, resultsLimit: resultsLimit, desiredKeys: desiredKeys,
            continuationMarker: continuationMarker)
    }

    public func count(_ query: Query, zoneID: ZoneID = .default, zoneWide: Bool = false) async throws -> Int {
        try await count(query, zoneID: zoneID, zoneWide: zoneWide)
    }

    public func zoneChanges(
        _ zoneID: ZoneID, since token: ChangeToken? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil,
        desiredRecordTypes: [String]? = nil
    ) async throws -> ZoneChanges {
        try await zoneChanges(
            zoneID, since: token, resultsLimit: resultsLimit, desiredKeys: desiredKeys, desiredRecordTypes: desiredRecordTypes)
    }

    public func databaseChanges(since token: ChangeToken? = nil, resultsLimit: Int? = nil) async throws -> DatabaseChanges {
        try await databaseChanges(since: token, resultsLimit: resultsLimit)
    }

    public func notifications(after position: NotificationID? = nil, limit: Int = 200, wait: Double = 0) async throws
        -> NotificationBatch
    {
        try await notifications(after: position, limit: limit, wait: wait)
    }
}
