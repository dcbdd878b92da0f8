import Foundation
import GRDB
import LedgerCore

/// The config and rules files the runs posted by, kept whole (schema v26): `input_text`, one
/// row per distinct content, keyed by its SHA-256 (the one `run_input` records and the seal
/// covers), compressed as the records' text is.
extension LedgerWriter {
    /// Keeps `bytes`, the content whose SHA-256 a run recorded (once per distinct content).
    public func keepInputText(_ bytes: [UInt8]) throws {
        try db.cachedStatement(sql: "INSERT OR IGNORE INTO input_text (sha256, codec, text_bytes, data) VALUES (?, 'zstd', ?, ?)")
            .execute(arguments: [Hashing.sha256Hex(bytes), bytes.count, Data(RecordText.compress(bytes))])
    }
}

extension LedgerReader {
    /// How a run's `run_input` names the build of iapledger that ran it (its GNU build ID).
    public static let buildInput = "iapledger build"

    /// Whether the ledger keeps the files runs posted by (schema v26 on).
    public func keepsInputTexts() throws -> Bool { try db.tableExists("input_text") }

    /// The content kept under `sha256`; nil when none is kept, or it does not decompress to
    /// its recorded size.
    public func inputText(sha256: String) throws -> [UInt8]? {
        guard try keepsInputTexts(),
              let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT text_bytes, data FROM input_text WHERE sha256 = ?"),
                                         arguments: [sha256]) else { return nil }
        return RecordText.decompress(row[1] ?? Data(), textBytes: row[0])
    }

    /// The config and rules files run `runId` recorded posting by (path and SHA-256; not the
    /// roots it trusted).
    public func runFiles(_ runId: Int64) throws -> [(path: String, sha256: String)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT path, sha256 FROM run_input WHERE run_id = ? AND path NOT LIKE 'trusted root: %' AND path <> '\(Self.buildInput)' ORDER BY path
            """), arguments: [runId]).map { ($0[0], $0[1]) }
    }

    /// The build of iapledger run `runId` recorded running with (its GNU build ID; nil when
    /// it recorded none).
    public func runBuild(_ runId: Int64) throws -> String? {
        guard try db.tableExists("run_input") else { return nil }
        return try String.fetchOne(db.cachedStatement(sql: "SELECT sha256 FROM run_input WHERE run_id = ? AND path = '\(Self.buildInput)'"),
                                   arguments: [runId])
    }

    /// The kept files that no longer give their SHA-256 (damaged or altered: each named by the
    /// paths the runs read it as), and the files of runs that kept them (written with schema
    /// v26 or later) whose content is missing.
    public func inputTextProblems() throws -> (altered: [String], missing: [String]) {
        guard try keepsInputTexts() else { return ([], []) }
        var altered: [String] = [], problems: [String] = []
        for r in try Row.fetchAll(db, sql: "SELECT sha256, text_bytes, data FROM input_text ORDER BY sha256") {
            let sha: String = r[0]
            if RecordText.decompress(r[2] ?? Data(), textBytes: r[1]).map({ Hashing.sha256Hex($0) }) != sha {
                // Its paths and the runs that posted by it (a file unchanged for years: the first
                // and last of many).
                let read = try Row.fetchAll(db.cachedStatement(sql: """
                    SELECT path, min(run_id), max(run_id), count(DISTINCT run_id), group_concat(DISTINCT run_id)
                    FROM (SELECT path, run_id FROM run_input WHERE sha256 = ? ORDER BY path, run_id) GROUP BY path
                    """), arguments: [sha]).map { r -> String in
                    let count: Int = r[3]
                    let runs = count == 1 ? "run \(r[1] as Int64)"
                        : count <= 4 ? "runs " + (r[4] as String).replacingOccurrences(of: ",", with: ", ")
                        : "\(count) runs, \(r[1] as Int64) to \(r[2] as Int64)"
                    return "\(r[0] as String) (\(runs))"
                }
                altered.append("the kept copy of \(read.isEmpty ? "a config or rules file" : read.joined(separator: " and ")), SHA-256 \(sha), no longer gives its SHA-256: it was altered after it was kept; what is said below of the recorded rules of the sales those runs posted (compared with it as it is now, or not checked where it no longer reads) follows from this")
            }
        }
        let migrations = Schema.migrator().migrations
        func from(_ first: String) -> String { migrations[migrations.firstIndex(of: first)!...].map { "'\($0)'" }.joined(separator: ", ") }
        // The roots a run verified signed data to are kept from schema v35 on (some runs of v34
        // kept them, some did not): one deleted left verify checking that run's records by the
        // certificate on disk, as if nothing were missing.
        for r in try Row.fetchAll(db, sql: """
            SELECT i.run_id, i.path, i.sha256, i.path LIKE 'trusted root: %' FROM run_input i JOIN run ON run.id = i.run_id
            WHERE i.path <> '\(Self.buildInput)'
              AND CASE WHEN i.path LIKE 'trusted root: %' THEN run.schema_migration IN (\(from("v35-link-and-resolution-guards")))
                       ELSE run.schema_migration IN (\(from("v26-input-texts"))) END
              AND NOT EXISTS (SELECT 1 FROM input_text t WHERE t.sha256 = i.sha256)
            ORDER BY i.run_id, i.path LIMIT 20
            """) {
            let path: String = r[1]
            problems.append(r[3] as Bool
                ? "run \(r[0] as Int64) verified signed data to the root \(path.dropFirst("trusted root: ".count)) (SHA-256 \(r[2] as String)), whose certificate it kept, but the ledger no longer holds it: it was deleted"
                : "run \(r[0] as Int64) posted by \(path) (SHA-256 \(r[2] as String)), whose content it kept, but the ledger no longer holds it: it was deleted")
        }
        return (altered, problems)
    }
}

extension LedgerReader {
    /// The fingerprint of the rules run `runId` reconciled by (`Reconciler.rulesFingerprint`).
    public func reconciliationRules(ofRun runId: Int64) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT reconciliation_rules FROM run WHERE id = ?"), arguments: [runId])
    }

    /// The ledger's last finished run (before the one running, if any).
    public func lastFinishedRun() throws -> (id: Int64, asOf: Day)? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, as_of FROM run WHERE finished_at IS NOT NULL ORDER BY id DESC LIMIT 1"))
        else { return nil }
        return (r[0], Day(iso: r[1] as String)!)
    }

    /// The roots run `runId` recorded verifying signed data to (`trusted root: <name>` in
    /// `run_input`, the SHA-256 of each one's DER), nil for a run that recorded none (before
    /// schema v22).
    public func runRoots(_ runId: Int64) throws -> [(name: String, sha256: String)]? {
        guard try db.tableExists("run_input") else { return nil }
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT substr(path, 15), sha256 FROM run_input WHERE run_id = ? AND path LIKE 'trusted root: %' ORDER BY path
            """), arguments: [runId]).map { (name: $0[0] as String, sha256: $0[1] as String) }
        return rows.isEmpty ? nil : rows
    }

    /// The ids of the runs that finished, in order.
    public func finishedRunIds() throws -> [Int64] {
        try Int64.fetchAll(db, sql: "SELECT id FROM run WHERE finished_at IS NOT NULL ORDER BY id")
    }

    /// The version of iapledger run `runId` recorded running with, and whether its schema was
    /// this version's newest (runs before v20 recorded none: not).
    public func runVersion(_ runId: Int64) throws -> (tool: String, newestSchema: Bool)? {
        // (A ledger before v20, opened read-only by `verify`, has no such column.)
        let recordsSchema = try db.columns(in: "run").contains { $0.name == "schema_migration" }
        return try Row.fetchOne(db.cachedStatement(sql: "SELECT tool_version, \(recordsSchema ? "schema_migration" : "NULL") FROM run WHERE id = ?"),
                                arguments: [runId]).map { ($0[0], ($0[1] as String?) == Schema.newestMigration) }
    }

    /// Every sale entry of `book`, in entry order, without its postings (its amounts and the
    /// rules it recorded), with the run that posted it: what the night after a rules change
    /// checks against the rules now.
    public func forEachPostedSale(book: Book, _ body: (EntryDraft, Int64) throws -> Void) throws {
        let cursor = try Row.fetchCursor(db, sql: "SELECT * FROM entry WHERE kind = 'sale' AND book = ? ORDER BY id", arguments: [book.rawValue])
        while let r = try cursor.next() { try body(try draft(r, postings: []), r["run_id"]) }
    }

    /// Records run `runId` read pending or rejected and settled itself (another record of the
    /// same night verified them: a retried receipt, a cut line read whole).
    public func recordsReadAndSettled(byRun runId: Int64) throws -> Int {
        try Int.fetchOne(db, sql: """
            SELECT count(*) FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.resolved_run_id = ? AND f.run_id = ?
            """, arguments: [runId, runId]) ?? 0
    }

    /// How many records of earlier runs' files run `runId` resolved (settled by its data, or
    /// dismissed); its own records settled the same night are not counted.
    public func recordsResolved(byRun runId: Int64) throws -> Int {
        try Int.fetchOne(db, sql: """
            SELECT count(*) FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.resolved_run_id = ? AND f.run_id < ?
            """, arguments: [runId, runId]) ?? 0
    }

    /// How many sale entries `book` holds.
    public func postedSales(book: Book) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM entry WHERE kind = 'sale' AND book = ?", arguments: [book.rawValue]) ?? 0
    }

    /// The transactions with a finding of `code` about them (not about one record).
    public func transactionsWithFinding(code: String) throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT transaction_id FROM finding WHERE code = ? AND record_id IS NULL", arguments: [code]))
    }

    /// A transaction's finding of `code`: what it says, whether it is open, and whether it was
    /// dismissed (resolved with a note, schema v30 on).
    public func transactionFinding(code: String, transactionId: String) throws -> (message: String, open: Bool, dismissed: Bool, note: String?)? {
        let note = try hasFindingNotes() ? "resolved_note" : "NULL"
        guard let r = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT message, resolved_run_id IS NULL, \(note) FROM finding WHERE code = ? AND transaction_id = ? AND record_id IS NULL
            """), arguments: [code, transactionId]) else { return nil }
        let n: String? = r[2]
        return (r[0], r[1], n != nil, n)
    }

    /// The share of each refunded sale of `book` refunded now, in thousandths of a percent
    /// (100000: in full): its refunds less their reversals.
    public func refundedShares(book: Book) throws -> [String: Int64] {
        var out: [String: Int64] = [:]
        for r in try Row.fetchAll(db, sql: """
            SELECT transaction_id, sum(CASE kind WHEN 'refund' THEN 1 ELSE -1 END * ifnull(refund_percentage, 100000))
            FROM entry WHERE book = ? AND kind IN ('refund', 'refund_reversal') GROUP BY transaction_id
            """, arguments: [book.rawValue]) {
            let share: Int64 = r[1]
            if share > 0 { out[r[0]] = min(share, 100_000) }
        }
        return out
    }
}

extension LedgerReader {
    /// The kinds of input files (`orders`, `receipts`, `signed`) earlier nights read.
    public func fileKindsRead() throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT DISTINCT kind FROM source_file"))
    }

    /// The files run `runId` read whose bytes a file read before under another path had (a
    /// file copied or renamed in the inbox): each with the first such file and the day of the
    /// night that read it.
    public func filesRepeatingEarlierOnes(runId: Int64) throws -> [(path: String, earlier: String, readOn: String)] {
        try Row.fetchAll(db, sql: """
            SELECT f.path, g.path, run.as_of FROM source_file f
            JOIN source_file g ON g.id = (SELECT min(id) FROM source_file WHERE sha256 = f.sha256 AND path <> f.path AND id < f.id)
            JOIN run ON run.id = g.run_id
            WHERE f.run_id = ? AND f.records > 0
              AND EXISTS (SELECT 1 FROM source_record r WHERE r.file_id = f.id AND r.reason_code IS NOT 'EMPTY_FILE')
            ORDER BY f.id
            """, arguments: [runId]).map { ($0[0], $0[1], $0[2]) }
    }
}
