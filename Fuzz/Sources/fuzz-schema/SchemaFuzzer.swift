import Cloudlet
import CloudletCore
import FuzzSupport

/// The CloudKit schema language (`cloudlet schema import`, the console's schema page): any text either parses or
/// throws `invalidArguments` whose message starts with the line and column of the problem.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSchema(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: Fuzz.bytes(data, count), as: UTF8.self)
    do {
        let document = try SchemaLanguage.parse(text)
        let again = try SchemaLanguage.parse(text)
        Fuzz.require(again == document, "parsing the same text twice differs")
    } catch let e as CloudletError {
        Fuzz.require(e.code == .invalidArguments, "a bad schema text threw \(e.code), not invalidArguments: \(e)")
        Fuzz.require(e.message.hasPrefix("line "), "a schema error does not say where: \(e.message)")
    } catch {
        fatalError("SchemaLanguage.parse threw an undocumented error type \(type(of: error)): \(error)")
    }
    return 0
}

/// The program's entry (see `Fuzz.main`).
@_cdecl("fuzz_schema_main")
public func fuzzSchemaMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    Fuzz.main(argc, argv, fuzzSchema)
}
