import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore
@testable import LedgerVerify

/// Every real verifyReceipt response in Fixtures/verifyreceipt lands as the status table of
/// iap-formats.md says, with the right environment and transactions.
final class LegacyReceiptTests: XCTestCase {
    enum Expect { case verified(Book, [String]), pending(String), rejected(String) }

    let table: [(String, Expect)] = [
        ("aporat__inAppPurchaseInvalidReceiptResponse.json", .rejected("STATUS_21002")),
        ("aporat__inAppPurchaseResponse.json", .verified(.sandbox, ["1000000156455961", "1000000156014803", "1000000104232856"])),
        ("nov-itunes-receipt__array_of_latest_receipt_info.json", .verified(.sandbox, ["1000000131413602", "1000000131413546", "1000000131414118"])),
        ("nov-itunes-receipt__autorenew_subscription.json", .verified(.production, ["1000000055076747", "1000000052076747"])),
        ("nov-itunes-receipt__autorenew_subscription_expired.json", .verified(.production, ["1000000055076747", "1000000052076747"])),
        ("nov-itunes-receipt__invalid.json", .rejected("STATUS_21002")),
        ("nov-itunes-receipt__offline.json", .rejected("STATUS_21005")),
        ("nov-itunes-receipt__sandboxed.json", .pending("SANDBOX_RECEIPT_SENT_TO_PRODUCTION")),
        ("nov-itunes-receipt__valid.json", .verified(.production, ["1000000001479608"])),
        ("nov-itunes-receipt__valid_application.json", .verified(.sandbox, ["1000000091176126", "1000000091221097"])),
        ("youknowone-itunes-iap__itunes_autorenew_response2.json", .verified(.sandbox, ["1000000318012065", "1000000318014271", "1000000318015678"])),
        ("youknowone-itunes-iap__itunes_autorenew_response3.json", .verified(.production, ["******************************"])),
        ("youknowone-itunes-iap__itunes_autorenew_response_legacy.json", .verified(.production, ["1000000059630000"])),
    ]
    let counts: [String: Int] = [
        "aporat__inAppPurchaseResponse.json": 4, "nov-itunes-receipt__array_of_latest_receipt_info.json": 5,
        "youknowone-itunes-iap__itunes_autorenew_response2.json": 18,
    ]

    func outcome(_ text: String) throws -> ReceiptOutcome {
        let response = try LegacyReceiptParser.parse(Substring(text))
        return ReceiptVerifier(bundleIds: []).verify(response, location: SourceLocation(path: "f", line: 1))
    }

    func check(_ name: String, _ text: String, _ expect: Expect) throws {
        let got = try outcome(text)
        switch (expect, got) {
        case let (.verified(book, ids), .verified(gotBook, transactions, findings)):
            XCTAssertEqual(gotBook, book, name)
            // (response3 masks its ids; array_of_latest_receipt_info lists a transaction as a
            // free trial in one array and paid in the other, said below.)
            XCTAssertTrue(findings.isEmpty || name.contains("response3") || name.contains("array_of_latest"), "\(name): \(findings)")
            let gotIds = transactions.map(\.transactionId)
            XCTAssertEqual(Array(gotIds.prefix(ids.count)), ids, name)
            XCTAssertEqual(Set(gotIds).count, gotIds.count, "\(name): one transaction per id")
            if let n = counts[name] { XCTAssertEqual(gotIds.count, n, name) }
            for t in transactions {
                XCTAssertGreaterThan(t.quantity, 0)
                XCTAssertGreaterThan(t.purchaseMs, 1_199_145_600_000, "\(name) \(t.transactionId) purchase date")
            }
        case let (.pending(code), .pending(gotCode, _, _)):
            XCTAssertEqual(gotCode, code, name)
        case let (.rejected(code), .rejected(gotCode, reason)):
            XCTAssertEqual(gotCode, code, name)
            XCTAssertFalse(reason.isEmpty)
        default:
            XCTFail("\(name): expected \(expect), got \(got)")
        }
    }

    func testEveryRealResponse() throws {
        let dir = Fixtures.url("verifyreceipt")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
        XCTAssertEqual(files, table.map(\.0).sorted(), "every copied fixture has an expectation")
        for (name, expect) in table {
            try check(name, try Fixtures.text("verifyreceipt/\(name)"), expect)
        }
    }

    /// Apple's sandbox response lists 1000000131413546 as a free trial in latest_receipt_info
    /// and paid in in_app: taken by its first listing, as always (stored records read as
    /// before), and now said (a TRANSACTION_CONFLICT of its record), where it was silent.
    func testTwoListingsThatDisagreeOnTheTrialAreSaid() throws {
        guard case let .verified(_, txs, findings) = try outcome(try Fixtures.text("verifyreceipt/nov-itunes-receipt__array_of_latest_receipt_info.json")) else {
            return XCTFail("not verified")
        }
        XCTAssertEqual(txs.first { $0.transactionId == "1000000131413546" }?.isFreeTrial, false)
        XCTAssertEqual(findings.map(\.code), ["TRANSACTION_CONFLICT"])
        XCTAssertEqual(findings.first?.transactionId, "1000000131413546")
        XCTAssertTrue(findings.first?.message.contains("a free trial (is_trial_period) in one listing and not in the other: taken as its first listing says (is_trial_period false)") ?? false,
                      "\(findings)")
    }

    /// Posted by a night, the disagreement is one finding of the transaction, however many
    /// responses repeat the subscription's history (each a record of its own).
    func testTheTrialDisagreementIsOneFindingPerTransaction() throws {
        let ws = try TestWorkspace(config: TestWorkspace.defaultConfig.replacingOccurrences(of: "com.example.coins", with: "com.musteus.musteus"),
                                   products: TestWorkspace.defaultProducts + "\ncom.musteus.musteus.subscription.month,auto_renewable,0\n")
        defer { ws.remove() }
        let text = try Fixtures.text("verifyreceipt/nov-itunes-receipt__array_of_latest_receipt_info.json")
        let line = String(decoding: try JSONSerialization.data(withJSONObject: try JSONSerialization.jsonObject(with: Data(text.utf8))), as: UTF8.self)
        try ws.write("inbox/receipts/a.jsonl", line + "\n" + line + " \n")
        try ws.run("2026-11-03")
        let findings = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try String.fetchAll($0.db, sql: "SELECT message FROM finding WHERE code = 'TRANSACTION_CONFLICT' AND transaction_id = '1000000131413546'")
        }
        XCTAssertEqual(findings.count, 1, "\(findings)")
        XCTAssertTrue(findings.first?.hasPrefix("inbox/receipts/a.jsonl:1: ") ?? false, "\(findings)")
    }

    /// The isowords sample is not copied (licence unchecked); it is checked where ../shared exists.
    func testIsowordsSampleWhenSharedFixturesArePresent() throws {
        guard let shared = Fixtures.shared else { throw XCTSkip("../shared/fixtures not present") }
        let text = try String(contentsOf: shared.appendingPathComponent("verifyreceipt/pointfreeco-isowords__AppleVerifyReceiptResponseTests.json"), encoding: .utf8)
        try check("isowords", text, .verified(.sandbox, ["1000000715012272", "1000000714700290"]))
    }

    func testIOS6DetailsAndStringScalars() throws {
        guard case let .verified(book, txs, _) = try outcome(try Fixtures.text("verifyreceipt/nov-itunes-receipt__autorenew_subscription.json")) else {
            return XCTFail("not verified")
        }
        XCTAssertEqual(book, .production, "iOS 6 responses from the production service carry no environment")
        let t = try XCTUnwrap(txs.first)
        XCTAssertEqual(t.productId, "com.notkeepingitreal.fizzbuzz.subscription.autorenew1m")
        XCTAssertEqual(t.purchaseMs, 1_350_157_208_197)
        XCTAssertEqual(t.expiresMs, 1_350_157_508_197, "iOS 6 expires_date is milliseconds")
        XCTAssertEqual(t.originalTransactionId, "1000000057005439")
        XCTAssertEqual(t.bundleId, "com.notkeepingitreal.fizzbuzz")
    }

    func testNumbersInsteadOfStringsAreTolerated() throws {
        // aporat's sample was hand-edited to use JSON numbers and booleans.
        guard case let .verified(_, txs, _) = try outcome(try Fixtures.text("verifyreceipt/aporat__inAppPurchaseResponse.json")) else {
            return XCTFail("not verified")
        }
        XCTAssertTrue(txs.allSatisfy { $0.quantity == 1 })
    }

    func testStatusTable() throws {
        func status(_ s: String) throws -> ReceiptOutcome { try outcome(s) }
        let cases: [(String, String)] = [
            (#"{"status": 21005, "is-retryable": true}"#, "pending RETRYABLE"),
            (#"{"status": 21002, "is_retryable": true}"#, "pending RETRYABLE"),
            (#"{"status": 21009, "is-retryable": true}"#, "pending RETRYABLE"),
            (#"{"status": 21150, "is-retryable": true}"#, "pending RETRYABLE"),
            (#"{"status": 21150}"#, "rejected STATUS_21150"),
            (#"{"status": 21007}"#, "pending SANDBOX_RECEIPT_SENT_TO_PRODUCTION"),
            (#"{"status": 21008}"#, "pending PRODUCTION_RECEIPT_SENT_TO_SANDBOX"),
            (#"{"status": 21000}"#, "rejected STATUS_21000"),
            (#"{"status": 21001}"#, "rejected STATUS_21001"),
            (#"{"status": 21003}"#, "rejected STATUS_21003"),
            (#"{"status": 21004}"#, "rejected STATUS_21004"),
            (#"{"status": 21010, "is-retryable": false}"#, "rejected STATUS_21010"),
            (#"{"status": "0"}"#, "rejected NO_RECEIPT"),
            (#"{"environment": "Production"}"#, "rejected NO_STATUS"),
        ]
        for (json, want) in cases {
            let got: String
            switch try status(json) {
            case let .pending(code, _, _): got = "pending \(code)"
            case let .rejected(code, _): got = "rejected \(code)"
            case .verified: got = "verified"
            }
            XCTAssertEqual(got, want, json)
        }
    }

    func testWrapperFieldsAndWrongBundle() throws {
        let inner = Receipt.response([Receipt.item("1", purchased: "2026-10-01T10:00:00Z")], bundle: "com.other.game")
        let wrapped = "{\"response\": \(inner), \"received_at\": \"2026-10-01T10:00:05Z\", \"account_id\": \"acct-1\", \"order_id\": \"ord-9\"}"
        let r = try LegacyReceiptParser.parse(Substring(wrapped))
        XCTAssertEqual(r.accountId, "acct-1")
        XCTAssertEqual(r.orderId, "ord-9")
        XCTAssertEqual(r.receivedAt, "2026-10-01T10:00:05Z")
        guard case let .rejected(code, reason) = ReceiptVerifier(bundleIds: ["com.example.coins"]).verify(r, location: .init(path: "f", line: 3)) else {
            return XCTFail("another app's receipt must be rejected")
        }
        XCTAssertEqual(code, "WRONG_BUNDLE_ID")
        XCTAssertTrue(reason.contains("com.other.game"), reason)
    }

    func testBadItemsBecomeFindingsNotCrashes() throws {
        let text = Receipt.response([
            Receipt.item("ok", purchased: "2026-10-01T10:00:00Z"),
            Receipt.item("zero", quantity: 0, purchased: "2026-10-01T10:00:00Z"),
            Receipt.item("old", purchased: "1970-01-02T00:00:00Z"),
            Receipt.item("future", purchased: "2100-06-01T00:00:00Z"),
        ])
        guard case let .verified(_, txs, findings) = try outcome(text) else { return XCTFail() }
        XCTAssertEqual(txs.map(\.transactionId), ["ok"])
        XCTAssertEqual(findings.count, 3)
        XCTAssertTrue(findings.allSatisfy { $0.code == "INVALID_TRANSACTION" })
    }
}

final class JSONParserTests: XCTestCase {
    func testNumbersStayExactText() throws {
        let v = try JSONParser.parse(#"{"a": 1000000156455961, "b": 9223372036854775808, "c": -1.5e3, "d": [true, null, "x\u00e9\ud83d\ude00"]}"#)
        XCTAssertEqual(v["a"]?.int64, 1_000_000_156_455_961)
        XCTAssertEqual(v["b"]?.scalarText, "9223372036854775808")
        XCTAssertNil(v["b"]?.int64, "too big for Int64: no silent wrap")
        XCTAssertEqual(v["c"]?.scalarText, "-1.5e3")
        XCTAssertEqual(v["d"]?.arrayValue?[2].scalarText, "xé😀")
    }

    func testStringsWithAndWithoutNonASCIIText() throws {
        // Unescaped non-ASCII text takes the validating path, ASCII the fast one; both give the text.
        let v = try JSONParser.parse(#"{"ascii": "com.example.coins.100", "mixed": "Café – 東京 😀", "k\u00e9y": "é"}"#)
        XCTAssertEqual(v["ascii"]?.scalarText, "com.example.coins.100")
        XCTAssertEqual(v["mixed"]?.scalarText, "Café – 東京 😀")
        XCTAssertEqual(v["kéy"]?.scalarText, "é")
    }

    func testStrictUTF8RefusesWhatItDoesNotRepair() {
        func decode(_ bytes: [UInt8]) -> String? { bytes.withUnsafeBufferPointer(UTF8Text.string) }
        // Lengths around the eight-byte steps of the ASCII check, with the odd byte at each end.
        for n in [0, 1, 7, 8, 9, 15, 16, 17] {
            let ascii = [UInt8](repeating: 0x61, count: n)
            XCTAssertEqual(decode(ascii), String(repeating: "a", count: n))
            XCTAssertNil(decode(ascii + [0x80]), "a lone continuation byte after \(n) ASCII bytes")
            XCTAssertNil(decode([0xC3] + ascii), "a cut two-byte sequence before \(n) ASCII bytes")
            XCTAssertEqual(decode(ascii + [0xC3, 0xA9]), String(repeating: "a", count: n) + "é")
        }
        XCTAssertNil(decode([0xC0, 0xAF]), "an overlong '/'")
        XCTAssertNil(decode([0xED, 0xA0, 0x80]), "a UTF-16 surrogate written as UTF-8")
        XCTAssertNil(decode([0xE2, 0x82]), "a truncated euro sign")
        XCTAssertEqual(decode([0xE2, 0x82, 0xAC]), "€")
    }

    func testHostileInputGivesErrors() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        for bad in ["", "{", #"{"a": 1"#, #"{"a" 1}"#, "[1,]", "01", #""\ud800""#, deep, "{}x", #"{"a": tru}"#] {
            XCTAssertThrowsError(try JSONParser.parse(bad), bad.prefix(20).description)
        }
    }

    /// A name given twice in one object is refused, in both parses, naming it (the first was
    /// taken: a receipt saying Production, then Sandbox, was posted to the production book);
    /// the same name in two objects, and many names in one, are not.
    func testANameGivenTwiceInOneObjectIsRefused() throws {
        func flat(_ text: String) throws { try JSONParser.withFlat(Substring(text)) { _ in } }
        let twice = [
            (#"{"status":0,"environment":"Production","environment":"Sandbox"}"#, "environment", 39),
            (#"{"a":{"b":[{"q":"1","x":{"q":2},"q":"5"}]}}"#, "q", 32),
            (#"{"environment":1,"env\u0069ronment":2}"#, "environment", 17),
            (#"{"k\u00e9":1,"ké":2}"#, "ké", 13),
            (#"{"":1,"":2}"#, "", 6),
        ]
        for (text, name, offset) in twice {
            for parse in [{ _ = try JSONParser.parse(text) }, { try flat(text) }] {
                XCTAssertThrowsError(try parse(), text) { e in
                    XCTAssertEqual(e as? JSONError, JSONError(offset: offset, message: "the member \"\(name)\" is given twice in one object (JSON does not say which value counts, and readers differ)"), text)
                }
            }
        }
        let many = "{" + (0..<300).map { "\"k\($0)\":{\"k\($0)\":[{\"k\($0)\":1}]}" }.joined(separator: ",") + "}"
        for text in [many, #"{"a":{"a":1},"b":{"a":2},"c":[{"a":1},{"a":2}]}"#, #"{"ab":1,"ba":2,"a":3,"b":4,"aa":5}"#] {
            XCTAssertNoThrow(try JSONParser.parse(text))
            XCTAssertNoThrow(try flat(text))
        }
        // Names alike but for their last characters, by the hundred thousand, in one object:
        // read in linear time (the check compared each name with every one before it), and a
        // name repeated at the end still found.
        let wide = "{" + (0..<200_000).map { "\"k\(String($0 + 1_000_000))\":\($0)" }.joined(separator: ",")
        XCTAssertNoThrow(try JSONParser.parse(wide + "}"))
        XCTAssertNoThrow(try flat(wide + "}"))
        XCTAssertThrowsError(try flat(wide + ",\"k1000017\":1}")) { XCTAssertTrue("\($0)".contains("the member \"k1000017\" is given twice"), "\($0)") }
        XCTAssertThrowsError(try JSONParser.parse(wide + ",\"k1000017\":1}"))
        // Through the receipt reader: rejected as malformed, not posted.
        XCTAssertThrowsError(try LegacyReceiptParser.parse(Substring(twice[0].0)))
    }

    func testSplittingDocumentsKeepsLines() {
        let doc = "[\n  {\"status\": 0},\n  {\"status\": 21007,\n   \"x\": \"a,]\"},\n  {\"status\": 1}\n]\n"
        let recs = RecordSplitter.jsonDocument(Substring(doc))
        XCTAssertEqual(recs.map(\.line), [2, 3, 5])
        XCTAssertEqual(String(recs[1].text), "{\"status\": 21007,\n   \"x\": \"a,]\"}")
        XCTAssertEqual(RecordSplitter.jsonDocument("{\"status\": 0}").count, 1)
        let lines = RecordSplitter.jsonLines("{\"a\":1}\n\n{\"b\":2}\r\n")
        XCTAssertEqual(lines.map(\.line), [1, 3])
        XCTAssertEqual(String(lines[1].text), "{\"b\":2}")
    }
}

/// Receipts are read through `JSONParser.withFlat`, which makes only the strings a posting
/// reads; `LegacyReceiptParser.parseTree`, through a whole `JSONValue`, is what it replaced.
/// Both give the same response or the same error for real responses, a demo's days, hand-made
/// edge cases and seeded mutations of them.
final class FlatReceiptParseTests: XCTestCase {
    func same(_ text: String, _ label: String, file: StaticString = #filePath, line: UInt = #line) {
        let flat = Result { try LegacyReceiptParser.parse(Substring(text)) }
        let tree = Result { try LegacyReceiptParser.parseTree(Substring(text)) }
        switch (flat, tree) {
        case let (.success(a), .success(b)): XCTAssertEqual(a, b, label, file: file, line: line)
        case let (.failure(a), .failure(b)): XCTAssertEqual("\(a)", "\(b)", label, file: file, line: line)
        default: XCTFail("\(label): flat \(flat), tree \(tree)", file: file, line: line)
        }
    }

    static let edgeCases: [String] = [
        #"{"status":0,"environment":"Sandbox","receipt":{"bundle_id":"com.x","in_app":[{"transaction\u005fid":"1","product_id":"p","quantity":"1","purchase_date_ms":"1700000000000"}]}}"#,
        #"{"status":0,"receipt":{"bundle_id":"com.x","in_app":[{"transaction_id":"1","transaction_id":"2","purchase_date":"2023-11-14 22:13:20 Etc\/GMT","product_id":"caf\u00e9 ☕","quantity":2}]}}"#,
        #"{"status":"0","receipt":{"receipt_type":"ProductionSandbox","in_app":null},"latest_receipt_info":{"transaction_id":"9","expires_date":"1700000000000","is_trial_period":true}}"#,
        #"{"status":0,"receipt":{"bundle_id":"com.x","in_app":{}}}"#,
        #"{"status":0,"receipt":{"bundle_id":"com.x","in_app":[1,"x",null]}}"#,
        #"{"status":0,"receipt":{"bundle_id":"com.x","in_app":5}}"#,
        #"{"status":21007,"is-retryable":1,"exception":"e"}"#,
        #"{"status":21100,"is_retryable":"true"}"#,
        #"{"response":{"status":0,"receipt":{"bid":"com.x","transaction_id":"7","purchase_date":"2012-04-30 15:05:55 Etc/GMT","quantity":"1"}},"received_at":"2026-01-01T00:00:00Z","account_id":42,"order_id":"o\"1","transaction_id":"7"}"#,
        #"{"response":[1],"received_at":"x"}"#,
        #"{"response":{"status":0},"status":1}"#,
        #"{"status":[0],"receipt":[],"latest_receipt_info":[{"transaction_id":1e3,"cancellation_date_ms":"-5","cancellation_reason":0}],"latest_expired_receipt_info":null}"#,
        #"{"status":0,"receipt":{"in_app":[{"transaction_id":"1","purchase_date_ms":"99999999999999999999","expires_date_ms":"+12","web_order_line_item_id":1.5,"app_account_token":"A"}]}}"#,
        "\u{FEFF}{\"status\":0}", "  {\"status\" : 0 }  ", "[]", "\"x\"", "3", "null", "", "   ", "{", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}",
        "{\"a\":[1,]}", "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", "{\"a\":01}", "{\"a\":-}", "{\"a\":1.}", "{\"a\":tru}", "{\"a\":nul}",
        "{\"a\":\"tab\there\"}", "{\"a\":1} x", ",{\"a\":1}", String(repeating: "[", count: 70) + String(repeating: "]", count: 70),
        "{\"status\":0,\"receipt\":{\"in_app\":[{\"transaction_id\":\"1\"}]}" ,
        #"{"receipt":{},"status":0,"latest_receipt_info":[{},{"transaction_id":"3","x":{"y":[]}},[]],"environment":"Sandbox"}"#,
        #"{"receipt":{"in_app":[]},"status":0,"latest_receipt_info":[{"transaction_id":"4","product_id":{}}]}"#,
        "{\"status\":0,\"environment\":\"x\u{7F}y\"}", "{\"status\":0,\"environment\":\"x\u{01}y\"}",
        "{\"status\":0,\"environ\u{7F}ment\":\"Sandbox\"}",
    ]

    func testFlatReadingGivesWhatTheTreeGave() throws {
        var texts: [(String, String)] = Self.edgeCases.enumerated().map { ("edge case \($0.offset)", $0.element) }
        let fixtures = Fixtures.root.appendingPathComponent("verifyreceipt")
        for name in try FileManager.default.contentsOfDirectory(atPath: fixtures.path).sorted() where name.hasSuffix(".json") {
            texts.append((name, try String(contentsOf: fixtures.appendingPathComponent(name), encoding: .utf8)))
        }
        // A demo's days of receipts: every record of the .jsonl files.
        let demo = FileManager.default.temporaryDirectory.appendingPathComponent("flat-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: demo) }
        _ = try DemoWorkspace.create(at: demo, transactions: 600, seed: 3, asOf: Day(iso: "2026-11-21")!)
        let receipts = demo.appendingPathComponent("inbox/receipts")
        for name in try FileManager.default.contentsOfDirectory(atPath: receipts.path).sorted() where name.hasSuffix(".jsonl") {
            for (i, line) in try String(contentsOf: receipts.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").enumerated() {
                texts.append(("\(name):\(i + 1)", String(line)))
            }
        }
        XCTAssertGreaterThan(texts.count, 400)
        for (label, text) in texts { same(text, label) }
        // Seeded mutations: bytes cut, dropped, doubled or replaced by JSON's own characters.
        var rng = SplitMix64(7)
        let alphabet = Array("{}[]\":,\\ 0123456789.-eE+tfnul\u{00e9}".unicodeScalars)
        let bases = texts.filter { $0.1.utf8.count > 20 }
        var n = 0
        for _ in 0..<4000 {
            let (label, base) = bases[Int(rng.next() % UInt64(bases.count))]
            var scalars = Array(base.unicodeScalars)
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let at = Int(rng.next() % UInt64(scalars.count))
                switch rng.next() % 4 {
                case 0: scalars = Array(scalars[..<at])
                case 1: scalars.remove(at: at)
                case 2: scalars.insert(scalars[at], at: at)
                default: scalars[at] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                }
                if scalars.isEmpty { break }
            }
            var mutated = String.UnicodeScalarView()
            mutated.append(contentsOf: scalars)
            same(String(mutated), "mutation of \(label)")
            n += 1
        }
        XCTAssertEqual(n, 4000)
    }
}
