import CloudletCore

/// An opaque position in a change feed (CloudKit's `CKServerChangeToken` / `syncToken`): pass the token a
/// fetch returned to the next fetch to get only what changed since.
///
/// Serialized as base64 (``base64``). Tokens are versioned and checksummed, and name the store, the zone (or
/// database) and the zone's incarnation they belong to: a token from elsewhere is refused with
/// `invalidArguments` (`BAD_REQUEST`), never answered wrongly; one older than the tombstone retention window gets
/// `changeTokenExpired` (`CHANGE_TOKEN_EXPIRED`), and the client must fetch from scratch.
public struct ChangeToken: Sendable, Hashable, CustomStringConvertible {
    /// The token's bytes.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Parses a token from its base64 form; nil if it is not base64.
    public init?(base64: String) {
        guard let b = Base64.decode(base64) else { return nil }
        bytes = b
    }

    public var base64: String { Base64.encode(bytes) }
    public var description: String { base64 }

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
        bytes = w.bytes
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
        bytes = w.bytes
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

/// Standard base64 (RFC 4648) without Foundation, for tokens.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [Int8] = {
        var t = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = Int8(i) }
        return t
    }()

    static func encode(_ b: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((b.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= b.count {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
            for s in [18, 12, 6, 0] { out.append(alphabet[Int((v >> UInt32(s)) & 63)]) }
            i += 3
        }
        let rest = b.count - i
        if rest > 0 {
            var v = UInt32(b[i]) << 16
            if rest == 2 { v |= UInt32(b[i + 1]) << 8 }
            out.append(alphabet[Int((v >> 18) & 63)])
            out.append(alphabet[Int((v >> 12) & 63)])
            out.append(rest == 2 ? alphabet[Int((v >> 6) & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var i = 0
        while i < chars.count {
            var v: UInt32 = 0
            var pad = 0
            for k in 0..<4 {
                let c = chars[i + k]
                if c == UInt8(ascii: "=") {
                    guard i + 4 == chars.count, k >= 2 else { return nil }
                    pad += 1
                    v <<= 6
                } else {
                    guard pad == 0 else { return nil }
                    let d = reverse[Int(c)]
                    guard d >= 0 else { return nil }
                    v = v << 6 | UInt32(d)
                }
            }
            out.append(UInt8((v >> 16) & 0xFF))
            if pad < 2 { out.append(UInt8((v >> 8) & 0xFF)) }
            if pad < 1 { out.append(UInt8(v & 0xFF)) }
            i += 4
        }
        return out
    }
}
