/// Where a frame lives on disk: its segment, its byte offset in the segment file and its length.
public struct FramePosition: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The segment's id, which is the LSN of its first frame (and its file name).
    public var segment: UInt64
    /// Byte offset of the frame's header in the segment file.
    public var offset: UInt64
    /// The whole frame on disk, header (32 bytes) included.
    public var length: UInt32

    public init(segment: UInt64, offset: UInt64, length: UInt32) {
        self.segment = segment
        self.offset = offset
        self.length = length
    }

    /// The size of a frame's header (``FrameHeader``).
    public static let headerSize = 32

    /// Byte offset in the segment file of the frame's payload (as stored).
    public var payloadOffset: UInt64 { offset + UInt64(Self.headerSize) }

    /// The offset just past the frame.
    public var end: UInt64 { offset + UInt64(length) }

    /// The position right after this frame (length 0), as ``Log/open(directory:partition:configuration:fileSystem:afterLSN:startHint:replay:)``
    /// takes it for `startHint`. When the frame was the last of its segment, recovery continues in the next one.
    public var next: FramePosition { FramePosition(segment: segment, offset: end, length: 0) }

    public static func < (a: FramePosition, b: FramePosition) -> Bool {
        (a.segment, a.offset, a.length) < (b.segment, b.offset, b.length)
    }

    public var description: String { "\(segment)@\(offset)+\(length)" }
}
