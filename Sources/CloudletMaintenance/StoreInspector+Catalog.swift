import Cloudlet
import CloudletCore
import CloudletStorage

/// What `cloudlet-tool info` shows of the catalog (schemas, subscriptions; `DIR/catalog/`).
package struct CatalogInfo: Sendable {
    package var directory: String
    /// A format-1 store: the catalog is still in partition 0's log (the next read-write open migrates it).
    package var inPartitionZero: Bool
    package var segments: [StoreInfo.Segment] = []
    package var checkpoints: [StoreInfo.Checkpoint] = []
    /// From the opened store (nil if it did not open).
    package var version: UInt64?
    package var framesReplayed: Int?
    /// (container, environment) schemas, record types, fields, fields with index flags, subscriptions.
    package var schemas: Int?
    package var recordTypes: Int?
    package var fields: Int?
    package var indexedFields: Int?
    package var subscriptions: Int?
    /// The catalog version each partition's commits were validated against (by partition).
    package var partitionVersions: [Int] = []
}

/// One entry of the catalog as `cloudlet-tool dump --catalog` lists it: a record type of a schema, or a
/// subscription.
package struct CatalogEntry: Sendable {
    package enum Kind: String, Sendable { case recordType = "record-type", subscription }
    package var kind: Kind
    package var container: String
    package var environment: Environment
    /// A record type (kind `recordType`).
    package var recordType: RecordTypeSchema?
    /// A subscription and whose it is (kind `subscription`).
    package var subscription: Subscription?
    package var scope: DatabaseScope?
    package var owner: String?
    package var user: String?
}

/// What `cloudlet-tool verify` found in the catalog's log (findings are in the report's list, with partition
/// ``VerifyReport/catalogPartition``).
package struct CatalogVerification: Sendable {
    package var segments = 0
    package var frames = 0
    package var bytes: UInt64 = 0
    /// The catalog version the log ends at.
    package var lastLSN: UInt64 = 0
    package var mutations = 0
    package var checkpointLSN: UInt64?
}

extension VerifyReport {
    /// The `partition` of findings about the catalog.
    package static let catalogPartition = -1
}

extension StoreInspector {
    /// `DIR/catalog`.
    package var catalogDirectory: String { path + "/" + Catalog.directoryName }

    /// Whether the store's catalog is still in partition 0 (format 1, not migrated yet).
    package var catalogInPartitionZero: Bool { metadata.format == StoreMetadata.partitionZeroCatalogFormat }

    /// Describes the catalog's files and, with the opened store, its content. Never fails on bad data.
    package func catalogInfo(store: CloudletStore?) -> CatalogInfo {
        var info = CatalogInfo(directory: catalogDirectory, inPartitionZero: catalogInPartitionZero)
        if let store {
            let snapshot = store.catalog.snapshot()
            info.version = snapshot.version
            info.framesReplayed = store.catalog.framesReplayed
            info.schemas = snapshot.schema.types.count
            info.recordTypes = snapshot.schema.types.values.reduce(0) { $0 + $1.count }
            info.fields = snapshot.schema.types.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.fields.count } }
            info.indexedFields = snapshot.schema.types.values.reduce(0) {
                $0 + $1.values.reduce(0) { $0 + $1.indexes.values.filter { !$0.isEmpty }.count }
            }
            info.subscriptions = snapshot.subscriptions.values.reduce(0) { $0 + $1.count }
            info.partitionVersions = store.partitions.map { p in Int(p.state.withLock { $0.catalogVersion }) }
        }
        guard !info.inPartitionZero, fileSystem.fileExists(catalogDirectory) else { return info }
        var lastLSNs: [UInt64: UInt64] = [:]
        if let log = store?.catalog.log { for s in log.segments() { lastLSNs[s.firstLSN] = s.lastLSN } }
        if let layout = try? LogLayout.load(directory: catalogDirectory, fileSystem: fileSystem) {
            for (i, file) in layout.segments.enumerated() {
                let header = LogLayout.header(of: file.path, fileSystem: fileSystem)
                let last =
                    lastLSNs[file.firstLSN] ?? (i + 1 < layout.segments.count ? layout.segments[i + 1].firstLSN - 1 : nil)
                info.segments.append(
                    StoreInfo.Segment(
                        name: Path.name(file.path), firstLSN: file.firstLSN, lastLSN: last, size: header?.size ?? 0,
                        generation: file.generation, epoch: header?.epoch))
            }
        }
        if let (files, _) = try? CheckpointStore(directory: catalogDirectory, fileSystem: fileSystem).list() {
            for f in files {
                var c = StoreInfo.Checkpoint(
                    name: Path.name(f.path), lsn: f.lsn, size: f.size, generation: nil, problem: f.problem,
                    used: store?.catalog.checkpointLSN == f.lsn)
                if f.problem == nil {
                    do { _ = try CatalogState.decodeCheckpoint(f.payload, next: f.next) } catch let e as CloudletError {
                        c.problem = e.message
                    } catch {
                        c.problem = "\(error)"
                    }
                }
                info.checkpoints.append(c)
            }
        }
        return info
    }

    /// Every record type of every schema (sorted by container, environment, name), then every subscription.
    package func catalogEntries(in store: CloudletStore, container: String? = nil) -> [CatalogEntry] {
        let snapshot = store.catalog.snapshot()
        var out: [CatalogEntry] = []
        for (c, environment, types) in schema(in: store, container: container) {
            for t in types {
                out.append(CatalogEntry(kind: .recordType, container: c, environment: environment, recordType: t))
            }
        }
        for who in snapshot.subscriptions.keys.sorted(by: { $0.sortKey < $1.sortKey })
        where container == nil || who.database.container == container {
            for sub in snapshot.subscriptions[who]!.values.sorted(by: { $0.id < $1.id }) {
                out.append(
                    CatalogEntry(
                        kind: .subscription, container: who.database.container, environment: who.database.environment,
                        subscription: sub, scope: who.database.scope, owner: who.database.owner, user: who.user))
            }
        }
        return out
    }

    /// Walks the catalog's log like ``dumpLog(filter:states:frames:mutations:progress:)`` walks the partitions':
    /// frames and mutations get partition ``VerifyReport/catalogPartition``; liveness is not reported.
    package func dumpCatalogLog(
        filter: InspectionFilter, frames: ((DumpedFrame) throws -> Void)?, mutations: ((DumpedMutation) throws -> Void)?,
        progress: ProgressHandler? = nil
    ) throws -> [VerifyReport.Finding] {
        let p = VerifyReport.catalogPartition
        guard !catalogInPartitionZero else { return [] }
        let walker = LogWalker(directory: catalogDirectory, fileSystem: fileSystem)
        let total = (try? walker.totalBytes()) ?? 0
        var findings: [VerifyReport.Finding] = []
        let report = try walker.walk(progress: { progress?(InspectionProgress(phase: "catalog", bytesDone: $0, bytesTotal: total)) }) { frame in
            guard filter.matches(lsn: frame.lsn) else { return }
            let segment = Path.name(frame.path)
            var count = 0
            do {
                let commit = try Catalog.decode(frame.type, try frame.payload(), lsn: frame.lsn, at: "\(segment) offset \(frame.position.offset)")
                count = commit.mutations.count
                for (k, m) in commit.mutations.enumerated() {
                    var d = DumpedMutation(
                        partition: p, segment: segment, offset: frame.position.offset, lsn: frame.lsn,
                        index: commit.index(k), epoch: frame.epoch, kind: .schemaField)
                    let container: String
                    switch m {
                    case .schemaField(let key, let type, let field, let ft):
                        d.recordType = type
                        d.detail = "\(key.container)/\(key.environment.rawValue) \(type)\(field.map { ".\($0) \(ft?.description ?? "")" } ?? "")"
                        container = key.container
                    case .schemaReset(let c):
                        (d.kind, d.detail) = (.schemaReset, "\(c)/development reset to production")
                        container = c
                    case .index(let change):
                        (d.kind, d.detail) = (.index, "\(change)")
                        if case .flags(_, let type, _, _) = change { d.recordType = type }
                        if case .composite(_, let type, _, _) = change { d.recordType = type }
                        container = change.container
                    case .saveSubscription(let who, let sub):
                        (d.kind, d.detail) = (.saveSubscription, "\(who.database.container)/\(who.database.environment.rawValue) \(who.user): \(sub.id)")
                        container = who.database.container
                    case .deleteSubscription(let who, let id):
                        (d.kind, d.detail) = (.deleteSubscription, "\(who.database.container)/\(who.database.environment.rawValue) \(who.user): \(id)")
                        container = who.database.container
                    case .security(let change):
                        (d.kind, d.detail) = (.security, change.summary)
                        container = change.container
                    default: continue  // Catalog.decode admits catalog mutations only
                    }
                    let matches =
                        (filter.container == nil || filter.container == container) && filter.zone == nil && filter.owner == nil
                        && (filter.recordType == nil || d.recordType == filter.recordType)
                    if matches { try mutations?(d) }
                }
            } catch let e as CloudletError where e.code == .corruption {
                findings.append(
                    VerifyReport.Finding(severity: .error, partition: p, file: frame.path, offset: frame.position.offset, message: e.message))
            }
            try frames?(
                DumpedFrame(
                    partition: p, segment: segment, offset: frame.position.offset, length: frame.position.length,
                    lsn: frame.lsn, epoch: frame.epoch, type: frame.type, compressed: frame.isCompressed,
                    payloadBytes: frame.uncompressedLength, mutations: count, liveMutations: nil, zones: []))
        }
        findings += report.findings.map {
            VerifyReport.Finding(severity: $0.severity, partition: p, file: $0.path, offset: $0.offset, message: $0.message)
        }
        return findings
    }

    /// Checks the catalog's log as ``verify(deep:progress:)`` checks a partition's: segments and frames, that
    /// every frame is a catalog commit, the checkpoints (and, `deep`, checkpoint + tail against a full replay);
    /// and that no partition's commits name a catalog version past the log's end.
    func verifyCatalog(
        deep: Bool, partitionVersions: [Int: UInt64], report: inout VerifyReport, progress: ProgressHandler?
    ) throws {
        let p = VerifyReport.catalogPartition
        let dir = catalogDirectory
        func finding(_ severity: LogFinding.Severity, _ file: String, _ offset: UInt64?, _ message: String) {
            report.findings.append(VerifyReport.Finding(severity: severity, partition: p, file: file, offset: offset, message: message))
        }
        if catalogInPartitionZero {
            finding(.warning, path, nil, "a format-1 store: the catalog is still in partition 0; the next read-write open moves it to \(dir)")
            return
        }
        var part = CatalogVerification()
        guard fileSystem.fileExists(dir) else {
            finding(.error, dir, nil, "the catalog directory is missing")
            report.catalog = part
            return
        }
        let checkpoint = try openableCheckpoint(in: dir, finding: finding) { f -> CatalogState? in
            let st = try CatalogState.decodeCheckpoint(f.payload, next: f.next)
            guard st.version == f.lsn else {
                finding(.error, f.path, nil, "the checkpoint's file says LSN \(f.lsn), its payload version \(st.version)")
                return nil
            }
            return st
        }.map { (state: $0.value, lsn: $0.lsn, path: $0.path) }
        part.checkpointLSN = checkpoint?.lsn
        var full = CatalogState()
        var tail = checkpoint?.state ?? CatalogState()
        let walker = LogWalker(directory: dir, fileSystem: fileSystem)
        let total = (try? walker.totalBytes()) ?? 0
        let walk = try walker.walk(progress: { progress?(InspectionProgress(phase: "verify catalog", bytesDone: $0, bytesTotal: total)) }) { frame in
            let commit: Commit
            do {
                commit = try Catalog.decode(frame.type, try frame.payload(), lsn: frame.lsn, at: "offset \(frame.position.offset)")
            } catch let e as CloudletError {
                finding(.error, frame.path, frame.position.offset, e.message)
                return
            }
            part.mutations += commit.mutations.count
            full.apply(commit, lsn: frame.lsn, position: frame.position)
            if let checkpoint, frame.lsn > checkpoint.lsn { tail.apply(commit, lsn: frame.lsn, position: frame.position) }
        }
        for f in walk.findings {
            report.findings.append(
                VerifyReport.Finding(severity: f.severity, partition: p, file: f.path, offset: f.offset, message: f.message, damaged: f.damaged))
        }
        if let owner = walk.partition, owner != Catalog.logPartition {
            finding(.error, dir, nil, "the segments belong to partition \(owner), not the catalog (\(Catalog.logPartition))")
        }
        if walk.segments.contains(where: { $0.isCompacted }) {
            finding(.error, dir, nil, "the catalog's log holds compacted segments, which nothing writes")
        }
        part.segments = walk.segments.count
        part.frames = walk.segments.reduce(0) { $0 + $1.frames }
        part.bytes = walk.segments.reduce(0) { $0 + $1.size }
        part.lastLSN = walk.lastLSN
        if let checkpoint {
            if checkpoint.lsn > walk.lastLSN {
                finding(.error, checkpoint.path, nil, "the checkpoint covers catalog version \(checkpoint.lsn) but the log ends at LSN \(walk.lastLSN)")
            } else if deep && walk.isClean && !Self.sameCatalog(tail, full) {
                finding(.error, checkpoint.path, nil, "checkpoint + log tail and a full replay of the catalog's log disagree")
            }
        }
        if walk.isClean {
            for (partition, used) in partitionVersions.sorted(by: { $0.key < $1.key }) where used > walk.lastLSN {
                finding(
                    .error, dir, nil,
                    "partition \(partition) holds commits validated against catalog version \(used), but the catalog's log ends at version \(walk.lastLSN)")
            }
        }
        report.catalog = part
    }

    /// Whether two catalog states hold the same schemas, subscriptions and shares.
    static func sameCatalog(_ a: CatalogState, _ b: CatalogState) -> Bool {
        var wa = ByteWriter()
        var wb = ByteWriter()
        a.schema.encode(into: &wa)
        b.schema.encode(into: &wb)
        a.shares.encode(into: &wa)
        b.shares.encode(into: &wb)
        return wa.bytes == wb.bytes && a.schema.encodeComposites() == b.schema.encodeComposites() && a.subscriptions == b.subscriptions
    }

    /// SHA-256 of the catalog's content (schemas with index flags and composite indexes, subscriptions, shares),
    /// independent of its log. A catalog without composite indexes or shares hashes as before they existed.
    func catalogDigest(_ store: CloudletStore) -> String {
        let snapshot = store.catalog.snapshot()
        var w = ByteWriter()
        snapshot.schema.encode(into: &w)
        if let composites = snapshot.schema.encodeComposites() { w.bytes(composites) }
        for who in snapshot.subscriptions.keys.sorted(by: { $0.sortKey < $1.sortKey }) {
            who.encode(into: &w)
            for sub in snapshot.subscriptions[who]!.values.sorted(by: { $0.id < $1.id }) { Subscription.encode(sub, into: &w) }
        }
        if !snapshot.shares.isEmpty { snapshot.shares.encode(into: &w) }
        let d = SHA256Digest()
        d.field(w.bytes)
        return hex(d.finish())
    }
}

extension IndexMutation {
    /// The container the change is in.
    var container: String {
        switch self {
        case .flags(let key, _, _, _), .composite(let key, _, _, _): key.container
        case .define(let d), .drop(let d): d.schema.container
        }
    }
}
