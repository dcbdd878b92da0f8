import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

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

    func testAnUntouchedLedgerVerifies() throws {
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.entries, 4)
        XCTAssertEqual(r.rederived, 4)
    }

    /// Editing one posting's amount directly in the database (the append-only trigger dropped
    /// first, as a tamperer would) makes verify fail and name that entry.
    func testEditingOnePostingIsCaughtAndNamed() throws {
        let db = try DatabaseQueue(path: dbPath)
        let target = try db.read { try Int64.fetchOne($0, sql: "SELECT id FROM entry WHERE transaction_id = '8003'")! }
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER posting_no_update")
            try d.execute(sql: "UPDATE posting SET amount_minor = amount_minor + 100 WHERE id = (SELECT min(id) FROM posting WHERE entry_id = ?)", arguments: [target])
        }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.ok)
        XCTAssertEqual(r.firstFailingEntry, target)
        XCTAssertTrue(r.problems.contains { $0.entryId == target && $0.message.contains("hash") }, "\(r.problems)")
    }

    /// Re-balancing a forged change (both postings edited) still breaks the chain.
    func testABalancedForgeryStillBreaksTheChain() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER posting_no_update")
            try d.execute(sql: "UPDATE posting SET amount_minor = amount_minor + 5 WHERE entry_id = 1 AND amount_minor > 0 AND id = (SELECT min(id) FROM posting WHERE entry_id = 1)")
            try d.execute(sql: "UPDATE posting SET amount_minor = amount_minor - 5 WHERE entry_id = 1 AND id = (SELECT max(id) FROM posting WHERE entry_id = 1)")
        }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.firstFailingEntry, 1)
    }

    func testDeletingAnEntryIsCaught() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "DROP TRIGGER posting_no_delete; DROP TRIGGER entry_no_delete")
            try d.execute(sql: "DELETE FROM posting WHERE entry_id = (SELECT max(id) FROM entry); DELETE FROM entry WHERE id = (SELECT max(id) FROM entry)")
        }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.ok)
        XCTAssertTrue(r.problems.contains { $0.message.contains("chain head") }, "\(r.problems)")
    }

    func testAChangedSourceRecordIsCaught() throws {
        let db = try DatabaseQueue(path: dbPath)
        try db.write { d in
            try d.execute(sql: "UPDATE source_record SET raw = replace(raw, '\"quantity\": \"3\"', '\"quantity\": \"2\"') WHERE raw LIKE '%8003%'")
        }
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(r.ok)
        XCTAssertTrue(r.problems.contains { $0.message.contains("quantity") }, "\(r.problems)")
    }
}
