import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerReport
@testable import LedgerRun
@testable import LedgerStore
@testable import LedgerVerify

/// What the night's speed work must not change: the rules JSON every entry's hash covers,
/// workbooks written in parallel, the month-scoped Journal and where trace places a posting;
/// and the progress line, which only a terminal sees.
final class RunScaleTests: XCTestCase {
    func testRulesJSONIsWhatJSONEncoderWrites() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let samples = [
            AppliedRules(storefront: "USA", storefrontSource: "transaction", storefrontEffectiveFrom: "2026-01-01", taxRate: "0",
                         taxIncluded: false, priceSource: "prices.csv 0.99 from 2026-01-01", commissionRate: "0.30",
                         commissionReason: "standard", fxRate: "1", fxMonth: "2026-10", unitPrice: "0.99"),
            AppliedRules(storefront: "DEU", storefrontSource: "order ORD-1/2 \"quoted\" \\ back", storefrontEffectiveFrom: "2026-01-01",
                         taxRate: "0.19", taxIncluded: true, priceSource: "signed price\nline\ttab \u{01} é 日本",
                         commissionRate: "0.15", commissionReason: "small_business 2026-01-01..2026-12-31",
                         fxRate: "1.0712", fxMonth: "2026-11", unitPrice: nil),
        ]
        for r in samples {
            XCTAssertEqual(r.canonicalJSON, String(decoding: try encoder.encode(r), as: UTF8.self))
            XCTAssertEqual(try JSONDecoder().decode(AppliedRules.self, from: Data(r.canonicalJSON.utf8)), r)
            XCTAssertEqual(AppliedRules(storedJSON: r.canonicalJSON), r, "read back without JSONDecoder")
        }
    }

    /// Stored rules are read back without `JSONDecoder` when they are a flat object of the
    /// rules' keys; the reading agrees with `JSONDecoder` whenever it answers, and leaves
    /// everything else (which `JSONDecoder` reads or refuses) to it.
    func testStoredRulesAreReadAsJSONDecoderReadsThem() throws {
        let base = #""commissionRate":"0.30","commissionReason":"standard","fxMonth":"2026-10","fxRate":"1","priceSource":"p","storefront":"USA","storefrontEffectiveFrom":"2026-01-01","storefrontSource":"transaction","taxIncluded":false,"taxRate":"0""#
        let escaped = #""caf\u00e9 \ud83d\ude00 \"q\" a\/b \\ \n\t\b\f\r""#
        let read: [(String, Bool)] = [
            ("{" + base + "}", true),
            ("{" + base + #","unitPrice":"0.99"}"#, true),
            ("{" + base + #","unitPrice":null}"#, true),
            (#"{"taxRate":"0","storefront":"USA","commissionRate":"0.30","commissionReason":"standard","fxMonth":"2026-10","fxRate":"1","priceSource":"p","storefrontEffectiveFrom":"2026-01-01","storefrontSource":"transaction","taxIncluded":true}"#, true),
            ("{" + base.replacingOccurrences(of: #""p""#, with: escaped) + "}", true),
            ("{" + base.replacingOccurrences(of: #""p""#, with: #""\u0000\u001f""#) + "}", true),
            // Left to JSONDecoder: it reads these or says what is wrong.
            ("{ " + base + "}", false),
            ("{" + base + #","extra":"x"}"#, false),
            ("{" + base + #","fxRate":"2"}"#, false),
            ("{" + base + #","taxIncluded":true}"#, false),
            ("{" + base.replacingOccurrences(of: #""taxIncluded":false"#, with: #""taxIncluded":"false""#) + "}", false),
            ("{" + base.replacingOccurrences(of: #""fxRate":"1""#, with: #""fxRate":1"#) + "}", false),
            ("{" + base.replacingOccurrences(of: #""fxRate":"1","#, with: "") + "}", false),
            ("{" + base.replacingOccurrences(of: #""p""#, with: #""\x""#) + "}", false),
            ("{" + base.replacingOccurrences(of: #""p""#, with: #""\ud83d""#) + "}", false),
            ("{" + base.replacingOccurrences(of: #""p""#, with: "\"tab\there\"") + "}", false),
            ("{" + base, false),
            ("{" + base + "}x", false),
            ("{}", false),
            ("", false),
        ]
        for (text, fast) in read {
            let quick = AppliedRules(storedJSON: text)
            XCTAssertEqual(quick != nil, fast, text)
            if let quick { XCTAssertEqual(quick, try JSONDecoder().decode(AppliedRules.self, from: Data(text.utf8)), text) }
        }
        let unusual = try XCTUnwrap(AppliedRules(storedJSON: "{" + base.replacingOccurrences(of: #""p""#, with: escaped) + "}"))
        XCTAssertEqual(unusual.priceSource, "café 😀 \"q\" a/b \\ \n\t\u{08}\u{0C}\r")
    }

    func testProgressPrintsOnlyOnATerminalAndTimesEveryStage() throws {
        var quiet = ""
        let silent = RunProgress(showProgress: false) { quiet += $0 }
        silent.stage("read", total: 10_000) { tick in for _ in 0..<5000 { tick.advance() } }
        XCTAssertEqual(quiet, "", "no TTY: no progress lines")
        XCTAssertEqual(silent.stages.map(\.name), ["read"])
        XCTAssertEqual(silent.stages[0].count, 5000)

        var shown = ""
        let tty = RunProgress(showProgress: true) { shown += $0 }
        tty.stage("post entries", total: 4096, unit: "transactions") { tick in tick.advance(by: 2048) }
        XCTAssertTrue(shown.contains("post entries: 2,048 transactions (50%)"), shown)
        XCTAssertTrue(tty.table().contains("post entries"))
        XCTAssertEqual(RunProgress.grouped(1_234_567), "1,234,567")
    }

    /// On a terminal a night shows where it is through every long stage: the sales it posts
    /// with their percent, the commit, and the workbooks written (files of all, percent): the
    /// commit and the workbooks, a third of a big night, showed nothing. Each line is cleared
    /// when its stage ends; without a terminal nothing is shown.
    func testANightShowsItsCommitAndWorkbooksOnATerminal() throws {
        let asOf = Day(iso: "2026-11-21")!
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-progress-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try DemoWorkspace.create(at: dir, transactions: 1200, seed: 5, asOf: asOf)
        var shown = ""
        let lock = NSLock()
        let tty = RunProgress(showProgress: true) { text in lock.lock(); shown += text; lock.unlock() }
        _ = try NightlyRun(workspace: Workspace(dir), asOf: asOf, progress: tty).run()
        XCTAssertTrue(shown.contains("\r  post entries: 1,024 transactions ("), shown)
        XCTAssertTrue(shown.contains("\r  commit: sealing the run and writing the ledger to disk\u{1B}[K\r\u{1B}[K"), shown)
        XCTAssertTrue(shown.contains("\r  write workbooks: 0 of 6 files (0%)\u{1B}[K"), shown)
        XCTAssertTrue(shown.contains("\r  write workbooks: 6 of 6 files (100%), "), shown)
        XCTAssertTrue(shown.hasSuffix("\r\u{1B}[K"), "the last line cleared")
    }

    func testWorkbooksWrittenInParallelAreTheSequentialOnesByteForByte() throws {
        let asOf = Day(iso: "2026-11-21")!
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-parallel-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try DemoWorkspace.create(at: dir, transactions: 600, seed: 5, asOf: asOf)
        let ws = Workspace(dir)
        let night = try NightlyRun(workspace: ws, asOf: asOf).run()
        let parallel = try night.workbooks.map { try Data(contentsOf: $0) }
        XCTAssertEqual(night.workbooks.map(\.lastPathComponent), [
            "finance-2026-11-21.xlsx", "sandbox-2026-11-21.xlsx", "reconciliation-2026-11-21.xlsx",
            "finance-2026-10-31.xlsx", "sandbox-2026-10-31.xlsx", "reconciliation-2026-10-31.xlsx",
        ])
        let (config, ledger) = try ws.openExistingLedger()
        let layouts = try ws.loadLayouts()
        let sets = try [asOf, Day(iso: "2026-10-31")!].map {
            try ReportSet(ledger: ledger, config: config, asOf: $0, runId: $0 == asOf ? night.runId : nil, workspace: ws, layouts: layouts)
        }
        let sequential = try ReportSet.write(sets, progress: .silent, threads: 1).map(\.url)
        XCTAssertEqual(sequential, night.workbooks)
        XCTAssertEqual(try sequential.map { try Data(contentsOf: $0) }, parallel)
    }

    /// A sale in October refunded in November: the Journal of each month's set lists its
    /// posting of that month, and trace names the workbook and the rows.
    func testJournalCoversItsMonthAndTracePlacesEachPosting() throws {
        let asOf = Day(iso: "2026-11-21")!
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-placement-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try DemoWorkspace.create(at: dir, transactions: 800, seed: 11, asOf: asOf)
        let ws = Workspace(dir)
        _ = try NightlyRun(workspace: ws, asOf: asOf).run()
        let (_, ledger) = try ws.openExistingLedger()
        let id = try XCTUnwrap(try ledger.read { r in
            try String.fetchOne(r.db, sql: """
                SELECT s.transaction_id FROM entry s JOIN entry f ON f.transaction_id = s.transaction_id AND f.book = s.book
                WHERE s.book = 'production' AND s.kind = 'sale' AND f.kind = 'refund'
                  AND s.date LIKE '2026-10-%' AND f.date LIKE '2026-11-%' ORDER BY s.transaction_id LIMIT 1
                """)
        }, "the demo refunds in November a sale of October")
        let trace = try XCTUnwrap(try ledger.read { try $0.traceTransaction(id, asOf: asOf) })
        let placed = TraceOutput.placed(trace, layouts: try ws.loadLayouts())
        XCTAssertEqual(placed.reports.map(\.workbook), ["reports/2026-10-31/finance-2026-10-31.xlsx", "reports/2026-11-21/finance-2026-11-21.xlsx"])
        for (p, kind) in zip(placed.reports, ["sale", "refund"]) {
            let journal = try XCTUnwrap(try XLSXReader.sheets(dir.appendingPathComponent(p.workbook))[p.sheet])
            XCTAssertFalse(p.rows.isEmpty)
            for row in p.rows {
                let cells = journal[row - 1]
                XCTAssertEqual(cells[5], id, "\(p.workbook) row \(row)")
                XCTAssertEqual(cells[4], kind)
            }
            // Every Journal row is dated in the set's month.
            let month = kind == "sale" ? "2026-10" : "2026-11"
            let dates = journal.dropFirst(4).filter { $0.count >= 12 }.map { $0[1] }
            XCTAssertFalse(dates.isEmpty)
            let serials = dates.compactMap { Int($0) }
            let first = Day(iso: month + "-01")!.daysSinceEpoch + 25_569
            XCTAssertTrue(serials.allSatisfy { $0 >= first && $0 < first + 31 }, "\(p.workbook): rows outside \(month)")
        }
        // Past the row cap, trace points into the journal CSV instead (line 1 the header).
        let capped = TraceOutput.placed(trace, layouts: try ws.loadLayouts(), journalRowCap: 1)
        XCTAssertEqual(capped.reports.map(\.workbook), ["reports/2026-10-31/journal-2026-10-31.csv.gz", "reports/2026-11-21/journal-2026-11-21.csv.gz"])
        XCTAssertEqual(capped.reports[1].rows, placed.reports[1].rows.map { $0 - 3 })
    }
}

/// Migration v6: the CHECK lists are rewritten as OR chains, with the same meaning and no
/// temporary table built per inserted row.
final class CheckListMigrationTests: XCTestCase {
    func testCheckListsAreOrChainsThatStillRefuseBadValues() throws {
        XCTAssertEqual(Schema.expandCheckLists("kind TEXT NOT NULL CHECK (kind IN ('receipts', 'orders', 'signed')),"),
                       "kind TEXT NOT NULL CHECK ((kind = 'receipts' OR kind = 'orders' OR kind = 'signed')),")
        XCTAssertEqual(Schema.expandCheckLists("book TEXT CHECK (book IN ('production', 'sandbox'))"),
                       "book TEXT CHECK (book IN ('production', 'sandbox'))", "two values: SQLite needs no table for them")
        XCTAssertEqual(Schema.expandCheckLists("CHECK (kind NOT IN ('a', 'b', 'c'))"), "CHECK (kind NOT IN ('a', 'b', 'c'))", "NOT IN stays")
        XCTAssertEqual(Schema.expandCheckLists("CHECK (kind IN ('a, b', 'c', 'd'))"), "CHECK (kind IN ('a, b', 'c', 'd'))", "a value with a comma stays")
        let dir = Resilience.scratch("checks")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let ledger = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path)
        try ledger.write { w in
            for table in ["source_file", "source_record", "store_transaction", "entry", "exception"] {
                let sql = try String.fetchOne(w.db, sql: "SELECT sql FROM sqlite_schema WHERE name = ?", arguments: [table]) ?? ""
                XCTAssertTrue(sql.contains(" OR "), table)
                XCTAssertEqual(Schema.expandCheckLists(sql), sql, "\(table) still has a CHECK list of three or more values")
            }
            let plan = try String.fetchAll(w.db, sql: """
                EXPLAIN INSERT INTO source_record (file_id, line, record_sha256, outcome, raw) VALUES (1, 1, 'x', 'verified', '')
                """)
            XCTAssertFalse(plan.contains("OpenEphemeral"), "an IN list still builds a table per row")
            try w.db.execute(sql: "INSERT INTO run (as_of, started_at, tool_version) VALUES ('2026-11-01', 'now', 'test')")
            try w.db.execute(sql: "INSERT INTO source_file (run_id, path, kind, sha256, size_bytes, records, new_records) VALUES (1, 'a', 'orders', 'x', 1, 1, 1)")
            XCTAssertThrowsError(try w.db.execute(sql: """
                INSERT INTO source_file (run_id, path, kind, sha256, size_bytes, records, new_records) VALUES (1, 'b', 'invoices', 'x', 1, 1, 1)
                """), "a kind outside the list is still refused")
            XCTAssertThrowsError(try w.db.execute(sql: """
                INSERT INTO source_record (file_id, line, record_sha256, outcome, reason, raw) VALUES (1, 1, 'x', 'maybe', 'r', '')
                """), "an outcome outside the list is still refused")
        }
        XCTAssertEqual(try ledger.read { try $0.rawRows("PRAGMA integrity_check") }, [["ok"]])
    }
}

/// SQLite does not count its allocations: Debian's build counts them under a process-wide
/// mutex, several times for every row a night writes. The setting is made when the first
/// ledger opens, before SQLite starts (it is refused afterwards).
final class SQLiteSettingsTests: XCTestCase {
    static let childVariable = "IAPLEDGER_SQLITE_SETTINGS_CHILD"

    /// Checked in a process of its own (this test binary again, this test alone), as the tool
    /// runs: in this one an earlier test may have started SQLite without a ledger (a bare
    /// `DatabaseQueue`), and SQLite then refuses the setting.
    func testSQLiteDoesNotCountItsAllocations() throws {
        #if os(Linux)
        if ProcessInfo.processInfo.environment[Self.childVariable] == nil {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            child.arguments = ["IAPLedgerTests.SQLiteSettingsTests/testSQLiteDoesNotCountItsAllocations"]
            child.environment = ProcessInfo.processInfo.environment.merging([Self.childVariable: "1"]) { $1 }
            let output = Pipe()
            child.standardOutput = output
            child.standardError = output
            try child.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            child.waitUntilExit()
            XCTAssertEqual(child.terminationStatus, 0, text)
            XCTAssertTrue(text.contains("Executed 1 test, with 0 failures"), text)
            return
        }
        #endif
        let dir = Resilience.scratch("sqlite-settings")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let ledger = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path)
        XCTAssertTrue(Ledger.sqliteTuned, "SQLite was started before the first ledger opened: the setting was refused")
        XCTAssertEqual(try ledger.read { try $0.rawRows("SELECT count(*) FROM entry") }, [["0"]])
        XCTAssertEqual(Ledger.sqliteBytesCounted, 0, "SQLite counts its allocations")
    }
}

/// The byte-wise base64url decoder of signed data gives what Foundation's decoder gives.
final class Base64URLTests: XCTestCase {
    func testDecodingMatchesFoundationAndRefusesWhatItRefused() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt8 { state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407; return UInt8(truncatingIfNeeded: state >> 33) }
        for length in 0..<300 {
            let bytes = Data((0..<length % 97).map { _ in next() })
            let standard = bytes.base64EncodedString()
            let url = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            XCTAssertEqual(SignedDataCompactJWS.base64URLDecode(url), bytes)
            XCTAssertEqual(SignedDataCompactJWS.base64URLDecode(url.replacingOccurrences(of: "=", with: "")), bytes, "unpadded")
            XCTAssertEqual(SignedDataCompactJWS.base64URLDecode(standard), bytes, "the standard alphabet")
        }
        for bad in ["a", "abcde", "ab=c", "ab c", "abc!", "ab\ncd", "abc=d="] {
            XCTAssertNil(SignedDataCompactJWS.base64URLDecode(bad), bad)
        }
        XCTAssertEqual(SignedDataCompactJWS.base64URLDecode(""), Data())
    }
}

/// A CSV field's trim gives what Foundation's `trimmingCharacters(in: .whitespaces)` gives,
/// with or without the shortcut for fields that start and end on a plain ASCII byte.
final class CSVTrimTests: XCTestCase {
    func testTrimMatchesFoundation() {
        let edges = ["", " ", "\t", "\u{A0}", "\u{3000}", "\u{2009}", "\n", "\r", "x", "é", "\u{1F600}", "\"", "  \t"]
        let middles = ["", "ord-1", "a b", "12.50", "\u{A0}", "2026-11-21T09:00:00Z", "\n"]
        for lead in edges {
            for middle in middles {
                for trail in edges {
                    let field = lead + middle + trail
                    XCTAssertEqual(CSV.trimmed(field), field.trimmingCharacters(in: .whitespaces), field.debugDescription)
                }
            }
        }
    }
}
