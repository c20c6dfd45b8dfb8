import CRocksDB
import Foundation
import Synchronization

/// The RocksDB anchor (Debian's librocksdb, C API): one DB, key = record name, value = the record's fields in
/// ``RecordValueCodec``'s compact form. A batch is one `WriteBatch`; `fsync` durability is
/// `WriteOptions.sync = true` (RocksDB groups concurrent synced writes itself), `os` is `sync = false` (the WAL
/// is written to the OS, not synced). Reads use default `ReadOptions` and `rocksdb_get_pinned` (no copy of the
/// value before decoding it).
///
/// Options: RocksDB's defaults (64 MiB memtable, Snappy, 8 MiB block cache) plus `increase_parallelism(2)` (our
/// machines have two cores) and a 10 bits/key Bloom filter, the usual production setting for point lookups.
/// `close` flushes the memtable first (see ``RocksDBHandle/close()``).
final class RocksDBEngine: BenchEngine {
    static var detail: String {
        "RocksDB \(version.withLock { $0 } ?? "(librocksdb)"), WAL, sync=true/false per durability, "
            + "WriteBatch per batch, Bloom 10 bits/key, flush on close, defaults otherwise"
    }
    /// Read from the first DB's info LOG (the C API has no version call).
    private static let version = Mutex<String?>(nil)

    private struct State {
        var db: RocksDBHandle?
        var data: BenchData?
    }

    private let state = Mutex(State())

    func open(dir: String, data: BenchData, settings: EngineSettings) throws {
        let path = dir + "/rocksdb"
        let db = try RocksDBHandle(path: path, sync: settings.durability == .fsync, blockCacheBytes: settings.cacheBytes)
        if Self.version.withLock({ $0 == nil }) {
            let v = Self.readVersion(logPath: path + "/LOG")
            Self.version.withLock { $0 = v }
        }
        state.withLock {
            $0.db = db
            $0.data = data
        }
    }

    private func opened() -> (RocksDBHandle, BenchData) {
        state.withLock { s in
            guard let db = s.db, let data = s.data else { preconditionFailure("RocksDBEngine used before open()") }
            return (db, data)
        }
    }

    func saveOne(_ i: Int) throws {
        let (db, data) = opened()
        try db.put(data.records[i].recordName, RecordValueCodec.encode(data.records[i]))
    }

    func saveBatch(_ range: Range<Int>) throws { try saveRecords(opened().1.records[range]) }

    func saveRecords(_ batch: ArraySlice<GeneratedRecord>) throws {
        try opened().0.write(batch.lazy.map { ($0.recordName, RecordValueCodec.encode($0)) })
    }

    func updateBatch(_ indices: ArraySlice<Int>) throws {
        let (db, data) = opened()
        try db.write(indices.lazy.map { (data.updates[$0].recordName, RecordValueCodec.encode(data.updates[$0])) })
    }

    func get(_ i: Int) throws { try read(opened().1.records[i]) }

    func read(_ expected: GeneratedRecord) throws {
        let db = opened().0
        let found = try db.get(expected.recordName) { RecordValueCodec.decode(name: expected.recordName, $0) }
        guard let found else { throw BenchError(.engine, "RocksDB: record '\(expected.recordName)' not found") }
        guard let record = found else {
            throw BenchError(.engine, "RocksDB: the value of '\(expected.recordName)' does not decode")
        }
        guard record.count == expected.count else {
            throw BenchError(.engine, "RocksDB: '\(expected.recordName)' has count \(record.count), expected \(expected.count)")
        }
    }

    var cacheDescription: String {
        let bytes = opened().0.blockCacheBytes
        return "block cache \(bytes.map { "\($0 >> 20) MiB" } ?? "8 MiB (default)")"
    }

    func crashImage(to dir: String) throws {
        try opened().0.crashImage(to: dir + "/rocksdb")
    }

    func close() throws {
        let db = state.withLock { s -> RocksDBHandle? in
            defer { s = State() }
            return s.db
        }
        try db?.close()
    }

    /// `RocksDB version: 7.8.3` from the info log RocksDB writes when it opens a DB.
    private static func readVersion(logPath: String) -> String? {
        guard let log = try? String(contentsOfFile: logPath, encoding: .utf8) else { return nil }
        for line in log.split(separator: "\n").prefix(50) {
            if let r = line.range(of: "RocksDB version: ") {
                return String(line[r.upperBound...].prefix { !$0.isWhitespace })
            }
        }
        return nil
    }
}

/// An open RocksDB database and its read and write options.
///
/// `@unchecked Sendable`: RocksDB's `DB` is safe for concurrent use from many threads (its documented contract),
/// and the options objects are only read after `init`. `close` is called once, after every caller is done (the
/// workloads guarantee that, as for every engine).
final class RocksDBHandle: @unchecked Sendable {
    let path: String
    private var db: OpaquePointer?
    private let options: OpaquePointer
    private let tableOptions: OpaquePointer
    private let writeOptions: OpaquePointer
    private let readOptions: OpaquePointer
    /// The block cache given to the table options, when not RocksDB's default one.
    private let blockCache: OpaquePointer?
    /// Its capacity; nil: RocksDB's default block cache (8 MiB).
    let blockCacheBytes: Int?

    init(path: String, sync: Bool, blockCacheBytes: Int? = nil) throws {
        self.path = path
        self.blockCacheBytes = blockCacheBytes
        options = rocksdb_options_create()
        rocksdb_options_set_create_if_missing(options, 1)
        rocksdb_options_increase_parallelism(options, 2)
        tableOptions = rocksdb_block_based_options_create()
        blockCache = blockCacheBytes.map { rocksdb_cache_create_lru(Int($0)) }
        if let blockCache { rocksdb_block_based_options_set_block_cache(tableOptions, blockCache) }
        // The table options take ownership of the filter policy.
        rocksdb_block_based_options_set_filter_policy(tableOptions, rocksdb_filterpolicy_create_bloom(10))
        rocksdb_options_set_block_based_table_factory(options, tableOptions)
        writeOptions = rocksdb_writeoptions_create()
        rocksdb_writeoptions_set_sync(writeOptions, sync ? 1 : 0)
        readOptions = rocksdb_readoptions_create()
        do {
            db = try Self.check("rocksdb_open '\(path)'") { rocksdb_open(options, path, &$0) }
        } catch {
            destroyOptions()
            throw error
        }
    }

    deinit { try? close() }

    /// Flushes the memtable to a table file, waiting for it, then closes the DB and frees the options; safe to
    /// call twice. RocksDB's own close keeps the memtable in the WAL (with the WAL on it does not flush), so the
    /// next open would replay it: flushing first is the analogue of Cloudlet's checkpoint on close and SQLite's
    /// WAL checkpoint on close (`recover-checkpoint`).
    func close() throws {
        guard let db else { return }
        let flush = rocksdb_flushoptions_create()
        rocksdb_flushoptions_set_wait(flush, 1)
        defer {
            rocksdb_flushoptions_destroy(flush)
            rocksdb_close(db)
            self.db = nil
            destroyOptions()
        }
        try Self.check("flush '\(path)'") { rocksdb_flush(db, flush, &$0) }
    }

    private func destroyOptions() {
        rocksdb_readoptions_destroy(readOptions)
        rocksdb_writeoptions_destroy(writeOptions)
        rocksdb_block_based_options_destroy(tableOptions)
        rocksdb_options_destroy(options)
        if let blockCache { rocksdb_cache_destroy(blockCache) }
    }

    func put(_ key: String, _ value: [UInt8]) throws {
        var utf8 = key
        try utf8.withUTF8 { k in
            try value.withUnsafeBufferPointer { v in
                try Self.check("put '\(key)'") {
                    rocksdb_put(db, writeOptions, k.baseAddress.map(Self.chars), k.count, v.baseAddress.map(Self.chars), v.count, &$0)
                }
            }
        }
    }

    /// Writes the pairs as one atomic `WriteBatch`.
    func write<S: Sequence<(String, [UInt8])>>(_ pairs: S) throws {
        let batch = rocksdb_writebatch_create()
        defer { rocksdb_writebatch_destroy(batch) }
        for (key, value) in pairs {
            var key = key
            key.withUTF8 { k in
                value.withUnsafeBufferPointer { v in
                    rocksdb_writebatch_put(batch, k.baseAddress.map(Self.chars), k.count, v.baseAddress.map(Self.chars), v.count)
                }
            }
        }
        try Self.check("write batch") { rocksdb_write(db, writeOptions, batch, &$0) }
    }

    /// Looks `key` up and hands its value to `body` without copying it; nil if the key is absent.
    func get<T>(_ key: String, _ body: (UnsafeRawBufferPointer) -> T) throws -> T? {
        var utf8 = key
        let slice = try utf8.withUTF8 { k in
            try Self.check("get '\(key)'") { rocksdb_get_pinned(db, readOptions, k.baseAddress.map(Self.chars), k.count, &$0) }
        }
        guard let slice else { return nil }
        defer { rocksdb_pinnableslice_destroy(slice) }
        var length = 0
        let value = rocksdb_pinnableslice_value(slice, &length)
        return body(UnsafeRawBufferPointer(start: value, count: length))
    }

    /// A consistent copy of the live DB in `dir` (which must not exist) whose WAL still holds everything not yet
    /// flushed: RocksDB's checkpoint with `log_size_for_flush` at its maximum copies the WAL instead of flushing
    /// the memtable, so opening the copy replays the WAL as after a crash.
    func crashImage(to dir: String) throws {
        let checkpoint = try Self.check("checkpoint of '\(path)'") { rocksdb_checkpoint_object_create(db, &$0) }
        defer { rocksdb_checkpoint_object_destroy(checkpoint) }
        try Self.check("checkpoint to '\(dir)'") { rocksdb_checkpoint_create(checkpoint, dir, UInt64.max, &$0) }
    }

    private static func chars(_ p: UnsafePointer<UInt8>) -> UnsafePointer<CChar> {
        UnsafeRawPointer(p).assumingMemoryBound(to: CChar.self)
    }

    /// Runs a C call that reports failure through `char** errptr`; throws its message (freeing it).
    private static func check<T>(_ what: String, _ call: (inout UnsafeMutablePointer<CChar>?) -> T) throws -> T {
        var error: UnsafeMutablePointer<CChar>?
        let result = call(&error)
        if let error {
            let message = String(cString: error)
            rocksdb_free(error)
            throw BenchError(.engine, "RocksDB: \(what): \(message)")
        }
        return result
    }
}
