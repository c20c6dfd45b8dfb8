import Cloudlet
import CloudletWire
import COpenSSL
import Foundation
import Synchronization

/// What an asset upload URL, upload receipt or download URL grants, signed so that it cannot be forged or changed:
/// `base64url(JSON payload) "." base64url(HMAC-SHA256(store secret, payload))` (`docs/assets.md`).
struct AssetTicket: Sendable, Equatable {
    enum Kind: String, Sendable {
        /// An upload URL (`assets/upload`): may POST one file for this field.
        case upload = "u"
        /// An upload's receipt: this file may be saved in this field.
        case receipt = "r"
        /// A download URL: may GET this file.
        case download = "d"
    }

    var kind: Kind
    /// Milliseconds since 1970 after which it is refused.
    var expires: Int64
    var container: String
    var environment: String
    /// `public`, `private` or `shared`.
    var database: String
    /// The database's owner (`__defaultOwner__` for the public database).
    var owner: String
    /// The user it was issued to (empty for an anonymous reader's download URL).
    var user: String
    var zone: String = ""
    var recordType: String = ""
    /// The record named in the upload request, if any.
    var recordName: String = ""
    var field: String = ""
    var checksum: String = ""
    var size: Int64 = 0

    var payload: [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.member("k", kind.rawValue)
            w.member("x", expires)
            w.member("c", container)
            w.member("e", environment)
            w.member("d", database)
            w.member("o", owner)
            w.member("u", user)
            if kind != .download {
                w.member("z", zone)
                w.member("t", recordType)
                w.member("n", recordName)
                w.member("f", field)
            }
            if kind != .upload {
                w.member("h", checksum)
                w.member("s", size)
            }
        }
        return w.bytes
    }

    init(
        kind: Kind, expires: Int64, container: String, environment: String, database: String, owner: String, user: String
    ) {
        self.kind = kind
        self.expires = expires
        self.container = container
        self.environment = environment
        self.database = database
        self.owner = owner
        self.user = user
    }

    init?(payload: [UInt8]) {
        guard case .object(let o)? = try? JSONParser.parse(payload),
            let k = o["k"]?.stringValue, let kind = Kind(rawValue: k), case .number(let x)? = o["x"], let expires = x.int64,
            let c = o["c"]?.stringValue, let e = o["e"]?.stringValue, let d = o["d"]?.stringValue,
            let owner = o["o"]?.stringValue, let user = o["u"]?.stringValue
        else { return nil }
        self.init(kind: kind, expires: expires, container: c, environment: e, database: d, owner: owner, user: user)
        zone = o["z"]?.stringValue ?? ""
        recordType = o["t"]?.stringValue ?? ""
        recordName = o["n"]?.stringValue ?? ""
        field = o["f"]?.stringValue ?? ""
        checksum = o["h"]?.stringValue ?? ""
        if case .number(let s)? = o["s"], let size = s.int64 { self.size = size }
    }
}

/// Signs and checks ``AssetTicket``s with the store's secret: 32 random bytes in `assets/signing.key` (mode 0600),
/// made the first time a server serves the store. Whoever holds the file can forge tickets; deleting it revokes
/// every URL and receipt issued so far. A node of a cluster signs with a key every node derives from the cluster's
/// key in etcd instead (``rekey(_:)``, `Server.useAssetSigningKey(_:)`), so that any node takes what another issued.
final class AssetSigner: Sendable {
    private let key: Mutex<[UInt8]>

    init(key: [UInt8]) { self.key = Mutex(key) }

    /// Signs and checks with `key` from now on: what was signed with the previous key is refused.
    func rekey(_ key: [UInt8]) {
        precondition(key.count >= 16, "an asset signing key needs at least 128 bits")
        self.key.withLock { $0 = key }
    }

    /// The signer of the store at `storePath`, creating its secret if it has none.
    convenience init(storePath: String) throws {
        let dir = storePath + "/assets"
        let path = dir + "/signing.key"
        if let existing = FileManager.default.contents(atPath: path), existing.count == 32 {
            self.init(key: Array(existing))
            return
        }
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let key = try Secrets.randomBytes(32)
        let temp = path + ".tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CloudletError.io("cannot create \(temp)", errno: errno) }
        let written = key.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == 32, synced == 0, rename(temp, path) == 0 else {
            throw CloudletError.io("cannot write the asset signing key \(path)", errno: errno)
        }
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            _ = fsync(dfd)
            close(dfd)
        }
        self.init(key: key)
    }

    func sign(_ ticket: AssetTicket) -> String {
        let payload = ticket.payload
        return Self.base64url(payload) + "." + Self.base64url(mac(payload))
    }

    /// Why a ticket is refused.
    enum Refusal: Error, Equatable {
        /// Malformed, signed with another key, changed, or of another kind.
        case notGenuine
        case expired(at: Int64)
    }

    /// The ticket `token` carries, if it is genuine, of `kind`, and not expired at `now` (ms since 1970).
    func verify(_ token: String, kind: AssetTicket.Kind, now: Int64 = AssetSigner.now()) -> Result<AssetTicket, Refusal> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = Self.unbase64url(parts[0]), let signature = Self.unbase64url(parts[1]),
            Secrets.constantTimeEqual(signature, mac(payload)), let ticket = AssetTicket(payload: payload), ticket.kind == kind
        else { return .failure(.notGenuine) }
        guard ticket.expires > now else { return .failure(.expired(at: ticket.expires)) }
        return .success(ticket)
    }

    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    private func mac(_ data: [UInt8]) -> [UInt8] { Secrets.hmacSHA256(key: key.withLock { $0 }, data) }

    static func base64url(_ bytes: [UInt8]) -> String { Base64.encodeURL(bytes) }

    /// The bytes of unpadded base64url text — only of its one canonical spelling (``Base64/decodeURL(_:)``), so that
    /// no two texts of a signature or payload decode to the same bytes (a changed signature character is always
    /// refused, never a harmless alias).
    static func unbase64url(_ s: Substring) -> [UInt8]? { Base64.decodeURL(s) }
}
