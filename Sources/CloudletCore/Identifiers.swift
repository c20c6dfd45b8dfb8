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

/// The physical key of a zone inside a store: container, environment, owner and zone name. Public, private and
/// shared are properties of the *handle* a caller reads through, not of the zone: the public database's zones are
/// owned by `__defaultOwner__`, a user's private zones by the user, and the same zone seen through a participant's
/// shared database (once shared) has the same key.
///
/// Hashing uses a fingerprint computed once at creation (the key is hashed for every record of a batch).
public struct ZoneKey: Hashable, Sendable, CustomStringConvertible {
    public let container: String
    public let environment: Environment
    /// A user's record name, or ``defaultOwnerName`` for the public database's zones.
    public let owner: String
    public let zoneName: String
    /// ``stableHash``, computed once.
    private let fingerprint: UInt64

    public init(container: String, environment: Environment, owner: String, zoneName: String) {
        self.container = container
        self.environment = environment
        self.owner = owner
        self.zoneName = zoneName
        // The path hashed keeps the scope word earlier releases put in the key (public for `__defaultOwner__`,
        // private for a user), so stores written before keep their placement, checkpoints and change tokens.
        var f = Fingerprint.Accumulator()
        f.add(container)
        f.add(environment.rawValue)
        f.add(owner == defaultOwnerName ? "public" : "private")
        f.add(owner)
        f.add(zoneName)
        fingerprint = f.value
    }

    /// The zone `zoneName` of the database's owner (the database's scope plays no part).
    public init(database: DatabaseID, zoneName: String) {
        self.init(container: database.container, environment: database.environment, owner: database.owner, zoneName: zoneName)
    }

    public var zoneID: ZoneID { ZoneID(zoneName: zoneName, ownerName: owner) }

    /// The database in which the owner sees this zone: the public one for `__defaultOwner__`, else the owner's
    /// private database.
    public var ownerDatabase: DatabaseID {
        DatabaseID(
            container: container, environment: environment, scope: owner == defaultOwnerName ? .public : .private, owner: owner)
    }

    public var description: String { "\(ownerDatabase)/\(zoneName)" }

    /// A stable 64-bit hash (FNV-1a) of the zone's path; picks the zone's partition. Never changes across
    /// versions or processes (unlike `hashValue`).
    public var stableHash: UInt64 { fingerprint }

    public static func == (a: ZoneKey, b: ZoneKey) -> Bool {
        a.fingerprint == b.fingerprint && a.zoneName == b.zoneName && a.owner == b.owner && a.container == b.container
            && a.environment == b.environment
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }
}

extension DatabaseID {
    /// Whether `key` is a zone of this database as its owner sees it: the public database holds
    /// `__defaultOwner__`'s zones, a private database its owner's. A shared database holds only zones shared with
    /// its user, none of which are keyed under that user.
    public func holds(_ key: ZoneKey) -> Bool {
        guard key.container == container, key.environment == environment else { return false }
        switch scope {
        case .public: return key.owner == defaultOwnerName
        case .private: return key.owner == owner
        case .shared: return false
        }
    }
}

/// Stable 64-bit FNV-1a fingerprints of name paths: the same on every machine, process and version (unlike
/// `hashValue`), so they can be stored on disk and in change tokens.
public enum Fingerprint {
    public static func of(_ parts: [String]) -> UInt64 {
        var f = Accumulator()
        for part in parts { f.add(part) }
        return f.value
    }

    /// ``of(_:)`` one part at a time, with no array of the parts (a zone key computes one for every record access).
    public struct Accumulator {
        public private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

        public init() {}

        public mutating func add(_ part: String) {
            var h = value
            var part = part
            part.withUTF8 { bytes in
                for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
            }
            value = (h ^ 0xFF) &* 0x100_0000_01B3
        }
    }
}
