import GRDB
import LedgerCore

/// Month totals: the trial balance per book, month, account and currency (`balance_month`)
/// and the entry sums per book, month, storefront, product, currency and kind
/// (`activity_month`). Entries and postings are append-only and keep their dates, so a
/// month's totals only ever grow by the entries added to it: each write transaction adds its
/// new entries' sums before it commits (`addMonthTotals`). The reports read the months
/// before the as-of month from these tables, and the as-of month too when nothing in it is
/// dated after the as-of date (`monthTotalsCover`; else its entries up to that date), so a
/// night's workbooks do not re-add the whole history. `verify` recomputes both tables from
/// the postings and entries.
enum MonthTotals {
    static let balanceNames = ["debit_minor", "credit_minor", "balance_minor", "reporting_balance_minor", "postings"]
    static let balanceColumns = balanceNames.joined(separator: ", ")
    static let activitySums = ["gross_minor", "tax_minor", "net_minor", "commission_minor", "proceeds_minor",
                               "gross_reporting_minor", "net_reporting_minor", "commission_reporting_minor", "proceeds_reporting_minor"]

    /// The balance rows of the entries matching `filter` (SQL on `e`), grouped by book, month, account and currency.
    static func balanceSelect(_ filter: String) -> String {
        """
        SELECT e.book, substr(e.date, 1, 7), p.account_id, p.currency,
               sum(CASE WHEN p.amount_minor > 0 THEN p.amount_minor ELSE 0 END),
               sum(CASE WHEN p.amount_minor < 0 THEN -p.amount_minor ELSE 0 END),
               sum(p.amount_minor), sum(p.reporting_amount_minor), count(*)
        FROM entry e JOIN posting p ON p.entry_id = e.id WHERE \(filter)
        GROUP BY 1, 2, 3, 4
        """
    }

    /// The activity rows of the entries matching `filter` (SQL on `e`).
    static func activitySelect(_ filter: String) -> String {
        """
        SELECT e.book, substr(e.date, 1, 7), e.storefront, e.product_id, e.currency, e.kind, count(*), sum(t.quantity),
               \(activitySums.map { "sum(e.\($0))" }.joined(separator: ", "))
        FROM entry e JOIN store_transaction t ON t.transaction_id = e.transaction_id WHERE \(filter)
        GROUP BY 1, 2, 3, 4, 5, 6
        """
    }

    static let createSQL = """
        CREATE TABLE balance_month (
            book TEXT NOT NULL,
            month TEXT NOT NULL,
            account_id INTEGER NOT NULL REFERENCES account(id),
            currency TEXT NOT NULL,
            debit_minor INTEGER NOT NULL,
            credit_minor INTEGER NOT NULL,
            balance_minor INTEGER NOT NULL,
            reporting_balance_minor INTEGER NOT NULL,
            postings INTEGER NOT NULL,
            PRIMARY KEY (book, month, account_id, currency)
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE activity_month (
            book TEXT NOT NULL,
            month TEXT NOT NULL,
            storefront TEXT NOT NULL,
            product_id TEXT NOT NULL,
            currency TEXT NOT NULL,
            kind TEXT NOT NULL,
            entries INTEGER NOT NULL,
            units INTEGER NOT NULL,
            \(activitySums.map { "\($0) INTEGER NOT NULL" }.joined(separator: ",\n    "))
            ,PRIMARY KEY (book, month, storefront, product_id, currency, kind)
        ) STRICT, WITHOUT ROWID;
        """

    static let activityNames = ["entries", "units"] + activitySums
    static let activityColumns = "book, month, storefront, product_id, currency, kind, " + activityNames.joined(separator: ", ")

    /// `name = name + excluded.name, ...`: an upsert that adds the new sums to the stored ones.
    static func addingExcluded(_ names: [String]) -> String {
        names.map { "\($0) = \($0) + excluded.\($0)" }.joined(separator: ", ")
    }

    /// Adds the sums of the entries after `entryId` to the month totals.
    static func add(afterEntryId entryId: Int64, db: Database) throws {
        try db.execute(sql: """
            INSERT INTO balance_month (book, month, account_id, currency, \(balanceColumns))
            \(balanceSelect("e.id > ?"))
            ON CONFLICT (book, month, account_id, currency) DO UPDATE SET
                \(addingExcluded(balanceNames))
            """, arguments: [entryId])
        try db.execute(sql: """
            INSERT INTO activity_month (\(activityColumns))
            \(activitySelect("e.id > ?"))
            ON CONFLICT (book, month, storefront, product_id, currency, kind) DO UPDATE SET
                \(addingExcluded(activityNames))
            """, arguments: [entryId])
    }
}

/// The month totals of the entries a write transaction inserts, added up in memory as they
/// are inserted and added to the tables once, before the transaction commits.
struct MonthTotalsDelta {
    struct BalanceKey: Hashable { var book: String, month: Substring, accountId: Int64, currency: String }
    struct ActivityKey: Hashable { var book: String, month: Substring, storefront: String, productId: String, currency: String, kind: String }
    /// A balance row's sums, in `MonthTotals.balanceNames`' order. Kept inline: an array
    /// per row and per entry cost heap allocations, a tenth of inserting an entry.
    struct BalanceSums: Equatable {
        var debit: Int64 = 0, credit: Int64 = 0, balance: Int64 = 0, reportingBalance: Int64 = 0, postings: Int64 = 0
        /// A sum passed 64 bits (amounts each within their bounds, added up by the million):
        /// said at the flush, the night stopped whole, instead of a trap.
        var overflowed = false
        var columns: [Int64] { [debit, credit, balance, reportingBalance, postings] }
        mutating func add(_ amount: Int64, reporting: Int64) {
            if amount > 0 { MonthTotalsDelta.add(&debit, amount, &overflowed) } else if amount < 0 { MonthTotalsDelta.add(&credit, 0 &- amount, &overflowed) }
            MonthTotalsDelta.add(&balance, amount, &overflowed)
            MonthTotalsDelta.add(&reportingBalance, reporting, &overflowed)
            postings += 1
        }
    }

    @inline(__always)
    static func add(_ sum: inout Int64, _ x: Int64, _ overflowed: inout Bool) {
        let (r, o) = sum.addingReportingOverflow(x)
        sum = r
        if o { overflowed = true }
    }
    /// An activity row's sums, in `MonthTotals.activityNames`' order (entries, units, then
    /// `MonthTotals.activitySums`).
    struct ActivitySums: Equatable {
        var entries: Int64 = 0, units: Int64 = 0
        var gross: Int64 = 0, tax: Int64 = 0, net: Int64 = 0, commission: Int64 = 0, proceeds: Int64 = 0
        var grossReporting: Int64 = 0, netReporting: Int64 = 0, commissionReporting: Int64 = 0, proceedsReporting: Int64 = 0
        var overflowed = false
        var columns: [Int64] {
            [entries, units, gross, tax, net, commission, proceeds, grossReporting, netReporting, commissionReporting, proceedsReporting]
        }
        mutating func add(quantity: Int64, _ f: SaleFigures) {
            entries += 1
            MonthTotalsDelta.add(&units, quantity, &overflowed)
            MonthTotalsDelta.add(&gross, f.grossMinor, &overflowed); MonthTotalsDelta.add(&tax, f.taxMinor, &overflowed)
            MonthTotalsDelta.add(&net, f.netMinor, &overflowed)
            MonthTotalsDelta.add(&commission, f.commissionMinor, &overflowed); MonthTotalsDelta.add(&proceeds, f.proceedsMinor, &overflowed)
            MonthTotalsDelta.add(&grossReporting, f.grossReportingMinor, &overflowed); MonthTotalsDelta.add(&netReporting, f.netReportingMinor, &overflowed)
            MonthTotalsDelta.add(&commissionReporting, f.commissionReportingMinor, &overflowed)
            MonthTotalsDelta.add(&proceedsReporting, f.proceedsReportingMinor, &overflowed)
        }
    }
    var balances: [BalanceKey: BalanceSums] = [:]
    var activity: [ActivityKey: ActivitySums] = [:]

    var isEmpty: Bool { balances.isEmpty && activity.isEmpty }

    /// One entry, its postings' account ids, and its transaction's quantity (nil when the ledger
    /// has no such transaction: the entry is then in no activity row, as in the join that
    /// recomputes them).
    mutating func add(_ e: EntryDraft, date: String, accountIds: [Int64], quantity: Int64?) {
        let month = date.prefix(7)
        for (p, account) in zip(e.postings, accountIds) {
            let key = BalanceKey(book: e.book.rawValue, month: month, accountId: account, currency: p.currency)
            balances[key, default: BalanceSums()].add(p.amountMinor, reporting: p.reportingAmountMinor)
        }
        guard let quantity else { return }
        let f = e.figures
        let key = ActivityKey(book: e.book.rawValue, month: month, storefront: e.storefront, productId: e.productId,
                              currency: f.currency, kind: e.kind.rawValue)
        activity[key, default: ActivitySums()].add(quantity: quantity, f)
    }

    static func ledgerTooLarge(_ table: String) -> StoreError {
        StoreError(message: "the ledger's totals (\(table)) would pass a quarter of what 64-bit minor units hold, which the workbooks' sums across months, storefronts and currencies need to stay within: the night's amounts, each within its bounds, add up past it (prices, quantities or rates far beyond real sales?); nothing was written")
    }

    static func tooLarge(_ what: String) -> StoreError {
        StoreError(message: "the month's totals of \(what) pass what 64-bit minor units hold (9,223,372,036,854,775,807): the night's amounts, each within its bounds, add up past it, alone or with the month's before (prices, quantities or rates far beyond real sales?); nothing was written")
    }

    /// Adds the sums to the tables (upserts, a few rows per month) and starts over.
    mutating func flush(_ db: Database) throws {
        guard !isEmpty else { return }
        if let k = balances.first(where: { $0.value.overflowed })?.key {
            throw Self.tooLarge("\(k.book) \(k.month) \(k.currency)")
        }
        if let k = activity.first(where: { $0.value.overflowed })?.key {
            throw Self.tooLarge("\(k.book) \(k.month) \(k.storefront) \(k.productId) \(k.currency)")
        }
        var b = FastStatement(try db.cachedStatement(sql: """
            INSERT INTO balance_month (book, month, account_id, currency, \(MonthTotals.balanceColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (book, month, account_id, currency) DO UPDATE SET
                \(MonthTotals.addingExcluded(MonthTotals.balanceNames))
            """), in: db)
        // A sum past 64 bits in SQL (the night's sums added to the month's) turns REAL, which
        // the STRICT column refuses: said as the sums in memory are.
        func run(_ s: inout FastStatement, _ what: @autoclosure () -> String) throws {
            do { try s.run() } catch let e as DatabaseError where e.message?.contains("cannot store REAL value in INTEGER column") == true {
                throw Self.tooLarge(what())
            }
        }
        for (k, v) in balances {
            b.bind(k.book); b.bind(String(k.month)); b.bind(k.accountId); b.bind(k.currency)
            for x in v.columns { b.bind(x) }
            try run(&b, "\(k.book) \(k.month) \(k.currency)")
        }
        var a = FastStatement(try db.cachedStatement(sql: """
            INSERT INTO activity_month (\(MonthTotals.activityColumns)) VALUES (\(Array(repeating: "?", count: 6 + MonthTotals.activityNames.count).joined(separator: ", ")))
            ON CONFLICT (book, month, storefront, product_id, currency, kind) DO UPDATE SET
                \(MonthTotals.addingExcluded(MonthTotals.activityNames))
            """), in: db)
        for (k, v) in activity {
            a.bind(k.book); a.bind(String(k.month)); a.bind(k.storefront); a.bind(k.productId); a.bind(k.currency); a.bind(k.kind)
            for x in v.columns { a.bind(x) }
            try run(&a, "\(k.book) \(k.month) \(k.storefront) \(k.productId) \(k.currency)")
        }
        self = MonthTotalsDelta()
        try Self.checkLedgerTotals(db)
    }

    /// The workbooks add the month rows up (by month, storefront, product, all currencies
    /// together): every such sum stays well inside 64 bits while the rows' sizes, added up
    /// whatever their signs, do (a quarter of what 64 bits hold: a difference of two sums,
    /// tax or net after refunds, is within it too). A few hundred rows a month, read at the
    /// commit; past the bound the night stops, nothing written, instead of the workbooks
    /// trapping after it.
    static func checkLedgerTotals(_ db: Database) throws {
        let bound = Int64.max / 4
        let activity = MonthTotals.activitySums.map { "sum(abs(\($0)))" } + ["sum(abs(units))"]
        let balance = ["sum(abs(debit_minor))", "sum(abs(credit_minor))", "sum(abs(reporting_balance_minor))"]
        for (table, sums) in [("activity_month", activity), ("balance_month", balance)] {
            let row: Row?
            do { row = try Row.fetchOne(db, sql: "SELECT \(sums.joined(separator: ", ")) FROM \(table)") }
            catch let e as DatabaseError where e.message?.contains("integer overflow") == true { throw ledgerTooLarge(table) }
            guard let row else { continue }
            for i in sums.indices where (row[i] as Int64? ?? 0) > bound { throw ledgerTooLarge(table) }
        }
    }
}

extension LedgerWriter {
    /// Adds this transaction's new entries to the month totals (called by `Ledger.write`
    /// before it commits, whoever inserted the entries).
    func addMonthTotals() throws {
        try monthDelta.flush(db)
    }
}

extension LedgerReader {
    /// Whether the month totals of `through`'s month are the books as of `through`: on the
    /// month's last day, or when no entry (of `book`, or of either book) is dated after
    /// `through` in that month. That is every night's case (its as-of date is the day it runs,
    /// and no entry is dated after it), and the reports then read the month from its totals;
    /// otherwise they add up the month's entries to `through` (one index seek tells).
    func monthTotalsCover(book: Book?, through: Day) throws -> Bool {
        let month = through.month
        if through == month.lastDay { return true }
        for b in book.map({ [$0] }) ?? Book.allCases {
            let later = try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM entry WHERE book = ? AND date > ? AND date <= ?)"),
                                          arguments: [b.rawValue, through.description, month.lastDay.description])
            if later != false { return false }
        }
        return true
    }

    /// Rows of `balance_month` (or, `recomputed`, the same rows computed from the postings),
    /// as text, in key order: `verify` compares the two.
    public func monthTotals(recomputed: Bool) throws -> (balances: [[String]], activity: [[String]]) {
        let balances = recomputed
            ? MonthTotals.balanceSelect("1") + " ORDER BY 1, 2, 3, 4"
            : "SELECT book, month, account_id, currency, \(MonthTotals.balanceColumns) FROM balance_month ORDER BY 1, 2, 3, 4"
        let activity = recomputed
            ? MonthTotals.activitySelect("1") + " ORDER BY 1, 2, 3, 4, 5, 6"
            : "SELECT \(MonthTotals.activityColumns) FROM activity_month ORDER BY 1, 2, 3, 4, 5, 6"
        return (try rawRows(balances), try rawRows(activity))
    }
}
