import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletWire
import Foundation
import Synchronization

/// The asset side of the server: signing upload URLs, receipts and download URLs, receiving uploads
/// (`POST /cloudlet/assets/upload/<ticket>`, streamed to disk) and serving downloads
/// (`GET /cloudlet/assets/download/<ticket>/<filename>`, with `Range`). See `docs/assets.md`.
final class AssetTransfer: Sendable {
    static let uploadPrefix = "/cloudlet/assets/upload/"
    static let downloadPrefix = "/cloudlet/assets/download/"
    /// What the listener streams instead of reading whole.
    static let streamedPrefix = "/cloudlet/assets/"

    let store: CloudletStore
    let signer: AssetSigner
    let maxAssetSize: Int64
    /// Milliseconds an upload URL, receipt or download URL stays valid.
    let lifetime: Int64
    let maxConcurrentUploads: Int
    /// Uploads being received now.
    private let uploading = Atomic<Int>(0)

    /// Each user's storage quota, which uploads to a private database are checked against; nil: none.
    let quota: UserQuota?

    init(store: CloudletStore, configuration: ServerConfiguration, quota: UserQuota? = nil) throws {
        self.store = store
        self.quota = quota
        signer = try AssetSigner(storePath: store.path)
        // The shard directories, now rather than in the first upload (BlobStore.prepareDirectories).
        try store.assets.prepareDirectories()
        maxAssetSize = configuration.maxAssetSize
        lifetime = Int64(configuration.assetURLLifetime * 1000)
        maxConcurrentUploads = configuration.maxConcurrentUploads
    }

    // MARK: - Tickets

    /// A ticket of `kind` for the request's database and caller, valid from now for ``lifetime``.
    func ticket(_ kind: AssetTicket.Kind, _ context: RequestContext) -> AssetTicket {
        let db = context.database.id
        return AssetTicket(
            kind: kind, expires: AssetSigner.now() + lifetime, container: db.container,
            environment: db.environment.rawValue, database: db.scope.rawValue, owner: db.owner,
            user: context.principal.user?.userRecordName ?? "")
    }

    /// The `downloadURL` of each asset a response carries (`${f}` is CloudKit's placeholder for a file name the
    /// client chooses; the server ignores that last segment).
    ///
    /// The ticket is made when an asset needs it, not up front: most responses carry no asset, and making it for
    /// every one of them (the clock, five strings) was ~0.6 % of a `records/lookup`'s server CPU (perf).
    func links(_ context: RequestContext) -> AssetLinks {
        { [self] asset in
            guard BlobStore.isChecksum(asset.fileChecksum) else { return nil }
            var t = ticket(.download, context)
            t.checksum = asset.fileChecksum
            t.size = asset.size
            return context.baseURL + Self.downloadPrefix + signer.sign(t) + "/${f}"
        }
    }

    /// The rule `records/modify` saves assets under: an asset with a receipt needs a genuine, unexpired one issued
    /// to this caller for this database, zone, record type and field (an `assets/rereference` receipt: any field of
    /// the database) and for these bytes; an asset without one
    /// must be the one the record's field already holds (a record fetched and saved back).
    func receiptRule(_ context: RequestContext) -> AssetRule {
        let expected = ticket(.receipt, context)
        return { [signer] use in
            let what = "field '\(use.field)' of record '\(use.recordID.recordName)'"
            guard let receipt = use.asset.receipt else {
                if use.previous?.assets.contains(where: { $0.fileChecksum == use.asset.fileChecksum }) == true { return }
                throw CloudletError.invalid(
                    "\(what): asset \(use.asset.fileChecksum) has no receipt; upload the file (assets/upload) and send the "
                        + "receipt its upload returned")
            }
            let t: AssetTicket
            switch signer.verify(receipt, kind: .receipt) {
            case .success(let ticket): t = ticket
            case .failure(.notGenuine):
                throw CloudletError.invalid("\(what): the asset receipt is not one this server issued (or was changed)")
            case .failure(.expired(let at)):
                throw CloudletError.invalid(
                    "\(what): the asset receipt expired at \(Self.isoDate(at)); upload the file again")
            }
            guard t.container == expected.container, t.environment == expected.environment,
                t.database == expected.database, t.owner == expected.owner, t.user == expected.user
            else {
                throw CloudletError(
                    .permissionFailure,
                    "\(what): the asset receipt was issued to '\(t.user)' for the \(t.database) database of \(t.container) "
                        + "(\(t.environment)), not to this caller and database")
            }
            // A receipt of `assets/rereference` names no field: the file may go into any asset field of the database.
            let anyField = t.field.isEmpty && t.recordType.isEmpty
            guard anyField || (t.zone == use.recordID.zoneID.zoneName && t.recordType == use.recordType && t.field == use.field),
                t.recordName.isEmpty || t.recordName == use.recordID.recordName
            else {
                throw CloudletError.invalid(
                    "\(what): the asset receipt is for field '\(t.field)' of a \(t.recordType) record in zone '\(t.zone)'")
            }
            guard t.checksum == use.asset.fileChecksum, t.size == use.asset.size else {
                throw CloudletError.invalid("\(what): fileChecksum and size are not those of the receipt's upload")
            }
        }
    }

    static func isoDate(_ ms: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }

    // MARK: - assets/upload

    /// `assets/upload`: `{zoneID?, tokens:[{recordName?, recordType, fieldName}]}` → `{tokens:[{recordName?,
    /// recordType, fieldName, url}]}`.
    func uploadURLs(_ context: RequestContext) throws -> [UInt8] {
        let body = context.body
        let zone = try ZoneIDCoding.decode(body["zoneID"], at: "zoneID") ?? .default
        let db = context.database
        _ = try ThreadBridge.wait { try await db.zone(for: zone) }  // access, and ZONE_NOT_FOUND
        guard case .array(let tokens)? = body["tokens"], !tokens.isEmpty else {
            throw APIError.badRequest("tokens must be a non-empty array of {recordName?, recordType, fieldName}")
        }
        guard tokens.count <= CloudletLimits.operationsPerRequest else {
            throw APIError.badRequest("\(tokens.count) tokens in one request; the limit is \(CloudletLimits.operationsPerRequest)")
        }
        var requested: [(name: String?, type: String, field: String)] = []
        for (i, json) in tokens.enumerated() {
            let path = "tokens[\(i)]"
            let o = try json.requireObject(at: path)
            requested.append((try o.string("recordName", at: path), try Self.name("recordType", of: o, at: path), try Self.name("fieldName", of: o, at: path)))
        }
        var out = JSONWriter()
        out.object { w in
            w.key("tokens")
            w.array { w in
                for (name, type, field) in requested {
                    var t = ticket(.upload, context)
                    t.zone = zone.zoneName
                    t.recordType = type
                    t.field = field
                    t.recordName = name ?? ""
                    w.object { w in
                        if let name { w.member("recordName", name) }
                        w.member("recordType", type)
                        w.member("fieldName", field)
                        w.member("url", context.baseURL + Self.uploadPrefix + signer.sign(t))
                    }
                }
            }
        }
        return out.bytes
    }

    /// The non-empty string `key` of a request item at `path`. - Throws: `BAD_REQUEST` naming `path.key`.
    static func name(_ key: String, of item: [String: JSONValue], at path: String) throws -> String {
        guard let value = try item.string(key, at: path), !value.isEmpty else { throw APIError.badRequest("\(path).\(key) is missing") }
        return value
    }

    // MARK: - Upload

    /// `POST <upload URL>` with the file's bytes → `{singleFile: {fileChecksum, size, receipt, referenceChecksum}}`.
    func upload(_ request: HTTPRequest) -> HTTPResponse {
        do {
            guard request.method == "POST" || request.method == "PUT" else {
                throw APIError(
                    "BAD_REQUEST", "an upload URL takes POST with the file's bytes, not \(request.method)", status: 405)
            }
            let token = String(request.path.dropFirst(Self.uploadPrefix.count))
            var t = try check(token, .upload, what: "upload URL", renew: "ask assets/upload for a new one")
            guard let stream = request.bodyStream else { throw APIError("INTERNAL_ERROR", "the upload body was not streamed") }
            if let declared = stream.declaredLength, declared > maxAssetSize { throw tooLarge(declared) }
            guard uploading.add(1, ordering: .relaxed).newValue <= maxConcurrentUploads else {
                uploading.subtract(1, ordering: .relaxed)
                var busy = APIError(
                    "TRY_AGAIN_LATER", "\(maxConcurrentUploads) uploads are being received; retry shortly", status: 503
                ).response
                busy.headers.append(("Retry-After", "1"))
                return busy
            }
            defer { uploading.subtract(1, ordering: .relaxed) }
            // What the user's quota leaves, for an upload to a private database (whose owner it counts against).
            let allowance = try quotaAllowance(t, declared: stream.declaredLength)
            let blob: BlobStore.StoredBlob
            do {
                // The name is synced by the save that references the file (BlobStore.makeDurable): one sync per upload.
                // With a Content-Length the stream knows its last piece: its fdatasync starts beside its hashing.
                blob = try store.assets.write(
                    maxSize: min(maxAssetSize, allowance ?? .max), syncName: false, ended: { stream.finished }
                ) {
                    try stream.nextPiece(atLeast: BlobStore.chunkSize)  // the front end's buffer: no copy
                }
            } catch is BlobStore.TooLarge {
                if let allowance, allowance < maxAssetSize, let quota {
                    throw UserQuota.uploadRefused(
                        user: t.owner, used: quota.bytes - Int(allowance), quota: quota.bytes, size: "more than \(allowance) bytes")
                }
                throw tooLarge(nil)
            }
            t.kind = .receipt
            t.expires = AssetSigner.now() + lifetime
            t.checksum = blob.checksum
            t.size = blob.size
            var w = JSONWriter()
            w.object { w in
                w.key("singleFile")
                w.object { w in
                    w.member("fileChecksum", blob.checksum)
                    w.member("size", blob.size)
                    w.member("receipt", signer.sign(t))
                    // No encryption at rest: the reference checksum is the file's.
                    w.member("referenceChecksum", blob.checksum)
                }
            }
            return HTTPResponse(status: 200, body: w.bytes)
        } catch {
            return Self.response(error)
        }
    }

    /// The bytes an upload with ticket `t` may bring under its user's quota: nil when no quota applies (none set, or
    /// an upload for the public or a shared database, checked when it is saved). - Throws: `QUOTA_EXCEEDED` when
    /// the declared length does not fit.
    private func quotaAllowance(_ t: AssetTicket, declared: Int64?) throws -> Int64? {
        guard let quota, t.database == DatabaseScope.private.rawValue, !t.user.isEmpty, t.user == t.owner,
            let environment = Environment(rawValue: t.environment)
        else { return nil }
        return try quota.uploadAllowance(
            user: t.owner, container: store.container(t.container), environment: environment, declared: declared, limit: maxAssetSize)
    }

    private func tooLarge(_ size: Int64?) -> APIError {
        APIError(
            "BAD_REQUEST",
            (size.map { "the asset is \($0) bytes; the limit is" } ?? "the asset is larger than the limit of")
                + " \(maxAssetSize) bytes (--max-asset-size); nothing was kept", status: 413)
    }

    /// The ticket a URL carries. - Throws: 403 when it is not genuine or has expired.
    private func check(_ token: String, _ kind: AssetTicket.Kind, what: String, renew: String) throws -> AssetTicket {
        switch signer.verify(token, kind: kind) {
        case .success(let t): return t
        case .failure(.notGenuine):
            throw APIError("ACCESS_DENIED", "this \(what) is not one this server signed (or it was changed)", status: 403)
        case .failure(.expired(let at)):
            throw APIError("ACCESS_DENIED", "this \(what) expired at \(Self.isoDate(at)); \(renew)", status: 403)
        }
    }

    private static func response(_ error: any Error) -> HTTPResponse { APIError(answering: error).response }

    // MARK: - Download

    /// `GET <download URL>`: the file, with `Content-Length`, `ETag` (its checksum), `Content-Type` when known
    /// (``AssetContentType``) and single `Range`s (206).
    func download(_ request: HTTPRequest) -> HTTPResponse {
        do {
            guard request.method == "GET" else {
                throw APIError("BAD_REQUEST", "a download URL takes GET, not \(request.method)", status: 405)
            }
            let rest = request.path.dropFirst(Self.downloadPrefix.count)
            let token = String(rest.prefix { $0 != "/" })
            let t = try check(token, .download, what: "download URL", renew: "fetch the record again for a new one")
            let file: BlobReader
            do { file = try BlobReader(store.assets, t.checksum) } catch let e as CloudletError where e.code == .unknownItem {
                throw APIError("NOT_FOUND", "asset \(t.checksum) is not in the store", status: 404)
            }
            let size = file.size
            // The last segment is the file name the client put in place of `${f}` (AssetContentType).
            let name = HTTPRequest.percentDecode(rest.drop { $0 != "/" }.dropFirst())
            let type = AssetContentType.of(fileName: name) {
                var head = [UInt8](repeating: 0, count: AssetContentType.sniffLength)
                let n = head.withUnsafeMutableBytes { (try? file.read(into: $0, at: 0)) ?? 0 }
                return Array(head.prefix(n))
            }
            var status = 200
            var range = Int64(0)..<size
            var headers = [("ETag", "\"\(t.checksum)\""), ("Accept-Ranges", "bytes"), ("X-Content-Type-Options", "nosniff")]
            if let header = request.range {
                switch Self.byteRange(header, size: size) {
                case .whole: break
                case .part(let r):
                    range = r
                    status = 206
                    headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(size)"))
                case .unsatisfiable:
                    var e = APIError("BAD_REQUEST", "range '\(header)' is outside the asset's \(size) bytes", status: 416).response
                    e.headers.append(("Content-Range", "bytes */\(size)"))
                    return e
                }
            }
            return .blob(file, range: range, status: status, contentType: type, headers: headers)
        } catch {
            return Self.response(error)
        }
    }

    enum ByteRange: Equatable {
        case whole
        case part(Range<Int64>)
        case unsatisfiable
    }

    /// One `bytes=a-b`, `bytes=a-` or `bytes=-n` range of a file of `size` bytes; anything else (several ranges,
    /// other units, nonsense) is answered with the whole file, as RFC 9110 allows.
    static func byteRange(_ header: String, size: Int64) -> ByteRange {
        let h = header.trimmingCharacters(in: .whitespaces)
        guard h.hasPrefix("bytes="), !h.contains(",") else { return .whole }
        let spec = h.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash], last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            guard let n = Int64(last), n >= 0 else { return .whole }
            if n == 0 || size == 0 { return .unsatisfiable }
            return .part(max(0, size - n)..<size)
        }
        guard let start = Int64(first), start >= 0 else { return .whole }
        let end: Int64
        if last.isEmpty { end = size - 1 } else {
            guard let e = Int64(last), e >= start else { return .whole }
            end = min(e, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .part(start..<end + 1)
    }
}

extension HTTPResponse {
    /// `status` with the bytes `range` of an open blob as its body (`application/octet-stream`): sent by the front
    /// end's loop straight from the file (docs/assets.md, *How a download is sent*), or — for a store on a file
    /// system without descriptors (the tests' in-memory one) — read and sent by the worker. Asset downloads, and the
    /// blobs a cluster node serves its peers.
    package static func blob(
        _ file: BlobReader, range: Range<Int64>, status: Int = 200, contentType: String = "application/octet-stream",
        headers: [(String, String)] = []
    ) -> HTTPResponse {
        var response = HTTPResponse(status: status, contentType: contentType, headers: headers, body: [])
        if let fd = file.duplicateDescriptor() {
            response.file = HTTPFileBody(descriptor: fd, offset: range.lowerBound, length: Int64(range.count))
            return response
        }
        response.stream = HTTPResponseStream(length: Int64(range.count)) { send in
            var buffer = [UInt8](repeating: 0, count: BlobStore.chunkSize)
            var offset = range.lowerBound
            while offset < range.upperBound {
                let want = Int(min(Int64(buffer.count), range.upperBound - offset))
                let n = buffer.withUnsafeMutableBytes { b in
                    (try? file.read(into: UnsafeMutableRawBufferPointer(rebasing: b[0..<want]), at: offset)) ?? 0
                }
                guard n > 0, buffer.withUnsafeBytes({ send(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { return }
                offset += Int64(n)
            }
        }
        return response
    }
}
