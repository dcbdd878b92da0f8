import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// The finance workbook ties out: the Trial Balance sheet equals `balance --format json`;
/// Summary totals equal the sum of Revenue by Region equal the sum of the Journal, in the
/// reporting currency; two runs on identical inputs give byte-identical workbooks.
final class WorkbookTieOutTests: XCTestCase {
    var dir: URL!
    var result: NightlyRun.Result!
    let asOf = Day(iso: "2026-11-21")!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-tieout-\(UUID().uuidString)")
        _ = try DemoWorkspace.create(at: dir, transactions: 800, seed: 11, asOf: asOf)
        result = try NightlyRun(workspace: Workspace(dir), asOf: asOf).run()
    }
    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    func minor(_ s: String) -> Int64 { XLSXReader.minor(s, decimals: 2) ?? 0 }

    /// Run Info's count of entries posted says it is both books', and each book's workbook
    /// gives its own: the production workbook of a night that posted only test sales said it
    /// posted them.
    func testRunInfoCountsEachBooksEntries() throws {
        func value(_ url: URL, _ label: String) throws -> Int? {
            try XLSXReader.sheets(url)["Run Info"]?.first { $0.first == label }.flatMap { Int($0[1]) }
        }
        let finance = try XCTUnwrap(result.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") })
        let sandbox = try XCTUnwrap(result.workbooks.first { $0.lastPathComponent.hasPrefix("sandbox-") })
        let counts = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path).read {
            try $0.rawRows("SELECT book, count(*) FROM entry WHERE run_id = \(result.runId) GROUP BY book ORDER BY book")
        }
        XCTAssertEqual(counts.map { $0[0] }, ["production", "sandbox"])
        let total = counts.map { Int($0[1])! }.reduce(0, +)
        for url in [finance, sandbox] { XCTAssertEqual(try value(url, "Entries posted this run (ledger, both books)"), total) }
        XCTAssertEqual(try value(finance, "  of them in this book (production)"), Int(counts[0][1]))
        XCTAssertEqual(try value(sandbox, "  of them in this book (sandbox)"), Int(counts[1][1]))
    }

    func testSheetsTieOut() throws {
        let book = try XLSXReader.sheets(result.workbooks[0])
        XCTAssertEqual(Array(book.keys).count, 7)
        // No signed data under a root of trusted_roots: the Summary says none.
        XCTAssertTrue(book["Summary"]!.contains { $0.first == "Signed records verified to a root other than Apple's (trusted_roots in iapledger.toml; Run Info lists the roots): none." })

        // Trial Balance sheet == balance --format json (production book).
        let rows = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path).read { try $0.trialBalance(book: .production) }
        let json = try JSONSerialization.jsonObject(with: Data(BalanceOutput.render(rows, format: "json", reportingCurrency: "USD").utf8)) as! [[String: Any]]
        let header = try XCTUnwrap(book["Trial Balance"]!.firstIndex { $0.first == "Book" })
        let tb = book["Trial Balance"]!.dropFirst(header + 1).prefix { $0.count > 1 }.filter { !$0[1].hasPrefix("Total") }
        XCTAssertEqual(tb.count, json.count)
        // Below, each account once in the reporting currency: its rows above added, the total zero,
        // and Revenue:InApp:Sales the Summary's net sales (credit, negative).
        let byAccount = Array(book["Trial Balance"]!.drop { $0.first?.hasPrefix("By account, all currencies added in USD") != true })
        XCTAssertEqual(byAccount.dropFirst().first, ["Book", "Account", "Currency", "Balance (USD)"])
        let accountRows = byAccount.dropFirst(2).filter { $0[1] != "Total" }
        XCTAssertEqual(accountRows.map { $0[1] }, Array(Set(tb.map { $0[1] })).sorted())
        for a in accountRows {
            XCTAssertEqual(minor(a[3]), tb.filter { $0[1] == a[1] }.compactMap { minor($0[6]) }.reduce(0, +), a[1])
        }
        XCTAssertEqual(byAccount.last.map { [$0[1], $0[3]] }, ["Total", "0"])
        let netSales = try XCTUnwrap(book["Summary"]!.first { $0.first == "Total" }.flatMap { minor($0[4]) })
        XCTAssertEqual(accountRows.first { $0[1] == LedgerAccount.sales }.flatMap { minor($0[3]) }, -netSales)
        for j in json {
            let line = try XCTUnwrap(tb.first { $0[1] == j["account"] as? String && $0[2] == j["currency"] as? String })
            let d = Currency.exponent(j["currency"] as! String)!
            XCTAssertEqual(XLSXReader.minor(line[3], decimals: d), Int64(j["debit_minor"] as! Int))
            XCTAssertEqual(XLSXReader.minor(line[4], decimals: d), Int64(j["credit_minor"] as! Int))
            XCTAssertEqual(XLSXReader.minor(line[5], decimals: d), Int64(j["balance_minor"] as! Int))
            XCTAssertEqual(minor(line[6]), Int64(j["reporting_balance_minor"] as! Int))
        }

        // The Journal lists the as-of month's postings; its sums (reporting) equal the
        // Summary's row for that month. Revenue accounts hold -(net sales) + refunds.
        try assertJournalTiesToSummaryMonth(book, month: "2026-11")
        // The October set (written again while October is open) ties out the same way.
        let october = try XCTUnwrap(result.workbooks.first { $0.lastPathComponent == "finance-2026-10-31.xlsx" })
        try assertJournalTiesToSummaryMonth(try XLSXReader.sheets(october), month: "2026-10")

        // Summary totals row.
        let summary = book["Summary"]!
        let total = try XCTUnwrap(summary.first { $0.first == "Total" })
        let (net, proceeds, refunds, netAfter) = (minor(total[4]), minor(total[6]), minor(total[7]), minor(total[9]))
        let (returned, proceedsAfter) = (minor(total[8]), minor(total[10]))
        XCTAssertTrue(refunds > 0, "the demo has refunds")
        // The month rows add up to the Total row.
        let monthRows = summary.filter { $0.first.map { $0.count == 7 && $0.hasPrefix("20") } ?? false }
        XCTAssertGreaterThan(monthRows.count, 1)
        for col in 1...10 {
            XCTAssertEqual(monthRows.map { minor($0[col]) }.reduce(0, +), minor(total[col]), "Summary column \(col)")
        }

        // Revenue by Region: the sum of its rows equals the Summary, and its Total row; with
        // the commission returned, proceeds after refunds are the Summary's (and the Trial
        // Balance's receivable).
        let region = book["Revenue by Region"]!.drop { $0.first != "Storefront" }.dropFirst()
        let body = region.filter { $0[0] != "Total" && $0.count >= 18 }
        let regionTotal = try XCTUnwrap(region.first { $0[0] == "Total" })
        XCTAssertEqual(regionTotal[2], "", "no currency beside the quantity sold of every currency")
        for (col, want) in [(13, net), (15, proceeds), (16, refunds), (17, returned)] {
            XCTAssertEqual(body.map { minor($0[col]) }.reduce(0, +), want, "Revenue by Region column \(col)")
            XCTAssertEqual(minor(regionTotal[col]), want)
        }
        XCTAssertTrue(returned > 0)
        XCTAssertEqual(minor(regionTotal[15]) - minor(regionTotal[16]) + minor(regionTotal[17]), proceedsAfter)
        // Revenue by Product: the same totals.
        let product = try XCTUnwrap(book["Revenue by Product"]!.first { $0.first == "Total" })
        XCTAssertEqual(minor(product[5]), net)
        XCTAssertEqual(minor(product[10]), netAfter)
        XCTAssertEqual(minor(product[11]), returned)
        XCTAssertEqual(minor(product[12]), proceedsAfter)
        // Refunds sheet total equals the refunds of the Summary.
        let refundTotal = try XCTUnwrap(book["Refunds"]!.first { $0.first == "Total" })
        XCTAssertEqual(minor(refundTotal[13]), refunds)
        // ...its commission returned the Summary's, and the proceeds it claws back the refunds
        // less the commission returned; each row's too.
        XCTAssertEqual(minor(refundTotal[14]), returned)
        XCTAssertEqual(minor(refundTotal[15]), refunds - returned)
        for row in book["Refunds"]!.dropFirst(4) where row.count >= 16 && row[0] != "Total" {
            XCTAssertEqual(minor(row[13]) - minor(row[14]), minor(row[15]), "\(row)")
            // A full refund reads 100% (the cell was empty), a reversal's percentage negative.
            XCTAssertEqual(row[9], row[6] == "refund" ? "100" : "-100", "\(row)")
        }
    }

    /// The Journal's postings (reporting currency) against the Summary's row for `month`.
    func assertJournalTiesToSummaryMonth(_ book: [String: [[String]]], month: String, file: StaticString = #filePath, line: UInt = #line) throws {
        var journalSales: Int64 = 0, journalRefunds: Int64 = 0, journalCommission: Int64 = 0, journalReceivable: Int64 = 0
        var rows = 0, debits: Int64 = 0, credits: Int64 = 0, entries = Set<String>()
        let journal = book["Journal"]!
        for row in journal.dropFirst(4) where row.count >= 12 && Int(row[0]) != nil {
            let v = minor(row[11])
            rows += 1
            if v > 0 { debits += v } else { credits += v }
            entries.insert(row[0])
            switch row[8] {
            case LedgerAccount.sales: journalSales += v
            case LedgerAccount.refunds: journalRefunds += v
            case LedgerAccount.commission: journalCommission += v
            case LedgerAccount.receivable: journalReceivable += v
            default: XCTFail("unexpected account \(row[8])", file: file, line: line)
            }
        }
        XCTAssertGreaterThan(rows, 0, "the \(month) Journal lists postings", file: file, line: line)
        // Its control totals, under the postings: debits, credits, and the two added (zero).
        let totals = Array(journal.suffix(3))
        XCTAssertEqual(totals.map { $0.first ?? "" }, ["Debits (USD): the positive amounts of the \(rows) postings of \(entries.count) entries above",
                                                       "Credits (USD): the negative amounts", "Debits and credits added (zero: every entry balances)"],
                       file: file, line: line)
        XCTAssertEqual(totals.map { $0.count >= 12 ? minor($0[11]) : -1 }, [debits, credits, 0], file: file, line: line)
        XCTAssertGreaterThan(debits, 0, file: file, line: line)
        let m = try XCTUnwrap(book["Summary"]!.first { $0.first == month }, "Summary row \(month)", file: file, line: line)
        let (net, commission, proceeds, refunds, returned, netAfter, proceedsAfter) =
            (minor(m[4]), minor(m[5]), minor(m[6]), minor(m[7]), minor(m[8]), minor(m[9]), minor(m[10]))
        XCTAssertEqual(net, -journalSales, file: file, line: line)
        XCTAssertEqual(refunds, journalRefunds, file: file, line: line)
        XCTAssertEqual(netAfter, -(journalSales + journalRefunds), file: file, line: line)
        XCTAssertEqual(proceedsAfter, journalReceivable, file: file, line: line)
        // The commission account: the sales' commission less what the refunds returned, which is
        // the refunded net less the refunded proceeds.
        XCTAssertEqual(journalCommission, commission - returned, file: file, line: line)
        XCTAssertEqual(returned, refunds - (proceeds - proceedsAfter), file: file, line: line)
        XCTAssertEqual(net - commission, proceeds, file: file, line: line)
    }

    /// The notes under a sheet's title wrap within the columns its tables use (merged across
    /// them, as high as their text needs): printed one page wide, a long note is not cut off.
    func testTitleNotesWrapWithinTheSheetsColumns() throws {
        let url = try XCTUnwrap(result.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") })
        let names = try XLSXParts.sheetNames(url)
        let summary = try XCTUnwrap(names.firstIndex(of: "Summary"))
        let xml = try XLSXParts.read(url, "xl/worksheets/sheet\(summary + 1).xml")
        let notes = try XLSXReader.sheets(url)["Summary"]!.dropFirst().prefix { !($0.first ?? "").isEmpty }
        XCTAssertGreaterThanOrEqual(notes.count, 4, "\(notes)")
        // The Summary's tables use columns A to K.
        for row in 2...(1 + notes.count) {
            XCTAssertTrue(xml.contains("<mergeCell ref=\"A\(row):K\(row)\"/>"), "note row \(row) is merged across A:K")
        }
        let heights = XLSXReader.matches(xml, #"<row r="(\d+)"[^>]* ht="([0-9.]+)""#).compactMap { m in Int(m[0]).map { ($0, Double(m[1]) ?? 0) } }
        let longest = notes.enumerated().max { $0.element[0].count < $1.element[0].count }!
        let height = heights.first { $0.0 == longest.offset + 2 }?.1 ?? 15
        XCTAssertGreaterThan(height, 15, "the longest note (\(longest.element[0].count) characters) is more than a line high")
    }

    /// Each sheet's filter covers its header and rows but no total row (sorting a filtered
    /// column must not move a total into the figures, nor a filter count one twice): the
    /// Trial Balance's per-currency totals follow all its accounts.
    func testFiltersStopAboveTheClosingTotals() throws {
        var checked = 0
        for url in result.workbooks {
            let names = try XLSXParts.sheetNames(url)
            let book = try XLSXReader.sheets(url)
            for (i, name) in names.enumerated() {
                let xml = try XLSXParts.read(url, "xl/worksheets/sheet\(i + 1).xml")
                guard let ref = XLSXReader.matches(xml, #"<autoFilter ref="[A-Z]+(\d+):[A-Z]+(\d+)""#).first else { continue }
                let (first, last) = (Int(ref[0])!, Int(ref[1])!)
                let rows = book[name]!
                XCTAssertGreaterThanOrEqual(last, first, "\(name)")
                for r in first..<last where rows[r].contains(where: { $0.hasPrefix("Total") }) {
                    XCTFail("\(url.lastPathComponent) \(name): row \(r + 1), under the filter of rows \(first)-\(last), is a total")
                }
                if last < rows.count, rows[last].contains(where: { $0.hasPrefix("Total") }) { checked += 1 }
            }
        }
        XCTAssertGreaterThanOrEqual(checked, 4, "sheets with a total row right under their filter (Summary, Revenue by Region, Trial Balance, ...)")
    }

    func testIdenticalInputsGiveByteIdenticalWorkbooks() throws {
        let other = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-tieout-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: other) }
        _ = try DemoWorkspace.create(at: other, transactions: 800, seed: 11, asOf: asOf)
        let second = try NightlyRun(workspace: Workspace(other), asOf: asOf).run()
        for (a, b) in zip(result.workbooks, second.workbooks) {
            XCTAssertEqual(try Data(contentsOf: a), try Data(contentsOf: b), a.lastPathComponent)
        }
    }

    func testSandboxWorkbookKeepsTestPurchasesApart() throws {
        // Its charts' titles say they are test purchases (they read as the production ones).
        let charts = try XLSXParts.entries(result.workbooks[1]).filter { $0.hasPrefix("xl/charts/chart") }
        XCTAssertFalse(charts.isEmpty)
        for chart in charts {
            XCTAssertTrue(try XLSXParts.read(result.workbooks[1], chart).contains("Sandbox (test purchases, not revenue): "), chart)
        }
        XCTAssertFalse(try XLSXParts.entries(result.workbooks[0]).filter { $0.hasPrefix("xl/charts/chart") }
            .contains { try XLSXParts.read(result.workbooks[0], $0).contains("Sandbox") })
        let sandbox = try XLSXReader.sheets(result.workbooks[1])
        XCTAssertNotNil(sandbox["Credited in Production"])
        XCTAssertFalse(sandbox["Credited in Production"]!.dropFirst(4).isEmpty, "the demo credits some sandbox purchases in production")
        let production = try XLSXReader.sheets(result.workbooks[0])
        let sandboxIds = Set(sandbox["Journal"]!.dropFirst(4).dropLast(3).compactMap { $0.count > 5 ? $0[5] : nil })
        XCTAssertFalse(production["Journal"]!.dropFirst(4).dropLast(3).contains { $0.count > 5 && sandboxIds.contains($0[5]) })
    }
}
