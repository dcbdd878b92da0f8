import Foundation
import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore
@testable import LedgerPost

/// `iapledger trace` and the command line as a user runs it.
final class TraceAndCLITests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }

    /// The built `iapledger` executable beside the test bundle.
    static var binary: URL {
        var dir = Bundle.main.bundleURL
        if !FileManager.default.fileExists(atPath: dir.appendingPathComponent("iapledger").path) {
            dir = Bundle(for: TraceAndCLITests.self).bundleURL.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("iapledger")
    }

    /// `trace` says where its open items are rows of the last night's lists: a sale waiting
    /// for a rule (Pending) and its finding (Run Info), a refused record (Rejected), an open
    /// exception (Exceptions), each a row the workbook read back holds in the column named.
    func testTraceSaysWhichListsHoldItsOpenItems() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9801", product: "coins.999", purchased: "2026-10-05T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("9802", purchased: "2026-10-05T10:00:00Z")], bundle: "com.other.app") + "\n"
                     + #"{"response":{"status":21005,"is_retryable":true},"transaction_id":"9803","received_at":"2026-10-05T10:00:00Z"}"# + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-98,acct-9,,coins.100,1,100,2026-10-05T10:00:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        func listed(_ id: String) throws -> [[String: Any]] {
            let r = try cli(["trace", id, "--format", "json", "--workspace", ws.root.path])
            XCTAssertEqual(r.status, 0, r.err)
            return try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])?["listed"] as? [[String: Any]], r.out)
        }
        /// Whether the sheet read back has a row holding `value` in the column titled `title`.
        func holds(_ l: [String: Any], title: String, value: String) throws -> Bool {
            let url = ws.root.appendingPathComponent(try XCTUnwrap(l["workbook"] as? String))
            let rows = try XCTUnwrap(try XLSXReader.sheets(url)[try XCTUnwrap(l["sheet"] as? String)])
            return rows.contains { header in
                guard let c = header.firstIndex(of: title) else { return false }
                return rows.contains { $0.count > c && $0[c] == value }
            }
        }
        let sale = try listed("9801")
        XCTAssertEqual(sale.map { "\($0["sheet"]!): \($0["find"]!)" }, [
            "Pending: the row whose Record / transaction is 9801 (its sale, waiting)",
            "Exceptions: the NOT_CREDITED row whose Transaction is 9801",
            "Run Info: the findings' row of code MISSING_RULE whose Transaction is 9801",
        ])
        XCTAssertTrue(try holds(sale[0], title: "Record / transaction", value: "9801"))
        XCTAssertTrue(try holds(sale[1], title: "Transaction", value: "9801"))
        XCTAssertTrue(try holds(sale[2], title: "Transaction", value: "9801"))
        XCTAssertEqual(sale.map { $0["written"] as? Bool }, [true, true, true])
        let refused = try listed("inbox/receipts/r.jsonl:2")
        XCTAssertEqual(refused.map { "\($0["sheet"]!): \($0["find"]!)" }, ["Rejected: the row whose Record (file:line) is inbox/receipts/r.jsonl:2"])
        XCTAssertTrue(try holds(refused[0], title: "Record (file:line)", value: "inbox/receipts/r.jsonl:2"))
        // A transaction told only by a record waiting for verification: that record's row (the
        // Pending sheet lists no sale of it, the ledger holding none).
        let told = try listed("9803")
        XCTAssertEqual(told.map { "\($0["sheet"]!): \($0["find"]!)" }, ["Pending: the row whose Record / transaction is inbox/receipts/r.jsonl:3 (a record waiting for verification)"])
        XCTAssertTrue(try holds(told[0], title: "Record / transaction", value: "inbox/receipts/r.jsonl:3"))
        let credit = try listed("ord-98")
        XCTAssertEqual(credit.map { "\($0["sheet"]!): \($0["find"]!)" }, ["Exceptions: the CREDITED_WITHOUT_TRANSACTION row of order ord-98"])
        XCTAssertTrue(try holds(credit[0], title: "Order", value: "ord-98"))
        let text = try cli(["trace", "9801", "--workspace", ws.root.path]).out
        XCTAssertTrue(text.contains("Listed while open, in the last night's workbooks:\n  reports/2026-10-07/reconciliation-2026-10-07.xlsx, sheet Pending: the row whose Record / transaction is 9801 (its sale, waiting)\n"), text)
        XCTAssertTrue(sale.allSatisfy { $0["stale"] == nil }, "\(sale)")
        // Another workbook copied over the list (its rows are not there): said (it was not).
        let reconciliation = ws.root.appendingPathComponent("reports/2026-10-07/reconciliation-2026-10-07.xlsx")
        let kept = try Data(contentsOf: reconciliation)
        try FileManager.default.removeItem(at: reconciliation)
        try FileManager.default.copyItem(at: ws.root.appendingPathComponent("reports/2026-10-07/finance-2026-10-07.xlsx"), to: reconciliation)
        let copied = try cli(["trace", "9801", "--workspace", ws.root.path]).out
        XCTAssertTrue(copied.contains("sheet Pending: the row whose Record / transaction is 9801 (its sale, waiting) (the file there is changed since iapledger last wrote it (at "), copied)
        // The command to run, with the workspace given to trace, pasted from any folder: the
        // file by its full path (verify reads it from the current folder), and the workspace.
        let root = ShellWord.quoted(ws.root.standardizedFileURL.path)
        XCTAssertTrue(copied.contains("`iapledger verify --workbook \(ShellWord.quoted(reconciliation.standardizedFileURL.path)) --workspace \(root)` says more)"), copied)
        XCTAssertEqual(try cli(["verify", "--workbook", reconciliation.standardizedFileURL.path, "--workspace", ws.root.path]).out.contains("written as reports/2026-10-07/finance-2026-10-07.xlsx"), true)
        // Run from inside the workspace, without --workspace: the path from there.
        let inside = try cli(["trace", "9801"], in: ws.root).out
        XCTAssertTrue(inside.contains("`iapledger verify --workbook reports/2026-10-07/reconciliation-2026-10-07.xlsx` says more)"), inside)
        XCTAssertTrue(try listed("9801").first?["stale"] is String)
        try kept.write(to: reconciliation)
        XCTAssertTrue(try listed("9801").allSatisfy { $0["stale"] == nil })
        // Booked once its price arrives: listed only as the lost order it still is.
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.999,USA,9.99,2020-01-01\n")
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.999,consumable,999\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try listed("9801").map { $0["find"] as? String }, ["the NOT_CREDITED row whose Transaction is 9801"])
        // A sandbox purchase credited in production: a row of the sandbox book's own list too
        // (an auditor's review: trace named the Exceptions sheet alone).
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("9804", purchased: "2026-10-08T10:00:00Z")], environment: "Sandbox") + "\n")
        try ws.write("inbox/orders/s.csv", ReconciliationTests.header + "ord-99,acct-9,9804,coins.100,1,100,2026-10-08T10:00:01Z,production,USA,,\n")
        try ws.run("2026-10-09")
        let test = try listed("9804")
        XCTAssertEqual(test.map { "\($0["sheet"]!): \($0["find"]!)" }, [
            "Exceptions: the SANDBOX_CREDITED_IN_PRODUCTION row whose Transaction is 9804, order ord-99",
            "Credited in Production: the row whose Transaction is 9804, order ord-99",
        ])
        XCTAssertEqual(test.map { $0["workbook"] as? String }, ["reports/2026-10-09/reconciliation-2026-10-09.xlsx", "reports/2026-10-09/sandbox-2026-10-09.xlsx"])
        XCTAssertTrue(try holds(test[1], title: "Transaction", value: "9804"))
        XCTAssertTrue(try holds(test[1], title: "Order", value: "ord-99"))
    }

    /// An exception that names no transaction (a credit without one) gives `null` for it in
    /// trace's JSON, as `exceptions --format json` does (it gave ""), and says so in text.
    func testAnExceptionWithoutATransactionIsNullInTracesJSON() throws {
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-90,acct-9,,coins.100,1,100,2026-10-05T10:00:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        let json = try cli(["trace", "ord-90", "--format", "json", "--workspace", ws.root.path])
        XCTAssertEqual(json.status, 0, json.err)
        let o = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as! [String: Any]
        let exception = try XCTUnwrap((o["exceptions"] as? [[String: Any]])?.first, json.out)
        XCTAssertEqual(exception["category"] as? String, "CREDITED_WITHOUT_TRANSACTION")
        XCTAssertTrue(exception["transaction_id"] is NSNull, "\(exception)")
        let listed = try cli(["exceptions", "--format", "json", "--workspace", ws.root.path])
        let rows = try JSONSerialization.jsonObject(with: Data(listed.out.utf8)) as! [[String: Any]]
        XCTAssertTrue(rows.first { $0["order_id"] as? String == "ord-90" }?["transaction_id"] is NSNull)
        XCTAssertTrue(try cli(["trace", "ord-90", "--workspace", ws.root.path]).out.contains("CREDITED_WITHOUT_TRANSACTION open, no transaction, first seen"))
    }

    /// `exceptions` writes its list a row at a time (spooled, none held): the same text as the
    /// whole list rendered at once, JSON as JSONEncoder writes the array, in each format, empty
    /// or not.
    func testExceptionsAreListedARowAtATimeAsTheWholeListRenders() throws {
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-91,acct-9,,coins.100,1,100,2026-10-05T10:00:00Z,production,USA,,\n"
                     + "ord-92,acct-9,,coins.100,1,100,2026-10-05T10:00:00Z,production,USA,,\n"
                     + "ord-93,acct-\u{202E}9,9999,coins.100,1,100,2026-10-05T10:00:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let rows = try ledger.read { try $0.exceptions(status: "open") }
        XCTAssertGreaterThanOrEqual(rows.count, 2)
        let day = Day(iso: "2026-10-07")!
        for format in ["table", "csv", "json"] {
            let listed = try cli(["exceptions", "--format", format, "--workspace", ws.root.path])
            XCTAssertEqual(listed.status, 0, listed.err)
            XCTAssertEqual(listed.out, ExceptionsOutput.render(rows, asOf: day, format: format), format)
            let none = try cli(["exceptions", "--format", format, "--status", "resolved", "--workspace", ws.root.path])
            XCTAssertEqual(none.out, ExceptionsOutput.render([], asOf: day, format: format), format)
        }
        // The spool goes where $TMPDIR says (a host with a small /tmp), and is removed at once;
        // a $TMPDIR that cannot take it is named.
        let spoolDir = ws.root.appendingPathComponent("spool")
        try FileManager.default.createDirectory(at: spoolDir, withIntermediateDirectories: true)
        let viaTmpdir = try Resilience.cli(["exceptions", "--workspace", ws.root.path], environment: ["TMPDIR": spoolDir.path])
        XCTAssertEqual(viaTmpdir.status, 0, viaTmpdir.err)
        XCTAssertEqual(viaTmpdir.out, ExceptionsOutput.render(rows, asOf: day, format: "table"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spoolDir.path), [])
        let missing = try Resilience.cli(["exceptions", "--workspace", ws.root.path], environment: ["TMPDIR": ws.root.appendingPathComponent("no-such").path])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.err.contains("cannot make a temporary file for the list (in \(ws.root.appendingPathComponent("no-such").path): $TMPDIR, else /tmp)"), missing.err)
        // JSON as the encoder writes the whole array.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let whole = rows.map { ExceptionsOutput.JSONRow(category: $0.category, transaction_id: $0.transactionId, order_id: $0.orderId,
                                                         status: "open", first_seen: $0.firstSeen.description, resolved_on: nil,
                                                         age_days: $0.ageDays(asOf: day), detail: $0.detail, account_id: $0.accountId,
                                                         product_id: $0.productId, gross_minor: $0.grossMinor, currency: $0.currency,
                                                         net_reporting_minor: $0.netReportingMinor) }
        XCTAssertEqual(ExceptionsOutput.render(rows, asOf: day, format: "json"),
                       TerminalText.jsonEscapingInvisible(String(decoding: try encoder.encode(whole), as: UTF8.self)) + "\n")
        XCTAssertEqual(ExceptionsOutput.render([], asOf: day, format: "json"), String(decoding: try encoder.encode([ExceptionsOutput.JSONRow]()), as: UTF8.self) + "\n")
    }

    /// `findings --code` with a code no night opens (a typo) is refused with exit 64 and the
    /// codes there are, as `exceptions --category` refuses one ("No findings." alone read as
    /// nothing to book); a real code the ledger never held says so on stderr, with the codes it
    /// holds.
    func testFindingsOfACodeTheLedgerNeverHeldSaysSo() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9701", product: "coins.999", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-07")
        let typo = try cli(["findings", "--code", "MISING_RULE", "--workspace", ws.root.path])
        XCTAssertEqual(typo.status, 64)
        XCTAssertEqual(typo.out, "")
        XCTAssertTrue(typo.err.hasPrefix("Error: unknown finding code MISING_RULE; one of MISSING_RULE, ORDER_WAIT, REVERSAL_WAITING, REFUND_NOT_DATED, PRICE_MISMATCH, "), typo.err)
        XCTAssertTrue(typo.err.contains("Usage: iapledger findings"), typo.err)
        let never = try cli(["findings", "--code", "PRICE_MISMATCH", "--workspace", ws.root.path])
        XCTAssertEqual(never.status, 0)
        XCTAssertEqual(never.out, "No findings.\n")
        XCTAssertEqual(never.err, "iapledger: this ledger holds no finding of code \"PRICE_MISMATCH\", of any status; the codes it holds: MISSING_RULE\n")
        let held = try cli(["findings", "--code", "MISSING_RULE", "--status", "resolved", "--workspace", ws.root.path])
        XCTAssertEqual(held.out, "No findings.\n")
        XCTAssertEqual(held.err, "", "a code the ledger holds, none resolved: nothing more to say")
    }

    /// Every finding code the sources open is one `findings --code` takes (a new code left off
    /// the list would be refused as a typo).
    func testEveryFindingCodeOpenedIsListed() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        var opened = Set<String>()
        let files = try XCTUnwrap(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let url as URL in files where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            for pattern in [#"openFinding\(code: "([A-Z_]+)""#, #"static let code = "([A-Z_]+)""#, #"waits\([a-z]+, code: "([A-Z_]+)""#] {
                let regex = try NSRegularExpression(pattern: pattern)
                for m in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    opened.insert(String(text[Range(m.range(at: 1), in: text)!]))
                }
            }
        }
        XCTAssertGreaterThanOrEqual(opened.count, 14, "the scan finds the codes: \(opened.sorted())")
        XCTAssertEqual(opened.subtracting(LedgerRun.Dismiss.findingCodes), [], "opened but not listed")
        XCTAssertEqual(Set(LedgerRun.Dismiss.findingCodes).count, LedgerRun.Dismiss.findingCodes.count)
    }

    /// A record that names no transaction or order (a line that is no JSON) is traced by its
    /// FILE:LINE: each version of the file read, its outcome and reason, whether it is open, its
    /// text; a path and line with no record is refused as an unknown id.
    /// A trace says the status Apple's service gave the response a source came from: an iOS 6
    /// receipt of an expired subscription (21006, nov-itunes-receipt's sample) was said to be
    /// "status 0".
    func testATraceSaysTheStatusAppleGaveTheResponse() throws {
        let other = try TestWorkspace(config: TestWorkspace.defaultConfig.replacingOccurrences(of: "com.example.coins", with: "com.notkeepingitreal.fizzbuzz"))
        defer { other.remove() }
        try other.write("inbox/receipts/expired.json", try Fixtures.text("verifyreceipt/nov-itunes-receipt__autorenew_subscription_expired.json"))
        try other.write("inbox/receipts/valid.jsonl", Receipt.response([Receipt.item("8001", purchased: "2026-10-05T10:00:00Z")]).replacingOccurrences(of: "com.example.coins", with: "com.notkeepingitreal.fizzbuzz") + "\n")
        try other.run("2026-11-02")
        let ledger = try Ledger(path: other.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        XCTAssertEqual(try ledger.read { try $0.traceTransaction("1000000052076747", asOf: nil) }?.sources.map(\.verification),
                       ["Apple verifyReceipt status 21006 (the subscription has expired; the receipt is valid, verified by Apple's service; the response, as the backend stored it, carries no signature of Apple's to check)"])
        XCTAssertEqual(try ledger.read { try $0.traceTransaction("8001", asOf: nil) }?.sources.map(\.verification),
                       ["Apple verifyReceipt status 0 (verified by Apple's service; the response, as the backend stored it, carries no signature of Apple's to check)"])
    }

    /// A transaction's trace gives each source record not verified with its reason code, as
    /// the trace of its FILE:LINE does (it gave the reason alone).
    func testATransactionsRejectedSourceShowsItsCode() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9901", purchased: "2026-10-05T10:00:00Z")], bundle: "com.other.game") + "\n")
        try ws.run("2026-10-07")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let traced = try XCTUnwrap(try ledger.read { try $0.traceTransaction("9901", asOf: nil) })
        XCTAssertEqual(traced.sources.map(\.code), ["WRONG_BUNDLE_ID"])
        XCTAssertTrue(TraceOutput.text(traced).contains("    rejected WRONG_BUNDLE_ID, environment Production: receipt of another app"), TraceOutput.text(traced))
        XCTAssertTrue(TraceOutput.json(traced).contains("\"code\" : \"WRONG_BUNDLE_ID\""), TraceOutput.json(traced))
    }

    func testARecordIsTracedByItsFileAndLine() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9801", purchased: "2026-10-05T10:00:00Z")]) + "\n{not json\n")
        try ws.run("2026-10-07")
        let text = try cli(["trace", "inbox/receipts/r.jsonl:2", "--source-text", "--workspace", ws.root.path])
        XCTAssertEqual(text.status, 0, text.err)
        XCTAssertTrue(text.out.hasPrefix("Record inbox/receipts/r.jsonl:2: 1 record read at this line, from 1 version of the file"), text.out)
        XCTAssertTrue(text.out.contains("    rejected: MALFORMED: "), text.out)
        // The command to paste takes the reason it needs and the workspace the trace was given.
        XCTAssertTrue(text.out.contains("    still open (`iapledger dismiss inbox/receipts/r.jsonl:2 --reason \"<why>\" --workspace \(ShellWord.quoted(ws.root.standardizedFileURL.path))`"), text.out)
        XCTAssertTrue(text.out.contains("      | {not json"), text.out)
        let json = try cli(["trace", "inbox/receipts/r.jsonl:1", "--format", "json", "--workspace", ws.root.path])
        let o = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as! [String: Any]
        let record = try XCTUnwrap((o["records"] as? [[String: Any]])?.first)
        XCTAssertEqual(record["outcome"] as? String, "verified")
        XCTAssertEqual(record["transaction_ids"] as? [String], ["9801"])
        XCTAssertEqual(record["text_holds"] as? Bool, true)
        // The path as `dismiss` takes it: `./inbox/...`, or absolute.
        for given in ["./inbox/receipts/r.jsonl:2", ws.root.appendingPathComponent("inbox/receipts/r.jsonl").path + ":2"] {
            let t = try cli(["trace", given, "--workspace", ws.root.path])
            XCTAssertTrue(t.out.hasPrefix("Record inbox/receipts/r.jsonl:2: "), "\(given): \(t.out) \(t.err)")
        }
        let none = try cli(["trace", "inbox/receipts/r.jsonl:9", "--workspace", ws.root.path])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.err.contains("no transaction or order with id \"inbox/receipts/r.jsonl:9\" in this ledger (nor a record at it, as FILE:LINE"), none.err)
    }

    /// The commands the tool prints to paste quote each word so that bash reads it back as it
    /// is: control and format characters (which the terminal text escapes as `\u{1B}`, not
    /// pasteable) in bash's `$'...'`, quotes and backslashes too.
    func testAQuotedWordPastesBackIntoBashAsItIs() throws {
        guard FileManager.default.isExecutableFile(atPath: "/bin/bash") else { throw XCTSkip("no bash") }
        let words = ["inbox/receipts/plain.jsonl:3", "with space's and \\back", "ctl\u{1}\u{7}bell", "esc\u{1B}[2J", "tab\there",
                     "bidi\u{202E}txt", "c1\u{9B}x", "del\u{7F}", "line\nfeed", "ünïcode ok"]
        for word in words {
            let quoted = ShellWord.quoted(word)
            XCTAssertFalse(quoted.unicodeScalars.contains(where: TerminalText.needsEscape), quoted)
            let p = Process(), out = Pipe()
            p.executableURL = URL(fileURLWithPath: "/bin/bash")
            p.arguments = ["-c", "printf %s " + quoted]
            p.standardOutput = out
            try p.run()
            let back = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            XCTAssertEqual(back, Data(word.utf8), "\(quoted)")
        }
        // JSON outputs write DEL, C1 and format characters escaped (JSON escapes only C0): the
        // same value, read back, and none of them raw.
        let value = "p\u{202E}a\u{9B}t\u{7F}h\u{E0001}ü"
        let json = TerminalText.jsonEscapingInvisible(String(decoding: try JSONEncoder().encode(["path": value]), as: UTF8.self))
        XCTAssertFalse(json.unicodeScalars.contains(where: TerminalText.needsEscape), json)
        XCTAssertEqual(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String], ["path": value], json)
    }

    /// `demo` in a folder whose name holds an escape sequence prints it escaped in every line,
    /// not only in the commands it prints (the lines naming the folder printed it raw).
    func testTheDemoNamesAFolderWithControlCharactersEscaped() throws {
        let dir = ws.root.appendingPathComponent("demo\u{1B}[2Jx").path
        let r = try cli(["demo", "--dir", dir, "--transactions", "200", "--as-of", "2026-11-20"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertFalse(r.out.unicodeScalars.contains("\u{1B}"), "no raw escape reaches the terminal")
        XCTAssertTrue(r.out.contains("Generated demo workspace \(ws.root.path)/demo\\u{1B}[2Jx"), r.out)
    }

    /// What a user typing commands found (CLI review, 2026-11-26): each refused before it
    /// makes or registers anything, said in one line, and the outputs a script keeps.
    func testCommandsRefuseWhatTheyCannotDoBeforeMakingAnything() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("C1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-07")
        let scratch = ws.root.appendingPathComponent("scratch")
        // demo: a count out of range is a usage error (64), no folder made.
        let demo = try cli(["demo", "--dir", scratch.appendingPathComponent("d").path, "--transactions", "0"])
        XCTAssertEqual(demo.status, 64, demo.err)
        XCTAssertTrue(demo.err.contains("--transactions must be between 1 and 100000000, got 0"), demo.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("d").path))
        // report: a day before anything the ledger holds writes (and registers) nothing.
        let ancient = try cli(["report", "--period", "0001-01", "--workspace", ws.root.path])
        XCTAssertEqual(ancient.status, 1)
        XCTAssertTrue(ancient.err.contains("0001-01-31 is before anything the ledger holds (its earliest entry is dated 2026-10-05, its first night ran as of 2026-10-07): nothing to report, nothing written"), ancient.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/0001-01-31").path))
        // ... where a first night was refused (it leaves no ledger) ...
        let fresh = try TestWorkspace(config: TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n")
        defer { fresh.remove() }
        XCTAssertThrowsError(try fresh.run("2026-10-07"))
        let noLedger = try cli(["report", "--period", "0001-01", "--workspace", fresh.root.path])
        XCTAssertEqual(noLedger.status, 1)
        XCTAssertTrue(noLedger.err.contains("ledger.sqlite: no ledger yet; run `iapledger run` first"), noLedger.err)
        // ... and on a ledger no night has run on (a first night killed before its commit
        // leaves its schema).
        _ = try Ledger(path: fresh.root.appendingPathComponent("ledger.sqlite").path)
        let none = try cli(["report", "--period", "0001-01", "--workspace", fresh.root.path])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.err.contains("no night has run on this ledger: nothing to report, nothing written"), none.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: fresh.root.appendingPathComponent("reports/0001-01-31").path))
        // balance: an empty table says which book and day.
        let empty = try cli(["balance", "--through", "1999-01-01", "--workspace", ws.root.path])
        XCTAssertEqual(empty.out, "No postings in either book dated on or before 1999-01-01.\n")
        XCTAssertEqual(try cli(["balance", "--through", "2026-13-01", "--workspace", ws.root.path]).err.contains("got 2026-13-01"), true)
        // balance: each book's totals, per currency and in the reporting currency, sum to zero,
        // and it says so (the sheet showed it, the command did not).
        let balance = try cli(["balance", "--workspace", ws.root.path]).out
        let totals = balance.split(separator: "\n").filter { $0.contains(" Total") }
        XCTAssertFalse(totals.isEmpty, balance)
        for line in totals { XCTAssertTrue(line.hasSuffix(" 0.00"), String(line)) }
        XCTAssertTrue(totals.contains { $0.hasPrefix("production  Total, all currencies") }, balance)
        XCTAssertTrue(balance.hasSuffix("Each book's balances sum to zero in each currency and in USD (debits equal credits).\n"), balance)
        let balanceLines = balance.split(separator: "\n")
        let usdTotal = try XCTUnwrap(balanceLines.first { $0.hasPrefix("production  Total ") && $0.contains(" USD ") })
        let usdRows = balanceLines.filter { $0.hasPrefix("production  ") && !$0.contains("Total") && $0.contains(" USD ") }
        func debit(_ line: Substring) -> Decimal { Decimal(string: String(line.split(separator: " ", omittingEmptySubsequences: true)[3])) ?? -1 }
        XCTAssertEqual(debit(usdTotal), usdRows.map(debit).reduce(0, +), "the total's debits are its accounts'")
        XCTAssertEqual(try cli(["balance", "--workspace", ws.root.path]).status, 0)
        // Books that do not balance (the month totals tampered with): said, and exit 1, in every
        // format, for a script to stop on (it printed a WARNING and exited 0).
        let dbPath = ws.root.appendingPathComponent("ledger.sqlite").path
        let tamper = "UPDATE balance_month SET balance_minor = balance_minor + ? WHERE (book, month, account_id, currency) = (SELECT book, month, account_id, currency FROM balance_month WHERE book = 'production' ORDER BY 1, 2, 3, 4 LIMIT 1)"
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: tamper, arguments: [100000]) }
        for format in ["table", "csv", "json"] {
            let broken = try cli(["balance", "--format", format, "--through", "all", "--workspace", ws.root.path])
            XCTAssertEqual(broken.status, 1, format)
            XCTAssertTrue(broken.err.hasPrefix("balance: the balances do not sum to zero: production "), broken.err)
            XCTAssertTrue(broken.err.contains("run `iapledger verify`"), broken.err)
            if format == "table" { XCTAssertTrue(broken.out.contains("WARNING: balances do not sum to zero: production "), broken.out) }
        }
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: tamper, arguments: [-100000]) }
        XCTAssertEqual(try cli(["balance", "--workspace", ws.root.path]).status, 0)
        // verify --workbook: a file that cannot be read is named once; not with --runs.
        let missing = try cli(["verify", "--workbook", "/nonexistent.xlsx", "--workspace", ws.root.path])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.out.hasPrefix("/nonexistent.xlsx: ") && !missing.out.contains("/nonexistent.xlsx: /nonexistent.xlsx"), missing.out)
        XCTAssertEqual(try cli(["verify", "--runs", "--workbook", "/nonexistent.xlsx", "--workspace", ws.root.path]).status, 64)
        // A value checked when the command runs is said with that command's usage (it gave the
        // top-level one: "Usage: iapledger <subcommand>").
        for (args, name) in [(["balance", "--through", "2026-13-01"], "balance"), (["run", "--as-of", "2026-11-31"], "run"),
                             (["close", "2026-9"], "close"), (["verify", "--runs", "--workbook", "x.xlsx"], "verify")] {
            let r = try cli(args + ["--workspace", ws.root.path])
            XCTAssertEqual(r.status, 64, "\(args): \(r.err)")
            XCTAssertTrue(r.err.hasPrefix("Error: ") && r.err.contains("\nUsage: iapledger \(name) ") && r.err.hasSuffix("\n  See 'iapledger \(name) --help' for more information.\n"), "\(args): \(r.err)")
        }
        // init on a file: said as such, not as Foundation's error domain.
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: scratch.appendingPathComponent("afile"))
        let onFile = try cli(["init", scratch.appendingPathComponent("afile").path])
        XCTAssertEqual(onFile.status, 1)
        XCTAssertTrue(onFile.err.contains("afile: is a file, not a folder") && !onFile.err.contains("NSCocoaErrorDomain"), onFile.err)
        // The help says the workspace's default once.
        let help = try cli(["balance", "--help"])
        XCTAssertTrue(help.out.contains("(default: the current folder)") && !help.out.contains("(default: .)"), help.out)
    }

    func cli(_ args: [String], in folder: URL? = nil) throws -> (status: Int32, out: String, err: String) {
        let r = try Resilience.cli(args, in: folder)
        return (r.status, r.out, r.err)
    }

    func refundedReconciledWorkspace() throws {
        try ws.write("inbox/receipts/day1.jsonl", Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-7,acct-7,7001,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-10-06")
        try ws.write("inbox/receipts/day2.jsonl", Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-07T09:00:00Z")]) + "\n")
        try ws.run("2026-10-08")
    }

    /// A prorated refund's trace shows each figure as its share of the sale's, rounded once
    /// (an auditor recomputing a 50% refund had only the postings); a reversal says it negates
    /// the refund; a sale whose tax is added to prices says there is none in its gross.
    func testTraceComputesAProratedRefundFromItsSale() throws {
        let rules = AppliedRules(storefront: "USA", storefrontSource: "default_storefront", storefrontEffectiveFrom: "2020-01-01", taxRate: "0.07",
                                 taxIncluded: false, priceSource: "prices.csv 9.99 from 2020-01-01", commissionRate: "0.15",
                                 commissionReason: "reduced", fxRate: "1", fxMonth: "2026-10")
        let sale = Poster.figures(grossMinor: 999, currency: "USD", taxRate: ExactDecimal("0.07")!, taxIncluded: false,
                                  commissionRate: ExactDecimal("0.15")!, fx: ExactDecimal("1")!, reportingCurrency: "USD")
        func entry(_ kind: EntryKind, _ figures: SaleFigures, _ p: Int64? = nil) -> TransactionTrace.Entry {
            .init(entry_id: 1, run_id: 1, hash: "", hash_holds: true, kind: kind.rawValue, date: "2026-10-05", original_date: "2026-10-05",
                  late: false, refund_percentage: p, reporting_currency: "USD", postings: [], figures: figures)
        }
        let s = entry(.sale, sale)
        XCTAssertEqual(TraceOutput.computation(of: s, sale: s, rules: rules), [
            "computed (accounting.md; each figure rounded half to even once):",
            "  gross G = 9.99 USD; net N = G = 9.99 USD (tax 0.07 is added to prices, not in G: no tax in the figures)",
            "  commission C = round(N x 0.15) = 1.50 USD; proceeds P = N - C = 8.49 USD",
            "  in USD at 1 (USD 2026-10): N_r = round(N x 1) = 9.99 USD, C_r = round(C x 1) = 1.50 USD, P_r = N_r - C_r = 8.49 USD; gross 9.99 USD (a memo figure, as G)",
        ])
        // A figure the entry holds otherwise than its formula gives (changed after it was posted:
        // an auditor's review saw "round(N x 0.15) = 8.00" printed for a forged commission).
        var forged = sale
        forged.commissionMinor = 800
        forged.proceedsMinor = 199
        XCTAssertEqual(TraceOutput.computation(of: entry(.sale, forged), sale: nil, rules: rules)[2],
                       "  commission C = round(N x 0.15) = 1.50 USD, but the entry holds 8.00 USD (changed after it was posted: `iapledger verify` says more); "
                       + "proceeds P = N - C = 8.49 USD, but the entry holds 1.99 USD (changed after it was posted: `iapledger verify` says more)")
        // 50%: N' = round(499.5) = 500 (half to even), C' = round(75) = 75.
        let half = SaleFigures(currency: "USD", grossMinor: 500, taxMinor: 0, netMinor: 500, commissionMinor: 75, proceedsMinor: 425,
                               reportingCurrency: "USD", grossReportingMinor: 500, netReportingMinor: 500, commissionReportingMinor: 75, proceedsReportingMinor: 425)
        XCTAssertEqual(TraceOutput.computation(of: entry(.refund, half, 50_000), sale: s, rules: rules), [
            "computed: 50.000% of the sale's amounts, each rounded half to even once (accounting.md, prorated refund):",
            "  N' = round(9.99 USD x 50.000%) = 5.00 USD, C' = round(1.50 USD x 50.000%) = 0.75 USD, P' = N' - C' = 4.25 USD",
            "  N'_r = round(9.99 USD x 50.000%) = 5.00 USD, C'_r = round(1.50 USD x 50.000%) = 0.75 USD, P'_r = N'_r - C'_r = 4.25 USD",
            "  memo figures: gross G' = round(9.99 USD x 50.000%) = 5.00 USD, tax T' = G' - N' = 0.00 USD, gross in USD round(9.99 USD x 50.000%) = 5.00 USD",
        ])
        XCTAssertEqual(TraceOutput.computation(of: entry(.refundReversal, half, 50_000), sale: s, rules: rules),
                       ["computed: the exact negation of the refund entry (REFUND_REVERSED)"])
    }

    func testTraceOfARefundedReconciledTransaction() throws {
        try refundedReconciledWorkspace()
        let (status, out, _) = try cli(["trace", "7001", "--format", "json", "--workspace", ws.root.path])
        XCTAssertEqual(status, 0)
        let t = try JSONSerialization.jsonObject(with: Data(out.utf8)) as! [String: Any]
        XCTAssertEqual(t["transaction_id"] as? String, "7001")
        XCTAssertEqual(t["book"] as? String, "production")
        XCTAssertEqual(t["status"] as? String, "posted")
        let sources = t["sources"] as! [[String: Any]]
        XCTAssertEqual(sources.map { "\($0["path"]!):\($0["line"]!)" }, ["inbox/receipts/day1.jsonl:1", "inbox/receipts/day2.jsonl:1"])
        XCTAssertTrue(sources.allSatisfy { ($0["sha256"] as? String)?.count == 64 })
        let rules = t["rules"] as! [String: Any]
        XCTAssertEqual(rules["storefront"] as? String, "DEU")
        XCTAssertEqual(rules["storefrontSource"] as? String, "order ord-7")
        XCTAssertEqual(rules["commissionRate"] as? String, "0.30")
        XCTAssertEqual(rules["fxRate"] as? String, "1.10")
        let entries = t["entries"] as! [[String: Any]]
        XCTAssertEqual(entries.map { $0["kind"] as! String }, ["sale", "refund"])
        XCTAssertEqual(entries.map { $0["date"] as! String }, ["2026-10-05", "2026-10-07"])
        XCTAssertEqual(entries.map { $0["late"] as! Bool }, [false, false])
        let salePostings = entries[0]["postings"] as! [[String: Any]]
        XCTAssertEqual(salePostings.map { $0["amount_minor"] as! Int }, [64, 28, -92])
        XCTAssertEqual(salePostings.map { $0["reporting_amount_minor"] as! Int }, [70, 31, -101])
        XCTAssertEqual((t["orders"] as! [[String: Any]]).map { $0["order_id"] as! String }, ["ord-7"])
        let exceptions = t["exceptions"] as! [[String: Any]]
        XCTAssertEqual(exceptions.map { $0["category"] as! String }, ["REFUNDED_STILL_CREDITED"])
        XCTAssertEqual(exceptions.first?["first_seen"] as? String, "2026-10-08")
        let placement = (t["reports"] as! [[String: Any]]).first!
        XCTAssertEqual(placement["sheet"] as? String, "Journal")
        XCTAssertEqual(placement["written"] as? Bool, true)
        // The rows named are the rows of the workbook that hold this transaction.
        let journal = try XLSXReader.sheets(ws.root.appendingPathComponent(placement["workbook"] as! String))["Journal"]!
        for row in placement["rows"] as! [Int] { XCTAssertEqual(journal[row - 1][5], "7001", "row \(row)") }

        let text = try cli(["trace", "7001", "--workspace", ws.root.path]).out
        for needle in ["day1.jsonl:1", "storefront DEU (from order ord-7", "sale on 2026-10-05", "refund on 2026-10-07",
                       "ord-7 v1", "REFUNDED_STILL_CREDITED open"] {
            XCTAssertTrue(text.contains(needle), "text trace lacks \(needle):\n\(text)")
        }
        // Each entry with the run that posted it and its hash (the chain verify checks).
        let saleHash = try XCTUnwrap(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read {
            try $0.rawRows("SELECT run_id, hash FROM entry WHERE transaction_id = '7001' AND kind = 'sale'") }.first)
        XCTAssertTrue(text.contains("sale on 2026-10-05, posted by run \(saleHash[0]) (the night of 2026-10-06), hash \(saleHash[1])"), text)
        XCTAssertEqual((t["entries"] as! [[String: Any]]).first?["hash"] as? String, saleHash[1])
        // How each figure was computed, with the rates the sale recorded (the gross and tax
        // behind the workbooks' columns were not in the trace).
        for needle in ["      computed (accounting.md; each figure rounded half to even once):\n"
                       + "        gross G = 1.09 EUR; net N = round(G / (1 + 0.19)) = 0.92 EUR; tax T = G - N = 0.17 EUR (a memo figure: the store remits it)\n"
                       + "        commission C = round(N x 0.30) = 0.28 EUR; proceeds P = N - C = 0.64 EUR\n"
                       + "        in USD at 1.10 (EUR 2026-10): N_r = round(N x 1.10) = 1.01 USD, C_r = round(C x 1.10) = 0.31 USD, P_r = N_r - C_r = 0.70 USD; gross 1.20 USD (a memo figure, as G)\n",
                       "      computed: the sale's own amounts, reporting amounts included (N' = N, C' = C, P' = P)\n"] {
            XCTAssertTrue(text.contains(needle), "text trace lacks \(needle):\n\(text)")
        }
        let figures = try XCTUnwrap(entries[0]["figures"] as? [String: Any])
        XCTAssertEqual(["grossMinor", "taxMinor", "netMinor", "commissionMinor", "proceedsMinor", "grossReportingMinor"].map { figures[$0] as? Int },
                       [109, 17, 92, 28, 64, 120])
        let order = try cli(["trace", "ord-7", "--workspace", ws.root.path])
        XCTAssertEqual(order.status, 0)
        XCTAssertTrue(order.out.contains("Order ord-7: 1 version(s)") && order.out.contains("Transaction 7001"), order.out)

        // Its order reversed: no exception, no match, and the note says why from what the
        // ledger holds (it listed the usual causes, leaving the auditor to guess).
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "ord-7,acct-7,7001,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,2026-10-08T09:00:00Z\n")
        try ws.run("2026-10-09")
        let settled = try JSONSerialization.jsonObject(with: Data(try cli(["trace", "7001", "--format", "json", "--workspace", ws.root.path]).out.utf8)) as! [String: Any]
        XCTAssertEqual((settled["reconciliation"] as? [String: Any])?["note"] as? String,
                       "not matched: it is refunded in full (a sale refunded in full is matched to no order); no active order names it now (ord-7: its latest version is reversed or names another transaction)")
    }

    /// `trace --source-text` shows each source record and order line as it was read, from the
    /// ledger alone (the inbox files removed): the receipt's JSON line, the order's CSV line,
    /// and a refused line of an order; without the option, no text.
    func testTraceShowsTheSourceTextAsReadFromTheLedger() throws {
        try refundedReconciledWorkspace()
        let day1 = Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z")])
        try ws.write("inbox/orders/bad.csv", ReconciliationTests.header + "ord-7,acct-7,7001,coins.100,abc,100,2026-10-05T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-10-09")
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("inbox"))

        let json = try cli(["trace", "7001", "--source-text", "--format", "json", "--workspace", ws.root.path])
        XCTAssertEqual(json.status, 0, json.err)
        let t = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as! [String: Any]
        let sources = t["sources"] as! [[String: Any]]
        XCTAssertEqual(sources.first?["text"] as? String, day1)
        XCTAssertEqual(sources.map { Hashing.sha256Hex(utf8: $0["text"] as! String) }, sources.map { $0["record_sha256"] as! String })
        XCTAssertEqual((t["orders"] as! [[String: Any]]).first?["text"] as? String,
                       "ord-7,acct-7,7001,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,")

        let text = try cli(["trace", "ord-7", "--source-text", "--workspace", ws.root.path]).out
        for needle in ["text as read (\(day1.utf8.count) bytes):", "      | " + day1,
                       "    | ord-7,acct-7,7001,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,",
                       "inbox/orders/bad.csv:2 rejected", "    | ord-7,acct-7,7001,coins.100,abc,100,2026-10-05T10:01:00Z,production,DEU,,"] {
            XCTAssertTrue(text.contains(needle), "lacks \(needle):\n\(text)")
        }
        // A JSON document written with CRLF line ends, and an order line holding an escape
        // sequence: each line is marked, the carriage returns and the escape shown as text,
        // not sent to the terminal.
        try ws.write("inbox/receipts/crlf.json", Receipt.response([Receipt.item("7002", purchased: "2026-10-09T10:00:00Z")])
            .replacingOccurrences(of: ",", with: ",\r\n"))
        try ws.write("inbox/orders/esc.csv", ReconciliationTests.header
                     + "ord-8,acct-8,7002,coins.100,1,100,2026-10-09T10:01:00Z,production,DEU,,\u{1B}[2J\n")
        try ws.run("2026-10-10")
        let crlf = try cli(["trace", "7002", "--source-text", "--workspace", ws.root.path])
        XCTAssertEqual(crlf.status, 0, crlf.err)
        XCTAssertFalse(crlf.out.contains("\r"), crlf.out)
        let marked = crlf.out.split(separator: "\n").drop { !$0.contains("text as read") }.dropFirst().prefix { $0.contains(" | ") }
        XCTAssertGreaterThan(marked.count, 5, crlf.out)
        XCTAssertTrue(marked.dropLast().allSatisfy { $0.hasSuffix(",\\u{D}") }, crlf.out)
        let esc = try cli(["trace", "ord-8", "--source-text", "--workspace", ws.root.path])
        XCTAssertEqual(esc.status, 0, esc.err)
        XCTAssertFalse(esc.out.contains("\u{1B}"), esc.out)
        XCTAssertTrue(esc.out.contains("    | ord-8,acct-8,7002,coins.100,1,100,2026-10-09T10:01:00Z,production,DEU,,\\u{1B}[2J"), esc.out)

        let plain = try cli(["trace", "7001", "--format", "json", "--workspace", ws.root.path]).out
        XCTAssertFalse(plain.contains("\"text\""), plain)
        XCTAssertFalse(try cli(["trace", "ord-7", "--workspace", ws.root.path]).out.contains("text as read"))
    }

    /// A refused line of an orders file stays under its order: `trace` shows it with why, and a
    /// valid line of the same order read after it resolves it (it leaves the open list); a
    /// refused line after a valid one stays open (what it said was not taken).
    func testRejectedOrderLinesAreTracedAndResolvedByALaterValidLine() throws {
        try ws.write("inbox/receipts/day1.jsonl", Receipt.response([Receipt.item("7101", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o1.csv", ReconciliationTests.header
                     + "ord-71,acct-7,7101,coins.100,abc,100,2026-10-05T10:01:00Z,production,DEU,,\n"
                     + "ord-72,acct-7,,coins.100,1,100,2026-10-05T10:02:00Z,production,DEU,,\n"
                     + "ord-72,acct-7,,coins.100,1,100,not-a-date,production,DEU,,\n"
                     + "ord-74,acct-7,7101\n")
        try ws.run("2026-10-06")
        func openRejected() throws -> [String] {
            try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
                try String.fetchAll($0.db, sql: """
                    SELECT coalesce(order_id, '-') || ' line ' || line FROM source_record
                    WHERE outcome = 'rejected' AND resolved_run_id IS NULL ORDER BY id
                    """)
            }
        }
        // The short row's fields may be shifted, but not its first, order_id: it names its order.
        XCTAssertEqual(try openRejected(), ["ord-71 line 2", "ord-72 line 4", "ord-74 line 5"])
        let shortRow = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try Row.fetchAll($0.db, sql: "SELECT order_id, outcome FROM source_record WHERE line = 5")
        }
        XCTAssertEqual(shortRow.count, 1)
        XCTAssertEqual(shortRow.first?[1], "rejected")
        XCTAssertEqual(shortRow.first?[0] as String?, "ord-74")
        var trace = try cli(["trace", "ord-71", "--workspace", ws.root.path])
        XCTAssertEqual(trace.status, 0, "an order known only from a refused line is traced: \(trace.err)")
        XCTAssertTrue(trace.out.contains("Order ord-71: 0 version(s)"), trace.out)
        XCTAssertTrue(trace.out.contains("inbox/orders/o1.csv:2 rejected, read 2026-10-06: BAD_ORDER: quantity \"abc\""), trace.out)
        XCTAssertTrue(trace.out.contains("still open"), trace.out)
        XCTAssertTrue(trace.out.contains("No line of it was taken (only the lines not taken, above): it credits nothing in the ledger until a valid line of it is read."), trace.out)
        XCTAssertFalse(trace.out.contains("names no transaction"), "its refused line names 7101, which the ledger knows: \(trace.out)")

        // The backend sends the order again, corrected, the next night.
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "ord-71,acct-7,7101,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-10-07")
        XCTAssertEqual(try openRejected(), ["ord-72 line 4", "ord-74 line 5"], "the corrected order resolves its refused line; ord-72's later refused line stays open")
        // Run Info's ledger totals count it as resolved, and still add up to every record.
        let (totals, records) = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            (try $0.totals(), try Int.fetchOne($0.db, sql: "SELECT count(*) FROM source_record") ?? 0)
        }
        XCTAssertEqual([totals.recordsRejected, totals.recordsResolved], [2, 1])
        XCTAssertEqual(totals.recordsVerified + totals.recordsPending + totals.recordsRejected + totals.recordsResolved, records)
        trace = try cli(["trace", "ord-71", "--format", "json", "--workspace", ws.root.path])
        let o = try JSONSerialization.jsonObject(with: Data(trace.out.utf8)) as! [String: Any]
        XCTAssertEqual((o["versions"] as! [[String: Any]]).map { "\($0["path"]!):\($0["line"]!)" }, ["inbox/orders/o2.csv:2"])
        let line = try XCTUnwrap((o["lines_not_taken"] as! [[String: Any]]).first)
        XCTAssertEqual(line["resolved_on"] as? String, "2026-10-07")
        XCTAssertEqual(line["resolution"] as? String, "order ord-71 read again from inbox/orders/o2.csv:2")
        XCTAssertEqual((o["transaction"] as? [String: Any])?["transaction_id"] as? String, "7101")

        let ord72 = try cli(["trace", "ord-72", "--workspace", ws.root.path]).out
        XCTAssertTrue(ord72.contains("Order ord-72: 1 version(s)") && ord72.contains("o1.csv:4 rejected") && ord72.contains("still open"), ord72)
        XCTAssertTrue(ord72.contains("It names no transaction.\n"), ord72)

        // The same file sent again under another name: its valid line repeats one the order
        // had before, so it corrects nothing: the refused lines stay open, each once (their
        // copies are settled as repeats of them; ord-71's, of a line settled already).
        let first = try String(contentsOf: ws.root.appendingPathComponent("inbox/orders/o1.csv"), encoding: .utf8)
        try ws.write("inbox/orders/o1-resent.csv", first)
        try ws.run("2026-10-08")
        XCTAssertEqual(try openRejected(), ["ord-72 line 4", "ord-74 line 5"])
        let copies = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try String.fetchAll($0.db, sql: """
                SELECT r.resolved_note FROM source_record r JOIN source_file f ON f.id = r.file_id
                WHERE f.path = 'inbox/orders/o1-resent.csv' AND r.outcome = 'rejected' ORDER BY r.line
                """)
        }
        XCTAssertEqual(copies, [2, 4, 5].map { "the same record as inbox/orders/o1.csv:\($0) (read by the night of 2026-10-06), which stands for it" })
        XCTAssertEqual(try cli(["trace", "ord-99", "--workspace", ws.root.path]).status, 1, "an id nothing names is still not found")
    }

    /// A transaction's trace lists the open orders lines naming it that were not taken (the
    /// store keeps a refused line under its order alone), by the field in its transaction_id
    /// column, in a row with fewer or more fields too; and a transaction only such a line names
    /// is traced from it (an auditor's review: trace listed neither).
    func testATransactionsTraceListsTheOrdersLinesNamingItThatWereNotTaken() throws {
        try ws.write("inbox/receipts/day1.jsonl", Receipt.response([Receipt.item("7201", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o1.csv", ReconciliationTests.header
                     + "ord-81,acct-8,7201,coins.100,abc,100,2026-10-05T10:01:00Z,production,DEU,,\n"
                     + "ord-82,acct-8,7201,coins.100,1,100,2026-10-05T10:02:00Z,production,DEU,,\n"
                     + "ord-83,acct-8,7299,coins.100,0,100,2026-10-05T10:03:00Z,production,DEU,,\n"
                     + "ord-84,7201,,coins.100,0,100,2026-10-05T10:04:00Z,production,DEU,,\n"
                     + "ord-85,acct-8,7201\n"
                     + "ord-86,acct-8,7201\u{A0},coins.100,1,100,2026-10-05T10:05:00Z,production,DEU,,\n"
                     + "ord-87,acct-8,7999,coins.100,1,100,2026-10-05T10:06:00Z,production,DEU,7201,,extra\n")
        try ws.run("2026-10-06")
        let trace = try cli(["trace", "7201", "--workspace", ws.root.path])
        XCTAssertEqual(trace.status, 0, trace.err)
        XCTAssertTrue(trace.out.contains("Orders lines naming it that were not taken (2):\n"), trace.out)
        XCTAssertTrue(trace.out.contains("  inbox/orders/o1.csv:2 rejected, read 2026-10-06: BAD_ORDER: quantity \"abc\""), trace.out)
        XCTAssertTrue(trace.out.contains("  inbox/orders/o1.csv:6 rejected, read 2026-10-06: BAD_ORDER: has 3 fields"), trace.out)
        XCTAssertFalse(trace.out.contains("o1.csv:5"), "its account_id, not its transaction_id, is 7201: \(trace.out)")
        XCTAssertFalse(trace.out.contains("o1.csv:7"), "it names 7201 and a no-break space, another id, refused for it: \(trace.out)")
        XCTAssertFalse(trace.out.contains("o1.csv:8"), "7201 is in its app_account_token column, its transaction_id is 7999: \(trace.out)")
        XCTAssertTrue(trace.out.contains("sheet Rejected: the row whose Record (file:line) is inbox/orders/o1.csv:2"), trace.out)
        XCTAssertTrue(trace.out.contains("Orders (1 version):\n  ord-82 v1"), "the line taken is a version, not among those not taken: \(trace.out)")

        let unknown = try cli(["trace", "7299", "--format", "json", "--workspace", ws.root.path])
        XCTAssertEqual(unknown.status, 0, "a transaction only a refused orders line names is traced from it: \(unknown.err)")
        let t = try JSONSerialization.jsonObject(with: Data(unknown.out.utf8)) as! [String: Any]
        XCTAssertEqual(t["status"] as? String, "unknown to the store")
        XCTAssertTrue(unknown.out.contains(#""path" : "inbox/orders/o1.csv""#), "a path in JSON as it is, no \\/: \(unknown.out)")
        XCTAssertEqual((t["order_lines_not_taken"] as! [[String: Any]]).map { "\($0["path"]!):\($0["line"]!) \($0["outcome"]!)" },
                       ["inbox/orders/o1.csv:4 rejected"])
        XCTAssertEqual(try cli(["trace", "7298", "--workspace", ws.root.path]).status, 1, "an id nothing names is still not found")
        // A file refused whole keeps its text whole, header first: its rows are read by its
        // header's transaction_id column (a review: only the header was looked at).
        XCTAssertTrue(TraceOutput.namesTransaction("T1", line: "order_id,acct,transaction_id\nord-w1,acct-1,T1\n", header: nil))
        XCTAssertFalse(TraceOutput.namesTransaction("T1", line: "order_id,account_id,transaction_id\nord-w1,T1,T2\n", header: nil))
        XCTAssertTrue(TraceOutput.namesTransaction("T1", line: "order_id;account_id\nord-w1,acct,T1\n", header: nil), "no such column: any field")
    }

    /// A sale booked at its order's storefront keeps it when a later version of the order names
    /// another: the trace says which version gave it and what the latest says (an auditor's
    /// review: v2's storefront showed just below the v1 storefront the sale was booked at).
    func testTraceSaysWhichOrderVersionGaveTheStorefront() throws {
        try ws.write("inbox/receipts/day1.jsonl", Receipt.response([Receipt.item("7301", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o1.csv", ReconciliationTests.header + "ord-91,acct-9,7301,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-10-06")
        var trace = try cli(["trace", "7301", "--workspace", ws.root.path]).out
        XCTAssertTrue(trace.contains("storefront DEU (from order ord-91,"), trace)
        XCTAssertFalse(trace.contains("its latest version"), "one version: nothing to say: \(trace)")
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "ord-91,acct-9,7301,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        trace = try cli(["trace", "7301", "--workspace", ws.root.path]).out
        XCTAssertTrue(trace.contains("storefront DEU (from order ord-91,"), trace)
        XCTAssertTrue(trace.contains("(the storefront of order ord-91 v1; its latest version, v2 (inbox/orders/o2.csv:2), names storefront USA: a version read after the sale posted moves no entry)"), trace)
    }

    /// The night's summary counts what it could not post apart: its records still pending or
    /// rejected, then the findings it opened (a sale waiting for a rule is not a record).
    func testRunSummaryCountsRecordsAndFindingsApart() throws {
        try ws.write("inbox/orders/orders.csv", ReconciliationTests.header + "ord-1,acct-1,2001,coins.100,1,100,2026-11-03T10:00:05Z,production,DEU,,\n")
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2001", purchased: "2026-11-03T10:00:00Z")]) + "\n"
                     + Receipt.response([], status: 21003) + "\n")
        let run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("this run: 1 record still pending or rejected (not posted), 1 new finding; see Run Info"), run.out)
        XCTAssertTrue(run.out.contains("inbox/receipts/n.jsonl:2: rejected: status 21003"), run.out)
        XCTAssertTrue(run.out.contains("MISSING_RULE 2001: "), run.out)
        // Each kind is counted by its reason, and listed under its count.
        XCTAssertTrue(run.out.contains("    records: 1 rejected STATUS_21003\n      inbox/receipts/n.jsonl:2: rejected"), run.out)
        XCTAssertTrue(run.out.contains("    findings: 1 MISSING_RULE\n      MISSING_RULE 2001: "), run.out)
    }

    /// The night's summary says what reconciliation left open, by category, and what the night
    /// opened and resolved: under cron it is the only hint finance gets to look.
    func testRunSummarySaysTheExceptionsOpen() throws {
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2101", purchased: "2026-11-03T10:00:00Z"),
                                                                 Receipt.item("2102", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/a.csv", ReconciliationTests.header
                     + "ord-1,acct-1,2101,coins.100,1,100,2026-11-03T10:00:05Z,production,USA,,\n"
                     + "ord-2,acct-1,2101,coins.100,1,100,2026-11-03T10:00:06Z,production,USA,,\n")
        var run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("  reconciliation: 2 exceptions open (2 opened by this run, 0 resolved): 1 DUPLICATE_CREDIT, 1 NOT_CREDITED; `iapledger exceptions` lists them"), run.out)
        // The duplicate reversed, the lost order sent: both resolved the next night.
        try ws.write("inbox/orders/b.csv", ReconciliationTests.header
                     + "ord-2,acct-1,2101,coins.100,1,100,2026-11-03T10:00:06Z,production,USA,,2026-11-04T09:00:00Z\n"
                     + "ord-3,acct-1,2102,coins.100,1,100,2026-11-04T10:00:06Z,production,USA,,\n")
        run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-05", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("  reconciliation: 0 exceptions open (0 opened by this run, 2 resolved); "), run.out)
        run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-06", "--no-progress"])
        XCTAssertTrue(run.out.contains("  reconciliation: no exception open\n"), run.out)
    }

    /// A log on a full disk: stderr that cannot be written loses the message but the run still
    /// ends with its status (it crashed, SIGILL, with no message), and output cut short by a
    /// full disk (a CSV, a trace, a night's summary) exits 1, saying so on stderr.
    func testOutputThatCannotBeWrittenIsAFailureNotACrash() throws {
        guard FileManager.default.fileExists(atPath: "/dev/full") else { throw XCTSkip("no /dev/full") }
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2201", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        func run(_ args: [String], stdout: String?, stderr: String?) throws -> (status: Int32, reason: Process.TerminationReason, err: String) {
            let p = Process()
            p.executableURL = Self.binary
            p.arguments = args
            let err = Pipe()
            p.standardOutput = stdout.map { FileHandle(forWritingAtPath: $0)! } ?? FileHandle.nullDevice
            p.standardError = stderr.map { FileHandle(forWritingAtPath: $0)! } ?? err
            try p.run()
            let e = stderr == nil ? err.fileHandleForReading.readDataToEndOfFile() : Data()
            p.waitUntilExit()
            return (p.terminationStatus, p.terminationReason, String(decoding: e, as: UTF8.self))
        }
        // A refused night (an as-of date later than tomorrow), its error going to a full stderr.
        var r = try run(["run", "--workspace", ws.root.path, "--as-of", "2099-01-01", "--no-progress"], stdout: nil, stderr: "/dev/full")
        XCTAssertEqual(r.reason, .exit)
        XCTAssertEqual(r.status, 1)
        // A night whose summary cannot be written: committed, but exit 1, said on stderr.
        r = try run(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"], stdout: "/dev/full", stderr: nil)
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("its output could not be written to standard output (No space left on device): what the command did is done"), r.err)
        XCTAssertEqual(try cli(["balance", "--workspace", ws.root.path]).status, 0, "the night was committed")
        r = try run(["exceptions", "--workspace", ws.root.path, "--status", "all", "--format", "csv"], stdout: "/dev/full", stderr: nil)
        XCTAssertEqual(r.status, 1)
        r = try run(["trace", "2201", "--workspace", ws.root.path, "--format", "json"], stdout: "/dev/full", stderr: nil)
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(try run(["trace", "2201", "--workspace", ws.root.path], stdout: "/dev/null", stderr: nil).status, 0)
        // The help and the version too (they exited 0).
        for args in [["--version"], ["--help"], ["help", "run"], ["run", "--help"]] {
            r = try run(args, stdout: "/dev/full", stderr: nil)
            XCTAssertEqual(r.status, 1, "\(args)")
            XCTAssertTrue(r.err.contains("its output could not be written to standard output (No space left on device)"), r.err)
            XCTAssertEqual(try run(args, stdout: "/dev/null", stderr: nil).status, 0, "\(args)")
        }
    }

    /// A night whose log reader went away (a pipe closed at its other end: `| logger` that
    /// died) was ended by SIGPIPE after its commit, with no workbooks and no message. It now
    /// writes its workbooks and exits 1, saying on stderr that its summary was cut short; a
    /// command read by `| head` exits 1 too, quietly.
    func testANightWhoseReaderWentAwayWritesItsWorkbooksAndSaysSo() throws {
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2301", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        func run(_ args: [String]) throws -> (status: Int32, reason: Process.TerminationReason, err: String) {
            let p = Process()
            p.executableURL = Self.binary
            p.arguments = args
            let out = Pipe(), err = Pipe()
            p.standardOutput = out
            p.standardError = err
            try out.fileHandleForReading.close()   // nobody reads: every write fails (EPIPE)
            try p.run()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return (p.terminationStatus, p.terminationReason, String(decoding: e, as: UTF8.self))
        }
        var r = try run(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"])
        XCTAssertEqual(r.reason, .exit, "not ended by a signal: \(r)")
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("its output could not be written to standard output (Broken pipe): what the command did is done"), r.err)
        XCTAssertTrue(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-11-04/finance-2026-11-04.xlsx").path))
        r = try run(["balance", "--workspace", ws.root.path])
        XCTAssertEqual(r.reason, .exit)
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.err, "", "a reader that stopped reading is answered by the status alone")
    }

    /// Every command pointed at a folder that is no workspace says so, exits 1 and leaves the
    /// folder as it was (`report` left its lock file there).
    func testCommandsInAFolderThatIsNoWorkspaceLeaveItAsItWas() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("no-workspace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        for args in [["run", "--as-of", "2026-11-04"], ["report", "--period", "2026-10"], ["report", "--as-of", "2026-10-31"],
                     ["close", "2026-10"], ["balance"], ["exceptions"], ["findings"], ["trace", "1001"], ["verify"],
                     ["dismiss", "inbox/orders/o.csv", "--reason", "test"]] {
            let r = try cli(args + ["--workspace", empty.path])
            XCTAssertEqual(r.status, 1, "\(args): \(r.err)")
            XCTAssertTrue(r.err.contains("is not an iapledger workspace"), "\(args): \(r.err)")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: empty.path), [], "\(args)")
        }
        // A folder inside a workspace (its inbox) is pointed at the workspace, not told to
        // `init` a workspace inside the inbox.
        let inbox = ws.root.appendingPathComponent("inbox").path
        let r = try cli(["balance", "--workspace", inbox])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("\(inbox) is not an iapledger workspace, but a folder inside the workspace \(ws.root.standardizedFileURL.path): run the command there, or give `--workspace ")
                      && !r.err.contains("iapledger init"), r.err)
        // Its config named instead of its folder: said so.
        let file = try cli(["balance", "--workspace", ws.root.appendingPathComponent("iapledger.toml").path])
        XCTAssertTrue(file.err.contains("iapledger.toml: is a file, not a folder: give the workspace's folder"), file.err)
        // A folder that merely lies below a workspace (not one of its own) is told to init.
        let other = ws.root.appendingPathComponent("projects/next")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        let o = try cli(["balance", "--workspace", other.path])
        XCTAssertTrue(o.err.contains("is not an iapledger workspace (run `iapledger init "), o.err)
        // A workspace whose config is gone is told to restore it (`init` there refuses).
        try ws.run("2026-11-03")
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("iapledger.toml"))
        let lost = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04"])
        XCTAssertEqual(lost.status, 1)
        XCTAssertTrue(lost.err.contains("iapledger.toml: not found, though \(ws.root.path) holds a workspace's ledger.sqlite, rules, inbox, reports: its config is missing (deleted, or left out of a restore): restore iapledger.toml from its backup"), lost.err)
        XCTAssertFalse(lost.err.contains("iapledger init"), lost.err)
    }

    /// Records and findings each show their first ten lines, under their counts by reason:
    /// many records no longer hide every finding, and the rest of each is counted.
    func testRunSummaryListsRecordsAndFindingsEachWithItsCounts() throws {
        // Twelve records, each its own bytes (a record repeating another is settled as its repeat).
        let rejected = (1...12).map { Receipt.response([], status: 21003) + String(repeating: " ", count: $0) }
        let waiting = (1...11).map { Receipt.response([Receipt.item("60\($0)", product: "coins.none", purchased: "2026-11-03T10:00:00Z")]) }
        try ws.write("inbox/receipts/n.jsonl", (rejected + waiting + [Receipt.response([], status: 21010)]).joined(separator: "\n") + "\n")
        for i in 1...12 { try ws.write("inbox/stray-\(i).txt", "misplaced") }
        let run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("this run: 13 records still pending or rejected (not posted), 11 new findings"), run.out)
        XCTAssertTrue(run.out.contains("    records: 12 rejected STATUS_21003, 1 rejected STATUS_21010\n"), run.out)
        XCTAssertTrue(run.out.contains("      ... and 3 more records (Run Info lists the first thousand of each code, the reconciliation workbook 100,000)\n    findings: 11 MISSING_RULE\n      MISSING_RULE 601: "), run.out)
        XCTAssertTrue(run.out.contains("      ... and 1 more finding (`iapledger findings` lists them all, Run Info the first 1000 of each code)"), run.out)
        // Every inbox file not read is listed, not the first ten.
        XCTAssertEqual((1...12).filter { run.out.contains("inbox/stray-\($0).txt") }.count, 12, run.out)
        XCTAssertFalse(run.out.contains("... and 2 more\n"), run.out)
        XCTAssertTrue(run.out.contains("  entries posted: 0\n"), run.out)
        // The next night, their price known, the sales that waited post, and the summary says
        // what the entries are (it gave a count that the night's records did not explain).
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.none,USA,0.99,2020-01-01\n")
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.none,consumable,10\n")
        try ws.write("inbox/receipts/m.jsonl", Receipt.response([Receipt.item("6100", purchased: "2026-11-04T10:00:00Z", cancelled: "2026-11-04T12:00:00Z")]) + "\n")
        let next = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-05", "--no-progress"])
        XCTAssertEqual(next.status, 0, next.err)
        XCTAssertTrue(next.out.contains("  records: 1 new: 1 verified, 0 pending, 0 rejected; 0 already read\n"
                                        + "  entries posted: 13 (12 sales, of them 11 that waited for a rule on an earlier night, 12 booked at default_storefront (production; no storefront of their own, no order naming one); 1 refund)\n"), next.out)
    }

    /// A reason quotes what it refuses as it was read, and a file name is the sender's: an
    /// escape sequence in either could clear the summary or move lines over others. The run's
    /// summary and `exceptions` show them escaped; no ESC byte reaches the terminal.
    func testTerminalOutputShowsEscapeSequencesEscaped() throws {
        try ws.write("inbox/receipts/evil\u{1B}[1A.jsonl", Receipt.response([Receipt.item("3001", purchased: "2026-11-03T10:00:00Z")], environment: "Prod\\u001b[2J") + "\n")
        try ws.write("inbox/orders/orders.csv", ReconciliationTests.header
            + "ord-1,acct-1,3002,coins.100,1,100,2026-11-03T10:00:05Z,production,DEU,\"tok\u{1B}[2J\u{202E}\",\n")
        let run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertFalse(run.out.utf8.contains(0x1B), run.out)
        XCTAssertTrue(run.out.contains(#"evil\u{1B}[1A.jsonl:1: rejected: environment "Prod\u{1B}[2J""#), run.out)
        let exceptions = try cli(["exceptions", "--workspace", ws.root.path])
        XCTAssertEqual(exceptions.status, 0, exceptions.err)
        XCTAssertFalse(exceptions.out.utf8.contains(0x1B), exceptions.out)
        XCTAssertTrue(exceptions.out.contains("order ord-1"), exceptions.out)
    }

    /// A file the inbox does not read by its name (a gzipped day of receipts, a note), or by
    /// where it lies (the top of inbox/, a folder named in the wrong case, a folder inside an
    /// input folder) was passed over without a word: the run lists it, every night it stays.
    /// Hidden files and folders (transfers in progress) are passed over in silence.
    func testInboxFilesNotReadAreListed() throws {
        try ws.write("inbox/receipts/day.jsonl", Receipt.response([Receipt.item("4001", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        try ws.write("inbox/receipts/day2.jsonl.gz", "not read")
        try ws.write("inbox/receipts/.day3.jsonl.part", "in transfer")
        try ws.write("inbox/receipts/archive/old.jsonl", "kept aside")
        try ws.write("inbox/receipts/.cache/x.jsonl", "hidden")
        try ws.write("inbox/orders/notes.txt", "a note")
        // An orders file among the receipts: pointed to the orders folder.
        try ws.write("inbox/receipts/orders-misplaced.csv", ReconciliationTests.header)
        try ws.write("inbox/dupA.jsonl", "misplaced")
        try ws.write("inbox/Receipts/b.jsonl", "wrong case")
        try ws.write("inbox/Receipts/2026/c.jsonl", "wrong case, deeper")
        // An archive of more than a few files is one line, with their count.
        for i in 1...4 { try ws.write("inbox/signed/archive/2026-10/n\(i).jws", "kept aside") }
        try ws.write("inbox/signed/archive/n0.jws", "kept aside")
        let r = try ws.run("2026-11-04")
        let elsewhere = "inputs are read from inbox/orders/, inbox/receipts/, inbox/signed/ only; names are case-sensitive"
        XCTAssertEqual(r.notRead, ["inbox/Receipts/2026/c.jsonl: not read (\(elsewhere))",
                                   "inbox/Receipts/b.jsonl: not read (\(elsewhere))",
                                   "inbox/dupA.jsonl: not read (\(elsewhere))",
                                   "inbox/orders/notes.txt: not read (orders are *.csv)",
                                   "inbox/receipts/archive/old.jsonl: not read (in a folder inside inbox/receipts/: only the files directly in it are read)",
                                   "inbox/receipts/day2.jsonl.gz: not read (receipt responses are *.json or *.jsonl)",
                                   "inbox/receipts/orders-misplaced.csv: not read (receipt responses are *.json or *.jsonl; *.csv files are read from inbox/orders/: move it there if it is one of theirs)",
                                   "inbox/signed/archive/: 5 files not read, in it and the folders inside it (in a folder inside inbox/signed/: only the files directly in it are read)"])
        let run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-05", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("inbox files not read (a file in transfer is read once it has its final name; any other: rename or move it):\n    inbox/Receipts/2026/c.jsonl: not read (\(elsewhere))\n"), run.out)

        XCTAssertFalse(run.out.contains("rules files not read"), run.out)
        // A rules file beside the four the nights read (a split file, a copy): named every night,
        // its rows not used (it was passed over without a word). Hidden files aside.
        try ws.write("rules/products-extra.csv", "product_id,type,units\ncoins.999,consumable,999\n")
        try ws.write("rules/.prices.csv.swp", "editor")
        let withExtra = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-06", "--no-progress"])
        XCTAssertEqual(withExtra.status, 0, withExtra.err)
        XCTAssertTrue(withExtra.out.contains("  rules files not read: the nights read rules/storefronts.csv, prices.csv, products.csv, fx.csv only; the rows of these are not used (move them into those files):\n    rules/products-extra.csv\n"), withExtra.out)
    }

    /// `demo --dir` naming a folder with something in it wrote the demo's inbox and rules into
    /// it, then failed on its layouts with Foundation's raw error. It is refused first, saying
    /// why, and the folder is left as it was.
    func testADemoIntoAFolderThatIsNotEmptyIsRefused() throws {
        let dir = ws.root.appendingPathComponent("mine")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try "keep".write(to: dir.appendingPathComponent("notes.txt"), atomically: true, encoding: .utf8)
        let r = try cli(["demo", "--dir", dir.path, "--transactions", "50"])
        XCTAssertEqual(r.status, 1, r.out)
        XCTAssertTrue(r.err.contains("\(dir.path): already exists and is not empty: the demo creates a new workspace"), r.err)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), ["notes.txt"], "nothing written")
    }

    /// `close --by` records who closed the books when `$USER` says nothing useful (a service
    /// account, a container); an empty name is refused.
    func testCloseRecordsWhoClosedFromBy() throws {
        try ws.write("inbox/receipts/day.jsonl", Receipt.response([Receipt.item("4301", purchased: "2026-10-03T10:00:00Z")]) + "\n")
        XCTAssertEqual(try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-10-31", "--no-progress"]).status, 0)
        let empty = try cli(["close", "2026-10", "--workspace", ws.root.path, "--as-of", "2026-11-01", "--by", " "])
        XCTAssertNotEqual(empty.status, 0, empty.out)
        XCTAssertTrue(empty.err.contains("--by must name someone"), empty.err)
        // Without --by and without USER or LOGNAME (cron, systemd without User=): said.
        let anonymous = try Resilience.cli(["close", "2026-09", "--workspace", ws.root.path, "--as-of", "2026-11-01"],
                                           environment: ["USER": "", "LOGNAME": ""])
        XCTAssertEqual(anonymous.status, 0, anonymous.err)
        XCTAssertTrue(anonymous.out.contains("note: recorded as closed by \"unknown\": neither USER nor LOGNAME is set"), anonymous.out)
        let close = try cli(["close", "2026-10", "--workspace", ws.root.path, "--as-of", "2026-11-01", "--by", "carol (controller)"])
        XCTAssertEqual(close.status, 0, close.err)
        XCTAssertTrue(close.out.contains("by carol (controller) at "), close.out)
        XCTAssertFalse(close.out.contains("note: recorded as closed by"), close.out)
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try $0.rawRows("SELECT month, closed_by FROM period_close") }, [["2026-09", "unknown"], ["2026-10", "carol (controller)"]])
    }

    /// Every workbook and export written is registered in the ledger (path, SHA-256, size,
    /// when, by which night or `report`): `verify --workbook` tells a file finance holds as
    /// written, or not, and a version written over by `report` stays known.
    func testWorkbooksAreRegisteredAndVerifyTellsAFileAsWritten() throws {
        try ws.write("inbox/receipts/day.jsonl", Receipt.response([Receipt.item("4401", purchased: "2026-10-03T10:00:00Z")]) + "\n")
        XCTAssertEqual(try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-10-31", "--no-progress"]).status, 0)
        let finance = ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx")
        let db = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let registered = try db.read { try $0.rawRows("SELECT path, sha256, size_bytes, run_id, written_by FROM report_file ORDER BY path") }
        XCTAssertEqual(registered.map { $0[0] }, ["reports/2026-10-31/finance-2026-10-31.xlsx", "reports/2026-10-31/reconciliation-2026-10-31.xlsx",
                                                 "reports/2026-10-31/sandbox-2026-10-31.xlsx"])
        let bytes = try Data(contentsOf: finance)
        XCTAssertEqual(registered[0], ["reports/2026-10-31/finance-2026-10-31.xlsx", Hashing.sha256Hex(bytes), "\(bytes.count)", "1", "run"])

        let held = ws.root.appendingPathComponent("held.xlsx")
        try bytes.write(to: held)
        let genuine = try cli(["verify", "--workspace", ws.root.path, "--workbook", held.path])
        XCTAssertEqual(genuine.status, 0, genuine.err)
        XCTAssertTrue(genuine.out.contains("written as reports/2026-10-31/finance-2026-10-31.xlsx at ") && genuine.out.contains("by night run 1"), genuine.out)
        var edited = bytes
        edited.append(0x0A)
        try edited.write(to: held)
        let changed = try cli(["verify", "--workspace", ws.root.path, "--workbook", held.path])
        XCTAssertEqual(changed.status, 1)
        XCTAssertTrue(changed.out.contains("NOT written by iapledger as it is"), changed.out)
        // A file that cannot be read is said, and the others are still checked.
        let two = try cli(["verify", "--workspace", ws.root.path, "--workbook", "/nonexistent.xlsx", finance.path])
        XCTAssertEqual(two.status, 1)
        XCTAssertTrue(two.out.contains("/nonexistent.xlsx: ") && two.out.contains("\(finance.path): written as"), two.out)

        // `report` writes the set again (after a close, Run Info says so): registered beside it.
        XCTAssertEqual(try cli(["close", "2026-10", "--workspace", ws.root.path, "--as-of", "2026-11-01", "--by", "carol"]).status, 0)
        XCTAssertEqual(try cli(["report", "--workspace", ws.root.path, "--period", "2026-10"]).status, 0)
        let versions = try db.read { try $0.reportFiles(path: "reports/2026-10-31/finance-2026-10-31.xlsx") }
        XCTAssertEqual(versions.map(\.writtenBy), ["run", "report"])
        XCTAssertNotEqual(versions[0].sha256, versions[1].sha256, "the close changed its Run Info")
        // A file of the set written again as it was (the reconciliation workbook: nothing of it
        // changed with the close) is not registered twice.
        XCTAssertEqual(try db.read { try $0.reportFiles(path: "reports/2026-10-31/reconciliation-2026-10-31.xlsx") }.map(\.writtenBy), ["run"])
        try bytes.write(to: held)
        let superseded = try cli(["verify", "--workspace", ws.root.path, "--workbook", held.path])
        XCTAssertEqual(superseded.status, 0, "the version written over is still known")
        XCTAssertTrue(superseded.out.contains("  iapledger has written reports/2026-10-31/finance-2026-10-31.xlsx again since (at \(versions[1].writtenAt), SHA-256 \(versions[1].sha256)): this copy is an earlier version of it"), superseded.out)
        XCTAssertFalse(genuine.out.contains("again since"), genuine.out)
        // But in reports/, at its path, only the last version written there is the file: an
        // earlier one put back, or another workbook copied over it, is named.
        try bytes.write(to: finance)
        var back = try cli(["verify", "--workspace", ws.root.path, "--workbook", finance.path])
        XCTAssertEqual(back.status, 1, back.out)
        XCTAssertTrue(back.out.contains("NOT the file iapledger last wrote at reports/2026-10-31/finance-2026-10-31.xlsx (at ") && back.out.contains("an earlier version written there was put back"), back.out)
        // The same, named through a link to the workspace.
        let link = ws.root.deletingLastPathComponent().appendingPathComponent(ws.root.lastPathComponent + "-link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: ws.root)
        defer { try? FileManager.default.removeItem(at: link) }
        let throughLink = try cli(["verify", "--workspace", ws.root.path, "--workbook", link.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx").path])
        XCTAssertEqual(throughLink.status, 1, throughLink.out)
        XCTAssertTrue(throughLink.out.contains("an earlier version written there was put back"), throughLink.out)
        try Data(contentsOf: ws.root.appendingPathComponent("reports/2026-10-31/sandbox-2026-10-31.xlsx")).write(to: finance)
        back = try cli(["verify", "--workspace", ws.root.path, "--workbook", finance.path])
        XCTAssertEqual(back.status, 1, back.out)
        XCTAssertTrue(back.out.contains("another file it wrote was copied there"), back.out)
        // Or copied to a path of the sets iapledger never wrote (a day no night ran): named too
        // (it passed as written, a set of a day that has none).
        let elsewhere = ws.root.appendingPathComponent("reports/2026-11-02/finance-2026-11-02.xlsx")
        try FileManager.default.createDirectory(at: elsewhere.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(contentsOf: ws.root.appendingPathComponent("reports/2026-10-31/sandbox-2026-10-31.xlsx")).write(to: elsewhere)
        back = try cli(["verify", "--workspace", ws.root.path, "--workbook", elsewhere.path])
        XCTAssertEqual(back.status, 1, back.out)
        XCTAssertTrue(back.out.contains("NOT where iapledger wrote it: it never wrote reports/2026-11-02/finance-2026-11-02.xlsx; this is its reports/2026-10-31/sandbox-2026-10-31.xlsx, copied there"), back.out)
        try FileManager.default.removeItem(at: elsewhere.deletingLastPathComponent())
        // The registrations are chained: verify checks the chain, and one forged for an edited
        // workbook (no trigger refuses an insert) does not hold, nor does one without a hash.
        let verified = try cli(["verify", "--workspace", ws.root.path])
        XCTAssertEqual(verified.status, 0, verified.err)
        let head = try XCTUnwrap(try db.read { try $0.reportFilesHead() })
        XCTAssertTrue(verified.out.contains("5 report file registrations in an unbroken chain (head \(head))"), verified.out)
        // verify --runs lists the head after each night's or report's files, as each printed it.
        let runs = try cli(["verify", "--runs", "--workspace", ws.root.path])
        let listed = runs.out.split(separator: "\n").filter { $0.hasPrefix("  run 1 at ") || $0.hasPrefix("  report or close at ") }
        XCTAssertEqual(listed.count, 2, runs.out)
        XCTAssertTrue(listed.last?.hasSuffix(head) ?? false, runs.out)
        let forged = try DatabaseQueue(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        try forged.write { try $0.execute(sql: """
            INSERT INTO report_file (path, sha256, size_bytes, written_at, run_id, written_by, hash)
            VALUES ('reports/2026-10-31/finance-2026-10-31.xlsx', '\(Hashing.sha256Hex(edited))', \(edited.count), '2026-11-01T03:00:00Z', 1, 'run', '\(String(repeating: "a", count: 64))')
            """) }
        try edited.write(to: held)
        let forgedAnswer = try cli(["verify", "--workspace", ws.root.path, "--workbook", held.path])
        XCTAssertEqual(forgedAnswer.status, 1, forgedAnswer.out)
        XCTAssertTrue(forgedAnswer.out.contains("the ledger's report file registrations do not hold together, so the answers below cannot be trusted: report file registration #6 (reports/2026-10-31/finance-2026-10-31.xlsx, SHA-256 \(Hashing.sha256Hex(edited))) does not match its hash"), forgedAnswer.out)
        let triggers = try forged.read { try String.fetchAll($0, sql: "SELECT sql FROM sqlite_schema WHERE name IN ('report_file_no_update', 'report_file_no_delete')") }
        try forged.write { try $0.execute(sql: "DROP TRIGGER report_file_no_update; DROP TRIGGER report_file_no_delete; UPDATE report_file SET hash = NULL WHERE id = 6") }
        let unhashed = try cli(["verify", "--workspace", ws.root.path])
        XCTAssertTrue(unhashed.err.contains("report file registration #6 (reports/2026-10-31/finance-2026-10-31.xlsx) has no hash, after registrations that have: written by hand") || unhashed.out.contains("has no hash, after registrations that have"), unhashed.out + unhashed.err)
        try forged.write { d in
            try d.execute(sql: "DELETE FROM report_file WHERE id = 6")
            for t in triggers { try d.execute(sql: t) }
        }
        XCTAssertEqual(try cli(["verify", "--workspace", ws.root.path]).status, 0)
        // Deleted: trace says iapledger wrote it and it is gone (not "not written yet").
        try FileManager.default.removeItem(at: finance)
        let trace = try cli(["trace", "4401", "--workspace", ws.root.path])
        XCTAssertTrue(trace.out.contains("reports/2026-10-31/finance-2026-10-31.xlsx, sheet Journal, rows ") && trace.out.contains("(missing: iapledger wrote it (written at ") && trace.out.contains("by `iapledger report` (or `close`), SHA-256 \(versions[1].sha256)), and it is no longer under reports/: moved or deleted since"), trace.out)
    }

    /// The README's trace example is only an example: a demo's ids change with its as-of date.
    /// The demo names two of its own, a refunded sale and the order that credited it, and
    /// `trace` finds both.
    func testADemoNamesIdsThatTraceFinds() throws {
        let dir = ws.root.appendingPathComponent("demo")
        let r = try cli(["demo", "--dir", dir.path, "--transactions", "600", "--as-of", "2026-11-20"])
        XCTAssertEqual(r.status, 0, r.err)
        let ids = r.out.split(separator: "\n").filter { $0.hasPrefix("  iapledger trace ") }.map { $0.split(separator: " ")[2] }.map(String.init)
        XCTAssertEqual(ids.count, 2, r.out)
        guard ids.count == 2 else { return }
        let sale = try cli(["trace", ids[0], "--workspace", dir.path])
        XCTAssertEqual(sale.status, 0, sale.err)
        XCTAssertTrue(sale.out.contains("refund on "), sale.out)
        XCTAssertTrue(sale.out.contains(ids[1]), sale.out)
        let order = try cli(["trace", ids[1], "--workspace", dir.path])
        XCTAssertEqual(order.status, 0, order.err)
        XCTAssertTrue(order.out.contains(ids[0]), order.out)
    }

    /// An input folder that is a link to a folder is read through the link, and listed through
    /// it too; a link to a folder elsewhere in the inbox is one entry, not followed.
    func testAnInputFolderThatIsALinkIsListedThroughIt() throws {
        let elsewhere = ws.root.appendingPathComponent("signed-store")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        try "a note".write(to: elsewhere.appendingPathComponent("notes.md"), atomically: true, encoding: .utf8)
        let signed = ws.root.appendingPathComponent("inbox/signed")
        try? FileManager.default.removeItem(at: signed)
        try FileManager.default.createSymbolicLink(at: signed, withDestinationURL: elsewhere)
        try FileManager.default.createSymbolicLink(at: ws.root.appendingPathComponent("inbox/old"), withDestinationURL: elsewhere)
        let r = try ws.run("2026-11-04")
        XCTAssertEqual(r.notRead, ["inbox/old: not read (inputs are read from inbox/orders/, inbox/receipts/, inbox/signed/ only; names are case-sensitive)",
                                   "inbox/signed/notes.md: not read (signed data is *.jws, *.txt, *.json or *.jsonl)"])
    }

    /// `run --as-of` far in the future was accepted, and every plain `run` after it failed for
    /// ever ("before the last run's"). A date later than tomorrow (UTC) is refused before
    /// anything is written, and so is `close --as-of` later than today (it would close a month
    /// still running); tomorrow is allowed for `run` (time zones east of UTC).
    func testAnAsOfDateLaterThanTomorrowIsRefused() throws {
        try ws.write("inbox/receipts/day.jsonl", Receipt.response([Receipt.item("4101", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        let today = Day(epochMilliseconds: Int64(Date().timeIntervalSince1970) * 1000)
        let ledgerPath = ws.root.appendingPathComponent("ledger.sqlite").path
        let future = try cli(["run", "--workspace", ws.root.path, "--as-of", (today + 30).description, "--no-progress"])
        XCTAssertEqual(future.status, 1, future.out)
        XCTAssertTrue(future.err.contains("--as-of \(today + 30) is later than tomorrow (\(today + 1), UTC)"), future.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: ledgerPath), "nothing written")
        let plain = try cli(["run", "--workspace", ws.root.path, "--no-progress"])
        XCTAssertEqual(plain.status, 0, plain.err)
        let close = try cli(["close", today.month.description, "--workspace", ws.root.path, "--as-of", (today.month.next.lastDay + 1).description])
        XCTAssertEqual(close.status, 1, close.out)
        XCTAssertTrue(close.err.contains("is later than today (\(today), UTC)"), close.err)
        // Not even tomorrow for close: on a month's last day (UTC) it would close that month.
        let closeTomorrow = try cli(["close", today.month.description, "--workspace", ws.root.path, "--as-of", (today + 1).description])
        XCTAssertEqual(closeTomorrow.status, 1, closeTomorrow.out)
        XCTAssertTrue(closeTomorrow.err.contains("--as-of \(today + 1) is later than today"), closeTomorrow.err)
        XCTAssertEqual(try Ledger(path: ledgerPath, readOnly: true).read { try $0.rawRows("SELECT count(*) FROM period_close") }, [["0"]])
        let tomorrow = try cli(["run", "--workspace", ws.root.path, "--as-of", (today + 1).description, "--no-progress"])
        XCTAssertEqual(tomorrow.status, 0, tomorrow.err)
        // Said: until midnight UTC a plain run is refused (an operator running tomorrow by hand
        // found tonight's scheduled run failing, without a word before).
        XCTAssertTrue(tomorrow.out.contains("  note: as of \(today + 1), after today (\(today), UTC): until midnight UTC a run as of today (a plain `iapledger run`) is refused as dated before this one"), tomorrow.out)
        XCTAssertFalse(plain.out.contains("note: as of"), plain.out)
        // Nor does demo make a workspace whose night is in the future (every run then refused).
        let demoDir = ws.root.appendingPathComponent("future-demo")
        let demo = try cli(["demo", "--dir", demoDir.path, "--transactions", "50", "--as-of", (today + 30).description])
        XCTAssertEqual(demo.status, 1, demo.out)
        XCTAssertTrue(demo.err.contains("--as-of \(today + 30) is later than tomorrow"), demo.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: demoDir.path), "nothing written")
    }

    /// A purchase dated after the night's as-of date is posted (in the books from its date) but
    /// in none of that night's workbooks: the run says so, and `balance` stops where the Trial
    /// Balance sheet does (the last run's as-of date), saying what it leaves out.
    func testEntriesDatedAfterTheAsOfDateAreSaidAndBalanceMatchesTheSheet() throws {
        try ws.write("inbox/receipts/day.jsonl", Receipt.response([Receipt.item("5001", purchased: "2026-11-03T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("5002", purchased: "2030-03-17T10:00:00Z")]) + "\n")
        let run = try cli(["run", "--workspace", ws.root.path, "--as-of", "2026-11-04", "--no-progress"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("1 entry is dated after 2026-11-04 (the latest 2030-03-17): in the ledger, in no workbook as of 2026-11-04"), run.out)
        // Its trace says so too (it said nothing of where the entry was).
        let trace = try cli(["trace", "5002", "--workspace", ws.root.path]).out
        XCTAssertTrue(trace.contains("In the reports: its entry is dated after the last night's as-of date 2026-11-04 (the latest 2030-03-17): in the ledger, in no workbook yet; the set of the first night as of 2030-03-17 or later lists it\n"), trace)
        XCTAssertFalse(try cli(["trace", "5001", "--workspace", ws.root.path]).out.contains("dated after"))
        func total(_ args: [String]) throws -> (receivable: Int, err: String) {
            let r = try cli(["balance", "--format", "json", "--workspace", ws.root.path] + args)
            XCTAssertEqual(r.status, 0, r.err)
            let rows = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as! [[String: Any]]
            return (rows.filter { ($0["account"] as! String).contains("Receivable") }.map { $0["debit_minor"] as! Int }.reduce(0, +), r.err)
        }
        let asOf = try total([]), all = try total(["--through", "all"]), later = try total(["--through", "2030-03-17"])
        XCTAssertEqual(asOf.receivable * 2, all.receivable, "one of the two sales by default, both with --through all")
        XCTAssertEqual(later.receivable, all.receivable)
        XCTAssertTrue(asOf.err.contains("balance through 2026-11-04: 1 entry dated after it (the latest 2030-03-17) left out"), asOf.err)
        XCTAssertEqual(all.err, "")
        // The sheet and the command agree.
        let sheet = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-04/finance-2026-11-04.xlsx"))["Trial Balance"])
        let receivableRow = try XCTUnwrap(sheet.first { $0.count > 3 && $0[1].contains("Receivable") }, "\(sheet)")
        XCTAssertEqual(XLSXReader.minor(receivableRow[3], decimals: 2).map(Int.init), asOf.receivable, "\(receivableRow)")
    }

    /// A free trial is verified and stored but moves no money: trace says "free", not "posted".
    func testTraceOfAFreeTrialSaysFreeNotPosted() throws {
        let dir = ws.root.appendingPathComponent("demo")
        _ = try DemoWorkspace.create(at: dir, transactions: 300, seed: 5, asOf: Day(iso: "2026-11-21")!)
        _ = try NightlyRun(workspace: Workspace(dir), asOf: Day(iso: "2026-11-21")!).run()
        let free = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try String.fetchOne($0.db, sql: "SELECT transaction_id FROM store_transaction WHERE sale_status = 'free' LIMIT 1")
        }
        let id = try XCTUnwrap(free, "the demo has free trials")
        let json = try cli(["trace", id, "--format", "json", "--workspace", dir.path])
        let t = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as! [String: Any]
        XCTAssertEqual(t["status"] as? String, "free")
        XCTAssertEqual((t["entries"] as? [Any])?.count, 0)
        let text = try cli(["trace", id, "--workspace", dir.path]).out
        XCTAssertTrue(text.contains("Transaction \(id): free in the production book (a free trial (is_trial_period true in inbox/receipts/") && text.contains("): no money moved, so no entry)"), text)

        // A sale of August (the demo's ledger begins with this one night): its month's set is
        // not written until `report --period 2026-08`, and trace says so.
        let august = try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try String.fetchOne($0.db, sql: "SELECT transaction_id FROM entry WHERE book = 'production' AND date LIKE '2026-08-%' ORDER BY id LIMIT 1")
        }
        let sale = try XCTUnwrap(august)
        let before = try cli(["trace", sale, "--workspace", dir.path]).out
        XCTAssertTrue(before.contains("reports/2026-08-31/finance-2026-08-31.xlsx, sheet Journal, rows ") && before.contains("(not written yet: `iapledger report --period 2026-08 --workspace \(ShellWord.quoted(dir.standardizedFileURL.path))` writes it)"), before)
        XCTAssertEqual(try cli(["report", "--period", "2026-08", "--workspace", dir.path]).status, 0)
        let after = try cli(["trace", sale, "--format", "json", "--workspace", dir.path]).out
        let placement = try XCTUnwrap(((try JSONSerialization.jsonObject(with: Data(after.utf8)) as! [String: Any])["reports"] as! [[String: Any]]).first)
        XCTAssertEqual(placement["written"] as? Bool, true)
        let journal = try XLSXReader.sheets(dir.appendingPathComponent(placement["workbook"] as! String))["Journal"]!
        for row in placement["rows"] as! [Int] { XCTAssertEqual(journal[row - 1][5], sale, "row \(row)") }
        // The file there is no longer the one iapledger wrote (another of its workbooks copied
        // over it): trace does not vouch for its rows.
        let finance = dir.appendingPathComponent(placement["workbook"] as! String)
        let kept = try Data(contentsOf: finance)
        try Data(contentsOf: dir.appendingPathComponent("reports/2026-08-31/sandbox-2026-08-31.xlsx")).write(to: finance)
        let changed = try cli(["trace", sale, "--workspace", dir.path]).out
        XCTAssertTrue(changed.contains("(changed since iapledger last wrote it (written at ") && changed.contains("`iapledger verify --workbook \(ShellWord.quoted(finance.standardizedFileURL.path)) --workspace \(ShellWord.quoted(dir.standardizedFileURL.path))` says more; `iapledger report --period 2026-08 --workspace \(ShellWord.quoted(dir.standardizedFileURL.path))` writes it again)"), changed)
        try kept.write(to: finance)
        // A layout that renamed the Journal sheet since the set was written: trace names a
        // sheet the file has not, and says so.
        let layout = dir.appendingPathComponent("layouts/finance.toml")
        let original = try String(contentsOf: layout, encoding: .utf8)
        try original.replacingOccurrences(of: "name = \"Journal\"", with: "name = \"Postings\"").write(to: layout, atomically: true, encoding: .utf8)
        let renamed = try cli(["trace", sale, "--workspace", dir.path]).out
        XCTAssertTrue(renamed.contains("sheet Postings, rows ") && renamed.contains("(its sheets as written are Summary, Trial Balance, Journal, ")
                      && renamed.contains("none named Postings: the layouts have changed since it was written"), renamed)
        try original.write(to: layout, atomically: true, encoding: .utf8)
        XCTAssertFalse(try cli(["trace", sale, "--workspace", dir.path]).out.contains("its sheets as written"))
        // A subtitle line added since (every row one lower in a file written now): the rows
        // are the file's, found by its header's row, and trace says why (it gave the rows the
        // new layout would have, one off, with no word: an auditor read another sale's rows).
        let asWritten = placement["rows"] as! [Int]
        try original.replacingOccurrences(of: "subtitle = [\n  \"Every posting", with: "subtitle = [\n  \"Prepared for the audit.\",\n  \"Every posting")
            .write(to: layout, atomically: true, encoding: .utf8)
        let moved = try cli(["trace", sale, "--format", "json", "--workspace", dir.path]).out
        let movedPlacement = try XCTUnwrap(((try JSONSerialization.jsonObject(with: Data(moved.utf8)) as! [String: Any])["reports"] as! [[String: Any]]).first)
        XCTAssertEqual(movedPlacement["rows"] as? [Int], asWritten)
        XCTAssertEqual(movedPlacement["rows_note"] as? String, "rows as this file has them, its header on row 4: the layouts changed since it was written (written at \(try XCTUnwrap(try Ledger(path: dir.appendingPathComponent("ledger.sqlite").path, readOnly: true).read { try $0.reportFiles(path: "reports/2026-08-31/finance-2026-08-31.xlsx").last?.writtenAt })) by `iapledger report` (or `close`)); written now, its header would be on row 5 and these rows 1 down; `iapledger report --period 2026-08 --workspace \(ShellWord.quoted(dir.standardizedFileURL.path))` writes it again")
        XCTAssertEqual(try cli(["report", "--period", "2026-08", "--workspace", dir.path]).status, 0)
        let rewritten = try cli(["trace", sale, "--format", "json", "--workspace", dir.path]).out
        let newPlacement = try XCTUnwrap(((try JSONSerialization.jsonObject(with: Data(rewritten.utf8)) as! [String: Any])["reports"] as! [[String: Any]]).first)
        XCTAssertEqual(newPlacement["rows"] as? [Int], asWritten.map { $0 + 1 })
        XCTAssertNil(newPlacement["rows_note"])
        let journalNow = try XLSXReader.sheets(finance)["Journal"]!
        for row in newPlacement["rows"] as! [Int] { XCTAssertEqual(journalNow[row - 1][5], sale, "row \(row)") }
        try original.write(to: layout, atomically: true, encoding: .utf8)
        XCTAssertEqual(try cli(["report", "--period", "2026-08", "--workspace", dir.path]).status, 0)
        // A journal cap lowered after the set was written: trace places the postings in the CSV
        // export, which the set as written has not (it said "not written yet").
        try TestWorkspace.appendText(dir.appendingPathComponent("iapledger.toml"), "\n[reports]\njournal_row_cap = 5\n")
        let capped = try cli(["trace", sale, "--workspace", dir.path]).out
        XCTAssertTrue(capped.contains("reports/2026-08-31/journal-2026-08-31.csv.gz, sheet (CSV, line 1 the header), rows ") && capped.contains("(not in the set as iapledger wrote it (written at ") && capped.contains("the entries posted since, or a change of the journal cap or the layouts, place these rows elsewhere now; `iapledger report --period 2026-08 --workspace \(ShellWord.quoted(dir.standardizedFileURL.path))` writes it again)"), capped)
        XCTAssertFalse(capped.contains("not written yet"), capped)
    }

    /// An item kept only as an INVALID_TRANSACTION finding (a quantity of 0) is traced to its
    /// record and finding, not called unknown.
    func testTraceOfAnInvalidItemNamesItsRecordAndFinding() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9009", quantity: 0, purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-06")
        let r = try cli(["trace", "9009", "--format", "json", "--workspace", ws.root.path])
        XCTAssertEqual(r.status, 0, r.err)
        let t = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as! [String: Any]
        XCTAssertEqual(t["status"] as? String, "rejected")
        XCTAssertEqual((t["sources"] as! [[String: Any]]).map { "\($0["path"]!):\($0["line"]!)" }, ["inbox/receipts/r.jsonl:1"])
        XCTAssertEqual((t["findings"] as! [[String: Any]]).map { $0["code"] as! String }, ["INVALID_TRANSACTION"])
    }

    /// An order known only from a receipt's wrapper (`order_id`, no orders line: a lost order)
    /// is traced: the records naming it and the transaction they report. The FILE:LINE trace
    /// offered `iapledger trace <order>`, which said no such id.
    func testAnOrderNamedOnlyByAReceiptWrapperIsTraced() throws {
        let wrapped = "{\"response\": " + Receipt.response([Receipt.item("7301", purchased: "2026-10-05T10:00:00Z")])
            + ", \"received_at\": \"2026-10-05T10:00:05Z\", \"account_id\": \"acct-73\", \"order_id\": \"ord-x-9\"}"
        try ws.write("inbox/receipts/odd.jsonl", Receipt.response([Receipt.item("7300", purchased: "2026-10-05T09:00:00Z")]) + "\n" + wrapped + "\n")
        try ws.run("2026-10-06")
        let record = try cli(["trace", "inbox/receipts/odd.jsonl:2", "--workspace", ws.root.path])
        XCTAssertTrue(record.out.contains("order: ord-x-9 (`iapledger trace ord-x-9"), record.out)
        let r = try cli(["trace", "ord-x-9", "--workspace", ws.root.path])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("No line of the backend's orders files names it; store records naming it (their receipt wrapper's order_id) (1):\n  inbox/receipts/odd.jsonl:2 verified, read 2026-10-06: transaction 7301\n"), r.out)
        XCTAssertTrue(r.out.contains("The transaction its records report:\n  Transaction 7301"), r.out)
        let json = try JSONSerialization.jsonObject(with: Data(try cli(["trace", "ord-x-9", "--format", "json", "--workspace", ws.root.path]).out.utf8)) as! [String: Any]
        XCTAssertEqual((json["records_naming_it"] as? [[String: Any]])?.map { "\($0["path"]!):\($0["line"]!) \(($0["transaction_ids"] as? [String]) ?? [])" },
                       ["inbox/receipts/odd.jsonl:2 [\"7301\"]"])
        XCTAssertEqual((json["transaction"] as? [String: Any])?["transaction_id"] as? String, "7301")
        // An order its orders lines name has no such list.
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-x-9,acct-73,7301,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        let named = try JSONSerialization.jsonObject(with: Data(try cli(["trace", "ord-x-9", "--format", "json", "--workspace", ws.root.path]).out.utf8)) as! [String: Any]
        XCTAssertNil(named["records_naming_it"])
        XCTAssertEqual((named["versions"] as? [Any])?.count, 1)
        // Its line says the storefront it gives the sale (the text left it to the JSON).
        XCTAssertTrue(try cli(["trace", "ord-x-9", "--workspace", ws.root.path]).out.contains(" x 1, 100 units, production, storefront USA, credited 2026-10-05T10:01:00Z"))
        XCTAssertTrue(try cli(["trace", "7301", "--workspace", ws.root.path]).out.contains("ord-x-9 v1 inbox/orders/o.csv:2: account acct-73, coins.100 x 1, 100 units, production, storefront USA, credited"))
    }

    /// A subscription's original transaction id, its first purchase never read, is traced to
    /// the subscription's transactions (it said no such id); a renewal's trace names the
    /// renewals after it (only those before it were shown, in its tenure).
    func testASubscriptionsOriginalIdListsItsTransactions() throws {
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([
            Receipt.item("S-2", product: "vip.monthly", purchased: "2026-09-01T10:00:00Z", original: "S-1", expires: "2026-10-01T10:00:00Z"),
            Receipt.item("S-3", product: "vip.monthly", purchased: "2026-10-01T10:00:00Z", original: "S-1", expires: "2026-11-01T10:00:00Z"),
        ]) + "\n")
        try ws.run("2026-10-06")
        let r = try cli(["trace", "S-1", "--workspace", ws.root.path])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("Original transaction S-1: no transaction or order has this id; it is the original transaction id of 2 transactions in the ledger"), r.out)
        XCTAssertTrue(r.out.contains("\n  S-2  2026-09-01T10:00:00Z  vip.monthly  production  posted\n  S-3  2026-10-01T10:00:00Z  vip.monthly  production  posted\n"), r.out)
        let json = try JSONSerialization.jsonObject(with: Data(try cli(["trace", "S-1", "--format", "json", "--workspace", ws.root.path]).out.utf8)) as! [String: Any]
        XCTAssertEqual((json["transactions"] as? [[String: Any]])?.map { $0["transaction_id"] as! String }, ["S-2", "S-3"])
        let second = try cli(["trace", "S-2", "--workspace", ws.root.path]).out
        XCTAssertTrue(second.contains("  later in the subscription: 1 transaction purchased after this one, S-3 (`iapledger trace <id> --workspace"), second)
        XCTAssertFalse(try cli(["trace", "S-3", "--workspace", ws.root.path]).out.contains("later in the subscription"))
        XCTAssertEqual(try cli(["trace", "S-9", "--workspace", ws.root.path]).status, 1)
    }

    /// A transaction known only from a record waiting for verification has no reconciliation
    /// part (the JSON had an empty one, without `in_scope`): no verified record, nothing reconciled.
    func testATransactionWaitingForVerificationHasNoReconciliationPart() throws {
        try ws.write("inbox/receipts/r.jsonl", #"{"response": {"status": 21005, "is-retryable": true}, "transaction_id": "u1"}"# + "\n")
        try ws.run("2026-10-06")
        let r = try cli(["trace", "u1", "--format", "json", "--workspace", ws.root.path])
        XCTAssertEqual(r.status, 0, r.err)
        let t = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as! [String: Any]
        XCTAssertEqual(t["status"] as? String, "pending")
        XCTAssertNil(t["reconciliation"], r.out)
        XCTAssertFalse(try cli(["trace", "u1", "--workspace", ws.root.path]).out.contains("Reconciliation with"))
    }

    /// A signed price is shown in its currency's units as booked, beside its milliunits.
    func testASignedPriceReadsInItsCurrency() {
        XCTAssertEqual(TraceOutput.signedPriceInUnits("signed price 1190 milliunits", currency: "EUR"), " (1.19 EUR)")
        XCTAssertEqual(TraceOutput.signedPriceInUnits("signed price 160500 milliunits", currency: "JPY"), " (160 JPY)", "half to even")
        XCTAssertEqual(TraceOutput.signedPriceInUnits("signed price 990 milliunits", currency: "KWD"), " (0.990 KWD)")
        XCTAssertEqual(TraceOutput.signedPriceInUnits("rules/prices.csv 0.99 USD from 2020-01-01 x 1", currency: "USD"), "")
        XCTAssertEqual(TraceOutput.signedPriceInUnits("signed price 1190 milliunits", currency: nil), "")
    }

    func testTraceOfAnUnknownIdSaysSoAndFails() throws {
        try refundedReconciledWorkspace()
        let r = try cli(["trace", "no-such-id", "--workspace", ws.root.path])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.err.contains("iapledger: error: no transaction or order with id \"no-such-id\" in this ledger\n"), r.err)
        // An id with an escape sequence and a right-to-left override reaches stderr escaped.
        let hostile = try cli(["trace", "x\u{1B}[2J\u{202E}", "--workspace", ws.root.path])
        XCTAssertNotEqual(hostile.status, 0)
        XCTAssertTrue(hostile.err.contains("no transaction or order with id \"x\\u{1B}[2J\\u{202E}\" in this ledger"), hostile.err)
        XCTAssertFalse(hostile.err.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{202E}" }, hostile.err)
    }

    func testBalanceJSONAndExitCodes() throws {
        try refundedReconciledWorkspace()
        let (status, out, _) = try cli(["balance", "--format", "json", "--book", "production", "--workspace", ws.root.path])
        XCTAssertEqual(status, 0)
        let rows = try JSONSerialization.jsonObject(with: Data(out.utf8)) as! [[String: Any]]
        XCTAssertEqual(Set(rows.first!.keys), ["book", "account", "currency", "debit_minor", "credit_minor", "balance_minor", "reporting_balance_minor"])
        XCTAssertEqual(rows.map { $0["balance_minor"] as! Int }.reduce(0, +), 0)
        XCTAssertEqual(rows.map { $0["reporting_balance_minor"] as! Int }.reduce(0, +), 0)
        // A missing workspace is a real failure naming the path.
        let missing = try cli(["run", "--workspace", ws.root.appendingPathComponent("nowhere").path])
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.err.contains("nowhere/iapledger.toml"), missing.err)
        // Rejected records are not a failure.
        try ws.write("inbox/receipts/bad.jsonl", "{not json\n")
        XCTAssertEqual(try cli(["run", "--as-of", "2026-10-09", "--workspace", ws.root.path]).status, 0)
    }
}
