import GRDB
import GRDBSQLite

/// The nightly run's hot inserts and updates (a million-transaction night runs each a million
/// times or more), bound and stepped through SQLite's C API on GRDB's prepared statement.
/// GRDB's `execute(arguments:)` builds an array of `DatabaseValue`s for every call; here each
/// value goes straight to `sqlite3_bind_*`. Errors (a constraint, a trigger's RAISE) come back
/// as GRDB's `DatabaseError` with SQLite's message, as through GRDB.
struct FastStatement {
    private let statement: Statement
    private let handle: SQLiteStatement
    private let db: Database
    private var index: Int32 = 0
    /// The first failed bind (SQLite's code), reported by `run`.
    private var bindFailure: (code: Int32, index: Int32)?

    private mutating func check(_ code: Int32) {
        if code != SQLITE_OK && bindFailure == nil { bindFailure = (code, index) }
    }

    init(_ statement: Statement, in db: Database) {
        self.statement = statement
        self.handle = statement.sqliteStatement
        self.db = db
    }

    /// SQLite copies the bytes before `bind` returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    mutating func bind(_ value: Int64?) {
        index += 1
        check(value.map { sqlite3_bind_int64(handle, index, $0) } ?? sqlite3_bind_null(handle, index))
    }

    mutating func bind(_ value: Int?) { bind(value.map(Int64.init)) }

    mutating func bind(_ value: Bool) { bind(Int64(value ? 1 : 0)) }

    mutating func bind(_ value: String?) {
        index += 1
        guard var value else { check(sqlite3_bind_null(handle, index)); return }
        let code = value.withUTF8 { bytes -> Int32 in
            guard bytes.count <= Int(Int32.max) else { return SQLITE_TOOBIG }
            // A zero-length string binds as '' (not NULL) from any non-nil pointer.
            let empty: StaticString = ""
            let base = UnsafeRawPointer(bytes.baseAddress ?? empty.utf8Start).assumingMemoryBound(to: CChar.self)
            return sqlite3_bind_text(handle, index, base, Int32(bytes.count), Self.transient)
        }
        check(code)
    }

    /// Steps an insert or update to its end and resets it for the next call (a row coming back
    /// is an error: such a statement is run for its effect).
    mutating func run() throws {
        let statement = self.statement
        try forEachRow { _ in
            throw DatabaseError(resultCode: .SQLITE_ROW, message: "a statement run for its effect returned a row", sql: statement.sql)
        }
    }

    /// Steps a query to its end, handing each result row to `body` (columns read through the C
    /// API, no `Row` copied per result), and resets it for the next call.
    mutating func forEachRow(_ body: (FastRow) throws -> Void) throws {
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            index = 0
            bindFailure = nil
        }
        if let failure = bindFailure {
            throw DatabaseError(resultCode: ResultCode(rawValue: failure.code),
                                message: "cannot bind parameter \(failure.index)", sql: statement.sql)
        }
        precondition(index == sqlite3_bind_parameter_count(handle), "bound \(index) of \(sqlite3_bind_parameter_count(handle)) parameters: \(statement.sql)")
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else {
                let message = db.sqliteConnection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
            }
            try body(FastRow(handle: handle))
        }
    }
}

/// One result row of a `FastStatement` query, valid only inside `forEachRow`'s body.
struct FastRow {
    let handle: SQLiteStatement

    func isNull(_ i: Int32) -> Bool { sqlite3_column_type(handle, i) == SQLITE_NULL }
    func int64(_ i: Int32) -> Int64 { sqlite3_column_int64(handle, i) }
    func int64OrNil(_ i: Int32) -> Int64? { isNull(i) ? nil : int64(i) }
    func text(_ i: Int32) -> String {
        guard let p = sqlite3_column_text(handle, i) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, i))), as: UTF8.self)
    }
    func textOrNil(_ i: Int32) -> String? { isNull(i) ? nil : text(i) }
    /// A text column's UTF-8 bytes, valid until the row moves on.
    func bytes(_ i: Int32) -> UnsafeRawBufferPointer {
        guard let p = sqlite3_column_text(handle, i) else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, i)))
    }
}
