import Foundation
import XCTest
import LedgerDemo

/// The demo workspace generator: determinism, well-formed files, rules coverage, and every
/// seeded reconciliation case, checked by re-reading the files it wrote.
final class DemoGeneratorTests: XCTestCase {
    static let asOf = "2026-11-21"
    static let asOfMs: Int64 = 1_795_219_200_000  // 2026-11-21T00:00:00Z
    static let transactions = 500

    private var directories: [URL] = []

    override func tearDown() {
        for directory in directories { try? FileManager.default.removeItem(at: directory) }
        directories = []
        super.tearDown()
    }

    private func generate(seed: UInt64 = 42, transactions: Int = DemoGeneratorTests.transactions) throws -> (URL, DemoSummary) {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("iapledger-demo-test-\(UUID().uuidString)")
        directories.append(directory)
        let summary = try DemoGenerator.generate(
            into: directory, options: DemoOptions(seed: seed, transactions: transactions, asOf: DemoGeneratorTests.asOf))
        return (directory, summary)
    }

    /// FNV-1a, enough to compare file contents.
    private func fingerprint(_ data: Data) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in data { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    private func fingerprints(_ directory: URL, _ summary: DemoSummary) throws -> [String: UInt64] {
        var result: [String: UInt64] = [:]
        for path in summary.files {
            result[path] = fingerprint(try Data(contentsOf: directory.appendingPathComponent(path)))
        }
        return result
    }

    // MARK: - Determinism

    func testSameSeedWritesIdenticalBytes() throws {
        let (first, firstSummary) = try generate(seed: 7)
        let (second, secondSummary) = try generate(seed: 7)
        XCTAssertEqual(firstSummary.files, secondSummary.files)
        XCTAssertEqual(try fingerprints(first, firstSummary), try fingerprints(second, secondSummary))
        XCTAssertEqual(firstSummary.anomalies, secondSummary.anomalies)
    }

    func testDifferentSeedWritesDifferentData() throws {
        let (first, firstSummary) = try generate(seed: 1)
        let (second, secondSummary) = try generate(seed: 2)
        let a = try fingerprints(first, firstSummary), b = try fingerprints(second, secondSummary)
        let differing = a.keys.filter { $0.hasPrefix("inbox/") && a[$0] != b[$0] }
        XCTAssertFalse(differing.isEmpty)
        XCTAssertEqual(firstSummary.transactions, secondSummary.transactions)
    }

    /// A small demo writes no empty file (a day without a receipt has no receipts file): the
    /// night refused each as EMPTY_FILE, 65 open rejections for a demo of 50 transactions.
    func testASmallDemoWritesNoEmptyFile() throws {
        let (directory, summary) = try generate(transactions: 50)
        let inbox = directory.appendingPathComponent("inbox")
        var files = 0
        for case let url as URL in FileManager.default.enumerator(at: inbox, includingPropertiesForKeys: nil)! where !url.hasDirectoryPath {
            files += 1
            let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int)
            XCTAssertGreaterThan(size, 0, url.path)
        }
        XCTAssertGreaterThan(files, 0)
        XCTAssertTrue(summary.files.allSatisfy { FileManager.default.fileExists(atPath: directory.appendingPathComponent($0).path) })
    }

    func testRejectsBadOptions() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-demo-never")
        XCTAssertThrowsError(try DemoGenerator.generate(into: directory, options: DemoOptions(asOf: "2026-02-30")))
        XCTAssertThrowsError(try DemoGenerator.generate(into: directory, options: DemoOptions(transactions: 0, asOf: "2026-11-21")))
    }

    /// Other seeds, sizes and as-of dates (first of a month, leap February, year end).
    func testOtherSeedsAndDatesStayConsistent() throws {
        for (seed, transactions, asOf, firstDay) in [(UInt64(3), 300, "2026-03-01", "2025-12-01"), (99, 120, "2024-03-31", "2023-12-01"),
                                                     (5, 40, "2027-01-02", "2026-10-01")] {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-demo-test-\(UUID().uuidString)")
            directories.append(directory)
            let summary = try DemoGenerator.generate(into: directory, options: DemoOptions(seed: seed, transactions: transactions, asOf: asOf))
            XCTAssertEqual(summary.transactions, transactions, asOf)
            XCTAssertEqual(summary.firstDay, firstDay, asOf)
            let workspace = try DemoTestWorkspace(directory: directory, summary: summary)
            XCTAssertEqual(workspace.transactions.count, transactions, asOf)
            XCTAssertEqual(workspace.conflictingRepeats, [], asOf)
            XCTAssertEqual(workspace.malformedLines, summary.anomalies[DemoAnomaly.malformedLine], asOf)
            let found = workspace.reconcile()
            for category in DemoAnomaly.reconciliationCategories {
                XCTAssertEqual(found[category] ?? 0, summary.anomalies[category] ?? 0, "\(asOf) \(category)")
            }
        }
    }

    // MARK: - Files

    func testLayoutAndWindow() throws {
        let (directory, summary) = try generate()
        XCTAssertEqual(summary.transactions, DemoGeneratorTests.transactions)
        XCTAssertEqual(summary.firstDay, "2026-08-01")
        XCTAssertEqual(summary.lastDay, "2026-11-20")
        for path in ["iapledger.toml", "rules/storefronts.csv", "rules/products.csv", "rules/prices.csv", "rules/fx.csv",
                     "inbox/receipts/receipts-2026-08-01.jsonl", "inbox/orders/orders-2026-11-20.csv"] {
            XCTAssertTrue(summary.files.contains(path), path)
            XCTAssertTrue(FileManager.default.fileExists(atPath: directory.appendingPathComponent(path).path), path)
        }
        XCTAssertFalse(summary.files.contains { $0.contains("2026-11-21") || $0.contains("2026-07-31") })
        XCTAssertGreaterThan(summary.files.filter { $0.hasSuffix(".json") }.count, 1)
        let config = try String(contentsOf: directory.appendingPathComponent("iapledger.toml"), encoding: .utf8)
        XCTAssertTrue(config.contains(#"small_business = [ { from = "2026-08-01", to = "2026-09-15" } ]"#))
        XCTAssertTrue(config.contains(#"bundle_ids = ["com.example.coins"]"#))
    }

    func testEveryReceiptLineParsesExceptTheSeededOne() throws {
        let (directory, summary) = try generate()
        let workspace = try DemoTestWorkspace(directory: directory, summary: summary)
        XCTAssertEqual(workspace.malformedLines, 1)
        XCTAssertEqual(summary.anomalies[DemoAnomaly.malformedLine], 1)
        XCTAssertEqual(workspace.records.count, summary.receiptRecords)
    }

    func testRulesCoverEverythingButTheSeededGaps() throws {
        let (directory, summary) = try generate()
        let workspace = try DemoTestWorkspace(directory: directory, summary: summary)
        let rules = workspace.rules
        XCTAssertGreaterThanOrEqual(rules.storefronts.count, 12)
        let yearly = "com.example.coins.vip.yearly"
        for (id, txn) in workspace.transactions {
            XCTAssertNotNil(rules.productTypes[txn.productId], "\(id) \(txn.productId)")
        }
        var missingPriceOrders = 0
        for order in workspace.latestOrders.values {
            XCTAssertNotNil(rules.productTypes[order.productId], order.orderId)
            XCTAssertTrue(rules.storefronts.contains(order.storefront), order.orderId)
            if order.productId == yearly && order.storefront == "IND" {
                missingPriceOrders += 1
                XCTAssertFalse(rules.pricedPairs.contains("\(yearly)|IND"))
            } else {
                XCTAssertTrue(rules.pricedPairs.contains("\(order.productId)|\(order.storefront)"), order.orderId)
            }
        }
        XCTAssertGreaterThan(missingPriceOrders, 0)
        XCTAssertGreaterThan(summary.anomalies[DemoAnomaly.missingPrice] ?? 0, 0)
        XCTAssertGreaterThan(summary.anomalies[DemoAnomaly.missingFx] ?? 0, 0)
        // Every month has every currency's rate, except BRL in the last month.
        XCTAssertEqual(rules.fxMonths, ["2026-08", "2026-09", "2026-10", "2026-11"])
        XCTAssertTrue(rules.fxKeys.contains("2026-10|BRL"))
        XCTAssertFalse(rules.fxKeys.contains("2026-11|BRL"))
        XCTAssertTrue(rules.fxKeys.contains("2026-11|JPY"))
        for currency in rules.currencies where currency != "USD" {
            XCTAssertTrue(rules.fxKeys.contains("2026-08|\(currency)"), currency)
        }
    }

    func testTransactionsAreConsistentAndInsideTheWindow() throws {
        let (directory, summary) = try generate()
        let workspace = try DemoTestWorkspace(directory: directory, summary: summary)
        XCTAssertEqual(workspace.transactions.count, summary.transactions)
        XCTAssertEqual(workspace.transactions.values.filter { $0.environment == "Sandbox" }.count, summary.sandboxTransactions)
        XCTAssertEqual(workspace.conflictingRepeats, [], "same transaction_id must carry the same data")
        var refunds = 0
        for txn in workspace.transactions.values {
            XCTAssertGreaterThanOrEqual(txn.purchaseMs, 1_785_542_400_000)  // 2026-08-01
            XCTAssertLessThan(txn.purchaseMs, DemoGeneratorTests.asOfMs)
            if let cancelled = txn.cancellationMs {
                refunds += 1
                XCTAssertGreaterThan(cancelled, txn.purchaseMs)
                XCTAssertLessThan(cancelled, DemoGeneratorTests.asOfMs)
            }
        }
        XCTAssertEqual(refunds, summary.refunds)
        XCTAssertGreaterThan(refunds, 0)
        XCTAssertGreaterThan(workspace.repeatedTransactions, 0)
        XCTAssertGreaterThan(summary.renewals, 0)
        XCTAssertGreaterThan(summary.legacyReceiptRecords, 0)
        for order in workspace.latestOrders.values {
            if let reversed = order.reversedAt { XCTAssertLessThan(reversed, "2026-11-21") }
            XCTAssertLessThan(order.creditedAt, "2026-11-21")
        }
    }

    /// Re-derives every reconciliation category from the files and compares with the seeds.
    func testEveryReconciliationCategoryIsSeeded() throws {
        let (directory, summary) = try generate()
        let workspace = try DemoTestWorkspace(directory: directory, summary: summary)
        let found = workspace.reconcile()
        for category in DemoAnomaly.reconciliationCategories {
            let seeded = summary.anomalies[category] ?? 0
            XCTAssertGreaterThan(seeded, 0, category)
            XCTAssertEqual(found[category] ?? 0, seeded, category)
        }
        for key in [DemoAnomaly.retryableThenVerified, DemoAnomaly.retryableNeverVerified, DemoAnomaly.status21007ThenSandbox,
                    DemoAnomaly.status21007Pending, DemoAnomaly.status21008ThenProduction, DemoAnomaly.rejected21003,
                    DemoAnomaly.rejected21010, DemoAnomaly.otherAppReceipt, DemoAnomaly.subscriptionLapse] {
            XCTAssertGreaterThan(summary.anomalies[key] ?? 0, 0, key)
        }
        XCTAssertEqual(workspace.statusCounts[21007] ?? 0,
                       (summary.anomalies[DemoAnomaly.status21007ThenSandbox] ?? 0) + (summary.anomalies[DemoAnomaly.status21007Pending] ?? 0))
        XCTAssertEqual(workspace.statusCounts[21003] ?? 0, summary.anomalies[DemoAnomaly.rejected21003] ?? 0)
        XCTAssertGreaterThan(workspace.retryableRecords, 0)
    }
}

// MARK: - Reading a generated workspace back

private struct DemoTestTransaction {
    var productId: String
    var quantity: Int
    var environment: String
    var token: String?
    var purchaseMs: Int64
    var cancellationMs: Int64?
    var fields: NSDictionary
}

private struct DemoTestOrderRow {
    var orderId, accountId, transactionId, productId: String
    var quantity, creditedUnits: Int
    var creditedAt, environment, storefront: String
    var token: String?
    var reversedAt: String?
}

private struct DemoTestRules {
    var storefronts: Set<String> = []
    var currencies: Set<String> = []
    var productTypes: [String: String] = [:]
    var productUnits: [String: Int] = [:]
    var pricedPairs: Set<String> = []
    var fxKeys: Set<String> = []
    var fxMonths: [String] = []
}

private struct DemoTestWorkspace {
    var rules = DemoTestRules()
    var records: [[String: Any]] = []
    var malformedLines = 0
    var transactions: [String: DemoTestTransaction] = [:]
    var repeatedTransactions = 0
    var conflictingRepeats: [String] = []
    /// Transaction ids named only by failed verifications or another app's receipt.
    var unverifiedIds: Set<String> = []
    var statusCounts: [Int: Int] = [:]
    var retryableRecords = 0
    var latestOrders: [String: DemoTestOrderRow] = [:]

    init(directory: URL, summary: DemoSummary) throws {
        rules = try DemoTestWorkspace.readRules(directory)
        for path in summary.files.sorted() where path.hasPrefix("inbox/receipts/") {
            let data = try Data(contentsOf: directory.appendingPathComponent(path))
            if path.hasSuffix(".jsonl") {
                for line in data.split(separator: 10) where !line.isEmpty {
                    if let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
                        records.append(object)
                    } else {
                        malformedLines += 1
                    }
                }
            } else {
                let object = try JSONSerialization.jsonObject(with: data)
                if let array = object as? [[String: Any]] { records += array } else { records.append(object as! [String: Any]) }
            }
        }
        for record in records { ingest(record) }
        for path in summary.files.sorted() where path.hasPrefix("inbox/orders/") {
            let text = try String(contentsOf: directory.appendingPathComponent(path), encoding: .utf8)
            let rows = DemoTestWorkspace.parseCSV(text)
            XCTAssertEqual(rows.first, ["order_id", "account_id", "transaction_id", "product_id", "quantity", "credited_units",
                                        "credited_at", "environment", "storefront", "app_account_token", "reversed_at"])
            for row in rows.dropFirst() {
                let order = DemoTestOrderRow(orderId: row[0], accountId: row[1], transactionId: row[2], productId: row[3],
                                     quantity: Int(row[4]) ?? 1, creditedUnits: Int(row[5]) ?? 0, creditedAt: row[6],
                                     environment: row[7], storefront: row[8], token: row[9].isEmpty ? nil : row[9],
                                     reversedAt: row[10].isEmpty ? nil : row[10])
                latestOrders[order.orderId] = order
            }
        }
    }

    private mutating func ingest(_ record: [String: Any]) {
        let wrapper = record["response"] as? [String: Any]
        let body = wrapper ?? record
        let status = body["status"] as! Int
        statusCounts[status, default: 0] += 1
        if status != 0 {
            if body["is-retryable"] as? Bool == true { retryableRecords += 1 }
            if let id = record["transaction_id"] as? String { unverifiedIds.insert(id) }
            return
        }
        let receipt = body["receipt"] as! [String: Any]
        let environment = body["environment"] as? String ?? "Production"
        if let bid = receipt["bid"] as? String {
            XCTAssertEqual(bid, "com.example.coins")
            add(receipt, environment: environment)
            return
        }
        if receipt["bundle_id"] as? String != "com.example.coins" {
            for item in receipt["in_app"] as! [[String: Any]] { unverifiedIds.insert(item["transaction_id"] as! String) }
            return
        }
        XCTAssertEqual(receipt["receipt_type"] as? String, environment == "Sandbox" ? "ProductionSandbox" : "Production")
        for item in receipt["in_app"] as! [[String: Any]] { add(item, environment: environment) }
        for item in body["latest_receipt_info"] as? [[String: Any]] ?? [] { add(item, environment: environment) }
    }

    private mutating func add(_ item: [String: Any], environment: String) {
        let id = item["transaction_id"] as! String
        XCTAssertEqual(id.count, 16)
        var stable = item
        for key in ["cancellation_date", "cancellation_date_ms", "cancellation_date_pst", "cancellation_reason"] {
            stable.removeValue(forKey: key)
        }
        let cancellation = (item["cancellation_date_ms"] as? String).flatMap { Int64($0) }
        if var existing = transactions[id] {
            repeatedTransactions += 1
            if !existing.fields.isEqual(to: stable) || existing.environment != environment { conflictingRepeats.append(id) }
            if let cancellation { existing.cancellationMs = cancellation; transactions[id] = existing }
            return
        }
        transactions[id] = DemoTestTransaction(
            productId: item["product_id"] as! String, quantity: Int(item["quantity"] as! String)!, environment: environment,
            token: item["app_account_token"] as? String, purchaseMs: Int64(item["purchase_date_ms"] as! String)!,
            cancellationMs: cancellation, fields: stable as NSDictionary)
    }

    /// reconciliation.md's categories, computed the simple way.
    func reconcile() -> [String: Int] {
        var found: [String: Int] = [:]
        let active = latestOrders.values.filter { $0.reversedAt == nil }
        var byTransaction: [String: [DemoTestOrderRow]] = [:]
        for order in active where !order.transactionId.isEmpty { byTransaction[order.transactionId, default: []].append(order) }
        for orders in byTransaction.values where orders.count > 1 { found[DemoAnomaly.duplicateCredit, default: 0] += orders.count - 1 }
        for order in active {
            guard let txn = transactions[order.transactionId] else {
                if order.environment == "production" {
                    if unverifiedIds.contains(order.transactionId) {
                        found[DemoAnomaly.creditedUnverified, default: 0] += 1
                    } else {
                        found[DemoAnomaly.creditedWithoutTransaction, default: 0] += 1
                    }
                }
                continue
            }
            if order.environment == "production" && txn.environment == "Sandbox" { found[DemoAnomaly.sandboxCreditedInProduction, default: 0] += 1 }
            if txn.cancellationMs != nil { found[DemoAnomaly.refundedStillCredited, default: 0] += 1 }
            if let token = order.token, let txnToken = txn.token, token != txnToken { found[DemoAnomaly.accountMismatch, default: 0] += 1 }
            if order.productId != txn.productId { found[DemoAnomaly.productMismatch, default: 0] += 1 }
            if order.quantity != txn.quantity { found[DemoAnomaly.quantityMismatch, default: 0] += 1 }
            if order.creditedUnits != (rules.productUnits[txn.productId] ?? 0) * txn.quantity { found[DemoAnomaly.unitsMismatch, default: 0] += 1 }
        }
        let named = Set(active.map { $0.transactionId })
        for (id, txn) in transactions where txn.environment == "Production" && txn.cancellationMs == nil && !named.contains(id) {
            let type = rules.productTypes[txn.productId]
            if type == "consumable" || type == "non_consumable" { found[DemoAnomaly.notCredited, default: 0] += 1 }
        }
        return found
    }

    static func readRules(_ directory: URL) throws -> DemoTestRules {
        func rows(_ name: String) throws -> [[String]] {
            Array(parseCSV(try String(contentsOf: directory.appendingPathComponent("rules/\(name)"), encoding: .utf8)).dropFirst())
        }
        var rules = DemoTestRules()
        var currencyOf: [String: String] = [:]
        for row in try rows("storefronts.csv") {
            rules.storefronts.insert(row[0]); rules.currencies.insert(row[1]); currencyOf[row[0]] = row[1]
        }
        for row in try rows("products.csv") { rules.productTypes[row[0]] = row[1]; rules.productUnits[row[0]] = Int(row[2]) }
        let exponents = ["JPY": 0, "KRW": 0, "CLP": 0, "KWD": 3, "BHD": 3]
        for row in try rows("prices.csv") {
            rules.pricedPairs.insert("\(row[0])|\(row[1])")
            // Major units written with exactly the currency's minor-unit digits.
            let parts = row[2].split(separator: ".", omittingEmptySubsequences: false)
            let decimals = parts.count == 2 ? parts[1].count : 0
            XCTAssertEqual(decimals, exponents[currencyOf[row[1]] ?? ""] ?? 2, row.joined(separator: ","))
            XCTAssertTrue(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }, row[2])
        }
        for row in try rows("fx.csv") {
            rules.fxKeys.insert("\(row[0])|\(row[1])")
            if rules.fxMonths.last != row[0] { rules.fxMonths.append(row[0]) }
        }
        return rules
    }

    /// RFC 4180 fields (quoted fields may hold commas, quotes and line breaks).
    static func parseCSV(_ text: String) -> [[String]] {
        var rows: [[String]] = [], row: [String] = [], field = ""
        var quoted = false, afterQuote = false
        for character in text {
            if quoted {
                if character == "\"" { quoted = false; afterQuote = true } else { field.append(character) }
                continue
            }
            switch character {
            case "\"": if afterQuote { field.append("\"") }; quoted = true
            case ",": row.append(field); field = ""
            case "\n": row.append(field); rows.append(row); row = []; field = ""
            default: field.append(character)
            }
            afterQuote = false
        }
        if !field.isEmpty || !row.isEmpty { row.append(field); rows.append(row) }
        return rows
    }
}
