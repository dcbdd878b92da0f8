import Foundation
import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

extension LedgerReader {
    /// Dismissals asked for and not yet applied by a night.
    func dismissalsWaiting() throws -> Int {
        try Int.fetchOne(db, sql: """
            SELECT count(*) FROM record_dismissal d JOIN source_record r ON r.id = d.record_id WHERE r.resolved_run_id IS NULL
            """) ?? 0
    }

    /// Finding dismissals asked for (for the finding as it reads) and not yet applied by a night.
    func findingDismissalsWaiting() throws -> Int {
        try Int.fetchOne(db, sql: """
            SELECT count(*) FROM finding_dismissal d JOIN finding f ON f.id = d.finding_id
            WHERE f.resolved_run_id IS NULL AND d.message = f.message
            """) ?? 0
    }
}

/// `iapledger dismiss`: records left pending or rejected that no later record will settle (an
/// orders file saved by a spreadsheet, then put back as it was) leave the open lists on the
/// next night, resolved with who dismissed them and why; nothing is posted.
final class DismissTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }

    func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }
    func open() throws -> [String] {
        try ledger().read { try $0.recordProblems() }.filter { !$0.resolved }.map { "\($0.path):\($0.line) \($0.outcome) \($0.code)" }
    }

    func testDismissedRecordsLeaveTheOpenListsOnTheNextNightWithWhoAndWhy() throws {
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header
            + "ord-1,acct-1,7001,coins.100,1,100,11/05/2026 10:01,production,USA,,\n"
            + "ord-2,acct-2,7002,coins.100,1,100,11/05/2026 10:02,production,USA,,\n")
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z")]) + "\n{not json\n")
        try ws.run("2026-10-06")
        XCTAssertEqual(try open(), ["inbox/orders/o.csv:2 rejected BAD_ORDER", "inbox/orders/o.csv:3 rejected BAD_ORDER",
                                    "inbox/receipts/r.jsonl:2 rejected MALFORMED"])
        let before = try ledger().read { try $0.lastEntryId() }

        // A file with no record not verified, and a line with none, are refused; nothing is asked.
        XCTAssertThrowsError(try LedgerRun.Dismiss.dismiss([.init(path: "inbox/orders/other.csv", line: nil)], workspace: ws.workspace,
                                                           reason: "typo", by: "alice", at: "2026-10-06T09:00:00Z")) {
            XCTAssertTrue("\($0)".hasPrefix("inbox/orders/other.csv: no record of it is pending or rejected in the ledger"), "\($0)")
        }
        XCTAssertThrowsError(try LedgerRun.Dismiss.dismiss([.init(path: "inbox/receipts/r.jsonl", line: 1)], workspace: ws.workspace,
                                                           reason: "typo", by: "alice", at: "2026-10-06T09:00:00Z"))
        XCTAssertEqual(try ledger().read { try $0.dismissalsWaiting() }, 0)

        // The whole orders file (given as a path from inside the workspace) and one receipt line.
        let asked = try LedgerRun.Dismiss.dismiss(
            [LedgerRun.Dismiss.Target(ws.root.appendingPathComponent("inbox/orders/o.csv").path, workspace: ws.workspace),
             LedgerRun.Dismiss.Target("inbox/receipts/r.jsonl:2", workspace: ws.workspace)],
            workspace: ws.workspace, reason: "saved by Excel, put back as sent", by: "alice", at: "2026-10-06T09:00:00Z")
        XCTAssertEqual(asked.asked.map { "\($0.path):\($0.line)" }, ["inbox/orders/o.csv:2", "inbox/orders/o.csv:3", "inbox/receipts/r.jsonl:2"])
        // A path through a link to the workspace names the same file.
        let link = ws.root.deletingLastPathComponent().appendingPathComponent(ws.root.lastPathComponent + "-link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: ws.root)
        defer { try? FileManager.default.removeItem(at: link) }
        XCTAssertEqual(LedgerRun.Dismiss.Target(link.appendingPathComponent("inbox/orders/o.csv").path + ":2", workspace: ws.workspace),
                       .init(path: "inbox/orders/o.csv", line: 2))
        XCTAssertEqual(LedgerRun.Dismiss.Target(link.appendingPathComponent("inbox/orders/gone-since.csv").path, workspace: ws.workspace),
                       .init(path: "inbox/orders/gone-since.csv", line: nil), "a file no longer there, named through the link")
        XCTAssertTrue(asked.description.hasPrefix("dismissed 3 records (2 BAD_ORDER, 1 MALFORMED): the next night resolves them with \"dismissed by alice on 2026-10-06: saved by Excel, put back as sent\""), asked.description)
        XCTAssertEqual(try open().count, 3, "open until the next night")
        XCTAssertEqual(try ledger().read { try $0.dismissalsWaiting() }, 3)
        // Asked again before the night: said, not asked twice.
        let again = try LedgerRun.Dismiss.dismiss([.init(path: "inbox/orders/o.csv", line: 2)], workspace: ws.workspace,
                                                  reason: "again", by: "bob", at: "2026-10-06T09:05:00Z")
        XCTAssertTrue(again.asked.isEmpty)
        XCTAssertEqual(again.alreadyAsked.count, 1)

        // The same night again, with only the dismissals new: recorded, not "nothing new".
        let night = try ws.run("2026-10-06")
        XCTAssertNil(night.nothingNewSinceRun)
        XCTAssertEqual(night.recordsDismissed, 3)
        XCTAssertEqual(try open(), [])
        XCTAssertEqual(try ledger().read { try $0.lastEntryId() }, before, "nothing posted")
        let notes = try ledger().read { try String.fetchAll($0.db, sql: "SELECT resolved_note FROM source_record WHERE resolved_run_id = ? ORDER BY id", arguments: [night.runId]) }
        XCTAssertEqual(Set(notes), ["dismissed by alice on 2026-10-06: saved by Excel, put back as sent"])
        // Run Info says what the night dismissed, with who and why (it was on no sheet).
        let info = try XCTUnwrap(XLSXReader.sheets(try XCTUnwrap(night.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") }))["Run Info"])
        let note = "dismissed by alice on 2026-10-06: saved by Excel, put back as sent"
        XCTAssertTrue(info.contains { $0.first == "Records dismissed by this run (ledger)" && $0[1] == "3" }, "\(info)")
        for line in ["inbox/orders/o.csv:2 (BAD_ORDER)", "inbox/orders/o.csv:3 (BAD_ORDER)", "inbox/receipts/r.jsonl:2 (MALFORMED)"] {
            XCTAssertTrue(info.contains { $0.first == "  " + line && $0[1] == note }, "\(line): \(info)")
        }
        XCTAssertFalse(info.contains { $0.first == "Findings dismissed by this run (ledger)" })
        // Trace of the order says so; the ledger verifies (the resolutions sealed with the night).
        let order = try XCTUnwrap(ledger().read { try $0.traceOrder("ord-1", asOf: Day(iso: "2026-10-06")) })
        XCTAssertEqual(order.lines_not_taken.map(\.resolution), ["dismissed by alice on 2026-10-06: saved by Excel, put back as sent"])
        XCTAssertEqual(order.lines_not_taken.map(\.resolved_on), ["2026-10-06"])
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        // Settled already: said, nothing asked; the asks are kept as made.
        let late = try LedgerRun.Dismiss.dismiss([.init(path: "inbox/orders/o.csv", line: nil)], workspace: ws.workspace,
                                                 reason: "again", by: "bob", at: "2026-10-07T09:00:00Z")
        XCTAssertEqual(late.alreadySettled.count, 2)
        XCTAssertTrue(late.description.hasPrefix("nothing dismissed: every record or finding named is settled already or dismissed before"), late.description)
        XCTAssertThrowsError(try ledger().write { try $0.db.execute(sql: "UPDATE record_dismissal SET reason = 'other'") })
        XCTAssertThrowsError(try ledger().write { try $0.db.execute(sql: "DELETE FROM record_dismissal") })
        // Past its trigger, a dismissal's reason changed: named as such (it was said to be
        // resolved by hand, as if no dismissal had been asked).
        try Tamper.run(ws.root.appendingPathComponent("ledger.sqlite").path, past: "record_dismissal_no_update",
                       "UPDATE record_dismissal SET reason = 'other' WHERE record_id = (SELECT min(record_id) FROM record_dismissal)")
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.hasPrefix("source record #") && $0.hasSuffix("is marked resolved by run \(night.runId) with the note \"dismissed by alice on 2026-10-06: saved by Excel, put back as sent\", but the dismissal asked for it reads \"dismissed by alice on 2026-10-06: other\" (a night writes the note of the dismissal it applies): the note, or the dismissal, was changed by hand") }, "\(problems)")
    }

    /// An ask dated after the night began (a clock set wrong, or written by hand) waits: the
    /// night applies only what was asked before it, and `verify` accepts a dismissal's
    /// resolution only so.
    func testADismissalDatedAfterTheNightWaits() throws {
        try ws.write("inbox/receipts/r.jsonl", "{not json\n")
        try ws.run("2026-10-06")
        try ledger().write { try $0.db.execute(sql: "INSERT INTO record_dismissal (record_id, asked_at, asked_by, reason) VALUES (1, '2099-12-31T00:00:00Z', 'ceo', 'x')") }
        let night = try ws.run("2026-10-07")
        XCTAssertEqual(night.recordsDismissed, 0)
        XCTAssertEqual(try open(), ["inbox/receipts/r.jsonl:1 rejected MALFORMED"])
        XCTAssertEqual(try ledger().read { try $0.dismissalsWaiting() }, 1)
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
    }

    /// The command: exit 0 and what it asked; a record it cannot find, exit 1 naming it.
    func testTheDismissCommand() throws {
        try ws.write("inbox/receipts/r.jsonl", "{not json\n")
        try ws.run("2026-10-06")
        let missing = try Resilience.cli(["dismiss", "inbox/receipts/r.jsonl:9", "--reason", "x", "--workspace", ws.root.path])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.err.contains("inbox/receipts/r.jsonl:9: no record of it is pending or rejected in the ledger"), missing.err)
        // Values not among those allowed exit 64, as the parse's own refusals do: a line 0, a
        // finding code no night opens or one the nights resolve themselves.
        for (args, said) in [(["inbox/receipts/r.jsonl:0"], "inbox/receipts/r.jsonl:0: lines are counted from 1"),
                             (["inbox/receipts/r.jsonl:00"], "inbox/receipts/r.jsonl:00: lines are counted from 1"),
                             (["--finding", "price_mismatch:1"], "--finding price_mismatch:1: no such finding code; those finance may dismiss once booked are PRICE_MISMATCH, "),
                             (["--finding", "MISSING_RULE:1"], "--finding MISSING_RULE:1: MISSING_RULE is resolved by the nights themselves")] {
            let refused = try Resilience.cli(["dismiss"] + args + ["--reason", "x", "--workspace", ws.root.path])
            XCTAssertEqual(refused.status, 64, "\(args)")
            XCTAssertTrue(refused.err.hasPrefix("Error: " + said), refused.err)
        }
        // trace takes FILE:LINE as dismiss does: a line 0 exits 64 too (it said "no transaction or
        // order with id", exit 1), a line past the file's end 1.
        let zero = try Resilience.cli(["trace", "inbox/receipts/r.jsonl:0", "--workspace", ws.root.path])
        XCTAssertEqual(zero.status, 64, zero.err)
        XCTAssertTrue(zero.err.hasPrefix("Error: inbox/receipts/r.jsonl:0: lines are counted from 1"), zero.err)
        XCTAssertEqual(try Resilience.cli(["trace", "inbox/receipts/r.jsonl:9", "--workspace", ws.root.path]).status, 1)
        XCTAssertEqual(try Resilience.cli(["trace", "inbox/receipts/r.jsonl:1", "--workspace", ws.root.path]).status, 0)
        let empty = try Resilience.cli(["dismiss", "inbox/receipts/r.jsonl:1", "--reason", " ", "--workspace", ws.root.path])
        XCTAssertNotEqual(empty.status, 0)
        let done = try Resilience.cli(["dismiss", "inbox/receipts/r.jsonl:1", "--reason", "test data", "--by", "carol", "--workspace", ws.root.path])
        XCTAssertEqual(done.status, 0, done.err)
        XCTAssertTrue(done.out.hasPrefix("dismissed 1 record (1 MALFORMED): the next night resolves it with \"dismissed by carol on "), done.out)
        let night = try Resilience.cli(["run", "--as-of", "2026-10-07", "--workspace", ws.root.path])
        XCTAssertTrue(night.out.contains("  records dismissed (`iapledger dismiss`): 1, off the open lists"), night.out)
        // A transaction known only from a pending record that was dismissed is "dismissed", not "rejected".
        try ws.write("inbox/receipts/p.jsonl", #"{"status": 21005, "is-retryable": true, "receipt": {"in_app": [{"transaction_id": "7100"}]}}"# + "\n")
        XCTAssertEqual(try Resilience.cli(["run", "--as-of", "2026-10-08", "--workspace", ws.root.path]).status, 0)
        XCTAssertEqual(try Resilience.cli(["dismiss", "inbox/receipts/p.jsonl", "--reason", "never re-sent", "--workspace", ws.root.path]).status, 0)
        XCTAssertEqual(try Resilience.cli(["run", "--as-of", "2026-10-09", "--workspace", ws.root.path]).status, 0)
        let trace = try Resilience.cli(["trace", "7100", "--workspace", ws.root.path])
        XCTAssertTrue(trace.out.hasPrefix("Transaction 7100: dismissed (known only from records an operator dismissed, below: never verified, nothing posted)"), trace.out)
        XCTAssertTrue(trace.out.contains("settled by the night of 2026-10-09: dismissed by "), trace.out)
    }

    /// A finding finance books by hand, once booked, is dismissed as it reads: the next night
    /// resolves it with the ask's note (Run Info's open findings no longer list it; trace shows
    /// the note). Found again with another message, it opens again and stays open. Findings the
    /// nights resolve themselves (a sale waiting for its rule) are refused.
    func testAFindingBookedByHandIsDismissedAsItReads() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9009", quantity: 0, purchased: "2026-10-05T10:00:00Z")]) + "\n"
            + Receipt.response([Receipt.item("9010", product: "coins.999", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-06")
        func openCodes() throws -> [String] { try ledger().read { try $0.findings(openOnly: true) }.map { "\($0.code) \($0.transactionId)" } }
        let first = try openCodes()
        XCTAssertTrue(first.contains("INVALID_TRANSACTION 9009") && first.contains("MISSING_RULE 9010"), "\(first)")
        func dismiss(_ code: String, _ id: String) throws -> LedgerRun.Dismiss.Result {
            try LedgerRun.Dismiss.dismiss([], findings: [(code, id)], workspace: ws.workspace, reason: "booked by hand, JE-17", by: "dana", at: "2026-10-06T09:00:00Z")
        }
        XCTAssertThrowsError(try dismiss("MISSING_RULE", "9010")) {
            XCTAssertTrue("\($0)".hasPrefix("MISSING_RULE:9010: MISSING_RULE is resolved by the nights themselves"), "\($0)")
        }
        XCTAssertThrowsError(try dismiss("NO_SUCH_CODE", "9009")) { XCTAssertTrue("\($0)".contains("no such finding code"), "\($0)") }
        XCTAssertThrowsError(try dismiss("PRICE_MISMATCH", "9009")) { XCTAssertTrue("\($0)".contains("the ledger holds no such finding"), "\($0)") }
        let asked = try dismiss("INVALID_TRANSACTION", "9009")
        XCTAssertEqual(asked.askedFindings.map(\.transactionId), ["9009"])
        XCTAssertTrue(asked.description.contains("dismissed 1 finding: the next night resolves it with \"dismissed by dana on 2026-10-06: booked by hand, JE-17\""), asked.description)
        XCTAssertEqual(try ledger().read { try $0.findingDismissalsWaiting() }, 1)
        let night = try ws.run("2026-10-07")
        XCTAssertEqual(night.findingsDismissed, 1)
        let info = try XCTUnwrap(XLSXReader.sheets(try XCTUnwrap(night.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") }))["Run Info"])
        XCTAssertTrue(info.contains { $0.first == "Findings dismissed by this run (ledger)" && $0[1] == "1" }, "\(info)")
        XCTAssertTrue(info.contains { $0.first == "  INVALID_TRANSACTION 9009" && $0[1] == "dismissed by dana on 2026-10-06: booked by hand, JE-17" }, "\(info)")
        XCTAssertFalse(try openCodes().contains("INVALID_TRANSACTION 9009"))
        let trace = try XCTUnwrap(try ledger().read { try $0.traceTransaction("9009", asOf: Day(iso: "2026-10-07")) })
        XCTAssertEqual(trace.findings.map(\.resolution), ["dismissed by dana on 2026-10-06: booked by hand, JE-17"])
        XCTAssertTrue(TraceOutput.text(trace).contains("    dismissed by dana on 2026-10-06: booked by hand, JE-17"))
        XCTAssertTrue(try dismiss("INVALID_TRANSACTION", "9009").askedFindings.isEmpty, "resolved already")
        /// What a night does to a finding, done here as a night's run would (inside one: the
        /// trigger refuses a finding resolved or opened again outside a night's run).
        func asANight(_ body: (LedgerWriter) throws -> Void) throws {
            try ledger().write { w in
                let guards = try String.fetchAll(w.db, sql: "SELECT sql FROM sqlite_schema WHERE name IN ('finding_resolved_by_a_run', 'finding_added_by_a_run')")
                XCTAssertEqual(guards.count, 2)
                try w.db.execute(sql: "DROP TRIGGER finding_resolved_by_a_run; DROP TRIGGER finding_added_by_a_run")
                try body(w)
                for sql in guards { try w.db.execute(sql: sql) }
            }
        }
        // Found again saying the same (its order touched, reconciled again): still dismissed,
        // and the night records nothing new for it.
        try asANight { w in
            let row = try XCTUnwrap(Row.fetchOne(w.db, sql: "SELECT record_id, message FROM finding WHERE transaction_id = '9009'"))
            try w.openFinding(code: "INVALID_TRANSACTION", transactionId: "9009", recordId: row[0], message: row[1], runId: night.runId)
        }
        XCTAssertFalse(try openCodes().contains("INVALID_TRANSACTION 9009"))
        XCTAssertEqual(try ledger().read { try String.fetchOne($0.db, sql: "SELECT resolved_note FROM finding WHERE transaction_id = '9009'") },
                       "dismissed by dana on 2026-10-06: booked by hand, JE-17")
        // Found again, saying something else: open again, and the ask (for what it said) does not close it.
        try asANight { w in
            let record = try XCTUnwrap(Int64.fetchOne(w.db, sql: "SELECT record_id FROM finding WHERE transaction_id = '9009'"))
            try w.openFinding(code: "INVALID_TRANSACTION", transactionId: "9009", recordId: record, message: "another reason", runId: night.runId)
        }
        XCTAssertTrue(try openCodes().contains("INVALID_TRANSACTION 9009"))
        XCTAssertEqual(try ledger().read { try String.fetchOne($0.db, sql: "SELECT ifnull(resolved_note, 'none') FROM finding WHERE transaction_id = '9009'") }, "none")
        XCTAssertEqual(try ws.run("2026-10-08").findingsDismissed, 0)
        XCTAssertTrue(try openCodes().contains("INVALID_TRANSACTION 9009"))
        XCTAssertThrowsError(try ledger().write { try $0.db.execute(sql: "DELETE FROM finding_dismissal") })
    }

    /// Excel's lock file beside an orders file it has open (`~$o.csv`) is no input, nor listed
    /// among the files to rename or move: never a rejected file whose rejection outlives it.
    func testAnOfficeLockFileIsNotRead() throws {
        try ws.write("inbox/orders/~$o.csv", "\u{5}alice")
        let night = try ws.run("2026-10-06")
        XCTAssertEqual(night.filesRead, 0)
        XCTAssertEqual(night.notRead, [], "Excel's own, gone when the file is closed: not listed")
        XCTAssertEqual(try open(), [])
    }
}
