import CloudletCore

/// A frame as it is stored, checked (checksum, fields, LSN) but not yet decompressed: what ``LogWalker`` and
/// ``SegmentFrameReader`` hand out, so that compaction can copy a frame byte for byte and tools can decode only
/// what they need.
public struct StoredFrame: Sendable {
    /// The frame's log sequence number.
    public let lsn: UInt64
    /// The leader epoch that wrote it.
    public let epoch: UInt64
    /// The frame type (never 0).
    public let type: UInt8
    /// The stored flags (bit 0: LZ4).
    public let flags: UInt8
    /// Where it is on disk.
    public let position: FramePosition
    /// The payload's length once decompressed.
    public let uncompressedLength: Int
    /// The segment file it was read from (for error messages).
    public let path: String
    /// The read window holding the frame, and where the frame starts in it.
    let buffer: [UInt8]
    let start: Int

    init(header: FrameHeader, buffer: [UInt8], start: Int, position: FramePosition, path: String) {
        lsn = header.lsn
        epoch = header.epoch
        type = header.type
        flags = header.flags
        uncompressedLength = Int(header.uncompressedLength)
        self.position = position
        self.buffer = buffer
        self.start = start
        self.path = path
    }

    /// Whether the payload is stored LZ4-compressed.
    public var isCompressed: Bool { flags & FrameHeader.lz4Flag != 0 }
    /// The payload's length as stored.
    public var storedLength: Int { Int(position.length) - FrameHeader.size }
    /// The whole frame as on disk: the 32-byte header, then the stored payload.
    public var bytes: ArraySlice<UInt8> { buffer[start..<(start + Int(position.length))] }

    /// The payload, decompressed. Throws `.corruption` naming the segment file and offset if LZ4 fails.
    public func payload() throws -> [UInt8] {
        switch FrameHeader(parsing: buffer, at: start).payload(buffer, at: start) {
        case .success(let payload): return payload
        case .failure(let defect): throw CloudletError.corruption(segment: path, offset: position.offset, defect.reason)
        }
    }

    /// The decoded frame (payload decompressed).
    public func frame() throws -> Frame {
        Frame(lsn: lsn, epoch: epoch, type: type, flags: flags, payload: try payload(), position: position)
    }
}

/// Reads the frames of one segment file in order, checking each the way recovery does; throws `.corruption` naming
/// the file and offset at the first bad one. For immutable segments (sealed or compacted), e.g. compaction's input.
public struct SegmentFrameReader {
    /// The segment.
    public let segment: SegmentInfo
    private var reader: SegmentReader
    private var offset = UInt64(SegmentHeader.size)
    private var previous: UInt64
    private let file: any File

    public init(_ segment: SegmentInfo, fileSystem: any FileSystem = PosixFileSystem()) throws {
        self.segment = segment
        do { file = try fileSystem.open(segment.path, options: .readOnly) } catch {
            throw CloudletError.io(error, "opening segment \(segment.path)")
        }
        reader = try SegmentReader(file: file, path: segment.path)
        previous = segment.firstLSN - 1
    }

    /// Bytes of the segment read so far (header included).
    public var bytesRead: UInt64 { offset }

    /// The next frame, or nil at the end of the segment (its size when it was opened, or ``SegmentInfo/size``
    /// whichever is smaller: bytes past the durable size are not read).
    public mutating func next() throws -> StoredFrame? {
        let end = min(reader.size, segment.size)
        guard offset < end else {
            try? file.close()
            return nil
        }
        let range = segment.isCompacted ? (previous + 1)...max(previous + 1, segment.lastLSN) : (previous + 1)...(previous + 1)
        switch try reader.frame(at: offset, expecting: range) {
        case .failure(let defect):
            throw CloudletError.corruption(segment: segment.path, offset: offset, defect.reason)
        case .success(let (header, index)):
            let position = FramePosition(segment: segment.firstLSN, offset: offset, length: UInt32(header.frameLength))
            offset += UInt64(header.frameLength)
            previous = header.lsn
            return StoredFrame(header: header, buffer: reader.buffer, start: index, position: position, path: segment.path)
        }
    }
}
