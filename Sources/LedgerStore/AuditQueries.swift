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

    /// Each finished run's recorded chain head and the hash of the last entry it could see.
    public func runChainHeads() throws -> [(runId: Int64, head: String?, expected: String)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT r.id, r.chain_head,
                   ifnull((SELECT e.hash FROM entry e WHERE e.run_id <= r.id ORDER BY e.id DESC LIMIT 1), ?)
            FROM run r WHERE r.finished_at IS NOT NULL ORDER BY r.id
            """), arguments: [EntryHash.genesis]).map { ($0[0], $0[1], $0[2]) }
    }

    /// The source record that first brought a transaction: the file's kind and path, the line and the raw text.
    public func firstSource(of transactionId: String) throws -> (kind: String, path: String, line: Int, raw: String)? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT f.kind, f.path, r.line, r.raw FROM store_transaction t
            JOIN source_record r ON r.id = t.first_record_id JOIN source_file f ON f.id = r.file_id
            WHERE t.transaction_id = ?
            """), arguments: [transactionId]).map { ($0[0], $0[1], $0[2], $0[3]) }
    }
}
