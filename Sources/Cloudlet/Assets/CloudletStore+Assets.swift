import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Foundation

/// Asset files of a store, as the embedded API sees them: reading an asset's bytes, counting them, and collecting
/// the ones no record references any more (the rules: ``BlobStore``, `docs/assets.md`).
extension CloudletStore {
    /// The path of the asset's file in the store, for reading it in place (never write to it: the file is shared
    /// by every record with the same bytes). - Throws: `unknownItem` when the store has no such file.
    public func assetFile(_ asset: AssetReference) throws -> String {
        guard assets.exists(asset.fileChecksum) else {
            throw CloudletError(.unknownItem, "asset \(asset.fileChecksum.isEmpty ? "(not saved yet)" : asset.fileChecksum) is not in the store")
        }
        return assets.path(of: asset.fileChecksum)
    }

    /// The asset's bytes, read whole (for large files, read ``assetFile(_:)`` in pieces instead).
    public func assetData(_ asset: AssetReference) async throws -> [UInt8] {
        try checkOpen()
        let blobs = assets
        return try await ThreadBridge.offload { try blobs.read(asset.fileChecksum) }
    }

    /// How many asset files the store holds and their bytes (each distinct content counted once).
    public func assetStatistics() async throws -> AssetStatistics {
        let blobs = assets
        return try await ThreadBridge.offload { try AssetStatistics(blobs.list()) }
    }

    /// Deletes the asset files that no live record version references (in any zone or database, list fields
    /// included) and that were last written or uploaded more than `gracePeriod` seconds ago (nil:
    /// ``StoreConfiguration/assetGracePeriod``). Safe while the store is in use: a file a save in flight references,
    /// or that an acknowledged record references, is never deleted. Reads every record of the types whose schema
    /// has an asset field.
    @discardableResult
    public func collectAssetGarbage(gracePeriod: Double? = nil) async throws -> AssetCollection {
        try checkOpen()
        if configuration.readOnly { throw CloudletError(.readOnly, "store at \(path) is open read-only") }
        let grace = gracePeriod ?? configuration.assetGracePeriod
        return try await ThreadBridge.offload { try self.collectAssetGarbageNow(gracePeriod: grace) }
    }

    /// Blocking form of ``collectAssetGarbage(gracePeriod:)`` (for `cloudlet-tool gc`).
    package func collectAssetGarbageNow(gracePeriod: Double) throws -> AssetCollection {
        let cutoff = Date().timeIntervalSince1970 - gracePeriod
        let report = try assets.collect(referenced: referencedAssets, cutoff: cutoff)
        return AssetCollection(
            files: report.blobs, bytes: report.bytes, referenced: report.referenced, deletedFiles: report.deleted,
            deletedBytes: report.deletedBytes, keptUnreferenced: report.keptRecent)
    }

    /// The checksums of every asset that a live record version references, over every partition. Records of a
    /// type whose schema has no asset field are not read (a record's fields are in its type's schema before it is
    /// committed).
    package func referencedAssets() throws -> Set<String> {
        var out: Set<String> = []
        try forEachAsset { _, _, _, asset in out.insert(asset.fileChecksum) }
        return out
    }

    /// Calls `body` with each asset of each live record (zone, record name, field, asset) of the zones `zones`
    /// accepts (nil: every zone), record types without asset fields skipped.
    package func forEachAsset(
        inZones zones: ((ZoneKey) -> Bool)? = nil, _ body: (ZoneKey, String, String, AssetReference) throws -> Void
    ) throws {
        let snapshot = catalog.snapshot()
        let schema = snapshot.schema
        for p in partitions {
            let view = p.queryView()
            // A replica's catalog may trail its partitions (they follow on separate streams): a record type it knows
            // without the asset field a newer schema version added must not hide that field's files from the
            // collection. Such a partition's records are all read (the version is taken after the view, so it covers
            // every record in it).
            let schemaCovers = p.state.withLock { $0.catalogVersion } <= snapshot.version
            for z in Array(view.keys.zoneKeys) where zones?(z) ?? true {
                var cache: [String: Bool] = [:]
                func mayHoldAssets(_ type: String) -> Bool {
                    if !schemaCovers { return true }
                    if let known = cache[type] { return known }
                    let fields = schema.recordType(SchemaKey(zone: z), type)?.fields
                    let answer = fields.map { $0.values.contains { $0.scalar == .asset } } ?? true
                    cache[type] = answer
                    return answer
                }
                var batch: [(zone: ZoneKey, name: String, entry: RecordEntry)] = []
                func flush() throws {
                    for (item, result) in zip(batch, p.readMany(batch)) {
                        switch result {
                        case .success(let r):
                            for (field, value) in r.fields { for a in value.assets { try body(z, item.name, field, a) } }
                        case .failure(let e) where e.code == .unknownItem: continue  // deleted meanwhile
                        case .failure(let e): throw e
                        }
                    }
                    batch.removeAll(keepingCapacity: true)
                }
                var it = view.records(in: z).makeIterator()
                while let (name, entry) = try it.next() {
                    guard !entry.deleted, mayHoldAssets(entry.recordType) else { continue }
                    batch.append((z, name, entry))
                    if batch.count == 256 { try flush() }
                }
                try flush()
            }
        }
    }

    // MARK: - Saving records with assets

    /// The operations of a save with their assets made ready: new assets (from a file or bytes) copied into the
    /// store and replaced by their checksum and size; every asset pinned (``BlobStore/pin(_:)``) until ``pinned``
    /// is unpinned, after the commit is durable. An operation whose asset is malformed or missing from the store
    /// fails with an error naming the field (`rejected`, by index).
    struct PreparedAssets {
        var operations: [RecordOperation]
        var rejected: [Int: CloudletError] = [:]
        var pinned: [String] = []
    }

    func prepareAssets(_ operations: [RecordOperation]) async throws -> PreparedAssets {
        var prepared = PreparedAssets(operations: operations)
        let withAssets = operations.indices.filter { i in
            operations[i].record?.fields.values.contains { !$0.assets.isEmpty } ?? false
        }
        guard !withAssets.isEmpty else { return prepared }
        if configuration.readOnly { throw CloudletError(.readOnly, "store at \(path) is open read-only") }
        let blobs = assets
        let ops = operations
        // Imports read and write files: off the cooperative pool. Each imported file is pinned as it gets its name.
        let done = await ThreadBridge.offload { () -> [(Int, Result<Record, CloudletError>, [String])] in
            withAssets.map { i in
                var record = ops[i].record!
                var imported: [String] = []
                do {
                    for (field, value) in record.fields where !value.assets.isEmpty {
                        record.fields[field] = try value.mappingAssets { a in
                            do {
                                if a.needsImport {
                                    let stored = try a.sourceFile.map { try blobs.importFile($0, pin: true, syncName: false) }
                                        ?? blobs.importBytes(a.sourceData!, pin: true, syncName: false)
                                    imported.append(stored.checksum)
                                    return AssetReference(fileChecksum: stored.checksum, size: stored.size)
                                }
                                guard BlobStore.isChecksum(a.fileChecksum) else {
                                    throw CloudletError.invalid(
                                        "fileChecksum '\(a.fileChecksum)' is not a SHA-256 checksum (64 lowercase hex digits)")
                                }
                                return a
                            } catch let e as CloudletError where e.code == .invalidArguments {
                                throw CloudletError.invalid("field '\(field)' of record '\(record.recordName)': \(e.message)")
                            }
                        }
                    }
                    return (i, .success(record), imported)
                } catch let e as CloudletError {
                    return (i, .failure(e), imported)
                } catch {
                    return (i, .failure(CloudletError(.io, "importing an asset: \(error)")), imported)
                }
            }
        }
        prepared.pinned = done.flatMap(\.2)
        // A bad asset fails its operation; anything else (a failed write) fails the call, unpinning what it pinned.
        for case (_, .failure(let e), _) in done where e.code != .invalidArguments {
            blobs.unpin(prepared.pinned)
            throw e
        }
        for (i, result, imported) in done {
            let record: Record
            switch result {
            case .failure(let e):
                prepared.rejected[i] = e
                continue
            case .success(let r): record = r
            }
            prepared.operations[i] = prepared.operations[i].replacingRecord(record)
            // Imported files are pinned already; pin the others, and check that they are there.
            var fresh = imported
            let others = record.fields.values.flatMap { $0.assets.map(\.fileChecksum) }.filter { c in
                if let k = fresh.firstIndex(of: c) {
                    fresh.remove(at: k)
                    return false
                }
                return true
            }
            prepared.pinned += others
            let missing = Set(blobs.pin(others))
            if !missing.isEmpty {
                let field = record.fields.keys.sorted().first { record.fields[$0]!.assets.contains { missing.contains($0.fileChecksum) } }!
                let checksum = record.fields[field]!.assets.first { missing.contains($0.fileChecksum) }!.fileChecksum
                prepared.rejected[i] = CloudletError.invalid(
                    "field '\(field)' of record '\(record.recordName)': asset \(checksum) is not in the store (upload it first)")
            }
        }
        // The names of new files (imported here, or uploaded and not yet saved) are made durable before anything
        // that references them commits.
        let pinned = prepared.pinned
        do { try await ThreadBridge.offload { try blobs.makeDurable(pinned) } } catch {
            blobs.unpin(pinned)
            throw error
        }
        return prepared
    }
}

/// The asset files of a store: how many, and their bytes.
public struct AssetStatistics: Sendable, Hashable {
    public var files = 0
    public var bytes: Int64 = 0

    public init() {}

    init(_ entries: [BlobStore.Entry]) {
        files = entries.count
        bytes = entries.reduce(0) { $0 + $1.size }
    }
}

/// What an asset garbage collection found and did.
public struct AssetCollection: Sendable, Hashable {
    /// Asset files before it ran, and their bytes.
    public var files = 0
    public var bytes: Int64 = 0
    /// Distinct assets live records reference.
    public var referenced = 0
    /// Files deleted, and their bytes.
    public var deletedFiles = 0
    public var deletedBytes: Int64 = 0
    /// Files no record references that were kept: uploaded or written within the grace window, or in use by a save.
    public var keptUnreferenced = 0
}

/// One asset of a record being saved, as an ``AssetRule`` sees it.
public struct AssetUse: Sendable {
    public var recordType: String
    public var recordID: RecordID
    public var field: String
    public var asset: AssetReference
    /// The field's value in the version the save replaces, if any (an asset kept from it needs no new receipt).
    public var previous: FieldValue?
}

/// Checks an asset of a record being saved; throws to fail the record's operation (the server checks upload
/// receipts with one: Database.modify(_:atomic:assetRule:)).
public typealias AssetRule = @Sendable (AssetUse) throws -> Void

extension Database {
    /// An asset's bytes, whole, for anyone who may read this database (``CloudletStore/assetData(_:)``).
    public func assetData(_ asset: AssetReference) async throws -> [UInt8] {
        try authorize(.read)
        return try await store.assetData(asset)
    }

    /// Copies an asset's file to `path` (through a temporary file beside it, renamed into place), for anyone who
    /// may read this database.
    public func downloadAsset(_ asset: AssetReference, to path: String) async throws {
        try authorize(.read)
        let source = try store.assetFile(asset)
        try await ThreadBridge.offload {
            let temporary = path + ".cloudlet-download"
            let files = FileManager.default
            try? files.removeItem(atPath: temporary)
            do {
                try files.copyItem(atPath: source, toPath: temporary)
                guard rename(temporary, path) == 0 else { throw CloudletError(.io, "rename to \(path): errno \(errno)") }
            } catch {
                try? files.removeItem(atPath: temporary)
                throw CloudletError(.io, "cannot write asset \(asset.fileChecksum) to \(path): \(error)")
            }
        }
    }
}
