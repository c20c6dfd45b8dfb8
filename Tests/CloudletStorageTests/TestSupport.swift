import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

/// Checks `condition` every millisecond until it holds, for at most 20 s (background work's progress: a merge, the
/// committer); the caller's `#require` says what it waited for.
func pollUntil(_ condition: () throws -> Bool) rethrows {
    for _ in 0..<20_000 {
        if try condition() { return }
        usleep(1000)
    }
}

/// `count` random (incompressible) bytes.
func randomBytes(_ count: Int, _ rng: inout SeededRandom) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// About `count` bytes of JSON-like text that LZ4 compresses well.
func compressibleBytes(_ count: Int, tag: Int) -> [UInt8] {
    var text = ""
    var i = 0
    while text.utf8.count < count {
        text += "{\"recordName\":\"rec-\(tag)-\(i)\",\"recordType\":\"Note\",\"fields\":{\"title\":\"hello\"}},"
        i += 1
    }
    return Array(text.utf8.prefix(count))
}

/// A configuration for tests: small segments when asked, fsync durability unless told otherwise.
func config(segmentSize: Int = 64 << 20, durability: Durability = .fsync, readOnly: Bool = false) -> LogConfiguration {
    var c = LogConfiguration()
    c.segmentSize = segmentSize
    c.durability = durability
    c.readOnly = readOnly
    return c
}

/// Opens the log, collecting every replayed frame.
func openCollecting(
    _ directory: String, partition: UInt32 = 7, _ configuration: LogConfiguration,
    fileSystem: any FileSystem = PosixFileSystem(), afterLSN: UInt64 = 0, startHint: FramePosition? = nil
) throws -> (Log, [Frame]) {
    var frames: [Frame] = []
    let log = try Log.open(
        directory: directory, partition: partition, configuration: configuration, fileSystem: fileSystem,
        afterLSN: afterLSN, startHint: startHint
    ) { frames.append($0) }
    return (log, frames)
}

/// What a test staged: LSN, position, type and payload of each frame.
struct Staged {
    var lsn: UInt64
    var position: FramePosition
    var type: UInt8
    var payload: [UInt8]
}

/// Stages every payload (type 1 + index % 3) and waits until all are durable.
@discardableResult
func stageAll(_ log: Log, _ payloads: [[UInt8]]) throws -> [Staged] {
    var staged: [Staged] = []
    for (i, payload) in payloads.enumerated() {
        let type = UInt8(1 + i % 3)
        let (lsn, position) = try log.stage(type: type, payload: payload)
        staged.append(Staged(lsn: lsn, position: position, type: type, payload: payload))
    }
    try log.flush()
    return staged
}

/// Checks that `frames` are exactly `staged` (LSN, type, payload, position), in order.
func expectSame(_ frames: [Frame], _ staged: some Collection<Staged>, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(frames.count == staged.count, sourceLocation: sourceLocation)
    for (frame, s) in zip(frames, staged) {
        #expect(frame.lsn == s.lsn, sourceLocation: sourceLocation)
        #expect(frame.type == s.type, sourceLocation: sourceLocation)
        #expect(frame.payload == s.payload, "payload of LSN \(s.lsn)", sourceLocation: sourceLocation)
        #expect(frame.position == s.position, sourceLocation: sourceLocation)
    }
}

/// Overwrites one byte of a file in place (XOR 0xFF).
func flipByte(_ path: String, at offset: UInt64) throws {
    let file = try PosixFileSystem().open(path, options: [])
    defer { try? file.close() }
    let byte = try file.read(at: offset, count: 1)
    try file.write([byte[0] ^ 0xFF], at: offset)
}

/// The size of a file on disk.
func fileSize(_ path: String) throws -> UInt64 {
    let file = try PosixFileSystem().open(path, options: .readOnly)
    defer { try? file.close() }
    return try file.size()
}

/// The error `body` throws, as a CloudletError (failing the test if it throws nothing or something else).
func cloudletError(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> CloudletError? {
    do {
        try body()
        Issue.record("expected an error", sourceLocation: sourceLocation)
    } catch let error as CloudletError {
        return error
    } catch {
        Issue.record("expected a CloudletError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
