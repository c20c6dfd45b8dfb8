import CloudletCore

/// Writes the compacted segments of one compaction (LogFormat.md, "Compaction"): frames keep their LSN and epoch,
/// LSNs may skip, files `<first>-g<generation>.seg` roll at the segment size. Nothing written here is part of the
/// log until the marker names the generation (``Log/installCompaction(_:)``, or ``install(removing:backupDirectory:)``
/// offline); until then the files are leftovers that an open removes.
///
/// Used by one thread at a time.
public final class CompactionWriter {
    /// The log directory.
    public let directory: String
    public let partition: UInt32
    /// The generation the new segments belong to.
    public let generation: UInt32
    /// The segments being replaced (a prefix of the log, oldest first).
    public let inputs: [SegmentInfo]
    /// The LSNs the new segments cover: from the first input's first LSN through the last input's last.
    public let firstLSN: UInt64
    public private(set) var coveredThrough: UInt64

    let segmentSize: Int
    let compressionThreshold: Int
    let epoch: UInt64
    let fileSystem: any FileSystem

    private struct Output {
        var firstLSN: UInt64
        var path: String
        var file: any File
        /// Bytes written to the file or waiting in `pending`.
        var size: UInt64
        var frames = 0
    }

    private var outputs: [Output] = []
    private var pending: [UInt8] = []
    private var lastLSN: UInt64
    private var done = false
    /// Bytes of frames appended so far.
    public private(set) var bytesWritten: UInt64 = 0
    /// The new segments, once ``finish()`` returned.
    public private(set) var segments: [SegmentInfo] = []
    /// The epoch history of the covered range so far (the marker's ``CompactionMarker/epochs``): the previous
    /// marker's, then the epoch of every frame noted (``note(lsn:epoch:)``, and every frame appended). Nil once
    /// unknown.
    public private(set) var epochs: [EpochStart]?
    /// The LSNs the previous marker's history already covers.
    private let priorCoveredThrough: UInt64

    static let flushThreshold = 1 << 20

    /// A writer for a new generation replacing `inputs`, which must be a prefix of the log in `directory` starting
    /// at its first segment. `previous` is the marker in force (its epoch history is carried over).
    public init(
        directory: String, partition: UInt32, generation: UInt32, inputs: [SegmentInfo], segmentSize: Int,
        compressionThreshold: Int = LogConfiguration().compressionThreshold, epoch: UInt64 = 1,
        previous: CompactionMarker? = nil, fileSystem: any FileSystem = PosixFileSystem()
    ) {
        precondition(!inputs.isEmpty && generation > 0, "a compaction needs inputs and a generation")
        self.directory = Path.normalize(directory)
        self.partition = partition
        self.generation = generation
        self.inputs = inputs
        firstLSN = inputs[0].firstLSN
        coveredThrough = inputs.last!.lastLSN
        self.segmentSize = segmentSize
        self.compressionThreshold = compressionThreshold
        self.epoch = epoch
        self.fileSystem = fileSystem
        lastLSN = firstLSN - 1
        epochs = previous == nil ? [] : previous!.epochs
        priorCoveredThrough = previous?.coveredThrough ?? 0
    }

    /// Records that frame `lsn` of the inputs has `epoch`, for the marker's epoch history. The compaction calls it
    /// for every frame it reads, dropped ones included (appended frames are noted by the append itself); frames the
    /// previous marker already covers are skipped.
    public func note(lsn: UInt64, epoch: UInt64) {
        guard lsn > priorCoveredThrough, epochs != nil else { return }
        if let last = epochs!.last, last.epoch >= epoch {
            // Epochs never decrease along a log; a lower one means the frames were not all seen in order.
            if last.epoch > epoch || last.firstLSN > lsn { epochs = nil }
            return
        }
        epochs!.append(EpochStart(epoch: epoch, firstLSN: lsn))
    }

    /// Gives up on the epoch history: some frames of the covered range were lost unread (a repair).
    public func forgetEpochs() { epochs = nil }

    deinit { if !done { abandon() } }

    /// Appends a frame with a new payload (compressed as the log would, unless not `compressible`). Returns its
    /// position in the new segments. LSNs must increase and stay within the covered range.
    @discardableResult
    public func append(lsn: UInt64, epoch: UInt64, type: UInt8, payload: [UInt8], compressible: Bool = true) throws
        -> FramePosition
    {
        let prepared = PreparedPayload(
            type: type, payload: payload, compressionThreshold: compressible ? compressionThreshold : .max)
        var bytes = prepared.header(lsn: lsn, epoch: epoch)
        bytes.append(contentsOf: prepared.stored)
        return try append(bytes[...], lsn: lsn, epoch: epoch)
    }

    /// Appends a frame byte for byte (its header holds its LSN, epoch and checksum; none depends on where it is).
    @discardableResult
    public func appendCopy(of frame: StoredFrame) throws -> FramePosition {
        try append(frame.bytes, lsn: frame.lsn, epoch: frame.epoch)
    }

    private func append(_ frame: ArraySlice<UInt8>, lsn: UInt64, epoch: UInt64) throws -> FramePosition {
        precondition(!done, "append after finish or abandon")
        precondition(lsn > lastLSN && lsn <= coveredThrough, "compacted LSN \(lsn) out of order or range")
        note(lsn: lsn, epoch: epoch)
        if outputs.isEmpty || (outputs.last!.frames > 0 && outputs.last!.size + UInt64(frame.count) > UInt64(segmentSize)) {
            try startSegment(firstLSN: outputs.isEmpty ? firstLSN : lsn)
        }
        let i = outputs.count - 1
        let position = FramePosition(segment: outputs[i].firstLSN, offset: outputs[i].size, length: UInt32(frame.count))
        pending.append(contentsOf: frame)
        outputs[i].size += UInt64(frame.count)
        outputs[i].frames += 1
        bytesWritten += UInt64(frame.count)
        lastLSN = lsn
        if pending.count >= Self.flushThreshold { try flush() }
        return position
    }

    private func startSegment(firstLSN: UInt64) throws {
        try flush()
        let name = SegmentHeader.fileName(firstLSN: firstLSN, generation: generation)
        let path = Path.join(directory, name)
        do {
            let file = try fileSystem.open(path, options: [.create, .truncate])
            outputs.append(Output(firstLSN: firstLSN, path: path, file: file, size: UInt64(SegmentHeader.size)))
        } catch {
            throw CloudletError.io(error, "creating compacted segment \(path)")
        }
        // The header is written by finish(), once the range each file covers is known.
        pending = [UInt8](repeating: 0, count: SegmentHeader.size)
    }

    /// Writes what is buffered to the current output file.
    private func flush() throws {
        guard let out = outputs.last, !pending.isEmpty else { return }
        let offset = out.size - UInt64(pending.count)
        do { try out.file.write(pending, at: offset) } catch {
            throw CloudletError.io(error, "writing compacted segment \(out.path) at offset \(offset)")
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Makes the new segments complete and durable: writes each header (the range it covers), fdatasyncs each file
    /// and the directory. A compaction that kept no frame still writes one (empty) segment covering the whole range.
    /// `coveredThrough` (at least the last LSN appended) replaces the inputs' last LSN when the caller learned the
    /// end of the range only while copying.
    public func finish(coveredThrough end: UInt64? = nil) throws {
        precondition(!done, "finish twice")
        if let end {
            precondition(end >= lastLSN && end >= firstLSN, "covered range ends before the frames appended")
            coveredThrough = end
        }
        if outputs.isEmpty { try startSegment(firstLSN: firstLSN) }
        try flush()
        var infos: [SegmentInfo] = []
        for (k, out) in outputs.enumerated() {
            let through = k + 1 < outputs.count ? outputs[k + 1].firstLSN - 1 : coveredThrough
            let header = SegmentHeader(
                partition: partition, firstLSN: out.firstLSN, epoch: epoch, coveredThrough: through,
                generation: generation)
            do {
                try out.file.write(header.encoded(), at: 0)
                try out.file.fdatasync()
                try out.file.close()
            } catch {
                throw CloudletError.io(error, "sealing compacted segment \(out.path)")
            }
            infos.append(
                SegmentInfo(
                    path: out.path, firstLSN: out.firstLSN, lastLSN: through, size: out.size, sealed: true,
                    generation: generation))
        }
        do { try fileSystem.fsyncDirectory(directory) } catch {
            throw CloudletError.io(error, "syncing log directory \(directory)")
        }
        segments = infos
        done = true
    }

    /// Closes and deletes whatever was written (the compaction did not take effect).
    public func abandon() {
        done = true
        for out in outputs {
            try? out.file.close()
            try? fileSystem.remove(out.path)
        }
        outputs = []
        try? fileSystem.fsyncDirectory(directory)
    }

    /// The marker this compaction writes.
    public var marker: CompactionMarker {
        CompactionMarker(generation: generation, coveredThrough: coveredThrough, epochs: epochs)
    }

    /// Offline install (no ``Log`` open on the directory): writes the marker, then removes the replaced segments —
    /// or, with `backupDirectory`, moves them there. Returns the replaced files.
    @discardableResult
    public func install(backupDirectory: String? = nil) throws -> [String] {
        precondition(done && !segments.isEmpty, "install before finish")
        do { try marker.write(directory: directory, fileSystem: fileSystem) } catch {
            throw CloudletError.io(error.error, "writing the compaction marker of \(directory)")
        }
        let layout = try LogLayout.load(directory: directory, fileSystem: fileSystem)
        guard let backupDirectory else {
            try layout.removeLeftovers(fileSystem: fileSystem)
            return layout.leftovers
        }
        do throws(FileSystemError) {
            try fileSystem.createDirectory(backupDirectory)
            for path in layout.leftovers { try fileSystem.rename(path, to: Path.join(backupDirectory, Path.name(path))) }
            try fileSystem.fsyncDirectory(backupDirectory)
            try fileSystem.fsyncDirectory(directory)
        } catch {
            throw CloudletError.io(error, "moving the segments compaction replaced from \(directory) to \(backupDirectory)")
        }
        return layout.leftovers
    }
}
