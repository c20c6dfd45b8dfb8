/// `development` or `production`: separate data and schema in one container (CloudKit's environments).
public enum Environment: String, Sendable, Hashable, CaseIterable, Codable {
    case development, production
}

/// Which database of a container: one public, one private per user, one shared view per user.
public enum DatabaseScope: String, Sendable, Hashable, CaseIterable, Codable {
    case `public`, `private`, shared
}

/// The owner name CloudKit uses for "the current user" and for the public database's zones (`__defaultOwner__`).
public let defaultOwnerName = "__defaultOwner__"

/// Identifies one database: container, environment, scope and (for private and shared) the user who owns it.
public struct DatabaseID: Hashable, Sendable, CustomStringConvertible {
    public var container: String
    public var environment: Environment
    public var scope: DatabaseScope
    /// The user record name of the owner; ``defaultOwnerName`` for the public database.
    public var owner: String

    public init(container: String, environment: Environment, scope: DatabaseScope, owner: String) {
        self.container = container
        self.environment = environment
        self.scope = scope
        self.owner = scope == .public ? defaultOwnerName : owner
    }

    public var description: String { "\(container)/\(environment.rawValue)/\(scope.rawValue)(\(owner))" }
}

/// A zone in a database: (zoneName, ownerRecordName) as CloudKit's `CKRecordZone.ID`.
public struct ZoneID: Hashable, Sendable, CustomStringConvertible {
    public var zoneName: String
    /// The user who owns the zone. In a private database this is the database's owner.
    public var ownerName: String

    public static let defaultZoneName = "_defaultZone"
    /// `_defaultZone` of the current user.
    public static let `default` = ZoneID(zoneName: defaultZoneName)

    public init(zoneName: String, ownerName: String = defaultOwnerName) {
        self.zoneName = zoneName
        self.ownerName = ownerName
    }

    public var isDefault: Bool { zoneName == Self.defaultZoneName }
    public var description: String { "\(zoneName)(\(ownerName))" }
}

/// A record's identity: its name, unique within its zone, and the zone.
public struct RecordID: Hashable, Sendable, CustomStringConvertible {
    public var recordName: String
    public var zoneID: ZoneID

    public init(recordName: String, zoneID: ZoneID = .default) {
        self.recordName = recordName
        self.zoneID = zoneID
    }

    public var description: String { "\(recordName)@\(zoneID)" }
}

/// The fully qualified key of a zone inside a store: database plus zone name. Zone owners are resolved to the
/// database owner, so `__defaultOwner__` and the user's own name address the same zone.
///
/// Hashing uses a fingerprint computed once at creation (the key is hashed for every record of a batch).
public struct ZoneKey: Hashable, Sendable, CustomStringConvertible {
    public let database: DatabaseID
    public let zoneName: String
    /// ``stableHash``, computed once.
    private let fingerprint: UInt64

    public init(database: DatabaseID, zoneName: String) {
        self.database = database
        self.zoneName = zoneName
        fingerprint = Fingerprint.of([
            database.container, database.environment.rawValue, database.scope.rawValue, database.owner, zoneName,
        ])
    }

    public var zoneID: ZoneID { ZoneID(zoneName: zoneName, ownerName: database.owner) }
    public var description: String { "\(database)/\(zoneName)" }

    /// A stable 64-bit hash (FNV-1a) of the zone's path; picks the zone's partition. Never changes across
    /// versions or processes (unlike `hashValue`).
    public var stableHash: UInt64 { fingerprint }

    public static func == (a: ZoneKey, b: ZoneKey) -> Bool {
        a.fingerprint == b.fingerprint && a.zoneName == b.zoneName && a.database == b.database
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }
}

/// Stable 64-bit FNV-1a fingerprints of name paths: the same on every machine, process and version (unlike
/// `hashValue`), so they can be stored on disk and in change tokens.
public enum Fingerprint {
    public static func of(_ parts: [String]) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for part in parts {
            for b in part.utf8 {
                h ^= UInt64(b)
                h = h &* 0x100_0000_01B3
            }
            h ^= 0xFF
            h = h &* 0x100_0000_01B3
        }
        return h
    }
}
