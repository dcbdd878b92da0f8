import Foundation
import GRDB
import LedgerCore

/// Re-running a night that brings nothing new records nothing (so re-running a night is
/// idempotent to the byte, workbooks included, even after a run killed between its commit
/// and its workbooks).
///
/// A run is a re-run of the last night when the last run has the same as-of date. Such a run
/// "changed nothing" when it read no new file, posted no entry, found no month closed since the
/// last run and left the closed periods,
/// the findings, the exceptions (but for their last-seen run), the transactions waiting for a
/// rule and the matched count as they were. The caller then rolls its transaction back (its
/// run row included) and writes the workbooks of the last run again.
public struct SameNight: Equatable {
    /// The last run, whose as-of date this run shares.
    public let lastRunId: Int64
    let fingerprint: String
    let matched: Int
}

extension LedgerReader {
    /// The state a re-run of the last night must leave as it is, or nil when the last run has
    /// another as-of date (a new night is always recorded). Costs nothing on a new night.
    public func sameNight(asOf: Day) throws -> SameNight? {
        guard let last = try Row.fetchOne(db, sql: "SELECT id, as_of, orders_matched, closed_through FROM run ORDER BY id DESC LIMIT 1"),
              (last[1] as String) == asOf.description else { return nil }
        // A month closed since that run (`iapledger close`) is a change: the run's workbooks
        // say what was closed when they were written, and its row too.
        guard try closedThroughNow() == (last[3] as String?) else { return nil }
        return SameNight(lastRunId: last[0], fingerprint: try nightFingerprint(), matched: last[2])
    }

    /// A hash of what a run with no new input can still change: closes, findings, exceptions
    /// (not their last-seen run), sales waiting for a rule, and the newest row of each table
    /// a new input or entry would add to.
    func nightFingerprint() throws -> String {
        // Hashed row by row (the same bytes as one text would give): built as one text, a
        // ledger with many findings held them all at once (150 MB for 130,000 findings).
        var hasher = StreamingSHA256()
        for sql in [
            "SELECT id, month, source FROM period_close ORDER BY id",
            "SELECT id, code, transaction_id, record_id, message, first_run_id, resolved_run_id FROM finding ORDER BY id",
            """
            SELECT id, category, transaction_id, order_id, account_id, product_id, gross_minor, currency, net_reporting_minor,
                   detail, first_seen, first_run_id, resolved_on, resolved_run_id FROM exception ORDER BY id
            """,
            "SELECT id FROM exception_episode ORDER BY id",
            // The pending sales' own index (else SQLite walks every transaction in id order to skip the sort).
            """
            SELECT transaction_id, sale_status, pending_reason FROM store_transaction INDEXED BY store_transaction_pending_order
            WHERE sale_status = 'pending' ORDER BY transaction_id
            """,
            """
            SELECT (SELECT max(id) FROM source_file), (SELECT max(id) FROM source_record), (SELECT max(id) FROM entry),
                   (SELECT max(id) FROM order_version), (SELECT count(*) FROM reversal_request)
            """,
        ] {
            let cursor = try Row.fetchCursor(db, sql: sql)
            while let row = try cursor.next() {
                var line = ""
                for v in row.databaseValues {
                    let text = v.isNull ? "" : (String.fromDatabaseValue(v) ?? Int64.fromDatabaseValue(v).map(String.init) ?? "\(v)")
                    line += "\(text.utf8.count):\(text)"
                }
                line += "\n"
                hasher.update(Array(line.utf8))
            }
            hasher.update(Array("--\n".utf8))
        }
        return hasher.finalizeHex()
    }
}

extension LedgerWriter {
    /// True when this run's writes so far left the ledger as `night` found it (see `SameNight`).
    public func changedNothing(since night: SameNight, matched: Int) throws -> Bool {
        guard matched == night.matched else { return false }
        return try nightFingerprint() == night.fingerprint
    }
}
