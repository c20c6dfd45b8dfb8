import CloudletCore
import CloudletStorage
import Foundation

/// The store's identity and layout, in `DIR/CLOUDLET` (JSON), written once when the store is created.
public struct StoreMetadata: Sendable, Codable, Equatable {
    /// Version of the directory layout and file formats. A store of a newer format is refused.
    public var format: Int
    /// Random identity of this store; change tokens and replicas carry it.
    public var storeID: String
    /// Partition count, fixed at creation.
    public var partitions: Int
    /// Creation time, milliseconds since 1970.
    public var created: Int64

    /// Format 5: a record's key-directory entry also keeps its creation stamp, so that a replace does not read the
    /// version it replaces; format-4 entries lack it and are read as they are (their replaces read the version).
    /// Format 5 also admits composite indexes (index kind 5, index change 4, the catalog checkpoint's section 3),
    /// which a release of format 4 would take for corruption: it refuses the store by its format instead.
    /// Format 4: each partition keeps its key directory (and the rest of its derived state) in an LSM tree in
    /// `p*/index` instead of checkpoints (docs/index-layer.md); opening reads it and replays only the log after its
    /// last flush. Format 3: commits store each record as a record block (checksummed and compressed on its own, read in place;
    /// docs/record-format.md). Format 2: the catalog (schemas, subscriptions) has its own log in `catalog/`. Format 1
    /// kept it in partition 0's log. An older store is migrated when opened for writing (``CloudletStore``) — from 1,
    /// its catalog moves to its own log; to 3, only the metadata changes, since commits of either payload version are
    /// read; to 4, the partitions write their index; to 5, only the metadata changes — and read as it is when opened
    /// read-only.
    public static let currentFormat = 5
    /// The first format whose partitions keep their key directory in an LSM tree (`p*/index`).
    package static let indexLayerFormat = 4
    /// The format whose catalog lives in partition 0.
    package static let partitionZeroCatalogFormat = 1
    /// The first format whose commits may hold record blocks: a release that knows only format 2 cannot read them,
    /// and refuses the store by its format instead of failing on its first record.
    package static let recordBlockFormat = 3
    public static let fileName = "CLOUDLET"

    package static func partitionDirectoryName(_ p: Int) -> String {
        "p" + String(repeating: "0", count: max(0, 4 - String(p).count)) + String(p)
    }

    /// Reads `DIR/CLOUDLET` from `fileSystem`, or — unless read-only — creates the store's metadata there.
    package static func loadOrCreate(
        directory: String, configuration: StoreConfiguration, fileSystem: any FileSystem = PosixFileSystem()
    ) throws -> StoreMetadata {
        let path = directory + "/" + fileName
        if fileSystem.fileExists(path) {
            let bytes: [UInt8]
            do throws(FileSystemError) { bytes = try fileSystem.readFile(path) } catch {
                throw CloudletError.io(error, "reading store metadata \(path)")
            }
            let m: StoreMetadata
            do { m = try JSONDecoder().decode(StoreMetadata.self, from: Data(bytes)) } catch {
                throw CloudletError.corruption("\(path) is not a valid store metadata file: \(error)")
            }
            guard m.format <= currentFormat else {
                throw CloudletError(
                    .notSupported, "\(path): store format \(m.format) is newer than this build supports (\(currentFormat))")
            }
            guard m.partitions >= 1 else { throw CloudletError.corruption("\(path): partition count \(m.partitions)") }
            return m
        }
        guard !configuration.readOnly else {
            throw CloudletError(.unknownItem, "no Cloudlet store at \(directory) (missing \(fileName))")
        }
        guard (1...1024).contains(configuration.partitions) else {
            throw CloudletError.invalid("partition count \(configuration.partitions) is outside 1...1024")
        }
        let m = StoreMetadata(
            format: currentFormat, storeID: UUID().uuidString.lowercased(), partitions: configuration.partitions,
            created: Int64(Date().timeIntervalSince1970 * 1000))
        try m.save(directory: directory, fileSystem: fileSystem)
        return m
    }

    /// Replaces `DIR/CLOUDLET` with this metadata, crash-safely (write-temp, fsync, rename, fsync the directory).
    func save(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let bytes: Data
        do { bytes = try encoder.encode(self) } catch {
            throw CloudletError(.internalError, "cannot encode the store metadata: \(error)")
        }
        let path = directory + "/" + Self.fileName
        do throws(FileReplacementError) { try fileSystem.replaceFile(path, with: Array(bytes)) } catch {
            throw CloudletError.io(error.error, "replacing store metadata \(path)")
        }
    }
}
