import CSQLiteTuning
import Foundation
import GRDB
import LedgerCore

/// A store failure the user can act on (locked, read-only, corrupt database).
public struct StoreError: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// The ledger database (SQLite through GRDB). The only type in the project that opens it.
public final class Ledger {
    let queue: DatabaseQueue
    public let path: String
    /// The time each transaction may spend waiting for other processes' locks.
    private let busyBudget: BusyBudget

    /// Opens (creating if needed) the ledger at `path` and brings its schema up to date.
    /// `migrate` false opens a writable ledger as its schema stands (`report` registering the
    /// files it wrote does not upgrade a ledger; a night does).
    public init(path: String, readOnly: Bool = false, migrate: Bool = true) throws {
        _ = Self.sqliteTuned
        self.path = path
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.readonly = readOnly
        // Another process reading the ledger (a `verify`, `trace`, `balance` or `report`, a
        // sqlite3 shell) is waited for, as a reader waits for a night's commit: failing at once
        // paged the operator for an auditor's `verify`.
        // Up to `busyTimeoutSeconds` in all over a transaction: SQLite's own timeout
        // starts again at each lock it waits for, and a night that waited for a reader at a
        // cache spill (and went on without it) waited again as long at its commit, without end
        // for a reader held open (19 minutes, said to be ten).
        // (Per transaction: `read` and `write` give it back in full.)
        busyBudget = BusyBudget(seconds: Self.busyTimeoutSeconds)
        config.busyMode = busyBudget.mode
        config.label = "iapledger"
        // A night stopped part way (killed, a full disk) leaves its journal, which SQLite rolls
        // back on the next read by a connection that can write: a read-only one (`verify`,
        // `trace`, `balance`) cannot, and fails on it. Opened once for writing first (when the
        // file can be), the read brings the ledger back to as it was before that night. A night
        // running holds its journal under its lock: then nothing is rolled back and the read waits.
        if readOnly, let size = (try? FileManager.default.attributesOfItem(atPath: path + "-journal"))?[.size] as? Int, size > 0 {
            var writable = config
            writable.readonly = false
            writable.busyMode = BusyBudget(seconds: Self.busyTimeoutSeconds).mode
            _ = try? DatabaseQueue(path: path, configuration: writable).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM sqlite_schema") }
        }
        do {
            queue = try DatabaseQueue(path: path, configuration: config)
        } catch let e as DatabaseError {
            throw StoreError(message: "\(path): cannot open the ledger database: \(e.message ?? e.description)\(Self.advice(e, reading: readOnly))")
        }
        // A ledger a newer iapledger has written (a migration this version does not know):
        // read by this one, its tables would look made by hand; written, misread.
        let unknown = try? queue.read { db -> [String] in
            guard try db.tableExists("grdb_migrations") else { return [] }
            let known = Set(Schema.migrator().migrations)
            return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid").filter { !known.contains($0) }
        }
        if let unknown, !unknown.isEmpty {
            throw StoreError(message: "\(path): this ledger was written by a newer version of iapledger (its schema has migration\(unknown.count == 1 ? "" : "s") "
                + "\(unknown.joined(separator: ", ")), which this version, \(Schema.toolVersionNote), does not know): use that version or a later one; "
                + "nothing was read or written")
        }
        if !readOnly && migrate { try Self.migrate(queue, path: path) }
    }

    /// Process-wide SQLite settings, made once before the first connection opens (SQLite takes
    /// them only before it is initialized; true when they were taken): allocations are not
    /// counted for `sqlite3_memory_used()`, which nothing here reads. Debian's SQLite counts
    /// them under a process-wide mutex and has no lookaside allocator, so every row a night
    /// writes took that mutex several times: a 300,000-transaction night went from 15.3-15.8 s
    /// to 14.3-14.4 s (three pairs of runs side by side), the same ledger.
    static let sqliteTuned: Bool = iap_sqlite_memstatus_off() == SQLITE_OK
    /// What SQLite counts as allocated: 0 while its allocations are not counted.
    static var sqliteBytesCounted: Int64 { sqlite3_memory_used() }

    /// Brings the schema up to date, one migration per transaction. A migration that fails
    /// on the ledger's own tables (a ledger made by a development build whose first schema
    /// differed, or edited by hand) is named, with what was applied and what to do.
    static func migrate(_ queue: DatabaseQueue, path: String) throws {
        let migrator = Schema.migrator()
        do {
            try migrator.migrate(queue)
        } catch let e as SchemaRefusal {
            let completed = (try? queue.read({ try migrator.completedMigrations($0) }))?.count ?? 0
            throw StoreError(message: """
                \(path): cannot bring the ledger's schema up to date: migration \(migrator.migrations[completed]) \
                refused it: \(e.message). Nothing was changed by it. Run `iapledger verify` (it reads the ledger \
                as it is) to see what differs from what iapledger wrote
                """)
        } catch let e as DatabaseError {
            // Only an SQL error (no such column or table, already exists) says the tables are
            // not the migrations' own; a locked, busy, full or corrupt database is what it is.
            guard e.resultCode == .SQLITE_ERROR,
                  let completed = try? queue.read({ try migrator.completedMigrations($0) }),
                  completed.count < migrator.migrations.count else {
                throw StoreError(message: "\(path): cannot open the ledger database: \(e.message ?? e.description)\(Self.advice(e))")
            }
            let failed = migrator.migrations[completed.count]
            // A row of an applied migration deleted from among the others: migrating ran it again
            // on tables it already made, which failed; said so (not that the tables are not iapledger's).
            let gaps = (try? queue.read({ try Self.migrationRowsMissing($0) })) ?? []
            if gaps.contains(failed) {
                throw StoreError(message: """
                    \(path): cannot bring the ledger's schema up to date: its list of applied schema migrations \
                    (grdb_migrations) lacks \(gaps.joined(separator: ", ")), though later ones are applied, and \
                    migration \(failed), run again, failed: \(e.message ?? e.description): \(gaps.count == 1 ? "its row was" : "their rows were") \
                    deleted by hand. No data was changed. Restore the ledger from a copy made before the change (or put the \
                    row back, INSERT INTO grdb_migrations VALUES ('\(failed)'), and check it with `iapledger verify`)
                    """)
            }
            throw StoreError(message: """
                \(path): cannot bring the ledger's schema up to date: migration \(failed) failed: \(e.message ?? e.description). \
                The migrations before it are applied (\(completed.count) of \(migrator.migrations.count)); \
                no data was changed by the one that failed. This ledger's tables are not the ones iapledger's \
                migrations made (a ledger from a development build, or changed by hand): keep it as it is for \
                the record, move it aside, and run again to build a new ledger from the files in inbox/ \
                (months closed with `iapledger close` must be closed again)
                """)
        }
    }

    /// Runs `body` in one database transaction: everything it writes lands together or not at all.
    public func write<T>(_ body: (LedgerWriter) throws -> T) throws -> T {
        busyBudget.reset()
        do {
            return try queue.write { db in
                let writer = LedgerWriter(db: db)
                let result = try body(writer)
                try writer.addMonthTotals()
                return result
            }
        } catch let e as DatabaseError {
            throw StoreError(message: "\(path): \(e.message ?? e.description)\(Self.advice(e))")
        }
    }

    /// How long a connection waits for another process's lock on the ledger, in all, before it
    /// gives up.
    nonisolated(unsafe) public static var busyTimeoutSeconds: TimeInterval = 600

    /// What a write failure of the disk or the file's permissions means for the user: SQLite
    /// rolled the transaction back (or does so from its journal when the ledger is next opened).
    static let damaged = ": the ledger file is damaged (a disk fault, or a copy or restore cut short): restore it from its latest copy and check it with `iapledger verify` (README, \"A damaged ledger\")"

    /// What to do about `error` when it is SQLite's word that the ledger file is damaged,
    /// met where no ledger call said it (a command's own reads): nil otherwise.
    public static func damageAdvice(for error: Error) -> String? {
        guard let e = error as? DatabaseError, e.resultCode == .SQLITE_CORRUPT || e.resultCode == .SQLITE_NOTADB else { return nil }
        return damaged
    }

    /// `reading`: met by a command that only reads the ledger (`verify`, `trace`, `balance`,
    /// ...), which writes nothing, so says nothing of what was written.
    static func advice(_ e: DatabaseError, reading: Bool = false) -> String {
        let unchanged = reading ? "" : "; nothing of this run was written (the ledger is as it was before it)"
        switch e.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return unchanged + ": another process held the ledger for over \(Int(busyTimeoutSeconds)) s (a `verify`, `report`, `trace` or `balance` reading it, or another program); run again when it has finished"
        case .SQLITE_FULL:
            return unchanged + ": free space on the disk and run again"
        case .SQLITE_IOERR:
            return unchanged + ": the disk may be full or failing, or the process's file size limit (ulimit -f) too small; fix it and run again"
        case .SQLITE_READONLY where e.extendedResultCode.rawValue == 776:   // SQLITE_READONLY_ROLLBACK
            return ": a night stopped part way left its journal (the ledger file's name with -journal), which only a user who can write the ledger can roll back: run any iapledger command (or the next night) as the user the nights run as; the ledger is then as it was before that night"
        case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM:
            return unchanged + ": check that the ledger file and its folder are writable by this user (and the file system not mounted read-only)"
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return unchanged + damaged
        default:
            return ""
        }
    }

    /// The schema objects (by type and name, with their SQL) iapledger's migrations create, up
    /// to the last one this ledger has applied: what `verify` expects the ledger to hold.
    public func expectedSchemaObjects() throws -> [String: String] {
        try expectedSchema { try LedgerReader(db: $0).schemaObjects() }
    }

    /// `body` on a fresh in-memory database migrated as this ledger was (up to the last
    /// migration it has applied, or the newest a finished run recorded writing with, if later:
    /// see `migrationsBehindRuns`).
    func expectedSchema<T>(_ body: (Database) throws -> T) throws -> T {
        let migrator = Schema.migrator()
        do {
            let fresh = try DatabaseQueue()
            if let last = try migrationsBehindRuns()?.recorded ?? queue.read({ try Self.lastApplied($0, migrator) }) {
                try migrator.migrate(fresh, upTo: last)
            }
            return try fresh.read(body)
        } catch let e as DatabaseError {
            throw StoreError(message: "\(path): \(e.message ?? e.description)" + (Self.damageAdvice(for: e) ?? ""))
        }
    }

    /// The last migration the ledger has applied (of those this iapledger knows), if any.
    static func lastApplied(_ db: Database, _ migrator: DatabaseMigrator) throws -> String? {
        let applied = try migrator.appliedIdentifiers(db)
        return migrator.migrations.last(where: applied.contains)
    }

    /// The migrations not recorded applied though a later one is (a row of grdb_migrations
    /// deleted from among the others): empty when the applied ones are the first ones in order.
    static func migrationRowsMissing(_ db: Database) throws -> [String] {
        let migrator = Schema.migrator(), ids = migrator.migrations
        let applied = try migrator.appliedIdentifiers(db)
        guard let last = ids.lastIndex(where: applied.contains) else { return [] }
        return ids[...last].filter { !applied.contains($0) }
    }

    public func migrationRowsMissing() throws -> [String] { try queue.read { try Self.migrationRowsMissing($0) } }

    /// A finished run that recorded writing with a newer schema (`run.schema_migration`) than
    /// the last migration the ledger has applied: migrations were deleted from grdb_migrations
    /// (with what they created, for the schema check to pass). The newest such schema and the
    /// last run that recorded it; nil when none is newer. A migration this iapledger does not
    /// know (a newer version wrote the run) is not compared.
    public func migrationsBehindRuns() throws -> (runId: Int64, recorded: String, lastApplied: String?)? {
        let migrator = Schema.migrator(), ids = migrator.migrations
        do {
            return try queue.read { db in
                let hasColumn = try Bool.fetchOne(db, sql: "SELECT count(*) FROM pragma_table_info('run') WHERE name = 'schema_migration'") ?? false
                guard hasColumn else { return nil }
                let last = try Self.lastApplied(db, migrator)
                let lastIndex = last.flatMap { ids.firstIndex(of: $0) } ?? -1
                let newest = try Row.fetchAll(db, sql: """
                    SELECT schema_migration, max(id) FROM run WHERE finished_at IS NOT NULL AND schema_migration IS NOT NULL GROUP BY schema_migration
                    """).compactMap { r -> (index: Int, runId: Int64, id: String)? in
                    let id: String = r[0]
                    return ids.firstIndex(of: id).map { ($0, r[1], id) }
                }.max { $0.index < $1.index }
                guard let newest, newest.index > lastIndex else { return nil }
                return (newest.runId, newest.id, last)
            }
        } catch let e as DatabaseError {
            throw StoreError(message: "\(path): \(e.message ?? e.description)" + (Self.damageAdvice(for: e) ?? ""))
        }
    }

    /// The tables and views of `expectedSchemaObjects` the ledger no longer has with every
    /// column they were created with: missing (no columns listed) or without the columns
    /// listed. `verify` reads them by name, so it checks their content only when there is none.
    public func unreadableObjects() throws -> [(object: String, missingColumns: [String])] {
        func columns(_ db: Database) throws -> [String: [String]] {
            var byObject: [String: [String]] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view')") {
                let name: String = r[1]
                // A view that names a dropped table or column cannot list its columns (an
                // error): it has none that can be read.
                byObject["\(r[0] as String) \(name)"] = (try? String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?) ORDER BY cid", arguments: [name])) ?? []
            }
            return byObject
        }
        let expected = try expectedSchema(columns)
        let actual = try read { r in try columns(r.db) }
        return expected.keys.sorted().compactMap { key in
            guard let has = actual[key] else { return (key, []) }
            let missing = expected[key]!.filter { !has.contains($0) }
            return missing.isEmpty ? nil : (key, missing)
        }
    }

    /// What a night checks before it writes, cheaply (a fraction of a second at any size):
    /// the schema is the one the migrations created (the triggers that keep entries, runs and
    /// records append-only are there), the last entry's hash is the chain head the last run
    /// recorded, the entries are as many as the runs posted with no id missing, no close the
    /// runs recorded was deleted, and the month totals balance per book and currency. Each problem found, in
    /// words; `iapledger verify` checks everything.
    public func preflightProblems() throws -> [String] {
        var problems: [String] = []
        for d in try schemaDifferences() {
            // An index or a view someone added reads, enforces nothing and changes no figure:
            // `verify` names it; a night goes on.
            if d.expected == nil && (d.key.hasPrefix("index ") || d.key.hasPrefix("view ")) { continue }
            problems.append(d.expected == nil ? "it holds \(d.key), which iapledger never created"
                            : d.actual == nil ? "its \(d.key) is missing" : "its \(d.key) was altered")
        }
        try read { r in
            if let head = try r.latestRecordedChainHead() {
                let tip = try r.lastEntryHash() ?? EntryHash.genesis
                if head.hash != tip {
                    problems.append("its last entry's hash is not the chain head run \(head.runId) recorded when it committed: entries were changed or removed since")
                }
            }
            // Entries are only ever added, by the runs that record how many: one removed (by
            // hand, past the trigger) would have this night post its sale or refund again.
            if let counts = try Row.fetchOne(r.db, sql: """
                SELECT (SELECT count(*) FROM entry), (SELECT ifnull(max(id), 0) FROM entry),
                       (SELECT ifnull(sum(entries_posted), 0) FROM run WHERE finished_at IS NOT NULL)
                """) {
                let count: Int64 = counts[0], last: Int64 = counts[1], posted: Int64 = counts[2]
                if count != last {
                    problems.append("it holds \(count) entries numbered up to #\(last): \(last - count) of them removed (entry ids run on without a gap)")
                } else if count != posted {
                    problems.append("it holds \(count) entries, but its finished runs posted \(posted): entries were \(count < posted ? "removed" : "added") by hand")
                }
            }
            if let recorded = try r.latestRecordedClosedThrough(), recorded.month > (try r.closedThroughNow() ?? "") {
                problems.append("its closed periods end before \(recorded.month), through which run \(recorded.runId) recorded the books closed: a close was deleted, reopening a closed month")
            }
            // The seals this night builds on: a seal deleted, a sealed close deleted (its month
            // reopened), records resolved by hand (this night would seal them as its own).
            if let last = try r.latestSealedRun() {
                let unsealed = try LedgerSeal.unsealedRuns(r.db)
                problems += LedgerSeal.describeUnsealed(unsealed)
                problems += try LedgerSeal.resolutionsUnsealed(r.db, lastSealedRun: last, unsealedRuns: Set(unsealed))
                problems += try LedgerSeal.sealedClosesGone(r.db).map { "its close of \($0) is gone though sealed: deleted, reopening the month" }
                problems += try LedgerSeal.implausibleResolutions(r.db)
                problems += try LedgerSeal.waitingSalesWithFindingResolved(r.db)
                problems += try LedgerSeal.findingDismissalsUnasked(r.db)
            }
            problems += try r.reversalsNotFromSignedRecords()
            // A reversal asked for whose refund is posted and which is not (removed: the ids
            // after it renumbered, the runs' counts lowered): this night would post it again,
            // saying nothing.
            problems += try r.reversalsWithoutEntry(limit: 3).map {
                "transaction \($0.transactionId)'s refund reversal, asked for by REFUND_REVERSED \($0.uuid) and due since its refund posted, is not in it: removed"
            }
            // The rules that derive every posting, with their accounts' names: an account renamed
            // (the trigger that keeps it dropped) would name every workbook's rows anew, and the
            // workbooks be registered as this night's own.
            if let stored = try r.postingRules(), stored != PostingRule.inStoredOrder {
                problems.append("its posting rules (posting_rule, with their accounts' names) are not the accounting contract's")
            }
            for (book, currency, sum) in try r.unbalancedMonthTotals() {
                problems.append("its month totals of the \(book) book do not balance in \(currency) (they sum to \(sum) minor units)")
            }
            // The revenue sheets read the activity totals, the trial balance the balances: a row
            // of one deleted or changed would leave the workbooks disagreeing, silently.
            let apart = try r.activityBalanceDifferences()
            if let d = apart.first {
                problems.append("its month totals of sales and refunds (activity_month) do not give its month balances (balance_month): "
                    + "\(d.book) \(d.month) \(d.account) \(d.currency) differs by \(d.difference) minor units (\(d.reporting) in the reporting currency)"
                    + (apart.count > 1 ? ", and \(apart.count - 1) more" : ""))
            }
        }
        return problems
    }

    /// Throws, naming the first problems `preflightProblems` finds, when there are any: a
    /// ledger changed by hand is not built on (a night), written from (`report`: workbooks and
    /// their registrations that `verify --workbook` would then vouch for) or closed (`close`).
    /// A ledger an older iapledger wrote, that no night has brought up to date yet (`report`
    /// reads it as it is), is left to `iapledger verify`: the checks read tables it may not
    /// have yet. One whose migrations were removed (behind its runs) is not such a ledger.
    public func refuseWhenChangedByHand(_ what: String) throws {
        let migrator = Schema.migrator()
        let applied = try read { try migrator.appliedIdentifiers($0.db) }
        // Older: the migrations applied are the first ones, in order, and no finished run
        // wrote with a newer schema. A row removed from among them is a change by hand.
        let behind = try migrationsBehindRuns()
        let older = !Set(migrator.migrations).isSubset(of: applied)
            && Set(migrator.migrations.prefix(applied.count)) == applied && behind == nil
        if older { return }
        let problems = try preflightProblems()
        guard !problems.isEmpty else { return }
        throw StoreError(message: "\(path): the ledger fails the checks \(what) makes before it writes: "
            + problems.prefix(5).joined(separator: "; ") + (problems.count > 5 ? "; and \(problems.count - 5) more" : "")
            + ". Nothing was written. Run `iapledger verify` to see every problem, and restore the ledger from a copy made before the change")
    }

    /// A schema object (by type and name) that is not as iapledger's migrations created it:
    /// altered (both SQL texts), missing (`actual` nil) or added (`expected` nil).
    public struct SchemaDifference {
        public var key: String
        public var expected: String?
        public var actual: String?
    }

    /// SQLite's own check of the file (`PRAGMA quick_check`: every page, b-tree and record
    /// format, the indexes' pages included), which content checks meet only where they read:
    /// what it finds, up to 20 lines, or SQLite's error when the file cannot be read as a
    /// database at all; empty when the file is sound.
    public func pageCheck() throws -> [String] {
        do {
            return try queue.read { db in
                // (A finding of several lines, "*** in database main ***" and its pages, is one.)
                try String.fetchAll(db, sql: "PRAGMA quick_check(20)").map { $0.replacingOccurrences(of: "\n", with: " ") }.filter { line in
                    guard line != "ok" else { return false }
                    // SQLite 3.40 says "NULL value in T.C" of a WITHOUT ROWID table's key column
                    // that holds none (unverified_record_transaction.record_id on every ledger):
                    // such a line is taken only when the column does hold a NULL.
                    let prefix = "NULL value in "
                    guard line.hasPrefix(prefix) else { return true }
                    let name = line.dropFirst(prefix.count).split(separator: ".")
                    guard name.count == 2, name.allSatisfy({ $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" } }) else { return true }
                    // (By typeof: SQLite takes `C IS NULL` of a NOT NULL column as false, so it
                    // would find no NULL where one was put past the constraint.)
                    return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \"\(name[0])\" WHERE typeof(\"\(name[1])\") = 'null')") ?? true
                }
            }
        } catch let e as DatabaseError where e.resultCode == .SQLITE_CORRUPT || e.resultCode == .SQLITE_NOTADB {
            return [e.message ?? e.description]
        }
    }

    /// The ledger's schema against `expectedSchemaObjects`, by key.
    public func schemaDifferences() throws -> [SchemaDifference] {
        let expected = try expectedSchemaObjects()
        let actual = try read { try $0.schemaObjects() }
        return Set(expected.keys).union(actual.keys).sorted().compactMap { key in
            expected[key] == actual[key] ? nil : SchemaDifference(key: key, expected: expected[key], actual: actual[key])
        }
    }

    public func read<T>(_ body: (LedgerReader) throws -> T) throws -> T {
        busyBudget.reset()
        do {
            return try queue.read { db in try body(LedgerReader(db: db)) }
        } catch let e as DatabaseError {
            let busy = e.resultCode == .SQLITE_BUSY || e.resultCode == .SQLITE_LOCKED
            let damaged = e.resultCode == .SQLITE_CORRUPT || e.resultCode == .SQLITE_NOTADB
            throw StoreError(message: "\(path): \(e.message ?? e.description)"
                + (busy ? ": a night was writing it for over \(Int(Self.busyTimeoutSeconds)) s; try again when it has committed" : "")
                + (damaged ? Self.damaged : ""))
        }
    }
}

/// A transaction as the ledger stores it, with its sale status.
public struct StoredTransaction: Equatable {
    public var observation: TransactionObservation
    public var saleStatus: String
    public var pendingReason: String?
    public var firstRecordId: Int64
}

/// Queries shared by readers and writers.
public class LedgerReader {
    let db: Database
    init(db: Database) { self.db = db }
    /// The chunk last read by `firstSource` (verify reads the sales' sources in record order,
    /// so one decompressed chunk serves the next records too).
    lazy var chunkCache = chunkReader()
    /// The columns giving a record's chunk, id, offset and length: NULLs in a ledger from
    /// before chunks (schema v11 and earlier, opened read-only by verify, trace or balance).
    lazy var chunkColumns: String = {
        let has = (try? db.tableExists("source_chunk")) ?? false
        return has ? "r.chunk_id, r.chunk_offset, r.chunk_length" : "NULL, NULL, NULL"
    }()

    /// Brings the month totals up to date before a query reads them: nothing to do for a
    /// reader; a writer adds the entries it inserted so far (`LedgerWriter`).
    func monthTotalsUpToDate() throws {}

    public func transaction(_ id: String) throws -> StoredTransaction? {
        // Read through the C API: every record that repeats a known transaction asks for it.
        var query = FastStatement(try db.cachedStatement(sql: "SELECT * FROM store_transaction WHERE transaction_id = ?"), in: db)
        query.bind(id)
        var found: StoredTransaction?
        try query.forEachRow { found = Self.stored($0) }
        return found
    }

    /// A sale waiting to post, with the storefront and id of its order (if any).
    public typealias PendingSale = (sale: StoredTransaction, orderStorefront: (code: String, orderId: String)?)

    /// The order whose storefront a sale with none of its own is booked in (accounting.md):
    /// the earliest credited naming the transaction `transactionId` (an SQL expression), latest
    /// version of each order, as one text: storefront, unit separator, order id (read back by
    /// `orderStorefront(_:)`). In upper case: orders are read so now, and rows stored in lower
    /// case before still name their storefront (ISO codes; SQLite's upper() changes ASCII
    /// letters only). Posting and the STOREFRONT_AFTER_POSTING check both take it from here.
    static func orderStorefrontSQL(of transactionId: String) -> String {
        """
        (SELECT upper(v.storefront) || char(31) || v.order_id FROM order_version v
         WHERE v.transaction_id = \(transactionId) AND v.storefront IS NOT NULL
           AND v.id = (SELECT max(id) FROM order_version w WHERE w.order_id = v.order_id)
         ORDER BY v.credited_ms, v.order_id LIMIT 1)
        """
    }

    /// The storefront and order id of `orderStorefrontSQL`'s text.
    static func orderStorefront(_ text: String) -> (code: String, orderId: String)? {
        // The order id holds no control character (checked when read); a storefront might.
        guard let cut = text.lastIndex(of: "\u{1F}") else { return nil }
        return (String(text[..<cut]), String(text[text.index(after: cut)...]))
    }

    /// The waiting sales a night tries to post: every one, or all but the sales waiting for a
    /// rule that nothing read tonight touched (`salesToTry(everyWaitingForRule:)`).
    public struct SalesToTry: Sendable {
        /// Appended to the query of pending sales (`t` the stored transaction).
        let filter: String
        /// How many there are: the post stage's total.
        public let count: Int
    }

    /// Transactions whose sale waits, in posting order (purchase time, then id), a batch at a
    /// time, each with the storefront of its order (looked up in the same query): each batch
    /// is read whole before `body` sees it, so `body` may update the batch's rows. Only those
    /// of `sales` when given (`salesToTry`), else every one.
    public func forEachPendingSaleBatch(batchSize: Int = 10_000, of sales: SalesToTry? = nil, _ body: ([PendingSale]) throws -> Void) throws {
        let storefront = Self.orderStorefrontSQL(of: "t.transaction_id")
        let filter = sales?.filter ?? ""
        var after: (ms: Int64, id: String)? = nil
        while true {
            let statement: Statement
            if after != nil {
                statement = try db.cachedStatement(sql: """
                    SELECT \(Self.storedColumns), \(storefront) FROM store_transaction t INDEXED BY store_transaction_pending_order
                    WHERE sale_status = 'pending' AND (purchase_ms > ? OR (purchase_ms = ? AND transaction_id > ?))\(filter)
                    ORDER BY purchase_ms, transaction_id LIMIT ?
                    """)
            } else {
                statement = try db.cachedStatement(sql: """
                    SELECT \(Self.storedColumns), \(storefront) FROM store_transaction t INDEXED BY store_transaction_pending_order
                    WHERE sale_status = 'pending'\(filter) ORDER BY purchase_ms, transaction_id LIMIT ?
                    """)
            }
            // Read through the C API: decoding a GRDB `Row` per pending sale cost a tenth of posting.
            var batch: [PendingSale] = []
            batch.reserveCapacity(batchSize)
            var query = FastStatement(statement, in: db)
            if let after { query.bind(after.ms); query.bind(after.ms); query.bind(after.id) }
            query.bind(batchSize)
            try query.forEachRow { r in
                batch.append((Self.stored(r), r.textOrNil(20).flatMap(Self.orderStorefront)))
            }
            try body(batch)
            guard batch.count == batchSize, let last = batch.last?.0 else { return }
            after = (last.observation.purchaseMs, last.observation.transactionId)
        }
    }

    /// Posted sales that carry a cancellation and have no refund entry yet: found from the
    /// index of refunded transactions alone (it holds their status and book), then read.
    public func refundsDue() throws -> [StoredTransaction] {
        try Row.fetchAll(db.cachedStatement(sql: Self.refundsDueSQL)).map(Self.stored)
    }

    static let refundsDueSQL = """
        SELECT t.* FROM store_transaction t WHERE t.transaction_id IN (
            SELECT r.transaction_id FROM store_transaction r INDEXED BY store_transaction_refunds
            WHERE r.cancellation_ms IS NOT NULL AND r.sale_status = 'posted'
              AND NOT EXISTS (SELECT 1 FROM entry e WHERE e.book = r.book AND e.transaction_id = r.transaction_id AND e.kind = 'refund'))
        ORDER BY t.cancellation_ms, t.transaction_id
        """

    /// The columns `stored(_:)` reads, by position (the table's first twenty, in its order): a
    /// query reading more after them names these, not `t.*`, whose width grows with the schema
    /// (v31 added a column, which took the place of the order's storefront read after them).
    static let storedColumns = """
        t.transaction_id, t.book, t.original_transaction_id, t.product_id, t.quantity, t.purchase_ms, t.expires_ms, \
        t.cancellation_ms, t.revocation_percentage, t.storefront, t.currency, t.price_milliunits, t.app_account_token, \
        t.bundle_id, t.has_offer, t.is_free_trial, t.first_record_id, t.first_run_id, t.sale_status, t.pending_reason
        """

    /// A `store_transaction` row read by position (`SELECT *`, `SELECT t.*` or `storedColumns`
    /// first, in the schema's column order): looking columns up by name costs more than the rest of the read.
    static func stored(_ r: Row) -> StoredTransaction {
        let obs = TransactionObservation(
            transactionId: r[0], originalTransactionId: r[2],
            productId: r[3], quantity: r[4], purchaseMs: r[5], expiresMs: r[6],
            cancellationMs: r[7], revocationPercentage: r[8],
            book: Book(rawValue: r[1])!, bundleId: r[13], storefront: r[9],
            currency: r[10], priceMilliunits: r[11], appAccountToken: r[12],
            hasOffer: (r[14] as Int64) != 0, isFreeTrial: (r[15] as Int64) != 0)
        return StoredTransaction(observation: obs, saleStatus: r[18], pendingReason: r[19], firstRecordId: r[16])
    }

    /// `stored(_:)` for a row read through the C API (the same columns, by position).
    static func stored(_ r: FastRow) -> StoredTransaction {
        let obs = TransactionObservation(
            transactionId: r.text(0), originalTransactionId: r.textOrNil(2),
            productId: r.text(3), quantity: r.int64(4), purchaseMs: r.int64(5), expiresMs: r.int64OrNil(6),
            cancellationMs: r.int64OrNil(7), revocationPercentage: r.int64OrNil(8),
            book: Book(rawValue: r.text(1))!, bundleId: r.textOrNil(13), storefront: r.textOrNil(9),
            currency: r.textOrNil(10), priceMilliunits: r.int64OrNil(11), appAccountToken: r.textOrNil(12),
            hasOffer: r.int64(14) != 0, isFreeTrial: r.int64(15) != 0)
        return StoredTransaction(observation: obs, saleStatus: r.text(18), pendingReason: r.textOrNil(19), firstRecordId: r.int64(16))
    }

    /// The stored entry of `kind` for a transaction, rebuilt as a draft.
    public func entry(book: Book, transactionId: String, kind: EntryKind) throws -> EntryDraft? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM entry WHERE book = ? AND transaction_id = ? AND kind = ?"),
                                       arguments: [book.rawValue, transactionId, kind.rawValue]) else { return nil }
        return try draft(r)
    }

    /// The entry of row `r` as a draft, with its postings as the ledger shows them (read here
    /// unless given).
    func draft(_ r: Row, postings given: [PostingDraft]? = nil) throws -> EntryDraft {
        let id: Int64 = r["id"]
        let postings = try given ?? Row.fetchAll(db.cachedStatement(sql: """
            SELECT a.name, p.currency, p.amount_minor, p.reporting_amount_minor
            FROM posting p JOIN account a ON a.id = p.account_id WHERE p.entry_id = ? ORDER BY p.id
            """), arguments: [id]).map {
            PostingDraft(account: $0[0], currency: $0[1], amountMinor: $0[2], reportingAmountMinor: $0[3])
        }
        let json: String = r["rules_json"]
        let rules = try AppliedRules(storedJSON: json) ?? JSONDecoder().decode(AppliedRules.self, from: Data(json.utf8))
        let figures = SaleFigures(currency: r["currency"], grossMinor: r["gross_minor"], taxMinor: r["tax_minor"],
                                  netMinor: r["net_minor"], commissionMinor: r["commission_minor"],
                                  proceedsMinor: r["proceeds_minor"], reportingCurrency: r["reporting_currency"],
                                  grossReportingMinor: r["gross_reporting_minor"], netReportingMinor: r["net_reporting_minor"],
                                  commissionReportingMinor: r["commission_reporting_minor"],
                                  proceedsReportingMinor: r["proceeds_reporting_minor"])
        return EntryDraft(book: Book(rawValue: r["book"])!, transactionId: r["transaction_id"],
                          kind: EntryKind(rawValue: r["kind"])!, date: Day(iso: r["date"] as String)!,
                          originalDate: Day(iso: r["original_date"] as String)!, late: (r["late"] as Int64) != 0,
                          productId: r["product_id"], storefront: r["storefront"], figures: figures,
                          refundPercentage: r["refund_percentage"], rules: rules, postings: postings)
    }

    /// The hashes of records already read from earlier versions of the file at `path`.
    public func recordHashes(path: String) throws -> Set<String> {
        Set(try recordHashCounts(path: path).keys)
    }

    /// How many records of each hash the versions of `path` read so far brought.
    public func recordHashCounts(path: String) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for r in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT r.record_sha256, count(*) FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = ?
            GROUP BY r.record_sha256
            """), arguments: [path]) { counts[r[0]] = r[1] }
        return counts
    }

    /// Every version of each file path read so far.
    public func filesRead() throws -> [String: FileVersions] {
        var out: [String: FileVersions] = [:]
        for r in try Row.fetchAll(db, sql: "SELECT path, sha256, stat_key, size_bytes FROM source_file ORDER BY id") {
            out[r[0], default: FileVersions()].sha256s.insert(r[1])
            out[r[0], default: FileVersions()].latestSHA256 = r[1]
            out[r[0], default: FileVersions()].sizes.insert(r[3])
            // An identity on disk is that version's only with its size (the key's third part):
            // a key set by hand to a grown file's identity would have the night skip what it grew by.
            if let key: String = r[2], key.split(separator: ":").dropFirst(2).first == Substring(String(r[3] as Int64)) {
                out[r[0], default: FileVersions()].statKeys[key] = r[1]
            }
        }
        return out
    }

    /// The last finished run, if any.
    public func lastRunId() throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM run WHERE finished_at IS NOT NULL"))
    }
}

/// Writes of one run, all inside one database transaction.
public final class LedgerWriter: LedgerReader {
    private var accountIds: [String: Int64] = [:]
    /// What this run changed that reconciliation looks at (see `reconcile`).
    var touched = TouchedKeys()
    /// The month totals of the entries inserted so far, added to the tables before it commits.
    var monthDelta = MonthTotalsDelta()

    /// A report query inside a write transaction sees the totals of the entries inserted so far.
    override func monthTotalsUpToDate() throws { try addMonthTotals() }
    /// Transactions named by a pending or rejected record (read once per run, kept up to
    /// date): most verified transactions have none, and skip the update that resolves them.
    private var unverifiedIds: Set<String>?
    /// Open findings as "code transaction-id" (read once per run, kept up to date).
    private var openFindingKeys: Set<String>?
    /// Findings of earlier runs, resolved, that this run opened again (found again, or saying
    /// something else than when dismissed): counted beside those it opened first.
    public private(set) var findingsReopened = 0
    private var findingNotesKnown: Bool?
    /// Orders named by an open rejected line of an orders file (read once per run, kept up
    /// to date): a later valid line of the same order resolves them.
    private var rejectedOrderIds: Set<String>?

    private func loadRejectedOrderIds() throws -> Set<String> {
        if let s = rejectedOrderIds { return s }
        let s = Set(try String.fetchAll(db, sql: """
            SELECT DISTINCT r.order_id FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome <> 'verified' AND r.outcome = 'rejected' AND r.resolved_run_id IS NULL
              AND r.order_id IS NOT NULL AND f.kind = 'orders'
            """))
        rejectedOrderIds = s
        return s
    }

    /// Remembers that a rejected line of an orders file named `orderId`.
    public func noteRejectedOrderLine(orderId: String) throws {
        _ = try loadRejectedOrderIds()
        rejectedOrderIds?.insert(orderId)
    }

    /// Marks the open rejected lines of orders files naming `orderId` as resolved: the order
    /// was read again from a valid line after them (`recordId`, `note` says where), which
    /// replaces whatever the rejected lines said. Called for each valid order line as it is
    /// stored, so a rejected line that comes after the valid one stays open; a valid line
    /// that repeats one the order already had (the same bytes, e.g. a file copied under
    /// another name) corrects nothing and resolves nothing. Returns how many.
    @discardableResult
    public func resolveRejectedOrderLines(orderId: String, recordId: Int64, sha256: String, runId: Int64,
                                          note: @autoclosure () -> String) throws -> Int {
        guard try loadRejectedOrderIds().contains(orderId) else { return 0 }
        let repeated = try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT EXISTS (SELECT 1 FROM order_version v JOIN source_record r ON r.id = v.record_id
                           WHERE v.order_id = ? AND v.record_id <> ? AND r.record_sha256 = ?)
            """), arguments: [orderId, recordId, sha256]) ?? false
        if repeated { return 0 }
        try db.cachedStatement(sql: """
            UPDATE source_record INDEXED BY source_record_unverified_order SET resolved_run_id = ?, resolved_note = ?
            WHERE outcome <> 'verified' AND outcome = 'rejected' AND resolved_run_id IS NULL AND order_id = ?
              AND (SELECT kind FROM source_file WHERE id = file_id) = 'orders'
            """).execute(arguments: [runId, note(), orderId])
        rejectedOrderIds?.remove(orderId)
        return db.changesCount
    }

    /// Resolves the open whole-file rejections (`EMPTY_FILE`, `INVALID_UTF8`, `FILE_TOO_LARGE`,
    /// an orders file's `BAD_CSV` header)
    /// of earlier versions of `path`, now that a version of it was read with records: an empty
    /// file (a transfer that failed?) that later arrived whole no longer waits for anyone.
    /// Returns how many.
    @discardableResult
    public func resolveWholeFileRejections(path: String, fileId: Int64, runId: Int64, note: String) throws -> Int {
        try db.cachedStatement(sql: """
            UPDATE source_record INDEXED BY source_record_open SET resolved_run_id = ?, resolved_note = ?
            WHERE outcome <> 'verified' AND outcome = 'rejected' AND resolved_run_id IS NULL
              AND reason_code IN ('EMPTY_FILE', 'INVALID_UTF8', 'FILE_TOO_LARGE', 'BAD_CSV')
              -- The file's own rejection (it keeps the file's hash), not a line's: a line of a
              -- JSON Lines file that is not UTF-8 was settled when the file grew, still broken.
              AND record_sha256 = (SELECT f.sha256 FROM source_file f WHERE f.id = file_id)
              AND (reason_code = 'BAD_CSV' OR substr(reason, 1, 9) = 'the file ')
              AND file_id IN (SELECT id FROM source_file WHERE path = ? AND id <> ?)
            """).execute(arguments: [runId, note, path, fileId])
        return db.changesCount
    }

    /// The paths with a line cut short (`TRUNCATED`) that is still open.
    public func pathsWithOpenTruncatedLines() throws -> Set<String> {
        Set(try String.fetchAll(db, sql: """
            SELECT DISTINCT f.path FROM source_record r INDEXED BY source_record_open JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome <> 'verified' AND r.reason_code = 'TRUNCATED' AND r.resolved_run_id IS NULL
            """))
    }

    /// The records stored from the versions of `path` with these bytes (line, text as read), in
    /// line order: those a version brought that no earlier version had.
    public func storedRecords(path: String, sha256: String) throws -> [(line: Int, text: String)] {
        try Row.fetchAll(db, sql: """
            SELECT r.id, r.line FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = ? AND f.sha256 = ? AND r.reason_code IS NOT 'TRUNCATED' ORDER BY r.line, r.id
            """, arguments: [path, sha256]).compactMap { row in
            let id: Int64 = row[0]
            return try recordText(id).map { (row[1], $0) }
        }
    }

    /// A record an earlier version of a file ended inside (`TRUNCATED`), still open: the lines
    /// it spanned (from its first line to the line after its last: a cut after a JSON array
    /// element's comma ended on the line before the next one) and the bytes it held, compared
    /// as bytes (not Swift's canonical equivalence: a cut between a letter and its combining
    /// mark is a prefix of the bytes, not of the characters), less carriage returns (the file
    /// sent whole with other line ends), the opening bracket of a JSON array, a comma and the
    /// blanks around them.
    public struct OpenCut {
        public let id: Int64
        public let line: Int
        public let spanned: ClosedRange<Int>
        let held: [UInt8]
        /// Its text as stored, byte for byte, and its SHA-256: the same line read again now that
        /// it ends (wherever it stands now).
        let text: [UInt8]
        public let sha256: String

        /// Bytes compared with what a cut record held: carriage returns left out, and the
        /// blanks, opening bracket and commas before the record.
        static func comparable<C: Collection>(_ bytes: C) -> [UInt8] where C.Element == UInt8 {
            let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 }
            return Array(bytes.lazy.filter { $0 != 0x0D }.drop { blank($0) || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: ",") })
        }
    }

    /// The open cut records of a path, and what of a version's records could settle them.
    public struct OpenCuts {
        public let cuts: [OpenCut]
        private let lines: Set<Int>
        private let hashes: Set<String>
        public var isEmpty: Bool { cuts.isEmpty }

        init(_ cuts: [OpenCut]) {
            self.cuts = cuts
            lines = Set(cuts.flatMap { Array($0.spanned) })
            hashes = Set(cuts.map(\.sha256))
        }

        /// Whether a record read whole at `line` (of these bytes, when known) may settle one:
        /// it stands on a line a cut one spanned, or is the same bytes read again.
        public func wants(line: Int, sha256: String? = nil) -> Bool {
            !cuts.isEmpty && (lines.contains(line) || sha256.map(hashes.contains) == true)
        }
    }

    /// The open cut records of the versions of `path` other than `sha256`.
    public func openCuts(path: String, otherThan sha256: String) throws -> OpenCuts {
        OpenCuts(try Row.fetchAll(db, sql: """
            SELECT r.id, r.line, r.record_sha256 FROM source_record r INDEXED BY source_record_open
            WHERE r.outcome <> 'verified' AND r.outcome = 'rejected' AND r.reason_code = 'TRUNCATED' AND r.resolved_run_id IS NULL
              AND r.file_id IN (SELECT id FROM source_file WHERE path = ? AND sha256 <> ?)
            """, arguments: [path, sha256]).compactMap { row in
            let id: Int64 = row[0], line: Int = row[1]
            guard let cut = try recordText(id) else { return nil }
            var held = OpenCut.comparable(cut.utf8)
            while let last = held.last, last == 0x20 || last == 0x0A || last == 0x09 { held.removeLast() }
            return OpenCut(id: id, line: line, spanned: line...(line + cut.utf8.lazy.filter { $0 == 0x0A }.count + 1), held: held,
                           text: Array(cut.utf8), sha256: row[2])
        })
    }

    /// Settles each cut record that a record of this version of `path` (`records`: line and
    /// text of records read whole: a line that ends now, whatever it holds) holds whole: one
    /// that starts on a line the cut one spanned and whose text begins with what the cut one
    /// held (both without the blanks, bracket and commas before a record), or, on any line, the
    /// same bytes the cut one held, read again now that its line ends (rejected for what they
    /// are: it stays open as that record). Not by line alone: the next batch written to the same
    /// path holds whole records on the same lines, and settled the cut one (its transaction lost).
    public func settleCuts(_ cuts: OpenCuts, path: String, records: [(line: Int, text: Substring)], runId: Int64) throws {
        for cut in cuts.cuts {
            guard let whole = records.first(where: { r in
                r.text.utf8.elementsEqual(cut.text)
                    || (cut.spanned.contains(r.line) && OpenCut.comparable(r.text.utf8).starts(with: cut.held))
            })?.line else { continue }
            try db.execute(sql: """
                UPDATE source_record SET resolved_run_id = ?, resolved_note = ?
                WHERE id = ? AND resolved_run_id IS NULL
                """, arguments: [runId, "line \(cut.line): its record is whole at line \(whole) of a later version of \(path)", cut.id])
        }
    }

    /// Hashes of the records of `path` the ledger has (`recordHashCounts`), for telling the records
    /// of a version read before from new ones; and those of its lines cut short and still open:
    /// such a line with its line end after it now (the file went on past it as it stood) is
    /// read again as the record it is now (rejected for what it is, if not whole), not skipped
    /// as read: a cut line later ended as it was was settled with nothing open for it.
    public func recordsReadBefore(path: String) throws -> RecordsReadBefore {
        let hashes = try recordHashCounts(path: path)
        guard !hashes.isEmpty else { return RecordsReadBefore(hashes: [:], cut: []) }
        let cut = Set(try String.fetchAll(db.cachedStatement(sql: """
            SELECT r.record_sha256 FROM source_record r INDEXED BY source_record_open JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome <> 'verified' AND r.outcome = 'rejected' AND r.reason_code = 'TRUNCATED' AND r.resolved_run_id IS NULL
              AND f.path = ?
            """), arguments: [path]))
        return RecordsReadBefore(hashes: hashes, cut: cut)
    }

    private func loadUnverifiedIds() throws -> Set<String> {
        if let s = unverifiedIds { return s }
        let s = Set(try String.fetchAll(db, sql: "SELECT DISTINCT transaction_id FROM unverified_record_transaction"))
        unverifiedIds = s
        return s
    }

    private func loadOpenFindingKeys() throws -> Set<String> {
        if let s = openFindingKeys { return s }
        let s = Set(try String.fetchAll(db, sql: "SELECT code || ' ' || transaction_id FROM finding WHERE resolved_run_id IS NULL"))
        openFindingKeys = s
        return s
    }
    /// The last entry's id and hash (0 and the genesis hash for an empty ledger), read once
    /// per run and then kept up to date by `insertEntry`.
    private var chainTip: (id: Int64, hash: String)?

    func currentChainTip() throws -> (id: Int64, hash: String) {
        if let tip = chainTip { return tip }
        let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, hash FROM entry ORDER BY id DESC LIMIT 1"))
        let tip = row.map { (id: $0[0] as Int64, hash: $0[1] as String) } ?? (0, EntryHash.genesis)
        chainTip = tip
        return tip
    }

    /// The hash of the last entry (the genesis hash for an empty ledger).
    func currentChainHead() throws -> String { try currentChainTip().hash }

    public func beginRun(asOf: Day, toolVersion: String, startedAt: String) throws -> Int64 {
        // A writer's ledger is migrated to the newest schema when it opens.
        try db.cachedStatement(sql: "INSERT INTO run (as_of, started_at, tool_version, schema_migration) VALUES (?, ?, ?, ?)").execute(
                       arguments: [asOf.description, startedAt, toolVersion, Schema.newestMigration])
        return db.lastInsertedRowID
    }

    public struct RunCounts {
        public var read = 0, verified = 0, pending = 0, rejected = 0, skipped = 0, entriesPosted = 0
        /// Of the verified, order lines that repeat a version their order has (a cumulative
        /// export under a new name each night): kept, nothing new. Said in the summary only.
        public var repeatedOrderLines = 0
        public init() {}
    }

    /// Finishes the run and seals it (LedgerSeal). Returns its seal.
    @discardableResult
    public func finishRun(_ id: Int64, counts: RunCounts, finishedAt: String) throws -> String {
        try db.cachedStatement(sql: """
            UPDATE run SET finished_at = ?, records_read = ?, records_verified = ?, records_pending = ?,
                records_rejected = ?, records_skipped = ?, entries_posted = ?, chain_head = ?,
                closed_through = (SELECT max(month) FROM period_close) WHERE id = ?
            """).execute( arguments: [finishedAt, counts.read, counts.verified, counts.pending, counts.rejected,
                             counts.skipped, counts.entriesPosted, try currentChainHead(), id])
        return try sealRun(id)
    }

    public func addFile(runId: Int64, path: String, kind: String, sha256: String, statKey: String? = nil, sizeBytes: Int64,
                        records: Int, newRecords: Int) throws -> Int64 {
        try db.cachedStatement(sql: """
            INSERT INTO source_file (run_id, path, kind, sha256, size_bytes, records, new_records, stat_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """).execute( arguments: [runId, path, kind, sha256, sizeBytes, records, newRecords, statKey])
        return db.lastInsertedRowID
    }

    /// Keeps an orders file's header row as read (the columns its lines are read by).
    public func addFileHeader(fileId: Int64, header: String) throws {
        try db.cachedStatement(sql: "INSERT INTO source_file_header (file_id, header) VALUES (?, ?)").execute(arguments: [fileId, header])
    }

    /// Remembers the identity on disk of a file version read before (found again by its hash),
    /// in place of the one it had when read (a file copied again with the same bytes).
    public func rememberStatKey(_ key: String, path: String, sha256: String) throws {
        try db.cachedStatement(sql: "UPDATE source_file SET stat_key = ? WHERE path = ? AND sha256 = ?")
            .execute(arguments: [key, path, sha256])
    }

    public struct RecordInfo {
        public var fileId: Int64
        public var line: Int
        public var sha256: String
        public var outcome: RecordOutcome
        public var reasonCode: String?
        public var reason: String?
        public var statusCode: Int?
        public var environment: String?
        public var accountId: String?
        public var orderId: String?
        public var receivedAt: String?
        public var raw: RecordText
        public init(fileId: Int64, line: Int, sha256: String, outcome: RecordOutcome, reasonCode: String? = nil,
                    reason: String? = nil, statusCode: Int? = nil, environment: String? = nil, accountId: String? = nil,
                    orderId: String? = nil, receivedAt: String? = nil, raw: RecordText) {
            self.fileId = fileId; self.line = line; self.sha256 = sha256; self.outcome = outcome
            self.reasonCode = reasonCode; self.reason = reason; self.statusCode = statusCode
            self.environment = environment; self.accountId = accountId; self.orderId = orderId
            self.receivedAt = receivedAt; self.raw = raw
        }
    }

    public func addRecord(_ r: RecordInfo) throws -> Int64 {
        var chunkId: Int64?, offset: Int?, length: Int?
        var raw = ""
        switch r.raw {
        case .inline(let text): raw = text
        case let .chunk(chunk, o, l):
            chunkId = try insertChunk(chunk)
            offset = o
            length = l
        }
        let stmt = try db.cachedStatement(sql: """
            INSERT INTO source_record (file_id, line, record_sha256, outcome, reason_code, reason, status_code,
                environment, account_id, order_id, received_at, raw, chunk_id, chunk_offset, chunk_length)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        var f = FastStatement(stmt, in: db)
        f.bind(r.fileId); f.bind(r.line); f.bind(r.sha256); f.bind(r.outcome.rawValue); f.bind(r.reasonCode); f.bind(r.reason.map(StoreBounds.boundedMessage))
        f.bind(r.statusCode); f.bind(r.environment); f.bind(r.accountId); f.bind(r.orderId); f.bind(r.receivedAt); f.bind(raw)
        f.bind(chunkId); f.bind(offset); f.bind(length)
        try f.run()
        return db.lastInsertedRowID
    }

    /// The chunk's row id, inserting it first when this is the first record stored from it.
    func insertChunk(_ chunk: RecordChunk) throws -> Int64 {
        if let id = chunk.rowId { return id }
        let stmt = try db.cachedStatement(sql: "INSERT INTO source_chunk (codec, text_bytes, data) VALUES ('zstd', ?, ?)")
        try stmt.execute(arguments: [chunk.textBytes, Data(chunk.data)])
        chunk.rowId = db.lastInsertedRowID
        return db.lastInsertedRowID
    }

    /// Remembers which transactions a pending or rejected record names: a later verified
    /// record resolves a pending one, and reconciliation knows credits for them were unverified.
    public func noteUnverifiedRecord(_ recordId: Int64, transactionIds: [String]) throws {
        _ = try loadUnverifiedIds()
        for id in Set(transactionIds) {
            unverifiedIds?.insert(id)
            touched.transaction(id)
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO unverified_record_transaction (record_id, transaction_id) VALUES (?, ?)").execute(
                           arguments: [recordId, id])
        }
    }

    /// Marks the pending records naming `transactionId` as resolved, each once every
    /// transaction it names is verified (stored): nothing is left to wait for. Rejected
    /// records stay open: what they carried (a refund, a forged claim) was not applied.
    @discardableResult
    public func resolvePendingRecords(transactionId: String, runId: Int64, note: @autoclosure () -> String) throws -> Int {
        guard try loadUnverifiedIds().contains(transactionId) else { return 0 }
        try db.cachedStatement(sql: """
            UPDATE source_record SET resolved_run_id = ?, resolved_note = ?
            WHERE outcome = 'pending' AND resolved_run_id IS NULL
              AND id IN (SELECT record_id FROM unverified_record_transaction WHERE transaction_id = ?)
              AND NOT EXISTS (SELECT 1 FROM unverified_record_transaction u
                              WHERE u.record_id = source_record.id
                                AND NOT EXISTS (SELECT 1 FROM store_transaction t WHERE t.transaction_id = u.transaction_id))
            """).execute(arguments: [runId, note(), transactionId])
        return db.changesCount
    }

    /// Settles a pending or rejected record that repeats one read before: the same bytes
    /// (record SHA-256), the same outcome, reason code and reason (a file sent again under
    /// another name, a line given twice, a bad row in a cumulative export). The earlier record
    /// stands for both on every open list (Rejected, Run Info, `findings`), and what settles it
    /// (a verified record, a correction, a dismissal) settles the matter; the repeat is kept as
    /// its own record, traced to the one it repeats. Only a record that says what it is about
    /// (`identifies`): a bare failed response, `{"status": 21003}`, is the same bytes for every
    /// purchase that failed, each its own, so it repeats only itself, at its line of a byte
    /// copy of its file. A repeat with another outcome or reason (a root trusted since, a rule
    /// added) tells something new and stays open. Returns whether it settled the record.
    @discardableResult
    public func resolveRepeatedRecord(recordId: Int64, _ info: RecordInfo, runId: Int64) throws -> Bool {
        guard info.outcome != .verified, let reason = info.reason.map(StoreBounds.boundedMessage) else { return false }
        let twin = Self.repeatTwin(sha256: "?1", outcome: "?2", reasonCode: "?3", reason: "?4")
        let same: [DatabaseValueConvertible?] = [info.sha256, info.outcome.rawValue, info.reasonCode, reason]
        func earlier(_ also: String, _ more: [DatabaseValueConvertible?]) throws -> Row? {
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT f.path, e.line, run.as_of FROM source_record e INDEXED BY source_record_unverified_sha256
                JOIN source_file f ON f.id = e.file_id JOIN run ON run.id = f.run_id
                WHERE \(twin) AND e.id < ?5 \(also) LIMIT 1
                """), arguments: StatementArguments(same + [recordId] + more))
        }
        // Any earlier twin (the first in the index: the lowest line, then the first read); most
        // records that did not verify have none, which one seek of the index says.
        guard let first = try earlier("", []) else { return false }
        guard let r = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT r.line, f.sha256, \(Self.identifiesRecord("r", file: "f"))
            FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.id = ? AND r.resolved_run_id IS NULL
            """), arguments: [recordId]) else { return false }
        // A record that does not identify itself: the twin at its line of a copy of its file
        // (a seek too: a bare response given 200,000 times in one file would read, for each,
        // every twin at a line before its own).
        let identifies: Bool = r[2]
        guard let twinRow = try identifies ? first : earlier("AND e.line = ?6 AND f.sha256 = ?7", [r[0] as Int64, r[1] as String])
        else { return false }
        let path: String = twinRow[0], line: Int64 = twinRow[1], asOf: String = twinRow[2]
        try db.cachedStatement(sql: "UPDATE source_record SET resolved_run_id = ?, resolved_note = ? WHERE id = ? AND resolved_run_id IS NULL")
            .execute(arguments: [runId, "\(Self.repeatNotePrefix)\(path):\(line) (read by the night of \(asOf)), which stands for it", recordId])
        return db.changesCount > 0
    }

    /// SQL: record `e` is a twin of a record of these bytes, outcome, reason code and reason
    /// (each an SQL expression), as the index of records that did not verify finds it.
    public static func repeatTwin(sha256: String, outcome: String, reasonCode: String, reason: String) -> String {
        "e.record_sha256 = \(sha256) AND e.outcome <> 'verified' AND e.outcome = \(outcome) AND e.reason_code IS \(reasonCode) AND e.reason = \(reason)"
    }

    /// How the resolution of a record settled as a repeat begins (`verify` reads it).
    public static let repeatNotePrefix = "the same record as "

    /// SQL: whether record `r` (of file `f`) says what it is about, so that the same bytes are
    /// the same record wherever they come: a signed record (its signature is its own), an
    /// orders row naming its order, a receipt naming a transaction, an order or an account.
    public static func identifiesRecord(_ r: String, file f: String) -> String {
        """
        (\(f).kind = 'signed' OR \(r).order_id IS NOT NULL OR \(r).account_id IS NOT NULL
         OR EXISTS (SELECT 1 FROM unverified_record_transaction u WHERE u.record_id = \(r).id))
        """
    }

    /// Stores a transaction the ledger does not have yet (its sale waits to be posted), with
    /// `recordId` as its `first_record_id` (not linked in `transaction_source`); false,
    /// writing nothing, when the ledger has it already.
    public func insertTransactionIfNew(_ t: TransactionObservation, recordId: Int64, runId: Int64) throws -> Bool {
        // Only the key's conflict is ignored: a CHECK or NOT NULL violation still fails.
        let stmt = try db.cachedStatement(sql: """
            INSERT INTO store_transaction (transaction_id, book, original_transaction_id, product_id, quantity, purchase_ms,
                expires_ms, cancellation_ms, revocation_percentage, storefront, currency, price_milliunits, app_account_token,
                bundle_id, has_offer, is_free_trial, first_record_id, first_run_id, sale_status, pending_reason)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 'not posted yet')
            ON CONFLICT (transaction_id) DO NOTHING
            """)
        var f = FastStatement(stmt, in: db)
        f.bind(t.transactionId); f.bind(t.book.rawValue); f.bind(t.originalTransactionId); f.bind(t.productId); f.bind(t.quantity)
        f.bind(t.purchaseMs); f.bind(t.expiresMs); f.bind(t.cancellationMs); f.bind(t.revocationPercentage); f.bind(t.storefront)
        f.bind(t.currency); f.bind(t.priceMilliunits); f.bind(t.appAccountToken); f.bind(t.bundleId); f.bind(t.hasOffer)
        f.bind(t.isFreeTrial); f.bind(recordId); f.bind(runId)
        try f.run()
        guard db.changesCount > 0 else { return false }
        touched.transaction(t.transactionId)
        // The record that brought it is its `first_record_id`: only later ones are linked.
        return true
    }

    /// Makes `recordId` (a signed record of the transaction, agreeing with the stored one) the
    /// record the transaction is taken from while its sale waits: its storefront, currency,
    /// price and the rest come from it (a legacy receipt, the record before, carries none),
    /// a refund already known is kept (its share, which a receipt does not give, is taken after
    /// by `takeRefundShare`), and the record before becomes a later source. False, writing
    /// nothing, once the sale is no longer waiting.
    public func adoptRecord(_ t: TransactionObservation, recordId: Int64, previousRecordId: Int64) throws -> Bool {
        try db.cachedStatement(sql: """
            UPDATE store_transaction SET original_transaction_id = ?, expires_ms = ?, storefront = ?, currency = ?,
                price_milliunits = ?, app_account_token = ?, bundle_id = ?, has_offer = ?, is_free_trial = ?, first_record_id = ?,
                revocation_percentage = CASE WHEN cancellation_ms IS NULL THEN ? ELSE revocation_percentage END,
                cancellation_ms = ifnull(cancellation_ms, ?)
            WHERE transaction_id = ? AND sale_status = 'pending'
            """).execute(arguments: [t.originalTransactionId, t.expiresMs, t.storefront, t.currency, t.priceMilliunits,
                                     t.appAccountToken, t.bundleId, t.hasOffer, t.isFreeTrial, recordId,
                                     t.revocationPercentage, t.cancellationMs, t.transactionId])
        guard db.changesCount > 0 else { return false }
        try linkSource(transactionId: t.transactionId, recordId: previousRecordId)
        touched.transaction(t.transactionId)
        return true
    }

    /// Where a stored record was read: its file's path, its line, and the run that read it.
    public func recordPlace(_ recordId: Int64) throws -> (path: String, line: Int, runId: Int64)? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT f.path, r.line, f.run_id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.id = ?
            """), arguments: [recordId]).map { ($0[0], $0[1], $0[2]) }
    }

    /// Links a later source of a transaction, stored or not (`transaction_source`: every
    /// source but the one that stored it, the transaction's `first_record_id`; ledgers
    /// written before 2026-11-22 link that one too).
    public func linkSource(transactionId: String, recordId: Int64) throws {
        var f = FastStatement(try db.cachedStatement(sql: "INSERT OR IGNORE INTO transaction_source (transaction_id, record_id) VALUES (?, ?)"), in: db)
        f.bind(transactionId); f.bind(recordId)
        try f.run()
    }

    /// The share (and instant: `verify` then finds both in one record) of the refund a
    /// transaction holds in full, from a record that gives it for the same day, while its sale
    /// waits (no refund is posted yet); the store's last word, where it is that refund, takes
    /// the share too. False when nothing changed (the sale no longer waits, or the refund is
    /// another day's).
    public func takeRefundShare(transactionId: String, cancellationMs: Int64, percentage: Int64) throws -> Bool {
        try db.cachedStatement(sql: """
            UPDATE store_transaction SET cancellation_ms = ?1, revocation_percentage = ?2,
                -- The store's last word, where it is this refund (kept in full), takes its share too.
                store_refund_share = CASE WHEN store_refund_ms / 86400000 = ?1 / 86400000 AND store_refund_share <> 0
                                          THEN ?2 ELSE store_refund_share END
            WHERE transaction_id = ?3 AND sale_status = 'pending' AND revocation_percentage IS NULL
              AND cancellation_ms / 86400000 = ?1 / 86400000
            """).execute(arguments: [cancellationMs, percentage, transactionId])
        guard db.changesCount > 0 else { return false }
        touched.transaction(transactionId)
        return true
    }

    /// Records a refund (cancellation or revocation) that a transaction did not have before.
    public func setCancellation(transactionId: String, cancellationMs: Int64, percentage: Int64?) throws {
        try db.cachedStatement(sql: """
            UPDATE store_transaction SET cancellation_ms = ?, revocation_percentage = ?
            WHERE transaction_id = ? AND cancellation_ms IS NULL
            """).execute( arguments: [cancellationMs, percentage, transactionId])
        touched.transaction(transactionId)
    }

    /// What the store said last of a transaction's refund beyond the ledger's one refund and
    /// one reversal (a second refund, or a second reversal): the share it refunded (100000 in
    /// full), or 0 when it reversed it again, dated `atMs` (the refund's date, the reversal's
    /// signed date). A word dated before the one kept (read late, or a stale receipt read
    /// again) changes nothing; by day, as the ledger's one refund and reversal are compared: a
    /// reversal of the same day as the refund kept is the last word, and a refund of the same
    /// day as the reversal kept is not (two refunds of a day: the later instant). With
    /// `onlyOverAnother`, only a word already kept is replaced (the ledger's first reversal,
    /// after a second refund read before it). Reconciliation reads it; no entry moves.
    public func setStoreRefundShare(transactionId: String, share: Int64, atMs: Int64, onlyOverAnother: Bool = false) throws {
        try db.cachedStatement(sql: """
            UPDATE store_transaction SET store_refund_share = ?1, store_refund_ms = ?2
            WHERE transaction_id = ?3
              AND (store_refund_ms IS NULL OR ?2 / 86400000 > store_refund_ms / 86400000
                   OR (?2 / 86400000 = store_refund_ms / 86400000 AND (?1 = 0 OR (store_refund_share <> 0 AND ?2 >= store_refund_ms))))
              AND (?4 = 0 OR store_refund_share IS NOT NULL)
            """).execute(arguments: [share, atMs, transactionId, onlyOverAnother])
        touched.transaction(transactionId)
    }

    /// The refund the ledger holds, said again at its own share (`share`, at `atMs`) after a
    /// record of the same day said another: the store's word again, when it is that other share
    /// (not a reversal, not another day's refund) and this record is not older than it.
    public func restoreStoreRefundShare(transactionId: String, share: Int64, atMs: Int64) throws {
        try db.cachedStatement(sql: """
            UPDATE store_transaction SET store_refund_share = ?1, store_refund_ms = ?2
            WHERE transaction_id = ?3 AND store_refund_share IS NOT NULL AND store_refund_share NOT IN (0, ?1)
              AND store_refund_ms / 86400000 = ?2 / 86400000 AND ?2 >= store_refund_ms
            """).execute(arguments: [share, atMs, transactionId])
        if db.changesCount > 0 { touched.transaction(transactionId) }
    }

    public func setSaleStatus(transactionId: String, status: String, pendingReason: String?) throws {
        var f = FastStatement(try db.cachedStatement(sql: "UPDATE store_transaction SET sale_status = ?, pending_reason = ? WHERE transaction_id = ?"), in: db)
        f.bind(status); f.bind(pendingReason); f.bind(transactionId)
        try f.run()
    }

    func accountId(_ name: String) throws -> Int64 {
        if let id = accountIds[name] { return id }
        try db.cachedStatement(sql: "INSERT OR IGNORE INTO account (name) VALUES (?)").execute( arguments: [name])
        let id = try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM account WHERE name = ?"), arguments: [name])!
        accountIds[name] = id
        return id
    }

    /// Appends an entry (its postings follow from its amounts, `PostingRule`). An unbalanced
    /// entry, or one whose postings are not its rules', is a bug: it never reaches the disk.
    @discardableResult
    /// - Parameter quantity: the quantity of the entry's transaction, for the month totals
    ///   (nil: read from the ledger).
    public func insertEntry(_ e: EntryDraft, runId: Int64, quantity: Int64? = nil) throws -> Int64 {
        try insertEntry(PreparedEntry(e), runId: runId, quantity: quantity)
    }

    /// `insertEntry` of an entry prepared before (its rules JSON and hashed text made on
    /// another thread).
    @discardableResult
    public func insertEntry(_ prepared: PreparedEntry, runId: Int64, quantity: Int64? = nil) throws -> Int64 {
        let e = prepared.entry, rulesJSON = prepared.rulesJSON
        precondition(prepared.isBalanced, "refusing to write unbalanced entry \(e.kind.rawValue) of \(e.transactionId)")
        precondition(prepared.followsPostingRules,
                     "refusing to write entry \(e.kind.rawValue) of \(e.transactionId): its postings are not the ones its amounts give")
        let f = e.figures
        let tip = try currentChainTip()
        let entryId = tip.id + 1

        let hash = EntryHash.hash(previous: tip.hash, entryId: entryId, body: prepared.hashBody)
        let stmt = try db.cachedStatement(sql: """
            INSERT INTO entry (id, run_id, book, transaction_id, kind, date, original_date, late, product_id, storefront, currency,
                reporting_currency, gross_minor, tax_minor, net_minor, commission_minor, proceeds_minor, gross_reporting_minor,
                net_reporting_minor, commission_reporting_minor, proceeds_reporting_minor, refund_percentage, rules_json, hash)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        var x = FastStatement(stmt, in: db)
        x.bind(entryId); x.bind(runId); x.bind(e.book.rawValue); x.bind(e.transactionId); x.bind(e.kind.rawValue)
        let date = e.date.description
        x.bind(date); x.bind(e.originalDate.description); x.bind(e.late); x.bind(e.productId); x.bind(e.storefront)
        x.bind(f.currency); x.bind(f.reportingCurrency); x.bind(f.grossMinor); x.bind(f.taxMinor); x.bind(f.netMinor)
        x.bind(f.commissionMinor); x.bind(f.proceedsMinor); x.bind(f.grossReportingMinor); x.bind(f.netReportingMinor)
        x.bind(f.commissionReportingMinor); x.bind(f.proceedsReportingMinor); x.bind(e.refundPercentage); x.bind(rulesJSON); x.bind(hash)
        try x.run()
        chainTip = (entryId, hash)
        touched.transaction(e.transactionId)
        // The postings are not written: the `posting` view gives them from the entry's amounts.
        var accounts: [Int64] = []
        accounts.reserveCapacity(e.postings.count)
        for p in e.postings { accounts.append(try accountId(p.account)) }
        let units = try quantity ?? Int64.fetchOne(db.cachedStatement(sql: "SELECT quantity FROM store_transaction WHERE transaction_id = ?"),
                                                   arguments: [e.transactionId])
        monthDelta.add(e, date: date, accountIds: accounts, quantity: units)
        return entryId
    }

    /// Opens (or refreshes) a finding; it stays open until `resolveFinding` is called.
    /// Opens the finding, or refreshes it (found again). One dismissed by finance
    /// (`resolved_note`) stays so while it says the same; saying something else, it opens again.
    public func openFinding(code: String, transactionId: String, recordId: Int64?, message: String, runId: Int64) throws {
        let wasOpen = try loadOpenFindingKeys().contains("\(code) \(transactionId)")
        openFindingKeys?.insert("\(code) \(transactionId)")
        let after = try Row.fetchOne(db.cachedStatement(sql: """
            INSERT INTO finding (code, transaction_id, record_id, message, first_run_id, last_run_id)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (code, transaction_id, ifnull(record_id, 0))
            DO UPDATE SET message = excluded.message, last_run_id = excluded.last_run_id, \(try findingNotes
                ? """
                  resolved_run_id = CASE WHEN resolved_note IS NOT NULL AND message = excluded.message THEN resolved_run_id END,
                  resolved_note = CASE WHEN resolved_note IS NOT NULL AND message = excluded.message THEN resolved_note END
                  """
                : "resolved_run_id = NULL")
            RETURNING first_run_id, resolved_run_id IS NULL
            """), arguments: [code, transactionId, recordId, StoreBounds.boundedMessage(message), runId, runId])
        if !wasOpen, let after, (after[1] as Bool), (after[0] as Int64) != runId { findingsReopened += 1 }
    }

    /// Whether findings keep a resolution note (schema v30 on).
    var findingNotes: Bool {
        get throws {
            if let known = findingNotesKnown { return known }
            let has = try hasFindingNotes()
            findingNotesKnown = has
            return has
        }
    }

    /// Whether a finding of `code` about `transactionId` whose text holds `text` was opened,
    /// whatever became of it since (open, dismissed or resolved): the same second refund or
    /// reversal reported again by another record (receipts list every transaction again) is
    /// not said again.
    public func findingSaid(code: String, transactionId: String, containing text: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT EXISTS (SELECT 1 FROM finding WHERE code = ? AND transaction_id = ? AND instr(message, ?) > 0)
            """), arguments: [code, transactionId, text]) ?? false
    }

    /// Whether a second refund of `transactionId` dated `day` was said already, by any record
    /// (`REFUND_AGAIN` or `REFUND_AFTER_REVERSAL`, whose texts name its day so).
    public func secondRefundSaid(transactionId: String, day: Day) throws -> Bool {
        try findingSaid(code: "REFUND_AGAIN", transactionId: transactionId, containing: " on \(day), but the ledger holds")
            || findingSaid(code: "REFUND_AFTER_REVERSAL", transactionId: transactionId, containing: "revoked \(day))")
    }

    /// Resolves an open finding; `saying`, its text becomes that (a finding a night resolves by
    /// itself then keeps, for the audit trail, what settled it rather than what it asked).
    public func resolveFinding(code: String, transactionId: String, runId: Int64, saying message: String? = nil) throws {
        guard try loadOpenFindingKeys().contains("\(code) \(transactionId)") else { return }
        openFindingKeys?.remove("\(code) \(transactionId)")
        try db.cachedStatement(sql: """
            UPDATE finding SET resolved_run_id = ?, message = ifnull(?, message) WHERE code = ? AND transaction_id = ? AND resolved_run_id IS NULL
            """).execute(arguments: [runId, message.map(StoreBounds.boundedMessage), code, transactionId])
    }

    /// Records a notification; false when its UUID was seen before (a resend: a no-op).
    public func addNotification(uuid: String, recordId: Int64, runId: Int64, type: String, subtype: String?,
                                signedMs: Int64?, environment: String?, transactionId: String?) throws -> Bool {
        try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO notification (uuid, record_id, run_id, notification_type, subtype, signed_ms, environment, transaction_id)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """).execute( arguments: [uuid, recordId, runId, type, subtype, signedMs, environment, transactionId])
        return db.changesCount > 0
    }

    /// The notification first read under `uuid`: its type, subtype, transaction and the line
    /// it was read from.
    public func notification(uuid: String) throws -> (type: String, subtype: String?, transactionId: String?, location: String)? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT n.notification_type, n.subtype, n.transaction_id, f.path, r.line FROM notification n
            JOIN source_record r ON r.id = n.record_id JOIN source_file f ON f.id = r.file_id WHERE n.uuid = ?
            """), arguments: [uuid]) else { return nil }
        return (r[0], r[1], r[2], "\(r[3] as String):\(r[4] as Int64)")
    }

    /// Asks for a refund reversal (REFUND_REVERSED), dated `date`; the first request counts.
    public func requestReversal(book: Book, transactionId: String, date: Day, notificationUUID: String) throws {
        try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO reversal_request (book, transaction_id, date, notification_uuid) VALUES (?, ?, ?, ?)
            """).execute( arguments: [book.rawValue, transactionId, date.description, notificationUUID])
        touched.transaction(transactionId)
    }

    /// The reversal already asked for a transaction (the first REFUND_REVERSED that agreed with
    /// it): its notification and the date it posts on.
    public func reversalRequest(book: Book, transactionId: String) throws -> (uuid: String, date: Day)? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT notification_uuid, date FROM reversal_request WHERE book = ? AND transaction_id = ?
            """), arguments: [book.rawValue, transactionId]) else { return nil }
        return (r[0], Day(iso: r[1] as String)!)
    }

    /// Reversal requests whose refund is posted and whose reversal is not.
    public func reversalsDue() throws -> [(book: Book, transactionId: String, date: Day)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT q.book, q.transaction_id, q.date FROM reversal_request q
            WHERE EXISTS (SELECT 1 FROM entry e WHERE e.book = q.book AND e.transaction_id = q.transaction_id AND e.kind = 'refund')
              AND NOT EXISTS (SELECT 1 FROM entry e WHERE e.book = q.book AND e.transaction_id = q.transaction_id AND e.kind = 'refund_reversal')
            ORDER BY q.date, q.transaction_id
            """)).map { (Book(rawValue: $0[0])!, $0[1], Day(iso: $0[2] as String)!) }
    }

    /// What an order version says, to tell a row that brings an order back to an earlier
    /// version from one that only writes the latest again in other bytes.
    public struct OrderVersionFields: Equatable, Sendable {
        public var accountId: String, transactionId: String?, productId: String, quantity: Int64, creditedUnits: Int64
        public var creditedMs: Int64, environment: String, storefront: String?, appAccountToken: String?
        /// `reversed_at` as milliseconds, nil when not reversed (or not a timestamp).
        public var reversedMs: Int64?
        public init(accountId: String, transactionId: String?, productId: String, quantity: Int64, creditedUnits: Int64,
                    creditedMs: Int64, environment: String, storefront: String?, appAccountToken: String?, reversedMs: Int64?) {
            self.accountId = accountId; self.transactionId = transactionId?.isEmpty == true ? nil : transactionId
            self.productId = productId; self.quantity = quantity; self.creditedUnits = creditedUnits
            self.creditedMs = creditedMs; self.environment = environment; self.storefront = storefront?.uppercased()
            // Compared without case, as ACCOUNT_MISMATCH compares tokens.
            self.appAccountToken = appAccountToken?.lowercased(); self.reversedMs = reversedMs
        }
    }

    /// An order's versions, newest first: the SHA-256 of the row each was read from, what it
    /// says (`reversedMs` from `reversed_at` by `milliseconds`), and whether it is reversed.
    /// One index probe for an order new to the ledger.
    public func orderVersionsToMatch(orderId: String, milliseconds: (String) -> Int64?) throws
        -> [(sha256: String, fields: OrderVersionFields, reversed: Bool)] {
        var f = FastStatement(try db.cachedStatement(sql: """
            SELECT r.record_sha256, v.account_id, v.transaction_id, v.product_id, v.quantity, v.credited_units, v.credited_ms,
                   v.environment, v.storefront, v.app_account_token, v.reversed_at
            FROM order_version v JOIN source_record r ON r.id = v.record_id
            WHERE v.order_id = ? ORDER BY v.id DESC
            """), in: db)
        f.bind(orderId)
        var out: [(sha256: String, fields: OrderVersionFields, reversed: Bool)] = []
        try f.forEachRow { row in
            let reversed = row.textOrNil(10)
            out.append((row.text(0), OrderVersionFields(accountId: row.text(1), transactionId: row.textOrNil(2), productId: row.text(3),
                                                        quantity: row.int64(4), creditedUnits: row.int64(5), creditedMs: row.int64(6),
                                                        environment: row.text(7), storefront: row.textOrNil(8), appAccountToken: row.textOrNil(9),
                                                        reversedMs: reversed.flatMap(milliseconds)), reversed != nil))
        }
        return out
    }

    /// Whether a file of these bytes was read before under another path (a file sent again).
    public func fileReadBefore(sha256: String, otherThan path: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM source_file WHERE sha256 = ? AND path <> ?)"),
                          arguments: [sha256, path]) ?? false
    }

    /// Whether order `orderId` already has a version read from a record of these bytes.
    public func orderHasVersion(orderId: String, sha256: String) throws -> Bool {
        var f = FastStatement(try db.cachedStatement(sql: """
            SELECT EXISTS (SELECT 1 FROM order_version v JOIN source_record r ON r.id = v.record_id
                           WHERE v.order_id = ? AND r.record_sha256 = ?)
            """), in: db)
        f.bind(orderId); f.bind(sha256)
        var found = false
        try f.forEachRow { found = $0.int64(0) != 0 }
        return found
    }

    public func insertOrderVersion(orderId: String, recordId: Int64, accountId: String, transactionId: String?,
                                   productId: String, quantity: Int64, creditedUnits: Int64, creditedAt: String,
                                   creditedMs: Int64, environment: String, storefront: String?,
                                   appAccountToken: String?, reversedAt: String?) throws {
        let stmt = try db.cachedStatement(sql: """
            INSERT INTO order_version (order_id, record_id, account_id, transaction_id, product_id, quantity, credited_units,
                credited_at, credited_ms, environment, storefront, app_account_token, reversed_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        var f = FastStatement(stmt, in: db)
        f.bind(orderId); f.bind(recordId); f.bind(accountId); f.bind(transactionId); f.bind(productId); f.bind(quantity)
        f.bind(creditedUnits); f.bind(creditedAt); f.bind(creditedMs); f.bind(environment); f.bind(storefront)
        f.bind(appAccountToken); f.bind(reversedAt)
        try f.run()
        touched.order(orderId, transactionId: transactionId)
    }
}

extension JSONEncoder {
    /// Sorted keys: the same value always gives the same bytes.
    static var sorted: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }
}

/// The versions of one input path read so far: their SHA-256, and the identity on disk of
/// each version when it was read (`stat_key`, mapped to its SHA-256).
/// The records of a path read before (`LedgerWriter.recordsReadBefore`).
public struct RecordsReadBefore: Sendable {
    /// How many records of each hash the versions read before brought.
    public private(set) var hashes: [String: Int]
    /// Of them, the lines cut short still open.
    public let cut: Set<String>
    /// Whether the path was read before.
    public let isEmpty: Bool

    public init(hashes: [String: Int], cut: Set<String>) {
        self.hashes = hashes
        self.cut = cut
        isEmpty = hashes.isEmpty
    }

    /// Whether a record of these bytes, met in the file's order, was read before, taking one
    /// of them: a line given again counts again (a row appended to a growing orders file that
    /// brings its order back to an earlier line of the file was taken as read, the order left
    /// where the line before it put it). Not a cut line that ends now (`unterminated` false),
    /// which is read again as what it is now. Each pass over a file takes from its own copy.
    public mutating func take(_ sha256: String, unterminated: Bool) -> Bool {
        guard let n = hashes[sha256], n > 0, unterminated || !cut.contains(sha256) else { return false }
        hashes[sha256] = n - 1
        return true
    }
}

public struct FileVersions {
    public var sha256s: Set<String> = []
    /// The bytes of the version read last (a file whose bytes are an earlier version's was
    /// put back: a change undone in place).
    public var latestSHA256: String?
    public var statKeys: [String: String] = [:]
    /// The sizes of the versions read (a file of another size holds none of their bytes).
    public var sizes: Set<Int> = []
    public init() {}
}

/// The time a connection may spend waiting for other processes' locks, in all: each wait sleeps
/// as SQLite's own handler does (1 ms growing to 100 ms a try) and is counted, and once the
/// budget is spent every wait gives up at once.
final class BusyBudget: @unchecked Sendable {
    private let lock = NSLock()
    private var waited: TimeInterval = 0
    let seconds: TimeInterval
    static let delays: [TimeInterval] = [0.001, 0.002, 0.005, 0.010, 0.015, 0.020, 0.025, 0.025, 0.025, 0.050, 0.050, 0.100]

    init(seconds: TimeInterval) { self.seconds = seconds }

    /// The busy handler of a connection spending this budget.
    var mode: Database.BusyMode { .callback { [self] in retry(after: $0) } }

    /// The whole budget again (a new transaction).
    func reset() {
        lock.lock()
        waited = 0
        lock.unlock()
    }

    /// Whether to try the lock again after `tries` failed tries of this wait (after sleeping).
    func retry(after tries: Int) -> Bool {
        lock.lock()
        let left = seconds - waited
        lock.unlock()
        guard left > 0 else { return false }
        let step = min(Self.delays[min(max(tries, 0), Self.delays.count - 1)], left)
        usleep(useconds_t(step * 1_000_000))
        lock.lock()
        waited += step
        lock.unlock()
        return true
    }
}
