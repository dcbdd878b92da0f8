import Foundation
import XCTest
import GRDB
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// The month totals the reports read (migration v8) equal the sums of the postings and
/// entries, night after night, for any as-of date (mid-month, a month's last day, all of it),
/// and `verify` notices when they do not.
final class MonthTotalsTests: ScratchTestCase {

    /// Sums that pass 64 bits (each amount within its bounds, a million of them in a month)
    /// stop the night with a message, before anything is written: they trapped (exit 132).
    func testMonthTotalsThatPass64BitsAreAnErrorNotATrap() throws {
        var sums = MonthTotalsDelta.BalanceSums()
        sums.add(Int64.max - 1, reporting: 1)
        XCTAssertFalse(sums.overflowed)
        sums.add(5, reporting: 1)
        XCTAssertTrue(sums.overflowed)
        var delta = MonthTotalsDelta()
        delta.balances[.init(book: "production", month: "2026-11", accountId: 1, currency: "KWD")] = sums
        let db = try DatabaseQueue()
        XCTAssertThrowsError(try db.write { try delta.flush($0) }) { error in
            XCTAssertTrue("\(error)".hasPrefix("the month's totals of production 2026-11 KWD pass what 64-bit minor units hold"), "\(error)")
        }
        // Past the bound only with the month's totals before (a later night's): said too.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-overflow-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try Ledger(path: path)
        let queue = try DatabaseQueue(path: path)
        let account = try queue.read { try Int64.fetchOne($0, sql: "SELECT min(id) FROM account")! }
        func night(_ amount: Int64) throws {
            var d = MonthTotalsDelta()
            var sums = MonthTotalsDelta.BalanceSums()
            sums.add(amount, reporting: 1)
            d.balances[.init(book: "production", month: "2026-11", accountId: account, currency: "KWD")] = sums
            try queue.write { try d.flush($0) }
        }
        // The ledger's totals, added up whatever their signs, stay within a quarter of 64 bits
        // (the workbooks add the rows across months, storefronts and currencies: they trapped
        // after the commit); past it the night stops, nothing written.
        try night(Int64.max / 4 - 10)
        XCTAssertThrowsError(try night(100)) { error in
            XCTAssertTrue("\(error)".hasPrefix("the ledger's totals (balance_month) would pass a quarter of what 64-bit minor units hold"), "\(error)")
        }
        XCTAssertEqual(try queue.read { try Int64.fetchOne($0, sql: "SELECT sum(debit_minor) FROM balance_month") }, Int64.max / 4 - 10, "the second night's rolled back")
    }

    /// The posting stage decides each batch of sales on a second thread while it stores the
    /// batch before: with batches of 7 (many batches, renewals and their chains across them)
    /// the ledger is the same as with one batch, entry for entry and hash for hash.
    func testPostingInBatchesPreparedAheadChangesNothing() throws {
        var ledgers: [[String]] = []
        defer { NightlyRun.postingBatchSize = 10_000 }
        for size in [10_000, 7] {
            NightlyRun.postingBatchSize = size
            let ws = newScratch("batches-\(size)")
            _ = try DemoWorkspace.create(at: ws, transactions: 400, seed: 11, asOf: Day(iso: "2026-11-21")!)
            _ = try NightlyRun(workspace: Workspace(ws), asOf: Day(iso: "2026-11-21")!).run()
            let ledger = try Ledger(path: ws.appendingPathComponent("ledger.sqlite").path, readOnly: true)
            ledgers.append(try ledger.read { r in
                try r.rawRows("SELECT id, transaction_id, kind, hash FROM entry ORDER BY id").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT transaction_id, sale_status, ifnull(pending_reason, '') FROM store_transaction ORDER BY 1").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT code, transaction_id, message FROM finding ORDER BY 1, 2").map { $0.joined(separator: "|") }
            })
        }
        XCTAssertGreaterThan(ledgers[0].filter { $0.contains("|sale|") }.count, 300)
        XCTAssertEqual(ledgers[0].count, ledgers[1].count)
        if let i = ledgers[0].indices.first(where: { $0 < ledgers[1].count && ledgers[0][$0] != ledgers[1][$0] }) {
            XCTFail("first difference, line \(i): one batch \(ledgers[0][i]), batches of 7 \(ledgers[1][i])")
        }
    }

    /// The Refunds sheet reads its rows from the index of refunds and reversals (migration
    /// v16), not from every entry of the book, and finds every one of them.
    func testRefundsAreReadFromTheirIndexes() throws {
        let ws = newScratch("refund-index")
        _ = try DemoWorkspace.create(at: ws, transactions: 400, seed: 11, asOf: Day(iso: "2026-11-21")!)
        _ = try NightlyRun(workspace: Workspace(ws), asOf: Day(iso: "2026-11-21")!).run()
        let ledger = try Ledger(path: ws.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        try ledger.read { r in
            let sql = LedgerReader.refundEntriesSQL.replacingOccurrences(of: "book = ?", with: "book = 'production'")
                .replacingOccurrences(of: "date <= ?", with: "date <= '2026-11-21'")
            let plan = try r.rawRows("EXPLAIN QUERY PLAN " + sql).map { $0.joined(separator: " ") }.joined(separator: "\n")
            XCTAssertTrue(plan.contains("USING INDEX entry_refund_date"), plan)
            let all = try r.rawRows("SELECT id FROM entry NOT INDEXED WHERE book = 'production' AND kind <> 'sale' ORDER BY date, id").map { $0[0] }
            XCTAssertGreaterThan(all.count, 0)
            XCTAssertEqual(try r.refundEntries(book: .production, through: Day(iso: "2026-11-21")!).map { String($0.entryId) }, all)
            // The refunds still to post are found from the covering index of refunded
            // transactions (migration v17), each sale's row read only when one is due.
            let due = try r.rawRows("EXPLAIN QUERY PLAN " + LedgerReader.refundsDueSQL).map { $0.joined(separator: " ") }.joined(separator: "\n")
            XCTAssertTrue(due.contains("USING COVERING INDEX store_transaction_refunds"), due)
            XCTAssertTrue(due.contains("SEARCH t USING PRIMARY KEY"), due)
        }
    }

    /// The demo's ledger (3,000 transactions, seed 42, as of 2026-11-21) posted in batches of 7
    /// ends on the chain head the one-by-one posting gave before the posting stage used two
    /// threads: every entry, id and hash the same. (The head changed once since, when sales
    /// with no storefront of their own began to wait `order_wait_days` for their orders: the
    /// demo's renewals of its last two days wait. `iapledger demo` of that day, posted in
    /// batches of 10,000, ends on it too.)
    func testTheDemoLedgerPostedInBatchesHasTheChainHeadOfOneByOnePosting() throws {
        defer { NightlyRun.postingBatchSize = 10_000 }
        NightlyRun.postingBatchSize = 7
        let ws = newScratch("demo-head")
        let day = Day(iso: "2026-11-21")!
        _ = try DemoWorkspace.create(at: ws, transactions: 3000, seed: 42, asOf: day)
        let result = try NightlyRun(workspace: Workspace(ws), asOf: day).run()
        let ledger = try Ledger(path: ws.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let head = try ledger.read { try $0.rawRows("SELECT chain_head FROM run WHERE id = \(result.runId)") }
        XCTAssertEqual(head, [["f1b85310d4060bc957edfd7765913e480e5ba2eaf97b3aa12a332cf6bd85cbfd"]])
    }

    /// For both books (`book` nil), a later entry in one book alone keeps the as-of month read
    /// from its entries; and a report query inside a write transaction sees the entries that
    /// transaction inserted (the totals are brought up to date first, and not counted twice).
    func testALaterEntryInOneBookAndAQueryInsideAWrite() throws {
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("p1", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("s1", purchased: "2026-10-20T10:00:00Z")], environment: "Sandbox"),
        ].joined(separator: "\n"))
        _ = try ws.run("2026-10-21")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        let day = Day(iso: "2026-10-10")!
        try ledger.read { r in
            XCTAssertTrue(try r.monthTotalsCover(book: .production, through: day))
            XCTAssertFalse(try r.monthTotalsCover(book: .sandbox, through: day))
            XCTAssertFalse(try r.monthTotalsCover(book: nil, through: day))
            XCTAssertEqual(try r.trialBalance(book: nil, through: day), try r.trialBalanceFromPostings(book: nil, through: day))
            XCTAssertEqual(try r.activity(book: .sandbox, through: day), try r.activityFromEntries(book: .sandbox, through: day))
            XCTAssertTrue(try r.activity(book: .sandbox, through: day).isEmpty)
            XCTAssertFalse(try r.activity(book: .sandbox, through: Day(iso: "2026-10-21")!).isEmpty)
        }
        let asOf = Day(iso: "2026-10-21")!
        try ledger.write { w in
            var e = try XCTUnwrap(try w.entry(book: .production, transactionId: "p1", kind: .sale))
            e.transactionId = "p2"
            try w.insertEntry(e, runId: 1)
            XCTAssertEqual(try w.trialBalance(book: .production, through: asOf), try w.trialBalanceFromPostings(book: .production, through: asOf))
        }
        try ledger.read { r in
            let totals = try r.monthTotals(recomputed: false)
            XCTAssertEqual(totals.balances, try r.monthTotals(recomputed: true).balances)
            XCTAssertEqual(totals.activity, try r.monthTotals(recomputed: true).activity)
        }
    }

    func testMonthTotalsEqualThePostingsEveryNightAndVerifyChecksThem() throws {
        let ws = Resilience.scratch("month-totals")
        scratch.append(ws)
        _ = try DemoWorkspace.create(at: ws, transactions: 500, seed: 5, asOf: Day(iso: "2026-11-21")!)
        let inbox = try Resilience.HeldInbox(ws)
        let ledgerPath = ws.appendingPathComponent("ledger.sqlite").path
        for night in ["2026-09-12", "2026-10-31", "2026-11-21"] {
            try inbox.release(before: night)
            _ = try NightlyRun(workspace: Workspace(ws), asOf: Day(iso: night)!).run()
            let ledger = try Ledger(path: ledgerPath, readOnly: true)
            try ledger.read { r in
                let totals = try r.monthTotals(recomputed: false)
                XCTAssertFalse(totals.balances.isEmpty)
                XCTAssertEqual(totals.balances, try r.monthTotals(recomputed: true).balances, night)
                XCTAssertEqual(totals.activity, try r.monthTotals(recomputed: true).activity, night)
                for day in ["2026-08-15", "2026-08-31", "2026-09-01", "2026-09-12", "2026-10-30", "2026-10-31", "2026-11-21", "2026-12-31"].compactMap(Day.init(iso:)) {
                    for book in [Book.production, .sandbox] {
                        XCTAssertEqual(try r.trialBalance(book: book, through: day), try r.trialBalanceFromPostings(book: book, through: day), "\(night) \(book) \(day)")
                        XCTAssertEqual(try r.activity(book: book, through: day), try r.activityFromEntries(book: book, through: day), "\(night) \(book) \(day)")
                    }
                    XCTAssertEqual(try r.trialBalance(book: nil, through: day), try r.trialBalanceFromPostings(book: nil, through: day))
                }
                XCTAssertEqual(try r.trialBalance(book: nil), try r.trialBalanceFromPostings(book: nil))
                // Both ways of reading the as-of month are checked above: from its totals (its
                // last day; the night's own date, nothing dated after it) and from its entries
                // (a day with entries after it in the same month).
                let asOf = Day(iso: night)!
                XCTAssertTrue(try r.monthTotalsCover(book: .production, through: asOf), night)
                XCTAssertTrue(try r.monthTotalsCover(book: nil, through: asOf.month.lastDay), night)
                XCTAssertFalse(try r.monthTotalsCover(book: .production, through: Day(iso: "2026-08-15")!), night)
                XCTAssertFalse(try r.monthTotalsCover(book: nil, through: Day(iso: "2026-08-15")!), night)
            }
        }
        let verified = try Resilience.cli(["verify", "--workspace", ws.path])
        XCTAssertEqual(verified.status, 0, verified.out + verified.err)

        // A month total changed by hand: the reports would lie, and verify says so.
        let ledger = try Ledger(path: ledgerPath)
        try ledger.write { w in
            try w.db.execute(sql: """
                UPDATE balance_month SET balance_minor = balance_minor + 1
                WHERE (book, month, account_id, currency) = (SELECT book, month, account_id, currency FROM balance_month LIMIT 1)
                """)
        }
        let tampered = try Resilience.cli(["verify", "--workspace", ws.path])
        XCTAssertNotEqual(tampered.status, 0)
        XCTAssertTrue((tampered.out + tampered.err).contains("balance_month"), tampered.out + tampered.err)
    }
}
