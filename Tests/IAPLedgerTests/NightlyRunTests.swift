import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore

/// The nightly job end to end, on small hand-made workspaces.
final class NightlyRunTests: XCTestCase {
    var ws: TestWorkspace!

    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }

    func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }

    func balance(_ book: Book?) throws -> [TrialBalanceRow] { try ledger().read { try $0.trialBalance(book: book) } }

    func entries(_ sql: String = "SELECT book, transaction_id, kind, date FROM entry ORDER BY id") throws -> [[String]] {
        try ledger().read { r in try r.debugRows(sql) }
    }

    func assertTrialBalanceSumsToZero(file: StaticString = #filePath, line: UInt = #line) throws {
        var sums: [String: Int64] = [:], reporting: [String: Int64] = [:]
        for r in try balance(nil) {
            sums["\(r.book) \(r.currency)", default: 0] += r.balanceMinor
            reporting[r.book, default: 0] += r.reportingBalanceMinor
            XCTAssertEqual(r.debitMinor - r.creditMinor, r.balanceMinor, file: file, line: line)
        }
        XCTAssertTrue(sums.values.allSatisfy { $0 == 0 }, "\(sums)", file: file, line: line)
        XCTAssertTrue(reporting.values.allSatisfy { $0 == 0 }, "\(reporting)", file: file, line: line)
    }

    /// A receipt reporting an already refunded transaction refunded on another day posts no
    /// second refund (one per transaction) and is said: REFUND_AGAIN, as for a signed REFUND;
    /// one reporting the same day changes nothing and says nothing.

    /// A first night run before `bundle_ids` named the app's own: its receipts are rejected as
    /// another app's, and a file read is not read again once the config names it. Each night
    /// then says so and what to do, until the records are settled (a README review: the night
    /// said "nothing new", and the records stayed rejected without a word).
    func testRecordsOfABundleIdTheConfigNamesLaterAreSaidUntilSettled() throws {
        try ws.write("inbox/receipts/first.jsonl", Receipt.response([Receipt.item("3101", purchased: "2026-10-05T10:00:00Z")], bundle: "com.example.coins.ios") + "\n")
        var r = try ws.run("2026-10-06")
        XCTAssertEqual(r.counts.rejected, 1)
        XCTAssertEqual(r.rejectedOfBundleIdsNowNamed.records, 0, "the config does not name it yet")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig.replacingOccurrences(of: #"bundle_ids = ["com.example.coins"]"#,
                                                                                        with: #"bundle_ids = ["com.example.coins", "com.example.coins.ios"]"#))
        let night = try Resilience.cli(["run", "--workspace", ws.root.path, "--as-of", "2026-10-06"])
        XCTAssertEqual(night.status, 0, night.err)
        XCTAssertTrue(night.out.contains("  note: 1 record rejected by earlier nights as of another app (WRONG_BUNDLE_ID) is of com.example.coins.ios, which bundle_ids now names: a file read is not read again, so it stays rejected; put a copy of each file under another name in its inbox folder (read as a new file), then `iapledger dismiss FILE` the original: inbox/receipts/first.jsonl\n"), night.out)
        // Done as said: the copy posts the sale, the original is dismissed, and the note is gone.
        try FileManager.default.copyItem(at: ws.root.appendingPathComponent("inbox/receipts/first.jsonl"), to: ws.root.appendingPathComponent("inbox/receipts/first-again.jsonl"))
        XCTAssertEqual(try Resilience.cli(["dismiss", "inbox/receipts/first.jsonl", "--reason", "read again as first-again.jsonl", "--by", "t", "--workspace", ws.root.path]).status, 0)
        r = try ws.run("2026-10-07")
        XCTAssertEqual(r.counts.entriesPosted, 1)
        XCTAssertEqual(r.rejectedOfBundleIdsNowNamed.records, 0)
    }
    func testAReceiptWithAnotherRefundDateIsSaid() throws {
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-08T10:00:00Z")]) + "\n")
        try ws.run("2026-10-09")
        try ws.write("inbox/receipts/b.jsonl", [
            Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-08T18:00:00Z")]),   // the same day
            Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-12T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-13")
        XCTAssertEqual(try entries("SELECT kind, date FROM entry WHERE transaction_id = '7001' ORDER BY id"), [["sale", "2026-10-05"], ["refund", "2026-10-08"]])
        let again = try ledger().read { try $0.findings(openOnly: true) }.filter { $0.code == "REFUND_AGAIN" }
        XCTAssertEqual(again.count, 1, "\(again)")
        XCTAssertTrue(again.first?.message.contains("b.jsonl:2 reports transaction 7001 refunded on 2026-10-12, but the ledger holds its refund of 2026-10-08 (kept)") == true, "\(again)")
        // The same second refund in the next receipts (apps send every transaction again):
        // said once, not once a receipt.
        try ws.write("inbox/receipts/c.jsonl", Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-12T11:00:00Z")]) + "\n")
        try ws.run("2026-10-14")
        XCTAssertEqual(try entries("SELECT count(*) FROM finding WHERE code = 'REFUND_AGAIN'"), [["1"]])
    }

    /// A subscription the user upgraded from (`is_upgraded`) carries the upgrade as its
    /// cancellation: the refund is posted in full (accounting.md books a cancellation so), and
    /// said once per transaction (UPGRADE_REFUND), since Apple refunds only the unused time.
    /// A cancellation without `is_upgraded` says nothing.
    func testAnUpgradesCancellationIsPostedInFullAndSaid() throws {
        let upgraded = Receipt.item("7201", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-20T10:00:00Z",
                                    expires: "2026-11-05T10:00:00Z", upgraded: true)
        try ws.write("inbox/receipts/a.jsonl", [
            Receipt.response([upgraded, Receipt.item("7202", purchased: "2026-10-06T10:00:00Z", cancelled: "2026-10-21T10:00:00Z"),
                              // A free trial upgraded from: no money moved, nothing to say.
                              Receipt.item("7203", purchased: "2026-10-06T10:00:00Z", cancelled: "2026-10-09T10:00:00Z",
                                           expires: "2026-10-13T10:00:00Z", trial: true, upgraded: true)]),
            Receipt.response([upgraded]),   // listed again by a later receipt: said once
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-22")
        XCTAssertEqual(try entries("SELECT transaction_id, kind, date FROM entry ORDER BY id"),
                       [["7201", "sale", "2026-10-05"], ["7202", "sale", "2026-10-06"], ["7201", "refund", "2026-10-20"], ["7202", "refund", "2026-10-21"]])
        XCTAssertEqual(try entries("SELECT gross_minor FROM entry WHERE transaction_id = '7201' AND kind = 'refund'"),
                       try entries("SELECT gross_minor FROM entry WHERE transaction_id = '7201' AND kind = 'sale'"), "refunded in full")
        let said = try ledger().read { try $0.findings(openOnly: true) }.filter { $0.code == "UPGRADE_REFUND" }
        XCTAssertEqual(said.map(\.transactionId), ["7201"])
        XCTAssertTrue(said.first?.message.contains("a.jsonl:1: transaction 7201 was cancelled on 2026-10-20 because the user upgraded (is_upgraded, isUpgraded in signed data): its refund is posted in full") == true, "\(said)")
        XCTAssertTrue(said.first?.message.contains("its period ran to 2026-11-05, so Apple's refund is about the unused part from 2026-10-20") == true, "\(said)")
        // A later receipt listing it again says nothing more.
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([upgraded]) + "\n")
        try ws.run("2026-10-23")
        XCTAssertEqual(try entries("SELECT count(*) FROM finding WHERE code = 'UPGRADE_REFUND'"), [["1"]])
        XCTAssertTrue(LedgerRun.Dismiss.dismissableFindings.contains("UPGRADE_REFUND"))
        // 7202's refund, known as an upgrade's only from a later receipt: said then.
        try ws.write("inbox/receipts/c.jsonl", Receipt.response([Receipt.item("7202", purchased: "2026-10-06T10:00:00Z", cancelled: "2026-10-21T12:00:00Z", upgraded: true)]) + "\n")
        try ws.run("2026-10-24")
        XCTAssertEqual(try entries("SELECT transaction_id FROM finding WHERE code = 'UPGRADE_REFUND' ORDER BY 1"), [["7201"], ["7202"]])
        try assertTrialBalanceSumsToZero()
    }

    /// A flag that reads as neither true nor false refuses its item, naming it: a trial read as
    /// paid ("yes" taken for false) posted a sale nobody paid for. "1", "TRUE" and 1 read as true.
    func testAFlagThatIsNeitherTrueNorFalseIsSaid() throws {
        func item(_ id: String, trial: String) -> String {
            Receipt.item(id, purchased: "2026-10-05T10:00:00Z").replacingOccurrences(of: "\"is_trial_period\": \"false\"", with: "\"is_trial_period\": \(trial)")
        }
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([item("7301", trial: "\"yes\""), item("7302", trial: "\"1\""),
                                                                 item("7303", trial: "\"TRUE\""), item("7304", trial: "1"), item("7305", trial: "[]"),
                                                                 // Listed twice, read in the second listing only: refused too.
                                                                 item("7306", trial: "false"), item("7306", trial: "\"yes\"")]) + "\n")
        try ws.run("2026-10-07")
        XCTAssertEqual(try entries("SELECT transaction_id, sale_status FROM store_transaction ORDER BY 1"), [["7302", "free"], ["7303", "free"], ["7304", "free"]])
        let refused = try ledger().read { try $0.findings(openOnly: true) }.filter { $0.code == "INVALID_TRANSACTION" }.map(\.message).sorted()
        XCTAssertEqual(refused.count, 3, "\(refused)")
        XCTAssertTrue(refused[2].contains("transaction 7306 has is_trial_period \"yes\""), "\(refused)")
        XCTAssertTrue(refused[0].contains("transaction 7301 has is_trial_period \"yes\": neither true nor false, so whether it was paid for cannot be told"), "\(refused)")
        XCTAssertTrue(refused[1].contains("transaction 7305 has is_trial_period \"[...]\""), "\(refused)")
    }

    /// A file edited in place and then put back to the bytes of a version read before is
    /// skipped (its rows were read then), and said: the summary said only "unchanged".
    func testAFilePutBackToAnEarlierVersionIsSaid() throws {
        func orders(_ units: Int) -> String {
            ReconciliationTests.header + "P1,a1,P1T,coins.100,1,\(units),2026-10-05T10:01:00Z,production,USA,,\n"
        }
        try ws.write("inbox/orders/o1.csv", orders(100))
        try ws.run("2026-10-06")
        try ws.write("inbox/orders/o1.csv", orders(90))
        XCTAssertEqual(try ws.run("2026-10-07").putBackFiles, [])
        try ws.write("inbox/orders/o1.csv", orders(100))
        let r = try ws.run("2026-10-08")
        XCTAssertEqual(r.putBackFiles, ["inbox/orders/o1.csv"])
        XCTAssertEqual(r.filesSkipped, 1)
        XCTAssertEqual(try ws.run("2026-10-09").putBackFiles, ["inbox/orders/o1.csv"], "said every night it stays so")
    }

    func testSalesRefundsAndIdempotentReruns() throws {
        let day1 = [
            Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z"),
                              Receipt.item("1002", product: "coins.550", quantity: 2, purchased: "2026-10-06T10:00:00Z")]),
            // The same transaction again in a later app receipt: one transaction.
            Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z")]),
        ]
        try ws.write("inbox/receipts/2026-10-06.jsonl", day1.joined(separator: "\n") + "\n")
        let r1 = try ws.run("2026-10-07")
        XCTAssertEqual(r1.counts.read, 2)
        XCTAssertEqual(r1.counts.verified, 2)
        XCTAssertEqual(r1.counts.entriesPosted, 2)
        XCTAssertEqual(try entries().map { $0[1] + " " + $0[2] }, ["1001 sale", "1002 sale"])
        // 2 x 5.99 (the price from 2026-10-01) = 1198, commission round(359.4) = 359, proceeds 839.
        let usd = try balance(.production).filter { $0.currency == "USD" }
        XCTAssertEqual(usd.first { $0.account == LedgerAccount.sales }?.balanceMinor, -(99 + 1198))
        XCTAssertEqual(usd.first { $0.account == LedgerAccount.receivable }?.balanceMinor, 69 + 839)
        try assertTrialBalanceSumsToZero()

        // Same night again: nothing new, nothing posted twice.
        let r2 = try ws.run("2026-10-07")
        XCTAssertEqual(r2.filesSkipped, 1)
        XCTAssertEqual(r2.counts.read, 0)
        XCTAssertEqual(r2.counts.entriesPosted, 0)
        XCTAssertEqual(try entries().count, 2)

        // The file grows: only the new line counts; it brings a refund of 1001.
        try ws.append("inbox/receipts/2026-10-06.jsonl",
                      Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-09T08:00:00Z")]) + "\n")
        let r3 = try ws.run("2026-10-10")
        XCTAssertEqual(r3.counts.read, 1)
        XCTAssertEqual(r3.counts.skipped, 2)
        XCTAssertEqual(try entries().map { $0[1] + " " + $0[2] + " " + $0[3] },
                       ["1001 sale 2026-10-05", "1002 sale 2026-10-06", "1001 refund 2026-10-09"])
        let refunds = try balance(.production).first { $0.account == LedgerAccount.refunds }
        XCTAssertEqual(refunds?.balanceMinor, 99)
        try assertTrialBalanceSumsToZero()

        // The refund arriving again (another receipt) posts nothing more.
        try ws.write("inbox/receipts/2026-10-11.json",
                     Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-09T08:00:00Z")]))
        XCTAssertEqual(try ws.run("2026-10-11").counts.entriesPosted, 0)
        XCTAssertEqual(try entries().count, 3)
    }

    /// A record that reports a known transaction differently (another quantity) is kept as a
    /// TRANSACTION_CONFLICT finding, and the refund it reports is not posted from it; a record
    /// that agrees with the first source posts the refund.
    func testAConflictingRecordsRefundIsNotPosted() throws {
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-06")
        try ws.write("inbox/receipts/b.jsonl",
                     Receipt.response([Receipt.item("1001", quantity: 5, purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-07T08:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-10-08").counts.entriesPosted, 0)
        XCTAssertEqual(try entries().map { $0[2] }, ["sale"])
        let conflict = try ledger().read { try $0.findings(openOnly: true) }.filter { $0.code == "TRANSACTION_CONFLICT" }
        XCTAssertEqual(conflict.map(\.message), ["inbox/receipts/b.jsonl:1 reports transaction 1001 differently from its first source (inbox/receipts/a.jsonl:1, read by run 1): quantity 1 vs 5; the first is kept; the refund it reports (cancelled 2026-10-07) is not posted from it, but when a record agreeing with the first source reports it"])
        try ws.write("inbox/receipts/c.jsonl",
                     Receipt.response([Receipt.item("1001", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-07T08:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-10-09").counts.entriesPosted, 1)
        XCTAssertEqual(try entries().map { $0[2] + " " + $0[3] }, ["sale 2026-10-05", "refund 2026-10-07"])
        try assertTrialBalanceSumsToZero()
    }

    /// A file edited after it was read: its changed line is a new record, and the night says
    /// which files read before changed (with their new records); a conflict the edited line
    /// raises says its first source is the same line of the file as it was read.
    func testAFileChangedAfterItWasReadIsSaid() throws {
        let line1 = Receipt.response([Receipt.item("1101", purchased: "2026-10-05T10:00:00Z")])
        let line2 = Receipt.response([Receipt.item("1102", purchased: "2026-10-05T11:00:00Z")])
        try ws.write("inbox/receipts/a.jsonl", line1 + "\n" + line2 + "\n")
        XCTAssertEqual(try ws.run("2026-10-06").changedFiles.count, 0)
        try ws.write("inbox/receipts/a.jsonl", line1 + "\n" + Receipt.response([Receipt.item("1102", quantity: 3, purchased: "2026-10-05T11:00:00Z")]) + "\n")
        let r = try ws.run("2026-10-07")
        XCTAssertEqual(r.changedFiles.map { "\($0.path) \($0.newRecords)" }, ["inbox/receipts/a.jsonl 1"])
        let conflict = try ledger().read { try $0.findings(openOnly: true) }.filter { $0.code == "TRANSACTION_CONFLICT" }
        XCTAssertEqual(conflict.map(\.message), ["inbox/receipts/a.jsonl:2 reports transaction 1102 differently from its first source (the same line of this file as run 1 read it: the file was changed after it was read): quantity 1 vs 3; the first is kept"])
    }

    /// A production purchase under an id a sandbox transaction holds (the ledger holds one
    /// transaction per id) is in no production figure: its TRANSACTION_CONFLICT says so and is
    /// the production book's (on its Run Info; it was the sandbox one's). Test data contradicting
    /// a production transaction is the sandbox book's.
    func testAnEnvironmentConflictIsTheBookOfTheRecordNotTaken() throws {
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("7000", purchased: "2026-10-05T10:00:00Z")], environment: "Sandbox") + "\n"
                     + Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-06")
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("7000", purchased: "2026-10-05T10:00:00Z")]) + "\n"
                     + Receipt.response([Receipt.item("7001", purchased: "2026-10-05T10:00:00Z")], environment: "Sandbox") + "\n")
        try ws.run("2026-10-07")
        let production = try ledger().read { try $0.findingsOpen(on: Day(iso: "2026-10-07")!, book: "production", limit: 10) }.rows
        let sandbox = try ledger().read { try $0.findingsOpen(on: Day(iso: "2026-10-07")!, book: "sandbox", limit: 10) }.rows
        XCTAssertEqual(production.map { "\($0.code) \($0.transactionId ?? "")" }, ["TRANSACTION_CONFLICT 7000"])
        XCTAssertEqual(sandbox.map { "\($0.code) \($0.transactionId ?? "")" }, ["TRANSACTION_CONFLICT 7001"])
        XCTAssertTrue(production[0].message.contains("environment sandbox vs production; the first is kept; so this production purchase is in no production figure (the ledger holds one transaction per id, in the sandbox book): if it is real, book it by hand"), production[0].message)
        XCTAssertTrue(sandbox[0].message.contains("environment production vs sandbox; the first is kept; so this sandbox purchase is in no sandbox figure (the ledger holds one transaction per id, in the production book): a test purchase, nothing to book"), sandbox[0].message)
    }

    func testSandboxStaysOutOfProduction() throws {
        try ws.write("inbox/receipts/a.json", "[" + [
            Receipt.response([Receipt.item("p1", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("s1", product: "coins.550", purchased: "2026-10-05T11:00:00Z")], environment: "Sandbox"),
        ].joined(separator: ",\n") + "]")
        let r = try ws.run("2026-10-07")
        XCTAssertEqual(r.counts.entriesPosted, 2)
        let production = try balance(.production), sandbox = try balance(.sandbox)
        XCTAssertEqual(production.first { $0.account == LedgerAccount.sales }?.balanceMinor, -99)
        XCTAssertEqual(sandbox.first { $0.account == LedgerAccount.sales }?.balanceMinor, -599)
        XCTAssertTrue(production.allSatisfy { $0.book == "production" })
        XCTAssertTrue(sandbox.allSatisfy { $0.book == "sandbox" })
        try assertTrialBalanceSumsToZero()

        // The finance workbook shows the production book only; the sandbox has its own.
        let finance = try XLSXReader.sheets(r.workbooks[0])
        let journal = finance["Journal"]!.dropFirst(4)
        XCTAssertFalse(journal.isEmpty)
        XCTAssertFalse(journal.contains { $0.contains("s1") }, "sandbox purchase in the production journal")
        let sandboxBook = try XLSXReader.sheets(r.workbooks[1])
        XCTAssertTrue(sandboxBook["Journal"]!.contains { $0.contains("s1") })
    }

    /// A list with nothing in it says so (an empty table reads as data missing): the Journal
    /// of a month with no posting, Refunds with none, and the reconciliation's Pending and
    /// Rejected with nothing waiting or refused.
    func testEmptyListsSaySo() throws {
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2001", purchased: "2026-10-03T10:00:00Z")]) + "\n")
        let october = try ws.run("2026-10-04")
        let finance = try XLSXReader.sheets(october.workbooks[0])
        XCTAssertEqual(finance["Refunds"]!.dropFirst(4).map { $0[0] }, ["None: no refund or reversed refund posted through 2026-10-04", "Total"])
        XCTAssertEqual(finance["Journal"]!.dropFirst(4).dropLast(3).count, 3, "the sale's postings (then the three control totals)")
        let recon = try XLSXReader.sheets(october.workbooks[2])
        XCTAssertEqual(recon["Pending"]!.dropFirst(4).map { $0[0] }, ["None waiting: no record waits for verification and no transaction for a rule or its order, as of 2026-10-04"])
        XCTAssertEqual(recon["Rejected"]!.dropFirst(4).map { $0[0] }, ["None open: no record read is rejected and unresolved, as of 2026-10-04"])
        // November, nothing posted yet: its Journal says so; a record refused is listed, not "None".
        try ws.write("inbox/receipts/bad.jsonl", #"{"status": 21003}"# + "\n")
        let november = try ws.run("2026-11-02")
        let journal = try XLSXReader.sheets(november.workbooks[0])["Journal"]!.dropFirst(4).map { $0[0] }
        XCTAssertEqual(journal, ["None: no posting dated 2026-11-01 to 2026-11-02 in this book"])
        XCTAssertEqual(try XLSXReader.sheets(november.workbooks[2])["Rejected"]!.dropFirst(4).map { $0[0] }, ["inbox/receipts/bad.jsonl:1"])
    }

    /// A night run again as of the same date with more data: its Run Info names the runs
    /// before it as of that date, with what each posted and read (their postings are in the
    /// set's figures; only the last run's files were listed).
    func testRunInfoListsTheEarlierRunsOfItsDate() throws {
        try ws.write("inbox/receipts/a.jsonl", Receipt.response([Receipt.item("2101", purchased: "2026-10-03T10:00:00Z")]) + "\n")
        try ws.run("2026-10-04")
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("2102", purchased: "2026-10-03T11:00:00Z")]) + "\n")
        let again = try ws.run("2026-10-04")
        XCTAssertEqual(again.runId, 2)
        let info = try XLSXReader.sheets(again.workbooks[0])["Run Info"]!
        XCTAssertEqual(info.first { $0.first == "Earlier runs as of this date" }?[1], "run 1 (1 entry posted in both books, 1 file read)")
        let files = info.compactMap(\.first).filter { $0.hasPrefix("inbox/") || $0.hasPrefix("Read by run") }
        XCTAssertEqual(files, ["inbox/receipts/b.jsonl", "Read by run 1, as of this date too, before run 2:", "inbox/receipts/a.jsonl"])
        // The program's row says its value is a build ID, under the SHA-256 heading.
        let program = try XCTUnwrap(info.first { $0.first == "iapledger build" })
        XCTAssertEqual(Array(program.prefix(3)), ["iapledger build", "program", "GNU build ID \(try XCTUnwrap(BuildIdentity.current))"])
        // A night of its own date lists none.
        let next = try ws.run("2026-10-05")
        XCTAssertNil(try XLSXReader.sheets(next.workbooks[0])["Run Info"]!.first { $0.first == "Earlier runs as of this date" })
    }

    func testMissingRuleWaitsAndIsPostedByALaterRun() throws {
        // The order names the storefront (DEU); there is no EUR rate for November yet.
        try ws.write("inbox/orders/orders.csv", """
            order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at
            ord-1,acct-1,2001,coins.100,1,100,2026-11-03T10:00:05Z,production,DEU,,

            """)
        try ws.write("inbox/receipts/n.jsonl", Receipt.response([Receipt.item("2001", purchased: "2026-11-03T10:00:00Z")]) + "\n")
        let r1 = try ws.run("2026-11-04")
        XCTAssertEqual(r1.counts.entriesPosted, 0)
        XCTAssertEqual(r1.totals.transactionsPending, 1)
        let open = try ledger().read { try $0.findings(openOnly: true) }
        XCTAssertEqual(open.map(\.code), ["MISSING_RULE"])
        XCTAssertTrue(open[0].message.contains("no FX rate for EUR in 2026-11"), open[0].message)
        let runInfo = try XLSXReader.sheets(r1.workbooks[0])["Run Info"]!
        XCTAssertTrue(runInfo.contains { $0.contains("MISSING_RULE") && $0.contains("2001") })

        // Nothing changed: it still waits, still one finding.
        XCTAssertEqual(try ws.run("2026-11-05").counts.entriesPosted, 0)
        XCTAssertEqual(try ledger().read { try $0.findings(openOnly: false) }.count, 1)

        // The rate arrives: the next run posts it, in DEU (from the order), at November's rate.
        try ws.append("rules/fx.csv", "\n2026-11,EUR,1.20\n")
        let r3 = try ws.run("2026-11-06")
        XCTAssertEqual(r3.counts.entriesPosted, 1)
        XCTAssertEqual(r3.totals.transactionsPending, 0)
        XCTAssertTrue(try ledger().read { try $0.findings(openOnly: true) }.isEmpty)
        let sales = try balance(.production).first { $0.account == LedgerAccount.sales }
        XCTAssertEqual(sales?.currency, "EUR")
        XCTAssertEqual(sales?.balanceMinor, -92)
        XCTAssertEqual(sales?.reportingBalanceMinor, -110) // round(92 * 1.20) = 110.4 -> 110
        XCTAssertEqual(try entries("SELECT date FROM entry").first?.first, "2026-11-03", "posted on its purchase date")
    }

    func testNothingIsLostRejectedRecordsNameFileAndLine() throws {
        try ws.write("inbox/receipts/mixed.jsonl", [
            Receipt.response([Receipt.item("3001", purchased: "2026-10-05T10:00:00Z")]),
            #"{"status": 0, "environment": "Production", "receipt": {"#,                               // truncated
            Receipt.response([Receipt.item("3002", purchased: "2026-10-05T10:00:00Z")], bundle: "com.other.game"),
            #"{"status": 21005, "is-retryable": true, "receipt": {"in_app": [{"transaction_id": "3003"}]}}"#,
            #"{"status": 21003}"#,
            Receipt.response([Receipt.item("3003", purchased: "2026-10-06T10:00:00Z")]),
        ].joined(separator: "\n"))
        try ws.write("inbox/receipts/binary.json", "")
        try Data([0x7B, 0xFF, 0xFE, 0x7D]).write(to: ws.root.appendingPathComponent("inbox/receipts/binary.json"))
        let r = try ws.run("2026-10-07")
        XCTAssertEqual(r.counts.read, 7)
        XCTAssertEqual(r.counts.verified, 2)
        XCTAssertEqual(r.counts.pending, 1)
        XCTAssertEqual(r.counts.rejected, 4)
        let problems = try ledger().read { try $0.recordProblems() }
        let byLine = Dictionary(uniqueKeysWithValues: problems.map { ("\($0.path):\($0.line)", $0) })
        XCTAssertEqual(byLine["inbox/receipts/mixed.jsonl:2"]?.code, "MALFORMED")
        XCTAssertTrue(byLine["inbox/receipts/mixed.jsonl:2"]?.reason.contains("truncated") == true)
        XCTAssertEqual(byLine["inbox/receipts/mixed.jsonl:3"]?.code, "WRONG_BUNDLE_ID")
        XCTAssertEqual(byLine["inbox/receipts/mixed.jsonl:5"]?.code, "STATUS_21003")
        XCTAssertEqual(byLine["inbox/receipts/binary.json:1"]?.code, "INVALID_UTF8")
        XCTAssertTrue(byLine["inbox/receipts/binary.json:1"]?.reason.hasPrefix("the file is not valid UTF-8 text: its first byte that is not is on line 1 (byte offset 1)") == true,
                      byLine["inbox/receipts/binary.json:1"]?.reason ?? "")
        // The place of the first byte that is not UTF-8, by the Unicode standard's table:
        // stray continuation, overlong, surrogate, past U+10FFFF, cut short.
        XCTAssertNil(UTF8Position.firstInvalid(in: Array("a\nb é € 😀\n".utf8)))
        for (bytes, at) in [([0x61, 0x0A, 0x80] as [UInt8], (2, 2)), ([0x0A, 0x0A, 0xC0, 0xAF], (3, 2)), ([0xED, 0xA0, 0x80], (1, 0)),
                            ([0x61, 0xF4, 0x90, 0x80, 0x80], (1, 1)), ([0x61, 0x62, 0xE2, 0x82], (1, 2)), ([0xE0, 0x80, 0x80], (1, 0))] {
            let found = UTF8Position.firstInvalid(in: bytes)
            XCTAssertEqual(found.map { [$0.line, $0.offset] }, [at.0, at.1], "\(bytes)")
        }
        // The retryable record was resolved by the verified record for 3003 that came after it.
        let pending = try XCTUnwrap(byLine["inbox/receipts/mixed.jsonl:4"])
        XCTAssertEqual(pending.outcome, "pending")
        XCTAssertTrue(pending.resolved)
        XCTAssertEqual(r.totals.recordsPending, 0)
        XCTAssertEqual(try entries().map { $0[1] }, ["3001", "3003"])
    }

    /// A pending record leaves the open lists once every transaction it names is verified by
    /// another record, not when the first one is. A rejected record stays open (what it carried
    /// was not applied) even when its transaction is verified.
    func testAPendingRecordIsResolvedWhenAllItNamesIsVerified() throws {
        try ws.write("inbox/receipts/a.jsonl", [
            #"{"status": 21005, "is-retryable": true, "receipt": {"in_app": [{"transaction_id": "6001"}, {"transaction_id": "6002"}]}}"#,
            Receipt.response([Receipt.item("6003", purchased: "2026-10-05T10:00:00Z")], status: 21003),
        ].joined(separator: "\n") + "\n")
        try ws.run("2026-10-06")
        func open() throws -> [String] {
            try ledger().read { try $0.recordProblems() }.filter { !$0.resolved }.map { "\($0.path):\($0.line) \($0.outcome)" }
        }
        XCTAssertEqual(try open(), ["inbox/receipts/a.jsonl:1 pending", "inbox/receipts/a.jsonl:2 rejected"])
        try ws.write("inbox/receipts/b.jsonl", [
            Receipt.response([Receipt.item("6001", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("6003", purchased: "2026-10-05T10:00:00Z")]),
        ].joined(separator: "\n") + "\n")
        let r = try ws.run("2026-10-07")
        XCTAssertEqual(try open(), ["inbox/receipts/a.jsonl:1 pending", "inbox/receipts/a.jsonl:2 rejected"], "6002 is still unverified")
        XCTAssertEqual(r.totals.recordsPending, 1)
        try ws.write("inbox/receipts/c.jsonl", Receipt.response([Receipt.item("6002", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        XCTAssertEqual(try ws.run("2026-10-08").totals.recordsPending, 0)
        XCTAssertEqual(try open(), ["inbox/receipts/a.jsonl:2 rejected"])
    }

    func testRetryablePendingStaysOpenUntilVerified() throws {
        try ws.write("inbox/receipts/a.jsonl", #"{"status": 21100, "is-retryable": true, "receipt": {"in_app": [{"transaction_id": "4001"}]}}"# + "\n")
        XCTAssertEqual(try ws.run("2026-10-07").totals.recordsPending, 1)
        try ws.write("inbox/receipts/b.jsonl", Receipt.response([Receipt.item("4001", purchased: "2026-10-06T10:00:00Z")]) + "\n")
        let r = try ws.run("2026-10-08")
        XCTAssertEqual(r.totals.recordsPending, 0)
        XCTAssertEqual(r.counts.entriesPosted, 1)
        // Trace says the pending record was settled, and by which record (it said "waiting").
        let trace = try XCTUnwrap(try ledger().read { try $0.traceTransaction("4001", asOf: Day(iso: "2026-10-08")) })
        XCTAssertEqual(trace.status, "posted")
        let pending = try XCTUnwrap(trace.sources.first { $0.outcome == "pending" })
        XCTAssertEqual(pending.resolved_on, "2026-10-08")
        XCTAssertEqual(pending.resolution, "verified by inbox/receipts/b.jsonl:1")
        let text = TraceOutput.text(trace)
        XCTAssertTrue(text.contains("    settled by the night of 2026-10-08: verified by inbox/receipts/b.jsonl:1 (no longer open)"), text)
        XCTAssertEqual([r.recordsSettled, r.recordsSettledSameNight], [1, 0], "settled a record of an earlier night")
        // Pending and verified the same night: counted pending among the night's records, and
        // said settled by the same night (the summary's counts disagreed without a word).
        try ws.write("inbox/receipts/c.jsonl", #"{"status": 21100, "is-retryable": true, "receipt": {"in_app": [{"transaction_id": "4002"}]}}"# + "\n"
                     + Receipt.response([Receipt.item("4002", purchased: "2026-10-08T10:00:00Z")]) + "\n")
        let same = try ws.run("2026-10-09")
        XCTAssertEqual(same.counts.pending, 1)
        XCTAssertEqual([same.recordsSettled, same.recordsSettledSameNight], [0, 1])
        XCTAssertEqual(same.totals.recordsPending, 0)
    }

    func testWorkbookTrialBalanceTiesToLedgerAndIsNumeric() throws {
        try ws.write("inbox/orders/o.csv", """
            order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at
            o1,a1,5002,coins.100,1,100,2026-10-05T10:00:01Z,production,JPN,,
            o2,a2,5003,coins.100,1,100,2026-10-05T10:00:01Z,production,KWT,,
            o3,a3,5004,coins.100,1,100,2026-10-05T10:00:01Z,production,DEU,,
            """)
        try ws.write("inbox/receipts/r.jsonl", [
            Receipt.response([Receipt.item("5001", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("5002", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("5003", purchased: "2026-10-05T10:00:00Z")]),
            Receipt.response([Receipt.item("5004", purchased: "2026-10-05T10:00:00Z", cancelled: "2026-10-06T00:00:00Z")]),
        ].joined(separator: "\n"))
        let r = try ws.run("2026-10-07")
        XCTAssertEqual(r.counts.entriesPosted, 5)
        try assertTrialBalanceSumsToZero()
        let sheets = try XLSXReader.sheets(r.workbooks[0])
        XCTAssertEqual(Set(sheets.keys), ["Summary", "Trial Balance", "Journal", "Revenue by Region", "Revenue by Product", "Refunds", "Run Info"])
        let tb = sheets["Trial Balance"]!
        let header = try XCTUnwrap(tb.firstIndex { $0.first == "Book" })
        XCTAssertEqual(tb[header], ["Book", "Account", "Currency", "Debit", "Credit", "Balance", "Balance (USD)"])
        let ledgerRows = try balance(.production)
        // The balances table, down to the blank row above the one by account.
        let body = tb.dropFirst(header + 1).prefix { $0.count > 1 }.filter { !$0[1].hasPrefix("Total") }
        XCTAssertEqual(body.count, ledgerRows.count)
        for row in ledgerRows {
            let line = try XCTUnwrap(body.first { $0[1] == row.account && $0[2] == row.currency }, "\(row)")
            let decimals = Currency.exponent(row.currency)!
            XCTAssertEqual(XLSXReader.minor(line[5], decimals: decimals), row.balanceMinor, "\(row.account) \(row.currency)")
            XCTAssertEqual(XLSXReader.minor(line[6], decimals: 2), row.reportingBalanceMinor)
        }
        let journal = sheets["Journal"]!
        XCTAssertEqual(journal[3].count, 12)
        XCTAssertEqual(journal.dropFirst(4).dropLast(3).count, 15, "one row per posting (then the three control totals)")
        let runInfo = sheets["Run Info"]!
        XCTAssertTrue(runInfo.contains { $0.first == "inbox/receipts/r.jsonl" && $0[2].count == 64 }, "file with its sha256")
        // The Summary's commission line ties to the Trial Balance's commission account: the
        // sales' commission less what came back with the refund of 5004.
        let commission = ledgerRows.filter { $0.account == LedgerAccount.commission }.reduce(Int64(0)) { $0 + $1.reportingBalanceMinor }
        let line = try XCTUnwrap(sheets["Summary"]!.first { $0.first?.hasPrefix("Commission is that of the sales") == true }?.first)
        let returned = try XCTUnwrap(Int64(try entries("SELECT commission_reporting_minor FROM entry WHERE kind = 'refund'").first?.first ?? ""))
        XCTAssertGreaterThan(returned, 0)
        XCTAssertEqual(line, "Commission is that of the sales: \(Currency.format(minor: returned, currency: "USD")) USD of it was returned with refunds, so the Trial Balance's commission account holds \(Currency.format(minor: commission, currency: "USD")) USD.")
    }


    func testBrokenRulesStopTheRunNamingFileAndLine() throws {
        try ws.write("rules/prices.csv", "product_id,storefront,price,effective_from\ncoins.100,USA,abc,2020-01-01\n")
        XCTAssertThrowsError(try ws.run("2026-10-07")) { error in
            XCTAssertTrue("\(error)".contains("prices.csv:2"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: ws.root.appendingPathComponent("ledger.sqlite").path))
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("rules/fx.csv"))
        XCTAssertThrowsError(try ws.run("2026-10-07")) { error in
            XCTAssertTrue("\(error)".contains("fx.csv"), "\(error)")
        }
    }

    /// A month without entries between two with entries is a row of zeros on the Summary (it
    /// was left out: September, then November, as if a row were lost).
    func testTheSummaryListsAMonthWithoutEntriesAsZeros() throws {
        try ws.write("inbox/receipts/r.jsonl", [Receipt.response([Receipt.item("5101", purchased: "2026-09-10T10:00:00Z")]),
                                                Receipt.response([Receipt.item("5102", purchased: "2026-11-02T10:00:00Z")])].joined(separator: "\n") + "\n")
        let r = try ws.run("2026-11-03")
        let summary = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[0])["Summary"])
        let months = summary.drop { $0.first != "Month" }.dropFirst().prefix { $0.first != "Total" }
        XCTAssertEqual(months.map { $0.first ?? "" }, ["2026-09", "2026-10", "2026-11"])
        XCTAssertEqual(Array(months.dropFirst().first?.dropFirst().prefix(3) ?? []), ["0", "0", "0"], "\(months)")
        // The as-of date's month, before any entry is dated in it, too.
        let december = try XCTUnwrap(try XLSXReader.sheets(try ws.run("2026-12-01").workbooks[0])["Summary"])
        XCTAssertEqual(december.drop { $0.first != "Month" }.dropFirst().prefix { $0.first != "Total" }.map { $0.first ?? "" },
                       ["2026-09", "2026-10", "2026-11", "2026-12"])
    }

    func testInitCreatesAWorkspaceThatRuns() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-init-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let created = try Workspace.create(at: dir)
        XCTAssertTrue(try String(contentsOf: created.configURL, encoding: .utf8).contains("reporting_currency"))
        XCTAssertThrowsError(try Workspace.create(at: dir), "a second init must not overwrite")
        let r = try NightlyRun(workspace: created, asOf: Day(iso: "2026-11-21")!).run()
        XCTAssertEqual(r.counts.read, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: r.workbooks[0].path))

        // A folder holding one of its files already: refused before anything is written (it
        // wrote the config and some rules, then stopped, and a second init refused the half-made
        // workspace).
        let partial = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-init-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: partial) }
        try FileManager.default.createDirectory(at: partial.appendingPathComponent("rules"), withIntermediateDirectories: true)
        try Data("mine\n".utf8).write(to: partial.appendingPathComponent("rules/prices.csv"))
        XCTAssertThrowsError(try Workspace.create(at: partial)) {
            XCTAssertEqual("\($0)", "\(partial.path): already holds rules/prices.csv: nothing was written (init replaces no file); move it aside, or make the workspace in another folder")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: partial.path), ["rules"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: partial.appendingPathComponent("rules").path), ["prices.csv"])
        try FileManager.default.removeItem(at: partial.appendingPathComponent("rules/prices.csv"))
        // A file where a folder goes, and a link to nowhere where a file goes: the same; the
        // names as given under a path with `.` and `..` in it.
        try Data("x".utf8).write(to: partial.appendingPathComponent("layouts"))
        try FileManager.default.createSymbolicLink(atPath: partial.appendingPathComponent("rules/fx.csv").path, withDestinationPath: "/nonexistent/fx.csv")
        let roundabout = URL(fileURLWithPath: partial.path + "/./rules/..")
        XCTAssertThrowsError(try Workspace.create(at: roundabout)) {
            XCTAssertTrue("\($0)".hasSuffix(": already holds layouts, rules/fx.csv: nothing was written (init replaces no file); move them aside, or make the workspace in another folder"), "\($0)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: partial.path).sorted(), ["layouts", "rules"])
        try FileManager.default.removeItem(at: partial.appendingPathComponent("layouts"))
        try FileManager.default.removeItem(at: partial.appendingPathComponent("rules/fx.csv"))
        XCTAssertNoThrow(try Workspace.create(at: partial))
    }
}

extension LedgerReader {
    /// Rows of a query as text, for assertions.
    func debugRows(_ sql: String) throws -> [[String]] {
        try rawRows(sql)
    }
}
