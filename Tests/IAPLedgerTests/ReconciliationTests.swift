import GRDB
import XCTest
@testable import LedgerCore
import LedgerRead
@testable import LedgerReconcile
@testable import LedgerRun
@testable import LedgerStore

/// Reconciliation (reconciliation.md): one scenario per category, a clean match, and the
/// lifecycle of an exception over three nights.
final class ReconciliationTests: XCTestCase {
    let products: [String: ProductRule] = [
        "coins.100": ProductRule(productId: "coins.100", type: .consumable, units: 100),
        "coins.550": ProductRule(productId: "coins.550", type: .consumable, units: 550),
        "vip.monthly": ProductRule(productId: "vip.monthly", type: .autoRenewable, units: 0),
    ]

    func tx(_ id: String, book: Book = .production, product: String = "coins.100", quantity: Int64 = 1, token: String? = "tok-a",
            refundedInFull: Bool = false, refunded: Bool = false) -> ReconTransaction {
        ReconTransaction(transactionId: id, book: book, productId: product, quantity: quantity, appAccountToken: token,
                         refundedInFull: refundedInFull, refunded: refunded || refundedInFull, grossMinor: 99, currency: "USD",
                         netReportingMinor: 99)
    }

    func order(_ id: String, tx: String?, product: String = "coins.100", quantity: Int64 = 1, units: Int64 = 100,
               at: Int64 = 1000, env: String = "production", token: String? = "tok-a", active: Bool = true) -> ReconOrder {
        ReconOrder(orderId: id, accountId: "acct-1", transactionId: tx, productId: product, quantity: quantity,
                   creditedUnits: units, creditedMs: at, environment: env, appAccountToken: token, active: active)
    }

    func run(_ txs: [ReconTransaction], _ orders: [ReconOrder], unverified: Set<String> = []) -> ReconciliationResult {
        Reconciler(products: products).reconcile(transactions: txs, orders: orders, unverifiedIds: unverified)
    }

    func keys(_ r: ReconciliationResult) -> [String] {
        r.exceptions.map { "\($0.category.rawValue) \($0.transactionId) \($0.orderId)" }
    }

    /// Each row: the store's transactions and the backend's orders in, the exceptions out.
    func testOneScenarioPerCategoryAndACleanMatch() {
        let cases: [(String, [ReconTransaction], [ReconOrder], Set<String>, [String], Int)] = [
            ("clean match", [tx("t1")], [order("o1", tx: "t1")], [], [], 1),
            ("duplicate credit", [tx("t1")], [order("o1", tx: "t1", at: 1), order("o2", tx: "t1", at: 2)], [],
             ["DUPLICATE_CREDIT t1 o2"], 1),
            ("sandbox credited in production", [tx("t1", book: .sandbox)], [order("o1", tx: "t1")], [],
             ["SANDBOX_CREDITED_IN_PRODUCTION t1 o1"], 0),
            ("sandbox credited in sandbox is fine", [tx("t1", book: .sandbox)], [order("o1", tx: "t1", env: "sandbox")], [], [], 1),
            ("refunded still credited", [tx("t1", refundedInFull: true)], [order("o1", tx: "t1")], [],
             ["REFUNDED_STILL_CREDITED t1 o1"], 0),
            ("refunded and reversed credit is fine", [tx("t1", refundedInFull: true)], [order("o1", tx: "t1", active: false)], [], [], 0),
            ("not credited (lost order)", [tx("t1")], [], [], ["NOT_CREDITED t1 "], 0),
            ("not credited ignores subscriptions", [tx("t1", product: "vip.monthly")], [], [], [], 0),
            ("not credited ignores refunded", [tx("t1", refunded: true)], [], [], [], 0),
            ("credited without transaction id", [], [order("o1", tx: nil)], [], ["CREDITED_WITHOUT_TRANSACTION  o1"], 0),
            ("credited with an unknown id", [], [order("o1", tx: "ghost")], [], ["CREDITED_WITHOUT_TRANSACTION ghost o1"], 0),
            ("credited unverified", [], [order("o1", tx: "t9")], ["t9"], ["CREDITED_UNVERIFIED t9 o1"], 0),
            ("account mismatch", [tx("t1", token: "tok-a")], [order("o1", tx: "t1", token: "tok-b")], [], ["ACCOUNT_MISMATCH t1 o1"], 0),
            ("account token case-insensitive", [tx("t1", token: "ABC")], [order("o1", tx: "t1", token: "abc")], [], [], 1),
            ("product mismatch", [tx("t1")], [order("o1", tx: "t1", product: "coins.550")], [], ["PRODUCT_MISMATCH t1 o1"], 0),
            ("quantity mismatch", [tx("t1", quantity: 2)], [order("o1", tx: "t1", quantity: 1, units: 200)], [], ["QUANTITY_MISMATCH t1 o1"], 0),
            ("units mismatch", [tx("t1")], [order("o1", tx: "t1", units: 1000)], [], ["UNITS_MISMATCH t1 o1"], 0),
            // Out of scope (a subscription, by default): not reconciled, so neither an
            // exception nor a match, whatever its orders say.
            ("out of scope: credited twice, refunded, in sandbox, mismatched",
             [tx("t1", product: "vip.monthly", refundedInFull: true), tx("t2", book: .sandbox, product: "vip.monthly", quantity: 2)],
             [order("o1", tx: "t1", product: "vip.monthly", at: 1), order("o2", tx: "t1", product: "vip.monthly", at: 2),
              order("o3", tx: "t2", product: "vip.monthly", token: "tok-z")], [], [], 0),
            ("out of scope, but an order of coins on it is checked by its own product",
             [tx("t2", book: .sandbox, product: "vip.monthly", quantity: 2)],
             [order("o3", tx: "t2", product: "coins.100", token: "tok-z"), order("o4", tx: "t2", product: "vip.monthly", at: 1)], [],
             ["SANDBOX_CREDITED_IN_PRODUCTION t2 o3", "ACCOUNT_MISMATCH t2 o3", "PRODUCT_MISMATCH t2 o3", "QUANTITY_MISMATCH t2 o3", "UNITS_MISMATCH t2 o3"], 0),
            ("out of scope: a clean order is not a match", [tx("t1", product: "vip.monthly")],
             [order("o1", tx: "t1", product: "vip.monthly", units: 0)], [], [], 0),
            ("an order naming no known transaction is in scope by its product",
             [], [order("o1", tx: "ghost", product: "vip.monthly"), order("o2", tx: nil, product: "vip.monthly"),
                  order("o3", tx: "ghost2", product: "coins.100")], [], ["CREDITED_WITHOUT_TRANSACTION ghost2 o3"], 0),
        ]
        for (name, txs, orders, unverified, want, matched) in cases {
            let r = run(txs, orders, unverified: unverified)
            XCTAssertEqual(keys(r), want, name)
            XCTAssertEqual(r.matched, matched, name)
        }
    }

    /// The fingerprint carries the logic's version: a ledger reconciled by the version before
    /// (out-of-scope groups raising exceptions and matching) is reconciled again in full on the
    /// first night after the upgrade, not only where that night's data touched it.
    func testTheFingerprintChangesWithTheLogic() {
        let r = Reconciler(products: products)
        var before = "scope:" + r.scope.map(\.rawValue).sorted().joined(separator: ",") + "\n"
        for id in products.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            before += "\(id.utf8.count):\(id) \(products[id]!.type.rawValue) \(products[id]!.units)\n"
        }
        XCTAssertNotEqual(r.rulesFingerprint, Hashing.sha256Hex(Array(before.utf8)), "the version-1 fingerprint")
        XCTAssertEqual(Reconciler.logicVersion, 5)
    }

    /// Migration v24 notes the refused items of the nights before it as unverified, so their
    /// orders are CREDITED_UNVERIFIED after the upgrade too.
    func testTheMigrationNotesRefusedItemsOfEarlierNights() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("v1", quantity: 0, purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", Self.header + "o-v1,acct-1,v1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        // As a ledger of v23 had it: no link for the refused item, its order a credit without transaction.
        try Tamper.run(path, past: "unverified_record_transaction_no_delete", """
            DELETE FROM unverified_record_transaction;
            DELETE FROM grdb_migrations WHERE identifier = 'v24-refused-items-unverified'
            """)
        // A product's units change, so the next night reconciles every group again (as the
        // first night after the upgrade does, the logic's version being in the fingerprint).
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts.replacingOccurrences(of: "coins.550,consumable,550", with: "coins.550,consumable,551"))
        try ws.run("2026-10-08")   // a new night, nothing new to read: the ledger is upgraded first
        XCTAssertEqual(try Ledger(path: path, readOnly: true).read { try Int.fetchOne($0.db, sql: "SELECT count(*) FROM unverified_record_transaction") }, 1,
                       "v24 ran again")
        XCTAssertEqual(Set(try exceptionsJSON().filter { $0["status"] as? String == "open" }.map { "\($0["category"]!) \($0["order_id"]!)" }),
                       ["CREDITED_UNVERIFIED o-v1"])
    }

    /// Coins credited against a subscription's transaction (out of scope by default): the coin
    /// order is checked by its own product and raises PRODUCT_MISMATCH and UNITS_MISMATCH, while
    /// the subscription's own orders beside it stay unchecked (no DUPLICATE_CREDIT, no match).
    /// A subscription alone, or credited for what it is, still raises nothing.
    func testAnOrderOfAProductInScopeNamingASubscriptionIsChecked() {
        let sub = tx("s1", product: "vip.monthly")
        XCTAssertEqual(keys(run([sub], [order("o-coins", tx: "s1", units: 100)])),
                       ["PRODUCT_MISMATCH s1 o-coins", "UNITS_MISMATCH s1 o-coins"])
        let r = run([sub], [order("o-vip", tx: "s1", product: "vip.monthly", units: 0), order("o-coins", tx: "s1", units: 100, at: 2000)])
        XCTAssertEqual(keys(r), ["PRODUCT_MISMATCH s1 o-coins", "UNITS_MISMATCH s1 o-coins"])
        XCTAssertEqual(r.matched, 0)
        XCTAssertEqual(keys(run([sub], [order("o-vip", tx: "s1", product: "vip.monthly", units: 0),
                                        order("o-vip2", tx: "s1", product: "vip.monthly", units: 0, at: 2000)])), [])
        XCTAssertEqual(keys(run([sub], [])), [])
        // A reversed coin credit is no longer active: nothing.
        XCTAssertEqual(keys(run([sub], [order("o-coins", tx: "s1", units: 100, active: false)])), [])
    }

    func testOneOrderCanRaiseSeveralInCheckOrder() {
        let r = run([tx("t1", book: .sandbox, quantity: 2)], [order("o1", tx: "t1", quantity: 1, units: 100)])
        XCTAssertEqual(keys(r), ["SANDBOX_CREDITED_IN_PRODUCTION t1 o1", "QUANTITY_MISMATCH t1 o1", "UNITS_MISMATCH t1 o1"])
    }

    // MARK: End to end

    var ws: TestWorkspace!
    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }
    func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }

    static let header = "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at\n"

    func exceptionsJSON() throws -> [[String: Any]] {
        let rows = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read { r in
            (try r.exceptions(status: "all"), try r.lastAsOf()!)
        }
        let text = ExceptionsOutput.render(rows.0, asOf: rows.1, format: "json")
        return try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [[String: Any]]
    }

    /// `[reconciliation] scope` decides which products are reconciled: a subscription credited
    /// twice raises nothing and is no match by default; put in scope, the next night (which
    /// reconciles every group again, the scope having changed) raises its duplicate credit,
    /// and the Summary says which types are reconciled.
    func testTheScopeIsConfigurable() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([
            Receipt.item("s1", product: "vip.monthly", purchased: "2026-10-05T10:00:00Z", expires: "2026-11-05T10:00:00Z"),
            Receipt.item("c1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", Self.header + """
            o-s1a,acct-1,s1,vip.monthly,1,0,2026-10-05T10:01:00Z,production,USA,,
            o-s1b,acct-1,s1,vip.monthly,1,0,2026-10-05T10:02:00Z,production,USA,,
            o-c1,acct-1,c1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,

            """)
        var r = try ws.run("2026-10-07")
        XCTAssertEqual(try exceptionsJSON().count, 0)
        var summary = try XLSXReader.sheets(r.workbooks[2])["Summary"]!
        XCTAssertEqual(summary.first { $0.first?.hasPrefix("Matched order/transaction pairs (") == true }?[1], "1", "c1 alone: s1 is not reconciled")
        XCTAssertEqual(summary.first { $0.first == "Product types reconciled" }?[1].hasPrefix("consumable, non_consumable; "), true)
        // trace says so.
        let s1 = try Resilience.cli(["trace", "s1", "--workspace", ws.root.path])
        XCTAssertTrue(s1.out.contains("Reconciliation with the backend's orders: not reconciled: vip.monthly is auto_renewable, and the scope is consumable, non_consumable"), s1.out)
        let c1 = try Resilience.cli(["trace", "c1", "--workspace", ws.root.path])
        XCTAssertTrue(c1.out.contains("Reconciliation with the backend's orders: matched with order o-c1 as of the last run"), c1.out)

        // Coins credited on the subscription's transaction are checked by their own product.
        try ws.write("inbox/orders/o2.csv", Self.header + "o-s1-coins,acct-1,s1,coins.550,1,550,2026-10-05T10:03:00Z,production,USA,,\n")
        r = try ws.run("2026-10-07")
        XCTAssertEqual(Set(try exceptionsJSON().map { "\($0["category"]!) \($0["order_id"]!)" }),
                       ["PRODUCT_MISMATCH o-s1-coins", "UNITS_MISMATCH o-s1-coins"])
        let s1Coins = try Resilience.cli(["trace", "s1", "--workspace", ws.root.path])
        XCTAssertTrue(s1Coins.out.contains("Reconciliation with the backend's orders: not reconciled for itself: vip.monthly is auto_renewable, and the scope is consumable, non_consumable ([reconciliation] scope in iapledger.toml); an order crediting a product in scope against it is checked: see its open exceptions"), s1Coins.out)
        try ws.write("inbox/orders/o2.csv", Self.header + "o-s1-coins,acct-1,s1,coins.550,1,550,2026-10-05T10:03:00Z,production,USA,,2026-10-06T09:00:00Z\n")
        r = try ws.run("2026-10-07")
        XCTAssertEqual(try exceptionsJSON().filter { $0["status"] as? String == "open" }.count, 0, "the coin credit reversed")

        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[reconciliation]\nscope = [\"consumable\", \"non_consumable\", \"auto_renewable\"]\n")
        r = try ws.run("2026-10-08")
        XCTAssertEqual(Set(try exceptionsJSON().filter { $0["status"] as? String == "open" }.map { "\($0["category"]!) \($0["order_id"]!)" }),
                       ["DUPLICATE_CREDIT o-s1b"])
        summary = try XLSXReader.sheets(r.workbooks[2])["Summary"]!
        XCTAssertEqual(summary.first { $0.first?.hasPrefix("Matched order/transaction pairs (") == true }?[1], "2", "c1 and s1's first order")
        XCTAssertEqual(summary.first { $0.first == "Product types reconciled" }?[1].hasPrefix("consumable, non_consumable, auto_renewable; "), true)
        let s1After = try Resilience.cli(["trace", "s1", "--workspace", ws.root.path, "--format", "json"])
        let reconciliation = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(s1After.out.utf8)) as? [String: Any])?["reconciliation"] as? [String: Any])
        XCTAssertEqual(reconciliation["in_scope"] as? Bool, true)
        XCTAssertEqual(reconciliation["matched_orders"] as? [String], ["o-s1a"])
    }

    /// The rows a spreadsheet writes for rows cleared of their values (`,,,,,,,`) and lines of
    /// spaces are blank lines: no record. They were refused (BAD_ORDER "order_id is empty", a
    /// row of one field), named no order, and stayed on the Rejected sheet until dismissed. A
    /// row with a quoted empty field is a row (refused for what it lacks).
    func testRowsOfEmptyFieldsAreBlankLines() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("e1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", Self.header + ",,,,,,,,,,\n" + "ord-e1,acct-1,e1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
                     + "   \n,,\t,, ,,,,,,\r\n,,,,,,,\n\n\"\",,,,,,,,,,\n")
        try ws.run("2026-10-06")
        let outcomes = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read {
            try $0.rawRows("SELECT r.line, r.outcome FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/orders/o.csv' ORDER BY r.line")
        }
        XCTAssertEqual(outcomes, [["3", "verified"], ["8", "rejected"]], "the quoted empty order id on line 8 is a row")
        XCTAssertEqual(Set(try exceptionsJSON().filter { $0["status"] as? String == "open" }.map { "\($0["category"]!)" }), [])

        // A short line followed by a last row of empty fields with no line end: the short line
        // ends with its own line end, so it is refused for what it lacks, not taken for cut short.
        try ws.write("inbox/orders/p.csv", Self.header + "ord-e2,acct-1,e2,coins.100,1,100,2026-10-05T10:01:00Z,production\n,,,,,,,,,,")
        try ws.run("2026-10-07")
        let p = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read {
            try $0.rawRows("SELECT r.line, r.reason_code FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/orders/p.csv' ORDER BY r.line")
        }
        XCTAssertEqual(p, [["2", "BAD_ORDER"]])
        // The same short line last, with no line end: cut short.
        try ws.write("inbox/orders/q.csv", Self.header + "ord-e3,acct-1,e3,coins.100,1,100,2026-10-05T10:01:00Z,production")
        try ws.run("2026-10-08")
        let q = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read {
            try $0.rawRows("SELECT r.line, r.reason_code FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/orders/q.csv' ORDER BY r.line")
        }
        XCTAssertEqual(q, [["2", "TRUNCATED"]])
    }

    /// An old export sent again under a new name, not as a byte copy (CRLF line ends): its row
    /// brings the order back to its first version, a later reversal undone, and the night says
    /// so (it was silent); a byte copy makes no version and is not said here.
    func testAnOrderBroughtBackToAnEarlierVersionIsSaid() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("b1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        let credit = "ord-1,acct-1,b1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,"
        try ws.write("inbox/orders/orders-1.csv", Self.header + credit + "\n")
        XCTAssertTrue(try ws.run("2026-10-06").ordersBroughtBack.isEmpty)
        try ws.write("inbox/orders/orders-2.csv", Self.header + credit + "2026-10-06T09:00:00Z\n")
        XCTAssertTrue(try ws.run("2026-10-07").ordersBroughtBack.isEmpty)
        try ws.write("inbox/orders/orders-1-copy.csv", Self.header + credit + "\n")
        try ws.write("inbox/orders/orders-1-resent.csv", (Self.header + credit + "\n").replacingOccurrences(of: "\n", with: "\r\n"))
        let back = try ws.run("2026-10-08").ordersBroughtBack
        XCTAssertEqual(back.map { "\($0.orderId) \($0.location) \($0.reversalUndone)" }, ["ord-1 inbox/orders/orders-1-resent.csv:2 true"])
        XCTAssertEqual(Set(try exceptionsJSON().filter { $0["status"] as? String == "open" }.map { "\($0["category"]!)" }), [], "credited again")

        // Told by what the rows say: the reversal again, then the credit with quoted fields and
        // its columns in another order, is said; the credit said once more in other bytes (it is
        // the latest already) is not.
        try ws.write("inbox/orders/orders-3.csv", Self.header + credit + "2026-10-08T09:00:00.000Z\n")
        XCTAssertTrue(try ws.run("2026-10-09").ordersBroughtBack.isEmpty, "a reversal of another instant's text: no earlier version says it")
        try ws.write("inbox/orders/orders-4.csv", "credited_at,order_id,account_id,transaction_id,product_id,quantity,credited_units,environment,storefront\n"
                     + "\"2026-10-05T10:01:00Z\",\"ord-1\",acct-1,b1,coins.100,1,100,production,usa\n")
        XCTAssertEqual(try ws.run("2026-10-10").ordersBroughtBack.map { "\($0.orderId) \($0.location) \($0.reversalUndone)" },
                       ["ord-1 inbox/orders/orders-4.csv:2 true"])
        try ws.write("inbox/orders/orders-5.csv", Self.header + credit.replacingOccurrences(of: "ord-1,", with: "\"ord-1\",") + "\n")
        XCTAssertTrue(try ws.run("2026-10-11").ordersBroughtBack.isEmpty, "the latest said again in other bytes")
        // A history export (the credit, then its reversal) sent again in other bytes leaves the
        // order as it was: nothing said. A token said in other case is the same token.
        try ws.write("inbox/orders/orders-6.csv", Self.header + credit + "2026-10-11T09:00:00Z\n")
        XCTAssertTrue(try ws.run("2026-10-12").ordersBroughtBack.isEmpty)
        try ws.write("inbox/orders/orders-7.csv", (Self.header + credit + "\n" + credit + "2026-10-11T09:00:00Z\n").replacingOccurrences(of: "\n", with: "\r\n"))
        XCTAssertTrue(try ws.run("2026-10-13").ordersBroughtBack.isEmpty, "credited, then reversed again: as it was")
        let token = credit.replacingOccurrences(of: ",USA,,", with: ",USA,tok-A,")
        try ws.write("inbox/orders/orders-8.csv", Self.header + token + "\n")
        try ws.write("inbox/orders/orders-9.csv", Self.header + token.replacingOccurrences(of: "tok-A", with: "TOK-a") + "\n")
        _ = try ws.run("2026-10-14")
        try ws.write("inbox/orders/orders-10.csv", Self.header + token + "\n")
        XCTAssertTrue(try ws.run("2026-10-15").ordersBroughtBack.isEmpty, "the token in other case is the same")
        // Reversed, then credited again by a row no version said before (another quantity): said,
        // its reversal undone.
        try ws.write("inbox/orders/orders-11.csv", Self.header + token + "2026-10-15T09:00:00Z\n")
        _ = try ws.run("2026-10-16")
        try ws.write("inbox/orders/orders-12.csv", Self.header + token.replacingOccurrences(of: ",coins.100,1,100,", with: ",coins.100,2,200,") + "\n")
        XCTAssertEqual(try ws.run("2026-10-17").ordersBroughtBack.map { "\($0.orderId) \($0.location) \($0.reversalUndone)" },
                       ["ord-1 inbox/orders/orders-12.csv:2 true"])
    }

    /// A cumulative orders export sent each night under a dated name holds a reversed order's
    /// credit row, then its reversal row: the file leaves the order where it stands, so neither
    /// row makes a version (each night made two: the credit brought back, then reversed again,
    /// `trace` listing a couple of hundred versions after a year). A file that leaves an order
    /// elsewhere still makes its versions, and one that goes away and comes back within a file
    /// makes none. Read whole, and a part at a time as a big file, under new names and grown
    /// under one; `verify` agrees with each night.
    func testACumulativeExportLeavingAnOrderAsItStandsMakesNoVersions() throws {
        try cumulativeExport(streamed: false)
    }

    func testACumulativeExportLeavingAnOrderAsItStandsMakesNoVersionsReadAPartAtATime() throws {
        defer { PreparedFile.ordersAboveBytes = 16 << 20 }
        PreparedFile.ordersAboveBytes = 10
        try cumulativeExport(streamed: true)
    }

    func cumulativeExport(streamed: Bool) throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("cx1", purchased: "2026-10-05T10:00:00Z"),
                                                                 Receipt.item("cx2", purchased: "2026-10-05T11:00:00Z")]) + "\n")
        let credit = "ord-x,acct-1,cx1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,"
        let other = "ord-y,acct-2,cx2,coins.100,1,100,2026-10-05T11:01:00Z,production,USA,,"
        var export = Self.header + credit + "\n" + other + "\n" + credit + "2026-10-06T09:00:00Z\n"
        func versions(_ id: String) throws -> [String] {
            try ledger().read { try $0.rawRows("SELECT ifnull(reversed_at, '-') FROM order_version WHERE order_id = '\(id)' ORDER BY id") }.map { $0[0] }
        }
        func verifyOK(_ night: String) throws {
            let audit = try Audit(workspace: ws.workspace).run()
            XCTAssertTrue(audit.ok, "\(night) streamed \(streamed): \(audit.problems.prefix(3))")
        }
        try ws.write("inbox/orders/export-2026-10-06.csv", export)
        _ = try ws.run("2026-10-06")
        XCTAssertEqual(try versions("ord-x"), ["-", "2026-10-06T09:00:00Z"], "read first: the credit, then its reversal")
        try verifyOK("night 1")
        // Each night the export again, a row more, under the night's name.
        for (day, n) in [("2026-10-07", 1), ("2026-10-08", 2), ("2026-10-09", 3)] {
            export += "ord-n\(n),acct-3,,coins.100,1,100,2026-10-0\(6 + n)T08:00:00Z,production,USA,,\n"
            try ws.write("inbox/orders/export-\(day).csv", export)
            let r = try ws.run(day)
            XCTAssertEqual(r.counts.verified, 3 + n)
            XCTAssertEqual(r.counts.repeatedOrderLines, 2 + n, "\(day): every row but the new one changes nothing")
            XCTAssertTrue(r.ordersBroughtBack.isEmpty, day)
            try verifyOK(day)
        }
        XCTAssertEqual(try versions("ord-x"), ["-", "2026-10-06T09:00:00Z"], "no version by the nights after")
        // The export again with a row for the order broken by a stray quote at its end: refused,
        // naming its order, it says nothing of where the file leaves it, so the rows before it
        // still make no versions (a diff review: they brought the order back, then reversed it).
        // So does one whose values do not read (a field too many: an unquoted comma).
        try ws.write("inbox/orders/export-2026-10-09-again.csv", export + "ord-x,acct-1,cx\"1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
                     + "ord-x,acct-1,cx1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,,x\n")
        let broken = try ws.run("2026-10-09")
        XCTAssertEqual(broken.counts.rejected, 2)
        XCTAssertTrue(broken.ordersBroughtBack.isEmpty, "\(broken.ordersBroughtBack)")
        XCTAssertEqual(try versions("ord-x"), ["-", "2026-10-06T09:00:00Z"])
        try verifyOK("broken row")
        XCTAssertEqual(try versions("ord-y"), ["-"])
        let trace = TraceOutput.text(try XCTUnwrap(ledger().read { try $0.traceOrder("ord-x", asOf: nil) }))
        XCTAssertFalse(trace.contains("v3"), trace)

        // A file that leaves the order elsewhere (reversed, then credited again): its versions.
        try ws.write("inbox/orders/fix-1.csv", Self.header + credit + "2026-10-06T09:00:00Z\n" + credit + "\n")
        let fix = try ws.run("2026-10-10")
        XCTAssertEqual(try versions("ord-x"), ["-", "2026-10-06T09:00:00Z", "-"], "the reversal row repeats the latest; the credit is a version")
        XCTAssertEqual(fix.ordersBroughtBack.map { "\($0.orderId) \($0.reversalUndone)" }, ["ord-x true"])
        try verifyOK("fix-1")
        // Away and back within one file (reversed, then credited as it stands): no version.
        try ws.write("inbox/orders/fix-2.csv", Self.header + credit + "2026-10-06T09:00:00Z\n" + credit + "\n")
        XCTAssertTrue(try ws.run("2026-10-11").ordersBroughtBack.isEmpty)
        XCTAssertEqual(try versions("ord-x").count, 3)
        try verifyOK("fix-2")
        // Grown under one name: the rows appended leave the order reversed (it stands credited): a version.
        try ws.write("inbox/orders/grown.csv", Self.header + other + "\n")
        _ = try ws.run("2026-10-12")
        try TestWorkspace.appendText(ws.root.appendingPathComponent("inbox/orders/grown.csv"),
                                     credit + "\n" + credit + "2026-10-12T09:00:00Z\n")
        _ = try ws.run("2026-10-13")
        XCTAssertEqual(try versions("ord-x"), ["-", "2026-10-06T09:00:00Z", "-", "2026-10-12T09:00:00Z"])
        try verifyOK("grown")
        // And grown again with the credit then that reversal once more: it stands so already.
        try TestWorkspace.appendText(ws.root.appendingPathComponent("inbox/orders/grown.csv"),
                                     credit + "\n" + credit + "2026-10-12T09:00:00Z\n")
        let again = try ws.run("2026-10-14")
        XCTAssertEqual(again.counts.repeatedOrderLines, 2)
        XCTAssertEqual(try versions("ord-x").count, 4)
        try verifyOK("grown again")
        // An export caught while being written, its last line cut short (no line end): that
        // line names no order to the look ahead (a file read whole and one read a part at a
        // time told it otherwise), so the lines before it still leave the order as it stands.
        try ws.write("inbox/orders/export-cut.csv", Self.header + credit + "\n" + credit + "2026-10-12T09:00:00Z\n" + "ord-x,acct-1,cx1,coi")
        let cut = try ws.run("2026-10-15")
        XCTAssertEqual(cut.counts.repeatedOrderLines, 2)
        XCTAssertEqual(cut.counts.rejected, 1, "the cut line")
        XCTAssertEqual(try versions("ord-x").count, 4)
        try verifyOK("cut")
    }

    /// Two exports of the same night are read in the order of their names, numbers by value:
    /// `orders-2026-10-9.csv` (the credit) before `orders-2026-10-10.csv` (its reversal). In
    /// plain text order `-10` came first, and the older export undid the reversal (an
    /// operator's review: a false REFUNDED_STILL_CREDITED).
    func testExportsOfOneNightAreReadInTheOrderOfTheNumbersInTheirNames() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("5001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-06T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/orders-2026-10-9.csv", Self.header + "z1,acct-1,5001,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.write("inbox/orders/orders-2026-10-10.csv", Self.header + "z1,acct-1,5001,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,2026-10-06T11:00:00Z\n")
        try ws.run("2026-10-11")
        XCTAssertEqual(try exceptionsJSON().count, 0, "the credit reversed after the refund")
        let traced = try Resilience.cli(["trace", "z1", "--workspace", ws.root.path])
        XCTAssertTrue(traced.out.contains("z1 v1 inbox/orders/orders-2026-10-9.csv:2"), traced.out)
        XCTAssertTrue(traced.out.contains("z1 v2 inbox/orders/orders-2026-10-10.csv:2"), traced.out)
        // The order itself: digit runs by value (leading zeros aside), the rest as text.
        let names = ["b.csv", "a10.csv", "a9.csv", "a09.csv", "a.csv", "export-100.csv", "export-20.csv", "export-3.csv", "A.csv", "a1b2.csv", "a1b10.csv"]
        XCTAssertEqual(names.sorted(by: Workspace.readsBefore),
                       ["A.csv", "a.csv", "a1b2.csv", "a1b10.csv", "a09.csv", "a9.csv", "a10.csv", "b.csv", "export-3.csv", "export-20.csv", "export-100.csv"])
    }

    /// A sandbox purchase credited twice in production: its amount (a test sale's, which nobody
    /// paid) is shown with SANDBOX_CREDITED_IN_PRODUCTION alone, not with DUPLICATE_CREDIT nor
    /// in the total (it reached the total through the other category).
    func testASandboxPurchasesAmountIsInNoOtherCategoryNorTheTotal() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("sb1", purchased: "2026-10-05T10:00:00Z")], environment: "Sandbox") + "\n")
        try ws.write("inbox/orders/o.csv", Self.header + """
            o-sb1a,acct-1,sb1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-sb1b,acct-1,sb1,coins.100,1,100,2026-10-05T10:02:00Z,production,USA,,

            """)
        let r = try ws.run("2026-10-07")
        let summary = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Summary"])
        func amount(_ first: String) -> String? { summary.first { $0.first == first }.map { $0.count > 4 ? $0[4] : "" } }
        XCTAssertEqual(summary.first { $0.first == "DUPLICATE_CREDIT" }?[2], "1")
        XCTAssertEqual(amount("DUPLICATE_CREDIT"), "", "no amount: the sale is a test's")
        XCTAssertNotEqual(amount("SANDBOX_CREDITED_IN_PRODUCTION"), "")
        XCTAssertEqual(amount("Total open exceptions (amount: production sales only)"), "0")
        // The lines above the total take the column to it: the sandbox amount taken out.
        let shown = try XCTUnwrap(amount("SANDBOX_CREDITED_IN_PRODUCTION"))
        XCTAssertEqual(amount("Amounts above, added"), shown)
        XCTAssertEqual(amount("less: sandbox purchases credited in production (test sales, in no production total)"), "-" + shown)
        XCTAssertNil(amount("less: sales in more than one category (each sale's net counted once in the total)"))
        // The Exceptions sheet's net column gives the amounts the Summary adds up, and no others.
        let exceptions = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Exceptions"])
        XCTAssertEqual(exceptions[3][7], "Net (USD)")
        XCTAssertEqual(exceptions.dropFirst(4).map { "\($0[0]) \($0[7])" }.sorted(),
                       ["DUPLICATE_CREDIT ", "SANDBOX_CREDITED_IN_PRODUCTION \(amount("SANDBOX_CREDITED_IN_PRODUCTION")!)",
                        "SANDBOX_CREDITED_IN_PRODUCTION \(amount("SANDBOX_CREDITED_IN_PRODUCTION")!)"])
        // `exceptions --format json` and `csv` give the figures the sheet shows (an operator's
        // review: the net of the sandbox sale under DUPLICATE_CREDIT, summed by category,
        // counted test money the workbook leaves out).
        let json = try Resilience.cli(["exceptions", "--format", "json", "--workspace", ws.root.path])
        let objects = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [[String: Any]])
        XCTAssertEqual(objects.map { "\($0["category"]!) \($0["net_reporting_minor"] is NSNull ? "null" : "\($0["net_reporting_minor"]!)") \($0["gross_minor"]!)" }.sorted(),
                       ["DUPLICATE_CREDIT null 99", "SANDBOX_CREDITED_IN_PRODUCTION 99 99", "SANDBOX_CREDITED_IN_PRODUCTION 99 99"])
        let csv = try Resilience.cli(["exceptions", "--format", "csv", "--workspace", ws.root.path]).out.split(separator: "\n")
        XCTAssertEqual(csv.filter { $0.hasPrefix("DUPLICATE_CREDIT,") }.map { $0.hasSuffix(",99,USD,") }, [true], "\(csv)")
        XCTAssertEqual(csv.filter { $0.hasPrefix("SANDBOX_CREDITED_IN_PRODUCTION,") }.map { $0.hasSuffix(",99,USD,99") }, [true, true], "\(csv)")
    }

    /// The Summary's amounts are the net of the sales the exceptions name, each sale once: a
    /// refunded sale two orders still credit (two exceptions) is one sale's net in its category,
    /// and a sale in two categories once in the total (they were summed per exception: 1.98
    /// for one 0.99 sale, and the total 3.96 for two sales of 1.98).
    func testTheSummarysAmountsCountEachSaleOnce() throws {
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("k1", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-06T10:00:00Z")]),
            Receipt.response([Receipt.item("k3", purchased: "2026-10-05T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/o.csv", Self.header + """
            o-k1a,acct-1,k1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-k1b,acct-1,k1,coins.100,1,100,2026-10-05T10:02:00Z,production,USA,,

            """)
        let r = try ws.run("2026-10-07")
        XCTAssertEqual(Set(try exceptionsJSON().map { "\($0["category"]!) \($0["transaction_id"] as? String ?? "null") \($0["order_id"] as? String ?? "null")" }),
                       ["REFUNDED_STILL_CREDITED k1 o-k1a", "REFUNDED_STILL_CREDITED k1 o-k1b", "DUPLICATE_CREDIT k1 o-k1b", "NOT_CREDITED k3 null"])
        let summary = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Summary"])
        func row(_ first: String) -> [String]? { summary.first { $0.first == first } }
        XCTAssertEqual(row("REFUNDED_STILL_CREDITED")?[2], "2")
        XCTAssertEqual(row("REFUNDED_STILL_CREDITED")?[4], "0.99", "one sale, credited twice")
        XCTAssertEqual(row("DUPLICATE_CREDIT")?[4], "0.99")
        XCTAssertEqual(row("NOT_CREDITED")?[4], "0.99")
        XCTAssertEqual(row("Total open exceptions (amount: production sales only)")?[2], "4")
        XCTAssertEqual(row("Total open exceptions (amount: production sales only)")?[4], "1.98", "k1 and k3, each once")
        // The column adds up to its total through the lines above it (it summed to 2.97).
        XCTAssertEqual(row("Amounts above, added")?[4], "2.97")
        XCTAssertEqual(row("less: sales in more than one category (each sale's net counted once in the total)")?[4], "-0.99")
        XCTAssertNil(row("less: sandbox purchases credited in production (test sales, in no production total)"))
        // Each exception row gives its sale's net: the Summary's amount is each sale's once.
        let exceptions = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Exceptions"]).dropFirst(4)
        XCTAssertEqual(exceptions.map { "\($0[0]) \($0[1]) \($0[7])" }.sorted(),
                       ["DUPLICATE_CREDIT k1 0.99", "NOT_CREDITED k3 0.99", "REFUNDED_STILL_CREDITED k1 0.99", "REFUNDED_STILL_CREDITED k1 0.99"])
    }

    func testEveryCategoryThroughTheNightlyRun() throws {
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("m1", purchased: "2026-10-05T10:00:00Z", token: "tok-1")]),     // matched
            Receipt.response([Receipt.item("d1", purchased: "2026-10-05T10:00:00Z")]),                     // duplicate credit
            Receipt.response([Receipt.item("s1", purchased: "2026-10-05T10:00:00Z")], environment: "Sandbox"),
            Receipt.response([Receipt.item("r1", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-06T10:00:00Z")]),
            Receipt.response([Receipt.item("l1", purchased: "2026-10-05T10:00:00Z")]),                     // lost order
            #"{"response": {"status": 21005, "is-retryable": true}, "transaction_id": "u1"}"#,
            Receipt.response([Receipt.item("a1", purchased: "2026-10-05T10:00:00Z", token: "tok-1")]),
            Receipt.response([Receipt.item("p1", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("q1", quantity: 2, purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("n1", purchased: "2026-10-05T10:00:00Z")]),
            // A verified response whose item is refused (quantity 0): the store named v1.
            Receipt.response([Receipt.item("v1", quantity: 0, purchased: "2026-10-05T10:00:00Z")]),
        ].joined(separator: "\n"))
        try ws.write("inbox/orders/o.csv", Self.header + """
            o-m1,acct-1,m1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,TOK-1,
            o-d1a,acct-1,d1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-d1b,acct-1,d1,coins.100,1,100,2026-10-05T10:02:00Z,production,USA,,
            o-s1,acct-1,s1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-r1,acct-1,r1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-x1,acct-1,,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-u1,acct-1,u1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-a1,acct-1,a1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,tok-2,
            o-p1,acct-1,p1,coins.550,1,100,2026-10-05T10:01:00Z,production,USA,,
            o-q1,acct-1,q1,coins.100,1,200,2026-10-05T10:01:00Z,production,USA,,
            o-n1,acct-1,n1,coins.100,1,90,2026-10-05T10:01:00Z,production,USA,,
            o-v1,acct-1,v1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,

            """)
        let r = try ws.run("2026-10-07")
        let got = Set(try exceptionsJSON().map { "\($0["category"]!) \($0["transaction_id"] as? String ?? "null") \($0["order_id"] as? String ?? "null")" })
        XCTAssertEqual(got, [
            "DUPLICATE_CREDIT d1 o-d1b", "SANDBOX_CREDITED_IN_PRODUCTION s1 o-s1", "REFUNDED_STILL_CREDITED r1 o-r1",
            "NOT_CREDITED l1 null", "CREDITED_WITHOUT_TRANSACTION null o-x1", "CREDITED_UNVERIFIED u1 o-u1",
            "ACCOUNT_MISMATCH a1 o-a1", "PRODUCT_MISMATCH p1 o-p1", "QUANTITY_MISMATCH q1 o-q1", "UNITS_MISMATCH n1 o-n1",
            "CREDITED_UNVERIFIED v1 o-v1",
        ])
        let first = try exceptionsJSON().first!
        XCTAssertEqual(Set(first.keys), ["category", "transaction_id", "order_id", "status", "first_seen", "resolved_on", "age_days", "detail",
                                         "account_id", "product_id", "gross_minor", "currency", "net_reporting_minor"])
        XCTAssertTrue(first["resolved_on"] is NSNull, "open")
        let book = try XLSXReader.sheets(r.workbooks[2])
        XCTAssertEqual(Set(book.keys), ["Summary", "Exceptions", "Resolved", "Pending", "Rejected"])
        XCTAssertTrue(book["Summary"]!.contains { $0.first?.hasPrefix("Matched") == true || $0.contains("Matched order/transaction pairs") })
        let summary = book["Summary"]!.first { $0.first == "NOT_CREDITED" }!
        XCTAssertEqual(summary[2], "1")
        // The total leaves out the sandbox purchase's amount (a test sale's, which nobody paid).
        let categories = book["Summary"]!.filter { ExceptionCategory(rawValue: $0.first ?? "") != nil }
        func amount(_ row: [String]) -> Decimal { row.count > 4 ? Decimal(string: row[4]) ?? 0 : 0 }
        let sandbox = try XCTUnwrap(categories.first { $0[0] == "SANDBOX_CREDITED_IN_PRODUCTION" })
        XCTAssertNotEqual(amount(sandbox), 0, "its amount is shown")
        let total = try XCTUnwrap(book["Summary"]!.first { $0.first == "Total open exceptions (amount: production sales only)" })
        XCTAssertEqual(amount(total), categories.filter { $0[0] != "SANDBOX_CREDITED_IN_PRODUCTION" }.map(amount).reduce(0, +))
        XCTAssertEqual(book["Exceptions"]!.dropFirst(4).count, 11)
        // Each category's amount on the Summary is the net of the distinct sales its rows name.
        for category in categories {
            var sales: [String: Decimal] = [:]
            for e in book["Exceptions"]!.dropFirst(4) where e[0] == category[0] && !e[7].isEmpty { sales[e[1]] = Decimal(string: e[7])! }
            XCTAssertEqual(sales.values.reduce(0, +), amount(category), category[0])
        }
        XCTAssertTrue(book["Pending"]!.contains { $0.contains { $0.contains("r.jsonl:6") } }, "the retryable record waits")
    }

    /// The Rejected sheet lists the records refused and still open on the as-of date, oldest
    /// first, with code, reason, first seen and age, under a frozen, filtered header; a refused
    /// order line resolved by a valid line of the same order leaves it.
    func testRejectedSheetListsTheOpenRefusedRecords() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("J1", purchased: "2026-10-05T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("J2", purchased: "2026-10-05T10:00:00Z")], status: 21003) + "\n")
        try ws.write("inbox/orders/o1.csv", Self.header + "o-j1,acct-1,J1,coins.100,abc,100,2026-10-05T10:01:00Z,production,JPN,,\n")
        let night1 = try XCTUnwrap(try XLSXReader.sheets(try ws.run("2026-10-06").workbooks[2])["Rejected"])
        XCTAssertEqual(night1.dropFirst(4).map { "\($0[0]) \($0[1])" }, ["inbox/orders/o1.csv:2 BAD_ORDER", "inbox/receipts/r.jsonl:2 STATUS_21003"])
        // Named to sort first: the list goes by first seen, then file.
        try ws.write("inbox/receipts/a.jsonl", "{not json\n")
        try ws.write("inbox/orders/o2.csv", Self.header + "o-j1,acct-1,J1,coins.100,1,100,2026-10-05T10:01:00Z,production,JPN,,\n")
        let r = try ws.run("2026-10-08")
        let url = r.workbooks[2]
        let sheet = try XCTUnwrap(try XLSXReader.sheets(url)["Rejected"])
        XCTAssertEqual(sheet[3], ["Record (file:line)", "Code", "Reason", "First seen", "Age (days)"])
        let rows = Array(sheet.dropFirst(4))
        XCTAssertEqual(rows.map { $0[0] }, ["inbox/receipts/r.jsonl:2", "inbox/receipts/a.jsonl:1"],
                       "oldest first; the refused order line is resolved by the valid one")
        XCTAssertEqual(rows[0][1], "STATUS_21003")
        XCTAssertTrue(rows[0][2].hasPrefix("status 21003"), rows[0][2])
        XCTAssertEqual(rows.map { $0[4] }, ["2", "0"])
        XCTAssertEqual(rows[1][1], "MALFORMED")
        let index = try XCTUnwrap(try XLSXParts.sheetNames(url).firstIndex(of: "Rejected")) + 1
        let xml = try XLSXParts.read(url, "xl/worksheets/sheet\(index).xml")
        XCTAssertTrue(xml.contains("<autoFilter ref=\"A4:E6\""), xml)
        XCTAssertTrue(xml.contains("ySplit=\"4\""), "header frozen")
    }

    /// A line broken by a stray quote after its `order_id` names its order (the fields before
    /// the break are whole), so the corrected line of the order read later resolves it; it
    /// named none, and stayed on the Rejected sheet until dismissed. A break before the order
    /// id, or a quote left open over several lines, names none.
    func testALineBrokenByAQuoteAfterItsOrderIdIsResolvedByItsCorrection() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("U1", purchased: "2026-10-05T10:00:00Z"),
                                                                  Receipt.item("U2", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o1.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
                     + "o-u1,acct-1,U1,coins.100 \"promo\",1,100,2026-10-05T10:01:00Z,production\n"
                     + "o-u2,acct-1,\"U2\"x,coins.100,1,100,2026-10-05T10:01:00Z,production\n"
                     + "x\"o-u3\",acct-1,U3,coins.100,1,100,2026-10-05T10:01:00Z,production\n"
                     + "o-u5,\"acct-1,U5,coins.100,1,100,2026-10-05T10:01:00Z,production\n")
        // order_id not first: an unquoted comma before the break would shift it, so none named.
        try ws.write("inbox/orders/o3.csv", "account_id,product_id,order_id,transaction_id,quantity,credited_units,credited_at,environment\n"
                     + "acct-1,coins,100,o-u9,U9,1,100 \"promo\",2026-10-05T10:01:00Z,production\n")
        // A last line cut inside a quote (no line end): cut short, its order named where the
        // header puts it, as for a line cut short between fields.
        try ws.write("inbox/orders/o6.csv", "account_id,product_id,order_id,transaction_id,quantity,credited_units,credited_at,environment\n"
                     + "acct-1,coins.100,o-u7,\"U7")
        try ws.run("2026-10-06")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        XCTAssertEqual(try ledger.read { try $0.rawRows("SELECT f.path || ':' || r.line, r.reason_code, coalesce(r.order_id, '-') FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.outcome = 'rejected' ORDER BY f.path, r.line") },
                       [["inbox/orders/o1.csv:2", "BAD_CSV", "o-u1"], ["inbox/orders/o1.csv:3", "BAD_CSV", "o-u2"], ["inbox/orders/o1.csv:4", "BAD_CSV", "-"],
                        ["inbox/orders/o1.csv:5", "BAD_CSV", "o-u5"], ["inbox/orders/o3.csv:2", "BAD_CSV", "-"],
                        ["inbox/orders/o6.csv:2", "TRUNCATED", "o-u7"]])
        XCTAssertEqual(try ledger.read { try $0.rawRows("SELECT reason FROM source_record WHERE order_id = 'o-u1'") }.first?.first?.hasSuffix("(order o-u1)"), true)
        try ws.write("inbox/orders/o2.csv", Self.header
                     + "o-u1,acct-1,U1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
                     + "o-u2,acct-1,U2,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        let r = try ws.run("2026-10-07")
        let rejected = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Rejected"]).dropFirst(4).map { $0[0] }
        XCTAssertEqual(rejected, ["inbox/orders/o1.csv:4", "inbox/orders/o1.csv:5", "inbox/orders/o3.csv:2", "inbox/orders/o6.csv:2"], "the two lines naming their orders are resolved")
        // o-u5's quote never closed: its corrected line resolves it too.
        try ws.write("inbox/orders/o4.csv", Self.header + "o-u5,acct-1,U5,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        let r2 = try ws.run("2026-10-08")
        XCTAssertEqual(try XCTUnwrap(try XLSXReader.sheets(r2.workbooks[2])["Rejected"]).dropFirst(4).map { $0[0] }, ["inbox/orders/o1.csv:4", "inbox/orders/o3.csv:2", "inbox/orders/o6.csv:2"])
        let fieldsBefore = CSV.parseRows("a,b\"c,d\n")
        guard case .failure(let e)? = fieldsBefore.first else { return XCTFail("\(fieldsBefore)") }
        XCTAssertEqual(e.fieldsBefore, ["a"])
        guard case .failure(let open)? = CSV.parseRows("a,\"b\nc,d\"x,e\n").first else { return XCTFail() }
        XCTAssertEqual(open.fieldsBefore, ["a"])
    }

    /// An order id, account or transaction id from the backend's file that a spreadsheet would
    /// run as a formula is written to the exceptions' CSV with an apostrophe before it; the
    /// age stays a number, the JSON and the workbook keep the id as it was read.
    func testExceptionsCSVDoesNotLetASpreadsheetRunAnOrderIdAsAFormula() throws {
        try ws.write("inbox/orders/o.csv", Self.header + "\"=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",@acct,-T9,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        let r = try ws.run("2026-10-06")
        let rows = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read { try $0.exceptions(status: "open") }
        XCTAssertEqual(rows.map(\.orderId), ["=HYPERLINK(\"http://evil\",\"x\")"], "stored as read")
        let csv = ExceptionsOutput.render(rows, asOf: Day(iso: "2026-10-06")!, format: "csv").split(separator: "\n")
        XCTAssertEqual(csv.count, 2, "\(csv)")
        XCTAssertEqual(csv[0], "category,transaction_id,order_id,status,first_seen,resolved_on,age_days,detail,account_id,product_id,gross_minor,currency,net_reporting_minor")
        XCTAssertTrue(csv[1].hasSuffix(",'@acct,coins.100,,,"), "the account as text, no amount: \(csv[1])")
        XCTAssertTrue(csv[1].hasPrefix("CREDITED_WITHOUT_TRANSACTION,'-T9,\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",open,2026-10-06,,0,"), String(csv[1]))
        let sheet = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Exceptions"]).dropFirst(4)
        XCTAssertTrue(sheet.contains { $0.contains("=HYPERLINK(\"http://evil\",\"x\")") }, "the workbook's text cell keeps the id: \(sheet)")
        // A credit naming a transaction the store never reported has no amount, and is counted
        // among those the amounts leave out (it was not).
        let summary = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Summary"])
        let note = try XCTUnwrap(summary.compactMap(\.first).first { $0.hasPrefix("Open exceptions with no amount") })
        XCTAssertTrue(note.contains("which the amounts leave out: 1 ("), note)
    }

    /// Exceptions and findings are resolved only by a night's run, and the links of
    /// transactions to their records never change: a hand-made UPDATE or DELETE is refused (an
    /// exception closed by hand was gone from every list for good, a link deleted took a source
    /// off `trace`), and a guard dropped is said by `verify`.
    func testResolutionsAndLinksAreChangedOnlyByANightsRun() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("G1", purchased: "2026-10-05T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("G2", product: "coins.999", purchased: "2026-10-05T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("G4", purchased: "2026-10-05T10:00:00Z")], bundle: "com.other.app") + "\n")
        // G1 told again by a second record: a link of its later sources.
        try ws.write("inbox/receipts/again.jsonl", Receipt.response([Receipt.item("G1", purchased: "2026-10-05T10:00:00Z"),
                                                                    Receipt.item("G5", purchased: "2026-10-05T11:00:00Z")]) + "\n")
        try ws.write("inbox/orders/o.csv", Self.header + "o-G3,acct-1,G3,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
                     + "o-G5,acct-1,G5,coins.100,1,100,2026-10-05T11:01:00Z,production,USA,,\n")
        try ws.run("2026-10-06")
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        let db = try DatabaseQueue(path: path)
        XCTAssertEqual(try db.read { try [Int.fetchOne($0, sql: "SELECT count(*) FROM transaction_source"), Int.fetchOne($0, sql: "SELECT count(*) FROM unverified_record_transaction")] }, [1, 1])
        XCTAssertEqual(try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM exception WHERE resolved_on IS NULL") }, 3)
        for (sql, refusal) in [
            ("UPDATE exception SET resolved_on = '2026-10-06', resolved_run_id = 1 WHERE category = 'NOT_CREDITED'", "an exception is resolved or found again only by a night's reconciliation"),
            ("DELETE FROM exception", "an exception is never removed: a night resolves it"),
            ("UPDATE exception SET first_seen = '2999-01-01'", "an exception is resolved or found again only by a night's reconciliation"),
            ("UPDATE exception SET category = 'DUPLICATE_CREDIT' WHERE category = 'NOT_CREDITED'", "an exception is resolved or found again only by a night's reconciliation"),
            ("UPDATE finding SET code = 'X'", "a finding is resolved only by a night's run"),
            ("UPDATE finding SET resolved_run_id = 1", "a finding is resolved only by a night's run (`iapledger dismiss` asks the next night to)"),
            ("DELETE FROM finding", "a finding is never removed: a night resolves it"),
            ("DELETE FROM transaction_source", "a transaction's link to a record that told it is never removed"),
            ("UPDATE transaction_source SET transaction_id = 'X'", "a transaction's link to a record that told it is kept as it was made"),
            ("DELETE FROM unverified_record_transaction", "a record's link to the transaction it names is never removed"),
            // A replace deletes the row it replaces without the delete trigger: refused as an insert.
            ("INSERT OR REPLACE INTO exception SELECT * FROM exception", "an exception is opened only by a night's reconciliation"),
            ("INSERT OR REPLACE INTO finding SELECT * FROM finding", "a finding is opened only by a night's run"),
        ] {
            XCTAssertThrowsError(try db.write { try $0.execute(sql: sql) }, sql) { e in
                XCTAssertTrue("\(e)".contains(refusal), "\(sql): \(e)")
            }
        }
        // The night's own updates go through: the order arrives, its exception is resolved.
        try ws.write("inbox/orders/o2.csv", Self.header + "o-G1,acct-1,G1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        XCTAssertEqual(try db.read { try String.fetchAll($0, sql: "SELECT category FROM exception WHERE resolved_on IS NOT NULL") }, ["NOT_CREDITED"])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // A guard dropped to close one by hand is said.
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER exception_resolved_by_a_run")
            try d.execute(sql: "UPDATE exception SET resolved_on = '2026-10-07', resolved_run_id = 2 WHERE resolved_on IS NULL AND category = 'CREDITED_WITHOUT_TRANSACTION'")
        }
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.hasPrefix("the ledger's trigger exception_resolved_by_a_run is missing: it was dropped") }, "\(problems)")
        // A run row left unfinished by hand lets the guards through while it is the last: said.
        try db.write { d in
            try d.execute(sql: "INSERT INTO run (id, as_of, started_at, tool_version) VALUES (9, '2026-10-07', '2026-10-07T23:00:00Z', 'x')")
            try d.execute(sql: "UPDATE finding SET resolved_run_id = 2")
        }
        let unfinished = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(unfinished.contains("run 9 (as of 2026-10-07) is not finished, but a night's run is written with its finish, in one transaction: it was added by hand, or its finish removed"), "\(unfinished)")
    }

    /// A day's set written again later gives no purchase day for a transaction a later run
    /// first stored (a credit for an unverified transaction, verified since): the same bytes as
    /// the night's own set (it took the day from the later record).
    func testASetWrittenAgainGivesNoPurchaseDayALaterRunLearned() throws {
        try ws.write("inbox/orders/o.csv", Self.header + "o-P1,acct-1,P1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.write("inbox/receipts/a.jsonl", #"{"response":{"status":21005,"is_retryable":true},"transaction_id":"P1","received_at":"2026-10-05T10:00:00Z"}"# + "\n")
        let first = try ws.run("2026-10-06")
        let day = ws.root.appendingPathComponent("reports/2026-10-06/reconciliation-2026-10-06.xlsx")
        let night = try Data(contentsOf: day)
        func row(_ book: [String: [[String]]]) -> [String]? { book["Exceptions"]?.first { $0.first == "CREDITED_UNVERIFIED" } }
        XCTAssertEqual(row(try XLSXReader.sheets(first.workbooks[2]))?[7], "", "no purchase day known")
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("P1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-07")
        _ = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-06")!)
        XCTAssertEqual(try Data(contentsOf: day), night, "the night's own bytes")
        XCTAssertEqual(row(try XLSXReader.sheets(day))?[7], "")
    }

    func testLostOrderLifecycleOverThreeNights() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("L1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        // Night 1: paid, never credited.
        let n1 = try ws.run("2026-10-06")
        var rows = try exceptionsJSON()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows[0]["category"] as? String, "NOT_CREDITED")
        XCTAssertEqual(rows[0]["status"] as? String, "open")
        XCTAssertEqual(rows[0]["age_days"] as? Int, 0)
        XCTAssertTrue(rows[0]["order_id"] is NSNull)
        XCTAssertEqual(try XLSXReader.sheets(n1.workbooks[2])["Exceptions"]!.dropFirst(4).map { $0[0] }, ["NOT_CREDITED"])
        // The output carries the workbook's figures too: the product, the gross price and the
        // sale's net (the workbook's Price and the Summary's amount), in minor units.
        let book1: [String: [[String]]] = try XLSXReader.sheets(n1.workbooks[2])
        let listed: [String] = try XCTUnwrap(book1["Exceptions"]?[4])
        XCTAssertEqual(rows[0]["product_id"] as? String, listed[4])
        func cents(_ cell: String) -> Int { NSDecimalNumber(string: cell).multiplying(byPowerOf10: 2).intValue }
        XCTAssertEqual(rows[0]["gross_minor"] as? Int, cents(listed[5]))
        XCTAssertEqual(rows[0]["currency"] as? String, "USD")
        let net: String = try XCTUnwrap(book1["Summary"]?.first { $0.first == "NOT_CREDITED" }?[4])
        XCTAssertEqual(rows[0]["net_reporting_minor"] as? Int, cents(net))
        XCTAssertTrue(rows[0]["account_id"] is NSNull)

        // Night 2: still open, age 1.
        let n2 = try ws.run("2026-10-07")
        rows = try exceptionsJSON()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows[0]["first_seen"] as? String, "2026-10-06")
        XCTAssertEqual(rows[0]["age_days"] as? Int, 1)
        let open2 = try XLSXReader.sheets(n2.workbooks[2])["Exceptions"]!.dropFirst(4)
        XCTAssertEqual(open2.first?[10], "1", "Age (days) column on night 2")
        // The day it was bought (2026-10-05, the day before the first night found it): how old
        // the problem is, beside how long it has been open.
        XCTAssertEqual(open2.first.map { [$0[8], $0[9]] }, ["46300", "46301"], "Purchased and First seen, as Excel's day numbers")
        let credit = try XCTUnwrap(try XLSXReader.sheets(n2.workbooks[2])["Exceptions"]?[3])
        XCTAssertEqual(Array(credit[6...10]), ["Currency", "Net (USD)", "Purchased", "First seen", "Age (days)"])
        XCTAssertEqual(try XLSXReader.sheets(n1.workbooks[2])["Resolved"]!.dropFirst(4).map { $0[0] }, ["None: no night ran before this one, so no exception was open to be resolved"])
        XCTAssertEqual(try XLSXReader.sheets(n2.workbooks[2])["Resolved"]!.dropFirst(4).map { $0[0] }, ["None: no exception was resolved after the night as of 2026-10-06, up to 2026-10-07"])

        // Running night 2 again gives the same exceptions.
        try ws.run("2026-10-07")
        let again = try exceptionsJSON()
        XCTAssertEqual(again.count, 1)
        XCTAssertEqual(again[0]["first_seen"] as? String, "2026-10-06")
        XCTAssertEqual(again[0]["age_days"] as? Int, 1)

        // Night 3: the order arrives; the exception is resolved.
        try ws.write("inbox/orders/late.csv", Self.header + "o-L1,acct-9,L1,coins.100,1,100,2026-10-07T09:00:00Z,production,USA,,\n")
        let n3 = try ws.run("2026-10-08")
        rows = try exceptionsJSON()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows[0]["status"] as? String, "resolved")
        XCTAssertEqual(rows[0]["resolved_on"] as? String, "2026-10-08", "when it was resolved")
        let rendered = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read { try $0.exceptions(status: "resolved") }
        XCTAssertTrue(ExceptionsOutput.render(rendered, asOf: Day(iso: "2026-10-08")!, format: "table").contains("first seen 2026-10-06 resolved 2026-10-08 age 2d"))
        XCTAssertTrue(ExceptionsOutput.render(rendered, asOf: Day(iso: "2026-10-08")!, format: "csv").contains(",resolved,2026-10-06,2026-10-08,2,"))
        let book3 = try XLSXReader.sheets(n3.workbooks[2])
        // An empty list says so (an empty table read as data missing).
        XCTAssertEqual(book3["Exceptions"]!.dropFirst(4).map { $0[0] }, ["None open: every store transaction in scope matched its credit, and every credit its transaction, as of 2026-10-08"])
        XCTAssertEqual(book3["Resolved"]!.dropFirst(4).map { $0[0] }, ["NOT_CREDITED"])
        XCTAssertTrue(book3["Summary"]!.contains { $0.first?.hasPrefix("Matched order/transaction pairs (") == true && $0[1] == "1" })
    }

    func testRunningANightTwiceGivesTheSameExceptions() throws {
        let dir = ws.root
        // The demo makes a workspace of its own: in place of the test's (a folder with
        // something in it is refused).
        try FileManager.default.removeItem(at: dir)
        _ = try DemoWorkspace.create(at: dir, transactions: 600, seed: 7, asOf: Day(iso: "2026-11-21")!)
        try ws.run("2026-11-21")
        let first = try exceptionsJSON().map { "\($0["category"]!) \($0["transaction_id"]!) \($0["order_id"] ?? "") \($0["first_seen"]!)" }
        try ws.run("2026-11-21")
        let second = try exceptionsJSON().map { "\($0["category"]!) \($0["transaction_id"]!) \($0["order_id"] ?? "") \($0["first_seen"]!)" }
        XCTAssertEqual(first, second)
        XCTAssertEqual(Set(try exceptionsJSON().map { $0["category"] as! String }), Set(ExceptionCategory.allCases.map(\.rawValue)),
                       "the demo data raises every category")
    }
}
