import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerReport
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
            try $0.rawRows("SELECT DISTINCT sha256 FROM run_input WHERE path <> 'iapledger build' ORDER BY sha256")
        }.map { $0[0] }
        XCTAssertEqual(kept, recorded)
        XCTAssertEqual(kept.count, 6, "the config, the four rules files and the root (Apple's, built in) signed data is verified to")
        let fx = try XCTUnwrap(try Ledger(path: dbPath).read { r in
            try r.inputText(sha256: try XCTUnwrap(try r.runFiles(1).first { $0.path == "rules/fx.csv" }).sha256)
        })
        XCTAssertEqual(String(decoding: fx, as: UTF8.self), TestWorkspace.defaultFX)
        // A second night by the same files keeps nothing more.
        try ws.write("inbox/receipts/r2.jsonl", Receipt.response([Receipt.item("9004", purchased: "2026-10-07T10:00:00Z")]))
        try ws.run("2026-10-08")
        XCTAssertEqual(try Ledger(path: dbPath).read { try $0.rawRows("SELECT count(*) FROM input_text") }, [["6"]])
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

        // The rules' provenance as trace tells it, rewritten beside the same figures (an
        // auditor's review: the price row's date and the commission's reason passed).
        try tamper(past: "entry_no_update", """
            UPDATE entry SET rules_json = replace(replace(replace(replace(rules_json, '"fxRate":"1.20"', '"fxRate":"1.10"'), '"unitPrice":"2.09"', '"unitPrice":"1.09"'),
                ' from 20', ' from 19'), '"commissionReason":"standard"', '"commissionReason":"reduced: small business program 2026-01-01..2026-12-31"')
            WHERE transaction_id = '9001'
            """)
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message).filter { $0.contains("recorded rules are not those") },
                       ["sale of transaction 9001: its recorded rules are not those of the files run 1 posted by: price source \"rules/prices.csv 1.09 EUR from 1920-01-01 x 1\" where rules/prices.csv gives \"rules/prices.csv 1.09 EUR from 2020-01-01 x <quantity>\" and the gross 109 minor units is that price times the quantity; commission 0.30 (reduced: small business program 2026-01-01..2026-12-31) where iapledger.toml gives 0.30 (standard)"])
        // The quantity it names (a re-check: "x 1" made "x 3" passed), the gross being 1.09 EUR.
        try tamper(past: "entry_no_update", """
            UPDATE entry SET rules_json = replace(replace(replace(rules_json, ' from 19', ' from 20'), '"commissionReason":"reduced: small business program 2026-01-01..2026-12-31"', '"commissionReason":"standard"'), ' x 1"', ' x 3"')
            WHERE transaction_id = '9001'
            """)
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message).filter { $0.contains("recorded rules are not those") },
                       ["sale of transaction 9001: its recorded rules are not those of the files run 1 posted by: price source \"rules/prices.csv 1.09 EUR from 2020-01-01 x 3\" where rules/prices.csv gives \"rules/prices.csv 1.09 EUR from 2020-01-01 x <quantity>\" and the gross 109 minor units is that price times the quantity"])
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
        // Named by its path, and first: the sales said to differ from it follow from it (it came
        // last, by its hash alone, after the entries it made look changed).
        XCTAssertEqual(r.problems.first?.message, "the kept copy of rules/fx.csv (run 1), SHA-256 \(fxSHA), no longer gives its SHA-256: it was altered after it was kept; what is said below of the recorded rules of the sales those runs posted (compared with it as it is now, or not checked where it no longer reads) follows from this", "\(r.problems)")

        try tamper(past: "input_text_no_delete", "DELETE FROM input_text")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.filter { $0.message.contains("whose content it kept, but the ledger no longer holds it") }.count, 5, "\(r.problems)")
        // And the root each run verified signed data to, kept beside them (Apple's, built in).
        let apple = try XCTUnwrap(try Ledger(path: dbPath).read { try $0.runRoots(1) }?.first)
        XCTAssertEqual(r.problems.filter { $0.message.contains("whose certificate it kept, but the ledger no longer holds it") }.map(\.message),
                       [1].map { "run \($0) verified signed data to the root \(apple.name) (SHA-256 \(apple.sha256)), whose certificate it kept, but the ledger no longer holds it: it was deleted" }, "\(r.problems)")
        XCTAssertEqual(r.rulesNotKept, 3)

        // As a ledger of v25 has it: runs that kept nothing, and said so by their schema.
        try tamper(past: "run_finished_no_update", "UPDATE run SET schema_migration = 'v25-kept-as-read'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.problems.contains { $0.message.contains("input_text") || $0.message.contains("kept config") || $0.message.contains("no longer holds it") }, "\(r.problems)")
        XCTAssertEqual(r.rulesChecked, 0)
        XCTAssertEqual(r.rulesNotKept, 3)
    }

    /// The open RULES_CHANGED findings: transaction id -> message.
    func rulesChangedFindings() throws -> [String: String] {
        let db = try DatabaseQueue(path: dbPath)
        return try db.read { db in
            try Dictionary(uniqueKeysWithValues: Row.fetchAll(db, sql: """
                SELECT transaction_id, message FROM finding WHERE code = 'RULES_CHANGED' AND resolved_run_id IS NULL
                """).map { ($0[0] as String, $0[1] as String) })
        }
    }

    /// A rate, a price or a commission setting changed in the rules files after sales were
    /// posted by them: the next night opens a RULES_CHANGED finding for each posted sale the
    /// rules now book otherwise, and adds them up by change with what today's rules would book
    /// (hand-computed below). An edit and its undoing leave open only what was posted between;
    /// a rule dated after the last night behind a sale posted for that date counts; the same
    /// values written otherwise, or a rule added where none was, say nothing.
    func testANightSaysWhichPostedSalesTheChangedRulesWouldBookOtherwise() throws {
        // 9001: DEU 1.09 EUR, tax 0.19 included: net 0.92 EUR; at 1.10 net 1.01 USD, commission
        // 0.28 EUR = 0.31 USD; at 1.12 net 1.03, commission 0.31 (round(28 x 1.12) = 31).
        // 9002: JPN 160 JPY, tax 0.10 included: net 145, commission 44 (43.5 to even); at 170:
        // net 155, commission 46 (46.5 to even); at 0.006712 x 100: net 0.97 -> 1.04 USD,
        // commission 0.30 -> 0.31 USD.
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.12")
                     + "\n2026-11,EUR,1.15\n")
        let prices = TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,160,2020-01-01\ncoins.100,JPN,170,2026-10-05\ncoins.100,JPN,180,2026-12-01")
        try ws.write("rules/prices.csv", prices)
        var night = try ws.run("2026-10-08")
        let changed = try XCTUnwrap(night.rulesChanged)
        XCTAssertEqual(changed.runId, 1)
        XCTAssertEqual(changed.lines, [
            "rules/fx.csv: EUR 2026-10 1.10 -> 1.12: 1 sale posted, today's rules would book net +0.02, commission 0.00, proceeds +0.02 USD",
            "rules/prices.csv: coins.100 in JPN 160 JPY -> 170 JPY: 1 sale posted, today's rules would book net +0.07, commission +0.01, proceeds +0.06 USD",
        ])
        var open = try rulesChangedFindings()
        XCTAssertEqual(Set(open.keys), ["9001", "9002"])
        XCTAssertEqual(open["9001"], "posted 2026-10-05 by rules the files now give otherwise: rules/fx.csv: EUR 2026-10 1.10 -> 1.12; posted at net 0.92 EUR (1.01 USD), commission 0.28 EUR (0.31 USD), today's rules would book net 0.92 EUR (1.03 USD), commission 0.28 EUR (0.31 USD); the difference: net 0.00 EUR (+0.02 USD), commission 0.00 EUR (0.00 USD), proceeds 0.00 EUR (+0.02 USD): book a correction where one is due (entries never change)")

        // The same values written otherwise (0.190 for 0.19, 0.3 for 0.300), a rate added where
        // none was (the way a MISSING_RULE is cleared): nothing new is said, the findings stay.
        try ws.write("rules/storefronts.csv", TestWorkspace.defaultStorefronts.replacingOccurrences(of: "0.19,", with: "0.190,"))
        try ws.write("rules/prices.csv", prices.replacingOccurrences(of: "coins.100,KWT,0.300", with: "coins.100,KWT,0.3"))
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.12")
                     + "\n2026-11,EUR,1.15\n2026-10,GBP,1.25\n")
        night = try ws.run("2026-10-09")
        XCTAssertNil(night.rulesChanged, "\(night.rulesChanged.map { $0.lines } ?? [])")
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9001", "9002"])

        // A sale posted by the mistaken rate, then the rate put back: the sale posted before
        // the mistake agrees again (its finding resolved); the one posted by it stays.
        try ws.write("inbox/receipts/r2.jsonl", Receipt.response([Receipt.item("9004", purchased: "2026-10-09T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o2.csv", ReconciliationTests.header + "o4,a1,9004,coins.100,1,100,2026-10-09T10:00:01Z,production,DEU,,\n")
        try ws.run("2026-10-10")
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,EUR,1.15\n2026-10,GBP,1.25\n")
        night = try ws.run("2026-10-11")
        XCTAssertEqual(night.findingsReopened, 0)
        XCTAssertEqual(night.rulesChanged?.lines, [
            "rules/fx.csv: EUR 2026-10 1.12 -> 1.10: 1 sale posted, today's rules would book net -0.02, commission 0.00, proceeds -0.02 USD",
            "open in all after tonight: 2 RULES_CHANGED findings to book, today's rules would book net +0.05, commission +0.01, proceeds +0.04 USD (`iapledger findings --code RULES_CHANGED` lists them)",
            "1 sale the rules book as posted again (or refunded since: in full, or in part with nothing left to correct): its RULES_CHANGED finding resolved",
        ])
        open = try rulesChangedFindings()
        XCTAssertEqual(Set(open.keys), ["9002", "9004"])
        // The resolved one says what settled it, and what it had said (the audit trail).
        let settled = try DatabaseQueue(path: dbPath).read {
            try String.fetchOne($0, sql: "SELECT message FROM finding WHERE code = 'RULES_CHANGED' AND transaction_id = '9001'")
        }
        XCTAssertTrue(settled?.hasPrefix("resolved: the rules book it as posted again, no correction is due; it said: posted 2026-10-05 by rules the files now give otherwise: rules/fx.csv: EUR 2026-10 1.10 -> 1.12") ?? false, settled ?? "")

        // A sale dated after the night, posted, then a price dated before it, after the night.
        try ws.write("inbox/receipts/r3.jsonl", Receipt.response([Receipt.item("9005", purchased: "2026-10-20T10:00:00Z")]) + "\n")
        try ws.run("2026-10-12")
        try ws.write("rules/prices.csv", prices.replacingOccurrences(of: "coins.100,KWT,0.300", with: "coins.100,KWT,0.3") + "\ncoins.100,USA,1.49,2026-10-15\n")
        night = try ws.run("2026-10-13")
        XCTAssertEqual(night.rulesChanged?.lines, [
            "rules/prices.csv: coins.100 in USA 0.99 USD -> 1.49 USD: 1 sale posted, today's rules would book net +0.50, commission +0.15, proceeds +0.35 USD",
            "open in all after tonight: 3 RULES_CHANGED findings to book, today's rules would book net +0.55, commission +0.16, proceeds +0.39 USD (`iapledger findings --code RULES_CHANGED` lists them)",
        ])

        // The commission: a Small Business Program period over posted days. 9003 (10-06, 0.99
        // USD: commission 0.30 -> 0.15 USD, round(14.85) = 15) is the only one of them that
        // differed in nothing else; 9004 and 9005, already open, now say more (9002, 10-05, is
        // outside the period and says the same). Once booked, 9003 is dismissed: it stays so
        // while it says the same.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "small_business = []", with: #"small_business = [ { from = "2026-10-06", to = "2026-10-31" } ]"#))
        night = try ws.run("2026-10-14")
        let lines = try XCTUnwrap(night.rulesChanged?.lines)
        XCTAssertEqual(lines.first, "commission rate: 0.30 (standard) -> 0.15 (small business program 2026-10-06..2026-10-31): 1 sale posted, today's rules would book net 0.00, commission -0.15, proceeds +0.15 USD")
        XCTAssertEqual(lines.count, 4, "\(lines)")
        XCTAssertEqual(lines.last, "open in all after tonight: 4 RULES_CHANGED findings to book, today's rules would book net +0.55, commission -0.38, proceeds +0.93 USD (`iapledger findings --code RULES_CHANGED` lists them)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("rules/fx.csv: EUR 2026-10 1.12 -> 1.10; commission rate: 0.30 (standard) -> 0.15 (small business program 2026-10-06..2026-10-31): 1 sale posted") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("rules/prices.csv: coins.100 in USA 0.99 USD -> 1.49 USD; commission rate: 0.30 (standard) -> 0.15") }, "\(lines)")
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9002", "9003", "9004", "9005"])
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "9003")], workspace: ws.workspace, reason: "booked by hand, JE-31", by: "dana", at: "2026-10-14T09:00:00Z")
        night = try ws.run("2026-10-15")
        XCTAssertEqual(night.findingsDismissed, 1)
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9002", "9004", "9005"])
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-11,EUR,1.15\n2026-10,GBP,1.25\n2026-12,EUR,1.2\n")
        night = try ws.run("2026-10-16")
        XCTAssertNil(night.rulesChanged, "\(night.rulesChanged.map { $0.lines } ?? [])")
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9002", "9004", "9005"])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A subscription's paid days counted again where the grace period changed (a lapse of
    /// ten days restarts the count under a grace of five): the renewal's commission is a
    /// RULES_CHANGED finding. A sale refunded in full is none (its refund was booked at its
    /// posted amounts: nothing left to correct). The check is a timed stage of the night.
    /// What is left to correct of a partly refunded sale: what today's rules leave after their
    /// refund less what the posted rules left after theirs (each refund rounded as accounting.md
    /// rounds it), proceeds net less commission. Commission 89 posted, 46 now, 40% refunded:
    /// 89 - 36 = 53 and 46 - 18 = 28 are left, so -25 (60% of the difference, -25.8, gave -26).
    func testWhatIsLeftToCorrectOfAPartlyRefundedSaleBalances() {
        let forty = RulesChanges.leftToCorrect(net: (300, 300), commission: (89, 46), refundedShare: 40_000)
        XCTAssertEqual([forty.net, forty.commission, forty.proceeds], [0, -25, 25])
        let half = RulesChanges.leftToCorrect(net: (10, 17), commission: (3, 5), refundedShare: 50_000)
        XCTAssertEqual([half.net, half.commission, half.proceeds], [4, 2, 2], "17 - 8 less 10 - 5; 5 - 2 less 3 - 2 (halves to even)")
        let none = RulesChanges.leftToCorrect(net: (10, 17), commission: (3, 5), refundedShare: 0)
        XCTAssertEqual([none.net, none.commission, none.proceeds], [7, 2, 5])
        for share: Int64 in [1, 12_345, 33_333, 50_000, 99_999] {
            for posted: Int64 in 0...40 {
                for now: Int64 in 0...40 {
                    let l = RulesChanges.leftToCorrect(net: (posted * 3, now * 3), commission: (posted, now), refundedShare: share)
                    XCTAssertEqual(l.net - l.commission, l.proceeds)
                    // The refund booked at the posted amounts, plus the correction, is what
                    // today's rules would have booked for the sale and its refund.
                    func refund(_ x: Int64) -> Int64 { roundHalfEven(Int128(x) * Int128(share), 100_000) }
                    XCTAssertEqual(posted - refund(posted) + l.commission, now - refund(now))
                }
            }
        }
    }

    func testTheCheckCountsPaidDaysAgainAndLeavesSalesRefundedInFull() throws {
        let config = TestWorkspace.defaultConfig.replacingOccurrences(of: "subscription_reduced_after_days = 365", with: "subscription_reduced_after_days = 30")
        try ws.write("iapledger.toml", config)
        try ws.write("inbox/receipts/s.jsonl", [
            Receipt.response([Receipt.item("S1", product: "vip.monthly", purchased: "2026-08-01T10:00:00Z", original: "S1", expires: "2026-09-01T10:00:00Z")]),
            Receipt.response([Receipt.item("S2", product: "vip.monthly", purchased: "2026-09-11T10:00:00Z", original: "S1", expires: "2026-10-11T10:00:00Z")]),
            Receipt.response([Receipt.item("R1", purchased: "2026-10-06T11:00:00Z", cancelled: "2026-10-07T09:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-08")
        try ws.write("iapledger.toml", config.replacingOccurrences(of: "subscription_grace_days = 60", with: "subscription_grace_days = 5"))
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,USA,0.99,2020-01-01", with: "coins.100,USA,1.09,2020-01-01"))
        let progress = RunProgress(showProgress: false, out: { _ in })
        let night = try NightlyRun(workspace: ws.workspace, asOf: Day(iso: "2026-10-09")!, progress: progress).run()
        let lines = try XCTUnwrap(night.rulesChanged?.lines)
        // S2: 31 paid days (>= 30, reduced) counted again from its chain: the count restarts
        // after the lapse of ten days, 0 paid days, standard. 9.99 USD: commission 1.50 -> 3.00.
        XCTAssertTrue(lines.contains("commission rate: 0.15 (reduced: subscription's paid days) -> 0.30 (standard: subscription's paid days): 1 sale posted, today's rules would book net 0.00, commission +1.50, proceeds -1.50 USD"), "\(lines)")
        // 9003 (USA, not refunded) at the new price; R1, refunded in full, not.
        XCTAssertTrue(lines.contains { $0.hasPrefix("rules/prices.csv: coins.100 in USA 0.99 USD -> 1.09 USD: 1 sale posted") }, "\(lines)")
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["S2", "9003"])
        XCTAssertTrue(progress.stages.contains { $0.name == "check sales against changed rules" && $0.count > 0 }, "\(progress.stages.map(\.name))")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// Many findings of one code (a rules change opens one per posted sale): Run Info lists the
    /// first of each code and says how many more; `iapledger findings` lists every one (CSV,
    /// JSON Lines); `dismiss --finding CODE:*` takes all of that code off the open lists once
    /// the correction is booked. A change of the config in nothing a sale is priced by
    /// (closed_through, the journal cap) checks nothing.
    func testManyFindingsAreListedBoundedAndDismissedTogether() throws {
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,USA,0.99,2020-01-01", with: "coins.100,USA,1.09,2020-01-01")
                     .replacingOccurrences(of: "coins.100,DEU,1.09,2020-01-01", with: "coins.100,DEU,1.19,2020-01-01")
                     .replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,170,2020-01-01"))
        let night = try ws.run("2026-10-08")
        XCTAssertEqual(night.newFindings, 3)
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9001", "9002", "9003"])
        // The Summary's notes say so, beside the figures they concern.
        let summary = try XCTUnwrap(try XLSXReader.sheets(try XCTUnwrap(night.workbooks.first { $0.lastPathComponent == "finance-2026-10-08.xlsx" }))["Summary"])
        XCTAssertTrue(summary.contains { $0.first == "Posted sales the rules now book otherwise, a correction to book for each (RULES_CHANGED findings, from a rules or config file changed after they were posted): 3 (Run Info lists them, `iapledger findings --code RULES_CHANGED` every one)." },
                      "\(summary.prefix(8))")
        // Run Info, two of each code at most: the third is counted, not listed.
        let ledger = try Ledger(path: dbPath, readOnly: true)
        let rows = try ledger.runInfoTexts("findings", asOf: "2026-10-08", findingsLimit: 2)
        XCTAssertEqual(rows.filter { $0[0] == "RULES_CHANGED" }.map { $0[1] }, ["9001", "9002", ""])
        XCTAssertEqual(rows.last?[2], "... and 1 more open RULES_CHANGED findings, not listed here: `iapledger findings --code RULES_CHANGED` lists them all")
        // The command lists all of them.
        let csv = try Resilience.cli(["findings", "--workspace", ws.root.path, "--code", "RULES_CHANGED", "--format", "csv"])
        XCTAssertEqual(csv.status, 0, csv.err)
        XCTAssertEqual(csv.out.split(separator: "\n").count, 4, csv.out)
        XCTAssertTrue(csv.out.hasPrefix("code,transaction_id,book,status,first_seen,resolved_on,resolution,detail\nRULES_CHANGED,9001,production,open,2026-10-08,,,"), csv.out)
        // A page at a time (each read in a short transaction): every one, once, in order.
        var paged: [String] = []
        try FindingsOutput.write(try Ledger(path: dbPath, readOnly: true), status: "open", code: nil, format: "csv", pageSize: 2) { paged.append($0) }
        XCTAssertEqual(paged.joined(), csv.out)
        let json = try Resilience.cli(["findings", "--workspace", ws.root.path, "--format", "json"])
        XCTAssertTrue(json.out.hasPrefix(#"{"book":"production","code":"RULES_CHANGED","detail":"#), json.out)
        XCTAssertTrue(json.out.contains(#""resolution":null,"resolved_on":null"#), "every key, null where there is nothing: \(json.out)")
        XCTAssertEqual(try json.out.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.compactMap { $0?["code"] as? String },
                       ["RULES_CHANGED", "RULES_CHANGED", "RULES_CHANGED"])
        // All of them dismissed at once.
        let dismissed = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "*")], workspace: ws.workspace, reason: "JE-40: price list corrected", by: "dana", at: "2026-10-08T09:00:00Z")
        XCTAssertEqual(dismissed.askedFindings.count, 3)
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n")
        let next = try ws.run("2026-10-09")
        XCTAssertEqual(next.findingsDismissed, 3)
        XCTAssertNil(next.rulesChanged, "the config changed in nothing a sale is priced by: \(next.rulesChanged.map(\.lines) ?? [])")
        XCTAssertEqual(try rulesChangedFindings(), [:])
        let listed = try Resilience.cli(["findings", "--workspace", ws.root.path, "--status", "all"])
        XCTAssertTrue(listed.out.contains("dismissed RULES_CHANGED"), listed.out)
        XCTAssertTrue(listed.out.hasSuffix("3 finding(s)\n"), listed.out)
        // Changed again (USA's price now 1.19, DEU's and JPN's put back): 9003's dismissed
        // finding, saying something else, opens again; the corrections booked for 9001 and 9002
        // are to be reversed, the rules booking them as posted again: each a finding open
        // again. All three counted apart from the night's new ones (their first run is earlier).
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,USA,0.99,2020-01-01", with: "coins.100,USA,1.19,2020-01-01"))
        let again = try ws.run("2026-10-10")
        XCTAssertEqual(again.newFindings, 0)
        XCTAssertEqual(again.findingsReopened, 3)
        let lines = try XCTUnwrap(again.rulesChanged?.lines)
        XCTAssertTrue(lines.contains("2 sales whose RULES_CHANGED finding was dismissed (a correction booked) the rules book as posted again (or refunded since: in full, or in part with nothing left to correct): reverse those corrections (a finding each, open again)"), "\(lines)")
        let reversals = try rulesChangedFindings()
        XCTAssertEqual(Set(reversals.keys), ["9001", "9002", "9003"])
        XCTAssertTrue(reversals["9001"]?.hasPrefix("reverse the correction: posted 2026-10-05, it is booked again as the rules now give it; its earlier RULES_CHANGED finding was dismissed (dismissed by dana on 2026-10-08: JE-40: price list corrected)") ?? false,
                      "\(reversals)")
        // 9003's finding, open again, says a correction was booked for its earlier one.
        XCTAssertTrue(reversals["9003"]?.contains("A correction was booked for its earlier finding (dismissed by dana on 2026-10-08: JE-40: price list corrected): set it against this one (reverse it and book this difference). The earlier finding said: posted 2026-10-06") ?? false,
                      reversals["9003"] ?? "")
        // USA's put back too: the correction booked for 9003 is to be reversed as well; the
        // reversals stay, said once.
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices)
        let undone = try XCTUnwrap(try ws.run("2026-10-11").rulesChanged?.lines)
        XCTAssertEqual(undone.first, "1 sale whose RULES_CHANGED finding was dismissed (a correction booked) the rules book as posted again (or refunded since: in full, or in part with nothing left to correct): reverse that correction (a finding each, open again)")
        XCTAssertTrue(undone.contains("open in all after tonight: 3 corrections to reverse (`iapledger findings --code RULES_CHANGED` lists them)"), "\(undone)")
        XCTAssertTrue(try rulesChangedFindings()["9003"]?.hasPrefix("reverse the correction: ") ?? false)
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX + "\n2026-12,EUR,1.2\n")
        XCTAssertNil(try ws.run("2026-10-12").rulesChanged)
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9001", "9002", "9003"])
    }

    /// A sale of a closed month: its finding and the summary say it is corrected in an open
    /// month; and the summary says what is open in all when some findings were open before.
    func testASaleOfAClosedMonthIsCorrectedInAnOpenOne() throws {
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("9101", purchased: "2026-11-02T10:00:00Z")]) + "\n")
        try ws.run("2026-10-31")
        try ws.run("2026-11-03")
        _ = try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: ws.workspace, asOf: Day(iso: "2026-11-03")!, closedBy: "carol", closedAt: "2026-11-03T09:00:00Z")
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,170,2020-01-01"))
        let night = try ws.run("2026-11-04")
        let lines = try XCTUnwrap(night.rulesChanged?.lines)
        XCTAssertTrue(lines.contains { $0.hasPrefix("rules/prices.csv: coins.100 in JPN 160 JPY -> 170 JPY: 1 sale posted (1 of them in months closed: corrected in an open one)") }, "\(lines)")
        XCTAssertTrue(try rulesChangedFindings()["9002"]?.contains("(its month, 2026-10, is closed: correct it in an open month)") ?? false)
        // A second change: the first finding stays open as it was, and the summary adds up both.
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,170,2020-01-01")
                        .replacingOccurrences(of: "coins.100,USA,0.99,2020-01-01", with: "coins.100,USA,1.09,2020-01-01"))
        let second = try XCTUnwrap(try ws.run("2026-11-05").rulesChanged?.lines)
        XCTAssertTrue(second.contains { $0.hasPrefix("open in all after tonight: 3 RULES_CHANGED findings to book, today's rules would book") }, "\(second)")
    }

    /// A sale of a closed month posted late (on the first open day) sits in that open month:
    /// its finding says so, with the day it was posted on and the date it keeps, and the
    /// summary does not count it in months closed; once that month is closed too, it is.
    func testALateSaleIsCorrectedInTheMonthItWasPostedIn() throws {
        try ws.run("2026-10-31")
        _ = try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: ws.workspace, asOf: Day(iso: "2026-11-01")!, closedBy: "carol", closedAt: "2026-11-01T09:00:00Z")
        try ws.write("inbox/receipts/late.jsonl", Receipt.response([Receipt.item("9104", purchased: "2026-10-30T10:00:00Z")]) + "\n")
        try ws.run("2026-11-02")
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,USA,0.99,2020-01-01", with: "coins.100,USA,1.09,2020-01-01"))
        let lines = try XCTUnwrap(try ws.run("2026-11-03").rulesChanged?.lines)
        XCTAssertTrue(lines.contains { $0.hasPrefix("rules/prices.csv: coins.100 in USA 0.99 USD -> 1.09 USD: 2 sales posted (1 of them in months closed: corrected in an open one)") }, "\(lines)")
        let late = try XCTUnwrap(try rulesChangedFindings()["9104"])
        XCTAssertTrue(late.hasPrefix("posted 2026-11-01 (late; original date 2026-10-30) by rules the files now give otherwise"), late)
        XCTAssertFalse(late.contains("is closed"), late)
        XCTAssertTrue(try rulesChangedFindings()["9003"]?.contains("(its month, 2026-10, is closed: correct it in an open month)") ?? false)

        // A finding worded by a version before this one (its original date, its original month
        // closed), booked (dismissed): a later change elsewhere does not ask for it again.
        let old = late.replacingOccurrences(of: "posted 2026-11-01 (late; original date 2026-10-30)", with: "posted 2026-10-30")
            .replacingOccurrences(of: ": book a correction where one is due", with: " (its month, 2026-10, is closed: correct it in an open month): book a correction where one is due")
        try DatabaseQueue(path: dbPath).write { try $0.execute(sql: "UPDATE finding SET message = ? WHERE code = 'RULES_CHANGED' AND transaction_id = '9104'", arguments: [old]) }
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "9104")], workspace: ws.workspace, reason: "JE-9", by: "dana", at: "2026-11-03T09:00:00Z")
        try ws.run("2026-11-04")
        XCTAssertNil(try rulesChangedFindings()["9104"])
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,USA,0.99,2020-01-01", with: "coins.100,USA,1.09,2020-01-01")
                        .replacingOccurrences(of: "coins.100,JPN,160,2020-01-01", with: "coins.100,JPN,170,2020-01-01"))
        try ws.run("2026-11-05")
        XCTAssertNil(try rulesChangedFindings()["9104"], "booked, as it was worded then")
        XCTAssertNotNil(try rulesChangedFindings()["9002"], "the new change is said")
    }

    /// Corrections booked (dismissed) and the rule undone before the next night: that night
    /// applies the dismissals first, then asks for the corrections' reversal (it resolved the
    /// findings, the booking lost).
    func testARuleUndoneBeforeTheNightAfterItsCorrectionsWereBookedAsksForTheirReversal() throws {
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,11.0"))
        try ws.run("2026-10-08")
        XCTAssertEqual(Set(try rulesChangedFindings().keys), ["9001"])
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "*")], workspace: ws.workspace, reason: "JE-7", by: "dana", at: "2026-10-08T09:00:00Z")
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX)
        let night = try ws.run("2026-10-09")
        XCTAssertEqual(night.findingsDismissed, 1)
        XCTAssertEqual(night.rulesChanged?.lines.first, "1 sale whose RULES_CHANGED finding was dismissed (a correction booked) the rules book as posted again (or refunded since: in full, or in part with nothing left to correct): reverse that correction (a finding each, open again)")
        XCTAssertTrue(try rulesChangedFindings()["9001"]?.hasPrefix("reverse the correction: posted 2026-10-05, it is booked again as the rules now give it; its earlier RULES_CHANGED finding was dismissed (dismissed by dana on 2026-10-08: JE-7)") ?? false)
    }

    /// A night whose only findings are ones opened again (a rule undone after its correction
    /// was booked) says where they are listed; it ended its line with a colon and no list.
    func testANightThatOnlyOpensFindingsAgainSaysWhereTheyAre() throws {
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,11.0"))
        try ws.run("2026-10-08")
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "*")], workspace: ws.workspace, reason: "JE-7", by: "dana", at: "2026-10-08T09:00:00Z")
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX)
        let night = try Resilience.cli(["run", "--as-of", "2026-10-09", "--no-progress", "--workspace", ws.root.path])
        XCTAssertEqual(night.status, 0, night.err)
        let line = try XCTUnwrap(night.out.split(separator: "\n").first { $0.hasPrefix("  this run: ") }, night.out)
        XCTAssertTrue(line.contains("opened again"), String(line))
        XCTAssertTrue(line.hasSuffix("; `iapledger findings` lists them, Run Info in the workbook too"), String(line))
    }

    /// A correction booked and not reversed is carried from finding to finding: a second change
    /// on top, then the first undone, then the second (the booked correction asked to be
    /// reversed at the end); a reversal open when the rate changes again (set against the new
    /// difference); a rule re-applied after its correction was booked and reversed (asked
    /// again, not dismissed under the first booking's note).
    func testABookedCorrectionIsCarriedUntilItIsReversed() throws {
        func dismissAll(_ reason: String, at: String) throws {
            _ = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "*")], workspace: ws.workspace, reason: reason, by: "dana", at: at)
        }
        let fxA = TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.20")
        let priceB = TestWorkspace.defaultPrices.replacingOccurrences(of: "coins.100,DEU,1.09,2020-01-01", with: "coins.100,DEU,1.19,2020-01-01")
        // A; booked. B on top: 9001 carries JE-A. A undone: still carries it. B undone: reverse JE-A.
        try ws.write("rules/fx.csv", fxA)
        try ws.run("2026-10-08")
        try dismissAll("JE-A", at: "2026-10-08T09:00:00Z")
        try ws.write("rules/prices.csv", priceB)
        try ws.run("2026-10-09")
        XCTAssertTrue(try rulesChangedFindings()["9001"]?.contains("A correction was booked for its earlier finding (dismissed by dana on 2026-10-08: JE-A)") ?? false)
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX)
        try ws.run("2026-10-10")
        let carried = try XCTUnwrap(try rulesChangedFindings()["9001"])
        XCTAssertTrue(carried.hasPrefix("posted 2026-10-05 by rules the files now give otherwise: rules/prices.csv: coins.100 in DEU 1.09 EUR -> 1.19 EUR;"), carried)
        XCTAssertTrue(carried.contains("A correction was booked for its earlier finding (dismissed by dana on 2026-10-08: JE-A)"), carried)
        try ws.write("rules/prices.csv", TestWorkspace.defaultPrices)
        try ws.run("2026-10-11")
        XCTAssertTrue(try rulesChangedFindings()["9001"]?.hasPrefix("reverse the correction: posted 2026-10-05, it is booked again as the rules now give it; its earlier RULES_CHANGED finding was dismissed (dismissed by dana on 2026-10-08: JE-A)") ?? false)
        // The reversal open, the rate changed again: the new difference is set against JE-A.
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.30"))
        try ws.run("2026-10-12")
        let again = try XCTUnwrap(try rulesChangedFindings()["9001"])
        XCTAssertTrue(again.hasPrefix("posted 2026-10-05 by rules the files now give otherwise: rules/fx.csv: EUR 2026-10 1.10 -> 1.30;"), again)
        XCTAssertTrue(again.contains("A correction was booked for its earlier finding (dismissed by dana on 2026-10-08: JE-A)"), again)
        // Back to as posted: reverse JE-A; reversal booked (dismissed); A re-applied: asked again.
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX)
        try ws.run("2026-10-13")
        XCTAssertTrue(try rulesChangedFindings()["9001"]?.hasPrefix("reverse the correction: ") ?? false)
        try dismissAll("JE-R", at: "2026-10-13T09:00:00Z")
        try ws.write("rules/fx.csv", fxA)
        let redo = try ws.run("2026-10-14")
        let open = try rulesChangedFindings()
        XCTAssertEqual(Set(open.keys), ["9001"], "\(redo.rulesChanged?.lines ?? [])")
        XCTAssertTrue(open["9001"]?.hasPrefix("posted 2026-10-05 by rules the files now give otherwise: rules/fx.csv: EUR 2026-10 1.10 -> 1.20;") ?? false)
        XCTAssertFalse(open["9001"]?.contains("A correction was booked") ?? true, "booked and reversed: nothing stands")
    }

    /// A sale whose correction was booked, then refunded in full (its refund at the posted
    /// amounts): the booked correction is to be reversed (it was left standing).
    func testACorrectionBookedForASaleRefundedInFullSinceIsToBeReversed() throws {
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.20"))
        try ws.run("2026-10-08")
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("RULES_CHANGED", "*")], workspace: ws.workspace, reason: "JE-9", by: "dana", at: "2026-10-08T09:00:00Z")
        try ws.write("inbox/receipts/refund.jsonl", Receipt.response([Receipt.item("9001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-08T12:00:00Z")]) + "\n")
        try ws.run("2026-10-09")
        // (The check runs on a night after a rules file changed, before that night reads.)
        try ws.write("rules/fx.csv", TestWorkspace.defaultFX.replacingOccurrences(of: "2026-10,EUR,1.10", with: "2026-10,EUR,1.20") + "\n2026-12,EUR,1.2\n")
        try ws.run("2026-10-10")
        let found = try rulesChangedFindings()
        XCTAssertTrue(found["9001"]?.hasPrefix("reverse the correction: posted 2026-10-05, it was refunded in full since, at its posted amounts; its earlier RULES_CHANGED finding was dismissed (dismissed by dana on 2026-10-08: JE-9)") ?? false,
                      "\(found)")
    }
}
