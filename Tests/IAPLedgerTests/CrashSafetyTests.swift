import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// Crash safety (issue 7, must-show 2): a nightly run killed with SIGKILL at any point leaves
/// the ledger as it was before the run or as it is after it, never a half-written file under
/// `reports/`, and the next run gives exactly the ledger and workbooks of an uninterrupted run.
///
/// The killed runs are the built `iapledger` binary with `IAPLEDGER_TEST_KILL_AT=N`
/// (`CrashPoint`): it kills itself with SIGKILL at the Nth point it passes. An uninterrupted
/// run with `IAPLEDGER_TEST_CHECKPOINT_LOG` lists the points; the test kills at up to three of
/// them in every stage, first, middle and last.
final class CrashSafetyTests: ScratchTestCase {
    static let stages = ["start", "read", "verify", "post", "reconcile", "commit", "report", "write", "rename"]
    static let nightOne: String = "2026-10-01", nightTwo: String = "2026-11-03"

    /// A demo workspace (300 transactions, seed 11) whose first night (as of 2026-10-01) has run,
    /// with the files of 2026-10-01 on waiting in the inbox for the second night (2026-11-03).
    /// A small journal cap makes the second night write a journal export too, and October,
    /// still open, is written again as of its last day.
    func baseWorkspace() throws -> URL {
        let base = newScratch("crash-base")
        _ = try DemoWorkspace.create(at: base, transactions: 300, seed: 11, asOf: Day(iso: Self.nightTwo)!)
        try TestWorkspace.appendText(base.appendingPathComponent("iapledger.toml"), "\n[reports]\njournal_row_cap = 10\n")
        let later = base.appendingPathComponent("night2")
        for folder in ["receipts", "orders"] {
            let dir = base.appendingPathComponent("inbox/\(folder)")
            try FileManager.default.createDirectory(at: later.appendingPathComponent(folder), withIntermediateDirectories: true)
            for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
                let dates: [[String]] = XLSXReader.matches(name, #"(\d{4}-\d{2}-\d{2})"#)
                guard let date: String = dates.first?.first, date.compare(Self.nightOne) != .orderedAscending else { continue }
                try FileManager.default.moveItem(at: dir.appendingPathComponent(name), to: later.appendingPathComponent("\(folder)/\(name)"))
            }
        }
        try NightlyRun(workspace: Workspace(base), asOf: Day(iso: Self.nightOne)!).run()
        for folder in ["receipts", "orders"] {
            let dir = later.appendingPathComponent(folder)
            for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
                try FileManager.default.moveItem(at: dir.appendingPathComponent(name), to: base.appendingPathComponent("inbox/\(folder)/\(name)"))
            }
        }
        try FileManager.default.removeItem(at: later)
        return base
    }

    func runArgs(_ ws: URL) -> [String] { ["run", "--as-of", Self.nightTwo, "--workspace", ws.path] }

    /// Points inside a stage that are killed at too: while streaming records, entries and rows,
    /// right after a rename, on each side of the commit.
    static let inner = ["read:orders", "verify:receipts", "post:sales", "post:refunds", "commit:after",
                        "write:rows", "write:csv-rows", "rename:after", "report:previous month", "reconcile:groups"]

    /// The first, middle and last point of every stage, and the middle one of each `inner` kind.
    static func killPoints(_ log: [(n: Int, name: String)]) -> [Int] {
        var chosen = Set<Int>()
        for prefix in stages.map({ $0 + ":" }) + inner {
            let points = log.filter { $0.name.hasPrefix(prefix) }.map(\.n)
            guard !points.isEmpty else { continue }
            chosen.formUnion(prefix.hasSuffix(":") ? [points[0], points[points.count / 2], points[points.count - 1]] : [points[points.count / 2]])
        }
        return chosen.sorted()
    }

    /// SIGTERM (systemd's stop or timeout) in the middle of posting: the run says so on stderr
    /// and ends by the signal, the ledger as before it, and the next run gives the uninterrupted one's.
    func testARunStoppedBySIGTERMSaysSoAndTheNextRunCompletesIt() throws {
        let base = try baseWorkspace()
        let beforeDump = try Resilience.ledgerDump(base)
        let a = newScratch("term-a")
        try Resilience.copy(base, to: a)
        let logURL = newScratch("term-log")
        XCTAssertEqual(try Resilience.cli(runArgs(a), environment: ["IAPLEDGER_TEST_CHECKPOINT_LOG": logURL.path]).status, 0)
        let aDump = try Resilience.ledgerDump(a)
        let posting = try String(contentsOf: logURL, encoding: .utf8).split(separator: "\n")
            .map { $0.split(separator: "\t", maxSplits: 1) }.filter { $0[1].hasPrefix("post:") }.map { Int($0[0])! }
        let n = try XCTUnwrap(posting.dropFirst(posting.count / 2).first)
        let c = newScratch("term-c")
        try Resilience.copy(base, to: c)
        let stopped = try Resilience.cli(runArgs(c), environment: ["IAPLEDGER_TEST_KILL_AT": "\(n)", "IAPLEDGER_TEST_KILL_SIGNAL": "TERM"])
        XCTAssertEqual(stopped.reason, .uncaughtSignal, stopped.err)
        XCTAssertEqual(stopped.status, SIGTERM)
        XCTAssertTrue(stopped.err.hasPrefix("iapledger: stopped by SIGTERM: a night stopped before its commit leaves the ledger as it was"), stopped.err)
        // The commands that only read the ledger work on it at once (they failed on the
        // journal the night left, which a read-only connection cannot roll back).
        let journal = c.appendingPathComponent("ledger.sqlite-journal").path
        XCTAssertGreaterThan((try FileManager.default.attributesOfItem(atPath: journal)[.size] as? Int) ?? 0, 0, "the night left its journal")
        let verified = try Resilience.cli(["verify", "--workspace", c.path])
        XCTAssertEqual(verified.status, 0, verified.err)
        XCTAssertTrue(try Resilience.ledgerDump(c) == beforeDump, "stopped before its commit")
        XCTAssertEqual(try Resilience.cli(runArgs(c)).status, 0)
        XCTAssertTrue(try Resilience.ledgerDump(c) == aDump)
    }

    /// SIGTERM while the workbooks are written, after the commit: the night's summary (its
    /// records, chain head and seal) is in the log already, said at the commit, and the line the
    /// signal leaves says that the ledger holds the night. The summary used to be printed after
    /// the last workbook, so such a night left nothing of it.
    func testARunStoppedAfterItsCommitHasSaidItsSummary() throws {
        let base = try baseWorkspace()
        let a = newScratch("term-after-a")
        try Resilience.copy(base, to: a)
        let logURL = newScratch("term-after-log")
        let whole = try Resilience.cli(runArgs(a), environment: ["IAPLEDGER_TEST_CHECKPOINT_LOG": logURL.path])
        XCTAssertEqual(whole.status, 0)
        let points = try String(contentsOf: logURL, encoding: .utf8).split(separator: "\n")
            .map { $0.split(separator: "\t", maxSplits: 1) }
        let n = try XCTUnwrap(points.first { $0[1].hasPrefix("rename:before") }.map { Int($0[0])! })
        let c = newScratch("term-after-c")
        try Resilience.copy(base, to: c)
        let stopped = try Resilience.cli(runArgs(c), environment: ["IAPLEDGER_TEST_KILL_AT": "\(n)", "IAPLEDGER_TEST_KILL_SIGNAL": "TERM"])
        XCTAssertEqual(stopped.reason, .uncaughtSignal, stopped.err)
        XCTAssertTrue(stopped.err.hasPrefix("iapledger: stopped by SIGTERM after the night's commit (run 2, its summary above): the ledger holds the night"), stopped.err)
        // The command to run again names the workspace it was given (a log is read from elsewhere).
        XCTAssertTrue(stopped.err.contains("run `iapledger run --as-of \(Self.nightTwo) --workspace \(c.standardizedFileURL.path)` again"), stopped.err)
        // The summary as the whole night said it, but the files it had no time to write.
        // (Its seal covers the run's own times, so differs.)
        func lines(_ out: String) -> [Substring] { out.split(separator: "\n").filter { !$0.hasPrefix("  seal: ") } }
        let summary = lines(whole.out).filter { !$0.hasPrefix("  wrote ") && !$0.hasPrefix("  kept ") && !$0.hasPrefix("  report files: ") }
        XCTAssertEqual(lines(stopped.out), summary)
        XCTAssertTrue(stopped.out.contains("  chain head: "))
        XCTAssertEqual(try Resilience.cli(runArgs(c)).status, 0)
        XCTAssertTrue(try Resilience.ledgerDump(c) == Resilience.ledgerDump(a))
    }

    /// A second night as of a day, stopped after its commit, leaves that day's set as the
    /// first night wrote it, without its data: the scheduler's next night names the set (it
    /// named only sets missing) with the command that writes it, and says nothing once written.
    func testADaysSetLeftAsAnEarlierNightOfItsDateWroteItIsSaid() throws {
        let c = try baseWorkspace()
        XCTAssertEqual(try Resilience.cli(runArgs(c)).status, 0)
        try ("order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
             + "late-1,acct-late,,coins.100,1,100,2026-11-03T08:00:00Z,production\n")
            .write(to: c.appendingPathComponent("inbox/orders/late-2026-11-03.csv"), atomically: true, encoding: .utf8)
        let d = newScratch("stale-d")
        try Resilience.copy(c, to: d)
        let logURL = newScratch("stale-log")
        XCTAssertEqual(try Resilience.cli(runArgs(d), environment: ["IAPLEDGER_TEST_CHECKPOINT_LOG": logURL.path]).status, 0)
        let points = try String(contentsOf: logURL, encoding: .utf8).split(separator: "\n").map { $0.split(separator: "\t", maxSplits: 1) }
        let n = try XCTUnwrap(points.first { $0[1] == "commit:after" }.map { Int($0[0])! })
        let stopped = try Resilience.cli(runArgs(c), environment: ["IAPLEDGER_TEST_KILL_AT": "\(n)", "IAPLEDGER_TEST_KILL_SIGNAL": "TERM"])
        XCTAssertTrue(stopped.err.hasPrefix("iapledger: stopped by SIGTERM after the night's commit (run 3"), stopped.err)
        let next = try Resilience.cli(["run", "--as-of", "2026-11-04", "--workspace", c.path])
        XCTAssertEqual(next.status, 0, next.err)
        let day = "reports/\(Self.nightTwo)/"
        XCTAssertTrue(next.out.contains("  not written again by the last night as of \(Self.nightTwo) (run 3, stopped after its commit): "
                                        + "\(day)finance-\(Self.nightTwo).xlsx, \(day)sandbox-\(Self.nightTwo).xlsx, \(day)reconciliation-\(Self.nightTwo).xlsx are an earlier night's of that date, without run 3's data; "
                                        + "`iapledger report --as-of \(Self.nightTwo) --workspace "), next.out)
        XCTAssertFalse(next.out.contains("  not written by the night"), next.out)
        XCTAssertEqual(try Resilience.cli(["report", "--as-of", Self.nightTwo, "--workspace", c.path]).status, 0)
        let after = try Resilience.cli(["run", "--as-of", "2026-11-05", "--workspace", c.path])
        XCTAssertEqual(after.status, 0, after.err)
        XCTAssertFalse(after.out.contains("not written"), after.out + after.err)
    }

    func testKilledRunsLeaveTheLedgerWholeAndTheNextRunMatchesAnUninterruptedOne() throws {
        let base = try baseWorkspace()
        let beforeDump = try Resilience.ledgerDump(base)
        let beforeReports = try Resilience.files(under: base.appendingPathComponent("reports"))
        XCTAssertFalse(beforeDump["entry", default: []].isEmpty)

        // The uninterrupted second night, listing the points it passes.
        let a = newScratch("crash-a")
        try Resilience.copy(base, to: a)
        let logURL = newScratch("crash-log")
        let uninterrupted = try Resilience.cli(runArgs(a), environment: ["IAPLEDGER_TEST_CHECKPOINT_LOG": logURL.path])
        XCTAssertEqual(uninterrupted.status, 0, uninterrupted.err)
        XCTAssertTrue(uninterrupted.out.contains("iapledger run 2 as of \(Self.nightTwo)"), uninterrupted.out)
        let log = try String(contentsOf: logURL, encoding: .utf8).split(separator: "\n").map { line -> (n: Int, name: String) in
            let parts = line.split(separator: "\t", maxSplits: 1)
            return (Int(parts[0])!, String(parts[1]))
        }
        let aDump = try Resilience.ledgerDump(a)
        let aReports = try Resilience.files(under: a.appendingPathComponent("reports"))
        XCTAssertNotEqual(aDump, beforeDump)
        XCTAssertGreaterThan(aDump["entry", default: []].count, beforeDump["entry", default: []].count)
        // The second night wrote its own set, October's again and a journal export.
        for name in ["2026-11-03/finance-2026-11-03.xlsx", "2026-11-03/sandbox-2026-11-03.xlsx",
                     "2026-11-03/reconciliation-2026-11-03.xlsx", "2026-11-03/journal-2026-11-03.csv.gz",
                     "2026-10-31/finance-2026-10-31.xlsx"] {
            XCTAssertNotNil(aReports[name], "uninterrupted run lacks reports/\(name)")
        }
        XCTAssertEqual(try Resilience.files(under: a.appendingPathComponent(".iapledger-tmp")).count, 0)

        let points = Self.killPoints(log)
        let byNumber = Dictionary(log.map { ($0.n, $0.name) }, uniquingKeysWith: { x, _ in x })
        for prefix in Self.stages.map({ $0 + ":" }) + Self.inner {
            XCTAssertTrue(points.contains { byNumber[$0]!.hasPrefix(prefix) }, "no kill point at \(prefix): \(log.map(\.name))")
        }
        XCTAssertGreaterThanOrEqual(points.count, 20, "kill points: \(points.map { byNumber[$0]! })")

        print("crash safety: killing at \(points.count) of \(log.count) points: " + points.map { "\($0) \(byNumber[$0]!)" }.joined(separator: ", "))
        var landedAfterCommit = 0
        for n in points {
            let point = "kill at \(n) (\(byNumber[n]!))"
            let c = newScratch("crash-\(n)")
            try Resilience.copy(base, to: c)
            let killed = try Resilience.cli(runArgs(c), environment: ["IAPLEDGER_TEST_KILL_AT": "\(n)"])
            XCTAssertEqual(killed.reason, .uncaughtSignal, "\(point): \(killed.out) \(killed.err)")
            XCTAssertEqual(killed.status, SIGKILL, point)

            // The ledger is as before the run or as after it, never in between.
            let dump = try Resilience.ledgerDump(c)
            let landed = dump == aDump
            XCTAssertTrue(dump == beforeDump || landed, "\(point): the ledger is neither the before nor the after state")
            if landed { landedAfterCommit += 1 }
            // Nothing half-written under reports/: every file there is a finished one.
            for (path, data) in try Resilience.files(under: c.appendingPathComponent("reports")) {
                XCTAssertFalse(path.contains(".partial") || path.split(separator: "/").last!.hasPrefix("."), "\(point): \(path)")
                XCTAssertTrue(data == aReports[path] || data == beforeReports[path], "\(point): reports/\(path) is not a finished file")
            }

            // The next run completes and gives the uninterrupted run's ledger and workbooks.
            let next = try Resilience.cli(runArgs(c))
            XCTAssertEqual(next.status, 0, "\(point): \(next.err)")
            XCTAssertTrue(next.out.contains(landed ? "nothing new since run 2" : "iapledger run 2 as of"), "\(point): \(next.out)")
            XCTAssertTrue(try Resilience.ledgerDump(c) == aDump, "\(point): the ledger differs from the uninterrupted run's")
            let reports = try Resilience.files(under: c.appendingPathComponent("reports"))
            XCTAssertEqual(Set(reports.keys), Set(aReports.keys), point)
            for (path, data) in aReports where reports[path] != data {
                XCTFail("\(point): reports/\(path) differs from the uninterrupted run's")
            }
            XCTAssertEqual(try Resilience.files(under: c.appendingPathComponent(".iapledger-tmp")).count, 0, "\(point): stale temp files")
            try? FileManager.default.removeItem(at: c)
        }
        // Both sides of the commit were hit.
        XCTAssertGreaterThan(landedAfterCommit, 0)
        XCTAssertLessThan(landedAfterCommit, points.count)
    }
}

extension TestWorkspace {
    static func appendText(_ url: URL, _ text: String) throws {
        let h = try FileHandle(forWritingTo: url)
        h.seekToEndOfFile()
        h.write(Data(text.utf8))
        h.closeFile()
    }
}
