import Foundation
import GRDB
import LedgerCore

/// Reads for `iapledger verify`.
extension LedgerReader {
    /// Every entry in id order, rebuilt, with the stored rules text and hash.
    public func forEachStoredEntry(_ body: (_ id: Int64, _ entry: EntryDraft, _ rulesJSON: String, _ hash: String) throws -> Void) throws {
        let cursor = try Row.fetchCursor(db, sql: "SELECT * FROM entry ORDER BY id")
        while let r = try cursor.next() {
            try body(r["id"], try draft(r), r["rules_json"], r["hash"])
        }
    }

    /// A finished run as `verify` checks it: its recorded chain head, and the hash of the last
    /// entry it could see (entries of runs up to it) as the ledger now holds them.
    public struct RunHead {
        public var runId: Int64
        public var asOf: String
        public var finishedAt: String
        public var head: String?
        public var expected: String
        /// The last entry the run could see (nil: none yet).
        public var lastEntryId: Int64?
    }

    /// Every finished run's recorded chain head and the hash of the last entry it could see.
    public func runChainHeads() throws -> [RunHead] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT r.id, r.as_of, r.finished_at, r.chain_head,
                   ifnull((SELECT e.hash FROM entry e WHERE e.run_id <= r.id ORDER BY e.id DESC LIMIT 1), ?),
                   (SELECT max(e.id) FROM entry e WHERE e.run_id <= r.id)
            FROM run r WHERE r.finished_at IS NOT NULL ORDER BY r.id
            """), arguments: [EntryHash.genesis]).map {
            RunHead(runId: $0[0], asOf: $0[1], finishedAt: $0[2], head: $0[3], expected: $0[4], lastEntryId: $0[5])
        }
    }

    /// Entries whose run is missing or never finished (a run's entries commit with its finish).
    public func entriesOutsideFinishedRuns() throws -> [(entryId: Int64, runId: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT e.id, e.run_id FROM entry e LEFT JOIN run r ON r.id = e.run_id
            WHERE r.id IS NULL OR r.finished_at IS NULL ORDER BY e.id LIMIT 50
            """).map { ($0[0], $0[1]) }
    }

    /// Every source record's stored text and the SHA-256 recorded when it was read, with its
    /// file's path and hash, in id order (streamed: the text of a big ledger is gigabytes).
    public func forEachSourceRecordText(_ body: (_ path: String, _ line: Int, _ outcome: String, _ recordSHA256: String,
                                                 _ fileSHA256: String, _ raw: String) throws -> Void) throws {
        let cursor = try Row.fetchCursor(db, sql: """
            SELECT f.path, r.line, r.outcome, r.record_sha256, f.sha256, CAST(r.raw AS BLOB)
            FROM source_record r JOIN source_file f ON f.id = r.file_id ORDER BY r.id
            """)
        while let r = try cursor.next() { try body(r[0], r[1], r[2], r[3], r[4], Self.text(r[5])) }
    }

    /// The ledger's schema objects (tables, indexes, triggers, views) by type and name, with their SQL.
    public func schemaObjects() throws -> [String: String] {
        var objects: [String: String] = [:]
        for r in try Row.fetchAll(db, sql: "SELECT type, name, ifnull(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite_stat%'") {
            objects["\(r[0] as String) \(r[1] as String)"] = r[2]
        }
        return objects
    }

    /// The source record that first brought a transaction: the file's kind and path, the line and the raw text.
    public func firstSource(of transactionId: String) throws -> (kind: String, path: String, line: Int, raw: String)? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT f.kind, f.path, r.line, CAST(r.raw AS BLOB) FROM store_transaction t
            JOIN source_record r ON r.id = t.first_record_id JOIN source_file f ON f.id = r.file_id
            WHERE t.transaction_id = ?
            """), arguments: [transactionId]).map { ($0[0], $0[1], $0[2], Self.text($0[3])) }
    }

    /// A record's raw text read as its bytes: SQLite keeps a text's NUL characters, but reading
    /// it back as a C string would stop at the first one.
    static func text(_ bytes: Data?) -> String {
        bytes.map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}
