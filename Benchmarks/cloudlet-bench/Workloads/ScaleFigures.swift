/// What the load child of `scale` measured (``ScaleChild``).
struct ScaleLoadPhase: Sendable, Codable {
    /// Before the engine was opened: the bench binary, the Swift runtime, Foundation.
    var baseline: ProcessMemory
    /// Every record saved, before `close`.
    var loaded: ProcessMemory
    /// After `close`; its peak is the load's peak.
    var closed: ProcessMemory
    /// The `saveRecords` calls, added up.
    var saveSeconds: Double
    /// `close`: what makes the load durable (Cloudlet's checkpoint, SQLite's WAL checkpoint, RocksDB's flush).
    var closeSeconds: Double
    /// Generating the records, between the batches, untimed (the engines' background threads run on meanwhile).
    var generateSeconds: Double
}

/// What the read child of `scale` measured (``ScaleChild``).
struct ScaleReadPhase: Sendable, Codable {
    /// Before the engine was opened.
    var baseline: ProcessMemory
    /// After `open` and the first read.
    var opened: ProcessMemory
    /// After the last read.
    var afterReads: ProcessMemory
    /// `open` plus one read (SQLite opens lazily: its first query does the work).
    var openSeconds: Double
    /// The `readEach` calls, added up.
    var readSeconds: Double
}

/// What a `scale` child prints on stdout, as JSON: its phase's figures, the engine's cache, and for the read phase
/// every read's latency.
struct ScaleChildReport: Sendable, Codable {
    var cache: String
    var load: ScaleLoadPhase?
    var read: ScaleReadPhase?
    var latencyNanoseconds: [UInt64]?
}

/// Everything `scale` measured on one engine: records loaded, bytes on disk, open time, resident memory per
/// phase. Raw figures; the per-record ones divide them by `records` and subtract nothing (not the baseline, not
/// the cache).
struct ScaleFigures: Sendable {
    var records: Int
    var reads: Int
    var batchSize: Int
    /// The engine's configured cache (`page cache 8 MiB`).
    var cache: String
    var load: ScaleLoadPhase
    var read: ScaleReadPhase
    /// The sizes of the files in the engine's directory after the load, added up.
    var diskBytes: Int
    var files: Int

    /// Records per second, `close` included.
    var loadRate: Double { Double(records) / (load.saveSeconds + load.closeSeconds) }
    var readRate: Double { read.readSeconds > 0 ? Double(reads) / read.readSeconds : 0 }
    var openSeconds: Double { read.openSeconds }

    func perRecord(_ bytes: Int) -> Double { Double(bytes) / Double(max(records, 1)) }
}

extension ScaleFigures: Encodable {
    private enum Key: String, CodingKey {
        case records, reads, batchSize, cache, load, read, diskBytes, files
        case loadRecordsPerSecond, readsPerSecond, openSeconds, bytesPerRecord
    }

    private enum PerRecord: String, CodingKey {
        case disk, loadPeak, openedResident, readPeak, afterReadsResident, afterReadsAnonymous, afterReadsFile
    }

    /// The raw figures, then the derived ones (rates, and bytes per record under `bytesPerRecord`).
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(records, forKey: .records)
        try c.encode(reads, forKey: .reads)
        try c.encode(batchSize, forKey: .batchSize)
        try c.encode(cache, forKey: .cache)
        try c.encode(load, forKey: .load)
        try c.encode(read, forKey: .read)
        try c.encode(diskBytes, forKey: .diskBytes)
        try c.encode(files, forKey: .files)
        try c.encode(loadRate, forKey: .loadRecordsPerSecond)
        try c.encode(readRate, forKey: .readsPerSecond)
        try c.encode(openSeconds, forKey: .openSeconds)
        var p = c.nestedContainer(keyedBy: PerRecord.self, forKey: .bytesPerRecord)
        try p.encode(perRecord(diskBytes), forKey: .disk)
        try p.encode(perRecord(load.closed.peakBytes), forKey: .loadPeak)
        try p.encode(perRecord(read.opened.residentBytes), forKey: .openedResident)
        try p.encode(perRecord(read.afterReads.peakBytes), forKey: .readPeak)
        try p.encode(perRecord(read.afterReads.residentBytes), forKey: .afterReadsResident)
        try p.encode(perRecord(read.afterReads.anonymousBytes), forKey: .afterReadsAnonymous)
        try p.encode(perRecord(read.afterReads.fileBytes), forKey: .afterReadsFile)
    }
}
