// The store floor: what SQLite alone needs to write the rows a night wrote, with the
// ledger's schema (its tables, indexes, CHECKs, triggers and foreign keys) and nothing else:
// no file is read, no JSON parsed, no rule applied, no Swift value bound. The rows are copied
// from the ledger the night left into the ledger as it was before that night, with
// `INSERT ... SELECT` in one transaction, SQLite's fastest way to write rows. A night cannot
// take less than this with this schema, however fast the code around the store.
import Foundation
import GRDB
import LedgerStore

enum StoreFloor {
    /// The ledger's tables in an order their foreign keys allow, with how to find the rows
    /// that are new in `src` (the ledger after the night) against `main` (before it). `?` is
    /// bound to the bound measured in `main` before anything is copied.
    struct Table {
        var name: String
        /// The rows to copy, as an SQL condition on `s` (the source table), and the query
        /// in `main` that gives `?` for it.
        var newRows: String
        var bound: String
    }

    static let tables: [Table] = {
        func byRowid(_ name: String) -> Table {
            Table(name: name, newRows: "s.rowid > ?", bound: "SELECT ifnull(max(rowid), 0) FROM main.\(name)")
        }
        let lastRecord = "SELECT ifnull(max(id), 0) FROM main.source_record"
        let lastRun = "SELECT ifnull(max(id), 0) FROM main.run"
        return [
            byRowid("run"), byRowid("source_file"), byRowid("source_chunk"), byRowid("source_record"),
            Table(name: "unverified_record_transaction", newRows: "s.record_id > ?", bound: lastRecord),
            Table(name: "store_transaction", newRows: "s.first_run_id > ?", bound: lastRun),
            Table(name: "transaction_source", newRows: "s.record_id > ?", bound: lastRecord),
            byRowid("account"), byRowid("entry"), byRowid("finding"),
            Table(name: "notification", newRows: "s.run_id > ?", bound: lastRun),
            // Few rows, and no run or record to tell the new ones by.
            Table(name: "reversal_request",
                  newRows: "? = 0 AND NOT EXISTS (SELECT 1 FROM main.reversal_request m WHERE m.book = s.book AND m.transaction_id = s.transaction_id)",
                  bound: "SELECT 0"),
            byRowid("order_version"), byRowid("exception"),
            // The matches of the night's new transactions (a conservative count: matches of
            // older transactions with new orders are left out, so the floor stays a floor).
            Table(name: "reconciled_match",
                  newRows: "s.transaction_id IN (SELECT transaction_id FROM src.store_transaction WHERE first_run_id > ?)",
                  bound: lastRun),
        ]
    }()

    /// Copies the rows `after` has and `before` has not into `before` (changed in place: pass
    /// a copy), in one transaction, and returns the seconds and the number of rows.
    /// Updates a night makes to older rows (a pending sale posted, a finding resolved) and
    /// the month totals are not copied: the floor is a lower bound.
    ///
    /// When `before` holds rows already (night 2), the new rows are first copied aside into
    /// `stage` (not timed): finding them in `after` scans its older rows too, which is no
    /// part of writing them. On night 1 every row is new and is read once, in order.
    static func measure(after: String, before: String, stage: String) throws -> (seconds: Double, rows: Int) {
        var config = Configuration()
        config.foreignKeysEnabled = true
        let queue = try DatabaseQueue(path: before, configuration: config)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS src", arguments: [after])
        }
        // The bounds first: each table's new rows are the ones past what `before` held.
        let bounds = try queue.read { db in try tables.map { try Int64.fetchOne(db, sql: $0.bound) ?? 0 } }
        var sources = tables.map { "src.\($0.name) AS s WHERE \($0.newRows)" }
        var arguments: [StatementArguments] = bounds.map { [$0] }
        if bounds.contains(where: { $0 > 0 }) {
            try? FileManager.default.removeItem(atPath: stage)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "ATTACH DATABASE ? AS stage", arguments: [stage])
                for (table, (source, args)) in zip(tables, zip(sources, arguments)) {
                    try db.execute(sql: "CREATE TABLE stage.\(table.name) AS SELECT * FROM \(source)", arguments: args)
                }
            }
            sources = tables.map { "stage.\($0.name)" }
            arguments = tables.map { _ in [] }
        }
        defer { try? FileManager.default.removeItem(atPath: stage) }
        // The night's run row goes in unfinished and is finished last, as a night writes it:
        // exceptions and findings are written only while the last run is unfinished (schema
        // v35's guards), and a finished run is never changed.
        let runColumns = try queue.read { db in try db.columns(in: "run").map(\.name) }
        let unfinishedRun = runColumns.map { $0 == "finished_at" ? "NULL" : $0 }.joined(separator: ", ")
        settle()
        let start = now()
        let rows = try queue.write { db -> Int in
            var rows = 0
            for (table, (source, args)) in zip(tables, zip(sources, arguments)) {
                try db.execute(sql: "INSERT INTO main.\(table.name) SELECT \(table.name == "run" ? unfinishedRun : "*") FROM \(source)", arguments: args)
                rows += db.changesCount
            }
            try db.execute(sql: "UPDATE main.run SET finished_at = (SELECT s.finished_at FROM src.run s WHERE s.id = run.id) WHERE finished_at IS NULL")
            return rows
        }
        return (now() - start, rows)
    }

    /// A new, empty ledger at `path` (the schema as `iapledger` creates it).
    static func emptyLedger(at path: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        _ = try Ledger(path: path)
    }
}
