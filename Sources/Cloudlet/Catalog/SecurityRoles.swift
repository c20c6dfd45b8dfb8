import CloudletCore

/// What a security role may do with the records of one type in the public database (CloudKit's `READ`, `CREATE`,
/// `WRITE`; write covers update and delete).
public struct RecordPermissions: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = RecordPermissions(rawValue: 1)
    public static let create = RecordPermissions(rawValue: 2)
    public static let write = RecordPermissions(rawValue: 4)
    public static let all: RecordPermissions = [.read, .create, .write]

    /// `READ, CREATE, WRITE` (the schema language's spelling), in that order.
    public var description: String {
        [(Self.read, "READ"), (.create, "CREATE"), (.write, "WRITE")].filter { contains($0.0) }.map(\.1)
            .joined(separator: ", ")
    }
}

/// The security roles of one schema (a container's development or production environment): custom roles and each
/// record type's grants. Grants apply to the public database only; private and shared databases belong to their user.
///
/// The built-in roles are `_world` (every caller, signed in or not), `_icloud` (every signed-in user) and
/// `_creator` (the user who created the record). A record type nobody granted anything on has CloudKit's defaults:
/// `_world` READ, `_icloud` CREATE, `_creator` WRITE.
public struct SecurityPolicy: Sendable, Hashable {
    public static let world = "_world"
    public static let icloud = "_icloud"
    public static let creator = "_creator"
    public static let builtInRoles: Set<String> = [world, icloud, creator]
    /// The grants of a record type that has none of its own.
    public static let defaultGrants: [String: RecordPermissions] = [world: .read, icloud: .create, creator: .write]

    /// Custom roles (`CREATE ROLE`).
    public var roles: Set<String> = []
    /// Grants by record type, then role. A type absent here has ``defaultGrants``.
    public var grants: [String: [String: RecordPermissions]] = [:]

    public init(roles: Set<String> = [], grants: [String: [String: RecordPermissions]] = [:]) {
        self.roles = roles
        self.grants = grants
    }

    /// The grants in force for `recordType`.
    public func grants(for recordType: String) -> [String: RecordPermissions] { grants[recordType] ?? Self.defaultGrants }

    var isEmpty: Bool { roles.isEmpty && grants.isEmpty }
}

/// A change to security roles: a catalog mutation (``Mutation/security(_:)``).
package enum SecurityMutation: Sendable, Hashable {
    /// A custom role declared in a schema.
    case createRole(SchemaKey, role: String)
    /// A record type's grants set (replacing the type's earlier grants, or its defaults).
    case grants(SchemaKey, recordType: String, grants: [String: RecordPermissions])
    /// A user added to (or removed from) a custom role of a container (both environments).
    case member(container: String, role: String, user: String, added: Bool)
    /// A share saved or deleted, or a user's access to a shared zone (sub-kinds 4–7, ``ShareMutation``).
    case share(ShareMutation)

    /// `sub-kind u8 · body`: 1 createRole (schema key · role string), 2 grants (schema key · type string · count
    /// varint · (role string · permissions u8)…, sorted by role), 3 member (container string · role string · user
    /// string · added u8).
    func encode(into w: inout ByteWriter) {
        switch self {
        case .createRole(let key, let role):
            w.u8(1)
            IndexMutation.encode(key, into: &w)
            w.string(role)
        case .grants(let key, let type, let grants):
            w.u8(2)
            IndexMutation.encode(key, into: &w)
            w.string(type)
            Self.encodeGrants(grants, into: &w)
        case .member(let container, let role, let user, let added):
            w.u8(3)
            w.string(container)
            w.string(role)
            w.string(user)
            w.u8(added ? 1 : 0)
        case .share(let m):
            m.encode(into: &w)
        }
    }

    static func decode(_ r: inout ByteReader) throws -> SecurityMutation {
        let sub = try r.u8()
        switch sub {
        case 1: return .createRole(try IndexMutation.decodeSchemaKey(&r), role: try r.string())
        case 2:
            let key = try IndexMutation.decodeSchemaKey(&r)
            let type = try r.string()
            return .grants(key, recordType: type, grants: try decodeGrants(&r))
        case 3:
            return .member(container: try r.string(), role: try r.string(), user: try r.string(), added: try r.u8() != 0)
        case 4...7: return .share(try ShareMutation.decode(sub: sub, &r))
        default: throw CloudletError.corruption("commit payload: unknown security mutation \(sub)")
        }
    }

    /// `count varint · (role string · permissions u8)…`, sorted by role.
    static func encodeGrants(_ grants: [String: RecordPermissions], into w: inout ByteWriter) {
        w.varint(grants.count)
        for role in grants.keys.sorted() {
            w.string(role)
            w.u8(grants[role]!.rawValue)
        }
    }

    static func decodeGrants(_ r: inout ByteReader) throws -> [String: RecordPermissions] {
        var out: [String: RecordPermissions] = [:]
        for _ in 0..<(try r.length()) {
            let role = try r.string()
            let p = RecordPermissions(rawValue: try r.u8())
            guard p.rawValue & ~RecordPermissions.all.rawValue == 0 else {
                throw CloudletError.corruption("security grants: bad permissions \(p.rawValue)")
            }
            out[role] = p
        }
        return out
    }
}

/// Every schema's security policy and every container's role members: the catalog's security section.
package struct SecurityCatalog: Sendable, Hashable {
    package var policies: [SchemaKey: SecurityPolicy] = [:]
    /// Members of custom roles, by container and role.
    package var members: [String: [String: Set<String>]] = [:]

    package init() {}

    var isEmpty: Bool { policies.isEmpty && members.isEmpty }

    package func policy(_ key: SchemaKey) -> SecurityPolicy { policies[key] ?? SecurityPolicy() }

    /// The custom roles `user` is a member of in `container`.
    package func roles(of user: String, in container: String) -> [String] {
        (members[container] ?? [:]).filter { $0.value.contains(user) }.map(\.key).sorted()
    }

    mutating func apply(_ m: SecurityMutation) {
        switch m {
        case .createRole(let key, let role): policies[key, default: SecurityPolicy()].roles.insert(role)
        case .grants(let key, let type, let grants): policies[key, default: SecurityPolicy()].grants[type] = grants
        case .member(let container, let role, let user, let added):
            if added {
                members[container, default: [:]][role, default: []].insert(user)
            } else {
                members[container]?[role]?.remove(user)
                if members[container]?[role]?.isEmpty == true { members[container]![role] = nil }
                if members[container]?.isEmpty == true { members[container] = nil }
            }
        case .share: break  // the catalog's shares section (``CatalogState/apply(_:)``)
        }
    }

    /// Development's roles and grants replaced by production's (a schema reset).
    mutating func reset(container: String) {
        let prod = policies[SchemaKey(container: container, environment: .production)]
        policies[SchemaKey(container: container, environment: .development)] = prod
    }

    /// The mutations that give production development's roles and grants (a deploy). Roles are only ever added;
    /// a record type's grants become development's.
    func deployment(container: String) -> [Mutation] {
        let dev = policy(SchemaKey(container: container, environment: .development))
        let prodKey = SchemaKey(container: container, environment: .production)
        let prod = policy(prodKey)
        var out: [Mutation] = dev.roles.subtracting(prod.roles).sorted().map { .security(.createRole(prodKey, role: $0)) }
        for type in Set(dev.grants.keys).union(prod.grants.keys).sorted() where dev.grants(for: type) != prod.grants(for: type) {
            out.append(.security(.grants(prodKey, recordType: type, grants: dev.grants(for: type))))
        }
        return out
    }

    // MARK: - Decisions

    /// Whether `access` acts as the developer: a server-to-server key, or the embedding application itself
    /// (`__defaultOwner__`). The developer may do anything in the public database.
    static func isDeveloper(_ access: AccessContext) -> Bool {
        switch access.caller {
        case .serverKey: true
        case .user(let u): u == defaultOwnerName
        case .anonymous: false
        }
    }

    /// What `access` may do with a public record of `recordType` created by `creator` (nil: a record not yet
    /// created, or whose creator is not known) in the schema `key`.
    package func permissions(
        _ key: SchemaKey, recordType: String, for access: AccessContext, creator: String?
    ) -> RecordPermissions {
        if Self.isDeveloper(access) { return .all }
        let grants = policy(key).grants(for: recordType)
        var out = grants[SecurityPolicy.world] ?? []
        guard let user = access.userRecordName else { return out }
        out.formUnion(grants[SecurityPolicy.icloud] ?? [])
        if let creator, creator == user { out.formUnion(grants[SecurityPolicy.creator] ?? []) }
        for role in roles(of: user, in: key.container) { out.formUnion(grants[role] ?? []) }
        return out
    }

    /// Which public records of `recordType` `access` may read: all of them, only those it created, or none.
    package func readScope(_ key: SchemaKey, recordType: String, for access: AccessContext) -> ReadScope {
        if permissions(key, recordType: recordType, for: access, creator: nil).contains(.read) { return .all }
        if let user = access.userRecordName, policy(key).grants(for: recordType)[SecurityPolicy.creator]?.contains(.read) == true {
            return .createdBy(user)
        }
        return .none
    }
}

/// The public records of one type a caller may read (``SecurityCatalog/readScope(_:recordType:for:)``).
package enum ReadScope: Sendable, Hashable {
    case all
    /// Only records `user` created (the `_creator` role's READ).
    case createdBy(String)
    case none

    /// Whether a record with this creation stamp is readable.
    package func admits(creator: String?) -> Bool {
        switch self {
        case .all: true
        case .createdBy(let u): creator == u
        case .none: false
        }
    }
}

// MARK: - Checkpoint

extension SecurityCatalog {
    /// The catalog checkpoint's security section: `policy count varint · per schema: schema key · role count
    /// varint · role string… · typed count varint · (type string · grants)…` then `container count varint · per
    /// container: container string · role count varint · per role: role string · member count varint · user
    /// string…`, all sorted.
    package func encode(into w: inout ByteWriter) {
        let keys = policies.keys.sorted(by: SchemaKey.inOrder)
        w.varint(keys.count)
        for key in keys {
            let p = policies[key]!
            IndexMutation.encode(key, into: &w)
            w.varint(p.roles.count)
            for role in p.roles.sorted() { w.string(role) }
            w.varint(p.grants.count)
            for type in p.grants.keys.sorted() {
                w.string(type)
                SecurityMutation.encodeGrants(p.grants[type]!, into: &w)
            }
        }
        w.varint(members.count)
        for container in members.keys.sorted() {
            w.string(container)
            let roles = members[container]!
            w.varint(roles.count)
            for role in roles.keys.sorted() {
                w.string(role)
                let users = roles[role]!.sorted()
                w.varint(users.count)
                for u in users { w.string(u) }
            }
        }
    }

    package static func decode(_ r: inout ByteReader) throws -> SecurityCatalog {
        var out = SecurityCatalog()
        for _ in 0..<(try r.length()) {
            let key = try IndexMutation.decodeSchemaKey(&r)
            var p = SecurityPolicy()
            for _ in 0..<(try r.length()) { p.roles.insert(try r.string()) }
            for _ in 0..<(try r.length()) {
                let type = try r.string()
                p.grants[type] = try SecurityMutation.decodeGrants(&r)
            }
            out.policies[key] = p
        }
        for _ in 0..<(try r.length()) {
            let container = try r.string()
            for _ in 0..<(try r.length()) {
                let role = try r.string()
                for _ in 0..<(try r.length()) { out.members[container, default: [:]][role, default: []].insert(try r.string()) }
            }
        }
        return out
    }
}

extension SecurityMutation {
    /// The container the change belongs to.
    package var container: String {
        switch self {
        case .createRole(let key, _), .grants(let key, _, _): key.container
        case .member(let container, _, _, _): container
        case .share(.put(let z, _)), .share(.delete(let z, _)), .share(.access(let z, _, _, _)), .share(.recorded(let z, _, _)): z.container
        }
    }

    /// One line for dumps: `container/environment CREATE ROLE r`, `… GRANT READ TO r ON Type`, `container: +user
    /// in role r`.
    package var summary: String {
        switch self {
        case .createRole(let key, let role): "\(key.container)/\(key.environment.rawValue) CREATE ROLE \(role)"
        case .grants(let key, let type, let grants):
            "\(key.container)/\(key.environment.rawValue) \(type): "
                + grants.keys.sorted().map { "GRANT \(grants[$0]!) TO \($0)" }.joined(separator: ", ")
        case .member(let container, let role, let user, let added): "\(container): \(added ? "+" : "-")\(user) in role \(role)"
        case .share(let m): m.summary
        }
    }
}
