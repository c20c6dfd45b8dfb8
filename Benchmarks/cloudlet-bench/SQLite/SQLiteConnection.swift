import CSQLite

/// One SQLite connection with the benchmark's prepared statements.
///
/// `@unchecked Sendable`: opened with `SQLITE_OPEN_NOMUTEX`, so it must be used by one thread at a time.
/// ``SQLiteEngine`` guarantees that: its pool (a `Mutex`) hands each connection to exactly one caller, who gives
/// it back when done.
final class SQLiteConnection: @unchecked Sendable {
    let path: String
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?
    private var rollback: OpaquePointer?

    static let createTable = """
        CREATE TABLE IF NOT EXISTS records(
            recordName TEXT PRIMARY KEY, recordType TEXT, title TEXT, count INTEGER, score REAL,
            created INTEGER, tags TEXT, payload BLOB)
        """

    /// Opens `path` (creating it), in WAL mode with `synchronous=FULL` and `busy_timeout`, and prepares the
    /// statements. Fails if SQLite did not take the settings, so a run cannot silently measure something else.
    init(path: String, busyTimeoutMilliseconds: Int32 = 60_000) throws {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            db = nil
            throw BenchError(.engine, "sqlite3_open_v2 '\(path)': \(message)")
        }
        do {
            try check(sqlite3_busy_timeout(db, busyTimeoutMilliseconds), "sqlite3_busy_timeout")
            let mode = try queryText("PRAGMA journal_mode=WAL")
            guard mode == "wal" else {
                throw BenchError(.engine, "SQLite '\(path)': journal_mode is '\(mode)', not wal")
            }
            try execute("PRAGMA synchronous=FULL")
            let sync = try queryText("PRAGMA synchronous")
            guard sync == "2" else {
                throw BenchError(.engine, "SQLite '\(path)': synchronous is \(sync), not 2 (FULL)")
            }
            try execute(Self.createTable)
            insert = try prepare(
                "INSERT INTO records(recordName, recordType, title, count, score, created, tags, payload) "
                    + "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            begin = try prepare("BEGIN IMMEDIATE")
            commit = try prepare("COMMIT")
            rollback = try prepare("ROLLBACK")
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Finalizes the statements and closes the connection; safe to call twice.
    func close() {
        for statement in [insert, begin, commit, rollback] { sqlite3_finalize(statement) }
        insert = nil
        begin = nil
        commit = nil
        rollback = nil
        sqlite3_close_v2(db)
        db = nil
    }

    /// Inserts one record; in autocommit mode this is its own transaction.
    func insert(_ r: GeneratedRecord) throws {
        guard let insert else { throw BenchError(.engine, "SQLite '\(path)': connection is closed") }
        defer {
            sqlite3_reset(insert)
            sqlite3_clear_bindings(insert)
        }
        let transient = csqlite_transient()
        try check(sqlite3_bind_text(insert, 1, r.recordName, -1, transient), "bind recordName")
        try check(sqlite3_bind_text(insert, 2, r.recordType, -1, transient), "bind recordType")
        try check(sqlite3_bind_text(insert, 3, r.title, -1, transient), "bind title")
        try check(sqlite3_bind_int64(insert, 4, r.count), "bind count")
        try check(sqlite3_bind_double(insert, 5, r.score), "bind score")
        try check(sqlite3_bind_int64(insert, 6, r.created), "bind created")
        try check(sqlite3_bind_text(insert, 7, r.tags.joined(separator: ","), -1, transient), "bind tags")
        try r.payload.withUnsafeBytes { bytes in
            try check(sqlite3_bind_blob(insert, 8, bytes.baseAddress, Int32(bytes.count), transient), "bind payload")
        }
        try check(sqlite3_step(insert), "insert '\(r.recordName)'", expect: SQLITE_DONE)
    }

    /// Runs `body` in one `BEGIN IMMEDIATE … COMMIT` transaction, rolling back if it throws.
    func transaction(_ body: () throws -> Void) throws {
        try step(begin, "BEGIN IMMEDIATE")
        do {
            try body()
            try step(commit, "COMMIT")
        } catch {
            if sqlite3_get_autocommit(db) == 0 { try? step(rollback, "ROLLBACK") }
            throw error
        }
    }

    /// Runs SQL that returns no rows.
    func execute(_ sql: String) throws {
        try check(sqlite3_exec(db, sql, nil, nil, nil), sql)
    }

    /// The first column of the first row of `sql`, as text.
    func queryText(_ sql: String) throws -> String {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        try check(sqlite3_step(statement), sql, expect: SQLITE_ROW)
        return sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? ""
    }

    private func step(_ statement: OpaquePointer?, _ what: String) throws {
        defer { sqlite3_reset(statement) }
        try check(sqlite3_step(statement), what, expect: SQLITE_DONE)
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil), "prepare \(sql)")
        return statement
    }

    private func check(_ rc: Int32, _ what: String, expect: Int32 = SQLITE_OK) throws {
        guard rc != expect else { return }
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        throw BenchError(.engine, "SQLite '\(path)': \(what): \(message) (code \(rc))")
    }
}
