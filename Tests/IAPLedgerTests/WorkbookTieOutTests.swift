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

    func testSheetsTieOut() throws {
        let book = try XLSXReader.sheets(result.workbooks[0])
        XCTAssertEqual(Array(book.keys).count, 7)

        // Trial Balance sheet == balance --format json (production book).
        let rows = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path).read { try $0.trialBalance(book: .production) }
        let json = try JSONSerialization.jsonObject(with: Data(BalanceOutput.render(rows, format: "json", reportingCurrency: "USD").utf8)) as! [[String: Any]]
        let tb = book["Trial Balance"]!.dropFirst(4).filter { !$0[1].hasPrefix("Total") }
        XCTAssertEqual(tb.count, json.count)
        for j in json {
            let line = try XCTUnwrap(tb.first { $0[1] == j["account"] as? String && $0[2] == j["currency"] as? String })
            let d = Currency.exponent(j["currency"] as! String)!
            XCTAssertEqual(XLSXReader.minor(line[3], decimals: d), Int64(j["debit_minor"] as! Int))
            XCTAssertEqual(XLSXReader.minor(line[4], decimals: d), Int64(j["credit_minor"] as! Int))
            XCTAssertEqual(XLSXReader.minor(line[5], decimals: d), Int64(j["balance_minor"] as! Int))
            XCTAssertEqual(minor(line[6]), Int64(j["reporting_balance_minor"] as! Int))
        }

        // Journal sums (reporting): revenue accounts hold -(net sales) + refunds.
        var journalSales: Int64 = 0, journalRefunds: Int64 = 0, journalCommission: Int64 = 0, journalReceivable: Int64 = 0
        for row in book["Journal"]!.dropFirst(4) where row.count >= 12 {
            let v = minor(row[11])
            switch row[8] {
            case LedgerAccount.sales: journalSales += v
            case LedgerAccount.refunds: journalRefunds += v
            case LedgerAccount.commission: journalCommission += v
            case LedgerAccount.receivable: journalReceivable += v
            default: XCTFail("unexpected account \(row[8])")
            }
        }
        // Summary totals row.
        let summary = book["Summary"]!
        let total = try XCTUnwrap(summary.first { $0.first == "Total" })
        let (net, commission, proceeds, refunds, netAfter, proceedsAfter) =
            (minor(total[4]), minor(total[5]), minor(total[6]), minor(total[7]), minor(total[8]), minor(total[9]))
        XCTAssertEqual(net, -journalSales)
        XCTAssertEqual(refunds, journalRefunds)
        XCTAssertEqual(netAfter, -(journalSales + journalRefunds))
        XCTAssertEqual(proceedsAfter, journalReceivable)
        // Commission returned on refunds = refunded net - refunded proceeds.
        XCTAssertEqual(journalCommission, commission - (refunds - (proceeds - proceedsAfter)))
        XCTAssertEqual(net - commission, proceeds)
        XCTAssertTrue(refunds > 0, "the demo has refunds")

        // Revenue by Region: the sum of its rows equals the Summary, and its Total row.
        let region = book["Revenue by Region"]!.dropFirst(4)
        let body = region.filter { $0[0] != "Total" && $0.count >= 16 }
        let regionTotal = try XCTUnwrap(region.first { $0[0] == "Total" })
        for (col, want) in [(12, net), (14, proceeds), (15, refunds)] {
            XCTAssertEqual(body.map { minor($0[col]) }.reduce(0, +), want, "Revenue by Region column \(col)")
            XCTAssertEqual(minor(regionTotal[col]), want)
        }
        // Revenue by Product: the same totals.
        let product = try XCTUnwrap(book["Revenue by Product"]!.first { $0.first == "Total" })
        XCTAssertEqual(minor(product[5]), net)
        XCTAssertEqual(minor(product[10]), netAfter)
        // Refunds sheet total equals the refunds of the Summary.
        let refundTotal = try XCTUnwrap(book["Refunds"]!.first { $0.first == "Total" })
        XCTAssertEqual(minor(refundTotal[13]), refunds)
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
        let sandbox = try XLSXReader.sheets(result.workbooks[1])
        XCTAssertNotNil(sandbox["Credited in Production"])
        XCTAssertFalse(sandbox["Credited in Production"]!.dropFirst(4).isEmpty, "the demo credits some sandbox purchases in production")
        let production = try XLSXReader.sheets(result.workbooks[0])
        let sandboxIds = Set(sandbox["Journal"]!.dropFirst(4).compactMap { $0.count > 5 ? $0[5] : nil })
        XCTAssertFalse(production["Journal"]!.dropFirst(4).contains { $0.count > 5 && sandboxIds.contains($0[5]) })
    }
}
