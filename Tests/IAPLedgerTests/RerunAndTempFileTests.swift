import CXattr
import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore
@testable import LedgerReport
@testable import LedgerWrite

/// Re-running a night that brings nothing new records nothing and writes the same workbooks
/// to the byte; workbooks are written in `.iapledger-tmp/`, never as partial files in `reports/`.
final class RerunAndTempFileTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws {
        ws = try TestWorkspace()
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("8001", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("8002", product: "coins.550", purchased: "2026-10-06T10:00:00Z")]),
            // No FX rate for EUR in 2026-11 yet: waits with MISSING_RULE.
            Receipt.response([Receipt.item("8003", purchased: "2026-11-02T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header
            + "ord-1,acct-1,8001,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,\n"
            + "ord-3,acct-3,8003,coins.100,1,100,2026-11-02T10:01:00Z,production,DEU,,\n")
    }
    override func tearDown() { ws.remove() }

    func runCount() throws -> Int {
        let rows = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read { try $0.rawRows("SELECT count(*) FROM run") }
        return Int(rows[0][0])!
    }

    func reports() throws -> [String: Data] { try Resilience.files(under: ws.root.appendingPathComponent("reports")) }

    /// A workbook edited in place under `reports/` (bytes no version iapledger wrote there
    /// has) is kept beside the new one when a night or `report` writes it again, and said: it
    /// was written over silently, and `report` called it the earlier version it replaced. A
    /// file with the bytes of a version iapledger wrote is replaced, nothing kept.
    func testAWorkbookEditedInPlaceIsKeptAsideWhenWrittenAgain() throws {
        try ws.run("2026-11-03")
        let dir = ws.root.appendingPathComponent("reports/2026-11-03")
        let finance = dir.appendingPathComponent("finance-2026-11-03.xlsx")
        let written = try Data(contentsOf: finance)
        func asides() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".replaced-") }.sorted() }

        // Re-run with the file as written: replaced, nothing kept.
        let again = try ws.run("2026-11-03")
        XCTAssertEqual(again.keptAsideNotes, [:])
        XCTAssertEqual(try asides(), [])

        // Edited in place (Excel saving over it): the night keeps it aside.
        let edited = written + Data("edited".utf8)
        try edited.write(to: finance)
        let night = try ws.run("2026-11-03")
        XCTAssertEqual(try Data(contentsOf: finance), written, "the night's workbook is in place")
        let kept = try asides()
        XCTAssertEqual(kept.count, 1)
        XCTAssertTrue(kept[0].hasPrefix("finance-2026-11-03.replaced-") && kept[0].hasSuffix(".xlsx"), kept[0])
        XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent(kept[0])), edited, "the edited bytes are kept")
        XCTAssertEqual(night.keptAsideNotes.count, 1)
        XCTAssertEqual(night.keptAsideNotes[finance]?.contains("kept beside it as \(kept[0])"), true, "\(night.keptAsideNotes)")

        // `report` the same: it says the file kept, and compares its own with the version registered.
        let reconciliation = dir.appendingPathComponent("reconciliation-2026-11-03.xlsx")
        let reconciliationBytes = try Data(contentsOf: reconciliation)
        try Data("not a workbook".utf8).write(to: reconciliation)
        let files = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-11-03")!).files
        let file = try XCTUnwrap(files.first { $0.url.lastPathComponent == "reconciliation-2026-11-03.xlsx" })
        XCTAssertEqual(try Data(contentsOf: reconciliation), reconciliationBytes)
        XCTAssertEqual(file.keptAside.map { try? Data(contentsOf: $0) }, Data("not a workbook".utf8))
        XCTAssertEqual(file.earlier?.hasPrefix("the same bytes as the version written "), true, file.earlier ?? "")
        XCTAssertEqual(file.earlier?.contains("which it replaces"), false)
        XCTAssertNil(files.first { $0.url == finance }?.keptAside, "the finance workbook was iapledger's: replaced")
        XCTAssertEqual(try asides().count, 2)
    }

    /// Two nights stopped in turn (an operator's review): the first after putting a workbook in
    /// place and before registering it, the second after keeping that unregistered file aside
    /// and before writing. The night that completes wrote the same bytes, yet the first copy
    /// stayed under `reports/` as a "replaced" file no one had edited. A copy kept already
    /// serves again (no second one), and copies of the bytes written go.
    func testCopiesKeptByStoppedNightsOfTheBytesWrittenGo() throws {
        try ws.run("2026-11-03")
        let dir = ws.root.appendingPathComponent("reports/2026-11-03")
        let finance = dir.appendingPathComponent("finance-2026-11-03.xlsx")
        func asides() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".replaced-") }.sorted() }
        let (_, ledger) = try ws.workspace.openExistingLedger()
        // (Each file put in place as a night does, by a rename: the copies are second links.)
        // Bytes no version registered has: a night's workbook put in place, not registered.
        let written = try Data(contentsOf: finance)
        let unregistered = written + Data("another night's".utf8)
        try unregistered.write(to: finance, options: .atomic)
        let first = try XCTUnwrap(try ledger.read { try ReportSet.keepAsideIfNotWritten(finance, reader: $0, workspace: ws.workspace) })
        // The next night stopped before writing; the one after keeps the same copy.
        let second = try XCTUnwrap(try ledger.read { try ReportSet.keepAsideIfNotWritten(finance, reader: $0, workspace: ws.workspace) })
        XCTAssertEqual(second.url, first.url)
        XCTAssertEqual(try asides().count, 1)
        // It writes those very bytes: no copy is left.
        try unregistered.write(to: finance, options: .atomic)
        XCTAssertNil(ReportSet.asideStillNeeded(second, written: finance))
        XCTAssertEqual(try asides(), [])
        // A copy of other bytes (an edit) stays, said.
        let edit = unregistered + Data(" edited".utf8)
        try edit.write(to: finance, options: .atomic)
        let kept = try XCTUnwrap(try ledger.read { try ReportSet.keepAsideIfNotWritten(finance, reader: $0, workspace: ws.workspace) })
        try unregistered.write(to: finance, options: .atomic)
        XCTAssertEqual(ReportSet.asideStillNeeded(kept, written: finance), kept.url)
        XCTAssertEqual(try Data(contentsOf: kept.url), edit)
        // And the night itself, over its own registered workbook: the edit stays kept, nothing
        // else is added.
        try written.write(to: finance, options: .atomic)
        try ws.run("2026-11-03")
        XCTAssertEqual(try asides(), [kept.url.lastPathComponent])
    }

    func testReRunningANightWithNothingNewRecordsNothingAndWritesTheSameWorkbooks() throws {
        let first = try ws.run("2026-11-03")
        XCTAssertNil(first.nothingNewSinceRun)
        XCTAssertEqual(first.runId, 1)
        XCTAssertFalse(first.problems.isEmpty, "the MISSING_RULE finding is reported")
        let written = try reports()
        let dump = try Resilience.ledgerDump(ws.root)
        XCTAssertEqual(written.count, 6, "this night's set and October's")

        // Workbooks lost (a run killed after its commit): the re-run writes the same bytes.
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("reports"))
        let again = try ws.run("2026-11-03")
        XCTAssertEqual(again.nothingNewSinceRun, 1)
        XCTAssertEqual(again.runId, 1)
        XCTAssertEqual(again.counts.read, 0)
        XCTAssertEqual(again.problems, [])
        XCTAssertEqual(try runCount(), 1, "a run that changed nothing records no run")
        XCTAssertTrue(try Resilience.ledgerDump(ws.root) == dump)
        XCTAssertEqual(try reports(), written)
        // The same bytes are not registered again: the head the night printed stands.
        XCTAssertNotNil(first.totals.reportFilesHead)
        XCTAssertEqual(again.totals.reportFilesHead, first.totals.reportFilesHead)
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
            .read { try $0.rawRows("SELECT count(*) FROM report_file") }, [["6"]])
        // Run Info names run 1 and what it read.
        let info = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-03/finance-2026-11-03.xlsx"))["Run Info"]!
        XCTAssertTrue(info.contains { $0.first == "Run number" && $0.dropFirst().first == "1" })
        XCTAssertTrue(info.contains { $0.first == "Records read this run" && $0.dropFirst().first == "5" }, "\(info)")
    }

    func testAnotherNightOrAChangeIsAlwaysRecorded() throws {
        try ws.run("2026-11-03")
        // A rule arrives: the same night posts the waiting sale, so it is a run of its own.
        try ws.append("rules/fx.csv", "\n2026-11,EUR,1.08\n")
        let withRule = try ws.run("2026-11-03")
        XCTAssertNil(withRule.nothingNewSinceRun)
        XCTAssertEqual(withRule.runId, 2)
        XCTAssertEqual(withRule.counts.entriesPosted, 1)
        // The products' units change: no file, no entry, but reconciliation finds UNITS_MISMATCH.
        try ws.write("rules/products.csv", TestWorkspace.defaultProducts.replacingOccurrences(of: "coins.100,consumable,100", with: "coins.100,consumable,90"))
        let changed = try ws.run("2026-11-03")
        XCTAssertNil(changed.nothingNewSinceRun)
        XCTAssertEqual(changed.runId, 3)
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read {
            try $0.exceptions(status: "open", category: "UNITS_MISMATCH").count }, 2)
        // Nothing new, same night: not recorded.
        XCTAssertEqual(try ws.run("2026-11-03").nothingNewSinceRun, 3)
        // Nothing new on a new night: recorded (ages move, Run Info says 0 new records).
        let nextNight = try ws.run("2026-11-04")
        XCTAssertNil(nextNight.nothingNewSinceRun)
        XCTAssertEqual(nextNight.runId, 4)
        XCTAssertEqual(try runCount(), 4)
    }

    /// A file read before is skipped without hashing when its identity on disk is unchanged;
    /// a rewrite to the same size with the modification time set back is still read again
    /// (its change time moved), and a ledger from before identities learns them by hash.
    func testUnchangedFilesAreKnownByTheirIdentityAndAnyRewriteIsReadAgain() throws {
        let path = ws.root.appendingPathComponent("inbox/receipts/r.jsonl").path
        // Only a settled identity is remembered: one older than the coarsest file time resolution.
        Thread.sleep(forTimeInterval: 2.2)
        let first = try ws.run("2026-11-03")
        XCTAssertEqual(first.filesRead, 2)
        let ledgerPath = ws.root.appendingPathComponent("ledger.sqlite").path
        func statKeys() throws -> [String] {
            try Ledger(path: ledgerPath).read { try $0.rawRows("SELECT path, ifnull(stat_key, '-') FROM source_file ORDER BY id") }
                .map { $0.joined(separator: " ") }
        }
        XCTAssertEqual(try statKeys().filter { $0.hasSuffix(" -") }, [], "every file read has its identity")
        XCTAssertTrue(try statKeys().contains("inbox/receipts/r.jsonl " + FileStat.key(path)!))

        // Same size, another transaction id, the modification time set back to the nanosecond.
        var before = stat()
        XCTAssertEqual(stat(path, &before), 0)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try Data(text.replacingOccurrences(of: "8002", with: "8009").utf8).write(to: URL(fileURLWithPath: path))
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        var after = stat()
        XCTAssertEqual(stat(path, &after), 0)
        XCTAssertEqual(after.st_size, before.st_size)
        XCTAssertEqual(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec)
        let second = try ws.run("2026-11-04")
        XCTAssertEqual(second.filesRead, 1, "the rewritten file is read again")
        XCTAssertEqual(second.counts.read, 1, "only its new record (8009) is new")
        XCTAssertNotNil(try Ledger(path: ledgerPath).read { try $0.transaction("8009") })

        // A ledger whose rows have no identity yet: the file is hashed, found unchanged, and its
        // identity remembered for the nights after.
        let ledger = try Ledger(path: ledgerPath)
        try ledger.write { w in try w.db.execute(sql: "UPDATE source_file SET stat_key = NULL") }
        Thread.sleep(forTimeInterval: 2.2)
        let third = try ws.run("2026-11-05")
        XCTAssertEqual(third.filesRead, 0)
        XCTAssertEqual(third.filesSkipped, 2)
        XCTAssertTrue(try statKeys().contains("inbox/receipts/r.jsonl " + FileStat.key(path)!))
    }

    func testWorkbooksAreWrittenInTheTempFolderAndStaleTempFilesAreRemoved() throws {
        // A partial file of a process that died, one of a live process, and a stray file.
        let dead = Process()
        dead.executableURL = URL(fileURLWithPath: "/bin/true")
        try dead.run()
        dead.waitUntilExit()
        try ws.write(".iapledger-tmp/finance-2026-11-03.xlsx.\(dead.processIdentifier).partial", "half a workbook")
        try ws.write(".iapledger-tmp/finance-2026-11-03.xlsx.1.partial", "a live process's file")
        try ws.write(".iapledger-tmp/stray", "junk")
        try ws.run("2026-11-03")
        XCTAssertEqual(Set(try Resilience.files(under: ws.workspace.tempURL).keys), ["finance-2026-11-03.xlsx.1.partial"])
        for path in try reports().keys {
            XCTAssertFalse(path.contains("partial") || path.split(separator: "/").last!.hasPrefix("."), path)
        }
        // A workbook written aside is renamed into place and replaces the older one.
        let url = ws.root.appendingPathComponent("reports/x/book.xlsx")
        try ws.write("reports/x/book.xlsx", "old")
        try XLSXWriter.write(WorkbookModel(title: "t", subject: "s", company: "", created: Day(iso: "2026-11-03")!, sheets: []),
                             to: url, tempDirectory: ws.workspace.tempURL)
        XCTAssertNotEqual(try Data(contentsOf: url), Data("old".utf8))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path), ["book.xlsx"])
    }

    /// The nights' user outside the group of a set-group-ID `reports/` (a service user, the
    /// share's group finance): it may not give that group to a file of its own, which the
    /// kernel gives a file created in the folder; the workbook is copied into the folder and
    /// takes it (it kept the user's group, silently).
    func testAWorkbookTakesTheFoldersGroupWhenTheNightsUserIsOutsideIt() throws {
        let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: setpriv.path) else {
            throw XCTSkip("needs root to run a night as another user (setpriv, util-linux)")
        }
        let binary = TraceAndCLITests.binary
        guard FileManager.default.fileExists(atPath: binary.path) else { throw XCTSkip("iapledger binary not built at \(binary.path)") }
        let reports = ws.root.appendingPathComponent("reports")
        try FileManager.default.createDirectory(at: reports, withIntermediateDirectories: true)
        let all = try FileManager.default.subpathsOfDirectory(atPath: ws.root.path).map { ws.root.appendingPathComponent($0).path } + [ws.root.path]
        for path in all { XCTAssertEqual(chown(path, 65534, 65534), 0, path) }
        XCTAssertEqual(chown(reports.path, uid_t.max, 4321), 0)
        XCTAssertEqual(chmod(reports.path, 0o2770), 0)
        let p = Process()
        p.executableURL = setpriv
        p.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", binary.path, "run", "--as-of", "2026-11-03", "--workspace", ws.root.path]
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        var st = stat()
        let finance = reports.appendingPathComponent("2026-11-03/finance-2026-11-03.xlsx")
        XCTAssertEqual(stat(finance.path, &st), 0)
        XCTAssertEqual(st.st_gid, 4321, "the folder's group, as a file created there takes it")
        XCTAssertEqual(st.st_uid, 65534)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: finance.deletingLastPathComponent().path).sorted(),
                       ["finance-2026-11-03.xlsx", "reconciliation-2026-11-03.xlsx", "sandbox-2026-11-03.xlsx"], "no partial file left")
    }

    /// A pending or rejected record that repeats one read before (the same bytes, outcome and
    /// reason: a file sent again under another name, a line given twice) is settled as its
    /// repeat, so the open lists give each once (a copy of a receipts file listed its records
    /// again, to be dismissed twice); the copy is kept, its resolution naming the record it
    /// repeats, `verify` accepts it, and dismissing the first settles the matter. A bare failed
    /// response (the same bytes for every purchase that failed) repeats only itself, at its
    /// line of a byte copy of its file; a cut line is no repeat (its file's later versions
    /// settle it); and a resolution so made up by hand (for a record that repeats nothing, or
    /// for an empty file: every empty file has the same bytes) is named by `verify`.
    func testARecordRepeatingOneReadBeforeIsListedOnce() throws {
        let named = #"{"status": 21010, "receipt": {"in_app": [{"transaction_id": "8103"}]}}"#
        try ws.write("inbox/receipts/p.jsonl", [
            #"{"status": 21005, "is-retryable": true, "receipt": {"in_app": [{"transaction_id": "8101"}]}}"#,
            #"{"status": 21010}"#,
            #"{"status": 21010}"#,
            named,
            named,
        ].joined(separator: "\n") + "\n")
        try ws.write("inbox/orders/bad.csv", ReconciliationTests.header
            + "ord-9,acct-9,8009,coins.100,1,100,2026-13-05T10:01:00Z,production,DEU,,\n")
        func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }
        func open() throws -> [String] {
            try ledger().read { try $0.rawRows("""
                SELECT f.path || ':' || r.line || ' ' || r.outcome || ' ' || r.reason_code FROM source_record r JOIN source_file f ON f.id = r.file_id
                WHERE r.outcome <> 'verified' AND r.resolved_run_id IS NULL ORDER BY f.path, r.line
                """).map { $0[0] } }
        }
        try ws.run("2026-11-03")
        let listed = ["inbox/orders/bad.csv:2 rejected BAD_ORDER", "inbox/receipts/p.jsonl:1 pending RETRYABLE",
                      "inbox/receipts/p.jsonl:2 rejected STATUS_21010", "inbox/receipts/p.jsonl:3 rejected STATUS_21010",
                      "inbox/receipts/p.jsonl:4 rejected STATUS_21010"]
        XCTAssertEqual(try open(), listed, "two bare failed responses are two records; a response naming its transaction given twice, one")
        try FileManager.default.copyItem(at: ws.root.appendingPathComponent("inbox/receipts/p.jsonl"),
                                         to: ws.root.appendingPathComponent("inbox/receipts/p (1).jsonl"))
        try FileManager.default.copyItem(at: ws.root.appendingPathComponent("inbox/orders/bad.csv"),
                                         to: ws.root.appendingPathComponent("inbox/orders/bad-resent.csv"))
        let night = try ws.run("2026-11-04")
        XCTAssertEqual(night.problemRecords, 0, "nothing new is open")
        XCTAssertEqual(night.recordsSettledSameNight, 6)
        XCTAssertEqual(try open(), listed)
        let notes = try ledger().read { try $0.rawRows("""
            SELECT f.path || ':' || r.line || ' ' || r.resolved_note FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.resolved_run_id IS NOT NULL ORDER BY f.path, r.line
            """).map { $0[0] } }
        func note(_ line: Int) -> String { "the same record as inbox/receipts/p.jsonl:\(line) (read by the night of 2026-11-03), which stands for it" }
        XCTAssertEqual(notes, [
            "inbox/orders/bad-resent.csv:2 the same record as inbox/orders/bad.csv:2 (read by the night of 2026-11-03), which stands for it",
            "inbox/receipts/p (1).jsonl:1 " + note(1), "inbox/receipts/p (1).jsonl:2 " + note(2), "inbox/receipts/p (1).jsonl:3 " + note(3),
            "inbox/receipts/p (1).jsonl:4 " + note(4), "inbox/receipts/p (1).jsonl:5 " + note(4), "inbox/receipts/p.jsonl:5 " + note(4),
        ])
        var audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")

        // Dismissing the first settles the matter, also for a copy read after the dismissal.
        _ = try LedgerRun.Dismiss.dismiss([.init(path: "inbox/receipts/p.jsonl", line: 4)], workspace: ws.workspace,
                                          reason: "account deleted", by: "alice", at: "2026-11-05T08:00:00Z")
        try ws.run("2026-11-05")
        try ws.write("inbox/receipts/q.jsonl", named + "\n")
        try ws.run("2026-11-06")
        XCTAssertEqual(try open(), ["inbox/orders/bad.csv:2 rejected BAD_ORDER", "inbox/receipts/p.jsonl:1 pending RETRYABLE",
                                    "inbox/receipts/p.jsonl:2 rejected STATUS_21010", "inbox/receipts/p.jsonl:3 rejected STATUS_21010"])

        // A cut line is no repeat (its file's later versions settle it): open in each file.
        let whole = Receipt.response([Receipt.item("8102", purchased: "2026-10-20T10:00:00Z")])
        try ws.write("inbox/receipts/cut-a.json", String(whole.prefix(whole.count / 2)))
        try ws.write("inbox/receipts/cut-b.json", String(whole.prefix(whole.count / 2)))
        try ws.write("inbox/orders/empty-a.csv", "")
        try ws.write("inbox/orders/empty-b.csv", "")
        try ws.run("2026-11-07")
        XCTAssertEqual(try open().filter { $0.contains("cut-") || $0.contains("empty-") }, [
            "inbox/orders/empty-a.csv:1 rejected EMPTY_FILE", "inbox/orders/empty-b.csv:1 rejected EMPTY_FILE",
            "inbox/receipts/cut-a.json:1 rejected TRUNCATED", "inbox/receipts/cut-b.json:1 rejected TRUNCATED"])
        audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")

        // Resolutions made up as repeats (past the guard): one of a record that repeats nothing,
        // one of an empty file (its twin has the same bytes), one of a bare response at another line.
        for (path, line) in [("inbox/orders/bad.csv", 2), ("inbox/orders/empty-b.csv", 1), ("inbox/receipts/p.jsonl", 3)] {
            try Tamper.run(ws.root.appendingPathComponent("ledger.sqlite").path, past: "source_record_resolved_once", """
                UPDATE source_record SET resolved_run_id = (SELECT f.run_id FROM source_file f WHERE f.id = source_record.file_id),
                       resolved_note = 'the same record as inbox/receipts/p.jsonl:2 (read by the night of 2026-11-03), which stands for it'
                WHERE id = (SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = '\(path)' AND r.line = \(line))
                """)
        }
        audit = try Audit(workspace: ws.workspace).run()
        for named in ["(inbox/orders/bad.csv:2, rejected BAD_ORDER) is marked resolved by run 1", "(inbox/orders/empty-b.csv:1, rejected EMPTY_FILE) is marked resolved by run 5",
                      "(inbox/receipts/p.jsonl:3, rejected STATUS_21010) is marked resolved by run 1"] {
            XCTAssertTrue(audit.problems.contains { $0.message.contains(named) && $0.message.contains("but nothing that run read resolves it") }, "\(named): \(audit.problems)")
        }
    }

    /// A file that grows is read again and only what it brought counts, counted line by line:
    /// a row appended that is a row the file held already (an order back to an earlier line's
    /// credit) counts again. It was taken as read: the order stayed where the line before it
    /// put it, and the line was in no list (`trace FILE:LINE` found nothing). (The rows
    /// appended leave the order where it stands, so they make no version: each is a record.)
    func testALineGivenAgainInAGrowingFileCountsAgain() throws {
        let a = "ord-g,acct-g,8001,coins.100,1,0,2026-10-05T10:01:00Z,production,DEU,,"
        let b = "ord-g,acct-g,8001,coins.100,1,100,2026-10-05T10:01:00Z,production,DEU,,"
        try ws.write("inbox/orders/grow.csv", ReconciliationTests.header + a + "\n")
        try ws.run("2026-11-03")
        try ws.write("inbox/orders/grow.csv", ReconciliationTests.header + a + "\n" + b + "\n" + a + "\n")
        let night = try ws.run("2026-11-04")
        XCTAssertEqual(night.counts.read, 2)
        XCTAssertEqual(night.counts.skipped, 1)
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        let versions = try ledger.read { try $0.rawRows("""
            SELECT r.line, v.credited_units FROM order_version v JOIN source_record r ON r.id = v.record_id
            WHERE v.order_id = 'ord-g' ORDER BY v.id
            """) }
        XCTAssertEqual(versions, [["2", "0"]], "the order is as the file's last line says: lines 3 and 4 leave it so")
        XCTAssertEqual(night.counts.repeatedOrderLines, 2)
        XCTAssertEqual(try ledger.read { try $0.traceRecord(path: "inbox/orders/grow.csv", line: 4, withText: false) }?.records.map(\.outcome), ["verified"])
        // `trace FILE:LINE` of the line an order's version was taken from names the transaction
        // it credits (an auditor's review: orders lines listed none, receipt and signed lines theirs).
        XCTAssertEqual(try ledger.read { try $0.traceRecord(path: "inbox/orders/grow.csv", line: 2, withText: false) }?.records.map(\.transaction_ids), [["8001"]])
        // Grown by the credit alone: the order is credited (a new version).
        try ws.append("inbox/orders/grow.csv", b + "\n")
        XCTAssertEqual(try ws.run("2026-11-05").counts.read, 1)
        XCTAssertEqual(try ledger.read { try $0.rawRows("SELECT credited_units FROM order_version WHERE order_id = 'ord-g' ORDER BY id") }, [["0"], ["100"]])
        // Read again as it is, nothing new; grown by the same line once more, one new record.
        XCTAssertEqual(try ws.run("2026-11-06").counts.read, 0)
        try ws.append("inbox/orders/grow.csv", b + "\n")
        let more = try ws.run("2026-11-07")
        XCTAssertEqual(more.counts.read, 1)
        XCTAssertEqual(more.counts.repeatedOrderLines, 1, "it repeats the order's latest version")
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
    }

    /// A file copied or renamed in the inbox (the same bytes under another name) is read as a
    /// new file, its records kept as its own; the summary says which file it repeats, so that a
    /// night of "new" records that posts nothing is explained.
    func testAFileRepeatingOneReadBeforeUnderAnotherNameIsSaid() throws {
        try ws.run("2026-11-03")
        try FileManager.default.copyItem(at: ws.root.appendingPathComponent("inbox/receipts/r.jsonl"),
                                         to: ws.root.appendingPathComponent("inbox/receipts/r (1).jsonl"))
        try FileManager.default.moveItem(at: ws.root.appendingPathComponent("inbox/orders/o.csv"),
                                         to: ws.root.appendingPathComponent("inbox/orders/o-resent.csv"))
        let night = try ws.run("2026-11-04")
        XCTAssertEqual(night.counts.entriesPosted, 0)
        XCTAssertEqual(night.counts.repeatedOrderLines, 2, "the summary counts the order lines that bring nothing new")
        XCTAssertEqual(night.repeatedFiles.map { "\($0.path) = \($0.earlier) \($0.readOn)" },
                       ["inbox/orders/o-resent.csv = inbox/orders/o.csv 2026-11-03", "inbox/receipts/r (1).jsonl = inbox/receipts/r.jsonl 2026-11-03"])
        // A file whose bytes are new is not listed.
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("8009", purchased: "2026-11-04T10:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-11-05").repeatedFiles.count, 0)
        // Empty or blank files have the same bytes without being copies of one another (two
        // independent empty files were said to repeat each other).
        try ws.write("inbox/orders/e.csv", "")
        try ws.write("inbox/receipts/e1.jsonl", "\n")
        XCTAssertEqual(try ws.run("2026-11-06").repeatedFiles.count, 0)
        try ws.write("inbox/receipts/e2.jsonl", "")
        try ws.write("inbox/signed/e3.jws", "\n")
        let empties = try ws.run("2026-11-07")
        XCTAssertEqual(empties.repeatedFiles.count, 0)
        XCTAssertEqual(empties.counts.rejected, 2, "each an EMPTY_FILE record still")
        // Found by an index on the files' hashes, not a scan of every file ever read for each
        // file of the night (50,000 one-record files took a night 280 s in that lookup).
        let plan = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try $0.rawRows("EXPLAIN QUERY PLAN SELECT min(id) FROM source_file WHERE sha256 = 'x' AND path <> 'y' AND id < 9").map { $0.joined(separator: " ") }
        }
        XCTAssertTrue(plan.contains { $0.contains("USING INDEX source_file_sha256") || $0.contains("USING COVERING INDEX source_file_sha256") }, "\(plan)")
    }

    /// A report file written aside takes what a file created in its folder would: the folder's
    /// group when it is set-group-ID and its default ACL (a share's `chmod g+s`, `setfacl -d`),
    /// exactly as the kernel gives them to a file created there with mode 0666. It took the
    /// workspace's instead (the temp folder's), so finance could not read the night's workbooks.
    func testAReportFileTakesItsFolderGroupAndDefaultACLLikeAFileCreatedThere() throws {
        let folder = ws.root.appendingPathComponent("reports/shared")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let asRoot = getuid() == 0
        let group: gid_t = asRoot ? 4242 : getgid()
        if asRoot { XCTAssertEqual(chown(folder.path, uid_t.max, group), 0) }
        XCTAssertEqual(chmod(folder.path, 0o2770), 0)
        // user::rwx, user:4243:r-x, group::r-x, group:4244:rwx, mask::rwx, other::r-x (version 2).
        var acl: [UInt8] = [2, 0, 0, 0]
        for (tag, perm, id) in [(0x01, 7, UInt32.max), (0x02, 5, 4243), (0x04, 5, UInt32.max), (0x08, 7, 4244), (0x10, 7, UInt32.max), (0x20, 5, UInt32.max)] as [(UInt16, UInt16, UInt32)] {
            acl += [UInt8(tag & 0xFF), UInt8(tag >> 8), UInt8(perm & 0xFF), UInt8(perm >> 8)]
            acl += [UInt8(id & 0xFF), UInt8((id >> 8) & 0xFF), UInt8((id >> 16) & 0xFF), UInt8(id >> 24)]
        }
        guard acl.withUnsafeBytes({ iap_setxattr(folder.path, "system.posix_acl_default", $0.baseAddress, $0.count) }) == 0 else {
            throw XCTSkip("no POSIX ACLs on this filesystem (\(String(cString: strerror(errno))))")
        }
        // The kernel's: a file created in the folder.
        let created = folder.appendingPathComponent("created-here")
        let fd = open(created.path, O_CREAT | O_WRONLY, 0o666)
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let url = folder.appendingPathComponent("book.xlsx")
        try XLSXWriter.write(WorkbookModel(title: "t", subject: "s", company: "", created: Day(iso: "2026-11-03")!, sheets: []),
                             to: url, tempDirectory: ws.workspace.tempURL)
        func described(_ path: String) -> (gid: gid_t, mode: mode_t, acl: [UInt8]) {
            var st = stat()
            XCTAssertEqual(stat(path, &st), 0)
            let size = iap_getxattr(path, "system.posix_acl_access", nil, 0)
            var bytes = [UInt8](repeating: 0, count: max(size, 0))
            if size > 0 { _ = bytes.withUnsafeMutableBytes { iap_getxattr(path, "system.posix_acl_access", $0.baseAddress, size) } }
            return (st.st_gid, st.st_mode & 0o7777, bytes)
        }
        let kernel = described(created.path), written = described(url.path)
        XCTAssertEqual(written.gid, group)
        XCTAssertEqual(written.gid, kernel.gid)
        XCTAssertEqual(written.mode, kernel.mode)
        XCTAssertEqual(written.mode, 0o664, "mask rw- (x taken, as mode 0666 does), others r--, whatever the umask")
        XCTAssertFalse(written.acl.isEmpty)
        XCTAssertEqual(written.acl, kernel.acl, "the named group keeps rwx, limited by the mask")
        // A folder without those settings: the file as the umask makes it, no ACL.
        let plain = ws.root.appendingPathComponent("reports/plain/book.xlsx")
        try XLSXWriter.write(WorkbookModel(title: "t", subject: "s", company: "", created: Day(iso: "2026-11-03")!, sheets: []),
                             to: plain, tempDirectory: ws.workspace.tempURL)
        XCTAssertTrue(described(plain.path).acl.isEmpty)
        XCTAssertEqual(described(plain.path).gid, getgid())
    }
}
