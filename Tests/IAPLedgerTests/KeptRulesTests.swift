import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// The config and rules files each run posts by are kept in the ledger (schema v26): `verify`
/// checks every sale's recorded rules against them, and a night says what changed in them for
/// days already posted.
final class KeptRulesTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws {
        ws = try TestWorkspace()
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header
                     + "o1,a1,9001,coins.100,1,100,2026-10-05T10:00:01Z,production,DEU,,\n"
                     + "o2,a1,9002,coins.100,1,100,2026-10-05T10:00:01Z,production,JPN,,\n")
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("9001", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("9002", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("9003", purchased: "2026-10-06T10:00:00Z")]),
        ].joined(separator: "\n"))
        try ws.run("2026-10-07")
    }
    override func tearDown() { ws.remove() }

    var dbPath: String { ws.root.appendingPathComponent("ledger.sqlite").path }

    func tamper(past trigger: String, _ sql: String) throws { try Tamper.run(dbPath, past: trigger, sql) }

    func testTheFilesARunPostedByAreKeptOnceEach() throws {
        let kept = try Ledger(path: dbPath).read { try $0.rawRows("SELECT sha256 FROM input_text ORDER BY sha256") }.map { $0[0] }
        let recorded = try Ledger(path: dbPath).read {
            try $0.rawRows("SELECT DISTINCT sha256 FROM run_input WHERE path NOT LIKE 'trusted root: %' ORDER BY sha256")
        }.map { $0[0] }
        XCTAssertEqual(kept, recorded)
        XCTAssertEqual(kept.count, 5, "the config and the four rules files")
        let fx = try XCTUnwrap(try Ledger(path: dbPath).read { r in
            try r.inputText(sha256: try XCTUnwrap(try r.runFiles(1).first { $0.path == "rules/fx.csv" }).sha256)
        })
        XCTAssertEqual(String(decoding: fx, as: UTF8.self), TestWorkspace.defaultFX)
        // A second night by the same files keeps nothing more.
        try ws.write("inbox/receipts/r2.jsonl", Receipt.response([Receipt.item("9004", purchased: "2026-10-07T10:00:00Z")]))
        try ws.run("2026-10-08")
        XCTAssertEqual(try Ledger(path: dbPath).read { try $0.rawRows("SELECT count(*) FROM input_text") }, [["5"]])
        let db = try DatabaseQueue(path: dbPath)
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "DELETE FROM input_text") })
        XCTAssertThrowsError(try db.write { try $0.execute(sql: "UPDATE input_text SET text_bytes = 1") })
    }

    /// A sale's recorded rules rewritten (a price, with the figures and every hash after it, is
    /// what a careful hand would do; here only the rules, so the hash breaks too) disagree with
    /// the files its run posted by, kept and sealed: named. The files on disk changed since are
    /// not what is checked.
    func testASalesRecordedRulesAreCheckedAgainstTheFilesItsRunKept() throws {
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.rulesChecked, 3)
        XCTAssertEqual(r.rulesNotKept, 0)
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.20"))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,DEU,1.09", with: "coins.100,DEU,2.09"))
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "the files on disk changed; the entries were posted by the kept ones: \(r.problems)")

        try tamper(past: "entry_no_update", """
            UPDATE entry SET rules_json = replace(replace(rules_json, '"fxRate":"1.10"', '"fxRate":"1.20"'), '"unitPrice":"1.09"', '"unitPrice":"2.09"')
            WHERE transaction_id = '9001'
            """)
        r = try Audit(workspace: ws.workspace).run()
        let named = r.problems.map(\.message).filter { $0.contains("recorded rules are not those") }
        XCTAssertEqual(named, ["sale of transaction 9001: its recorded rules are not those of the files run 1 posted by: unit price 2.09 where rules/prices.csv gives 1.09 for coins.100 in DEU on 2026-10-05; rate 1.20 (2026-10) where rules/fx.csv gives 1.10 for EUR in 2026-10"])
    }

    /// Where a sale is booked is checked too: its order's storefront (a version of that order
    /// names the transaction with it), or the kept config's default_storefront. A storefront
    /// rewritten with the rules of another (the tax of FRA) is named.
    func testASalesStorefrontIsItsOrdersOrTheDefault() throws {
        try tamper(past: "entry_no_update", """
            UPDATE entry SET storefront = 'USA', rules_json = replace(rules_json, '"storefront":"DEU"', '"storefront":"USA"') WHERE transaction_id = '9001'
            """)
        try tamper(past: "entry_no_update", """
            UPDATE entry SET storefront = 'DEU', rules_json = replace(rules_json, '"storefront":"USA"', '"storefront":"DEU"') WHERE transaction_id = '9003'
            """)
        let r = try Audit(workspace: ws.workspace).run()
        let messages = r.problems.map(\.message)
        XCTAssertTrue(messages.contains("sale of transaction 9001: booked in USA as order o1's storefront, but no version of that order names this transaction with that storefront"), "\(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("sale of transaction 9003: its recorded rules are not those of the files run 1 posted by: booked in DEU as default_storefront, which iapledger.toml set to USA") }, "\(messages)")
    }

    /// A kept file altered or deleted is named; a ledger of runs before v26 (no files kept)
    /// verifies, its sales counted as not checked.
    func testAKeptFileAlteredOrDeletedIsNamed() throws {
        let fxSHA = try XCTUnwrap(try Ledger(path: dbPath).read { try $0.runFiles(1) }.first { $0.path == "rules/fx.csv" }).sha256
        try tamper(past: "input_text_no_update", "UPDATE input_text SET data = (SELECT data FROM input_text WHERE sha256 <> '\(fxSHA)' LIMIT 1), text_bytes = (SELECT text_bytes FROM input_text WHERE sha256 <> '\(fxSHA)' LIMIT 1) WHERE sha256 = '\(fxSHA)'")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.map(\.message).contains("the kept config or rules file \(fxSHA) no longer gives its SHA-256: it was altered after it was kept"), "\(r.problems)")

        try tamper(past: "input_text_no_delete", "DELETE FROM input_text")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.filter { $0.message.contains("whose content it kept, but the ledger no longer holds it") }.count, 5, "\(r.problems)")
        XCTAssertEqual(r.rulesNotKept, 3)

        // As a ledger of v25 has it: runs that kept nothing, and said so by their schema.
        try tamper(past: "run_finished_no_update", "UPDATE run SET schema_migration = 'v25-kept-as-read'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.problems.contains { $0.message.contains("input_text") || $0.message.contains("kept config") || $0.message.contains("no longer holds it") }, "\(r.problems)")
        XCTAssertEqual(r.rulesChecked, 0)
        XCTAssertEqual(r.rulesNotKept, 3)
    }

    /// A rate, a price or a tax of days already posted, changed in the rules files: the next
    /// night says what changed and how many posted sales the rules before priced (they keep
    /// them). Rows of days after the last night, and files unchanged, say nothing.
    func testANightSaysWhatChangedInTheRulesForDaysAlreadyPosted() throws {
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.12")
                     + "\n2026-11,EUR,1.15\n")
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,160,2020-01-01\ncoins.100,JPN,170,2026-10-05\ncoins.100,JPN,180,2026-12-01"))
        var night = try ws.run("2026-10-08")
        let changed = try XCTUnwrap(night.rulesChanged)
        XCTAssertEqual(changed.runId, 1)
        XCTAssertEqual(changed.lines, [
            "rules/fx.csv: EUR 2026-10 1.10 -> 1.12: 1 sale posted at the rate before",
            "rules/prices.csv: coins.100 in JPN 2026-10-05..2026-10-07: 160 -> 170: 1 sale posted at the prices before",
        ])
        // Said once: the next night posts by the files this one kept. The same values written
        // otherwise (0.190 for 0.19, 0.3 for 0.300), or a rate added where none was (no sale
        // posted by it: the way a MISSING_RULE is cleared), say nothing.
        try ws.write("rules/storefronts.csv", TestWorkspace.defaultStorefronts.replacingOccurrences(of: "0.19,", with: "0.190,"))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,160,2020-01-01\ncoins.100,JPN,170,2026-10-05\ncoins.100,JPN,180,2026-12-01")
                     .replacingOccurrences(of: "coins.100,KWT,0.300", with: "coins.100,KWT,0.3"))
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.12")
                     + "\n2026-11,EUR,1.15\n2026-10,GBP,1.25\n")
        night = try ws.run("2026-10-09")
        XCTAssertNil(night.rulesChanged, "\(night.rulesChanged.map { $0.lines } ?? [])")
        // The config: a Small Business Program period added over posted days, then shortened.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "small_business = []", with: #"small_business = [ { from = "2026-10-01", to = "2026-12-31" } ]"#))
        night = try ws.run("2026-10-10")
        XCTAssertEqual(night.rulesChanged?.lines, ["iapledger.toml: small_business: 2026-10-01..2026-10-09 now in the program (it was not): 3 sales posted at the commission before"])
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "small_business = []", with: #"small_business = [ { from = "2026-10-01", to = "2026-10-05" } ]"#))
        night = try ws.run("2026-10-11")
        XCTAssertEqual(night.rulesChanged?.lines, ["iapledger.toml: small_business: 2026-10-06..2026-10-10 no longer in the program (it was): 1 sale posted at the commission before"])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }
}
