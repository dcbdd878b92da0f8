import GRDB
import LedgerCore

/// A record left pending or rejected that no later record will settle (an Excel lock file
/// `~$orders.csv` read as orders before it was moved, a file saved by a spreadsheet and then put
/// back as it was): `iapledger dismiss` asks for it to leave the open lists, with who asks and
/// why (schema v29, `record_dismissal`: kept as asked, never withdrawn). The next night resolves
/// it with the note `dismissed by <who> on <day>: <why>`, and seals the resolution and the ask
/// with its run, as a record a later line settles; nothing else changes (it is still not
/// posted, and what it carried is not applied).
public struct DismissCandidate: Equatable {
    public var recordId: Int64
    public var path: String
    public var line: Int
    public var outcome: String
    public var reason: String
    /// Already resolved (by a later record, or a dismissal a night applied), with how.
    public var resolvedNote: String?
    /// A dismissal asked for it and not yet applied by a night.
    public var asked: Bool
}

/// The note a night resolves a dismissed record with: `dismissed by <who> on <day>: <why>`.
public enum DismissalNote {
    public static func text(by: String, at: String, reason: String) -> String {
        "dismissed by \(by) on \(at.prefix(10)): \(reason)"
    }
    /// The same of a `record_dismissal` row named `d`, in SQL (the night writes it; `verify`
    /// compares a resolution with it).
    static let sql = "'dismissed by ' || d.asked_by || ' on ' || substr(d.asked_at, 1, 10) || ': ' || d.reason"
}

extension LedgerReader {
    /// The records not verified at `path` (every version of the file read), on `line`, or on
    /// every line when `line` is nil, in the order read.
    public func dismissCandidates(path: String, line: Int?) throws -> [DismissCandidate] {
        let asked = try db.tableExists("record_dismissal")
            ? "EXISTS (SELECT 1 FROM record_dismissal d WHERE d.record_id = r.id)" : "0"
        return try Row.fetchAll(db, sql: """
            SELECT r.id, f.path, r.line, r.outcome, coalesce(r.reason_code || ': ', '') || coalesce(r.reason, ''),
                   CASE WHEN r.resolved_run_id IS NULL THEN NULL ELSE coalesce(r.resolved_note, '') END, \(asked)
            FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = ? AND r.outcome <> 'verified' AND (? IS NULL OR r.line = ?)
            ORDER BY r.id
            """, arguments: [path, line, line]).map {
            DismissCandidate(recordId: $0[0], path: $0[1], line: $0[2], outcome: $0[3], reason: $0[4], resolvedNote: $0[5], asked: $0[6])
        }
    }

}

/// A finding named for dismissal (`iapledger dismiss --finding CODE:TRANSACTION`), as it stands.
public struct FindingCandidate: Equatable {
    public var findingId: Int64
    public var code: String
    public var transactionId: String
    public var message: String
    /// Resolved already (by the nights, or a dismissal applied), with its note if any.
    public var resolved: Bool
    public var resolvedNote: String?
    /// A dismissal asked for it as it reads now and not yet applied by a night.
    public var asked: Bool
}

extension LedgerReader {
    /// Whether findings keep a resolution note (schema v30 on).
    func hasFindingNotes() throws -> Bool {
        try db.columns(in: "finding").contains { $0.name == "resolved_note" }
    }

    /// The findings of `code` about `transactionId` (one per record it names, or one).
    public func findingCandidates(code: String, transactionId: String) throws -> [FindingCandidate] {
        let note = try hasFindingNotes() ? "f.resolved_note" : "NULL"
        return try Row.fetchAll(db, sql: """
            SELECT f.id, f.code, f.transaction_id, f.message, f.resolved_run_id IS NOT NULL, \(note), \(try dismissalAsked())
            FROM finding f WHERE f.code = ? AND f.transaction_id = ? ORDER BY f.id
            """, arguments: [code, transactionId]).map {
            FindingCandidate(findingId: $0[0], code: $0[1], transactionId: $0[2], message: $0[3], resolved: $0[4], resolvedNote: $0[5], asked: $0[6])
        }
    }

    /// Whether a dismissal was asked for finding `f` as it reads now (SQL; false before v30).
    func dismissalAsked() throws -> String {
        try db.tableExists("finding_dismissal")
            ? "EXISTS (SELECT 1 FROM finding_dismissal d WHERE d.finding_id = f.id AND d.message = f.message)" : "0"
    }

    /// Every open finding of `code`, as it reads now.
    public func openFindingCandidates(code: String) throws -> [FindingCandidate] {
        try Row.fetchAll(db, sql: """
            SELECT f.id, f.code, f.transaction_id, f.message, \(try dismissalAsked())
            FROM finding f WHERE f.code = ? AND f.resolved_run_id IS NULL ORDER BY f.transaction_id, f.id
            """, arguments: [code]).map {
            FindingCandidate(findingId: $0[0], code: $0[1], transactionId: $0[2], message: $0[3], resolved: false, resolvedNote: nil, asked: $0[4])
        }
    }

    /// The codes of the findings the ledger holds, of any status, sorted.
    public func findingCodes() throws -> [String] {
        try String.fetchAll(db, sql: "SELECT DISTINCT code FROM finding ORDER BY code")
    }

    /// What night run `runId` took off the open lists as dismissed: records (where each was
    /// read, its code) and findings (code, transaction), each with its note (`dismissed by
    /// <who> on <day>: <why>`); the first `limit` of each, in the order stored, and how many.
    public func dismissedByRun(_ runId: Int64, limit: Int) throws
        -> (records: [(what: String, note: String)], recordCount: Int, findings: [(what: String, note: String)], findingCount: Int) {
        let prefix = "substr(x.resolved_note, 1, 13) = 'dismissed by '"
        var records: [(what: String, note: String)] = [], findings: [(what: String, note: String)] = []
        var recordCount = 0, findingCount = 0
        if try db.tableExists("record_dismissal") {
            let rows = try Row.fetchCursor(db, sql: """
                SELECT f.path || ':' || x.line || ifnull(' (' || x.reason_code || ')', ''), x.resolved_note
                FROM source_record x JOIN source_file f ON f.id = x.file_id WHERE x.resolved_run_id = ? AND \(prefix) ORDER BY x.id
                """, arguments: [runId])
            while let r = try rows.next() {
                recordCount += 1
                if records.count < limit { records.append((r[0], r[1])) }
            }
        }
        if try db.tableExists("finding_dismissal"), try db.columns(in: "finding").contains(where: { $0.name == "resolved_note" }) {
            let rows = try Row.fetchCursor(db, sql: """
                SELECT x.code || ' ' || x.transaction_id, x.resolved_note FROM finding x WHERE x.resolved_run_id = ? AND \(prefix) ORDER BY x.id
                """, arguments: [runId])
            while let r = try rows.next() {
                findingCount += 1
                if findings.count < limit { findings.append((r[0], r[1])) }
            }
        }
        return (records, recordCount, findings, findingCount)
    }

    /// The messages of every finding of `code` about `transactionId` (by any record, or none).
    public func findingMessages(code: String, transactionId: String) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: "SELECT message FROM finding WHERE code = ? AND transaction_id = ?"),
                            arguments: [code, transactionId])
    }

    /// The message of the finding of `code` about `transactionId` that names no record, if any.
    public func findingMessage(code: String, transactionId: String) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT message FROM finding WHERE code = ? AND transaction_id = ? AND record_id IS NULL"),
                            arguments: [code, transactionId])
    }

}

extension LedgerWriter {
    /// Records the dismissal of each finding, as its message reads now.
    public func askFindingDismissal(_ findings: [FindingCandidate], askedAt: String, askedBy: String, reason: String) throws {
        let insert = try db.cachedStatement(sql: """
            INSERT INTO finding_dismissal (finding_id, message, asked_at, asked_by, reason) VALUES (?, ?, ?, ?, ?)
            """)
        for f in findings { try insert.execute(arguments: [f.findingId, f.message, askedAt, askedBy, reason]) }
    }

    /// Resolves, by the night `runId`, every open finding a dismissal was asked for as it reads
    /// now, before the night began; how many. One found again since with another message
    /// stays open (what it says now was not seen by whoever dismissed it).
    public func applyFindingDismissals(runId: Int64) throws -> Int {
        guard try db.tableExists("finding_dismissal") else { return 0 }
        let asked = """
            FROM finding_dismissal d WHERE d.finding_id = finding.id AND d.message = finding.message
              AND substr(d.asked_at, 1, 19) <= (SELECT substr(started_at, 1, 19) FROM run WHERE id = ?1)
            """
        try db.execute(sql: """
            UPDATE finding SET resolved_run_id = ?1, resolved_note = (SELECT \(DismissalNote.sql) \(asked) ORDER BY d.id DESC LIMIT 1)
            WHERE resolved_run_id IS NULL AND EXISTS (SELECT 1 \(asked))
            """, arguments: [runId])
        return db.changesCount
    }

    /// Records the dismissal of each record (open, not asked for before: the caller checks).
    public func askDismissal(recordIds: [Int64], askedAt: String, askedBy: String, reason: String) throws {
        let insert = try db.cachedStatement(sql: "INSERT INTO record_dismissal (record_id, asked_at, asked_by, reason) VALUES (?, ?, ?, ?)")
        for id in recordIds { try insert.execute(arguments: [id, askedAt, askedBy, reason]) }
    }

    /// Resolves, by the night `runId`, every open record a dismissal was asked for before the
    /// night began (to the second; one dated later, by a clock set wrong or by hand, waits);
    /// how many.
    public func applyDismissals(runId: Int64) throws -> Int {
        guard try db.tableExists("record_dismissal") else { return 0 }
        try db.execute(sql: """
            UPDATE source_record SET resolved_run_id = ?1,
                resolved_note = (SELECT \(DismissalNote.sql) FROM record_dismissal d WHERE d.record_id = source_record.id)
            WHERE resolved_run_id IS NULL AND outcome <> 'verified'
              AND id IN (SELECT record_id FROM record_dismissal
                         WHERE substr(asked_at, 1, 19) <= (SELECT substr(started_at, 1, 19) FROM run WHERE id = ?1))
            """, arguments: [runId])
        return db.changesCount
    }
}
