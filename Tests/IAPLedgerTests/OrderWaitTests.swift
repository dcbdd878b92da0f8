import XCTest
@testable import LedgerRun
@testable import LedgerStore
import LedgerCore
import LedgerPost

/// A legacy receipt names no storefront: accounting.md books its sale in the storefront of the
/// order naming it, else at `default_storefront`. Orders often come a night after their
/// receipts, so such a sale waits `order_wait_days` for its order: the ledger is then the one
/// a single night with every file gives (rebuilding gives the same entries), and an order
/// later still opens STOREFRONT_AFTER_POSTING instead of being taken in silence.
final class OrderWaitTests: XCTestCase {
    static let config = TestWorkspace.defaultConfig.replacingOccurrences(of: "order_wait_days = 0", with: "order_wait_days = 2")
    let receipt = Receipt.response([Receipt.item("r1", purchased: "2026-10-10T10:00:00Z")]) + "\n"
    let order = ReconciliationTests.header + "o-r1,acc-1,r1,coins.100,1,100,2026-10-10T10:05:00Z,production,JPN,,\n"

    func sale(_ ws: TestWorkspace) throws -> [String]? {
        try ws.workspace.openExistingLedger().1.read {
            try $0.rawRows("SELECT storefront, currency, gross_minor, net_minor, commission_minor, net_reporting_minor, date FROM entry WHERE transaction_id = 'r1' AND kind = 'sale'")
        }.first
    }

    func status(_ ws: TestWorkspace) throws -> [String] {
        try ws.workspace.openExistingLedger().1.read {
            try $0.rawRows("SELECT sale_status, ifnull(pending_reason, '') FROM store_transaction WHERE transaction_id = 'r1'")
        }.first ?? []
    }

    func openFindings(_ ws: TestWorkspace) throws -> [String] {
        try ws.workspace.openExistingLedger().1.read { try $0.findings(openOnly: true) }.map { "\($0.code) \($0.transactionId)" }
    }

    /// While the sale waits for its order, the NOT_CREDITED it raises has no amount: the
    /// reconciliation Summary shows its category's amount empty, not 0, and says how many open
    /// exceptions the amounts leave out; once booked, the amount is there and the count is 0.
    func testAnExceptionWhoseSaleWaitsShowsNoAmountAndIsCounted() throws {
        let ws = try TestWorkspace(config: Self.config)
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", receipt)
        try ws.run("2026-10-10")
        func summary(_ day: String) throws -> (notCredited: [String], note: String) {
            let rows = try XCTUnwrap(XLSXReader.sheets(ws.root.appendingPathComponent("reports/\(day)/reconciliation-\(day).xlsx"))["Summary"])
            return (try XCTUnwrap(rows.first { $0.first == "NOT_CREDITED" }),
                    try XCTUnwrap(rows.compactMap(\.first).first { $0.hasPrefix("Open exceptions with no amount") }))
        }
        let waiting = try summary("2026-10-10")
        XCTAssertEqual(waiting.notCredited[2], "1")
        XCTAssertEqual(waiting.notCredited.count > 4 ? waiting.notCredited[4] : "", "", "no amount, not 0: \(waiting.notCredited)")
        XCTAssertTrue(waiting.note.contains("which the amounts leave out: 1 ("), waiting.note)
        // The lost order's detail says its sale waits for its order (it read as lost beside the
        // Pending sheet's word that it waits), and that an order in time resolves it.
        func detail(_ day: String) throws -> String {
            let rows = try XCTUnwrap(XLSXReader.sheets(ws.root.appendingPathComponent("reports/\(day)/reconciliation-\(day).xlsx"))["Exceptions"])
            return try XCTUnwrap(rows.first { $0.first == "NOT_CREDITED" }?.last)
        }
        let whileWaiting = try detail("2026-10-10")
        XCTAssertTrue(whileWaiting.hasSuffix("; its sale waits for its order (ORDER_WAIT, on the Pending sheet): an order read before the wait ends resolves this"), whileWaiting)
        try ws.run("2026-10-13")
        let afterBooking = try detail("2026-10-13")
        XCTAssertFalse(afterBooking.contains("waits"), "booked: \(afterBooking)")
        let booked = try summary("2026-10-13")
        XCTAssertEqual(booked.notCredited[2], "1")
        XCTAssertEqual(XLSXReader.minor(booked.notCredited[4], decimals: 2), 99, "booked at the default storefront: 0.99 USD")
        XCTAssertTrue(booked.note.contains("which the amounts leave out: 0 ("), booked.note)
    }

    /// The order a night after its receipt: the sale waited for it and is booked where one
    /// night with both files books it, to the minor unit.
    func testASaleWaitsForAnOrderANightLateAndIsBookedAsInOneNight() throws {
        let split = try TestWorkspace(config: Self.config)
        defer { split.remove() }
        try split.write("inbox/receipts/a.jsonl", receipt)
        try split.run("2026-10-10")
        XCTAssertNil(try sale(split), "no order and no storefront of its own yet: it waits")
        let waiting = try status(split)
        XCTAssertEqual(waiting.first, "pending")
        XCTAssertTrue(waiting.last?.hasPrefix("ORDER_WAIT: no storefront of its own, and no order naming one yet: waits for an order until the night of 2026-10-12 (order_wait_days = 2), then is booked at default_storefront USA") == true, "\(waiting)")
        XCTAssertEqual(try openFindings(split), ["ORDER_WAIT r1"], "said while it waits (Run Info), as no missing rule")
        try split.write("inbox/orders/b.csv", order)
        try split.run("2026-10-11")

        let whole = try TestWorkspace(config: Self.config)
        defer { whole.remove() }
        try whole.write("inbox/receipts/a.jsonl", receipt)
        try whole.write("inbox/orders/b.csv", order)
        try whole.run("2026-10-11")

        let booked = try XCTUnwrap(try sale(split))
        XCTAssertEqual(booked.first, "JPN")
        XCTAssertEqual(booked, try sale(whole), "the same entry as one night with both files")
        XCTAssertEqual(try status(split), ["posted", ""])
        XCTAssertEqual(try openFindings(split), [], "ORDER_WAIT resolved when booked")
    }

    /// No order within the wait: booked at `default_storefront` on the night the wait ends; an
    /// order read after that opens STOREFRONT_AFTER_POSTING (the entry stays as posted), once.
    func testWithoutAnOrderTheSaleIsBookedAtTheDefaultWhenTheWaitEndsAndALaterOrderIsAFinding() throws {
        let ws = try TestWorkspace(config: Self.config)
        defer { ws.remove() }
        try ws.write("inbox/receipts/a.jsonl", receipt)
        try ws.run("2026-10-10")
        try ws.run("2026-10-11")
        XCTAssertNil(try sale(ws), "still waiting on the night before the wait ends")
        // A workbook written again for 2026-10-10 (a date before the last run) lists it on
        // Pending too: ORDER_WAIT opens no finding, which is what that list read for a past date.
        let then = try ws.workspace.openExistingLedger().1.read { try $0.pendingTransactions(on: Day(iso: "2026-10-10")!).listed }
        XCTAssertEqual(then.map(\.transactionId), ["r1"])
        XCTAssertTrue(then.first?.reason.hasPrefix("ORDER_WAIT:") == true)
        // Listed up to a limit, counted in all (a sheet holds 1,048,576 rows), then and now.
        for day in ["2026-10-10", "2026-10-11"] {
            let capped = try ws.workspace.openExistingLedger().1.read { try $0.pendingTransactions(on: Day(iso: day)!, limit: 0) }
            XCTAssertEqual(capped.listed.count, 0)
            XCTAssertEqual(capped.count, 1)
        }
        let night = try ws.run("2026-10-12")
        let booked = try XCTUnwrap(try sale(ws))
        XCTAssertEqual(Array(booked.prefix(3)), ["USA", "USD", "99"], "booked at default_storefront")
        // Counted where finance reads the night: the summary and Run Info, with its gross (the
        // night before, which posted nothing, says nothing of it).
        XCTAssertEqual(night.posted.atDefaultStorefront, 1)
        XCTAssertEqual(night.posted.breakdown(), " (1 sale, of them 1 that waited for their order (its storefront, or the end of the wait: the default storefront) on an earlier night, 1 booked at default_storefront (production; no storefront of their own, no order naming one))")
        func info(_ day: String) throws -> [[String]] {
            try XCTUnwrap(XLSXReader.sheets(ws.root.appendingPathComponent("reports/\(day)/finance-\(day).xlsx"))["Run Info"])
        }
        let rows = try info("2026-10-12")
        let at = try XCTUnwrap(rows.firstIndex { $0.first == "  sales booked at default_storefront USA (no storefront of their own, no order naming one)" }, "\(rows)")
        XCTAssertEqual(rows[at].dropFirst().first, "1")
        XCTAssertEqual(rows[at + 1].prefix(2), ["    their gross (USD)", "0.99"])
        XCTAssertFalse(try info("2026-10-11").contains { $0.first?.contains("default_storefront") == true })
        XCTAssertFalse(try XCTUnwrap(XLSXReader.sheets(ws.root.appendingPathComponent("reports/2026-10-12/sandbox-2026-10-12.xlsx"))["Run Info"])
            .contains { $0.first?.contains("default_storefront") == true }, "the production book's sale, not the sandbox's")
        XCTAssertEqual(try openFindings(ws), [])
        let waitedThen = try ws.workspace.openExistingLedger().1.read { try $0.pendingTransactions(on: Day(iso: "2026-10-11")!).listed }
        XCTAssertEqual(waitedThen.map(\.transactionId), ["r1"], "a list written again for 2026-10-11 still says it waited then, though posted since")

        try ws.write("inbox/orders/b.csv", order)
        try ws.run("2026-10-13")
        XCTAssertEqual(try sale(ws), booked, "a posted entry is never rewritten")
        XCTAssertEqual(try openFindings(ws), ["STOREFRONT_AFTER_POSTING r1"])
        let message = try ws.workspace.openExistingLedger().1.read { try $0.findings(openOnly: true) }.first?.message ?? ""
        XCTAssertTrue(message.hasPrefix("booked at default_storefront USA: no storefront of its own and no order naming one when it was posted; order o-r1, read since, names JPN"), message)

        // An order reversed by the time it is read (a refund's credit taken back) names its
        // storefront for posting as an active one does: so for the finding too (it was silent).
        let reversedOrder = order.replacingOccurrences(of: "production,JPN,,", with: "production,JPN,,2026-10-11T09:00:00Z")
        let reversed = try TestWorkspace(config: Self.config)
        defer { reversed.remove() }
        try reversed.write("inbox/receipts/a.jsonl", receipt)
        try reversed.run("2026-10-12")
        try reversed.write("inbox/orders/b.csv", reversedOrder)
        try reversed.run("2026-10-13")
        XCTAssertEqual(try sale(reversed), booked)
        XCTAssertEqual(try openFindings(reversed), ["STOREFRONT_AFTER_POSTING r1"])
        // Read together with the receipt, the same reversed order gives the sale its storefront.
        let together = try TestWorkspace(config: Self.config)
        defer { together.remove() }
        try together.write("inbox/receipts/a.jsonl", receipt)
        try together.write("inbox/orders/b.csv", reversedOrder)
        try together.run("2026-10-12")
        XCTAssertEqual(try sale(together)?.first, "JPN")
        XCTAssertEqual(try openFindings(together), [])

        // An order naming the default storefront itself says nothing.
        let usa = try TestWorkspace(config: Self.config)
        defer { usa.remove() }
        try usa.write("inbox/receipts/a.jsonl", receipt)
        try usa.run("2026-10-12")
        try usa.write("inbox/orders/b.csv", order.replacingOccurrences(of: "JPN", with: "USA"))
        try usa.run("2026-10-13")
        XCTAssertEqual(try openFindings(usa), [])
    }

    /// A signed transaction names its storefront: it never waits. `order_wait_days = 0` books a
    /// legacy sale at once, and the setting is checked.
    func testTheWaitIsOnlyForSalesWithoutAStorefrontAndCanBeTurnedOff() throws {
        let none = try TestWorkspace()  // order_wait_days = 0
        defer { none.remove() }
        try none.write("inbox/receipts/a.jsonl", receipt)
        try none.run("2026-10-10")
        XCTAssertEqual(try sale(none)?.first, "USA")

        var config = WorkspaceConfig()
        config.orderWaitDays = 2
        let poster = Poster(config: config, rules: Rules())
        var t = TransactionObservation(transactionId: "s1", originalTransactionId: nil, productId: "coins.100", quantity: 1,
                                       purchaseMs: Receipt.ms("2026-10-10T10:00:00Z"), book: .production)
        let day = Day(iso: "2026-10-10")!
        XCTAssertEqual(poster.orderWait(of: t, orderStorefront: nil, asOf: day), Day(iso: "2026-10-12"))
        XCTAssertNil(poster.orderWait(of: t, orderStorefront: ("JPN", "o-1"), asOf: day), "its order names one")
        XCTAssertNil(poster.orderWait(of: t, orderStorefront: nil, asOf: day + 2), "the wait has ended")
        t.storefront = "DEU"
        XCTAssertNil(poster.orderWait(of: t, orderStorefront: nil, asOf: day), "its own storefront")

        let bad = try TestWorkspace(config: Self.config.replacingOccurrences(of: "order_wait_days = 2", with: "order_wait_days = 61"))
        defer { bad.remove() }
        XCTAssertThrowsError(try bad.run("2026-10-10")) { XCTAssertTrue("\($0)".contains("order_wait_days"), "\($0)") }
    }
}
