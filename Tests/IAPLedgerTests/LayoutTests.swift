import Foundation
import XCTest
import LedgerTemplates
import ZIPFoundation
@testable import LedgerCore
@testable import LedgerReport
@testable import LedgerRun
@testable import LedgerStore

/// Workbook layouts read from `layouts/<workbook>.toml`: a workspace's file reorders, renames,
/// drops and re-formats exactly as it says; the shipped files give the workbooks of before; a
/// broken file stops the run naming the file and the key, with the ledger untouched.
final class LayoutTests: XCTestCase {
    let asOf = Day(iso: "2026-11-21")!
    var dirs: [URL] = []

    override func tearDown() { for d in dirs { try? FileManager.default.removeItem(at: d) } }

    /// A demo workspace (several currencies, refunds, sandbox data), not yet run.
    func demo(transactions: Int = 400, seed: UInt64 = 5) throws -> Workspace {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-layout-\(UUID().uuidString)")
        dirs.append(dir)
        _ = try DemoWorkspace.create(at: dir, transactions: transactions, seed: seed, asOf: asOf)
        return Workspace(dir)
    }

    func writeLayout(_ ws: Workspace, _ name: String, _ text: String) throws {
        try FileManager.default.createDirectory(at: ws.layoutsURL, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: ws.layoutsURL.appendingPathComponent(name))
    }

    static let customFinance = """
    [formats]
    date = "dd.mm.yyyy"

    [[sheet]]
    key = "journal"
    name = "Postings"
    title = "All postings ({book})"
    subtitle = ["As of {as_of}, in {reporting_currency} too.", "A second line."]

    [[sheet.table]]
    key = "postings"
    columns = [
      "entry",
      { key = "date" },
      { key = "account", title = "Ledger account", width = 50 },
      { key = "transaction" },
      "currency",
      { key = "amount", title = "Amount (transaction currency)", format = "#,##0{decimals} ;(#,##0{decimals})" },
      "amount_reporting",
    ]

    [[sheet]]
    key = "summary"
    name = "Overview 2026"

    [[sheet.table]]
    key = "by_month"
    columns = ["month", "refunds_reporting", "net_reporting", { key = "units", width = 7 }]

    [[sheet]]
    key = "trial_balance"
    """

    /// A totals row whose label column is left out keeps its label in the first column shown
    /// that is empty or text: the Trial Balance without `account` says "Total USD" in place of
    /// the book's name (its totals read as accounts); a row of figures only keeps none.
    func testATotalsRowKeepsItsLabelWhenItsColumnIsLeftOut() throws {
        let ws = try demo()
        try writeLayout(ws, "finance.toml", """
            [[sheet]]
            key = "trial_balance"

            [[sheet.table]]
            key = "balances"
            columns = ["book", "currency", "balance"]

            [[sheet]]
            key = "revenue_by_region"

            [[sheet.table]]
            key = "by_region"
            columns = ["month", "currency", "net"]

            [[sheet]]
            key = "refunds"

            [[sheet.table]]
            key = "refunds"
            columns = ["late", "posted", "net_reporting"]
            """)
        let result = try NightlyRun(workspace: ws, asOf: asOf).run()
        let book = try XLSXReader.sheets(try XCTUnwrap(result.workbooks.first { $0.lastPathComponent == "finance-2026-11-21.xlsx" }))
        let balances = try XCTUnwrap(book["Trial Balance"])
        XCTAssertTrue(balances.contains { $0.first == "Total USD" && $0.count > 1 && $0[1] == "USD" }, "\(balances)")
        XCTAssertTrue(balances.contains { $0.first == "Total all currencies (USD)" }, "\(balances)")
        XCTAssertFalse(balances.dropFirst(5).contains { $0.first == "production" && $0.count > 1 && $0[1].isEmpty })
        XCTAssertTrue(try XCTUnwrap(book["Revenue by Region"]).contains { $0.first == "Total" }, "the label moves to the month column")
        // An empty cell is taken before a text one: the Refunds total keeps its count of late entries.
        let refunds = try XCTUnwrap(book["Refunds"])
        XCTAssertTrue(refunds.contains { $0.count > 1 && $0[0] == "0 late" && $0[1] == "Total" }, "\(refunds.suffix(2))")
    }

    /// The Journal's control totals stand in its reporting-amount column: a layout without it
    /// has none (their labels stood over empty cells); with it, they close the sheet.
    func testTheJournalsControlTotalsNeedItsReportingAmountColumn() throws {
        let ws = try demo(transactions: 60)
        try writeLayout(ws, "finance.toml", "[[sheet]]\nkey = \"journal\"\n\n[[sheet.table]]\nkey = \"postings\"\ncolumns = [\"entry\", \"account\", \"currency\", \"amount\"]\n")
        let result = try NightlyRun(workspace: ws, asOf: asOf).run()
        let journal = try XCTUnwrap(try XLSXReader.sheets(try XCTUnwrap(result.workbooks.first { $0.lastPathComponent == "finance-2026-11-21.xlsx" }))["Journal"])
        XCTAssertGreaterThan(journal.count, 10)
        XCTAssertFalse(journal.contains { $0.first?.hasPrefix("Debits") == true }, "no control totals without the column they stand in")
        XCTAssertNotNil(Int(journal.last?.first ?? ""), "the last row is a posting: \(journal.last ?? [])")
    }

    func testAWorkspaceLayoutReordersRenamesDropsAndReformats() throws {
        let ws = try demo()
        try writeLayout(ws, "finance.toml", Self.customFinance)
        let result = try NightlyRun(workspace: ws, asOf: asOf).run()
        let finance = try XCTUnwrap(result.workbooks.first { $0.lastPathComponent == "finance-2026-11-21.xlsx" })

        // Sheets: the layout's, in its order, renamed; the others left out.
        XCTAssertEqual(try XLSXParts.sheetNames(finance), ["Postings", "Overview 2026", "Trial Balance"])
        let book = try XLSXReader.sheets(finance)

        // Journal: renamed, its own title and two subtitle lines, columns chosen, reordered, renamed.
        let postings = try XCTUnwrap(book["Postings"])
        XCTAssertEqual(postings[0].first, "All postings (production)")
        XCTAssertEqual(postings[1].first, "As of 2026-11-21, in USD too.")
        XCTAssertEqual(postings[2].first, "A second line.")
        XCTAssertEqual(postings[4], ["Entry", "Date", "Ledger account", "Transaction", "Currency", "Amount (transaction currency)",
                                     "Amount (USD)"])
        XCTAssertTrue(postings.dropFirst(5).allSatisfy { $0.count == 7 })
        // Widths: the one changed, the others the shipped ones.
        let widths = try XLSXParts.columnWidths(finance, sheet: 0)
        XCTAssertEqual(widths[2], 50)
        XCTAssertEqual(widths[0], 9)
        XCTAssertEqual(widths[5], 14)

        // Number formats: the column's own, with each currency's decimals; the workbook's date format.
        let formats = try XLSXParts.cellFormats(finance, sheet: 0)
        func row(currency: String) throws -> Int {
            try XCTUnwrap(postings.firstIndex { $0.count > 4 && $0[4] == currency }, "a \(currency) posting") + 1
        }
        XCTAssertEqual(formats["F\(try row(currency: "JPY"))"], "#,##0 ;(#,##0)")
        XCTAssertEqual(formats["F\(try row(currency: "USD"))"], "#,##0.00 ;(#,##0.00)")
        if let threeDecimals = postings.firstIndex(where: { $0.count > 4 && ($0[4] == "KWD" || $0[4] == "BHD") }) {
            XCTAssertEqual(formats["F\(threeDecimals + 1)"], "#,##0.000 ;(#,##0.000)")
        }
        XCTAssertEqual(formats["G\(try row(currency: "JPY"))"], "#,##0.00;[Red]-#,##0.00", "the reporting amount keeps the workbook's money format")
        XCTAssertEqual(formats["B6"], "dd.mm.yyyy")

        // Summary: renamed, only the month table, its columns reordered; the totals row kept.
        let overview = try XCTUnwrap(book["Overview 2026"])
        // The header row is under the title and the lines of the shipped subtitle.
        let header = try XCTUnwrap(overview.firstIndex { $0.first == "Month" })
        XCTAssertEqual(header, 1 + 7 + 1 + 1, "title, seven subtitle lines, a blank row, the table's heading (the shipped layout's)")
        XCTAssertEqual(overview[header - 1], ["By month (USD)"])
        XCTAssertEqual(overview[header], ["Month", "Refunds (USD)", "Net sales (USD)", "Quantity sold"])
        XCTAssertNotNil(overview.first { $0.first == "Total" })
        XCTAssertFalse(overview.contains { $0.first?.hasPrefix("By region (storefront)") == true })
        XCTAssertEqual(try XLSXParts.columnWidths(finance, sheet: 1)[3], 7)
        // The month chart follows its columns (net sales now in C, refunds in B); the region
        // chart, whose table is left out, is not drawn.
        let charts = try XLSXParts.entries(finance).filter { $0.hasPrefix("xl/charts/chart") }
        XCTAssertEqual(charts, ["xl/charts/chart1.xml"])
        let chart = try XLSXParts.read(finance, "xl/charts/chart1.xml")
        XCTAssertTrue(chart.contains("'Overview 2026'!$C$\(header + 2):$C$"), "net sales series in column C")
        XCTAssertTrue(chart.contains("'Overview 2026'!$B$\(header + 2):$B$"), "refunds series in column B")
        XCTAssertTrue(chart.contains("'Overview 2026'!$A$\(header + 2):$A$"), "months as categories")

        // The other workbooks keep the shipped layouts.
        let sandbox = try XCTUnwrap(result.workbooks.first { $0.lastPathComponent == "sandbox-2026-11-21.xlsx" })
        XCTAssertEqual(try XLSXParts.sheetNames(sandbox), ["Summary", "Trial Balance", "Journal", "Revenue by Region",
                                                            "Revenue by Product", "Refunds", "Credited in Production", "Run Info"])

        // trace finds a transaction's postings on the renamed sheet, below its two subtitle lines.
        let layouts = try ws.loadLayouts()
        let id = postings[5][3]
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let trace = try XCTUnwrap(try ledger.read { try $0.traceTransaction(id, asOf: asOf) })
        let placed = TraceOutput.placed(trace, layouts: layouts)
        XCTAssertEqual(placed.reports.first?.sheet, "Postings")
        let rows = try XCTUnwrap(placed.reports.first?.rows)
        XCTAssertFalse(rows.isEmpty)
        for r in rows { XCTAssertEqual(postings[r - 1][3], id, "row \(r)") }
    }

    /// Every workbook written by a run, by file name.
    func workbooks(_ ws: Workspace) throws -> [String: Data] {
        let result = try NightlyRun(workspace: ws, asOf: asOf).run()
        var out: [String: Data] = [:]
        for url in result.workbooks {
            out[url.deletingLastPathComponent().lastPathComponent + "/" + url.lastPathComponent] = try Data(contentsOf: url)
        }
        return out
    }

    func testTheShippedLayoutGivesTheWorkbooksOfBefore() throws {
        // No layouts folder (a workspace from before layouts): the shipped layouts.
        let plain = try demo(transactions: 300, seed: 9)
        try FileManager.default.removeItem(at: plain.layoutsURL)
        let expected = try workbooks(plain)
        XCTAssertEqual(expected.count, 6, "three workbooks, for the as-of date and the open month before")

        // The files `iapledger init` and `iapledger demo` copy.
        let initialised = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-layout-init-\(UUID().uuidString)")
        dirs.append(initialised)
        let created = try Workspace.create(at: initialised)
        let copied = try demo(transactions: 300, seed: 9)
        try FileManager.default.removeItem(at: copied.layoutsURL)
        try FileManager.default.copyItem(at: created.layoutsURL, to: copied.layoutsURL)
        XCTAssertEqual(try workbooks(copied), expected)
        XCTAssertEqual(try workbooks(try demo(transactions: 300, seed: 9)), expected)

        // Files that only list the sheet keys: every other value is the shipped one.
        let minimal = try demo(transactions: 300, seed: 9)
        for w in ReportWorkbook.allCases {
            try FileManager.default.removeItem(at: minimal.layoutsURL.appendingPathComponent(w.layoutFileName))
            try writeLayout(minimal, w.layoutFileName, w.sheets.map { "[[sheet]]\nkey = \"\($0.key)\"\n" }.joined(separator: "\n"))
        }
        XCTAssertEqual(try workbooks(minimal), expected)

        // And they are the sheets, headers and widths of the workbooks before layout files.
        let url = plain.reportDirectory(asOf: asOf).appendingPathComponent("finance-2026-11-21.xlsx")
        XCTAssertEqual(try XLSXParts.sheetNames(url), ["Summary", "Trial Balance", "Journal", "Revenue by Region",
                                                        "Revenue by Product", "Refunds", "Run Info"])
        let book = try XLSXReader.sheets(url)
        XCTAssertEqual(book["Summary"]![0].first, "Summary: in-app purchase revenue, production book")
        XCTAssertEqual(book["Summary"]!.first { $0.first == "Month" }, ["Month", "Quantity sold", "Gross (USD)", "Tax (USD)", "Net sales (USD)", "Commission (USD)",
                                             "Proceeds (USD)", "Refunds (USD)", "Commission returned (USD)", "Net after refunds (USD)", "Proceeds after refunds (USD)"])
        XCTAssertEqual(book["Trial Balance"]![4], ["Book", "Account", "Currency", "Debit", "Credit", "Balance", "Balance (USD)"])
        XCTAssertEqual(book["Journal"]![0].first, "Journal: production book")
        XCTAssertEqual(book["Journal"]![3], ["Entry", "Date", "Original date", "Late", "Kind", "Transaction", "Product", "Storefront",
                                             "Account", "Currency", "Amount", "Amount (USD)"])
        XCTAssertEqual(book["Revenue by Region"]!.first { $0.first == "Storefront" }, ["Storefront", "Month", "Currency", "Quantity sold", "Gross", "Tax", "Net sales", "Commission",
                                                       "Proceeds", "Refunds", "Commission returned", "Gross (USD)", "Tax (USD)", "Net sales (USD)",
                                                       "Commission (USD)", "Proceeds (USD)", "Refunds (USD)", "Commission returned (USD)"])
        XCTAssertEqual(Array(book["Refunds"]![3].suffix(3)), ["Net refunded (USD)", "Commission returned (USD)", "Proceeds clawed back (USD)"])
        XCTAssertEqual(try XLSXParts.columnWidths(url, sheet: 2), [9, 12, 13, 6, 16, 20, 32, 11, 30, 10, 14, 18])
        let recon = plain.reportDirectory(asOf: asOf).appendingPathComponent("reconciliation-2026-11-21.xlsx")
        XCTAssertEqual(try XLSXParts.sheetNames(recon), ["Summary", "Exceptions", "Resolved", "Pending", "Rejected"])
        XCTAssertTrue(try XLSXReader.sheets(recon)["Summary"]![2].first?.hasPrefix("Matched order/transaction pairs: ") == true)
    }

    func testBrokenLayoutsStopTheRunNamingTheFileAndTheKey() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("b1", purchased: "2026-10-02T10:00:00Z")]) + "\n")
        try ws.run("2026-10-03")
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("b2", purchased: "2026-10-03T10:00:00Z")]) + "\n")
        func ledgerBytes() throws -> [String: Data] {
            let names = try FileManager.default.contentsOfDirectory(atPath: ws.root.path).filter { $0.hasPrefix("ledger.sqlite") }
            return try Dictionary(uniqueKeysWithValues: names.map { ($0, try Data(contentsOf: ws.root.appendingPathComponent($0))) })
        }
        let before = try ledgerBytes()

        let journalTable = "[[sheet]]\nkey = \"journal\"\n\n[[sheet.table]]\nkey = \"postings\"\n"
        let cases: [(file: String, text: String, expect: [String])] = [
            ("finance.toml", "[[sheet]]\nkey = \"jounal\"\n", ["sheet \"jounal\"", "unknown sheet key", "journal"]),
            ("finance.toml", journalTable + "columns = [\"entry\", \"amout\"]\n", ["sheet \"journal\", table \"postings\", column \"amout\"", "unknown column key"]),
            ("finance.toml", "[[sheet]]\nkey = \"summary\"\n\n[[sheet.table]]\nkey = \"by_week\"\n", ["sheet \"summary\", table \"by_week\"", "unknown table key"]),
            ("finance.toml", "[[sheet]]\nkey = \"summary\"\nname = \"Journal\"\n\n[[sheet]]\nkey = \"journal\"\n",
             ["sheet \"journal\"", "also the name of sheet \"summary\""]),
            ("sandbox.toml", "[[sheet]]\nkey = \"summary\"\nname = \"A summary of the sandbox book, by month\"\n", ["sheet \"summary\"", "at most 31"]),
            ("finance.toml", "[[sheet]]\nkey = \"refunds\"\nname = \"Refunds/Reversals\"\n", ["sheet \"refunds\"", "\"/\""]),
            ("finance.toml", "[[sheet]]\nkey = \"refunds\"\nname = \"Refunds\\uFFFE\"\n", ["sheet \"refunds\"", "holds U+FFFE"]),
            ("finance.toml", "[[sheet]]\nkey = \"refunds\"\nname = \"Refunds\\t2\"\n", ["sheet \"refunds\"", "holds U+0009"]),
            ("finance.toml", "[[sheet]]\nkey = \"summary\"\nname = \"Journal (2)\"\n\n[[sheet]]\nkey = \"journal\"\n",
             ["sheet \"summary\"", "continuation"]),
            ("finance.toml", journalTable + "columns = [{ key = \"account\", width = 0 }]\n", ["column \"account\"", "width"]),
            ("finance.toml", journalTable + "columns = [{ key = \"account\", widht = 40 }]\n", ["column \"account\"", "unknown setting \"widht\""]),
            ("finance.toml", journalTable + "columns = [{ key = \"entry\", format = \"0{decimals}\" }]\n", ["column \"entry\"", "{decimals} is for money"]),
            ("finance.toml", journalTable + "columns = [{ key = \"account\", format = \"0.00\" }]\n", ["column \"account\"", "holds text"]),
            ("finance.toml", journalTable + "columns = [\"entry\", \"entry\"]\n", ["column \"entry\"", "listed twice"]),
            ("finance.toml", journalTable + "columns = []\n", ["table \"postings\"", "no columns"]),
            ("finance.toml", "[[sheet]]\nkey = \"journal\"\ntitle = \"Journal as of {asof}\"\n", ["sheet \"journal\"", "unknown placeholder {asof}"]),
            ("finance.toml", "[formats]\nmoney = \"#,##0{decimal}\"\n\n[[sheet]]\nkey = \"summary\"\n", ["[formats] money", "{decimal}"]),
            ("finance.toml", "[formats]\ndate = \"dd.mm.yyyy\"\n", ["lists no sheets"]),
            ("reconciliation.toml", "[[sheet]]\nkey = \"credited_in_production\"\n", ["sheet \"credited_in_production\"", "unknown sheet key", "reconciliation"]),
            ("finance.toml", "[[sheet]]\nkey = \"summary\"\nname = \"Summary\n", ["finance.toml:", "not valid TOML"]),
            ("finanse.toml", "[[sheet]]\nkey = \"summary\"\n", ["not a layout file"]),
        ]
        for c in cases {
            let url = ws.root.appendingPathComponent("layouts/\(c.file)")
            try ws.write("layouts/\(c.file)", c.text)
            XCTAssertThrowsError(try ws.run("2026-10-04"), c.text) { error in
                let message = String(describing: error)
                XCTAssertTrue(message.hasPrefix(url.path), "names the file: \(message)")
                for e in c.expect { XCTAssertTrue(message.contains(e), "\(message) should say \(e)") }
            }
            XCTAssertEqual(try ledgerBytes(), before, "the ledger is unchanged: \(c.text)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-10-04").path))
            try FileManager.default.removeItem(at: url)
        }
        // Fixed, the run goes on.
        XCTAssertEqual(try ws.run("2026-10-04").counts.entriesPosted, 1)
    }

    func testTheJournalExportFollowsTheJournalLayout() throws {
        let ws = try TestWorkspace(config: TestWorkspace.defaultConfig + "\n[reports]\njournal_row_cap = 5\n")
        defer { ws.remove() }
        try ws.write("inbox/receipts/r.jsonl", (1...4).map {
            Receipt.response([Receipt.item("90\($0)", purchased: "2026-10-0\($0)T10:00:00Z")])
        }.joined(separator: "\n"))
        try ws.write("inbox/receipts/s.jsonl", (1...3).map {
            Receipt.response([Receipt.item("80\($0)", purchased: "2026-10-0\($0)T10:00:00Z")], environment: "Sandbox")
        }.joined(separator: "\n"))
        try ws.write("layouts/finance.toml", """
            [[sheet]]
            key = "journal"
            name = "Grand livre"

            [[sheet.table]]
            key = "postings"
            columns = ["transaction", { key = "amount", title = "Montant" }]

            [[sheet]]
            key = "run_info"
            """)
        // The sandbox layout leaves the Journal out: no journal to export for that book (9 postings).
        try ws.write("layouts/sandbox.toml", "[[sheet]]\nkey = \"summary\"\n")
        let r = try ws.run("2026-10-07")
        let gz = try XCTUnwrap(r.workbooks.first { $0.lastPathComponent == "journal-2026-10-07.csv.gz" })
        let lines = try gunzip(gz).split(separator: "\n")
        XCTAssertEqual(lines.count, 13)
        XCTAssertEqual(lines[0], "Transaction,Montant")
        XCTAssertEqual(lines[1], "901,0.69")
        XCTAssertFalse(r.workbooks.contains { $0.lastPathComponent.hasPrefix("sandbox-journal") })
        let book = try XLSXReader.sheets(r.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") }!)
        let journal = try XCTUnwrap(book["Grand livre"])
        XCTAssertTrue(journal[1].first?.contains("more than the Journal sheet's cap of 5") == true)
        XCTAssertEqual(journal[4], ["Transaction", "Montant"])
        XCTAssertTrue(book["Run Info"]!.contains { $0.first == "Full journal (over the sheet's cap)" })
    }

    /// The templates compiled into the tool are the repository's `templates/workspace` files,
    /// byte for byte, and every file there is one of them (a file added there and not to
    /// Package.swift's list would not ship).
    func testTheCompiledTemplatesAreTheRepositorysFiles() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("templates/workspace")
        let onDisk = try XCTUnwrap(FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]))
            .compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
            .map { String($0.path.dropFirst(root.path.count + 1)) }.sorted()
        XCTAssertEqual(LedgerTemplates.workspaceFiles.map(\.path).sorted(), onDisk)
        for f in LedgerTemplates.workspaceFiles {
            XCTAssertEqual(Data(f.bytes), try Data(contentsOf: root.appendingPathComponent(f.path)), f.path)
        }
    }

    func testInitCopiesTheShippedLayouts() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-layout-init-\(UUID().uuidString)")
        dirs.append(dir)
        let ws = try Workspace.create(at: dir)
        let loaded = try ws.loadLayouts()
        for w in ReportWorkbook.allCases {
            XCTAssertEqual(try Data(contentsOf: ws.layoutsURL.appendingPathComponent(w.layoutFileName)), LedgerTemplates.layout(w.layoutFileName))
            XCTAssertEqual(loaded[w].source, ws.layoutsURL.appendingPathComponent(w.layoutFileName).path)
            XCTAssertEqual(loaded[w].sheets, try ReportLayout.shipped(w).sheets)
        }
    }

    func gunzip(_ url: URL) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/gzip")
        p.arguments = ["-dc", url.path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// The shipped layouts list every sheet, table and column the tool can fill, in the tool's
    /// order, each with a title; the README lists every key.
    func testTheShippedLayoutsAndTheReadmeListEveryKey() throws {
        var readme = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        let start = try XCTUnwrap(readme.range(of: "## Workbook layouts"))
        readme = String(readme[start.lowerBound...])
        for w in ReportWorkbook.allCases {
            let layout = try ReportLayout.shipped(w)
            XCTAssertEqual(layout.formats, .standard)
            XCTAssertEqual(layout.sheets.map(\.key), w.sheets.map(\.key), w.rawValue)
            for (sheet, schema) in zip(layout.sheets, w.sheets) {
                XCTAssertTrue(readme.contains("`\(sheet.key)`"), "README names sheet \(sheet.key)")
                XCTAssertEqual(sheet.tables.map(\.key), schema.tables.map(\.key), "\(w.rawValue) \(sheet.key)")
                for (table, tschema) in zip(sheet.tables, schema.tables) {
                    XCTAssertTrue(readme.contains("`\(table.key)`"), "README names table \(table.key)")
                    XCTAssertEqual(table.columns.map(\.key), tschema.columns.map(\.key), "\(w.rawValue) \(sheet.key) \(table.key)")
                    for c in table.columns {
                        XCTAssertNotEqual(c.title, c.key, "\(sheet.key).\(table.key).\(c.key) has a title")
                        XCTAssertTrue(readme.contains("`\(c.key)`"), "README names column \(c.key)")
                    }
                }
            }
        }
    }
}

/// The parts of a written .xlsx that `XLSXReader` does not read: sheet order, column widths,
/// each cell's number format, charts.
enum XLSXParts {
    static func entries(_ url: URL) throws -> [String] {
        try Archive(url: url, accessMode: .read).map(\.path).sorted()
    }

    static func read(_ url: URL, _ path: String) throws -> String {
        let archive = try Archive(url: url, accessMode: .read)
        guard let entry = archive[path] else { throw NSError(domain: "xlsx", code: 1, userInfo: [NSLocalizedDescriptionKey: "missing \(path)"]) }
        var data = Data()
        _ = try archive.extract(entry) { data.append($0) }
        return String(decoding: data, as: UTF8.self)
    }

    static func sheetNames(_ url: URL) throws -> [String] {
        XLSXReader.matches(try read(url, "xl/workbook.xml"), #"<sheet name="([^"]*)""#).map { XLSXReader.unescape($0[0]) }
    }

    /// The width of each column (0-based) of a sheet (0-based, in workbook order), in characters.
    static func columnWidths(_ url: URL, sheet: Int) throws -> [Int] {
        XLSXReader.matches(try read(url, "xl/worksheets/sheet\(sheet + 1).xml"), #"<col min="\d+" max="\d+" width="([0-9.]+)""#)
            .map { Int(Double($0[0])!) }
    }

    /// The number format of each cell of a sheet that has one, by reference (`F12`).
    static func cellFormats(_ url: URL, sheet: Int) throws -> [String: String] {
        let styles = try read(url, "xl/styles.xml")
        var codes: [String: String] = ["0": "General", "3": "#,##0", "4": "#,##0.00"]
        for m in XLSXReader.matches(styles, #"<numFmt numFmtId="(\d+)" formatCode="([^"]*)""#) { codes[m[0]] = XLSXReader.unescape(m[1]) }
        let xfs = XLSXReader.matches(styles, #"<cellXfs[^>]*>(.*?)</cellXfs>"#).first.map {
            XLSXReader.matches($0[0], #"<xf numFmtId="(\d+)""#).map { $0[0] }
        } ?? []
        var out: [String: String] = [:]
        for m in XLSXReader.matches(try read(url, "xl/worksheets/sheet\(sheet + 1).xml"), #"<c r="([A-Z]+\d+)"([^>]*)>"#) {
            guard let s = XLSXReader.matches(m[1], #"s="(\d+)""#).first.flatMap({ Int($0[0]) }), s < xfs.count else { continue }
            out[m[0]] = codes[xfs[s]] ?? "numFmt \(xfs[s])"
        }
        return out
    }
}
