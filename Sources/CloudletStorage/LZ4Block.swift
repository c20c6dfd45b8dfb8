import CLZ4

/// LZ4 *block* compression (no frame format), as the log's frames, the record blocks of commit payloads and the
/// sorted runs' blocks store it: one `LZ4_compress_default` / `LZ4_decompress_safe` pair for the whole engine.
public enum LZ4Block {
    /// The largest input LZ4 accepts (`LZ4_MAX_INPUT_SIZE`).
    public static let maxInputLength = 0x7E00_0000

    /// `bytes` compressed, or nil if LZ4 fails or the input is too long.
    public static func compress(_ bytes: some ContiguousByteCollection & Collection<UInt8>) -> [UInt8]? {
        guard bytes.count <= maxInputLength else { return nil }
        let bound = Int(LZ4_compressBound(Int32(bytes.count)))
        guard bound > 0 else { return nil }
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            count = bytes.withUnsafeBytes { src in
                Int(
                    LZ4_compress_default(
                        src.baseAddress!.assumingMemoryBound(to: CChar.self),
                        UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                        Int32(bytes.count), Int32(bound)))
            }
        }
        return out.isEmpty ? nil : out
    }

    /// `bytes` compressed if they are at least `threshold` long and compression saves at least 1/8 of them (counting
    /// `overhead` more bytes the compressed form needs, such as its stated length); nil when they are to be stored
    /// as they are.
    public static func compressIfWorthwhile(_ bytes: [UInt8], threshold: Int, overhead: Int = 0) -> [UInt8]? {
        guard bytes.count >= max(1, threshold), let packed = compress(bytes),
            (bytes.count - (packed.count + overhead)) * 8 >= bytes.count
        else { return nil }
        return packed
    }

    /// Decompresses `compressed`, which must produce exactly `expected` bytes. Returns the bytes, or what
    /// `LZ4_decompress_safe` returned when it produced anything else (negative: malformed input). LZ4 checks its
    /// bounds: bad input never reads or writes outside the buffers.
    public static func decompress(
        _ compressed: some ContiguousByteCollection & Collection<UInt8>, expected: Int
    ) -> Result<[UInt8], LZ4Failure> {
        var produced: Int32 = 0
        let out = [UInt8](unsafeUninitializedCapacity: max(expected, 1)) { buffer, count in
            produced = compressed.withUnsafeBytes { src in
                guard let base = src.baseAddress else { return -1 }
                return LZ4_decompress_safe(
                    base.assumingMemoryBound(to: CChar.self),
                    UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                    Int32(src.count), Int32(expected))
            }
            count = Int(max(0, min(produced, Int32(expected))))
        }
        guard produced == Int32(expected) else { return .failure(LZ4Failure(returned: produced)) }
        return .success(out)
    }

    /// A decompression that did not produce the expected length: what `LZ4_decompress_safe` returned.
    public struct LZ4Failure: Error, Sendable {
        public var returned: Int32
    }
}
