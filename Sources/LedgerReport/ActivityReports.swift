import LedgerCore
import LedgerStore

/// The finance sheets built from entry sums: Summary (by month, with charts), Revenue by
/// Region, Revenue by Product, and Refunds. Every figure is a sum of stored entries, so the
/// sheets tie out to the Journal and the Trial Balance.
extension FinanceReport {
    /// Reporting-currency sums of one group: sales, and refunds net of reversals.
    struct Sums {
        var units: Int64 = 0
        var sales: Int64 = 0
        var gross: Int64 = 0, tax: Int64 = 0, net: Int64 = 0, commission: Int64 = 0, proceeds: Int64 = 0
        var refunds: Int64 = 0, refundProceeds: Int64 = 0, refundCount: Int64 = 0
        /// Commission the store returned on refunds (reversals deducted).
        var refundCommission: Int64 = 0
        // Transaction-currency figures (meaningful within one currency only).
        var grossTx: Int64 = 0, taxTx: Int64 = 0, netTx: Int64 = 0, commissionTx: Int64 = 0, proceedsTx: Int64 = 0, refundsTx: Int64 = 0
        var refundCommissionTx: Int64 = 0

        mutating func add(_ r: ActivityRow) {
            switch r.kind {
            case .sale:
                units += r.units; sales += r.entries
                gross += r.grossReportingMinor; tax += r.grossReportingMinor - r.netReportingMinor; net += r.netReportingMinor
                commission += r.commissionReportingMinor; proceeds += r.proceedsReportingMinor
                grossTx += r.grossMinor; taxTx += r.taxMinor; netTx += r.netMinor; commissionTx += r.commissionMinor; proceedsTx += r.proceedsMinor
            case .refund:
                refunds += r.netReportingMinor; refundProceeds += r.proceedsReportingMinor; refundCount += r.entries; refundsTx += r.netMinor
                refundCommission += r.commissionReportingMinor; refundCommissionTx += r.commissionMinor
            case .refundReversal:
                refunds -= r.netReportingMinor; refundProceeds -= r.proceedsReportingMinor; refundCount -= r.entries; refundsTx -= r.netMinor
                refundCommission -= r.commissionReportingMinor; refundCommissionTx -= r.commissionMinor
            }
        }
        /// Net revenue after refunds: what the revenue accounts hold.
        var netAfterRefunds: Int64 { net - refunds }
        var proceedsAfterRefunds: Int64 { proceeds - refundProceeds }
    }

    func activity() throws -> [ActivityRow] { try reader.activity(book: book, through: asOf) }

    /// `activity`: the entry sums, queried once per workbook and shared by the sheets below.
    public func summarySheet(activity rows: [ActivityRow]? = nil) throws -> SheetContent {
        let rows = try rows ?? activity()
        var byMonth: [Month: Sums] = [:], byStorefront: [String: Sums] = [:], total = Sums()
        for r in rows { byMonth[r.month, default: Sums()].add(r); byStorefront[r.storefront, default: Sums()].add(r); total.add(r) }
        func money(_ v: Int64) -> Cell { .money(minor: v, decimals: reportingDecimals) }
        func line(_ label: Cell, _ s: Sums, style: RowStyle = .body) -> SheetRow {
            SheetRow([label, .integer(s.units), money(s.gross), money(s.tax), money(s.net), money(s.commission), money(s.proceeds),
                      money(s.refunds), money(s.refundCommission), money(s.netAfterRefunds), money(s.proceedsAfterRefunds)], style: style)
        }
        // Every month from the first to the as-of date's, a month without entries as a row of
        // zeros (it was left out, a gap a reader could take for a row lost).
        var months: [Month] = []
        if let first = byMonth.keys.min(), let last = [byMonth.keys.max()!, asOf.month].max() {
            var m = first
            while m <= last { months.append(m); m = m.next }
        }
        var monthRows = months.map { line(.text($0.description), byMonth[$0] ?? Sums()) }
        monthRows.append(line(.text("Total"), total, style: .total))
        var regionRows = byStorefront.keys.sorted { (byStorefront[$0]!.proceedsAfterRefunds, $1) > (byStorefront[$1]!.proceedsAfterRefunds, $0) }.map {
            SheetRow([.text($0), .integer(byStorefront[$0]!.units), money(byStorefront[$0]!.netAfterRefunds), money(byStorefront[$0]!.proceedsAfterRefunds)])
        }
        regionRows.append(SheetRow([.text("Total"), .integer(total.units), money(total.netAfterRefunds), money(total.proceedsAfterRefunds)], style: .total))
        let r = reportingCurrency
        let chartPrefix = book == .sandbox ? "Sandbox (test purchases, not revenue): " : ""
        // What these figures leave out. They are the entries dated on or before the as-of date as
        // the ledger holds them now (a month-end set written on a later night includes what that
        // night posted of the month), so: this book's sales dated on or before it that still wait
        // for a rule, and the records still waiting for verification (not yet known to be of any
        // book or date). As the figures are, not as the night of that date knew it: a sale that
        // waited then and is posted now is in the figures.
        let salesWaiting = try reader.waitingSaleCount(book: book.rawValue, datedThrough: asOf)
        let recordsWaiting = try reader.pendingRecordCountNow()
        let late = try reader.lateEntries(book: book, asOf: asOf)
        let free = try reader.freeTransactionCount(book: book.rawValue, datedThrough: asOf)
        // Signed records under roots other than Apple's: read for a layout that shows them (the
        // shipped finance layout; not the sandbox one), and for the production book whatever its
        // layout, whose warning is then added to the notes.
        let showsRoots = layout.sheet("summary").map { ([$0.title] + $0.subtitle).contains { $0.contains("{signed_other_roots}") } } ?? false
        let otherRoots = showsRoots || book == .production
            ? try shared.signedVerifiedToOtherRoots(throughRun: runId, reader).filter { $0.book == book }.map { ($0.root, $0.records) } : []
        // Posted sales the rules now book otherwise (a correction to book), open on the date.
        let rulesChanged = try shared.findingsOpen(on: asOf, book: book.rawValue, limit: findingsLimit, reader).counts["RULES_CHANGED"] ?? 0
        var content = SheetContent(
            key: "summary",
            tables: [
                TableBlock(key: "by_month", columns: ReportSchema.summaryByMonth, rows: monthRows),
                TableBlock(key: "by_region", columns: ReportSchema.summaryByRegion, rows: regionRows),
            ],
            charts: [
                // The sandbox book's charts say so: one pasted elsewhere must not pass for revenue.
                ChartSpec(title: "\(chartPrefix)Net sales and refunds by month (\(r))", kind: .column, table: "by_month", categoryColumn: "month",
                          valueColumns: ["net_reporting", "refunds_reporting"], yAxisTitle: r),
                ChartSpec(title: "\(chartPrefix)Proceeds after refunds by region (\(r))", kind: .bar, table: "by_region", categoryColumn: "storefront",
                          valueColumns: ["proceeds_after_refunds_reporting"], yAxisTitle: r),
            ],
            values: ["sales_waiting": String(salesWaiting), "records_waiting": String(recordsWaiting),
                     "commission_returned": Self.grouped(Currency.format(minor: total.refundCommission, currency: reportingCurrency)),
                     "commission_after_refunds": Self.grouped(Currency.format(minor: total.commission - total.refundCommission, currency: reportingCurrency)),
                     "late_entries": Self.lateEntriesText(late, asOf: asOf, currency: reportingCurrency),
                     "free_transactions": String(free),
                     "signed_other_roots": Self.otherRootsText(otherRoots, production: book == .production),
                     "rules_changed": rulesChanged == 0 ? "none" : "\(rulesChanged) (Run Info lists them, `iapledger findings --code RULES_CHANGED` every one)"])
        if book == .production && !otherRoots.isEmpty {
            content.warnings = [("signed_other_roots", Self.otherRootsLine + Self.otherRootsText(otherRoots, production: true) + ".")]
        }
        return content
    }

    /// The Summary's line on signed records under other roots, as the shipped layout has it.
    static let otherRootsLine = "Signed records verified to a root other than Apple's (trusted_roots in iapledger.toml; Run Info lists the roots): "

    /// The signed records of the book's environment verified to a root other than Apple's,
    /// for the Summary: "none", or how many under which root, and, for production data, that
    /// Apple signs it under its own root only (the night's summary said it; the workbook
    /// finance signs did not).
    static func otherRootsText(_ roots: [(root: String, records: Int)], production: Bool) -> String {
        guard !roots.isEmpty else { return "none" }
        let listed = roots.map { "\($0.records) record\($0.records == 1 ? "" : "s") under \($0.root)" }.joined(separator: ", ")
        return production
            ? "WARNING: \(listed), saying they are production data, which Apple signs under Apple Root CA - G3 only: not Apple's unless that root is; take a test root out of trusted_roots once testing is done"
            : "\(listed) (test data)"
    }

    /// "2026-11 holds 45 sales and 4 refunds of earlier months (net sales 150.00 USD, refunds
    /// 26.55 USD: net after refunds 123.45 USD)"; the sales and the refunds each said (a net of
    /// the two alone hid how much moved in from closed months: a sale of 0.99 and the refund of
    /// another of 0.97 read "net 0.02");
    /// 3 sales dated on or before 2026-10-31 ... are in later months' figures (...)", or "none".
    static func lateEntriesText(_ late: LateEntries, asOf: Day, currency: String) -> String {
        func amount(_ v: Int64) -> String { grouped(Currency.format(minor: v, currency: currency)) + " " + currency }
        func entries(_ sales: Int, _ refunds: Int, _ reversals: Int) -> String {
            let parts = [(sales, "sale", "sales"), (refunds, "refund", "refunds"), (reversals, "refund reversal", "refund reversals")]
                .filter { $0.0 > 0 }.map { "\($0.0) \($0.0 == 1 ? $0.1 : $0.2)" }
            return parts.count <= 1 ? parts.joined() : parts.dropLast().joined(separator: ", ") + " and " + parts.last!
        }
        func sums(_ sales: Int, _ refunds: Int, _ reversals: Int, salesNet: Int64, netAfterRefunds: Int64) -> String {
            let refunded = salesNet - netAfterRefunds
            switch (sales > 0, refunds + reversals > 0) {
            case (true, true): return "net sales \(amount(salesNet)), refunds \(amount(refunded)): net after refunds \(amount(netAfterRefunds))"
            case (true, false): return "net sales \(amount(salesNet))"
            default: return "refunds \(amount(refunded)): net after refunds \(amount(netAfterRefunds))"
            }
        }
        var parts = late.byMonth.map {
            "\($0.month) holds \(entries($0.sales, $0.refunds, $0.reversals)) of earlier months (\(sums($0.sales, $0.refunds, $0.reversals, salesNet: $0.salesNetMinor, netAfterRefunds: $0.netAfterRefundsMinor)))"
        }
        let p = late.postedLater
        let moved = p.sales + p.refunds + p.reversals
        if moved > 0 {
            parts.append("\(entries(p.sales, p.refunds, p.reversals)) dated on or before \(asOf) \(moved == 1 ? "was" : "were") posted after the month was closed (arrived late, or waited for a rule or their order) and \(moved == 1 ? "is" : "are") in later months' figures, not these (\(sums(p.sales, p.refunds, p.reversals, salesNet: p.salesNetMinor, netAfterRefunds: p.netAfterRefundsMinor)))")
        }
        return parts.isEmpty ? "none" : parts.joined(separator: "; ")
    }

    /// An amount's text with its thousands grouped, as in the cells (`-1,234,567.89`).
    static func grouped(_ amount: String) -> String {
        let negative = amount.hasPrefix("-")
        let digits = negative ? amount.dropFirst() : Substring(amount)
        let whole = digits.prefix { $0 != "." }, rest = digits.dropFirst(whole.count)
        var out = ""
        for (i, c) in whole.enumerated() {
            if i > 0 && (whole.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (negative ? "-" : "") + out + rest
    }

    public func revenueByRegionSheet(activity rows: [ActivityRow]? = nil) throws -> SheetContent {
        var groups: [String: (storefront: String, month: Month, currency: String, sums: Sums)] = [:]
        var total = Sums()
        for r in try rows ?? activity() {
            let key = "\(r.storefront)|\(r.month)|\(r.currency)"
            groups[key, default: (r.storefront, r.month, r.currency, Sums())].sums.add(r)
            total.add(r)
        }
        func money(_ v: Int64, _ d: Int) -> Cell { .money(minor: v, decimals: d) }
        var rows = groups.values.sorted { ($0.storefront, $0.month, $0.currency) < ($1.storefront, $1.month, $1.currency) }.map { g -> SheetRow in
            let d = decimals(g.currency), s = g.sums, rd = reportingDecimals
            return SheetRow([.text(g.storefront), .text(g.month.description), .text(g.currency), .integer(s.units),
                             money(s.grossTx, d), money(s.taxTx, d), money(s.netTx, d), money(s.commissionTx, d), money(s.proceedsTx, d),
                             money(s.refundsTx, d), money(s.refundCommissionTx, d),
                             money(s.gross, rd), money(s.tax, rd), money(s.net, rd), money(s.commission, rd), money(s.proceeds, rd),
                             money(s.refunds, rd), money(s.refundCommission, rd)])
        }
        let rd = reportingDecimals
        // No currency beside the quantity sold (units of every currency; "USD" there read as
        // units in USD): the amounts it totals are the reporting currency's, as their titles say.
        rows.append(SheetRow([.text("Total"), .empty, .empty, .integer(total.units), .empty, .empty, .empty, .empty, .empty, .empty, .empty,
                              money(total.gross, rd), money(total.tax, rd), money(total.net, rd), money(total.commission, rd),
                              money(total.proceeds, rd), money(total.refunds, rd), money(total.refundCommission, rd)], style: .total))
        return SheetContent(key: "revenue_by_region", tables: [TableBlock(key: "by_region", columns: ReportSchema.revenueByRegion, rows: rows)])
    }

    public func revenueByProductSheet(activity rows: [ActivityRow]? = nil) throws -> SheetContent {
        var groups: [String: Sums] = [:]
        var total = Sums()
        for r in try rows ?? activity() { groups[r.productId, default: Sums()].add(r); total.add(r) }
        func money(_ v: Int64) -> Cell { .money(minor: v, decimals: reportingDecimals) }
        func line(_ label: String, _ s: Sums, style: RowStyle = .body) -> SheetRow {
            SheetRow([.text(label), .integer(s.sales), .integer(s.units), money(s.gross), money(s.tax), money(s.net), money(s.commission),
                      money(s.proceeds), .integer(s.refundCount), money(s.refunds), money(s.netAfterRefunds),
                      money(s.refundCommission), money(s.proceedsAfterRefunds)], style: style)
        }
        var rows = groups.keys.sorted().map { line($0, groups[$0]!) }
        rows.append(line("Total", total, style: .total))
        return SheetContent(key: "revenue_by_product", tables: [TableBlock(key: "by_product", columns: ReportSchema.revenueByProduct, rows: rows)])
    }

    public func refundsSheet() throws -> SheetContent {
        let list = try reader.refundEntries(book: book, through: asOf)
        var total: Int64 = 0, commissionTotal: Int64 = 0, proceedsTotal: Int64 = 0
        var rows = list.map { e -> SheetRow in
            let sign: Int64 = e.kind == "refund" ? 1 : -1
            total += sign * e.netReportingMinor
            commissionTotal += sign * e.commissionReportingMinor
            proceedsTotal += sign * e.proceedsReportingMinor
            let d = decimals(e.currency)
            // Led by what says which refund a row is (repeated on each printed page).
            return SheetRow([.integer(e.entryId), .date(e.date), .text(e.transactionId), .text(e.currency),
                             .date(e.originalDate), .text(e.late ? "late" : ""), .text(e.kind), .text(e.productId),
                             .text(e.storefront),
                             // A full refund (no percentage stored) is 100%; a reversal's is negative,
                             // as its amounts are (it showed positive beside them).
                             .money(minor: sign * (e.refundPercentage ?? 100_000), decimals: 3),
                             .money(minor: sign * e.netMinor, decimals: d), .money(minor: sign * e.commissionMinor, decimals: d),
                             .money(minor: sign * e.proceedsMinor, decimals: d),
                             .money(minor: sign * e.netReportingMinor, decimals: reportingDecimals),
                             .money(minor: sign * e.commissionReportingMinor, decimals: reportingDecimals),
                             .money(minor: sign * e.proceedsReportingMinor, decimals: reportingDecimals)])
        }
        if list.isEmpty {
            rows.append(SheetRow([.text("None: no refund or reversed refund posted through \(asOf)")] + Array(repeating: .empty, count: ReportSchema.refunds.count - 1)))
        }
        rows.append(SheetRow([.text("Total"), .empty, .empty, .empty, .empty, .text("\(list.filter(\.late).count) late"), .empty, .empty,
                              .empty, .empty, .empty, .empty, .empty, .money(minor: total, decimals: reportingDecimals),
                              .money(minor: commissionTotal, decimals: reportingDecimals), .money(minor: proceedsTotal, decimals: reportingDecimals)],
                             style: .total))
        return SheetContent(key: "refunds", tables: [TableBlock(key: "refunds", columns: ReportSchema.refunds, rows: rows)])
    }
}
