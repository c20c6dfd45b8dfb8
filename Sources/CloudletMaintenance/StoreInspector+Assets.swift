import Cloudlet
import CloudletCore
import CloudletStorage
import Foundation

/// The asset files of a store against the records that reference them (`cloudlet-tool verify`, `stats`, `info`,
/// `gc --dry-run`).
package struct AssetReport: Sendable {
    /// One field value naming a file the store does not have (or, with `deep`, whose bytes do not hash to it).
    package struct Problem: Sendable, Hashable {
        package var zone: ZoneKey
        package var recordName: String
        package var field: String
        package var checksum: String
    }

    /// Files in `assets/sha256/`, and their bytes.
    package var files = 0
    package var bytes: Int64 = 0
    /// Distinct files live records reference, and the (record, field, asset) references to them.
    package var referenced = 0
    package var references = 0
    /// Files no live record references (the garbage collection deletes them once older than the grace window).
    package var unreferenced = 0
    package var unreferencedBytes: Int64 = 0
    package var missing: [Problem] = []
    /// With `deep`: referenced files whose bytes do not hash to their name.
    package var corrupt: [Problem] = []
    package var deep = false

    package var isClean: Bool { missing.isEmpty && corrupt.isEmpty }
}

extension StoreInspector {
    /// The asset files of the store at ``path`` alone (no records read): count and bytes.
    package func assetFiles() throws -> AssetStatistics {
        let blobs = try BlobStore(directory: path + "/assets", fileSystem: fileSystem, readOnly: true)
        var s = AssetStatistics()
        for e in try blobs.list() {
            s.files += 1
            s.bytes += e.size
        }
        return s
    }

    /// Every asset of every live record checked against the files: each must exist and, with `deep`, hash to its
    /// name (a full read of each referenced file once).
    package func assets(store: CloudletStore, deep: Bool) throws -> AssetReport {
        var report = AssetReport()
        report.deep = deep
        var checked: [String: Bool] = [:]  // checksum → whole (exists and, deep, hashes right)
        var referenced: Set<String> = []
        try store.forEachAsset { zone, name, field, asset in
            report.references += 1
            referenced.insert(asset.fileChecksum)
            let problem = AssetReport.Problem(zone: zone, recordName: name, field: field, checksum: asset.fileChecksum)
            if let whole = checked[asset.fileChecksum] {
                if whole {
                } else if store.assets.exists(asset.fileChecksum) {
                    report.corrupt.append(problem)
                } else {
                    report.missing.append(problem)
                }
                return
            }
            guard store.assets.exists(asset.fileChecksum) else {
                checked[asset.fileChecksum] = false
                report.missing.append(problem)
                return
            }
            let whole = try !deep || store.assets.verify(asset.fileChecksum)
            checked[asset.fileChecksum] = whole
            if !whole { report.corrupt.append(problem) }
        }
        report.referenced = referenced.count
        for e in try store.assets.list() {
            report.files += 1
            report.bytes += e.size
            if !referenced.contains(e.checksum) {
                report.unreferenced += 1
                report.unreferencedBytes += e.size
            }
        }
        return report
    }
}
