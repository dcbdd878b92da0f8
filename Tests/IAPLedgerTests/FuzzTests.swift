import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore

/// A seeded, bounded fuzz test (issue 7, must-show 4) over mutations of the real samples: the
/// verifyReceipt responses of `Fixtures/verifyreceipt/`, the App Store Server Library's signed
/// data (`Fixtures/apple-server-library/`) plus transactions and notifications signed with its
/// test keys, and a realistic orders CSV. Mutations: bit flips, byte inserts and deletes,
/// truncation, splicing two samples, duplicated and removed JSON keys, values replaced by wrong
/// types, huge numbers, zero and negative quantities, dates in 1970 and 2100, deep nesting.
///
/// Each batch of mutated files runs through `NightlyRun` in a scratch workspace. The test
/// asserts that no run crashes or fails, that every record of every file is accounted for
/// (one source record per record in the file, each verified, pending or rejected with a
/// reason and its line), that the run's counts and its Run Info sheet add up, and that
/// `iapledger verify` passes on the result.
///
/// Signatures are random (ECDSA), so signed data is only mutated before it is signed: every
/// decision, and so the test's outcome, depends on the seed alone.
final class FuzzTests: ScratchTestCase {
    /// The suite's fixed seed and size; `IAPLEDGER_FUZZ_SEED` / `IAPLEDGER_FUZZ_BATCHES` explore others.
    static let seed: UInt64 = ProcessInfo.processInfo.environment["IAPLEDGER_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x1A9_1ED6_E5
    static let batches = ProcessInfo.processInfo.environment["IAPLEDGER_FUZZ_BATCHES"].flatMap { Int($0) } ?? 16
    static let filesPerBatch = 30


    static let config = """
    reporting_currency = "USD"
    bundle_ids = ["com.example", "com.myapp", "com.musteus.musteus", "com.notkeepingitreal.fizzbuzz", "com.cerego.iknow", "com.tekkinnovations.fars", "com.example.app", "com.example.001"]
    default_storefront = "USA"
    trusted_roots = ["certs/testCA.pem"]
    [commission]
    standard = "0.30"
    reduced = "0.15"
    """
    static let storefronts = "storefront,currency,tax_rate,tax_included,effective_from\nUSA,USD,0,false,2000-01-01\nDEU,EUR,0.19,true,2000-01-01\nJPN,JPY,0.10,true,2000-01-01\n"
    static let products = ["testproduct", "myapp.1", "myapp.2", "com.cerego.iknow.30d", "com.musteus.musteus.subscription.month",
                           "com.notkeepingitreal.fizzbuzz.subscription.autorenew1m", "com.example.premium.1y", "com.example.product"]
    static let prices = "product_id,storefront,price,effective_from\n" + products.map { "\($0),USA,1.99,2000-01-01\n\($0),DEU,2.29,2000-01-01\n" }.joined()
    static let productRules = "product_id,type,units\n" + products.map { "\($0),\($0.contains("subscription") || $0.contains("premium") ? "auto_renewable" : "consumable"),100\n" }.joined()
    static let fx = "month,currency,rate\n2023-11,EUR,1.08\n2023-11,JPY,0.0067\n2026-10,EUR,1.10\n"

    /// A backend's orders file: quoted fields, offsets and fractions in times, a reversal.
    static let ordersCSV = """
    order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at
    ord-1001,acct-17,1000000059630000,testproduct,1,100,2013-01-22T08:10:11Z,production,USA,,
    ord-1002,"acct, 18",1000000131413546,myapp.1,1,100,2014-11-02T10:00:00.250Z,production,USA,,
    ord-1003,acct-19,1000000131413602,myapp.2,2,200,2014-11-02T12:00:00+02:00,production,DEU,f1e3a0c2-8d8b-4c1b-9b55-3f6c2b9e7d10,
    ord-1004,acct-20,1000000318012065,com.musteus.musteus.subscription.month,1,0,2017-05-01T00:00:01Z,production,USA,,
    ord-1005,acct-21,,com.example.product,1,100,2023-11-13T22:13:20Z,production,USA,,
    ord-1006,acct-22,2000000000000001,com.example.product,1,100,2023-11-13T22:14:00Z,sandbox,USA,,
    ord-1007,"acct ""quoted"" 23",2000000000000002,com.example.product,1,100,2023-11-13T22:15:00Z,production,USA,,2023-11-20T09:00:00Z
    ord-1008,acct-24,1000000318014271,com.musteus.musteus.subscription.month,1,0,2017-06-01,production,,,
    ord-1009,acct-25,2000000000000003,com.example.product,3,300,2023-11-13T22:16:00Z,production,JPN,,
    ord-1010,acct-26,1000000131414118,myapp.1,1,100,2014-11-03T10:00:00Z,production,USA,,

    """

    // MARK: The test

    func testSeededMutationsOfTheRealSamplesAreAllAccountedFor() throws {
        let started = Date()
        var rng = SplitMix64(Self.seed)
        let samples = try Samples.load()
        var inputs = 0, records = 0, verified = 0, pending = 0, rejected = 0, entries = 0
        for batch in 0..<Self.batches {
            let ws = try TestWorkspace(config: Self.config, storefronts: Self.storefronts, prices: Self.prices,
                                       products: Self.productRules, fx: Self.fx)
            scratch.append(ws.root)
            try ws.write("certs/testCA.pem", try TestSigner.appleFixtureText("java/certs/testCA.pem"))
            var files: [(path: String, data: [UInt8])] = []
            for i in 0..<Self.filesPerBatch {
                files.append(try Self.mutatedFile(i, samples: samples, rng: &rng))
            }
            for f in files {
                let url = ws.root.appendingPathComponent(f.path)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(f.data).write(to: url)
            }
            inputs += files.count
            let result: NightlyRun.Result
            do {
                result = try ws.run("2026-11-03")
            } catch {
                XCTFail("batch \(batch): the run failed: \(error)")
                continue
            }
            records += try Self.assertAccounted(files, workspace: ws, result: result, batch: batch)
            verified += result.counts.verified; pending += result.counts.pending; rejected += result.counts.rejected
            entries += result.counts.entriesPosted
            let audit = try Audit(workspace: ws.workspace).run()
            XCTAssertTrue(audit.ok, "batch \(batch): verify: \(audit.problems.prefix(3))")
            ws.remove()
        }
        XCTAssertEqual(inputs, Self.batches * Self.filesPerBatch)
        print("fuzz: seed \(Self.seed), \(inputs) mutated files, \(records) records accounted for (\(verified) verified, \(pending) pending, \(rejected) rejected), \(entries) entries posted, \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        // The mutations reach every outcome, posting included.
        XCTAssertTrue(verified > 0 && pending > 0 && rejected > 0 && entries > 0)
    }

    // MARK: Accounting

    /// The records a file holds, counted without the ledger's readers where possible.
    static func expectedRecords(path: String, data: [UInt8]) -> Int {
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return 1 }      // EMPTY_FILE
        let ext = (path as NSString).pathExtension
        if ["jsonl", "jws", "txt"].contains(ext) {
            // Read line by line: one record a line that is not blank (spaces and tabs; a CR
            // before the LF is the line end), whether or not it is UTF-8 (INVALID_UTF8 per line).
            return data.split(separator: 0x0A, omittingEmptySubsequences: false).filter { line in
                let l = line.last == 0x0D ? line.dropLast() : line[...]
                return !l.allSatisfy { $0 == 0x20 || $0 == 0x09 }
            }.count
        }
        guard let text = String(validatingUTF8Data: Data(data)) else { return 1 }                   // INVALID_UTF8
        switch ext {
        case "json":
            return RecordSplitter.jsonDocument(Substring(text)).count
        default:
            let (rows, fileError, _) = OrderReader.read(path: path, text: Substring(text))
            return fileError == nil ? rows.count : 1
        }
    }

    /// Asserts that every record of every file is in the ledger with an outcome; returns the count.
    static func assertAccounted(_ files: [(path: String, data: [UInt8])], workspace ws: TestWorkspace, result: NightlyRun.Result,
                                batch: Int) throws -> Int {
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        var total = 0
        for f in files {
            let expected = expectedRecords(path: f.path, data: f.data)
            total += expected
            let lineCount = max(1, f.data.split(separator: 0x0A, omittingEmptySubsequences: false).count)
            let rows = try ledger.read { try $0.rawRows("""
                SELECT f.records, f.new_records, count(r.id),
                       sum(r.outcome NOT IN ('verified', 'pending', 'rejected')),
                       sum(r.outcome <> 'verified' AND ifnull(r.reason, '') = ''),
                       ifnull(min(r.line), 0), ifnull(max(r.line), 0)
                FROM source_file f LEFT JOIN source_record r ON r.file_id = f.id WHERE f.path = '\(f.path)' GROUP BY f.id
                """) }
            let what = "batch \(batch) \(f.path)"
            guard rows.count == 1 else { XCTFail("\(what): \(rows.count) source files recorded"); continue }
            let r = rows[0].map { Int($0) ?? -1 }
            XCTAssertEqual(r[0], expected, "\(what): records in the file")
            XCTAssertEqual(r[1], expected, "\(what): new records")
            XCTAssertEqual(r[2], expected, "\(what): source records stored")
            if expected > 0 {
                XCTAssertEqual(r[3], 0, "\(what): a record without an outcome")
                XCTAssertEqual(r[4], 0, "\(what): a record not posted without a reason")
                XCTAssertTrue(r[5] >= 1 && r[6] <= lineCount, "\(what): lines \(r[5])...\(r[6]) outside 1...\(lineCount)")
            }
        }
        let c = result.counts
        XCTAssertEqual(c.read, total, "batch \(batch): records read")
        XCTAssertEqual(c.verified + c.pending + c.rejected, c.read, "batch \(batch): verified + pending + rejected")
        XCTAssertEqual(c.skipped, 0)
        // The Run Info sheet says the same.
        let info = try XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-11-03/finance-2026-11-03.xlsx"))["Run Info"] ?? []
        func value(_ item: String) -> String? { info.first { $0.first == item }.flatMap { $0.count > 1 ? $0[1] : nil } }
        XCTAssertEqual(value("Records read this run"), "\(total)", "batch \(batch): Run Info")
        XCTAssertEqual(value("  rejected"), "\(c.rejected)", "batch \(batch): Run Info")
        // The ledger balances.
        for row in try ledger.read({ try $0.rawRows("SELECT e.book, p.currency, sum(p.amount_minor) FROM posting p JOIN entry e ON e.id = p.entry_id GROUP BY 1, 2") }) {
            XCTAssertEqual(row[2], "0", "batch \(batch): \(row[0]) \(row[1]) does not balance")
        }
        return total
    }

    // MARK: Samples

    struct Samples {
        /// The real verifyReceipt responses (each a JSON document).
        var receipts: [String]
        /// The App Store Server Library's signed fixtures (fixed bytes).
        var signedFixtures: [String]
        /// Payloads (sorted-key JSON) of transactions and notifications to sign after mutation.
        var payloads: [String]
        var signer: TestSigner

        static func load() throws -> Samples {
            let dir = Fixtures.url("verifyreceipt")
            let receipts = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
                .map { try String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8) }
            let signedFixtures = try ["swift/mock_signed_data/transactionInfo", "swift/mock_signed_data/testNotification",
                                      "swift/mock_signed_data/renewalInfo", "swift/mock_signed_data/wrongBundleId",
                                      "swift/mock_signed_data/missingX5CHeaderClaim", "swift/xcode/xcode-signed-transaction",
                                      "swift/xcode/xcode-signed-renewal-info"]
                .map { try TestSigner.appleFixtureText($0).trimmingCharacters(in: .whitespacesAndNewlines) }
            let signer = try TestSigner.appleTest()
            let t0 = TestSigner.defaultSignedDateMs
            func json(_ p: [String: Any]) throws -> String {
                String(decoding: try JSONSerialization.data(withJSONObject: p, options: [.sortedKeys]), as: UTF8.self)
            }
            let tx = [
                TestSigner.transactionPayload(transactionId: "2000000000000001", purchaseDateMs: t0 - 86_400_000, environment: "Sandbox",
                                              priceMilliunits: 1990, currency: "USD"),
                TestSigner.transactionPayload(transactionId: "2000000000000002", purchaseDateMs: t0 - 3_600_000, environment: "Production",
                                              storefront: "DEU", priceMilliunits: 2290, currency: "EUR"),
                TestSigner.transactionPayload(transactionId: "2000000000000003", productId: "com.example.premium.1y",
                                              purchaseDateMs: t0 - 7_200_000, expiresDateMs: t0 + 365 * 86_400_000, quantity: 1,
                                              type: "Auto-Renewable Subscription", environment: "Production", priceMilliunits: 49_990, currency: "USD"),
                TestSigner.transactionPayload(transactionId: "2000000000000002", purchaseDateMs: t0 - 3_600_000, revocationDateMs: t0 - 60_000,
                                              revocationReason: 0, revocationType: "REFUND_PRORATED", revocationPercentage: 50_000,
                                              environment: "Production", storefront: "DEU", priceMilliunits: 2290, currency: "EUR"),
            ]
            var payloads = try tx.map(json)
            let nested = try signer.sign(payload: tx[0])
            payloads.append(try json(TestSigner.notificationPayload(notificationType: "REFUND", notificationUUID: "0b7a3c1e-0000-4000-8000-000000000001",
                                                                    signedDateMs: t0, signedTransactionInfo: nested)))
            return Samples(receipts: receipts, signedFixtures: signedFixtures, payloads: payloads, signer: signer)
        }
    }

    // MARK: Mutated files

    /// File `i` of a batch: receipts (JSON or JSON Lines), signed data, orders, or a splice.
    static func mutatedFile(_ i: Int, samples s: Samples, rng: inout SplitMix64) throws -> (path: String, data: [UInt8]) {
        switch i % 10 {
        case 0, 1, 2, 3:
            // verifyReceipt responses: one document, or several minified ones a line.
            if rng.chance(40) {
                var doc = s.receipts[rng.int(s.receipts.count)]
                if rng.chance(60), let v = try? JSONParser.parse(doc) { doc = JSONMutator.render(JSONMutator.mutate(v, times: 1 + rng.int(3), &rng)) }
                var bytes = Array(doc.utf8)
                if rng.chance(60) { bytes = ByteMutator.mutate(bytes, other: Array(s.receipts[rng.int(s.receipts.count)].utf8), &rng) }
                return ("inbox/receipts/f\(i)-doc.json", bytes)
            }
            var lines: [String] = []
            for _ in 0..<(2 + rng.int(5)) {
                guard let v = try? JSONParser.parse(s.receipts[rng.int(s.receipts.count)]) else { continue }
                lines.append(JSONMutator.render(rng.chance(70) ? JSONMutator.mutate(v, times: 1 + rng.int(2), &rng) : v))
            }
            var bytes = Array((lines.joined(separator: "\n") + "\n").utf8)
            if rng.chance(50) { bytes = ByteMutator.mutate(bytes, other: Array(s.receipts[rng.int(s.receipts.count)].utf8), &rng) }
            return ("inbox/receipts/f\(i)-lines.jsonl", bytes)
        case 4, 5, 6:
            // Signed data: fixtures mutated as bytes, test-signed payloads mutated before signing.
            var lines: [String] = []
            for _ in 0..<(2 + rng.int(4)) {
                switch rng.int(3) {
                case 0:
                    let fixture = s.signedFixtures[rng.int(s.signedFixtures.count)]
                    let bytes = rng.chance(70) ? ByteMutator.mutate(Array(fixture.utf8), other: Array(s.signedFixtures[rng.int(s.signedFixtures.count)].utf8), &rng)
                        : Array(fixture.utf8)
                    lines.append(String(decoding: bytes.filter { $0 != 0x0A }, as: UTF8.self))
                default:
                    var payload = s.payloads[rng.int(s.payloads.count)]
                    if rng.chance(75), let v = try? JSONParser.parse(payload) { payload = JSONMutator.render(JSONMutator.mutate(v, times: 1 + rng.int(2), &rng)) }
                    lines.append(try s.signer.sign(payloadJSON: payload))
                }
            }
            if i % 10 == 6 {
                // Notification bodies as Apple POSTs them, the body itself mutated too.
                let bodies = lines.map { jws -> String in
                    let body = JSONValue.object([("signedPayload", .string(jws))])
                    return JSONMutator.render(rng.chance(30) ? JSONMutator.mutate(body, times: 1, &rng) : body)
                }
                return ("inbox/signed/f\(i)-bodies.jsonl", Array((bodies.joined(separator: "\n") + "\n").utf8))
            }
            return ("inbox/signed/f\(i)-signed.jws", Array((lines.joined(separator: "\n") + "\n").utf8))
        case 7, 8:
            // Orders: hostile fields, then maybe bytes.
            var rows = ordersCSV.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for _ in 0..<(1 + rng.int(4)) {
                let r = 1 + rng.int(rows.count - 2)
                var fields = rows[r].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                let f = rng.int(fields.count)
                switch rng.int(4) {
                case 0: fields.remove(at: f)
                case 1: fields.insert(CSVMutator.hostile(&rng), at: f)
                default: fields[f] = CSVMutator.hostile(&rng)
                }
                rows[r] = fields.joined(separator: ",")
            }
            var bytes = Array(rows.joined(separator: rng.chance(20) ? "\r\n" : "\n").utf8)
            if rng.chance(40) { bytes = ByteMutator.mutate(bytes, other: Array(ordersCSV.utf8), &rng) }
            return ("inbox/orders/f\(i)-orders.csv", bytes)
        default:
            // Two samples spliced: the head of one, the tail of another.
            let pool = s.receipts + s.signedFixtures + [ordersCSV]
            let a = Array(pool[rng.int(pool.count)].utf8), b = Array(pool[rng.int(pool.count)].utf8)
            let bytes = Array(a.prefix(rng.int(a.count + 1))) + Array(b.suffix(rng.int(b.count + 1)))
            let kind = ["inbox/receipts/f\(i)-splice.json", "inbox/receipts/f\(i)-splice.jsonl",
                        "inbox/signed/f\(i)-splice.jws", "inbox/orders/f\(i)-splice.csv"][rng.int(4)]
            return (kind, bytes)
        }
    }
}

// MARK: - Mutators

/// SplitMix64: a small, fixed PRNG, so the same seed gives the same mutations everywhere.
struct SplitMix64 {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
}

enum ByteMutator {
    static let interesting: [UInt8] = Array("{}[]\",:\\\n0-9e.".utf8) + [0x00, 0x7F, 0xC3, 0xFF, 0xE2, 0x80]

    /// One to three of: bit flip, byte insert, byte run delete, truncation, splice with `other`, duplicated run.
    static func mutate(_ input: [UInt8], other: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var b = input
        for _ in 0..<(1 + rng.int(3)) {
            let at = rng.int(b.count + 1)
            switch rng.int(6) {
            case 0 where !b.isEmpty: b[min(at, b.count - 1)] ^= UInt8(1 << rng.int(8))
            case 1: b.insert(rng.chance(50) ? interesting[rng.int(interesting.count)] : UInt8(truncatingIfNeeded: rng.next()), at: at)
            case 2 where !b.isEmpty: b.removeSubrange(min(at, b.count - 1)..<min(b.count, at + 1 + rng.int(16)))
            case 3: b = Array(b.prefix(at))
            case 4: b = Array(b.prefix(at)) + Array(other.suffix(rng.int(other.count + 1)))
            default:
                let end = min(b.count, at + 1 + rng.int(32))
                b.insert(contentsOf: b[at..<end], at: at)
            }
        }
        return b
    }
}

enum JSONMutator {
    /// Values that break expectations: wrong types, huge and negative numbers, zero, 1970 and
    /// 2100 in milliseconds and in Apple's text, deep nesting (past and within the limit).
    static func hostile(_ rng: inout SplitMix64, near v: JSONValue) -> JSONValue {
        switch rng.int(22) {
        case 0: return .null
        case 1: return .bool(true)
        case 2: return .string("")
        case 3: return .number("1e400")
        case 4: return .number("99999999999999999999999")
        case 5: return .number("-1")
        case 6: return .string("0")
        case 7: return .number("-9223372036854775808")
        case 8: return .string("9223372036854775807")
        case 9: return .string("0")                               // 1970-01-01 in ms
        case 10: return .number("4102444800000")                  // 2100-01-01 in ms
        case 11: return .string("1970-01-01 00:00:00 Etc/GMT")
        case 12: return .string("2100-01-01 00:00:00 Etc/GMT")
        case 13: return .array([v])
        case 14: return .object([("value", v)])
        case 15: return .number("1.5")
        case 16: return .string(String(repeating: "9", count: 300))
        case 17: return nest(v, 70)
        case 18: return nest(v, 20)
        case 19: return .number("-0.0e-0")
        case 20: return .string("\u{0}\u{1F}\"\\\u{2028}")
        default: return .number("0")
        }
    }

    static func nest(_ v: JSONValue, _ depth: Int) -> JSONValue {
        var out = v
        for _ in 0..<depth { out = .array([out]) }
        return out
    }

    /// Keys the readers and verifiers look at: mutated more often than others.
    static let keys = ["status", "receipt", "in_app", "latest_receipt_info", "transaction_id", "original_transaction_id", "product_id",
                       "quantity", "purchase_date_ms", "purchase_date", "expires_date_ms", "expires_date", "cancellation_date_ms",
                       "environment", "bundle_id", "bid", "is-retryable", "is_trial_period", "transactionId", "price", "currency",
                       "purchaseDate", "expiresDate", "revocationDate", "revocationPercentage", "revocationType", "storefront",
                       "signedTransactionInfo", "notificationType", "notificationUUID", "data", "signedPayload"]

    static func mutate(_ v: JSONValue, times: Int, _ rng: inout SplitMix64) -> JSONValue {
        var out = v
        for _ in 0..<times {
            if rng.chance(50), let key = presentKeys(out).randomElement(using: &rng) {
                out = editKey(out, key, &rng)
            } else {
                var k = rng.int(count(out))
                out = walk(out, &k, &rng)
            }
        }
        return out
    }

    static func count(_ v: JSONValue) -> Int {
        switch v {
        case .array(let a): return 1 + a.reduce(0) { $0 + count($1) }
        case .object(let m): return 1 + m.reduce(0) { $0 + count($1.1) }
        default: return 1
        }
    }

    static func presentKeys(_ v: JSONValue) -> [String] {
        var found: [String] = []
        func visit(_ v: JSONValue) {
            switch v {
            case .array(let a): a.forEach(visit)
            case .object(let m): for (k, x) in m { if keys.contains(k) && !found.contains(k) { found.append(k) }; visit(x) }
            default: break
            }
        }
        visit(v)
        return found
    }

    /// Removes, duplicates (with another value, before or after) or replaces every member named `key`.
    static func editKey(_ v: JSONValue, _ key: String, _ rng: inout SplitMix64) -> JSONValue {
        switch v {
        case .array(let a): return .array(a.map { editKey($0, key, &rng) })
        case .object(let m):
            var out: [(String, JSONValue)] = []
            for (k, x) in m {
                guard k == key else { out.append((k, editKey(x, key, &rng))); continue }
                switch rng.int(4) {
                case 0: break
                case 1: out += [(k, hostile(&rng, near: x)), (k, x)]
                case 2: out += [(k, x), (k, hostile(&rng, near: x))]
                default: out.append((k, hostile(&rng, near: x)))
                }
            }
            return .object(out)
        default: return v
        }
    }

    /// Mutates the node numbered `k` in preorder.
    static func walk(_ v: JSONValue, _ k: inout Int, _ rng: inout SplitMix64) -> JSONValue {
        if k == 0 {
            k -= 1
            switch v {
            case .object(var m) where !m.isEmpty:
                let i = rng.int(m.count)
                switch rng.int(3) {
                case 0: m.remove(at: i)
                case 1: m.insert((m[i].0, hostile(&rng, near: m[i].1)), at: i)
                default: m[i].1 = hostile(&rng, near: m[i].1)
                }
                return .object(m)
            case .array(var a) where !a.isEmpty:
                let i = rng.int(a.count)
                if rng.chance(50) { a.remove(at: i) } else { a.insert(a[i], at: i) }
                return .array(a)
            default:
                return hostile(&rng, near: v)
            }
        }
        k -= 1
        switch v {
        case .array(let a): return .array(a.map { walk($0, &k, &rng) })
        case .object(let m): return .object(m.map { ($0.0, walk($0.1, &k, &rng)) })
        default: return v
        }
    }

    static func render(_ v: JSONValue) -> String {
        switch v {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let n): return n
        case .string(let s): return quote(s)
        case .array(let a): return "[" + a.map(render).joined(separator: ",") + "]"
        case .object(let m): return "{" + m.map { quote($0.0) + ":" + render($0.1) }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where u.value < 0x20: out += String(format: "\\u%04x", u.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }
}

enum CSVMutator {
    static func hostile(_ rng: inout SplitMix64) -> String {
        ["", "0", "-1", "1e400", "99999999999999999999", "1970-01-01T00:00:00Z", "2100-01-01T00:00:00Z", "2026-10-05T10:01:00.123456789Z",
         "\"unterminated", "a\"b", "\"x\"y", "\"a,b\"", "\"multi\nline\"", "production ", "SANDBOX", "-9223372036854775808",
         String(repeating: "x", count: 500), "\u{FEFF}bom", "\t"][rng.int(19)]
    }
}

extension Array {
    func randomElement(using rng: inout SplitMix64) -> Element? { isEmpty ? nil : self[rng.int(count)] }
}
