import CSQLite
import Dispatch
import Synchronization

/// The SQLite anchor: one table, one row per record, WAL, `synchronous=FULL`, prepared statements.
///
/// `saveOne` is an autocommit `INSERT` (its own transaction, fsync'd at commit); `saveBatch` wraps its inserts
/// in `BEGIN IMMEDIATE … COMMIT`. By default every concurrent writer gets its own connection and they queue on
/// the database's single write lock through `busy_timeout` (SQLite's busy handler sleeps 1, 2, 5 … 100 ms
/// between retries, which is most of what this configuration measures under contention). With
/// `sharedConnection`, all writers take turns on one connection through a serial dispatch queue (first come,
/// first served) instead, as an app that serializes its SQLite access in-process does (GRDB's
/// `SerializedDatabase`).
final class SQLiteEngine: BenchEngine {
    static let version = String(cString: sqlite3_libversion())
    static let detail = "SQLite \(version), WAL, synchronous=FULL, a connection per writer, busy_timeout"
    static let sharedDetail = "SQLite \(version), WAL, synchronous=FULL, one connection shared by all writers"

    let sharedConnection: Bool

    private struct State {
        var records: [GeneratedRecord] = []
        /// Connections not in use; a caller takes one for the duration of one save.
        var idle: [SQLiteConnection] = []
        var opened = 0
    }

    private let state = Mutex(State())
    /// With `sharedConnection`, every save runs on this queue, so callers queue in arrival order.
    private let serial = DispatchQueue(label: "cloudlet-bench.sqlite-serial")

    init(sharedConnection: Bool = false) {
        self.sharedConnection = sharedConnection
    }

    func open(dir: String, records: [GeneratedRecord], writers: Int) throws {
        let path = dir + "/bench.sqlite"
        var connections: [SQLiteConnection] = []
        for _ in 0..<(sharedConnection ? 1 : max(writers, 1)) { connections.append(try SQLiteConnection(path: path)) }
        state.withLock {
            $0.records = records
            $0.idle = connections
            $0.opened = connections.count
        }
    }

    func saveOne(_ i: Int) throws {
        try withConnection(picking: { $0[i] }) { connection, record in
            try connection.insert(record)
        }
    }

    func saveBatch(_ range: Range<Int>) throws {
        try withConnection(picking: { Array($0[range]) }) { connection, batch in
            try connection.transaction {
                for record in batch { try connection.insert(record) }
            }
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

    /// Runs `body` with an idle connection and the records `pick` chooses (taken under the same lock), then
    /// returns the connection to the pool. With `sharedConnection` the whole of it runs on the serial queue.
    private func withConnection<T: Sendable>(
        picking pick: ([GeneratedRecord]) -> T, _ body: (SQLiteConnection, T) throws -> Void
    ) throws {
        if sharedConnection {
            try serial.sync { try withPooledConnection(picking: pick, body) }
        } else {
            try withPooledConnection(picking: pick, body)
        }
    }

    private func withPooledConnection<T: Sendable>(
        picking pick: ([GeneratedRecord]) -> T, _ body: (SQLiteConnection, T) throws -> Void
    ) throws {
        let taken = state.withLock { s -> (SQLiteConnection, T)? in
            guard let c = s.idle.popLast() else { return nil }
            return (c, pick(s.records))
        }
        guard let (connection, picked) = taken else {
            throw BenchError(.engine, "SQLiteEngine: more concurrent saves than the writers it was opened for")
        }
        defer { state.withLock { $0.idle.append(connection) } }
        try body(connection, picked)
    }
}
