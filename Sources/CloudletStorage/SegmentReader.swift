import CloudletCore

/// Reads a segment file through a window of at least 1 MiB, so that scanning many small frames costs few `pread`s;
/// checks frames the way every reader of the log must (``FrameHeader``).
struct SegmentReader {
    static let window = 1 << 20

    let file: any File
    let path: String
    /// The file's size when the reader was made.
    let size: UInt64
    /// The bytes read last; ``load(_:count:)`` says where in it an offset of the file is.
    private(set) var buffer: [UInt8] = []
    private var bufferStart: UInt64 = 0
    /// Whether reads go through the 1 MiB window and prefetch the next ones (a scan), or read just what is asked
    /// (`headerOnly`: an open that checks the headers of segments it does not replay reads 48 bytes of each, not
    /// 1 MiB plus 4 MiB of read-ahead — at 10 M records, 60 segments).
    private let scanning: Bool

    init(file: any File, path: String, headerOnly: Bool = false) throws {
        self.file = file
        self.path = path
        scanning = !headerOnly
        do { size = try file.size() } catch { throw CloudletError.io(error, "reading the size of segment \(path)") }
    }

    /// Makes the file's bytes `offset ..< offset + count` (cut at end of file) available in ``buffer`` and returns
    /// the index of `offset` in it.
    mutating func load(_ offset: UInt64, count: Int) throws -> Int {
        precondition(offset <= size, "read past the end of a segment")
        let count = Int(min(UInt64(count), size - offset))
        if offset >= bufferStart && offset + UInt64(count) <= bufferStart + UInt64(buffer.count) {
            return Int(offset - bufferStart)
        }
        let want = Int(min(UInt64(scanning ? max(count, Self.window) : count), size - offset))
        do { buffer = try file.read(at: offset, count: want) } catch {
            throw CloudletError.io(error, "reading segment \(path) at offset \(offset)")
        }
        // Scans go forward: let the disk fetch the next windows while this one is checked.
        if scanning && offset + UInt64(want) < size { file.prefetch(at: offset + UInt64(want), count: 4 * Self.window) }
        bufferStart = offset
        guard buffer.count >= count else {
            throw CloudletError(.io, "segment \(path) shrank while being read: \(buffer.count) bytes at offset \(offset)")
        }
        return 0
    }

    /// The header of the frame at `offset` and its index in ``buffer`` (which then holds the whole frame) if the
    /// frame is intact; else what is wrong with it. `lsn`: the LSNs it may have (one for a regular segment, a range
    /// for a compacted one).
    mutating func frame(at offset: UInt64, expecting lsn: ClosedRange<UInt64>) throws -> Result<(FrameHeader, Int), FrameHeader.Defect> {
        let available = Int(clamping: size - offset)
        let i = try load(offset, count: FrameHeader.size)
        let header: FrameHeader
        switch FrameHeader.check(buffer, at: i, available: available) {
        case .failure(let defect): return .failure(defect)
        case .success(let h): header = h
        }
        let j = try load(offset, count: header.frameLength)
        if let defect = header.checkBody(buffer, at: j) { return .failure(defect) }
        guard lsn.contains(header.lsn) else {
            let expected = lsn.lowerBound == lsn.upperBound ? "\(lsn.lowerBound)" : "one of \(lsn.lowerBound)…\(lsn.upperBound)"
            return .failure(FrameHeader.Defect(reason: "frame has LSN \(header.lsn) where \(expected) was expected", definitive: true))
        }
        return .success((header, j))
    }

    /// The first offset at or after `start` holding an intact frame that could follow LSN `lastGood` (LSN within
    /// `FrameHeader.resyncWindow` after it, sane fields, matching checksum): the resync scan that tells a torn tail
    /// (nothing valid after the bad frame) from corruption in the middle of the log.
    mutating func findValidFrame(from start: UInt64, after lastGood: UInt64) throws -> (offset: UInt64, lsn: UInt64)? {
        var offset = start
        while offset + UInt64(FrameHeader.size) <= size {
            let i = try load(offset, count: FrameHeader.size)
            let header = FrameHeader(parsing: buffer, at: i)
            if header.isPlausibleSuccessor(of: lastGood, window: FrameHeader.resyncWindow),
                UInt64(header.frameLength) <= size - offset
            {
                let j = try load(offset, count: header.frameLength)
                if header.checkBody(buffer, at: j) == nil { return (offset, header.lsn) }
            }
            offset += 1
        }
        return nil
    }
}
