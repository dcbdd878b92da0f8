import XCTest
import ZIPFoundation
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore

/// App Store Connect financial reports (iap-formats.md section 4): read and checked against
/// their footers (apple-slicer's example reports in Apple's format, and broken copies), then compared with the
/// ledger by period, currency and product (`iapledger true-up`).
final class TrueUpTests: ScratchTestCase {
    static let columns = ["Start Date", "End Date", "UPC", "ISRC/ISBN", "Vendor Identifier", "Quantity", "Partner Share",
                          "Extended Partner Share", "Partner Share Currency", "Sales or Return", "Apple Identifier",
                          "Artist/Show/Developer/Author", "Title", "Label/Studio/Network/Developer/Publisher", "Grid",
                          "Product Type Identifier", "ISAN/Other Identifier", "Country Of Sale", "Pre-order Flag", "Promo Code",
                          "Customer Price", "Customer Currency"]

    /// A report of rows (product, quantity, share, extended, paid in, S/R, country, promo,
    /// customer price, customer currency) for 10/04/2026 - 10/31/2026, with its footer.
    static func report(_ rows: [(String, Int, String, String, String, String, String, String, String, String)],
                       rowsTotal: Int? = nil, amount: String, units: Int) -> String {
        var text = columns.joined(separator: "\t") + "\n"
        for r in rows {
            text += ["10/04/2026", "10/31/2026", "", "", r.0, String(r.1), r.2, r.3, r.4, r.5, "1498765501", "Example Dev",
                     "Title of \(r.0)", "", "", "IA1", "", r.6, "", r.7, r.8, r.9].joined(separator: "\t") + "\n"
        }
        return text + "Total_Rows\t\(rowsTotal ?? rows.count)\nTotal_Amount\t\(amount)\nTotal_Units\t\(units)\n"
    }

    func testExampleReportsInApplesFormatAreReadAndCheckedAgainstTheirFooters() throws {
        let eu = try FinancialReport.read(path: Fixtures.url("financial-reports/fedoco-apple-slicer__45545510_0914_EU.txt").path)
        XCTAssertEqual(eu.rows.count, 6)
        XCTAssertEqual(eu.periods, [ClosedDays(start: Day(iso: "2014-08-31")!, end: Day(iso: "2014-09-27")!)])
        let ret = try XCTUnwrap(eu.rows.first)
        XCTAssertEqual([ret.line, Int(ret.quantity), Int(ret.partnerShareMinor), Int(ret.extendedPartnerShareMinor), Int(ret.customerPriceMinor)],
                       [2, -1, 1217, -1217, -1999])
        XCTAssertTrue(ret.isReturn)
        XCTAssertEqual(eu.rows[1].promoCode, "CR")
        XCTAssertEqual(eu.rows.reduce(0) { $0 + $1.extendedPartnerShareMinor }, 20689, "Total_Amount 206.89")
        XCTAssertEqual(eu.totalUnits, 20, "units sold, the return left out")
        // JPY is printed with two decimals: 119.00 is 119 yen.
        let jp = try FinancialReport.read(path: Fixtures.url("financial-reports/fedoco-apple-slicer__45545510_0914_JP.txt").path)
        XCTAssertEqual(jp.rows.map(\.extendedPartnerShareMinor), [119, 60])
        XCTAssertEqual(jp.rows.map(\.customerPriceMinor), [170, 85])
        let ch = try FinancialReport.read(path: Fixtures.url("financial-reports/fedoco-apple-slicer__45545510_0914_CH.txt").path)
        XCTAssertEqual(ch.rows.reduce(0) { $0 + $1.extendedPartnerShareMinor }, 3315)
    }

    /// The payments summary given with the reports (a downloads folder's files) is passed over,
    /// said on stderr; given alone, the command says there is no report to compare (a README
    /// review: it refused every report given with it, saying "no column 'Start Date'").
    func testThePaymentsSummaryIsPassedOverAndSaid() throws {
        let summary = Fixtures.url("financial-reports/fedoco-apple-slicer__financial_report.csv").path
        XCTAssertThrowsError(try FinancialReport.read(path: summary)) { XCTAssertTrue($0 is FinancialReport.PaymentsSummary, "\($0)") }
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("p1", purchased: "2014-09-02T10:00:00Z")]) + "\n")
        try ws.run("2014-09-30")
        let jp = Fixtures.url("financial-reports/fedoco-apple-slicer__45545510_0914_JP.txt").path
        let both = try Resilience.cli(["true-up", jp, summary, "--format", "csv", "--workspace", ws.root.path])
        XCTAssertEqual(both.status, 0, both.err)
        XCTAssertTrue(both.err.contains("iapledger: note: \(summary): the payments summary (each region's totals, withholding tax and exchange rate, as in financial_report.csv), not a financial report by product: not read"), both.err)
        XCTAssertTrue(both.out.contains(",JPY,"), both.out)
        let alone = try Resilience.cli(["true-up", summary, "--workspace", ws.root.path])
        XCTAssertEqual(alone.status, 64, alone.err)
        XCTAssertTrue(alone.err.contains("no financial report by product among the files given"), alone.err)
    }

    /// A report that does not add up, is cut short or has an amount its currency cannot hold
    /// is refused whole, naming the file and line: compared in part, it would give wrong differences.
    func testABrokenReportIsRefusedNamingTheLine() throws {
        let original = try Fixtures.text("financial-reports/fedoco-apple-slicer__45545510_0914_JP.txt")
        let cases: [(String, String, String)] = [
            ("rows", original.replacingOccurrences(of: "Total_Rows\t2", with: "Total_Rows\t3"), "r.txt:4: Total_Rows 3 but the report has 2 rows"),
            ("amount", original.replacingOccurrences(of: "Total_Amount\t179", with: "Total_Amount\t180"), "r.txt:5: Total_Amount 180 but the rows' Extended Partner Share sums to 179 JPY"),
            ("units", original.replacingOccurrences(of: "Total_Units\t2", with: "Total_Units\t7"), "r.txt:6: Total_Units 7 but the rows sell 2 units"),
            ("cut short", original.components(separatedBy: "Total_Amount")[0], "no Total_Amount row: the report is cut short"),
            ("half a yen", original.replacingOccurrences(of: "\t119.00\t119.00\t", with: "\t119.50\t119.50\t"), "r.txt:2: Partner Share '119.50' is not an amount in JPY (0 decimals)"),
            ("extended", original.replacingOccurrences(of: "\t119.00\t119.00\t", with: "\t119.00\t118.00\t"), "r.txt:2: Extended Partner Share 118.00 is not Quantity 1 x Partner Share 119.00"),
            ("date", original.replacingOccurrences(of: "08/31/2014\t09/27/2014\t\t\tExample App 3", with: "2014-08-31\t09/27/2014\t\t\tExample App 3"), "r.txt:2: Start Date '2014-08-31' is not a date MM/DD/YYYY"),
            ("column", original.replacingOccurrences(of: "Partner Share Currency", with: "Currency"), "r.txt:1: not an App Store Connect financial report: no column 'Partner Share Currency'"),
            ("after the footer", original + "08/31/2014\t09/27/2014\n", "r.txt:7: a row after the footer"),
            ("kind", original.replacingOccurrences(of: "\tJPY\tS\t225836855", with: "\tJPY\tX\t225836855"), "r.txt:2: Sales or Return 'X' is neither S nor R"),
        ]
        for (name, text, message) in cases {
            XCTAssertThrowsError(try FinancialReport.parse(text, path: "r.txt"), name) { error in
                XCTAssertTrue("\(error)".hasPrefix("r.txt") && "\(error)".contains(message), "\(name): \(error)")
            }
        }
        XCTAssertThrowsError(try FinancialReport.read(path: "/nonexistent/r.txt")) { XCTAssertTrue("\($0)".contains("/nonexistent/r.txt: no such file"), "\($0)") }
        // The footer's units may also be the net count (Apple does not say which it writes).
        XCTAssertNoThrow(try FinancialReport.parse(Self.report([("coins.100", 3, "0.64", "1.92", "EUR", "S", "DE", "", "1.09", "EUR"),
                                                               ("coins.100", -1, "0.64", "-0.64", "EUR", "R", "DE", "", "-1.09", "EUR")],
                                                              amount: "1.28", units: 2), path: "r.txt"))
    }

    /// The comparison: per period, customer currency and product, Apple's units and proceeds
    /// against the production book's sales less refunds by original date; sandbox, other
    /// currencies and other days left out; a currency Apple pays in USD compared with the
    /// ledger's USD proceeds.
    func testReportsAreComparedWithTheLedgersEntriesOfTheirDays() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("d1", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("d2", purchased: "2026-10-06T10:00:00Z")]),
            Receipt.response([Receipt.item("d3", purchased: "2026-10-07T10:00:00Z", cancelled: "2026-10-10T10:00:00Z")]),
            Receipt.response([Receipt.item("d9", purchased: "2026-11-02T10:00:00Z")]),                 // after the period
            Receipt.response([Receipt.item("s1", purchased: "2026-10-06T10:00:00Z")], environment: "Sandbox"),
            Receipt.response([Receipt.item("j1", purchased: "2026-10-07T10:00:00Z")]),
            Receipt.response([Receipt.item("k1", purchased: "2026-10-09T10:00:00Z")]),
            Receipt.response([Receipt.item("u1", purchased: "2026-10-08T10:00:00Z")]),                 // USD: no report names it
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + """
            o-d1,acct-1,d1,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,
            o-d2,acct-1,d2,coins.100,1,100,2026-10-06T10:01:00Z,production,DEU,,
            o-d3,acct-1,d3,coins.100,1,100,2026-10-07T10:01:00Z,production,DEU,,2026-10-10T11:00:00Z
            o-d9,acct-1,d9,coins.100,1,100,2026-11-02T10:01:00Z,production,DEU,,
            o-s1,acct-1,s1,coins.100,1,100,2026-10-06T10:01:00Z,sandbox,DEU,,
            o-j1,acct-1,j1,coins.100,1,100,2026-10-07T10:01:00Z,production,JPN,,
            o-k1,acct-1,k1,coins.100,1,100,2026-10-09T10:01:00Z,production,KWT,,
            o-u1,acct-1,u1,coins.100,1,100,2026-10-08T10:01:00Z,production,USA,,

            """)
        try ws.run("2026-11-03")
        // DEU: 1.09 EUR with 19% tax included, net 0.92, commission 0.28, proceeds 0.64 a unit.
        let euText = Self.report([
            ("coins.100", 3, "0.64", "1.92", "EUR", "S", "DE", "", "1.09", "EUR"),
            ("coins.100", -1, "0.64", "-0.64", "EUR", "R", "DE", "", "-1.09", "EUR"),
            ("coins.100", 1, "0.00", "0.00", "EUR", "S", "DE", "CR", "0.00", "EUR"),
            ("coins.550", 1, "3.00", "3.00", "EUR", "S", "AT", "", "4.49", "EUR"),
        ], amount: "4.28", units: 5)
        // JPN: 160 JPY, 10% included, net 145, commission 44 (43.5 to even), proceeds 101; Apple counts two.
        let jpText = Self.report([("coins.100", 2, "101", "202", "JPY", "S", "JP", "", "160", "JPY")], amount: "202", units: 2)
        // KWT: sold in KWD, paid in USD (a rest-of-world report).
        let wwText = Self.report([("coins.100", 1, "0.70", "0.70", "USD", "S", "KW", "", "0.300", "KWD")], amount: "0.70", units: 1)
        let eu = try FinancialReport.parse(euText, path: "eu.txt")
        let jp = try FinancialReport.parse(jpText, path: "jp.txt")
        let ww = try FinancialReport.parse(wwText, path: "ww.txt")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let k1Reporting = try ledger.read { try Int64.fetchOne($0.db, sql: "SELECT proceeds_reporting_minor FROM entry WHERE transaction_id = 'k1'") }!
        let t = try ledger.read { r in
            try TrueUp.compare(reports: [eu, jp, ww], reportingCurrency: "USD") { try r.proceeds(from: $0, through: $1) }
        }
        let lines = Dictionary(uniqueKeysWithValues: t.lines.map { ("\($0.currency) \($0.productId)", $0) })
        XCTAssertEqual(Set(lines.keys), ["EUR coins.100", "EUR coins.550", "JPY coins.100", "KWD coins.100"], "no USD report: u1 is not compared")

        let d = try XCTUnwrap(lines["EUR coins.100"])
        XCTAssertEqual([d.appleUnits, d.appleFreeUnits, d.ledgerUnits], [2, 1, 2], "three sold, one refunded; sandbox and November left out")
        XCTAssertEqual([d.appleProceedsMinor, d.ledgerProceedsMinor, d.differenceMinor], [128, 128, 0])
        XCTAssertEqual([d.appleCustomerSalesMinor, d.ledgerGrossMinor], [218, 218])
        XCTAssertEqual(d.note, "")

        let missing = try XCTUnwrap(lines["EUR coins.550"])
        XCTAssertEqual([missing.ledgerUnits, missing.ledgerProceedsMinor, missing.differenceMinor], [0, 0, 300])
        XCTAssertEqual(missing.note, "not in the ledger for these days (never received, or dated just outside them)")

        let j = try XCTUnwrap(lines["JPY coins.100"])
        XCTAssertEqual([j.appleProceedsMinor, j.ledgerProceedsMinor, j.differenceMinor], [202, 101, 101])
        XCTAssertEqual(j.note, "Apple counts 1 unit sold more than the ledger")
        XCTAssertEqual([d.appleSoldUnits, d.appleReturnedUnits, d.ledgerSoldUnits, d.ledgerReturnedUnits], [3, 1, 3, 1], "sold and returned apart")

        let k = try XCTUnwrap(lines["KWD coins.100"])
        XCTAssertEqual(k.paidIn, "USD")
        XCTAssertEqual([k.appleProceedsMinor, k.ledgerProceedsMinor, k.differenceMinor], [70, k1Reporting, 70 - k1Reporting])
        XCTAssertTrue(k.note.contains("paid in USD: the ledger's USD proceeds"), k.note)

        XCTAssertEqual(t.totals.map { "\($0.paidIn) \($0.appleProceedsMinor) \($0.ledgerProceedsMinor!) \($0.differenceMinor!)" },
                       ["EUR 428 128 300", "JPY 202 101 101", "USD 70 \(k1Reporting) \(70 - k1Reporting)"])

        // A sale Apple's report lacks and the return it counts in another month: as many net
        // units on both sides, the two differences said apart (one net note hid them).
        let netSame = try FinancialReport.parse(Self.report([("coins.100", 2, "0.64", "1.28", "EUR", "S", "DE", "", "1.09", "EUR")],
                                                            amount: "1.28", units: 2), path: "eu2.txt")
        let apart = try ledger.read { r in
            try TrueUp.compare(reports: [netSame], reportingCurrency: "USD") { try r.proceeds(from: $0, through: $1) }
        }
        let e = try XCTUnwrap(apart.lines.first { $0.currency == "EUR" && $0.productId == "coins.100" })
        XCTAssertEqual([e.appleUnits, e.ledgerUnits], [2, 2])
        XCTAssertEqual(e.note, "Apple counts 1 unit sold fewer than the ledger; Apple counts 1 unit returned fewer than the ledger")
        // More than one unit: "units sold" (it said "unit solds").
        let five = try FinancialReport.parse(Self.report([("coins.100", 5, "0.64", "3.20", "EUR", "S", "DE", "", "1.09", "EUR")],
                                                         amount: "3.20", units: 5), path: "eu3.txt")
        let plural = try ledger.read { r in
            try TrueUp.compare(reports: [five], reportingCurrency: "USD") { try r.proceeds(from: $0, through: $1) }
        }
        XCTAssertEqual(plural.lines.first { $0.currency == "EUR" && $0.productId == "coins.100" }?.note,
                       "Apple counts 2 units sold more than the ledger; Apple counts 1 unit returned fewer than the ledger")

        // The command: the table, CSV and JSON, and a workbook that reads back with the figures.
        let dir = newScratch("true-up")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, text) in [("eu.txt", euText), ("jp.txt", jpText), ("ww.txt", wwText)] {
            try Data(text.utf8).write(to: dir.appendingPathComponent(name))
        }
        let files = ["eu.txt", "jp.txt", "ww.txt"].map { dir.appendingPathComponent($0).path }
        let book = dir.appendingPathComponent("true-up.xlsx")
        let table = try Resilience.cli(["true-up", "--workspace", ws.root.path] + files + ["--xlsx", book.path])
        XCTAssertEqual(table.status, 0, table.err)
        XCTAssertTrue(table.out.contains("2026-10-04..2026-10-31  JPY       coins.100"), table.out)
        XCTAssertTrue(table.out.contains("total paid in EUR"), table.out)
        XCTAssertTrue(table.err.contains("wrote \(book.path)"), table.err)
        let sheets = try XLSXReader.sheets(book)
        let rows: [[String]] = sheets["True-up"] ?? []
        // Led by product, customer currency and the currency paid in (repeated on each page of
        // a printout several pages wide), then the period.
        let jpRow = try XCTUnwrap(rows.first { (row: [String]) -> Bool in row.count > 18 && row[1] == "JPY" && row[0] == "coins.100" })
        XCTAssertEqual(jpRow[2], "JPY")
        XCTAssertEqual(Array(jpRow[6...18]), ["2", "2", "0", "0", "1", "1", "0", "320", "160", "101", "202", "101", "101"])
        let totals = rows.filter { $0.first?.hasPrefix("Total paid in ") == true }
        XCTAssertEqual(totals.map { "\($0[0]) \($0[2])" }.sorted(), ["Total paid in EUR, 2026-10-04..2026-10-31 EUR", "Total paid in JPY, 2026-10-04..2026-10-31 JPY",
                                                                    "Total paid in USD, 2026-10-04..2026-10-31 USD"])
        // Each total's figures under their own headings (a diff review: one column to the
        // left, Apple's proceeds read as the ledger's): Apple's, the ledger's, the difference.
        let header = try XCTUnwrap(rows.first { $0.first == "Product" })
        let jpTotal = try XCTUnwrap(totals.first { $0[2] == "JPY" })
        let at = { (title: String) -> String in jpTotal[try! XCTUnwrap(header.firstIndex(of: title))] }
        XCTAssertEqual([at("Proceeds (Apple, paid in)"), at("Proceeds (ledger, paid in)"), at("Difference (paid in)")], [jpRow[16], jpRow[17], jpRow[18]])
        XCTAssertEqual(header.firstIndex(of: "Proceeds (Apple, paid in)"), 16)
        XCTAssertEqual(at("Proceeds (ledger, customer currency)"), "")
        // The reports read, on a sheet of their own, Total_Amount a number in the currency paid in.
        let read: [[String]] = sheets["Reports read"] ?? []
        XCTAssertEqual(read.filter { (row: [String]) -> Bool in row.first?.hasSuffix(".txt") == true }.count, 3)
        XCTAssertFalse(rows.contains { (row: [String]) -> Bool in row.first?.hasSuffix(".txt") == true }, "not below the lines")
        let archive = try XCTUnwrap(Archive(url: book, accessMode: .read))
        var xml = Data()
        _ = try archive.extract(try XCTUnwrap(archive["xl/worksheets/sheet2.xml"]), consumer: { xml.append($0) })
        var first = Data()
        _ = try archive.extract(try XCTUnwrap(archive["xl/worksheets/sheet1.xml"]), consumer: { first.append($0) })
        XCTAssertTrue(String(decoding: first, as: UTF8.self).contains(#"<pane ySplit="5" topLeftCell="A6""#), "the lines' header frozen")
        let numbers = try NSRegularExpression(pattern: #"<c r="D[0-9]+" s="[0-9]+"><v>"#)
        let text = String(decoding: xml, as: UTF8.self)
        XCTAssertEqual(numbers.numberOfMatches(in: text, range: NSRange(text.startIndex..., in: text)), 3, "Total_Amount as numbers: \(text)")
        let detail: [[String]] = sheets["Apple report rows"] ?? []
        XCTAssertEqual(detail.filter { (row: [String]) -> Bool in row.first?.hasSuffix(".txt") == true }.count, 6)
        // An --xlsx into a folder that is not there is refused (it made the folders, and wrote).
        let nowhere = dir.appendingPathComponent("no-such-folder/true-up.xlsx")
        let refused = try Resilience.cli(["true-up", "--workspace", ws.root.path] + files + ["--xlsx", nowhere.path])
        XCTAssertEqual(refused.status, 1, refused.err)
        XCTAssertTrue(refused.err.contains("no-such-folder: is no folder: --xlsx writes into a folder that exists (nothing written)"), refused.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: nowhere.deletingLastPathComponent().path))
        let csv = try Resilience.cli(["true-up", "--workspace", ws.root.path, "--format", "csv"] + files)
        XCTAssertTrue(csv.out.contains("2026-10-04,2026-10-31,EUR,coins.100,2,1,2,2.18,2.18,EUR,1.28,1.28,0.00,,3,1,3,1,1.28\n"), csv.out)
        let json = try Resilience.cli(["true-up", "--workspace", ws.root.path, "--format", "json"] + files)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any]
        XCTAssertEqual((parsed?["lines"] as? [Any])?.count, 4)
        // A broken report stops the command, naming it; nothing is compared.
        try Data("Start Date\tEnd Date\n".utf8).write(to: dir.appendingPathComponent("bad.txt"))
        let bad = try Resilience.cli(["true-up", "--workspace", ws.root.path, dir.appendingPathComponent("bad.txt").path])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.err.contains("bad.txt:1: not an App Store Connect financial report: no column"), bad.err)
        XCTAssertEqual(bad.out, "")
    }

    /// Reports that cannot be compared together are refused before anything is compared: the
    /// same report twice (a second download under another name), a report of two periods or
    /// two currencies paid in, periods that overlap for a currency; a region paid in two
    /// currencies for the same customer currency gives a line each, never a sum of both.
    func testReportsThatWouldMisleadAreRefused() throws {
        let eu = Self.report([("coins.100", 3, "0.64", "1.92", "EUR", "S", "DE", "", "1.09", "EUR")], amount: "1.92", units: 3)
        let dir = newScratch("true-up-refused")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        func file(_ name: String, _ text: String) throws -> FinancialReport {
            let url = dir.appendingPathComponent(name)
            try Data(text.utf8).write(to: url)
            return try FinancialReport.read(path: url.path)
        }
        let first = try file("a_EU.txt", eu), copy = try file("a_EU (1).txt", eu)
        XCTAssertThrowsError(try TrueUp.compare(reports: [first, copy], reportingCurrency: "USD") { _, _ in [] }) {
            XCTAssertTrue("\($0)".contains("a_EU (1).txt: the same report as") && "\($0)".contains("a_EU.txt"), "\($0)")
        }
        // Saved again with other line ends: the same rows, refused too.
        let resaved = try file("a_EU (2).txt", "\u{FEFF}" + eu.replacingOccurrences(of: "\n", with: "\r\n"))
        XCTAssertThrowsError(try TrueUp.compare(reports: [first, resaved], reportingCurrency: "USD") { _, _ in [] }) {
            XCTAssertTrue("\($0)".contains("a_EU (2).txt: the same rows as") && "\($0)".contains("the same report saved again?"), "\($0)")
        }
        let overlapping = try file("b_EU.txt", eu.replacingOccurrences(of: "10/04/2026\t10/31/2026", with: "10/15/2026\t11/11/2026"))
        XCTAssertThrowsError(try TrueUp.compare(reports: [first, overlapping], reportingCurrency: "USD") { _, _ in [] }) {
            XCTAssertTrue("\($0)".contains("its period 2026-10-15..2026-11-11 overlaps 2026-10-04..2026-10-31") && "\($0)".contains("for EUR"), "\($0)")
        }
        // A November report of the same region is another period, compared on its own.
        let november = try file("c_EU.txt", eu.replacingOccurrences(of: "10/04/2026\t10/31/2026", with: "11/01/2026\t11/28/2026"))
        XCTAssertEqual(Set(try TrueUp.compare(reports: [first, november], reportingCurrency: "USD") { _, _ in [] }.lines.map(\.start)).count, 2)
        // Inside one report: one period, one currency paid in, signs as Apple writes them.
        let twoRows = Self.report([("coins.100", 3, "0.64", "1.92", "EUR", "S", "DE", "", "1.09", "EUR"),
                                   ("coins.550", 1, "3.00", "3.00", "EUR", "S", "DE", "", "4.49", "EUR")], amount: "4.92", units: 4)
        for (text, message) in [
            (twoRows.replacingOccurrences(of: "10/04/2026\t10/31/2026\t\t\tcoins.550", with: "10/04/2026\t10/30/2026\t\t\tcoins.550"),
             "r.txt:3: the period 2026-10-04..2026-10-30, but line 2 has 2026-10-04..2026-10-31: a report covers one fiscal month"),
            (twoRows.replacingOccurrences(of: "3.00\t3.00\tEUR", with: "3.00\t3.00\tUSD"),
             "r.txt:3: Partner Share Currency USD, but line 2 has EUR: a report pays in one currency"),
            (eu.replacingOccurrences(of: "\t3\t0.64\t1.92\tEUR\tS", with: "\t-3\t0.64\t-1.92\tEUR\tS").replacingOccurrences(of: "Total_Amount\t1.92", with: "Total_Amount\t-1.92").replacingOccurrences(of: "Total_Units\t3", with: "Total_Units\t0"),
             "r.txt:2: Quantity -3 on a sale (S)"),
            (eu.replacingOccurrences(of: "\t1.09\tEUR", with: "\t-1.09\tEUR"), "r.txt:2: Customer Price -1.09 on a sale (S) is negative"),
            (eu.replacingOccurrences(of: "\t3\t0.64\t1.92\t", with: "\t1000000001\t0.64\t640000000.64\t"), "r.txt:2: Quantity '1000000001' is not a whole number of units"),
            (eu.replacingOccurrences(of: "Title\t", with: "Quantity\t"), "r.txt:1: the column 'Quantity' twice in the header"),
        ] {
            XCTAssertThrowsError(try FinancialReport.parse(text, path: "r.txt")) { XCTAssertTrue("\($0)".contains(message), "\($0)") }
        }
        // Windows line endings are read as Apple's.
        XCTAssertEqual(try FinancialReport.parse(eu.replacingOccurrences(of: "\n", with: "\r\n"), path: "r.txt").rows.count, 1)
        XCTAssertThrowsError(try FinancialReport.read(path: dir.path)) { XCTAssertTrue("\($0)".contains("a folder, not a file"), "\($0)") }
        // A file past the bound is refused without being read whole (a sparse file: no disk used).
        let huge = dir.appendingPathComponent("huge.txt")
        FileManager.default.createFile(atPath: huge.path, contents: Data(eu.utf8))
        let h = try FileHandle(forWritingTo: huge)
        try h.truncate(atOffset: UInt64(FinancialReport.maxBytes) + 10)
        try h.close()
        XCTAssertThrowsError(try FinancialReport.read(path: huge.path)) { XCTAssertTrue("\($0)".contains("huge.txt: more than 256 MiB"), "\($0)") }

        // EUR customers of two regions, one paid in EUR and one in USD: a line per currency paid
        // in, the ledger's side on neither (which region sold what cannot be told).
        let ww = try file("d_WW.txt", Self.report([("coins.100", 1, "0.70", "0.70", "USD", "S", "AD", "", "1.09", "EUR")], amount: "0.70", units: 1))
        let t = try TrueUp.compare(reports: [first, ww], reportingCurrency: "USD") { _, _ in
            [ProceedsRow(currency: "EUR", productId: "coins.100", units: 4, grossMinor: 436, proceedsMinor: 256, proceedsReportingMinor: 280, entries: 4)]
        }
        XCTAssertEqual(t.lines.map { "\($0.paidIn) \($0.appleProceedsMinor) \($0.ledgerProceedsMinor.map(String.init) ?? "-")" }, ["EUR 192 -", "USD 70 -"])
        XCTAssertTrue(t.lines[0].note.contains("Apple pays these sales in EUR and USD, one line each: not comparable; the ledger has 4 units, 2.56 EUR"), t.lines[0].note)
        XCTAssertEqual(t.lines.map { [$0.ledgerUnits, $0.ledgerGrossMinor] }, [[nil, nil], [nil, nil]], "the ledger's side is on neither line")
        XCTAssertEqual(t.totals.map { "\($0.paidIn) \($0.appleProceedsMinor)" }, ["EUR 192", "USD 70"], "no currency added to another")
    }

    /// A late entry (posted on the first open day after its month was closed) counts on its
    /// own day, where Apple's report counts it; a period the ledger has nothing for is said.
    func testALateEntryCountsOnItsOwnDay() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/r1.jsonl", Receipt.response([Receipt.item("d1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o1.csv", ReconciliationTests.header + "o-d1,acct-1,d1,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-10-31")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-10\"\n")
        // d2 of October arrives in November: posted on 2026-11-01, marked late.
        try ws.write("inbox/receipts/r2.jsonl", Receipt.response([Receipt.item("d2", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "o-d2,acct-1,d2,coins.100,1,100,2026-10-06T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-11-03")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        XCTAssertEqual(try ledger.read { try String.fetchOne($0.db, sql: "SELECT date || ' ' || late FROM entry WHERE transaction_id = 'd2'") }, "2026-11-01 1")
        let october = try FinancialReport.parse(Self.report([("coins.100", 2, "0.64", "1.28", "EUR", "S", "DE", "", "1.09", "EUR")], amount: "1.28", units: 2), path: "eu.txt")
        let t = try ledger.read { r in try TrueUp.compare(reports: [october], reportingCurrency: "USD") { try r.proceeds(from: $0, through: $1) } }
        XCTAssertEqual(t.lines.map { "\($0.ledgerUnits!) \($0.differenceMinor!)" }, ["2 0"], "d1 and the late d2 both in October")
        XCTAssertEqual(t.warnings, [])
        let december = try FinancialReport.parse(Self.report([("coins.100", 1, "0.64", "0.64", "EUR", "S", "DE", "", "1.09", "EUR")], amount: "0.64", units: 1)
            .replacingOccurrences(of: "10/04/2026\t10/31/2026", with: "11/29/2026\t12/26/2026"), path: "eu.txt")
        let none = try ledger.read { r in try TrueUp.compare(reports: [december], reportingCurrency: "USD") { try r.proceeds(from: $0, through: $1) } }
        XCTAssertEqual(none.warnings, ["the ledger has no production entries dated 2026-11-29..2026-12-26: another workspace, or nights not run for those days?"])
        // An October sale waiting for its rule (no price for its product): in none of the
        // ledger's figures, said (a finance review: the true-up said nothing of it, and a
        // difference booked for it would count twice once it posts). The command says it too.
        try ws.write("inbox/receipts/r3.jsonl", Receipt.response([Receipt.item("d3", product: "coins.777", purchased: "2026-10-08T10:00:00Z")]) + "\n")
        try ws.run("2026-11-04")
        let waiting = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read { r in
            try TrueUp.compare(reports: [october], reportingCurrency: "USD", waiting: { try r.productionSalesWaiting(purchasedFrom: $0, through: $1, currencies: $2) }) { try r.proceeds(from: $0, through: $1) }
        }
        XCTAssertEqual(waiting.warnings, ["1 production sale dated 2026-10-04..2026-10-31 still waits in EUR or a currency not known yet (for a rule, or for its order to name a storefront): in none of the ledger's figures here; each posts once it can (late, in the first open month, if its month is closed by then), so true up what differs once it has posted, or it counts twice (`iapledger findings --code MISSING_RULE` and `--code ORDER_WAIT` list them)"])
        let file = ws.root.appendingPathComponent("eu.txt")
        try Self.report([("coins.100", 2, "0.64", "1.28", "EUR", "S", "DE", "", "1.09", "EUR")], amount: "1.28", units: 2).write(to: file, atomically: true, encoding: .utf8)
        // Of another currency alone: the waiting sale (of no currency known yet, a legacy
        // receipt's) may be of it, so it is counted there too; one in a currency no report
        // covers is not (a finance re-check: INR sales were said beside USD and EUR reports).
        let covered = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read { r in
            (try r.productionSalesWaiting(purchasedFrom: Day(iso: "2026-10-01")!, through: Day(iso: "2026-10-31")!, currencies: ["JPY"]),
             try r.productionSalesWaiting(purchasedFrom: Day(iso: "2026-10-09")!, through: Day(iso: "2026-10-31")!, currencies: ["JPY"]))
        }
        XCTAssertEqual(covered.0, 1, "no currency known yet: counted")
        XCTAssertEqual(covered.1, 0, "bought on 2026-10-08, before the days asked for")
        try Tamper.run(ws.root.appendingPathComponent("ledger.sqlite").path, pastAll: [], "UPDATE store_transaction SET currency = 'INR' WHERE transaction_id = 'd3'")
        let inr = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read { r in
            (try r.productionSalesWaiting(purchasedFrom: Day(iso: "2026-10-01")!, through: Day(iso: "2026-10-31")!, currencies: ["EUR", "USD"]),
             try r.productionSalesWaiting(purchasedFrom: Day(iso: "2026-10-01")!, through: Day(iso: "2026-10-31")!, currencies: ["INR"]))
        }
        XCTAssertEqual(inr.0, 0, "an INR sale beside reports of EUR and USD")
        XCTAssertEqual(inr.1, 1)
        try Tamper.run(ws.root.appendingPathComponent("ledger.sqlite").path, pastAll: [], "UPDATE store_transaction SET currency = NULL WHERE transaction_id = 'd3'")
        let said = try Resilience.cli(["true-up", file.path, "--workspace", ws.root.path])
        XCTAssertEqual(said.status, 0, said.err)
        XCTAssertTrue(said.err.contains("iapledger: warning: 1 production sale dated 2026-10-04..2026-10-31 still waits"), said.err)
    }

    /// The demo's reports are its own sales but for the two differences it seeds: the true-up
    /// finds those two and no other.
    func testTheDemosReportsDifferByWhatItSeeded() throws {
        let dir = newScratch("true-up-demo")
        let asOf = Day(iso: "2026-11-20")!
        _ = try DemoWorkspace.create(at: dir, transactions: 1500, seed: 9, asOf: asOf)
        _ = try NightlyRun(workspace: Workspace(dir), asOf: asOf).run()
        let ledger = try Workspace(dir).openExistingLedger().1
        let written = try XCTUnwrap(try DemoAppleReports.write(into: dir, ledger: ledger, asOf: asOf))
        XCTAssertEqual(written.month.description, "2026-10")
        XCTAssertEqual(written.seeded.count, 2)
        let reports = try written.files.map { try FinancialReport.read(path: $0.path) }
        let t = try ledger.read { r in try TrueUp.compare(reports: reports, reportingCurrency: "USD") { try r.proceeds(from: $0, through: $1) } }
        let differing = t.lines.filter { $0.differenceMinor != 0 || $0.appleUnits != $0.ledgerUnits }
        XCTAssertEqual(differing.count, 2, "\(differing)")
        XCTAssertEqual(Set(differing.map { "\($0.currency) \($0.productId)" }),
                       Set(written.seeded.map { String($0.prefix { $0 != ":" }) }))
        XCTAssertTrue(t.lines.count > 20)
    }

    /// Seeded mutations of the example reports (bit flips, inserted and deleted bytes, cut
    /// files, splices of two reports): each is either read whole, its footer agreeing with its
    /// rows, or refused with an error naming it; never a crash.
    func testMutatedReportsAreReadWholeOrRefused() throws {
        let samples = try ["CH", "EU", "JP"].map {
            Array(try Fixtures.text("financial-reports/fedoco-apple-slicer__45545510_0914_\($0).txt").utf8)
        }
        var rng = SplitMix64(20261126)
        var read = 0, refused = 0
        for i in 0..<3000 {
            let bytes = ByteMutator.mutate(samples[i % 3], other: samples[(i + 1) % 3], &rng)
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                let r = try FinancialReport.parse(text, path: "m\(i).txt")
                XCTAssertEqual(r.rows.count, r.totalRows, "m\(i)")
                read += 1
            } catch let e as ReadError {
                XCTAssertTrue("\(e)".hasPrefix("m\(i).txt"), "\(e)")
                refused += 1
            }
        }
        XCTAssertGreaterThan(read, 30, "some mutations leave a report that still adds up")
        XCTAssertGreaterThan(refused, 1000)
    }
}
