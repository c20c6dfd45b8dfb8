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
    private var update: OpaquePointer?
    private var select: OpaquePointer?
    /// The keyset scan of `changefeed`, prepared on first use.
    private var scanStatement: OpaquePointer?
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?
    private var rollback: OpaquePointer?

    /// A rowid table (rows in insertion order) plus the primary-key index on `recordName`: the same shape as
    /// Cloudlet's log plus its by-name map. Measured at 100,000 records, `WITHOUT ROWID` (one B-tree keyed by name)
    /// was 2.5-5x slower at `fillrandom` (whole rows split pages in random key order) and ~10% faster at
    /// `readrandom`; this is the stronger anchor overall.
    static let createTable = """
        CREATE TABLE IF NOT EXISTS records(
            recordName TEXT PRIMARY KEY, recordType TEXT, title TEXT, count INTEGER, score REAL,
            created INTEGER, tags TEXT, payload BLOB)
        """

    /// `PRAGMA synchronous` for a durability: FULL syncs the WAL at every commit; NORMAL only at checkpoints (in
    /// WAL mode a commit then survives a process crash, not a power loss).
    static func synchronous(_ d: BenchDurability) -> (name: String, value: String) {
        d == .fsync ? ("FULL", "2") : ("NORMAL", "1")
    }

    /// SQLite's default page cache (`cache_size = -2000`), in KiB.
    static let defaultCacheKiB = 2000

    /// Opens `path` (creating it), in WAL mode with `synchronous` for `durability`, `busy_timeout` and, when
    /// `cacheBytes` is set, a page cache of that size, and prepares the statements. Fails if SQLite did not take
    /// the settings, so a run cannot silently measure something else.
    init(path: String, durability: BenchDurability, cacheBytes: Int? = nil, busyTimeoutMilliseconds: Int32 = 60_000) throws {
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
            let wanted = Self.synchronous(durability)
            try execute("PRAGMA synchronous=\(wanted.name)")
            let sync = try queryText("PRAGMA synchronous")
            guard sync == wanted.value else {
                throw BenchError(.engine, "SQLite '\(path)': synchronous is \(sync), not \(wanted.value) (\(wanted.name))")
            }
            if let cacheBytes {
                try execute("PRAGMA cache_size=-\(cacheBytes / 1024)")
                guard try cacheKiB() == cacheBytes / 1024 else {
                    throw BenchError(.engine, "SQLite '\(path)': cache_size is not \(cacheBytes / 1024) KiB")
                }
            }
            try execute(Self.createTable)
            insert = try prepare(
                "INSERT INTO records(recordName, recordType, title, count, score, created, tags, payload) "
                    + "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            update = try prepare(
                "UPDATE records SET recordType = ?2, title = ?3, count = ?4, score = ?5, created = ?6, tags = ?7, "
                    + "payload = ?8 WHERE recordName = ?1")
            select = try prepare(
                "SELECT recordType, title, count, score, created, tags, payload FROM records WHERE recordName = ?1")
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
        for statement in [insert, update, select, begin, commit, rollback, scanStatement] { sqlite3_finalize(statement) }
        scanStatement = nil
        insert = nil
        update = nil
        select = nil
        begin = nil
        commit = nil
        rollback = nil
        sqlite3_close_v2(db)
        db = nil
    }

    /// Inserts one record; in autocommit mode this is its own transaction.
    func insert(_ r: GeneratedRecord) throws {
        guard let insert else { throw BenchError(.engine, "SQLite '\(path)': connection is closed") }
        try write(insert, r, "insert")
    }

    /// Sets every column of an existing record's row; throws if there is no such row.
    func update(_ r: GeneratedRecord) throws {
        guard let update else { throw BenchError(.engine, "SQLite '\(path)': connection is closed") }
        try write(update, r, "update")
        guard sqlite3_changes(db) == 1 else {
            throw BenchError(.engine, "SQLite '\(path)': update '\(r.recordName)' changed \(sqlite3_changes(db)) rows")
        }
    }

    /// Binds the record to `?1`…`?8` of `statement` (the column order of ``createTable``) and runs it.
    private func write(_ statement: OpaquePointer, _ r: GeneratedRecord, _ what: String) throws {
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        let transient = csqlite_transient()
        try check(sqlite3_bind_text(statement, 1, r.recordName, -1, transient), "bind recordName")
        try check(sqlite3_bind_text(statement, 2, r.recordType, -1, transient), "bind recordType")
        try check(sqlite3_bind_text(statement, 3, r.title, -1, transient), "bind title")
        try check(sqlite3_bind_int64(statement, 4, r.count), "bind count")
        try check(sqlite3_bind_double(statement, 5, r.score), "bind score")
        try check(sqlite3_bind_int64(statement, 6, r.created), "bind created")
        try check(sqlite3_bind_text(statement, 7, r.tags.joined(separator: ","), -1, transient), "bind tags")
        try r.payload.withUnsafeBytes { bytes in
            try check(sqlite3_bind_blob(statement, 8, bytes.baseAddress, Int32(bytes.count), transient), "bind payload")
        }
        try check(sqlite3_step(statement), "\(what) '\(r.recordName)'", expect: SQLITE_DONE)
    }

    /// The row of `name` as a record (every column read into Swift values); nil if there is none.
    func read(_ name: String) throws -> GeneratedRecord? {
        guard let select else { throw BenchError(.engine, "SQLite '\(path)': connection is closed") }
        defer {
            sqlite3_reset(select)
            sqlite3_clear_bindings(select)
        }
        try check(sqlite3_bind_text(select, 1, name, -1, csqlite_transient()), "bind recordName")
        let rc = sqlite3_step(select)
        if rc == SQLITE_DONE { return nil }
        try check(rc, "select '\(name)'", expect: SQLITE_ROW)
        // sqlite3_column_text / _blob before sqlite3_column_bytes, as SQLite's docs ask.
        func text(_ column: Int32) -> String {
            guard let p = sqlite3_column_text(select, column) else { return "" }
            let n = Int(sqlite3_column_bytes(select, column))
            return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
        }
        let tags = text(5)
        let blob = sqlite3_column_blob(select, 6)
        let blobCount = Int(sqlite3_column_bytes(select, 6))
        return GeneratedRecord(
            recordName: name, recordType: text(0), title: text(1), count: sqlite3_column_int64(select, 2),
            score: sqlite3_column_double(select, 3), created: sqlite3_column_int64(select, 4),
            tags: tags.isEmpty ? [] : tags.split(separator: ",").map(String.init),
            payload: blob.map { Array(UnsafeRawBufferPointer(start: $0, count: blobCount)) } ?? [])
    }

    /// One page of a keyset scan in rowid (commit) order: decodes up to `limit` rows after `afterRowID` into the
    /// app's form; returns how many and the last rowid.
    func scan(afterRowID: Int64, limit: Int) throws -> (count: Int, last: Int64) {
        let sql = "SELECT rowid, recordName, recordType, title, count, score, created, tags, payload FROM records "
            + "WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"
        if scanStatement == nil { scanStatement = try prepare(sql) }
        let st = scanStatement
        defer { sqlite3_reset(st) }
        sqlite3_bind_int64(st, 1, afterRowID)
        sqlite3_bind_int64(st, 2, Int64(limit))
        var n = 0
        var last = afterRowID
        while true {
            let rc = sqlite3_step(st)
            if rc == SQLITE_DONE { break }
            try check(rc, sql, expect: SQLITE_ROW)
            func text(_ column: Int32) -> String {
                guard let p = sqlite3_column_text(st, column) else { return "" }
                return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(st, column))), as: UTF8.self)
            }
            last = sqlite3_column_int64(st, 0)
            let tags = text(7)
            let blob = sqlite3_column_blob(st, 8)
            let blobCount = Int(sqlite3_column_bytes(st, 8))
            let r = GeneratedRecord(
                recordName: text(1), recordType: text(2), title: text(3), count: sqlite3_column_int64(st, 4),
                score: sqlite3_column_double(st, 5), created: sqlite3_column_int64(st, 6),
                tags: tags.isEmpty ? [] : tags.split(separator: ",").map(String.init),
                payload: blob.map { Array(UnsafeRawBufferPointer(start: $0, count: blobCount)) } ?? [])
            if r.count >= Int64.min { n += 1 }
        }
        return (n, last)
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

    /// The page cache's size in KiB (`PRAGMA cache_size`: negative for KiB, positive for pages).
    func cacheKiB() throws -> Int {
        let size = Int(try queryText("PRAGMA cache_size")) ?? 0
        return size < 0 ? -size : size * (Int(try queryText("PRAGMA page_size")) ?? 0) / 1024
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
