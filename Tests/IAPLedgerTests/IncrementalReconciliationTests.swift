import Foundation
import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerReconcile
@testable import LedgerRun
@testable import LedgerStore

/// A night reconciles only what it touched (issue 7: memory and time that do not grow with
/// the history). The check: after every night, reconciling the whole ledger again (on a copy)
/// changes nothing, neither an exception (its category, transaction, order, figures, detail,
/// first and last seen, resolution) nor the count of matched pairs.
final class IncrementalReconciliationTests: ScratchTestCase {

    struct Snapshot: Equatable {
        var exceptions: [ExceptionRow]
        var lastRuns: [String]
        var matched: Int
    }

    func snapshot(_ ledger: Ledger, runId: Int64) throws -> Snapshot {
        try ledger.read { r in
            Snapshot(exceptions: try r.exceptions(),
                     lastRuns: try String.fetchAll(r.db, sql: """
                        SELECT category || ' ' || transaction_id || ' ' || order_id || ' ' || first_run_id || ' ' || last_run_id
                               || ' ' || ifnull(resolved_run_id, '-') FROM exception ORDER BY 1
                        """),
                     matched: try r.matchedCount(runId: runId))
        }
    }

    /// Reconciles every group of a copy of the ledger again, as of the same night and run.
    func fullReconciliation(of ws: URL, runId: Int64, asOf: Day) throws -> (Snapshot, ReconciliationSummary) {
        let copy = newScratch("full-recon").appendingPathComponent("ledger.sqlite")
        try FileManager.default.createDirectory(at: copy.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: ws.appendingPathComponent("ledger.sqlite"), to: copy)
        let ledger = try Ledger(path: copy.path)
        // The finished run is reconciled again on this copy: the trigger that keeps finished runs as they were goes.
        try ledger.write { try $0.db.execute(sql: "DROP TRIGGER run_finished_no_update") }
        let rules = try Workspace(ws).loadRules(), scope = try Workspace(ws).loadConfig().reconciliationScope
        let summary = try ledger.write { w in
            try w.reconcile(Reconciler(products: rules.products, scope: scope), runId: runId, asOf: asOf, full: true)
        }
        return (try snapshot(ledger, runId: runId), summary)
    }

    func runMode(_ ledger: Ledger, _ runId: Int64) throws -> String? {
        try ledger.read { try String.fetchOne($0.db, sql: "SELECT reconciliation FROM run WHERE id = ?", arguments: [runId]) }
    }

    /// Touched ids are told apart by their bytes, as SQLite tells them apart: two spellings of
    /// "café" are two transactions, the same bytes twice one.
    func testTouchedIdsAreComparedByTheirBytes() {
        var keys = TouchedKeys()
        for id in ["caf\u{E9}", "cafe\u{301}", "caf\u{E9}", "", "", "2000000000000001"] { keys.transaction(id) }
        keys.order("ord-1", transactionId: "2000000000000001")
        keys.order("ord-1", transactionId: nil)
        XCTAssertEqual(Set(keys.transactions.map { Array($0.utf8) }),
                       Set([Array("caf\u{E9}".utf8), Array("cafe\u{301}".utf8), [], Array("2000000000000001".utf8)]))
        XCTAssertEqual(keys.transactions.count, 4)
        XCTAssertEqual(keys.orders, ["ord-1"])
    }

    /// Reconciliation merges transactions and orders in SQLite's order of ids (their bytes):
    /// its comparisons give the order SQLite's `ORDER BY` gives.
    func testIdsAreMergedInSQLitesOrder() throws {
        let ids = ["b", "a", "ab", "", "\u{E9}", "e\u{301}", "Z", "10", "9", "2000000000000001", "200000000000000", "\u{1F600}"]
        let sqlite = try DatabaseQueue().read { db in
            try String.fetchAll(db, sql: "SELECT value FROM json_each(?) ORDER BY value",
                                arguments: [String(decoding: try JSONEncoder().encode(ids), as: UTF8.self)])
        }
        let sorted = ids.sorted(by: LedgerWriter.binaryOrder)
        XCTAssertEqual(sorted.map { Array($0.utf8) }, sqlite.map { Array($0.utf8) })
        for (i, a) in ids.enumerated() {
            for (j, b) in ids.enumerated() { XCTAssertEqual(LedgerWriter.sameId(a, b), i == j, "\(a) \(b)") }
        }
    }

    /// A night whose reconciliation is full whatever it touches (the ledger's first, or the
    /// product rules changed since the last) keeps no touched ids; any other night keeps them.
    func testTouchedIdsAreNotKeptWhenEveryGroupIsReconciledAnyway() throws {
        let ws = newScratch("skip-touched")
        let day = Day(iso: "2026-11-21")!
        _ = try DemoWorkspace.create(at: ws, transactions: 60, seed: 5, asOf: day)
        let products = try Workspace(ws).loadRules().products
        let reconciler = Reconciler(products: products)
        var changed = products
        let some = try XCTUnwrap(changed.keys.sorted().first)
        changed[some]?.units += 1
        let path = ws.appendingPathComponent("ledger.sqlite").path
        func kept(_ r: Reconciler, asOf: String) throws -> Bool {
            try Ledger(path: path).write { w in
                let runId = try w.beginRun(asOf: Day(iso: asOf)!, toolVersion: "test", startedAt: "2026-11-22T00:00:00Z")
                try w.skipTouchedKeysIfReconcilingAll(r, runId: runId)
                w.touched.transaction("2000000000000001")
                defer { w.touched = TouchedKeys() }
                // Rolled back: the ledger stays as the last night left it.
                throw Kept(value: !w.touched.overflowed && w.touched.transactions == ["2000000000000001"])
            }
        }
        struct Kept: Error { var value: Bool }
        func keptOrThrown(_ r: Reconciler, asOf: String) throws -> Bool {
            do { return try kept(r, asOf: asOf) } catch let k as Kept { return k.value }
        }
        XCTAssertFalse(try keptOrThrown(reconciler, asOf: "2026-11-21"), "the ledger's first night")
        _ = try NightlyRun(workspace: Workspace(ws), asOf: day).run()
        XCTAssertTrue(try keptOrThrown(reconciler, asOf: "2026-11-22"), "a night with the same product rules")
        XCTAssertFalse(try keptOrThrown(Reconciler(products: changed), asOf: "2026-11-22"), "the product rules changed")
    }

    func testEachNightReconcilesWhatItTouchedAndAgreesWithAFullReconciliation() throws {
        let ws = newScratch("incremental-recon")
        _ = try DemoWorkspace.create(at: ws, transactions: 600, seed: 7, asOf: Day(iso: "2026-11-21")!)
        // The demo's files wait aside and arrive night by night, by the date in their names.
        let inbox = try Resilience.HeldInbox(ws)
        let workspace = Workspace(ws)
        let ledgerPath = ws.appendingPathComponent("ledger.sqlite").path
        let nights = ["2026-08-20", "2026-09-10", "2026-09-30", "2026-10-15", "2026-11-01", "2026-11-12", "2026-11-21"]
        var orderIds: [String] = []
        var header = "", firstMoved: [String] = []
        for (n, night) in nights.enumerated() {
            try inbox.release(before: night)
            if n == 3 {
                // An order moves to another transaction, another loses its transaction id, a
                // third is reversed: each touches the transaction it named before.
                let rows: [[String]] = try String(contentsOf: ws.appendingPathComponent("inbox/orders/orders-2026-08-05.csv"), encoding: .utf8)
                    .split(separator: "\n").dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
                // Production orders of products in scope (not the subscription or the pass).
                func inScope(_ o: [String]) -> Bool { !o[3].contains(".vip.") && !o[3].contains(".pass.") }
                let orders = rows.filter { $0.count == 11 && $0[2] != "" && $0[7] == "production" && $0[10] == "" && inScope($0) }
                XCTAssertGreaterThanOrEqual(orders.count, 3)
                let (a, b, c) = (orders[0], orders[1], orders[2])
                orderIds = [a[0], b[0], c[0]]
                var moved = a; moved[2] = b[2]
                var lost = b; lost[2] = ""
                var reversed = c; reversed[10] = "2026-10-14T12:00:00Z"
                firstMoved = a
                header = "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at\n"
                try Data((header + [moved, lost, reversed].map { $0.joined(separator: ",") }.joined(separator: "\n") + "\n").utf8)
                    .write(to: ws.appendingPathComponent("inbox/orders/corrections-2026-10-14.csv"))
            }
            if n == 4 {
                // The transaction the moved order left gets an order of its own: its NOT_CREDITED resolves.
                var fix = firstMoved; fix[0] = "fix-" + fix[0]
                try Data((header + fix.joined(separator: ",") + "\n").utf8)
                    .write(to: ws.appendingPathComponent("inbox/orders/corrections-2026-10-31.csv"))
            }
            if n == 5 {
                // A product's units change: the next night reconciles everything again.
                let url = ws.appendingPathComponent("rules/products.csv")
                let text = try String(contentsOf: url, encoding: .utf8)
                try Data(text.replacingOccurrences(of: "com.example.coins.100,consumable,100", with: "com.example.coins.100,consumable,110").utf8).write(to: url)
            }
            let result = try NightlyRun(workspace: workspace, asOf: Day(iso: night)!).run()
            let ledger = try Ledger(path: ledgerPath, readOnly: true)
            let mode = try runMode(ledger, result.runId)
            XCTAssertEqual(mode, n == 0 || n == 5 ? "full" : "incremental", "night \(night)")
            let incremental = try snapshot(ledger, runId: result.runId)
            let (full, summary) = try fullReconciliation(of: ws, runId: result.runId, asOf: Day(iso: night)!)
            XCTAssertEqual(summary.mode, "full")
            XCTAssertEqual(incremental.matched, full.matched, "night \(night): matched pairs")
            XCTAssertEqual(incremental.exceptions, full.exceptions, "night \(night): exceptions")
            XCTAssertEqual(incremental.lastRuns, full.lastRuns, "night \(night): exception runs")
            XCTAssertGreaterThan(incremental.exceptions.count, 0)
            if n == 3 {
                // The corrected orders are visible in the exceptions: the moved one duplicates b's transaction.
                let codes = incremental.exceptions.filter { $0.isOpen && orderIds.contains($0.orderId ?? "") }.map(\.category)
                XCTAssertTrue(codes.contains("CREDITED_WITHOUT_TRANSACTION"), "\(codes)")
                XCTAssertTrue(incremental.exceptions.contains { $0.category == "NOT_CREDITED" && $0.transactionId == firstMoved[2] && $0.isOpen })
            }
            if n == 4 {
                XCTAssertTrue(incremental.exceptions.contains { $0.category == "NOT_CREDITED" && $0.transactionId == firstMoved[2] && $0.resolvedOn == Day(iso: night) })
            }
        }
        // Every category the demo seeds was raised on the way, and the last night resolved some.
        let ledger = try Ledger(path: ledgerPath, readOnly: true)
        let all = try ledger.read { try $0.exceptions() }
        XCTAssertEqual(Set(all.map(\.category)).count, ExceptionCategory.allCases.count, "\(Set(all.map(\.category)))")
        XCTAssertTrue(all.contains { !$0.isOpen })
    }
}
