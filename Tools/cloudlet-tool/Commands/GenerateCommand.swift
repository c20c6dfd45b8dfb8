import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import Foundation

/// `generate` (not listed in the tool's help): builds a store of a given size for benchmarks and tests.
enum GenerateCommand: Command {
    static let help = """
        USAGE: cloudlet-tool generate --data DIR [--records N] [--record-size BYTES] [--passes P] [--batch B]
                                     [--zones Z] [--segment-size BYTES] [--seed S]

        Creates (or adds to) a store: N records of about BYTES of field data each (half random bytes, half text),
        spread over Z custom zones of one private database, saved in batches of B per commit, and overwritten P
        times (every pass replaces every record). OS durability; compaction off. For benchmarks and tests.

        OPTIONS
          --records N            Records (default 10000).
          --record-size BYTES    Field bytes per record (default 1000).
          --passes P             Times every record is written (default 1).
          --batch B              Records per commit (default 100, at most 200).
          --zones Z              Custom zones (default 4).
          --segment-size BYTES   Segment size of a new store (default 64M).
          --seed S               Random seed (default 1).
        \(Common.help)
        """

    static let container = "iCloud.com.example.generated"

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args,
            valued: Common.valued.union(["--records", "--record-size", "--passes", "--batch", "--zones", "--segment-size", "--seed"]),
            flags: Common.flags, help: help)
        let common = try Common(o)
        let records = try o.int("--records") ?? 10_000
        let size = try o.int("--record-size") ?? 1000
        let passes = try o.int("--passes") ?? 1
        let batch = min(200, max(1, try o.int("--batch") ?? 100))
        let zoneCount = max(1, try o.int("--zones") ?? 4)
        var rng = SplitMix64(seed: try o.uint64("--seed") ?? 1)
        var config = StoreConfiguration(durability: .os)
        config.compaction = .manual
        config.segmentSize = try o.int("--segment-size") ?? config.segmentSize
        let store = try await CloudletStore.open(at: common.data, configuration: config)
        let db = try store.container(container).privateDatabase(user: "gen")
        let zones = (0..<zoneCount).map { ZoneID(zoneName: "Z\($0)") }
        for z in zones { try await db.createZone(z) }
        let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
        let total = UInt64(records * passes * size)
        var written: UInt64 = 0
        let started = Date()
        for pass in 0..<passes {
            var start = 0
            while start < records {
                let end = min(records, start + batch)
                var ops: [RecordOperation] = []
                for i in start..<end {
                    var r = Record(recordType: "Item", recordName: "item-\(i)", zoneID: zones[i % zoneCount])
                    r["n"] = .int64(Int64(i))
                    r["pass"] = .int64(Int64(pass))
                    r["blob"] = .bytes((0..<(size / 2)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                    var text = ""
                    while text.utf8.count < size / 2 { text += words[Int.random(in: 0..<words.count, using: &rng)] + " " }
                    r["text"] = .string(text)
                    ops.append(.forceReplace(r))
                }
                // One zone per commit: batches are of consecutive records, which alternate zones, so split them.
                for z in zones {
                    let mine = ops.filter { $0.recordID.zoneID == z }
                    if !mine.isEmpty { _ = try await db.modify(mine) }
                }
                written += UInt64((end - start) * size)
                Progress.update("generate pass \(pass + 1)/\(passes)", done: written, total: total)
                start = end
            }
        }
        try await store.close()
        Progress.clear()
        let s = Date().timeIntervalSince(started)
        warn(String(format: "generated %d records × %d pass(es) of ~%d bytes in %.1f s", records, passes, size, s))
        return 0
    }
}

