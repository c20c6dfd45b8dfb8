import CloudletCore
import FuzzSupport

/// RecordCodec, the bytes of a record as stored in commit payloads and sorted runs: bad bytes throw `CloudletError`
/// (`.corruption`), and what decodes encodes back to bytes that decode to the same record.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecord(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Fuzz.bytes(data, count)
    guard let record = Fuzz.decoding("RecordCodec.decode", { try RecordCodec.decode(bytes) }) else { return 0 }
    let encoded = RecordCodec.encode(record)
    let again = Fuzz.decoding("RecordCodec.decode of re-encoded bytes", { try RecordCodec.decode(encoded) })
    Fuzz.require(again != nil, "a decoded record's encoding does not decode")
    // Bytes, not records, are compared: a NaN double is not equal to itself.
    Fuzz.require(RecordCodec.encode(again!) == encoded, "decode → encode → decode changed the record \(record)")
    return 0
}

/// The program's entry (see `Fuzz.main`).
@_cdecl("fuzz_record_main")
public func fuzzRecordMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    Fuzz.main(argc, argv, fuzzRecord)
}
