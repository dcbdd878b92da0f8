import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// A sale waiting for a rule is tried again only on a night when something it waits for
/// changed (its transaction, an order naming it, the config, a rules file, iapledger's
/// version): the others would wait again for the same reason, and a month of sales waiting for
/// its FX rate took every night longer as it went (171,632 waiting: 8.75 s of a 16 s night
/// with nothing new, 0.49 s after).
final class WaitingSaleRetryTests: ScratchTestCase {
    override func tearDown() {
        NightlyRun.alwaysRetryEveryWaitingSale = false
        super.tearDown()
    }

    /// The night each waiting sale's finding was last said (`finding.last_run_id`): the night
    /// that last tried the sale.
    func lastTried(_ ws: TestWorkspace) throws -> [String: String] {
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        var tried: [String: String] = [:]
        for r in try ledger.read({ try $0.rawRows("SELECT transaction_id, last_run_id FROM finding WHERE code = 'MISSING_RULE'") }) {
            tried[r[0]] = r[1]
        }
        return tried
    }

    func testASaleWaitingForARuleIsTriedAgainWhenWhatItWaitsForChanges() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        let header = "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at\n"
        // 2001: its order names DEU, and November has no EUR rate. 2002: a product the rules
        // do not list. 2003: posts.
        try ws.write("inbox/orders/o1.csv", header + "ord-1,acct-1,2001,coins.100,1,100,2026-11-03T10:00:05Z,production,DEU,,\n")
        try ws.write("inbox/receipts/n.jsonl", [
            Receipt.response([Receipt.item("2001", purchased: "2026-11-03T10:00:00Z")]),
            Receipt.response([Receipt.item("2002", product: "coins.999", purchased: "2026-11-03T11:00:00Z")]),
            Receipt.response([Receipt.item("2003", purchased: "2026-11-03T12:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        XCTAssertEqual(try ws.run("2026-11-04").counts.entriesPosted, 1)
        XCTAssertEqual(try lastTried(ws), ["2001": "1", "2002": "1"])

        // Nothing they wait for changed: neither is tried (a new sale is).
        try ws.write("inbox/receipts/n2.jsonl", Receipt.response([Receipt.item("2004", purchased: "2026-11-04T12:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-11-05").counts.entriesPosted, 1)
        XCTAssertEqual(try lastTried(ws), ["2001": "1", "2002": "1"])
        XCTAssertEqual(try ws.run("2026-11-06").counts.entriesPosted, 0)
        XCTAssertEqual(try lastTried(ws), ["2001": "1", "2002": "1"])

        // Its order is sent again naming USA: 2001 is tried, and posts there; 2002 is not tried.
        try ws.write("inbox/orders/o2.csv", header + "ord-1,acct-1,2001,coins.100,1,100,2026-11-03T10:00:05Z,production,USA,,\n")
        let r4 = try ws.run("2026-11-07")
        XCTAssertEqual(r4.counts.entriesPosted, 1)
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
            .read { try $0.rawRows("SELECT storefront, run_id FROM entry WHERE transaction_id = '2001'") }, [["USA", "4"]])
        XCTAssertEqual(try lastTried(ws)["2002"], "1")

        // An order read again that no longer names it: the sale it named before is tried too.
        try ws.write("inbox/orders/o3.csv", header + "ord-9,acct-1,2002,coins.999,1,100,2026-11-03T11:00:05Z,production,DEU,,\n")
        try ws.run("2026-11-08")
        XCTAssertEqual(try lastTried(ws)["2002"], "5")
        try ws.write("inbox/orders/o4.csv", header + "ord-9,acct-1,2005,coins.999,1,100,2026-11-03T11:00:05Z,production,DEU,,\n")
        try ws.run("2026-11-09")
        XCTAssertEqual(try lastTried(ws)["2002"], "6")

        // A rules file changed (a row that is not the one it waits for): every waiting sale is
        // tried; the night after, none.
        try ws.append("rules/fx.csv", "\n2026-11,JPY,0.0067\n")
        try ws.run("2026-11-10")
        XCTAssertEqual(try lastTried(ws)["2002"], "7")
        try ws.run("2026-11-11")
        XCTAssertEqual(try lastTried(ws)["2002"], "7")

        // The config changed: every one again. Then the rule it waits for: it posts.
        try ws.append("iapledger.toml", "\n# a comment changes the file\n")
        try ws.run("2026-11-12")
        XCTAssertEqual(try lastTried(ws)["2002"], "9")
        try ws.append("rules/products.csv", "\ncoins.999,consumable,999\n")
        try ws.append("rules/prices.csv", "\ncoins.999,USA,9.99,2020-01-01\n")
        XCTAssertEqual(try ws.run("2026-11-13").counts.entriesPosted, 1)
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
            .read { try $0.rawRows("SELECT count(*) FROM store_transaction WHERE sale_status = 'pending'") }, [["0"]])
    }

    /// A night that touched many more keys than sales ever waited for a rule tries every one
    /// (cheaper than listing its keys; the same ledger).
    func testFewWaitingSalesAgainstManyTouchedKeysAreAllTried() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2002", product: "coins.999", purchased: "2026-11-03T11:00:00Z")]) + "\n")
        try ws.run("2026-11-04")
        try ws.write("inbox/receipts/few.jsonl", (0..<20).map { Receipt.response([Receipt.item("31\($0)", purchased: "2026-11-04T10:00:00Z")]) }.joined(separator: "\n") + "\n")
        try ws.run("2026-11-05")
        XCTAssertEqual(try lastTried(ws)["2002"], "1", "20 keys touched: only those are listed")
        try ws.write("inbox/receipts/many.jsonl", (0..<40).map { Receipt.response([Receipt.item("32\($0)", purchased: "2026-11-05T10:00:00Z")]) }.joined(separator: "\n") + "\n")
        try ws.run("2026-11-06")
        XCTAssertEqual(try lastTried(ws)["2002"], "3", "40 keys touched, one sale ever waiting for a rule: every one tried")
    }

    /// Every waiting sale is tried again on the ledger's first night, and when the config or a
    /// rules file differs from the last night's, or that night ran another version of
    /// iapledger (its rules of posting may differ), another build of it, or an older schema.
    func testEveryWaitingSaleIsTriedWhenTheFilesOrTheVersionDiffer() {
        let files = ["iapledger.toml": "a", "rules/fx.csv": "b"]
        let this = (tool: NightlyRun.toolVersion, newestSchema: true)
        XCTAssertFalse(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: this, build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: nil, build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: [:], lastNightVersion: this, build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files.merging(["rules/fx.csv": "c"]) { $1 }, lastNightVersion: this, build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files.merging(["rules/other.csv": "c"]) { $1 }, lastNightVersion: this, build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: nil, lastNightFiles: files, lastNightVersion: this, build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: (tool: "0.0.9", newestSchema: true), build: "b1", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: (tool: NightlyRun.toolVersion, newestSchema: false), build: "b1", lastNightBuild: "b1"))
        // Another build of the same version (its code changed), or one without a build ID.
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: this, build: "b2", lastNightBuild: "b1"))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: this, build: "b1", lastNightBuild: nil))
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: this, build: nil, lastNightBuild: nil))
        NightlyRun.alwaysRetryEveryWaitingSale = true
        XCTAssertTrue(NightlyRun.retryEveryWaitingSale(files: files, lastNightFiles: files, lastNightVersion: this, build: "b1", lastNightBuild: "b1"))
    }

    /// The demo's ledger (its sales of yearly subscriptions in India wait for a price, its
    /// November sales in Brazil for a rate), over nights that re-send some of their orders at
    /// another storefront, change nothing, then bring the rate and the price: trying only the
    /// touched waiting sales gives the ledger that trying every one gives, table by table, but
    /// for the night each finding was last said.
    func testTryingOnlyTouchedWaitingSalesChangesNothingElse() throws {
        var ledgers: [[String]] = []
        var skipped: [Int] = []
        for every in [true, false] {
            NightlyRun.alwaysRetryEveryWaitingSale = every
            let root = newScratch("retry-\(every)")
            _ = try DemoWorkspace.create(at: root, transactions: 400, seed: 11, asOf: Day(iso: "2026-11-21")!)
            let workspace = Workspace(root)
            func night(_ day: String) throws { _ = try NightlyRun(workspace: workspace, asOf: Day(iso: day)!).run() }
            func ledger() throws -> Ledger { try Ledger(path: root.appendingPathComponent("ledger.sqlite").path, readOnly: true) }
            func append(_ file: String, _ text: String) throws {
                let h = try FileHandle(forWritingTo: root.appendingPathComponent(file))
                h.seekToEndOfFile(); h.write(Data(text.utf8)); h.closeFile()
            }
            try night("2026-11-21")
            let waiting = try ledger().read { try $0.rawRows("""
                SELECT v.order_id, v.account_id, v.transaction_id, v.product_id, v.quantity, v.credited_units, v.credited_at,
                       v.environment, ifnull(v.app_account_token, ''), ifnull(v.reversed_at, '')
                FROM order_version v JOIN store_transaction t ON t.transaction_id = v.transaction_id
                WHERE t.pending_reason LIKE 'MISSING_RULE:%' AND v.storefront = 'IND' ORDER BY v.id LIMIT 3
                """) }
            XCTAssertEqual(waiting.count, 3)
            let resent = waiting.map { r in (r[0..<8] + ["USA"] + r[8...]).joined(separator: ",") }
            try Data(("order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at\n"
                      + resent.joined(separator: "\n") + "\n").utf8).write(to: root.appendingPathComponent("inbox/orders/resent-2026-11-22.csv"))
            try night("2026-11-22")
            try night("2026-11-23")
            // Nights that left a waiting sale untried: its finding last said by night 1.
            skipped.append(try ledger().read { try Int($0.rawRows("""
                SELECT count(*) FROM finding WHERE code = 'MISSING_RULE' AND last_run_id = 1 AND resolved_run_id IS NULL
                """)[0][0])! })
            try append("rules/fx.csv", "\n2026-11,BRL,0.19\n")
            try night("2026-11-24")
            try night("2026-11-25")
            let yearlyIND = try String(contentsOf: root.appendingPathComponent("rules/prices.csv"), encoding: .utf8)
                .split(separator: "\n").first { $0.hasPrefix("com.example.coins.vip.yearly,") }!
                .split(separator: ",")
            try append("rules/prices.csv", "\ncom.example.coins.vip.yearly,IND,\(yearlyIND[2]),2020-01-01\n")
            try night("2026-11-26")
            let tables = try ledger().read { r in
                try ["SELECT * FROM entry ORDER BY id", "SELECT * FROM store_transaction ORDER BY transaction_id",
                     "SELECT id, code, transaction_id, record_id, message, first_run_id, resolved_run_id FROM finding ORDER BY id",
                     "SELECT * FROM exception ORDER BY id", "SELECT * FROM reconciled_match ORDER BY 1, 2",
                     "SELECT * FROM seal ORDER BY id", "SELECT * FROM balance_month ORDER BY 1, 2, 3, 4",
                     "SELECT * FROM activity_month ORDER BY 1, 2, 3, 4, 5",
                     "SELECT id, as_of, records_read, entries_posted, chain_head FROM run ORDER BY id"]
                    .flatMap { sql in try r.rawRows(sql).map { sql.prefix(30) + " " + $0.joined(separator: "|") } }
            }
            ledgers.append(tables)
            XCTAssertEqual(try ledger().read { try $0.rawRows("SELECT count(*) FROM store_transaction WHERE pending_reason LIKE 'MISSING_RULE:%'") }, [["0"]],
                           "the price and the rate came: none waits for a rule")
        }
        XCTAssertGreaterThan(ledgers[0].filter { $0.hasPrefix("SELECT * FROM entry") }.count, 300)
        XCTAssertEqual(ledgers[0].count, ledgers[1].count)
        if let i = ledgers[0].indices.first(where: { $0 < ledgers[1].count && ledgers[0][$0] != ledgers[1][$0] }) {
            XCTFail("first difference, line \(i): every one tried \(ledgers[0][i]), only those touched \(ledgers[1][i])")
        }
        XCTAssertEqual(skipped[0], 0)
        XCTAssertGreaterThan(skipped[1], 5)
    }

    /// The build a night records is the program's GNU build ID, as `readelf -n` shows it.
    func testTheBuildIdentityIsTheProgramsGNUBuildID() throws {
        let binary = TraceAndCLITests.binary
        guard FileManager.default.fileExists(atPath: binary.path) else { throw XCTSkip("iapledger binary not built at \(binary.path)") }
        let id = try XCTUnwrap(BuildIdentity.read(path: binary.path))
        XCTAssertNotNil(id.range(of: "^[0-9a-f]{16,}$", options: .regularExpression), id)
        XCTAssertNotNil(BuildIdentity.current, "this test program has one too")
        XCTAssertNil(BuildIdentity.read(path: "/etc/hostname"), "not an ELF file")
        let readelf = ["/usr/bin/readelf", "/bin/readelf"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let readelf else { return }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: readelf)
        p.arguments = ["-n", binary.path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertTrue(text.contains("Build ID: \(id)"), text)
    }

    /// A sale's waiting reason written by hand would keep it waiting for ever (nights try a
    /// sale waiting for a rule again only when what decides it changed): `verify` decides each
    /// one again by the config and rules the last night posted by, and names one whose reason
    /// they do not give.
    func testVerifyNamesAWaitingReasonTheRulesDoNotGive() throws {
        let ws = try TestWorkspace(config: TestWorkspace.defaultConfig.replacingOccurrences(of: "order_wait_days = 0", with: "order_wait_days = 2"))
        defer { ws.remove() }
        // 2002 waits for a rule (its wait for an order over by 11-04); 2005 for its order, until 11-07.
        try ws.write("inbox/receipts/n.jsonl", [
            Receipt.response([Receipt.item("2005", purchased: "2026-11-05T10:00:00Z")]),
            Receipt.response([Receipt.item("2002", product: "coins.999", purchased: "2026-11-01T11:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-11-05")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        let queue = try DatabaseQueue(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        try queue.write { try $0.execute(sql: "UPDATE store_transaction SET pending_reason = 'MISSING_RULE: no FX rate for USD in 2026-11 in rules/fx.csv' WHERE transaction_id = '2005'") }
        var audit = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(audit.problems.map(\.message), ["transaction 2005 waits (MISSING_RULE: no FX rate for USD in 2026-11 in rules/fx.csv), but the config and rules run 1 posted by give a wait for its order: no storefront of its own, and no order naming one yet: waits for an order until the night of 2026-11-07 (order_wait_days = 2), then is booked at default_storefront USA: its reason was written by hand (a night tries a sale waiting for a rule again only when what decides it changed, so it could wait for ever; trace and the Pending sheet tell the reason written)"])
        // The other way: a wait for its order written over the missing rule it waits for (the
        // check read only reasons of a missing rule, and passed it).
        let kept = try queue.read { try String.fetchOne($0, sql: "SELECT pending_reason FROM store_transaction WHERE transaction_id = '2002'") }
        try queue.write { try $0.execute(sql: "UPDATE store_transaction SET pending_reason = 'ORDER_WAIT: no storefront of its own, and no order naming one yet: waits for an order until the night of 2026-11-03 (order_wait_days = 2), then is booked at default_storefront USA' WHERE transaction_id = '2002'") }
        let swapped = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(swapped.contains { $0.hasPrefix("transaction 2002 waits (ORDER_WAIT: no storefront of its own") && $0.contains("give another reason: MISSING_RULE: no row for product coins.999 in rules/products.csv") }, "\(swapped)")
        try queue.write { try $0.execute(sql: "UPDATE store_transaction SET pending_reason = ? WHERE transaction_id = '2002'", arguments: [kept]) }
        // Its wait for an order over, the next night leaves it waiting: it would post.
        try ws.run("2026-11-08")
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
            .read { try $0.rawRows("SELECT sale_status FROM store_transaction WHERE transaction_id = '2005'") }, [["pending"]])
        audit = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(audit.problems.map(\.message).first?.hasPrefix("transaction 2005 waits (MISSING_RULE: no FX rate for USD in 2026-11 in rules/fx.csv), but the config and rules run 2 posted by give it a sale to post"), true, "\(audit.problems)")
        try queue.write { try $0.execute(sql: "UPDATE store_transaction SET pending_reason = 'MISSING_RULE: no row for product coins.998 in rules/products.csv' WHERE transaction_id = '2002'") }
        audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.problems.contains { $0.message.hasPrefix("transaction 2002 waits (MISSING_RULE: no row for product coins.998 in rules/products.csv), but the config and rules run 2 posted by give another reason: MISSING_RULE: no row for product coins.999 in rules/products.csv") }, "\(audit.problems)")
        XCTAssertEqual(audit.problems.count, 2)
        try queue.close()
    }
}
