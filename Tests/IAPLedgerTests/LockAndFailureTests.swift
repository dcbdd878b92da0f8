import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// Environment failures stop the run with a clear message and leave the ledger unchanged.
final class LockAndFailureTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws {
        ws = try TestWorkspace()
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("6001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
    }
    override func tearDown() {
        _ = try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: ws.root.path)
        ws.remove()
    }

    func testASecondRunWhileOneHoldsTheLockExitsAtOnce() throws {
        let held = try RunLock(url: ws.workspace.lockURL)
        defer { held.release() }
        XCTAssertThrowsError(try ws.run("2026-10-07")) { error in
            XCTAssertTrue("\(error)".contains("another iapledger run is in progress"), "\(error)")
        }
        held.release()
        XCTAssertEqual(try ws.run("2026-10-07").counts.entriesPosted, 1, "the lock is free again")
    }

    func testAReadOnlyLedgerFailsCleanlyAndStaysUnchanged() throws {
        try ws.run("2026-10-07")
        let db = ws.root.appendingPathComponent("ledger.sqlite")
        let before = try Data(contentsOf: db)
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

    func testAnUnreadableInputNamesThePathAndChangesNothing() throws {
        try ws.run("2026-10-07")
        let file = ws.root.appendingPathComponent("inbox/receipts/locked.jsonl")
        try ws.write("inbox/receipts/locked.jsonl", "{}\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: file.path)
        defer { _ = try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path) }
        if access(file.path, R_OK) == 0 { throw XCTSkip("running as a user who can read unreadable files (root)") }
        XCTAssertThrowsError(try ws.run("2026-10-08")) { XCTAssertTrue("\($0)".contains("locked.jsonl"), "\($0)") }
    }
}
