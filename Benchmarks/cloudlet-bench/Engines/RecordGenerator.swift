import CloudletCore

/// The field values of one benchmark record, as plain Swift values every engine can store its own way.
///
/// Six fields of mixed types besides the name and type, about 250 bytes in all: what a small app record
/// (a note, a task) looks like.
struct GeneratedRecord: Sendable, Hashable {
    /// Unique per index, 17 characters: in pseudo-random order (like the UUIDs apps use), or in index order
    /// (see ``RecordGenerator/NameOrder``).
    var recordName: String
    var recordType: String
    /// Words, about 20 to 55 characters.
    var title: String
    var count: Int64
    var score: Double
    /// Milliseconds since 1970.
    var created: Int64
    /// One to four short tags.
    var tags: [String]
    /// 120–180 pseudo-random bytes.
    var payload: [UInt8]

    /// Bytes of field data (UTF-8 text, 8 per number, tags without separators), for sizing.
    var approximateSize: Int {
        recordName.utf8.count + recordType.utf8.count + title.utf8.count + 8 * 3
            + tags.reduce(0) { $0 + $1.utf8.count } + payload.count
    }
}

/// Builds benchmark records deterministically from their index, so every engine stores exactly the same data
/// and a run can be reproduced. Generation is cheap but not free: workloads build their records in `setUp`.
struct RecordGenerator: Sendable {
    static let recordTypes = ["Note", "Task", "Contact", "Event"]
    private static let words = [
        "alpha", "bravo", "cloud", "delta", "echo", "field", "grove", "harbor", "island", "jade", "kite", "lumen",
        "meadow", "north", "orbit", "prism", "quartz", "river", "summit", "tundra", "umber", "vivid", "willow", "zephyr",
    ]
    private static let tagWords = ["work", "home", "urgent", "later", "idea", "shared", "draft", "done"]
    /// 2025-12-01T00:00:00Z, the base of `created`.
    static let epochMillis: Int64 = 1_764_547_200_000

    /// How record names relate to indexes.
    enum NameOrder: String, Sendable {
        /// `r` + 16 pseudo-random hex digits: saving records 0, 1, 2… inserts keys in random order (`fillrandom`).
        case random
        /// `r` + the index as 16 hex digits: saving records 0, 1, 2… appends keys in sorted order (`fillseq`).
        case sequential
    }

    /// A seed so that separate data sets can be generated; the same seed and index give the same record.
    var seed: UInt64 = 0
    var names: NameOrder = .random

    /// The name of record `i`: unique per index (for one seed), 17 characters.
    func recordName(_ i: Int) -> String {
        // `mix` is a bijection, so names are unique per index; the constant keeps record 0 from being all zeros.
        let nameBits = names == .sequential ? UInt64(i) : SplitMix64.mix(UInt64(i) ^ seed ^ 0x5DEE_CE66_D1CE_F00D)
        let hex = String(nameBits, radix: 16)
        return "r" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The record with index `i`.
    func record(_ i: Int) -> GeneratedRecord {
        fields(i, stream: SplitMix64.mix(SplitMix64.mix(UInt64(i)) ^ seed))
    }

    /// Record `i` as an update would leave it: the same name, type and field names, every field value new
    /// (`overwrite`).
    func updated(_ i: Int) -> GeneratedRecord {
        fields(i, stream: SplitMix64.mix(SplitMix64.mix(UInt64(i)) ^ seed ^ 0x0DDB_A11C_AFE0_0001))
    }

    private func fields(_ i: Int, stream: UInt64) -> GeneratedRecord {
        // Each record's stream starts at an unrelated point of SplitMix64's sequence (starting at `i * step`
        // would make record i+1's values record i's, shifted by one).
        var rng = SplitMix64(state: stream)
        let recordName = recordName(i)

        var title = ""
        while title.utf8.count < 20 || (title.utf8.count < 50 && rng.next() % 3 != 0) {
            if !title.isEmpty { title += " " }
            title += Self.words[Int(rng.next() % UInt64(Self.words.count))]
        }
        let tags = (0...(rng.next() % 4)).map { _ in Self.tagWords[Int(rng.next() % UInt64(Self.tagWords.count))] }
        let payloadCount = 120 + Int(rng.next() % 61)
        var payload: [UInt8] = []
        payload.reserveCapacity(payloadCount + 8)
        while payload.count < payloadCount {
            withUnsafeBytes(of: rng.next().littleEndian) { payload.append(contentsOf: $0) }
        }
        payload.removeLast(payload.count - payloadCount)

        return GeneratedRecord(
            recordName: recordName,
            recordType: Self.recordTypes[i % Self.recordTypes.count],
            title: title,
            count: Int64(rng.next() % 10_000),
            score: Double(rng.next() % 1_000_000) / 1000,
            created: Self.epochMillis + Int64(i) * 1000,
            tags: tags,
            payload: payload)
    }

    /// Records `0..<count`.
    func records(_ count: Int) -> [GeneratedRecord] { (0..<count).map(record) }
}

