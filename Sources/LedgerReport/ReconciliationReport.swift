import LedgerCore
import LedgerReconcile
import LedgerStore

/// The reconciliation workbook: the store against the backend's credits, as of a date, laid
/// out by `reconciliation.toml`.
public struct ReconciliationReport {
    /// The lines between the amounts and their total (`Amounts above, added`, then these).
    public static let lessSandboxLabel = "less: sandbox purchases credited in production (test sales, in no production total)"
    public static let lessTwiceLabel = "less: sales in more than one category (each sale's net counted once in the total)"

    public let reader: LedgerReader
    public let asOf: Day
    public let reportingCurrency: String
    public let runId: Int64?
    public let layout: ReportLayout
    /// The ledger-wide reads shared with the night's other workbooks.
    public var shared: SharedReads?
    /// The most records of one code, and waiting sales, the Pending and Rejected sheets list.
    public var recordsLimit = ReconciliationReport.recordsListed
    /// The product types reconciled (`[reconciliation] scope`), said on the Summary.
    public var scope: Set<ProductType> = ProductType.reconciledByDefault

    public init(reader: LedgerReader, asOf: Day, reportingCurrency: String, runId: Int64?, layout: ReportLayout) {
        self.reader = reader
        self.asOf = asOf
        self.reportingCurrency = reportingCurrency
        self.runId = runId
        self.layout = layout
    }

    var rd: Int { Currency.exponent(reportingCurrency) ?? 2 }

    /// The workbook shows the reconciliation as it stood on its as-of date: after the last run
    /// on or before that date (a month-end set written again later, or `report --period`, does
    /// not list what later runs found, and ages never come out negative).
    func stateRun() throws -> (id: Int64, asOf: Day)? { try reader.lastRun(onOrBefore: asOf) }

    /// Exceptions open on the as-of date, as the run of that date left them: a sale a later
    /// run booked (it waited for its rule or its order, and an exception's amount is its
    /// sale's) shows no amount, as it was not booked then (the set written again later showed
    /// the amount of a sale in a later month's books).
    /// One at a time (none held: a million open exceptions took 1.4 GB).
    func forEachOpenException(perCategory: Int? = nil, _ body: (ExceptionRow) throws -> Void) throws {
        let later = try postedAfterStateRun()
        try reader.forEachException(openOn: asOf, perCategory: perCategory) { e in
            guard let later, e.netReportingMinor != nil, try reader.salePosted(afterRun: later, transactionId: e.transactionId) else { return try body(e) }
            var e = e
            e.grossMinor = nil; e.currency = nil; e.netReportingMinor = nil
            try body(e)
        }
    }

    /// The state run, when a run came after it: sales posted since were not booked as of it
    /// (a set written again for an earlier day shows no amount for them). Nil otherwise.
    func postedAfterStateRun() throws -> Int64? {
        guard let state = try stateRun(), try reader.runExists(after: state.id) else { return nil }
        return state.id
    }

    /// The most records of one code the Pending and Rejected sheets list (then a row says how
    /// many more): a sheet holds 1,048,576 rows.
    public static let recordsListed = 100_000

    public func workbook() throws -> WorkbookModel {
        let values = ["as_of": asOf.description, "reporting_currency": reportingCurrency]
        // The records not posted, the first of each code (oldest first for the rejected).
        func open(_ outcome: String) throws -> SharedReads.OpenRecords {
            try shared.openRecordProblems(.openOn(asOf, outcome: outcome, byFirstSeen: outcome == "rejected"),
                                          perCode: recordsLimit, total: recordsLimit, reader)
        }
        let sheets = try layout.sheets.map { sheet -> SheetModel in
            let content: SheetContent
            switch sheet.key {
            case "summary": content = try summarySheet()
            case "exceptions": content = try exceptionsSheet()
            case "resolved": content = try resolvedSheet()
            case "pending": content = try pendingSheet(openRecords: try open("pending"))
            case "rejected": content = try rejectedSheet(openRecords: try open("rejected"))
            default: throw LayoutError(path: layout.source, key: "sheet \"\(sheet.key)\"", message: "the reconciliation workbook has no such sheet")
            }
            return layout.apply(sheet, to: content, values: values)
        }
        return WorkbookModel(title: "iapledger reconciliation \(asOf)",
                             subject: "Store transactions against the backend's credits, as of \(asOf)",
                             created: asOf, sheets: sheets, numberFormats: layout.formats)
    }

    public func summarySheet() throws -> SheetContent {
        let state = try stateRun()
        var rows: [SheetRow] = []
        var totalCount: Int64 = 0, totalAmount: Int64 = 0
        // A day no night had reached (a month-end set of history read later): nothing was
        // reconciled then, which zeros would have shown as a clean month.
        if state == nil {
            for c in ExceptionCategory.allCases {
                rows.append(SheetRow([.text(c.rawValue), .text(c.meaning), .empty, .empty, .empty]))
            }
            rows.append(SheetRow([.text("Not reconciled: no night had run on or before \(asOf)"), .empty, .empty, .empty, .empty], style: .total))
        }
        // Added up one exception at a time (a million open ones took 1.4 GB held): by category,
        // how many, how many new, and the net of each sale they name, once.
        var counted: [String: (all: Int, new: Int)] = [:], salesOf: [String: [String: Int64]] = [:]
        var newInAll = 0, withoutAmount = 0
        if state != nil {
            try reader.forEachOpenExceptionFigure(openOn: asOf, postedAfterRun: try postedAfterStateRun()) { category, transactionId, net, firstSeen, sandbox in
                counted[category, default: (0, 0)].all += 1
                if firstSeen == asOf { counted[category, default: (0, 0)].new += 1; newInAll += 1 }
                // Open exceptions that name no booked sale (a credit naming no transaction, or one
                // the store never reported; a sale waiting for verification, a rule or its order;
                // or free): the amounts leave them out. (Credits with no transaction were left
                // out of this count, which then matched no list on the Exceptions sheet.)
                if net == nil { withoutAmount += 1 }
                // A sandbox purchase's amount is a test sale's, which nobody paid: shown with
                // SANDBOX_CREDITED_IN_PRODUCTION alone, in no other category's amount nor the total
                // (no production total holds sandbox figures, accounting.md).
                if let net, Self.amountCounts(category: category, sandbox: sandbox) {
                    salesOf[category, default: [:]][transactionId] = net
                }
            }
        }
        // Each sale's net once: a sale two orders still credit after its refund is two
        // exceptions of one sale (and one in two categories counts once in the total).
        var totalSales: [String: Int64] = [:]
        for c in ExceptionCategory.allCases where state != nil {
            let n = counted[c.rawValue] ?? (0, 0)
            let sales = salesOf[c.rawValue] ?? [:]
            let amount = sales.values.reduce(0, +)
            if c != .sandboxCreditedInProduction { totalSales.merge(sales) { a, _ in a } }
            // No amount to show (none of its exceptions names a booked sale) is an empty cell, not 0.
            rows.append(SheetRow([.text(c.rawValue), .text(c.meaning), .integer(Int64(n.all)), .integer(Int64(n.new)),
                                  n.all > 0 && sales.isEmpty ? .empty : .money(minor: amount, decimals: rd)]))
            totalCount += Int64(n.all)
        }
        totalAmount = totalSales.values.reduce(0, +)
        // The amounts above, added as they stand, and what takes them to the total: the sandbox
        // purchases (shown, in no production total) and the sales in more than one category
        // (each once in the total). Without these lines the column did not add up to its total
        // (the demo's rows summed to 375.06 USD against a total of 303.12), unexplained.
        if state != nil {
            let shown = ExceptionCategory.allCases.reduce(Int64(0)) { $0 + (salesOf[$1.rawValue] ?? [:]).values.reduce(0, +) }
            let sandbox = (salesOf[ExceptionCategory.sandboxCreditedInProduction.rawValue] ?? [:]).values.reduce(0, +)
            let twice = shown - sandbox - totalAmount
            if sandbox != 0 || twice != 0 {
                rows.append(SheetRow([.text("Amounts above, added"), .empty, .empty, .empty, .money(minor: shown, decimals: rd)], style: .total))
                if sandbox != 0 {
                    // The label says it all, over the empty Meaning cell: beside a meaning, it was cut
                    // at its column's edge, on screen and printed.
                    rows.append(SheetRow([.text(Self.lessSandboxLabel), .empty, .empty, .empty, .money(minor: -sandbox, decimals: rd)], style: .total))
                }
                if twice != 0 {
                    rows.append(SheetRow([.text(Self.lessTwiceLabel), .empty, .empty, .empty, .money(minor: -twice, decimals: rd)], style: .total))
                }
            }
            rows.append(SheetRow([.text("Total open exceptions (amount: production sales only)"), .empty, .integer(totalCount),
                                  .integer(Int64(newInAll)), .money(minor: totalAmount, decimals: rd)],
                                 style: .total))
        }
        let matched = try (runId ?? state?.id).map { try reader.matchedCount(runId: $0) } ?? 0
        let resolved = try resolvedSinceLastNight().values.reduce(0, +)
        let stateText = state.map { "run \($0.id), as of \($0.asOf) (the last run on or before \(asOf))" }
            ?? "no run on or before \(asOf): NOT RECONCILED (the nights that read this day's data ran later; their set, or a later month's, has the exceptions)"
        return SheetContent(
            key: "summary",
            tables: [
                TableBlock(key: "by_category", columns: ReportSchema.reconciliationByCategory, rows: rows),
                TableBlock(key: "matching", columns: ReportSchema.reconciliationMatching, rows: [
                    SheetRow([.text("Matched order/transaction pairs (both books; a sale booked or still waiting)"), state == nil ? .text("not reconciled") : .integer(Int64(matched))]),
                    SheetRow([.text("Resolved since the previous night"), state == nil ? .text("not reconciled") : .integer(Int64(resolved))]),
                    SheetRow([.text("Reconciliation state"), .text(stateText)]),
                    SheetRow([.text("Product types reconciled"), .text(
                        ProductType.names(scope)
                        + "; transactions of other products, and their orders, are neither exceptions nor matches"
                        + " ([reconciliation] scope as the config had it when this workbook was written)")]),
                ]),
            ],
            values: state == nil
                ? ["matched": "not reconciled", "resolved": "not reconciled", "without_amount": "not reconciled"]
                : ["matched": String(matched), "resolved": String(resolved),
                   "without_amount": String(withoutAmount)])
    }

    /// Whether an exception's sale amount is one the Summary adds up: a sandbox purchase's is a
    /// test sale's, which nobody paid, shown with SANDBOX_CREDITED_IN_PRODUCTION alone.
    public static func amountCounts(category: String, sandbox: Bool) -> Bool {
        !sandbox || category == ExceptionCategory.sandboxCreditedInProduction.rawValue
    }

    /// An exception's common cells. `purchased`: the day the store says its transaction was
    /// bought (nil when no verified record reports it): how old the problem is, where first seen
    /// is when a night found it (a three-month-old double credit read 0 days old). The sale's
    /// net in the reporting currency is the one the Summary adds up (each sale once per
    /// category): none for a sandbox sale but with SANDBOX_CREDITED_IN_PRODUCTION, as there.
    func cells(_ e: ExceptionRow, purchased: Day?, sandbox: Bool) -> [Cell] {
        let net = Self.amountCounts(category: e.category, sandbox: sandbox) ? e.netReportingMinor : nil
        return [.text(e.category), .text(e.transactionId), .text(e.orderId ?? ""), .text(e.accountId ?? ""), .text(e.productId ?? ""),
                e.grossMinor.map { .money(minor: $0, decimals: Currency.exponent(e.currency ?? "") ?? 2) } ?? .empty,
                .text(e.currency ?? ""), net.map { .money(minor: $0, decimals: rd) } ?? .empty,
                purchased.map(Cell.date) ?? .empty, .date(e.firstSeen)]
    }

    /// Streamed from the ledger as the workbook is written (a million open exceptions took
    /// 1.4 GB held): the first `recordsLimit` of each category (by first seen), then a row
    /// saying how many more (a million took the workbook 35 s to write; `iapledger exceptions`
    /// lists every one).
    public func exceptionsSheet() throws -> SheetContent {
        let counts = try reader.exceptionCounts(openOn: asOf)
        let none = counts.isEmpty ? try noneRow(ReportSchema.exceptions, "None open: every store transaction in scope matched its credit, and every credit its transaction, as of \(asOf)") : []
        let report = self
        return try exceptionList("exceptions", ReportSchema.exceptions, counts: counts, status: "open", none: none,
                                 forEach: { perCategory, body in try report.forEachOpenException(perCategory: perCategory, body) },
                                 cells: { e, sale in [.integer(Int64(e.ageDays(asOf: report.asOf))), .text(e.detail + Self.waiting(e, sale?.waitsOn))] })
    }

    /// What an open exception's detail adds when its sale is not booked yet: a lost order whose
    /// sale waits for its order read as lost beside the Pending sheet's word that it waits.
    static func waiting(_ e: ExceptionRow, _ waitsOn: String?) -> String {
        switch waitsOn {
        case "ORDER_WAIT"?:
            return "; its sale waits for its order (ORDER_WAIT, on the Pending sheet)"
                + (e.category == ExceptionCategory.notCredited.rawValue ? ": an order read before the wait ends resolves this" : "")
        case "MISSING_RULE"?: return "; its sale waits for a rule (MISSING_RULE, on the Pending sheet): no amount until it is booked"
        case let code?: return "; its sale is not booked yet (\(code), on the Pending sheet)"
        case nil: return ""
        }
    }

    /// A sheet's list of exceptions (`counts` of each category), streamed: the first
    /// `recordsLimit` of each category, then a row saying how many more (`status`: which
    /// `iapledger exceptions --status` lists every one), after any not-reconciled row and before
    /// `none`. `cells`: an exception's cells after the common ones.
    func exceptionList(_ key: String, _ columns: [Column], counts: [String: Int], status: String, none: [SheetRow],
                       forEach: @escaping (_ perCategory: Int, _ body: (ExceptionRow) throws -> Void) throws -> Void,
                       cells: @escaping (ExceptionRow, _ sale: (purchased: Day, waitsOn: String?)?) -> [Cell]) throws -> SheetContent {
        let limit = recordsLimit
        let head = try notReconciled(columns)
        // A set written again for a date before the last night's says what each sale waited on
        // then (it said what it waits on now, or nothing once booked since).
        let current = try reader.lastAsOf().map { $0 <= asOf } ?? true
        // Nor does it give the purchase day of a transaction a later run first stored (a credit
        // for an unverified transaction verified since: its exception had no such day then).
        let stateRunId = current ? nil : try stateRun()?.id
        let listed = counts.values.reduce(0) { $0 + min($1, limit) + ($1 > limit ? 1 : 0) }
        let report = self
        return SheetContent(key: key, tables: [TableBlock(key: key, columns: columns, rowCount: head.count + listed + none.count) { emit in
            for row in head { try emit(row) }
            var category: String? = nil
            func more(after c: String?) throws {
                guard let c, let n = counts[c], n > limit else { return }
                try emit(SheetRow([.text(c)] + Array(repeating: .empty, count: columns.count - 2)
                                  + [.text("... and \(n - limit) more \(c) exceptions, not listed here (a sheet lists the first \(limit) of each category, by first seen; the Summary counts every one; `iapledger exceptions --status \(status) --category \(c) --format csv` lists every one)")]))
            }
            try forEach(limit) { e in
                if e.category != category { try more(after: category); category = e.category }
                // (The Resolved sheet says nothing of waiting: the day's lookup is for open ones.)
                let found = try report.reader.storeSale(transactionId: e.transactionId, waitingOn: current || status != "open" ? nil : report.asOf)
                let sale = found.flatMap { s in current || stateRunId.map({ s.firstRunId <= $0 }) == true ? (s.purchased, s.waitsOn) : nil }
                try emit(SheetRow(report.cells(e, purchased: sale?.0, sandbox: found?.sandbox == true) + cells(e, sale)))
            }
            try more(after: category)
            for row in none { try emit(row) }
        }])
    }

    /// The one row of a list that is empty on a day a night had reached: it says so, where an
    /// empty table read as data missing. Styled as a closing row, not data: outside the filter,
    /// and kept in the first column a layout shows.
    func noneRow(_ columns: [Column], _ text: String) throws -> [SheetRow] {
        guard try stateRun() != nil, !columns.isEmpty else { return [] }
        return [SheetRow([.text(text)] + Array(repeating: .empty, count: columns.count - 1), style: .total)]
    }

    /// On a day no night had reached, the one row of a list: it says so, where an empty list
    /// would read as nothing to report.
    func notReconciled(_ columns: [Column]) throws -> [SheetRow] {
        guard try stateRun() == nil, !columns.isEmpty else { return [] }
        return [SheetRow([.text("Not reconciled: no night had run on or before \(asOf), so nothing was read or checked by then; the sets of the nights that read this day's data list what they found")]
                         + Array(repeating: .empty, count: columns.count - 1))]
    }

    /// How many exceptions of each category were resolved after the previous night's as-of
    /// date, up to this one (those of the nights since alone, not every one ever resolved).
    func resolvedSinceLastNight() throws -> [String: Int] {
        try reader.exceptionCounts(status: "resolved", resolvedAfter: try reader.previousAsOf(before: asOf), resolvedThrough: asOf)
    }

    /// Streamed and listed as the Exceptions sheet is (a backend's million credits fixed in a
    /// day are a million resolved).
    public func resolvedSheet() throws -> SheetContent {
        let (reader, asOf) = (self.reader, self.asOf)
        let previous = try reader.previousAsOf(before: asOf)
        let counts = try resolvedSinceLastNight()
        let none = counts.isEmpty ? try noneRow(ReportSchema.resolved, previous.map { "None: no exception was resolved after the night as of \($0), up to \(asOf)" }
                                                ?? "None: no night ran before this one, so no exception was open to be resolved") : []
        return try exceptionList("resolved", ReportSchema.resolved, counts: counts, status: "resolved", none: none,
                                 forEach: { perCategory, body in
                                     try reader.forEachException(status: "resolved", resolvedAfter: previous, resolvedThrough: asOf,
                                                                 perCategory: perCategory, body)
                                 },
                                 cells: { e, _ in [.date(e.resolvedOn!), .integer(Int64(e.ageDays(asOf: asOf))), .text(e.detail)] })
    }

    /// - Parameter openRecords: the pending records still open on the as-of date (the first of
    ///   each code, and how many more).
    /// Led by the record or transaction, which a sheet printed two pages wide repeats on each
    /// (a finance review: led by what waits, its second page's reasons and ages named no record).
    public func pendingSheet(openRecords records: SharedReads.OpenRecords) throws -> SheetContent {
        var rows: [SheetRow] = try notReconciled(ReportSchema.pending)
        for p in records.listed {
            rows.append(SheetRow([.text("\(p.path):\(p.line)"), .text("record waits for verification"), .text(p.code), .empty, .text(p.reason),
                                  .date(p.firstSeen), .integer(Int64(asOf - p.firstSeen))]))
        }
        for m in records.more {
            rows.append(SheetRow([.text("... and \(m.count) more records waiting for verification, \(m.code), not listed here"), .empty, .text(m.code),
                                  .empty, .empty, .empty, .empty]))
        }
        // A sale of a month closed by then posts late, on the first open day: said, as its
        // purchase date is not the day it will be dated.
        let closed = try stateRun().flatMap { try reader.closedThrough(ofRun: $0.id) }
        let waiting = try reader.pendingTransactions(on: asOf, limit: recordsLimit)
        for t in waiting.listed {
            let what = (t.reason.hasPrefix("ORDER_WAIT:") ? "waits for its order (storefront)" : "waits for a rule")
                + (closed.flatMap { t.purchased.month <= $0 ? "; its month is closed: it posts late, on \($0.next.firstDay) or later" : nil } ?? "")
            rows.append(SheetRow([.text(t.transactionId), .text("\(t.book) transaction \(what)"), .text(t.productId),
                                  .date(t.purchased), .text(t.reason), .date(t.firstSeen), .integer(Int64(asOf - t.firstSeen))]))
        }
        if waiting.count > waiting.listed.count {
            rows.append(SheetRow([.text("... and \(waiting.count - waiting.listed.count) more waiting transactions, not listed here (a sheet lists the first \(recordsLimit); `iapledger findings --code MISSING_RULE` and `--code ORDER_WAIT` list every one)"),
                                  .empty, .empty, .empty, .empty, .empty, .empty]))
        }
        if records.listed.isEmpty && records.more.isEmpty && waiting.count == 0 {
            rows += try noneRow(ReportSchema.pending, "None waiting: no record waits for verification and no transaction for a rule or its order, as of \(asOf)")
        }
        return SheetContent(key: "pending", tables: [TableBlock(key: "pending", columns: ReportSchema.pending, rows: rows)])
    }

    /// The records refused and still open on the as-of date, oldest first. A refused order
    /// line is resolved by a later valid line of the same order; a refused receipt or signed
    /// record stays (a corrected copy is a record of its own).
    /// - Parameter openRecords: the rejected records still open on the as-of date, oldest first
    ///   (the first of each code, and how many more).
    public func rejectedSheet(openRecords open: SharedReads.OpenRecords) throws -> SheetContent {
        var rows = try notReconciled(ReportSchema.rejected) + open.listed.map {
            SheetRow([.text("\($0.path):\($0.line)"), .text($0.code), .text($0.reason), .date($0.firstSeen),
                      .integer(Int64(asOf - $0.firstSeen))])
        } + open.more.map {
            SheetRow([.text("... and \($0.count) more rejected \($0.code) records, not listed here"), .text($0.code), .empty, .empty, .empty])
        }
        if open.listed.isEmpty && open.more.isEmpty {
            rows += try noneRow(ReportSchema.rejected, "None open: no record read is rejected and unresolved, as of \(asOf)")
        }
        return SheetContent(key: "rejected", tables: [TableBlock(key: "rejected", columns: ReportSchema.rejected, rows: rows)])
    }
}
