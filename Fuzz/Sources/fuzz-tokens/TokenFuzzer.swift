import CloudletCore
import CloudletModel
import CloudletWire
import FuzzSupport

@testable import Cloudlet

/// Change tokens (`syncToken`s) and continuation markers, which clients hand back to the server as they please.
/// The first byte picks what the rest is; modes 0–2 append the CRC-32C that both end with, so that the fuzzer gets
/// past the checksum to the fields:
/// - 0: a zone change token, 1: a database change token (bytes, sealed);
/// - 2: a continuation marker (bytes, sealed; bits 2–3 of the first byte are the sort keys it must carry, bit 4
///   whether it belongs to a ranked query and so carries ranking statistics);
/// - 3: the rest as text: a `syncToken` member and a continuation marker as a client sends them (base64, unsealed).
/// What decodes must re-encode to a token or marker that decodes to the same position; what does not throws
/// `CloudletError` (`invalidArguments`) or `APIError` (`BAD_REQUEST`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokens(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Fuzz.bytes(data, count)
    guard let mode = input.first else { return 0 }
    let rest = Array(input.dropFirst())
    switch mode & 3 {
    case 0:
        let token = ChangeToken(bytes: Fuzz.sealed(rest))
        guard let p = Fuzz.decoding("ChangeToken.zonePosition", { try token.zonePosition() }) else { return 0 }
        let again = Fuzz.decoding("zonePosition of a re-encoded token") { try ChangeToken(p).zonePosition() }
        Fuzz.require(again == p, "zone token decode → encode → decode differs: \(p) vs \(String(describing: again))")
    case 1:
        let token = ChangeToken(bytes: Fuzz.sealed(rest))
        guard let p = Fuzz.decoding("ChangeToken.databasePosition", { try token.databasePosition() }) else { return 0 }
        let again = Fuzz.decoding("databasePosition of a re-encoded token") { try ChangeToken(p).databasePosition() }
        Fuzz.require(again == p, "database token decode → encode → decode differs: \(p) vs \(String(describing: again))")
    case 2:
        let keyCount = Int(mode >> 2) & 3
        let ranked = mode & 16 != 0
        // The marker's fingerprint (bytes 1..<9) is the query it is checked against, so that decoding goes on.
        var query: UInt64 = 0
        for (i, b) in rest.dropFirst().prefix(8).enumerated() { query |= UInt64(b) << (8 * UInt64(i)) }
        let cursor = QueryCursor(marker: Base64.encode(Fuzz.sealed(rest)))
        guard let (p, stats) = Fuzz.decoding("QueryCursor.resume", {
            try cursor.resume(query: query, keyCount: keyCount, ranked: ranked)
        })
        else { return 0 }
        let again = Fuzz.decoding("position of a re-encoded marker") {
            try QueryCursor(query: query, after: p, ranking: stats).resume(query: query, keyCount: keyCount, ranked: ranked)
        }
        Fuzz.require(
            again?.0 == p && again?.1 == stats,
            "continuation marker decode → encode → decode differs: \(p) \(String(describing: stats)) vs \(String(describing: again))")
    default:
        let text = String(decoding: rest, as: UTF8.self)
        if let token = Fuzz.decoding("ChangesCoding.token", { try ChangesCoding.token(["syncToken": .string(text)], at: "syncToken") }) {
            Fuzz.require(token.map { ChangeToken(base64: $0.base64) == $0 } ?? true, "a sync token's base64 does not read back")
            _ = Fuzz.decoding("zonePosition") { try token?.zonePosition() }
            _ = Fuzz.decoding("databasePosition") { try token?.databasePosition() }
        }
        _ = Fuzz.decoding("QueryCursor.resume") { try QueryCursor(marker: text).resume(query: 0, keyCount: 1, ranked: false) }
    }
    return 0
}

/// The program's entry (see `Fuzz.main`).
@_cdecl("fuzz_tokens_main")
public func fuzzTokensMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    Fuzz.main(argc, argv, fuzzTokens)
}
