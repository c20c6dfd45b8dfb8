import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

/// A random key: mostly from a small alphabet so that keys share prefixes, sometimes arbitrary bytes.
func randomKey(_ rng: inout SeededRandom, maxLength: Int = 12) -> [UInt8] {
    let length = rng.int(maxLength + 1)
    if rng.chance(20) { return randomBytes(length, &rng) }
    return (0..<length).map { _ in UInt8(0x61 + rng.int(4)) }
}

/// A random value: empty, short, or long and compressible.
func randomValue(_ rng: inout SeededRandom) -> [UInt8] {
    switch rng.int(4) {
    case 0: return []
    case 1: return randomBytes(rng.int(40), &rng)
    case 2: return compressibleBytes(50 + rng.int(600), tag: rng.int(100))
    default: return randomBytes(rng.int(300), &rng)
    }
}

/// `count` entries with distinct random keys, about a fifth tombstones, in key order.
func randomEntries(_ count: Int, _ rng: inout SeededRandom, maxKeyLength: Int = 12) -> [LSMEntry] {
    var model: [[UInt8]: LSMEntry] = [:]
    for _ in 0..<count {
        let key = randomKey(&rng, maxLength: maxKeyLength)
        let sequence = UInt64(1 + rng.int(1_000_000))
        model[key] = rng.chance(20) ? .delete(key, sequence: sequence) : .put(key, randomValue(&rng), sequence: sequence)
    }
    return model.values.sorted { LSMKey.less($0.key, $1.key) }
}

/// Writes `entries` (in key order) as run `number` in `directory`; returns its path.
@discardableResult
func writeRun(
    _ entries: [LSMEntry], number: UInt64 = 1, directory: String, fileSystem: any FileSystem,
    configuration: SortedRunConfiguration = SortedRunConfiguration()
) throws -> String {
    let path = directory + "/" + SortedRunFile.name(number)
    let writer = try SortedRunWriter(path: path, fileNumber: number, configuration: configuration, fileSystem: fileSystem)
    for entry in entries { try writer.add(entry) }
    try writer.finish()
    return path
}

/// The model's answer to a seek: the entries from the first key at least `key`.
func modelSeek(_ sorted: [LSMEntry], _ key: [UInt8]) -> ArraySlice<LSMEntry> {
    var lo = 0
    var hi = sorted.count
    while lo < hi {
        let mid = (lo + hi) / 2
        if LSMKey.less(sorted[mid].key, key) { lo = mid + 1 } else { hi = mid }
    }
    return sorted[lo...]
}

/// The file system a test runs on: a temp directory on disk, or an in-memory one.
func testFileSystem(_ kind: String) -> (any FileSystem, String, TempDir?) {
    if kind == "memory" {
        let fs = InMemoryFileSystem()
        try! fs.createDirectory("/lsm")
        return (fs, "/lsm", nil)
    }
    let dir = TempDir("lsm-test")
    return (PosixFileSystem(), dir.path, dir)
}
