import XCTest
import GRDB
@testable import LedgerRun
@testable import LedgerStore
import LedgerCore
import LedgerReconcile

/// An exception resolved and found again reopens its row; the episode before it stays in the
/// ledger (`exception_episode`), in `trace`, in `exceptions --status resolved` and in the
/// workbooks written again for a date inside it. Its row took the new dates, and the episode
/// before was gone.
final class ExceptionEpisodeTests: XCTestCase {
    func testAnExceptionFoundAgainKeepsTheEpisodeBefore() throws {
        // The sale waits for its order (order_wait_days 2): the first episode is found before
        // the sale has an entry, so with no amount.
        let ws = try TestWorkspace(config: OrderWaitTests.config)
        defer { ws.remove() }
        let header = ReconciliationTests.header
        // Night 1: a purchase no order credits (NOT_CREDITED). Night 2: its order (resolved).
        // Night 4: the order is reversed (NOT_CREDITED again: a second episode).
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("e1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-05")
        try ws.write("inbox/orders/b.csv", header + "o-e1,acc-1,e1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        try ws.run("2026-10-08")
        try ws.write("inbox/orders/c.csv", header + "o-e1,acc-1,e1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,2026-10-09T08:00:00Z\n")
        try ws.run("2026-10-10")

        let (_, ledger) = try ws.workspace.openExistingLedger()
        func notCredited(_ rows: [ExceptionRow]) -> [String] {
            rows.filter { $0.category == "NOT_CREDITED" && $0.transactionId == "e1" }
                .map { "\($0.firstSeen) \($0.resolvedOn?.description ?? "open")" }
        }
        XCTAssertEqual(notCredited(try ledger.read { try $0.exceptions(status: "all") }),
                       ["2026-10-05 2026-10-07", "2026-10-10 open"], "both episodes, each with its own dates")
        XCTAssertEqual(notCredited(try ledger.read { try $0.exceptions(status: "resolved") }), ["2026-10-05 2026-10-07"])
        XCTAssertEqual(notCredited(try ledger.read { try $0.exceptions(status: "open") }), ["2026-10-10 open"])
        XCTAssertEqual(notCredited(try ledger.read { try $0.exceptions(openOn: Day(iso: "2026-10-06")!) }), ["2026-10-05 2026-10-07"],
                       "a workbook written again for 2026-10-06 lists the first episode as open then")
        XCTAssertEqual(notCredited(try ledger.read { try $0.exceptions(openOn: Day(iso: "2026-10-08")!) }), [],
                       "open neither on 2026-10-08")

        // The episode open now has its figures (taken again when it reopened), and a list
        // written again for 2026-10-06 counts the first episode's age to that day (1), not to
        // its resolution (2).
        let now = try XCTUnwrap(try ledger.read { try $0.exceptions(status: "open") }.first { $0.category == "NOT_CREDITED" })
        XCTAssertEqual(now.grossMinor, 99)
        XCTAssertEqual(now.currency, "USD")
        let first = try XCTUnwrap(try ledger.read { try $0.exceptions(openOn: Day(iso: "2026-10-06")!) }.first { $0.category == "NOT_CREDITED" })
        XCTAssertEqual(first.ageDays(asOf: Day(iso: "2026-10-06")!), 1)

        let traced = try XCTUnwrap(try ledger.read { try $0.traceTransaction("e1", asOf: nil) })
        XCTAssertEqual(traced.exceptions.filter { $0.category == "NOT_CREDITED" }.map { "\($0.first_seen) \($0.status)" },
                       ["2026-10-05 resolved", "2026-10-10 open"])

        // History: an episode never changes and is never removed.
        XCTAssertThrowsError(try ledger.write { try $0.db.execute(sql: "UPDATE exception_episode SET resolved_on = '2026-10-06'") })
        XCTAssertThrowsError(try ledger.write { try $0.db.execute(sql: "DELETE FROM exception_episode") })
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")

        // Past their triggers, an age (first seen moved back) and an episode's resolution
        // (moved, and moved after the exception opened again): named, as the nights' days.
        let db = ws.root.appendingPathComponent("ledger.sqlite").path
        var said: [String] = []
        func check() throws -> [String] {
            said = try Audit(workspace: ws.workspace).run().problems.map(\.message).filter { $0.contains("NOT_CREDITED") }
            return said
        }
        try Tamper.run(db, past: "exception_resolved_by_a_run", "UPDATE exception SET first_seen = '2026-10-01' WHERE category = 'NOT_CREDITED' AND transaction_id = 'e1'")
        XCTAssertTrue(try check().contains { $0.hasPrefix("exception NOT_CREDITED (transaction e1, order ): first seen 2026-10-01 (run 4, as of 2026-10-10)") && $0.hasSuffix("changed by hand (its age or its resolution)") }, "\(said)")
        try Tamper.run(db, past: "exception_resolved_by_a_run", "UPDATE exception SET first_seen = '2026-10-10' WHERE category = 'NOT_CREDITED' AND transaction_id = 'e1'")
        XCTAssertEqual(try check(), [])
        try Tamper.run(db, past: "exception_episode_no_update", "UPDATE exception_episode SET resolved_on = '2026-10-06'")
        XCTAssertTrue(try check().contains { $0.hasPrefix("a closed episode of exception NOT_CREDITED (transaction e1, order ): first seen 2026-10-05") && $0.contains("resolved 2026-10-06 (run 2, as of 2026-10-07)") }, "\(said)")
        try Tamper.run(db, past: "exception_episode_no_update", "UPDATE exception_episode SET resolved_on = '2026-10-10', resolved_run_id = 4, last_seen = '2026-10-08', last_run_id = 3")
        XCTAssertTrue(try check().contains { $0.contains("the exception open again since run 4") }, "\(said)")
    }

    /// Exceptions are listed a category at a time along the index `exception_list`, earlier
    /// episodes merged in: the same list, in the same order, as one query sorting them all by
    /// category, first seen, transaction and order (SQLite's byte order), whatever the filter.
    func testExceptionsAreListedInTheOrderOfOneSortedQuery() throws {
        let ws = try TestWorkspace(config: OrderWaitTests.config)
        defer { ws.remove() }
        let header = ReconciliationTests.header
        try ws.write("inbox/receipts/a.jsonl", ["e1", "e2", "E3"].map { Receipt.response([Receipt.item($0, purchased: "2026-10-05T10:00:00Z")]) }.joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/a.csv", header + ["o-x1,acc-1,x1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,",
                                                     "o-X2,acc-1,X2,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,",
                                                     "o-é3,acc-1,é3,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,",
                                                     "o-n1,acc-1,,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,"].joined(separator: "\n") + "\n")
        try ws.run("2026-10-05")
        try ws.write("inbox/orders/b.csv", header + "o-e1,acc-1,e1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
                     + "o-E3,acc-2,E3,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,\n"
                     + "o-e2,acc-1,e2,coins.100,2,100,2026-10-05T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-07")
        try ws.write("inbox/orders/c.csv", header + "o-e1,acc-1,e1,coins.100,1,100,2026-10-05T10:01:00Z,production,USA,,2026-10-09T08:00:00Z\n"
                     + "o-a4,acc-1,a4,coins.100,1,100,2026-10-09T10:01:00Z,production,USA,,\n")
        try ws.run("2026-10-10")
        let (_, ledger) = try ws.workspace.openExistingLedger()
        let order = ExceptionCategory.allCases.enumerated().map { "WHEN '\($1.rawValue)' THEN \($0)" }.joined(separator: " ")
        func sorted(_ whereSQL: String, _ args: StatementArguments) throws -> [String] {
            try ledger.read { r in
                try Row.fetchAll(r.db, sql: """
                    SELECT category, transaction_id, order_id, first_seen, ifnull(resolved_on, 'open') FROM (\(try r.episodesSQL)) \(whereSQL)
                    ORDER BY CASE category \(order) END, first_seen, transaction_id, order_id
                    """, arguments: args).map { "\($0[0] as String) \($0[1] as String) \($0[2] as String) \($0[3] as String) \($0[4] as String)" }
            }
        }
        func listed(_ rows: [ExceptionRow]) -> [String] {
            rows.map { "\($0.category) \($0.transactionId) \($0.orderId ?? "") \($0.firstSeen) \($0.resolvedOn?.description ?? "open")" }
        }
        let all = try sorted("", [])
        XCTAssertGreaterThan(all.count, 6)
        XCTAssertTrue(all.contains { $0.hasPrefix("NOT_CREDITED e1  2026-10-05 2026-10-07") }, "\(all)")
        XCTAssertEqual(Set(all.map { $0.split(separator: " ")[0] }).count, 3, "\(all)")
        XCTAssertEqual(listed(try ledger.read { try $0.exceptions(status: "all") }), all)
        XCTAssertEqual(listed(try ledger.read { try $0.exceptions(status: "open") }), try sorted("WHERE resolved_on IS NULL", []))
        XCTAssertEqual(listed(try ledger.read { try $0.exceptions(status: "resolved") }), try sorted("WHERE resolved_on IS NOT NULL", []))
        XCTAssertEqual(listed(try ledger.read { try $0.exceptions(category: "NOT_CREDITED") }), try sorted("WHERE category = 'NOT_CREDITED'", []))
        for day in ["2026-10-05", "2026-10-06", "2026-10-08", "2026-10-10"] {
            XCTAssertEqual(listed(try ledger.read { try $0.exceptions(openOn: Day(iso: day)!) }),
                           try sorted("WHERE first_seen <= ?1 AND (resolved_on IS NULL OR resolved_on > ?1)", [day]), day)
        }
    }
}
