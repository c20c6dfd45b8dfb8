import CloudletCore
import CloudletWire
import FuzzSupport

/// The three ways a predicate arrives: the first byte picks one, the rest is the input.
/// - 0: the NSPredicate-style format language (`Predicate(format:)`, the CLI's `query` and the client), with a few
///   `%@` arguments;
/// - 1: a JSON `filterBy` list (`records/query`, query subscriptions), whose decoding must be a fixed point after one
///   round trip through ``FilterCoding/write(_:zone:to:)``;
/// - else: the binary ``PredicateCodec`` (stored subscriptions, continuation-marker fingerprints).
/// Every predicate that decodes must round-trip through ``PredicateCodec``.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPredicate(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Fuzz.bytes(data, count)
    guard let mode = input.first else { return 0 }
    let rest = Array(input.dropFirst())
    let zone = ZoneID(zoneName: "z")
    let predicate: Predicate?
    switch mode {
    case 0:
        let arguments: [any PredicateArgument] = ["text", 7, 2.5, ["a", "b"] as [String]]
        predicate = Fuzz.decoding("Predicate(format:)") {
            try Predicate(format: String(decoding: rest, as: UTF8.self), arguments: arguments)
        }
    case 1:
        guard let json = Fuzz.decoding("JSONParser.parse", also: { $0 is JSONParser.Error }, { try JSONParser.parse(rest) })
        else { return 0 }
        predicate = Fuzz.decoding("FilterCoding.decode") { try FilterCoding.decode(json, at: "filterBy", zone: zone) }
        if let predicate {
            let written = write(predicate, zone: zone)
            let reread = Fuzz.decoding("FilterCoding.decode of written filters") {
                try FilterCoding.decode(try JSONParser.parse(written), at: "filterBy", zone: zone)
            }
            Fuzz.require(reread != nil, "written filters do not decode: \(String(decoding: written, as: UTF8.self))")
            Fuzz.require(
                write(reread!, zone: zone) == written,
                "filterBy decode → write → decode → write differs: \(String(decoding: written, as: UTF8.self))")
        }
    default:
        var r = ByteReader(rest, what: "fuzz predicate")
        predicate = Fuzz.decoding("PredicateCodec.decode") { try PredicateCodec.decode(&r) }
    }
    guard let predicate else { return 0 }
    var w = ByteWriter()
    PredicateCodec.encode(predicate, into: &w)
    var r = ByteReader(w.bytes, what: "re-encoded predicate")
    let again = Fuzz.decoding("PredicateCodec.decode of an encoded predicate") { try PredicateCodec.decode(&r) }
    Fuzz.require(again != nil && r.isAtEnd, "an encoded predicate does not decode: \(predicate)")
    var w2 = ByteWriter()
    PredicateCodec.encode(again!, into: &w2)
    Fuzz.require(w2.bytes == w.bytes, "PredicateCodec encode → decode → encode differs for \(predicate)")
    return 0
}

private func write(_ p: Predicate, zone: ZoneID) -> [UInt8] {
    var w = JSONWriter()
    FilterCoding.write(p, zone: zone, to: &w)
    return w.bytes
}

/// The program's entry (see `Fuzz.main`).
@_cdecl("fuzz_predicate_main")
public func fuzzPredicateMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    Fuzz.main(argc, argv, fuzzPredicate)
}
