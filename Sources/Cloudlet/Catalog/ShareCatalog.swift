import CloudletCore

/// A change to shares: a catalog mutation, written as a ``SecurityMutation`` (sharing is access control).
package enum ShareMutation: Sendable, Hashable {
    /// A share saved (created or replaced whole) in its owner's zone.
    case put(ZoneKey, Share)
    /// A share removed from its zone (its owner stopped sharing, or the zone or root went away).
    case delete(ZoneKey, recordName: String)
    /// `user` gained (`gone` false) or lost access to a shared zone, when the zone's partition was at `lsn`: what the
    /// user's shared database change feed reports.
    case access(ZoneKey, user: String, lsn: UInt64, gone: Bool)

    /// `sub-kind u8 · body` (sub-kinds 4–6 of ``SecurityMutation``): 4 put (zone key · share), 5 delete (zone key ·
    /// record name string), 6 access (zone key · user string · lsn varint · gone u8).
    func encode(into w: inout ByteWriter) {
        switch self {
        case .put(let zone, let share):
            w.u8(4)
            Commit.encode(zone, into: &w)
            Self.encode(share, into: &w)
        case .delete(let zone, let name):
            w.u8(5)
            Commit.encode(zone, into: &w)
            w.string(name)
        case .access(let zone, let user, let lsn, let gone):
            w.u8(6)
            Commit.encode(zone, into: &w)
            w.string(user)
            w.varint(lsn)
            w.bool(gone)
        }
    }

    static func decode(sub: UInt8, _ r: inout ByteReader) throws -> ShareMutation {
        let zone = try Commit.decodeZone(&r)
        switch sub {
        case 4: return .put(zone, try decodeShare(&r, zone: zone))
        case 5: return .delete(zone, recordName: try r.string())
        case 6: return .access(zone, user: try r.string(), lsn: try r.varint(), gone: try r.bool())
        default: throw CloudletError.corruption("commit payload: unknown share mutation \(sub)")
        }
    }

    /// `record name string · root string (empty: zone-wide) · public permission u8 · short GUID string (empty: none)
    /// · change tag string · participant count varint · (user string · email string (empty: none) · type u8 ·
    /// permission u8 · acceptance u8)…` — enums as their index in `allCases`. The zone and owner are the key's.
    static func encode(_ s: Share, into w: inout ByteWriter) {
        w.string(s.id.recordName)
        w.string(s.rootRecordName ?? "")
        w.u8(index(s.publicPermission))
        w.string(s.shortGUID ?? "")
        w.string(s.changeTag ?? "")
        w.varint(s.participants.count)
        for p in s.participants {
            w.string(p.userRecordName)
            w.string(p.emailAddress ?? "")
            w.u8(index(p.type))
            w.u8(index(p.permission))
            w.u8(index(p.acceptance))
        }
    }

    static func decodeShare(_ r: inout ByteReader, zone: ZoneKey) throws -> Share {
        let name = try r.string()
        let root = try r.string()
        var s = root.isEmpty ? Share(zone: zone.zoneID) : Share(root: RecordID(recordName: root, zoneID: zone.zoneID))
        s.id.recordName = name
        s.publicPermission = try value(&r)
        let guid = try r.string()
        s.shortGUID = guid.isEmpty ? nil : guid
        let tag = try r.string()
        s.changeTag = tag.isEmpty ? nil : tag
        for _ in 0..<(try r.length()) {
            let user = try r.string()
            let email = try r.string()
            s.participants.append(
                Share.Participant(
                    userRecordName: user, emailAddress: email.isEmpty ? nil : email, type: try value(&r), permission: try value(&r),
                    acceptance: try value(&r)))
        }
        return s
    }

    private static func index<E: CaseIterable & Equatable>(_ e: E) -> UInt8 where E.AllCases == [E] {
        UInt8(E.allCases.firstIndex(of: e)!)
    }

    private static func value<E: CaseIterable>(_ r: inout ByteReader) throws -> E where E.AllCases == [E] {
        let i = Int(try r.u8())
        guard i < E.allCases.count else { throw CloudletError.corruption("share: bad \(E.self) \(i)") }
        return E.allCases[i]
    }

    /// One line for dumps.
    package var summary: String {
        switch self {
        case .put(let zone, let s):
            "\(zone): share '\(s.id.recordName)' of \(s.rootRecordName.map { "'\($0)'" } ?? "the zone"), public \(s.publicPermission.rawValue), "
                + "\(s.participants.count) participant(s)"
        case .delete(let zone, let name): "\(zone): share '\(name)' deleted"
        case .access(let zone, let user, _, let gone): "\(zone): '\(user)' \(gone ? "lost" : "gained") access"
        }
    }
}

/// Every share of a store and each user's access history: the catalog's shares section.
package struct ShareCatalog: Sendable {
    /// Shares by zone, then share record name.
    package private(set) var shares: [ZoneKey: [String: Share]] = [:]
    /// Where each short GUID's share is (derived).
    package private(set) var byGUID: [String: (zone: ZoneKey, name: String)] = [:]
    /// When a user's access to a shared zone last changed: the zone's partition LSN then, whether it is gone, and the
    /// catalog version of the change (0 for changes recorded before versions were kept) — the shared database's change
    /// feed orders these by version.
    package struct AccessEvent: Sendable, Hashable {
        package var lsn: UInt64
        package var gone: Bool
        package var version: UInt64
    }

    /// Per user: the last time each shared zone became visible or stopped being so, for the shared database's change
    /// feed.
    package private(set) var access: [String: [ZoneKey: AccessEvent]] = [:]

    package init() {}

    package var isEmpty: Bool { shares.isEmpty && access.isEmpty }

    /// The shares of a zone (none for a zone never shared).
    package func shares(in zone: ZoneKey) -> [String: Share] { shares[zone] ?? [:] }

    /// The share `guid` names.
    package func share(guid: String) -> (zone: ZoneKey, share: Share)? {
        guard let at = byGUID[guid], let s = shares[at.zone]?[at.name] else { return nil }
        return (at.zone, s)
    }

    /// The zones of `container`/`environment` some share lets `user` see, sorted by owner then name.
    package func visibleZones(of user: String, container: String, environment: CloudletCore.Environment) -> [ZoneKey] {
        (access[user] ?? [:]).keys.filter { z in
            z.container == container && z.environment == environment && shares(in: z).values.contains { $0.permission(of: user) != .none }
        }.sorted { ($0.owner, $0.zoneName) < ($1.owner, $1.zoneName) }
    }

    /// Applies `m`, a mutation of catalog version `version`.
    mutating func apply(_ m: ShareMutation, version: UInt64) {
        switch m {
        case .put(let zone, let s):
            if let old = shares[zone]?[s.id.recordName], let g = old.shortGUID { byGUID[g] = nil }
            shares[zone, default: [:]][s.id.recordName] = s
            if let g = s.shortGUID { byGUID[g] = (zone, s.id.recordName) }
        case .delete(let zone, let name):
            if let g = shares[zone]?[name]?.shortGUID { byGUID[g] = nil }
            shares[zone]?[name] = nil
            if shares[zone]?.isEmpty == true { shares[zone] = nil }
        case .access(let zone, let user, let lsn, let gone):
            access[user, default: [:]][zone] = AccessEvent(lsn: lsn, gone: gone, version: version)
        }
    }

    /// The catalog checkpoint's shares section: `zone count varint · per zone: zone key · share count varint ·
    /// share…` then `user count varint · per user: user string · zone count varint · (zone key · lsn varint · gone
    /// u8)…`, sorted, then the access events' catalog versions in the same order (`version varint…`; absent in
    /// checkpoints written before they were kept: read as 0).
    package func encode(into w: inout ByteWriter) {
        let zones = shares.keys.sorted { $0.description < $1.description }
        w.varint(zones.count)
        for z in zones {
            Commit.encode(z, into: &w)
            let byName = shares[z]!
            w.varint(byName.count)
            for name in byName.keys.sorted() { ShareMutation.encode(byName[name]!, into: &w) }
        }
        w.varint(access.count)
        for user in access.keys.sorted() {
            w.string(user)
            let zs = access[user]!
            w.varint(zs.count)
            for z in zs.keys.sorted(by: { $0.description < $1.description }) {
                Commit.encode(z, into: &w)
                w.varint(zs[z]!.lsn)
                w.bool(zs[z]!.gone)
            }
        }
        for user in access.keys.sorted() {
            let zs = access[user]!
            for z in zs.keys.sorted(by: { $0.description < $1.description }) { w.varint(zs[z]!.version) }
        }
    }

    package static func decode(_ r: inout ByteReader) throws -> ShareCatalog {
        var out = ShareCatalog()
        for _ in 0..<(try r.length()) {
            let z = try Commit.decodeZone(&r)
            for _ in 0..<(try r.length()) { out.apply(.put(z, try ShareMutation.decodeShare(&r, zone: z)), version: 0) }
        }
        for _ in 0..<(try r.length()) {
            let user = try r.string()
            for _ in 0..<(try r.length()) {
                let z = try Commit.decodeZone(&r)
                out.apply(.access(z, user: user, lsn: try r.varint(), gone: try r.bool()), version: 0)
            }
        }
        guard !r.isAtEnd else { return out }
        for user in out.access.keys.sorted() {
            for z in out.access[user]!.keys.sorted(by: { $0.description < $1.description }) {
                out.access[user]![z]!.version = try r.varint()
            }
        }
        return out
    }
}
