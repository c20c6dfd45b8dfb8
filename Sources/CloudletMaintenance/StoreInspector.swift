import Cloudlet
import CloudletCore
import CloudletStorage
import Foundation

/// How far a long offline operation is, for a progress bar.
package struct InspectionProgress: Sendable {
    /// What is being done ("verify partition 0").
    package var phase: String
    package var bytesDone: UInt64
    package var bytesTotal: UInt64
}

package typealias ProgressHandler = (InspectionProgress) -> Void

/// Which part of a store an offline command looks at. Nil members match everything.
package struct InspectionFilter: Sendable {
    package var container: String?
    package var environment: Environment?
    package var scope: DatabaseScope?
    package var owner: String?
    package var zone: String?
    package var recordType: String?
    package var lsns: ClosedRange<UInt64>?
    /// Show deletions (tombstones) too.
    package var includeTombstones = false

    package init() {}

    func matches(_ z: ZoneKey) -> Bool {
        (container == nil || container == z.container) && (environment == nil || environment == z.environment)
            && (scope == nil || scope == z.ownerDatabase.scope) && (owner == nil || owner == z.owner)
            && (zone == nil || zone == z.zoneName)
    }

    func matches(type: String) -> Bool { recordType == nil || recordType == type }
    func matches(lsn: UInt64) -> Bool { lsns?.contains(lsn) ?? true }
}

/// One current record version (or, when asked for, tombstone) of a store, as offline commands see it.
package struct CurrentRecord: Sendable {
    package var partition: Int
    package var zone: ZoneKey
    package var recordName: String
    package var recordType: String
    /// The record; nil for a tombstone.
    package var record: Record?
    /// Its encoding as stored (RecordCodec), empty for a tombstone.
    package var encoded: ArraySlice<UInt8>
    package var lsn: UInt64
    package var index: UInt32
    /// Modification (or deletion) time, ms since 1970.
    package var time: Int64
    package var position: FramePosition

    package var isTombstone: Bool { record == nil }
}

/// Offline access to a store directory for `cloudlet-tool`: its layout, indexes (or a format-3 store's checkpoints)
/// and derived state, read-only.
/// The caller keeps writers out (a shared ``StoreLock``).
package final class StoreInspector: Sendable {
    package let path: String
    package let metadata: StoreMetadata
    let fileSystem: any FileSystem

    /// Reads the store's metadata from `fileSystem` (the real disk unless a test says otherwise); opens nothing
    /// else. Throws `.unknownItem` if `path` holds no store.
    package init(path: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        self.path = path
        self.fileSystem = fileSystem
        var config = StoreConfiguration()
        config.readOnly = true
        metadata = try StoreMetadata.loadOrCreate(directory: path, configuration: config, fileSystem: fileSystem)
    }

    package var partitionCount: Int { metadata.partitions }

    package func partitionDirectory(_ p: Int) -> String { path + "/" + StoreMetadata.partitionDirectoryName(p) }

    /// Opens the store read-only: recovers each partition in memory (the state flushed with its index, or a
    /// format-3 store's checkpoint, plus the log after it), writes nothing. Throws what opening throws
    /// (`.corruption` naming the segment and offset).
    package func openStore() throws -> CloudletStore {
        var config = StoreConfiguration()
        config.readOnly = true
        config.compaction = .manual
        return try CloudletStore(path: path, configuration: config, fileSystem: fileSystem)
    }

    /// Calls `body` with every current record version matching `filter` (and tombstone, if it asks), partition by
    /// partition in log order, reading each frame once.
    package func forEachCurrent(
        in store: CloudletStore, filter: InspectionFilter, progress: ProgressHandler? = nil,
        _ body: (CurrentRecord) throws -> Void
    ) throws {
        for p in store.partitions {
            let st = p.state.withLock { $0 }
            let wanted = st.keys.zoneKeys.contains(where: filter.matches)
            guard wanted else { continue }
            let segments = p.log.segments()
            let total = segments.reduce(UInt64(0)) { $0 + $1.size }
            var done: UInt64 = 0
            for segment in segments {
                var reader = try SegmentFrameReader(segment, fileSystem: fileSystem)
                while let frame = try reader.next() {
                    done += UInt64(frame.position.length)
                    if done & 0xFFFFF < UInt64(frame.position.length) {
                        progress?(InspectionProgress(phase: "partition \(p.id)", bytesDone: done, bytesTotal: total))
                    }
                    guard filter.matches(lsn: frame.lsn) else { continue }
                    let payload = try frame.payload()
                    let (commit, slots, _) = try Commit.decode(payload)
                    for (k, m) in commit.mutations.enumerated() {
                        let index = commit.index(k)
                        switch m {
                        case .putRecord(let z, let r, _):
                            guard filter.matches(z), filter.matches(type: r.recordType),
                                try st.isLive(m, lsn: frame.lsn, index: index), let slot = slots[k]
                            else { continue }
                            var record = r
                            record.id.zoneID = z.zoneID
                            try body(
                                CurrentRecord(
                                    partition: Int(p.id), zone: z, recordName: r.recordName, recordType: r.recordType,
                                    record: record, encoded: try Commit.recordBytes(in: payload, at: slot),
                                    lsn: frame.lsn, index: index, time: r.modified?.timestamp ?? 0, position: frame.position))
                        case .deleteRecord(let z, let name, let type, let time, _):
                            guard filter.includeTombstones, filter.matches(z), filter.matches(type: type),
                                try st.isLive(m, lsn: frame.lsn, index: index)
                            else { continue }
                            try body(
                                CurrentRecord(
                                    partition: Int(p.id), zone: z, recordName: name, recordType: type, record: nil,
                                    encoded: [], lsn: frame.lsn, index: index, time: time, position: frame.position))
                        default: continue
                        }
                    }
                }
            }
        }
    }

    /// The zones of the store matching `filter`: custom zones that exist, and default zones holding something.
    package func zones(in store: CloudletStore, filter: InspectionFilter) -> [(partition: Int, zone: ZoneKey, createdLSN: UInt64)] {
        var out: [(Int, ZoneKey, UInt64)] = []
        for p in store.partitions {
            p.state.withLock { st in
                for key in st.keys.zoneKeys where filter.matches(key) {
                    let zone = st.zone(key)!
                    if key.zoneName == ZoneID.defaultZoneName && zone.entryCount == 0 { continue }
                    out.append((Int(p.id), key, zone.createdLSN))
                }
            }
        }
        return out.sorted { $0.1.canonicalName < $1.1.canonicalName }
    }

    /// The schema of every container (both environments) matching `filter.container`.
    package func schema(in store: CloudletStore, container: String?) -> [(container: String, environment: Environment, types: [RecordTypeSchema])] {
        let catalog = store.schemaSnapshot()
        return catalog.types.compactMap { key, types in
            guard container == nil || container == key.container else { return nil }
            return (key.container, key.environment, types.values.sorted { $0.name < $1.name })
        }.sorted { ($0.container, $0.environment.rawValue) < ($1.container, $1.environment.rawValue) }
    }
}

extension ZoneKey {
    /// `container/environment/scope/owner/zone`: a stable, readable name that sorts zones the same everywhere.
    package var canonicalName: String {
        [container, environment.rawValue, ownerDatabase.scope.rawValue, owner, zoneName]
            .joined(separator: "/")
    }
}
