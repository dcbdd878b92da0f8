import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// `iapledger report --period`: a month's workbooks written again, as of its last day.
final class ReportPeriodTests: XCTestCase {
    func testAClosedMonthIsWrittenAgainAsOfItsLastDay() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("r1", purchased: "2026-09-20T10:00:00Z")]) + "\n")
        try ws.run("2026-09-21")
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("r2", purchased: "2026-10-02T10:00:00Z")]) + "\n")
        try ws.run("2026-10-03")

        let (asOf, files) = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-09")!)
        XCTAssertEqual(asOf.description, "2026-09-30")
        XCTAssertTrue(files.contains { $0.path.hasSuffix("reports/2026-09-30/finance-2026-09-30.xlsx") })
        let tb = try XLSXReader.sheets(files[0])["Trial Balance"]!.dropFirst(4).filter { $0[1] == LedgerAccount.sales }
        XCTAssertEqual(tb.map { XLSXReader.minor($0[5], decimals: 2) }, [-99], "September only: r2 of October is not in it")

        // The month still running is reported as of the last night.
        XCTAssertEqual(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).asOf.description, "2026-10-03")
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-12")!))
    }

    func testTheNightlyRunAlsoWritesTheOpenMonthBefore() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("m1", purchased: "2026-10-30T10:00:00Z")]) + "\n")
        let open = try ws.run("2026-11-02")
        XCTAssertTrue(open.workbooks.contains { $0.path.hasSuffix("reports/2026-11-02/finance-2026-11-02.xlsx") })
        XCTAssertTrue(open.workbooks.contains { $0.path.hasSuffix("reports/2026-10-31/finance-2026-10-31.xlsx") }, "October is open")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-10\"\n")
        let closed = try ws.run("2026-11-03")
        XCTAssertFalse(closed.workbooks.contains { $0.path.contains("2026-10-31") }, "October is closed: written no more")
    }
}
