import CloudletCore
import CloudletWire

/// What the fuzz targets share: the input, the rule that bad input may only throw the documented error types, and
/// invariant checks that trap (a trap is what libFuzzer reports as a crash and saves as `crash-…`).
public enum Fuzz {
    /// The bytes libFuzzer hands to `LLVMFuzzerTestOneInput`.
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ count: Int) -> [UInt8] {
        guard let data, count > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: count))
    }

    /// Runs `body`, which decodes untrusted input: its result, or nil when it threw one of the errors bad input may
    /// cause (``CloudletError`` in the engine and storage, ``APIError`` on the wire, plus `also`). Any other error
    /// type traps: callers would turn it into an `INTERNAL_ERROR` instead of naming what is wrong with the input.
    public static func decoding<T>(
        _ what: String, also: (any Error) -> Bool = { _ in false }, _ body: () throws -> T
    ) -> T? {
        do { return try body() } catch is CloudletError {
            return nil
        } catch is APIError {
            return nil
        } catch {
            if also(error) { return nil }
            fatalError("\(what) threw an undocumented error type \(type(of: error)): \(error)")
        }
    }

    /// Traps with `message` unless `condition` holds: an invariant of a decoder (a round trip) was broken.
    public static func require(
        _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        if !condition() { fatalError("invariant broken: \(message())", file: file, line: line) }
    }

    /// `bytes` with their CRC-32C appended (little-endian), the way change tokens and continuation markers end:
    /// without it, almost every input would stop at the checksum.
    public static func sealed(_ bytes: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: bytes.count + 4)
        w.raw(bytes)
        w.u32(CRC32C.checksum(bytes))
        return w.bytes
    }
}

/// libFuzzer's entry for programs that have their own `main` (compiler-rt's FuzzerInterface.h).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

extension Fuzz {
    /// Runs libFuzzer over `test` with the program's arguments. A SwiftPM debug build links an executable's `main` to
    /// `<module>_main` (so that tests can link the module), which would hide libFuzzer's own `main`: each target
    /// defines `<module>_main` as a call to this.
    public static func main(
        _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
        _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt {
        var argc = argc
        var argv = argv
        return LLVMFuzzerRunDriver(&argc, &argv, test)
    }
}
