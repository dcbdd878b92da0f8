import Foundation
import LedgerCore
import LedgerRead
import LedgerReport
import LedgerStore
import LedgerWrite

/// The ledger's estimates against what Apple pays: App Store Connect financial reports
/// (iap-formats.md section 4, the source of record) compared, by their totals, with the
/// production book's entries of the same days. The report is anonymous, so the comparison is
/// by fiscal period, currency and product (Apple's `Vendor Identifier`, for an in-app purchase
/// its product id). Nothing is posted: the differences are what finance trues up.
public struct TrueUp {
    public struct Line: Equatable, Encodable {
        public var start: Day
        public var end: Day
        /// The customer's currency, the ledger's entries' currency.
        public var currency: String
        public var productId: String
        /// Apple's `Title`, when the report has the product.
        public var title: String
        /// Units net of returns, of rows with proceeds (free units, promo codes, apart).
        public var appleUnits: Int64
        /// `appleUnits` apart: sold (rows `S`), and returned (rows `R`, as a positive count).
        public var appleSoldUnits: Int64 = 0
        public var appleReturnedUnits: Int64 = 0
        public var appleFreeUnits: Int64
        /// Nil where the ledger's side is on no line (one customer currency paid in two).
        public var ledgerUnits: Int64?
        /// `ledgerUnits` apart: sold, and returned (refunds in full, less those reversed).
        public var ledgerSoldUnits: Int64?
        public var ledgerReturnedUnits: Int64?
        /// Customer prices times units (tax included), in `currency`: Apple's and the ledger's gross.
        public var appleCustomerSalesMinor: Int64
        public var ledgerGrossMinor: Int64?
        /// The ledger's proceeds in the customer's currency, whatever Apple pays in (where it pays
        /// in another, the difference's exchange can be followed from it).
        public var ledgerProceedsCustomerMinor: Int64?
        /// The currency Apple pays the proceeds in (`Partner Share Currency`).
        public var paidIn: String
        public var appleProceedsMinor: Int64
        /// The ledger's proceeds in `paidIn`: its own amounts when Apple pays in the customer's
        /// currency, its reporting amounts when Apple pays in the reporting currency; nil when
        /// it holds none in that currency.
        public var ledgerProceedsMinor: Int64?
        /// Apple's proceeds less the ledger's: what the books need to agree with Apple.
        public var differenceMinor: Int64?
        public var note: String
    }

    /// One report file read: its path, region's periods and rows.
    public struct Source: Equatable, Encodable {
        public var path: String
        public var periods: [String]
        public var rows: Int
        public var totalAmount: String
        public var currencies: [String]
    }

    public var lines: [Line]
    public var sources: [Source]
    public var reportingCurrency: String
    /// Said before the lines (a period the ledger has no entries for).
    public var warnings: [String] = []

    /// Totals per period and currency paid in.
    public struct Total: Equatable, Encodable {
        public var start: Day
        public var end: Day
        public var paidIn: String
        public var appleProceedsMinor: Int64
        public var ledgerProceedsMinor: Int64?
        public var differenceMinor: Int64?
    }

    public var totals: [Total] {
        var out: [Total] = []
        for line in lines {
            if let i = out.firstIndex(where: { $0.start == line.start && $0.end == line.end && $0.paidIn == line.paidIn }) {
                out[i].appleProceedsMinor += line.appleProceedsMinor
                out[i].ledgerProceedsMinor = Self.sum(out[i].ledgerProceedsMinor, line.ledgerProceedsMinor)
                out[i].differenceMinor = Self.sum(out[i].differenceMinor, line.differenceMinor)
            } else {
                out.append(Total(start: line.start, end: line.end, paidIn: line.paidIn, appleProceedsMinor: line.appleProceedsMinor,
                                 ledgerProceedsMinor: line.ledgerProceedsMinor, differenceMinor: line.differenceMinor))
            }
        }
        return out.sorted { ($0.start, $0.end, $0.paidIn) < ($1.start, $1.end, $1.paidIn) }
    }

    /// Nil when either is (a line not comparable leaves its total without one).
    static func sum(_ a: Int64?, _ b: Int64?) -> Int64? {
        guard let a, let b else { return nil }
        return a + b
    }

    /// Compares `reports` with the ledger: `ledger` gives the production book's proceeds of a
    /// period (`LedgerReader.proceeds`). The ledger's side of a period covers the currencies
    /// its reports name, so a region left out is not counted as missing from Apple's report.
    /// `waiting` counts the production sales of a period, in the customer currencies its
    /// reports cover (or of no currency known yet), that still wait (for a rule, for their
    /// order): in none of the ledger's figures yet, said as a warning (a finance review: the
    /// comparison said nothing of them, and a difference booked for one would count it twice
    /// once it posts).
    public static func compare(reports: [FinancialReport], reportingCurrency: String,
                               waiting: (Day, Day, Set<String>) throws -> Int = { _, _, _ in 0 },
                               ledger: (Day, Day) throws -> [ProceedsRow]) throws -> TrueUp {
        try checkTogether(reports)
        struct Key: Hashable { var start: Day; var end: Day; var currency: String; var product: String }
        var apple: [Key: [FinancialReport.Row]] = [:]
        var periods: [ClosedDays: Set<String>] = [:]   // customer currencies each period covers
        var paidInFor: [ClosedDays: [String: Set<String>]] = [:]
        for report in reports {
            for row in report.rows {
                let period = ClosedDays(start: row.start, end: row.end)
                apple[Key(start: row.start, end: row.end, currency: row.customerCurrency, product: row.vendorIdentifier), default: []].append(row)
                periods[period, default: []].insert(row.customerCurrency)
                paidInFor[period, default: [:]][row.customerCurrency, default: []].insert(row.partnerShareCurrency)
            }
        }
        var lines: [Line] = []
        var warnings: [String] = []
        for period in periods.keys.sorted() {
            let covered = periods[period]!
            let all = try ledger(period.start, period.end)
            if all.isEmpty {
                warnings.append("the ledger has no production entries dated \(period): another workspace, or nights not run for those days?")
            }
            let unposted = try waiting(period.start, period.end, covered)
            if unposted > 0 {
                warnings.append("\(unposted) production sale\(unposted == 1 ? "" : "s") dated \(period) still wait\(unposted == 1 ? "s" : "") in \(covered.sorted().joined(separator: ", ")) or a currency not known yet (for a rule, or for \(unposted == 1 ? "its" : "their") order to name a storefront): in none of the ledger's figures here; each posts once it can (late, in the first open month, if its month is closed by then), so true up what differs once \(unposted == 1 ? "it has" : "they have") posted, or \(unposted == 1 ? "it counts" : "they count") twice (`iapledger findings --code MISSING_RULE` and `--code ORDER_WAIT` list them)")
            }
            var ledgerRows: [Key: ProceedsRow] = [:]
            for r in all where covered.contains(r.currency) {
                ledgerRows[Key(start: period.start, end: period.end, currency: r.currency, product: r.productId)] = r
            }
            let keys = Set(apple.keys.filter { $0.start == period.start && $0.end == period.end }).union(ledgerRows.keys)
            for key in keys.sorted(by: { ($0.currency, $0.product) < ($1.currency, $1.product) }) {
                let rows = apple[key] ?? []
                let l = ledgerRows[key]
                // Apple's rows by the currency it pays them in (one, but where two regions pay
                // the same customer currency differently); for a product the report lacks, the
                // currency Apple pays this customer currency's other products in.
                let paid = Set(rows.map(\.partnerShareCurrency)).sorted()
                let periodPaid = paidInFor[period]?[key.currency] ?? []
                let groups: [(String, [FinancialReport.Row])] = paid.isEmpty
                    ? [(periodPaid.count == 1 ? periodPaid.first! : key.currency, [])]
                    : paid.map { c in (c, rows.filter { $0.partnerShareCurrency == c }) }
                for (paidIn, rows) in groups {
                    // Sums taken in 128 bits, refused if they do not fit 64 (amounts no report has).
                    func sum(_ values: [Int128]) throws -> Int64 { try FinancialReport.exactSum(values, path: "the reports' \(key.currency) \(key.product)") }
                    var line = Line(
                        start: key.start, end: key.end, currency: key.currency, productId: key.product,
                        title: rows.first?.title ?? "",
                        appleUnits: try sum(rows.filter { $0.partnerShareMinor != 0 }.map { Int128($0.quantity) }),
                        appleSoldUnits: try sum(rows.filter { $0.partnerShareMinor != 0 && $0.quantity > 0 }.map { Int128($0.quantity) }),
                        appleReturnedUnits: try sum(rows.filter { $0.partnerShareMinor != 0 && $0.quantity < 0 }.map { -Int128($0.quantity) }),
                        appleFreeUnits: try sum(rows.filter { $0.partnerShareMinor == 0 }.map { Int128($0.quantity) }),
                        ledgerUnits: nil,
                        // A return's customer price is negative with a negative quantity: its units
                        // take the price off.
                        appleCustomerSalesMinor: try sum(rows.map { Int128($0.quantity) * Int128($0.customerPriceMinor.magnitude) }),
                        ledgerGrossMinor: nil,
                        paidIn: paidIn,
                        appleProceedsMinor: try sum(rows.map { Int128($0.extendedPartnerShareMinor) }),
                        ledgerProceedsMinor: nil, differenceMinor: nil, note: "")
                    var notes: [String] = []
                    if groups.count > 1 {
                        // The ledger cannot tell which region sold what: its side is on no line.
                        let units = l?.units ?? 0
                        notes.append("Apple pays these sales in \(paid.joined(separator: " and ")), one line each: not comparable; the ledger has "
                                     + "\(units) unit\(units == 1 ? "" : "s"), \(money(l?.proceedsMinor ?? 0, key.currency)) \(key.currency) proceeds")
                    } else {
                        line.ledgerUnits = l?.units ?? 0
                        line.ledgerSoldUnits = l?.soldUnits ?? 0
                        line.ledgerReturnedUnits = l?.returnedUnits ?? 0
                        line.ledgerGrossMinor = l?.grossMinor ?? 0
                        line.ledgerProceedsCustomerMinor = l?.proceedsMinor ?? 0
                        if paidIn == key.currency {
                            line.ledgerProceedsMinor = l?.proceedsMinor ?? 0
                        } else if paidIn == reportingCurrency {
                            line.ledgerProceedsMinor = l?.proceedsReportingMinor ?? 0
                            notes.append("paid in \(paidIn): the ledger's \(paidIn) proceeds, at its monthly rates")
                        } else {
                            notes.append("paid in \(paidIn), neither \(key.currency) nor \(reportingCurrency): not comparable")
                        }
                        // Sales and returns apart: a sale Apple lacks and a return it counts in
                        // another month net to no unit, and a net note sent finance to look for
                        // a missing sale where a return's month differed.
                        if !rows.isEmpty, let l {
                            func said(_ d: Int64, _ what: String) -> String {
                                "Apple counts \(abs(d)) unit\(abs(d) == 1 ? "" : "s") \(what) \(d > 0 ? "more" : "fewer") than the ledger"
                            }
                            if line.appleSoldUnits != l.soldUnits { notes.append(said(line.appleSoldUnits - l.soldUnits, "sold")) }
                            if line.appleReturnedUnits != l.returnedUnits { notes.append(said(line.appleReturnedUnits - l.returnedUnits, "returned")) }
                        }
                    }
                    line.differenceMinor = line.ledgerProceedsMinor.map { line.appleProceedsMinor - $0 }
                    if rows.isEmpty { notes.insert("not in Apple's report", at: 0) }
                    if l == nil { notes.insert("not in the ledger for these days (never received, or dated just outside them)", at: 0) }
                    line.note = notes.joined(separator: "; ")
                    lines.append(line)
                }
            }
        }
        // The totals' sums fit too (`totals` adds them in 64 bits).
        for paidIn in Set(lines.map(\.paidIn)) {
            let these = lines.filter { $0.paidIn == paidIn }
            for values in [these.map(\.appleProceedsMinor), these.compactMap(\.ledgerProceedsMinor), these.compactMap(\.differenceMinor)] {
                _ = try FinancialReport.exactSum(values.map { Int128($0) }, path: "the reports' \(paidIn) total")
            }
        }
        let sources = reports.map {
            Source(path: $0.path, periods: $0.periods.map(\.description), rows: $0.rows.count, totalAmount: $0.totalAmount.description,
                   currencies: Array(Set($0.rows.map(\.partnerShareCurrency))).sorted())
        }
        return TrueUp(lines: lines, sources: sources, reportingCurrency: reportingCurrency, warnings: warnings)
    }

    /// Reports that cannot be compared together: the same report given twice (under any name:
    /// a second download), or reports whose periods overlap without being the same for a
    /// customer currency (the ledger's sales of the overlap would count in both). Either
    /// would give differences that are not there.
    static func checkTogether(_ reports: [FinancialReport]) throws {
        var bySHA: [String: String] = [:], byRows: [String: String] = [:]
        for r in reports {
            if !r.sha256.isEmpty, let first = bySHA[r.sha256] {
                throw ReadError.file(r.path, "the same report as \(first) (the same bytes): given twice, it would count Apple's sales twice")
            }
            bySHA[r.sha256] = r.path
            // The same rows saved again (other line ends, a BOM, columns in another order).
            let rows = r.rows.map { x in
                [x.start.description, x.end.description, x.vendorIdentifier, String(x.quantity), String(x.partnerShareMinor),
                 String(x.extendedPartnerShareMinor), x.partnerShareCurrency, x.isReturn ? "R" : "S", x.countryOfSale, x.promoCode,
                 String(x.customerPriceMinor), x.customerCurrency].joined(separator: "\t")
            }.sorted().joined(separator: "\n")
            if !r.rows.isEmpty, let first = byRows[rows] {
                throw ReadError.file(r.path, "the same rows as \(first) (the same report saved again?): given twice, it would count Apple's sales twice")
            }
            byRows[rows] = r.path
        }
        var seen: [(period: ClosedDays, currency: String, path: String)] = []
        for r in reports {
            for period in r.periods {
                for currency in Set(r.rows.filter { $0.start == period.start && $0.end == period.end }.map(\.customerCurrency)).sorted() {
                    if let other = seen.first(where: { $0.currency == currency && $0.period != period
                                                       && !($0.period.end < period.start || period.end < $0.period.start) }) {
                        throw ReadError.file(r.path, "its period \(period) overlaps \(other.period) of \(other.path) for \(currency): the ledger's sales of the days both cover would count twice")
                    }
                    seen.append((period, currency, r.path))
                }
            }
        }
    }

    // MARK: Output

    static func money(_ minor: Int64?, _ currency: String) -> String {
        minor.map { Currency.format(minor: $0, currency: currency) } ?? ""
    }

    public func render(format: String) -> String {
        switch format {
        case "json":
            struct Out: Encodable { var reports: [Source]; var lines: [Line]; var totals: [Total] }
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            enc.keyEncodingStrategy = .convertToSnakeCase
            return String(decoding: (try? enc.encode(Out(reports: sources, lines: lines, totals: totals))) ?? Data("{}".utf8), as: UTF8.self) + "\n"
        case "csv":
            var out = "start,end,currency,product_id,apple_units,apple_free_units,ledger_units,apple_customer_sales,ledger_gross,paid_in,apple_proceeds,ledger_proceeds,difference,note,apple_sold_units,apple_returned_units,ledger_sold_units,ledger_returned_units,ledger_proceeds_customer_currency\n"
            for l in lines {
                // Product ids, currencies and the note are text (`text`: none runs as a formula in
                // a spreadsheet); the counts and amounts are numbers, a negative one as it is.
                func text(_ s: String) -> String { CSV.escapeText(s) }
                func count(_ n: Int64?) -> String { n.map(String.init) ?? "" }
                func money(_ minor: Int64?, _ currency: String) -> String { CSV.escape(Self.money(minor, currency)) }
                // (The columns added since come last: a reader by position reads the others as before.)
                let units: [String] = [count(l.appleUnits), count(l.appleFreeUnits), count(l.ledgerUnits)]
                let customer: [String] = [money(l.appleCustomerSalesMinor, l.currency), money(l.ledgerGrossMinor, l.currency)]
                let paid: [String] = [text(l.paidIn), money(l.appleProceedsMinor, l.paidIn), money(l.ledgerProceedsMinor, l.paidIn),
                                      money(l.differenceMinor, l.paidIn), text(l.note)]
                let added: [String] = [count(l.appleSoldUnits), count(l.appleReturnedUnits), count(l.ledgerSoldUnits),
                                       count(l.ledgerReturnedUnits), money(l.ledgerProceedsCustomerMinor, l.currency)]
                let fields: [String] = [l.start.description, l.end.description, text(l.currency), text(l.productId)] + units + customer + paid + added
                out += fields.joined(separator: ",") + "\n"
            }
            return out
        default:
            var out = ""
            for s in sources {
                out += TerminalText.visible(s.rows == 0 ? "read \(s.path): no rows (Total_Amount \(s.totalAmount))"
                    : "read \(s.path): \(s.periods.joined(separator: ", ")), \(s.rows) row\(s.rows == 1 ? "" : "s"), Total_Amount \(s.totalAmount) \(s.currencies.joined(separator: "/"))") + "\n"
            }
            guard !lines.isEmpty else { return out + "No rows in these reports and no entries in the ledger for their currencies and days.\n" }
            let header = ["Period", "Currency", "Product", "Sold/returned (Apple)", "Sold/returned (ledger)", "Paid in", "Proceeds (Apple)",
                          "Proceeds (ledger)", "Difference", "Note"]
            var table: [[String]] = lines.map { l in
                ["\(l.start)..\(l.end)", l.currency, l.productId,
                 "\(l.appleSoldUnits)/\(l.appleReturnedUnits)" + (l.appleFreeUnits != 0 ? " +\(l.appleFreeUnits) free" : ""),
                 l.ledgerSoldUnits.map { "\($0)/\(l.ledgerReturnedUnits ?? 0)" } ?? "",
                 l.paidIn, Self.money(l.appleProceedsMinor, l.paidIn), Self.money(l.ledgerProceedsMinor, l.paidIn),
                 Self.money(l.differenceMinor, l.paidIn), l.note]
            }
            for t in totals {
                table.append(["\(t.start)..\(t.end)", "", "total paid in \(t.paidIn)", "", "", t.paidIn,
                              Self.money(t.appleProceedsMinor, t.paidIn), Self.money(t.ledgerProceedsMinor, t.paidIn),
                              Self.money(t.differenceMinor, t.paidIn), t.ledgerProceedsMinor == nil ? "some lines not comparable" : ""])
            }
            return out + TextTable.render(table, header: header, rightAligned: [3, 4, 6, 7, 8])
                + "Difference: Apple's proceeds less the ledger's, in the currency Apple pays in (positive: Apple pays more than the ledger estimates).\n"
        }
    }

    /// The comparison as a workbook: the lines with a total per period and currency paid in,
    /// then every row of Apple's reports with its file and line.
    public func workbook(created: Day, reports: [FinancialReport]) -> WorkbookModel {
        func decimals(_ c: String) -> Int { Currency.exponent(c) ?? 2 }
        func money(_ minor: Int64?, _ c: String) -> Cell { minor.map { .money(minor: $0, decimals: decimals(c)) } ?? .empty }
        // Led by what a line is (product, customer currency, the currency Apple pays in), which
        // a sheet printed several pages wide repeats on each (a finance review: led by the
        // period, the same on every line, the pages of proceeds named no product, and the
        // totals no label or currency).
        let columns = [
            Column("Product", width: 34), Column("Currency", width: 9), Column("Paid in", width: 8),
            Column("Start", width: 11, kind: .date), Column("End", width: 11, kind: .date),
            Column("Title", width: 24), Column("Units (Apple)", width: 13, kind: .integer),
            Column("Sold (Apple)", width: 10, kind: .integer), Column("Returned (Apple)", width: 10, kind: .integer),
            Column("Free units (Apple)", width: 13, kind: .integer), Column("Units (ledger)", width: 13, kind: .integer),
            Column("Sold (ledger)", width: 10, kind: .integer), Column("Returned (ledger)", width: 10, kind: .integer),
            Column("Customer sales (Apple, customer currency)", width: 18, kind: .money),
            Column("Gross (ledger, customer currency)", width: 18, kind: .money),
            Column("Proceeds (ledger, customer currency)", width: 18, kind: .money),
            Column("Proceeds (Apple, paid in)", width: 16, kind: .money),
            Column("Proceeds (ledger, paid in)", width: 16, kind: .money), Column("Difference (paid in)", width: 14, kind: .money),
            Column("Note", width: 60),
        ]
        var rows = lines.map { l in
            SheetRow([.text(l.productId), .text(l.currency), .text(l.paidIn), .date(l.start), .date(l.end), .text(l.title), .integer(l.appleUnits),
                      .integer(l.appleSoldUnits), .integer(l.appleReturnedUnits),
                      .integer(l.appleFreeUnits), l.ledgerUnits.map(Cell.integer) ?? .empty,
                      l.ledgerSoldUnits.map(Cell.integer) ?? .empty, l.ledgerReturnedUnits.map(Cell.integer) ?? .empty,
                      money(l.appleCustomerSalesMinor, l.currency), money(l.ledgerGrossMinor, l.currency),
                      money(l.ledgerProceedsCustomerMinor, l.currency), money(l.appleProceedsMinor, l.paidIn),
                      money(l.ledgerProceedsMinor, l.paidIn), money(l.differenceMinor, l.paidIn), .text(l.note)])
        }
        for t in totals {
            // (A cell for each column: Product, Currency, Paid in, Start, End, Title, the ten
            // figures up to the ledger's proceeds in the customer currency, then the three paid in.)
            // Its label names its period, which a page after the first does not repeat (a
            // finance re-check: two periods' totals of one currency read alike).
            rows.append(SheetRow([.text("Total paid in \(t.paidIn), \(t.start)..\(t.end)"), .empty, .text(t.paidIn), .date(t.start), .date(t.end), .empty,
                                  .empty, .empty, .empty, .empty, .empty, .empty, .empty, .empty, .empty, .empty,
                                  money(t.appleProceedsMinor, t.paidIn), money(t.ledgerProceedsMinor, t.paidIn),
                                  money(t.differenceMinor, t.paidIn),
                                  .text(t.ledgerProceedsMinor == nil ? "some lines not comparable: see them above" : "")], style: .total))
        }
        precondition(rows.allSatisfy { $0.cells.count == columns.count }, "a True-up row gives a cell for each column")
        let rowColumns = [
            Column("File", width: 40), Column("Line", width: 6, kind: .integer), Column("Start", width: 11, kind: .date),
            Column("End", width: 11, kind: .date), Column("Vendor Identifier", width: 34), Column("Title", width: 24),
            Column("Sales or Return", width: 8), Column("Quantity", width: 9, kind: .integer),
            Column("Partner Share", width: 14, kind: .money), Column("Extended Partner Share", width: 16, kind: .money),
            Column("Partner Share Currency", width: 9), Column("Country Of Sale", width: 8), Column("Promo Code", width: 8),
            Column("Customer Price", width: 14, kind: .money), Column("Customer Currency", width: 9),
        ]
        var detail: [SheetRow] = []
        for report in reports {
            for r in report.rows {
                detail.append(SheetRow([.text(report.path), .integer(Int64(r.line)), .date(r.start), .date(r.end), .text(r.vendorIdentifier),
                                        .text(r.title), .text(r.isReturn ? "R" : "S"), .integer(r.quantity),
                                        money(r.partnerShareMinor, r.partnerShareCurrency), money(r.extendedPartnerShareMinor, r.partnerShareCurrency),
                                        .text(r.partnerShareCurrency), .text(r.countryOfSale), .text(r.promoCode),
                                        money(r.customerPriceMinor, r.customerCurrency), .text(r.customerCurrency)]))
            }
        }
        let periods = Set(lines.map { "\($0.start)..\($0.end)" }).sorted().joined(separator: ", ")
        return WorkbookModel(title: "True-up against App Store Connect financial reports", subject: "iapledger true-up \(periods)", created: created, sheets: [
            SheetModel(name: "True-up", title: "Ledger estimates against Apple's financial reports (\(periods))", subtitle: [
                "Apple's report is the source of record. Each line compares one period, customer currency and product: Apple's units and proceeds (Extended Partner Share) against the production book's entries whose original date is in the period (sales, less refunds, plus reversals).",
                "Difference = Apple's proceeds less the ledger's, in the currency Apple pays in; where Apple pays in \(reportingCurrency), the ledger's \(reportingCurrency) proceeds at its monthly rates. Apple's report days need not be the ledger's UTC days, so sales near a period's edge may fall on the other side. "
                    + "Reports read: \(sources.count), each checked against its footer (the Reports read sheet); every row with its file and line is on the Apple report rows sheet.",
            ] + warnings.map { "Warning: \($0)" }, tables: [TableBlock(columns: columns, rows: rows)]),
            // On a sheet of their own: below the lines, they shared the lines' columns (a wide
            // SHA-256 and file name made the comparison print at a third of its size).
            SheetModel(name: "Reports read", title: "The financial reports compared", subtitle: [
                "Each file as read, checked against its footer: Total_Amount is Apple's sum of the Extended Partner Share, in the currency it pays in.",
            ], tables: [TableBlock(columns: [
                Column("File", width: 40), Column("Period", width: 24), Column("Rows", width: 8, kind: .integer),
                Column("Total_Amount", width: 16, kind: .money), Column("Paid in", width: 8), Column("SHA-256", width: 66),
            ], rows: zip(sources, reports).map { source, report in
                // One currency paid in (a report pays in one): its amount in that currency's decimals.
                let minor = source.currencies.count == 1 ? FinancialReport.minorUnits(report.totalAmount, source.currencies[0]) : nil
                let total: Cell = minor.map { money($0, source.currencies[0]) } ?? .text(source.totalAmount)
                return SheetRow([.text(source.path), .text(source.periods.joined(separator: ", ")), .integer(Int64(source.rows)),
                                 total, .text(source.currencies.joined(separator: "/")), .text(report.sha256)])
            })]),
            SheetModel(name: "Apple report rows", title: "Every row of the financial reports read", subtitle: [
                "As Apple wrote them, one row per line of each file; amounts in their currency's decimals (Apple prints JPY as 119.00: that is 119 yen). Returns have a negative quantity.",
            ], tables: [TableBlock(columns: rowColumns, rows: detail)]),
        ])
    }

    /// Writes `workbook` to `url` (aside, then renamed), dated by the last day compared so the
    /// same reports and ledger give the same bytes.
    public func writeWorkbook(to url: URL, reports: [FinancialReport], paper: PaperSize = .a4) throws {
        let last = lines.map(\.end).max() ?? reports.flatMap(\.rows).map(\.end).max() ?? Day(year: 2000, month: 1, day: 1)
        var model = workbook(created: last, reports: reports)
        model.paper = paper
        try XLSXWriter.write(model, to: url)
    }
}
