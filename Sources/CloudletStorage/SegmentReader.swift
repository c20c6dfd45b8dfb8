import CloudletCore

/// Reads a segment forward through a window (1 MiB for a file, or what the caller chooses), so that scanning many
/// small frames costs few reads; checks frames the way every reader of the log must (``FrameHeader``). The bytes
/// come from a segment file (recovery, repair, the walker) or from any bounded read of one — a live log's
/// ``Log/readSegment(_:offset:count:includingUnsynced:)``, which serves followers (``Log/frames(from:maxBytes:includingUnsynced:reader:)``).
struct SegmentReader {
    static let window = 1 << 20

    let path: String
    /// The segment's size when the reader was made (or the part of it that may be read).
    let size: UInt64
    /// Bytes read at once, at least.
    let window: Int
    /// The bytes read last; ``load(_:count:)`` says where in it an offset of the segment is.
    private(set) var buffer: [UInt8] = []
    private var bufferStart: UInt64 = 0
    private let read: (_ offset: UInt64, _ count: Int) throws -> [UInt8]
    private let prefetch: ((_ offset: UInt64, _ count: Int) -> Void)?

    /// A reader of the segment file `file` (its size now), through the 1 MiB window with read-ahead (a header is
    /// read exactly: ``load(_:count:exact:)``).
    init(file: any File, path: String) throws {
        let size: UInt64
        do { size = try file.size() } catch { throw CloudletError.io(error, "reading the size of segment \(path)") }
        self.init(path: path, size: size, window: Self.window, prefetch: { file.prefetch(at: $0, count: $1) }) { offset, count in
            do throws(FileSystemError) { return try file.read(at: offset, count: count) } catch {
                throw CloudletError.io(error, "reading segment \(path) at offset \(offset)")
            }
        }
    }

    /// A reader of `size` bytes of a segment that `read` gives (its errors passed on as they are).
    init(
        path: String, size: UInt64, window: Int, prefetch: ((UInt64, Int) -> Void)? = nil,
        read: @escaping (_ offset: UInt64, _ count: Int) throws -> [UInt8]
    ) {
        self.path = path
        self.size = size
        self.window = max(window, 1)
        self.prefetch = prefetch
        self.read = read
    }

    /// Makes the segment's bytes `offset ..< offset + count` (cut at its end) available in ``buffer`` and returns
    /// the index of `offset` in it. `exact`: read just those bytes, no window and no read-ahead (a segment's header,
    /// when the scan that follows may start far from it: an open after a clean close enters the last segment at its
    /// end, and read 1 MiB of its start and advised 4 MiB more for 48 bytes).
    mutating func load(_ offset: UInt64, count: Int, exact: Bool = false) throws -> Int {
        precondition(offset <= size, "read past the end of a segment")
        let count = Int(min(UInt64(count), size - offset))
        if offset >= bufferStart && offset + UInt64(count) <= bufferStart + UInt64(buffer.count) {
            return Int(offset - bufferStart)
        }
        let want = exact ? count : Int(min(UInt64(max(count, window)), size - offset))
        buffer = try read(offset, want)
        // Scans go forward: let the disk fetch the next windows while this one is checked.
        if !exact, let prefetch, offset + UInt64(want) < size { prefetch(offset + UInt64(want), 4 * window) }
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
