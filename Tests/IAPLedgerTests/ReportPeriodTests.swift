import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerReport
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

        let (asOf, written, _, _) = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-09")!)
        let files = written.map(\.url)
        XCTAssertEqual(asOf.description, "2026-09-30")
        XCTAssertTrue(files.contains { $0.path.hasSuffix("reports/2026-09-30/finance-2026-09-30.xlsx") })
        let tb = try XLSXReader.sheets(files[0])["Trial Balance"]!.dropFirst(4).prefix { $0.count > 1 }.filter { $0[1] == LedgerAccount.sales }
        XCTAssertEqual(tb.map { XLSXReader.minor($0[5], decimals: 2) }, [-99], "September only: r2 of October is not in it")

        // The month still running is reported as of the last night.
        XCTAssertEqual(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).asOf.description, "2026-10-03")
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-12")!))
    }

    /// A workspace whose nights of 2026-10-21 and 2026-11-02 wrote October's month-end set while
    /// October was open, and that set's finance workbook.
    func octoberWrittenOpen() throws -> (TestWorkspace, URL) {
        let ws = try TestWorkspace()
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("c1", purchased: "2026-10-20T10:00:00Z")]) + "\n")
        try ws.run("2026-10-21")
        try ws.run("2026-11-02")
        return (ws, ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx"))
    }

    /// `close` writes again the month-end sets of the months it closes: written while they were
    /// open, they said so on every page and on Run Info, and the nights no longer write a closed
    /// month's set, so they said it for good. A month with no set is left without one.
    func testCloseWritesTheClosedMonthsSetAgainAsClosed() throws {
        let (ws, october) = try octoberWrittenOpen()
        defer { ws.remove() }
        func closedThrough() throws -> String? { try XLSXReader.sheets(october)["Run Info"]?.first { $0.first == "Closed through" }?[1] }
        XCTAssertEqual(try closedThrough(), "no month closed")
        let close = try Resilience.cli(["close", "2026-10", "--by", "t", "--as-of", "2026-11-02", "--workspace", ws.root.path])
        XCTAssertEqual(close.status, 0, close.err)
        XCTAssertTrue(close.out.contains("  2026-10's set written again, closed (it said the month was open):\n  wrote \(ws.root.path)/reports/2026-10-31/finance-2026-10-31.xlsx"), close.out)
        XCTAssertFalse(close.out.contains("2026-09"), close.out)
        // Each file is told against the version there before, as `report --period` tells it: the
        // finance workbook changed (the month closed since), the reconciliation one did not (it
        // was said "wrote", as though it were new).
        XCTAssertTrue(close.out.contains("finance-2026-10-31.xlsx\n    other bytes than the version written "), close.out)
        XCTAssertTrue(close.out.contains("a month was closed since"), close.out)
        XCTAssertTrue(close.out.contains("reconciliation-2026-10-31.xlsx\n    the same bytes as the version written "), close.out)
        // The registrations' head after its files is printed, to keep, and `verify --runs` lists
        // it (a README review: a close's head was listed, as a report's, but never printed).
        let head = try XCTUnwrap(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read { try $0.reportFilesHead() })
        XCTAssertTrue(close.out.contains("  report files: \(head) (the registrations' chain head after these files;"), close.out)
        let runs = try Resilience.cli(["verify", "--runs", "--workspace", ws.root.path])
        XCTAssertTrue(runs.out.split(separator: "\n").contains { $0.hasPrefix("  report or close at ") && $0.hasSuffix(head) }, runs.out)
        // The whole time it was written at, to find a head kept (it was cut after the hour).
        XCTAssertNotNil(runs.out.range(of: #"  report or close at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z +[0-9a-f]{64}"#, options: .regularExpression), runs.out)
        XCTAssertEqual(try closedThrough(), "2026-10")
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-09-30").path))
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        XCTAssertEqual(try Resilience.cli(["verify", "--workbook", october.path, "--workspace", ws.root.path]).status, 0)
        // Written by the close, in the second it was recorded: a later `report --period` does not
        // say the month was closed since (it did), only the night that ran since.
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("c2", purchased: "2026-11-02T10:00:00Z")]) + "\n")
        try ws.run("2026-11-03")
        let again = try Resilience.cli(["report", "--period", "2026-10", "--workspace", ws.root.path])
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertTrue(again.out.contains("by `iapledger report` (or `close`)"), again.out)
        XCTAssertFalse(again.out.contains("closed since"), again.out)
    }

    /// A month the config closes (`[periods] closed_through`, recorded by a night): the night
    /// writes its month-end set again, closed, as `close` does (it kept saying "still open" on
    /// every page until `report --period` wrote it). Once: the next night leaves it.
    func testANightWritesAgainTheSetOfAMonthTheConfigCloses() throws {
        let (ws, october) = try octoberWrittenOpen()
        defer { ws.remove() }
        func closedThrough() throws -> String? { try XLSXReader.sheets(october)["Run Info"]?.first { $0.first == "Closed through" }?[1] }
        func registrations() throws -> Int {
            try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read { try $0.reportFiles(path: "reports/2026-10-31/finance-2026-10-31.xlsx").count }
        }
        XCTAssertEqual(try closedThrough(), "no month closed")
        let before = try registrations()
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-10\"\n")
        // (In the second the set was written, most likely: told by runs, not by time.)
        try ws.run("2026-11-03")
        XCTAssertEqual(try closedThrough(), "2026-10")
        XCTAssertEqual(try registrations(), before + 1)
        XCTAssertEqual(try XLSXReader.sheets(october)["Summary"]?.contains { $0.contains { $0.contains("still open") } }, false)
        // The next night leaves it as it is.
        try ws.run("2026-11-04")
        XCTAssertEqual(try registrations(), before + 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-09-30").path))
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        XCTAssertEqual(try Resilience.cli(["verify", "--workbook", october.path, "--workspace", ws.root.path]).status, 0)
        // Written by the night that recorded the close: `report --period` does not say the month
        // was closed since.
        let period = try Resilience.cli(["report", "--period", "2026-10", "--workspace", ws.root.path])
        XCTAssertEqual(period.status, 0, period.err)
        XCTAssertFalse(period.out.contains("closed since"), period.out)
    }

    /// A sale of an earlier month, still open, that waited for its rule and is posted tonight:
    /// the night writes that month's set again when iapledger wrote it before, so that no set
    /// under reports/ leaves out what the ledger holds for its month (it stayed as written,
    /// and trace sent an auditor to rows that held other postings). A month whose set was never
    /// written is left to `report --period`.
    func testANightWritesAgainAnEarlierMonthsSetItPostsInto() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header
            + "ord-7,acct-7,j7,coins.100,1,100,2026-07-10T10:00:05Z,production,DEU,,\n"
            + "ord-8,acct-8,a8,coins.100,1,100,2026-08-10T10:00:05Z,production,DEU,,\n")
        try ws.write("inbox/receipts/a.jsonl", [
            Receipt.response([Receipt.item("j7", purchased: "2026-07-10T10:00:00Z")]),
            Receipt.response([Receipt.item("a8", purchased: "2026-08-10T10:00:00Z")]),
            Receipt.response([Receipt.item("u8", purchased: "2026-08-11T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        let first = try ws.run("2026-10-07")
        XCTAssertEqual(first.counts.entriesPosted, 1, "u8 (USD); j7 and a8 wait for EUR rates")
        let august = ws.root.appendingPathComponent("reports/2026-08-31/finance-2026-08-31.xlsx")
        _ = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-08")!)
        XCTAssertEqual(try XLSXReader.sheets(august)["Journal"]!.dropFirst(4).dropLast(3).map { $0[5] }, ["u8", "u8", "u8"])

        try ws.append("rules/fx.csv", "\n2026-07,EUR,1.01\n2026-08,EUR,1.02\n")
        let second = try ws.run("2026-11-02")
        XCTAssertEqual(second.counts.entriesPosted, 2)
        XCTAssertTrue(second.workbooks.contains(august), "\(second.workbooks)")
        // September's set (written by the first night, as the month before): its balances are
        // cumulative, and a8 and j7 of earlier months move them, so it is written again too.
        let september = ws.root.appendingPathComponent("reports/2026-09-30/finance-2026-09-30.xlsx")
        XCTAssertTrue(second.workbooks.contains(september), "\(second.workbooks)")
        XCTAssertEqual(Set(try XLSXReader.sheets(august)["Journal"]!.dropFirst(4).dropLast(3).map { $0[5] }), ["u8", "a8"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-07-31").path),
                       "July's set was never written")
        // Trace places a8 in August's set as it now is, with nothing to warn of.
        let trace = try ws.workspace.openExistingLedger().1.read { r in
            try TraceOutput.checked(XCTUnwrap(r.traceTransaction("a8", asOf: Day(iso: "2026-11-02"))), in: ws.workspace, reader: r)
        }
        XCTAssertEqual(trace.reports.map(\.workbook), ["reports/2026-08-31/finance-2026-08-31.xlsx"])
        XCTAssertEqual(trace.reports.map(\.written), [true])
        XCTAssertEqual(trace.reports.map(\.stale), [nil])
        // Had the set stayed as written, trace would say so: the entries posted after it.
        let registered = try ws.workspace.openExistingLedger().1.read { r in
            (try r.reportFiles(path: "reports/2026-08-31/finance-2026-08-31.xlsx"),
             try r.reportFiles(inFolder: "reports/2026-08-31").count)
        }
        XCTAssertEqual(registered.0.count, 2, "by report, then by the night")
        // Two sets of three workbooks, but for the reconciliation workbook the night wrote again
        // with the same bytes (not registered twice).
        XCTAssertEqual(registered.1, 5)
        XCTAssertEqual(try ws.workspace.openExistingLedger().1.read { r in try r.reportFiles(path: "reports/2026-08-31/reconciliation-2026-08-31.xlsx") }.map(\.writtenBy), ["report"])
        let posted = try ws.workspace.openExistingLedger().1.read { r in
            try registered.0.map { try r.entriesPosted(after: $0, book: "production", from: Day(iso: "2026-08-01")!, through: Day(iso: "2026-08-31")!) }
        }
        // (The report's file is judged against the nights registered before it, whatever second
        // it was written in: u8 is not counted.)
        XCTAssertEqual(posted, [1, 0], "a8 posted after report wrote the set, none after the night wrote it again")
    }

    /// A set written after its date (the month before's, written again each night while it is
    /// open) says on every printed page whose ledger it shows and whether its month is closed:
    /// two printouts "as of 2026-10-31" of different nights could hold different figures, with
    /// nothing on the page to tell them apart. A night's own set says nothing more.
    func testASetWrittenAfterItsDateSaysWhichNightsLedgerItShows() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("h1", purchased: "2026-10-20T10:00:00Z")]) + "\n")
        try ws.run("2026-10-31")
        try ws.run("2026-11-02")
        func header(_ path: String) throws -> String {
            let xml = try XLSXParts.read(ws.root.appendingPathComponent(path), "xl/worksheets/sheet1.xml")
            guard let a = xml.range(of: "<oddHeader>"), let b = xml.range(of: "</oddHeader>") else { return "" }
            return String(xml[a.upperBound..<b.lowerBound])
        }
        XCTAssertEqual(try header("reports/2026-11-02/finance-2026-11-02.xlsx"), "&amp;LIn-app purchase ledger, production book, as of 2026-11-02")
        XCTAssertEqual(try header("reports/2026-10-31/finance-2026-10-31.xlsx"),
                       "&amp;LIn-app purchase ledger, production book, as of 2026-10-31; the ledger after the night of 2026-11-02 (2026-10 still open: its figures may change until it is closed)")
        _ = try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: ws.workspace, asOf: Day(iso: "2026-11-02")!, closedBy: "carol", closedAt: "2026-11-02T09:00:00Z")
        _ = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!)
        XCTAssertEqual(try header("reports/2026-10-31/finance-2026-10-31.xlsx"),
                       "&amp;LIn-app purchase ledger, production book, as of 2026-10-31; the ledger after the night of 2026-11-02 (2026-10 closed)")
    }

    /// A month-end reconciliation workbook written again by a later night (or `report
    /// --period`) shows the state of the month's last run: an exception whose sale a later run
    /// booked (it waited for its rule) has no amount there, as on the night itself; it showed
    /// the amount of a sale in a later month's books, so the filed copy could not be
    /// reproduced.
    func testAMonthEndReconciliationWorkbookKeepsItsRunsAmounts() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-8,acct-8,q8,coins.100,2,200,2026-08-20T10:00:05Z,production,DEU,,\n"
                     + "ord-9,acct-9,s8,coins.100,1,100,2026-08-20T10:00:05Z,production,DEU,,\n")
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("q8", purchased: "2026-08-20T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("s8", purchased: "2026-08-20T10:00:00Z")], environment: "Sandbox") + "\n")
        let august = ws.root.appendingPathComponent("reports/2026-08-31/reconciliation-2026-08-31.xlsx")
        // The sandbox workbook's list of test purchases credited in production, alike.
        func sandboxRow() throws -> [String] {
            try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-08-31/sandbox-2026-08-31.xlsx"))["Credited in Production"]!.first { $0.first == "s8" })
        }
        func row() throws -> [String] {
            try XCTUnwrap(try XLSXReader.sheets(august)["Exceptions"]!.first { $0.contains("q8") && $0.contains("QUANTITY_MISMATCH") })
        }
        try ws.run("2026-08-31")
        let atMonthEnd = try row()
        XCTAssertEqual(atMonthEnd[5], "", "no EUR rate for 2026-08: the sale is not booked, no amount")
        let sandboxAtMonthEnd = try sandboxRow()
        XCTAssertEqual(sandboxAtMonthEnd[4], "", "\(sandboxAtMonthEnd)")
        try ws.append("rules/fx.csv", "\n2026-08,EUR,1.02\n")
        let night = try ws.run("2026-09-02")
        XCTAssertEqual(night.counts.entriesPosted, 2)
        XCTAssertTrue(night.workbooks.contains(august))
        XCTAssertEqual(try row(), atMonthEnd, "as the run of 2026-08-31 left it")
        XCTAssertEqual(try sandboxRow(), sandboxAtMonthEnd, "as the reconciliation workbook of the same date (it showed 1.09 EUR)")
        _ = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-08")!)
        XCTAssertEqual(try row(), atMonthEnd)
        XCTAssertEqual(try sandboxRow(), sandboxAtMonthEnd)
        let sandboxNow = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-09-02/sandbox-2026-09-02.xlsx"))["Credited in Production"]!.first { $0.first == "s8" })
        XCTAssertEqual(Array(sandboxNow[4...5]), ["1.09", "EUR"], "the night's own set: booked")
        // The night's own set shows the amount, now booked.
        let september = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-09-02/reconciliation-2026-09-02.xlsx"))["Exceptions"]!
        XCTAssertEqual(september.first { $0.contains("q8") && $0.contains("QUANTITY_MISMATCH") }?[5], "1.09")
    }

    /// A month no night had reached (history read by a later first night: the demo's earlier
    /// months) showed 0 open exceptions in every category, as a clean month would: its
    /// reconciliation Summary says it was not reconciled and leaves the counts empty.
    func testAMonthNoNightReachedSaysItWasNotReconciled() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-8,acct-8,q8,coins.100,2,200,2026-10-20T10:00:05Z,production,USA,,\n")
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("q8", purchased: "2026-10-20T10:00:00Z")]) + "\n")
        let night = try ws.run("2026-11-02")
        let october = ws.root.appendingPathComponent("reports/2026-10-31/reconciliation-2026-10-31.xlsx")
        XCTAssertTrue(night.workbooks.contains(october))
        let summary = try XCTUnwrap(try XLSXReader.sheets(october)["Summary"])
        let quantity = try XCTUnwrap(summary.first { $0.first == "QUANTITY_MISMATCH" })
        XCTAssertEqual(Array(quantity.dropFirst(2)).filter { !$0.isEmpty }, [], "no count where nothing was reconciled: \(quantity)")
        XCTAssertTrue(summary.contains { $0.first == "Not reconciled: no night had run on or before 2026-10-31" }, "\(summary)")
        XCTAssertFalse(summary.contains { $0.first?.hasPrefix("Total open exceptions") == true })
        // The count of exceptions without an amount is not "none" either: it was never counted.
        let withoutAmount = try XCTUnwrap(summary.first { $0.first?.hasPrefix("Open exceptions with no amount") == true }?.first)
        XCTAssertTrue(withoutAmount.contains("leave out: not reconciled"), withoutAmount)
        // The sandbox book's list of test purchases credited in production says so too (it
        // was an empty list, read as none credited).
        let sandbox = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-31/sandbox-2026-10-31.xlsx"))["Credited in Production"])
        XCTAssertTrue(sandbox.contains { $0.first?.hasPrefix("Not reconciled: no night had run on or before 2026-10-31") == true }, "\(sandbox)")
        let sandboxNow = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-02/sandbox-2026-11-02.xlsx"))["Credited in Production"])
        XCTAssertFalse(sandboxNow.contains { $0.first?.hasPrefix("Not reconciled") == true })
        // None credited: said in a row, as every empty list says it (a header alone).
        XCTAssertTrue(sandboxNow.contains { $0.first == "None: no sandbox transaction was credited by a production order on or before 2026-11-02" }, "\(sandboxNow)")
        // The finance workbook's Run Info lists of records not posted and of findings say so
        // too, each in a row (they were a header alone); the night's own set says none open.
        let info = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx"))["Run Info"])
        XCTAssertEqual(info.filter { $0.first?.hasPrefix("None known: no night had run on or before 2026-10-31") == true }.count, 2, "\(info)")
        let infoNow = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-02/finance-2026-11-02.xlsx"))["Run Info"])
        XCTAssertTrue(infoNow.contains { $0.first == "None: no record read by 2026-11-02 was still pending or rejected on that day" }, "\(infoNow)")
        XCTAssertTrue(infoNow.contains { $0.first == "None open on 2026-11-02" }, "\(infoNow)")
        XCTAssertEqual(summary.first { $0.first?.hasPrefix("Matched order/transaction pairs (") == true }?.dropFirst().first, "not reconciled")
        XCTAssertTrue(summary.contains { $0.first?.hasPrefix("Matched order/transaction pairs: not reconciled (production and sandbox, each sale booked or still waiting). Resolved since the previous night: not reconciled.") == true },
                      "\(summary.prefix(4))")
        XCTAssertTrue(summary.first { $0.first == "Reconciliation state" }?.dropFirst().first?.hasPrefix("no run on or before 2026-10-31: NOT RECONCILED") == true)
        // Its lists say so in their one row, where empty lists read as a clean month.
        let sheets = try XLSXReader.sheets(october)
        for name in ["Exceptions", "Resolved", "Pending", "Rejected"] {
            XCTAssertTrue(sheets[name]!.contains { $0.first?.hasPrefix("Not reconciled: no night had run on or before 2026-10-31") == true }, name)
        }
        // The night's own set has the count, and no such row.
        XCTAssertFalse(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-02/reconciliation-2026-11-02.xlsx"))["Exceptions"]!
                        .contains { $0.first?.hasPrefix("Not reconciled") == true })
        let now = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-02/reconciliation-2026-11-02.xlsx"))["Summary"])
        XCTAssertEqual(now.first { $0.first == "QUANTITY_MISMATCH" }?[2], "1")
    }

    /// The same, with the night stopped after its commit before it wrote August's set: the
    /// re-run (nothing new to read or post) writes it, judging by the ledger, not by what it
    /// posted itself (it wrote only its own and September's sets).
    func testARunAgainAfterAStopWritesTheEarlierMonthsSetTheNightDidNot() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-8,acct-8,a8,coins.100,1,100,2026-08-10T10:00:05Z,production,DEU,,\n")
        try ws.write("inbox/receipts/a.jsonl", [
            Receipt.response([Receipt.item("a8", purchased: "2026-08-10T10:00:00Z")]),
            Receipt.response([Receipt.item("u8", purchased: "2026-08-11T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-07")
        _ = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-08")!)
        try ws.append("rules/fx.csv", "\n2026-08,EUR,1.02\n")
        let copy = ws.root.deletingLastPathComponent().appendingPathComponent(ws.root.lastPathComponent + "-log")
        defer { try? FileManager.default.removeItem(at: copy) }
        try Resilience.copy(ws.root, to: copy)
        let log = copy.appendingPathComponent("checkpoints.log")
        let args = ["run", "--as-of", "2026-10-08", "--workspace"]
        XCTAssertEqual(try Resilience.cli(args + [copy.path], environment: ["IAPLEDGER_TEST_CHECKPOINT_LOG": log.path]).status, 0)
        let point = try XCTUnwrap(try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
            .map { $0.split(separator: "\t", maxSplits: 1) }.first { $0[1].hasPrefix("report:earlier month 2026-08") }.map { String($0[0]) })
        let stopped = try Resilience.cli(args + [ws.root.path], environment: ["IAPLEDGER_TEST_KILL_AT": point])
        XCTAssertEqual(stopped.reason, .uncaughtSignal)
        let august = ws.root.appendingPathComponent("reports/2026-08-31/finance-2026-08-31.xlsx")
        XCTAssertEqual(try XLSXReader.sheets(august)["Journal"]!.dropFirst(4).dropLast(3).map { $0[5] }, ["u8", "u8", "u8"], "as report wrote it")
        let again = try Resilience.cli(args + [ws.root.path])
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertTrue(again.out.contains("nothing new since run 2"), again.out)
        XCTAssertTrue(again.out.contains("wrote \(august.path)"), again.out)
        XCTAssertEqual(Set(try XLSXReader.sheets(august)["Journal"]!.dropFirst(4).dropLast(3).map { $0[5] }), ["u8", "a8"])
    }

    /// A set written again for a date a night ran on tells that night's run, as the night's own
    /// set did: `report --period` of the running month rewrites the night's workbooks byte for
    /// byte (it dropped the run's number, counts and input files), and the month before's set,
    /// written again by a later night, keeps its last night's run and says whose totals it shows.
    func testASetWrittenAgainForANightsDateKeepsThatNightsRun() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("k1", purchased: "2026-10-30T10:00:00Z")]) + "\n")
        let october = try ws.run("2026-10-31")
        let finance = ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx")
        let nightBytes = try october.workbooks.map { try Data(contentsOf: $0) }
        let againFiles = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).files
        let again = againFiles.map(\.url)
        XCTAssertEqual(again, october.workbooks)
        XCTAssertEqual(try again.map { try Data(contentsOf: $0) }, nightBytes, "the night's workbooks, byte for byte")
        // Each says so, naming the version it compared with.
        for f in againFiles where !f.kept {
            XCTAssertTrue(f.earlier?.hasPrefix("the same bytes as the version written ") == true && f.earlier?.hasSuffix(" by the night of run \(october.runId)") == true,
                          "\(f.url.lastPathComponent): \(f.earlier ?? "nil")")
        }

        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("k2", purchased: "2026-11-01T10:00:00Z")]) + "\n")
        let november = try ws.run("2026-11-01")
        XCTAssertTrue(november.workbooks.contains(finance))
        let info = try XCTUnwrap(XLSXReader.sheets(finance)["Run Info"])
        func value(_ label: String) -> String? { info.first { $0.first == label }?[1] }
        XCTAssertEqual(value("Run number"), "\(october.runId)")
        XCTAssertEqual(value("Records read this run"), "1")
        XCTAssertEqual(value("Entries posted this run (ledger, both books)"), "1")
        XCTAssertEqual(value("  of them in this book (production)"), "1")
        XCTAssertTrue(info.contains { $0.first == "inbox/receipts/a.jsonl" }, "\(info)")
        XCTAssertFalse(info.contains { $0.first == "inbox/receipts/b.jsonl" }, "\(info)")
        XCTAssertEqual(value("Ledger totals below"), "the whole ledger after the latest run (run \(november.runId), as of 2026-11-01)")
        // It says it was written again, and that no later run posted into its figures...
        XCTAssertEqual(value("Written again after run \(november.runId) (as of 2026-11-01)"),
                       "no entry dated on or before 2026-10-31 was posted after run \(october.runId): the figures are those of the set run \(october.runId) wrote")
        // ...until a late October sale arrives: the set of the same name now holds it, and says so.
        try ws.write("inbox/receipts/c.jsonl", Receipt.response([Receipt.item("k3", purchased: "2026-10-29T10:00:00Z"),
                                                                Receipt.item("k4", purchased: "2026-10-30T11:00:00Z")]) + "\n")
        let third = try ws.run("2026-11-02")
        let later = try XCTUnwrap(XLSXReader.sheets(finance)["Run Info"])
        XCTAssertEqual(later.first { $0.first == "Written again after run \(third.runId) (as of 2026-11-02)" }?[1],
                       "the figures include 2 entries dated on or before 2026-10-31 that run \(third.runId) posted after run \(october.runId): the set run \(october.runId) wrote did not have them")
        XCTAssertEqual(later.first { $0.first == "Run number" }?[1], "\(october.runId)")
        // The reader's count: every book's entries after a run, by bisection on the id.
        let reader = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        try reader.read { r in
            XCTAssertEqual(try r.entriesPosted(afterRun: october.runId, book: .production, through: Day(iso: "2026-10-31")!).map { [$0.count, Int($0.firstRun), Int($0.lastRun)] },
                           [2, Int(third.runId), Int(third.runId)])
            XCTAssertEqual(try r.entriesPosted(afterRun: october.runId, book: .production, through: Day(iso: "2026-11-30")!)?.count, 3)
            XCTAssertEqual(try r.entriesPosted(afterRun: november.runId, book: .production, through: Day(iso: "2026-11-30")!).map { [$0.count, Int($0.firstRun)] }, [2, Int(third.runId)])
            XCTAssertNil(try r.entriesPosted(afterRun: third.runId, book: .production, through: Day(iso: "2026-11-30")!))
            XCTAssertNil(try r.entriesPosted(afterRun: october.runId, book: .sandbox, through: Day(iso: "2026-11-30")!))
            XCTAssertEqual(try r.entriesPosted(afterRun: 0, book: .production, through: Day(iso: "2026-11-30")!)?.count, 4)
        }
    }

    /// The Summary says which of its figures are late entries (a closed month's sale posted on
    /// the first open day), month by month, and a closed month's set written again says which
    /// of its sales arrived after the close and are in a later month's figures instead.
    func testTheSummaryNamesLateEntriesInAndOutOfItsFigures() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        func lateNote(_ url: URL) throws -> String {
            try XCTUnwrap(XLSXReader.sheets(url)["Summary"]?.compactMap(\.first).first { $0.hasPrefix("Late entries") })
        }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("L-1", purchased: "2026-10-20T10:00:00Z")]) + "\n")
        try ws.run("2026-10-31")
        let october = ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx")
        let before = try lateNote(october)
        XCTAssertTrue(before.hasSuffix(": none."), before)
        _ = try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: ws.workspace, asOf: Day(iso: "2026-11-01")!,
                                    closedBy: "alice", closedAt: "2026-11-01T09:00:00Z")
        try ws.write("inbox/receipts/b.jsonl", [
            Receipt.response([Receipt.item("L-2", purchased: "2026-10-25T10:00:00Z")]),
            Receipt.response([Receipt.item("L-3", purchased: "2026-10-26T10:00:00Z", cancelled: "2026-10-28T10:00:00Z")]),
            Receipt.response([Receipt.item("L-4", purchased: "2026-11-01T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-11-02")
        let november = ws.root.appendingPathComponent("reports/2026-11-02/finance-2026-11-02.xlsx")
        // L-2, L-3 and its refund: 0.99 + 0.99 - 0.99 USD of October, in November's figures.
        XCTAssertEqual(try lateNote(november), "Late entries (dated in a month already closed when they arrived, posted on the first open day and marked late in the Journal and on the Refunds sheet): 2026-11 holds 2 sales and 1 refund of earlier months (net sales 1.98 USD, refunds 0.99 USD: net after refunds 0.99 USD).")
        // The night after the close wrote the closed month's set again (the month's last night
        // wrote it open): its Summary names what arrived after the close.
        let after = try lateNote(october)
        XCTAssertTrue(after.hasSuffix(": 2 sales and 1 refund dated on or before 2026-10-31 were posted after the month was closed (arrived late, or waited for a rule or their order) and are in later months' figures, not these (net sales 1.98 USD, refunds 0.99 USD: net after refunds 0.99 USD)."), after)
        let againFiles = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).files
        XCTAssertTrue(againFiles.map(\.url).contains(october))
        // Written again by `report --period`, it has that night's bytes, and says so.
        let earlier = try XCTUnwrap(againFiles.first { $0.url == october }?.earlier)
        XCTAssertTrue(earlier.hasPrefix("the same bytes as the version written ") && earlier.hasSuffix(" by the night of run 2"), earlier)
        // Written again after a change of the config alone (the journal cap; a layout's is
        // alike): no night, no close since, and it says so (it said the ledger changed, sending
        // finance to look for a change that never was).
        try TestWorkspace.appendText(ws.root.appendingPathComponent("iapledger.toml"), "\n[reports]\njournal_row_cap = 1\n")
        let layoutOnly = try XCTUnwrap(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).files.first { $0.url == october }?.earlier)
        XCTAssertTrue(layoutOnly.contains(", which it replaces: no night ran and no month was closed since, so the layouts, the config (the journal cap) or iapledger's version changed since"), layoutOnly)
        // A night between two reports, in the same second as the first (stamped to the second,
        // it was taken for one before it): counted.
        try ws.run("2026-11-03")
        let afterNight = try XCTUnwrap(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).files.first { $0.url == october }?.earlier)
        XCTAssertTrue(afterNight.contains("which it replaces: the ledger changed: 1 night ran since"), afterNight)
    }

    /// The note's words for refunds and their reversals: each kind counted apart (a late refund
    /// and its reversal are "1 refund and 1 refund reversal", not "0 refunds"), a kind with none
    /// left out, and the verb by the number of entries.
    func testTheLateEntriesNoteCountsEachKindApart() {
        let asOf = Day(iso: "2026-10-31")!
        var late = LateEntries()
        XCTAssertEqual(FinanceReport.lateEntriesText(late, asOf: asOf, currency: "USD"), "none")
        late.byMonth = [(Month(iso: "2026-11")!, 0, 1, 1, 0, 0), (Month(iso: "2026-12")!, 3, 0, 1, 123_000, 123_456)]
        late.postedLater = (0, 0, 1, 0, 99)
        XCTAssertEqual(FinanceReport.lateEntriesText(late, asOf: asOf, currency: "USD"),
                       "2026-11 holds 1 refund and 1 refund reversal of earlier months (refunds 0.00 USD: net after refunds 0.00 USD); "
                       + "2026-12 holds 3 sales and 1 refund reversal of earlier months (net sales 1,230.00 USD, refunds -4.56 USD: net after refunds 1,234.56 USD); "
                       + "1 refund reversal dated on or before 2026-10-31 was posted after the month was closed (arrived late, or waited for a rule or their order) and is in later months' figures, not these (refunds -0.99 USD: net after refunds 0.99 USD)")
        late.postedLater = (2, 1, 1, 10, -5)
        XCTAssertTrue(FinanceReport.lateEntriesText(late, asOf: asOf, currency: "USD")
            .hasSuffix("2 sales, 1 refund and 1 refund reversal dated on or before 2026-10-31 were posted after the month was closed (arrived late, or waited for a rule or their order) and are in later months' figures, not these (net sales 0.10 USD, refunds 0.15 USD: net after refunds -0.05 USD)"))
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
        XCTAssertTrue(closed.workbooks.contains { $0.path.hasSuffix("reports/2026-10-31/finance-2026-10-31.xlsx") }, "October, closed tonight: written once more, closed")
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("m2", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        let after = try ws.run("2026-11-04")
        XCTAssertFalse(after.workbooks.contains { $0.path.contains("2026-10-31") }, "October is closed: written no more")
    }

    /// A month-end set written again after its date (the month before, by a later night) shows
    /// reconciliation, records waiting and findings as they stood on its as-of date: nothing a
    /// later run found, a sale that waited then and was posted later, never a negative age.
    func testAMonthEndSetWrittenLaterShowsTheStateOfItsDate() throws {
        let noOctoberYen = TestWorkspace.defaultFX.split(separator: "\n").filter { !$0.contains("2026-10,JPY") }.joined(separator: "\n")
        let ws = try TestWorkspace(fx: noOctoberYen)
        defer { ws.remove() }
        let header = ReconciliationTests.header
        try ws.write("inbox/receipts/a.jsonl", [
            Receipt.response([Receipt.item("a1", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("w1", purchased: "2026-10-10T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/a.csv", header
            + "o-a1,acc-1,a1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
            + "o-w1,acc-2,w1,coins.100,1,100,2026-10-10T10:01:00Z,production,JPN,,\n")
        try ws.run("2026-10-20")
        XCTAssertEqual(try ws.workspace.openExistingLedger().1.read { try $0.pendingTransactions().map(\.transactionId) }, ["w1"],
                       "w1 waits for October's yen rate")

        // Night 2: the rate arrives (w1 is posted), a credit with no purchase and a retryable record.
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX)
        try ws.write("inbox/receipts/b.jsonl", #"{"response": {"status": 21005, "is-retryable": true}, "transaction_id": "u9"}"# + "\n")
        try ws.write("inbox/orders/b.csv", header + "o-zz,acc-3,zz,coins.100,1,100,2026-11-02T09:00:00Z,production,USA,,\n"
            + "o-sb1,acc-4,sb1,coins.100,1,100,2026-10-15T10:01:00Z,production,USA,,\n")
        // A sandbox purchase of October that the backend credited in production, found on night 2.
        try ws.write("inbox/receipts/b2.jsonl", Receipt.response([Receipt.item("sb1", purchased: "2026-10-15T10:00:00Z")], environment: "Sandbox") + "\n")
        let night = try ws.run("2026-11-03")
        XCTAssertTrue(night.workbooks.contains { $0.path.hasSuffix("2026-10-31/reconciliation-2026-10-31.xlsx") })

        let now = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-03/reconciliation-2026-11-03.xlsx"))
        let october = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-31/reconciliation-2026-10-31.xlsx"))
        func column(_ sheet: [[String]], _ title: String) -> [String] {
            guard let h = sheet.firstIndex(where: { $0.contains(title) }), let c = sheet[h].firstIndex(of: title) else { return [] }
            return sheet[(h + 1)...].map { c < $0.count ? $0[c] : "" }.filter { !$0.isEmpty }
        }
        XCTAssertTrue(column(now["Exceptions"]!, "Order").contains("o-zz"), "the nightly set lists what night 2 found")
        XCTAssertFalse(column(october["Exceptions"]!, "Order").contains("o-zz"), "found on 2026-11-03: not open on 2026-10-31")
        for book in [now, october] {
            for sheet in ["Exceptions", "Pending", "Rejected"] {
                let ages = column(book[sheet]!, "Age (days)").compactMap { Int($0) }
                XCTAssertTrue(ages.allSatisfy { $0 >= 0 }, "\(sheet): \(ages)")
            }
        }
        func credited(_ day: String) throws -> [String] {
            try XLSXReader.sheets(ws.root.appendingPathComponent("reports/\(day)/sandbox-\(day).xlsx"))["Credited in Production"]!.flatMap { $0 }
        }
        XCTAssertTrue(try credited("2026-11-03").contains("sb1"), "found on night 2")
        XCTAssertFalse(try credited("2026-10-31").contains("sb1"), "found on 2026-11-03: not on the sandbox book's October set")
        let octoberPending = october["Pending"]!.flatMap { $0 }
        XCTAssertTrue(octoberPending.contains("w1"), "w1 waited for a rule on 2026-10-31 (posted on 2026-11-03)")
        // Its purchase date is listed (the day its sale is dated), beside its product; the
        // record waiting for verification has none.
        let w1 = try XCTUnwrap(october["Pending"]!.first { $0.contains("w1") })
        let purchased = try XCTUnwrap(october["Pending"]!.first { $0.contains("Purchase date") }?.firstIndex(of: "Purchase date"))
        XCTAssertEqual(w1[purchased], String(Day(iso: "2026-10-10")!.daysSinceEpoch + 25_569), "\(w1)")
        XCTAssertFalse(octoberPending.contains { $0.hasPrefix("inbox/receipts/b.jsonl") }, "a record read on 2026-11-03")
        let nowPending = now["Pending"]!.flatMap { $0 }
        XCTAssertFalse(nowPending.contains("w1"), "posted")
        XCTAssertTrue(nowPending.contains("inbox/receipts/b.jsonl:1"))
        let state = october["Summary"]!.first { $0.first == "Reconciliation state" }
        XCTAssertEqual(state?.dropFirst().first, "run 1, as of 2026-10-20 (the last run on or before 2026-10-31)")
        XCTAssertEqual(october["Summary"]!.first { $0.first?.hasPrefix("Matched order/transaction pairs (") == true }?.dropFirst().first, "2",
                       "run 1 matched a1 and w1 with their orders")

        let info = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx"))["Run Info"]!
        XCTAssertEqual(info.first { $0.first == "Records not posted and findings below" }?.dropFirst().first,
                       "as they stood after run 1, as of 2026-10-20 (the last run on or before 2026-10-31)")
        XCTAssertFalse(info.flatMap { $0 }.contains("inbox/receipts/b.jsonl"), "read after 2026-10-31")
        XCTAssertTrue(info.flatMap { $0 }.contains("w1"), "the MISSING_RULE finding open on 2026-10-31")
        let sandboxInfo = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-31/sandbox-2026-10-31.xlsx"))["Run Info"]!
        XCTAssertFalse(sandboxInfo.flatMap { $0 }.contains("w1"), "a production transaction's finding is not on the sandbox book's Run Info")

        // A finding about a transaction no book holds goes by its record's environment.
        try ws.write("inbox/receipts/c.jsonl", Receipt.response([Receipt.item("s0", quantity: 0, purchased: "2026-11-02T10:00:00Z")], environment: "Sandbox") + "\n")
        let third = try ws.run("2026-11-04")
        func runInfo(_ prefix: String) throws -> [String] {
            try XLSXReader.sheets(third.workbooks.first { $0.lastPathComponent == "\(prefix)-2026-11-04.xlsx" }!)["Run Info"]!.flatMap { $0 }
        }
        XCTAssertTrue(try runInfo("sandbox").contains("s0"), "the sandbox receipt's INVALID_TRANSACTION")
        XCTAssertFalse(try runInfo("finance").contains("s0"))

        // The finance Summary says what its figures leave out: its figures are the entries
        // dated on or before its date as the ledger holds them when written, so a sale that
        // waited on that date and has been posted since is in them (w1, in October's figures
        // written on 2026-11-03), and a record still waiting is left out whenever it was read.
        func leftOut(_ path: String) throws -> String? {
            try XLSXReader.sheets(ws.root.appendingPathComponent(path))["Summary"]!.first { $0.first?.hasPrefix("Not in these figures") == true }?.first
        }
        XCTAssertTrue(try leftOut("reports/2026-10-20/finance-2026-10-20.xlsx")?.hasPrefix(
            "Not in these figures: 1 sale(s) dated on or before 2026-10-20 still waiting for a rule (a price, tax or FX rate missing) or for their order to name their storefront, and 0 receipt record(s) (of either book: a record's book is known once it verifies) still waiting for verification when this workbook was written") == true)
        let octoberLeftOut = try leftOut("reports/2026-10-31/finance-2026-10-31.xlsx")
        XCTAssertTrue(octoberLeftOut?.hasPrefix(
            "Not in these figures: 0 sale(s) dated on or before 2026-10-31 still waiting for a rule (a price, tax or FX rate missing) or for their order to name their storefront, and 1 receipt record(s) (of either book: a record's book is known once it verifies) still waiting") == true, octoberLeftOut ?? "no line")
        let octoberNet = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx"))["Journal"]!.flatMap { $0 }
        XCTAssertTrue(octoberNet.contains("w1"), "w1's sale, posted on 2026-11-03, is in October's figures")
        XCTAssertEqual(FinanceReport.grouped("-1234567.89"), "-1,234,567.89")
        XCTAssertEqual(FinanceReport.grouped("123"), "123")
        XCTAssertEqual(FinanceReport.grouped("1000.000"), "1,000.000")
        XCTAssertTrue(try leftOut("reports/2026-11-03/finance-2026-11-03.xlsx")?.hasPrefix(
            "Not in these figures: 0 sale(s) dated on or before 2026-11-03 still waiting for a rule (a price, tax or FX rate missing) or for their order to name their storefront, and 1 receipt record(s) (of either book: a record's book is known once it verifies) still waiting") == true)
    }
}
