import CloudletCore

/// What a change token encodes: the engine's positions in a zone's or database's change feed.
extension ChangeToken {
    static let version: UInt8 = 1

    enum Kind: UInt8 {
        case zone = 1
        case database = 2
    }

    /// A zone token: store, zone, the zone's incarnation, the change point reached, and the partition's purge
    /// horizon when the token was issued (a later purge past the point expires it).
    struct ZonePosition: Equatable {
        var store: UInt64
        var zone: UInt64
        var incarnation: UInt64
        var point: ChangePoint
        var horizon: UInt64
    }

    /// A database token: store, database, and per partition the LSN reached and the purge horizon at issue.
    struct DatabasePosition: Equatable {
        var store: UInt64
        var database: UInt64
        var lsns: [UInt64]
        var horizons: [UInt64]
    }

    init(_ p: ZonePosition) {
        var w = ByteWriter(capacity: 48)
        w.u8(Self.version)
        w.u8(Kind.zone.rawValue)
        w.u64(p.store)
        w.u64(p.zone)
        w.u64(p.incarnation)
        w.u64(p.point.lsn)
        w.u32(p.point.index)
        w.u64(p.horizon)
        w.u32(CRC32C.checksum(w.bytes))
        self.init(bytes: w.bytes)
    }

    init(_ p: DatabasePosition) {
        var w = ByteWriter(capacity: 32 + 8 * p.lsns.count)
        w.u8(Self.version)
        w.u8(Kind.database.rawValue)
        w.u64(p.store)
        w.u64(p.database)
        w.varint(p.lsns.count)
        for l in p.lsns { w.u64(l) }
        for h in p.horizons { w.u64(h) }
        w.u32(CRC32C.checksum(w.bytes))
        self.init(bytes: w.bytes)
    }

    private func reader(_ kind: Kind) throws -> ByteReader {
        guard bytes.count > 6, CRC32C.checksum(bytes[0..<(bytes.count - 4)]) == tail() else {
            throw CloudletError.invalid("the change token is malformed or damaged")
        }
        var r = ByteReader(bytes, to: bytes.count - 4, what: "change token")
        let v = try r.u8()
        guard v == Self.version else { throw CloudletError.invalid("change token version \(v) is not supported") }
        let k = try r.u8()
        guard k == kind.rawValue else {
            throw CloudletError.invalid(
                "this is a \(k == Kind.zone.rawValue ? "zone" : "database") change token, not a \(kind == .zone ? "zone" : "database") one")
        }
        return r
    }

    private func tail() -> UInt32 {
        let n = bytes.count
        return UInt32(bytes[n - 4]) | UInt32(bytes[n - 3]) << 8 | UInt32(bytes[n - 2]) << 16 | UInt32(bytes[n - 1]) << 24
    }

    func zonePosition() throws -> ZonePosition {
        do {
            var r = try reader(.zone)
            let p = ZonePosition(
                store: try r.u64(), zone: try r.u64(), incarnation: try r.u64(),
                point: ChangePoint(lsn: try r.u64(), index: try r.u32()), horizon: try r.u64())
            guard r.isAtEnd else { throw CloudletError.invalid("the change token is malformed") }
            return p
        } catch let e as CloudletError where e.code == .corruption {
            throw CloudletError.invalid("the change token is malformed")
        }
    }

    func databasePosition() throws -> DatabasePosition {
        do {
            var r = try reader(.database)
            let store = try r.u64()
            let database = try r.u64()
            let n = try r.length(unit: 16)
            var lsns: [UInt64] = []
            var horizons: [UInt64] = []
            for _ in 0..<n { lsns.append(try r.u64()) }
            for _ in 0..<n { horizons.append(try r.u64()) }
            guard r.isAtEnd else { throw CloudletError.invalid("the change token is malformed") }
            return DatabasePosition(store: store, database: database, lsns: lsns, horizons: horizons)
        } catch let e as CloudletError where e.code == .corruption {
            throw CloudletError.invalid("the change token is malformed")
        }
    }
}
