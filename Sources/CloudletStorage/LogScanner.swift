import CloudletCore

/// Iterates the frames of a log directory for offline tools (`cloudlet-tool inspect/verify/dump`): checks every
/// segment header, frame checksum, LSN, the contiguity of the segments and every LZ4 payload, and never writes.
///
/// A torn tail at the end of the last segment ends the scan, as it ends the log, and is reported in the returned
/// ``LogRecoveryReport`` (the next read-write open would truncate it); anything else wrong throws `.corruption`
/// naming the segment file and offset, exactly as ``Log/open(directory:partition:configuration:fileSystem:afterLSN:startHint:replay:)``.
public struct LogScanner: Sendable {
    /// The log directory.
    public let directory: String
    let fileSystem: any FileSystem

    /// Fails if `directory` cannot be listed.
    public init(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
        do throws(FileSystemError) { _ = try fileSystem.listDirectory(self.directory) } catch {
            throw CloudletError.io(error, "opening log directory \(self.directory)")
        }
    }

    /// Calls `body` for every frame in LSN order, payloads decompressed. Returns what the scan found.
    @discardableResult
    public func forEachFrame(_ body: (Frame) throws -> Void) throws -> LogRecoveryReport {
        let recovery = LogRecovery(directory: directory, fileSystem: fileSystem, partition: nil, mode: .inspect, epoch: 0)
        return try recovery.run(afterLSN: 0, startHint: nil, replay: body).report
    }
}
