import CloudletCore

/// An LSM tree's files as of one version, held open for another node to copy (docs/replication.md, "Seeding a node
/// from files"): every live run (immutable once written), and a fresh manifest holding that version as one snapshot
/// record with the `CURRENT` that names it — what ``Manifest/writeFresh(_:_:_:)`` would write, made here so that the
/// copy needs no manifest of the source's, whose later edits it must not see.
public final class IndexSnapshot: Sendable {
    /// The live runs of the version, whole.
    public let runs: [HeldFile]
    /// `(name, bytes)` of the fresh manifest and of `CURRENT`.
    public let manifest: (name: String, bytes: [UInt8])
    public let current: [UInt8]
    /// The caller's log position recorded with the version (``LSMTree/logPosition``).
    public let logPosition: [UInt8]

    init(runs: [HeldFile], manifest: (name: String, bytes: [UInt8]), current: [UInt8], logPosition: [UInt8]) {
        self.runs = runs
        self.manifest = manifest
        self.current = current
        self.logPosition = logPosition
    }

    public func close() {
        for r in runs { r.close() }
    }
}

extension Manifest {
    /// The current version's files (``IndexSnapshot``), taken under the manifest's lock: a run the version lists is
    /// deleted only after an edit that removes it, which cannot come in between. Throws `.io`.
    func snapshotForSeeding() throws -> IndexSnapshot {
        let (version, runs) = try withVersionLocked { version throws(FileSystemError) -> [HeldFile] in
            try HeldFile.openAll(
                version.runs.map { (Path.join(directory, SortedRunFile.name($0.fileNumber)), nil) }, fileSystem: fileSystem)
        }
        var fresh = version
        let number = fresh.nextFileNumber
        fresh.nextFileNumber += 1
        let name = Self.manifestName(number)
        return IndexSnapshot(
            runs: runs, manifest: (name, Self.header() + Self.record(fresh.snapshot)), current: Array((name + "\n").utf8),
            logPosition: version.logPosition)
    }
}

extension LSMTree {
    /// The tree's files as of its current version (``Manifest/snapshotForSeeding()``).
    public func snapshotForSeeding() throws -> IndexSnapshot { try manifest.snapshotForSeeding() }
}
