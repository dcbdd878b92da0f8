import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRead
import LedgerTemplates
@testable import LedgerRun
@testable import LedgerStore
@testable import LedgerWrite
import Foundation

/// Environment failures stop the run with a clear message and leave the ledger unchanged.
final class LockAndFailureTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws {
        ws = try TestWorkspace()
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("6001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
    }
    override func tearDown() {
        unblockSets()
        _ = try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: ws.root.path)
        ws.remove()
    }

    /// Runs the first night (2026-10-07); the ledger's path and its bytes after it.
    func firstNight() throws -> (db: URL, before: Data) {
        try ws.run("2026-10-07")
        let db = ws.root.appendingPathComponent("ledger.sqlite")
        return (db, try Data(contentsOf: db))
    }

    func testASecondRunWhileOneHoldsTheLockExitsAtOnce() throws {
        let held = try RunLock(url: ws.workspace.lockURL, command: "report")
        defer { held.release() }
        // It says who holds the lock (a night refused by a `report` said "another iapledger run").
        XCTAssertThrowsError(try ws.run("2026-10-07")) { error in
            XCTAssertTrue("\(error)".contains("another iapledger command is in progress in this workspace, `iapledger report` (pid \(getpid()), since 20"), "\(error)")
        }
        held.release()
        XCTAssertEqual(try ws.run("2026-10-07").counts.entriesPosted, 1, "the lock is free again")
    }

    /// The lock file deleted while a command holds the lock (taken for one a killed run left:
    /// it still names its holder) does not free the lock: the workspace folder is locked too.
    /// It let a second night start beside the first.
    func testTheLockHoldsWhenItsFileIsDeleted() throws {
        let held = try RunLock(url: ws.workspace.lockURL)
        defer { held.release() }
        try FileManager.default.removeItem(at: ws.workspace.lockURL)
        XCTAssertThrowsError(try ws.run("2026-10-07")) { error in
            XCTAssertTrue("\(error)".contains("another iapledger command is in progress in this workspace"), "\(error)")
        }
        XCTAssertThrowsError(try RunLock(url: ws.workspace.lockURL, command: "close")) {
            XCTAssertTrue("\($0)".contains(".iapledger-tmp/ is held: by an iapledger command starting or running, else .iapledger.lock was deleted while one ran, or another program locks that folder)"), "\($0)")
        }
        held.release()
        // The workspace folder locked by the scheduler (`flock -n <workspace> iapledger run`):
        // no matter (the lock on that folder refused every night).
        let folder = open(ws.root.path, O_RDONLY | O_DIRECTORY)
        XCTAssertGreaterThanOrEqual(folder, 0)
        defer { close(folder) }
        XCTAssertEqual(flock(folder, LOCK_EX | LOCK_NB), 0)
        XCTAssertEqual(try ws.run("2026-10-07").counts.entriesPosted, 1, "free once released")
    }

    /// A lock that cannot be made says what to do (an operator's review: `dismiss` on a
    /// read-only mount said only the system's reason).
    func testALockThatCannotBeMadeSaysWhatToDo() throws {
        let folder = ws.root.appendingPathComponent("locked")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let lock = folder.appendingPathComponent(".iapledger.lock")
        XCTAssertThrowsError(try RunLock(url: ws.root.appendingPathComponent("gone/.iapledger.lock"))) {
            XCTAssertTrue("\($0)".hasSuffix("gone/.iapledger.lock: cannot create the run lock: No such file or directory: nothing was read or written; fix it and run again"), "\($0)")
        }
        guard Self.immutable(folder, true) else { throw XCTSkip("chattr +i is not allowed here") }
        defer { _ = Self.immutable(folder, false) }
        XCTAssertThrowsError(try RunLock(url: lock)) {
            XCTAssertTrue("\($0)".contains("cannot create the run lock: Operation not permitted: the workspace folder cannot be written by this user (uid \(getuid())): run the commands that write (run, close, report, dismiss) as the user the nights run as; nothing was read or written"), "\($0)")
        }
    }

    /// Two commands started at once: the one refused may find both locks taken before their
    /// holder has written who it is (an operator's review: a fifth of the refused nights on a
    /// new workspace said the lock file "was deleted while it ran"): it waits a moment for the
    /// line, and without one says who may hold it, a command starting first.
    func testALockTakenButNotYetSignedIsNotSaidDeleted() throws {
        let temp = ws.root.appendingPathComponent(".iapledger-tmp")
        try FileManager.default.createDirectory(at: temp, withIntermediateDirectories: true)
        let folder = open(temp.path, O_RDONLY | O_DIRECTORY)
        let file = open(ws.workspace.lockURL.path, O_RDWR | O_CREAT, 0o644)
        XCTAssertGreaterThanOrEqual(folder, 0)
        XCTAssertGreaterThanOrEqual(file, 0)
        defer { close(folder); close(file) }
        XCTAssertEqual(flock(folder, LOCK_EX | LOCK_NB), 0)
        XCTAssertEqual(flock(file, LOCK_EX | LOCK_NB), 0)
        XCTAssertThrowsError(try RunLock(url: ws.workspace.lockURL, command: "run")) {
            XCTAssertEqual("\($0)", "another iapledger command is in progress in this workspace, another iapledger run, close, report or dismiss (lock \(ws.workspace.root.appendingPathComponent(".iapledger-tmp").path)/ is held: by an iapledger command starting or running, else .iapledger.lock was deleted while one ran, or another program locks that folder); try again when it has finished")
        }
        // Its line written meanwhile (as the holder does just after taking both): named.
        let line = Array("\(getpid()) run 2026-11-28T01:30:00Z\n".utf8)
        XCTAssertEqual(line.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) }, line.count)
        XCTAssertThrowsError(try RunLock(url: ws.workspace.lockURL, command: "run")) {
            XCTAssertTrue("\($0)".contains("`iapledger run` (pid \(getpid()), since 2026-11-28T01:30:00Z) (lock \(ws.workspace.lockURL.path) is held)"), "\($0)")
        }
    }

    /// An older copy of the ledger restored over the latest (its last night before the sets
    /// reports/ holds): refused before anything is read, the ledger as it was (built on, it
    /// numbered its next night as the lost one, wrote other workbooks under dates written,
    /// disowned the genuine ones, exit 0); with the later sets moved aside, the night runs.
    func testALedgerOlderThanTheWorkbooksIsRefused() throws {
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("5101", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        let (db, before) = try firstNight()
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("5102", purchased: "2026-10-09T10:00:00Z")]) + "\n")
        try ws.run("2026-10-10")
        try before.write(to: db)
        XCTAssertThrowsError(try ws.run("2026-10-12")) { error in
            XCTAssertTrue("\(error)".hasSuffix("ledger.sqlite: the ledger's last night is as of 2026-10-07, but reports/ holds the workbooks of 1 later date (2026-10-10) that a later ledger wrote: an older copy of the ledger restored? Nothing was read or written. Put the latest ledger back; to go on from this one (the nights since are lost: their inbox files are read again), move those folders of reports/ aside first"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "nothing written")
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-10-12").path))
        try FileManager.default.moveItem(at: ws.root.appendingPathComponent("reports/2026-10-10"), to: ws.root.appendingPathComponent("reports-aside"))
        XCTAssertEqual(try ws.run("2026-10-12").counts.entriesPosted, 1, "5102, read again")
    }

    /// A damaged ledger file (here its pages overwritten) stops the night saying what to do,
    /// not only SQLite's "database disk image is malformed".
    func testADamagedLedgerSaysWhatToDo() throws {
        let (db, _) = try firstNight()
        var bytes = try Data(contentsOf: db)
        bytes.replaceSubrange(0..<min(4096, bytes.count), with: Data(repeating: 0x5A, count: min(4096, bytes.count)))
        try bytes.write(to: db)
        let run = try Resilience.cli(["run", "--as-of", "2026-10-08", "--no-progress", "--workspace", ws.root.path])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.err.contains("ledger.sqlite: cannot open the ledger database: "), run.err)
        XCTAssertTrue(run.err.contains("the ledger file is damaged (a disk fault, or a copy or restore cut short): restore it from its latest copy and check it with `iapledger verify` (README, \"A damaged ledger\")"), run.err)
    }

    /// Pages damaged past the first (the file opens; a read meets them): the commands that
    /// read say what to do too (an operator's review: they said only SQLite's words).
    func testADamagedPageMetByAReadSaysWhatToDo() throws {
        let (db, _) = try firstNight()
        var bytes = try Data(contentsOf: db)
        XCTAssertGreaterThan(bytes.count, 8 * 4096)
        // The fourth page (a table's), the file opening as before: met by `verify`'s reads.
        bytes.replaceSubrange(3 * 4096..<4 * 4096, with: Data(repeating: 0xFF, count: 4096))
        try bytes.write(to: db)
        // verify asks SQLite to check the file first (PRAGMA quick_check), and says what it
        // finds among its problems, and where its own checks stopped at the damage.
        let verify = try Resilience.cli(["verify", "--workspace", ws.root.path])
        XCTAssertEqual(verify.status, 1)
        XCTAssertTrue(verify.out.contains("SQLite's own check of the ledger file (PRAGMA quick_check) finds it damaged: "), verify.out + verify.err)
        XCTAssertTrue(verify.out.contains("restore it from its latest copy (README, \"A damaged ledger\")"), verify.out)
        XCTAssertFalse(verify.err.contains("cannot open the ledger database"), "met by a read, not on opening: \(verify.err)")
        for command in [["trace", "6001"], ["balance"]] {
            let r = try Resilience.cli(command + ["--workspace", ws.root.path])
            if r.status != 0 {
                XCTAssertTrue(r.err.contains("database disk image is malformed: the ledger file is damaged (a disk fault, or a copy or restore cut short): restore it from its latest copy"), "\(command): \(r.err)")
            }
        }
        // Every page past the first: whatever meets it first says what to do.
        bytes.replaceSubrange(4096..<bytes.count, with: Data(repeating: 0x5A, count: bytes.count - 4096))
        try bytes.write(to: db)
        for command in [["verify"], ["trace", "6001"], ["run", "--as-of", "2026-10-08", "--no-progress"]] {
            let r = try Resilience.cli(command + ["--workspace", ws.root.path])
            XCTAssertEqual(r.status, 1, "\(command)")
            XCTAssertTrue((r.out + r.err).contains("the ledger file is damaged (a disk fault, or a copy or restore cut short): restore it from its latest copy")
                          || (command == ["verify"] && r.out.contains("(PRAGMA quick_check) finds it damaged")), "\(command): \(r.out) \(r.err)")
        }
    }

    /// A NULL put into a NOT NULL column past the constraint (the schema edited, the row written,
    /// the schema put back) is what quick_check names, and verify says it (a review: the filter
    /// of SQLite 3.40's false "NULL value in" lines asked `C IS NULL`, which SQLite takes as
    /// false for a NOT NULL column, and so dropped every such line).
    func testANullPastItsConstraintIsNamedByVerify() throws {
        let (db, _) = try firstNight()
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        let queue = try DatabaseQueue(path: db.path)
        let original = try queue.read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_master WHERE name = 'account'") }!
        func schema(_ sql: String) throws {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA writable_schema = ON")
                try db.execute(sql: "UPDATE sqlite_master SET sql = ? WHERE name = 'account'", arguments: [sql])
                try db.execute(sql: "PRAGMA writable_schema = OFF")
            }
        }
        try schema(original.replacingOccurrences(of: "name TEXT NOT NULL UNIQUE", with: "name TEXT UNIQUE"))
        let loose = try DatabaseQueue(path: db.path)
        try loose.write { try $0.execute(sql: "INSERT INTO account (id, name) VALUES (999, NULL)") }
        try loose.close()
        try schema(original)
        try queue.close()
        let problems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.hasPrefix("SQLite's own check of the ledger file (PRAGMA quick_check) finds it damaged: NULL value in account.name") }, "\(problems)")
    }

    /// A first night refused before it commits (a folder named like an input) leaves no ledger
    /// file behind: it says nothing was read or written (one of empty tables was left).
    func testARefusedFirstNightLeavesNoLedger() throws {
        try FileManager.default.createDirectory(at: ws.root.appendingPathComponent("inbox/receipts/x.json"), withIntermediateDirectories: true)
        XCTAssertThrowsError(try ws.run("2026-10-07"))
        let db = ws.root.appendingPathComponent("ledger.sqlite")
        XCTAssertFalse(FileManager.default.fileExists(atPath: db.path), "no ledger left behind")
        // The next night, the folder gone, makes it.
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("inbox/receipts/x.json"))
        try ws.run("2026-10-07")
        XCTAssertTrue(FileManager.default.fileExists(atPath: db.path))
        // A refused night on a ledger that exists leaves it as it was.
        let before = try Data(contentsOf: db)
        try FileManager.default.createDirectory(at: ws.root.appendingPathComponent("inbox/receipts/y.json"), withIntermediateDirectories: true)
        XCTAssertThrowsError(try ws.run("2026-10-08"))
        XCTAssertEqual(try Data(contentsOf: db), before)
    }

    /// A folder where the config file should be: `init` refuses such a workspace, so the
    /// advice to run it (given for a missing file) is not given.
    func testAFolderInPlaceOfTheConfigIsSaidSo() throws {
        _ = try firstNight()
        let config = ws.root.appendingPathComponent("iapledger.toml")
        try FileManager.default.removeItem(at: config)
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: false)
        let r = try Resilience.cli(["run", "--as-of", "2026-10-08", "--no-progress", "--workspace", ws.root.path])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("iapledger.toml: is a folder, not the workspace's config file: move it aside and put the config back"), r.err)
        XCTAssertFalse(r.err.contains("iapledger init` to create"), r.err)
        // Gone from a workspace: put back, not made anew by `init` (which refuses).
        try FileManager.default.removeItem(at: config)
        let gone = try Resilience.cli(["run", "--as-of", "2026-10-08", "--no-progress", "--workspace", ws.root.path])
        XCTAssertEqual(gone.status, 1)
        XCTAssertTrue(gone.err.contains("iapledger.toml: not found, though ") && gone.err.contains("its config is missing (deleted, or left out of a restore): restore iapledger.toml from its backup"), gone.err)
        XCTAssertFalse(gone.err.contains("iapledger init` to create"), gone.err)
    }

    /// A ledger gone (moved, misspelt in `database`, on a share not mounted) where reports/
    /// holds earlier nights' workbooks: a new ledger would have been started from nothing and
    /// written over the month-end sets. Refused, nothing written; with reports/ moved aside
    /// (new books on purpose), the night runs.
    func testAMissingLedgerBesideEarlierWorkbooksIsRefused() throws {
        let (db, _) = try firstNight()
        let workbook = ws.root.appendingPathComponent("reports/2026-10-07/finance-2026-10-07.xlsx")
        let written = try Data(contentsOf: workbook)
        try FileManager.default.moveItem(at: db, to: ws.root.appendingPathComponent("ledger-moved.sqlite"))
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains("ledger.sqlite: is missing, but reports/ holds the workbooks of 1 date (the last 2026-10-07) that nights wrote: a new ledger would write over them from nothing. Nothing was read or written."), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: db.path), "no ledger started")
        // The commands that read say it is missing, not that none was ever made.
        let balance = try Resilience.cli(["balance", "--workspace", ws.root.path])
        XCTAssertTrue(balance.err.contains("ledger.sqlite: is missing, but reports/ holds the workbooks of nights up to 2026-10-07: restore the ledger"), balance.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-10-08").path))
        XCTAssertEqual(try Data(contentsOf: workbook), written)
        // A ledger named by a link to a file gone is said as such.
        try FileManager.default.createSymbolicLink(atPath: db.path, withDestinationPath: "/nonexistent/ledger.sqlite")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("is a link to /nonexistent/ledger.sqlite, which is missing"), "\($0)") }
        try FileManager.default.removeItem(at: db)
        // An empty file in its place (a copy or restore that failed): no ledger either.
        FileManager.default.createFile(atPath: db.path, contents: Data())
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("ledger.sqlite: is empty (0 bytes: a copy or restore that failed?), but reports/ holds"), "\($0)") }
        XCTAssertEqual(try Data(contentsOf: db).count, 0, "nothing written into it")
        // The same through a link to the empty file.
        let target = ws.root.appendingPathComponent("empty-target.sqlite")
        try FileManager.default.moveItem(at: db, to: target)
        try FileManager.default.createSymbolicLink(atPath: db.path, withDestinationPath: target.path)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("ledger.sqlite: is empty (0 bytes"), "\($0)") }
        XCTAssertEqual(try Data(contentsOf: target).count, 0)
        try FileManager.default.removeItem(at: db)
        try FileManager.default.moveItem(at: target, to: db)
        // The commands that read say so too (they said "no such table: entry"), and close and
        // dismiss, which took it for a new ledger.
        for args in [["balance"], ["verify"], ["findings"], ["trace", "6001"], ["close", "2026-09", "--by", "t"],
                     ["dismiss", "inbox/receipts/r.jsonl", "--reason", "test"]] {
            let r = try Resilience.cli(args + ["--workspace", ws.root.path])
            XCTAssertEqual(r.status, 1, "\(args)")
            XCTAssertTrue(r.err.contains("ledger.sqlite: is empty (0 bytes: a copy or restore that failed?)"), "\(args): \(r.err)")
        }
        try FileManager.default.removeItem(at: db)
        // A folder in its place is said as one.
        try FileManager.default.createDirectory(at: db, withIntermediateDirectories: false)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("ledger.sqlite: is a folder, not a ledger file"), "\($0)") }
        XCTAssertTrue(try Resilience.cli(["balance", "--workspace", ws.root.path]).err.contains("is a folder, not a ledger file"))
        try FileManager.default.removeItem(at: db)
        try FileManager.default.moveItem(at: ws.root.appendingPathComponent("reports"), to: ws.root.appendingPathComponent("reports-before"))
        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 1, "new books, on purpose")
    }

    /// Another workspace's ledger copied in (it registered none of the workbooks in reports/)
    /// was taken as this one's: the night wrote over this workspace's sets from its books.
    func testAnotherWorkspacesLedgerIsRefused() throws {
        let (db, _) = try firstNight()
        let other = try TestWorkspace()
        defer { other.remove() }
        try other.write("inbox/receipts/x.jsonl", Receipt.response([Receipt.item("6101", purchased: "2026-10-04T10:00:00Z")]) + "\n")
        try other.run("2026-10-06")
        let workbook = ws.root.appendingPathComponent("reports/2026-10-07/finance-2026-10-07.xlsx")
        let written = try Data(contentsOf: workbook)
        let backup = ws.root.appendingPathComponent("ledger-backup.sqlite")
        try FileManager.default.copyItem(at: db, to: backup)
        try FileManager.default.removeItem(at: db)
        try FileManager.default.copyItem(at: other.root.appendingPathComponent("ledger.sqlite"), to: db)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains("ledger.sqlite: is not the ledger whose nights wrote reports/ (reports/.iapledger-ledger names another): the ledger of another workspace, or reports/ of another? (Or this ledger's first run or first file, which the name is made from, changed by hand: `iapledger verify` says.) Nothing was read or written."), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: workbook), written)
        XCTAssertEqual(try Data(contentsOf: db), try Data(contentsOf: other.root.appendingPathComponent("ledger.sqlite")), "nothing written into it")
        // A marker that cannot be read (unreadable to this user, or not text) is said, not taken
        // for none: the other ledger wrote over these sets without a word.
        let marker = ws.root.appendingPathComponent("reports/.iapledger-ledger")
        let markerText = try Data(contentsOf: marker)
        try Data([0xFF, 0xFE, 0x00]).write(to: marker)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("reports/.iapledger-ledger: cannot be read (not text)"), "\($0)") }
        XCTAssertEqual(try Data(contentsOf: workbook), written)
        // Empty (a copy or a full disk cut it short): not taken for no marker either.
        try Data().write(to: marker)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("reports/.iapledger-ledger: cannot be read (it is empty: cut short?)"), "\($0)") }
        // `report` checks it as a night does (it wrote over these sets from the other's books).
        try markerText.write(to: marker)
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!)) {
            XCTAssertTrue("\($0)".contains("is not the ledger whose nights wrote reports/"), "\($0)")
        }
        XCTAssertEqual(try Data(contentsOf: workbook), written)
        try FileManager.default.removeItem(at: marker)
        try FileManager.default.createDirectory(at: marker, withIntermediateDirectories: false)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("reports/.iapledger-ledger: cannot be read (a folder, not a file)"), "\($0)") }
        try FileManager.default.removeItem(at: marker)
        try markerText.write(to: marker)
        // This workspace's ledger with the other's reports/ (its own marker in it): refused too.
        try FileManager.default.moveItem(at: ws.root.appendingPathComponent("reports"), to: ws.root.appendingPathComponent("reports-own"))
        try FileManager.default.copyItem(at: other.root.appendingPathComponent("reports"), to: ws.root.appendingPathComponent("reports"))
        try FileManager.default.removeItem(at: db)
        try FileManager.default.copyItem(at: backup, to: db)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("is not the ledger whose nights wrote reports/"), "\($0)") }
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("reports"))
        try FileManager.default.moveItem(at: ws.root.appendingPathComponent("reports-own"), to: ws.root.appendingPathComponent("reports"))
        // A backup of this workspace's own ledger, a night old, is no other's.
        try FileManager.default.removeItem(at: db)
        try FileManager.default.copyItem(at: backup, to: db)
        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 0, "a backup of its own ledger runs")
        // reports/ moved aside: new books from that ledger, on purpose.
        try FileManager.default.removeItem(at: db)
        try FileManager.default.copyItem(at: other.root.appendingPathComponent("ledger.sqlite"), to: db)
        try FileManager.default.moveItem(at: ws.root.appendingPathComponent("reports"), to: ws.root.appendingPathComponent("reports-before"))
        XCTAssertNoThrow(try ws.run("2026-10-08"))
    }

    func testAReadOnlyLedgerFailsCleanlyAndStaysUnchanged() throws {
        let (db, before) = try firstNight()
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: db.path)
        defer { _ = try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: db.path) }
        if access(db.path, W_OK) == 0 { throw XCTSkip("running as a user who can write read-only files (root)") }
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains("ledger.sqlite"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before)
    }

    func testAReadOnlyLedgerOpenedReadOnlyRefusesWrites() throws {
        try ws.run("2026-10-07")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        XCTAssertThrowsError(try ledger.write { w in _ = try w.beginRun(asOf: Day(iso: "2026-10-08")!, toolVersion: "t", startedAt: "now") }) { error in
            XCTAssertTrue("\(error)".contains("ledger.sqlite"), "\(error)")
        }
    }

    /// A ledger whose tables are not the ones the migrations made (here: a column missing, as
    /// in ledgers of development builds before the first schema was settled) is refused with
    /// the migration that failed and what to do, not SQLite's bare "no such column".
    func testALedgerWhoseSchemaCannotBeUpgradedSaysWhichMigrationAndWhatToDo() throws {
        let path = ws.root.appendingPathComponent("old.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try Schema.migrator().migrate(queue, upTo: "v7-refunds-due")
        try queue.write { try $0.execute(sql: "ALTER TABLE entry DROP COLUMN gross_reporting_minor") }
        try queue.close()
        XCTAssertThrowsError(try Ledger(path: path)) { error in
            let message = "\(error)"
            XCTAssertTrue(message.contains("cannot bring the ledger's schema up to date: migration v8"), message)
            XCTAssertTrue(message.contains("no such column"), message)
            XCTAssertTrue(message.contains("(7 of "), message)
            XCTAssertTrue(message.contains("move it aside, and run again"), message)
        }
        let applied = try DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations") }
        XCTAssertEqual(applied.count, 7, "the failed migration left nothing behind")

        // A ledger to upgrade that another process holds locked (for longer than a connection
        // waits) is not called a foreign schema.
        let timeout = Ledger.busyTimeoutSeconds
        Ledger.busyTimeoutSeconds = 0.2
        defer { Ledger.busyTimeoutSeconds = timeout }
        let lockedPath = ws.root.appendingPathComponent("locked.sqlite").path
        let older = try DatabaseQueue(path: lockedPath)
        try Schema.migrator().migrate(older, upTo: "v7-refunds-due")
        try older.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            XCTAssertThrowsError(try Ledger(path: lockedPath)) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains("cannot open the ledger database") && message.contains("locked"), message)
                XCTAssertFalse(message.contains("move it aside"), message)
            }
            try db.execute(sql: "ROLLBACK")
        }
        XCTAssertNoThrow(try Ledger(path: lockedPath), "once free, it is brought up to date")
    }

    func testAnUnreadableInputNamesThePathAndChangesNothing() throws {
        try ws.run("2026-10-07")
        let file = ws.root.appendingPathComponent("inbox/receipts/locked.jsonl")
        try ws.write("inbox/receipts/locked.jsonl", "{}\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: file.path)
        defer { _ = try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path) }
        // What it says, as the night meets it (the night itself below, where the user cannot
        // read the file): by whom it may not be read, and what to do.
        XCTAssertEqual("\(ReadError.unreadableInput(file.path, code: EACCES))",
                       "\(file.path): cannot be read: Permission denied (the night runs as uid \(getuid())): make it readable by that user (chmod, chown, or the folder's default ACL), or move it out of the inbox, and run again")
        if access(file.path, R_OK) == 0 { throw XCTSkip("running as a user who can read unreadable files (root)") }
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("locked.jsonl"), "\($0)") }
    }

    /// Sets or clears the immutable attribute (`chattr +i`): a file or folder that even root
    /// cannot write, so the read-only cases run as root too. Nil when the file system or the
    /// user's capabilities do not allow it.
    static func immutable(_ url: URL, _ on: Bool) -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        p.arguments = [on ? "+i" : "-i", url.path]
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    func testALedgerNobodyMayWriteFailsCleanlyAndStaysUnchanged() throws {
        let (db, before) = try firstNight()
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        guard Self.immutable(db, true) else { throw XCTSkip("chattr +i is not available here") }
        defer { _ = Self.immutable(db, false) }
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains(db.path), "names the ledger: \(error)")
            XCTAssertTrue("\(error)".contains("readonly database"), "\(error)")
            XCTAssertTrue("\(error)".contains("the ledger is as it was"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-10-08").path), "no workbooks for a night that did not commit")
        XCTAssertTrue(Self.immutable(db, false))
        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 1, "once writable, the next night posts what waited")
    }

    /// A disk that fills up while the night writes (a file size limit on the real binary: the
    /// write fails as on a full disk): exit 1, the ledger named and unchanged, no workbooks; the
    /// next run, with room again, gives the ledger of a run that never failed.
    func testAFullDiskStopsTheNightWithTheLedgerUnchanged() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else { throw XCTSkip("prlimit (util-linux) is not installed") }
        let binary = TraceAndCLITests.binary
        guard FileManager.default.fileExists(atPath: binary.path) else { throw XCTSkip("iapledger binary not built at \(binary.path)") }
        let (db, before) = try firstNight()
        let dumpBefore = try Resilience.ledgerDump(ws.root)
        func schema() throws -> [[String]] {
            try DatabaseQueue(path: db.path).read { try Row.fetchAll($0, sql: "SELECT type, name, ifnull(sql, '') FROM sqlite_schema ORDER BY 1, 2").map { [$0[0], $0[1], $0[2]] } }
        }
        let schemaBefore = try schema()
        let items = (0..<400).map { Receipt.item("7\($0)", purchased: "2026-10-06T10:00:00Z") }
        try ws.write("inbox/receipts/big.jsonl", items.map { Receipt.response([$0]) }.joined(separator: "\n") + "\n")
        let twin = Resilience.scratch("full-disk-twin")
        defer { try? FileManager.default.removeItem(at: twin) }
        try Resilience.copy(ws.root, to: twin)

        // Files may not grow past the ledger's size plus 16 KiB; SIGXFSZ ignored, so a write
        // past it fails with EFBIG instead of killing the process.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        p.arguments = ["--fsize=\(before.count + 16_384)", "--", "/bin/sh", "-c", "trap '' XFSZ; exec \"$0\" \"$@\"",
                       binary.path, "run", "--as-of", "2026-10-08", "--workspace", ws.root.path]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 1, message)
        XCTAssertTrue(message.contains(db.path), "names the ledger: \(message)")
        XCTAssertTrue(message.contains("disk may be full"), message)
        // SQLite does not journal what a free page held before the transaction reused it, so
        // a rolled-back night can leave other bytes in pages that hold nothing: the ledger is
        // compared as SQLite reads it, with no journal left behind to roll back.
        XCTAssertFalse(FileManager.default.fileExists(atPath: db.path + "-journal"))
        XCTAssertEqual(try Data(contentsOf: db).count, before.count)
        XCTAssertEqual(try Resilience.ledgerDump(ws.root), dumpBefore, "the ledger is unchanged")
        XCTAssertEqual(try schema(), schemaBefore)
        XCTAssertEqual(try DatabaseQueue(path: db.path).read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }, ["ok"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-10-08").path))

        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 400, "with room again the night completes")
        try NightlyRun(workspace: Workspace(twin), asOf: Day(iso: "2026-10-08")!).run()
        XCTAssertEqual(try Resilience.ledgerDump(ws.root), try Resilience.ledgerDump(twin), "the ledger of a night that never failed")
    }

    /// Workbooks that cannot be written after the ledger committed: the message names the file
    /// and says the ledger is committed; nothing half-written is left under reports/, and the
    /// next run writes the workbooks.
    func testWorkbooksThatCannotBeWrittenAreWrittenByTheNextRun() throws {
        try ws.run("2026-10-07")
        let aside = ws.root.appendingPathComponent(".iapledger-tmp")
        try FileManager.default.createDirectory(at: aside, withIntermediateDirectories: true)
        guard Self.immutable(aside, true) else { throw XCTSkip("chattr +i is not available here") }
        XCTAssertTrue(Self.immutable(aside, false))
        defer { _ = Self.immutable(aside, false) }
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        var night = NightlyRun(workspace: ws.workspace, asOf: Day(iso: "2026-10-08")!)
        night.workspaceArgument = " --workspace /srv/books"
        // Made unwritable once the night has committed (before, the night is refused unread).
        night.committed = { _ in XCTAssertTrue(Self.immutable(aside, true)) }
        XCTAssertThrowsError(try night.run()) { error in
            XCTAssertTrue("\(error)".contains(aside.path), "names the file: \(error)")
            XCTAssertTrue("\(error)".contains("ledger is committed"), "\(error)")
            // The commands to run again name the workspace the command was given.
            XCTAssertTrue("\(error)".contains("`iapledger run --as-of 2026-10-08 --workspace /srv/books` again"), "\(error)")
        }
        let day = ws.root.appendingPathComponent("reports/2026-10-08")
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: day.path)) ?? [], [], "no workbook, whole or half")
        XCTAssertTrue(Self.immutable(aside, false))
        let again = try ws.run("2026-10-08")
        XCTAssertEqual(again.counts.entriesPosted, 0, "the night was committed once")
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: day.path)),
                       ["finance-2026-10-08.xlsx", "sandbox-2026-10-08.xlsx", "reconciliation-2026-10-08.xlsx"])
    }

    /// A folder the workbooks are written into that cannot be written (a read-only mount, its
    /// permissions, the immutable attribute): the night stops before it reads anything, naming
    /// the folder, the ledger as it was; once writable, the night runs as if nothing happened.
    func testAReportsFolderThatCannotBeWrittenStopsTheNightBeforeItReads() throws {
        try ws.run("2026-10-07")
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        let db = ws.root.appendingPathComponent("ledger.sqlite")
        let reports = ws.root.appendingPathComponent("reports")
        let aside = ws.root.appendingPathComponent(".iapledger-tmp")
        try FileManager.default.createDirectory(at: aside, withIntermediateDirectories: true)
        let day = reports.appendingPathComponent("2026-10-08")
        try FileManager.default.createDirectory(at: day, withIntermediateDirectories: true)
        for folder in [reports, day, aside] {
            let before = try Data(contentsOf: db)
            guard Self.immutable(folder, true) else { throw XCTSkip("chattr +i is not available here") }
            defer { _ = Self.immutable(folder, false) }
            XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
                XCTAssertTrue("\(error)".hasPrefix("\(folder.path): cannot be written (Operation not permitted): "), "\(error)")
                XCTAssertTrue("\(error)".contains("nothing was read or written"), "\(error)")
            }
            XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
            XCTAssertTrue(Self.immutable(folder, false))
        }
        // reports/ not there yet: the workspace it is made in is what must be writable.
        try FileManager.default.removeItem(at: reports)
        guard Self.immutable(ws.root, true) else { throw XCTSkip("chattr +i is not available here") }
        defer { _ = Self.immutable(ws.root, false) }
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".hasPrefix("\(ws.root.standardizedFileURL.path): cannot be written"), "\($0)") }
        XCTAssertTrue(Self.immutable(ws.root, false))
        // The month before's folder, while that month is open (its set is written again);
        // once it is closed, an archive made read-only is not written, and the night runs.
        let september = reports.appendingPathComponent("2026-09-30")
        try FileManager.default.createDirectory(at: september, withIntermediateDirectories: true)
        guard Self.immutable(september, true) else { throw XCTSkip("chattr +i is not available here") }
        defer { _ = Self.immutable(september, false) }
        XCTAssertThrowsError(try ws.run("2026-10-08")) {
            XCTAssertTrue("\($0)".hasPrefix("\(september.path): cannot be written (Operation not permitted): the workbooks of 2026-09-30 are written into reports/2026-09-30/ while 2026-09 is open"), "\($0)")
        }
        let close = try Resilience.cli(["close", "2026-09", "--workspace", ws.root.path])
        XCTAssertEqual(close.status, 0, close.err)
        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: day.appendingPathComponent("finance-2026-10-08.xlsx").path))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: september.path), [], "the closed month's folder untouched")
    }

    /// A night whose workbooks fail after its commit says its summary (the result carried by
    /// the error, on one line) and how to get them back; once a later night has run (the
    /// scheduler does not wait), `report --as-of` writes that night's set, with its Run Info.
    /// A partial file a killed copy left beside its final name under reports/ is removed.
    func testANightsWorkbooksLostAfterItsCommitAreWrittenAgainByReportAsOf() throws {
        try ws.run("2026-10-07")
        // A folder put in the place of each workbook of 2026-10-08 after the commit: none can be
        // written there (one there before is refused before the night reads anything).
        blockSet("2026-10-08")
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            guard let failed = error as? WorkbooksNotWritten else { return XCTFail("\(error)") }
            XCTAssertEqual(failed.result.counts.entriesPosted, 1)
            XCTAssertNotNil(failed.result.totals.seal)
            XCTAssertFalse(failed.message.contains("\n"), failed.message)
            XCTAssertTrue(failed.message.contains("iapledger report --as-of 2026-10-08"), failed.message)
            XCTAssertTrue(failed.message.contains("-2026-10-08.xlsx: cannot move the finished file into place: Is a directory"), failed.message)
            XCTAssertFalse(failed.message.contains("NSCocoaErrorDomain"), failed.message)
        }
        unblockSets()
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("reports/2026-10-08"))
        try ws.run("2026-10-09")
        // A process that has ended: its pid is free.
        let dead = Process()
        dead.executableURL = URL(fileURLWithPath: "/bin/true")
        try dead.run()
        dead.waitUntilExit()
        let staleName = "reports/2026-10-09/.finance-2026-10-09.xlsx.\(dead.processIdentifier).partial"
        let stale = ws.root.appendingPathComponent(staleName)
        try ws.write(staleName, "half")
        let files = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-08")!).files
        XCTAssertEqual(files.map(\.url.lastPathComponent), ["finance-2026-10-08.xlsx", "sandbox-2026-10-08.xlsx", "reconciliation-2026-10-08.xlsx"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale.path), "the dead process's partial copy is removed")
        let info = try XCTUnwrap(try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-08/finance-2026-10-08.xlsx"))["Run Info"])
        XCTAssertTrue(info.contains { $0.first == "Run number" && $0.dropFirst().first == "2" }, "that night's run: \(info.prefix(12))")
        // The rules and config it posted by, with their SHA-256 as read.
        let prices = try Data(contentsOf: ws.root.appendingPathComponent("rules/prices.csv"))
        XCTAssertTrue(info.contains { Array($0.prefix(3)) == ["rules/prices.csv", "rules", Hashing.sha256Hex(prices)] }, "\(info)")
        XCTAssertTrue(info.contains { Array($0.prefix(2)) == ["iapledger.toml", "config"] }, "\(info)")
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-10")!)) {
            XCTAssertTrue("\($0)".contains("after the last night (2026-10-09)"), "\($0)")
        }
        // Not beside a night: `report` takes the run's lock.
        let held = try RunLock(url: ws.workspace.lockURL)
        defer { held.release() }
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-08")!)) {
            XCTAssertTrue("\($0)".contains("another iapledger command is in progress"), "\($0)")
        }
    }

    /// A folder put in the place of each workbook of the set of `day` (of the one named, if
    /// any) just before it is renamed there: none of them can be renamed into place, after the
    /// night's commit (a folder there before the night is refused before it reads anything).
    func blockSet(_ day: String, only name: String? = nil) {
        WriteAside.beforeRename = { url in
            guard url.lastPathComponent.hasSuffix("-\(day).xlsx"), name.map({ url.lastPathComponent == $0 }) ?? true else { return }
            try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
    }

    func unblockSets() { WriteAside.beforeRename = nil }

    /// A night whose sets fail part way registers the files it did write whole (they are in
    /// place under reports/): here its Sandbox workbook's name is taken by a folder, and its
    /// finance workbook, written before, is registered as the night's.
    func testWorkbooksWrittenBeforeAFailureAreRegistered() throws {
        try ws.run("2026-10-07")
        blockSet("2026-11-02", only: "sandbox-2026-11-02.xlsx")
        XCTAssertThrowsError(try ws.run("2026-11-02")) { XCTAssertTrue($0 is WorkbooksNotWritten, "\($0)") }
        unblockSets()
        let registered = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try $0.rawRows("SELECT path, run_id FROM report_file WHERE run_id = 2 ORDER BY path") }
        XCTAssertTrue(registered.contains(["reports/2026-11-02/finance-2026-11-02.xlsx", "2"]), "\(registered)")
        XCTAssertFalse(registered.contains { $0[0].hasSuffix("sandbox-2026-11-02.xlsx") }, "\(registered)")

        // The next night (the scheduler's, not a re-run of that day) says which workbooks that
        // night never wrote, and the command that writes them (it said nothing).
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("reports/2026-11-02/sandbox-2026-11-02.xlsx"))
        let next = try ws.run("2026-11-03")
        XCTAssertEqual(next.setsMissing.map(\.day), [Day(iso: "2026-11-02")!])
        // (The reconciliation workbook, written beside them, may or may not have been.)
        XCTAssertEqual(next.setsMissing.first?.paths.first, "reports/2026-11-02/sandbox-2026-11-02.xlsx")
        XCTAssertFalse(next.setsMissing.first?.paths.contains("reports/2026-11-02/finance-2026-11-02.xlsx") ?? true, "the finance workbook, written and registered, is not")
        XCTAssertEqual(next.setsMissing.first?.stale, [])
        XCTAssertEqual(next.setsMissing.first?.command, "iapledger report --as-of 2026-11-02")
        _ = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-11-02")!)
        XCTAssertTrue(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports/2026-11-02/sandbox-2026-11-02.xlsx").path))
        XCTAssertTrue(try ws.run("2026-11-04").setsMissing.isEmpty, "written since: nothing said")
    }

    /// A workbook libxlsxwriter packaged with a part cut short (it stages each sheet in a temp
    /// file and does not check those writes: a full disk gave empty or cut-short parts, exit 0,
    /// registered as the night's) is found before it is put in place: the night fails naming
    /// it, nothing of it is under reports/ or registered, and `report --as-of` writes it whole.
    func testAWorkbookPackagedIncompleteIsNeverPutInPlace() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("F2", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        XLSXWriter.afterPackaging = { path in
            guard (path as NSString).lastPathComponent.hasPrefix("finance-2026-10-07.xlsx") else { return }
            try? XLSXCheckTests.rewrite(URL(fileURLWithPath: path)) { name, data in
                name == "xl/worksheets/sheet3.xml" ? data.prefix(data.count / 2) : data
            }
        }
        defer { XLSXWriter.afterPackaging = nil }
        XCTAssertThrowsError(try ws.run("2026-10-07")) {
            XCTAssertTrue($0 is WorkbooksNotWritten, "\($0)")
            XCTAssertTrue("\($0)".contains("finance-2026-10-07.xlsx"), "\($0)")
            XCTAssertTrue("\($0)".contains("the workbook came out incomplete (its part xl/worksheets/sheet3.xml is cut short: it does not end with </worksheet>): is the disk full? Nothing was put in place"), "\($0)")
        }
        XLSXWriter.afterPackaging = nil
        let finance = ws.root.appendingPathComponent("reports/2026-10-07/finance-2026-10-07.xlsx")
        XCTAssertFalse(FileManager.default.fileExists(atPath: finance.path))
        let registered = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try $0.rawRows("SELECT path FROM report_file WHERE path LIKE '%finance-2026-10-07.xlsx'") }
        XCTAssertEqual(registered, [])
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: ws.root.appendingPathComponent(".iapledger-tmp").path)
            .filter { $0.hasPrefix("finance") }.isEmpty, "the cut workbook is not left in the temp folder")
        _ = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!)
        XCTAssertEqual(try XLSXReader.sheets(finance)["Journal"]?.contains { $0.contains("F2") }, true)
    }

    /// `report`'s note on a file written again counts the nights run since the version before
    /// it: a night whose workbooks all failed (so registered none) ran before a report, not
    /// since it (it was counted at every later report, hiding a layout change as the cause).
    func testAReportCountsNoNightWhoseWorkbooksFailedBeforeIt() throws {
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("F1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-07")
        blockSet("2026-10-08")
        XCTAssertThrowsError(try ws.run("2026-10-08"))
        unblockSets()
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("reports/2026-10-08"))
        Thread.sleep(forTimeInterval: 1.1)   // runs are stamped to the second
        let finance = ws.root.appendingPathComponent("reports/2026-10-07/finance-2026-10-07.xlsx")
        func note() throws -> String? { try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!).files.first { $0.url == finance }?.earlier }
        XCTAssertEqual(try note()?.contains("the ledger changed: 1 night ran since"), true, "the version before is the night of run 1's")
        try TestWorkspace.appendText(ws.root.appendingPathComponent("iapledger.toml"), "\n[reports]\njournal_row_cap = 1\n")
        let afterConfig = try XCTUnwrap(try note())
        XCTAssertTrue(afterConfig.contains("which it replaces: no night ran and no month was closed since"), afterConfig)
    }

    /// `report` writes the workbooks even when it cannot register them in the ledger (here a
    /// writer holds the ledger longer than a connection waits), and says so.
    func testAReportThatCannotRegisterItsFilesWritesThemAndSaysSo() throws {
        try ws.run("2026-10-07")
        let timeout = Ledger.busyTimeoutSeconds
        Ledger.busyTimeoutSeconds = 0.2
        defer { Ledger.busyTimeoutSeconds = timeout }
        let holder = try DatabaseQueue(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        try holder.writeWithoutTransaction { d in
            try d.execute(sql: "BEGIN IMMEDIATE")
            let r = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2026-10-07")!)
            XCTAssertEqual(r.files.count, 3)
            XCTAssertTrue(r.note?.hasPrefix("not registered in the ledger (") == true, "\(r.note ?? "nil")")
            try d.execute(sql: "ROLLBACK")
        }
    }

    /// The wait for another process's lock is bounded in all over a transaction, not per lock:
    /// a night that waited for a reader at a cache spill (and went on) waited as long again at
    /// its commit, 19 minutes for a reader held open where the README says ten. Within a
    /// transaction the waits share the budget; the next transaction has it whole again.
    func testTheWaitForAnotherProcessIsBoundedInAll() throws {
        try ws.run("2026-10-07")
        let timeout = Ledger.busyTimeoutSeconds
        Ledger.busyTimeoutSeconds = 0.6
        defer { Ledger.busyTimeoutSeconds = timeout }
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        let ledger = try Ledger(path: path)
        let holder = try DatabaseQueue(path: path)
        try holder.writeWithoutTransaction { d in
            try d.execute(sql: "BEGIN IMMEDIATE")
            for _ in 0..<2 {
                let started = Date()
                XCTAssertThrowsError(try ledger.write { try $0.db.execute(sql: "CREATE TABLE scratch_wait (x)") })
                XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.5, "each transaction waits its budget")
            }
            try d.execute(sql: "ROLLBACK")
        }
        // Two waits of one transaction share it: the second, the budget spent, gives up at once.
        let budget = BusyBudget(seconds: 0.05)
        var tries = 0
        while budget.retry(after: tries) { tries += 1 }
        XCTAssertGreaterThan(tries, 3)
        XCTAssertFalse(budget.retry(after: 0), "a second wait in the same transaction")
        budget.reset()
        XCTAssertTrue(budget.retry(after: 0), "the next transaction")
    }

    /// Another process reading the ledger (an auditor's `verify`, a sqlite3 shell) when the
    /// night commits is waited for: it failed at once with "database is locked".
    func testANightWaitsForAReaderOfTheLedger() throws {
        try ws.run("2026-10-07")
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        let reader = try DatabaseQueue(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        let reading = expectation(description: "the reader held its transaction")
        let started = DispatchSemaphore(value: 0)
        let released = ManagedAtomicDate()
        DispatchQueue.global().async {
            try? reader.read { db in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM entry")
                started.signal()
                Thread.sleep(forTimeInterval: 3)
                released.set(Date())
            }
            reading.fulfill()
        }
        started.wait()
        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 1)
        let committed = Date()
        wait(for: [reading], timeout: 10)
        // The night's commit came after the reader let go: it waited for it.
        XCTAssertLessThan(try XCTUnwrap(released.get()), committed)
    }

    /// Inputs no user can read (root included): a link to a file that is gone, a folder named
    /// like an input file. Each stops the night naming its path, with the ledger unchanged.
    func testInputsThatCannotBeReadByAnyoneNameThePathAndChangeNothing() throws {
        let (db, before) = try firstNight()
        let gone = ws.root.appendingPathComponent("inbox/receipts/gone.jsonl")
        try FileManager.default.createSymbolicLink(atPath: gone.path, withDestinationPath: "/nonexistent/receipts.jsonl")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains(gone.path), "\($0)") }
        // The command says why as the system does, and that the ledger is as it was.
        let said = try Resilience.cli(["run", "--as-of", "2026-10-08", "--workspace", ws.root.path])
        XCTAssertEqual(said.status, 1)
        // (An operator's review: "No such file or directory" of a file its folder lists sent
        // the reader looking for a file that was there; it is a link, to a target gone.)
        XCTAssertTrue(said.err.contains("gone.jsonl: is a link to /nonexistent/receipts.jsonl, which does not exist (a share not mounted, a file moved?): restore what it points to, or remove the link (nothing was read from it), and run again; nothing of this night was written (the ledger holds what it held before it)"), said.err)
        try FileManager.default.removeItem(at: gone)
        let folder = ws.root.appendingPathComponent("inbox/orders/folder.csv")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains(folder.path), "\($0)") }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
    }

    func testAMissingRulesFileNamesThePathAndChangesNothing() throws {
        let (db, before) = try firstNight()
        try ws.write("inbox/receipts/s.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        let prices = ws.root.appendingPathComponent("rules/prices.csv")
        try FileManager.default.removeItem(at: prices)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains(prices.path), "\(error)")
            XCTAssertTrue("\(error)".contains("prices.csv: is missing: the rules are storefronts.csv, prices.csv, products.csv, fx.csv in "), "\(error)")
            XCTAssertTrue("\(error)".hasSuffix("restore it from a backup and run again (the example `iapledger init` writes holds example prices and rates, not yours)"), "\(error)")
        }
        // A folder in its place is said to be one (it was said "Input/output error").
        try FileManager.default.createDirectory(at: prices, withIntermediateDirectories: true)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".hasSuffix("prices.csv: is a folder, not a file: move it aside, put the rules file there, and run again"), "\(error)")
        }
        try FileManager.default.removeItem(at: prices)
        let said = try Resilience.cli(["run", "--as-of", "2026-10-08", "--workspace", ws.root.path])
        XCTAssertEqual(said.status, 1)
        XCTAssertTrue(said.err.hasSuffix("; nothing of this night was written (the ledger holds what it held before it)\n"), said.err)
        XCTAssertEqual(said.err.components(separatedBy: "\n").filter { !$0.isEmpty }.count, 1, said.err)
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
    }

    /// An input folder earlier nights read from, gone (a share not mounted), is no empty night:
    /// sales waiting for their orders would post at the default storefront. It stops the night,
    /// naming it; so does a link to a folder that is gone. A folder never read from may be absent.
    func testAMissingInputFolderEarlierNightsReadFromStopsTheNight() throws {
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header + "o1,a1,6001,coins.100,1,100,2026-10-05T10:00:01Z,production,USA,,\n")
        let (db, before) = try firstNight()
        let orders = ws.root.appendingPathComponent("inbox/orders")
        try FileManager.default.removeItem(at: orders)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertEqual("\(error)", "\(orders.path): is missing, though earlier nights read files from it (a share not mounted, or the folder moved?): nothing was read or written, since a night that found nothing there would post sales that wait for their orders at the default storefront; restore the folder (empty, if nothing is to be read) and run again")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        try FileManager.default.createSymbolicLink(atPath: orders.path, withDestinationPath: "/nonexistent-share/orders")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(orders.path): is a link to /nonexistent-share/orders, which is missing"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        // An empty folder is an empty night; inbox/signed was never read from, and may be absent.
        try FileManager.default.removeItem(at: orders)
        try FileManager.default.createDirectory(at: orders, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: ws.root.appendingPathComponent("inbox/signed"))
        XCTAssertNoThrow(try ws.run("2026-10-08"))
    }

    /// A ledger a newer iapledger wrote (a migration this version does not know) is refused by
    /// every command, in one line saying so: its new tables looked "created by hand" to `verify`
    /// and to the night's checks, and a night would have written it by an older schema.
    func testALedgerWrittenByANewerVersionIsRefusedSayingSo() throws {
        let (db, _) = try firstNight()
        try DatabaseQueue(path: db.path).write { try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')") }
        let before = try Data(contentsOf: db)
        let expected = "\(db.path): this ledger was written by a newer version of iapledger (its schema has migration v99-from-the-future, which this version, whose newest is \(Schema.newestMigration), does not know): use that version or a later one; nothing was read or written"
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertEqual("\($0)", expected) }
        XCTAssertThrowsError(try ws.workspace.openExistingLedger()) { XCTAssertEqual("\($0)", expected) }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
    }

    /// `reports/` a link to a share not mounted, or a file in its place: the night stops before
    /// it reads or writes anything (it used to commit, then fail on its workbooks with "a file
    /// of that name in the way?"); `report` too. A folder named like an input file is named.
    func testAReportsFolderThatCannotTakeTheWorkbooksStopsTheNightBeforeItWrites() throws {
        let (db, before) = try firstNight()
        try ws.write("inbox/receipts/later.jsonl", Receipt.response([Receipt.item("6101", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        let reports = ws.root.appendingPathComponent("reports")
        try FileManager.default.moveItem(at: reports, to: ws.root.appendingPathComponent("reports-kept"))
        try FileManager.default.createSymbolicLink(atPath: reports.path, withDestinationPath: "/nonexistent-share/reports")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertEqual("\(error)", "\(reports.path): is a link to /nonexistent-share/reports, which is missing (a share not mounted?): nothing was read or written; mount or restore it and run again")
        }
        XCTAssertThrowsError(try PeriodReport.write(workspace: ws.workspace, period: Month(iso: "2026-10")!)) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(reports.path): is a link to /nonexistent-share/reports, which is missing"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        try FileManager.default.removeItem(at: reports)
        try ws.write("reports", "a file where the folder goes")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertEqual("\(error)", "\(reports.path): is not a folder: the workbooks are written into reports/<date>/; nothing was read or written; move it away and run again")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        try FileManager.default.removeItem(at: reports)
        // So is a file in the place of the night's own set folder, or of the month before's
        // (it stopped the night after its commit, its workbooks unwritten).
        for day in ["2026-10-08", "2026-09-30"] {
            try ws.write("reports/\(day)", "a file where the set's folder goes")
            XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
                XCTAssertEqual("\(error)", "\(reports.path)/\(day): is not a folder: the workbooks of \(day) are written into it; nothing was read or written; move it away and run again")
            }
            XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
            try FileManager.default.removeItem(at: reports)
        }
        // A folder at a path of a file of either set, or of an earlier month's set under
        // reports/ (written again when entries dated in it post; it could not be renamed over), and a
        // file in the place of the folder each file is written in first: the same (both
        // committed the night, then failed writing its workbooks).
        for (day, name) in [("2026-10-08", "finance-2026-10-08.xlsx"), ("2026-09-30", "journal-2026-09-30.csv.gz"),
                            ("2026-06-30", "sandbox-2026-06-30.xlsx")] {
            let inTheWay = reports.appendingPathComponent("\(day)/\(name)")
            try FileManager.default.createDirectory(at: inTheWay, withIntermediateDirectories: true)
            XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
                XCTAssertEqual("\(error)", "\(inTheWay.path): is a folder at the path of a file of the set of \(day), which a night may write: it cannot write over a folder; nothing was read or written; move it away and run again")
            }
            XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
            try FileManager.default.removeItem(at: reports)
        }
        let temp = ws.root.appendingPathComponent(".iapledger-tmp")
        try? FileManager.default.removeItem(at: temp)
        try ws.write(".iapledger-tmp", "a file where the temp folder goes")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertEqual("\(error)", "\(temp.path): is not a folder: each workbook is written in it, then renamed into reports/; nothing was read or written; move it away and run again (it is made again)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        try FileManager.default.removeItem(at: temp)
        let folder = ws.root.appendingPathComponent("inbox/receipts/day.jsonl")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertEqual("\(error)", "\(folder.path): is a folder named like an input file: inputs are files, and a folder's files are not read; nothing was read or written; move or rename it and run again")
        }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        // A link to a folder that is there is written through; a missing reports/ is made.
        try FileManager.default.removeItem(at: folder)
        try FileManager.default.createSymbolicLink(atPath: reports.path, withDestinationPath: ws.root.appendingPathComponent("reports-kept").path)
        let night = try ws.run("2026-10-08")
        XCTAssertTrue(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("reports-kept/2026-10-08/finance-2026-10-08.xlsx").path))
        XCTAssertEqual(night.counts.entriesPosted, 1)
    }

    /// A named pipe in the inbox (or a link to a device) would block the night for ever, holding
    /// the lock: it is refused by name before anything is read.
    func testAPipeOrADeviceInTheInboxIsRefusedAtOnce() throws {
        let (db, before) = try firstNight()
        let pipe = ws.root.appendingPathComponent("inbox/receipts/pipe.jsonl")
        XCTAssertEqual(mkfifo(pipe.path, 0o644), 0)
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains(pipe.path) && "\(error)".contains("not a regular file"), "\(error)")
        }
        try FileManager.default.removeItem(at: pipe)
        let device = ws.root.appendingPathComponent("inbox/orders/zero.csv")
        try FileManager.default.createSymbolicLink(atPath: device.path, withDestinationPath: "/dev/zero")
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains(device.path), "\($0)") }
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
    }

    /// An input whose name is not UTF-8 cannot be recorded by its path: the night stops naming
    /// the folder and the name's bytes (Foundation's listing turned it into a name that does
    /// not exist: "No such file or directory"). A file of another extension is left alone.
    func testAnInputNamedInAnotherEncodingIsNamed() throws {
        let (db, before) = try firstNight()
        func create(_ name: [UInt8]) {
            let path = Array(ws.root.appendingPathComponent("inbox/receipts").path.utf8) + [UInt8(ascii: "/")] + name + [0]
            let fd = path.withUnsafeBufferPointer { $0.baseAddress!.withMemoryRebound(to: CChar.self, capacity: path.count) { open($0, O_CREAT | O_WRONLY, 0o644) } }
            XCTAssertGreaterThanOrEqual(fd, 0)
            close(fd)
        }
        create(Array("notes-".utf8) + [0xE9] + Array(".txt".utf8))
        XCTAssertNoThrow(try ws.run("2026-10-08"), "not an input's extension")
        let afterIgnored = try Data(contentsOf: db)
        create(Array("re".utf8) + [0xE7, 0x75] + Array(".jsonl".utf8))
        XCTAssertThrowsError(try ws.run("2026-10-09")) { error in
            XCTAssertTrue("\(error)".contains("inbox/receipts: holds a file whose name is not valid UTF-8 (re\\xE7u.jsonl): rename it"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), afterIgnored, "the ledger is unchanged")
        XCTAssertNotEqual(before, afterIgnored)
    }

    /// A finished workbook copied into place (its folder on another filesystem) that fails
    /// says the system's reason: "cannot copy the finished file into place: The operation could
    /// not be completed. (LedgerWrite.WriteError error 1.)" said nothing of a full disk.
    func testAFailedCopyIntoPlaceSaysTheSystemsReason() throws {
        let own = WriteError(message: "/srv/reports/.finance-2026-11-27.xlsx.7.partial: \(String(cString: strerror(ENOSPC)))")
        XCTAssertEqual(WriteAside.describe(own), "/srv/reports/.finance-2026-11-27.xlsx.7.partial: No space left on device")
        XCTAssertEqual(WriteAside.describe(CocoaError(.fileWriteOutOfSpace)), "No space left on device")
    }

    /// Nights go forward: a run dated before the last one is refused (the same date is a re-run).
    func testARunDatedBeforeTheLastOneIsRefused() throws {
        let (db, before) = try firstNight()
        XCTAssertThrowsError(try ws.run("2026-10-06")) { error in
            XCTAssertTrue("\(error)".contains("before the last run's (2026-10-07)"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), before)
        XCTAssertNoThrow(try ws.run("2026-10-07"), "the same night again")
    }

    /// A changed reporting currency stops the run and the commands that show amounts: the
    /// stored reporting amounts are in the old one, and relabelling them would mix currencies.
    func testAChangedReportingCurrencyStopsTheRun() throws {
        let (db, before) = try firstNight()
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "reporting_currency = \"USD\"", with: "reporting_currency = \"EUR\""))
        XCTAssertThrowsError(try ws.run("2026-10-08")) { error in
            XCTAssertTrue("\(error)".contains("iapledger.toml: reporting_currency is EUR, but the ledger's entries are posted in USD"), "\(error)")
        }
        XCTAssertThrowsError(try ws.workspace.openExistingLedger(), "balance, report, trace, verify")
        XCTAssertEqual(try Data(contentsOf: db), before, "the ledger is unchanged")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        XCTAssertNoThrow(try ws.run("2026-10-08"))
    }

    /// A `database` in a folder that is not there is named as such (SQLite said only that it
    /// cannot open the file, and the advice was to check permissions); nothing is made.
    func testALedgerInAFolderThatIsNotThereIsNamed() throws {
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "order_wait_days = 0", with: "order_wait_days = 0\ndatabase = \"data/ledger.sqlite\""))
        XCTAssertThrowsError(try ws.run("2026-10-07")) {
            XCTAssertTrue("\($0)".contains("ledger.sqlite: cannot be made: its folder \(ws.root.appendingPathComponent("data").path) does not exist (`database` in iapledger.toml"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("data").path))
        try FileManager.default.createDirectory(at: ws.root.appendingPathComponent("data"), withIntermediateDirectories: true)
        XCTAssertNoThrow(try ws.run("2026-10-07"))
    }

    /// A misspelt setting or section stops the run naming it, instead of leaving its setting at
    /// the default (a `[comission]` table would post every sale at the standard rate).
    func testAMisspeltSettingStopsTheRunNamingIt() throws {
        for (text, named) in [("[comission]\nreduced = \"0.15\"\n", "comission: unknown setting"),
                              ("[commission]\nreduce = \"0.15\"\n", "commission.reduce: unknown setting in [commission]"),
                              ("[period]\nclosed_through = \"2026-09\"\n", "period: unknown setting"),
                              ("bundle_id = [\"com.example.coins\"]\n", "bundle_id: unknown setting"),
                              ("[reconciliation]\nscope = [\"subscription\"]\n", "reconciliation.scope: \"subscription\" is not a product type"),
                              ("[reconciliation]\nscopes = []\n", "reconciliation.scopes: unknown setting in [reconciliation]"),
                              ("[commission]\nsmall_business = [ { from = \"2026-08-01\", to = \"2026-09-15\", until = \"2026-12-31\" } ]\n",
                               "commission.small_business.until: unknown setting in [commission.small_business]; the known ones are from, to"),
                              (TestWorkspace.defaultConfig.replacingOccurrences(of: "bundle_ids = [\"com.example.coins\"]", with: "bundle_ids = [\" \"]"), "bundle_ids: must be an array of bundle ids")] {
            XCTAssertThrowsError(try ConfigReader.parse(text)) { error in
                XCTAssertTrue("\(error)".contains("iapledger.toml") && "\(error)".contains(named), "\(error)")
            }
        }
        XCTAssertNoThrow(try ConfigReader.parse(TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n[reports]\njournal_row_cap = 10\n"))
        XCTAssertEqual(try ConfigReader.parse(TestWorkspace.defaultConfig + "\n[reconciliation]\nscope = [\"consumable\", \"auto_renewable\"]\n").reconciliationScope,
                       [.consumable, .autoRenewable])
        XCTAssertEqual(try ConfigReader.parse(TestWorkspace.defaultConfig).reconciliationScope, [.consumable, .nonConsumable], "the default")
        // Without bundle ids every app's receipts would be posted as this app's revenue: a night
        // refuses to run (the commands that only read the ledger do without them).
        _ = try firstNight()
        for config in [TestWorkspace.defaultConfig.replacingOccurrences(of: "bundle_ids = [\"com.example.coins\"]", with: ""),
                       TestWorkspace.defaultConfig.replacingOccurrences(of: "bundle_ids = [\"com.example.coins\"]", with: "bundle_ids = []")] {
            try ws.write("iapledger.toml", config)
            XCTAssertThrowsError(try ws.run("2026-10-08")) {
                XCTAssertTrue("\($0)".contains("iapledger.toml: bundle_ids: must name your app's bundle id"), "\($0)")
            }
            XCTAssertNoThrow(try ws.workspace.openExistingLedger(), "balance, trace, verify")
        }
        XCTAssertNoThrow(try ConfigReader.parse(String(decoding: XCTUnwrap(LedgerTemplates.workspaceFile("iapledger.toml")), as: UTF8.self)),
                         "the shipped example config")
        // A rate of too many digits says so (not "not a rate between 0 and 1").
        XCTAssertThrowsError(try ConfigReader.parse(TestWorkspace.defaultConfig.replacingOccurrences(of: "reduced = \"0.15\"", with: "reduced = \"0.150000000000000000000000000001\""))) {
            XCTAssertTrue("\($0)".contains("commission.reduced: \"0.150000000000000000000000000001\" is not a decimal of digits and one point, with at most 18 decimals"), "\($0)")
        }
        // Written in lower case, it is the storefront in upper case (as orders' are read).
        XCTAssertEqual(try ConfigReader.parse(TestWorkspace.defaultConfig.replacingOccurrences(of: "default_storefront = \"USA\"", with: "default_storefront = \"usa\"")).defaultStorefront, "USA")
        // A default storefront the rules do not know stops the night with one line.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: "default_storefront = \"USA\"", with: "default_storefront = \"ZZZ\""))
        XCTAssertThrowsError(try ws.run("2026-10-08")) {
            XCTAssertTrue("\($0)".contains("iapledger.toml: default_storefront: ZZZ has no row in rules/storefronts.csv"), "\($0)")
        }
    }
}

/// A date set on one thread and read on another.
final class ManagedAtomicDate: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Date?
    func set(_ d: Date) { lock.lock(); value = d; lock.unlock() }
    func get() -> Date? { lock.lock(); defer { lock.unlock() }; return value }
}
