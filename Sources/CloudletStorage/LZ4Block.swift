import CLZ4

/// LZ4 *block* compression (no frame format), the one wrapper of liblz4 for frame payloads and record blocks.
public enum LZ4Block {
    /// The largest input ``compress(_:)`` accepts (`LZ4_MAX_INPUT_SIZE`).
    public static let maxInputLength = 0x7E00_0000

    /// `LZ4_compress_default` of `input`, or nil if it fails (or the input is empty or too large).
    public static func compress(_ input: [UInt8]) -> [UInt8]? {
        input.withUnsafeBytes { compress($0) }
    }

    /// `LZ4_compress_default` of the bytes at `src`, or nil if it fails (or they are empty or too many).
    public static func compress(_ src: UnsafeRawBufferPointer) -> [UInt8]? {
        do {
            guard src.count > 0, src.count <= maxInputLength else { return nil }
            let bound = Int(LZ4_compressBound(Int32(src.count)))
            guard bound > 0 else { return nil }
            let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                count = Int(
                    LZ4_compress_default(
                        src.baseAddress!.assumingMemoryBound(to: CChar.self),
                        UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                        Int32(src.count), Int32(bound)))
            }
            return out.isEmpty ? nil : out
        }
    }

    /// Compresses `input` if it is at least `threshold` bytes long and compression saves at least 1/8 of them;
    /// nil when it is to be stored as it is.
    public static func compressIfWorthwhile(_ input: [UInt8], threshold: Int) -> [UInt8]? {
        guard input.count >= max(1, threshold), let c = compress(input), (input.count - c.count) * 8 >= input.count
        else { return nil }
        return c
    }

    /// `LZ4_decompress_safe` of `source` into exactly `length` bytes; nil when the input is not an LZ4 block of
    /// that length (LZ4 checks its bounds: bad input never reads or writes outside the buffers).
    public static func decompress(_ source: UnsafeRawBufferPointer, length: Int) -> [UInt8]? {
        guard length > 0, length <= maxInputLength, source.count > 0, source.count <= maxInputLength else { return nil }
        var produced: Int32 = 0
        let out = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            produced = LZ4_decompress_safe(
                source.baseAddress!.assumingMemoryBound(to: CChar.self),
                UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                Int32(source.count), Int32(length))
            count = Int(max(0, produced))
        }
        return produced == Int32(length) ? out : nil
    }
}
