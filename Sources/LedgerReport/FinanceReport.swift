import LedgerCore
import LedgerStore

/// Builds the report models of a book as of a date, from the ledger. Plain data only:
/// the writer turns them into XLSX.
public struct FinanceReport {
    public let reader: LedgerReader
    public let book: Book
    public let asOf: Day
    public let reportingCurrency: String
    public let toolVersion: String
    public let runId: Int64?
    /// The Journal sheet lists every posting up to this many rows (`journal_row_cap`).
    public var journalRowCap: Int = 250_000
    /// The full journal written beside the workbook when the period passes the cap.
    public var journalExport: JournalExport?

    public init(reader: LedgerReader, book: Book, asOf: Day, reportingCurrency: String, toolVersion: String, runId: Int64?) {
        self.reader = reader
        self.book = book
        self.asOf = asOf
        self.reportingCurrency = reportingCurrency
        self.toolVersion = toolVersion
        self.runId = runId
    }

    var reportingDecimals: Int { Currency.exponent(reportingCurrency) ?? 2 }
    func decimals(_ currency: String) -> Int { Currency.exponent(currency) ?? 2 }

    public func workbook() throws -> WorkbookModel {
        let activity = try activity()
        return WorkbookModel(
            title: book == .production ? "iapledger finance report \(asOf)" : "iapledger sandbox book \(asOf)",
            subject: "In-app purchase ledger, \(book.rawValue) book, as of \(asOf)",
            company: "", created: asOf,
            sheets: [try summarySheet(activity: activity), try trialBalanceSheet(), try journalSheet(),
                     try revenueByRegionSheet(activity: activity), try revenueByProductSheet(activity: activity), try refundsSheet()] + (book == .sandbox ? [try creditedInProductionSheet()] : [])
                + [try runInfoSheet()]
        )
    }

    /// Sandbox purchases that the backend credited as production (SANDBOX_CREDITED_IN_PRODUCTION).
    public func creditedInProductionSheet() throws -> SheetModel {
        let rows = try reader.exceptions(status: "all", category: "SANDBOX_CREDITED_IN_PRODUCTION").map { e -> SheetRow in
            let amount: Cell = e.grossMinor.map { .money(minor: $0, decimals: decimals(e.currency ?? reportingCurrency)) } ?? .empty
            return SheetRow([.text(e.transactionId), .text(e.orderId ?? ""), .text(e.accountId ?? ""), .text(e.productId ?? ""), amount,
                             .text(e.currency ?? ""), .date(e.firstSeen), .text(e.isOpen ? "open" : "resolved \(e.resolvedOn!)"), .text(e.detail)])
        }
        return SheetModel(
            name: "Credited in Production", title: "Sandbox purchases credited in production",
            subtitle: ["Test purchases (sandbox: test top-ups, App Review, TestFlight) that the backend credited to production accounts: real credits for purchases nobody paid for."],
            tables: [TableBlock(columns: [
                Column("Transaction", width: 19), Column("Order", width: 16), Column("Account", width: 16), Column("Product", width: 30),
                Column("Amount", width: 11, kind: .money), Column("Currency", width: 9), Column("First seen", width: 12, kind: .date),
                Column("Status", width: 22), Column("Detail", width: 80),
            ], rows: rows)])
    }

    /// Trial balance rows as of the report date (entries posted on or before it).
    public func trialBalanceRows() throws -> [TrialBalanceRow] {
        try reader.trialBalance(book: book, through: asOf)
    }

    public func trialBalanceSheet() throws -> SheetModel {
        let rows = try trialBalanceRows().sorted { ($0.currency, $0.account) < ($1.currency, $1.account) }
        var out: [SheetRow] = []
        var i = 0
        var reportingTotal: Int64 = 0
        while i < rows.count {
            let currency = rows[i].currency
            var debit: Int64 = 0, credit: Int64 = 0, balance: Int64 = 0, reporting: Int64 = 0
            while i < rows.count && rows[i].currency == currency {
                let r = rows[i]
                let d = decimals(r.currency)
                out.append(SheetRow([.text(r.book), .text(r.account), .text(r.currency),
                                     .money(minor: r.debitMinor, decimals: d), .money(minor: r.creditMinor, decimals: d),
                                     .money(minor: r.balanceMinor, decimals: d),
                                     .money(minor: r.reportingBalanceMinor, decimals: reportingDecimals)]))
                debit += r.debitMinor; credit += r.creditMinor; balance += r.balanceMinor; reporting += r.reportingBalanceMinor
                i += 1
            }
            let d = decimals(currency)
            out.append(SheetRow([.text(book.rawValue), .text("Total \(currency)"), .text(currency),
                                 .money(minor: debit, decimals: d), .money(minor: credit, decimals: d),
                                 .money(minor: balance, decimals: d), .money(minor: reporting, decimals: reportingDecimals)],
                                style: .total))
            reportingTotal += reporting
        }
        out.append(SheetRow([.text(book.rawValue), .text("Total all currencies (\(reportingCurrency))"), .text(reportingCurrency),
                             .empty, .empty, .empty, .money(minor: reportingTotal, decimals: reportingDecimals)], style: .total))
        return SheetModel(
            name: "Trial Balance", title: "Trial balance: \(book.rawValue) book",
            subtitle: ["As of \(asOf) (entries posted on or before this date). Debits positive, credits negative; each currency and the reporting currency (\(reportingCurrency)) sum to zero."],
            tables: [TableBlock(columns: [
                Column("Book", width: 12), Column("Account", width: 34), Column("Currency", width: 10),
                Column("Debit", width: 16, kind: .money), Column("Credit", width: 16, kind: .money),
                Column("Balance", width: 16, kind: .money), Column("Balance (reporting)", width: 20, kind: .money),
            ], rows: out)])
    }

    /// Postings the Journal covers (entries of the book posted on or before the as-of date).
    public func journalCount() throws -> Int { try reader.journalCount(book: book, through: asOf) }

    /// Whether the journal passes the row cap and goes to a gzip CSV beside the workbook.
    public func journalOverCap() throws -> Bool { try journalCount() > journalRowCap }

    /// The journal as a streamed table: one row per posting.
    public func journalTable() throws -> TableBlock {
        let reader = self.reader, book = self.book, asOf = self.asOf, rd = reportingDecimals
        return TableBlock(columns: [
            Column("Entry", width: 9, kind: .integer), Column("Date", width: 12, kind: .date),
            Column("Original date", width: 13, kind: .date), Column("Late", width: 6),
            Column("Kind", width: 16), Column("Transaction", width: 20), Column("Product", width: 32),
            Column("Storefront", width: 11), Column("Account", width: 30), Column("Currency", width: 10),
            Column("Amount", width: 14, kind: .money), Column("Amount (reporting)", width: 18, kind: .money),
        ], rowCount: try journalCount()) { emit in
            try reader.journal(book: book, through: asOf) { j in
                let d = Currency.exponent(j.currency) ?? 2
                try emit(SheetRow([.integer(j.entryId), .date(j.date), .date(j.originalDate), .text(j.late ? "late" : ""),
                                   .text(j.kind), .text(j.transactionId), .text(j.productId), .text(j.storefront),
                                   .text(j.account), .text(j.currency), .money(minor: j.amountMinor, decimals: d),
                                   .money(minor: j.reportingAmountMinor, decimals: rd)]))
            }
        }
    }

    public func journalSheet() throws -> SheetModel {
        let table = try journalTable()
        var subtitle = ["Every posting on or before \(asOf), one row each. Amounts in the transaction currency and in \(reportingCurrency) at the purchase month's rate."]
        if table.rowCount > journalRowCap {
            let where_ = journalExport.map { "\($0.fileName) beside this workbook (\($0.rows) rows, SHA-256 \($0.sha256))" } ?? "a CSV export beside this workbook"
            subtitle = ["This period has \(table.rowCount) postings, more than the Journal sheet's cap of \(journalRowCap) (journal_row_cap in iapledger.toml).",
                        "The full journal is in \(where_). Every other sheet is complete."]
            return SheetModel(name: "Journal", title: "Journal: \(book.rawValue) book", subtitle: subtitle,
                              tables: [TableBlock(columns: table.columns, rows: [])])
        }
        return SheetModel(name: "Journal", title: "Journal: \(book.rawValue) book", subtitle: subtitle, tables: [table])
    }

    public func runInfoSheet() throws -> SheetModel {
        let totals = try reader.totals()
        let summary = try runId.flatMap { try reader.runSummary($0) }
        var info: [SheetRow] = [
            SheetRow([.text("As-of date"), .date(asOf)]),
            SheetRow([.text("Book"), .text(book.rawValue)]),
            SheetRow([.text("Reporting currency"), .text(reportingCurrency)]),
            SheetRow([.text("Tool version"), .text("iapledger \(toolVersion)")]),
        ]
        // Closed periods: entries dated in them are posted on the first open day, marked late.
        if let close = try reader.latestClose() {
            info += [
                SheetRow([.text("Closed through"), .text(close.month.description)]),
                SheetRow([.text("  closed by"), .text("\(close.closedBy) on \(close.closedAt) (\(close.source.rawValue))")]),
            ]
        } else {
            info.append(SheetRow([.text("Closed through"), .text("no month closed")]))
        }
        if let s = summary {
            info += [
                SheetRow([.text("Run number"), .integer(s.id)]),
                SheetRow([.text("Records read this run"), .integer(Int64(s.recordsRead))]),
                SheetRow([.text("  verified"), .integer(Int64(s.recordsVerified))]),
                SheetRow([.text("  pending"), .integer(Int64(s.recordsPending))]),
                SheetRow([.text("  rejected"), .integer(Int64(s.recordsRejected))]),
                SheetRow([.text("  skipped (already read)"), .integer(Int64(s.recordsSkipped))]),
                SheetRow([.text("Entries posted this run"), .integer(Int64(s.entriesPosted))]),
            ]
        }
        info += [
            SheetRow([.text("Transactions posted (ledger)"), .integer(Int64(totals.transactionsPosted))]),
            SheetRow([.text("Transactions pending a rule (ledger)"), .integer(Int64(totals.transactionsPending))]),
            SheetRow([.text("Transactions free, no entry (ledger)"), .integer(Int64(totals.transactionsFree))]),
            SheetRow([.text("Records verified (ledger)"), .integer(Int64(totals.recordsVerified))]),
            SheetRow([.text("Records pending (ledger)"), .integer(Int64(totals.recordsPending))]),
            SheetRow([.text("Records rejected (ledger)"), .integer(Int64(totals.recordsRejected))]),
        ]
        if let x = journalExport {
            info += [
                SheetRow([.text("Full journal (over the sheet's cap)"), .text(x.fileName)]),
                SheetRow([.text("  rows"), .integer(Int64(x.rows))]),
                SheetRow([.text("  SHA-256"), .text(x.sha256)]),
            ]
        }
        let files = (summary?.files ?? []).map {
            SheetRow([.text($0.path), .text($0.kind), .text($0.sha256), .integer($0.sizeBytes),
                      .integer(Int64($0.records)), .integer(Int64($0.newRecords))])
        }
        let problems = try reader.recordProblems().filter { !$0.resolved }.map {
            SheetRow([.text($0.path), .integer(Int64($0.line)), .text($0.outcome), .text($0.code), .text($0.reason),
                      .date($0.firstSeen), .integer(Int64(asOf - $0.firstSeen))])
        }
        let findings = try reader.findings(openOnly: true).map {
            SheetRow([.text($0.code), .text($0.transactionId), .text($0.message), .date($0.firstSeen),
                      .integer(Int64(asOf - $0.firstSeen))])
        }
        return SheetModel(
            name: "Run Info", title: "Run information",
            subtitle: ["What the nightly run read and decided. Every input record is posted, pending (with the reason it waits) or rejected (with its reason)."],
            tables: [
                TableBlock(columns: [Column("Item", width: 38), Column("Value", width: 24)], rows: info),
                TableBlock(heading: "Input files read by this run", columns: [
                    Column("File", width: 44), Column("Kind", width: 10), Column("SHA-256", width: 66),
                    Column("Size (bytes)", width: 13, kind: .integer), Column("Records", width: 10, kind: .integer),
                    Column("New records", width: 12, kind: .integer),
                ], rows: files),
                TableBlock(heading: "Records not posted (rejected, or pending verification)", columns: [
                    Column("File", width: 44), Column("Line", width: 8, kind: .integer), Column("Outcome", width: 10),
                    Column("Code", width: 34), Column("Reason", width: 90), Column("First seen", width: 12, kind: .date),
                    Column("Age (days)", width: 11, kind: .integer),
                ], rows: problems),
                TableBlock(heading: "Open findings (transactions waiting, data conflicts)", columns: [
                    Column("Code", width: 22), Column("Transaction", width: 20), Column("Detail", width: 90),
                    Column("First seen", width: 12, kind: .date), Column("Age (days)", width: 11, kind: .integer),
                ], rows: findings),
            ])
    }
}

/// The full journal written as gzip CSV beside a workbook when it passes the row cap.
public struct JournalExport: Equatable {
    public var fileName: String
    public var rows: Int
    public var sha256: String
    public init(fileName: String, rows: Int, sha256: String) {
        self.fileName = fileName
        self.rows = rows
        self.sha256 = sha256
    }
}
