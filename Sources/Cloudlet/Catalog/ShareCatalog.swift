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
    /// A share as its `cloudkit.share` record stands after partition commit `lsn` (the share's change tag is the
    /// record's): the catalog's copy of a share record, staged with the partition commit that wrote it.
    case recorded(ZoneKey, Share, lsn: UInt64)

    /// `sub-kind u8 · body` (sub-kinds 4–7 of ``SecurityMutation``): 4 put (zone key · share), 5 delete (zone key ·
    /// record name string), 6 access (zone key · user string · lsn varint · gone u8), 7 recorded (zone key · lsn
    /// varint · share).
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
        case .recorded(let zone, let share, let lsn):
            w.u8(7)
            Commit.encode(zone, into: &w)
            w.varint(lsn)
            Self.encode(share, into: &w)
        }
    }

    static func decode(sub: UInt8, _ r: inout ByteReader) throws -> ShareMutation {
        let zone = try Commit.decodeZone(&r)
        switch sub {
        case 4: return .put(zone, try decodeShare(&r, zone: zone))
        case 5: return .delete(zone, recordName: try r.string())
        case 6: return .access(zone, user: try r.string(), lsn: try r.varint(), gone: try r.bool())
        case 7:
            let lsn = try r.varint()
            return .recorded(zone, try decodeShare(&r, zone: zone), lsn: lsn)
        default: throw CloudletError.corruption("commit payload: unknown share mutation \(sub)")
        }
    }

    /// A share's body (``Share/encodeBody(into:)``); the zone and owner are the key's.
    static func encode(_ s: Share, into w: inout ByteWriter) { s.encodeBody(into: &w) }

    static func decodeShare(_ r: inout ByteReader, zone: ZoneKey) throws -> Share { try Share.decodeBody(&r, zoneID: zone.zoneID) }

    /// One line for dumps.
    package var summary: String {
        switch self {
        case .put(let zone, let s):
            "\(zone): share '\(s.id.recordName)' of \(s.rootRecordName.map { "'\($0)'" } ?? "the zone"), public \(s.publicPermission.rawValue), "
                + "\(s.participants.count) participant(s)"
        case .recorded(let zone, let s, let lsn):
            "\(zone): share '\(s.id.recordName)' as recorded at partition LSN \(lsn), public \(s.publicPermission.rawValue), "
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
    /// The partition LSN of each share's record as the catalog last applied it (``ShareMutation/recorded(_:_:lsn:)``);
    /// a share without one was saved before shares were records (it is migrated when the store opens).
    package private(set) var recorded: [ZoneKey: [String: UInt64]] = [:]

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
            put(zone, s)
        case .recorded(let zone, let s, let lsn):
            put(zone, s)
            recorded[zone, default: [:]][s.id.recordName] = lsn
        case .delete(let zone, let name):
            if let g = shares[zone]?[name]?.shortGUID { byGUID[g] = nil }
            shares[zone]?[name] = nil
            if shares[zone]?.isEmpty == true { shares[zone] = nil }
            recorded[zone]?[name] = nil
            if recorded[zone]?.isEmpty == true { recorded[zone] = nil }
        case .access(let zone, let user, let lsn, let gone):
            access[user, default: [:]][zone] = AccessEvent(lsn: lsn, gone: gone, version: version)
        }
    }

    private mutating func put(_ zone: ZoneKey, _ s: Share) {
        if let old = shares[zone]?[s.id.recordName], let g = old.shortGUID { byGUID[g] = nil }
        shares[zone, default: [:]][s.id.recordName] = s
        if let g = s.shortGUID { byGUID[g] = (zone, s.id.recordName) }
    }

    /// The catalog checkpoint's shares section: `zone count varint · per zone: zone key · share count varint ·
    /// share…` then `user count varint · per user: user string · zone count varint · (zone key · lsn varint · gone
    /// u8)…`, sorted, then the access events' catalog versions in the same order (`version varint…`; absent in
    /// checkpoints written before they were kept: read as 0), then the shares' record LSNs (`count varint · (zone key ·
    /// record name string · lsn varint)…`, sorted; absent before shares were records: none).
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
        let recordedZones = recorded.keys.sorted { $0.description < $1.description }
        w.varint(recorded.values.reduce(0) { $0 + $1.count })
        for z in recordedZones {
            for (name, lsn) in recorded[z]!.sorted(by: { $0.key < $1.key }) {
                Commit.encode(z, into: &w)
                w.string(name)
                w.varint(lsn)
            }
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
        guard !r.isAtEnd else { return out }
        for _ in 0..<(try r.length()) {
            let z = try Commit.decodeZone(&r)
            let name = try r.string()
            out.recorded[z, default: [:]][name] = try r.varint()
        }
        return out
    }
}
