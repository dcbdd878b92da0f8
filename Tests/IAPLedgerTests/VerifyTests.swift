import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore
import LedgerVerify

/// `iapledger verify`: invariants, the hash chain, re-derivation from source records.
final class VerifyTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws {
        ws = try TestWorkspace()
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "o1,a1,8002,coins.100,1,100,2026-10-05T10:00:01Z,production,JPN,,\n")
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("8001", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("8002", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-06T10:00:00Z")]),
            Receipt.response([Receipt.item("8003", product: "coins.550", quantity: 3, purchased: "2026-10-06T10:00:00Z")]),
        ].joined(separator: "\n"))
        try ws.run("2026-10-07")
    }
    override func tearDown() { ws.remove() }

    var dbPath: String { ws.root.appendingPathComponent("ledger.sqlite").path }
    func rows(_ sql: String) throws -> [[String]] { try Ledger(path: dbPath).read { try $0.rawRows(sql) } }

    func tamper(past trigger: String, _ sql: String) throws { try Tamper.run(dbPath, past: trigger, sql) }

    /// Runs `sql` past `trigger` (created again afterwards unless `keepDropped`), with SQL
    /// functions to read and write a chunk's text: `chunk_text(data, text_bytes)` and
    /// `chunk_data(text)` (compressed as iapledger does).
    func tamperChunks(past trigger: String = "source_chunk_no_update", keepDropped: Bool = false, _ sql: String) throws {
        let db = try DatabaseQueue(path: dbPath, configuration: Self.chunkFunctions)
        let create = try db.read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_schema WHERE name = ?", arguments: [trigger])! }
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER \(trigger)")
            try d.execute(sql: sql)
            if !keepDropped { try d.execute(sql: create) }
        }
    }

    static var chunkFunctions: Configuration {
        var config = Configuration()
        config.prepareDatabase { db in
            db.add(function: DatabaseFunction("chunk_text", argumentCount: 2) { args in
                let data = Data.fromDatabaseValue(args[0]) ?? Data()
                let size = Int.fromDatabaseValue(args[1]) ?? 0
                return RecordText.decompress(data, textBytes: size).map { String(decoding: $0, as: UTF8.self) }
            })
            db.add(function: DatabaseFunction("chunk_data", argumentCount: 1) { args in
                Data(RecordText.compress(Array((String.fromDatabaseValue(args[0]) ?? "").utf8)))
            })
        }
        return config
    }

    /// The text each entry's hash covers, pinned: a change to it would make every stored
    /// ledger fail `verify`. An entry prepared ahead (the posting stage's second thread)
    /// hashes exactly as one hashed where it is stored.
    func testTheHashedTextOfAnEntryIsFixed() throws {
        let draft = EntryDraft(
            book: .production, transactionId: "9001", kind: .sale, date: Day(iso: "2026-10-05")!,
            originalDate: Day(iso: "2026-10-05")!, late: false, productId: "coins.100", storefront: "JPN",
            figures: SaleFigures(currency: "JPY", grossMinor: 160, taxMinor: 15, netMinor: 145, commissionMinor: 22,
                                 proceedsMinor: 123, reportingCurrency: "USD", grossReportingMinor: 107,
                                 netReportingMinor: 97, commissionReportingMinor: 15, proceedsReportingMinor: 82),
            refundPercentage: nil,
            rules: AppliedRules(storefront: "JPN", storefrontSource: "order o1", storefrontEffectiveFrom: "2020-01-01",
                                taxRate: "0.10", taxIncluded: true, priceSource: "signed price", commissionRate: "0.15",
                                commissionReason: "standard", fxRate: "0.0067", fxMonth: "2026-10"),
            postings: [PostingDraft(account: "Receivable:Apple", currency: "JPY", amountMinor: 123, reportingAmountMinor: 82),
                       PostingDraft(account: "Revenue:InApp", currency: "JPY", amountMinor: -123, reportingAmountMinor: -82)])
        let rules = draft.rules.canonicalJSON
        XCTAssertEqual(EntryHash.canonical(entryId: 42, entry: draft, rulesJSON: rules), """
            entry 42|production|9001|sale|2026-10-05|2026-10-05|0|coins.100|JPN|JPY|USD|160|15|145|22|123|107|97|15|82|-|\(rules)
            posting Receivable:Apple|JPY|123|82
            posting Revenue:InApp|JPY|-123|-82

            """)
        let previous = String(repeating: "ab", count: 32)
        let expected = Hashing.sha256Hex(utf8: previous + "\n" + EntryHash.canonical(entryId: 42, entry: draft, rulesJSON: rules))
        XCTAssertEqual(EntryHash.hash(previous: previous, entryId: 42, entry: draft, rulesJSON: rules), expected)
        XCTAssertEqual(EntryHash.hash(previous: previous, entryId: 42, body: PreparedEntry(draft).hashBody), expected)
        XCTAssertTrue(PreparedEntry(draft).isBalanced)
        var unbalanced = draft
        unbalanced.postings[0].amountMinor += 1
        XCTAssertFalse(PreparedEntry(unbalanced).isBalanced)
    }

    func testAnUntouchedLedgerVerifies() throws {
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.entries, 4)
        XCTAssertEqual(r.rederived, 4)
        // The rules migration v13 wrote out are the contract's (`PostingRule.all`).
        func ordered(_ rules: [PostingRule]) -> [PostingRule] { rules.sorted { ($0.kind.rawValue, $0.line) < ($1.kind.rawValue, $1.line) } }
        XCTAssertEqual(ordered(try XCTUnwrap(try Ledger(path: dbPath).read { try $0.postingRules() })), ordered(PostingRule.all))
    }

    /// A posting cannot be edited on its own: the ledger derives it from its entry's amounts.
    /// Editing one of those amounts directly in the database (the append-only trigger dropped
    /// first, as a tamperer would) moves the postings with it, and verify names that entry.
    func testEditingOnePostingIsCaughtAndNamed() throws {
        let db = try DatabaseQueue(path: dbPath)
        let target = try db.read { try Int64.fetchOne($0, sql: "SELECT id FROM entry WHERE transaction_id = '8003'")! }
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "UPDATE posting SET amount_minor = amount_minor + 100 WHERE entry_id = ?", arguments: [target]) }) {
            XCTAssertTrue("\($0)".contains("cannot modify posting because it is a view"), "\($0)")
        }
        let before = try rows("SELECT amount_minor FROM posting WHERE entry_id = \(target) ORDER BY line")
        try tamper(past: "entry_no_update", "UPDATE entry SET net_minor = net_minor + 100, proceeds_minor = proceeds_minor + 100 WHERE id = \(target)")
        XCTAssertEqual(try rows("SELECT amount_minor FROM posting WHERE entry_id = \(target) ORDER BY line").map { Int($0[0])! },
                       before.map { Int($0[0])! }.enumerated().map { $0.offset == 1 ? $0.element : $0.offset == 0 ? $0.element + 100 : $0.element - 100 },
                       "receivable and sales moved with the entry, commission did not")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.ok)
        XCTAssertEqual(r.firstFailingEntry, target)
        XCTAssertTrue(r.problems.contains { $0.entryId == target && $0.message.contains("hash") }, "\(r.problems)")
        // trace shows the entry with a warning that its hash no longer holds (the others hold).
        let traced = try XCTUnwrap(try Ledger(path: dbPath, readOnly: true).read { try $0.traceTransaction("8003", asOf: nil, withText: false) })
        XCTAssertEqual(traced.entries.map(\.hash_holds), [false])
        XCTAssertEqual(try Ledger(path: dbPath, readOnly: true).read { try $0.traceTransaction("8001", asOf: nil, withText: false) }?.entries.map(\.hash_holds), [true])
        XCTAssertTrue(TraceOutput.text(traced).contains("(WARNING: this hash no longer follows from the entry and the one before it"))
    }

    /// Re-balancing a forged change (commission and proceeds moved by the same amount, so the
    /// entry's CHECKs and its postings still balance) still breaks the chain.
    func testABalancedForgeryStillBreaksTheChain() throws {
        try tamper(past: "entry_no_update", """
            UPDATE entry SET commission_minor = commission_minor + 5, proceeds_minor = proceeds_minor - 5,
                commission_reporting_minor = commission_reporting_minor + 5, proceeds_reporting_minor = proceeds_reporting_minor - 5
            WHERE id = 1
            """)
        XCTAssertEqual(try rows("SELECT sum(amount_minor), sum(reporting_amount_minor) FROM posting WHERE entry_id = 1"), [["0", "0"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.firstFailingEntry, 1)
    }

    /// The posting rules are the accounting contract's: one changed (commission booked to the
    /// sales account) is named as such, and every sale whose postings it changed fails its hash.
    func testAChangedPostingRuleIsNamed() throws {
        try tamper(past: "posting_rule_no_update", """
            UPDATE posting_rule SET account_id = (SELECT id FROM account WHERE name = 'Revenue:InApp:Sales') WHERE kind = 'sale' AND line = 2
            """)
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains {
            $0.message == "the ledger's posting rules (posting_rule), which give every entry its postings, differ from the accounting contract's: sale line 2: Revenue:InApp:Sales +commission where accounting.md gives sale line 2: Expenses:AppStore:Commission +commission"
        }, "\(r.problems.map(\.message))")
        XCTAssertEqual(Set(r.problems.filter { $0.message.contains("stored hash does not match") }.compactMap(\.entryId)), [1, 2, 3],
                       "the three sales; entry 4, the refund, keeps its postings (each hash is checked against the stored one before it)")
        XCTAssertThrowsError(try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "DELETE FROM posting_rule") }) {
            XCTAssertTrue("\($0)".contains("the posting rules are the accounting contract's"), "\($0)")
        }
    }

    /// A refund is re-derived from its own transaction's sale (verify keeps only the sales of
    /// refunded transactions in memory): a changed refund percentage is named as such, and a
    /// sale moved to another transaction leaves its refund with no earlier sale.
    func testRefundsAreReDerivedFromTheirSale() throws {
        // Fields a refund copies from its sale, rewritten in the refund alone (its postings
        // unchanged): the rules trace tells, the storefront, the product.
        try tamper(past: "entry_no_update", "UPDATE entry SET rules_json = replace(rules_json, '\"standard\"', '\"small_business\"'), storefront = 'GBR' WHERE transaction_id = '8002' AND kind = 'refund'")
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE kind = 'refund' AND rules_json LIKE '%small_business%'"), [["1"]])
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains {
            $0.message.contains("refund of transaction 8002: storefront GBR where its sale (re-derived at its refund percentage) has JPN; applied rules differ: commission reason \"small_business\" where its sale (re-derived at its refund percentage) has \"standard\": written into the entry, not derived")
        }, "\(r.problems.map(\.message))")
        try tamper(past: "entry_no_update", "UPDATE entry SET rules_json = replace(rules_json, '\"small_business\"', '\"standard\"'), storefront = 'JPN', product_id = 'coins.550' WHERE transaction_id = '8002' AND kind = 'refund'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.contains("refund of transaction 8002: product coins.550 where its sale (re-derived at its refund percentage) has ") }, "\(r.problems.map(\.message))")
        try tamper(past: "entry_no_update", "UPDATE entry SET product_id = (SELECT product_id FROM entry WHERE transaction_id = '8002' AND kind = 'sale') WHERE transaction_id = '8002' AND kind = 'refund'")
        let restored = try Audit(workspace: ws.workspace).run().problems.map(\.message).filter { $0.contains("written into the entry, not derived") }
        XCTAssertEqual(restored, [])

        try tamper(past: "entry_no_update", "UPDATE entry SET refund_percentage = 50000 WHERE transaction_id = '8002' AND kind = 'refund'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.contains("refund of transaction 8002: re-derived from its sale and refund percentage, its postings differ") }, "\(r.problems)")
        XCTAssertFalse(r.problems.contains { $0.message.contains("no earlier sale") }, "\(r.problems)")

        try tamper(past: "entry_no_update", "UPDATE entry SET transaction_id = '8009' WHERE transaction_id = '8002' AND kind = 'sale'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.contains("refund of transaction 8002: a refund with no earlier sale entry") }, "\(r.problems)")
    }

    /// Two transaction ids that differ in their bytes but are canonically equivalent text
    /// ("cafe" + combining acute, and "caf" + precomposed é) are two transactions: verify
    /// re-derives the refund of the first from its own sale, not from the other's.
    func testCanonicallyEquivalentIdsAreKeptApart() throws {
        let other = try TestWorkspace()
        defer { other.remove() }
        let decomposed = "t-cafe\u{301}", precomposed = "t-caf\u{E9}"
        XCTAssertEqual(decomposed, precomposed, "Swift's == equates them")
        try other.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item(decomposed, purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-06T10:00:00Z")]),
            Receipt.response([Receipt.item(precomposed, product: "coins.550", purchased: "2026-10-05T11:00:00Z")]),
        ].joined(separator: "\n"))
        try other.run("2026-10-07")
        let r = try Audit(workspace: other.workspace).run()
        XCTAssertEqual(r.entries, 3)
        XCTAssertTrue(r.ok, "\(r.problems)")
    }

    func testDeletingAnEntryIsCaught() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER entry_no_delete")
            try d.execute(sql: "DELETE FROM entry WHERE id = (SELECT max(id) FROM entry)")
        }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.ok)
        XCTAssertTrue(r.problems.contains { $0.message.contains("chain head") }, "\(r.problems)")
    }

    /// A verified record's environment, which trace tells beside it, rewritten past its
    /// trigger (an auditor's review: a Production receipt said Sandbox, and verify passed).
    func testARecordsEnvironmentRewrittenIsNamed() throws {
        let id = try XCTUnwrap(try rows("SELECT id FROM source_record WHERE outcome = 'verified' AND environment = 'Production' ORDER BY id LIMIT 1").first?.first)
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [])
        try tamper(past: "source_record_text_fixed", "UPDATE source_record SET environment = 'Sandbox' WHERE id = \(id)")
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.hasSuffix("(#\(id)) is stored with the environment Sandbox where its text says Production: changed in the ledger (trace tells the stored one)") }, "\(problems)")
        // A wrapper's account id too (its text gives none here).
        try tamper(past: "source_record_text_fixed", "UPDATE source_record SET environment = 'Production', account_id = 'acct-forged' WHERE id = \(id)")
        let account = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(account.contains { $0.hasSuffix("(#\(id)) is stored with the account_id acct-forged where its text says none: changed in the ledger (trace tells the stored one)") }, "\(account)")
    }

    func testAChangedSourceRecordIsCaught() throws {
        // The records' texts are stored compressed, a chunk of neighbours at a time.
        XCTAssertEqual(try rows("SELECT count(*) FROM source_record WHERE chunk_id IS NOT NULL AND raw = ''"), [["4"]])
        try tamperChunks(keepDropped: true, """
            UPDATE source_chunk SET data = chunk_data(replace(chunk_text(data, text_bytes), '"quantity": "3"', '"quantity": "2"'))
            WHERE chunk_text(data, text_bytes) LIKE '%8003%'
            """)
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.ok)
        XCTAssertTrue(r.problems.contains { $0.message.contains("quantity") }, "\(r.problems)")
        XCTAssertTrue(r.problems.contains { $0.message.contains("r.jsonl:3: its stored text no longer hashes") }, "\(r.problems)")
        XCTAssertTrue(r.problems.contains { $0.message.contains("trigger source_chunk_no_update is missing") }, "\(r.problems)")
        // trace warns of it too (it showed the changed text as read), with or without the text.
        for withText in [false, true] {
            let traced = try XCTUnwrap(try Ledger(path: dbPath, readOnly: true).read { try $0.traceTransaction("8003", asOf: nil, withText: withText) })
            XCTAssertEqual(traced.sources.map(\.text_holds), [false])
            XCTAssertTrue(TraceOutput.text(traced).contains("WARNING: the text the ledger keeps of this record no longer hashes to its record sha256"))
        }
        XCTAssertEqual(try Ledger(path: dbPath, readOnly: true).read { try $0.traceTransaction("8001", asOf: nil) }?.sources.map(\.text_holds), [true])
    }

    /// A record stored with its text in its own row (every record of a ledger from before
    /// chunks) verifies, and a change to that text is caught as before.
    func testARecordStoredInItsOwnRowVerifiesAndAChangeIsCaught() throws {
        try tamperChunks(past: "source_record_text_fixed", """
            UPDATE source_record SET raw = (SELECT CAST(substr(CAST(chunk_text(c.data, c.text_bytes) AS BLOB), chunk_offset + 1, chunk_length) AS TEXT)
                                            FROM source_chunk c WHERE c.id = chunk_id),
                                     chunk_id = NULL, chunk_offset = NULL, chunk_length = NULL
            """)
        XCTAssertEqual(try rows("SELECT count(*) FROM source_record WHERE chunk_id IS NULL AND raw LIKE '{%'"), [["3"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try tamper(past: "source_record_text_fixed",
                   "UPDATE source_record SET raw = replace(raw, '\"quantity\": \"3\"', '\"quantity\": \"2\"') WHERE raw LIKE '%8003%'")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.contains("quantity") }, "\(r.problems)")
        XCTAssertTrue(r.problems.contains { $0.message.contains("r.jsonl:3: its stored text no longer hashes") }, "\(r.problems)")
    }

    /// A chunk whose data is no longer a Zstandard frame of its size: each of its records is
    /// named, and verify does not crash.
    func testADamagedChunkNamesItsRecords() throws {
        try tamperChunks("UPDATE source_chunk SET data = x'28b52ffd0000'")
        let r = try Audit(workspace: ws.workspace).run()
        let names = r.problems.map(\.message).filter { $0.contains("cannot be read (not the compressed text of its recorded size)") }
        XCTAssertEqual(names.count, 4, "\(r.problems)")
        XCTAssertTrue(names.contains { $0.hasPrefix("source record inbox/receipts/r.jsonl:3: its text's chunk ") }, "\(names)")
    }

    /// A rejected record that is a whole file (one JSON object in a `.json` file: the record's
    /// hash is the file's) and whose chunk is altered is caught: only a text kept in its own
    /// row may stand for the whole file without hashing to it.
    func testAnAlteredWholeFileRecordInAChunkIsCaught() throws {
        try ws.write("inbox/receipts/one.json", "{\"status\": 21003}")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("""
            SELECT r.record_sha256 = f.sha256, r.chunk_id IS NOT NULL FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = 'inbox/receipts/one.json'
            """), [["1", "1"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try tamperChunks("""
            UPDATE source_chunk SET data = chunk_data(replace(chunk_text(data, text_bytes), '21003', '00000'))
            WHERE id = (SELECT chunk_id FROM source_record WHERE outcome = 'rejected')
            """)
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["source record inbox/receipts/one.json:1: its stored text no longer hashes to the SHA-256 recorded when it was read (\(Hashing.sha256Hex(Data("{\"status\": 21003}".utf8)))): it was changed after it was read"])
    }

    /// A workbook under reports/ that is not the last version iapledger wrote there (opened
    /// and saved, or edited) is said by plain `verify` (it said nothing), not as a problem of
    /// the ledger; one put back as written is not.
    func testAWorkbookChangedUnderReportsIsSaid() throws {
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().workbooksChanged, [])
        let path = "reports/2026-10-07/finance-2026-10-07.xlsx"
        let url = ws.root.appendingPathComponent(path)
        let bytes = try Data(contentsOf: url)
        var edited = bytes
        edited[edited.count / 2] ^= 0x01
        try edited.write(to: url)
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.workbooksChanged, [path])
        try bytes.write(to: url)
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().workbooksChanged, [])
        // A workbook copied under another date, at a path iapledger never wrote (an auditor's
        // review: only `verify --workbook` said so): said too, and by the command. A night's
        // kept copy of an edited workbook, a hidden file, and other files are not.
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().workbooksUnregistered, [])
        let copied = "reports/2026-10-07/finance-2026-10-01.xlsx"
        try bytes.write(to: ws.root.appendingPathComponent(copied))
        try bytes.write(to: ws.root.appendingPathComponent("reports/2026-10-07/finance-2026-10-07.replaced-20261008T010000Z.xlsx"))
        try bytes.write(to: ws.root.appendingPathComponent("reports/2026-10-07/.~lock.finance-2026-10-07.xlsx"))
        try Data("notes".utf8).write(to: ws.root.appendingPathComponent("reports/2026-10-07/notes.txt"))
        try Data("dana".utf8).write(to: ws.root.appendingPathComponent("reports/2026-10-07/~$finance-2026-10-07.xlsx"))
        // A folder of a set no registration names, dated before the first night that registered
        // (an earlier iapledger's, which registered none): not looked at.
        try FileManager.default.createDirectory(at: ws.root.appendingPathComponent("reports/2026-09-30"), withIntermediateDirectories: true)
        try bytes.write(to: ws.root.appendingPathComponent("reports/2026-09-30/finance-2026-09-30.xlsx"))
        // One dated after it, no file of it registered (a night stopped before it registered
        // its set, a copy into a new folder): looked at.
        try FileManager.default.createDirectory(at: ws.root.appendingPathComponent("reports/2026-10-08"), withIntermediateDirectories: true)
        try bytes.write(to: ws.root.appendingPathComponent("reports/2026-10-08/finance-2026-10-08.xlsx"))
        let unregistered = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(unregistered.ok, "\(unregistered.problems)")
        XCTAssertEqual(unregistered.workbooksUnregistered, [copied, "reports/2026-10-08/finance-2026-10-08.xlsx"])
        let said = try Resilience.cli(["verify", "--workspace", ws.root.path])
        XCTAssertEqual(said.status, 0)
        XCTAssertTrue(said.out.contains("note: 2 files under reports/ are at paths iapledger never wrote (copied or moved there, or their registration removed): \(copied), reports/2026-10-08/finance-2026-10-08.xlsx; `iapledger verify --workbook FILE` says what a file is"), said.out)
    }

    /// A bundle id dropped from the config since: the records its nights verified are checked
    /// by the config those nights kept (a change of config is no tampering), and verify says
    /// the config no longer lists it. A ledger whose nights kept no config (before schema v26)
    /// is checked by today's, and says why the records no longer verify.
    func testABundleDroppedFromTheConfigIsNamed() throws {
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "com.example.coins", with: "com.example.other"))
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.notes, ["iapledger.toml's bundle_ids no longer lists com.example.coins, which run 1 verified records with: their records are checked by the config and roots those runs kept, as they verified them"])
        try Tamper.run(dbPath, past: "input_text_no_delete", "DELETE FROM input_text WHERE sha256 IN (SELECT sha256 FROM run_input WHERE path = 'iapledger.toml')")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.contains("does not give the transaction again: it no longer verifies: WRONG_BUNDLE_ID: receipt of another app: bundle id com.example.coins, expected com.example.other (bundle_ids in iapledger.toml no longer lists the app it was verified for)") }, "\(r.problems)")
    }

    /// The database refuses to change a finished run or a record's text, or to delete either.
    func testFinishedRunsAndRecordTextAreFixed() throws {
        let db = try DatabaseQueue(path: dbPath)
        for sql in ["UPDATE run SET chain_head = NULL", "UPDATE run SET entries_posted = 0", "DELETE FROM run WHERE id = 1",
                    "UPDATE source_record SET raw = 'x' WHERE id = 1", "UPDATE source_record SET record_sha256 = 'x' WHERE id = 1",
                    "UPDATE source_record SET outcome = 'rejected', reason = 'x' WHERE id = 1", "DELETE FROM source_record WHERE id = 1",
                    "UPDATE source_record SET chunk_offset = 0 WHERE id = 2", "UPDATE source_record SET chunk_id = NULL WHERE id = 2",
                    "UPDATE source_chunk SET data = x'00'", "DELETE FROM source_chunk",
                    "UPDATE source_file SET path = 'inbox/receipts/other.jsonl'", "UPDATE source_file SET sha256 = 'x'",
                    "UPDATE source_file SET records = 0", "UPDATE run SET closed_through = '2099-01'"] {
            XCTAssertThrowsError(try db.write { try $0.execute(sql: sql) }, sql)
        }
        // A file's identity on disk is remembered after it was read; nothing else of it changes.
        XCTAssertNoThrow(try db.write { try $0.execute(sql: "UPDATE source_file SET stat_key = NULL") })
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A record nothing re-derives (a rejected one) changed afterwards is caught by its hash.
    func testAChangedRejectedRecordIsCaughtByItsHash() throws {
        try ws.write("inbox/receipts/bad.jsonl", "{\"status\": 21003}\n")
        try ws.run("2026-10-08")
        try tamperChunks("""
            UPDATE source_chunk SET data = chunk_data(replace(chunk_text(data, text_bytes), '{"status": 21003}', '{"status":     0}'))
            WHERE id = (SELECT chunk_id FROM source_record WHERE outcome = 'rejected')
            """)
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["source record inbox/receipts/bad.jsonl:1: its stored text no longer hashes to the SHA-256 recorded when it was read (\(Hashing.sha256Hex(Data("{\"status\": 21003}".utf8)))): it was changed after it was read"])
    }

    /// A record holding a NUL character (valid UTF-8, rejected as JSON) is read back whole:
    /// its text hashes as when it was read (the fuzz test found it read back cut at the NUL).
    func testARecordWithANULCharacterHashesAsWhenRead() throws {
        try ws.write("inbox/receipts/nul.jsonl", "{\"status\": 0, \"x\": \"a\u{0}b\"}\n")
        try ws.run("2026-10-08")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.records, 5)
    }

    /// A whole-file rejection keeps the file's hash and no text: text put there later is caught.
    func testTextAddedToAWholeFileRejectionIsCaught() throws {
        try ws.write("inbox/receipts/empty.jsonl", "\n")
        try ws.run("2026-10-08")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try tamper(past: "source_record_text_fixed", "UPDATE source_record SET raw = 'forged' WHERE reason_code = 'EMPTY_FILE'")
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.hasPrefix("source record inbox/receipts/empty.jsonl:1: its stored text no longer hashes") }, "\(problems)")
    }

    /// Nulling a run's chain head (to hide a removed entry from the head check) is caught.
    func testAnErasedRunHeadIsCaught() throws {
        try tamper(past: "run_finished_no_update", "UPDATE run SET chain_head = NULL")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["run 1 (as of 2026-10-07) is finished but has no recorded chain head: it was erased (every run records one when it commits)",
                                                  Self.sealDiffers(run: 1, seal: 1, records: 4)])
    }

    /// A trigger dropped, one rewritten to do nothing, and one added are each named.
    func testTheSchemaIsCheckedAgainstTheOneIAPLedgerCreates() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER entry_no_delete")
            try d.execute(sql: "DROP TRIGGER posting_rule_no_update")
            try d.execute(sql: "CREATE TRIGGER posting_rule_no_update BEFORE UPDATE ON posting_rule BEGIN SELECT 1; END")
            try d.execute(sql: "CREATE TRIGGER sneaky AFTER INSERT ON entry BEGIN SELECT 1; END")
        }
        let messages = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertEqual(messages.count, 3, "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("the ledger's trigger entry_no_delete is missing: it was dropped") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("the ledger's trigger posting_rule_no_update differs from the one iapledger created") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("the ledger holds trigger sneaky, which iapledger never created") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasSuffix("it was dropped, so what it enforces (that entries are append-only (never changed or deleted)) was not enforced while it was gone") }, "\(messages)")
        // A dropped index is said as what it is (an auditor's review: each was said to
        // enforce what its table's triggers do): a unique key, or a lookup.
        try db.write { d in
            try d.execute(sql: "DROP INDEX entry_date")
            try d.execute(sql: "DROP INDEX finding_key")
        }
        let indexes = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(indexes.contains("the ledger's index entry_date is missing: it was dropped, so the lookups by book, date that it serves are slow until it is made again (it enforces nothing: no figure depends on it)"), "\(indexes)")
        XCTAssertTrue(indexes.contains("the ledger's index finding_key is missing: it was dropped, so what it enforces (a unique key: no two rows with the same code, transaction_id, ifnull(record_id, 0)) was not enforced while it was gone"), "\(indexes)")
        // Every index a query names (INDEXED BY) is one of the ledger's, and is said as such.
        let named = Set(try rows("SELECT name FROM sqlite_schema WHERE type = 'index'").map { $0[0] })
        XCTAssertTrue(Audit.indexesNamedByQueries.isSubset(of: named.union(["entry_date", "finding_key"])), "\(Audit.indexesNamedByQueries.subtracting(named))")
        try db.write { try $0.execute(sql: "DROP INDEX store_transaction_refunds") }
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().problems.map(\.message).contains { $0.hasPrefix("the ledger's index store_transaction_refunds is missing: it was dropped, so the nights' and these checks' queries that name it (by ") }, "named by queries")
    }

    /// A ledger written by an older iapledger (fewer migrations applied) is compared with the
    /// schema of those migrations, not today's.
    func testALedgerOfAnEarlierSchemaVerifies() throws {
        let path = ws.root.appendingPathComponent("old.sqlite").path
        let old = try DatabaseQueue(path: path)
        try Schema.migrator().migrate(old, upTo: "v8-month-totals")
        let ledger = try Ledger(path: path, readOnly: true)
        let expected = try ledger.expectedSchemaObjects()
        XCTAssertNil(expected["trigger run_no_delete"])
        XCTAssertEqual(expected, try old.read { try LedgerReader(db: $0).schemaObjects() })
    }

    /// A ledger made before records were stored in chunks (schema v11, each record's text in
    /// its own row) is brought up to date when opened, and its records read back as they were
    /// read: each text hashes to its recorded SHA-256.
    func testALedgerFromBeforeChunksIsUpgradedAndReadsItsRecords() throws {
        let path = ws.root.appendingPathComponent("v11.sqlite").path
        let old = try DatabaseQueue(path: path, configuration: Self.chunkFunctions)
        try Schema.migrator().migrate(old, upTo: "v11-unverified-by-order")
        try old.writeWithoutTransaction { d in
            try d.execute(sql: "ATTACH DATABASE ? AS now", arguments: [dbPath])
            try d.inTransaction {
                try d.execute(sql: """
                    INSERT INTO main.run SELECT \(try Self.columns(of: "run", in: d)) FROM now.run;
                    INSERT INTO main.source_file SELECT * FROM now.source_file;
                    INSERT INTO main.source_record
                    SELECT r.id, r.file_id, r.line, r.record_sha256, r.outcome, r.reason_code, r.reason, r.status_code, r.environment,
                           r.account_id, r.order_id, r.received_at, r.resolved_run_id, r.resolved_note,
                           coalesce((SELECT CAST(substr(CAST(chunk_text(c.data, c.text_bytes) AS BLOB), r.chunk_offset + 1, r.chunk_length) AS TEXT)
                                     FROM now.source_chunk c WHERE c.id = r.chunk_id), r.raw)
                    FROM now.source_record r;
                    """)
                return .commit
            }
        }
        XCTAssertFalse(try old.read { try $0.columns(in: "source_record").contains { $0.name == "chunk_id" } })
        // Read-only first (verify, trace and balance do not migrate), then brought up to date.
        for readOnly in [true, false] {
            let texts = try Ledger(path: path, readOnly: readOnly).read { r in
                var out: [(String, String)] = []
                try r.forEachSourceRecordText { _, _, _, _, sha, _, chunk, raw, _, _, _, _ in
                    XCTAssertNil(chunk)
                    out.append((sha, raw ?? ""))
                }
                return out
            }
            XCTAssertEqual(texts.count, 4)
            XCTAssertTrue(texts.allSatisfy { Hashing.sha256Hex(utf8: $0.1) == $0.0 && ($0.1.hasPrefix("{") || $0.1.hasPrefix("o1,")) }, "\(texts)")
        }
        XCTAssertTrue(try DatabaseQueue(path: path).read { try $0.columns(in: "source_record").contains { $0.name == "chunk_id" } },
                      "migrated to v12")
    }

    /// This workspace's ledger as iapledger stored it before postings were derived (schema
    /// v12: a `posting` table, each posting a row), `change` run on it before it is put back.
    /// The columns of `table` in the ledger of the earlier schema (`main`), to copy a table of
    /// the current one (which may have more: `run.closed_through`) into it.
    static func columns(of table: String, in d: Database) throws -> String {
        try String.fetchAll(d, sql: "SELECT name FROM pragma_table_info(?, 'main') ORDER BY cid", arguments: [table]).joined(separator: ", ")
    }

    func storedPostingsLedger(_ change: String? = nil) throws {
        let path = ws.root.appendingPathComponent("v12.sqlite").path
        let old = try DatabaseQueue(path: path)
        try Schema.migrator().migrate(old, upTo: "v12-record-chunks")
        try old.writeWithoutTransaction { d in
            try d.execute(sql: "PRAGMA foreign_keys = OFF")
            try d.execute(sql: "ATTACH DATABASE ? AS now", arguments: [dbPath])
            let tables = try String.fetchAll(d, sql: """
                SELECT name FROM now.sqlite_schema WHERE type = 'table'
                AND name NOT IN ('grdb_migrations', 'posting_rule') AND name NOT LIKE 'sqlite_%'
                """)
            // A table a later migration creates (exception_episode) is not in the v12 ledger:
            // it must be empty here, and the upgrade creates it. The seals (v22) and the report
            // files registered (v23) are left out: a ledger of v12 has none, its first run after
            // the upgrade seals what came before, and its files were never registered; nor are
            // the orders files' headers (v25) or the files runs posted by (v26), which a ledger
            // of v12 did not keep.
            let oldTables = Set(try String.fetchAll(d, sql: "SELECT name FROM main.sqlite_schema WHERE type = 'table'"))
            for t in tables where !oldTables.contains(t) && !["seal", "run_input", "report_file", "source_file_header", "input_text"].contains(t) {
                XCTAssertEqual(try Int.fetchOne(d, sql: "SELECT count(*) FROM now.\(t)"), 0, t)
            }
            try d.inTransaction {
                for t in tables where oldTables.contains(t) {
                    try d.execute(sql: "INSERT INTO main.\(t) SELECT \(try Self.columns(of: t, in: d)) FROM now.\(t)")
                }
                try d.execute(sql: """
                    INSERT INTO main.posting (id, entry_id, account_id, currency, amount_minor, reporting_amount_minor)
                    SELECT id, entry_id, account_id, currency, amount_minor, reporting_amount_minor FROM now.posting ORDER BY id
                    """)
                if let change { try d.execute(sql: change) }
                return .commit
            }
        }
        try old.close()
        try FileManager.default.removeItem(atPath: dbPath)
        try FileManager.default.moveItem(atPath: path, toPath: dbPath)
    }

    /// A ledger that stored its postings (schema v12) verifies as it is, read-only; the next
    /// run checks each stored posting against its entry, drops the table for the view, and
    /// the postings, journal and chain read the same as before.
    func testALedgerWithStoredPostingsIsUpgradedToDerivedOnes() throws {
        let journal = "SELECT id, entry_id, account_id, currency, amount_minor, reporting_amount_minor FROM posting ORDER BY id"
        let before = try rows(journal)
        XCTAssertEqual(before.count, 12)
        try storedPostingsLedger()
        XCTAssertEqual(try DatabaseQueue(path: dbPath).read { try String.fetchOne($0, sql: "SELECT type FROM sqlite_schema WHERE name = 'posting'") }, "table")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        let head = r.chainHead
        XCTAssertEqual(try Ledger(path: dbPath, readOnly: true).read { try $0.rawRows(journal) }, before, "read-only: still the table")
        // `report --period` reads it as it is too, Journal included.
        let files = try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!).files.map(\.url)
        let sheet = try XLSXReader.sheets(try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("finance-") }))["Journal"] ?? []
        XCTAssertEqual(sheet.filter { $0.first.map { Int($0) != nil } ?? false }.count, 12, "the Journal lists the 12 postings: \(sheet)")
        XCTAssertEqual(try DatabaseQueue(path: dbPath).read { try String.fetchOne($0, sql: "SELECT type FROM sqlite_schema WHERE name = 'posting'") }, "table")

        try ws.run("2026-10-08")
        XCTAssertEqual(try DatabaseQueue(path: dbPath).read { try String.fetchOne($0, sql: "SELECT type FROM sqlite_schema WHERE name = 'posting'") }, "view")
        XCTAssertEqual(try rows(journal), before)
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.chainHead, head)
    }

    /// A stored posting that is not the one its entry's amounts give (changed by hand) stops
    /// the upgrade: the run fails naming it, and the ledger is left as it was for `verify`.
    /// So does a posting booked to another account, one deleted, one deleted and written
    /// again under a new id, and one of no entry. `verify`, which reads the ledger as it is,
    /// names the same posting, and the entry whose hash no longer matches.
    func testAStoredPostingThatIsNotItsEntrysStopsTheUpgrade() throws {
        let refunds = "(SELECT id FROM account WHERE name = 'Revenue:InApp:Refunds')"
        let cases: [(change: String, refusal: String, failing: Int64?)] = [
            ("DROP TRIGGER posting_no_update; UPDATE posting SET amount_minor = amount_minor + 1 WHERE id = 5",
             "posting 5 (of entry 2) is not the one its entry's amounts give", 2),
            ("DROP TRIGGER posting_no_update; UPDATE posting SET account_id = \(refunds) WHERE id = 5",
             "posting 5 (of entry 2) is not the one its entry's amounts give", 2),
            ("DROP TRIGGER posting_no_delete; DELETE FROM posting WHERE id = 5",
             "the ledger has 11 postings for 4 entries, not three for each", 2),
            // The last posting of entry 2, moved to a new id: its entry's hash still matches.
            ("DROP TRIGGER posting_no_delete; CREATE TEMP TABLE p6 AS SELECT * FROM posting WHERE id = 6; DELETE FROM posting WHERE id = 6; INSERT INTO posting SELECT 13, entry_id, account_id, currency, amount_minor, reporting_amount_minor FROM p6",
             "posting 13 (of entry 2) is not the one its entry's amounts give", nil),
            ("INSERT INTO posting (id, entry_id, account_id, currency, amount_minor, reporting_amount_minor) VALUES (13, 99, 1, 'USD', 0, 0)",
             "posting 13 names entry 99, which the ledger does not hold", nil),
        ]
        for (change, refusal, failing) in cases {
            ws.remove(); try setUpWithError()
            try storedPostingsLedger(change)
            let before = try Data(contentsOf: URL(fileURLWithPath: dbPath))
            XCTAssertThrowsError(try ws.run("2026-10-08"), change) {
                XCTAssertTrue("\($0)".contains("migration v13-postings-from-entries refused it: \(refusal)"), "\($0)")
                XCTAssertTrue("\($0)".contains("iapledger verify"), "\($0)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dbPath)), before, "the ledger is unchanged")
            let r = try Audit(workspace: ws.workspace).run()
            XCTAssertEqual(r.firstFailingEntry, failing, "\(change): \(r.problems)")
            XCTAssertTrue(r.problems.contains { $0.entryId == nil && $0.message.hasPrefix("the ledger's stored postings: \(refusal)") },
                          "\(change): \(r.problems)")
        }
    }

    /// `verify --runs` lists each run's head as the entries give it now: the head the run
    /// printed and wrote on its Run Info sheet.
    func testEachRunsHeadIsTheOneItRecordedAndWrote() throws {
        try ws.write("inbox/receipts/r2.jsonl", Receipt.response([Receipt.item("8004", purchased: "2026-10-08T10:00:00Z")]))
        try ws.run("2026-10-09")
        try ws.run("2026-10-10")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.runHeads.map(\.runId), [1, 2, 3])
        XCTAssertEqual(r.runHeads.map(\.lastEntryId), [4, 5, 5], "run 3 posted nothing: its head is run 2's")
        let recorded = try DatabaseQueue(path: dbPath).read { try String.fetchAll($0, sql: "SELECT chain_head FROM run ORDER BY id") }
        XCTAssertEqual(r.runHeads.map(\.expected), recorded)
        XCTAssertEqual(r.runHeads.last?.expected, r.chainHead)
        let runInfo = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-09/finance-2026-10-09.xlsx"))["Run Info"] ?? []
        XCTAssertTrue(runInfo.contains { $0.first == "Chain head after run 2 (last entry's hash)" && $0.dropFirst().first == r.chainHead }, "\(runInfo)")
        XCTAssertEqual(r.runHeads[1].expected, r.runHeads[2].expected)
    }

    /// What the night reads from tables no hash covers is checked against the source records:
    /// a refund date written into a stored transaction (the next night posts it as a refund),
    /// a sale's status set by hand (a waiting sale that will never post), a book or an app
    /// account token changed. Each was missed before.
    func testStoredTransactionsAreCheckedAgainstTheirSources() throws {
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "UPDATE store_transaction SET cancellation_ms = 1791280800000 WHERE transaction_id = '8001'")
        }
        try ws.write("inbox/receipts/next.jsonl", Receipt.response([Receipt.item("8004", purchased: "2026-10-07T10:00:00Z")]))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE transaction_id = '8001' AND kind = 'refund'"), [["1"]], "the night posted it")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.hasPrefix("transaction 8001: its stored refund (dated 2026-10-06) is reported by none of its 1 source record: it was written into the ledger, not read") }, "\(r.problems)")

        try db.write { d in
            try d.execute(sql: "UPDATE store_transaction SET sale_status = 'posted', pending_reason = NULL WHERE transaction_id = '8004'")
            try d.execute(sql: "UPDATE store_transaction SET sale_status = 'pending', pending_reason = 'x' WHERE transaction_id = '8003'")
            try d.execute(sql: "UPDATE store_transaction SET app_account_token = 'someone-else' WHERE transaction_id = '8002'")
        }
        r = try Audit(workspace: ws.workspace).run()
        let messages = r.problems.map(\.message)
        XCTAssertTrue(messages.contains("transaction 8003 has a sale entry but its status is pending: the status was changed after it was posted"), "\(messages)")
        XCTAssertTrue(r.problems.contains { $0.message.contains("transaction 8002") && $0.message.contains("differs from the stored transaction in app account token") }, "\(messages)")
        // 8004 was posted on the second night: its sale entry exists, so setting `posted` is no lie.
        XCTAssertFalse(messages.contains { $0.contains("transaction 8004") }, "\(messages)")
    }

    /// A sale waiting for a rule, its stored transaction deleted: nothing chained or sealed
    /// held the row, and the sale would never post. A trigger refuses the delete, and past it
    /// `verify` names the transaction its verified record reports.
    func testADeletedTransactionIsNamedByTheRecordThatReportsIt() throws {
        try ws.write("inbox/receipts/next.jsonl", Receipt.response([Receipt.item("8005", product: "vip.monthly", purchased: "2026-10-07T10:00:00Z")]))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "vip.monthly,USA,9.99,2020-01-01", with: "vip.monthly,DEU,9.99,2020-01-01"))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT sale_status FROM store_transaction WHERE transaction_id = '8005'"), [["pending"]])
        let db = try DatabaseQueue(path: dbPath)
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "DELETE FROM store_transaction WHERE transaction_id = '8005'") })
        try tamper(past: "store_transaction_no_delete", "DELETE FROM store_transaction WHERE transaction_id = '8005'")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["1 transaction reported by verified source records is not stored: 8005 (inbox/receipts/next.jsonl:1): deleted from the ledger after it was read (a sale waiting for a rule or an order, deleted, never posts)"])
    }

    /// An order version is its line read again under its file's header: a storefront changed in
    /// the ledger (it prices a sale without one of its own) is named with the line's value; the
    /// header is sealed with its file, so changing it instead breaks the run's seal.
    func testAChangedOrderVersionIsNamedWithItsLinesValue() throws {
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.orderVersions, 1)
        XCTAssertEqual(r.orderVersionsWithoutHeader, 0)
        XCTAssertEqual(try rows("SELECT header FROM source_file_header"), [[String(ReconciliationTests.header.dropLast())]])
        let db = try DatabaseQueue(path: dbPath)
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "UPDATE order_version SET storefront = 'USA'") })
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "DELETE FROM order_version") })
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "UPDATE source_file_header SET header = 'x'") })
        try tamper(past: "order_version_no_update", "UPDATE order_version SET storefront = 'USA', quantity = 2 WHERE order_id = 'o1'")
        r = try Audit(workspace: ws.workspace).run()
        // (And the sale booked at its storefront no longer finds it in its order.)
        XCTAssertEqual(r.problems.map(\.message), ["sale of transaction 8002: booked in JPN as order o1's storefront, but no version of that order names this transaction with that storefront",
                                                   "order o1 (version #1, from inbox/orders/o.csv:2) is stored with quantity '2' where the line has '1', storefront 'USA' where the line has 'JPN': changed in the ledger after it was read"])
        try tamper(past: "order_version_no_update", "UPDATE order_version SET storefront = 'JPN', quantity = 1 WHERE order_id = 'o1'")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // The header rewritten so the columns swap: the line reads otherwise, and the seal breaks.
        try tamper(past: "source_file_header_no_update", "UPDATE source_file_header SET header = replace(header, 'account_id,transaction_id', 'transaction_id,account_id')")
        r = try Audit(workspace: ws.workspace).run()
        let messages = r.problems.map(\.message)
        XCTAssertTrue(messages.contains(Self.sealDiffers(run: 1, seal: 1, records: 4)), "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("order o1 (version #1, from inbox/orders/o.csv:2) is stored with account_id 'a1' where the line has '8002'") }, "\(messages)")
    }

    /// An order version written by hand (order_version has no guard against an insert): one
    /// naming a receipt's line (an auditor's find: a waiting sale then booked at its
    /// storefront, verify OK), one naming no record at all (foreign keys off, as in the
    /// sqlite3 shell), and one copied from an existing version's line. Each is named.
    func testAnOrderVersionWrittenByHandIsNamed() throws {
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        let receiptLine = try XCTUnwrap(try rows("SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.kind = 'receipts' ORDER BY r.id LIMIT 1").first?.first)
        let columns = "order_id, record_id, account_id, transaction_id, product_id, quantity, credited_units, credited_at, credited_ms, environment, storefront"
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "INSERT INTO order_version (\(columns)) VALUES ('o9', \(receiptLine), 'a9', '8001', 'coins.100', 1, 0, '2026-10-06T10:00:00Z', 1791194400000, 'production', 'JPN')") }
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["order o9 (version #2) names inbox/receipts/r.jsonl:1, a line of a receipts file, not an order line: the version was written by hand (a night stores one only from a verified line of an orders file)"])
        try tamper(past: "order_version_no_delete", "DELETE FROM order_version WHERE id = 2")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)

        try db.writeWithoutTransaction { d in
            try d.execute(sql: "PRAGMA foreign_keys = OFF")
            try d.execute(sql: "INSERT INTO order_version (\(columns)) VALUES ('o9', 999999, 'a9', '8001', 'coins.100', 1, 0, '2026-10-06T10:00:00Z', 1791194400000, 'production', 'JPN')")
            try d.execute(sql: "PRAGMA foreign_keys = ON")
        }
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["order o9 (version #2) names source record #999999, which the ledger does not hold: the version was written by hand (a night stores one only from an order line it read)",
                                                   "order_version row #2 names a row of source_record that the ledger does not hold: written or deleted by hand with foreign keys off (a night enforces them)"])
        try tamper(past: "order_version_no_delete", "DELETE FROM order_version WHERE id = 2")

        // A copy of an older version (not the latest line read): said as a copy, not as versions
        // reordered.
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "o2,a1,8003,coins.550,3,1650,2026-10-06T10:00:01Z,production,USA,,\n")
        try ws.run("2026-10-08")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try db.write { try $0.execute(sql: "INSERT INTO order_version (\(columns)) SELECT \(columns) FROM order_version WHERE id = 1") }
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["order version #3 comes from the same line as version #1: a line makes one version, so one of them was copied in by hand"])
    }

    /// An order version deleted (its sale would post at another storefront, its order leave
    /// reconciliation) is named by the line that made it, and by the gap it leaves among ids.
    func testADeletedOrderVersionIsNamed() throws {
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "o2,a1,8003,coins.550,3,1650,2026-10-06T10:00:01Z,production,USA,,\n"
                     + "o3,a1,8001,coins.100,1,100,2026-10-06T10:00:02Z,production,USA,,\n")
        // A line that repeats its order's line as it stands makes no version, and is no problem.
        try ws.write("inbox/orders/again.csv", ReconciliationTests.header + "o1,a1,8002,coins.100,1,100,2026-10-05T10:00:01Z,production,JPN,,\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT count(*) FROM order_version"), [["3"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try tamper(past: "order_version_no_delete", "DELETE FROM order_version WHERE order_id IN ('o2', 'o3')")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["2 verified order lines made no order version, though they repeat no earlier line of their order: order o2 from inbox/orders/o2.csv:2, order o3 from inbox/orders/o2.csv:3: the versions were deleted (a night stores a version for every new line of an order)"])
        try tamper(past: "order_version_no_delete", "DELETE FROM order_version WHERE order_id = 'o1'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.hasPrefix("4 verified order lines made no order version, though they repeat no earlier line of their order: order o1 from inbox/orders/o.csv:2, order o1 from inbox/orders/again.csv:2,") }, "\(r.problems)")
        XCTAssertTrue(r.problems.contains { $0.message == "sale of transaction 8002: booked in JPN as order o1's storefront, but no version of that order names this transaction with that storefront" }, "\(r.problems)")
    }

    /// The third round of an auditor's edits: an order's credit time moved (the earliest
    /// credited names a sale's storefront), two versions of an order swapped (an older line
    /// made its latest), the newest version of an order deleted where it restored an earlier
    /// line, and a transaction's first record switched to a later, conflicting one (its
    /// quantity then taken from it). Each is named.
    func swapVersions2And3() throws {
        for sql in ["UPDATE order_version SET id = -2 WHERE id = 2", "UPDATE order_version SET id = 2 WHERE id = 3", "UPDATE order_version SET id = 3 WHERE id = -2"] {
            try tamper(past: "order_version_no_update", sql)
        }
    }

    func testCreditTimesVersionOrderAndFirstRecordsAreChecked() throws {
        let line = "o1,a1,8002,coins.100,1,100,2026-10-05T10:00:01Z,production,JPN,,"
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "o1,a1,8002,coins.100,1,100,2026-10-05T10:00:01Z,production,JPN,,2026-10-06T09:00:00Z\n")
        try ws.write("inbox/receipts/again.jsonl", Receipt.response([Receipt.item("8001", quantity: 5, purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-08")
        // Restored (with another order's line: the same bytes as o.csv would be that file sent
        // again, which makes no new versions).
        try ws.write("inbox/orders/o3.csv", ReconciliationTests.header + line + "\no9,a9,8003,coins.550,3,1650,2026-10-06T10:00:09Z,production,USA,,\n")
        try ws.run("2026-10-09")
        XCTAssertEqual(try rows("SELECT id, reversed_at IS NOT NULL FROM order_version WHERE order_id = 'o1' ORDER BY id"), [["1", "0"], ["2", "1"], ["3", "0"]])
        let first = try XCTUnwrap(try rows("SELECT first_record_id FROM store_transaction WHERE transaction_id = '8001'").first?.first)
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)

        try tamper(past: "order_version_no_update", "UPDATE order_version SET credited_ms = credited_ms - 86400000 WHERE id = 1")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.hasPrefix("order o1 (version #1, from inbox/orders/o.csv:2) is stored with credited_ms '1791108001000' where the line has '1791194401000'") }, "\(r.problems)")
        try tamper(past: "order_version_no_update", "UPDATE order_version SET credited_ms = credited_ms + 86400000 WHERE id = 1")

        try swapVersions2And3()
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message == "order version #3 comes from a line read before the line of a version before it: versions were reordered (an older line made an order's latest state)" }, "\(r.problems)")
        try swapVersions2And3()
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)

        try tamper(past: "order_version_no_delete", "DELETE FROM order_version WHERE id = 3")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["order version #3 is missing (version ids run on without a gap, and none is ever deleted): removed",
                                                   "1 verified order line made no order version, though it repeats no earlier line of its order: order o1 from inbox/orders/o3.csv:2: the version was deleted (a night stores a version for every new line of an order)"])

        let conflicting = try XCTUnwrap(try rows("SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/receipts/again.jsonl'").first?.first)
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "UPDATE store_transaction SET quantity = 5, first_record_id = \(conflicting) WHERE transaction_id = '8001'") }
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message == "transaction 8001 is first reported by inbox/receipts/r.jsonl:1 (record #\(first)), but the ledger holds record #\(conflicting) as its first: changed, so the transaction is given another record's figures" }, "\(r.problems)")
    }

    /// A fourth round: the checks judge from the records, not from findings a hand can add (a
    /// made-up TRANSACTION_CONFLICT on a record switched them off); a file row of no sealed run
    /// (the night would skip the file it names) is named; and a file's identity on disk set to
    /// a grown file's is not taken for the version read (the night reads what it grew by).
    func testMadeUpFindingsFileRowsAndIdentitiesDoNotHideEdits() throws {
        let record = try XCTUnwrap(try rows("""
            SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/receipts/r.jsonl' AND r.line = 2
            """).first?.first)
        try tamper(past: "finding_added_by_a_run", """
            UPDATE store_transaction SET cancellation_ms = NULL WHERE transaction_id = '8002';
            INSERT INTO finding (code, transaction_id, record_id, message, first_run_id, last_run_id) VALUES ('TRANSACTION_CONFLICT', '8002', \(record), 'x', 1, 1)
            """)
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message == "transaction 8002: inbox/receipts/r.jsonl:2 reports it refunded, but the ledger stores no refund for it: removed (its sale would post, or stay posted, without its refund)" }, "\(r.problems)")

        let fresh = try TestWorkspace()
        defer { fresh.remove() }
        try fresh.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("8101", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try fresh.run("2026-10-07")
        let path = fresh.root.appendingPathComponent("ledger.sqlite").path
        // The file grows by a line; its row is given the grown file's identity by hand.
        let grown = Receipt.response([Receipt.item("8101", purchased: "2026-10-05T10:00:00Z")]) + "\n" + Receipt.response([Receipt.item("8102", purchased: "2026-10-06T10:00:00Z")]) + "\n"
        try fresh.write("inbox/receipts/a.jsonl", grown)
        let key = try XCTUnwrap(FileStat.key(fresh.root.appendingPathComponent("inbox/receipts/a.jsonl").path))
        try DatabaseQueue(path: path).write { try $0.execute(sql: "UPDATE source_file SET stat_key = ? WHERE path = 'inbox/receipts/a.jsonl'", arguments: [key]) }
        Thread.sleep(forTimeInterval: 2.2)   // (a file is taken by its identity once it has settled)
        try fresh.run("2026-10-08")
        XCTAssertEqual(try Ledger(path: path).read { try $0.rawRows("SELECT count(*) FROM store_transaction WHERE transaction_id = '8102'") }, [["1"]],
                       "read, not skipped as the version read before")
        // A file row of no run names a file as read (foreign keys off, as in the sqlite3 shell): named.
        var noKeys = Configuration()
        noKeys.foreignKeysEnabled = false
        try DatabaseQueue(path: path, configuration: noKeys).write { try $0.execute(sql: """
            INSERT INTO source_file (run_id, path, kind, sha256, size_bytes, records, new_records) VALUES (0, 'inbox/receipts/b.jsonl', 'receipts', '\(String(repeating: "b", count: 64))', 10, 0, 0)
            """) }
        r = try Audit(workspace: fresh.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.hasSuffix("(inbox/receipts/b.jsonl) belongs to run 0, which is not a finished run under a seal: added by hand (a night would take the file it names as read, and skip it)") }, "\(r.problems)")
    }

    /// A ledger whose orders files were read before their headers were kept (schema v24 and
    /// before) verifies, its order versions counted as not read again.
    func testOrderVersionsOfFilesReadBeforeHeadersWereKeptAreCounted() throws {
        try tamper(past: "source_file_header_no_delete", "DELETE FROM source_file_header")
        let r = try Audit(workspace: ws.workspace).run()
        // (The seal covered the header: deleting it breaks run 1's seal, as it should.)
        XCTAssertEqual(r.problems.map(\.message), [Self.sealDiffers(run: 1, seal: 1, records: 4)])
        XCTAssertEqual(r.orderVersions, 0)
        XCTAssertEqual(r.orderVersionsWithoutHeader, 1)
    }

    func testASaleMarkedPostedWithoutItsEntryIsCaught() throws {
        // A sale waiting for a rule (no JPY price for coins.550), marked posted by hand.
        try ws.write("inbox/receipts/next.jsonl", Receipt.response([Receipt.item("8005", product: "vip.monthly", purchased: "2026-10-07T10:00:00Z")]))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "vip.monthly,USA,9.99,2020-01-01", with: "vip.monthly,DEU,9.99,2020-01-01"))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT sale_status FROM store_transaction WHERE transaction_id = '8005'"), [["pending"]])
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET sale_status = 'posted', pending_reason = NULL WHERE transaction_id = '8005'") }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["transaction 8005 is marked posted but has no sale entry: its sale entry was removed, or its status was changed by hand (then its sale will never post)"])
    }

    /// A reversal asked for by hand (a row in `reversal_request`, which only Apple's
    /// REFUND_REVERSED notification should write) was posted by the next night and passed
    /// verify; then verify caught it once posted; now the night refuses to build on it (no
    /// trigger refuses an insert), and verify names the request.
    func testAReversalWithoutAppleNotificationIsCaught() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "INSERT INTO reversal_request (book, transaction_id, date, notification_uuid) VALUES ('production', '8002', '2026-10-08', 'forged-uuid')") }
        XCTAssertThrowsError(try ws.run("2026-10-08")) {
            XCTAssertTrue("\($0)".contains("the ledger fails the checks a night makes before it writes: its refund reversal of transaction 8002 is asked for by forged-uuid, which is no REFUND_REVERSED notification of it: written by hand"), "\($0)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE transaction_id = '8002' AND kind = 'refund_reversal'"), [["0"]], "nothing posted")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message == "the refund reversal of transaction 8002 (production, dated 2026-10-08, by notification forged-uuid) is asked for by no verified REFUND_REVERSED notification of that UUID: written by hand" }, "\(r.problems)")
    }

    /// A notification made up with its request (an auditor's review: a REFUND_REVERSED row
    /// naming a receipt line as its record): the night posted the reversal, exit 0, and trace
    /// showed the notification as Apple's; a notification alone passed verify. Now the night
    /// refuses, and verify names the notification no verified record is.
    func testANotificationWrittenByHandIsCaught() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write {
            try $0.execute(sql: """
                INSERT INTO notification (uuid, record_id, run_id, notification_type, subtype, signed_ms, environment, transaction_id)
                VALUES ('11111111-2222-3333-4444-555555555555', (SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/receipts/r.jsonl' AND r.line = 1), 1, 'REFUND_REVERSED', NULL, 1786700000000, 'Production', '8002')
                """)
        }
        var r = try Audit(workspace: ws.workspace).run()
        let said = "the ledger holds notification REFUND_REVERSED 11111111-2222-3333-4444-555555555555 of transaction 8002 as read from inbox/receipts/r.jsonl:1, but no verified record is a notification of that UUID: written by hand (trace shows it as Apple's)"
        XCTAssertTrue(r.problems.contains { $0.message == said }, "\(r.problems.map(\.message))")
        XCTAssertFalse(r.ok)
        try db.write { try $0.execute(sql: "INSERT INTO reversal_request (book, transaction_id, date, notification_uuid) VALUES ('production', '8002', '2026-10-08', '11111111-2222-3333-4444-555555555555')") }
        XCTAssertThrowsError(try ws.run("2026-10-08")) {
            XCTAssertTrue("\($0)".contains("its refund reversal of transaction 8002 is asked for by notification 11111111-2222-3333-4444-555555555555, whose record inbox/receipts/r.jsonl:1 is no verified signed record: written by hand"), "\($0)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE kind = 'refund_reversal'"), [["0"]], "nothing posted")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message == said }, "\(r.problems.map(\.message))")
    }

    /// The reconciliation the ledger holds is derived again from its transactions and orders
    /// (an auditor's review: an exception resolved past its guard, its detail or price
    /// rewritten, a match made up or removed, all passed verify, and trace and the workbooks
    /// showed them as the night's).
    func testAReconciliationChangedByHandIsCaught() throws {
        func said() throws -> [String] {
            try Audit(workspace: ws.workspace).run().problems.map(\.message).filter { $0.contains("exception") || $0.contains("match") }
        }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [])
        XCTAssertEqual(try rows("SELECT category, transaction_id, order_id FROM exception ORDER BY 1, 2"),
                       [["NOT_CREDITED", "8001", ""], ["NOT_CREDITED", "8003", ""], ["REFUNDED_STILL_CREDITED", "8002", "o1"]])
        let lost = "category = 'NOT_CREDITED' AND transaction_id = '8001'"
        try tamper(past: "exception_resolved_by_a_run", "UPDATE exception SET resolved_on = '2026-10-07', resolved_run_id = 1 WHERE \(lost)")
        XCTAssertEqual(try said(), ["exception NOT_CREDITED of transaction 8001 is stored resolved (on 2026-10-07, by run 1), but the ledger's transactions and orders still give it: resolved by hand (or they were changed since the night)",
                                    "exception NOT_CREDITED (transaction 8001, order ): first seen 2026-10-07 (run 1, as of 2026-10-07), last seen 2026-10-07 (run 1, as of 2026-10-07), resolved 2026-10-07 (run 1, as of 2026-10-07): its days are not those of the nights its runs name, or its runs are out of order: changed by hand (its age or its resolution)"])
        try tamper(past: "exception_resolved_by_a_run", "UPDATE exception SET resolved_on = NULL, resolved_run_id = NULL WHERE \(lost)")
        XCTAssertEqual(try said(), [])

        let detail = try XCTUnwrap(try rows("SELECT detail FROM exception WHERE \(lost)").first?.first)
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "UPDATE exception SET detail = 'cleared by finance', gross_minor = 0 WHERE \(lost)") }
        XCTAssertEqual(try said(), ["exception NOT_CREDITED of transaction 8001: its detail reads \"cleared by finance\" where they give \"\(detail)\"; its price 0 USD (minor units) where they give 99 USD: changed by hand (or they were changed since the night)"])
        try db.write { try $0.execute(sql: "UPDATE exception SET detail = ?, gross_minor = 99 WHERE \(lost)", arguments: [detail]) }
        XCTAssertEqual(try said(), [])

        try db.write { try $0.execute(sql: "INSERT INTO reconciled_match (transaction_id, order_id) VALUES ('8001', 'o1'), ('9999', 'o9')") }
        XCTAssertEqual(try said(), [
            "transaction 8001 is stored as matched with order o1, but its orders do not match it so (an exception between them, or no such active order): made up",
            "1 matched pair names a transaction id with no transaction or order in the ledger: made up",
        ])
        try db.write { try $0.execute(sql: "DELETE FROM reconciled_match") }
        XCTAssertEqual(try said(), [])

        try tamper(past: "exception_added_by_a_run", """
            INSERT INTO exception (category, transaction_id, order_id, first_seen, first_run_id, last_seen, last_run_id, detail)
            VALUES ('DUPLICATE_CREDIT', '8003', 'o7', '2026-10-07', 1, '2026-10-07', 1, 'made up')
            """)
        XCTAssertEqual(try said(), ["exception DUPLICATE_CREDIT of transaction 8003 and order o7 is stored open, but the ledger's transactions and orders do not give it: made up, or its resolution removed (or they were changed since the night)"])
    }

    /// A link of a transaction to a record that told it, made up (an auditor's review: trace
    /// listed an order line about another transaction as a sale's first source; verify passed).
    func testALinkToARecordThatDoesNotReportTheTransactionIsCaught() throws {
        func record(_ path: String, _ line: Int) -> String {
            "(SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = '\(path)' AND r.line = \(line))"
        }
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "INSERT INTO transaction_source (transaction_id, record_id) VALUES ('8001', \(record("inbox/orders/o.csv", 2)))") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [
            "transaction 8001 is linked to inbox/orders/o.csv:2 as a record that told it, but that record is no verified record of a receipt or signed data that reports it: made up (trace lists it among the transaction's sources)",
        ])
        try Tamper.run(dbPath, past: "transaction_source_no_delete", "DELETE FROM transaction_source WHERE transaction_id = '8001'")
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [])
        try db.write { try $0.execute(sql: "INSERT INTO transaction_source (transaction_id, record_id) VALUES ('8001', \(record("inbox/receipts/r.jsonl", 2)))") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [
            "transaction 8001 is linked to inbox/receipts/r.jsonl:2 as a record that told it, but that record does not report it: made up (trace lists it among the transaction's sources)",
        ])
        // A link of a later record that does report it (a receipt listing the purchase again) is the night's own.
        try Tamper.run(dbPath, past: "transaction_source_no_delete", "DELETE FROM transaction_source WHERE transaction_id = '8001'")
        try ws.write("inbox/receipts/again.jsonl", Receipt.response([Receipt.item("8001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT count(*) FROM transaction_source WHERE transaction_id = '8001'"), [["1"]])
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [])
    }

    /// The app a transaction was bought in, changed in the ledger (an auditor's review: it passed).
    func testABundleIdChangedIsCaught() throws {
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "UPDATE store_transaction SET bundle_id = 'com.evil' WHERE transaction_id = '8001'") }
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.contains("its source record inbox/receipts/r.jsonl:1 differs from the stored transaction in bundle id") }, "\(problems)")
    }

    /// A row of grdb_migrations deleted from among the others (an auditor's review): verify
    /// passed, and the night said the tables were not iapledger's and to build a new ledger.
    func testAMigrationRowDeletedIsNamed() throws {
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v9-runs-and-records-fixed'") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message),
                       ["the ledger's list of applied schema migrations (grdb_migrations) lacks v9-runs-and-records-fixed, though later ones are applied: its row was deleted (a night would run it again on tables already made)"])
        let before = try Data(contentsOf: URL(fileURLWithPath: dbPath))
        XCTAssertThrowsError(try ws.run("2026-10-08")) {
            XCTAssertTrue("\($0)".contains("ledger.sqlite: cannot bring the ledger's schema up to date: its list of applied schema migrations (grdb_migrations) lacks v9-runs-and-records-fixed, though later ones are applied, and migration v9-runs-and-records-fixed, run again, failed: "), "\($0)")
            XCTAssertTrue("\($0)".contains("its row was deleted by hand. No data was changed. Restore the ledger from a copy made before the change (or put the row back, INSERT INTO grdb_migrations VALUES ('v9-runs-and-records-fixed'), and check it with `iapledger verify`)"), "\($0)")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dbPath)), before)
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "INSERT INTO grdb_migrations VALUES ('v9-runs-and-records-fixed')") }
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// Two orders whose ids differ only in Unicode normalisation (é as one code point, and as
    /// e with a combining accent) are two orders to SQLite and to the night; verify took them
    /// for one (a review: a false difference of account, and one "resolved by hand").
    func testOrderIdsThatDifferOnlyInNormalisationAreTwoOrders() throws {
        try ws.write("inbox/orders/n.csv", ReconciliationTests.header
                     + "ord-\u{E9},acct-1,,coins.100,1,100,2026-10-06T10:00:01Z,production,USA,,\n"
                     + "ord-e\u{301},acct-2,,coins.100,1,100,2026-10-06T10:00:02Z,production,USA,,\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT count(*) FROM exception WHERE category = 'CREDITED_WITHOUT_TRANSACTION' AND resolved_on IS NULL"), [["2"]])
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(audit.problems.map(\.message), [])
        XCTAssertEqual(audit.reconciliation?.open, 5)
    }

    /// A sale still waiting for a rule whose MISSING_RULE finding is resolved by hand (past its
    /// guard: an auditor's review): it left `findings` and Run Info, verify passed, and the
    /// night built on it. Both now name it.
    func testAWaitingSalesFindingResolvedByHandIsCaught() throws {
        try ws.write("inbox/receipts/next.jsonl", Receipt.response([Receipt.item("8005", product: "vip.monthly", purchased: "2026-10-07T10:00:00Z")]))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "vip.monthly,USA,9.99,2020-01-01", with: "vip.monthly,DEU,9.99,2020-01-01"))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT code, resolved_run_id IS NULL FROM finding WHERE transaction_id = '8005'"), [["MISSING_RULE", "1"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try tamper(past: "finding_resolved_by_a_run", "UPDATE finding SET resolved_run_id = 2 WHERE transaction_id = '8005'")
        let said = "transaction 8005 still waits for a rule (MISSING_RULE), but its MISSING_RULE finding is marked resolved: resolved by hand (the nights resolve it only when the sale posts)"
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().problems.map(\.message).contains(said))
        XCTAssertThrowsError(try ws.run("2026-10-09")) { XCTAssertTrue("\($0)".contains(said), "\($0)") }
    }

    /// A match removed: the pair its orders match is said missing.
    func testAMatchRemovedIsCaught() throws {
        try ws.write("inbox/orders/p.csv", ReconciliationTests.header + "o3,a1,8003,coins.550,3,1650,2026-10-06T10:00:01Z,production,USA,,\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT transaction_id, order_id FROM reconciled_match"), [["8003", "o3"]])
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [])
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "DELETE FROM reconciled_match") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message),
                       ["transaction 8003 and order o3 match, but the ledger does not hold them as matched: removed"])
    }

    /// A night does not build on a ledger changed by hand: it checks cheaply before it writes
    /// (the schema, the last entry against the last run's chain head, the month totals), and
    /// stops, changing nothing. It used to go on, posting with the append-only trigger gone, or
    /// writing a Trial Balance that did not sum to zero.
    func testANightRefusesALedgerChangedByHand() throws {
        try ws.write("inbox/receipts/next.jsonl", Receipt.response([Receipt.item("8009", purchased: "2026-10-07T10:00:00Z")]))
        func refused(_ expected: String, _ line: UInt = #line) throws {
            let before = try Data(contentsOf: URL(fileURLWithPath: dbPath))
            XCTAssertThrowsError(try ws.run("2026-10-08"), line: line) { error in
                XCTAssertTrue("\(error)".contains("the ledger fails the checks a night makes before it writes: ") && "\(error)".contains(expected), "\(error)", line: line)
                XCTAssertTrue("\(error)".contains("Nothing was written. Run `iapledger verify`"), "\(error)", line: line)
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dbPath)), before, "the ledger is unchanged", line: line)
        }
        let db = try DatabaseQueue(path: dbPath)
        let trigger = try db.read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_schema WHERE name = 'entry_no_update'")! }
        try db.write { try $0.execute(sql: "DROP TRIGGER entry_no_update") }
        try refused("its trigger entry_no_update is missing")
        try db.write { try $0.execute(sql: trigger) }

        try tamper(past: "entry_no_update", "UPDATE entry SET hash = replace(hash, substr(hash, 1, 1), 'f') WHERE id = (SELECT max(id) FROM entry)")
        try refused("its last entry's hash is not the chain head run 1 recorded when it committed")
        try tamper(past: "entry_no_update", "UPDATE entry SET hash = (SELECT chain_head FROM run WHERE id = 1) WHERE id = (SELECT max(id) FROM entry)")

        // An account renamed (an auditor's review: the night wrote its workbooks with the new
        // name and registered them as its own).
        try tamper(past: "account_no_update", "UPDATE account SET name = 'Revenue:InApp:Salez' WHERE name = 'Revenue:InApp:Sales'")
        try refused("its posting rules (posting_rule, with their accounts' names) are not the accounting contract's")
        try tamper(past: "account_no_update", "UPDATE account SET name = 'Revenue:InApp:Sales' WHERE name = 'Revenue:InApp:Salez'")

        try db.write { try $0.execute(sql: "UPDATE balance_month SET balance_minor = balance_minor + 100000 WHERE (book, month, account_id, currency) = (SELECT book, month, account_id, currency FROM balance_month WHERE book = 'production' ORDER BY 1, 2, 3, 4 LIMIT 1)") }
        try refused("its month totals of the production book do not balance in")
        try db.write { try $0.execute(sql: "UPDATE balance_month SET balance_minor = balance_minor - 100000 WHERE (book, month, account_id, currency) = (SELECT book, month, account_id, currency FROM balance_month WHERE book = 'production' ORDER BY 1, 2, 3, 4 LIMIT 1)") }
        // A row of the sales totals deleted: the balances still sum to zero, but the revenue
        // sheets would leave that revenue out. The night refuses; verify names the row by its
        // key (it named the row beside it, which was right).
        let activity = try db.read { try Row.fetchAll($0, sql: "SELECT * FROM activity_month WHERE book = 'production' AND kind = 'sale' ORDER BY 1, 2, 3, 4, 5, 6") }
        XCTAssertGreaterThan(activity.count, 1)
        let gone = activity[0]
        let key = "production|\(gone["month"] as String)|\(gone["storefront"] as String)|\(gone["product_id"] as String)|\(gone["currency"] as String)|sale"
        try db.write { try $0.execute(sql: "DELETE FROM activity_month WHERE book = ? AND month = ? AND storefront = ? AND product_id = ? AND currency = ? AND kind = ?",
                                      arguments: [gone["book"], gone["month"], gone["storefront"], gone["product_id"], gone["currency"], gone["kind"]]) }
        try refused("its month totals of sales and refunds (activity_month) do not give its month balances (balance_month): production \(gone["month"] as String) Assets:AppStore:Receivable \(gone["currency"] as String) differs by \(gone["proceeds_minor"] as Int64)")
        let named = try Audit(workspace: ws.workspace).run().problems.map(\.message).filter { $0.contains("activity_month") }
        XCTAssertEqual(named.count, 1, "\(named)")
        XCTAssertTrue(named.first?.hasPrefix("the month totals (activity_month) differ from the postings and entries they sum: no row stored for \(key), the entries give \(key)|") == true, "\(named)")
        XCTAssertFalse(named.first?.contains("; ") == true, "that row alone: \(named)")
        try db.write { d in
            try d.execute(sql: "INSERT INTO activity_month VALUES (\(Array(repeating: "?", count: gone.count).joined(separator: ", ")))",
                          arguments: StatementArguments(gone.databaseValues))
        }

        XCTAssertNoThrow(try ws.run("2026-10-08"), "restored, the night runs")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // An index an analyst added changes no figure: the night goes on, verify names it.
        try db.write { try $0.execute(sql: "CREATE INDEX analyst ON entry(product_id)") }
        XCTAssertNoThrow(try ws.run("2026-10-09"))
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().problems.contains { $0.message.hasPrefix("the ledger holds index analyst") })
    }

    /// `report` and `close` refuse a ledger changed by hand as a night does: `report` wrote
    /// workbooks of the changed figures and registered them, so that `verify --workbook` then
    /// vouched for them as iapledger's own; `close` sealed the change. Nothing is written.
    func testReportAndCloseRefuseALedgerChangedByHand() throws {
        try tamper(past: "entry_no_update", "UPDATE entry SET hash = replace(hash, substr(hash, 1, 1), 'f') WHERE id = (SELECT max(id) FROM entry)")
        let before = try Data(contentsOf: URL(fileURLWithPath: dbPath))
        let set = ws.root.appendingPathComponent("reports/2026-10-07")
        let files = try FileManager.default.contentsOfDirectory(atPath: set.path).sorted()
        let bytes = try files.map { try Data(contentsOf: set.appendingPathComponent($0)) }
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!)) { error in
            XCTAssertTrue("\(error)".contains("the ledger fails the checks a report makes before it writes: its last entry's hash is not the chain head run 1 recorded"), "\(error)")
        }
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!))
        XCTAssertThrowsError(try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!,
                                                     closedBy: "test", closedAt: "2026-10-07T12:00:00Z")) { error in
            XCTAssertTrue("\(error)".contains("the ledger fails the checks a close makes before it writes: "), "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: set.path).sorted(), files)
        XCTAssertEqual(try files.map { try Data(contentsOf: set.appendingPathComponent($0)) }, bytes, "no workbook written again")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dbPath)), before, "nothing registered, nothing closed")
        // A migration's row removed from the middle does not make it an older ledger that
        // `report` reads as it is (it skipped the checks).
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = (SELECT identifier FROM grdb_migrations ORDER BY rowid LIMIT 1 OFFSET 4)") }
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!)) { error in
            XCTAssertTrue("\(error)".contains("the ledger fails the checks a report makes before it writes: "), "\(error)")
        }
        XCTAssertEqual(try files.map { try Data(contentsOf: set.appendingPathComponent($0)) }, bytes, "no workbook written again")
    }

    /// A response of many items is verified once for all its sales (each sale re-derived read
    /// the whole response again: quadratic, 110 s for 4,000 items): every sale is re-derived
    /// all the same, and one whose stored figures were changed is still named.
    func testAResponseOfManyItemsIsReDerivedSaleBySale() throws {
        let items = (1...300).map { Receipt.item("77\(String(format: "%04d", $0))", purchased: "2026-10-05T10:00:00Z") }
        try ws.write("inbox/receipts/big.jsonl", Receipt.response(items) + "\n")
        try ws.run("2026-10-08")
        let report = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(report.ok, "\(report.problems)")
        XCTAssertGreaterThanOrEqual(report.rederived, 300)
        try tamper(past: "entry_no_update", "UPDATE entry SET net_minor = net_minor + 1, proceeds_minor = proceeds_minor + 1 WHERE transaction_id = '770150' AND kind = 'sale'")
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.hasPrefix("sale of transaction 770150: re-derived from inbox/receipts/big.jsonl:1 and its recorded rules, the figures differ") }, "\(problems)")
    }

    /// A workbook iapledger wrote and registered, deleted from `reports/`, is said by `verify`
    /// (it said nothing), without failing it: a retention policy may delete old sets.
    func testAWorkbookDeletedFromReportsIsSaid() throws {
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().workbooksGone, [])
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("reports/2026-10-07/sandbox-2026-10-07.xlsx"))
        let report = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(report.ok, "\(report.problems)")
        XCTAssertEqual(report.workbooksGone, ["reports/2026-10-07/sandbox-2026-10-07.xlsx"])
    }

    /// A late entry moved back to its own date, in a month closed by `iapledger close` before
    /// the night that wrote it, is named as posted into a closed month (only the months the
    /// runs before it recorded closed were compared: a close made between two nights was not,
    /// and only the run's changed chain head was said).
    func testAnEntryMovedIntoAMonthClosedBeforeItsNightIsNamed() throws {
        _ = try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!,
                                    closedBy: "alice", closedAt: "2026-10-07T09:00:00Z")
        try ws.write("inbox/receipts/late.jsonl", Receipt.response([Receipt.item("8101", purchased: "2026-09-20T10:00:00Z")]))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT id, date, late FROM entry WHERE transaction_id = '8101'"), [["5", "2026-10-01", "1"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try tamper(past: "entry_no_update", "UPDATE entry SET date = original_date, late = 0 WHERE transaction_id = '8101'")
        let problems = try Audit(workspace: ws.workspace).run().problems
        XCTAssertTrue(problems.contains { $0.entryId == 5 && $0.message == "sale of transaction 8101: dated 2026-09-20, in a month closed (through 2026-09) before run 2, which wrote it, posted anything: posted into a closed month, past the trigger that forbids it" }, "\(problems)")
    }

    /// A closed month reopened by deleting its close past the trigger that forbids it passed
    /// verify, and the next night posted into it (not late). Every run now records the month
    /// the books were closed through when it committed: the deleted close, and the entry posted
    /// into the month closed before it, are both named.
    func testAReopenedClosedMonthIsCaught() throws {
        _ = try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!,
                                    closedBy: "alice", closedAt: "2026-10-07T09:00:00Z")
        try ws.write("inbox/receipts/late.jsonl", Receipt.response([Receipt.item("8101", purchased: "2026-09-20T10:00:00Z")]))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT date, late FROM entry WHERE transaction_id = '8101'"), [["2026-10-01", "1"]])
        XCTAssertEqual(try rows("SELECT closed_through FROM run ORDER BY id DESC LIMIT 1"), [["2026-09"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)

        try tamper(past: "period_close_no_delete", "DELETE FROM period_close")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message == "run 2 committed with the books closed through 2026-09, but the ledger's closed periods now end nowhere: closes were deleted, reopening a closed month" }, "\(r.problems)")
        XCTAssertTrue(r.problems.contains { $0.message.hasPrefix("a late entry (moved forward from 2026-09-20, in a closed month) whose month is not closed now") }, "\(r.problems)")

        // A night refuses to build on it.
        try ws.write("inbox/receipts/later.jsonl", Receipt.response([Receipt.item("8102", purchased: "2026-09-21T10:00:00Z")]))
        XCTAssertThrowsError(try ws.run("2026-10-09")) {
            XCTAssertTrue("\($0)".contains("its closed periods end before 2026-09, through which run 2 recorded the books closed: a close was deleted"), "\($0)")
        }
        // An entry written after a run that recorded its month closed is named: here run 1's
        // record says October was closed, and run 2 wrote the late entry on 2026-10-01.
        try tamper(past: "period_close_no_delete", "INSERT INTO period_close (month, closed_at, closed_by, source) VALUES ('2026-09', '2026-10-07T09:00:00Z', 'alice', 'close command')")
        try tamper(past: "run_finished_no_update", "UPDATE run SET closed_through = '2026-10' WHERE id = 1")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.message.contains("transaction 8101: dated 2026-10-01, in a month closed (through 2026-10) when run 1 committed before this entry was written") }, "\(r.problems)")
    }

    /// The README's two scripts recompute every entry's hash and every seal from the ledger
    /// file without iapledger, and print the chain head and the latest seal `verify` gives.
    func testTheREADMEsScriptsReproduceTheChainHeadAndTheSeal() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("python3 is not installed") }
        // A record dismissed, and sealed with the night that applies it.
        try ws.write("inbox/receipts/bad.jsonl", "{not json\n")
        // A finding dismissed, sealed in the second form's `fdismissal` lines.
        try ws.write("inbox/receipts/q.jsonl", Receipt.response([Receipt.item("8301", quantity: 0, purchased: "2026-10-06T10:00:00Z")]) + "\n")
        try ws.run("2026-10-07")
        _ = try LedgerRun.Dismiss.dismiss([.init(path: "inbox/receipts/bad.jsonl", line: 1)], findings: [("INVALID_TRANSACTION", "8301")],
                                          workspace: ws.workspace, reason: "a test\tline", by: "bob", at: "2026-10-07T08:00:00Z")
        XCTAssertEqual(try ws.run("2026-10-07").recordsDismissed, 1)
        _ = try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!,
                                    closedBy: "alice\tsmith", closedAt: "2026-10-07T09:00:00Z")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        let readme = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        func script(_ name: String) throws -> String {
            let start = try XCTUnwrap(readme.range(of: "```python\n# \(name): python3 \(name) ledger.sqlite\n"))
            let end = try XCTUnwrap(readme.range(of: "```", range: start.upperBound..<readme.endIndex))
            return String(readme[start.upperBound..<end.lowerBound])
        }
        func run(_ name: String) throws -> String {
            let url = ws.root.appendingPathComponent(name)
            try script(name).write(to: url, atomically: true, encoding: .utf8)
            let p = Process(), out = Pipe()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = [url.path, dbPath]
            p.standardOutput = out
            try p.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, name)
            return text
        }
        XCTAssertEqual(try run("chain.py"), "chain head \(r.chainHead)\n")
        XCTAssertEqual(try run("seal.py"), "seal \(try XCTUnwrap(r.seal))\n")
    }

    /// The problem a run's seal that no longer matches what it sealed gives.
    static func sealDiffers(run: Int, seal: Int, records: Int) -> String {
        "run \(run)'s seal (#\(seal)) does not match what it sealed: the run's counts or chain head, tool version or reconciliation figures, the config and rules it posted by, or the files, records (their text's hash, outcome, reason) and resolutions of records up to #\(records) were changed since it was written"
    }

    /// Seals of the second form (schema v32): a run's tool version and reconciliation figures,
    /// and the finding dismissals asked since the seal before, are sealed; a finding marked
    /// dismissed by hand (no dismissal asked for it) is named by `verify` and refused by the
    /// next night; run times out of order are named; an entry removed stops the night; an
    /// account keeps its name; `verify --runs` shows the head the entries give now (it showed
    /// the stored hash of the run's last entry, equal to the recorded head after a change).
    func testTheSecondFormOfSealCoversRunFiguresAndFindingDismissals() throws {
        try ws.write("inbox/receipts/q.jsonl", Receipt.response([Receipt.item("8301", quantity: 0, purchased: "2026-10-07T10:00:00Z")]) + "\n"
            + Receipt.response([Receipt.item("8302", quantity: 0, purchased: "2026-10-07T11:00:00Z")]) + "\n")
        try ws.run("2026-10-08")
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("INVALID_TRANSACTION", "8301")], workspace: ws.workspace,
                                          reason: "booked, JE-1", by: "dana", at: "2026-10-08T09:00:00Z")
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("8303", purchased: "2026-10-08T10:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-10-09").findingsDismissed, 1)
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        XCTAssertEqual(try rows("SELECT run_id, last_finding_dismissal_id FROM seal ORDER BY id"), [["1", "0"], ["2", "0"], ["3", "1"]])
        let pristine = try Data(contentsOf: URL(fileURLWithPath: dbPath))
        func restore() throws { try pristine.write(to: URL(fileURLWithPath: dbPath)) }
        func problems() throws -> [String] { try Audit(workspace: ws.workspace).run().problems.map(\.message) }
        func sealOf(_ run: Int) -> String { "run \(run)'s seal (#\(run)) does not match what it sealed: the run's counts or chain head, tool version or reconciliation figures" }

        for change in ["tool_version = 'iapledger 0.0.1'", "orders_matched = orders_matched + 1", "reconciliation_rules = 'x'"] {
            try tamper(past: "run_finished_no_update", "UPDATE run SET \(change) WHERE id = 2")
            let found = try problems()
            XCTAssertEqual(found.count, 1, change)
            XCTAssertTrue(found.first?.hasPrefix(sealOf(2)) == true, "\(change): \(found)")
            try restore()
        }
        // The last night's fingerprint changed (an auditor's review: with its seal made again,
        // the reconciliation was not derived again, and exceptions edited by hand passed): a
        // night of this build recorded it, so it is named.
        try tamper(past: "run_finished_no_update", "UPDATE run SET reconciliation_rules = 'x' WHERE id = 3")
        let fingerprint = try problems()
        XCTAssertTrue(fingerprint.contains { $0.hasPrefix("the last night (run 3) ran this build of iapledger, whose reconciliation of the product rules and config that night kept has the fingerprint ") && $0.hasSuffix(", but the ledger records x for it: changed in the ledger, which turns off this re-derivation of the exceptions and matches") }, "\(fingerprint)")
        try restore()
        // A dismissal's who changed: its seal, and the finding's note no longer its dismissal's.
        try tamper(past: "finding_dismissal_no_update", "UPDATE finding_dismissal SET asked_by = 'eve'")
        var found = try problems()
        XCTAssertTrue(found.contains { $0.hasPrefix(sealOf(3)) && $0.contains("or the finding dismissals up to #1 were changed") }, "\(found)")
        XCTAssertTrue(found.contains { $0.hasPrefix("finding #") && $0.contains("(INVALID_TRANSACTION 8301) reads \"dismissed by dana on 2026-10-08: booked, JE-1\", but no dismissal asked for it") }, "\(found)")
        try restore()
        // A finding marked dismissed by hand is refused by a trigger; past it (dropped, made
        // again): named, and the night refuses.
        XCTAssertThrowsError(try Ledger(path: dbPath).write { w in
            try w.db.execute(sql: "UPDATE finding SET resolved_run_id = 3, resolved_note = 'dismissed by cfo on 2026-10-09: booked' WHERE transaction_id = '8302'")
        })
        try tamper(past: "finding_resolved_by_a_run", "UPDATE finding SET resolved_run_id = 3, resolved_note = 'dismissed by cfo on 2026-10-09: booked' WHERE transaction_id = '8302'")
        found = try problems()
        XCTAssertEqual(found.count, 1, "\(found)")
        XCTAssertTrue(found.first?.contains("(INVALID_TRANSACTION 8302) reads \"dismissed by cfo on 2026-10-09: booked\", but no dismissal asked for it") == true, "\(found)")
        XCTAssertThrowsError(try ws.run("2026-10-10")) { XCTAssertTrue("\($0)".contains("the ledger fails the checks a night makes before it writes: finding #"), "\($0)") }
        try restore()
        // ...even with a dismissal made up beside it, dated back (no trigger refuses an insert):
        // it is under no seal of the night named as resolving it.
        try tamper(past: "finding_resolved_by_a_run", """
            INSERT INTO finding_dismissal (finding_id, message, asked_at, asked_by, reason)
            SELECT id, message, '2026-10-08T09:30:00Z', 'cfo', 'booked' FROM finding WHERE transaction_id = '8302';
            UPDATE finding SET resolved_run_id = 3, resolved_note = 'dismissed by cfo on 2026-10-08: booked' WHERE transaction_id = '8302'
            """)
        found = try problems()
        XCTAssertEqual(found.count, 1, "\(found)")
        XCTAssertTrue(found.first?.contains("(INVALID_TRANSACTION 8302) reads \"dismissed by cfo on 2026-10-08: booked\", but no dismissal asked for it") == true, "\(found)")
        XCTAssertThrowsError(try ws.run("2026-10-10"))
        try restore()
        // ...and with an id below every seal's range (0): under no seal, named.
        try tamper(past: "finding_resolved_by_a_run", """
            INSERT INTO finding_dismissal (id, finding_id, message, asked_at, asked_by, reason)
            SELECT 0, id, message, '2026-10-08T09:30:00Z', 'cfo', 'booked' FROM finding WHERE transaction_id = '8302';
            UPDATE finding SET resolved_run_id = 3, resolved_note = 'dismissed by cfo on 2026-10-08: booked' WHERE transaction_id = '8302'
            """)
        XCTAssertEqual(try problems(), ["finding dismissal #0 has an id below 1, under no seal: added by hand"])
        XCTAssertThrowsError(try ws.run("2026-10-10")) { XCTAssertTrue("\($0)".contains("finding dismissal #0 has an id below 1"), "\($0)") }
        try restore()
        // Run times out of order.
        try tamper(past: "run_finished_no_update", "UPDATE run SET finished_at = '2026-01-01T00:00:00Z' WHERE id = 2")
        found = try problems()
        XCTAssertEqual(found.count, 1, "\(found)")
        XCTAssertTrue(found.first?.hasPrefix("run 2 finished at 2026-01-01T00:00:00Z, before it started (") == true, "\(found)")
        try restore()
        // An entry removed in the middle: the night refuses (it would post its sale again).
        try tamper(past: "entry_no_delete", "DELETE FROM entry WHERE id = 2")
        XCTAssertThrowsError(try ws.run("2026-10-10")) {
            XCTAssertTrue("\($0)".contains("it holds 4 entries numbered up to #5: 1 of them removed"), "\($0)")
        }
        try restore()
        // An account keeps its name.
        XCTAssertThrowsError(try Ledger(path: dbPath).write { try $0.db.execute(sql: "UPDATE account SET name = 'Revenue:Other' WHERE id = 1") })
        XCTAssertThrowsError(try Ledger(path: dbPath).write { try $0.db.execute(sql: "DELETE FROM account WHERE id = 1") })
        // An entry of run 1 changed: every run's head, as the entries give it now, differs.
        try tamper(past: "entry_no_update", "UPDATE entry SET net_minor = net_minor + 1, proceeds_minor = proceeds_minor + 1, gross_minor = gross_minor + 1 WHERE id = 1")
        let heads = try Audit(workspace: ws.workspace).run().runHeads
        XCTAssertEqual(heads.count, 3)
        XCTAssertTrue(heads.allSatisfy { $0.head != $0.expected }, "\(heads.map { ($0.head, $0.expected) })")
        try restore()
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().runHeads.allSatisfy { $0.head == $0.expected })
    }

    /// What the entries' chain does not cover is sealed (LedgerSeal), run by run and close by
    /// close: a rejected record marked resolved by hand (no trigger in the way), a file
    /// renamed or a run's counts edited past their trigger, no longer give their run's seal;
    /// a record's reason cannot be changed at all; a close deleted is named by its seal, and
    /// deleted with its seal it changes the latest seal, the one kept outside the ledger.
    func testTheSealCoversRecordsFilesRunsAndCloses() throws {
        try ws.write("inbox/receipts/other-app.jsonl", Receipt.response([Receipt.item("8201", purchased: "2026-10-07T10:00:00Z")], bundle: "com.other.app"))
        let night2 = try ws.run("2026-10-08")
        XCTAssertEqual(night2.counts.rejected, 1)
        let closed = try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-08")!,
                                             closedBy: "alice", closedAt: "2026-10-08T09:00:00Z")
        let closeSeal = try XCTUnwrap(closed.seal)
        XCTAssertTrue(closed.description.contains("seal: \(closeSeal)"), closed.description)
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.seals, 3, "runs 1 and 2, and the close")
        XCTAssertEqual(r.seal, closeSeal)
        XCTAssertEqual(r.runSeals[2], night2.totals.seal, "the seal the night printed")
        XCTAssertEqual(try rows("SELECT path FROM run_input WHERE run_id = 2 ORDER BY path").map { $0[0] },
                       ["iapledger build", "iapledger.toml", "rules/fx.csv", "rules/prices.csv", "rules/products.csv", "rules/storefronts.csv",
                        "trusted root: Apple Root CA - G3 (built in)"])
        // The program that ran is its GNU build ID.
        XCTAssertEqual(try rows("SELECT sha256 FROM run_input WHERE run_id = 2 AND path = 'iapledger build'"), [[try XCTUnwrap(BuildIdentity.current)]])
        // A root's entry is its certificate's fingerprint, the SHA-256 of its DER.
        XCTAssertEqual(try rows("SELECT sha256 FROM run_input WHERE run_id = 2 AND path LIKE 'trusted root:%'"),
                       [[Hashing.sha256Hex(try SignedDataVerifier.appleRootCAG3())]])

        let saved = dbPath + ".saved"
        try FileManager.default.copyItem(atPath: dbPath, toPath: saved)
        func restore() throws {
            try FileManager.default.removeItem(atPath: dbPath)
            try FileManager.default.copyItem(atPath: saved, toPath: dbPath)
        }
        func problems() throws -> [String] { try Audit(workspace: ws.workspace).run().problems.map(\.message) }
        let run2 = "run 2's seal (#2) does not match what it sealed"

        // The rejected record "resolved" by hand: only the night running resolves records.
        let resolve = "UPDATE source_record SET resolved_run_id = %d, resolved_note = 'corrected copy received' WHERE outcome = 'rejected'"
        XCTAssertThrowsError(try DatabaseQueue(path: dbPath).write { try $0.execute(sql: String(format: resolve, 2)) }) {
            XCTAssertTrue("\($0)".contains("a source record is resolved once, by the night running, and stays resolved as it was"), "\($0)")
        }
        // Past the trigger, by a sealed run: that run's seal shows it.
        try tamper(past: "source_record_resolved_once", String(format: resolve, 2))
        XCTAssertTrue(try problems().contains { $0.hasPrefix(run2) })
        // Once resolved, it stays resolved as it was.
        XCTAssertThrowsError(try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "UPDATE source_record SET resolved_run_id = NULL WHERE outcome = 'rejected'") }) {
            XCTAssertTrue("\($0)".contains("stays resolved as it was"), "\($0)")
        }
        try restore()
        // By a run to come (which would seal it as its own; foreign keys off, as in the sqlite3
        // shell): named, and no night builds on it.
        var noKeys = Configuration()
        noKeys.foreignKeysEnabled = false
        let shell = try DatabaseQueue(path: dbPath, configuration: noKeys)
        let trigger = try shell.read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_schema WHERE name = 'source_record_resolved_once'")! }
        try shell.write { d in
            try d.execute(sql: "DROP TRIGGER source_record_resolved_once")
            try d.execute(sql: String(format: resolve, 3))
            try d.execute(sql: trigger)
        }
        try shell.close()
        let rejected = try rows("SELECT id FROM source_record WHERE outcome = 'rejected'")[0][0]
        let unsealed = "source record #\(rejected) is marked resolved by run 3, which sealed nothing (none after run 2 did): set by hand (a night resolves records while it runs and seals them as it commits)"
        let found = try problems()
        XCTAssertTrue(found.contains(unsealed), "\(found)")
        XCTAssertThrowsError(try ws.run("2026-10-09")) { XCTAssertTrue("\($0)".contains(unsealed), "\($0)") }
        try restore()
        // A record's reason never changes.
        XCTAssertThrowsError(try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "UPDATE source_record SET reason = 'ok' WHERE outcome = 'rejected'") }) {
            XCTAssertTrue("\($0)".contains("its text, hash, outcome and reason never change"), "\($0)")
        }
        // A file renamed, a run's counts edited: past their triggers, put back.
        try tamper(past: "source_file_fixed", "UPDATE source_file SET path = 'inbox/receipts/elsewhere.jsonl' WHERE path = 'inbox/receipts/other-app.jsonl'")
        XCTAssertTrue(try problems().contains { $0.hasPrefix(run2) })
        try restore()
        try tamper(past: "run_finished_no_update", "UPDATE run SET records_rejected = 0, records_verified = records_verified + 1 WHERE id = 2")
        XCTAssertTrue(try problems().contains { $0.hasPrefix(run2) })
        try restore()
        // A night made up, no trigger dropped: a run row inserted, the rejected record resolved
        // by it, the run finished and sealed as a night would. Nothing that run read resolves it.
        try DatabaseQueue(path: dbPath).write { d in
            try d.execute(sql: "INSERT INTO run (id, as_of, started_at, tool_version) VALUES (3, '2026-10-09', 'x', 'x')")
            try d.execute(sql: String(format: resolve, 3))
            try d.execute(sql: "UPDATE run SET finished_at = 'x', chain_head = (SELECT hash FROM entry ORDER BY id DESC LIMIT 1) WHERE id = 3")
            let w = LedgerWriter(db: d)
            try w.sealRun(3)
        }
        let madeUp = try problems()
        XCTAssertTrue(madeUp.contains { $0.hasPrefix("source record #\(rejected) (inbox/receipts/other-app.jsonl:1, rejected WRONG_BUNDLE_ID) is marked resolved by run 3, but nothing that run read resolves it") }, "\(madeUp)")
        XCTAssertThrowsError(try ws.run("2026-10-10")) { XCTAssertTrue("\($0)".contains("nothing that run read resolves it"), "\($0)") }
        try restore()
        // The close deleted: its seal names it, and no night reopens the month.
        try tamper(past: "period_close_no_delete", "DELETE FROM period_close")
        XCTAssertTrue(try problems().contains { $0 == "the seal of the close of 2026-09 (#3) seals a close the ledger no longer holds: it was deleted" })
        XCTAssertThrowsError(try ws.run("2026-10-09")) { XCTAssertTrue("\($0)".contains("its close of 2026-09 is gone though sealed"), "\($0)") }
        // Deleted with its seal, triggers put back: the ledger holds together, but its latest
        // seal is no longer the one `close` printed.
        try tamper(past: "seal_no_delete", "DELETE FROM seal WHERE close_month IS NOT NULL")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertNotEqual(r.seal, closeSeal)
        XCTAssertEqual(r.seal, night2.totals.seal)
        try restore()
        // A seal rewritten alone does not chain.
        try tamper(past: "seal_no_update", "UPDATE seal SET digest = 'x' || substr(digest, 2) WHERE id = 1")
        let p = try problems()
        XCTAssertTrue(p.contains { $0.hasPrefix("run 1's seal (#1) does not match what it sealed") }, "\(p)")
        XCTAssertTrue(p.contains { $0 == "run 1's seal (#1) does not follow from the seal before it and its digest: the seals were rewritten" }, "\(p)")
    }

    /// A run's entries all deleted: the run's own problems (its head, its count) were cut off
    /// past the fiftieth line, after one line per transaction. They are listed first.
    func testARunsOwnProblemsAreListedBeforeThoseOfTransactions() throws {
        try ws.write("inbox/receipts/many.jsonl", (1...60).map {
            Receipt.response([Receipt.item("77\(String(format: "%02d", $0))", purchased: "2026-10-05T10:00:00Z")])
        }.joined(separator: "\n") + "\n")
        try ws.run("2026-10-08")
        try tamper(past: "entry_no_delete", "DELETE FROM entry WHERE run_id = 2")
        let r = try Audit(workspace: ws.workspace).run()
        let ofRuns = r.problems.filter(\.run).map(\.message)
        XCTAssertTrue(ofRuns.contains { $0.hasPrefix("run 2 recorded 60 entries posted, but 0 entries belong to it") }, "\(ofRuns)")
        XCTAssertGreaterThan(r.problems.count, 50)
        let cli = try Resilience.cli(["verify", "--workspace", ws.root.path])
        XCTAssertEqual(cli.status, 1, cli.err)
        for m in ofRuns { XCTAssertTrue(cli.out.contains(TerminalText.visible(m)), "\(m) not in\n\(cli.out)") }
    }

    /// A table dropped, a column renamed, a view replaced: verify stopped at SQLite's error
    /// (`no such table: balance_month`) or GRDB's, reading a row without its column, before
    /// listing the schema's problems. It now lists them, says the content was not checked, and
    /// fails (exit 1).
    func testAnAlteredSchemaIsListedInsteadOfAnSQLiteError() throws {
        let pristine = try Data(contentsOf: URL(fileURLWithPath: dbPath))
        for (sql, key, named, line) in [
            ("DROP TABLE balance_month", "table balance_month", "table balance_month (missing, or naming what is missing)", #line),
            ("ALTER TABLE entry RENAME COLUMN hash TO h", "table entry", "table entry (without its column hash)", #line),
            ("DROP VIEW posting; CREATE VIEW posting AS SELECT 1 AS x", "view posting",
             "view posting (without its columns id, entry_id, line, account_id, currency, amount_minor, reporting_amount_minor)", #line),
        ] as [(String, String, String, UInt)] {
            try pristine.write(to: URL(fileURLWithPath: dbPath))
            try DatabaseQueue(path: dbPath).write { try $0.execute(sql: sql) }
            let r = try Audit(workspace: ws.workspace).run()
            XCTAssertFalse(r.ok, line: line)
            XCTAssertTrue(r.problems.allSatisfy(\.schema), "\(r.problems)", line: line)
            XCTAssertEqual(r.problems.last?.message, "the ledger's content was not checked: its checks read the tables and views iapledger's migrations created, and the ledger no longer has \(named). Restore the schema (from a copy of the ledger) and run `iapledger verify` again", line: line)
            XCTAssertTrue(r.problems.dropLast().contains { $0.message.hasPrefix("the ledger's \(key) ") }, "\(r.problems)", line: line)
        }
        let cli = try Resilience.cli(["verify", "--workspace", ws.root.path])
        XCTAssertEqual(cli.status, 1, cli.err)
        // The report on standard output (a log kept with `> verify.log` keeps it), its first line
        // on standard error too.
        XCTAssertTrue(cli.out.hasPrefix("verify: FAILED") && cli.out.contains("the ledger's content was not checked") && !cli.out.contains("SQLite error"), cli.out)
        XCTAssertTrue(cli.err.hasPrefix("verify: FAILED") && cli.err.hasSuffix(" (the problems are on standard output)\n"), cli.err)
    }

    /// 8005 waits for a rule (no USA price for vip.monthly), 8006 is a free trial: free as read.
    func waitingAndFreeSales() throws {
        try ws.write("inbox/receipts/next.jsonl", [
            Receipt.response([Receipt.item("8005", product: "vip.monthly", purchased: "2026-10-07T10:00:00Z")]),
            Receipt.response([Receipt.item("8006", purchased: "2026-10-07T11:00:00Z")
                .replacingOccurrences(of: "\"is_trial_period\": \"false\"", with: "\"is_trial_period\": \"true\"")]),
        ].joined(separator: "\n"))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "vip.monthly,USA,9.99,2020-01-01", with: "vip.monthly,DEU,9.99,2020-01-01"))
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT transaction_id, sale_status FROM store_transaction WHERE transaction_id IN ('8005', '8006') ORDER BY 1"),
                       [["8005", "pending"], ["8006", "free"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A paid sale waiting for a rule, marked free by hand, passed verify (free with no sale
    /// entry agreed) and no later night posted it. Whether it is free is now derived again.
    func testASaleMarkedFreeThatIsNotFreeIsCaught() throws {
        try waitingAndFreeSales()
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET sale_status = 'free', pending_reason = NULL WHERE transaction_id = '8005'") }
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices)
        try ws.run("2026-10-09")
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE transaction_id = '8005'"), [["0"]], "the rule came, and the night did not post it")
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["transaction 8005 is marked free, but it has no price of its own and is no free trial, and rules/prices.csv prices vip.monthly above 0 (or not at all) on 2026-10-07 in every storefront (inbox/receipts/next.jsonl:1): its status was set by hand, or rules/prices.csv priced it 0 when the night found it free and has changed since (a free sale keeps no applied rules); unless the price was changed, its sale will never post"])
    }

    /// A signed price is free as the night decides it: when it rounds to no minor unit of its
    /// currency (Poster's zero gross), not when it merely looks small.
    func testWhetherASignedPriceIsFreeIsTheNightsDecision() throws {
        func why(_ milli: Int64?, _ currency: String?, trial: Bool = false) -> String? {
            Audit.whyNotFree(TransactionObservation(transactionId: "t", productId: "coins.100", purchaseMs: 1_791_280_800_000, book: .production,
                                                    currency: currency, priceMilliunits: milli, isFreeTrial: trial),
                             rules: { XCTFail("a signed price needs no rules"); return Rules() })
        }
        XCTAssertNil(why(0, "USD"))
        XCTAssertNil(why(4990, "USD", trial: true))
        XCTAssertNil(why(500, "JPY"), "half a yen rounds to even: 0")
        XCTAssertEqual(why(501, "JPY"), "its signed price, 501 milliunits of JPY, is a gross of 1 minor unit")
        XCTAssertNil(why(4, "USD"), "0.4 cent rounds to 0")
        XCTAssertEqual(why(6, "USD"), "its signed price, 6 milliunits of USD, is a gross of 1 minor unit")
        XCTAssertEqual(why(990, "USD"), "its signed price, 990 milliunits of USD, is a gross of 99 minor units")
    }

    /// Only posted transactions were compared with their first source record (by re-deriving
    /// their sale): a waiting or free one changed by hand passed, and the night would post
    /// what was stored.
    func testTransactionsNotPostedAreCheckedAgainstTheirSources() throws {
        try waitingAndFreeSales()
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "UPDATE store_transaction SET quantity = 5 WHERE transaction_id = '8005'")
            try d.execute(sql: "UPDATE store_transaction SET app_account_token = 'someone-else' WHERE transaction_id = '8006'")
        }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), [
            "transaction 8005 (pending, no sale entry): its source record inbox/receipts/next.jsonl:1 differs from the stored transaction in quantity",
            "transaction 8006 (free, no sale entry): its source record inbox/receipts/next.jsonl:2 differs from the stored transaction in app account token",
        ])
    }

    /// A refunded sale's refund entry removed, its tracks covered (the run's chain head, the
    /// month totals) passed: nothing said a stored refund of a posted sale must have its
    /// entry. The run's entry count names the removal too, until it is rewritten as well.
    func testARemovedRefundEntryIsNamed() throws {
        XCTAssertEqual(try rows("SELECT id, kind FROM entry WHERE transaction_id = '8002' ORDER BY id"), [["2", "sale"], ["4", "refund"]])
        try tamper(past: "entry_no_delete", "DELETE FROM entry WHERE id = 4")
        try tamper(past: "run_finished_no_update", "UPDATE run SET chain_head = (SELECT hash FROM entry WHERE id = 3)")
        try DatabaseQueue(path: dbPath).write { d in
            try d.execute(sql: "DELETE FROM balance_month; DELETE FROM activity_month")
            try MonthTotals.add(afterEntryId: 0, db: d)
        }
        let refundMissing = "transaction 8002: its stored refund (dated 2026-10-06) has no refund entry, though its sale is posted: every night posts such a refund before it commits, so the entry was removed"
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message),
                       [refundMissing, Self.sealDiffers(run: 1, seal: 1, records: 4),
                        "run 1 recorded 4 entries posted, but 3 entries belong to it: entries were removed or added after it committed"])
        try tamper(past: "run_finished_no_update", "UPDATE run SET entries_posted = 3")
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [refundMissing, Self.sealDiffers(run: 1, seal: 1, records: 4)])
    }

    /// The reverse: a refund entry whose transaction no longer stores the refund (or another
    /// date, or another percentage) passed.
    func testARefundEntryIsItsTransactionsStoredRefund() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET cancellation_ms = NULL WHERE transaction_id = '8002'") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description),
                       ["entry #4: refund of transaction 8002: its transaction stores no refund (no cancellation date): the refund entry was written without one (forged), or the refund was removed from the stored transaction",
                        "transaction 8002: inbox/receipts/r.jsonl:2 reports it refunded, but the ledger stores no refund for it: removed (its sale would post, or stay posted, without its refund)"])
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET cancellation_ms = 1791367200000, revocation_percentage = 50000 WHERE transaction_id = '8002'") }
        let messages = try Audit(workspace: ws.workspace).run().problems.map(\.description)
        XCTAssertTrue(messages.contains("entry #4: refund of transaction 8002: dated 2026-10-06 (its original date), but its transaction's stored refund is dated 2026-10-07"), "\(messages)")
        XCTAssertTrue(messages.contains("entry #4: refund of transaction 8002: of 100000 thousandths of a percent, but its transaction's stored refund is of 50000"), "\(messages)")
    }

    /// The store's last word on a refund kept beside a transaction (a second refund, a
    /// reversal again), which reconciliation reads and trace tells, is one a record gives: one
    /// written in by hand (no trigger guards it) passed, and trace told a refund no record reports.
    func testTheStoresLastWordOnARefundIsOneARecordGives() throws {
        // A second refund of 8002, another day: said (REFUND_AGAIN), kept as the store's word.
        try ws.write("inbox/receipts/again.jsonl", Receipt.response([Receipt.item("8002", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-07T09:00:00Z")]) + "\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT transaction_id, store_refund_share, store_refund_ms IS NOT NULL FROM store_transaction WHERE store_refund_share IS NOT NULL"), [["8002", "100000", "1"]])
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description), [])
        let db = try DatabaseQueue(path: dbPath)
        // A refund in full written into a sale no record says was refunded.
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET store_refund_share = 100000, store_refund_ms = 1791367200000 WHERE transaction_id = '8001'") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description).filter { $0.hasPrefix("transaction 8001: the store's") },
                       ["transaction 8001: the store's last word kept beside it (refunded in full on 2026-10-07) is reported by none of its 1 source record: it was written into the ledger, not read"])
        // The second refund's share changed, or made a reversal no notification gives.
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET store_refund_share = NULL, store_refund_ms = NULL WHERE transaction_id = '8001'; UPDATE store_transaction SET store_refund_share = 50000 WHERE transaction_id = '8002'") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description).filter { $0.contains("last word") },
                       ["transaction 8002: the store's last word kept beside it (refunded 50.000% on 2026-10-07) is reported by none of its 2 source records: it was written into the ledger, not read"])
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET store_refund_share = 0 WHERE transaction_id = '8002'") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description).filter { $0.contains("last word") },
                       ["transaction 8002: the store's last word kept beside it (reversed again on 2026-10-07) is given by none of its REFUND_REVERSED notifications (none is stored): it was written into the ledger, not read"])
        try db.write { try $0.execute(sql: "UPDATE store_transaction SET store_refund_share = 100000 WHERE transaction_id = '8002'") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description), [])
    }

    /// A subscription's paid days as its sale recorded them are at most what its chain in the
    /// ledger could give: a rate rewritten with a made-up count ("has 400 paid days", the first
    /// purchase of its subscription) passed, the rules check taking the count as recorded.
    func testASubscriptionsRecordedPaidDaysAreAtMostWhatItsChainGives() throws {
        try ws.write("inbox/receipts/s.jsonl", [
            Receipt.response([Receipt.item("S1", product: "vip.monthly", purchased: "2026-08-01T10:00:00Z", original: "S1", expires: "2026-09-01T10:00:00Z")]),
            Receipt.response([Receipt.item("S2", product: "vip.monthly", purchased: "2026-09-01T10:00:00Z", original: "S1", expires: "2026-10-01T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description), [])
        let reason = try XCTUnwrap(rows("SELECT json_extract(rules_json, '$.commissionReason') FROM entry WHERE transaction_id = 'S2'").first?.first)
        XCTAssertTrue(reason.contains("has 31 paid days"), reason)
        func claim(_ id: String, _ from: String, _ to: String) throws {
            try tamper(past: "entry_no_update", "UPDATE entry SET rules_json = replace(rules_json, '\(from)', '\(to)') WHERE transaction_id = '\(id)' AND kind = 'sale'")
        }
        func named() throws -> [String] {
            try Audit(workspace: ws.workspace).run().problems.map(\.description).filter { $0.contains("paid days of its subscription") }
        }
        // Within what the chain gives (31 days: S1's month): not named here (the hash is).
        try claim("S2", "has 31 paid days", "has 30 paid days")
        XCTAssertEqual(try named(), [])
        try claim("S2", "has 30 paid days", "has 400 paid days")
        let id = try XCTUnwrap(rows("SELECT id FROM entry WHERE transaction_id = 'S2' AND kind = 'sale'").first?.first)
        XCTAssertEqual(try named(), ["entry #\(id): sale of transaction S2: its commission reason records 400 paid days of its subscription, but the subscription's transactions in the ledger give at most 31 before it (every earlier period counted, none refunded, no lapse): the count, and the rate it gave, were written into the entry"])
    }

    /// A link of a record that did not verify to a transaction names one its text names: one
    /// inserted (no trigger stops an insert) listed a rejected receipt among another sale's
    /// records in trace, and one changed (past its trigger) sent a pending record to another
    /// transaction. Both passed.
    func testALinkOfARecordThatDidNotVerifyNamesATransactionItsTextNames() throws {
        try ws.write("inbox/receipts/bad.jsonl", [
            Receipt.response([Receipt.item("8101", purchased: "2026-10-06T10:00:00Z")], status: 21003),
            Receipt.response([Receipt.item("8102", purchased: "2026-10-06T10:00:00Z")], status: 21005) .replacingOccurrences(of: "\"status\": 21005", with: "\"status\": 21005, \"is-retryable\": true"),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-08")
        XCTAssertEqual(try rows("SELECT u.transaction_id, r.outcome FROM unverified_record_transaction u JOIN source_record r ON r.id = u.record_id ORDER BY 1"),
                       [["8101", "rejected"], ["8102", "pending"]])
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description), [])
        let rejected = try XCTUnwrap(rows("SELECT record_id FROM unverified_record_transaction WHERE transaction_id = '8101'").first?.first)
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "INSERT INTO unverified_record_transaction (record_id, transaction_id) VALUES (\(rejected), '8001')") }
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description),
                       ["transaction 8001 is linked to inbox/receipts/bad.jsonl:1 as a record that named it (waiting for verification, rejected, or its item refused), but that record's text does not name it: made up or changed (trace lists it among the transaction's records, and reconciliation takes a credit of it as unverified)"])
        try tamper(past: "unverified_record_transaction_no_delete", "DELETE FROM unverified_record_transaction WHERE transaction_id = '8001'")
        try tamper(past: "unverified_record_transaction_no_update", "UPDATE unverified_record_transaction SET transaction_id = '8003' WHERE transaction_id = '8102'")
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description),
                       ["transaction 8003 is linked to inbox/receipts/bad.jsonl:2 as a record that named it (waiting for verification, rejected, or its item refused), but that record's text does not name it: made up or changed (trace lists it among the transaction's records, and reconciliation takes a credit of it as unverified)"])
    }

    /// Source records deleted with their links (past the trigger that forbids it, put back
    /// after) passed: every record left still hashed as read. Each file and each run recorded
    /// how many records it stored.
    func testDeletedSourceRecordsAreNamed() throws {
        try ws.write("inbox/receipts/next.jsonl", [
            Receipt.response([Receipt.item("8001", purchased: "2026-10-05T10:00:00Z")]),
            "not json",
        ].joined(separator: "\n"))
        try ws.run("2026-10-08")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        let file = "(SELECT id FROM source_file WHERE path = 'inbox/receipts/next.jsonl')"
        XCTAssertEqual(try rows("SELECT line, outcome FROM source_record WHERE file_id = \(file) ORDER BY line"), [["1", "verified"], ["2", "rejected"]])
        try Tamper.run(dbPath, pastAll: ["source_record_no_delete", "transaction_source_no_delete"], """
            DELETE FROM transaction_source WHERE record_id IN (SELECT id FROM source_record WHERE file_id = \(file));
            DELETE FROM source_record WHERE file_id = \(file)
            """)
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [
            Self.sealDiffers(run: 2, seal: 2, records: 6),
            "source file inbox/receipts/next.jsonl (read by run 2) recorded 2 new records, but 0 are stored: source records were deleted (or added) after it was read",
            "run 2 recorded reading 2 records, but its files hold 0: source records were deleted (or added) after it committed",
        ])
    }

    /// A middle entry deleted was named only by the next entry's hash and a sale status "changed
    /// by hand"; entry ids run on without a gap, so the missing entry is named.
    func testADeletedMiddleEntryIsNamedByItsId() throws {
        try tamper(past: "entry_no_delete", "DELETE FROM entry WHERE id = 2")
        let r = try Audit(workspace: ws.workspace).run()
        let problems = r.problems.map(\.description)
        XCTAssertEqual(r.firstFailingEntry, 2)
        XCTAssertEqual(problems.first, "entry #2: entry #2 is missing (entry ids run on without a gap, and no entry is ever deleted): removed, the ledger going from #1 to #3")
        XCTAssertTrue(problems.contains("entry #3: sale of transaction 8003: its stored hash does not match its content, its postings and the hash of the entry before it, #2, which is missing (above)"), "\(problems)")
        XCTAssertTrue(problems.contains("run 1 recorded 4 entries posted, but 3 entries belong to it: entries were removed or added after it committed"), "\(problems)")
        XCTAssertTrue(problems.contains("transaction 8002 is marked posted but has no sale entry: its sale entry was removed, or its status was changed by hand (then its sale will never post)"), "\(problems)")
    }

    /// A run's recorded head changed alone (the entries untouched) was blamed on the entries.
    func testARunsChangedHeadIsNotBlamedOnTheEntries() throws {
        try tamper(past: "run_finished_no_update", "UPDATE run SET chain_head = '\(String(repeating: "0", count: 64))'")
        let head = try rows("SELECT hash FROM entry WHERE id = 4")[0][0]
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.message), [
            "run 1's recorded chain head \(String(repeating: "0", count: 64)) differs from the head its entries give now, \(head), though their chain is unbroken: the run's recorded head was changed, or its last entries were removed, or the entries up to it rewritten with every hash after them (compare with the head kept outside the ledger for that night)",
            Self.sealDiffers(run: 1, seal: 1, records: 4),
        ])
    }

    /// Reporting amounts changed alone: the message showed the same net and commission as
    /// expected and stored. Each figure that differs is shown, the reporting ones too.
    func testChangedReportingFiguresAreShown() throws {
        try tamper(past: "entry_no_update", """
            UPDATE entry SET net_reporting_minor = net_reporting_minor + 7, proceeds_reporting_minor = proceeds_reporting_minor + 7 WHERE id = 1
            """)
        let expected = try rows("SELECT net_reporting_minor - 7, net_reporting_minor, proceeds_reporting_minor - 7, proceeds_reporting_minor, reporting_currency FROM entry WHERE id = 1")[0]
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.contains { $0.entryId == 1 && $0.message.hasSuffix("the figures differ: net in \(expected[4]) expected \(expected[0]), stored \(expected[1]); proceeds in \(expected[4]) expected \(expected[2]), stored \(expected[3])") },
                      "\(r.problems)")
    }

    /// The newest migrations deleted from grdb_migrations with what they created (v19's
    /// triggers) made verify compare the ledger with the older schema and find nothing
    /// missing. Each run now records the schema it wrote with, and the ledger is compared with it.
    func testDeletedMigrationsAreNamed() throws {
        let newest = Schema.newestMigration
        XCTAssertEqual(try rows("SELECT schema_migration FROM run"), [[newest]])
        // Every migration after v18 deleted, and what v19 created with them (the tables of the
        // later ones are left: their rows would say nothing is missing).
        let after = Schema.migrator().migrations.drop { $0 != "v18-run-closed-through" }.dropFirst()
        try DatabaseQueue(path: dbPath).write { d in
            for id in after { try d.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = ?", arguments: [id]) }
            try d.execute(sql: "DROP TRIGGER source_file_fixed; DROP TRIGGER source_file_no_delete")
        }
        let messages = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertEqual(messages.first, "run 1 recorded writing the ledger with its schema through migration \(newest), but the ledger's applied migrations (grdb_migrations) end at v18-run-closed-through: the newer ones were deleted; the schema is compared with the one \(newest) gives")
        XCTAssertTrue(messages.contains { $0.hasPrefix("the ledger's trigger source_file_fixed is missing") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("the ledger's trigger source_file_no_delete is missing") }, "\(messages)")
        XCTAssertEqual(messages.count, 3, "\(messages)")
    }
}
