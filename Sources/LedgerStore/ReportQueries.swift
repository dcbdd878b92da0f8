import GRDB
import LedgerCore

/// Sums of one group of entries (a month, storefront, product, currency and entry kind).
public struct ActivityRow: Equatable {
    public var month: Month
    public var storefront: String
    public var productId: String
    public var currency: String
    public var kind: EntryKind
    public var entries: Int64
    public var units: Int64
    public var grossMinor: Int64
    public var taxMinor: Int64
    public var netMinor: Int64
    public var commissionMinor: Int64
    public var proceedsMinor: Int64
    public var grossReportingMinor: Int64
    public var netReportingMinor: Int64
    public var commissionReportingMinor: Int64
    public var proceedsReportingMinor: Int64
}

/// One refund or reversal entry, for the Refunds sheet.
public struct RefundRow: Equatable {
    public var entryId: Int64
    public var date: Day
    public var originalDate: Day
    public var late: Bool
    public var kind: String
    public var transactionId: String
    public var productId: String
    public var storefront: String
    public var currency: String
    public var refundPercentage: Int64?
    public var netMinor: Int64
    public var commissionMinor: Int64
    public var proceedsMinor: Int64
    public var netReportingMinor: Int64
    /// The commission returned and the proceeds clawed back, in the reporting currency: what
    /// ties the refunds to the Summary's commission returned and proceeds after refunds.
    public var commissionReportingMinor: Int64
    public var proceedsReportingMinor: Int64
}

extension LedgerReader {
    /// Entry sums by posting month, storefront, product, currency and kind, for a book,
    /// of entries posted on or before `through`: whole months from the month totals, the rest
    /// of `through`'s month from its entries.
    public func activity(book: Book, through: Day) throws -> [ActivityRow] {
        try monthTotalsUpToDate()
        let month = through.month
        let sums = MonthTotals.activitySums
        let wholeMonth = try monthTotalsCover(book: book, through: through)
        let liveSQL = wholeMonth ? "" : """
            UNION ALL
            SELECT substr(e.date, 1, 7), e.storefront, e.product_id, e.currency, e.kind, 1, t.quantity,
                   \(sums.map { "e." + $0 }.joined(separator: ", "))
            FROM entry e JOIN store_transaction t ON t.transaction_id = e.transaction_id
            WHERE e.book = ? AND e.date >= ? AND e.date <= ?
            """
        var args: [(any DatabaseValueConvertible)?] = [book.rawValue, month.description]
        if !wholeMonth { args += [book.rawValue, month.firstDay.description, through.description] }
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT month, storefront, product_id, currency, kind, sum(entries), sum(units),
                   \(sums.map { "sum(\($0))" }.joined(separator: ", "))
            FROM (SELECT month, storefront, product_id, currency, kind, entries, units, \(sums.joined(separator: ", "))
                  FROM activity_month WHERE book = ? AND month \(wholeMonth ? "<=" : "<") ?
                  \(liveSQL))
            GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
            """), arguments: StatementArguments(args)).map(Self.activityRow)
    }

    /// The entry sums added up from every entry (the tests of the month totals).
    public func activityFromEntries(book: Book, through: Day) throws -> [ActivityRow] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT substr(e.date, 1, 7), e.storefront, e.product_id, e.currency, e.kind, count(*), sum(t.quantity),
                   sum(e.gross_minor), sum(e.tax_minor), sum(e.net_minor), sum(e.commission_minor), sum(e.proceeds_minor),
                   sum(e.gross_reporting_minor), sum(e.net_reporting_minor), sum(e.commission_reporting_minor),
                   sum(e.proceeds_reporting_minor)
            FROM entry e JOIN store_transaction t ON t.transaction_id = e.transaction_id
            WHERE e.book = ? AND e.date <= ?
            GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
            """), arguments: [book.rawValue, through.description]).map(Self.activityRow)
    }

    static func activityRow(_ r: Row) -> ActivityRow {
        ActivityRow(month: Month(iso: r[0] as String)!, storefront: r[1], productId: r[2], currency: r[3],
                    kind: EntryKind(rawValue: r[4])!, entries: r[5], units: r[6], grossMinor: r[7], taxMinor: r[8],
                    netMinor: r[9], commissionMinor: r[10], proceedsMinor: r[11], grossReportingMinor: r[12],
                    netReportingMinor: r[13], commissionReportingMinor: r[14], proceedsReportingMinor: r[15])
    }

    /// The refunds and reversals of a book through a date, by the index of them alone
    /// (`entry_refund_date`): its condition, `kind <> 'sale'`, is the query's.
    static let refundEntriesSQL = """
        SELECT id, date, original_date, late, kind, transaction_id, product_id, storefront, currency, refund_percentage,
               net_minor, commission_minor, proceeds_minor, net_reporting_minor, commission_reporting_minor, proceeds_reporting_minor
        FROM entry WHERE book = ? AND kind <> 'sale' AND date <= ? ORDER BY date, id
        """

    /// Refund and reversal entries of a book posted on or before `through`.
    public func refundEntries(book: Book, through: Day) throws -> [RefundRow] {
        try Row.fetchAll(db.cachedStatement(sql: Self.refundEntriesSQL), arguments: [book.rawValue, through.description]).map {
            RefundRow(entryId: $0[0], date: Day(iso: $0[1] as String)!, originalDate: Day(iso: $0[2] as String)!, late: $0[3],
                      kind: $0[4], transactionId: $0[5], productId: $0[6], storefront: $0[7], currency: $0[8],
                      refundPercentage: $0[9], netMinor: $0[10], commissionMinor: $0[11], proceedsMinor: $0[12],
                      netReportingMinor: $0[13], commissionReportingMinor: $0[14], proceedsReportingMinor: $0[15])
        }
    }
}

extension LedgerReader {
    /// The highest entry id (0 in a ledger without entries).
    public func lastEntryId() throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM entry") ?? 0
    }

    /// The day (UTC) the store says transaction `transactionId` was bought, and the code its
    /// sale waits on while it is not booked (`ORDER_WAIT`, `MISSING_RULE`: the reason's first
    /// word; nil once posted or free); nil when no verified record reports the transaction (a
    /// credit naming no transaction, or an unverified one). `waitingOn`: the code it waited on
    /// that day instead (a set written again for a date before the last night's: its
    /// `MISSING_RULE` or `ORDER_WAIT` finding open then), as the Pending sheet lists it.
    /// `firstRunId`: the run that stored it (a set written for a date before it knew of no
    /// such transaction).
    public func storeSale(transactionId: String, waitingOn day: Day? = nil) throws -> (purchased: Day, waitsOn: String?, firstRunId: Int64, sandbox: Bool)? {
        guard !transactionId.isEmpty, let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT purchase_ms, CASE sale_status WHEN 'pending' THEN pending_reason END, first_run_id, book = 'sandbox' FROM store_transaction WHERE transaction_id = ?
            """), arguments: [transactionId]) else { return nil }
        let purchased = Day(epochMilliseconds: row[0] as Int64)
        guard let day else {
            let reason: String? = row[1]
            return (purchased, reason.map { String($0.prefix { $0 != ":" }) }, row[2], row[3])
        }
        let then = try String.fetchOne(db.cachedStatement(sql: """
            SELECT f.code \(Self.waitingOpenOn) AND f.transaction_id = ?2 ORDER BY f.code LIMIT 1
            """), arguments: [day.description, transactionId])
        return (purchased, then, row[2], row[3])
    }

    /// Whether any entry is posted on or before `day`.
    public func hasEntries(through day: Day) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM entry WHERE date <= ? LIMIT 1"), arguments: [day.description]) ?? false
    }

    /// The entries of `book` run `runId` posted: read from the last entry of the runs before
    /// it on (a night's entries follow the runs' before them), not the whole table.
    public func entriesPosted(byRun runId: Int64, book: Book) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) FROM entry WHERE \(Self.postedAfterRun) AND run_id = ? AND book = ?
            """), arguments: [runId - 1, runId, book.rawValue]) ?? 0
    }

    /// The entries of `book` dated on or before `day` that runs after run `runId` posted (a
    /// day's set written again later holds them, the night's own did not): how many, and the
    /// first and last run that posted them; nil when none. Only the entries posted since are
    /// read (`postedAfterRun`).
    public func entriesPosted(afterRun runId: Int64, book: Book, through day: Day) throws -> (count: Int, firstRun: Int64, lastRun: Int64)? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT count(*), min(run_id), max(run_id) FROM entry WHERE \(Self.postedAfterRun) AND book = ? AND date <= ?
            """), arguments: [runId, book.rawValue, day.description]), let count: Int = row[0], count > 0 else { return nil }
        return (count, row[1], row[2])
    }
}

extension LedgerReader {
    /// Verified signed records read by runs up to `throughRun` (all when nil) that were verified
    /// to a root other than Apple Root CA - G3 (one of `trusted_roots`), counted by book and
    /// root: their record's reason names the root (`SignedIngest.verifiedNote`). Apple signs App
    /// Store data under its own root only, so production data under another is not Apple's. A
    /// record's book is its environment's, a notification's that of the transaction it stored
    /// (one saying Sandbox may carry a production transaction), found by the UUID its reason
    /// names. Read from the signed files' records alone, through the file index (a scan of
    /// every record took 7 s at a million transactions; this, 0.2 s for 62,633 signed records
    /// under a test root).
    /// SQL giving the UUID a verified notification record's reason names ("notification TYPE
    /// UUID: ES256 ..."), the notification table's key: by `record_id`, which has no index, each
    /// record read the whole table (minutes with a few thousand under a test root).
    static func notificationUUID(_ reason: String) -> String {
        let rest = "substr(\(reason), 14)"   // after "notification "
        let tail = "substr(\(rest), instr(\(rest), ' ') + 1)"   // after the type
        return "substr(\(tail), 1, instr(\(tail), ':') - 1)"
    }

    public func signedVerifiedToOtherRoots(throughRun runId: Int64?) throws -> [(book: Book, root: String, records: Int)] {
        let marker = ", not Apple Root CA - G3", lead = "verified to the trusted root "
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT book, root, count(*) FROM (
                SELECT substr(r.reason, instr(r.reason, ?2) + length(?2), instr(r.reason, ?1) - instr(r.reason, ?2) - length(?2)) AS root,
                       coalesce(CASE WHEN r.reason LIKE 'notification %' THEN (
                                    SELECT t.book FROM notification n JOIN store_transaction t ON t.transaction_id = n.transaction_id
                                    WHERE n.uuid = \(Self.notificationUUID("r.reason"))) END,
                                CASE WHEN lower(ifnull(r.environment, '')) = 'production' THEN 'production' ELSE 'sandbox' END) AS book
                FROM source_file f CROSS JOIN source_record r ON r.file_id = f.id
                WHERE f.kind = 'signed' AND f.run_id <= ?3 AND r.outcome = 'verified' AND r.reason_code = 'JWS_VERIFIED'
                  AND instr(r.reason, ?1) > 0 AND instr(r.reason, ?2) > 0)
            GROUP BY book, root ORDER BY book, root
            """), arguments: [marker, lead, runId ?? Int64.max]).compactMap { row in
            Book(rawValue: row[0]).map { ($0, row[1], row[2]) }
        }
    }
}

/// Late entries of a book, for the Summary's note: those in a month's figures (dated in a
/// month already closed when they arrived, posted on the first open day), and those dated on
/// or before a date but posted after it (its month was closed before they arrived).
public struct LateEntries {
    /// By the month they are posted in: sales, refunds and refund reversals (counted as
    /// entries), the sales' net and their effect on net after refunds (the refunds', less
    /// reversals, is the difference), in the reporting currency.
    public var byMonth: [(month: Month, sales: Int, refunds: Int, reversals: Int, salesNetMinor: Int64, netAfterRefundsMinor: Int64)] = []
    public var postedLater: (sales: Int, refunds: Int, reversals: Int, salesNetMinor: Int64, netAfterRefundsMinor: Int64) = (0, 0, 0, 0, 0)
}

extension LedgerReader {
    /// `LateEntries` of `book` as of `day`. A late entry is dated on the first day of a month
    /// (the first open day when it arrived), so only those days are read, through the date
    /// index: an entry dated on or before `day` and posted after it is one of them too.
    public func lateEntries(book: Book, asOf day: Day) throws -> LateEntries {
        var out = LateEntries()
        // Two subqueries: each is one step down the date index (min and max in one would read it all).
        guard let range = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT (SELECT min(date) FROM entry WHERE book = ?1), (SELECT max(date) FROM entry WHERE book = ?1)
                """), arguments: [book.rawValue]),
              let first = (range[0] as String?).flatMap({ Day(iso: $0) }), let last = (range[1] as String?).flatMap({ Day(iso: $0) })
        else { return out }
        var through: [String] = [], after: [String] = []
        var m = first.month
        while m.firstDay <= last {
            if m.firstDay <= day { through.append(m.firstDay.description) } else { after.append(m.firstDay.description) }
            m = m.next
        }
        func json(_ days: [String]) -> String { "[" + days.map { "\"\($0)\"" }.joined(separator: ",") + "]" }
        let sign = "CASE kind WHEN 'sale' THEN 1 WHEN 'refund' THEN -1 ELSE 1 END"
        let count = "sum(kind = 'sale'), sum(kind = 'refund'), sum(kind = 'refund_reversal'), sum(CASE kind WHEN 'sale' THEN net_reporting_minor ELSE 0 END), sum(\(sign) * net_reporting_minor)"
        out.byMonth = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT substr(date, 1, 7), \(count) FROM entry
            WHERE book = ? AND date IN (SELECT value FROM json_each(?)) AND late = 1
            GROUP BY substr(date, 1, 7) ORDER BY 1
            """), arguments: [book.rawValue, json(through)]).map {
            (Month(iso: $0[0])!, $0[1], $0[2], $0[3], $0[4], $0[5])
        }
        if !after.isEmpty, let r = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT count(*), \(count) FROM entry
            WHERE book = ? AND date IN (SELECT value FROM json_each(?)) AND late = 1 AND original_date <= ?
            """), arguments: [book.rawValue, json(after), day.description]), (r[0] as Int) > 0 {
            out.postedLater = (r[1], r[2], r[3], r[4], r[5])
        }
        return out
    }
}
