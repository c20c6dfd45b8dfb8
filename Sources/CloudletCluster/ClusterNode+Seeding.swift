import Cloudlet
import CloudletClient
import CloudletConcurrency
import CloudletCore
import CloudletReplication
import CloudletServer
import CloudletStorage
import CloudletWire
import Foundation
import Synchronization

/// Seeding a node from files (docs/replication.md, "Seeding a node from files"): a node that starts with an empty
/// store in a cluster whose logs hold data copies the partition's leader's logs as files — the segments up to their
/// durable end, the compaction marker and horizon, the store's `CLOUDLET` (its id, shared by every replica) — and the
/// asset blobs, into a staging directory, then restarts, moves them into place and tails the leader from there like
/// any follower that was down. Nothing is applied record by record: opening the copied store replays the logs once
/// into fresh indexes.
///
/// `POST /cloudlet/cluster/seed`, the body sealed with the cluster's message key (like the replication messages),
/// lines `<node>\n<operation>[\n<argument>…]`:
/// - `begin`: the source takes a ``SeedSession`` (every log's ``LogSnapshot``, its blobs pinned) and answers with
///   what it holds (JSON, sealed): the files to copy with their sizes, the small ones inline.
/// - `chunk <session> <file> <offset>`: up to ``seedChunkSize`` bytes of a file; `X-Cloudlet-CRC32C` their CRC32C.
/// - `end <session>`: the source lets the snapshot go (else it goes after ``seedSessionTimeout`` without a request).
extension ClusterNode {
    static let seedPath = "/cloudlet/cluster/seed"
    static let seedChecksumHeader = "X-Cloudlet-CRC32C"
    /// Bytes per chunk of a seed's file. 8 MiB.
    static let seedChunkSize = 8 << 20
    /// A seed session with no request for this long is released (its node died). 60 s.
    static let seedSessionTimeout: Millis = 60_000

    /// The files of a store as of one moment, held for a node copying them (source side).
    final class SeedSession: Sendable {
        let id: String
        let node: NodeID
        /// Per log: its directory in the store (`p0000`, `catalog`) and its durable end in the copy.
        let logs: [(directory: String, durableLSN: UInt64)]
        /// What `chunk` copies, by index: path in the store, and the file held.
        let files: [(path: String, file: HeldFile)]
        /// Small files made at the moment (`CLOUDLET`, markers, horizons, the indexes' manifests), sent with the plan.
        let inline: [(path: String, bytes: [UInt8])]
        /// Blobs pinned for the session (unpinned by ``release(_:)``).
        let blobs: [BlobStore.Entry]
        private let snapshots: [LogSnapshot]
        private let indexes: [IndexSnapshot]
        let lastUsed: Atomic<Int64>

        init(
            id: String, node: NodeID, snapshots: [(directory: String, log: LogSnapshot, index: IndexSnapshot?)],
            blobs: [BlobStore.Entry], metadata: [UInt8], now: Millis
        ) {
            self.id = id
            self.node = node
            self.blobs = blobs
            self.snapshots = snapshots.map(\.log)
            indexes = snapshots.compactMap(\.index)
            logs = snapshots.map { ($0.directory, $0.log.durableLSN) }
            var files: [(String, HeldFile)] = []
            var inline: [(String, [UInt8])] = [(StoreMetadata.fileName, metadata)]
            for (dir, log, index) in snapshots {
                files += log.segments.map { (dir + "/" + $0.name, $0) }
                if let m = log.marker { inline.append((dir + "/" + CompactionMarker.fileName, m)) }
                if let h = log.horizon { inline.append((dir + "/" + CompactionHorizon.fileName, h)) }
                if let index {
                    let indexDir = dir + "/" + Partition.indexDirectoryName
                    files += index.runs.map { (indexDir + "/" + $0.name, $0) }
                    inline.append((indexDir + "/" + index.manifest.name, index.manifest.bytes))
                    inline.append((indexDir + "/CURRENT", index.current))
                }
            }
            self.files = files
            self.inline = inline
            lastUsed = Atomic(Int64(now))
        }

        func close() {
            for s in snapshots { s.close() }
            for i in indexes { i.close() }
        }
    }

    // MARK: Source

    /// `POST /cloudlet/cluster/seed`.
    func serveSeed(_ request: HTTPRequest) -> HTTPResponse {
        let (sealer, message): (MessageAuthenticator, ArraySlice<UInt8>)
        switch openPeerRequest(request, Self.seedPath, "seed request") {
        case .success(let opened): (sealer, message) = opened
        case .failure(let refusal): return refusal.response
        }
        let parts = String(decoding: message, as: UTF8.self).split(separator: "\n").map(String.init)
        guard parts.count >= 2 else { return APIError.badRequest("a seed request is '<node>\\n<operation>…'").response }
        let from = NodeID(parts[0])
        guard replicaSet.withLock({ $0.contains(from) }), from != configuration.node else {
            return APIError("BAD_REQUEST", "\(from) is not another replica of cluster \(configuration.name)", status: 403).response
        }
        switch (parts[1], parts.count) {
        case ("begin", 2):
            do {
                let session = try beginSeed(for: from)
                return HTTPResponse(
                    status: 200, contentType: "application/octet-stream",
                    body: sealer.seal(Array(Self.describe(session).serialized().utf8)))
            } catch {
                return APIError(error as? CloudletError ?? CloudletError(.io, "\(error)")).response
            }
        case ("chunk", 5):
            guard let session = seedSessions.withLock({ $0[parts[2]] }), session.node == from else {
                return APIError("NOT_FOUND", "no seed session \(parts[2]) for \(from) (it timed out?)", status: 404).response
            }
            guard let index = Int(parts[3]), session.files.indices.contains(index), let offset = UInt64(parts[4]) else {
                return APIError.badRequest("no file \(parts[3]) at offset \(parts[4]) in seed session \(parts[2])").response
            }
            session.lastUsed.store(Int64(now()), ordering: .relaxed)
            do {
                let bytes = try session.files[index].file.read(offset: offset, count: Self.seedChunkSize)
                seedBytesServed.add(bytes.count, ordering: .relaxed)
                return HTTPResponse(
                    status: 200, contentType: "application/octet-stream",
                    headers: [(Self.seedChecksumHeader, String(CRC32C.checksum(bytes)))], body: bytes)
            } catch {
                return APIError(error as? CloudletError ?? CloudletError(.io, "\(error)")).response
            }
        case ("end", 3):
            if let session = seedSessions.withLock({ $0.removeValue(forKey: parts[2]) }) { release(session) }
            return HTTPResponse(status: 204, contentType: "application/octet-stream", body: [])
        default:
            return APIError.badRequest("unknown seed operation '\(parts.dropFirst().joined(separator: " "))'").response
        }
    }

    /// Takes the snapshot: per partition its index (the runs of one version: the copy opens with them instead of
    /// replaying the whole log), then its log (at or past the index's flushed LSN); the catalog's log; then the
    /// blobs (pinned: no collection deletes them while the session holds them); then `CLOUDLET`.
    private func beginSeed(for node: NodeID) throws -> SeedSession {
        var taken: [(directory: String, log: LogSnapshot, index: IndexSnapshot?)] = []
        func closeTaken() {
            for t in taken {
                t.log.close()
                t.index?.close()
            }
        }
        do {
            for p in store.partitions {
                var index = try p.index?.snapshotForSeeding()
                let log = try p.log.snapshotForSeeding()
                // An index flushed under another compaction generation (a compaction installed in between), or past
                // the log's copy, would be set aside at the other end: leave it out, the copy rebuilds it.
                if let i = index {
                    let position = try? Partition.FlushPosition(decoding: i.logPosition)
                    if position == nil || position!.generation != log.generation || position!.lastLSN > log.durableLSN {
                        i.close()
                        index = nil
                    }
                }
                taken.append((StoreMetadata.partitionDirectoryName(Int(p.id)), log, index))
            }
            if let log = store.catalog.log { taken.append((Catalog.directoryName, try log.snapshotForSeeding(), nil)) }
        } catch {
            closeTaken()
            throw error
        }
        let blobs: [BlobStore.Entry]
        let metadata: [UInt8]
        do {
            blobs = try store.assets.list()
            _ = store.assets.pin(blobs.map(\.checksum))
            metadata = Array(try Data(contentsOf: URL(fileURLWithPath: store.path + "/" + StoreMetadata.fileName)))
        } catch {
            closeTaken()
            throw error
        }
        let session = SeedSession(
            id: UUID().uuidString.lowercased(), node: node, snapshots: taken, blobs: blobs, metadata: metadata, now: now())
        seedSessions.withLock { $0[session.id] = session }
        let bytes = session.files.reduce(0) { $0 + $1.file.size }
        ServerLog.note(
            "seeding \(node): \(taken.count) logs (\(session.files.count) files, \(Self.megabytes(bytes)) MB, "
                + "\(taken.filter { $0.index != nil }.count) indexes) and \(blobs.count) blobs, session \(session.id)")
        return session
    }

    private func release(_ session: SeedSession) {
        session.close()
        store.assets.unpin(session.blobs.map(\.checksum))
    }

    /// Releases the sessions no request used for ``seedSessionTimeout`` (from the tick).
    func expireSeedSessions() {
        let cutoff = Int64(now()) - Int64(Self.seedSessionTimeout)
        let expired = seedSessions.withLock { sessions -> [SeedSession] in
            let old = sessions.values.filter { $0.lastUsed.load(ordering: .relaxed) < cutoff }
            for s in old { sessions[s.id] = nil }
            return old
        }
        for s in expired {
            ServerLog.warning("seed session \(s.id) of \(s.node) timed out: released")
            release(s)
        }
    }

    /// Releases every session (the node stops).
    func releaseSeedSessions() {
        for s in seedSessions.withLock({ d in defer { d = [:] }; return Array(d.values) }) { release(s) }
    }

    private static func describe(_ session: SeedSession) -> JSONValue {
        .members([
            "session": .string(session.id),
            "logs": .array(session.logs.map { .members(["directory": .string($0.directory), "durableLSN": .int($0.durableLSN)]) }),
            "files": .array(session.files.map { .members(["path": .string($0.path), "size": .int($0.file.size)]) }),
            "inline": .array(session.inline.map { .members(["path": .string($0.path), "data": .string(Base64.encode($0.bytes))]) }),
            "blobs": .array(session.blobs.map { .members(["checksum": .string($0.checksum), "size": .int($0.size)]) }),
        ])
    }

    static func megabytes(_ bytes: UInt64) -> String {
        let tenths = Int((Double(bytes) / 100_000).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}

// MARK: Receiver

extension ClusterNode {
    /// Whether no log of the store holds a frame: a node started with an empty store (or one that lost it).
    var storeIsEmpty: Bool {
        holdsNoRecords && (store.catalog.log?.lastLSN ?? 0) == 0
    }

    /// Whether no partition's log holds a frame: what a seed from another replica's files may replace. The catalog's
    /// log may hold frames: a node that started empty tails the catalog as soon as it joins, and may hear that
    /// partition 0 is compacted past what it lacks only after that (its catalog frames came from a leader, whose files
    /// hold them too).
    var holdsNoRecords: Bool { store.partitions.allSatisfy { $0.log.lastLSN == 0 } }

    /// ``seedIfEmpty()``, tried up to 5 times 1 s apart (the leader may be changing); throws the last failure.
    func seedWithRetries() async throws -> Bool {
        for attempt in 1... {
            do { return try await seedIfEmpty() } catch where attempt < 5 {
                ServerLog.warning("seeding this empty store failed (attempt \(attempt) of 5): \(error); trying again")
                try await Task.sleep(for: .seconds(1))
            }
        }
        return false
    }

    /// A node with an empty store in a cluster whose partition 0 has a leader with data copies that leader's files
    /// into the staging directory (``StoreSeeding``); true when it did (the caller restarts the node, which moves
    /// them into place). False when there is nothing to copy (no leader, this node leads, the leader is empty too).
    /// Throws when the copy failed (nothing of it is kept: the store is empty as before).
    func seedIfEmpty() async throws -> Bool {
        guard holdsNoRecords else { return false }
        guard let leaderKey = try await etcd.get(keys.leader(0)) else { return false }
        let leader = NodeID(String(decoding: leaderKey.value, as: UTF8.self))
        guard leader != configuration.node, let address = try await etcd.get(keys.node(leader)) else { return false }
        let base = String(decoding: address.value, as: UTF8.self)
        peers.withLock { $0[leader] = base }
        let staging = store.path + "/" + StoreSeeding.stagingName
        do {
            return try await ThreadBridge.offload { [self] in try copySeed(from: leader, at: base, into: staging) }
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            throw error
        }
    }

    private func seedRequest(_ base: String, _ lines: [String]) throws -> HTTPClientResponse {
        guard let sealer = authenticator.withLock({ $0 }) else {
            throw CloudletError(.serviceUnavailable, "this node has not joined the cluster")
        }
        let body = sealer.seal(Array(([configuration.node.name] + lines).joined(separator: "\n").utf8))
        let request = HTTPClientRequest(
            method: "POST", url: base + Self.seedPath, headers: [("Content-Type", "application/octet-stream")], body: body)
        let transport = blobTransport
        let answer = try ThreadBridge.wait { try await transport.send(request) }
        guard answer.status == 200 || answer.status == 204 else {
            throw CloudletError(
                .serviceUnavailable,
                "seed request \(lines.first ?? "") answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
        }
        return answer
    }

    /// The copy itself (blocking): `begin`, every file chunk by chunk (each chunk's CRC32C checked, each file's size),
    /// the inline files, the blobs (through the blob endpoint, checked against their SHA-256 names), every file and
    /// directory fsynced, then the `COMPLETE` mark; `end` in any case.
    private func copySeed(from leader: NodeID, at base: String, into staging: String) throws -> Bool {
        let began = try seedRequest(base, ["begin"])
        guard let opened = authenticator.withLock({ $0 })?.open(began.body), let plan = try? JSONParser.parse(Array(opened)),
            let session = plan["session"]?.stringValue, let files = plan["files"]?.arrayValue,
            let logs = plan["logs"]?.arrayValue, let inline = plan["inline"]?.arrayValue, let blobs = plan["blobs"]?.arrayValue
        else {
            throw CloudletError(.serviceUnavailable, "\(leader) answered the seed's begin with something that is not a sealed plan")
        }
        defer { _ = try? seedRequest(base, ["end", session]) }
        let durable = logs.map { $0["durableLSN"]?.int64Value ?? 0 }
        guard durable.contains(where: { $0 > 0 }) else { return false }

        let fs = PosixFileSystem()
        try? FileManager.default.removeItem(atPath: staging)
        var directories: Set<String> = [staging]
        try io { () throws(FileSystemError) in
            try fs.createDirectory(staging)
            for l in logs {
                guard let d = l["directory"]?.stringValue, StoreSeeding.isStoreEntry(d) else { continue }
                try fs.createDirectory(staging + "/" + d)
                directories.insert(staging + "/" + d)
            }
            // The indexes' directories, for the runs and manifests the plan names.
            for f in files + inline {
                guard let path = f["path"]?.stringValue, StoreSeeding.isSafeRelativePath(path) else { continue }
                let parent = Path.parent(staging + "/" + path)
                if !directories.contains(parent) {
                    try fs.createDirectory(parent)
                    directories.insert(parent)
                }
            }
        }
        let total = files.reduce(UInt64(0)) { $0 + UInt64($1["size"]?.int64Value ?? 0) }
        var progress = SeedProgress(total: total, source: leader.name, started: now())
        ServerLog.note("seeding from \(leader): \(logs.count) logs, \(files.count) files, \(Self.megabytes(total)) MB, \(blobs.count) blobs")
        for (index, f) in files.enumerated() {
            guard let path = f["path"]?.stringValue, StoreSeeding.isSafeRelativePath(path), let size = f["size"]?.int64Value else {
                throw CloudletError(.serviceUnavailable, "\(leader)'s seed plan names a bad file: \(f.serialized())")
            }
            let target = staging + "/" + path
            let file = try io { () throws(FileSystemError) in try fs.open(target, options: [.create, .truncate]) }
            defer { try? file.close() }
            var offset: UInt64 = 0
            while offset < UInt64(size) {
                let answer = try seedRequest(base, ["chunk", session, String(index), String(offset)])
                let crc = answer.header(Self.seedChecksumHeader).flatMap(UInt32.init)
                guard !answer.body.isEmpty, offset + UInt64(answer.body.count) <= UInt64(size), crc == CRC32C.checksum(answer.body)
                else {
                    throw CloudletError(
                        .serviceUnavailable,
                        "\(leader) sent \(answer.body.count) bytes of \(path) at offset \(offset) (of \(size)) that do not check out "
                            + "(CRC32C \(crc.map(String.init) ?? "missing"))")
                }
                try io { () throws(FileSystemError) in try file.write(answer.body, at: offset) }
                offset += UInt64(answer.body.count)
                Self.seedBytesReceived.add(answer.body.count, ordering: .relaxed)
                if let line = progress.note(bytes: UInt64(answer.body.count), now: now()) { ServerLog.note(line) }
                // A crash mid-copy (tests: `CLOUDLET_CRASH_AT=seed.chunk`) must leave the store empty, never half.
                CrashPoint.reached("seed.chunk")
            }
            try io { () throws(FileSystemError) in
                guard try file.size() == UInt64(size) else {
                    throw FileSystemError(operation: "seed (size check)", path: target, errno: EIO)
                }
                try file.fdatasync()
            }
        }
        for f in inline {
            guard let path = f["path"]?.stringValue, StoreSeeding.isSafeRelativePath(path),
                let data = f["data"]?.stringValue.flatMap(Base64.decode)
            else {
                throw CloudletError(.serviceUnavailable, "\(leader)'s seed plan names a bad inline file: \(f.serialized())")
            }
            try StoreSeeding.writeDurably(data, to: staging + "/" + path, fileSystem: fs)
        }
        // Blobs into this store's `assets/` (checked against their names, fsynced, named): not part of the staged
        // store, so an abandoned seed leaves only unreferenced blobs, which a collection removes.
        var fetched = 0
        for b in blobs {
            guard let checksum = b["checksum"]?.stringValue, BlobStore.isChecksum(checksum), let size = b["size"]?.int64Value else { continue }
            if store.assets.exists(checksum) { continue }
            switch fetchBlob(AssetReference(fileChecksum: checksum, size: size), from: leader) {
            case .stored: fetched += 1
            case .absent: continue  // collected at the source since: no record of the copy references it any more
            case .failed(let why): throw CloudletError(.serviceUnavailable, "seeding blob \(checksum) from \(leader): \(why)")
            }
        }
        try io { () throws(FileSystemError) in
            for d in directories.sorted(by: >) { try fs.fsyncDirectory(d) }
        }
        try StoreSeeding.writeDurably([], to: staging + "/" + StoreSeeding.completeName, fileSystem: fs)
        ServerLog.note(progress.finished(now: now(), blobs: fetched))
        return true
    }
}

/// The progress line of a seed (the style of ``CatchUpProgress``): at most every 5 s how many bytes of how many
/// arrived and at what rate, and once done how long it took.
struct SeedProgress {
    var total: UInt64
    var source: String
    var started: Millis
    var copied: UInt64 = 0
    var said: Millis = 0
    var interval: Millis = 5_000

    init(total: UInt64, source: String, started: Millis) {
        self.total = total
        self.source = source
        self.started = started
        said = started
    }

    mutating func note(bytes: UInt64, now: Millis) -> String? {
        copied += bytes
        guard now >= said + interval else { return nil }
        said = now
        return "seeding from \(source): \(ClusterNode.megabytes(copied)) MB of \(ClusterNode.megabytes(total)) MB, \(rate(now)) MB/s"
    }

    func finished(now: Millis, blobs: Int) -> String {
        let seconds = Double(max(now - started, 1)) / 1000
        return "seeded from \(source): \(ClusterNode.megabytes(copied)) MB and \(blobs) blobs in \(String(format: "%.1f", seconds)) s "
            + "(\(rate(now)) MB/s); restarting to open the copy"
    }

    private func rate(_ now: Millis) -> Int {
        Int(Double(copied) / 1e6 / (Double(max(now - started, 1)) / 1000))
    }
}

/// Moving a staged seed into place (`cloudlet serve --cluster` runs ``finish(at:)`` before it opens the store).
///
/// The copy is made in `<store>/seeding/` and marked complete last (an empty `COMPLETE` file, fsynced with its
/// directory). Before the store opens: a staging directory without the mark is an interrupted copy and is deleted
/// (the store is empty as it was, and seeds again); one with it is moved into place — the empty store's `CLOUDLET`
/// deleted first (so that no tool opens a mix), every staged log directory replacing the empty one, `CLOUDLET` last,
/// then the staging directory removed. Every step is idempotent, so a crash during it is finished by the next start.
public enum StoreSeeding {
    static let stagingName = "seeding"
    static let completeName = "COMPLETE"

    /// What ``finish(at:)`` did.
    public enum Outcome: Sendable, Equatable {
        case nothing
        case discarded
        case installed
    }

    /// Finishes or discards a staged seed of the store at `directory`, holding its lock. Throws `.io`, or `.locked`
    /// when another process has the store open.
    @discardableResult
    public static func finish(at directory: String) throws -> Outcome {
        let staging = directory + "/" + stagingName
        let fs = PosixFileSystem()
        guard fs.fileExists(staging) else { return .nothing }
        // Under the store's lock: no other process has the store open meanwhile (one copying into this very
        // directory, started by mistake on the same store, keeps its staging).
        let lock = try StoreLock(directory: directory, fileSystem: fs)
        defer { lock.release() }
        guard fs.fileExists(staging + "/" + completeName) else {
            do { try FileManager.default.removeItem(atPath: staging) } catch {
                throw CloudletError(.io, "removing the interrupted seed \(staging): \(error)")
            }
            try io { () throws(FileSystemError) in try fs.fsyncDirectory(directory) }
            return .discarded
        }
        try io { () throws(FileSystemError) in
            let metadata = StoreMetadata.fileName
            let staged = try fs.listDirectory(staging).filter { $0 != completeName }
            if staged.contains(metadata), fs.fileExists(directory + "/" + metadata) {
                try fs.remove(directory + "/" + metadata)
                try fs.fsyncDirectory(directory)
            }
            for name in staged.sorted() where name != metadata && isStoreEntry(name) {
                if fs.fileExists(directory + "/" + name) {
                    do { try FileManager.default.removeItem(atPath: directory + "/" + name) } catch {
                        throw FileSystemError(operation: "remove", path: directory + "/" + name, errno: EIO)
                    }
                }
                try fs.rename(staging + "/" + name, to: directory + "/" + name)
                try fs.fsyncDirectory(directory)
            }
            if staged.contains(metadata) {
                try fs.rename(staging + "/" + metadata, to: directory + "/" + metadata)
                try fs.fsyncDirectory(directory)
            }
        }
        do { try FileManager.default.removeItem(atPath: staging) } catch {
            throw CloudletError(.io, "removing \(staging) after installing it: \(error)")
        }
        try io { () throws(FileSystemError) in try fs.fsyncDirectory(directory) }
        return .installed
    }

    /// Names a seed may place at the top of a store: `CLOUDLET`, the partitions' and the catalog's log directories.
    static func isStoreEntry(_ name: String) -> Bool {
        name == StoreMetadata.fileName || name == Catalog.directoryName
            || (name.count == 5 && name.hasPrefix("p") && name.dropFirst().allSatisfy(\.isNumber))
    }

    /// `CLOUDLET`, `<log>/<file>` or `<log>/index/<file>` with no `.`, `..` or empty part: what a seed plan may name.
    static func isSafeRelativePath(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }), isStoreEntry(parts[0]) else { return false }
        switch parts.count {
        case 1: return parts[0] == StoreMetadata.fileName
        case 2: return parts[0] != StoreMetadata.fileName
        case 3: return parts[0] != StoreMetadata.fileName && parts[1] == Partition.indexDirectoryName
        default: return false
        }
    }

    static func writeDurably(_ bytes: [UInt8], to path: String, fileSystem fs: any FileSystem) throws {
        try io { () throws(FileSystemError) in
            let file = try fs.open(path, options: [.create, .truncate])
            defer { try? file.close() }
            if !bytes.isEmpty { try file.write(bytes, at: 0) }
            try file.fdatasync()
        }
    }
}
