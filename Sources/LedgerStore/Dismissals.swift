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

    /// Dismissals asked for and not yet applied by a night.
    public func dismissalsWaiting() throws -> Int {
        guard try db.tableExists("record_dismissal") else { return 0 }
        return try Int.fetchOne(db, sql: """
            SELECT count(*) FROM record_dismissal d JOIN source_record r ON r.id = d.record_id WHERE r.resolved_run_id IS NULL
            """) ?? 0
    }
}

extension LedgerWriter {
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
