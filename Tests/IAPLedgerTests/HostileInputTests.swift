import Foundation
import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore
@testable import LedgerWrite
@testable import LedgerReport
import LedgerTemplates
import ZIPFoundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Hostile input (issue 7): truncated and too-deep JSON, wrong types, huge numbers, negative
/// and zero quantities, dates in 1970 and 2100, empty and blank files, broken CSV. Each record
/// is posted, pending or rejected with a reason naming file and line; never a crash; the good
/// records around a bad one are unaffected.
final class HostileInputTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }

    func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }

    /// (line, outcome, reason code, reason) of every record of `path`, by line.
    func records(_ path: String) throws -> [(line: Int, outcome: String, code: String, reason: String)] {
        try ledger().read { try $0.rawRows("""
            SELECT r.line, r.outcome, ifnull(r.reason_code, ''), ifnull(r.reason, '') FROM source_record r
            JOIN source_file f ON f.id = r.file_id WHERE f.path = '\(path)' ORDER BY r.line, r.id
            """) }.map { (Int($0[0])!, $0[1], $0[2], $0[3]) }
    }

    /// The records still open (pending or rejected): path, line and reason code.
    func openRecords() throws -> [[String]] {
        try ledger().read { try $0.rawRows("""
            SELECT f.path, r.line, r.reason_code FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome <> 'verified' AND r.resolved_run_id IS NULL ORDER BY f.path, r.line, r.id
            """) }
    }

    func findings(_ code: String = "INVALID_TRANSACTION") throws -> [String] {
        try ledger().read { try $0.rawRows("SELECT message FROM finding WHERE code = '\(code)' ORDER BY id") }.map { $0[0] }
    }

    func saleEntries() throws -> Set<String> {
        Set(try ledger().read { try $0.rawRows("SELECT transaction_id FROM entry WHERE kind = 'sale'") }.map { $0[0] })
    }

    func good(_ id: String, product: String = "coins.100", original: String? = nil, expires: String? = nil,
              purchased: String = "2026-10-05T10:00:00Z") -> String {
        Receipt.response([Receipt.item(id, product: product, purchased: purchased, original: original, expires: expires)])
    }

    static let okResponse = #"{"status": 0, "environment": "Production", "receipt": {"bundle_id": "com.example.coins", "in_app": [%@]}}"#
    static func response(items: String) -> String { okResponse.replacingOccurrences(of: "%@", with: items) }
    static func item(_ fields: String) -> String {
        #"{"transaction_id": "X", "product_id": "coins.100", "quantity": "1", "purchase_date_ms": "1791194400000"}"#
            .replacingOccurrences(of: "}", with: fields.isEmpty ? "}" : ", " + fields + "}")
    }

    /// A table header whose name does not begin as a key can (`[`, `[[`, `[.a]`, `[#]`,
    /// `[ = ]`, `[é]`) aborted every command (SIGABRT in the TOML parser): it is an error naming
    /// the file and line, in the config and in a layout. Valid TOML, the shipped files among
    /// it, and brackets in strings, arrays and comments are not taken for headers.
    func testATableHeaderWithNoNameIsAnErrorNotAnAbort() throws {
        for bad in ["[", "[[", "[.a]", "[#]", "[ = ]", "[é]", "[[ +]]", "[\t.a]", "[\r"] {
            let text = "reporting_currency = \"USD\"\n\n" + bad + "\nx = 1\n"
            let found = TOMLHeaderCheck.problem(in: text)
            XCTAssertEqual(found?.line, 3, bad.debugDescription)
            XCTAssertThrowsError(try ConfigReader.parse(text, displayPath: "iapledger.toml"), bad.debugDescription) { error in
                XCTAssertTrue("\(error)".hasPrefix("iapledger.toml:3: not valid TOML: a table header names its table, [name] or [[name]]"), "\(error)")
            }
        }
        let fine = ["[a]", "[[sheet.table]]", "[ \"a b\" . 'c' ]", "[]", "[ ]", "[a", "a = [\n[\n1\n]\n]", "a = \"\"\"\n[\n\"\"\"",
                    "a = '''\n[#\n'''", "# [\n", "a = \"[\"", "a = { b = [ 1 ] }\n[c]", "a = [\n  # [\n  1,\n]"]
        for text in fine { XCTAssertNil(TOMLHeaderCheck.problem(in: text), text.debugDescription) }
        // A byte order mark before the first line, a multi-line string closed by four or five
        // quotes (one or two of them its own), a line end escaped in one: still found, on its line.
        let q3 = String(repeating: "\"", count: 3), l3 = String(repeating: "'", count: 3)
        for (text, line) in [("\u{FEFF}[.a]\n", 1), ("note = [" + q3 + "a\"" + q3 + ", \"b\"]\n[.bad]\n", 2),
                             ("note = [" + l3 + "a''" + l3 + ", 'b']\n[.bad]\n", 2), ("a = " + q3 + "x\\\ny" + q3 + "\n[#]\n", 3)] {
            XCTAssertEqual(TOMLHeaderCheck.problem(in: text)?.line, line, text.debugDescription)
        }
        for f in LedgerTemplates.workspaceFiles where f.path.hasSuffix(".toml") {
            XCTAssertNil(TOMLHeaderCheck.problem(in: String(decoding: f.bytes, as: UTF8.self)), f.path)
        }
        XCTAssertThrowsError(try ReportLayout.parse("[\n", workbook: .finance, path: "layouts/finance.toml", defaults: nil)) { error in
            XCTAssertTrue("\(error)".contains("layouts/finance.toml:1") && "\(error)".contains("a table header names its table"), "\(error)")
        }
    }

    /// Each hostile receipt line between two good ones, in a file of its own.
    func testHostileReceiptLines() throws {
        let deep65 = #"{"status": 0, "x": "# + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}"
        // Response, receipt, in_app and the item are 4 levels: 60 more make exactly 64.
        let deep64 = Self.response(items: Self.item(#""deep": "# + String(repeating: "[", count: 60) + String(repeating: "]", count: 60)))
        let cases: [(name: String, line: String, outcome: String, reason: String)] = [
            ("truncated", #"{"status": 0, "environment": "Production", "receipt": {"bundle_id": "com.example.coins", "in_app": [{"transaction_id": "T1""#,
             "rejected", "truncated JSON"),
            ("truncated-string", #"{"status": 0, "environment": "Produc"#, "rejected", "unterminated string"),
            ("deep65", deep65, "rejected", "nested deeper than 64 levels"),
            ("deep100k", String(repeating: "[", count: 100_000), "rejected", "nested deeper than 64 levels"),
            ("deep64-ok", deep64.replacingOccurrences(of: "\"X\"", with: "\"D64\""), "verified", ""),
            ("status-text", #"{"status": "zero"}"#, "rejected", "status \"zero\" is not a number"),
            ("status-list", #"{"status": [0]}"#, "rejected", "status \"[...]\" is not a number"),
            ("status-huge", #"{"status": 1e400}"#, "rejected", "status \"1e400\" is not a number"),
            ("status-overflow", #"{"status": 99999999999999999999999}"#, "rejected", "is not a number"),
            ("receipt-text", #"{"status": 0, "receipt": "abc"}"#, "rejected", "no receipt"),
            ("in-app-object", #"{"status": 0, "environment": "Production", "receipt": {"bundle_id": "com.example.coins", "in_app": {"transaction_id": "T2"}}}"#,
             "rejected", "receipt.in_app is not a list"),
            ("in-app-scalar-item", Self.response(items: "42"), "rejected", "receipt.in_app[0] is not an object"),
            ("number-too-long", #"{"status": "# + String(repeating: "9", count: 500) + "}", "rejected", "number longer than 400"),
            ("not-an-object", "[1, 2]", "rejected", "not a JSON object"),
            ("bundle-wrong-type", #"{"status": 0, "environment": "Production", "receipt": {"bundle_id": {"a": 1}, "in_app": []}}"#,
             "rejected", "names no bundle id"),
        ]
        for (i, c) in cases.enumerated() {
            try ws.write("inbox/receipts/h\(i)-\(c.name).jsonl", [good("A\(i)"), c.line, good("B\(i)")].joined(separator: "\n") + "\n")
        }
        try ws.run("2026-11-03")
        let posted = try saleEntries()
        for (i, c) in cases.enumerated() {
            let r = try records("inbox/receipts/h\(i)-\(c.name).jsonl")
            XCTAssertEqual(r.map(\.line), [1, 2, 3], c.name)
            XCTAssertEqual(r.map(\.outcome), ["verified", c.outcome, "verified"], c.name)
            XCTAssertTrue(c.reason.isEmpty || r[1].reason.contains(c.reason), "\(c.name): \(r[1].code) \(r[1].reason)")
            XCTAssertTrue(posted.contains("A\(i)") && posted.contains("B\(i)"), "\(c.name): the good records around it are posted")
        }
        XCTAssertTrue(posted.contains("D64"), "64 levels is within the limit")
    }

    /// An `_ms` field there but no number ("abc", 1e400, true), beside a date text that reads:
    /// the item is dated by the text, as earlier versions read it (so `verify` reads a stored
    /// record as its night did), and said (DATE_MS_UNREADABLE, once per transaction): it was
    /// dated by the text without a word, though the `_ms` fields are the time Apple means.
    func testAnMsFieldThatIsNoNumberIsSaidWhereTheTextDatesTheItem() throws {
        let text = #""purchase_date": "2026-10-05 10:00:00 Etc/GMT""#
        let items = [("DMS1", #""purchase_date_ms": "abc", "# + text), ("DMS2", #""purchase_date_ms": 1e400, "# + text),
                     ("DMS3", #""purchase_date_ms": true, "# + text), ("DMS4", #""purchase_date_ms": "", "# + text)]
        let lines = items.map { id, fields in
            Self.response(items: Self.item(fields).replacingOccurrences(of: "\"X\"", with: "\"\(id)\"")
                .replacingOccurrences(of: #""purchase_date_ms": "1791194400000", "#, with: ""))
        }
        // Twice: a later response listing the item again says nothing more.
        try ws.write("inbox/receipts/ms.jsonl", (lines + lines).joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let messages = try findings("DATE_MS_UNREADABLE")
        XCTAssertEqual(messages.count, 3, "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("inbox/receipts/ms.jsonl:1: transaction DMS1 has purchase_date_ms \"abc\": not a number of milliseconds, so this record's date for it is read from purchase_date") }, "\(messages)")
        XCTAssertFalse(messages.contains { $0.contains("DMS4") }, "an empty field is none")
        XCTAssertEqual(try saleEntries().filter { $0.hasPrefix("DMS") }.sorted(), ["DMS1", "DMS2", "DMS3", "DMS4"])
        XCTAssertEqual(try findings().filter { $0.contains("DMS") }, [], "no item refused")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }


    /// Items with wrong types, huge numbers, zero and negative quantities, dates in 1970 and
    /// 2100: the record verifies, the item is kept as an INVALID_TRANSACTION finding naming
    /// file, line and why, and nothing is posted for it.
    func testHostileReceiptItems() throws {
        let cases: [(id: String, fields: String, message: String)] = [
            ("Q0", #""quantity": "0""#, "quantity \"0\""),
            ("QNEG", #""quantity": -3"#, "quantity \"-3\""),
            ("QHUGE", #""quantity": 1e400"#, "quantity \"1e400\""),
            ("QBIG", #""quantity": "99999999999999999999""#, "quantity \"99999999999999999999\""),
            ("QOBJ", #""quantity": {"n": 1}"#, "quantity \"{...}\""),
            ("QFRAC", #""quantity": 1.5"#, "quantity \"1.5\""),
            ("D1970", #""purchase_date_ms": "0""#, "purchase date 1970-01-01, outside 2008-2099"),
            ("D2100", #""purchase_date_ms": "4102444800000""#, "purchase date 2100-01-01, outside 2008-2099"),
            ("DNEG", #""purchase_date_ms": "-9223372036854775808""#, "outside 2008-2099"),
            ("DTEXT", #""purchase_date_ms": null, "purchase_date": "1000000000-01-01 00:00:00 Etc/GMT""#, "no readable purchase_date"),
            ("DLIST", #""purchase_date_ms": [1]"#, "no readable purchase_date"),
            ("C1970", #""cancellation_date_ms": "1000""#, "cancellation date 1970-01-01"),
            ("E1970", #""expires_date_ms": "-9223372036854775808""#, "expires date"),
            ("E2100", #""expires_date_ms": "9223372036854775807""#, "expires date"),
            // A refund or expiry date that is there but reads as no date: it was taken for none
            // (the sale posted as never refunded, no finding).
            ("CABC", #""cancellation_date_ms": "abc""#, #"cancellation_date_ms "abc": not a date (milliseconds since 1970, or Apple's date text), so when it was refunded cannot be told"#),
            ("CEXP", #""cancellation_date_ms": 1e30"#, #"cancellation_date_ms "1e30": not a date"#),
            ("CFRAC", #""cancellation_date_ms": "1795100000000.0""#, #"cancellation_date_ms "1795100000000.0": not a date"#),
            ("CTEXT", #""cancellation_date": "not a date""#, #"cancellation_date "not a date": not a date"#),
            ("CBOOL", #""cancellation_date_ms": true"#, "cancellation_date_ms \"true\": not a date"),
            ("CFMT", #""cancellation_date_formatted": "garbage""#, #"cancellation_date_formatted "garbage": not a date"#),
            ("EFRAC", #""expires_date_ms": 3.5"#, "expires_date_ms \"3.5\": not a date (milliseconds since 1970, or Apple's date text), so when it expires cannot be told"),
        ]
        let lines = cases.map { c in
            Self.response(items: Self.item(c.fields).replacingOccurrences(of: "\"X\"", with: "\"\(c.id)\"")
                .replacingOccurrences(of: #""quantity": "1", "#, with: c.fields.contains("quantity") ? "" : #""quantity": "1", "#)
                .replacingOccurrences(of: #""purchase_date_ms": "1791194400000", "#, with: c.fields.contains("purchase_date") ? "" : #""purchase_date_ms": "1791194400000", "#))
        }
        try ws.write("inbox/receipts/items.jsonl", ([good("GOOD1")] + lines + [good("GOOD2")]).joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/receipts/items.jsonl")
        XCTAssertEqual(r.count, cases.count + 2)
        XCTAssertTrue(r.allSatisfy { $0.outcome == "verified" }, "\(r)")
        let messages = try findings()
        for (i, c) in cases.enumerated() {
            let m = messages.filter { $0.hasPrefix("inbox/receipts/items.jsonl:\(i + 2): ") }
            XCTAssertEqual(m.count, 1, "\(c.id): \(messages)")
            XCTAssertTrue(m.first?.contains(c.message) ?? false, "\(c.id): \(m)")
        }
        XCTAssertEqual(try saleEntries(), ["GOOD1", "GOOD2"])
    }

    /// Ids are strings (Apple's) or whole numbers written as digits (some libraries rewrite the
    /// strings as numbers: the same text). `9980000000000001.0` beside the string
    /// `"9980000000000001"` posted one purchase twice; `true`, `-1`, `1e3` were ids too. A refund
    /// dated before its purchase put a refund entry in a month before its sale.
    func testIdentifierTypesAndRefundsBeforePurchases() throws {
        func line(_ item: String) -> String { Self.response(items: item) }
        let base = #"{"transaction_id": "X", "product_id": "coins.100", "quantity": "1", "purchase_date_ms": "1791194400000"}"#
        let lines = [
            base.replacingOccurrences(of: #""X""#, with: "9980000000000001.0"),
            base.replacingOccurrences(of: #""X""#, with: #""9980000000000001""#),
            base.replacingOccurrences(of: #""X""#, with: "9980000000000002"),
            base.replacingOccurrences(of: #""X""#, with: "true"),
            base.replacingOccurrences(of: #""X""#, with: "-1"),
            base.replacingOccurrences(of: #""X""#, with: #""P1""#).replacingOccurrences(of: #""coins.100""#, with: "1e3"),
            base.replacingOccurrences(of: #""X""#, with: #""O1", "original_transaction_id": 12.5"#),
            base.replacingOccurrences(of: #""X""#, with: #""R1", "cancellation_date_ms": "1791194399000""#),
            base.replacingOccurrences(of: #""X""#, with: #""R2", "cancellation_date_ms": "1790000000000""#),
            base.replacingOccurrences(of: #""X""#, with: #""R3", "cancellation_date_ms": "1791194400000""#),
            // `null` is a field left out (typed serialisers write it), not a bad id.
            base.replacingOccurrences(of: #""X""#, with: #""N0", "original_transaction_id": null"#),
            base.replacingOccurrences(of: #""X""#, with: "\"L1\", \"original_transaction_id\": \"L0\\u200b\""),
        ].map(line)
        try ws.write("inbox/receipts/ids.jsonl", lines.joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let sales = try ledger().read { try $0.rawRows("SELECT transaction_id FROM entry WHERE kind = 'sale' ORDER BY transaction_id") }.map { $0[0] }
        XCTAssertEqual(sales, ["9980000000000001", "9980000000000002", "N0", "R3"])
        let messages = try findings()
        let expected = [
            1: #"transaction_id "9980000000000001.0": neither a string nor a whole number written as digits"#,
            4: #"transaction_id "true": neither"#,
            5: #"transaction_id "-1": neither"#,
            6: #"transaction P1 has product_id "1e3": neither"#,
            7: #"transaction O1 has original_transaction_id "12.5": neither"#,
            8: "transaction R1 was refunded before it was bought: refund dated 2026-10-05, purchase 2026-10-05 (1 s earlier)",
            9: "transaction R2 was refunded before it was bought: refund dated 2026-09-21, purchase 2026-10-05",
            12: "transaction L1 has original_transaction_id \"L0\\u{200B}\": it holds a format character (zero-width, joiner, bidi control or byte order mark), U+200B, at character 3",
        ]
        for (n, text) in expected {
            XCTAssertTrue(messages.contains { $0.hasPrefix("inbox/receipts/ids.jsonl:\(n): ") && $0.contains(text) }, "line \(n): \(messages)")
        }
        XCTAssertEqual(messages.count, expected.count, "\(messages)")
        // A refund at the very moment of its purchase is a refund.
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM entry WHERE kind = 'refund' AND transaction_id = 'R3'") }.first?.first, "1")
    }

    /// A response listing one transaction in `in_app` and in `latest_receipt_info` with another
    /// quantity (or product) posted the `in_app` one without a word; it is an
    /// invalid item now. Listed twice alike (one carrying the refund) it posts once, refunded.
    func testATransactionListedTwiceInOneResponseMustAgree() throws {
        let d1 = #"{"transaction_id": "D1", "product_id": "coins.100", "quantity": "1", "purchase_date_ms": "1791194400000"}"#
        let d2 = #"{"transaction_id": "D2", "product_id": "coins.100", "quantity": "1", "purchase_date_ms": "1791194400000"}"#
        let response = #"{"status": 0, "environment": "Production", "receipt": {"bundle_id": "com.example.coins", "in_app": ["# + d1 + ", " + d2 + "]}, "
            + #""latest_receipt_info": ["# + d1.replacingOccurrences(of: #""quantity": "1""#, with: #""quantity": 3"#) + ", "
            + d2.replacingOccurrences(of: #""quantity": "1""#, with: #""quantity": 1, "cancellation_date_ms": "1791280800000""#) + "]}"
        try ws.write("inbox/receipts/twice.jsonl", response + "\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["D2"])
        let messages = try findings()
        XCTAssertEqual(messages.count, 1, "\(messages)")
        XCTAssertTrue(messages.first?.contains(#"transaction "D1" is listed twice in the response with a different quantity 1 or 3"#) ?? false, "\(messages)")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT kind FROM entry WHERE transaction_id = 'D2' ORDER BY id") }.map { $0[0] }, ["sale", "refund"])
    }

    /// A family member's shared access (`in_app_ownership_type` FAMILY_SHARED) was booked as a
    /// sale beside the purchaser's own transaction: the revenue counted twice. It is free now.
    func testFamilySharedTransactionsMoveNoMoney() throws {
        let shared = #"{"transaction_id": "FS1", "product_id": "coins.100", "quantity": "1", "purchase_date_ms": "1791194400000", "in_app_ownership_type": "FAMILY_SHARED"}"#
        try ws.write("inbox/receipts/family.jsonl", [good("FP1"), Self.response(items: shared)].joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["FP1"])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT sale_status FROM store_transaction WHERE transaction_id = 'FS1'") }, [["free"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// An expiry of Int64.min on a subscription whose later renewal counts paid days crashed the
    /// tenure arithmetic; it is now an invalid item and the renewal posts.
    func testAbsurdExpiryInASubscriptionChainIsRefused() throws {
        try ws.write("inbox/receipts/sub.jsonl", [
            good("S1", product: "vip.monthly", original: "S1", purchased: "2026-09-01T10:00:00Z")
                .replacingOccurrences(of: #""is_trial_period": "false""#, with: #""is_trial_period": "false", "expires_date_ms": "-9223372036854775808""#),
            good("S2", product: "vip.monthly", original: "S1", expires: "2026-11-01T10:00:00Z", purchased: "2026-10-01T10:00:00Z"),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["S2"])
        let messages = try findings()
        XCTAssertTrue(messages.contains { $0.contains("S1") && $0.contains("expires date") }, "\(messages)")
    }

    func testEmptyAndBlankFilesAreRejectedAsSuch() throws {
        try ws.write("inbox/receipts/empty.jsonl", "")
        try ws.write("inbox/receipts/blank.json", " \n\t\n  ")
        try ws.write("inbox/orders/empty.csv", "")
        try ws.write("inbox/signed/blank.jws", "\n\n")
        try ws.write("inbox/receipts/empty-array.json", "[]")
        try ws.run("2026-11-03")
        for path in ["inbox/receipts/empty.jsonl", "inbox/receipts/blank.json", "inbox/orders/empty.csv", "inbox/signed/blank.jws"] {
            let r = try records(path)
            XCTAssertEqual(r.map(\.outcome), ["rejected"], path)
            XCTAssertEqual(r.first?.code, "EMPTY_FILE", path)
            XCTAssertEqual(r.first?.line, 1, path)
        }
        XCTAssertEqual(try records("inbox/receipts/empty-array.json").count, 0, "an empty array is a file with no records")
        // A file that later gets content is read again, its records counted, and its EMPTY_FILE
        // rejection is resolved (it stayed open for ever, asking about a transfer that had
        // since arrived); the other empty files' stay open.
        try ws.write("inbox/receipts/empty.jsonl", good("LATE") + "\n")
        let later = try ws.run("2026-11-04")
        XCTAssertTrue(try saleEntries().contains("LATE"))
        let open = try ledger().read { try $0.recordProblems() }.filter { !$0.resolved }.map(\.path)
        XCTAssertEqual(Set(open), ["inbox/receipts/blank.json", "inbox/orders/empty.csv", "inbox/signed/blank.jws"])
        let note = try ledger().read { try $0.rawRows("""
            SELECT r.resolved_run_id, r.resolved_note FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = 'inbox/receipts/empty.jsonl' AND r.reason_code = 'EMPTY_FILE'
            """) }
        XCTAssertEqual(note, [["\(later.runId)", "inbox/receipts/empty.jsonl was read again, whole (1 record)"]])
    }

    /// A `.json` array cut off mid-way: the complete records are read, the cut one is rejected.
    func testATruncatedJSONArrayKeepsItsCompleteRecords() throws {
        let full = "[\n" + [good("J1"), good("J2"), good("J3")].joined(separator: ",\n") + "\n]\n"
        let cut = String(full.prefix(full.count - 40))
        try ws.write("inbox/receipts/cut.json", cut)
        try ws.write("inbox/receipts/cut-after-comma.json", "[\n" + good("J4") + ",\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["J1", "J2", "J4"])
        let r = try records("inbox/receipts/cut.json")
        XCTAssertEqual(r.map(\.outcome), ["verified", "verified", "rejected"])
        XCTAssertEqual(r.map(\.line), [2, 3, 4])
        XCTAssertTrue(r[2].reason.contains("unexpected end of input"), r[2].reason)
        let r2 = try records("inbox/receipts/cut-after-comma.json")
        XCTAssertEqual(r2.map(\.outcome), ["verified", "rejected"])
        XCTAssertTrue(r2[1].reason.contains("truncated"), r2[1].reason)
    }

    /// A record settled by the same night's data (a pending response, then its transaction
    /// verified by another record of the night) is not counted as one of earlier nights'.
    func testTheSettledCountLeavesOutTheNightsOwnRecords() throws {
        try ws.write("inbox/receipts/same.jsonl", #"{"response": {"status": 21005, "is-retryable": true}, "transaction_id": "7399"}"# + "\n"
                     + Receipt.response([Receipt.item("7399", purchased: "2026-11-02T10:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-11-03").recordsSettled, 0)
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT outcome, resolved_run_id FROM source_record WHERE line = 1") }, [["pending", "1"]])
    }

    /// The rules' highest price in a three-decimal currency times the receipts' highest quantity
    /// passes 64-bit minor units: the sale waits with a reason (the night crashed, exit 132).
    func testAPriceTimesAQuantityPastWhatTheLedgerHoldsWaits() throws {
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,KWT,0.300,2020-01-01", with: "coins.100,KWT,9999999999.999,2020-01-01"))
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("OV1", quantity: 1_000_000, purchased: "2026-10-05T10:00:00Z"),
                                                                Receipt.item("OV2", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-1,a1,OV1,coins.100,1000000,100000000,2026-10-05T10:01:00Z,production,KWT,,\n")
        XCTAssertNoThrow(try ws.run("2026-11-03"))
        let waits = try ledger().read { try $0.rawRows("SELECT sale_status, ifnull(pending_reason, '') FROM store_transaction WHERE transaction_id = 'OV1'") }
        XCTAssertEqual(waits.first?.first, "pending")
        XCTAssertTrue(waits.first?.last?.contains("price 9999999999.999 KWD x 1000000 for coins.100 in KWT is more than the ledger's amounts hold") ?? false, "\(waits)")
        XCTAssertEqual(try saleEntries(), ["OV2"])
        // A rate that would take a sale past the bound in the reporting currency: it waits (the
        // night stopped on a precondition); a rate past a million is refused at rules load.
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,KWT,0.300,2020-01-01", with: "coins.100,KWT,9000000,2020-01-01"))
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,KWD,3.2541", with: "2026-10,KWD,999999"))
        try ws.write("inbox/receipts/r2.jsonl", Receipt.response([Receipt.item("OV3", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "ord-3,a1,OV3,coins.100,1,100,2026-10-06T10:01:00Z,production,KWT,,\n")
        XCTAssertNoThrow(try ws.run("2026-11-04"))
        let rate = try ledger().read { try $0.rawRows("SELECT ifnull(pending_reason, '') FROM store_transaction WHERE transaction_id = 'OV3'") }
        XCTAssertTrue(rate.first?.first?.contains("9000000.000 KWD at the rate 999999 is more than the ledger's amounts hold in USD") ?? false, "\(rate)")
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,KWD,3.2541", with: "2026-10,KWD,123456789012345678"))
        XCTAssertThrowsError(try ws.run("2026-11-05")) { XCTAssertTrue("\($0)".contains("fx.csv:7: rate 123456789012345678 is more than 1000000 units of the reporting currency for one KWD"), "\($0)") }
    }

    /// A file of many bad lines (a million would pass a sheet's 1,048,576 rows: the night failed
    /// writing its workbooks, and every night after): Run Info lists the first of each code and
    /// counts the rest, as it does findings; the Rejected sheet lists up to its own cap.
    func testManyOpenRecordsAreCountedPastTheCapNotListed() throws {
        try ws.write("inbox/receipts/flood.jsonl", (1...5).map { "x\($0)" }.joined(separator: "\n") + "\n" + good("FL1") + "\n")
        try ws.run("2026-11-03")
        let rows = try ledger().runInfoTexts("not_posted", asOf: "2026-11-03", findingsLimit: 2)
        XCTAssertEqual(rows.map { $0[0] }, ["inbox/receipts/flood.jsonl", "inbox/receipts/flood.jsonl",
                                         "... and 3 more open MALFORMED records, not listed here (the reconciliation workbook's Pending and Rejected sheets list up to 100000 of each code)"])
        // Counted in the ledger, not read whole: the first of each code in order, at most a
        // total (a code per record, a status made up per line, is no cap), the codes left out
        // past the hundredth counted together.
        try ws.write("inbox/receipts/statuses.jsonl", (1...300).map { "{\"status\": \(30_000 + $0)}" }.joined(separator: "\n") + "\n")
        try ws.run("2026-11-04")
        let day = Day(iso: "2026-11-04")!
        let capped = try ledger().read { try $0.openRecordProblems(.openOn(day, outcome: nil, byFirstSeen: false), perCode: 2, total: 1000) }
        XCTAssertEqual(capped.listed.filter { $0.code == "MALFORMED" }.map(\.line), [1, 2])
        XCTAssertEqual(capped.counts.first { $0.code == "MALFORMED" }?.count, 5)
        XCTAssertEqual(capped.more.first?.code, "MALFORMED")
        XCTAssertEqual(capped.more.first?.count, 3)
        XCTAssertEqual(capped.listed.count, 302, "two MALFORMED and every status once")
        let many = try ledger().read { try $0.openRecordProblems(.openOn(day, outcome: nil, byFirstSeen: false), perCode: 2, total: 10) }
        XCTAssertEqual(many.listed.count, 10)
        XCTAssertEqual(many.counts.count, 301)
        XCTAssertEqual(many.more.count, 101)
        XCTAssertEqual(many.more.last?.code, "193 other codes")
        XCTAssertEqual(many.more.last?.count, 193)
        // As of the day before, the statuses were not read yet; by first seen, oldest first.
        let before = try ledger().read { try $0.openRecordProblems(.openOn(Day(iso: "2026-11-03")!, outcome: "rejected", byFirstSeen: true), perCode: 10, total: 10) }
        XCTAssertEqual(before.listed.map(\.code), Array(repeating: "MALFORMED", count: 5))
        XCTAssertEqual(before.more.count, 0)
        // A night's summary: its own run's records only.
        let night = try ledger().read { try $0.openRecordProblems(.readBy(runId: 2), perCode: .max, total: 3) }
        XCTAssertEqual(night.listed.map(\.path), Array(repeating: "inbox/receipts/statuses.jsonl", count: 3))
        XCTAssertEqual(night.counts.reduce(0) { $0 + $1.count }, 300)
    }

    /// More sales waiting than a sheet lists (a region with no price yet, at a million sales,
    /// passed the Pending sheet's 1,048,576 rows, and the night failed writing its workbooks):
    /// the first are listed, then a row says how many more, as for the records waiting.
    func testThePendingSheetListsTheFirstWaitingSalesAndCountsTheRest() throws {
        try ws.write("inbox/receipts/wait.jsonl", Receipt.response((1...3).map { Receipt.item("NP\($0)", product: "coins.unpriced", purchased: "2026-10-05T10:00:00Z") }) + "\n")
        try ws.run("2026-11-03")
        let rows = try ledger().read { r -> [String] in
            var report = ReconciliationReport(reader: r, asOf: Day(iso: "2026-11-03")!, reportingCurrency: "USD", runId: nil,
                                              layout: try ReportLayout.shipped(.reconciliation))
            report.recordsLimit = 2
            let open = try r.openRecordProblems(.openOn(Day(iso: "2026-11-03")!, outcome: "pending", byFirstSeen: false), perCode: 2, total: 2)
            let table = try XCTUnwrap(try report.pendingSheet(openRecords: open).tables.first)
            var out: [String] = []
            try table.rows { row in out.append(row.cells.prefix(2).map { if case .text(let t) = $0 { return t }; return "" }.joined(separator: " | ")) }
            return out
        }
        XCTAssertEqual(rows.count, 3, "\(rows)")
        // (Led by the transaction, then what waits.)
        XCTAssertTrue(rows[0].hasPrefix("NP1 | ") && rows[1].hasPrefix("NP2 | "), "\(rows)")
        XCTAssertEqual(rows[2], "... and 1 more waiting transactions, not listed here (a sheet lists the first 2; `iapledger findings --code MISSING_RULE` and `--code ORDER_WAIT` list every one) | ")
    }

    /// More exceptions of a category than a sheet lists (a backend's million credits of no
    /// purchase took the reconciliation workbook 35 s to write): the Exceptions and Resolved
    /// sheets list the first of each category, by first seen, then a row saying how many more;
    /// the Summary counts every one.
    func testTheExceptionSheetsListTheFirstOfEachCategoryAndCountTheRest() throws {
        let header = ReconciliationTests.header
        let orders = (1...3).map { "o-w\($0),acc-1,,coins.100,1,100,2026-10-0\($0)T10:01:00Z,production,USA,," }
        try ws.write("inbox/receipts/nc.jsonl", good("NC1") + "\n")
        try ws.write("inbox/orders/a.csv", header + orders.joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        try ws.write("inbox/orders/b.csv", header + orders.map { $0 + "2026-11-03T12:00:00Z" }.joined(separator: "\n") + "\n")
        try ws.run("2026-11-04")
        func sheet(_ asOf: String, _ make: (ReconciliationReport) throws -> SheetContent) throws -> [String] {
            try ledger().read { r -> [String] in
                var report = ReconciliationReport(reader: r, asOf: Day(iso: asOf)!, reportingCurrency: "USD", runId: nil,
                                                  layout: try ReportLayout.shipped(.reconciliation))
                report.recordsLimit = 2
                let table = try XCTUnwrap(try make(report).tables.first)
                var out: [String] = []
                try table.rows { row in
                    out.append([row.cells[0], row.cells[2], row.cells.last!].map { if case .text(let t) = $0 { return t }; return "" }.joined(separator: " | "))
                }
                XCTAssertEqual(out.count, table.rowCount)
                return out
            }
        }
        let more = "... and 1 more CREDITED_WITHOUT_TRANSACTION exceptions, not listed here (a sheet lists the first 2 of each category, by first seen; the Summary counts every one; "
        let open = try sheet("2026-11-03") { try $0.exceptionsSheet() }
        XCTAssertEqual(open.count, 4, "\(open)")
        XCTAssertTrue(open[0].hasPrefix("NOT_CREDITED | "), "\(open)")
        XCTAssertTrue(open[1].hasPrefix("CREDITED_WITHOUT_TRANSACTION | o-w1 | "), "\(open)")
        XCTAssertTrue(open[2].hasPrefix("CREDITED_WITHOUT_TRANSACTION | o-w2 | "), "\(open)")
        XCTAssertEqual(open[3], "CREDITED_WITHOUT_TRANSACTION |  | " + more + "`iapledger exceptions --status open --category CREDITED_WITHOUT_TRANSACTION --format csv` lists every one)")
        let resolved = try sheet("2026-11-04") { try $0.resolvedSheet() }
        XCTAssertEqual(resolved.count, 3, "\(resolved)")
        XCTAssertTrue(resolved[0].hasPrefix("CREDITED_WITHOUT_TRANSACTION | o-w1 | "), "\(resolved)")
        XCTAssertEqual(resolved[2], "CREDITED_WITHOUT_TRANSACTION |  | " + more + "`iapledger exceptions --status resolved --category CREDITED_WITHOUT_TRANSACTION --format csv` lists every one)")
        let summary = try ledger().read { r in
            try ReconciliationReport(reader: r, asOf: Day(iso: "2026-11-04")!, reportingCurrency: "USD", runId: nil,
                                     layout: try ReportLayout.shipped(.reconciliation)).summarySheet()
        }
        XCTAssertEqual(summary.values["resolved"], "3", "every one resolved is counted")
    }

    /// A blank transaction id, or one or a product id with spaces around it, is no store's: an
    /// INVALID_TRANSACTION finding (" " was posted as a sale; " 2000…" is another transaction
    /// than the order's trimmed "2000…").
    func testBlankOrSpacePaddedIdsAreRefused() throws {
        try ws.write("inbox/receipts/ids.jsonl", [Receipt.response([Receipt.item(" ", purchased: "2026-10-05T10:00:00Z")]),
                                                  Receipt.response([Receipt.item(" 9930000000000001", purchased: "2026-10-05T10:00:00Z")]),
                                                  Receipt.response([Receipt.item("9930000000000002", product: "coins.100 ", purchased: "2026-10-05T10:00:00Z")]),
                                                  good("BP1")].joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let messages = try findings().filter { $0.hasPrefix("inbox/receipts/ids.jsonl:") }
        XCTAssertEqual(messages.count, 3, "\(messages)")
        XCTAssertTrue(messages.allSatisfy { $0.hasSuffix(" has spaces around it") }, "\(messages)")
        XCTAssertEqual(try saleEntries(), ["BP1"])
    }

    /// A response in `inbox/receipts/` whose status is null is refused for that, not told to
    /// go in `inbox/receipts/` (where it is).
    func testMessagesSayWhatFitsTheFolder() throws {
        try ws.write("inbox/receipts/null.jsonl", #"{"status": null, "receipt": {"bundle_id": "com.example.coins", "in_app": []}}"# + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/receipts/null.jsonl")
        XCTAssertEqual(r.map(\.outcome), ["rejected"])
        XCTAssertFalse(r[0].reason.contains("inbox/receipts/"), r[0].reason)
    }

    /// Units past what the ledger holds (past Int64) are called too many, not "no whole number";
    /// a rules file not in UTF-8 is named at the line of its first bad byte.
    func testRulesUnitsTooLargeAndRulesNotUTF8AreNamedAsTheyAre() throws {
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.huge,consumable,99999999999999999999\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) { error in
            XCTAssertTrue("\(error)".contains("products.csv:5: units 99999999999999999999 is more than 1000000000000 credited for one unit bought: a typo?"), "\(error)")
        }
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.huge,consumable,-1\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) { error in
            XCTAssertTrue("\(error)".contains("products.csv:5: units \"-1\" is not a whole number >= 0"), "\(error)")
        }
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\n")
        var prices = Data((TestWorkspace.defaultPrices + "\ncoins.100,FRA,0.99,2026-01-0").utf8)
        prices.append(0xFF)
        prices.append(0x0A)
        try ws.writeData("rules/prices.csv", prices)
        let lines = TestWorkspace.defaultPrices.split(separator: "\n", omittingEmptySubsequences: false).count + 1
        XCTAssertThrowsError(try ws.run("2026-11-03")) { error in
            XCTAssertTrue("\(error)".contains("prices.csv:\(lines): is not valid UTF-8 text: its first byte that is not is at byte offset \(prices.count - 2) of the file"), "\(error)")
        }
    }

    /// What follows a `.json` file's top-level array (a second document, a stray bracket) is
    /// one more record, refused where it starts: it was dropped, in no list, `trace` finding
    /// nothing (receipts and signed data alike). An empty array alone is no record.
    func testTextAfterAJSONArrayIsARecordRefusedNotDropped() throws {
        try ws.write("inbox/receipts/after.json", "[" + good("AA1") + "]\n" + good("AA2") + "\n")
        try ws.write("inbox/receipts/empty-then.json", "[]\n\n" + good("AA3"))
        try ws.write("inbox/receipts/brackets.json", "[]]]]]")
        try ws.write("inbox/receipts/none.json", "[ ]\n")
        try ws.write("inbox/signed/after.json", #"[{"signedPayload": "x.y.z"}]"# + "\n" + #"{"signedPayload": "a.b.c"}"# + "\n")
        try ws.run("2026-11-03")
        let after = try records("inbox/receipts/after.json")
        XCTAssertEqual(after.map { "\($0.line) \($0.outcome) \($0.code)" }, ["1 verified ", "2 rejected MALFORMED"])
        XCTAssertTrue(after[1].reason.hasPrefix("more text after the end of the file's top-level array: a .json file holds one JSON document"), after[1].reason)
        XCTAssertEqual(try records("inbox/receipts/empty-then.json").map { "\($0.line) \($0.code)" }, ["3 MALFORMED"])
        XCTAssertEqual(try records("inbox/receipts/brackets.json").map { "\($0.line) \($0.code)" }, ["1 MALFORMED"])
        XCTAssertEqual(try records("inbox/receipts/none.json").count, 0)
        let signed = try records("inbox/signed/after.json")
        XCTAssertEqual(signed.map { "\($0.line) \($0.outcome)" }, ["1 rejected", "2 rejected"])
        XCTAssertEqual(signed[1].code, "MALFORMED")
        XCTAssertTrue(signed[1].reason.hasPrefix("more text after the end"), signed[1].reason)
        XCTAssertEqual(try saleEntries(), ["AA1"], "the record after the array is refused, not posted")
        // Read while still written, the text after the array cut inside a value: cut short,
        // and settled once the file is whole (it stayed MALFORMED, open for good).
        let more = good("AA5")
        try ws.write("inbox/receipts/growing.json", "[" + good("AA4") + "]\n\n  [" + String(more.prefix(40)))
        try ws.run("2026-11-04")
        XCTAssertEqual(try records("inbox/receipts/growing.json").map { "\($0.line) \($0.code)" }, ["1 ", "3 TRUNCATED"])
        try ws.write("inbox/receipts/growing.json", "[" + good("AA4") + "]\n\n  [" + more + "]\n")
        try ws.run("2026-11-05")
        let stillOpen = try openRecords()
        XCTAssertFalse(stillOpen.contains { $0[0] == "inbox/receipts/growing.json" && $0[2] == "TRUNCATED" }, "\(stillOpen)")
        XCTAssertEqual(try openRecords().filter { $0[0] == "inbox/receipts/growing.json" }.map { $0[2] }, ["MALFORMED"])
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
    }

    /// A file holding only a UTF-8 byte order mark (and blanks) is empty (`EMPTY_FILE`, resolved
    /// when the file arrives with records), in every folder and format: a `.json` one gave no
    /// record at all, a `.jsonl` one a MALFORMED record that stayed open once the file came
    /// whole, a `.jws` one a cut line.
    func testAFileOfOnlyAByteOrderMarkIsEmpty() throws {
        let bom = Data([0xEF, 0xBB, 0xBF])
        try ws.writeData("inbox/receipts/a.json", bom)
        try ws.writeData("inbox/receipts/b.jsonl", bom + Data(" \n  \n".utf8))
        try ws.writeData("inbox/receipts/c.jsonl", bom)
        try ws.writeData("inbox/signed/d.jws", bom)
        try ws.writeData("inbox/signed/e.json", bom + Data("\n".utf8))
        try ws.run("2026-11-03")
        for path in ["inbox/receipts/a.json", "inbox/receipts/b.jsonl", "inbox/receipts/c.jsonl", "inbox/signed/d.jws", "inbox/signed/e.json"] {
            XCTAssertEqual(try records(path).map { "\($0.line) \($0.code)" }, ["1 EMPTY_FILE"], path)
        }
        try ws.writeData("inbox/receipts/c.jsonl", bom + Data((good("BM1") + "\n").utf8))
        try ws.run("2026-11-04")
        XCTAssertFalse(try openRecords().contains { $0[0] == "inbox/receipts/c.jsonl" }, "resolved by the file come whole")
        XCTAssertEqual(try saleEntries(), ["BM1"])
    }

    /// A refused item (`INVALID_TRANSACTION`) is one finding for its transaction and what is
    /// wrong with it, however many records list it: every later response of a subscription
    /// lists its history again, and a file sent again repeats it, each opening one more
    /// finding to dismiss. Each record is still linked to the transaction (trace, `CREDITED_UNVERIFIED`);
    /// a record saying something else of it opens its own finding.
    func testARefusedItemIsOneFindingHoweverManyRecordsListIt() throws {
        let bad = Receipt.item("IV1", quantity: 0, purchased: "2026-10-05T10:00:00Z")
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([bad, Receipt.item("IV2", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try findings().count, 1)
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([bad, Receipt.item("IV3", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        try FileManager.default.copyItem(at: ws.root.appendingPathComponent("inbox/receipts/a.jsonl"),
                                         to: ws.root.appendingPathComponent("inbox/receipts/a (1).jsonl"))
        try ws.run("2026-11-04")
        let said = try findings()
        XCTAssertEqual(said.count, 1, "\(said)")
        XCTAssertTrue(said[0].hasPrefix("inbox/receipts/a.jsonl:1: transaction IV1 has quantity \"0\""), said[0])
        let links = try ledger().read { try $0.rawRows("SELECT count(*) FROM unverified_record_transaction WHERE transaction_id = 'IV1'") }
        XCTAssertEqual(links[0][0], "3", "each record listing it is linked to it")
        XCTAssertEqual(try saleEntries(), ["IV2", "IV3"])
        try ws.write("inbox/receipts/c.jsonl", Receipt.response([Receipt.item("IV1", quantity: -1, purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-11-05")
        XCTAssertEqual(try findings().count, 2, "another fault of the same transaction is said")
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
    }

    /// A NUL in a value a reason quotes (a bundle id) is kept as `\u{0}`: the reason was cut at
    /// it (SQLite hands text back up to a NUL), naming a bundle id the receipt does not have.
    func testANulInAQuotedValueKeepsTheWholeReason() throws {
        let response = good("NU1").replacingOccurrences(of: #""bundle_id": "com.example.coins""#, with: #""bundle_id": "com.evil\u0000.app-tail""#)
        XCTAssertNotEqual(response, good("NU1"))
        try ws.write("inbox/receipts/nul.jsonl", response + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/receipts/nul.jsonl")
        XCTAssertEqual(r.map(\.code), ["WRONG_BUNDLE_ID"])
        XCTAssertEqual(r[0].reason, "receipt of another app: bundle id com.evil\\u{0}.app-tail, expected com.example.coins")
    }

    /// Virtual units per unit bought past a trillion are refused when the rules are read: with
    /// a million bought, reconciliation's units due overflowed and every night crashed (exit 132).
    func testUnitsPastATrillionAreRefusedWithTheRules() throws {
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.huge,consumable,10000000000000\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) { error in
            XCTAssertTrue("\(error)".contains("products.csv:5: units 10000000000000 is more than 1000000000000 credited for one unit bought"), "\(error)")
        }
        // A trillion, a million bought, an order crediting other units: a mismatch, said.
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.huge,consumable,1000000000000\n")
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.huge,USA,0.01,2020-01-01\n")
        try ws.write("inbox/receipts/h.jsonl", Receipt.response([Receipt.item("HU1", product: "coins.huge", quantity: 1_000_000, purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/h.csv", ReconciliationTests.header + "ord-h,a1,HU1,coins.huge,1000000,1,2026-10-05T10:01:00Z,production,USA,,\n")
        XCTAssertNoThrow(try ws.run("2026-11-03"))
        let open = try ledger().read { try $0.rawRows("SELECT category, detail FROM exception WHERE transaction_id = 'HU1'") }
        XCTAssertTrue(open.contains { $0[0] == "UNITS_MISMATCH" && $0[1].contains("coins.huge x 1000000 is 1000000000000000000") }, "\(open)")
    }

    /// Two responses parted by a carriage return alone (classic Mac line ends) are one line to
    /// a JSON Lines reader: MALFORMED, saying why, where it said only "unexpected text".
    func testALoneCarriageReturnBetweenJSONLinesIsSaid() throws {
        try ws.write("inbox/receipts/mac.jsonl", good("CR1") + "\r" + good("CR2") + "\n")
        try ws.run("2026-11-03")
        let rows = try records("inbox/receipts/mac.jsonl")
        XCTAssertEqual(rows.map(\.code), ["MALFORMED"])
        XCTAssertTrue(rows[0].reason.contains("another document follows a carriage return alone (a classic Mac line end: JSON Lines end each line with LF or CR LF"), rows[0].reason)
    }

    /// An order's storefront that is not three letters (ISO 3166-1 alpha-3, reconciliation.md,
    /// a `US`) prices no sale (its sale waited for ever for a rule the rules refuse to hold):
    /// the sale posts at default_storefront, the order counts for reconciliation (its later
    /// reversal too), and its record says why; `usa` is read as `USA`.
    func testAnOrdersStorefrontOfTwoLettersPricesNoSale() throws {
        try ws.write("inbox/receipts/r.jsonl", good("SF1") + "\n" + good("SF2") + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header
                     + "ord-sf1,acct-1,SF1,coins.100,1,100,2026-10-05T10:01:00Z,production,US,,\n"
                     + "ord-sf2,acct-1,SF2,coins.100,1,100,2026-10-05T10:01:00Z,production,usa,,\n")
        try ws.run("2026-11-03")
        let rows = try records("inbox/orders/o.csv")
        XCTAssertEqual(rows.map { "\($0.outcome) \($0.code)" }, ["verified ", "verified "])
        XCTAssertEqual(rows[0].reason, "storefront \"US\" is not a storefront code: three capital letters, as Apple writes them (ISO 3166-1 alpha-3, such as SWE): read as none, so it prices no sale (one it would price takes its own storefront, else default_storefront)")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT order_id, ifnull(storefront, '-') FROM order_version ORDER BY order_id") }, [["ord-sf1", "-"], ["ord-sf2", "USA"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT transaction_id, storefront FROM entry WHERE kind = 'sale' ORDER BY transaction_id") }.map { $0.joined(separator: " ") },
                       ["SF1 USA", "SF2 USA"], "SF1 at default_storefront, SF2 at its order's USA")
        XCTAssertTrue(try ledger().read { try $0.rawRows("SELECT rules_json FROM entry WHERE transaction_id = 'SF1'") }.first?.first?.contains("\"storefrontSource\":\"default_storefront\"") ?? false)
        // trace says it on the order's line (it showed nothing of it).
        let traced = TraceOutput.text(try XCTUnwrap(try ledger().read { try $0.traceTransaction("SF1", asOf: nil) }))
        XCTAssertTrue(traced.contains("production (storefront \"US\" is not a storefront code: three capital letters"), traced)
        // The order counts: matched, and its reversal, read the next night, is taken.
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header
                     + "ord-sf1,acct-1,SF1,coins.100,1,100,2026-10-05T10:01:00Z,production,US,,2026-11-03T09:00:00Z\n")
        try ws.run("2026-11-04")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM order_version WHERE order_id = 'ord-sf1'") }, [["2"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT category FROM exception WHERE transaction_id = 'SF1' AND resolved_run_id IS NULL") }, [["NOT_CREDITED"]])
    }

    /// An orders row with more or fewer fields than the header names its order when order_id
    /// is the header's first column (a field missing or split in two lies after it): a valid
    /// line of the order read later resolves it, as for any other refused line of an order.
    func testAnOrdersRowWithTheWrongFieldCountNamesItsOrderWhenItComesFirst() throws {
        try ws.write("inbox/receipts/r.jsonl", good("FC1") + "\n")
        try ws.write("inbox/orders/a.csv", ReconciliationTests.header + "ord-40,acct-40,FC1,coins.100,1,100\n"
                     + "ord-41,acct,41,FC1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-03")
        let refused = try records("inbox/orders/a.csv")
        XCTAssertEqual(refused.map(\.code), ["BAD_ORDER", "BAD_ORDER"])
        XCTAssertTrue(refused[0].reason.hasSuffix("has 6 fields, the header has 11 (order ord-40)"), refused[0].reason)
        XCTAssertTrue(refused[1].reason.hasSuffix("has 12 fields, the header has 11 (order ord-41)"), refused[1].reason)
        try ws.write("inbox/orders/b.csv", ReconciliationTests.header + "ord-40,acct-40,FC1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-04")
        XCTAssertEqual(try ledger().read { try $0.rawRows("""
            SELECT r.line, ifnull(r.resolved_note, '-') FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = 'inbox/orders/a.csv' ORDER BY r.line
            """) }, [["2", "order ord-40 read again from inbox/orders/b.csv:2"], ["3", "-"]])
        // A header with order_id elsewhere: such a row names no order (its fields may be shifted).
        try ws.write("inbox/orders/c.csv", "account_id,order_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at\n"
                     + "acct-42,ord-42,FC1,coins.100,1,100\n")
        try ws.run("2026-11-05")
        XCTAssertTrue(try records("inbox/orders/c.csv")[0].reason.hasSuffix("has 6 fields, the header has 11"))
    }

    /// A `.json` file read while it was still being copied (no line end at its end): its last
    /// record, cut short, is TRUNCATED, as a JSON Lines file's last line is, and resolved when
    /// the file is read whole (it stayed rejected, MALFORMED, until dismissed by hand). A
    /// document cut just after a line end is cut short too (a pretty-printed one has a line end
    /// every few bytes); one settled only by its own record, at the place it stood.
    func testAJSONDocumentReadWhileCopiedIsResolvedWhenReadWhole() throws {
        let one = Receipt.response([Receipt.item("JD1", purchased: "2026-10-20T10:00:00Z")])
        let array = "[\n" + [good("JA1"), good("JA2")].joined(separator: ",\n") + "\n]\n"
        try ws.write("inbox/receipts/one.json", String(one.prefix(one.count / 2)))
        try ws.write("inbox/receipts/array.json", String(array.prefix(array.count - 30)))
        try ws.write("inbox/receipts/ended.json", String(one.prefix(one.count / 2)) + "\n")
        // A pretty-printed array cut inside its first element: one record at line 1, its element
        // at line 2 once whole (no line of the cut version matched: it stayed open for good).
        let pretty = "[\n  " + good("JP1").replacingOccurrences(of: ", ", with: ",\n    ") + "\n]\n"
        try ws.write("inbox/receipts/first.json", String(pretty.prefix(pretty.count / 2)))
        // The same path reused for another batch, read whole: the cut record is not in it, so it
        // stays open.
        let third = good("JR3")
        try ws.write("inbox/receipts/reused.json", "[\n" + good("JR1") + ",\n" + good("JR2") + ",\n" + String(third.prefix(third.count / 2)))
        // A first element cut after its transaction id, the path then holding another batch of
        // the same layout: its record is not there, so it stays open.
        let otherCut = "[\n  " + good("JO1").replacingOccurrences(of: ", ", with: ",\n    ") + "\n]\n"
        let idEnd = try XCTUnwrap(otherCut.range(of: "JO1")).upperBound
        try ws.write("inbox/receipts/other.json", String(otherCut[..<idEnd]) + "\", \"")
        // Cut just after a line end, just after the opening bracket, just after an element's
        // comma: each settled once the document arrives whole.
        let threeLines = "[\n  " + [good("JL1"), good("JL2")].map { $0.replacingOccurrences(of: ", ", with: ",\n    ") }.joined(separator: ",\n  ") + "\n]\n"
        let lineEnds = threeLines.indices.filter { threeLines[$0] == "\n" }
        try ws.write("inbox/receipts/lineend.json", String(threeLines[...lineEnds[3]]))
        try ws.write("inbox/receipts/bracket.json", "[")
        try ws.write("inbox/receipts/comma.json", "[\n" + good("JC1") + ",")
        // Cut inside its second element after its transaction id, the path then holding the next
        // batch: the record at that line is another's, so it stays open (by line alone it
        // settled). Cut with LF line ends, sent whole with CR LF: settled.
        let second = "[\n" + good("JS1") + ",\n" + good("JS2") + "\n]\n"
        let s2 = try XCTUnwrap(second.range(of: "JS2")).upperBound
        try ws.write("inbox/receipts/second.json", String(second[..<s2]))
        let crlf = "[\n  " + good("JF1").replacingOccurrences(of: ", ", with: ",\n    ") + "\n]\n"
        try ws.write("inbox/receipts/crlf.json", String(crlf.prefix(crlf.count / 2)))
        // Whole documents saved without a line end (HTTP bodies, json.dump) are not cut short.
        try ws.write("inbox/signed/whole.json", #"{"signedPayload":"not.a.jws"}"#)
        try ws.write("inbox/receipts/whole.json", #"{"status": 21002}"#)
        // An array cut between its elements is cut short too (receipts and signed data).
        try ws.write("inbox/signed/between.json", #"[{"signedPayload": "x"},"#)
        try ws.write("inbox/receipts/between.json", "[" + good("JB1") + ",")
        // Cut inside a string, a line end after the cut: the parser meets a line end in a
        // string (it was MALFORMED for good, a control character in a string).
        let inString = Receipt.response([Receipt.item("JI1", purchased: "2026-10-20T10:00:00Z")])
        let jiCut = try XCTUnwrap(inString.range(of: "JI1")).lowerBound
        try ws.write("inbox/receipts/instring.json", String(inString[..<inString.index(after: jiCut)]) + "\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try records("inbox/receipts/instring.json").map(\.code), ["TRUNCATED"])
        try ws.write("inbox/receipts/instring.json", inString + "\n")
        XCTAssertNotEqual(try records("inbox/signed/whole.json").map(\.code), ["TRUNCATED"])
        XCTAssertEqual(try records("inbox/receipts/whole.json").map(\.code), ["STATUS_21002"])
        XCTAssertEqual(try records("inbox/signed/between.json").last?.code, "TRUNCATED")
        XCTAssertEqual(try records("inbox/receipts/between.json").map(\.code), ["", "TRUNCATED"])
        try ws.write("inbox/receipts/between.json", "[" + good("JB1") + "," + good("JB2") + "]\n")
        XCTAssertEqual(try records("inbox/receipts/one.json").map(\.code), ["TRUNCATED"])
        XCTAssertEqual(try records("inbox/receipts/array.json").map(\.code), ["", "TRUNCATED"])
        XCTAssertEqual(try records("inbox/receipts/ended.json").map(\.code), ["TRUNCATED"])
        XCTAssertEqual(try records("inbox/receipts/first.json").map { "\($0.line) \($0.code)" }, ["1 TRUNCATED"])
        try ws.write("inbox/receipts/first.json", pretty)
        XCTAssertEqual(try records("inbox/receipts/reused.json").map { "\($0.line) \($0.code)" }, ["2 ", "3 ", "4 TRUNCATED"])
        try ws.write("inbox/receipts/reused.json", "[\n" + good("JR4") + "\n]\n")
        XCTAssertEqual(try records("inbox/receipts/other.json").map { "\($0.line) \($0.code)" }, ["1 TRUNCATED"])
        try ws.write("inbox/receipts/other.json", "[\n  " + good("JO2").replacingOccurrences(of: ", ", with: ",\n    ") + "\n]\n")
        XCTAssertEqual(try records("inbox/receipts/lineend.json").map { "\($0.line) \($0.code)" }, ["1 TRUNCATED"])
        XCTAssertEqual(try records("inbox/receipts/bracket.json").map { "\($0.line) \($0.code)" }, ["1 TRUNCATED"])
        XCTAssertEqual(try records("inbox/receipts/comma.json").map { "\($0.line) \($0.code)" }, ["2 ", "2 TRUNCATED"])
        for name in ["lineend", "bracket"] { try ws.write("inbox/receipts/\(name).json", threeLines) }
        XCTAssertEqual(try records("inbox/receipts/second.json").map { "\($0.line) \($0.code)" }, ["2 ", "3 TRUNCATED"])
        try ws.write("inbox/receipts/second.json", "[\n" + good("JS3") + ",\n" + good("JS4") + "\n]\n")
        try ws.write("inbox/receipts/crlf.json", crlf.replacingOccurrences(of: "\n", with: "\r\n"))
        try ws.write("inbox/receipts/comma.json", "[\n" + good("JC1") + ",\n" + good("JC2") + "\n]\n")
        try ws.write("inbox/receipts/one.json", one)
        try ws.write("inbox/receipts/array.json", array)
        try ws.run("2026-11-04")
        // A night with the files unchanged (read before, skipped) settles nothing by line either.
        try ws.run("2026-11-05")
        XCTAssertEqual(Set(try saleEntries()), ["JA1", "JA2", "JD1", "JB1", "JB2", "JP1", "JR1", "JR2", "JR4", "JO2", "JL1", "JL2", "JC1", "JC2",
                                                "JS1", "JS3", "JS4", "JF1", "JI1"])
        XCTAssertEqual(try ledger().read { try $0.rawRows("""
            SELECT f.path, r.line FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome = 'rejected' AND r.resolved_run_id IS NULL ORDER BY f.path
            """) }, [["inbox/receipts/ended.json", "1"], ["inbox/receipts/other.json", "1"], ["inbox/receipts/reused.json", "4"],
                     ["inbox/receipts/second.json", "3"], ["inbox/receipts/whole.json", "1"], ["inbox/signed/between.json", "1"],
                     ["inbox/signed/between.json", "1"], ["inbox/signed/whole.json", "1"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A version put back (its bytes read before) settles a cut inside a record an earlier
    /// version brought: [A, B], then [A, B, C], then caught cut inside B, then [A, B, C] again.
    func testAPutBackJSONVersionSettlesACutInsideARecordAnEarlierVersionBrought() throws {
        let a = good("PB1"), b = good("PB2"), c = good("PB3")
        try ws.write("inbox/receipts/export.json", "[\n" + a + ",\n" + b + "\n]\n")
        try ws.run("2026-11-03")
        let whole = "[\n" + a + ",\n" + b + ",\n" + c + "\n]\n"
        try ws.write("inbox/receipts/export.json", whole)
        try ws.run("2026-11-04")
        try ws.write("inbox/receipts/export.json", String(whole.prefix(("[\n" + a + ",\n").count + b.count - 10)))
        try ws.run("2026-11-05")
        XCTAssertEqual(try records("inbox/receipts/export.json").filter { $0.code == "TRUNCATED" }.map(\.line), [3])
        try ws.write("inbox/receipts/export.json", whole)
        try ws.run("2026-11-06")
        XCTAssertEqual(try ledger().read { try $0.rawRows("""
            SELECT count(*) FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = 'inbox/receipts/export.json' AND r.outcome = 'rejected' AND r.resolved_run_id IS NULL
            """) }, [["0"]])
    }

    /// Orders: wrong column counts, unterminated and stray quotes, zero/negative/huge
    /// quantities, dates in 1970 and 2100, fractions of a second: each row on its own.
    func testHostileOrderRows() throws {
        let rows: [(row: String, ok: Bool, reason: String)] = [
            ("o1,a1,G1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,", true, ""),
            ("o2,a2,G2,coins.100,1,100,2026-10-05T10:01:00Z,production", false, "has 8 fields, the header has 11"),
            ("o3,a3,G3,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,,extra", false, "has 12 fields"),
            ("o4,a4,G4,coins.100,0,100,2026-10-05T10:01:00Z,production,USA,,", false, "quantity \"0\""),
            ("o5,a5,G5,coins.100,-2,100,2026-10-05T10:01:00Z,production,USA,,", false, "quantity \"-2\""),
            ("o6,a6,G6,coins.100,99999999999999999999,100,2026-10-05T10:01:00Z,production,USA,,", false, "quantity \"99999999999999999999\""),
            ("o7,a7,G7,coins.100,1,1e400,2026-10-05T10:01:00Z,production,USA,,", false, "credited_units \"1e400\""),
            ("o8,a8,G8,coins.100,1,100,1970-01-01T00:00:00Z,production,USA,,", false, "outside 2008-2099"),
            ("o9,a9,G9,coins.100,1,100,2100-01-01T00:00:00Z,production,USA,,", false, "outside 2008-2099"),
            ("o10,a10,G10,coins.100,1,100,2026-10-05T10:01:00.123456789Z,production,USA,,", true, ""),
            ("o11,a11,G11,\"coins.100\"x,1,100,2026-10-05T10:01:00Z,production,USA,,", false, "text after a closing quote"),
            ("o12,a12,G12,coi\"ns,1,100,2026-10-05T10:01:00Z,production,USA,,", false, "a quote inside an unquoted field"),
            ("o13,a13,G13,\"coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,", false, "a quoted field is never properly closed: line 16 has text after a closing quote"),
            ("o14,a14,G14,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,", true, ""),
            ("o15,a15,G15,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,\"a token\nover two lines\",", true, ""),
            ("o16,a16,G16,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,", true, ""),
            ("o17,a17,G17,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,2026-10-05T10:00:59Z", false,
             "reversed_at 2026-10-05T10:00:59Z is before credited_at 2026-10-05T10:01:00Z (order o17)"),
        ]
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + rows.map(\.row).joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/orders/o.csv")
        XCTAssertEqual(r.map(\.line), [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19], "\(r)")
        for (i, (row, ok, reason)) in rows.enumerated() where i < r.count {
            XCTAssertEqual(r[i].outcome, ok ? "verified" : "rejected", "\(row): \(r[i].reason)")
            if !ok { XCTAssertTrue(r[i].reason.contains(reason), "\(row): \(r[i].reason)") }
        }
        let orders = try ledger().read { try $0.rawRows("SELECT order_id, credited_ms FROM order_version ORDER BY id") }
        XCTAssertEqual(orders.map { $0[0] }, ["o1", "o10", "o14", "o15", "o16"])
        guard orders.count == 5 else { return }
        XCTAssertEqual(orders[1][1], "\(Receipt.ms("2026-10-05T10:01:00Z") + 123)")
        // A header-less or headless file is one rejected record naming the file.
        try ws.write("inbox/orders/noheader.csv", "o1,a1,G1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-04")
        XCTAssertEqual(try records("inbox/orders/noheader.csv").map(\.code), ["BAD_CSV"])
    }

    /// An orders file with classic Mac line ends (a CR alone, still written by some spreadsheet
    /// exports) was one long header row: every order in it was lost without a word. A header
    /// naming a column twice was read with the last one winning.
    func testOrdersWithCRLineEndsAndAmbiguousHeaders() throws {
        let header = ReconciliationTests.header.replacingOccurrences(of: "\n", with: "")
        try ws.write("inbox/orders/mac.csv", header + "\r" + "o1,a1,G1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\r"
            + "o2,a2,G2,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,\"two\rlines\",\r\r"
            + "o3,a3,G3,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\r\n"
            + "o4,a4,G4,\"coins,1,100,2026-10-05T10:01:00Z,production,USA,,\r"
            + "o5,a5,G5,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,")
        try ws.write("inbox/orders/twice.csv", header + ",quantity\n" + "o9,a9,G9,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,,5\n")
        // Two columns of a name the reader does not use (notes) are no ambiguity.
        try ws.write("inbox/orders/notes.csv", header + ",notes,notes\n" + "o10,a10,G10,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,,a,b\n")
        try ws.run("2026-11-03")
        let mac = try records("inbox/orders/mac.csv")
        XCTAssertEqual(mac.map(\.line), [2, 3, 6, 7, 8], "\(mac)")
        XCTAssertEqual(mac.map(\.outcome), ["verified", "verified", "verified", "rejected", "verified"], "\(mac)")
        let orders = try ledger().read { try $0.rawRows("SELECT order_id, ifnull(app_account_token, '') FROM order_version ORDER BY id") }
        XCTAssertEqual(orders.map { $0[0] }, ["o1", "o2", "o3", "o5", "o10"])
        XCTAssertEqual(orders.first { $0[0] == "o2" }?[1], "two\rlines")
        let twice = try records("inbox/orders/twice.csv")
        XCTAssertEqual(twice.map(\.code), ["BAD_CSV"])
        XCTAssertTrue(twice.first?.reason.contains("names column quantity twice (columns 5 and 12)") ?? false, "\(twice)")
        XCTAssertEqual(try records("inbox/orders/notes.csv").map(\.outcome), ["verified"])
        // The file sent again, corrected, under its name: its BAD_CSV is resolved.
        try ws.write("inbox/orders/twice.csv", header + "\n" + "o9,a9,G9,coins.100,5,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-04")
        XCTAssertFalse(try ledger().read { try $0.recordProblems() }.contains { $0.path == "inbox/orders/twice.csv" && !$0.resolved })
    }

    /// A backend sending an orders file again under another name: its rows are versions the
    /// orders already have. Stored as new versions they brought back what a later version had
    /// replaced (a reversal undone, a false REFUNDED_STILL_CREDITED opened); they are kept as
    /// records and make no version now. A row that changed is a new version as before.
    func testAnOrdersFileSentAgainUnderAnotherNameAddsNoVersions() throws {
        let credited = "ord-1,a1,RS1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
        try ws.write("inbox/receipts/r.jsonl", good("RS1") + "\n")
        try ws.write("inbox/orders/a.csv", ReconciliationTests.header + credited)
        try ws.run("2026-10-06")
        try ws.write("inbox/orders/b.csv", ReconciliationTests.header + "ord-1,a1,RS1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,2026-10-07T09:00:00Z\n")
        try ws.run("2026-10-08")
        let exceptionsBefore = try ledger().read { try $0.rawRows("SELECT category, ifnull(resolved_on, '') FROM exception ORDER BY id") }
        try ws.write("inbox/orders/a-resent.csv", ReconciliationTests.header + credited)
        let resent = try ws.run("2026-10-09")
        XCTAssertEqual(resent.counts.verified, 1, "the row is read and kept as a record")
        let versions = try ledger().read { try $0.rawRows("SELECT ifnull(reversed_at, '') FROM order_version WHERE order_id = 'ord-1' ORDER BY id") }
        XCTAssertEqual(versions.map { $0[0] }, ["", "2026-10-07T09:00:00Z"])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT category, ifnull(resolved_on, '') FROM exception ORDER BY id") }, exceptionsBefore)
        // A changed row is a new version.
        try ws.write("inbox/orders/c.csv", ReconciliationTests.header + "ord-1,a1,RS1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,2026-10-09T09:00:00Z\n")
        try ws.run("2026-10-10")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM order_version WHERE order_id = 'ord-1'") }, [["3"]])
    }

    /// In a new file, the later row of an order replaces the earlier even when its bytes are
    /// those of an older version (reconciliation.md): a correction undone reopens its exception,
    /// and the fix that follows resolves it. A row repeating the latest version changes nothing.
    func testAnOrderBroughtBackToAnEarlierVersionIsANewVersion() throws {
        func row(_ units: Int) -> String { "R1,a1,RB1,coins.100,1,\(units),2026-10-05T10:01:00Z,production,USA,,\n" }
        func units() throws -> [[String]] {
            try ledger().read { try $0.rawRows("SELECT category, ifnull(resolved_on, '') FROM exception WHERE category = 'UNITS_MISMATCH' ORDER BY id") }
        }
        let other = "R2,a2,RB2,coins.100,1,100,2026-10-05T10:02:00Z,production,USA,,\n"
        try ws.write("inbox/receipts/r.jsonl", good("RB1") + "\n" + good("RB2") + "\n")
        try ws.write("inbox/orders/o1.csv", ReconciliationTests.header + row(90) + other)
        try ws.run("2026-10-06")
        XCTAssertEqual(try units(), [["UNITS_MISMATCH", ""]])
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + row(100))
        try ws.run("2026-10-07")
        XCTAssertEqual(try units(), [["UNITS_MISMATCH", "2026-10-07"]])
        // Back to 90 (o1's bytes, in a file of its own): the mismatch is found again.
        try ws.write("inbox/orders/o3.csv", ReconciliationTests.header + row(90) + row(90))
        try ws.run("2026-10-08")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT credited_units FROM order_version WHERE order_id = 'R1' ORDER BY id") },
                       [["90"], ["100"], ["90"]], "the repeated row of o3 makes no fourth version")
        XCTAssertEqual(try units(), [["UNITS_MISMATCH", ""]])
        // And fixed again with o2's row (and R2's latest again, no new version of it): resolved.
        try ws.write("inbox/orders/o4.csv", ReconciliationTests.header + row(100) + other)
        try ws.run("2026-10-09")
        XCTAssertEqual(try units(), [["UNITS_MISMATCH", "2026-10-09"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT order_id, count(*) FROM order_version GROUP BY 1 ORDER BY 1") }, [["R1", "4"], ["R2", "1"]])
        // A file sent again whole under another name (o1's bytes: 90 units) is no new version.
        try ws.write("inbox/orders/o1-again.csv", ReconciliationTests.header + row(90) + other)
        try ws.run("2026-10-10")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM order_version WHERE order_id = 'R1'") }, [["4"]])
        XCTAssertEqual(try units(), [["UNITS_MISMATCH", "2026-10-09"]])
        // `trace` says why its line made none (it did not name the line at all).
        let trace = try XCTUnwrap(try ledger().read { try $0.traceOrder("R1", asOf: nil) })
        XCTAssertEqual(trace.lines_not_taken.map { "\($0.path):\($0.line) \($0.outcome)" }, ["inbox/orders/o1-again.csv:2 verified"])
        XCTAssertTrue(trace.lines_not_taken.first?.reason.hasPrefix("a file sent again (the same bytes as inbox/orders/o1.csv, read before): its lines make no new version") == true, "\(trace.lines_not_taken)")
        XCTAssertFalse(TraceOutput.text(trace).contains("still open"), TraceOutput.text(trace))
    }

    /// `trace` of a transaction shows every version of the orders that named it, numbered as the
    /// order's own, a later one that moved the credit to another transaction included.
    func testTraceOfATransactionShowsTheVersionThatMovedItsCreditAway() throws {
        try ws.write("inbox/receipts/r.jsonl", good("MV1") + "\n" + good("MV2") + "\n")
        try ws.write("inbox/orders/o1.csv", ReconciliationTests.header + "M1,a1,MV1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-06")
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "M1,a1,MV2,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        let t = try XCTUnwrap(ledger().read { try $0.traceTransaction("MV1", asOf: nil) })
        XCTAssertEqual(t.orders.map { "\($0.order_id) v\($0.version) \($0.transaction_id ?? "")" }, ["M1 v1 MV1", "M1 v2 MV2"])
        let text = TraceOutput.text(t)
        XCTAssertTrue(text.contains("M1 v2 inbox/orders/o2.csv:2: account a1, names transaction MV2, not this one"), text)
        XCTAssertTrue(text.contains("NOT_CREDITED open"), text)
        // The order's trace says which transaction each of its exceptions is about.
        try ws.write("inbox/orders/o3.csv", ReconciliationTests.header + "M1,a1,MV2,coins.100,1,90,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-08")
        let order = TraceOutput.text(try XCTUnwrap(ledger().read { try $0.traceOrder("M1", asOf: nil) }))
        XCTAssertTrue(order.contains("UNITS_MISMATCH open, transaction MV2, first seen 2026-10-08, last seen 2026-10-08"), order)
    }

    /// `credited_at` and `reversed_at` in every ISO 8601 form backends write: the basic format,
    /// no seconds, a comma before the fraction, `z`, an offset without its colon (`strftime`'s
    /// `%z`, Java, PHP) or in hours alone. Each of these was refused (`BAD_ORDER`), and its
    /// transaction reported NOT_CREDITED; what is not a timestamp still is.
    func testOrderTimestampsInEveryISO8601Form() {
        let utc = Receipt.ms("2026-11-09T10:01:00Z")
        for text in ["2026-11-09T10:01:00Z", "2026-11-09T10:01Z", "20261109T100100Z", "20261109T1001Z", "2026-11-09t10:01:00z",
                     "2026-11-09T15:31:00+0530", "2026-11-09T15:31:00+05:30", "2026-11-09T15:31+0530", "20261109T153100+0530",
                     "2026-11-09T12:01:00+02", "2026-11-09T05:01:00-05:00", "2026-11-09T05:01:00-0500", "2026-11-09 10:01:00",
                     "2026-11-09T10:01"] {
            XCTAssertEqual(ISOTimestamp.milliseconds(text), utc, text)
        }
        XCTAssertEqual(ISOTimestamp.milliseconds("2026-11-09T10:01:00,25Z"), utc + 250)
        XCTAssertEqual(ISOTimestamp.milliseconds("20261109T100100.5+0000"), utc + 500)
        XCTAssertEqual(ISOTimestamp.milliseconds("2026-11-09"), Receipt.ms("2026-11-09T00:00:00Z"))
        XCTAssertEqual(ISOTimestamp.milliseconds("20261109"), Receipt.ms("2026-11-09T00:00:00Z"))
        for text in ["2026-02-30T10:00:00Z", "2026-11-09T24:00:00Z", "2026-11-09T10:60Z", "2026-11-09T10:01:00+24:00", "2026-11-09T10:01:00+05:3",
                     "2026-11-09T10", "2026-11-09T10:01:00Zjunk", "2026-11-09T100100Z", "20261109T10:01:00Z", "2026-1109T10:01Z",
                     "2026-11-09T10:01:00.Z", "2026-11-09T10:01:00 Z", "yesterday", "", "2026-11-09X10:01:00Z", "-026-11-09T10:01:00Z",
                     "2026-11-09T10:01.5Z", "20261109T1001,5Z", "20261131", "2026110"] {
            XCTAssertNil(ISOTimestamp.milliseconds(text), text)
        }
    }

    func testFractionsOfASecondOfAnyLength() {
        XCTAssertEqual(ISOTimestamp.milliseconds("2026-10-05T10:01:00.1Z"), Receipt.ms("2026-10-05T10:01:00Z") + 100)
        XCTAssertEqual(ISOTimestamp.milliseconds("2026-10-05T10:01:00.123456Z"), Receipt.ms("2026-10-05T10:01:00Z") + 123)
        XCTAssertEqual(ISOTimestamp.milliseconds("2026-10-05T10:01:00.1234567890123+01:00"), Receipt.ms("2026-10-05T09:01:00Z") + 123)
        XCTAssertNil(LegacyReceiptParser.parseAppleDate("99999999999999-01-01 00:00:00 Etc/GMT"))
        XCTAssertNil(LegacyReceiptParser.parseAppleDate("9223372036854775807-01-01 00:00:00 Etc/GMT"))
        XCTAssertEqual(LegacyReceiptParser.parseAppleDate("2026-10-05 10:01:00 Etc/GMT"), Receipt.ms("2026-10-05T10:01:00Z"))
    }

    /// A storefront written in lower case by the backend (`deu`) was stored as written, and the
    /// sale it names found no storefront rule: ISO codes are read in upper case.
    func testALowerCaseStorefrontInAnOrderIsReadInUpperCase() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("7201", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-72,acct-7,7201,coins.100,1,100,2026-10-05T10:01:00Z,production,deu,,\n")
        try ws.run("2026-10-06")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT storefront FROM order_version") }, [["DEU"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT storefront, currency FROM entry WHERE transaction_id = '7201'") }, [["DEU", "EUR"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM finding") }, [["0"]])
    }

    /// An order stored in lower case by an earlier version (before orders were read in upper
    /// case) still names its storefront: its sale, waiting for a rule then, is booked in DEU.
    /// Files read while they were being written (copied, appended): the last line, with no line
    /// end after it, cut short, is TRUNCATED (not MALFORMED or BAD_ORDER); an order id before the
    /// cut names its order. The next night, the files whole, both are resolved. A line cut
    /// inside its order id names no order (the id itself may be cut).
    func testLinesCutShortByAFileStillBeingWrittenAreResolvedWhenReadWhole() throws {
        let r1 = Receipt.response([Receipt.item("7301", purchased: "2026-11-05T10:00:00Z")])
        let r2 = Receipt.response([Receipt.item("7302", purchased: "2026-11-05T10:00:00Z")])
        let o1 = "ord-81,acct-8,7301,coins.100,1,100,2026-11-05T10:01:00Z,production,USA,,", o2 = "ord-82,acct-8,7302,coins.100,1,100,2026-11-05T10:02:00Z,production,USA,,"
        try ws.write("inbox/receipts/r.jsonl", r1 + "\n" + String(r2.prefix(40)))
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + o1 + "\n" + String(o2.prefix(30)))
        try ws.write("inbox/orders/p.csv", ReconciliationTests.header + "ord-8")
        try ws.run("2026-11-06")
        let open = try ledger().read { try $0.rawRows("""
            SELECT f.path, r.line, r.reason_code, ifnull(r.order_id, '-') FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome = 'rejected' AND r.resolved_run_id IS NULL ORDER BY f.path
            """) }
        XCTAssertEqual(open, [["inbox/orders/o.csv", "3", "TRUNCATED", "ord-82"], ["inbox/orders/p.csv", "2", "TRUNCATED", "-"],
                              ["inbox/receipts/r.jsonl", "2", "TRUNCATED", "-"]])
        XCTAssertTrue(try records("inbox/receipts/r.jsonl").last?.reason.hasPrefix("cut short: the file ends inside this line, with no line end after it (it was still being written when read)") ?? false)
        // Whole, the next night (without a line end after the last line: read as any other).
        try ws.write("inbox/receipts/r.jsonl", r1 + "\n" + r2)
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + o1 + "\n" + o2 + "\n")
        XCTAssertEqual(try ws.run("2026-11-07").recordsSettled, 2, "the summary counts what the night's data settled")
        XCTAssertEqual(try ledger().read { try $0.rawRows("""
            SELECT f.path, r.resolved_note FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.reason_code = 'TRUNCATED' AND r.resolved_run_id IS NOT NULL ORDER BY f.path
            """) }, [["inbox/orders/o.csv", "order ord-82 read again from inbox/orders/o.csv:3"],
                     ["inbox/receipts/r.jsonl", "line 2: its record is whole at line 2 of a later version of inbox/receipts/r.jsonl"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM entry") }, [["2"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)

        // A file cut in place, then put back as it was read before (skipped as read): resolved.
        let whole = try String(contentsOf: ws.root.appendingPathComponent("inbox/orders/o.csv"), encoding: .utf8)
        try ws.write("inbox/orders/o.csv", String(whole.dropLast(20)))
        try ws.run("2026-11-08")
        XCTAssertEqual(try records("inbox/orders/o.csv").filter { $0.code == "TRUNCATED" }.count, 2)
        try ws.write("inbox/orders/o.csv", whole)
        try ws.run("2026-11-09")
        XCTAssertEqual(try ledger().read { try $0.rawRows("""
            SELECT f.path FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.reason_code = 'TRUNCATED' AND r.resolved_run_id IS NULL
            """) }, [["inbox/orders/p.csv"]], "p.csv was never sent whole")
        // A whole last line with a bad value, or JSON wrong before its end, is refused for what it
        // says, line end or not.
        try ws.write("inbox/orders/q.csv", ReconciliationTests.header + "ord-83,acct-8,7303,coins.100,abc,100,2026-11-05T10:01:00Z,production,USA,,")
        try ws.write("inbox/receipts/s.jsonl", "{\"status\": 0, ]")
        try ws.run("2026-11-10")
        XCTAssertEqual(try records("inbox/orders/q.csv").map(\.code), ["BAD_ORDER"])
        XCTAssertEqual(try records("inbox/receipts/s.jsonl").map(\.code), ["MALFORMED"])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// Lines that stay broken stay open when their file grows, whatever else the file gains:
    /// a line that is not UTF-8 (it was settled as if the whole file had been refused); a line
    /// cut short that the file then ends as it was, with a line end or more records after it
    /// (settled by line number alone, with nothing open for it: now read again, rejected for
    /// what it is); and a cut line where the next batch, written to the same path, holds another
    /// record (settled by that record, its transaction never accounted for).
    func testBrokenLinesStayOpenWhenTheirFileGrows() throws {
        let good = { (id: String) in Receipt.response([Receipt.item(id, purchased: "2026-11-05T10:00:00Z")]) }
        // Not UTF-8 mid-line, then a record appended.
        var bad = Data((good("7401") + "\n").utf8)
        bad.append(Data("{\"status\": 0, \"x\": \"".utf8) + Data([0xFF]) + Data("\"}\n".utf8))
        try ws.writeData("inbox/receipts/u.jsonl", bad)
        // Cut short, then ended as it was, a record after it.
        let cut = String(good("7412").prefix(60))
        try ws.write("inbox/receipts/c.jsonl", good("7411") + "\n" + cut)
        // Cut short, then ended as it was with a line end alone.
        try ws.write("inbox/receipts/e.jsonl", good("7421") + "\n" + String(good("7422").prefix(50)))
        // Cut short past its transaction id, then the path reused for the next batch (a cut
        // before anything that tells the records apart is settled by any: it held nothing more).
        let other = good("7432"), idEnd = other.range(of: "7432")!.upperBound
        try ws.write("inbox/receipts/b.jsonl", good("7431") + "\n" + String(other[..<idEnd]))
        try ws.run("2026-11-06")
        XCTAssertEqual(try openRecords(), [["inbox/receipts/b.jsonl", "2", "TRUNCATED"], ["inbox/receipts/c.jsonl", "2", "TRUNCATED"],
                                    ["inbox/receipts/e.jsonl", "2", "TRUNCATED"], ["inbox/receipts/u.jsonl", "2", "INVALID_UTF8"]])

        bad.append(Data((good("7402") + "\n").utf8))
        try ws.writeData("inbox/receipts/u.jsonl", bad)
        try ws.write("inbox/receipts/c.jsonl", good("7411") + "\n" + cut + "\n" + good("7413") + "\n")
        try ws.write("inbox/receipts/e.jsonl", good("7421") + "\n" + String(good("7422").prefix(50)) + "\n")
        try ws.write("inbox/receipts/b.jsonl", good("7433") + "\n" + good("7434") + "\n")
        let night = try ws.run("2026-11-07")
        XCTAssertEqual(try openRecords(), [["inbox/receipts/b.jsonl", "2", "TRUNCATED"], ["inbox/receipts/c.jsonl", "2", "MALFORMED"],
                                    ["inbox/receipts/e.jsonl", "2", "MALFORMED"], ["inbox/receipts/u.jsonl", "2", "INVALID_UTF8"]],
                       "the lines that end now as they were are read again, refused for what they are; the others stay as they were")
        XCTAssertEqual(night.recordsSettled, 2, "the two cut lines, by the records they are now")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT transaction_id FROM entry ORDER BY transaction_id") }.map { $0[0] },
                       ["7401", "7402", "7411", "7413", "7421", "7431", "7433", "7434"])
        // Nothing more the night after: the lines read again are not read a third time.
        try ws.run("2026-11-08")
        XCTAssertEqual(try openRecords().count, 4)
        XCTAssertEqual(try records("inbox/receipts/c.jsonl").filter { $0.line == 2 }.map(\.code), ["TRUNCATED", "MALFORMED"])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A cut line is settled by its record whole where it stood, or by the same bytes read
    /// again now that they end, wherever the line stands now; once, not every night the file
    /// grows: a line with blanks before its record (compared without them), lines put before
    /// it, and a cut inside a character of more than one byte (a TRUNCATED line, not one that
    /// is no UTF-8, which nothing settled).
    func testCutLinesAreSettledOnceWhereverTheyStandNow() throws {
        let good = { (id: String) in Receipt.response([Receipt.item(id, purchased: "2026-11-05T10:00:00Z")]) }
        func cutAfter(_ id: String, _ text: String) -> String { String(text[..<text.range(of: id)!.upperBound]) }
        let blankCut = " " + cutAfter("7512", good("7512"))
        try ws.write("inbox/receipts/s.jsonl", good("7511") + "\n" + blankCut)
        try ws.write("inbox/receipts/w.jsonl", good("7521") + "\n" + " " + cutAfter("7522", good("7522")))
        let movedCut = cutAfter("7532", good("7532"))
        try ws.write("inbox/receipts/m.jsonl", good("7531") + "\n" + movedCut)
        let accented = good("7542").replacingOccurrences(of: "{\"status\": 0, ", with: "{\"status\": 0, \"note\": \"caf\u{e9}\", ")
        var cutInside = Data((good("7541") + "\n").utf8)
        let bytes = Array(accented.utf8), at = bytes.firstIndex(of: 0xC3)!
        cutInside.append(contentsOf: bytes[...at])
        try ws.writeData("inbox/receipts/u.jsonl", cutInside)
        try ws.run("2026-11-06")
        XCTAssertEqual(try openRecords(), [["inbox/receipts/m.jsonl", "2", "TRUNCATED"], ["inbox/receipts/s.jsonl", "2", "TRUNCATED"],
                                    ["inbox/receipts/u.jsonl", "2", "TRUNCATED"], ["inbox/receipts/w.jsonl", "2", "TRUNCATED"]])
        try ws.write("inbox/receipts/s.jsonl", good("7511") + "\n" + blankCut + "\n" + good("7513") + "\n")
        try ws.write("inbox/receipts/w.jsonl", good("7521") + "\n" + " " + good("7522") + "\n")
        try ws.write("inbox/receipts/m.jsonl", good("7533") + "\n" + good("7534") + "\n" + good("7531") + "\n" + movedCut + "\n")
        try ws.writeData("inbox/receipts/u.jsonl", Data((good("7541") + "\n" + accented + "\n").utf8))
        XCTAssertEqual(try ws.run("2026-11-07").recordsSettled, 4)
        XCTAssertEqual(try openRecords(), [["inbox/receipts/m.jsonl", "4", "MALFORMED"], ["inbox/receipts/s.jsonl", "2", "MALFORMED"]])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT transaction_id FROM entry ORDER BY transaction_id") }.map { $0[0] },
                       ["7511", "7513", "7521", "7522", "7531", "7533", "7534", "7541", "7542"])
        // Grown again: the lines read again are not read a third time.
        try ws.append("inbox/receipts/s.jsonl", good("7514") + "\n")
        try ws.append("inbox/receipts/m.jsonl", good("7535") + "\n")
        XCTAssertEqual(try ws.run("2026-11-08").counts.read, 2)
        XCTAssertEqual(try openRecords(), [["inbox/receipts/m.jsonl", "4", "MALFORMED"], ["inbox/receipts/s.jsonl", "2", "MALFORMED"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    func testAnOrderStoredInLowerCaseBeforeStillNamesItsStorefront() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("7203", purchased: "2026-11-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "ord-73,acct-7,7203,coins.100,1,100,2026-11-05T10:01:00Z,production,DEU,,\n")
        try ws.run("2026-11-06")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT sale_status FROM store_transaction") }, [["pending"]], "no EUR rate for November")
        // (As an earlier version stored it: past the trigger that now keeps versions as read.)
        try ledger().write { w in
            let trigger = try String.fetchOne(w.db, sql: "SELECT sql FROM sqlite_schema WHERE name = 'order_version_no_update'")!
            try w.db.execute(sql: "DROP TRIGGER order_version_no_update; UPDATE order_version SET storefront = 'deu'")
            try w.db.execute(sql: trigger)
        }
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,EUR,1.10\n")
        try ws.run("2026-11-07")
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT storefront, currency FROM entry WHERE transaction_id = '7203'") }, [["DEU", "EUR"]])
    }

    /// The README's required columns: a header without one refuses the file, naming it; one
    /// without an optional column (`credited_units`, default 0 in reconciliation.md) is read.
    func testAnOrdersHeaderMustHoldTheRequiredColumnsOnly() throws {
        try ws.write("inbox/orders/a.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_at,storefront\nord-1,acct,7301,coins.100,1,2026-10-05T10:01:00Z,USA\n")
        try ws.write("inbox/orders/b.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_at,environment\nord-2,acct,7302,coins.100,1,2026-10-05T10:01:00Z,production\n")
        try ws.run("2026-10-06")
        let a = try records("inbox/orders/a.csv")
        XCTAssertEqual(a.map(\.code), ["BAD_CSV"])
        XCTAssertTrue(a.first?.reason.hasPrefix("header lacks column(s) environment") ?? false, "the path is the record's, not said again: \(a)")
        XCTAssertEqual(try records("inbox/orders/b.csv").map(\.outcome), ["verified"])
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT order_id, credited_units FROM order_version") }, [["ord-2", "0"]])
    }

    /// The rule CSVs are the operator's own files: a broken quote there still stops the run,
    /// naming file and line (only inputs are read row by row).
    func testABrokenRulesFileStillStopsTheRun() throws {
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\n\"coins.1,USA,1.00,2020-01-01\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) { XCTAssertTrue("\($0)".contains("prices.csv"), "\($0)") }
    }

    /// An FX rate past what an exact decimal here holds (19 decimals) stops the run saying what
    /// a rate may be; 18 decimals are read exactly.
    func testAnFXRateWithTooManyDecimalsSaysWhatARateMayBe() throws {
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,EUR,0.3050000000000000001\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) {
            XCTAssertTrue("\($0)".contains("fx.csv:8: rate \"0.3050000000000000001\" is not a positive decimal of digits and one point, with at most 18 decimals"), "\($0)")
        }
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,EUR,0.305000000000000001\n")
        XCTAssertNoThrow(try ws.run("2026-11-03"))
    }

    /// A price of 0 in the list made every sale of the product a "free trial", with no entry
    /// and no finding: it is an error in the rules, naming file and line.
    func testAPriceOfZeroInTheRulesStopsTheRun() throws {
        for zero in ["0", "0.00"] {
            try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.550,USA,\(zero),2026-10-15\n")
            XCTAssertThrowsError(try ws.run("2026-11-03")) {
                XCTAssertTrue("\($0)".contains("prices.csv") && "\($0)".contains("price 0 for coins.550, a consumable product: only a non-consumable may be priced 0"), "\($0)")
            }
        }
        // A non-consumable at Apple's free tier (a free time-limited trial of it) may be; trace
        // says the rules made it free (it called it a free trial or a family member's access).
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts + "\nunlock.trial,non_consumable,0\n")
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\nunlock.trial,USA,0,2020-01-01\n")
        let family = Receipt.item("FT3", purchased: "2026-10-20T10:00:00Z").replacingOccurrences(of: "{", with: "{\"in_app_ownership_type\": \"FAMILY_SHARED\", ")
        try ws.write("inbox/receipts/free.jsonl", Receipt.response([Receipt.item("FT1", product: "unlock.trial", purchased: "2026-10-20T10:00:00Z"),
                                                                   Receipt.item("FT2", purchased: "2026-10-20T10:00:00Z", trial: true), family]) + "\n")
        XCTAssertNoThrow(try ws.run("2026-11-03"))
        let tier = TraceOutput.text(try XCTUnwrap(ledger().read { try $0.traceTransaction("FT1", asOf: nil) }))
        XCTAssertTrue(tier.contains("Transaction FT1: free in the production book (rules/prices.csv priced it 0 on its purchase date (a non-consumable's free tier): no money moved, so no entry)"), tier)
        let trial = TraceOutput.text(try XCTUnwrap(ledger().read { try $0.traceTransaction("FT2", asOf: nil) }))
        XCTAssertTrue(trial.contains("Transaction FT2: free in the production book (a free trial or introductory period, or a family member's shared access: no money moved"), trial)
        // Which of the two, from the record that made it free (the trace could not tell them apart).
        func kind(_ id: String) throws -> String? {
            try ledger().read { r in try TraceOutput.withFreeKind(try XCTUnwrap(try r.traceTransaction(id, asOf: nil)), reader: r).free_because }
        }
        XCTAssertEqual(try kind("FT2"), "a free trial (is_trial_period true in inbox/receipts/free.jsonl:1)")
        XCTAssertEqual(try kind("FT3"), "a family member's shared access (in_app_ownership_type FAMILY_SHARED in inbox/receipts/free.jsonl:1)")
        XCTAssertEqual(try kind("FT1"), "rules/prices.csv priced it 0 on its purchase date (a non-consumable's free tier)")
    }

    /// A price with more decimals than its storefront's currency has surfaced only as a
    /// MISSING_RULE of each sale: it stops the run at rules load, naming file and line. A
    /// storefront that changes currency is checked by the row in force while the price is.
    func testAPriceWithMoreDecimalsThanItsCurrencyStopsTheRun() throws {
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.100,USA,0.999,2026-01-01\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) {
            XCTAssertTrue("\($0)".contains("prices.csv:9: price 0.999 for coins.100 in USA has more decimals than USD allows (2;"), "\($0)")
        }
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.550,JPN,600.5,2026-01-01\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) {
            XCTAssertTrue("\($0)".contains("prices.csv:9: price 600.5 for coins.550 in JPN has more decimals than JPY allows (0;"), "\($0)")
        }
        // KWT moves to USD in 2026-06: KWT's 0.300 (KWD) is in force then too, and refused ...
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\n")
        try ws.write("rules/storefronts.csv", TestWorkspace.defaultStorefronts + "\nKWT,USD,0,true,2026-06-01\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) {
            XCTAssertTrue("\($0)".contains("prices.csv:5: price 0.300 for coins.100 in KWT has more decimals than USD allows (2; the storefront's currency from 2026-06-01"), "\($0)")
        }
        // ... and accepted once a USD price replaces it from that day.
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.100,KWT,0.99,2026-06-01\n")
        XCTAssertNoThrow(try ws.run("2026-11-03"))
    }

    /// A rules maintainer's typos that used to be read without a word: a price for a product
    /// or a storefront the other files have no row for (`coins.10O` left the old price in
    /// force), a storefront code not written as Apple writes them (`swe`, `SE`: the sales of
    /// SWE waited for a rule). Each stops the run naming file and line, the ledger as it was.
    func testRulesTyposInCodesAndReferencesStopTheRun() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-11-02")
        let ledgerURL = ws.root.appendingPathComponent("ledger.sqlite")
        let before = try Data(contentsOf: ledgerURL)
        let cases: [(file: String, text: String, says: String)] = [
            ("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.10O,USA,1.09,2026-11-01\n",
             "prices.csv:9: product coins.10O has no row in"),
            ("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.100,SWE,11.00,2026-11-01\n",
             "prices.csv:9: storefront SWE has no row in"),
            ("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.100,USAA,1.09,2026-11-01\n",
             "prices.csv:9: storefront \"USAA\" is not a storefront code: three capital letters, as Apple writes them (ISO 3166-1 alpha-3, such as SWE)"),
            ("rules/storefronts.csv", TestWorkspace.defaultStorefronts + "\nswe,SEK,0.25,true,2026-01-01\n",
             "storefronts.csv:6: storefront \"swe\" is not a storefront code: three capital letters, as Apple writes them (ISO 3166-1 alpha-3: SWE)"),
            ("rules/storefronts.csv", TestWorkspace.defaultStorefronts + "\nSE,SEK,0.25,true,2026-01-01\n",
             "storefronts.csv:6: storefront \"SE\" is not a storefront code"),
            ("rules/storefronts.csv", TestWorkspace.defaultStorefronts + "\nSWE,SEK,0.2500000000000000000,true,2026-01-01\n",
             "storefronts.csv:6: tax_rate \"0.2500000000000000000\" is not a decimal from 0 to below 1 of digits and one point, with at most 18 decimals"),
            ("rules/storefronts.csv", TestWorkspace.defaultStorefronts + "\nSWE,SEK,0.25,maybe,2026-01-01\n",
             "storefronts.csv:6: tax_included \"maybe\" must be true or false"),
            ("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.100,USA,10.0000000000000000000,2026-11-01\n",
             "prices.csv:9: price \"10.0000000000000000000\" is not a decimal >= 0 of digits and one point, with at most 18 decimals"),
            ("rules/prices.csv", TestWorkspace.defaultPrices + "\ncoins.100,USA,12345678901234567,2026-11-01\n",
             "prices.csv:9: price 12345678901234567 is more than 10000000000, the most a price may be"),
            // A decimal comma splits a value in two: read by column, the rate was 1 and the
            // rest dropped (and a price in the last column the same), the night posting by it.
            ("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,EUR,1,0823\n",
             "fx.csv:8: has 4 fields, the header has 3 (a decimal comma? decimals are written with a point, 1.0823; a value holding a comma is quoted)"),
            ("rules/prices.csv", "product_id,storefront,effective_from,price\ncoins.100,USA,2020-01-01,0.99\ncoins.100,DEU,2020-01-01,1,09\n",
             "prices.csv:3: has 5 fields, the header has 4 (a decimal comma?"),
            ("rules/products.csv", TestWorkspace.defaultProducts + "\ncoins.1000,consumable,1,000\n",
             "products.csv:5: has 4 fields, the header has 3"),
            // A row short of a value is refused for the value it lacks.
            ("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,1.0823\n",
             "fx.csv:8: currency \"1.0823\" is not a known ISO 4217 code"),
        ]
        for c in cases {
            let good = try String(contentsOf: ws.root.appendingPathComponent(c.file), encoding: .utf8)
            try ws.write(c.file, c.text)
            XCTAssertThrowsError(try ws.run("2026-11-03"), c.says) { XCTAssertTrue("\($0)".contains(c.says), "\($0)") }
            XCTAssertEqual(try Data(contentsOf: ledgerURL), before, c.says)
            try ws.write(c.file, good)
        }
        // The copies earlier runs kept are read as those nights read them (verify reads them back).
        var files: [String: [UInt8]] = [:]
        for (name, text) in [("storefronts.csv", TestWorkspace.defaultStorefronts + "\nswe,SEK,0.25,true,2026-01-01\n"),
                             ("prices.csv", TestWorkspace.defaultPrices + "\ncoins.10O,USA,1.09,2026-11-01\n"),
                             ("products.csv", TestWorkspace.defaultProducts), ("fx.csv", TestWorkspace.defaultFX)] {
            files[name] = Array(text.utf8)
        }
        XCTAssertThrowsError(try RulesReader.parse(files: files))
        XCTAssertNoThrow(try RulesReader.parse(files: files, checkCodes: false))
        // A decimal comma an earlier night read (the rate as 1): its kept copy is read as that
        // night read it (verify compares its sales with it), today's file is refused.
        var comma = files
        comma["storefronts.csv"] = Array(TestWorkspace.defaultStorefronts.utf8)
        comma["prices.csv"] = Array(TestWorkspace.defaultPrices.utf8)
        comma["fx.csv"] = Array((TestWorkspace.defaultFX + "\n2026-11,EUR,1,0823\n").utf8)
        XCTAssertThrowsError(try RulesReader.parse(files: comma))
        XCTAssertEqual(try RulesReader.parse(files: comma, checkCodes: false).fx["EUR"]?[Month(iso: "2026-11")!]?.description, "1")
        // Empty fields past the header's last column (a spreadsheet's trailing commas) are read.
        comma["fx.csv"] = Array((TestWorkspace.defaultFX.replacingOccurrences(of: "\n", with: ",\n") + ",,\n").utf8)
        XCTAssertNoThrow(try RulesReader.parse(files: comma))
        // ... a price above today's bound, and a product whose id starts with # (no comment then).
        var older = files
        older["prices.csv"] = Array((TestWorkspace.defaultPrices + "\n#vip,USA,20000000000,2026-11-01\n").utf8)
        older["products.csv"] = Array((TestWorkspace.defaultProducts + "\n#vip,consumable,1\n").utf8)
        XCTAssertEqual(try RulesReader.parse(files: older, checkCodes: false).price(product: "#vip", storefront: "USA", on: Day(iso: "2026-11-02")!)?.price.description,
                       "20000000000")
        // Comment lines (# first) are read as blank, and the lines after them keep their numbers.
        try ws.write("rules/prices.csv", "# prices, \"as sold\"\n  # indented too\n" + TestWorkspace.defaultPrices + "\n# the new ones\ncoins.10O,USA,1.09,2026-11-01\n")
        XCTAssertThrowsError(try ws.run("2026-11-03")) { XCTAssertTrue("\($0)".contains("prices.csv:12: product coins.10O has no row in"), "\($0)") }
        // With Windows line ends (a file saved by Excel or Notepad) the same.
        try ws.write("rules/prices.csv", ("# prices, \"as sold\"\n" + TestWorkspace.defaultPrices + "\n# the new ones\ncoins.10O,USA,1.09,2026-11-01\n")
                        .replacingOccurrences(of: "\n", with: "\r\n"))
        XCTAssertThrowsError(try ws.run("2026-11-03")) { XCTAssertTrue("\($0)".contains("prices.csv:11: product coins.10O has no row in"), "\($0)") }
        XCTAssertEqual(RulesReader.withoutComments("# a\r\nx,y\r\n  # b\r\nz\r\n"), "\r\nx,y\r\n\r\nz\r\n")
        try ws.write("rules/prices.csv", ("# prices\n" + TestWorkspace.defaultPrices + "\n").replacingOccurrences(of: "\n", with: "\r\n"))
        // Fixed, the night runs.
        XCTAssertNoThrow(try ws.run("2026-11-03"))
    }

    /// Signed data with absurd values (signed with Apple's test keys, trusted via trusted_roots):
    /// a price of Int64.max in KWD overflowed the reporting amount; now each is a finding.
    func testHostileSignedTransactions() throws {
        ws.remove()
        ws = try TestWorkspace(
            config: SignedIngestTests.config(trusted: true),
            storefronts: "storefront,currency,tax_rate,tax_included,effective_from\nUSA,USD,0,false,2020-01-01\nKWT,KWD,0,true,2020-01-01\n",
            prices: "product_id,storefront,price,effective_from\ncom.example.product,USA,1.99,2020-01-01\n",
            products: "product_id,type,units\ncom.example.product,consumable,100\ncom.example.sub,auto_renewable,0\n",
            fx: "month,currency,rate\n2023-11,KWD,3.25\n2023-10,KWD,3.25\n")
        try ws.write("certs/testCA.pem", try TestSigner.appleFixtureText("java/certs/testCA.pem"))
        let signer = try TestSigner.appleTest()
        let t0 = TestSigner.defaultSignedDateMs
        func tx(_ id: String, price: Int64? = 1990, currency: String = "USD", storefront: String = "USA", quantity: Int64? = 1,
                purchase: Int64? = nil, expires: Int64? = nil, product: String = "com.example.product", original: String? = nil,
                extra: [String: Any] = [:]) throws -> String {
            try signer.sign(payload: TestSigner.transactionPayload(
                transactionId: id, originalTransactionId: original, productId: product, purchaseDateMs: purchase ?? t0 - 86_400_000,
                expiresDateMs: expires, quantity: quantity, storefront: storefront, priceMilliunits: price, currency: currency, extra: extra))
        }
        let cases: [(jws: String, id: String, message: String)] = [
            (try tx("P-MAX", price: Int64.max, currency: "KWD", storefront: "KWT"), "P-MAX", "more than 10000000000000"),
            (try tx("P-NEG", price: -1), "P-NEG", "negative price"),
            (try tx("Q-0", quantity: 0), "Q-0", "quantity 0"),
            (try tx("Q-NEG", quantity: -5), "Q-NEG", "quantity -5"),
            (try tx("D-1970", purchase: 0), "D-1970", "outside 2008-2099"),
            (try tx("D-2100", purchase: 4_102_444_800_000), "D-2100", "outside 2008-2099"),
            (try tx("E-MIN", expires: Int64.min, product: "com.example.sub", original: "E-MIN"), "E-MIN", "expires date"),
            (try tx("R-EARLY", extra: ["revocationDate": t0 - 2 * 86_400_000, "revocationReason": 0]), "R-EARLY", "was refunded before it was bought"),
        ]
        // A payload nested far too deep, and one nested 500 levels (both unsigned garbage).
        let header = TestSigner.base64URL(Data(#"{"alg":"ES256"}"#.utf8))
        let deep = header + "." + TestSigner.base64URL(Data(String(repeating: "[", count: 100_000).utf8)) + ".c2ln"
        let deep500 = header + "." + TestSigner.base64URL(Data((#"{"transactionId":"N","x":"# + String(repeating: "[", count: 500)
            + String(repeating: "]", count: 500) + "}").utf8)) + ".c2ln"
        let lines = [try tx("GOOD-1", price: 9_990_000, currency: "KWD", storefront: "KWT")] + cases.map(\.jws)
            + [deep, deep500, try tx("WRONG-TYPE", extra: ["price": "lots"]), try tx("GOOD-2")]
        try ws.write("inbox/signed/hostile.jws", lines.joined(separator: "\n") + "\n")
        try ws.run("2023-11-20")
        let r = try records("inbox/signed/hostile.jws")
        XCTAssertEqual(r.map(\.line), Array(1...lines.count))
        XCTAssertEqual(r.map(\.outcome), Array(repeating: "verified", count: 1 + cases.count) + ["rejected", "rejected", "rejected", "verified"])
        XCTAssertEqual(r[cases.count + 1].code, "MALFORMED")
        XCTAssertTrue(r[cases.count + 3].reason.contains("field price should be a whole number"), r[cases.count + 3].reason)
        let messages = try findings()
        for (i, c) in cases.enumerated() {
            XCTAssertTrue(messages.contains { $0.hasPrefix("inbox/signed/hostile.jws:\(i + 2): ") && $0.contains(c.message) }, "\(c.id): \(messages)")
        }
        XCTAssertEqual(try saleEntries(), ["GOOD-1", "GOOD-2"])
        // 9990 KWD, tax included at 0: N = 9,990,000 fils; at 3.25 USD per KWD, 32,467.50 USD.
        XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT net_minor, net_reporting_minor FROM entry WHERE transaction_id = 'GOOD-1'") },
                       [["9990000", "3246750"]])
    }

    /// An unsigned JWS carrying Apple's real (public) certificate chain and a signedDate of
    /// Int64.min crashed the certificate library before the signature was ever checked.
    func testAnUnsignedJWSWithAnAbsurdSignedDateIsRejected() throws {
        let chain = try ["real-apple-certs/real-apple-signing-certificate.der.b64", "real-apple-certs/real-apple-intermediate.der.b64",
                         "real-apple-certs/real-apple-root.der.b64"].map { try TestSigner.appleFixtureDERFromBase64($0).base64EncodedString() }
        let header = try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": chain], options: [.sortedKeys])
        func jws(_ signedDate: String) -> String {
            let payload = #"{"transactionId":"U1","bundleId":"com.example.coins","productId":"coins.100","purchaseDate":1791194400000,"environment":"Production","signedDate":"# + signedDate + "}"
            return TestSigner.base64URL(header) + "." + TestSigner.base64URL(Data(payload.utf8)) + "." + TestSigner.base64URL(Data(count: 64))
        }
        try ws.write("inbox/signed/forged.jws", [jws("-9223372036854775808"), jws("9223372036854775807"), jws("1791194400000")].joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/signed/forged.jws")
        XCTAssertEqual(r.map(\.outcome), ["rejected", "rejected", "rejected"])
        XCTAssertEqual(r.map(\.code), ["MALFORMED", "MALFORMED", "BAD_SIGNATURE"], "\(r)")
        XCTAssertTrue(r[0].reason.contains("signedDate -9223372036854775808 is outside 2008-2099"), r[0].reason)
    }

    /// An id ending in a no-break space, an ideographic space or a line separator looks like the
    /// real id and is another transaction: refused, as a zero-width space is, in receipts and in
    /// the backend's orders alike (a hostile-input review: one purchase so posted three sales,
    /// and orders read trimmed credited the real transaction under such an id).
    func testIdentifiersWithSpacesOtherThanThePlainOneAreRefused() throws {
        let lines = ["\\u00a0", "\\u3000", "\\u2028"].map { Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: "\"S1" + $0 + "\"")) }
        try ws.write("inbox/receipts/spaces.jsonl", (lines + [good("S1")]).joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/spaces.csv", ReconciliationTests.header
            + "ord-s1,a1,S1\u{200B},coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
            + "ord-s2\u{00A0},a1,S1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
            + "ord-s3,a1, S1\t,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
            + "ord-s2,a1,S1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["S1"], "one sale, the real id's")
        let messages = try findings()
        for (n, code) in [(1, "00A0"), (2, "3000"), (3, "2028")] {
            XCTAssertTrue(messages.contains { $0.contains("spaces.jsonl:\(n): ") && $0.contains("holds a space other than the plain one, U+\(code), at character 3") }, "line \(n): \(messages)")
        }
        let orders = try records("inbox/orders/spaces.csv")
        XCTAssertEqual(orders.map(\.outcome), ["rejected", "rejected", "verified", "verified"], "plain spaces and tabs around a field are not part of it")
        // The refused "ord-s2" and a no-break space is no line of ord-s2: a valid ord-s2 line does
        // not settle it (it was filed under the order it imitates, and settled so).
        let open = try ledger().read { try $0.rawRows("SELECT r.line FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/orders/spaces.csv' AND r.outcome = 'rejected' AND r.resolved_run_id IS NULL ORDER BY r.line") }
        XCTAssertEqual(open, [["2"], ["3"]])
        XCTAssertTrue(orders[0].reason.contains("transaction_id \"S1\\u{200B}\" holds a format character (zero-width, joiner, bidi control or byte order mark), U+200B, at character 3"), orders[0].reason)
        XCTAssertTrue(orders[1].reason.contains("order_id \"ord-s2\\u{A0}\" holds a space other than the plain one, U+00A0, at character 7"), orders[1].reason)
        // A ledger an earlier version wrote, which took such ids (here a night run by its rules):
        // verify reads those records as it read them, and says nothing changed (a diff review:
        // every such order version was said "changed after it was read", for ever).
        try ws.write("inbox/orders/earlier.csv", ReconciliationTests.header
            + "ord-e1,acct\u{A0}name,S1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.write("inbox/receipts/earlier.jsonl", Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: "\"E1\\u00a0\"")) + "\n")
        try StoreBounds.withEarlierIdentifierRules { _ = try ws.run("2026-11-04") }
        XCTAssertEqual(try records("inbox/orders/earlier.csv").map(\.outcome), ["verified"])
        XCTAssertTrue(try saleEntries().contains("E1\u{A0}"), "an earlier version took it")
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        // trace shows such an id quoted, as the other lines for people do (it read as "E1 ").
        let trace = try Resilience.cli(["trace", "E1\u{A0}", "--workspace", ws.root.path])
        XCTAssertTrue(trace.out.hasPrefix("Transaction \"E1\\u{A0}\": posted"), trace.out + trace.err)
        // Characters that show as nothing are refused too (a re-check: a Hangul filler after the
        // id posted the same purchase again), and said as such.
        XCTAssertEqual(StoreBounds.implausibleIdentifier("transaction_id", "S1\u{3164}"),
                       "transaction_id \"S1\\u{3164}\" holds a character that shows as nothing (a filler or joiner), U+3164, at character 3")
        // Lines for people show a refused id quoted, never raw (it read as the valid id).
        XCTAssertEqual(StoreBounds.shownIdentifier("S1"), "S1")
        XCTAssertEqual(StoreBounds.shownIdentifier("S1\u{A0}"), "\"S1\\u{A0}\"")
        // A long id is quoted by its start and its length, with its fault.
        XCTAssertEqual(StoreBounds.implausibleIdentifier("product_id", "p" + String(repeating: "x", count: 100) + "\u{0}"),
                       "product_id \"p" + String(repeating: "x", count: 63) + "\"\u{2026} (102 characters in all) holds a control character, U+0000, at character 102")
    }

    /// A `.json` document is parsed whole (three to five times its size in memory): one past its
    /// cap is one FILE_TOO_LARGE record saying to send JSON Lines, and the same records as JSON
    /// Lines are read (a hostile-input review: a 472 MB document took the night to 1.4 GB).
    func testAJSONDocumentPastItsCapIsOneRecordAndJSONLinesAreRead() throws {
        let cap = PreparedFile.maxJSONDocumentBytes
        PreparedFile.maxJSONDocumentBytes = 2_000
        defer { PreparedFile.maxJSONDocumentBytes = cap }
        let responses = (1...10).map { good("J\($0)") }
        try ws.write("inbox/receipts/big.json", "[" + responses.joined(separator: ",\n") + "]\n")
        try ws.write("inbox/receipts/big.jsonl", responses.joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/receipts/big.json")
        XCTAssertEqual(r.map(\.code), ["FILE_TOO_LARGE"])
        XCTAssertTrue(r[0].reason.hasSuffix("bytes, over the 2000-byte limit for a JSON document, which is read whole (send JSON Lines, a record a line, read a line at a time, or split it)"), r[0].reason)
        XCTAssertEqual(try saleEntries(), Set((1...10).map { "J\($0)" }))
    }

    /// A notification body whose signedPayload is no text is said so (a hostile-input review:
    /// `{"signedPayload": 5}` was read as the JWS "5" and refused as "has 1 part").
    func testABodyWhoseSignedPayloadIsNoTextIsSaidSo() throws {
        try ws.write("inbox/signed/bodies.jsonl", [#"{"signedPayload": 5}"#, #"{"signedPayload": true}"#,
                                                   #"{"signedTransactionInfo": {"a": 1}}"#, #"{"signedPayload": null}"#].joined(separator: "\n") + "\n")
        try ws.run("2026-11-03")
        let r = try records("inbox/signed/bodies.jsonl")
        XCTAssertEqual(r.map(\.code), ["MALFORMED", "MALFORMED", "MALFORMED", "MALFORMED"])
        XCTAssertEqual(r.map(\.reason), [
            #"not a notification body {"signedPayload": "..."}: its signedPayload is the number 5, not the signed text (a JWS: three base64url parts joined by dots)"#,
            #"not a notification body {"signedPayload": "..."}: its signedPayload is true, not the signed text (a JWS: three base64url parts joined by dots)"#,
            #"not a notification body {"signedPayload": "..."}: its signedTransactionInfo is an object, not the signed text (a JWS: three base64url parts joined by dots)"#,
            #"not a notification body {"signedPayload": "..."}: its signedPayload is null, not the signed text (a JWS: three base64url parts joined by dots)"#,
        ])
    }

    /// SQLite text ends at a NUL: an id holding control characters would not read back as
    /// itself (the fuzz test found a posted sale whose transaction id came back empty).
    func testIdentifiersWithControlCharactersAreRefused() throws {
        try ws.write("inbox/receipts/ids.jsonl", [
            Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: #""\u0000N1""#)),
            Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: "\"" + String(repeating: "7", count: 300) + "\"")),
            Self.response(items: Self.item("").replacingOccurrences(of: #""coins.100""#, with: #""coins\u0007""#).replacingOccurrences(of: "\"X\"", with: "\"N3\"")),
            good("N4"),
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/ids.csv", ReconciliationTests.header + "ord\u{0}-1,a1,N4,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
            + "ord-2,a2,N4,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["N4"])
        let messages = try findings()
        XCTAssertTrue(messages.contains { $0.contains(":1: ") && $0.contains("holds a control character, U+0000, at character 1") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.contains(":2: ") && $0.contains("is over 256 bytes (300)") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.contains(":3: ") && $0.contains("has product_id") }, "\(messages)")
        let orders = try records("inbox/orders/ids.csv")
        XCTAssertEqual(orders.map(\.outcome), ["rejected", "verified"])
        XCTAssertTrue(orders[0].reason.contains("order_id \"ord\\u{0}-1\" holds a control character, U+0000, at character 4"), orders[0].reason)
    }

    /// U+FFFE and U+FFFF are valid UTF-8 but have no place in XML: one in one cell made the
    /// whole sheet unreadable (openpyxl refused the workbook; Excel offers to repair it). Ids
    /// holding one (or another non-character, or a C1 control) are refused like ids holding
    /// control characters; any other text that reaches a workbook (here a file name, in Run
    /// Info) has them replaced by U+FFFD as it is written.
    /// A scalar Swift refuses to write as a literal (U+FFFE, U+FFFF and the other non-characters).
    func u(_ v: UInt32) -> String { String(Unicode.Scalar(v)!) }

    func testNonCharactersNeverMakeAnUnreadableWorkbook() throws {
        try ws.write("inbox/receipts/nonchars.jsonl", [
            Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: #""N1\uffff""#)),
            Self.response(items: Self.item("").replacingOccurrences(of: #""coins.100""#, with: #""coins\ufffe""#).replacingOccurrences(of: "\"X\"", with: "\"N2\"")),
            Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: #""N3\u0085""#)),
            Self.response(items: Self.item("").replacingOccurrences(of: "\"X\"", with: #""N4\ud83f\udffe""#)),
            good("N5"),
        ].joined(separator: "\n") + "\n")
        let badName = "inbox/orders/orders-" + u(0xFFFE) + ".csv"
        try ws.write(badName, ReconciliationTests.header + "ord-1,a1,N5,coins.100,many,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["N5"])
        let messages = try findings()
        for line in 1...4 {
            XCTAssertTrue(messages.contains { $0.contains(":\(line): ") && $0.contains(line == 3 ? "holds a control character, U+0085" : "holds a non-character") }, "line \(line): \(messages)")
        }
        XCTAssertEqual(try records(badName).map(\.outcome), ["rejected"])

        // Every part of every workbook is well-formed XML, and the file name is in Run Info
        // with U+FFFD in place of U+FFFE.
        let reports = ws.root.appendingPathComponent("reports")
        let books = FileManager.default.enumerator(at: reports, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "xlsx" }
        XCTAssertGreaterThanOrEqual(books.count, 3)
        var sawName = false
        for book in books {
            let archive = try Archive(url: book, accessMode: .read)
            for entry in archive where entry.path.hasSuffix(".xml") {
                var data = Data()
                _ = try archive.extract(entry) { data.append($0) }
                XCTAssertTrue(XMLParser(data: data).parse(), "\(book.lastPathComponent) \(entry.path) is not well-formed XML")
                XCTAssertNil(data.range(of: Data(u(0xFFFE).utf8)), "\(book.lastPathComponent) \(entry.path)")
                if data.range(of: Data("orders-\u{FFFD}.csv".utf8)) != nil { sawName = true }
            }
        }
        XCTAssertTrue(sawName, "the rejected file's name, with U+FFFD, in a workbook")
    }

    func testWorkbookTextAndIdentifierBounds() {
        XCTAssertEqual(XMLText.safe("plain"), "plain")
        XCTAssertEqual(XMLText.safe("caf\u{E9} \u{FFFD} \u{EFBF}"), "caf\u{E9} \u{FFFD} \u{EFBF}")
        XCTAssertEqual(XMLText.safe("a" + u(0xFFFE) + "b" + u(0xFFFF) + "c\u{0}d"), "a\u{FFFD}b\u{FFFD}c\u{FFFD}d")
        XCTAssertEqual(XMLText.safe(u(0xFFFE)), "\u{FFFD}")
        XCTAssertEqual(XMLText.safe(""), "")
        for ok in ["2000000123", "com.example.coins.100", "caf\u{E9}", "\u{65E5}\u{672C}", "\u{FFFD}", "\u{1F600}", "a b"] {
            XCTAssertTrue(StoreBounds.plausibleIdentifier(ok), ok)
        }
        for bad in ["a\u{0}", "a\u{1F}", "a\u{7F}", "a\u{80}", "a\u{9F}", "a" + u(0xFDD0), "a" + u(0xFDEF), "a" + u(0xFFFE), "a" + u(0xFFFF),
                    "a" + u(0x1FFFE), "a" + u(0x10FFFF), "", String(repeating: "7", count: 257),
                    "9920000000000002\u{200B}", "99\u{202E}20", "\u{FEFF}99", "a\u{200D}b", "a\u{2066}b", "a\u{AD}b", "\u{A0}", "99\u{A0}", "99\u{3000}", "9\u{2028}9", " 99",
                    "99\u{3164}", "99\u{115F}", "99\u{34F}", "99\u{17B5}"] {
            XCTAssertFalse(StoreBounds.plausibleIdentifier(bad), String(reflecting: bad))
        }
    }

    /// A reason quotes what it refuses, and a record can hold a value of megabytes: a 100,000
    /// character bundle id made a reason of that length, one line of the run's summary, and a
    /// workbook cell libxlsxwriter refused (over Excel's 32,767), so finance saw a rejected
    /// record with no reason. Reasons are kept to 1,000 characters, saying how long they were;
    /// any cell text over the limit is cut to fit with the same note.
    func testHugeValuesGiveBoundedReasonsAndNoEmptyCells() throws {
        let huge = String(repeating: "x", count: 100_000)
        try ws.write("inbox/receipts/huge.jsonl", [
            Receipt.response([Receipt.item("H1", purchased: "2026-10-05T10:00:00Z")], bundle: "com.evil." + huge),
            Receipt.response([Receipt.item("H2", purchased: "2026-10-05T10:00:00Z")], environment: "P" + huge),
            good("H3"),
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/huge.csv", ReconciliationTests.header
            + "ord-1,a1,H3,coins.100,1,100,2026-10-05T10:01:00Z,production," + String(repeating: "S", count: 300) + ",,\n")
        let result = try ws.run("2026-11-03")
        XCTAssertEqual(try saleEntries(), ["H3"])
        let r = try records("inbox/receipts/huge.jsonl")
        XCTAssertEqual(r.map(\.code), ["WRONG_BUNDLE_ID", "BAD_ENVIRONMENT", ""])
        for rec in r.prefix(2) {
            XCTAssertLessThanOrEqual(rec.reason.count, StoreBounds.maxMessageCharacters)
            XCTAssertTrue(rec.reason.hasSuffix(" characters in all)"), String(rec.reason.suffix(80)))
        }
        XCTAssertTrue(r[0].reason.hasPrefix("receipt of another app: bundle id com.evil.xxx"), String(r[0].reason.prefix(80)))
        XCTAssertTrue(r[0].reason.contains("(cut here: 100"), String(r[0].reason.suffix(80)))
        let orders = try records("inbox/orders/huge.csv")
        XCTAssertEqual(orders.map(\.code), ["BAD_ORDER"])
        XCTAssertTrue(orders[0].reason.contains("storefront \"SSS"), orders[0].reason)
        _ = result

        // The Rejected sheet shows each reason.
        let book = ws.root.appendingPathComponent("reports/2026-11-03/reconciliation-2026-11-03.xlsx")
        let rejected = try XCTUnwrap(try XLSXReader.sheets(book)["Rejected"])
        for line in [1, 2] {
            let row = try XCTUnwrap(rejected.first { $0.first == "inbox/receipts/huge.jsonl:\(line)" }, "line \(line) in Rejected")
            XCTAssertTrue(row.count > 2 && row[2].contains("characters in all"), "line \(line): reason cell \(row.dropFirst(2).first ?? "(none)")")
        }
    }

    /// What reaches a terminal: every control and format character shown as an escape, so a
    /// reason quoting `ESC [2J` cannot clear the run's summary, nor U+202E reorder it.
    func testTerminalTextShowsControlAndFormatCharacters() {
        XCTAssertEqual(TerminalText.visible("plain text\twith a tab"), "plain text\twith a tab")
        XCTAssertEqual(TerminalText.visible("caf\u{E9} \u{65E5}"), "caf\u{E9} \u{65E5}")
        XCTAssertEqual(TerminalText.visible("a\u{1B}[2Jb\nc\rd\u{7F}\u{85}"), #"a\u{1B}[2Jb\u{A}c\u{D}d\u{7F}\u{85}"#)
        XCTAssertEqual(TerminalText.visible("id\u{202E}gnp.exe \u{200B}\u{FEFF}"), #"id\u{202E}gnp.exe \u{200B}\u{FEFF}"#)
    }

    func testCellTextIsCutToWhatACellHolds() {
        let long = String(repeating: "a", count: 40_000)
        let cut = XMLText.safe(long)
        XCTAssertLessThanOrEqual(cut.utf16.count, XMLText.maxCellCharacters)
        XCTAssertTrue(cut.hasPrefix(String(repeating: "a", count: 32_000)))
        XCTAssertTrue(cut.hasSuffix("(cut here: 40000 characters in all; a cell holds 32767)"), String(cut.suffix(80)))
        // Characters of two UTF-16 units each are never split.
        let emoji = String(repeating: "\u{1F600}", count: 20_000)
        let cutEmoji = XMLText.safe(emoji)
        XCTAssertLessThanOrEqual(cutEmoji.utf16.count, XMLText.maxCellCharacters)
        XCTAssertTrue(cutEmoji.hasPrefix(String(repeating: "\u{1F600}", count: 16_000)))
        XCTAssertTrue(cutEmoji.hasSuffix("(cut here: 40000 characters in all; a cell holds 32767)"), "as Excel counts them")
        let fits = String(repeating: "b", count: XMLText.maxCellCharacters)
        XCTAssertEqual(XMLText.safe(fits), fits)
        XCTAssertEqual(StoreBounds.boundedMessage(String(repeating: "c", count: 1_000)), String(repeating: "c", count: 1_000))
        XCTAssertEqual(StoreBounds.boundedMessage(String(repeating: "c", count: 1_001)).count, 1_000 - 60 + "\u{2026} (cut here: 1001 characters in all)".count)
        // One letter and 100,000 combining marks is one Character but 100,001 scalars: cut too.
        let marks = StoreBounds.boundedMessage("a" + String(repeating: "\u{301}", count: 100_000))
        XCTAssertLessThanOrEqual(marks.unicodeScalars.count, StoreBounds.maxMessageCharacters)
        XCTAssertTrue(marks.hasSuffix("(cut here: 100001 characters in all)"))
    }
}
