import GRDB
import LedgerCore

/// One trial balance line: a book, an account, a currency.
public struct TrialBalanceRow: Equatable, Codable {
    public var book: String
    public var account: String
    public var currency: String
    public var debitMinor: Int64
    public var creditMinor: Int64
    public var balanceMinor: Int64
    public var reportingBalanceMinor: Int64

    enum CodingKeys: String, CodingKey {
        case book, account, currency
        case debitMinor = "debit_minor", creditMinor = "credit_minor", balanceMinor = "balance_minor"
        case reportingBalanceMinor = "reporting_balance_minor"
    }
}

/// One posting with its entry, as the Journal lists it.
public struct JournalRow: Equatable {
    public var entryId: Int64
    public var book: String
    public var date: Day
    public var originalDate: Day
    public var late: Bool
    public var kind: String
    public var transactionId: String
    public var productId: String
    public var storefront: String
    public var account: String
    public var currency: String
    public var amountMinor: Int64
    public var reportingAmountMinor: Int64
}

/// An input file read by a run.
public struct FileRead: Equatable {
    public var path: String
    public var kind: String
    public var sha256: String
    public var sizeBytes: Int64
    public var records: Int
    public var newRecords: Int
}

/// A record that did not verify: rejected, or pending with the reason it waits.
public struct RecordProblem: Equatable {
    public var path: String
    public var line: Int
    public var outcome: String
    public var code: String
    public var reason: String
    public var firstSeen: Day
    public var resolved: Bool
    /// The run that read the record.
    public var runId: Int64
    /// The as-of date of the run that resolved it (a verified record of the same transaction).
    public var resolvedOn: Day? = nil
}

/// An open or resolved finding (MISSING_RULE and others).
public struct FindingRow: Equatable {
    public var code: String
    public var transactionId: String
    public var message: String
    public var firstSeen: Day
    public var resolvedOn: Day?
    public var firstRunId: Int64
    /// The book of the transaction it names, or else of the record that raised it (nil when
    /// neither is known: a record with no environment).
    public var book: String? = nil
}

/// What one run did.
public struct RunSummary: Equatable {
    public var id: Int64
    public var asOf: Day
    public var startedAt: String
    public var finishedAt: String?
    public var toolVersion: String
    public var recordsRead: Int
    public var recordsVerified: Int
    public var recordsPending: Int
    public var recordsRejected: Int
    public var recordsSkipped: Int
    public var entriesPosted: Int
    /// "full" or "incremental" (nil before reconciliation was recorded per run).
    public var reconciliation: String?
    public var files: [FileRead]
    /// The config and rules files it posted by, with their SHA-256 as read, and the roots it
    /// verified signed data to (runs since schema v22).
    public var inputs: [RunInput] = []
}

/// A file or certificate a run posted by (`run_input`): its name and SHA-256.
public struct RunInput: Equatable {
    public var path: String
    public var sha256: String
}

/// Totals over the whole ledger, for the run summary and Run Info.
public struct LedgerTotals: Equatable {
    public var transactionsPosted = 0
    public var transactionsPending = 0
    public var transactionsFree = 0
    public var recordsVerified = 0
    /// Pending and rejected records still open (not resolved).
    public var recordsPending = 0
    public var recordsRejected = 0
    /// Pending or rejected records resolved since (by a verified record of what they named,
    /// or a later valid line of their order): with the three above, every record.
    public var recordsResolved = 0
    public var entries = 0
    public var postings = 0
    /// The hash of the last entry (the head of the hash chain; the genesis hash while empty).
    public var chainHead = EntryHash.genesis
    /// The ledger's latest seal (LedgerSeal: runs, their records, closes); nil before any.
    public var seal: String? = nil
    /// The report files' registrations chain head (ReportFileChain); nil before any.
    public var reportFilesHead: String? = nil
}

extension LedgerReader {
    /// The WHERE clause (on `entry e`) for a book and a range of posting dates, with its arguments.
    static func entryFilter(book: Book?, from: Day?, through: Day?) -> (sql: String, arguments: StatementArguments) {
        var conditions: [String] = []
        var values: [(any DatabaseValueConvertible)?] = []
        if let book { conditions.append("e.book = ?"); values.append(book.rawValue) }
        if let from { conditions.append("e.date >= ?"); values.append(from.description) }
        if let through { conditions.append("e.date <= ?"); values.append(through.description) }
        return (conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "), StatementArguments(values))
    }

    /// The trial balance per book, account and currency, of entries posted on or before
    /// `through`: whole months from the month totals, the rest of `through`'s month from its
    /// postings.
    public func trialBalance(book: Book?, through: Day? = nil) throws -> [TrialBalanceRow] {
        try monthTotalsUpToDate()
        var closed: [String] = [], live: [String] = []
        var closedArgs: [(any DatabaseValueConvertible)?] = [], liveArgs: [(any DatabaseValueConvertible)?] = []
        if let book {
            closed.append("book = ?"); closedArgs.append(book.rawValue)
            live.append("e.book = ?"); liveArgs.append(book.rawValue)
        }
        var withLive = false
        if let through {
            let month = through.month
            if try monthTotalsCover(book: book, through: through) {
                closed.append("month <= ?"); closedArgs.append(month.description)
            } else {
                closed.append("month < ?"); closedArgs.append(month.description)
                live += ["e.date >= ?", "e.date <= ?"]; liveArgs += [month.firstDay.description, through.description]
                withLive = true
            }
        }
        let closedSQL = """
            SELECT book, account_id, currency, debit_minor AS d, credit_minor AS c, balance_minor AS b, reporting_balance_minor AS r
            FROM balance_month \(closed.isEmpty ? "" : "WHERE " + closed.joined(separator: " AND "))
            """
        let liveSQL = !withLive ? "" : """
            UNION ALL
            SELECT e.book, p.account_id, p.currency, CASE WHEN p.amount_minor > 0 THEN p.amount_minor ELSE 0 END,
                   CASE WHEN p.amount_minor < 0 THEN -p.amount_minor ELSE 0 END, p.amount_minor, p.reporting_amount_minor
            FROM entry e JOIN posting p ON p.entry_id = e.id WHERE \(live.joined(separator: " AND "))
            """
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT x.book, a.name, x.currency, sum(x.d), sum(x.c), sum(x.b), sum(x.r)
            FROM (\(closedSQL) \(liveSQL)) x JOIN account a ON a.id = x.account_id
            GROUP BY x.book, a.name, x.currency
            ORDER BY x.book, a.name, x.currency
            """), arguments: StatementArguments(closedArgs + (withLive ? liveArgs : []))).map(Self.trialBalanceRow)
    }

    /// The entries dated after `day` (posted, in the books from their dates, in no report as of
    /// `day`), and the latest date among them. Read from the index of entry dates.
    public func entriesDated(after day: Day, book: Book? = nil) throws -> (count: Int, latest: Day?) {
        let books = book.map { [$0.rawValue] } ?? ["production", "sandbox"]
        let r = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT count(*), max(date) FROM entry WHERE book IN (?, ?) AND date > ?
            """), arguments: [books[0], books.last!, day.description])
        let latest: String? = r?[1]
        return (r?[0] ?? 0, latest.flatMap { Day(iso: $0) })
    }

    /// The trial balance added up from every posting (`verify`, and the tests of the month totals).
    public func trialBalanceFromPostings(book: Book?, through: Day? = nil) throws -> [TrialBalanceRow] {
        let (filter, args) = Self.entryFilter(book: book, from: nil, through: through)
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT e.book, a.name, p.currency,
                   sum(CASE WHEN p.amount_minor > 0 THEN p.amount_minor ELSE 0 END),
                   sum(CASE WHEN p.amount_minor < 0 THEN -p.amount_minor ELSE 0 END),
                   sum(p.amount_minor), sum(p.reporting_amount_minor)
            FROM posting p JOIN entry e ON e.id = p.entry_id JOIN account a ON a.id = p.account_id
            \(filter)
            GROUP BY e.book, a.name, p.currency
            ORDER BY e.book, a.name, p.currency
            """), arguments: args).map(Self.trialBalanceRow)
    }

    static func trialBalanceRow(_ r: Row) -> TrialBalanceRow {
        TrialBalanceRow(book: r[0], account: r[1], currency: r[2], debitMinor: r[3], creditMinor: r[4],
                        balanceMinor: r[5], reportingBalanceMinor: r[6])
    }

    /// Streams the journal (one row per posting) in entry order, optionally for one book
    /// and a date range of posting dates.
    public func journal(book: Book?, from: Day? = nil, through: Day? = nil, _ each: (JournalRow) throws -> Void) throws {
        let (whereSQL, _) = Self.entryFilter(book: book, from: from, through: through)
        // Read through SQLite's C API (a month's journal is a million rows or more; GRDB's
        // `Row` took a third of the time of reading it). A statement of its own: the caller
        // may read another journal while this one streams.
        var query = FastStatement(try db.makeStatement(sql: """
            SELECT e.id, e.book, e.date, e.original_date, e.late, e.kind, e.transaction_id, e.product_id, e.storefront,
                   a.name, p.currency, p.amount_minor, p.reporting_amount_minor
            FROM entry e JOIN posting p ON p.entry_id = e.id JOIN account a ON a.id = p.account_id
            \(whereSQL)
            ORDER BY e.date, e.id, \(try postingOrder())
            """), in: db)
        // The same parameters, in the same order, as `entryFilter`'s conditions.
        if let book { query.bind(book.rawValue) }
        if let from { query.bind(from.description) }
        if let through { query.bind(through.description) }
        // Rows come in date order, most with the date of the row before: parse each date once.
        var dates = (text: "", day: Day(daysSinceEpoch: 0)), originals = dates
        func day(_ text: String, _ cache: inout (text: String, day: Day)) -> Day {
            if text != cache.text { cache = (text, Day(iso: text)!) }
            return cache.day
        }
        try query.forEachRow { r in
            try each(JournalRow(entryId: r.int64(0), book: r.text(1), date: day(r.text(2), &dates),
                                originalDate: day(r.text(3), &originals), late: r.int64(4) != 0, kind: r.text(5),
                                transactionId: r.text(6), productId: r.text(7), storefront: r.text(8), account: r.text(9),
                                currency: r.text(10), amountMinor: r.int64(11), reportingAmountMinor: r.int64(12)))
        }
    }

    public func journalCount(book: Book?, from: Day? = nil, through: Day? = nil) throws -> Int {
        let (whereSQL, args) = Self.entryFilter(book: book, from: from, through: through)
        return try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM entry e JOIN posting p ON p.entry_id = e.id \(whereSQL)"),
                                arguments: args) ?? 0
    }

    /// What the journal of a book and range of dates is made of: how many entries it lists,
    /// the last one's id and that entry's hash, and the order of each entry's postings. An
    /// entry is never changed or removed once written, and each one's hash chains every entry
    /// before it (`verify` checks both), so the same count, id and hash mean the same
    /// entries, hence the same postings.
    public func journalInputs(book: Book?, from: Day? = nil, through: Day? = nil) throws -> String {
        let (whereSQL, args) = Self.entryFilter(book: book, from: from, through: through)
        let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT count(*), max(e.id) FROM entry e \(whereSQL)"), arguments: args)
        let count: Int64 = row?[0] ?? 0
        let last: Int64? = row?[1]
        let hash = try last.flatMap { try String.fetchOne(db.cachedStatement(sql: "SELECT hash FROM entry WHERE id = ?"), arguments: [$0]) }
        return "entries \(count), last \(last.map(String.init) ?? "none") \(hash ?? ""), postings ordered by \(try postingOrder())"
    }

    /// The reporting currency of the ledger's entries (its first and last entry: every run
    /// posts in the configured one and refuses another), nil while it has none.
    public func entriesReportingCurrencies() throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: """
            SELECT DISTINCT reporting_currency FROM entry
            WHERE id IN ((SELECT min(id) FROM entry), (SELECT max(id) FROM entry)) ORDER BY id
            """))
    }

    public func runSummary(_ id: Int64) throws -> RunSummary? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM run WHERE id = ?"), arguments: [id]) else { return nil }
        let files = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT path, kind, sha256, size_bytes, records, new_records FROM source_file WHERE run_id = ? ORDER BY path
            """), arguments: [id]).map {
            FileRead(path: $0[0], kind: $0[1], sha256: $0[2], sizeBytes: $0[3], records: $0[4], newRecords: $0[5])
        }
        var summary = RunSummary(id: id, asOf: Day(iso: r["as_of"] as String)!, startedAt: r["started_at"],
                                 finishedAt: r["finished_at"], toolVersion: r["tool_version"], recordsRead: r["records_read"],
                                 recordsVerified: r["records_verified"], recordsPending: r["records_pending"],
                                 recordsRejected: r["records_rejected"], recordsSkipped: r["records_skipped"],
                                 entriesPosted: r["entries_posted"], reconciliation: r["reconciliation"], files: files)
        if try LedgerSeal.available(db) {
            summary.inputs = try Row.fetchAll(db.cachedStatement(sql: "SELECT path, sha256 FROM run_input WHERE run_id = ? ORDER BY path"),
                                              arguments: [id]).map { RunInput(path: $0[0], sha256: $0[1]) }
        }
        return summary
    }

    /// Pending records open on `day` (read on or before it, not resolved by then): a count.
    public func pendingRecordCount(openOn day: Day) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) FROM source_record r INDEXED BY source_record_open
            JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            LEFT JOIN run resolver ON resolver.id = r.resolved_run_id
            WHERE r.outcome <> 'verified' AND r.outcome = 'pending' AND run.as_of <= ?1 AND (resolver.as_of IS NULL OR resolver.as_of > ?1)
            """), arguments: [day.description]) ?? 0
    }

    /// Rejected records, and pending ones not yet resolved by a verified record: every one
    /// the ledger holds (`iapledger`'s own reads are bounded: `openRecordProblems`).
    public func recordProblems() throws -> [RecordProblem] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT \(Self.recordProblemColumns)
            FROM source_record r JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            LEFT JOIN run resolver ON resolver.id = r.resolved_run_id
            WHERE r.outcome <> 'verified'
            ORDER BY r.outcome, f.path, r.line, r.id
            """)).map(Self.recordProblem)
    }

    static let recordProblemColumns = "f.path, r.line, r.outcome, r.reason_code, r.reason, run.as_of, r.resolved_run_id IS NOT NULL, f.run_id, resolver.as_of"
    static func recordProblem(_ row: Row) -> RecordProblem {
        RecordProblem(path: row[0], line: row[1], outcome: row[2], code: row[3] ?? "", reason: row[4] ?? "",
                      firstSeen: Day(iso: row[5] as String)!, resolved: row[6], runId: row[7],
                      resolvedOn: (row[8] as String?).flatMap { Day(iso: $0) })
    }

    /// Which records `openRecordProblems` reads, and in what order.
    public enum RecordProblemScope {
        /// Those open on a day (read on or before it, not resolved by then), of one outcome or
        /// both, in outcome, file and line order (`byFirstSeen`: oldest first, then file and line).
        case openOn(Day, outcome: String?, byFirstSeen: Bool)
        /// Those one run read that are still open (its night's summary), in outcome, file and line order.
        case readBy(runId: Int64)
    }

    /// The records of `scope`: the first `perCode` of each reason code in its order, at most
    /// `total` in all, how many there are of each code and outcome (`counts`, in code order),
    /// and how many of each code are left out (`more`, in the order the first of each was left
    /// out; past the hundredth code, the rest counted together as "N other codes"). Read as a
    /// stream, one pass, only the listed ones kept: a file of a million bad lines made each
    /// workbook hold every one of them (1.8 GB), and a sheet holds 1,048,576 rows.
    public func openRecordProblems(_ scope: RecordProblemScope, perCode: Int, total: Int) throws
        -> (listed: [RecordProblem], counts: [(outcome: String, code: String, count: Int)], more: [(code: String, count: Int)]) {
        let condition: String, order: String
        var arguments: [DatabaseValueConvertible] = []
        switch scope {
        case let .openOn(day, outcome, byFirstSeen):
            condition = "run.as_of <= ? AND (resolver.as_of IS NULL OR resolver.as_of > ?)" + (outcome == nil ? "" : " AND r.outcome = ?")
            arguments = [day.description, day.description] + (outcome.map { [$0] } ?? [])
            order = byFirstSeen ? "run.as_of, f.path, r.line, r.id" : "r.outcome, f.path, r.line, r.id"
        case let .readBy(runId):
            condition = "f.run_id = ? AND r.resolved_run_id IS NULL"
            arguments = [runId]
            order = "r.outcome, f.path, r.line, r.id"
        }
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT \(Self.recordProblemColumns)
            FROM source_record r INDEXED BY source_record_open JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            LEFT JOIN run resolver ON resolver.id = r.resolved_run_id
            WHERE r.outcome <> 'verified' AND \(condition)
            ORDER BY \(order)
            """), arguments: StatementArguments(arguments))
        var seen: [String: Int] = [:], byOutcome: [String: [String: Int]] = [:], unlisted: [String: Int] = [:]
        var listed: [RecordProblem] = [], unlistedOrder: [String] = []
        while let row = try rows.next() {
            let code: String = row[3] ?? "", outcome: String = row[2]
            let n = seen[code, default: 0]
            seen[code] = n + 1
            byOutcome[code, default: [:]][outcome, default: 0] += 1
            if n < perCode && listed.count < total {
                listed.append(Self.recordProblem(row))
            } else {
                if unlisted[code] == nil { unlistedOrder.append(code) }
                unlisted[code, default: 0] += 1
            }
        }
        let counts = byOutcome.keys.sorted().flatMap { code in
            byOutcome[code]!.keys.sorted().map { (outcome: $0, code: code, count: byOutcome[code]![$0]!) }
        }
        var more = unlistedOrder.map { (code: $0, count: unlisted[$0] ?? 0) }
        if more.count > 100 {
            let rest = more.dropFirst(100)
            more = [(code: String, count: Int)](more.prefix(100)) + [(code: "\(rest.count) other codes", count: rest.reduce(0) { $0 + $1.count })]
        }
        return (listed, counts, more)
    }

    /// A finding's book (SQL over `finding f`): its transaction's, else that of the record
    /// that raised it; NULL when neither is known (a record with no environment). A
    /// TRANSACTION_CONFLICT is the book of the record that was not taken first: a production
    /// purchase whose id a sandbox transaction holds is in no production figure, so it is said
    /// on the production Run Info (it was on the sandbox one), and test data contradicting a
    /// production transaction on the sandbox one; but Apple's signed data calling sandbox a
    /// production transaction taken from an unsigned receipt on the production one: that book
    /// may hold a test purchase.
    static let findingBook = """
        CASE WHEN f.code = 'TRANSACTION_CONFLICT' THEN
                  CASE WHEN \(recordBook) = 'sandbox' AND \(transactionBook) = 'production' AND \(recordKind) = 'signed'
                            AND \(firstSourceKind) <> 'signed'
                       THEN 'production' ELSE ifnull(\(recordBook), \(transactionBook)) END
             ELSE ifnull(\(transactionBook), \(recordBook)) END
        """
    static let recordKind = "(SELECT sf.kind FROM source_record r JOIN source_file sf ON sf.id = r.file_id WHERE r.id = f.record_id)"
    static let firstSourceKind = """
        (SELECT sf.kind FROM store_transaction t JOIN source_record r ON r.id = t.first_record_id JOIN source_file sf ON sf.id = r.file_id
         WHERE t.transaction_id = f.transaction_id)
        """
    static let transactionBook = "(SELECT t.book FROM store_transaction t WHERE t.transaction_id = f.transaction_id)"
    static let recordBook = """
        (SELECT CASE lower(r.environment) WHEN 'sandbox' THEN 'sandbox' WHEN 'production' THEN 'production' END
         FROM source_record r WHERE r.id = f.record_id)
        """

    /// The findings of `book` (and those of no book: about a transaction no book holds) open on
    /// `day` (raised by a run as of it or before, not resolved by then), at most `limit` of each
    /// code (in transaction order), and how many of each code there are: bounded, however many
    /// a night opened (a rules change may open one for every posted sale).
    public func findingsOpen(on day: Day, book: String, limit: Int) throws -> (rows: [FindingRow], counts: [String: Int]) {
        var rows: [FindingRow] = [], counts: [String: Int] = [:]
        for r in try Row.fetchAll(db, sql: """
            WITH open AS (
                SELECT f.id, f.code, f.transaction_id,
                       \(Self.findingBook) AS book
                FROM finding f JOIN run r1 ON r1.id = f.first_run_id LEFT JOIN run r2 ON r2.id = f.resolved_run_id
                WHERE r1.as_of <= ?1 AND (f.resolved_run_id IS NULL OR r2.as_of > ?1)),
            mine AS (SELECT * FROM open WHERE ifnull(book, ?3) = ?3),
            -- Numbered without their messages (the sort a window needs holds every row it numbers).
            numbered AS (
                SELECT id, book, row_number() OVER (PARTITION BY code ORDER BY transaction_id, id) AS n,
                       count(*) OVER (PARTITION BY code) AS total
                FROM mine)
            SELECT f.code, f.transaction_id, f.message, r1.as_of, r2.as_of, f.first_run_id, numbered.book, n, total
            FROM numbered JOIN finding f ON f.id = numbered.id JOIN run r1 ON r1.id = f.first_run_id LEFT JOIN run r2 ON r2.id = f.resolved_run_id
            WHERE n <= ?2 ORDER BY f.code, f.transaction_id, f.id
            """, arguments: [day.description, limit, book]) {
            let book: String? = r[6]
            rows.append(FindingRow(code: r[0], transactionId: r[1], message: r[2], firstSeen: Day(iso: r[3] as String)!,
                                   resolvedOn: (r[4] as String?).flatMap { Day(iso: $0) }, firstRunId: r[5], book: book))
            counts[r[0] as String] = r[8]
        }
        return (rows, counts)
    }

    /// The place of a finding in the order `findingsPage` lists them.
    public struct FindingKey: Sendable { public var code: String; public var transactionId: String; public var id: Int64 }

    /// The findings (open, resolved or both; of one code or all) after `after` in code and
    /// transaction order, at most `limit`, each with its book, the note it was resolved with
    /// (a dismissal's; schema v30 on) and its place: a page at a time, each read in a short
    /// transaction (a listing read whole in one held the ledger's lock while its reader was
    /// slow, and a night waiting to commit).
    public func findingsPage(status: String, code: String?, after: FindingKey?, limit: Int) throws -> [(FindingRow, note: String?, key: FindingKey)] {
        var conditions: [String] = []
        var arguments: [DatabaseValueConvertible] = []
        if status == "open" { conditions.append("f.resolved_run_id IS NULL") } else if status == "resolved" { conditions.append("f.resolved_run_id IS NOT NULL") }
        if let code { conditions.append("f.code = ?"); arguments.append(code) }
        if let after {
            conditions.append("(f.code, f.transaction_id, f.id) > (?, ?, ?)")
            arguments += [after.code, after.transactionId, after.id]
        }
        arguments.append(limit)
        let note = try hasFindingNotes() ? "f.resolved_note" : "NULL"
        let cursor = try Row.fetchCursor(db, sql: """
            SELECT f.code, f.transaction_id, f.message, r1.as_of, r2.as_of, f.first_run_id,
                   \(Self.findingBook), \(note), f.id
            FROM finding f JOIN run r1 ON r1.id = f.first_run_id LEFT JOIN run r2 ON r2.id = f.resolved_run_id
            \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
            ORDER BY f.code, f.transaction_id, f.id LIMIT ?
            """, arguments: StatementArguments(arguments))
        var page: [(FindingRow, note: String?, key: FindingKey)] = []
        while let r = try cursor.next() {
            page.append((FindingRow(code: r[0], transactionId: r[1], message: r[2], firstSeen: Day(iso: r[3] as String)!,
                                    resolvedOn: (r[4] as String?).flatMap { Day(iso: $0) }, firstRunId: r[5], book: r[6]),
                         r[7], FindingKey(code: r[0], transactionId: r[1], id: r[8])))
        }
        return page
    }

    /// The findings run `runId` opened: how many of each code, and the first `limit` of them.
    public func findingsOpened(byRun runId: Int64, limit: Int) throws -> (counts: [(code: String, count: Int)], first: [FindingRow]) {
        let counts = try Row.fetchAll(db, sql: """
            SELECT code, count(*) FROM finding WHERE first_run_id = ? AND resolved_run_id IS NULL GROUP BY code ORDER BY count(*) DESC, code
            """, arguments: [runId]).map { ($0[0] as String, $0[1] as Int) }
        let first = try Row.fetchAll(db, sql: """
            SELECT f.code, f.transaction_id, f.message, r1.as_of, f.first_run_id FROM finding f JOIN run r1 ON r1.id = f.first_run_id
            WHERE f.first_run_id = ? AND f.resolved_run_id IS NULL ORDER BY f.code, f.transaction_id, f.id LIMIT ?
            """, arguments: [runId, limit]).map {
            FindingRow(code: $0[0], transactionId: $0[1], message: $0[2], firstSeen: Day(iso: $0[3] as String)!, resolvedOn: nil, firstRunId: $0[4])
        }
        return (counts, first)
    }

    public func findings(openOnly: Bool) throws -> [FindingRow] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.code, f.transaction_id, f.message, r1.as_of, r2.as_of, f.first_run_id,
                   \(Self.findingBook)
            FROM finding f JOIN run r1 ON r1.id = f.first_run_id LEFT JOIN run r2 ON r2.id = f.resolved_run_id
            \(openOnly ? "WHERE f.resolved_run_id IS NULL" : "")
            ORDER BY f.code, f.transaction_id, f.id
            """)).map {
            FindingRow(code: $0[0], transactionId: $0[1], message: $0[2], firstSeen: Day(iso: $0[3] as String)!,
                       resolvedOn: ($0[4] as String?).flatMap { Day(iso: $0) }, firstRunId: $0[5], book: $0[6])
        }
    }

    public func totals() throws -> LedgerTotals {
        // Counted from small indexes, never by reading the big tables whole (the records hold
        // their raw text): each count is the total from the smallest index less the rows of
        // the partial indexes on the rarer states.
        var t = LedgerTotals()
        let transactions = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM store_transaction")) ?? 0
        t.transactionsPending = try pendingSaleCount()
        t.transactionsFree = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM store_transaction WHERE sale_status = 'free'")) ?? 0
        t.transactionsPosted = transactions - t.transactionsPending - t.transactionsFree
        let records = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM source_record")) ?? 0
        var notVerified = 0
        for r in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT outcome, resolved_run_id IS NULL, count(*) FROM source_record INDEXED BY source_record_open
            WHERE outcome <> 'verified' GROUP BY 1, 2
            """)) {
            let n: Int = r[2]
            notVerified += n
            guard r[1] as Bool else { t.recordsResolved += n; continue }
            if (r[0] as String) == "pending" { t.recordsPending += n } else { t.recordsRejected += n }
        }
        t.recordsVerified = records - notVerified
        // Entries and postings are append-only (triggers refuse updates and deletes) and take
        // ids 1, 2, 3...: the last id is the count.
        t.entries = try Int.fetchOne(db.cachedStatement(sql: "SELECT ifnull(max(id), 0) FROM entry")) ?? 0
        // The last entry's last posting (found from the entry: `posting` is a view of the entries).
        t.postings = try Int.fetchOne(db.cachedStatement(sql: """
            SELECT ifnull(max(id), 0) FROM posting WHERE entry_id = (SELECT max(id) FROM entry)
            """)) ?? 0
        t.chainHead = try String.fetchOne(db.cachedStatement(sql: "SELECT hash FROM entry ORDER BY id DESC LIMIT 1")) ?? EntryHash.genesis
        t.seal = try latestSeal()?.seal
        t.reportFilesHead = try reportFilesHead()
        return t
    }
}

extension LedgerReader {
    /// The files and reasons of the records rejected with `code` and still open (not settled,
    /// not dismissed), by the index of the records not verified.
    public func openRejected(code: String) throws -> [(path: String, line: Int, reason: String)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.path, r.line, r.reason FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome <> 'verified' AND r.outcome = 'rejected' AND r.reason_code = ? AND r.resolved_run_id IS NULL
            ORDER BY r.id
            """), arguments: [code]).map { ($0[0], $0[1], $0[2]) }
    }

    /// The sales waiting to post (for a rule, an order or verification of their book).
    public func pendingSaleCount() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM store_transaction WHERE sale_status = 'pending'")) ?? 0
    }

    /// The rows of a read-only query as text (for tests and diagnostics).
    public func rawRows(_ sql: String) throws -> [[String]] {
        try Row.fetchAll(db, sql: sql).map { row in
            row.databaseValues.map { v in v.isNull ? "" : (String.fromDatabaseValue(v) ?? Int64.fromDatabaseValue(v).map(String.init) ?? "\(v)") }
        }
    }
}

extension LedgerReader {
    /// A production sale that was refunded, with an order that credited it: ids worth tracing
    /// in a new workspace (the demo names them). Nil when the ledger holds none.
    public func traceExample() throws -> (transactionId: String, orderId: String)? {
        guard let r = try Row.fetchOne(db, sql: """
            SELECT e.transaction_id, o.order_id FROM entry e JOIN order_version o ON o.transaction_id = e.transaction_id
            WHERE e.book = 'production' AND e.kind = 'refund' ORDER BY e.id, o.id LIMIT 1
            """) else { return nil }
        return (r[0], r[1])
    }
}
