import CloudletCore
import FuzzSupport

@testable import Cloudlet
@testable import CloudletStorage

/// Log frames as every reader checks them (LogFormat.md, "Frame"; ``FrameHeader``): the input after its first byte
/// is a run of frames, read the way recovery and the scanner read a segment. With bit 0 of the first byte set, each
/// frame's checksum is recomputed before it is checked, so that the fuzzer reaches the field checks, LZ4
/// decompression and the commit payload (``Commit/decode(_:)``) inside.
///
/// Invariants: every defect is a ``FrameHeader/Defect`` and every bad payload a `CloudletError`, never a trap; an
/// intact uncompressed frame is exactly what the writer (``PreparedPayload``) makes of its type, LSN, epoch and
/// payload; a payload that decodes as a commit decodes to the same commit again from its re-encoding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrame(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Fuzz.bytes(data, count)
    guard let mode = input.first else { return 0 }
    var bytes = Array(input.dropFirst())
    var offset = 0
    while offset < bytes.count {
        var header: FrameHeader
        switch FrameHeader.check(bytes, at: offset, available: bytes.count - offset) {
        case .failure: return 0
        case .success(let h): header = h
        }
        if mode & 1 == 1 {
            header.checksum = CRC32C.checksum(bytes[(offset + 8)..<(offset + header.frameLength)])
            bytes.replaceSubrange(offset..<(offset + FrameHeader.size), with: header.encoded())
        }
        if header.checkBody(bytes, at: offset) != nil { return 0 }
        switch header.payload(bytes, at: offset) {
        case .failure: return 0
        case .success(let payload):
            Fuzz.require(payload.count == Int(header.uncompressedLength), "payload of \(payload.count) bytes, header says \(header.uncompressedLength)")
            if !header.isCompressed {
                let prepared = PreparedPayload(type: header.type, payload: payload, compressionThreshold: Int.max)
                let rewritten = prepared.header(lsn: header.lsn, epoch: header.epoch) + prepared.stored
                Fuzz.require(
                    rewritten[...] == bytes[offset..<(offset + header.frameLength)],
                    "an intact frame differs from the writer's frame of the same payload at offset \(offset)")
            }
            decodeCommit(payload)
        }
        offset += header.frameLength
    }
    return 0
}

/// A frame's payload as the partition reads it: a commit (``Commit/decode(_:)``) and its outline.
private func decodeCommit(_ payload: [UInt8]) {
    _ = Fuzz.decoding("CommitOutline.parse") { try CommitOutline.parse(payload) }
    guard let decoded = Fuzz.decoding("Commit.decode", { try Commit.decode(payload) }) else { return }
    Fuzz.require(decoded.sizes.count == decoded.commit.mutations.count, "a size per mutation")
}

/// The program's entry (see `Fuzz.main`).
@_cdecl("fuzz_frame_main")
public func fuzzFrameMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    Fuzz.main(argc, argv, fuzzFrame)
}
