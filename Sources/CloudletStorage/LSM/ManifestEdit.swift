import CloudletCore

/// What the manifest knows of one live run.
public struct LSMRunMetadata: Sendable, Hashable {
    public var fileNumber: UInt64
    /// 0 for runs flushed from a memtable (their key ranges may overlap); 1… for merged levels.
    public var level: Int
    public var smallestKey: [UInt8]
    public var largestKey: [UInt8]
    public var entryCount: UInt64
    /// The run file's size in bytes.
    public var fileSize: UInt64
    /// The highest sequence of its entries.
    public var maxSequence: UInt64

    public init(
        fileNumber: UInt64, level: Int, smallestKey: [UInt8], largestKey: [UInt8], entryCount: UInt64,
        fileSize: UInt64, maxSequence: UInt64
    ) {
        self.fileNumber = fileNumber
        self.level = level
        self.smallestKey = smallestKey
        self.largestKey = largestKey
        self.entryCount = entryCount
        self.fileSize = fileSize
        self.maxSequence = maxSequence
    }

    /// The metadata of a run just written with these properties.
    public init(properties p: SortedRunProperties, level: Int, fileSize: UInt64) {
        self.init(
            fileNumber: p.fileNumber, level: level, smallestKey: p.smallestKey, largestKey: p.largestKey,
            entryCount: p.entryCount, fileSize: fileSize, maxSequence: p.maxSequence)
    }
}

/// One change to the set of live runs (LevelDB's VersionEdit): runs added and removed, and optionally a new log
/// position, next file number and last sequence. One record of the manifest (SortedRunFormat.md, "Version edit").
public struct ManifestEdit: Sendable, Hashable {
    /// The caller's opaque "where to replay the write-ahead log from", saved with the runs it is true for.
    public var logPosition: [UInt8]?
    /// Set by ``Manifest/apply(_:)`` to its counter; callers leave it nil.
    public var nextFileNumber: UInt64?
    /// The highest sequence the edit's runs (or the flushed memtable) hold.
    public var lastSequence: UInt64?
    public var addedRuns: [LSMRunMetadata] = []
    /// File numbers of runs that are no longer live.
    public var removedRuns: [UInt64] = []

    public init(
        logPosition: [UInt8]? = nil, lastSequence: UInt64? = nil, addedRuns: [LSMRunMetadata] = [],
        removedRuns: [UInt64] = []
    ) {
        self.logPosition = logPosition
        self.lastSequence = lastSequence
        self.addedRuns = addedRuns
        self.removedRuns = removedRuns
    }

    enum Tag: UInt64 {
        case logPosition = 1
        case nextFileNumber = 2
        case lastSequence = 3
        case addRun = 4
        case removeRun = 5
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        if let logPosition {
            w.varint(Tag.logPosition.rawValue)
            w.bytes(logPosition)
        }
        if let nextFileNumber {
            w.varint(Tag.nextFileNumber.rawValue)
            w.varint(nextFileNumber)
        }
        if let lastSequence {
            w.varint(Tag.lastSequence.rawValue)
            w.varint(lastSequence)
        }
        for run in addedRuns {
            w.varint(Tag.addRun.rawValue)
            w.varint(run.fileNumber)
            w.varint(run.level)
            w.varint(run.entryCount)
            w.varint(run.fileSize)
            w.varint(run.maxSequence)
            w.bytes(run.smallestKey)
            w.bytes(run.largestKey)
        }
        for number in removedRuns {
            w.varint(Tag.removeRun.rawValue)
            w.varint(number)
        }
        return w.bytes
    }

    /// Decodes an edit; an unknown tag is `notSupported` (a newer writer), malformed bytes are `corruption`.
    init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, what: "version edit")
        while !r.isAtEnd {
            let raw = try r.varint()
            guard let tag = Tag(rawValue: raw) else {
                throw CloudletError(.notSupported, "version edit has unknown tag \(raw) (written by a newer version?)")
            }
            switch tag {
            case .logPosition: logPosition = try r.bytes()
            case .nextFileNumber: nextFileNumber = try r.varint()
            case .lastSequence: lastSequence = try r.varint()
            case .addRun:
                let number = try r.varint()
                let level = try r.varint()
                guard level < 64 else { throw CloudletError.corruption("version edit: level \(level) out of range") }
                let entries = try r.varint()
                let size = try r.varint()
                let sequence = try r.varint()
                addedRuns.append(
                    LSMRunMetadata(
                        fileNumber: number, level: Int(level), smallestKey: try r.bytes(), largestKey: try r.bytes(),
                        entryCount: entries, fileSize: size, maxSequence: sequence))
            case .removeRun: removedRuns.append(try r.varint())
            }
        }
    }
}

/// The state the manifest describes: the live runs, the log position, the file number and sequence counters.
public struct LSMVersion: Sendable, Hashable {
    /// Level 0 newest first (by max sequence, then file number); other levels by smallest key.
    public private(set) var runs: [LSMRunMetadata] = []
    /// The caller's log position as of the last edit that carried one (empty if none did).
    public internal(set) var logPosition: [UInt8] = []
    /// The next unused file number (runs and manifests share the counter).
    public internal(set) var nextFileNumber: UInt64 = 1
    /// The highest sequence any edit recorded.
    public internal(set) var lastSequence: UInt64 = 0

    public init() {}

    /// The runs of one level, in this version's order.
    public func runs(atLevel level: Int) -> [LSMRunMetadata] { runs.filter { $0.level == level } }

    /// The deepest level holding a run (0 when there are none).
    public var deepestLevel: Int { runs.map(\.level).max() ?? 0 }

    /// This version with `edit` applied; nil and a reason if it does not apply (a removed run that is not live,
    /// an added one that already is).
    func applying(_ edit: ManifestEdit) -> Result<LSMVersion, ApplyError> {
        var next = self
        if let p = edit.logPosition { next.logPosition = p }
        if let n = edit.nextFileNumber { next.nextFileNumber = max(next.nextFileNumber, n) }
        if let s = edit.lastSequence { next.lastSequence = max(next.lastSequence, s) }
        for number in edit.removedRuns {
            guard let i = next.runs.firstIndex(where: { $0.fileNumber == number }) else {
                return .failure(ApplyError(reason: "removes run \(number), which is not live"))
            }
            next.runs.remove(at: i)
        }
        for run in edit.addedRuns {
            guard !next.runs.contains(where: { $0.fileNumber == run.fileNumber }) else {
                return .failure(ApplyError(reason: "adds run \(run.fileNumber) twice"))
            }
            next.runs.append(run)
            next.nextFileNumber = max(next.nextFileNumber, run.fileNumber + 1)
            next.lastSequence = max(next.lastSequence, run.maxSequence)
        }
        next.runs.sort { a, b in
            if a.level != b.level { return a.level < b.level }
            if a.level == 0 { return (a.maxSequence, a.fileNumber) > (b.maxSequence, b.fileNumber) }
            return LSMKey.less(a.smallestKey, b.smallestKey)
        }
        return .success(next)
    }

    struct ApplyError: Error {
        var reason: String
    }

    /// An edit that recreates this version from nothing: the first record of a fresh manifest.
    var snapshot: ManifestEdit {
        var edit = ManifestEdit(logPosition: logPosition, lastSequence: lastSequence, addedRuns: runs)
        edit.nextFileNumber = nextFileNumber
        return edit
    }
}
