import GRDB
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore
import LedgerVerify

/// Signed transactions and Server Notifications V2 through the nightly run, signed with
/// Apple's published test keys and trusted through `trusted_roots`.
final class SignedIngestTests: XCTestCase {
    var ws: TestWorkspace!
    let signer = try! TestSigner.appleTest()
    let t0: Int64 = 1_700_000_000_000 // 2023-11-14, inside the test certificates' validity

    static func config(trusted: Bool) -> String {
        """
        reporting_currency = "USD"
        bundle_ids = ["com.example"]
        default_storefront = "USA"
        \(trusted ? "trusted_roots = [\"certs/testCA.pem\"]" : "")
        [commission]
        standard = "0.30"
        reduced = "0.15"
        """
    }

    override func setUpWithError() throws {
        ws = try makeWorkspace(trusted: true)
    }

    override func tearDown() { ws.remove() }

    func makeWorkspace(trusted: Bool) throws -> TestWorkspace {
        let w = try TestWorkspace(
            config: Self.config(trusted: trusted),
            storefronts: "storefront,currency,tax_rate,tax_included,effective_from\nUSA,USD,0,false,2020-01-01\nAUS,AUD,0.10,true,2020-01-01\n",
            prices: "product_id,storefront,price,effective_from\ncom.example.product,USA,1.99,2020-01-01\ncom.example.cheap,USA,0.99,2020-01-01\n",
            products: "product_id,type,units\ncom.example.product,consumable,100\ncom.example.cheap,consumable,50\n",
            fx: "month,currency,rate\n2023-11,AUD,0.65\n")
        try w.write("certs/testCA.pem", try TestSigner.appleFixtureText("java/certs/testCA.pem"))
        return w
    }

    func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }
    func rows(_ sql: String) throws -> [[String]] { try ledger().read { try $0.rawRows(sql) } }

    func transaction(_ id: String, price: Int64 = 1990, product: String = "com.example.product", purchase: Int64? = nil,
                     revocation: Int64? = nil, type: String? = nil, percentage: Int64? = nil, offer: Int64? = nil,
                     environment: String = "Sandbox", storefront: String = "USA", currency: String = "USD") throws -> String {
        try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: id, productId: product, purchaseDateMs: purchase ?? t0 - 86_400_000, signedDateMs: t0,
            revocationDateMs: revocation, revocationReason: revocation == nil ? nil : 0, revocationType: type,
            revocationPercentage: percentage, offerType: offer, environment: environment, storefront: storefront,
            priceMilliunits: price, currency: currency))
    }

    func notification(_ type: String, uuid: String = UUID().uuidString.lowercased(), signed: Int64? = nil, transaction: String?) throws -> String {
        let jws = try signer.sign(payload: TestSigner.notificationPayload(
            notificationType: type, notificationUUID: uuid, signedDateMs: signed ?? t0, signedTransactionInfo: transaction))
        return "{\"signedPayload\": \"\(jws)\"}"
    }

    func balanceSumsToZero() throws {
        for r in try rows("SELECT e.book, p.currency, sum(p.amount_minor), sum(p.reporting_amount_minor) FROM posting p JOIN entry e ON e.id = p.entry_id GROUP BY 1, 2") {
            XCTAssertEqual(r[2], "0", "\(r)")
            XCTAssertEqual(r[3], "0", "\(r)")
        }
    }

    /// Orders files `o-<n>.csv` (or `<prefix>-<n>.csv`), one per entry of `rows`, with that
    /// many order lines each (about 60 bytes a line), as read-stage inputs.
    func orderFiles(_ w: TestWorkspace, rows: [Int], prefix: String = "o") throws -> [(URL, String)] {
        try rows.enumerated().map { n, count in
            let path = "inbox/orders/\(prefix)-\(String(format: "%03d", n)).csv"
            try w.write(path, "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
                        + (0..<count).map { "o\(n)-\($0),a,\(n)\($0),com.example.product,1,100,2023-11-13T10:00:00Z,sandbox" }.joined(separator: "\n") + "\n")
            return (w.root.appendingPathComponent(path), "orders")
        }
    }

    /// The read stage's preparing threads on `inputs`, nothing read before.
    func prepare(_ w: TestWorkspace, _ inputs: [(URL, String)], preparers: Int = 2) throws -> PreparedFiles {
        PreparedFiles(inputs: inputs, workspace: Workspace(w.root), verifier: ReceiptVerifier(bundleIds: ["com.example"]),
                      signedVerifier: try SignedDataVerifier(bundleIds: ["com.example"]), alreadyRead: [:], preparers: preparers)
    }

    /// A file listed and then moved or removed before its thread read it (a backend archiving
    /// the inbox while the night runs) is handed over as gone, the files around it as read; a
    /// link whose target is gone is still an error (it stops the night, as documented).
    func testAFileGoneBeforeItIsReadIsHandedAsGone() throws {
        let w = try makeWorkspace(trusted: true)
        defer { w.remove() }
        var inputs = try orderFiles(w, rows: [2, 2, 2])
        try FileManager.default.removeItem(at: inputs[1].0)
        let link = w.root.appendingPathComponent("inbox/orders/link.csv")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: w.root.appendingPathComponent("inbox/orders/nowhere.csv").path)
        inputs.append((link, "orders"))
        let prepared = try prepare(w, inputs)
        defer { prepared.cancel() }
        var said: [String] = []
        while let handed = prepared.next() {
            switch try XCTUnwrap(handed.item) {
            case .success(let file):
                if case .gone = file.body { said.append("gone \(file.input.path)") } else { said.append("read \(file.input.path)") }
            case .failure(let error):
                said.append("error \(error)")
            }
            prepared.stored(handed)
        }
        XCTAssertEqual(said.count, 4)
        XCTAssertEqual(Array(said.prefix(3)), ["read inbox/orders/o-000.csv", "gone inbox/orders/o-001.csv", "read inbox/orders/o-002.csv"])
        XCTAssertTrue(said[3].hasPrefix("error ") && said[3].contains("link.csv"), said[3])

        // The folder itself gone (a share unmounted mid-night) is no empty night: an error.
        try FileManager.default.removeItem(at: w.root.appendingPathComponent("inbox/orders"))
        let folderGone = try prepare(w, [inputs[0], inputs[2]])
        defer { folderGone.cancel() }
        var errors: [String] = []
        while let handed = folderGone.next() {
            if case .failure(let error) = try XCTUnwrap(handed.item) { errors.append("\(error)") }
            folderGone.stored(handed)
        }
        XCTAssertFalse(errors.isEmpty)
        XCTAssertTrue(errors.allSatisfy { $0.contains("inbox/orders: disappeared while the night read it") }, "\(errors)")
    }

    /// `PreparedFiles` itself, with two threads and a writer that takes its time over each
    /// file: the files come in input order, both threads prepare some, big ones (`aheadBytes`
    /// or more) included, and each file is given back to be freed.
    func testTwoThreadsPrepareFilesHandedInInputOrder() throws {
        defer { PreparedFiles.aheadBytes = 8 << 20 }
        PreparedFiles.aheadBytes = 4096
        let w = try makeWorkspace(trusted: true)
        defer { w.remove() }
        // Every tenth file is big: 6,000 bytes, over the 4,096 of aheadBytes.
        let inputs = try orderFiles(w, rows: (0..<120).map { $0 % 10 == 9 ? 100 : 2 })
        let prepared = try prepare(w, inputs)
        defer { prepared.cancel() }
        var paths: [String] = [], byThread: [Int: Int] = [:]
        while let handed = prepared.next() {
            let file = try XCTUnwrap(handed.item).get()
            paths.append(file.input.path)
            byThread[handed.preparer, default: 0] += 1
            usleep(300)  // the writer storing it
            prepared.stored(handed)
        }
        XCTAssertEqual(paths, inputs.map { Workspace(w.root).relative($0.0) })
        XCTAssertEqual(byThread.keys.sorted(), [0, 1], "\(byThread)")
    }

    /// Big files (a night's days of receipts) are prepared by both threads at once: the writer
    /// stores a day faster than one thread prepares it. With both big files taken,
    /// the threads but the first take the small files past them (a night's signed files,
    /// after its days of receipts), at most `ahead` of them; files are still handed over in
    /// input order.
    func testTheThreadsPrepareBigFilesOneEachAndSmallFilesPastThem() throws {
        defer { PreparedFiles.aheadBytes = 8 << 20 }
        PreparedFiles.aheadBytes = 4096
        let w = try makeWorkspace(trusted: true)
        defer { w.remove() }
        // Two big files (6,000 bytes, over the 4,096 of aheadBytes), then five small ones.
        let prepared = try prepare(w, try orderFiles(w, rows: [100, 100, 2, 2, 2, 2, 2]))
        defer { prepared.cancel() }
        // The writer is late: the threads take both big files (no third: two big ones are as
        // many as threads), and the second thread then takes three small files.
        let deadline = Date().addingTimeInterval(20)
        while prepared.filesTaken < 5 && Date() < deadline { usleep(1_000) }
        usleep(20_000)
        XCTAssertEqual(prepared.filesTaken, 5, "no room for a sixth before the writer takes a file")
        var handed: [(path: String, preparer: Int, sequence: Int)] = []
        while let h = prepared.next() {
            handed.append((try XCTUnwrap(h.item).get().input.path, h.preparer, h.sequence))
            prepared.stored(h)
        }
        XCTAssertEqual(handed.map(\.path), (0..<7).map { String(format: "inbox/orders/o-%03d.csv", $0) })
        // (Which thread prepares which big file is the threads' timing: a thread that is done
        // with the first before the other starts may take the second too.)
        XCTAssertEqual(Set(handed[0...1].map(\.sequence)), [0, 1], "both big files taken first, together: \(handed)")
        XCTAssertEqual(Set(handed[2...4].map(\.preparer)), [1], "small files past the big ones: the second thread's, \(handed)")
        XCTAssertEqual(handed[2...4].map(\.sequence), [2, 3, 4], "\(handed)")
        XCTAssertEqual(handed[5].sequence, 5, "taken once the writer made room: \(handed)")
    }

    /// On Linux (glibc) the preparing threads hand freed memory back after big files: a header
    /// that failed to see glibc would silently trim nothing (the peak of a million-transaction
    /// night 2 rose by 50 MiB when it did).
    func testFreedMemoryIsTrimmedOnLinux() {
        #if os(Linux)
        XCTAssertTrue(PreparedFiles.trimsArenas)
        #endif
    }

    /// `cancel` (a failed run) returns only once the preparing threads have ended, so that none
    /// reads an input file after the run has released its lock: here both are busy with big
    /// files when the writer gives up after the first.
    func testCancelWaitsForThePreparingThreads() throws {
        let w = try makeWorkspace(trusted: true)
        defer { w.remove() }
        let prepared = try prepare(w, try orderFiles(w, rows: Array(repeating: 40_000, count: 4), prefix: "big"))
        let first = try XCTUnwrap(prepared.next())
        XCTAssertEqual(try XCTUnwrap(first.item).get().input.path, "inbox/orders/big-000.csv")
        XCTAssertGreaterThan(prepared.threadsRunning, 0)
        prepared.cancel()
        XCTAssertEqual(prepared.threadsRunning, 0)
        XCTAssertNil(prepared.next())
    }

    /// The read stage prepares files on several threads and stores them in input order: with
    /// one thread, two or three, each file waiting for room or not, the bigger files left to
    /// the first thread or not, line-based files over a number of records or bytes read by the
    /// writer a part at a time (as a file of a million lines is) or not, the ledger is the same:
    /// files, records (ids, lines, hashes, outcomes, reasons), transactions, entries and the
    /// chain head, on a first night and on the nights after, when files grow (their records
    /// read before skipped) and a line cut short is made whole.
    func testFilesPreparedOnSeveralThreadsAreStoredInInputOrder() throws {
        defer {
            PreparedFiles.preparers = min(2, max(1, ProcessInfo.processInfo.activeProcessorCount))
            PreparedFiles.aheadBytes = 8 << 20
            PreparedFile.linesAboveRecords = 100_000
            PreparedFile.linesAboveBytes = 64 << 20
            PreparedFile.ordersAboveBytes = 16 << 20
            CSVFile.feedBytes = .max
            Ingest.linesPart = 2_000
        }
        // Signatures are randomised: the files are made once and written to each workspace.
        var files: [(String, String)] = []
        for day in 1...6 {
            var lines: [String] = []
            for n in 0..<(day * 3) {
                let id = "\(9000 + day * 100 + n)"
                lines.append(n % 5 == 4 ? "{\"signedPayload\": " : try transaction(id, purchase: t0 - Int64(day) * 3_600_000 - Int64(n)))
            }
            files.append(("inbox/signed/day-\(day).jws", lines.joined(separator: "\n") + "\n"))
            files.append(("inbox/receipts/day-\(day).jsonl", (0..<day).map { n in
                Receipt.response([Receipt.item("r\(day)-\(n)", product: "com.example.product", purchased: "2023-11-1\(day)T10:00:00Z")],
                                 bundle: "com.example")
            }.joined(separator: "\n") + "\n{broken\n"))
            files.append(("inbox/orders/day-\(day).csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
                          + "o\(day),a\(day),\(9000 + day * 100),com.example.product,1,100,2023-11-13T10:00:00Z,sandbox\n"))
        }
        files.append(("inbox/receipts/empty.json", "  \n"))
        // Orders files of every kind of row, refused whole, sent again under another name, and
        // one whose last row is cut short, then made whole.
        let orderTexts = OrderStreamingTests.texts
        for (n, text) in orderTexts.enumerated() { files.append(("inbox/orders/mixed-\(n).csv", text)) }
        files.append(("inbox/orders/sent-again.csv", orderTexts[3]))
        files.append(("inbox/orders/blank.csv", " \r\n\n"))
        // Refused whole, its first 4096 characters kept: more than 64 KiB of them.
        files.append(("inbox/orders/marks.csv", "\u{FEFF}x" + String(repeating: "e" + String(repeating: "\u{301}", count: 10), count: 5_000) + "\n"))
        let cutOrders = OrderStreamingTests.header + "\n" + OrderStreamingTests.row(11) + "\n"
        // Grown on later nights: new signed records and receipts after those read, a last line
        // cut short, then made whole.
        let grownSigned = files[15].1 + (try transaction("9950", purchase: t0 - 7_200_000)) + "\n" + (try transaction("9951", purchase: t0 - 7_100_000)) + "\n"
        let grown = files[16].1 + Receipt.response([Receipt.item("g1", product: "com.example.product", purchased: "2023-11-19T10:00:00Z")], bundle: "com.example") + "\n"
        let cutLine = Receipt.response([Receipt.item("g2", product: "com.example.product", purchased: "2023-11-19T11:00:00Z")], bundle: "com.example")
        var ledgers: [[String]] = []
        // (Orders files over `ordersAbove` bytes read by the writer, fed to the parser `feed` bytes at a time.)
        let configs: [(Int, Int, Int, Int, Int, Int, Int)] = [
            (1, 8 << 20, 100_000, 64 << 20, 2_000, 16 << 20, Int.max), (2, 8 << 20, 100_000, 64 << 20, 2_000, 16 << 20, Int.max),
            (3, 8 << 20, 100_000, 64 << 20, 2_000, 16 << 20, Int.max), (2, 2048, 100_000, 64 << 20, 2_000, 16 << 20, Int.max),
            (2, 1, 100_000, 64 << 20, 2_000, 16 << 20, Int.max), (2, 8 << 20, 2, 64 << 20, 2, 16 << 20, Int.max),
            (1, 8 << 20, 100_000, 100, 1, 16 << 20, Int.max), (2, 8 << 20, 100_000, 64 << 20, 2_000, 0, Int.max),
            (1, 8 << 20, 100_000, 64 << 20, 1, 0, 3), (2, 8 << 20, 100_000, 64 << 20, 2, 100, 7),
        ]
        for (threads, aheadBytes, linesAbove, linesBytes, part, ordersAbove, feed) in configs {
            PreparedFiles.preparers = threads
            PreparedFiles.aheadBytes = aheadBytes
            PreparedFile.linesAboveRecords = linesAbove
            PreparedFile.linesAboveBytes = linesBytes
            PreparedFile.ordersAboveBytes = ordersAbove
            CSVFile.feedBytes = feed
            Ingest.linesPart = part
            let w = try makeWorkspace(trusted: true)
            defer { w.remove() }
            for (path, text) in files { try w.write(path, text) }
            try Data([0xFF, 0xFE, 0x00, 0x7B]).write(to: w.root.appendingPathComponent("inbox/receipts/binary.json"))
            var notUTF8 = Data((OrderStreamingTests.header + "\n" + OrderStreamingTests.row(9) + "\n").utf8)
            notUTF8.append(contentsOf: [0x6F, 0xC3, 0x28, 0x0A])
            try notUTF8.write(to: w.root.appendingPathComponent("inbox/orders/not-utf8.csv"))
            _ = try w.run("2023-11-20")
            try w.write(files[15].0, grownSigned)
            try w.write(files[16].0, grown + String(cutLine.prefix(cutLine.count / 2)))
            let cutRow = OrderStreamingTests.row(12, "tok")
            // (Cut inside its order id: no order names it, the whole line alone settles it.)
            try w.write("inbox/orders/grown.csv", cutOrders + String(cutRow.prefix(2)))
            _ = try w.run("2023-11-21")
            try w.write(files[16].0, grown + cutLine + "\n")
            try w.write("inbox/orders/grown.csv", cutOrders + cutRow + "\n" + OrderStreamingTests.row(13) + "\n")
            _ = try w.run("2023-11-22")
            let ledger = try Ledger(path: w.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
            ledgers.append(try ledger.read { r in
                // (Not whether a file's identity on disk was remembered: only one at least 2 s old
                // is, which a loaded machine's slower nights reach in one configuration and not
                // the next.)
                try r.rawRows("SELECT id, path, sha256, size_bytes, records, new_records FROM source_file ORDER BY id").map { $0.joined(separator: "|") }
                    + r.rawRows("""
                        SELECT id, file_id, line, record_sha256, outcome, ifnull(reason_code, ''), ifnull(reason, ''), ifnull(resolved_run_id, '')
                        FROM source_record ORDER BY id
                        """).map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT transaction_id, first_record_id, sale_status FROM store_transaction ORDER BY 1").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT id, transaction_id, kind, hash FROM entry ORDER BY id").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT chain_head FROM run").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT * FROM order_version ORDER BY id").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT * FROM source_file_header ORDER BY file_id").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT code, transaction_id, ifnull(record_id, ''), message FROM finding ORDER BY id").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT * FROM exception ORDER BY id").map { $0.joined(separator: "|") }
                    + r.rawRows("SELECT id FROM source_record ORDER BY id").map { try r.recordText(Int64($0[0])!) }
            })
        }
        XCTAssertGreaterThan(ledgers[0].filter { $0.contains("|verified|") }.count, 60)
        XCTAssertGreaterThan(ledgers[0].filter { $0.contains("|rejected|") }.count, 10)
        XCTAssertGreaterThan(ledgers[0].filter { $0.contains("|sale|") }.count, 40)
        XCTAssertTrue(ledgers[0].contains { $0.contains("|TRUNCATED|") && !$0.hasSuffix("|") }, "the cut line, resolved by the whole one")
        XCTAssertTrue(ledgers[0].contains { $0.contains("inbox/orders/grown.csv") }, "the orders file cut, then whole")
        XCTAssertTrue(ledgers[0].contains { $0.contains("|INVALID_UTF8|") && $0.contains("line 3") })
        XCTAssertTrue(ledgers[0].contains { $0.contains("|EMPTY_FILE|") })
        XCTAssertGreaterThan(ledgers[0].filter { $0.contains("|BAD_CSV|") || $0.contains("|BAD_ORDER|") }.count, 8)
        for other in ledgers.dropFirst() {
            XCTAssertEqual(ledgers[0].count, other.count)
            if let i = ledgers[0].indices.first(where: { $0 < other.count && ledgers[0][$0] != other[$0] }) {
                XCTFail("first difference, line \(i): one thread \(ledgers[0][i]), several \(other[i])")
            }
        }
    }

    func testSignedTransactionAcceptedWithTestCARejectedUnderAppleRoot() throws {
        try ws.write("inbox/signed/t.jws", try transaction("9001") + "\n")
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.verified, 1)
        XCTAssertEqual(r.counts.entriesPosted, 1)
        XCTAssertEqual(try rows("SELECT book, transaction_id, kind, gross_minor, net_minor, commission_minor FROM entry"),
                       [["sandbox", "9001", "sale", "199", "199", "60"]])
        let note = try rows("SELECT reason FROM source_record").first?.first ?? ""
        XCTAssertTrue(note.contains("verified"), note)

        let plain = try makeWorkspace(trusted: false)
        defer { plain.remove() }
        try plain.write("inbox/signed/t.jws", try transaction("9001") + "\n")
        let r2 = try plain.run("2023-11-20")
        XCTAssertEqual(r2.counts.rejected, 1)
        XCTAssertEqual(r2.counts.entriesPosted, 0)
        let why = try Ledger(path: plain.root.appendingPathComponent("ledger.sqlite").path).read { try $0.recordProblems() }
        XCTAssertEqual(why.first?.code, "UNTRUSTED_CHAIN")
        // A JWS of no kind read here is refused for its chain first (it was refused for what its
        // unverified payload says, UNKNOWN_SIGNED_PAYLOAD, and so not found by the README's
        // steps for records refused for their chain).
        let mock = try TestSigner.appleFixtureText("swift/mock_signed_data/transactionInfo").trimmingCharacters(in: .whitespacesAndNewlines)
        try plain.write("inbox/signed/mock.jws", mock + "\n")
        try plain.run("2023-11-21")
        let codes = try Ledger(path: plain.root.appendingPathComponent("ledger.sqlite").path).read { try $0.recordProblems() }.map(\.code)
        XCTAssertEqual(codes, ["UNTRUSTED_CHAIN", "UNTRUSTED_CHAIN"])
    }

    func testTamperedAndBrokenDataIsRejectedWithItsReason() throws {
        let good = try transaction("9002")
        let parts = good.split(separator: ".").map(String.init)
        // One byte changed in the payload (base64url of the JSON) and one in the signature.
        var payload = Array(parts[1])
        payload[10] = payload[10] == "A" ? "B" : "A"
        var signature = Array(parts[2])
        signature[5] = signature[5] == "A" ? "B" : "A"
        let lines = [
            parts[0] + "." + String(payload) + "." + parts[2],
            parts[0] + "." + parts[1] + "." + String(signature),
            try TestSigner.appleFixtureText("swift/mock_signed_data/missingX5CHeaderClaim").trimmingCharacters(in: .whitespacesAndNewlines),
            try TestSigner.appleFixtureText("swift/mock_signed_data/wrongBundleId").trimmingCharacters(in: .whitespacesAndNewlines),
            try TestSigner.appleFixtureText("swift/xcode/xcode-signed-transaction").trimmingCharacters(in: .whitespacesAndNewlines),
            "not a jws at all",
            // Apple's mock "transactionInfo": a compact JWS whose payload is a bundle id and a date.
            try TestSigner.appleFixtureText("swift/mock_signed_data/transactionInfo").trimmingCharacters(in: .whitespacesAndNewlines),
            // An app transaction signed by Xcode (receiptType Xcode, one certificate): Xcode data,
            // as its transactions are (it was refused for its one certificate).
            try TestSigner.appleFixtureText("swift/xcode/xcode-signed-app-transaction").trimmingCharacters(in: .whitespacesAndNewlines),
        ]
        try ws.write("inbox/signed/bad.txt", lines.joined(separator: "\n") + "\n")
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.rejected, 8)
        XCTAssertEqual(r.counts.entriesPosted, 0)
        let codes = try ledger().read { try $0.recordProblems() }.sorted { $0.line < $1.line }.map(\.code)
        XCTAssertEqual(codes[1], "BAD_SIGNATURE")
        XCTAssertTrue(["BAD_SIGNATURE", "MALFORMED"].contains(codes[0]), codes[0])
        XCTAssertEqual(codes[2], "MISSING_CERTIFICATE_CHAIN")
        XCTAssertEqual(codes[3], "WRONG_BUNDLE_ID")
        XCTAssertEqual(codes[4], "XCODE_ENVIRONMENT")
        XCTAssertEqual(codes[5], "MALFORMED")
        XCTAssertEqual(codes[6], "UNKNOWN_SIGNED_PAYLOAD", "a JWS, but of nothing the tool reads: not called malformed")
        XCTAssertEqual(codes[7], "XCODE_ENVIRONMENT")
    }

    /// A signed app transaction (StoreKit's AppTransaction: the app's own purchase or download)
    /// from the App Store is verified and kept, saying it is no in-app purchase and moves no
    /// money (it was refused as a payload of no known kind); one signed by something else is
    /// refused for its chain, and a LocalTesting one as local testing data.
    func testASignedAppTransactionIsVerifiedAndKeptWithNoMoney() throws {
        let signer = try TestSigner.appleTest()
        func app(_ receiptType: String) throws -> String {
            try signer.sign(payload: ["receiptType": receiptType, "appAppleId": 531412, "bundleId": "com.example",
                                      "applicationVersion": "1.2.3", "originalApplicationVersion": "1.1.2",
                                      "originalPurchaseDate": TestSigner.defaultSignedDateMs - 86_400_000,
                                      "receiptCreationDate": TestSigner.defaultSignedDateMs, "appTransactionId": "71134",
                                      "originalPlatform": "iOS", "signedDate": TestSigner.defaultSignedDateMs])
        }
        try ws.write("inbox/signed/app.jws", [try app("Production"), try app("LocalTesting")].joined(separator: "\n") + "\n")
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.verified, 1)
        XCTAssertEqual(r.counts.rejected, 1)
        XCTAssertEqual(r.counts.entriesPosted, 0)
        XCTAssertEqual(try rows("SELECT line, outcome, reason_code, reason FROM source_record ORDER BY line"), [
            ["1", "verified", "APP_TRANSACTION",
             "signed app transaction (the app's own purchase or download, receiptType Production), verified; not an in-app purchase: no money moves"],
            ["2", "rejected", "LOCAL_TESTING_ENVIRONMENT",
             SignedDataRejection.localTestingEnvironment.description],
        ])

        let plain = try makeWorkspace(trusted: false)
        defer { plain.remove() }
        try plain.write("inbox/signed/app.jws", try app("Production") + "\n")
        try plain.run("2023-11-20")
        let codes = try Ledger(path: plain.root.appendingPathComponent("ledger.sqlite").path).read { try $0.recordProblems() }.map(\.code)
        XCTAssertEqual(codes, ["UNTRUSTED_CHAIN"])
    }

    /// ISO codes a signed record writes in lower case (`aus`, `aud`) are the same codes: the
    /// record is kept as read (so `verify` re-derives it as read), the sale booked in AUS and
    /// AUD, and a record of it in upper case is no conflict. (`aud` was refused as an unknown
    /// currency, and `aus` waited for ever for a rule.)
    func testLowerCaseCodesInASignedRecordAreTheSameCodes() throws {
        try ws.write("inbox/signed/a.jws", try transaction("9070", storefront: "aus", currency: "aud") + "\n")
        try ws.run("2023-11-14")
        XCTAssertEqual(try rows("SELECT storefront, currency FROM store_transaction WHERE transaction_id = '9070'"), [["aus", "aud"]])
        XCTAssertEqual(try rows("SELECT storefront, currency, gross_minor FROM entry WHERE transaction_id = '9070'"), [["AUS", "AUD", "199"]])
        try ws.write("inbox/signed/b.jws", try transaction("9070", storefront: "AUS", currency: "AUD") + "\n")
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'TRANSACTION_CONFLICT'"), [["0"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(Currency.isoUppercased("deu"), "DEU")
    }

    /// Two records of a transaction a few hours apart on the same day say the instants (the
    /// dates alike read "2023-11-13 vs 2023-11-13"); notification bodies one a line in a `.json`
    /// file are rejected saying that a `.json` holds one document and `.jsonl` one a line.
    func testAConflictOfHoursAndDocumentsOneALineInAJSONFileAreSaid() throws {
        try ws.write("inbox/signed/a.jws", try transaction("9060") + "\n")
        try ws.run("2023-11-14")
        try ws.write("inbox/signed/b.jws", try transaction("9060", purchase: t0 - 86_400_000 + 3_600_250) + "\n")
        let body = try notification("ONE_TIME_CHARGE", transaction: try transaction("9061"))
        try ws.write("inbox/signed/c.json", body + "\n" + body + "\n")
        try ws.run("2023-11-15")
        let conflict = try rows("SELECT message FROM finding WHERE code = 'TRANSACTION_CONFLICT'")
        XCTAssertTrue(conflict.first?[0].contains("purchase instant 2023-11-13T22:13:20Z vs 2023-11-13T23:13:20.250Z") == true, "\(conflict)")
        let rejected = try rows("SELECT reason FROM source_record WHERE outcome = 'rejected'")
        XCTAssertTrue(rejected.first?[0].contains("another document starts on a later line (a .json file holds one document or an array; documents one a line go in a .jsonl file)") == true, "\(rejected)")
        XCTAssertEqual(Day.instantText(0), "1970-01-01T00:00:00Z")
        XCTAssertEqual(Day.instantText(86_400_000 * 365 + 45_296_007), "1971-01-01T12:34:56.007Z")
    }

    func testProratedRefundAndReversal() throws {
        // Sale: 1.99 USD, tax excluded: N = 199, C = round(59.7) = 60, P = 139.
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9003")))
        try ws.run("2023-11-14")
        // REFUND, 50% prorated: N' = round(99.5) = 100 (half to even), C' = 30, P' = 70.
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/n2.json", try notification("REFUND", signed: refundAt, transaction:
            try transaction("9003", revocation: refundAt, type: "REFUND_PRORATED", percentage: 50_000)))
        XCTAssertEqual(try ws.run("2023-11-17").counts.entriesPosted, 1)
        XCTAssertEqual(try rows("SELECT a.name, p.amount_minor FROM posting p JOIN entry e ON e.id = p.entry_id JOIN account a ON a.id = p.account_id WHERE e.kind = 'refund' ORDER BY p.id"),
                       [["Revenue:InApp:Refunds", "100"], ["Expenses:AppStore:Commission", "-30"], ["Assets:AppStore:Receivable", "-70"]])
        try balanceSumsToZero()
        // REFUND_REVERSED restores it, dated the notification's signedDate.
        let reversedAt = t0 + 5 * 86_400_000
        try ws.write("inbox/signed/n3.json", try notification("REFUND_REVERSED", signed: reversedAt, transaction: try transaction("9003")))
        let night3 = try ws.run("2023-11-20")
        XCTAssertEqual(night3.counts.entriesPosted, 1)
        XCTAssertEqual(try rows("SELECT kind, date FROM entry ORDER BY id").map { $0.joined(separator: " ") },
                       ["sale 2023-11-13", "refund 2023-11-16", "refund_reversal 2023-11-19"])
        // The Refunds sheet names each kind as the Journal does (a filter on one finds the other's).
        let book = try XLSXReader.sheets(try XCTUnwrap(night3.workbooks.first { $0.lastPathComponent == "sandbox-2023-11-20.xlsx" }))
        func kinds(_ sheet: String) -> [String] {
            // (The Refunds sheet leads with entry, date, transaction and currency.)
            let (transaction, kind) = sheet == "Refunds" ? (2, 6) : (5, 4)
            return book[sheet]!.compactMap { $0.count > 6 && $0[transaction] == "9003" ? $0[kind] : nil }
        }
        XCTAssertEqual(kinds("Refunds"), ["refund", "refund_reversal"])
        // Its refunded percentage takes the sign of its amounts: the reversal's is negative.
        XCTAssertEqual(book["Refunds"]!.compactMap { $0.count > 10 && $0[2] == "9003" ? [$0[9], $0[10]] : nil }, [["50", "1"], ["-50", "-1"]])
        XCTAssertEqual(Set(kinds("Journal")), ["sale", "refund", "refund_reversal"])
        XCTAssertEqual(try rows("SELECT a.name, sum(p.amount_minor) FROM posting p JOIN account a ON a.id = p.account_id GROUP BY 1 ORDER BY 1"),
                       [["Assets:AppStore:Receivable", "139"], ["Expenses:AppStore:Commission", "60"],
                        ["Revenue:InApp:Refunds", "0"], ["Revenue:InApp:Sales", "-199"]])
        try balanceSumsToZero()
        // verify finds the prorated refund in the REFUND notification's transaction, and the
        // reversal's REFUND_REVERSED notification verifies again as Apple's.
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        XCTAssertEqual(audit.rederived, 3)
        // trace says the refund was reversed, and when (it said "refunded" alone).
        let (_, ledger) = try ws.workspace.openExistingLedger()
        let traced = try XCTUnwrap(try ledger.read { try $0.traceTransaction("9003", asOf: nil) })
        XCTAssertEqual(traced.refund_date, "2023-11-16")
        XCTAssertEqual(traced.refund_reversed_date, "2023-11-19")
        XCTAssertTrue(TraceOutput.text(traced).contains("refunded on 2023-11-16, refund reversed on 2023-11-19"), TraceOutput.text(traced))
        XCTAssertTrue(TraceOutput.json(traced).contains("\"refund_reversed_date\" : \"2023-11-19\""))

        // Its first record moved to a later notification of it (an auditor's review: any signed
        // record passed as a first after another signed record; trace then left out the REFUND
        // notification that brought the refund): named.
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        let later = try XCTUnwrap(try rows("SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/signed/n3.json'").first?.first)
        let first = try XCTUnwrap(try rows("SELECT first_record_id FROM store_transaction WHERE transaction_id = '9003'").first?.first)
        try Tamper.run(path, pastAll: [], "UPDATE store_transaction SET first_record_id = \(later) WHERE transaction_id = '9003'")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().problems.map(\.message).contains(
            "transaction 9003 is first reported by inbox/signed/n1.json:1 (record #\(first)), but the ledger holds record #\(later) as its first: changed, so the transaction is given another record's figures"))
        try Tamper.run(path, pastAll: [], "UPDATE store_transaction SET first_record_id = \(first) WHERE transaction_id = '9003'")
        // The signed price the sale records, as trace tells it, rewritten (a re-check: it passed).
        try Tamper.run(path, past: "entry_no_update", "UPDATE entry SET rules_json = replace(rules_json, 'signed price 1990 milliunits', 'signed price 1000 milliunits') WHERE transaction_id = '9003' AND kind = 'sale'")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().problems.map(\.message).contains {
            $0.contains("its recorded rules are not those of the files run 1 posted by: price source \"signed price 1000 milliunits\" where the sale's gross is 199 minor units of USD")
        })
        // Any other text in its place (a rules price on a sale no rule priced; a free trial) too.
        for text in ["rules/prices.csv 1.99 USD from 2023-01-01 x 1", "free trial period", "signed price 1990 milliunits and more"] {
            try Tamper.run(path, past: "entry_no_update", "UPDATE entry SET rules_json = json_set(rules_json, '$.priceSource', '\(text)') WHERE transaction_id = '9003' AND kind = 'sale'")
            XCTAssertTrue(try Audit(workspace: ws.workspace).run().problems.map(\.message).contains {
                $0.contains("price source \"\(text)\" where the sale's gross is 199 minor units of USD, priced by no rule")
            }, text)
        }
        // The refund and its reversal copy the sale's rules, which trace tells from each: the
        // rate rewritten in the reversal alone (its postings the refund's, negated) is named.
        try Tamper.run(path, past: "entry_no_update", "UPDATE entry SET rules_json = json_set(rules_json, '$.fxRate', '2') WHERE transaction_id = '9003' AND kind = 'refund_reversal'")
        let reversalProblems = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(reversalProblems.contains { $0.hasPrefix("refund_reversal of transaction 9003: applied rules differ: FX rate \"2\" where its refund has \"1\"") }, "\(reversalProblems)")
        // The reversal removed (an auditor's review: with the chain and seals rewritten, it
        // passed, and the next night posted it again saying nothing): named by its request.
        try Tamper.run(path, past: "entry_no_delete", "DELETE FROM entry WHERE transaction_id = '9003' AND kind = 'refund_reversal'")
        let removed = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(removed.contains { $0.hasPrefix("transaction 9003 (sandbox): REFUND_REVERSED ") && $0.hasSuffix(" asks for the reversal of its refund, dated 2023-11-19, and its refund is posted, but it has no refund reversal entry: every night posts such a reversal before it commits, so the entry was removed") }, "\(removed)")
        // And a night refuses to build on it (it posted the reversal again, saying nothing).
        XCTAssertThrowsError(try ws.run("2023-11-21")) {
            XCTAssertTrue("\($0)".contains("transaction 9003's refund reversal, asked for by REFUND_REVERSED "), "\($0)")
        }
    }

    /// A signed record's trusted root is named where it was verified (its record's reason, which
    /// `trace` shows), and the night's summary counts the records verified to a root other
    /// than Apple Root CA - G3, with a WARNING for those saying they are production data: Apple
    /// signs production data under its own root only (a root added to trusted_roots let in
    /// "production" purchases, and nothing said which root vouched for them).
    func testTheRootASignedRecordWasVerifiedToIsNamed() throws {
        try ws.write("inbox/signed/t.jws", try transaction("9201") + "\n" + (try transaction("9202", environment: "Production")) + "\n")
        let night = try ws.run("2023-11-14")
        XCTAssertEqual(night.otherRoots.map { "\($0.root) \($0.records) \($0.production)" }, ["certs/testCA.pem 2 1"])
        XCTAssertEqual(try rows("SELECT DISTINCT reason FROM source_record").map { $0[0] },
                       ["signed transaction: ES256 signature and x5c chain verified to the trusted root certs/testCA.pem, not Apple Root CA - G3 (test data, or not Apple's), Apple OIDs present, valid at signedDate 2023-11-14"])
        let (_, ledger) = try ws.workspace.openExistingLedger()
        let traced = try XCTUnwrap(try ledger.read { try $0.traceTransaction("9202", asOf: nil) })
        XCTAssertTrue(TraceOutput.text(traced).contains("verified to the trusted root certs/testCA.pem, not Apple Root CA - G3"), TraceOutput.text(traced))
        // The binary says it in the night's summary.
        try ws.write("inbox/signed/u.jws", try transaction("9203", environment: "Production") + "\n")
        let cli = try Resilience.cli(["run", "--workspace", ws.root.path, "--as-of", "2023-11-15"])
        XCTAssertEqual(cli.status, 0, cli.err)
        XCTAssertTrue(cli.out.contains("  WARNING: signed records verified to certs/testCA.pem (trusted_roots), not to Apple Root CA - G3: 1, 1 of them saying they are production data"), cli.out)
        XCTAssertEqual(cli.err, "iapledger: WARNING: 1 signed record saying it is production data verified to certs/testCA.pem (trusted_roots), not to Apple Root CA - G3\n")
        // So does the finance workbook's Summary, for every such record read up to its night
        // (an auditor's review: the workbook finance signs listed the root in Run Info alone).
        func rootsLine(_ day: String) throws -> String? {
            try XLSXReader.sheets(ws.root.appendingPathComponent("reports/\(day)/finance-\(day).xlsx"))["Summary"]!
                .first { $0.first?.hasPrefix("Signed records verified to a root other than Apple's") == true }?.first
        }
        XCTAssertEqual(try rootsLine("2023-11-15"), "Signed records verified to a root other than Apple's (trusted_roots in iapledger.toml; Run Info lists the roots): WARNING: 2 records under certs/testCA.pem, saying they are production data, which Apple signs under Apple Root CA - G3 only: not Apple's unless that root is; take a test root out of trusted_roots once testing is done.")
        XCTAssertEqual(try rootsLine("2023-11-14"), "Signed records verified to a root other than Apple's (trusted_roots in iapledger.toml; Run Info lists the roots): WARNING: 1 record under certs/testCA.pem, saying they are production data, which Apple signs under Apple Root CA - G3 only: not Apple's unless that root is; take a test root out of trusted_roots once testing is done.")
        // A workspace's own layout without the line (one copied before it was added) still
        // shows the warning, after its own notes (a finance re-check: it was silently left out).
        try ws.write("layouts/finance.toml", "[[sheet]]\nkey = \"summary\"\nsubtitle = [\"Figures in {reporting_currency}.\"]\n")
        _ = try PeriodReport.write(workspace: ws.workspace, asOf: Day(iso: "2023-11-15")!)
        let notes = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2023-11-15/finance-2023-11-15.xlsx"))["Summary"]!.prefix(3).map { $0.first ?? "" }
        XCTAssertEqual(notes[1], "Figures in USD.")
        XCTAssertTrue(notes[2].hasPrefix("Signed records verified to a root other than Apple's (trusted_roots in iapledger.toml; Run Info lists the roots): WARNING: 2 records under certs/testCA.pem"), "\(notes)")
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("layouts/finance.toml"))
        // A notification counts as its transaction's book: one saying Sandbox (the helper's
        // default) that carries a production transaction is production data.
        try ws.write("inbox/signed/n.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9204", environment: "Production")))
        let third = try ws.run("2023-11-16")
        XCTAssertEqual(third.otherRoots.map { "\($0.root) \($0.records) \($0.production)" }, ["certs/testCA.pem 1 1"])
        XCTAssertEqual(try rows("SELECT book FROM entry WHERE transaction_id = '9204'"), [["production"]])
        let third16 = try rootsLine("2023-11-16") ?? "none"
        XCTAssertTrue(third16.contains(": WARNING: 3 records under certs/testCA.pem, saying they are production data"),
                      "the notification counted as its production transaction's: \(third16)")
        // Apple's own root names itself (the verifier's names, in the order of its roots).
        let apple = try SignedDataVerifier(bundleIds: [])
        XCTAssertEqual(apple.anchors, [SignedDataAnchor(name: "Apple Root CA - G3", isApple: true)])
    }

    /// `verify` checks each night's records again by the bundle ids and roots that night
    /// verified with: a bundle id retired since, a root taken out of trusted_roots and its file
    /// deleted are changes of config, not tampering (it said every record they let in no longer
    /// verified, and could not run at all without the root's file). A root the ledger did not
    /// keep (as before this version) and the config no longer names is said as the cause.
    func testVerifyChecksRecordsByTheBundleIdsAndRootsOfTheirNight() throws {
        try ws.write("iapledger.toml", Self.config(trusted: true).replacingOccurrences(of: #"["com.example"]"#, with: #"["com.example", "com.example.old"]"#))
        try ws.write("inbox/signed/t.jws", try transaction("9101") + "\n")
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("9102", product: "com.example.product", purchased: "2023-11-13T10:00:00Z")],
                                                                bundle: "com.example.old") + "\n")
        XCTAssertEqual(try ws.run("2023-11-15").counts.entriesPosted, 2)
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // The old app retired, the test root out of the config and its file deleted.
        try ws.write("iapledger.toml", Self.config(trusted: false))
        try FileManager.default.removeItem(at: ws.root.appendingPathComponent("certs/testCA.pem"))
        var audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        XCTAssertEqual(audit.rederived, 2)
        XCTAssertEqual(audit.notes, ["iapledger.toml's bundle_ids no longer lists com.example.old, which run 1 verified records with: their records are checked by the config and roots those runs kept, as they verified them",
                                     "iapledger.toml's trusted_roots no longer names the root certs/testCA.pem, which run 1 verified records with: their records are checked by the config and roots those runs kept, as they verified them"])
        try ws.run("2023-11-16")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // The config names the root again, its file still gone: said, not a problem.
        try ws.write("iapledger.toml", Self.config(trusted: true))
        audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        XCTAssertTrue(audit.notes.first?.hasPrefix("trusted_roots names certs/testCA.pem, which cannot be read") == true, "\(audit.notes)")
        // A ledger that did not keep the root (a version before this one), the config no
        // longer naming it: a note, and the record that needed it is named.
        try ws.write("iapledger.toml", Self.config(trusted: false))
        try Tamper.run(ws.root.appendingPathComponent("ledger.sqlite").path, past: "input_text_no_delete",
                       "DELETE FROM input_text WHERE sha256 IN (SELECT sha256 FROM run_input WHERE path = 'trusted root: certs/testCA.pem')")
        audit = try Audit(workspace: ws.workspace).run()
        XCTAssertFalse(audit.ok)
        XCTAssertTrue(audit.notes.contains { $0.hasPrefix("run 1 trusted the root certs/testCA.pem (SHA-256 ") }, "\(audit.notes)")
        XCTAssertEqual(audit.problems.map(\.message).filter { $0.contains("9101") && $0.contains("no longer verifies") }.count, 1, "\(audit.problems)")
        XCTAssertFalse(audit.problems.contains { $0.message.contains("9102") }, "the receipt needed no root: \(audit.problems)")
        // Named and readable again: checked, its record verifies; the kept copy deleted from a
        // ledger of this version (which keeps it) is the one problem left.
        try ws.write("iapledger.toml", Self.config(trusted: true))
        try ws.write("certs/testCA.pem", try TestSigner.appleFixtureText("java/certs/testCA.pem"))
        audit = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(audit.problems.count, 1, "\(audit.problems)")
        XCTAssertTrue(audit.problems.first?.message.hasPrefix("run 1 verified signed data to the root certs/testCA.pem (SHA-256 ") == true, "\(audit.problems)")
        XCTAssertTrue(audit.problems.first?.message.hasSuffix("whose certificate it kept, but the ledger no longer holds it: it was deleted") == true, "\(audit.problems)")
    }

    /// A reversal waiting for its refund is a row (reversal_request) the next night posts from:
    /// deleted, the reversal would never post; its date changed, it would post on another day.
    /// Triggers refuse both; past them, `verify` reads the notifications again and names each.
    func testAWaitingReversalDeletedOrRedatedIsNamed() throws {
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9056")))
        try ws.write("inbox/signed/n2.json", try notification("REFUND_REVERSED", uuid: "rr-9056", signed: t0 + 86_400_000, transaction: try transaction("9056")))
        try ws.run("2023-11-14")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        XCTAssertThrowsError(try DatabaseQueue(path: path).write { try $0.execute(sql: "DELETE FROM reversal_request") })
        XCTAssertThrowsError(try DatabaseQueue(path: path).write { try $0.execute(sql: "UPDATE reversal_request SET date = '2023-12-25'") })
        try Tamper.run(path, past: "reversal_request_no_update", "UPDATE reversal_request SET date = '2023-12-25'")
        var r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["the refund reversal of transaction 9056 is asked for by REFUND_REVERSED rr-9056 dated 2023-12-25, but the notification that asked for it (inbox/signed/n2.json:1) dates it 2023-11-15: changed in the ledger after it was read"])
        try Tamper.run(path, past: "reversal_request_no_delete", "DELETE FROM reversal_request")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertEqual(r.problems.map(\.message), ["REFUND_REVERSED rr-9056 (inbox/signed/n2.json:1) asks for the refund reversal of transaction 9056 (dated 2023-11-15), but the ledger holds no such request: deleted (the reversal would never post)"])
        try Tamper.run(path, past: "notification_no_delete", "DELETE FROM notification WHERE uuid = 'rr-9056'")
        r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.problems.map(\.message).contains("notification REFUND_REVERSED rr-9056 (inbox/signed/n2.json:1) is a verified record, but the ledger holds no notification of that UUID: deleted"), "\(r.problems)")
    }

    /// A REFUND_REVERSED before its refund, and a REFUND whose transaction carries no date:
    /// each waited or posted nothing without a word. Each is a finding now, resolved when the
    /// reversal (or a refund) posts.
    func testWaitingReversalsAndUndatedRefundsAreSaid() throws {
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9051")))
        try ws.write("inbox/signed/n2.json", try notification("REFUND_REVERSED", signed: t0 + 86_400_000, transaction: try transaction("9051")))
        try ws.write("inbox/signed/n3.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9052")))
        try ws.write("inbox/signed/n4.json", try notification("REFUND", signed: t0 + 86_400_000, transaction: try transaction("9052")))
        try ws.run("2023-11-14")
        func open() throws -> [String] {
            try rows("SELECT code || ' ' || transaction_id FROM finding WHERE resolved_run_id IS NULL ORDER BY code").map { $0[0] }
        }
        XCTAssertEqual(try open(), ["REFUND_NOT_DATED 9052", "REVERSAL_WAITING 9051"])
        // The refunds arrive: both post, both findings are resolved.
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/n5.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9051", revocation: refundAt)))
        try ws.write("inbox/signed/n6.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9052", revocation: refundAt)))
        try ws.run("2023-11-17")
        XCTAssertEqual(try rows("SELECT transaction_id, kind, date FROM entry WHERE kind <> 'sale' ORDER BY id").map { $0.joined(separator: " ") },
                       ["9051 refund 2023-11-16", "9052 refund 2023-11-16", "9051 refund_reversal 2023-11-15"],
                       "dated the notification's signedDate, as accounting.md says")
        // The waiting findings are resolved; 9051's refund is dated after the reversal that
        // reverses it (read before it): both are posted, so the sale stands, while
        // reconciliation takes the refund, the latest-dated word; said (it was not).
        XCTAssertEqual(try open(), ["REFUND_AFTER_REVERSAL 9051"])
        let said = try rows("SELECT message FROM finding WHERE code = 'REFUND_AFTER_REVERSAL'")[0][0]
        XCTAssertTrue(said.contains("transaction 9051's refund (revoked 2023-11-16) is dated after REFUND_REVERSED ") && said.contains("(dated 2023-11-15), which reverses it"), said)
        XCTAssertEqual(try rows("SELECT store_refund_share FROM store_transaction WHERE transaction_id = '9051'"), [["100000"]])
        try ws.run("2023-11-17")
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'REFUND_AFTER_REVERSAL'"), [["1"]], "said once")
    }

    /// A refund, its reversal, then another REFUND (new UUID, new revocationDate): the ledger
    /// keeps one refund per transaction, so the second posts nothing, but it is said
    /// (REFUND_AFTER_REVERSAL), in the run's problems, not dropped. A reversal asked when its
    /// refund is posted opens no REVERSAL_WAITING (not even one resolved the same night), and a
    /// second REFUND_REVERSED (new UUID) is a REVERSAL_REPEATED finding, not one waiting for ever.
    func testARefundAfterItsReversalAndASecondReversalAreSaid() throws {
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9061")))
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/n2.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9061", revocation: refundAt)))
        try ws.run("2023-11-17")
        try ws.write("inbox/signed/n3.json", try notification("REFUND_REVERSED", signed: t0 + 5 * 86_400_000, transaction: try transaction("9061")))
        // The first refund sent again (new UUID, its own date) after the reversal: not a second one.
        try ws.write("inbox/signed/n3b.json", try notification("REFUND", signed: t0 + 5 * 86_400_000, transaction: try transaction("9061", revocation: refundAt)))
        XCTAssertEqual(try ws.run("2023-11-20").counts.entriesPosted, 1)
        XCTAssertEqual(try rows("SELECT count(*) FROM finding"), [["0"]])
        let again = t0 + 7 * 86_400_000
        try ws.write("inbox/signed/n4.json", try notification("REFUND", signed: again, transaction: try transaction("9061", revocation: again)))
        let r = try ws.run("2023-11-22")
        XCTAssertEqual(r.counts.entriesPosted, 0)
        XCTAssertEqual(try rows("SELECT kind FROM entry ORDER BY id").map { $0[0] }, ["sale", "refund", "refund_reversal"])
        XCTAssertTrue(r.problems.contains { $0.contains("REFUND_AFTER_REVERSAL") && $0.contains("n4.json") && $0.contains("book this refund by hand") }, "\(r.problems)")
        try ws.write("inbox/signed/n5.json", try notification("REFUND_REVERSED", signed: t0 + 9 * 86_400_000, transaction: try transaction("9061")))
        XCTAssertEqual(try ws.run("2023-11-24").counts.entriesPosted, 0)
        XCTAssertEqual(try rows("SELECT code, resolved_run_id IS NULL FROM finding WHERE transaction_id = '9061' ORDER BY code").map { $0.joined(separator: " ") },
                       ["REFUND_AFTER_REVERSAL 1", "REVERSAL_REPEATED 1"], "no REVERSAL_WAITING, open or resolved")
        try balanceSumsToZero()
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A signed transaction the user upgraded from (`isUpgraded`) refunded with no percentage is
    /// refunded in full and said (UPGRADE_REFUND); one whose prorated percentage is given posts
    /// that share and says nothing.
    func testAnUpgradedSignedTransactionsRefundIsSaidUnlessItsShareIsGiven() throws {
        let at = t0 + 2 * 86_400_000
        func upgraded(_ id: String, percentage: Int64?, flag: Any = true) throws -> String {
            try signer.sign(payload: TestSigner.transactionPayload(
                transactionId: id, productId: "com.example.product", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0,
                revocationDateMs: at, revocationReason: 0, revocationType: percentage == nil ? nil : "REFUND_PRORATED",
                revocationPercentage: percentage, environment: "Sandbox", storefront: "USA", priceMilliunits: 1990,
                currency: "USD", extra: ["isUpgraded": flag]))
        }
        // (`isUpgraded` written as text or 1 reads as true, as numeric text does for numbers.)
        try ws.write("inbox/signed/t.txt", [try upgraded("9301", percentage: nil), try upgraded("9302", percentage: 40_000),
                                            try upgraded("9303", percentage: nil, flag: "true"), try upgraded("9304", percentage: nil, flag: 1)].joined(separator: "\n") + "\n")
        try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT transaction_id, refund_percentage FROM entry WHERE kind = 'refund' ORDER BY transaction_id"),
                       [["9301", "100000"], ["9302", "40000"], ["9303", "100000"], ["9304", "100000"]])
        XCTAssertEqual(try rows("SELECT transaction_id FROM finding WHERE code = 'UPGRADE_REFUND' ORDER BY 1"), [["9301"], ["9303"], ["9304"]])
        // An upgrade refunded with REFUND_FULL: Apple says the share, no finding.
        try ws.write("inbox/signed/f.txt", try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9306", productId: "com.example.product", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0,
            revocationDateMs: at, revocationReason: 0, revocationType: "REFUND_FULL", environment: "Sandbox",
            storefront: "USA", priceMilliunits: 1990, currency: "USD", extra: ["isUpgraded": true])) + "\n")
        // REFUND_PRORATED with no revocationPercentage: posted in full, and said.
        try ws.write("inbox/signed/p.txt", try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9305", productId: "com.example.product", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0,
            revocationDateMs: at, revocationReason: 0, revocationType: "REFUND_PRORATED", environment: "Sandbox",
            storefront: "USA", priceMilliunits: 1990, currency: "USD")) + "\n")
        try ws.run("2023-11-21")
        XCTAssertEqual(try rows("SELECT refund_percentage FROM entry WHERE kind = 'refund' AND transaction_id = '9305'"), [["100000"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE transaction_id = '9306'"), [["0"]], "REFUND_FULL says the share")
        XCTAssertTrue(try rows("SELECT message FROM finding WHERE code = 'REFUND_SHARE_UNKNOWN' AND transaction_id = '9305'").first?.first?
            .contains("p.txt:1: transaction 9305 was refunded on 2023-11-16 with revocationType REFUND_PRORATED but no revocationPercentage") == true)
        XCTAssertTrue(try rows("SELECT message FROM finding WHERE code = 'UPGRADE_REFUND'").first?.first?.contains("t.txt:1: transaction 9301 was cancelled on 2023-11-16 because the user upgraded") == true)
    }

    /// A sale refunded in part whose rules changed since: its RULES_CHANGED finding says what is
    /// left to correct, as the night's summary counts it, not the sale's difference (which a
    /// finance team booking the findings one by one would book a cent too much of). AUD 1.10,
    /// tax included: net 100 AUD cents, commission 30; at 0.66 USD net 66, commission 20.
    /// Refunded 25% at 0.66: 66 - round(16.5) = 50 and 20 - 5 = 15 are left. At 0.69: net 69
    /// (3 more), commission 21; 69 - round(17.25) = 52 and 21 - 5 = 16 are left: +2, +1, +1.
    /// At 0.67 (net 67, commission 20): 67 - round(16.75) = 50 and 15, nothing left to correct:
    /// no finding (one asked finance to book 0.00).
    func testAPartlyRefundedSalesFindingSaysWhatIsLeftToCorrect() throws {
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.66\n")
        let refundAt = t0 + 86_400_000
        func sale(_ id: String, refunded: Bool = true) throws -> String {
            try transaction(id, price: 1100, revocation: refunded ? refundAt : nil, type: refunded ? "REFUND_PRORATED" : nil, percentage: refunded ? 25_000 : nil,
                            environment: "Production", storefront: "AUS", currency: "AUD")
        }
        try ws.write("inbox/signed/a.json", try notification("REFUND", signed: refundAt, transaction: try sale("9501")))
        try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT kind, net_reporting_minor, commission_reporting_minor FROM entry WHERE transaction_id = '9501' ORDER BY id"),
                       [["sale", "66", "20"], ["refund", "16", "5"]])
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.67\n")
        XCTAssertNil(try ws.run("2023-11-17").rulesChanged, "nothing left to correct")
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'RULES_CHANGED'"), [["0"]])

        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.69\n")
        let night = try ws.run("2023-11-18")
        XCTAssertEqual(night.rulesChanged?.lines, [
            "rules/fx.csv: AUD 2023-11 0.66 -> 0.69: 1 sale posted, today's rules would book net +0.02, commission +0.01, proceeds +0.01 USD",
        ])
        let message = try XCTUnwrap(try rows("SELECT message FROM finding WHERE code = 'RULES_CHANGED' AND transaction_id = '9501'").first?.first)
        XCTAssertTrue(message.contains("the difference: net 0.00 AUD (+0.03 USD), commission 0.00 AUD (+0.01 USD), proceeds 0.00 AUD (+0.02 USD)"), message)
        XCTAssertTrue(message.contains("; refunded 25.000% at the posted amounts, so what is left to correct (today's rules after their refund less the posted after theirs): "
                                       + "net 0.00 AUD (+0.02 USD), commission 0.00 AUD (+0.01 USD), proceeds 0.00 AUD (+0.01 USD)"), message)
        XCTAssertFalse(message.contains("the rest is to correct"), message)

        // A finding worded as versions before this one worded it is the same finding: not
        // opened again, and still open when a night checks the sale again.
        let older = message.replacingOccurrences(
            of: "; refunded 25.000% at the posted amounts, so what is left to correct (today's rules after their refund less the posted after theirs): "
                + "net 0.00 AUD (+0.02 USD), commission 0.00 AUD (+0.01 USD), proceeds 0.00 AUD (+0.01 USD)",
            with: " (refunded 25.000% at the posted amounts: the rest is to correct)")
        XCTAssertNotEqual(older, message)
        try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).write { w in
            try w.db.execute(sql: "UPDATE finding SET message = ? WHERE code = 'RULES_CHANGED'", arguments: [older])
        }
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.69\n2023-12,AUD,0.7\n")
        XCTAssertNil(try ws.run("2023-11-19").rulesChanged)
        XCTAssertEqual(try rows("SELECT count(*), count(resolved_run_id) FROM finding WHERE code = 'RULES_CHANGED'"), [["1", "0"]])

        // Back to 0.67: nothing left to correct, so the finding is resolved, saying why.
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.67\n")
        try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT substr(message, 1, 126) FROM finding WHERE code = 'RULES_CHANGED' AND transaction_id = '9501' AND resolved_run_id IS NOT NULL"),
                       [["resolved: refunded 25.000% at its posted amounts, and what is left of it the rules book as posted: nothing to correct; it said"]])
        try balanceSumsToZero()
    }

    /// A refund posted the same night as a rules change is part of what is left to correct:
    /// the check ran before the night read its files, and said the sale's whole difference.
    func testARefundPostedTheNightTheRulesChangeCounts() throws {
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.66\n")
        let refundAt = t0 + 86_400_000
        try ws.write("inbox/signed/a.json", try notification("ONE_TIME_CHARGE", signed: t0, transaction: try transaction(
            "9511", price: 1100, environment: "Production", storefront: "AUS", currency: "AUD")))
        try ws.run("2023-11-15")
        try ws.write("inbox/signed/b.json", try notification("REFUND", signed: refundAt, transaction: try transaction(
            "9511", price: 1100, revocation: refundAt, type: "REFUND_PRORATED", percentage: 25_000,
            environment: "Production", storefront: "AUS", currency: "AUD")))
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.69\n")
        let night = try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT kind FROM entry WHERE transaction_id = '9511' ORDER BY id"), [["sale"], ["refund"]])
        XCTAssertEqual(night.rulesChanged?.lines.first,
                       "rules/fx.csv: AUD 2023-11 0.66 -> 0.69: 1 sale posted, today's rules would book net +0.02, commission +0.01, proceeds +0.01 USD")
        let message = try XCTUnwrap(try rows("SELECT message FROM finding WHERE code = 'RULES_CHANGED' AND transaction_id = '9511'").first?.first)
        XCTAssertTrue(message.contains("refunded 25.000% at the posted amounts, so what is left to correct"), message)
    }

    /// Signed data of a bundle id the config names only later is said each night as receipts
    /// are (a re-check: the note read the receipts' wording of the reason alone).
    func testSignedRecordsOfABundleIdNamedLaterAreSaid() throws {
        let config = Self.config(trusted: true)
        try ws.write("iapledger.toml", config.replacingOccurrences(of: #"bundle_ids = ["com.example"]"#, with: #"bundle_ids = ["com.other"]"#))
        try ws.write("inbox/signed/a.jws", try transaction("9501") + "\n")
        var r = try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT reason_code FROM source_record WHERE outcome = 'rejected'"), [["WRONG_BUNDLE_ID"]])
        XCTAssertEqual(r.rejectedOfBundleIdsNowNamed.records, 0)
        try ws.write("iapledger.toml", config.replacingOccurrences(of: #"bundle_ids = ["com.example"]"#, with: #"bundle_ids = ["com.other", "com.example"]"#))
        r = try ws.run("2023-11-16")
        XCTAssertEqual(r.rejectedOfBundleIdsNowNamed.bundleIds, ["com.example"])
        XCTAssertEqual(r.rejectedOfBundleIdsNowNamed.files, ["inbox/signed/a.jws"])
    }

    /// A prorated refund's reversal is traced as reversing that share, not as a refund of it
    /// (an auditor's review: "refund_reversal on ... (50.000% refunded)").
    func testTheTraceOfAProratedRefundsReversalSaysItReversesIt() throws {
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/b1.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9403", revocation: refundAt, type: "REFUND_PRORATED", percentage: 50_000)))
        try ws.run("2023-11-17")
        try ws.write("inbox/signed/b2.json", try notification("REFUND_REVERSED", signed: t0 + 4 * 86_400_000, transaction: try transaction("9403")))
        try ws.run("2023-11-19")
        let trace = try Resilience.cli(["trace", "9403", "--workspace", ws.root.path])
        XCTAssertEqual(trace.status, 0, trace.err)
        XCTAssertTrue(trace.out.contains(" refund on 2023-11-16 (50.000% refunded)"), trace.out)
        XCTAssertTrue(trace.out.contains(" refund_reversal on 2023-11-18 (reverses the 50.000% refund)"), trace.out)
    }

    /// A second refund (after the first was reversed, or in full after a prorated one) posts
    /// nothing (one refund per transaction) but is the store's last word for reconciliation:
    /// an active order of the transaction is REFUNDED_STILL_CREDITED (it was left matched); a
    /// second reversal takes that back.
    func testASecondRefundOrReversalIsWhatReconciliationSees() throws {
        try ws.write("inbox/orders/o.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
            + "r1,acct-1,9401,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r2,acct-2,9402,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n")
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/a1.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9401", revocation: refundAt)))
        try ws.write("inbox/signed/b1.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9402", revocation: refundAt, type: "REFUND_PRORATED", percentage: 50_000)))
        try ws.run("2023-11-17")
        func open() throws -> [String] { try rows("SELECT category || ' ' || transaction_id FROM exception WHERE resolved_on IS NULL ORDER BY 1").map { $0[0] } }
        XCTAssertEqual(try open(), ["REFUNDED_STILL_CREDITED 9401"])
        try ws.write("inbox/signed/a2.json", try notification("REFUND_REVERSED", signed: t0 + 4 * 86_400_000, transaction: try transaction("9401")))
        try ws.run("2023-11-19")
        XCTAssertEqual(try open(), [])
        // 9401 refunded again after its reversal; 9402, refunded a half, refunded in full.
        let again = t0 + 6 * 86_400_000
        try ws.write("inbox/signed/a3.json", try notification("REFUND", signed: again, transaction: try transaction("9401", revocation: again)))
        try ws.write("inbox/signed/b2.json", try notification("REFUND", signed: again, transaction: try transaction("9402", revocation: again)))
        try ws.run("2023-11-21")
        XCTAssertEqual(try rows("SELECT transaction_id, kind FROM entry WHERE kind <> 'sale' ORDER BY id"),
                       [["9401", "refund"], ["9402", "refund"], ["9401", "refund_reversal"]], "nothing more posted")
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE resolved_run_id IS NULL ORDER BY code"), [["REFUND_AFTER_REVERSAL"], ["REFUND_AGAIN"]])
        XCTAssertEqual(try open(), ["REFUNDED_STILL_CREDITED 9401", "REFUNDED_STILL_CREDITED 9402"])
        // 9401 reversed again: its credit stands rightly.
        try ws.write("inbox/signed/a4.json", try notification("REFUND_REVERSED", signed: t0 + 8 * 86_400_000, transaction: try transaction("9401")))
        try ws.run("2023-11-23")
        XCTAssertEqual(try open(), ["REFUNDED_STILL_CREDITED 9402"])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)

        // A ledger from before v31 (no such column; the findings said it): the migration takes
        // the latest finding of each, and the first night after reconciles every group again.
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        try Ledger(path: path).write { w in
            try w.db.execute(sql: "ALTER TABLE store_transaction DROP COLUMN store_refund_share; ALTER TABLE store_transaction DROP COLUMN store_refund_ms")
            try w.db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v31-store-refund-share'")
        }
        try ws.run("2023-11-24")
        XCTAssertEqual(try rows("SELECT transaction_id, store_refund_share FROM store_transaction ORDER BY 1"), [["9401", "0"], ["9402", "100000"]])
        XCTAssertEqual(try open(), ["REFUNDED_STILL_CREDITED 9402"])
    }

    /// A refund held at one share, said again for the same day at another (REFUND_FULL of a
    /// refund held at 33.333%, a later instant): nothing posted, REFUND_AGAIN said once, and the
    /// full refund is what reconciliation sees (the order still crediting it was matched, the
    /// new share dropped silently).
    func testARefundOfTheSameDayAtAnotherShareIsSaid() throws {
        try ws.write("inbox/orders/o.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
            + "r1,acct-1,9421,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n")
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/a1.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9421", revocation: refundAt, type: "REFUND_PRORATED", percentage: 33_333)))
        try ws.run("2023-11-17")
        func open() throws -> [String] { try rows("SELECT category || ' ' || transaction_id FROM exception WHERE resolved_on IS NULL ORDER BY 1").map { $0[0] } }
        XCTAssertEqual(try open(), [])
        let full = try notification("REFUND", signed: refundAt + 3_600_000, transaction: try transaction("9421", revocation: refundAt + 3_600_000, type: "REFUND_FULL"))
        try ws.write("inbox/signed/a2.json", full)
        try ws.write("inbox/signed/a3.json", full.replacingOccurrences(of: "\"}", with: "\" }"))   // the same, sent again
        try ws.run("2023-11-18")
        XCTAssertEqual(try rows("SELECT kind, refund_percentage FROM entry WHERE transaction_id = '9421' ORDER BY id"), [["sale", ""], ["refund", "33333"]])
        let said = try rows("SELECT message FROM finding WHERE code = 'REFUND_AGAIN' AND transaction_id = '9421'")
        XCTAssertEqual(said.count, 1, "\(said)")
        XCTAssertTrue(said.first?.first?.contains("refunded on \(Day(epochMilliseconds: refundAt)) at 100.000%, but the ledger holds that day's refund at 33.333%: nothing is posted from it") == true, "\(said)")
        XCTAssertEqual(try open(), ["REFUNDED_STILL_CREDITED 9421"])
        // trace shows the store's word beside the refund the ledger posted.
        let traced = try XCTUnwrap(try ledger().read { try $0.traceTransaction("9421", asOf: nil) })
        XCTAssertEqual(traced.store_refund_share, 100_000)
        XCTAssertTrue(TraceOutput.text(traced).contains("  the store's latest word: refunded in full on \(Day(epochMilliseconds: refundAt))"), TraceOutput.text(traced))
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // Said again later that day at the share held: that is the store's word again (it stayed in full).
        try ws.write("inbox/signed/a4.json", try notification("REFUND", signed: refundAt + 5_400_000, transaction: try transaction("9421", revocation: refundAt + 5_400_000, type: "REFUND_PRORATED", percentage: 33_333)))
        try ws.run("2023-11-19")
        XCTAssertEqual(try rows("SELECT store_refund_share FROM store_transaction WHERE transaction_id = '9421'"), [["33333"]])
        XCTAssertEqual(try open(), [])
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'REFUND_AGAIN' AND transaction_id = '9421'"), [["1"]])
    }

    /// ...but a reversal of that refund the ledger keeps, dated after it, stays the last word: the
    /// other share is said, and the order crediting the sale stands rightly (a same-day share
    /// set the word to a refund in full over the reversal, and opened REFUNDED_STILL_CREDITED).
    func testARefundOfTheSameDayAtAnotherShareLeavesALaterReversalTheLastWord() throws {
        try ws.write("inbox/orders/o.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
            + "r1,acct-1,9422,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n")
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/a1.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9422", revocation: refundAt, type: "REFUND_PRORATED", percentage: 50_000)))
        try ws.write("inbox/signed/a2.json", try notification("REFUND_REVERSED", signed: refundAt + 2 * 86_400_000, transaction: try transaction("9422")))
        try ws.run("2023-11-19")
        try ws.write("inbox/signed/a3.json", try notification("REFUND", signed: refundAt + 3_600_000, transaction: try transaction("9422", revocation: refundAt + 3_600_000, type: "REFUND_FULL")))
        try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9422' AND resolved_run_id IS NULL"), [["REFUND_AGAIN"]])
        XCTAssertEqual(try rows("SELECT category FROM exception WHERE resolved_on IS NULL"), [])
        XCTAssertEqual(try rows("SELECT store_refund_share IS NULL OR store_refund_share = 0 FROM store_transaction WHERE transaction_id = '9422'"), [["1"]])
    }

    /// A refund the ledger holds, then a reversal of it dated before it (read after it): both
    /// are posted, the sale stands, reconciliation takes the refund: said (it was silent, and
    /// the order crediting it was an exception with no word why). And a same-day record of the
    /// refund at another share but an earlier instant, read late, is said, not the store's word.
    func testAReversalDatedBeforeTheRefundItReversesIsSaid() throws {
        try ws.write("inbox/orders/o.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
            + "r1,acct-1,9441,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n")
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/a1.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9441", revocation: refundAt, type: "REFUND_FULL")))
        try ws.run("2023-11-17")
        try ws.write("inbox/signed/a2.json", try notification("REFUND_REVERSED", signed: refundAt - 86_400_000, transaction: try transaction("9441")))
        try ws.run("2023-11-18")
        XCTAssertEqual(try rows("SELECT kind FROM entry WHERE transaction_id = '9441' ORDER BY id"), [["sale"], ["refund"], ["refund_reversal"]])
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9441' AND resolved_run_id IS NULL"), [["REFUND_AFTER_REVERSAL"]])
        XCTAssertEqual(try rows("SELECT category FROM exception WHERE resolved_on IS NULL"), [["REFUNDED_STILL_CREDITED"]])
        // An older same-day record at half: said (REFUND_AGAIN), the store's word stays in full.
        try ws.write("inbox/signed/a3.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9441", revocation: refundAt - 3_600_000, type: "REFUND_PRORATED", percentage: 50_000)))
        try ws.run("2023-11-19")
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9441' AND resolved_run_id IS NULL ORDER BY code"), [["REFUND_AFTER_REVERSAL"], ["REFUND_AGAIN"]])
        XCTAssertEqual(try rows("SELECT store_refund_share FROM store_transaction WHERE transaction_id = '9441'"), [["100000"]])
        XCTAssertEqual(try rows("SELECT category FROM exception WHERE resolved_on IS NULL"), [["REFUNDED_STILL_CREDITED"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// The store's last word is the latest by date, not the last read: a second reversal read
    /// before the second refund it reverses (files out of order) leaves the transaction
    /// reversed; a second refund read before the first reversal, and dated after it, stands;
    /// one dated before it is reversed with it.
    func testTheStoresLastWordIsTheLatestByDate() throws {
        try ws.write("inbox/orders/o.csv", "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment\n"
            + "r3,acct-3,9403,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r4,acct-4,9404,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r5,acct-5,9405,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r6,acct-6,9406,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r7,acct-7,9407,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r8,acct-8,9408,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r9,acct-9,9409,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n"
            + "r10,acct-10,9410,com.example.product,1,100,2023-11-14T00:00:00Z,sandbox\n")
        let day = Int64(86_400_000)
        for id in ["9403", "9404", "9405", "9406"] {
            try ws.write("inbox/signed/\(id)-a.json", try notification("REFUND", signed: t0 + 2 * day, transaction: try transaction(id, revocation: t0 + 2 * day)))
        }
        try ws.write("inbox/signed/9403-b.json", try notification("REFUND_REVERSED", signed: t0 + 3 * day, transaction: try transaction("9403")))
        try ws.run("2023-11-17")
        func open() throws -> [String] { try rows("SELECT transaction_id FROM exception WHERE resolved_on IS NULL ORDER BY 1").map { $0[0] } }
        XCTAssertEqual(try open(), ["9404", "9405", "9406"])
        // 9403: its second reversal (dated day 8) read before the second refund (day 6).
        try ws.write("inbox/signed/9403-c.json", try notification("REFUND_REVERSED", signed: t0 + 8 * day, transaction: try transaction("9403")))
        try ws.write("inbox/signed/9403-d.json", try notification("REFUND", signed: t0 + 6 * day, transaction: try transaction("9403", revocation: t0 + 6 * day)))
        // 9404: a second refund (day 7) read before the first reversal (day 6): it stands.
        try ws.write("inbox/signed/9404-c.json", try notification("REFUND", signed: t0 + 7 * day, transaction: try transaction("9404", revocation: t0 + 7 * day)))
        try ws.write("inbox/signed/9404-d.json", try notification("REFUND_REVERSED", signed: t0 + 6 * day, transaction: try transaction("9404")))
        // 9405: a second refund (day 5) read before the first reversal (day 6): reversed with it.
        try ws.write("inbox/signed/9405-c.json", try notification("REFUND", signed: t0 + 5 * day, transaction: try transaction("9405", revocation: t0 + 5 * day)))
        try ws.write("inbox/signed/9405-d.json", try notification("REFUND_REVERSED", signed: t0 + 6 * day, transaction: try transaction("9405")))
        // 9407 (new): its later refund (day 8) read first, the earlier one (day 6) and a reversal
        // dated between them (day 7) after: the day-8 refund, the ledger's, is the last word.
        try ws.write("inbox/signed/9407-a.json", try notification("REFUND", signed: t0 + 8 * day, transaction: try transaction("9407", revocation: t0 + 8 * day)))
        try ws.write("inbox/signed/9407-b.json", try notification("REFUND", signed: t0 + 6 * day, transaction: try transaction("9407", revocation: t0 + 6 * day)))
        try ws.write("inbox/signed/9407-c.json", try notification("REFUND_REVERSED", signed: t0 + 7 * day, transaction: try transaction("9407")))
        // 9408 (new): a reversal (day 7) read before any refund, then the refund of day 8 and
        // another of day 6: the day-8 refund, after the reversal, is the last word.
        try ws.write("inbox/signed/9408-a.json", try notification("REFUND_REVERSED", signed: t0 + 7 * day, transaction: try transaction("9408")))
        try ws.write("inbox/signed/9408-b.json", try notification("REFUND", signed: t0 + 8 * day, transaction: try transaction("9408", revocation: t0 + 8 * day)))
        try ws.write("inbox/signed/9408-c.json", try notification("REFUND", signed: t0 + 6 * day, transaction: try transaction("9408", revocation: t0 + 6 * day)))
        // 9409 (new): a refund and a reversal of one day (the refund an hour after the reversal's
        // signature), the refund read first: as the ledger's are compared, by day, the reversal
        // is the last word; and a second refund of that day read after both neither.
        try ws.write("inbox/signed/9409-a.json", try notification("REFUND", signed: t0 + 7 * day + 3_600_000, transaction: try transaction("9409", revocation: t0 + 7 * day + 3_600_000)))
        try ws.write("inbox/signed/9409-b.json", try notification("REFUND_REVERSED", signed: t0 + 7 * day, transaction: try transaction("9409")))
        try ws.write("inbox/signed/9409-c.json", try notification("REFUND", signed: t0 + 7 * day + 7_200_000, transaction: try transaction("9409", revocation: t0 + 6 * day)))
        // 9410 (new): refunded (day 8), reversed (day 7), refunded again (day 6), read so: the
        // day-8 refund the ledger holds is the latest word, and the finding says so.
        try ws.write("inbox/signed/9410-a.json", try notification("REFUND", signed: t0 + 8 * day, transaction: try transaction("9410", revocation: t0 + 8 * day)))
        try ws.write("inbox/signed/9410-b.json", try notification("REFUND_REVERSED", signed: t0 + 7 * day, transaction: try transaction("9410")))
        try ws.write("inbox/signed/9410-c.json", try notification("REFUND", signed: t0 + 9 * day, transaction: try transaction("9410", revocation: t0 + 6 * day)))
        // 9406: reversed (day 5), then a second refund dated before that reversal (day 4) read
        // after it: the reversal the ledger keeps is the last word.
        try ws.write("inbox/signed/9406-c.json", try notification("REFUND_REVERSED", signed: t0 + 5 * day, transaction: try transaction("9406")))
        try ws.write("inbox/signed/9406-d.json", try notification("REFUND", signed: t0 + 7 * day, transaction: try transaction("9406", revocation: t0 + 4 * day)))
        try ws.run("2023-11-23")
        XCTAssertEqual(try rows("SELECT transaction_id, store_refund_share FROM store_transaction ORDER BY 1"),
                       [["9403", "0"], ["9404", "100000"], ["9405", "0"], ["9406", ""], ["9407", "100000"], ["9408", "100000"], ["9409", ""], ["9410", "100000"]])
        let said9410 = try rows("SELECT code, message FROM finding WHERE transaction_id = '9410'")
        XCTAssertTrue(said9410.contains { $0[0] == "REFUND_AFTER_REVERSAL" && $0[1].contains("dated before that reversal: reconciliation takes the store's latest-dated word (trace lists them)") }, "\(said9410)")
        XCTAssertTrue(try rows("SELECT message FROM finding WHERE code = 'REFUND_AFTER_REVERSAL' AND transaction_id = '9406'").first?.first?
            .contains("dated before that reversal: reconciliation takes the store's latest-dated word (trace lists them)") == true)
        XCTAssertEqual(try open(), ["9404", "9407", "9408", "9410"])
        XCTAssertTrue(try rows("SELECT detail FROM exception WHERE resolved_on IS NULL AND transaction_id = '9404'").first?.first?.contains("was refunded in full, as the store said last (a refund dated after its reversal, or a second refund the ledger does not post") == true)
        // A stale record of the second refund read again changes nothing, and is not said again;
        // nor is the second reversal sent again under a new UUID.
        let said = try rows("SELECT count(*) FROM finding")
        try ws.write("inbox/signed/9403-e.json", try notification("REFUND", signed: t0 + 9 * day, transaction: try transaction("9403", revocation: t0 + 6 * day)))
        try ws.write("inbox/signed/9403-f.json", try notification("REFUND_REVERSED", signed: t0 + 8 * day, transaction: try transaction("9403")))
        try ws.run("2023-11-24")
        XCTAssertEqual(try open(), ["9404", "9407", "9408", "9410"])
        XCTAssertEqual(try rows("SELECT count(*) FROM finding"), said)
        // 9406 refunded again half an hour after its reversal's signature, the same day (an
        // auditor's review: the finding said "dated on or before that reversal"): the day's
        // reversal stays the last word, and the finding says why.
        try ws.write("inbox/signed/9406-e.json", try notification("REFUND", signed: t0 + 9 * day, transaction: try transaction("9406", revocation: t0 + 5 * day + 1_800_000)))
        try ws.run("2023-11-25")
        XCTAssertEqual(try open(), ["9404", "9407", "9408", "9410"])
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'REFUND_AFTER_REVERSAL' AND transaction_id = '9406' AND message LIKE '%dated the day of that reversal, which the ledger, comparing a refund and a reversal by day, takes as the later, whatever the hours: reconciliation follows that reversal (trace lists them)%'"), [["1"]])
    }

    /// A receipt's upgrade refund, its sale waiting for its order, then the signed record of it
    /// giving the prorated share: taken from the signed record (it kept the receipt's full
    /// refund), and the receipt's UPGRADE_REFUND resolved, saying so.
    func testASignedRecordGivesAWaitingReceiptsUpgradeRefundItsShare() throws {
        try ws.write("inbox/receipts/u.jsonl", Receipt.response([Receipt.item("9051", product: "com.example.product", purchased: "2023-11-13T22:13:20Z",
                                                                               cancelled: "2023-11-14T10:00:00Z", upgraded: true),
                                                                 Receipt.item("9052", product: "com.example.product", purchased: "2023-11-13T22:13:20Z",
                                                                              cancelled: "2023-11-14T10:00:00Z", upgraded: true)],
                                                                environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.run("2023-11-14")
        XCTAssertEqual(try rows("SELECT sale_status, revocation_percentage FROM store_transaction WHERE transaction_id = '9051'"), [["pending", ""]])
        XCTAssertEqual(try rows("SELECT resolved_run_id IS NULL FROM finding WHERE code = 'UPGRADE_REFUND'"), [["1"], ["1"]])
        // 9051's signed record: the same day's refund three minutes later, 40%; 9052's: the next day's.
        func signed(_ id: String, revoked: String) throws -> String {
            try signer.sign(payload: TestSigner.transactionPayload(
                transactionId: id, productId: "com.example.product", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0,
                revocationDateMs: Receipt.ms(revoked), revocationReason: 0, revocationType: "REFUND_PRORATED",
                revocationPercentage: 40_000, environment: "Sandbox", storefront: "AUS", priceMilliunits: 2990, currency: "AUD",
                extra: ["isUpgraded": true]))
        }
        try ws.write("inbox/signed/u.jws", try signed("9051", revoked: "2023-11-14T10:03:00Z") + "\n" + (try signed("9052", revoked: "2023-11-15T09:00:00Z")) + "\n")
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT kind, storefront, gross_minor, ifnull(refund_percentage, '') FROM entry WHERE transaction_id = '9051' ORDER BY id"),
                       [["sale", "AUS", "299", ""], ["refund", "AUS", "120", "40000"]])
        XCTAssertEqual(try rows("SELECT resolved_run_id IS NULL, message FROM finding WHERE code = 'UPGRADE_REFUND' AND transaction_id = '9051'"),
                       [["0", "inbox/signed/u.jws:1 gives the refund's share, 40.000%: posted at it, as Apple refunded it"]])
        // 9053: its receipt waiting, then one file with another day's refund (adopted first, said
        // as REFUND_AGAIN) and the signed record of the receipt's own refund with its share: the
        // share is taken whichever is read first.
        try ws.write("inbox/receipts/v.jsonl", Receipt.response([Receipt.item("9053", product: "com.example.product", purchased: "2023-11-14T12:00:00Z",
                                                                               cancelled: "2023-11-15T10:00:00Z", upgraded: true)],
                                                                environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.run("2023-11-15")
        func signed53(revoked: String) throws -> String {
            try signer.sign(payload: TestSigner.transactionPayload(
                transactionId: "9053", productId: "com.example.product", purchaseDateMs: Receipt.ms("2023-11-14T12:00:00Z"), signedDateMs: t0,
                revocationDateMs: Receipt.ms(revoked), revocationReason: 0, revocationType: "REFUND_PRORATED",
                revocationPercentage: 40_000, environment: "Sandbox", storefront: "AUS", priceMilliunits: 2990, currency: "AUD",
                extra: ["isUpgraded": true]))
        }
        try ws.write("inbox/signed/v.jws", try signed53(revoked: "2023-11-16T09:00:00Z") + "\n" + (try signed53(revoked: "2023-11-15T10:03:00Z")) + "\n")
        try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT kind, gross_minor, ifnull(refund_percentage, '') FROM entry WHERE transaction_id = '9053' ORDER BY id"),
                       [["sale", "299", ""], ["refund", "120", "40000"]])
        XCTAssertEqual(try rows("SELECT code, resolved_run_id IS NULL FROM finding WHERE transaction_id = '9053' AND code <> 'ORDER_WAIT' ORDER BY code"),
                       [["REFUND_AGAIN", "1"], ["UPGRADE_REFUND", "0"]])
        // 9054: its receipt waiting, a signed REFUND_PRORATED without its share (said), then one
        // with it: taken, and the finding resolved. 9055: its receipt waiting, a reversal dated
        // before its refund (the refund stays the store's word), then the refund's share: the
        // store's word takes it too.
        try ws.write("inbox/receipts/w.jsonl", Receipt.response([
            Receipt.item("9054", product: "com.example.product", purchased: "2023-11-16T12:00:00Z", cancelled: "2023-11-17T10:00:00Z"),
            Receipt.item("9055", product: "com.example.product", purchased: "2023-11-16T12:00:00Z", cancelled: "2023-11-17T10:00:00Z"),
        ], environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.run("2023-11-17")
        func prorated(_ id: String, revoked: String, percentage: Int64?) throws -> String {
            try signer.sign(payload: TestSigner.transactionPayload(
                transactionId: id, productId: "com.example.product", purchaseDateMs: Receipt.ms("2023-11-16T12:00:00Z"), signedDateMs: t0,
                revocationDateMs: Receipt.ms(revoked), revocationReason: 0, revocationType: "REFUND_PRORATED",
                revocationPercentage: percentage, environment: "Sandbox", storefront: "AUS", priceMilliunits: 2990, currency: "AUD"))
        }
        let unrevoked55 = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9055", productId: "com.example.product", purchaseDateMs: Receipt.ms("2023-11-16T12:00:00Z"), signedDateMs: t0,
            environment: "Sandbox", storefront: "AUS", priceMilliunits: 2990, currency: "AUD"))
        try ws.write("inbox/signed/w1.jws", try prorated("9054", revoked: "2023-11-17T10:01:00Z", percentage: nil) + "\n"
                     + (try prorated("9054", revoked: "2023-11-17T10:02:00Z", percentage: 40_000)) + "\n")
        try ws.write("inbox/signed/w2.json", try notification("REFUND_REVERSED", signed: Receipt.ms("2023-11-16T20:00:00Z"), transaction: unrevoked55))
        try ws.write("inbox/signed/w3.jws", try prorated("9055", revoked: "2023-11-17T10:02:00Z", percentage: 40_000) + "\n")
        try ws.run("2023-11-18")
        XCTAssertEqual(try rows("SELECT transaction_id, refund_percentage FROM entry WHERE kind = 'refund' AND transaction_id IN ('9054', '9055') ORDER BY 1"),
                       [["9054", "40000"], ["9055", "40000"]])
        XCTAssertEqual(try rows("SELECT resolved_run_id IS NULL FROM finding WHERE code = 'REFUND_SHARE_UNKNOWN' AND transaction_id = '9054'"), [["0"]])
        XCTAssertEqual(try rows("SELECT store_refund_share FROM store_transaction WHERE transaction_id = '9055'"), [["40000"]])
        // 9052: the receipt's refund kept (in full), its upgrade finding open, the other day's refund said.
        XCTAssertEqual(try rows("SELECT kind, gross_minor, ifnull(refund_percentage, '') FROM entry WHERE transaction_id = '9052' ORDER BY id"),
                       [["sale", "299", ""], ["refund", "299", "100000"]])
        XCTAssertEqual(try rows("SELECT code, resolved_run_id IS NULL FROM finding WHERE transaction_id = '9052' AND code <> 'ORDER_WAIT' ORDER BY code"),
                       [["REFUND_AGAIN", "1"], ["UPGRADE_REFUND", "1"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A second refund read before the reversal of the first (the same night, its file read
    /// first): it was dropped in silence (the first refund's date kept, no reversal asked for
    /// yet). It is said (REFUND_AGAIN), and the reversal then posts as usual.
    func testASecondRefundReadBeforeTheReversalIsSaid() throws {
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9081")))
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/n2.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9081", revocation: refundAt)))
        try ws.run("2023-11-17")
        let again = t0 + 7 * 86_400_000
        // Files are read in name order: "a-" (the second refund) before "b-" (the reversal).
        try ws.write("inbox/signed/a-refund.json", try notification("REFUND", signed: again, transaction: try transaction("9081", revocation: again)))
        try ws.write("inbox/signed/b-reversal.json", try notification("REFUND_REVERSED", signed: t0 + 6 * 86_400_000, transaction: try transaction("9081")))
        let r = try ws.run("2023-11-22")
        XCTAssertEqual(try rows("SELECT kind FROM entry ORDER BY id").map { $0[0] }, ["sale", "refund", "refund_reversal"])
        XCTAssertTrue(r.problems.contains { $0.contains("REFUND_AGAIN") && $0.contains("a-refund.json") && $0.contains("refunded in full on 2023-11-21, but the ledger holds its refund of 2023-11-16") }, "\(r.problems)")
        // The first refund sent again (its own date) says nothing.
        try ws.write("inbox/signed/c-same.json", try notification("REFUND", signed: t0 + 8 * 86_400_000, transaction: try transaction("9081", revocation: refundAt)))
        XCTAssertEqual(try ws.run("2023-11-23").problems.filter { $0.contains("9081") }, [])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A refund and its reversal read the same night, the reversal's file first: the refund
    /// posts in the posting stage and the reversal with it, so nothing waited.
    func testARefundAndItsReversalOnTheSameNightOpenNoWaitingFinding() throws {
        try ws.write("inbox/signed/a.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9071")))
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/b.json", try notification("REFUND_REVERSED", signed: t0 + 3 * 86_400_000, transaction: try transaction("9071")))
        try ws.write("inbox/signed/c.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9071", revocation: refundAt)))
        XCTAssertEqual(try ws.run("2023-11-20").counts.entriesPosted, 3)
        XCTAssertEqual(try rows("SELECT count(*) FROM finding"), [["0"]])
    }

    /// A `.jws` file read while it was being written: its last line, with no line end and cut
    /// short, is `TRUNCATED`; the next night, the file whole, the line is read and the
    /// rejection resolved. A whole last line without a line end is read as any other.
    func testASignedLineCutShortIsTruncatedAndResolvedWhenTheFileIsWhole() throws {
        let a = try transaction("9081"), b = try transaction("9082")
        try ws.write("inbox/signed/day.jws", a + "\n" + String(b.prefix(b.count / 2)))
        try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT line, outcome, reason_code, resolved_run_id IS NULL FROM source_record ORDER BY id"),
                       [["1", "verified", "JWS_VERIFIED", "1"], ["2", "rejected", "TRUNCATED", "1"]])
        try ws.write("inbox/signed/day.jws", a + "\n" + b)
        try ws.run("2023-11-21")
        XCTAssertEqual(try rows("SELECT line, outcome, reason_code, resolved_note FROM source_record WHERE reason_code = 'TRUNCATED'"),
                       [["2", "rejected", "TRUNCATED", "line 2: its record is whole at line 2 of a later version of inbox/signed/day.jws"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE transaction_id IN ('9081', '9082')"), [["2"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
    }

    /// A file's last line without a line end that is a whole compact JWS of no kind read here
    /// (Apple's mock `transactionInfo`: a bundle id and a date) is refused for what it says,
    /// as with a line end after it (it was TRUNCATED, "resolved when the file is read whole",
    /// which it never would be); the same cut inside its signature is TRUNCATED.
    func testAWholeJWSOfNoKnownKindWithoutALineEndIsRefusedForWhatItSays() throws {
        let mock = try TestSigner.appleFixtureText("swift/mock_signed_data/transactionInfo").trimmingCharacters(in: .whitespacesAndNewlines)
        try ws.write("inbox/signed/whole.jws", mock)
        try ws.write("inbox/signed/cut.jws", String(mock.dropLast(10)))
        // Text no signed record begins with (a base64 receipt, as Apple's legacy and Xcode
        // samples are) is refused for what it is; the start of a JWS header cut short waits.
        try ws.write("inbox/signed/receipt.txt", "ewoJInNpZ25hdHVyZSIgPSAiQXBkeEpkdE53UFUyckE1L2NuM2tJTzFPVGsyNWZlREthMGFhZ3l5UnZlV2xjRmxnbHY2UkY2em")
        try ws.write("inbox/signed/header.jws", String(mock.prefix(20)))
        try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT f.path, r.reason_code FROM source_record r JOIN source_file f ON f.id = r.file_id ORDER BY f.path"),
                       [["inbox/signed/cut.jws", "TRUNCATED"], ["inbox/signed/header.jws", "TRUNCATED"], ["inbox/signed/receipt.txt", "MALFORMED"],
                        ["inbox/signed/whole.jws", "UNKNOWN_SIGNED_PAYLOAD"]])
    }

    /// Data that belongs elsewhere says what it looks like in its rejection: Google Play's (in
    /// either folder), a notification body among the receipts, a verifyReceipt response among
    /// the signed data (each was only "not a verifyReceipt response" or "not a notification body").
    func testDataThatBelongsElsewhereSaysWhatItLooksLike() throws {
        let play = #"{"packageName": "app.example", "purchaseToken": "t-1", "orderId": "GPA.1000-2000"}"#
        try ws.write("inbox/receipts/play.jsonl", play + "\n" + #"{"signedPayload": "a.b.c"}"# + "\n")
        try ws.write("inbox/signed/mixed.jsonl", play + "\n" + #"{"status": 0, "receipt": {"in_app": []}}"# + "\n"
                     + #"{"voidedPurchases": [{"kind": "androidpublisher#voidedPurchase", "purchaseToken": "t-2"}]}"# + "\n")
        try ws.run("2023-11-20")
        let reasons = try ledger().read { try $0.recordProblems() }.sorted { ($0.path, $0.line) < ($1.path, $1.line) }.map { "\($0.path):\($0.line) \($0.code) \($0.reason)" }
        XCTAssertEqual(reasons, [
            "inbox/receipts/play.jsonl:1 NO_STATUS no status field: not a verifyReceipt response (it looks like Google Play data (packageName, purchaseToken): iapledger reads the App Store's only)",
            "inbox/receipts/play.jsonl:2 NO_STATUS no status field: not a verifyReceipt response (it is App Store signed data: signed transactions and notifications go in inbox/signed/)",
            "inbox/signed/mixed.jsonl:1 MALFORMED not a notification body {\"signedPayload\": \"...\"} (it looks like Google Play data (packageName, purchaseToken): iapledger reads the App Store's only)",
            "inbox/signed/mixed.jsonl:2 MALFORMED not a notification body {\"signedPayload\": \"...\"} (it is a verifyReceipt response: those go in inbox/receipts/)",
            // The fields it has are named (a voided-purchases list has no packageName).
            "inbox/signed/mixed.jsonl:3 MALFORMED not a notification body {\"signedPayload\": \"...\"} (it looks like Google Play data (voidedPurchases): iapledger reads the App Store's only)",
        ])
    }

    /// A notification whose transaction is invalid (a currency no ISO code), sent again by Apple
    /// in another file: the night links the resend's record to the transaction it names, and
    /// verify takes that link as the record's own (it said it was made up; a review).
    func testAResentNotificationOfAnInvalidTransactionIsLinkedAsItNamesIt() throws {
        let body = try notification("REFUND", uuid: "5e1f0000-0000-4000-8000-000000000001", transaction: try transaction("9441", revocation: t0, currency: "XYZ"))
        try ws.write("inbox/signed/a.json", body)
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9441'"), [["INVALID_TRANSACTION"]])
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        try ws.write("inbox/signed/b.json", body)
        try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT count(*) FROM transaction_source WHERE transaction_id = '9441'"), [["1"]])
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems.map(\.message))")
    }

    /// A signed refund whose share is out of range (0, 150%) is refused as an invalid transaction
    /// whose finding says nothing of the record is taken: the sale another record brought
    /// stands, and no refund is posted.
    func testARefundShareOutOfRangeTakesNothingAndSaysSo() throws {
        try ws.write("inbox/signed/a.jws", try transaction("9431") + "\n")
        try ws.run("2023-11-14")
        let at = t0 + 86_400_000
        try ws.write("inbox/signed/b.jws", try transaction("9431", revocation: at, type: "REFUND_PRORATED", percentage: 150_000) + "\n")
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT kind FROM entry WHERE transaction_id = '9431'"), [["sale"]])
        let said = try rows("SELECT message FROM finding WHERE code = 'INVALID_TRANSACTION' AND transaction_id = '9431'")
        XCTAssertEqual(said.count, 1)
        XCTAssertTrue(said.first?.first?.hasSuffix("has revocationPercentage 150000: not from 1 to 100000; nothing of this record is taken (no sale, no refund from it)") == true, "\(said)")
    }

    /// A REFUND_REVERSED (carrying a refund) whose transaction contradicts a waiting receipt
    /// sale (another subscription) is a conflict: it asks for no reversal and gives no refund,
    /// as any record that contradicts the first source (the night asked for the reversal, and
    /// `verify` then found a request no agreeing notification asked for).
    func testAConflictingSignedRecordOverAWaitingReceiptSaleAsksForNothing() throws {
        try ws.write("inbox/receipts/w.jsonl", Receipt.response([Receipt.item("9045", product: "com.example.product", purchased: "2023-11-13T22:13:20Z",
                                                                               original: "9000")], environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.run("2023-11-14")
        XCTAssertEqual(try rows("SELECT sale_status FROM store_transaction WHERE transaction_id = '9045'"), [["pending"]], "waits for its order")
        let refundAt = t0 + 86_400_000
        let conflicting = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9045", originalTransactionId: "9999", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0, revocationDateMs: refundAt,
            revocationReason: 0, environment: "Sandbox", storefront: "AUS", priceMilliunits: 2990, currency: "AUD"))
        try ws.write("inbox/signed/n.json", try notification("REFUND_REVERSED", signed: refundAt, transaction: conflicting))
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9045' ORDER BY code"), [["ORDER_WAIT"], ["TRANSACTION_CONFLICT"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM reversal_request"), [["0"]])
        XCTAssertEqual(try rows("SELECT cancellation_ms IS NULL FROM store_transaction WHERE transaction_id = '9045'"), [["1"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
    }

    /// A receipt's waiting sale, a conflicting signed record (a storefront and price, another
    /// subscription: not taken), then its own signed record, agreeing: that one becomes the
    /// first while the sale waits, after the conflicting one. `verify` took the conflicting
    /// record, before the first and giving a storefront, for a first moved by hand (a diff review).
    func testASignedRecordTakenAfterAConflictingOneIsTheFirstForVerify() throws {
        try ws.write("inbox/receipts/w.jsonl", Receipt.response([Receipt.item("9046", product: "com.example.product", purchased: "2023-11-13T22:13:20Z",
                                                                               original: "9000")], environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.run("2023-11-14")
        func payload(original: String) -> [String: Any] {
            TestSigner.transactionPayload(transactionId: "9046", originalTransactionId: original, purchaseDateMs: t0 - 86_400_000, signedDateMs: t0,
                                          environment: "Sandbox", storefront: "AUS", priceMilliunits: 2990, currency: "AUD")
        }
        try ws.write("inbox/signed/a.jws", try signer.sign(payload: payload(original: "9999")) + "\n" + (try signer.sign(payload: payload(original: "9000"))) + "\n")
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9046' AND resolved_run_id IS NULL ORDER BY code"), [["TRANSACTION_CONFLICT"]])
        XCTAssertEqual(try rows("SELECT f.path, r.line FROM store_transaction t JOIN source_record r ON r.id = t.first_record_id JOIN source_file f ON f.id = r.file_id WHERE t.transaction_id = '9046'"),
                       [["inbox/signed/a.jws", "2"]])
        XCTAssertEqual(try rows("SELECT storefront, gross_minor FROM entry WHERE transaction_id = '9046'"), [["AUS", "299"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        // Its first moved by hand to the conflicting record, the stored fields made that
        // record's (a second diff review: it passed, the record the night refused taken as the
        // sale's source): named, at that record and at the one the night took.
        let path = ws.root.appendingPathComponent("ledger.sqlite").path
        let refused = try XCTUnwrap(try rows("SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE f.path = 'inbox/signed/a.jws' AND r.line = 1").first?.first)
        try Tamper.run(path, pastAll: [], "UPDATE store_transaction SET first_record_id = \(refused), original_transaction_id = '9999' WHERE transaction_id = '9046'")
        let named = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(named.contains { $0.hasPrefix("transaction 9046 has inbox/signed/a.jws:1 (record #\(refused)) as its first, after inbox/receipts/w.jsonl:1, but the night never takes such a record over it (it conflicts with it)") }, "\(named)")
    }

    /// Apple's signed data calling sandbox a transaction the production book holds from an
    /// unsigned receipt: the production book may hold a test purchase, said on its Run Info
    /// (it was on the sandbox one, "a test purchase, nothing to book", while the production
    /// figures held the sale). A receipt contradicting a receipt stays test data's.
    func testSignedDataCallingAProductionReceiptSaleSandboxIsTheProductionBooks() throws {
        try ws.write("inbox/receipts/p.jsonl", Receipt.response([Receipt.item("9048", product: "com.example.product", purchased: "2023-11-13T22:13:20Z")],
                                                                bundle: "com.example") + "\n")
        try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT book FROM entry WHERE transaction_id = '9048'"), [["production"]])
        try ws.write("inbox/signed/s.jws", try transaction("9048", environment: "Sandbox") + "\n")
        try ws.run("2023-11-17")
        let day = Day(iso: "2023-11-17")!
        let production = try ledger().read { try $0.findingsOpen(on: day, book: "production", limit: 10) }.rows
        XCTAssertEqual(production.map { "\($0.code) \($0.transactionId ?? "")" }, ["TRANSACTION_CONFLICT 9048"])
        XCTAssertTrue(production[0].message.hasSuffix("so the production book holds a purchase Apple's signed data calls sandbox, on the word of its first source, an unsigned receipt: if it is a test purchase, reverse it by hand"), production[0].message)
        XCTAssertEqual(try ledger().read { try $0.findingsOpen(on: day, book: "sandbox", limit: 10) }.rows.map(\.code), [])
    }

    /// A REFUND_REVERSED whose transaction gives a posted receipt sale its storefront and price
    /// (said: SIGNED_AFTER_POSTING) agrees with it, and asks for its reversal; `verify` takes the
    /// request as asked (judging the notification by its own stricter comparison, it called it
    /// written by hand).
    func testAReversalAskedByASignedRecordOfAPostedReceiptSaleVerifies() throws {
        try ws.write("inbox/receipts/p.jsonl", Receipt.response([Receipt.item("9047", product: "com.example.product", purchased: "2023-11-13T22:13:20Z")],
                                                                environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT storefront FROM entry WHERE transaction_id = '9047' AND kind = 'sale'"), [["USA"]])
        let at = t0 + 4 * 86_400_000
        try ws.write("inbox/signed/r.json", try notification("REFUND_REVERSED", signed: at, transaction: try transaction("9047", price: 2990, storefront: "AUS", currency: "AUD")))
        try ws.run("2023-11-18")
        XCTAssertEqual(try rows("SELECT count(*) FROM reversal_request WHERE transaction_id = '9047'"), [["1"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
    }

    /// A signed transaction of a family member's shared access moves no money.
    func testAFamilySharedSignedTransactionIsFree() throws {
        try ws.write("inbox/signed/t.jws", try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9041", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0, inAppOwnershipType: "FAMILY_SHARED",
            storefront: "USA", priceMilliunits: 1990, currency: "USD")) + "\n")
        let night = try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT sale_status FROM store_transaction WHERE transaction_id = '9041'"), [["free"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM entry"), [["0"]])
        // Counted in the reports (accounting.md): its book's Summary (sandbox: the test data is) says how many.
        let summary = try XCTUnwrap(XLSXReader.sheets(try XCTUnwrap(night.workbooks.first { $0.lastPathComponent.hasPrefix("sandbox-") }))["Summary"])
        let note = try XCTUnwrap(summary.compactMap(\.first).first { $0.hasPrefix("Not in these figures") })
        XCTAssertTrue(note.contains("Free transactions (1 dated on or before 2023-11-20:"), note)
    }

    /// `iapledger verify` reads signed sources as the night did: a `.json` notification body
    /// after a blank line, and a `.jws` line with spaces around it, are re-derived, not called
    /// "no longer a signed transaction".
    func testVerifyRederivesSignedSourcesAsTheNightReadThem() throws {
        try ws.write("inbox/signed/n1.json", "\n" + (try notification("ONE_TIME_CHARGE", transaction: try transaction("9021"))))
        try ws.write("inbox/signed/t.jws", "  \t" + (try transaction("9022")) + " \n")
        XCTAssertEqual(try ws.run("2023-11-20").counts.entriesPosted, 2)
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.rederived, 2)
    }

    /// A UTF-8 byte order mark at the start of a `.jws` file (accepted in every other input
    /// format) made its first line MALFORMED: it is skipped, and `verify` re-derives the line.
    func testAByteOrderMarkAtTheStartOfAJWSFileIsSkipped() throws {
        try ws.write("inbox/signed/bom.jws", "\u{FEFF}" + (try transaction("9081")) + "\n" + (try transaction("9082")) + "\n")
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.rejected, 0)
        XCTAssertEqual(r.counts.entriesPosted, 2)
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        XCTAssertEqual(audit.rederived, 2)
    }

    /// A signed file that grows between nights: the lines the ledger has are not verified
    /// again on the preparing thread (only hashed), the new one is, and the night posts it.
    func testAGrownSignedFileVerifiesOnlyItsNewLines() throws {
        let first = try notification("ONE_TIME_CHARGE", transaction: try transaction("9031"))
        try ws.write("inbox/signed/n.jsonl", first + "\n")
        try ws.run("2023-11-19")
        try ws.append("inbox/signed/n.jsonl", (try notification("ONE_TIME_CHARGE", transaction: try transaction("9032"))) + "\n")
        let url = ws.root.appendingPathComponent("inbox/signed/n.jsonl")
        let stored = try ledger().read { try $0.recordHashes(path: "inbox/signed/n.jsonl") }
        XCTAssertEqual(stored.count, 1)
        let file = try PreparedFile.prepare(url: url, kind: "signed", workspace: ws.workspace, verifier: ReceiptVerifier(bundleIds: []),
                                            signedVerifier: try NightlyRun.signedDataVerifier(config: try ws.workspace.loadConfig(), workspace: ws.workspace),
                                            storedSigned: stored)
        guard case .signed(let records) = file.body else { return XCTFail("\(file.body)") }
        XCTAssertEqual(records.map { $0.verdict == nil }, [true, false], "the stored line is only hashed")
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.read, 1)
        XCTAssertEqual(r.counts.skipped, 1)
        XCTAssertEqual(r.counts.entriesPosted, 1)
    }

    /// A REFUND_REVERSED notification whose transaction contradicts the stored one (another
    /// product) requests no reversal: the refund stays refunded.
    func testAConflictingReversalIsNotPosted() throws {
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9013")))
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/n2.json", try notification("REFUND", signed: refundAt, transaction:
            try transaction("9013", revocation: refundAt, type: "REFUND_FULL")))
        try ws.run("2023-11-17")
        try ws.write("inbox/signed/n3.json", try notification("REFUND_REVERSED", signed: t0 + 5 * 86_400_000,
                                                               transaction: try transaction("9013", product: "com.example.other")))
        XCTAssertEqual(try ws.run("2023-11-20").counts.entriesPosted, 0)
        XCTAssertEqual(try rows("SELECT kind FROM entry ORDER BY id").map { $0[0] }, ["sale", "refund"])
        XCTAssertEqual(try rows("SELECT code FROM finding WHERE transaction_id = '9013'").map { $0[0] }, ["TRANSACTION_CONFLICT"])
    }

    /// Two signed records of one transaction that disagree on its price, currency or
    /// storefront are not one purchase: a TRANSACTION_CONFLICT naming both, the first kept,
    /// and a refund the second reports is not posted from it. A legacy receipt of the same
    /// transaction read later (no price, no storefront) agrees with the signed one.
    /// A legacy receipt names no storefront or price; a signed record of the same purchase does,
    /// and accounting.md books a sale in the transaction's own storefront at its own price. Read
    /// the same night, or while the sale waits for its order, the signed record gives them; once
    /// the sale is posted from the receipt alone, a booking that differs is said
    /// (SIGNED_AFTER_POSTING), the entry kept. `verify` re-derives each from the record it was
    /// taken from.
    func testASignedRecordGivesAReceiptsTransactionItsOwnStorefrontAndPrice() throws {
        func receipt(_ id: String) -> String {
            Receipt.response([Receipt.item(id, product: "com.example.product", purchased: "2023-11-13T22:13:20Z")],
                             environment: "Sandbox", bundle: "com.example")
        }
        // The same night: 9040's receipt, then its signed record (AUS, 2.99 AUD).
        try ws.write("inbox/receipts/a.jsonl", receipt("9040") + "\n" + receipt("9041") + "\n" + receipt("9042") + "\n")
        try ws.write("inbox/signed/a.jws", try transaction("9040", price: 2990, storefront: "AUS", currency: "AUD") + "\n")
        try ws.run("2023-11-14")
        XCTAssertEqual(try rows("SELECT transaction_id, storefront, currency, gross_minor FROM entry WHERE kind = 'sale' ORDER BY 1"),
                       [["9040", "AUS", "AUD", "299"]])
        XCTAssertEqual(try rows("SELECT transaction_id, substr(pending_reason, 1, 10) FROM store_transaction WHERE sale_status = 'pending' ORDER BY 1"),
                       [["9041", "ORDER_WAIT"], ["9042", "ORDER_WAIT"]])
        // 9041 waits for its order; its signed record comes the next night and books it.
        try ws.write("inbox/signed/b.jws", try transaction("9041", price: 2990, storefront: "AUS", currency: "AUD") + "\n")
        try ws.run("2023-11-15")
        XCTAssertEqual(try rows("SELECT storefront, gross_minor FROM entry WHERE transaction_id = '9041'"), [["AUS", "299"]])
        // 9042's wait ends (booked at default_storefront, USA, 1.99 USD); its signed record says AUS.
        try ws.run("2023-11-16")
        XCTAssertEqual(try rows("SELECT storefront, gross_minor FROM entry WHERE transaction_id = '9042'"), [["USA", "199"]])
        try ws.write("inbox/signed/c.jws", try transaction("9042", price: 2990, storefront: "AUS", currency: "AUD") + "\n")
        // 9043's signed record names another subscription than its receipt: not taken, said.
        try ws.write("inbox/receipts/d.jsonl", Receipt.response([Receipt.item("9043", product: "com.example.product", purchased: "2023-11-13T22:13:20Z",
                                                                               original: "9000")], environment: "Sandbox", bundle: "com.example") + "\n")
        try ws.write("inbox/signed/d.jws", try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9043", originalTransactionId: "9999", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0, environment: "Sandbox",
            storefront: "AUS", priceMilliunits: 2990, currency: "AUD")) + "\n")
        try ws.run("2023-11-17")
        XCTAssertEqual(try rows("SELECT original_transaction_id, ifnull(storefront, '') FROM store_transaction WHERE transaction_id = '9043'"), [["9000", ""]])
        let conflict = try rows("SELECT message FROM finding WHERE code = 'TRANSACTION_CONFLICT' AND transaction_id = '9043'")
        XCTAssertTrue(conflict.first?[0].contains("original transaction 9000 vs 9999; the first is kept, and the storefront and price the signed record gives are not taken") == true, "\(conflict)")
        // A later signed record of the posted 9042 saying the same leaves its one finding as it
        // was, naming the record that first said it (and dismissed, once finance dismissed it).
        let first = try rows("SELECT message FROM finding WHERE code = 'SIGNED_AFTER_POSTING'")
        _ = try LedgerRun.Dismiss.dismiss([], findings: [("SIGNED_AFTER_POSTING", "9042")], workspace: ws.workspace,
                                          reason: "booked", by: "dana", at: "2023-11-17T09:00:00Z")
        try ws.write("inbox/signed/e.jws", try transaction("9042", price: 2990, environment: "Sandbox", storefront: "AUS", currency: "AUD") + " \n")
        XCTAssertEqual(try ws.run("2023-11-18").findingsDismissed, 1)
        XCTAssertEqual(try rows("SELECT message, resolved_note FROM finding WHERE code = 'SIGNED_AFTER_POSTING'"),
                       [[first[0][0], "dismissed by dana on 2023-11-17: booked"]], "the same said again: left as it was, dismissed")
        XCTAssertEqual(try rows("SELECT storefront, gross_minor FROM entry WHERE transaction_id = '9042'"), [["USA", "199"]], "never rewritten")
        // One saying something else refreshes it, open again.
        try ws.write("inbox/signed/f.jws", try transaction("9042", price: 3490, environment: "Sandbox", storefront: "AUS", currency: "AUD") + " \n")
        try ws.run("2023-11-19")
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'SIGNED_AFTER_POSTING' AND resolved_run_id IS NULL"), [["1"]])
        let said = try rows("SELECT transaction_id, message FROM finding WHERE code = 'SIGNED_AFTER_POSTING'")
        XCTAssertEqual(said.map { $0[0] }, ["9042"])
        XCTAssertTrue(said.first?[1].contains("inbox/signed/f.jws:1 gives storefront AUS, price 3.49 AUD; the sale was booked on 2023-11-13 from its legacy receipt, which names neither, at storefront USA, gross 1.99 USD") == true, "\(said)")
        XCTAssertEqual(try rows("SELECT transaction_id FROM finding WHERE code = 'TRANSACTION_CONFLICT'"), [["9043"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
        XCTAssertEqual(r.rederived, 4)
        // Each keeps both records as sources: trace lists the receipt and the signed record.
        let t = try XCTUnwrap(ledger().read { try $0.traceTransaction("9040", asOf: nil) })
        XCTAssertEqual(Set(t.sources.map(\.path)), ["inbox/receipts/a.jsonl", "inbox/signed/a.jws"])
    }

    /// Apple signs a free trial as an offer at price 0 (`offerDiscountType` FREE_TRIAL): the
    /// same free purchase as the legacy receipt's trial, not a conflict ("free vs paid" was
    /// said of every trial a backend forwarded both ways). A trial receipt whose signed record
    /// gives a price is still one.
    func testASignedFreeTrialAtPriceZeroAgreesWithTheReceiptsTrial() throws {
        func receipt(_ id: String) -> String {
            Receipt.response([Receipt.item(id, product: "com.example.product", purchased: "2023-11-13T22:13:20Z", trial: true)],
                             environment: "Sandbox", bundle: "com.example")
        }
        try ws.write("inbox/receipts/a.jsonl", receipt("9050") + "\n" + receipt("9051") + "\n")
        try ws.write("inbox/signed/a.jws", try transaction("9050", price: 0, offer: 1) + "\n" + (try transaction("9051", price: 1990)) + "\n")
        try ws.run("2023-11-14")
        XCTAssertEqual(try rows("SELECT transaction_id FROM finding WHERE code = 'TRANSACTION_CONFLICT'"), [["9051"]])
        let conflict = try rows("SELECT message FROM finding WHERE code = 'TRANSACTION_CONFLICT'")
        XCTAssertTrue(conflict.first?[0].contains("free vs paid") == true, "\(conflict)")
        XCTAssertEqual(try rows("SELECT transaction_id, sale_status, ifnull(storefront, ''), ifnull(price_milliunits, '') FROM store_transaction ORDER BY 1"),
                       [["9050", "free", "USA", "0"], ["9051", "free", "", ""]],
                       "9051 is the receipt's trial (the first record, kept): free at once, with no order's storefront to wait for")
        XCTAssertEqual(try rows("SELECT count(*) FROM entry"), [["0"]])
        let r = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(r.ok, "\(r.problems)")
    }

    func testSignedRecordsDisagreeingOnPriceOrStorefrontConflict() throws {
        try ws.write("inbox/signed/a.jws", [try transaction("9030"), try transaction("9031"), try transaction("9032")].joined(separator: "\n") + "\n")
        try ws.run("2023-11-17")
        try ws.write("inbox/receipts/r.json", Receipt.response([Receipt.item("9030", product: "com.example.product", purchased: "2023-11-13T22:13:20Z")],
                                                                environment: "Sandbox", bundle: "com.example"))
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/b.jws", [
            try transaction("9030", price: 2990, revocation: refundAt, type: "REFUND_FULL"),
            try transaction("9031", revocation: refundAt, type: "REFUND_FULL", currency: "EUR"),
            try transaction("9032", revocation: refundAt, type: "REFUND_FULL", storefront: "DEU"),
        ].joined(separator: "\n") + "\n")
        try ws.run("2023-11-20")
        let findings = try rows("SELECT transaction_id, message FROM finding WHERE code = 'TRANSACTION_CONFLICT' ORDER BY transaction_id")
        XCTAssertEqual(findings.map { $0[0] }, ["9030", "9031", "9032"])
        XCTAssertTrue(findings[0][1].contains("price 1.990 USD vs 2.990 USD"), findings[0][1])
        XCTAssertTrue(findings[1][1].contains("price 1.990 USD vs 1.990 EUR"), findings[1][1])
        XCTAssertTrue(findings[2][1].contains("storefront USA vs DEU"), findings[2][1])
        XCTAssertTrue(findings[0][1].contains("inbox/signed/b.jws:1"), findings[0][1])
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE kind = 'refund'"), [["0"]], "no refund from a conflicting record")
        XCTAssertEqual(try rows("SELECT transaction_id, price_milliunits, currency, storefront FROM store_transaction ORDER BY transaction_id"),
                       [["9030", "1990", "USD", "USA"], ["9031", "1990", "USD", "USA"], ["9032", "1990", "USD", "USA"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE kind = 'sale'"), [["3"]])
    }

    func testResentNotificationAndLegacyPlusSignedPostOnce() throws {
        let uuid = "6f1b3c1e-0000-4000-8000-000000000001"
        let body = try notification("ONE_TIME_CHARGE", uuid: uuid, transaction: try transaction("9004"))
        try ws.write("inbox/signed/a.jsonl", body + "\n" + body + "\n")
        try ws.write("inbox/signed/b.json", body)
        // The same transaction from a legacy receipt (no price there): still one sale.
        try ws.write("inbox/receipts/r.json", Receipt.response([Receipt.item("9004", product: "com.example.product", purchased: "2023-11-13T22:13:20Z")],
                                                                environment: "Sandbox", bundle: "com.example"))
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.entriesPosted, 1)
        XCTAssertEqual(try rows("SELECT count(*) FROM notification"), [["1"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM entry"), [["1"]])
        // Every source that brought it is kept for the trace: the first as the transaction's
        // first record, the three after it linked.
        XCTAssertEqual(try rows("SELECT count(*) FROM transaction_source WHERE transaction_id = '9004'"), [["3"]])
        let sources = try ledger().read { try $0.traceTransaction("9004", asOf: nil) }?.sources
        XCTAssertEqual(sources?.map { "\($0.path):\($0.line)" }, ["inbox/receipts/r.json:1", "inbox/signed/a.jsonl:1", "inbox/signed/a.jsonl:2", "inbox/signed/b.json:1"])
        // A ledger written before also linked the first record: the trace is the same.
        try ledger().write { w in
            try w.linkSource(transactionId: "9004", recordId: try XCTUnwrap(try w.transaction("9004")).firstRecordId)
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM transaction_source WHERE transaction_id = '9004'"), [["4"]])
        XCTAssertEqual(try ledger().read { try $0.traceTransaction("9004", asOf: nil) }?.sources.map { "\($0.path):\($0.line)" },
                       sources?.map { "\($0.path):\($0.line)" })
        XCTAssertEqual(try ws.run("2023-11-21").counts.entriesPosted, 0)
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'NOTIFICATION_UUID_REUSED'"), [["0"]], "sent again unchanged: nothing said")
        // Another notification under that UUID (a REFUND of it) is not Apple's resend: it was
        // passed over without a word (the refund its signed transaction carries never posted,
        // and verify said it was removed). Its transaction is read as any signed one (the
        // refund posts), and the reuse is said.
        try ws.write("inbox/signed/c.jsonl", try notification("REFUND", uuid: uuid, transaction: try transaction("9004", revocation: t0)) + "\n")
        XCTAssertEqual(try ws.run("2023-11-22").counts.entriesPosted, 1)
        XCTAssertEqual(try rows("SELECT kind FROM entry WHERE transaction_id = '9004' ORDER BY id"), [["sale"], ["refund"]])
        let said = try rows("SELECT transaction_id, message FROM finding WHERE code = 'NOTIFICATION_UUID_REUSED'")
        XCTAssertEqual(said.map { $0[0] }, ["9004"])
        XCTAssertTrue(said.first?[1].hasPrefix("inbox/signed/c.jsonl:1: notification REFUND of transaction 9004 repeats the notificationUUID \(uuid) of ONE_TIME_CHARGE of transaction 9004 read from inbox/signed/a.jsonl:1, with other content") == true, "\(said)")
        let audit = try Audit(workspace: ws.workspace).run(); XCTAssertTrue(audit.ok, "\(audit.problems.map(\.message))")
        // The notification's row changed past its trigger (another type, transaction and day,
        // as `trace` would show it as Apple's): named, field by field, against its record.
        let db = ws.root.appendingPathComponent("ledger.sqlite").path
        try Tamper.run(db, past: "notification_no_update", "UPDATE notification SET notification_type = 'CONSUMPTION_REQUEST', transaction_id = '9005', signed_ms = signed_ms - 86400000")
        let changed = try Audit(workspace: ws.workspace).run().problems.map(\.message)
        XCTAssertTrue(changed.contains { $0.hasPrefix("the ledger holds notification \(uuid) as read from inbox/signed/a.jsonl:1 with type CONSUMPTION_REQUEST, its record says ONE_TIME_CHARGE; signedDate ")
                && $0.hasSuffix("; transaction 9005, its record says 9004: changed in the ledger after it was read (trace shows it as Apple's)") }, "\(changed)")
        try Tamper.run(db, past: "notification_no_update", "UPDATE notification SET notification_type = 'ONE_TIME_CHARGE', transaction_id = '9004', signed_ms = signed_ms + 86400000")
        XCTAssertTrue(try Audit(workspace: ws.workspace).run().ok)
        // Sent again (Apple retries, after finance dismissed it): said once, nothing posted twice.
        try ws.write("inbox/signed/d.jsonl", try String(contentsOf: ws.root.appendingPathComponent("inbox/signed/c.jsonl"), encoding: .utf8) + "\n")
        XCTAssertEqual(try ws.run("2023-11-23").counts.entriesPosted, 0)
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'NOTIFICATION_UUID_REUSED'"), [["1"]])
    }

    /// A notification that carries no transaction is verified and kept, its record saying
    /// nothing is posted from it; RESCIND_CONSENT names its app in `appData` (it was rejected as
    /// naming no app), and one of another app there is rejected.
    func testANotificationWithoutATransactionSaysNothingIsPostedAndAppDataNamesItsApp() throws {
        func rescind(_ bundle: String) throws -> String {
            let jws = try signer.sign(payload: ["notificationType": "RESCIND_CONSENT", "notificationUUID": UUID().uuidString.lowercased(),
                                                "version": "2.0", "signedDate": t0,
                                                "appData": ["appAppleId": 41234, "bundleId": bundle, "environment": "Production",
                                                            "signedAppTransactionInfo": "signed_app_transaction_info_value"]])
            return "{\"signedPayload\": \"\(jws)\"}"
        }
        try ws.write("inbox/signed/n.jsonl", [try rescind("com.example"), try notification("TEST", transaction: nil), try rescind("com.other")].joined(separator: "\n") + "\n")
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.verified, 2)
        let records = try rows("SELECT line, outcome, reason_code, reason FROM source_record ORDER BY line")
        XCTAssertEqual(records.map { "\($0[0]) \($0[1]) \($0[2])" }, ["1 verified JWS_VERIFIED", "2 verified JWS_VERIFIED", "3 rejected WRONG_BUNDLE_ID"])
        for r in records.prefix(2) {
            XCTAssertTrue(r[3].hasSuffix("; it carries no transaction (a test, a summary, a notice of renewal or consent), so nothing is posted from it"), r[3])
        }
        XCTAssertTrue(records[0][3].hasPrefix("notification RESCIND_CONSENT "), records[0][3])
    }

    /// A cumulative signed export rewritten in place: read whole as [A, B], then caught cut
    /// inside B as [A, B, C] was written, then whole: its cut record is settled by B, stored
    /// the first night (so not verified again), which is whole as read.
    func testACutSignedDocumentIsSettledByARecordStoredBefore() throws {
        let a = try notification("CONSUMPTION_REQUEST", transaction: try transaction("9701"))
        let b = try notification("CONSUMPTION_REQUEST", transaction: try transaction("9702"))
        let c = try notification("CONSUMPTION_REQUEST", transaction: try transaction("9703"))
        try ws.write("inbox/signed/export.json", "[\n" + a + ",\n" + b + "\n]\n")
        try ws.run("2023-11-20")
        let whole = "[\n" + a + ",\n" + b + ",\n" + c + "\n]\n"
        try ws.write("inbox/signed/export.json", String(whole.prefix(("[\n" + a + ",\n").count + b.count - 20)))
        try ws.run("2023-11-21")
        XCTAssertEqual(try rows("""
            SELECT r.line, r.reason_code FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = 'inbox/signed/export.json' AND r.reason_code = 'TRUNCATED' AND r.resolved_run_id IS NULL
            """), [["3", "TRUNCATED"]])
        try ws.write("inbox/signed/export.json", whole)
        try ws.run("2023-11-22")
        XCTAssertEqual(try rows("""
            SELECT count(*) FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = 'inbox/signed/export.json' AND r.outcome = 'rejected' AND r.resolved_run_id IS NULL
            """), [["0"]])
        XCTAssertEqual(try rows("SELECT transaction_id FROM store_transaction ORDER BY 1").map { $0[0] }, ["9701", "9702", "9703"])
    }

    func testNoMoneyNotificationsAreRecordedAndPriceMismatchFlagged() throws {
        try ws.write("inbox/signed/n.jsonl", [
            try notification("CONSUMPTION_REQUEST", transaction: try transaction("9005", product: "com.example.cheap")),
            try notification("REFUND_DECLINED", transaction: try transaction("9005", product: "com.example.cheap")),
            try notification("SOMETHING_NEW_FROM_APPLE", transaction: nil),
        ].joined(separator: "\n"))
        let r = try ws.run("2023-11-20")
        XCTAssertEqual(r.counts.verified, 3)
        XCTAssertEqual(try rows("SELECT notification_type FROM notification ORDER BY notification_type").map { $0[0] },
                       ["CONSUMPTION_REQUEST", "REFUND_DECLINED", "SOMETHING_NEW_FROM_APPLE"])
        XCTAssertEqual(try rows("SELECT kind FROM entry"), [["sale"]], "the transaction's sale only; no refund")
        // 1.99 signed against a 0.99 price rule, no offer: PRICE_MISMATCH (the signed price is posted).
        let findings = try ledger().read { try $0.findings(openOnly: true) }
        XCTAssertEqual(findings.map(\.code), ["PRICE_MISMATCH"])
        XCTAssertEqual(try rows("SELECT gross_minor FROM entry"), [["199"]])
        // A signed price in another currency than the storefront's is not compared with the
        // price list as if it were the same money ("0.99 USD vs 1.09"): the currencies are named.
        try ws.write("rules/fx.csv", "month,currency,rate\n2023-11,AUD,0.65\n2023-11,EUR,1.08\n")
        try ws.write("inbox/signed/eur.jws", try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9061", productId: "com.example.cheap", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0,
            storefront: "USA", priceMilliunits: 1090, currency: "EUR")) + "\n")
        try ws.run("2023-11-21")
        let eur = try ledger().read { try $0.findings(openOnly: true) }.filter { $0.transactionId == "9061" }
        XCTAssertEqual(eur.map(\.code), ["PRICE_MISMATCH"])
        XCTAssertTrue(eur.first?.message.contains("signed price 1090 milliunits in EUR, but rules/storefronts.csv gives USA the currency USD: not compared") ?? false, "\(eur)")
    }

    /// A compact JWS whose payload is no JSON object (a number past range, nesting too deep, a
    /// key twice) is MALFORMED saying which part and why, as a receipt's JSON is: it was said to
    /// be "not a compact JWS" with no more.
    func testAJWSWhosePayloadIsNoJSONObjectSaysWhy() throws {
        func b64(_ s: String) -> String {
            Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = b64(#"{"alg":"ES256"}"#)
        let huge = header + "." + b64(#"{"transactionId":"1","price":1e400}"#) + ".c2ln"
        let deep = header + "." + b64(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)) + ".c2ln"
        XCTAssertNil(compactJWSProblem(header + "." + b64(#"{"transactionId":"1"}"#) + ".c2ln"))
        let why = try XCTUnwrap(compactJWSProblem(huge))
        XCTAssertTrue(why.hasPrefix("the payload is not a JSON object (") && why.count > "the payload is not a JSON object ()".count, why)
        XCTAssertEqual(compactJWSProblem("a.b"), "a signed record has 3 parts separated by dots, this one has 2")
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/signed/bad.jws", huge + "\n" + deep + "\n")
        try ws.run("2026-11-03")
        let reasons = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true).read {
            try String.fetchAll($0.db, sql: "SELECT reason_code || ': ' || reason FROM source_record ORDER BY line")
        }
        XCTAssertEqual(reasons.count, 2)
        for r in reasons { XCTAssertTrue(r.hasPrefix("MALFORMED: not a compact JWS of a signed transaction or a notification: the payload is not a JSON object ("), r) }
    }

    /// Links and the store's last word that legitimate nights write pass `verify` (the diff
    /// review found both called tampering): a refused item whose signed transactionId is a
    /// number (linked under its decimal text), and a second REFUND_REVERSED without signedDate
    /// (dated by its transaction's signed date, as the night dates it).
    func testVerifyTakesNumericSignedIdsAndReversalsWithoutSignedDate() throws {
        // A refund dated before the purchase: the item is refused (INVALID_TRANSACTION), linked.
        let numeric = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "x", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0, revocationDateMs: t0 - 2 * 86_400_000,
            revocationReason: 0, priceMilliunits: 1990, currency: "USD", extra: ["transactionId": Int64(2_000_000_000_000_001)]))
        try ws.write("inbox/signed/a.jws", numeric + "\n")
        try ws.write("inbox/signed/n1.json", try notification("ONE_TIME_CHARGE", transaction: try transaction("9071")))
        let refundAt = t0 + 2 * 86_400_000
        try ws.write("inbox/signed/n2.json", try notification("REFUND", signed: refundAt, transaction: try transaction("9071", revocation: refundAt)))
        try ws.write("inbox/signed/n3.json", try notification("REFUND_REVERSED", signed: t0 + 3 * 86_400_000, transaction: try transaction("9071")))
        try ws.run("2023-11-20")
        XCTAssertEqual(try rows("SELECT transaction_id FROM unverified_record_transaction"), [["2000000000000001"]])
        // The second reversal: no signedDate; its transaction signed on 11-19.
        let inner = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "9071", purchaseDateMs: t0 - 86_400_000, signedDateMs: t0 + 5 * 86_400_000, priceMilliunits: 1990, currency: "USD"))
        let second = try signer.sign(payload: TestSigner.notificationPayload(notificationType: "REFUND_REVERSED", signedDateMs: nil, signedTransactionInfo: inner))
        try ws.write("inbox/signed/n4.json", "{\"signedPayload\": \"\(second)\"}")
        try ws.run("2023-11-21")
        XCTAssertEqual(try rows("SELECT store_refund_share, store_refund_ms FROM store_transaction WHERE transaction_id = '9071'"), [["0", "\(t0 + 5 * 86_400_000)"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM finding WHERE code = 'REVERSAL_REPEATED'"), [["1"]])
        XCTAssertEqual(try Audit(workspace: ws.workspace).run().problems.map(\.description), [])
    }
}
