import CloudletCore

/// One operation of a modify batch, with CloudKit Web Services' semantics (`records/modify` operationType).
public enum RecordOperation: Sendable {
    /// Creates the record; fails with ``CloudletError/Code/recordExists`` (`EXISTS`) if it exists.
    case create(Record)
    /// Changes the fields given, keeping the others. Needs the record's current change tag (in
    /// `record.changeTag`), else ``CloudletError/Code/serverRecordChanged`` (`CONFLICT`) carrying the server record.
    case update(Record)
    /// Like `update` without the change-tag check; creates the record if it does not exist.
    case forceUpdate(Record)
    /// Replaces the whole record (fields not given are removed). Needs the current change tag.
    case replace(Record)
    /// Like `replace` without the change-tag check; creates the record if it does not exist.
    case forceReplace(Record)
    /// Deletes the record if `changeTag` is current. Cascades to records referencing it with DELETE_SELF.
    case delete(RecordID, changeTag: String)
    /// Deletes the record whatever its change tag.
    case forceDelete(RecordID)

    /// The record this operation is about.
    public var recordID: RecordID {
        switch self {
        case .create(let r), .update(let r), .forceUpdate(let r), .replace(let r), .forceReplace(let r): r.id
        case .delete(let id, _), .forceDelete(let id): id
        }
    }

    /// The record a save operation carries; nil for a deletion.
    public var record: Record? {
        switch self {
        case .create(let r), .update(let r), .forceUpdate(let r), .replace(let r), .forceReplace(let r): r
        case .delete, .forceDelete: nil
        }
    }

    /// The same operation with `record` in place of its record (a save's only).
    public func replacingRecord(_ record: Record) -> RecordOperation {
        switch self {
        case .create: .create(record)
        case .update: .update(record)
        case .forceUpdate: .forceUpdate(record)
        case .replace: .replace(record)
        case .forceReplace: .forceReplace(record)
        case .delete, .forceDelete: self
        }
    }

    /// CloudKit's name for the operation type.
    public var operationType: String {
        switch self {
        case .create: "create"
        case .update: "update"
        case .forceUpdate: "forceUpdate"
        case .replace: "replace"
        case .forceReplace: "forceReplace"
        case .delete: "delete"
        case .forceDelete: "forceDelete"
        }
    }
}

/// The outcome of one operation of a modify batch, reported in request order.
public enum RecordResult: Sendable {
    /// The record as saved, with its new change tag and stamps.
    case saved(Record)
    case deleted(RecordID)
    case failed(RecordID, CloudletError)

    public var recordID: RecordID {
        switch self {
        case .saved(let r): r.id
        case .deleted(let id), .failed(let id, _): id
        }
    }

    public var record: Record? { if case .saved(let r) = self { r } else { nil } }
    public var error: CloudletError? { if case .failed(_, let e) = self { e } else { nil } }
}

/// How `Database.save(_:policy:)` treats the server's copy (CloudKit's `CKModifyRecordsOperation.RecordSavePolicy`).
public enum SavePolicy: Sendable {
    /// Default: a record never saved is created (fails if one exists); a saved one is replaced only if its change
    /// tag is still current.
    case ifServerRecordUnchanged
    /// Overwrite the fields given, keep the others, ignore change tags (`forceUpdate`).
    case changedKeys
    /// Overwrite the whole record, ignore change tags (`forceReplace`).
    case allKeys
}

/// A record zone and what it can do.
public struct RecordZone: Sendable, Hashable {
    /// CloudKit's zone capabilities bit set.
    public struct Capabilities: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let fetchChanges = Capabilities(rawValue: 1)
        public static let atomic = Capabilities(rawValue: 2)
        public static let sharing = Capabilities(rawValue: 4)
        public static let zoneWideSharing = Capabilities(rawValue: 8)
    }

    public var id: ZoneID
    public var capabilities: Capabilities

    public init(id: ZoneID, capabilities: Capabilities) {
        self.id = id
        self.capabilities = capabilities
    }
}
