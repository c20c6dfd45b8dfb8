import CloudletCore

/// The 32-byte header in front of every frame's payload (LogFormat.md, "Frame"), and the checks every reader of
/// frames applies: recovery, ``Log/readFrame(at:)`` and ``LogScanner``.
struct FrameHeader: Equatable {
    static let size = FramePosition.headerSize
    /// Flags bit 0: the payload is stored LZ4-compressed.
    static let lz4Flag: UInt8 = 1
    static let knownFlags: UInt8 = lz4Flag
    /// The largest payload LZ4 accepts (`LZ4_MAX_INPUT_SIZE`); bigger payloads are stored as they are.
    static let maxCompressibleLength = LZ4Block.maxInputLength
    /// The largest payload a frame can hold: its length is a u32 and the whole frame must fit one too.
    static let maxPayloadLength = Int(UInt32.max) - size
    /// The resync scan looks for frames with an LSN at most this far past the last good one.
    static let resyncWindow: UInt64 = 1_000_000

    /// Length of the payload as stored (compressed or not).
    var storedLength: UInt32
    /// CRC-32C of header bytes 8..<32 followed by the stored payload.
    var checksum: UInt32
    var type: UInt8
    var flags: UInt8
    var reserved: UInt16 = 0
    var lsn: UInt64
    var epoch: UInt64
    /// Length of the payload once decompressed (= `storedLength` when not compressed).
    var uncompressedLength: UInt32

    /// The whole frame on disk.
    var frameLength: Int { Self.size + Int(storedLength) }
    var isCompressed: Bool { flags & Self.lz4Flag != 0 }

    init(
        storedLength: UInt32, checksum: UInt32, type: UInt8, flags: UInt8, lsn: UInt64, epoch: UInt64,
        uncompressedLength: UInt32
    ) {
        self.storedLength = storedLength
        self.checksum = checksum
        self.type = type
        self.flags = flags
        self.lsn = lsn
        self.epoch = epoch
        self.uncompressedLength = uncompressedLength
    }

    /// Reads a header; `bytes` holds at least 32 bytes from `offset`.
    init(parsing bytes: [UInt8], at offset: Int) {
        storedLength = bytes.loadLE(UInt32.self, at: offset)
        checksum = bytes.loadLE(UInt32.self, at: offset + 4)
        type = bytes[offset + 8]
        flags = bytes[offset + 9]
        reserved = bytes.loadLE(UInt16.self, at: offset + 10)
        lsn = bytes.loadLE(UInt64.self, at: offset + 12)
        epoch = bytes.loadLE(UInt64.self, at: offset + 20)
        uncompressedLength = bytes.loadLE(UInt32.self, at: offset + 28)
    }

    /// The 32 header bytes, `checksum` as it is.
    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: Self.size)
        w.u32(storedLength)
        w.u32(checksum)
        w.u8(type)
        w.u8(flags)
        w.u16(reserved)
        w.u64(lsn)
        w.u64(epoch)
        w.u32(uncompressedLength)
        return w.bytes
    }

    /// What is wrong with a frame, for an error message, and whether a torn write could have caused it.
    struct Defect: Error {
        var reason: String
        /// True when the frame is intact (its checksum matches) yet wrong, which no torn write produces.
        var definitive = false
    }

    /// Checks what can be checked from the header alone: `bytes` holds `min(32, available)` bytes from `offset`,
    /// and `available` bytes remain in the file from `offset`.
    static func check(_ bytes: [UInt8], at offset: Int, available: Int) -> Result<FrameHeader, Defect> {
        guard available >= size else {
            return .failure(Defect(reason: "truncated frame header (\(available) of \(size) bytes before end of file)"))
        }
        if bytes[offset..<offset + size].allSatisfy({ $0 == 0 }) {
            return .failure(Defect(reason: "all-zero frame header"))
        }
        let header = FrameHeader(parsing: bytes, at: offset)
        guard header.frameLength <= available, header.frameLength <= Int(UInt32.max) else {
            return .failure(
                Defect(reason: "frame of \(header.frameLength) bytes runs past end of file (\(available) bytes left)"))
        }
        return .success(header)
    }

    /// Checks the checksum, then the fields the checksum vouches for; `bytes` holds the whole frame at `offset`.
    func checkBody(_ bytes: [UInt8], at offset: Int) -> Defect? {
        let computed = CRC32C.checksum(bytes[(offset + 8)..<(offset + frameLength)])
        guard computed == checksum else {
            return Defect(reason: "checksum mismatch (stored \(hex(checksum)), computed \(hex(computed)))")
        }
        if let reason = fieldDefect() { return Defect(reason: reason, definitive: true) }
        return nil
    }

    /// Fields no writer of this format produces, or nil.
    func fieldDefect() -> String? {
        if type == 0 { return "frame type 0" }
        if flags & ~Self.knownFlags != 0 { return "unknown frame flags 0x\(String(flags, radix: 16))" }
        if reserved != 0 { return "reserved frame field is \(reserved), not 0" }
        if isCompressed {
            let plausible =
                storedLength > 0 && uncompressedLength > 0 && Int(uncompressedLength) <= Self.maxCompressibleLength
                && UInt64(uncompressedLength) <= UInt64(storedLength) * 255 + 255
            if !plausible { return "compressed frame of \(storedLength) bytes claims \(uncompressedLength) bytes" }
        } else if uncompressedLength != storedLength {
            return "uncompressed frame of \(storedLength) bytes claims \(uncompressedLength) bytes"
        }
        return nil
    }

    /// The payload, decompressed; `bytes` holds the whole (checked) frame at `offset`.
    func payload(_ bytes: [UInt8], at offset: Int) -> Result<[UInt8], Defect> {
        let start = offset + Self.size
        guard isCompressed else { return .success(Array(bytes[start..<(start + Int(storedLength))])) }
        let expected = Int(uncompressedLength)
        switch LZ4Block.decompress(bytes[start..<(start + Int(storedLength))], expected: expected) {
        case .success(let out): return .success(out)
        case .failure(let failure):
            return .failure(
                Defect(
                    reason:
                        "LZ4 payload does not decompress to \(expected) bytes (LZ4_decompress_safe returned \(failure.returned))",
                    definitive: true))
        }
    }

    /// Whether a frame of this header could follow the frame `lastGood`: used by the resync scan that decides
    /// whether a bad frame in the last segment is a torn tail.
    func isPlausibleSuccessor(of lastGood: UInt64, window: UInt64) -> Bool {
        lsn > lastGood && lsn - lastGood <= window && fieldDefect() == nil
    }
}

/// A payload ready to be framed under the lock of ``Log/stage(type:payload:)``: compressed (or not) and
/// checksummed before the LSN is known.
struct PreparedPayload {
    var type: UInt8
    var flags: UInt8
    var uncompressedLength: UInt32
    /// The bytes as stored: compressed or the payload itself.
    var stored: [UInt8]
    /// CRC-32C of `stored`.
    var storedChecksum: UInt32

    var frameLength: Int { FrameHeader.size + stored.count }
    var isCompressed: Bool { flags & FrameHeader.lz4Flag != 0 }

    /// LZ4-compresses payloads of at least `compressionThreshold` bytes and keeps the result if it saves at least
    /// 1/8 of them.
    init(type: UInt8, payload: [UInt8], compressionThreshold: Int) {
        self.type = type
        uncompressedLength = UInt32(payload.count)
        if payload.count <= FrameHeader.maxCompressibleLength,
            let compressed = LZ4Block.compressIfWorthwhile(payload, threshold: compressionThreshold)
        {
            stored = compressed
            flags = FrameHeader.lz4Flag
        } else {
            stored = payload
            flags = 0
        }
        storedChecksum = CRC32C.checksum(stored)
    }

    /// The frame header for this payload at `lsn`: its checksum folds the header's CRC into the payload's.
    func header(lsn: UInt64, epoch: UInt64) -> [UInt8] {
        var header = FrameHeader(
            storedLength: UInt32(stored.count), checksum: 0, type: type, flags: flags, lsn: lsn, epoch: epoch,
            uncompressedLength: uncompressedLength)
        let unsummed = header.encoded()
        header.checksum = CRC32C.combine(
            CRC32C.checksum(unsummed[8..<FrameHeader.size]), storedChecksum, lengthB: stored.count)
        return header.encoded()
    }
}
