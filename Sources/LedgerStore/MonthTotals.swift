import GRDB
import LedgerCore

/// Month totals: the trial balance per book, month, account and currency (`balance_month`)
/// and the entry sums per book, month, storefront, product, currency and kind
/// (`activity_month`). Entries and postings are append-only and keep their dates, so a
/// month's totals only ever grow by the entries added to it: each write transaction adds its
/// new entries' sums before it commits (`addMonthTotals`). The reports read closed history
/// from these tables and only the as-of month's entries up to the as-of date from the ledger
/// itself, so a night's workbooks do not re-add the whole history. `verify` recomputes both
/// tables from the postings and entries.
enum MonthTotals {
    static let balanceColumns = "debit_minor, credit_minor, balance_minor, reporting_balance_minor, postings"
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

    static let activityColumns = "book, month, storefront, product_id, currency, kind, entries, units, " + activitySums.joined(separator: ", ")

    /// Adds the sums of the entries after `entryId` to the month totals.
    static func add(afterEntryId entryId: Int64, db: Database) throws {
        try db.execute(sql: """
            INSERT INTO balance_month (book, month, account_id, currency, \(balanceColumns))
            \(balanceSelect("e.id > ?"))
            ON CONFLICT (book, month, account_id, currency) DO UPDATE SET
                \(balanceColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.map { "\($0) = \($0) + excluded.\($0)" }.joined(separator: ", "))
            """, arguments: [entryId])
        try db.execute(sql: """
            INSERT INTO activity_month (\(activityColumns))
            \(activitySelect("e.id > ?"))
            ON CONFLICT (book, month, storefront, product_id, currency, kind) DO UPDATE SET
                \((["entries", "units"] + activitySums).map { "\($0) = \($0) + excluded.\($0)" }.joined(separator: ", "))
            """, arguments: [entryId])
    }
}

extension LedgerWriter {
    /// Adds this transaction's new entries to the month totals (called by `Ledger.write`
    /// before it commits, whoever inserted the entries).
    func addMonthTotals() throws {
        guard let first = firstEntryBefore else { return }
        try MonthTotals.add(afterEntryId: first, db: db)
        firstEntryBefore = nil
    }
}

extension LedgerReader {
    /// Rows of `balance_month` (or, `recomputed`, the same rows computed from the postings),
    /// as text, in key order: `verify` compares the two.
    public func monthTotals(recomputed: Bool) throws -> (balances: [String], activity: [String]) {
        let balances = recomputed
            ? MonthTotals.balanceSelect("1") + " ORDER BY 1, 2, 3, 4"
            : "SELECT book, month, account_id, currency, \(MonthTotals.balanceColumns) FROM balance_month ORDER BY 1, 2, 3, 4"
        let activity = recomputed
            ? MonthTotals.activitySelect("1") + " ORDER BY 1, 2, 3, 4, 5, 6"
            : "SELECT \(MonthTotals.activityColumns) FROM activity_month ORDER BY 1, 2, 3, 4, 5, 6"
        func text(_ sql: String) throws -> [String] {
            try rawRows(sql).map { $0.joined(separator: "|") }
        }
        return (try text(balances), try text(activity))
    }
}
