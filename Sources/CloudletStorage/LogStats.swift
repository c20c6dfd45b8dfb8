/// Counters of a ``Log`` since it was opened.
public struct LogStats: Sendable, Hashable {
    /// Frames staged (commits).
    public var commits: Int = 0
    /// Groups written by the committer (one pwrite sequence each).
    public var groups: Int = 0
    /// `fdatasync` calls on segment files (group syncs, seals and new segment headers).
    public var fsyncs: Int = 0
    /// Bytes written to segment files, headers included.
    public var bytesWritten: Int = 0
    /// Frames whose payload was stored LZ4-compressed.
    public var compressedFrames: Int = 0
    /// Compactions that took effect.
    public var compactions: Int = 0

    public init() {}
}
