import LedgerCore
import LedgerStore

/// Builds the report models of a book as of a date, from the ledger, laid out by the book's
/// layout (`finance.toml` or `sandbox.toml`). Plain data only: the writer turns them into XLSX.
public struct FinanceReport {
    /// Run Info lists at most this many open findings of each code (then says how many more).
    public static let findingsListed = 1_000
    /// Run Info lists the first this many records, and findings, a night dismissed.
    public static let dismissalsListed = 1_000
    /// This workbook's limit (the tests list fewer).
    public var findingsLimit = FinanceReport.findingsListed

    public let reader: LedgerReader
    public let book: Book
    public let asOf: Day
    public let reportingCurrency: String
    public let toolVersion: String
    public let runId: Int64?
    /// Which sheets, tables and columns the workbook shows, and how.
    public let layout: ReportLayout
    /// The Journal sheet lists every posting up to this many rows (`journal_row_cap`).
    public var journalRowCap: Int = 250_000
    /// The full journal written beside the workbook when the period passes the cap.
    public var journalExport: JournalExport?
    /// The ledger-wide reads Run Info makes, shared with the night's other workbooks.
    public var shared: SharedReads?
    /// The journal's row count, counted once: the cap, the export and the sheet each ask for
    /// it, and counting a month's million postings took a fifth of a second each time. (A
    /// report reads one snapshot of the ledger, in one read transaction.)
    private let counted = CountMemo()
    private final class CountMemo { var journal: Int? }

    public init(reader: LedgerReader, book: Book, asOf: Day, reportingCurrency: String, toolVersion: String, runId: Int64?,
                layout: ReportLayout) {
        self.reader = reader
        self.book = book
        self.asOf = asOf
        self.reportingCurrency = reportingCurrency
        self.toolVersion = toolVersion
        self.runId = runId
        self.layout = layout
    }

    var reportingDecimals: Int { Currency.exponent(reportingCurrency) ?? 2 }
    func decimals(_ currency: String) -> Int { Currency.exponent(currency) ?? 2 }

    /// The values of the layout's `{placeholders}`.
    public var values: [String: String] {
        ["as_of": asOf.description, "book": book.rawValue, "reporting_currency": reportingCurrency]
    }

    /// The workbook: the layout's sheets, in its order; only the sheets it lists are queried.
    public func workbook() throws -> WorkbookModel {
        var activityRows: [ActivityRow]? = nil
        func activity() throws -> [ActivityRow] {
            if let rows = activityRows { return rows }
            let rows = try self.activity()
            activityRows = rows
            return rows
        }
        let sheets = try layout.sheets.map { sheet -> SheetModel in
            let content: SheetContent
            switch sheet.key {
            case "summary": content = try summarySheet(activity: activity())
            case "trial_balance": content = try trialBalanceSheet()
            case "journal": content = try journalSheet()
            case "revenue_by_region": content = try revenueByRegionSheet(activity: activity())
            case "revenue_by_product": content = try revenueByProductSheet(activity: activity())
            case "refunds": content = try refundsSheet()
            case "credited_in_production" where book == .sandbox: content = try creditedInProductionSheet()
            case "run_info": content = try runInfoSheet()
            default:
                throw LayoutError(path: layout.source, key: "sheet \"\(sheet.key)\"", message: "the \(book.rawValue) book's workbook has no such sheet")
            }
            return layout.apply(sheet, to: content, values: values)
        }
        return WorkbookModel(
            title: book == .production ? "iapledger finance report \(asOf)" : "iapledger sandbox book \(asOf)",
            subject: "In-app purchase ledger, \(book.rawValue) book, as of \(asOf)" + (try Self.writtenLater(reader, asOf: asOf)),
            company: "", created: asOf, sheets: sheets, numberFormats: layout.formats
        )
    }

    /// Sandbox purchases that the backend credited as production (SANDBOX_CREDITED_IN_PRODUCTION),
    /// as they stood on the as-of date, as the reconciliation workbook of that date lists its
    /// exceptions: those found on or before it, open unless resolved by then (a month-end set
    /// written on a later night lists nothing that night found).
    public func creditedInProductionSheet() throws -> SheetContent {
        // A day no night had reached: nothing was reconciled then, which an empty list would
        // have shown as a clean month (as the reconciliation workbook of that date says).
        guard let state = try reader.lastRun(onOrBefore: asOf) else {
            let note = "Not reconciled: no night had run on or before \(asOf), so nothing was checked by then; the sets of the nights that read this day's data list what they found"
            return SheetContent(key: "credited_in_production", tables: [TableBlock(
                key: "credits", columns: ReportSchema.creditedInProduction,
                rows: [SheetRow([.text(note)] + Array(repeating: .empty, count: ReportSchema.creditedInProduction.count - 1))])])
        }
        let found = try reader.exceptions(status: "all", category: "SANDBOX_CREDITED_IN_PRODUCTION").filter { $0.firstSeen <= asOf }
        // A sale a later run booked (it waited for its rule) shows no amount, as in the
        // reconciliation workbook of the same date: it was not booked then.
        let later = try reader.salesPosted(afterRun: state.id, of: Set(found.filter { $0.grossMinor != nil }.map(\.transactionId)))
        let rows = found.map { e -> SheetRow in
            let booked = !later.contains(e.transactionId)
            let amount: Cell = e.grossMinor.flatMap { booked ? .money(minor: $0, decimals: decimals(e.currency ?? reportingCurrency)) : nil } ?? .empty
            let resolved = e.resolvedOn.flatMap { $0 <= asOf ? $0 : nil }
            return SheetRow([.text(e.transactionId), .text(e.orderId ?? ""), .text(e.accountId ?? ""), .text(e.productId ?? ""), amount,
                             .text(booked ? e.currency ?? "" : ""), .date(e.firstSeen), .text(resolved.map { "resolved \($0)" } ?? "open"), .text(e.detail)])
        }
        // An empty list says so, as every list does: a header alone reads as data missing.
        let none = SheetRow([.text("None: no sandbox transaction was credited by a production order on or before \(asOf)")]
                            + Array(repeating: .empty, count: ReportSchema.creditedInProduction.count - 1))
        return SheetContent(key: "credited_in_production",
                            tables: [TableBlock(key: "credits", columns: ReportSchema.creditedInProduction, rows: rows.isEmpty ? [none] : rows)])
    }

    /// Every printed page's header says which books it is: for a set written after its date (a
    /// month's set, written again by each night while its month is open, or by `report`), the
    /// night whose ledger it shows, and whether its month was closed then: two printouts "as of
    /// 2026-10-31" written on different nights may hold different figures.
    static func writtenLater(_ reader: LedgerReader, asOf: Day) throws -> String {
        guard let last = try reader.lastAsOf(), last > asOf else { return "" }
        let closed = try reader.latestClose().map { asOf.month <= $0.month } ?? false
        return "; the ledger after the night of \(last)" + (closed ? " (\(asOf.month) closed)" : " (\(asOf.month) still open: its figures may change until it is closed)")
    }

    /// Trial balance rows as of the report date (entries posted on or before it).
    public func trialBalanceRows() throws -> [TrialBalanceRow] {
        try reader.trialBalance(book: book, through: asOf)
    }

    /// The accounts, by currency, then the totals of each currency and of all in the reporting
    /// currency, all below the accounts: the sheet's filter covers the accounts alone, so that
    /// sorting or filtering them never moves or counts a total.
    public func trialBalanceSheet() throws -> SheetContent {
        let rows = try trialBalanceRows().sorted { ($0.currency, $0.account) < ($1.currency, $1.account) }
        var out: [SheetRow] = [], totals: [SheetRow] = []
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
            totals.append(SheetRow([.text(book.rawValue), .text("Total \(currency)"), .text(currency),
                                    .money(minor: debit, decimals: d), .money(minor: credit, decimals: d),
                                    .money(minor: balance, decimals: d), .money(minor: reporting, decimals: reportingDecimals)],
                                   style: .total))
            reportingTotal += reporting
        }
        out += totals
        out.append(SheetRow([.text(book.rawValue), .text("Total all currencies (\(reportingCurrency))"), .text(reportingCurrency),
                             .empty, .empty, .empty, .money(minor: reportingTotal, decimals: reportingDecimals)], style: .total))
        // Each account once, all its currencies added in the reporting currency: what ties to the
        // Summary (an account was spread over a row per currency, to add up by hand).
        var byAccount: [String: Int64] = [:]
        for r in rows { byAccount[r.account, default: 0] += r.reportingBalanceMinor }
        let accounts = byAccount.keys.sorted().map {
            SheetRow([.text(book.rawValue), .text($0), .text(reportingCurrency), .money(minor: byAccount[$0]!, decimals: reportingDecimals)])
        } + [SheetRow([.text(book.rawValue), .text("Total"), .text(reportingCurrency), .money(minor: reportingTotal, decimals: reportingDecimals)], style: .total)]
        return SheetContent(key: "trial_balance", tables: [TableBlock(key: "balances", columns: ReportSchema.trialBalance, rows: out),
                                                           TableBlock(key: "by_account", columns: ReportSchema.trialBalanceByAccount, rows: accounts)])
    }

    /// Postings the Journal covers (entries of the book posted on or before the as-of date).
    /// The Journal covers the as-of date's month: postings dated from its 1st to the as-of
    /// date. Earlier months are in their own sets (`reports/<month's last day>/`).
    public var journalFrom: Day { asOf.month.firstDay }

    public func journalCount() throws -> Int {
        if let n = counted.journal { return n }
        let n = try reader.journalCount(book: book, from: journalFrom, through: asOf)
        counted.journal = n
        return n
    }

    /// Whether the journal passes the row cap and goes to a gzip CSV beside the workbook.
    public func journalOverCap() throws -> Bool { try journalCount() > journalRowCap }

    /// The journal as a streamed table: one row per posting, every column; with `totals`, the
    /// sheet's control totals after them (`journalTotalRows`), which the CSV export past the
    /// cap, a list of postings only, leaves out.
    public func journalTable(totals: Bool = false) throws -> TableBlock {
        let reader = self.reader, book = self.book, asOf = self.asOf, rd = reportingDecimals, currency = reportingCurrency
        let count = try journalCount()
        return TableBlock(key: "postings", columns: ReportSchema.journal, rowCount: count + (totals ? Self.journalTotalRowCount : 0)) { emit in
            var debits: Int64 = 0, credits: Int64 = 0, entries = 0, postings = 0, lastEntry: Int64? = nil
            try reader.journal(book: book, from: journalFrom, through: asOf) { j in
                let d = Currency.exponent(j.currency) ?? 2
                if j.reportingAmountMinor > 0 { debits += j.reportingAmountMinor } else { credits += j.reportingAmountMinor }
                if j.entryId != lastEntry { entries += 1; lastEntry = j.entryId }
                postings += 1
                try emit(SheetRow([.integer(j.entryId), .date(j.date), .date(j.originalDate), .text(j.late ? "late" : ""),
                                   .text(j.kind), .text(j.transactionId), .text(j.productId), .text(j.storefront),
                                   .text(j.account), .text(j.currency), .money(minor: j.amountMinor, decimals: d),
                                   .money(minor: j.reportingAmountMinor, decimals: rd)]))
            }
            if totals {
                for r in Self.journalTotalRows(debits: debits, credits: credits, entries: entries, postings: postings,
                                               reportingCurrency: currency, decimals: rd) { try emit(r) }
            }
        }
    }

    static let journalTotalRowCount = 3

    /// The Journal's control totals, in the reporting-currency column (each posting's amount
    /// column is in its own currency, which do not add up): its debits, its credits and the
    /// two added, zero as every entry's reporting amounts balance (accounting.md).
    static func journalTotalRows(debits: Int64, credits: Int64, entries: Int, postings: Int,
                                 reportingCurrency: String, decimals: Int) -> [SheetRow] {
        func row(_ label: String, _ minor: Int64) -> SheetRow {
            SheetRow([.text(label)] + Array(repeating: .empty, count: ReportSchema.journal.count - 2) + [.money(minor: minor, decimals: decimals)],
                     style: .total)
        }
        let listed = "\(postings) posting\(postings == 1 ? "" : "s") of \(entries) entr\(entries == 1 ? "y" : "ies")"
        return [
            row("Debits (\(reportingCurrency)): the positive amounts of the \(listed) above", debits),
            row("Credits (\(reportingCurrency)): the negative amounts", credits),
            row("Debits and credits added (zero: every entry balances)", debits + credits),
        ]
    }

    /// The journal as the layout shows it (the columns of the gzip CSV export past the cap);
    /// nil when the layout leaves the Journal sheet or its table out.
    public func laidOutJournalTable() throws -> TableBlock? {
        guard let table = layout.sheet("journal")?.tables.first(where: { $0.key == "postings" }) else { return nil }
        let values = self.values
        return try journalTable().laidOut(table) { ReportLayout.fill($0, values) }
    }

    /// The version of the journal export's format: raise it when the export of the same
    /// postings would give other bytes (fields, quoting, compression), so that no export
    /// written before is kept. 2: a text a spreadsheet would run as a formula is written with
    /// an apostrophe before it.
    public static let journalExportFormat = 2

    /// What the journal export of `table` (`laidOutJournalTable`) is made of, as one SHA-256:
    /// the entries it lists (`LedgerReader.journalInputs`), its book and dates, its columns as
    /// the layout shows them, the tool's version and the export's format. The same value means
    /// the same export, byte for byte: an export that carries it is kept, not written again.
    public func journalExportInputs(_ table: TableBlock) throws -> String {
        let parts = [
            "iapledger journal export format \(Self.journalExportFormat)", "tool \(toolVersion)",
            "book \(book.rawValue) from \(journalFrom) through \(asOf)", "reporting currency \(reportingCurrency)",
            "columns \(table.columns)", "rows \(table.rowCount)",
            try reader.journalInputs(book: book, from: journalFrom, through: asOf),
        ]
        return Hashing.sha256Hex(utf8: parts.joined(separator: "\n"))
    }

    public func journalSheet() throws -> SheetContent {
        // The control totals stand in the reporting-amount column: a layout that leaves it out
        // has none (their labels stood over empty cells).
        let reportingShown = layout.sheet("journal")?.tables.first { $0.key == "postings" }?.columns.contains { $0.key == "amount_reporting" } ?? false
        let table = try journalTable(totals: reportingShown)
        if try journalOverCap() {
            let where_ = journalExport.map { "\($0.fileName) beside this workbook (\($0.rows) rows, SHA-256 \($0.sha256))" } ?? "a CSV export beside this workbook"
            let notice = ["This month (\(journalFrom) to \(asOf)) has \(try journalCount()) postings, more than the Journal sheet's cap of \(journalRowCap) (journal_row_cap in iapledger.toml).",
                          "The full journal is in \(where_). Every other sheet is complete."]
            return SheetContent(key: "journal", tables: [TableBlock(key: "postings", columns: table.columns, rows: [])], notice: notice)
        }
        if try journalCount() == 0 {
            return SheetContent(key: "journal", tables: [TableBlock(key: "postings", columns: table.columns, rows: [
                SheetRow([.text("None: no posting dated \(journalFrom) to \(asOf) in this book")] + Array(repeating: .empty, count: table.columns.count - 1),
                         style: .total)])])
        }
        return SheetContent(key: "journal", tables: [table])
    }

    public func runInfoSheet() throws -> SheetContent {
        let totals = try shared.totals(reader)
        let summary = try runId.flatMap { try reader.runSummary($0) }
        let earlier = try runId.map { try reader.earlierRuns(asOf: asOf, before: $0).compactMap { try reader.runSummary($0) } } ?? []
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
                SheetRow([.text("Entries posted this run (ledger, both books)"), .integer(Int64(s.entriesPosted))]),
                SheetRow([.text("  of them in this book (\(book.rawValue))"), .integer(Int64(try reader.entriesPosted(byRun: s.id, book: book)))]),
            ]
            // What finance or an operator took off the open lists (`iapledger dismiss`), with who
            // and why, as this night applied it: otherwise on no sheet (they leave Pending,
            // Rejected and the findings below).
            let dismissed = try reader.dismissedByRun(s.id, limit: Self.dismissalsListed)
            for (label, count, rows, how) in [("Records dismissed by this run (ledger)", dismissed.recordCount, dismissed.records, "`iapledger trace FILE:LINE` shows each"),
                                              ("Findings dismissed by this run (ledger)", dismissed.findingCount, dismissed.findings, "`iapledger findings --status resolved` lists them")]
                where count > 0 {
                info.append(SheetRow([.text(label), .integer(Int64(count))]))
                info += rows.map { SheetRow([.text("  " + $0.what), .text($0.note)]) }
                if count > rows.count { info.append(SheetRow([.text("  ..."), .text("and \(count - rows.count) more: \(how)")])) }
            }
            // Sales booked where the config says, not where the buyer is (a renewal in a legacy
            // receipt, which names no storefront, that no order named one for): at that
            // storefront's prices and tax, in its region's figures.
            for d in try reader.salesAtDefaultStorefront(run: s.id, book: book.rawValue) {
                info += [
                    SheetRow([.text("  sales booked at default_storefront \(d.storefront) (no storefront of their own, no order naming one)"), .integer(Int64(d.sales))]),
                    SheetRow([.text("    their gross (\(reportingCurrency))"), .money(minor: d.grossReportingMinor, decimals: reportingDecimals)]),
                ]
            }
            // Nights run again as of the same date (more data the same day): their books are in
            // these figures, their files below.
            if !earlier.isEmpty {
                info.append(SheetRow([.text("Earlier runs as of this date"),
                                      .text(earlier.map { "run \($0.id) (\($0.entriesPosted) entr\($0.entriesPosted == 1 ? "y" : "ies") posted in both books, \($0.files.count) file\($0.files.count == 1 ? "" : "s") read)" }.joined(separator: ", "))]))
            }
            if let mode = s.reconciliation {
                info.append(SheetRow([.text("Reconciliation this run"),
                                      .text(mode == "full" ? "full: every transaction and order" : "incremental: the transactions and orders this run touched")]))
            }
        }
        let latest = try reader.latestRun()
        // The set of a night written again after later runs (`report --as-of`, the month
        // before's set): its figures hold the entries dated on or before the as-of date that
        // those runs posted, which the night's own set did not; said, with how many (the two
        // files of one name differed with no word of it).
        if let s = summary, let latest, latest.id > s.id {
            let later = try reader.entriesPosted(afterRun: s.id, book: book, through: asOf)
            info.append(SheetRow([.text("Written again after run \(latest.id) (as of \(latest.asOf))"), .text(later.map {
                "the figures include \($0.count) \($0.count == 1 ? "entry" : "entries") dated on or before \(asOf) that "
                    + ($0.firstRun == $0.lastRun ? "run \($0.firstRun)" : "runs \($0.firstRun) to \($0.lastRun)")
                    + " posted after run \(s.id): the set run \(s.id) wrote did not have them"
            } ?? "no entry dated on or before \(asOf) was posted after run \(s.id): the figures are those of the set run \(s.id) wrote")]))
        }
        if summary == nil {
            // A set written for an earlier date than the latest run (the month before, or
            // `report --period`): say whose state its lists are, and that the totals are today's.
            let state = try reader.lastRun(onOrBefore: asOf)
            info.append(SheetRow([.text("Records not posted and findings below"),
                                  .text(state.map { "as they stood after run \($0.id), as of \($0.asOf) (the last run on or before \(asOf))" }
                                        ?? "none: no run on or before \(asOf)")]))
        }
        // Written again after a later run (the month before's set, `report --period`): the
        // ledger's totals are today's, not the as-of date's.
        if let latest, latest.asOf > asOf {
            info.append(SheetRow([.text("Ledger totals below"), .text("the whole ledger after the latest run (run \(latest.id), as of \(latest.asOf))")]))
        }
        info += [
            SheetRow([.text("Transactions posted (ledger, both books)"), .integer(Int64(totals.transactionsPosted))]),
            SheetRow([.text("Transactions waiting for a rule or an order (ledger, both books)"), .integer(Int64(totals.transactionsPending))]),
            SheetRow([.text("Transactions free, no entry (ledger, both books)"), .integer(Int64(totals.transactionsFree))]),
            SheetRow([.text("Records verified (ledger)"), .integer(Int64(totals.recordsVerified))]),
            SheetRow([.text("Records pending, open (ledger)"), .integer(Int64(totals.recordsPending))]),
            SheetRow([.text("Records rejected, open (ledger)"), .integer(Int64(totals.recordsRejected))]),
            SheetRow([.text("Records pending or rejected, resolved since (ledger)"), .integer(Int64(totals.recordsResolved))]),
            SheetRow([.text("Chain head after run \(latest?.id ?? 0) (last entry's hash)"), .text(totals.chainHead)]),
        ]
        if let seal = totals.seal {
            info.append(SheetRow([.text("Ledger seal (the latest: runs, their records and files, closes)"), .text(seal)]))
        }
        if let x = journalExport {
            info += [
                SheetRow([.text("Full journal (over the sheet's cap)"), .text(x.fileName)]),
                SheetRow([.text("  rows"), .integer(Int64(x.rows))]),
                SheetRow([.text("  SHA-256"), .text(x.sha256)]),
            ]
        }
        // A set of a day no night ran as of (the month before's set, `report`): its night's
        // files are on that night's Run Info, said, not an empty table.
        let noRun = summary == nil
            ? [SheetRow([.text("None: no night ran as of \(asOf); the files each night read are on the Run Info of that night's own set")]
                        + Array(repeating: .empty, count: ReportSchema.runInfoFiles.count - 1), style: .total)]
            : []
        func read(by s: RunSummary) -> [SheetRow] {
            s.files.map {
                SheetRow([.text($0.path), .text($0.kind), .text($0.sha256), .integer($0.sizeBytes),
                          .integer(Int64($0.records)), .integer(Int64($0.newRecords))])
            } + s.inputs.map {
                // The config and rules the run posted by, fingerprinted as read (sealed with the run).
                // The program's is its GNU build ID, said so under the SHA-256 heading (a
                // finance review: 40 hex digits read as a SHA-256 that matched nothing).
                SheetRow([.text($0.path), .text($0.path.hasPrefix("rules/") ? "rules" : $0.path.hasPrefix("trusted root: ") ? "trusted root" : $0.path == LedgerReader.buildInput ? "program" : "config"),
                          .text($0.path == LedgerReader.buildInput ? "GNU build ID \($0.sha256)" : $0.sha256), .empty, .empty, .empty])
            }
        }
        // Then those of the runs as of the same date before it, each under a row naming it.
        let files = noRun + (summary.map(read) ?? []) + earlier.flatMap { s in
            [SheetRow([.text("Read by run \(s.id), as of this date too, before run \(summary?.id ?? 0):")] + Array(repeating: .empty, count: ReportSchema.runInfoFiles.count - 1),
                      style: .total)] + read(by: s)
        }
        // What was open on the as-of date (a month-end set written again later lists neither
        // records read nor findings made after it).
        // The first `findingsListed` of each code, as the findings below.
        let openRecords = try shared.openRecordProblems(.openOn(asOf, outcome: nil, byFirstSeen: false), perCode: findingsLimit, total: 10 * findingsLimit, reader)
        let problems = openRecords.listed.map {
            SheetRow([.text($0.path), .integer(Int64($0.line)), .text($0.outcome), .text($0.code), .text($0.reason),
                      .date($0.firstSeen), .integer(Int64(asOf - $0.firstSeen))])
        } + openRecords.more.map {
            SheetRow([.text("... and \($0.count) more open \($0.code) records, not listed here (the reconciliation workbook's Pending and Rejected sheets list up to \(ReconciliationReport.recordsListed) of each code)"),
                      .empty, .empty, .text($0.code), .empty, .empty, .empty])
        }
        // This book's findings, and those about transactions no book holds (their record did not
        // verify): the first `findingsListed` of each code, then a row saying how many more
        // (a rules change may open one for every posted sale: `iapledger findings` lists all).
        let open = try shared.findingsOpen(on: asOf, book: book.rawValue, limit: findingsLimit, reader)
        var findings: [SheetRow] = []
        // The rows come in code order: after each code's listed rows, how many more it has.
        var current: (code: String, listed: Int)? = nil
        func closeCode() {
            guard let c = current, let total = open.counts[c.code], total > c.listed else { return }
            findings.append(SheetRow([.text(c.code), .empty, .text("... and \(total - c.listed) more open \(c.code) findings, not listed here: `iapledger findings --code \(c.code)` lists them all"),
                                      .empty, .empty]))
        }
        for f in open.rows {
            if current?.code != f.code { closeCode(); current = (f.code, 0) }
            current!.listed += 1
            findings.append(SheetRow([.text(f.code), .text(StoreBounds.shownIdentifier(f.transactionId)), .text(f.message), .date(f.firstSeen),
                                      .integer(Int64(asOf - f.firstSeen))]))
        }
        closeCode()
        // An empty list says so, and, on a day no night had reached, that nothing was read by
        // then (a header alone read as nothing open, or as a table left empty by mistake).
        let reached = try reader.lastRun(onOrBefore: asOf) != nil
        func none(_ columns: [Column], _ text: String) -> [SheetRow] {
            [SheetRow([.text(text)] + Array(repeating: .empty, count: columns.count - 1), style: .total)]
        }
        let noProblems = problems.isEmpty
            ? none(ReportSchema.runInfoNotPosted, reached ? "None: no record read by \(asOf) was still pending or rejected on that day"
                                                            : "None known: no night had run on or before \(asOf), so no record had been read by then")
            : []
        let noFindings = findings.isEmpty
            ? none(ReportSchema.runInfoFindings, reached ? "None open on \(asOf)"
                                                           : "None known: no night had run on or before \(asOf)")
            : []
        return SheetContent(key: "run_info", tables: [
            TableBlock(key: "info", columns: ReportSchema.runInfo, rows: info),
            TableBlock(key: "files", columns: ReportSchema.runInfoFiles, rows: files),
            TableBlock(key: "not_posted", columns: ReportSchema.runInfoNotPosted, rows: problems + noProblems),
            TableBlock(key: "findings", columns: ReportSchema.runInfoFindings, rows: findings + noFindings),
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
