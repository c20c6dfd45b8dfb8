import CSQLite
import Dispatch
import Foundation
import Synchronization

/// The SQLite anchor: one table with a primary key on record name, one row per record, WAL, `synchronous=FULL` (`fsync`) or
/// `NORMAL` (`os`), prepared statements.
///
/// `saveOne` is an autocommit `INSERT` (its own transaction, fsync'd at commit under FULL); `saveBatch` wraps its
/// inserts (`updateBatch` its `UPDATE`s) in `BEGIN IMMEDIATE … COMMIT`; `get` is a `SELECT` by record name. By default every concurrent writer gets its own connection and they queue on
/// the database's single write lock through `busy_timeout` (SQLite's busy handler sleeps 1, 2, 5 … 100 ms
/// between retries, which is most of what this configuration measures under contention). With
/// `sharedConnection`, all writers take turns on one connection through a serial dispatch queue (first come,
/// first served) instead, as an app that serializes its SQLite access in-process does (GRDB's
/// `SerializedDatabase`).
final class SQLiteEngine: BenchEngine {
    static let version = String(cString: sqlite3_libversion())
    static let detail =
        "SQLite \(version), WAL, synchronous=FULL/NORMAL per durability, rowid table + primary key on name, "
        + "a connection per writer, busy_timeout"
    static let sharedDetail = "SQLite \(version), as sqlite but one connection shared by all writers"
    static let fileName = "bench.sqlite"

    let sharedConnection: Bool

    private struct State {
        var data: BenchData?
        var path = ""
        /// Connections not in use; a caller takes one for the duration of one save.
        var idle: [SQLiteConnection] = []
        var opened = 0
        /// The page cache of each connection, in KiB (SQLite's own figure after `open`).
        var cacheKiB = 0
    }

    private let state = Mutex(State())
    /// With `sharedConnection`, every save runs on this queue, so callers queue in arrival order.
    private let serial = DispatchQueue(label: "cloudlet-bench.sqlite-serial")

    init(sharedConnection: Bool = false) {
        self.sharedConnection = sharedConnection
    }

    func open(dir: String, data: BenchData, settings: EngineSettings) throws {
        let path = dir + "/" + Self.fileName
        var connections: [SQLiteConnection] = []
        for _ in 0..<(sharedConnection ? 1 : max(settings.writers, 1)) {
            connections.append(
                try SQLiteConnection(path: path, durability: settings.durability, cacheBytes: settings.cacheBytes))
        }
        let cacheKiB = try connections[0].cacheKiB()
        state.withLock {
            $0.data = data
            $0.path = path
            $0.idle = connections
            $0.opened = connections.count
            $0.cacheKiB = cacheKiB
        }
    }

    func saveOne(_ i: Int) throws {
        try withConnection(picking: { $0.records[i] }) { connection, record in
            try connection.insert(record)
        }
    }

    func saveBatch(_ range: Range<Int>) throws {
        try withConnection(picking: { $0.records[range] }, Self.insert)
    }

    func saveRecords(_ batch: ArraySlice<GeneratedRecord>) throws {
        try withConnection(picking: { _ in batch }, Self.insert)
    }

    /// Inserts `batch` in one transaction.
    private static func insert(_ connection: SQLiteConnection, _ batch: ArraySlice<GeneratedRecord>) throws {
        try connection.transaction {
            for record in batch { try connection.insert(record) }
        }
    }

    func updateBatch(_ indices: ArraySlice<Int>) throws {
        try withConnection(picking: { $0 }) { connection, data in
            try connection.transaction {
                for i in indices { try connection.update(data.updates[i]) }
            }
        }
    }

    func get(_ i: Int) throws {
        try withConnection(picking: { $0.records[i] }, Self.read)
    }

    func read(_ expected: GeneratedRecord) throws {
        try withConnection(picking: { _ in expected }, Self.read)
    }

    private static func read(_ connection: SQLiteConnection, _ expected: GeneratedRecord) throws {
        guard let found = try connection.read(expected.recordName) else {
            throw BenchError(.engine, "SQLite: record '\(expected.recordName)' not found")
        }
        guard found.count == expected.count else {
            throw BenchError(.engine, "SQLite: '\(expected.recordName)' has count \(found.count), expected \(expected.count)")
        }
    }

    var cacheDescription: String {
        let kib = state.withLock { $0.cacheKiB }
        return "page cache " + (kib % 1024 == 0 ? "\(kib / 1024) MiB" : "\(kib) KiB")
            + (kib == SQLiteConnection.defaultCacheKiB ? " (default)" : "")
    }

    /// Copies the database file and its WAL (not the shared-memory index, which SQLite rebuilds from the WAL)
    /// while the connections are idle, as a crash would leave them.
    func crashImage(to dir: String) throws {
        let path = state.withLock { $0.path }
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: dir + "/" + Self.fileName + suffix)
        }
    }

    func close() throws {
        let connections = state.withLock { s in
            precondition(s.idle.count == s.opened, "SQLiteEngine.close() while saves are running")
            defer { s = State() }
            return s.idle
        }
        for c in connections { c.close() }
    }

    /// Runs `body` with an idle connection (for scans that need no records).
    func withConnectionForScan(_ body: (SQLiteConnection) throws -> Void) throws {
        try withConnection(picking: { _ in 0 }) { connection, _ in try body(connection) }
    }

    /// Runs `body` with an idle connection and the records `pick` chooses (taken under the same lock), then
    /// returns the connection to the pool. With `sharedConnection` the whole of it runs on the serial queue.
    private func withConnection<T: Sendable>(
        picking pick: (BenchData) -> T, _ body: (SQLiteConnection, T) throws -> Void
    ) throws {
        if sharedConnection {
            try serial.sync { try withPooledConnection(picking: pick, body) }
        } else {
            try withPooledConnection(picking: pick, body)
        }
    }

    private func withPooledConnection<T: Sendable>(
        picking pick: (BenchData) -> T, _ body: (SQLiteConnection, T) throws -> Void
    ) throws {
        let taken = state.withLock { s -> (SQLiteConnection, T)? in
            guard let c = s.idle.popLast() else { return nil }
            guard let data = s.data else { preconditionFailure("SQLiteEngine used before open()") }
            return (c, pick(data))
        }
        guard let (connection, picked) = taken else {
            throw BenchError(.engine, "SQLiteEngine: more concurrent saves than the writers it was opened for")
        }
        defer { state.withLock { $0.idle.append(connection) } }
        try body(connection, picked)
    }
}

extension SQLiteEngine: ChangefeedEngine {
    func catchUp(pageSize: Int) throws -> (count: Int, latencies: [Double]) {
        var result = (count: 0, latencies: [Double]())
        try withConnectionForScan { connection in
            var after: Int64 = 0
            while true {
                let clock = Stopwatch()
                let (n, last) = try connection.scan(afterRowID: after, limit: pageSize)
                result.latencies.append(clock.elapsed)
                result.count += n
                if n < pageSize { return }
                after = last
            }
        }
        return result
    }
}
