import Cloudlet
import CloudletCore
import CloudletStorage

/// One frame of a log, as `cloudlet-tool dump --frames` shows it.
package struct DumpedFrame: Sendable {
    package var partition: Int
    package var segment: String
    package var offset: UInt64
    /// The whole frame on disk, header included.
    package var length: UInt32
    package var lsn: UInt64
    package var epoch: UInt64
    package var type: UInt8
    package var compressed: Bool
    /// Payload bytes once decompressed.
    package var payloadBytes: Int
    /// Mutations in the frame (kept ones, for a compacted frame) and how many are current (nil: unknown).
    package var mutations: Int
    package var liveMutations: Int?
    /// Zones the frame touches.
    package var zones: [ZoneKey]
}

/// One mutation of a log, as `cloudlet-tool dump --log` shows it.
package struct DumpedMutation: Sendable {
    package enum Kind: String, Sendable {
        case putRecord = "put", deleteRecord = "delete", createZone = "create-zone", deleteZone = "delete-zone"
        case schemaField = "schema", schemaReset = "schema-reset", purge = "purge"
        case index = "index", saveSubscription = "subscription", deleteSubscription = "subscription-delete"
        case catalogVersion = "catalog-version", security = "security"
    }

    package var partition: Int
    package var segment: String
    package var offset: UInt64
    package var lsn: UInt64
    package var index: UInt32
    package var epoch: UInt64
    package var kind: Kind
    package var zone: ZoneKey?
    package var recordName: String?
    package var recordType: String?
    /// The record of a put.
    package var record: Record?
    /// Deletion time (ms) of a delete.
    package var time: Int64?
    /// What a schema change or purge does.
    package var detail: String?
    /// Whether it is still current (nil: unknown, the store did not open).
    package var live: Bool?
}

extension StoreInspector {
    /// Walks every partition's log (damaged ones too: what is wrong is returned as findings, the walk goes on)
    /// and calls `frames` for each frame and `mutations` for each mutation that match `filter`. With `states` (the
    /// store opened), liveness is reported.
    package func dumpLog(
        filter: InspectionFilter, states: [DerivedState]?, frames: ((DumpedFrame) throws -> Void)?,
        mutations: ((DumpedMutation) throws -> Void)?, progress: ProgressHandler? = nil
    ) throws -> [VerifyReport.Finding] {
        var findings: [VerifyReport.Finding] = []
        for p in 0..<partitionCount {
            let walker = LogWalker(directory: partitionDirectory(p), fileSystem: fileSystem)
            let total = (try? walker.totalBytes()) ?? 0
            let st = states?[p].state
            let report = try walker.walk(progress: { progress?(InspectionProgress(phase: "partition \(p)", bytesDone: $0, bytesTotal: total)) }) { frame in
                guard filter.matches(lsn: frame.lsn) else { return }
                let segment = String(frame.path.split(separator: "/").last!)
                guard frame.type == Commit.frameType, let payload = try? frame.payload(),
                    let (commit, _, _) = try? Commit.decode(payload)
                else {
                    if filter.zone == nil && filter.container == nil, let frames {
                        try frames(
                            DumpedFrame(
                                partition: p, segment: segment, offset: frame.position.offset, length: frame.position.length,
                                lsn: frame.lsn, epoch: frame.epoch, type: frame.type, compressed: frame.isCompressed,
                                payloadBytes: frame.uncompressedLength, mutations: 0, liveMutations: nil, zones: []))
                    }
                    return
                }
                var zones: [ZoneKey] = []
                var live = 0
                var matched = false
                for (k, m) in commit.mutations.enumerated() {
                    let index = commit.index(k)
                    var d = DumpedMutation(
                        partition: p, segment: segment, offset: frame.position.offset, lsn: frame.lsn, index: index,
                        epoch: frame.epoch, kind: .purge)
                    switch m {
                    case .putRecord(let z, var r, _):
                        r.id.zoneID = z.zoneID
                        (d.kind, d.zone, d.recordName, d.recordType, d.record) = (.putRecord, z, r.recordName, r.recordType, r)
                    case .deleteRecord(let z, let name, let type, let time, _):
                        (d.kind, d.zone, d.recordName, d.recordType, d.time) = (.deleteRecord, z, name, type, time)
                    case .createZone(let z): (d.kind, d.zone) = (.createZone, z)
                    case .deleteZone(let z, let time): (d.kind, d.zone, d.time) = (.deleteZone, z, time)
                    case .schemaField(let key, let type, let field, let ft):
                        d.kind = .schemaField
                        d.recordType = type
                        d.detail = "\(key.container)/\(key.environment.rawValue) \(type)\(field.map { ".\($0) \(ft?.description ?? "")" } ?? "")"
                    case .schemaReset(let container): (d.kind, d.detail) = (.schemaReset, "\(container)/development reset to production")
                    case .purge(let through): (d.kind, d.detail) = (.purge, "tombstones through LSN \(through)")
                    case .index(let change): (d.kind, d.detail) = (.index, "\(change)")
                    case .saveSubscription(let who, let sub):
                        (d.kind, d.detail) = (.saveSubscription, "\(who.database.container)/\(who.database.environment.rawValue) \(who.user): \(sub.id)")
                    case .deleteSubscription(let who, let id):
                        (d.kind, d.detail) = (.deleteSubscription, "\(who.database.container)/\(who.database.environment.rawValue) \(who.user): \(id)")
                    case .catalogVersion(let v): (d.kind, d.detail) = (.catalogVersion, "validated against catalog version \(v)")
                    case .security(let change): (d.kind, d.detail) = (.security, change.summary)
                    }
                    if let st {
                        d.live = try st.isLive(m, lsn: frame.lsn, index: index)
                        if d.live == true { live += 1 }
                    }
                    if let z = d.zone, !zones.contains(z) { zones.append(z) }
                    let zoneMatches = d.zone.map(filter.matches) ?? (filter.zone == nil && filter.owner == nil && filter.scope == nil && (filter.container == nil || d.detail?.hasPrefix(filter.container! + "/") == true))
                    let typeMatches = filter.recordType == nil || d.recordType == filter.recordType
                    let kindMatches = d.kind != .deleteRecord && d.kind != .deleteZone || filter.includeTombstones
                    if zoneMatches && typeMatches { matched = true }
                    if zoneMatches && typeMatches && kindMatches { try mutations?(d) }
                }
                if let frames, matched || commit.mutations.isEmpty && filter.zone == nil {
                    try frames(
                        DumpedFrame(
                            partition: p, segment: segment, offset: frame.position.offset, length: frame.position.length,
                            lsn: frame.lsn, epoch: frame.epoch, type: frame.type, compressed: frame.isCompressed,
                            payloadBytes: frame.uncompressedLength, mutations: commit.mutations.count,
                            liveMutations: st == nil ? nil : live, zones: zones))
                }
            }
            findings += report.findings.map {
                VerifyReport.Finding(severity: $0.severity, partition: p, file: $0.path, offset: $0.offset, message: $0.message)
            }
        }
        return findings
    }

    /// The derived state of each partition of an opened store.
    package func states(of store: CloudletStore) -> [DerivedState] {
        store.partitions.map { p in DerivedState(state: p.state.withLock { $0.readView }) }
    }
}

/// A partition's derived state, opaque to tools.
package struct DerivedState: Sendable {
    let state: PartitionReadView
}
