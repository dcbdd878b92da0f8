import XCTest
@testable import LedgerCore
@testable import LedgerPost
@testable import LedgerRun
@testable import LedgerStore

/// Issue 4: the reduced commission after a subscriber's first paid year (accounting.md step 3),
/// closed periods and late entries (accounting.md "Closed periods").
final class TenureAndPeriodsTests: XCTestCase {
    // MARK: - Tenure, pure

    typealias Item = SubscriptionTenure.ChainItem
    static let dayMs: Int64 = 86_400_000

    static func ms(_ iso: String) -> Int64 { Receipt.ms(iso) }

    /// `count` consecutive monthly periods from `start` (YYYY-MM-DD, 12:00 UTC), each expiring
    /// when the next one is bought: calendar months, as the App Store renews them.
    static func monthly(from start: String, count: Int) -> [Item] {
        let d = Day(iso: start)!.civil
        return (0..<count).map { i in
            func at(_ k: Int) -> Int64 {
                let m = d.month - 1 + k
                return Day(year: d.year + m / 12, month: m % 12 + 1, day: d.day).epochMilliseconds + 12 * 3_600_000
            }
            return Item(purchaseMs: at(i), expiresMs: at(i + 1))
        }
    }

    /// A monthly subscription renewed 13 times (14 purchases): the paid days before each.
    func testPaidDaysOfAMonthlySubscriptionRenewed13Times() {
        let chain = Self.monthly(from: "2025-01-15", count: 14)
        let paid = chain.map { SubscriptionTenure.paidDays(before: $0.purchaseMs, chain: chain, graceDays: 60) }
        // Jan 31, Feb 28 (2025), Mar 31, Apr 30, May 31, Jun 30, Jul 31, Aug 31, Sep 30, Oct 31, Nov 30, Dec 31, Jan 31.
        XCTAssertEqual(paid, [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365, 396])
    }

    /// Lapses, refunds and free trials: chain in, paid days before the last purchase out.
    func testLapsesRefundsAndTrialsTable() {
        let year = Self.monthly(from: "2025-01-15", count: 12)      // 365 paid days, last expiry 2026-01-15 12:00
        let yearEndMs = year.last!.expiresMs!
        func renewal(afterGapDays gap: Int64, extraMs: Int64 = 0) -> Item {
            let p = yearEndMs + gap * Self.dayMs + extraMs
            return Item(purchaseMs: p, expiresMs: p + 30 * Self.dayMs)
        }
        func refunded(_ chain: [Item], _ index: Int, atMs: Int64? = nil) -> [Item] {
            var c = chain
            c[index].fullyRefundedMs = atMs ?? c[index].purchaseMs + 2 * Self.dayMs
            return c
        }
        struct Row { var name: String; var chain: [Item]; var this: Item; var want: Int }
        let rows: [Row] = [
            Row(name: "no gap", chain: year, this: renewal(afterGapDays: 0), want: 365),
            Row(name: "lapse of 59 days keeps the count", chain: year, this: renewal(afterGapDays: 59), want: 365),
            Row(name: "lapse of exactly 60 days (the grace) keeps the count", chain: year, this: renewal(afterGapDays: 60), want: 365),
            Row(name: "60 days and 23 hours is 60 whole days", chain: year, this: renewal(afterGapDays: 60, extraMs: 23 * 3_600_000), want: 365),
            Row(name: "lapse of 61 days restarts the count", chain: year, this: renewal(afterGapDays: 61), want: 0),
            Row(name: "a lapse of 61 days earlier restarts, later periods count",
                chain: year + [renewal(afterGapDays: 61)], this: renewal(afterGapDays: 61 + 30), want: 30),
            Row(name: "a lapse of 59 days earlier does not restart",
                chain: year + [renewal(afterGapDays: 59)], this: renewal(afterGapDays: 59 + 30), want: 395),
            Row(name: "a fully refunded month does not count (Feb 2025, 28 days)",
                chain: refunded(year, 1), this: renewal(afterGapDays: 0), want: 365 - 28),
            Row(name: "a refund dated after this purchase did not exist yet",
                chain: refunded(year, 1, atMs: yearEndMs + Self.dayMs), this: renewal(afterGapDays: 0), want: 365),
            Row(name: "a refund dated a millisecond after this purchase did not exist yet",
                chain: refunded(year, 11, atMs: yearEndMs + 1), this: renewal(afterGapDays: 0, extraMs: 0), want: 365),
            Row(name: "an upgrade: the period upgraded from is refunded at this purchase's instant, so it does not count",
                chain: refunded(year, 11, atMs: yearEndMs), this: renewal(afterGapDays: 0), want: 365 - 31),
            Row(name: "free trial first: not paid, and no lapse",
                chain: [Item(purchaseMs: year[0].purchaseMs - 7 * Self.dayMs, expiresMs: year[0].purchaseMs, freeTrial: true)] + year,
                this: renewal(afterGapDays: 0), want: 365),
            Row(name: "a free trial bridges what would be a lapse",
                chain: year + [Item(purchaseMs: yearEndMs + 50 * Self.dayMs, expiresMs: yearEndMs + 80 * Self.dayMs, freeTrial: true)],
                this: renewal(afterGapDays: 80 + 50), want: 365),
            Row(name: "no expiry contributes nothing",
                chain: [Item(purchaseMs: year[0].purchaseMs, expiresMs: nil)], this: renewal(afterGapDays: 0), want: 0),
            Row(name: "later purchases do not count", chain: year + [renewal(afterGapDays: 0)], this: year[6], want: 181),
        ]
        for r in rows {
            XCTAssertEqual(SubscriptionTenure.paidDays(before: r.this.purchaseMs, chain: r.chain + [r.this], graceDays: 60), r.want, r.name)
        }
    }

    /// The count as it was written before `explained` shared its walk (kept here as the
    /// reference): the same days for every chain.
    static func referencePaidDays(before purchaseMs: Int64, chain: [Item], graceDays: Int) -> Int {
        let earlier = chain
            .filter { $0.purchaseMs < purchaseMs && $0.expiresMs != nil }
            .filter { item in item.fullyRefundedMs.map { $0 > purchaseMs } ?? true }
            .sorted { ($0.purchaseMs, $0.expiresMs!) < ($1.purchaseMs, $1.expiresMs!) }
        var paidDays = 0
        var coveredUntilMs: Int64? = nil
        for item in earlier {
            let expiresMs = item.expiresMs!
            if let covered = coveredUntilMs, SubscriptionTenure.wholeDays(from: covered, to: item.purchaseMs) > graceDays {
                paidDays = 0
            }
            if !item.freeTrial { paidDays += SubscriptionTenure.wholeDays(from: item.purchaseMs, to: expiresMs) }
            coveredUntilMs = max(coveredUntilMs ?? expiresMs, expiresMs)
        }
        if let covered = coveredUntilMs, SubscriptionTenure.wholeDays(from: covered, to: purchaseMs) > graceDays { return 0 }
        return paidDays
    }

    /// Seeded chains of every shape (gaps around the grace, trials, refunds before and after,
    /// no expiry, purchases on the same instant, out of order): `paidDays` and `explained` give
    /// the reference's days, and the explanation adds up to them: the paid days after its last
    /// restart, and a restart last only when the count is 0.
    func testExplainedCountIsThePaidDays() {
        var rng = SplitMix64(7)
        let start = Self.ms("2025-01-01T00:00:00Z")
        for _ in 0..<2_000 {
            var chain: [Item] = []
            var at = start
            for _ in 0..<Int.random(in: 0...9, using: &rng) {
                at += Int64.random(in: [0, 1, 40, 59, 60, 61, 62, 90].randomElement(using: &rng)!...100, using: &rng) * Self.dayMs / 2
                    + Int64.random(in: 0..<Self.dayMs, using: &rng)
                let length = [7, 28, 30, 31, 365].randomElement(using: &rng)! * Self.dayMs + Int64.random(in: -5_000...5_000, using: &rng)
                var item = Item(purchaseMs: at, expiresMs: Int.random(in: 0..<12, using: &rng) == 0 ? nil : at + length,
                                freeTrial: Int.random(in: 0..<6, using: &rng) == 0)
                if Int.random(in: 0..<5, using: &rng) == 0 { item.fullyRefundedMs = at + Int64.random(in: 0...(90 * Self.dayMs), using: &rng) }
                chain.append(item)
                if Int.random(in: 0..<8, using: &rng) == 0 { chain.append(item) }
            }
            chain.shuffle(using: &rng)
            let purchases = chain.map(\.purchaseMs) + [at + Int64.random(in: 0...(120 * Self.dayMs), using: &rng)]
            for p in purchases {
                let want = Self.referencePaidDays(before: p, chain: chain, graceDays: 60)
                XCTAssertEqual(SubscriptionTenure.paidDays(before: p, chain: chain, graceDays: 60), want)
                let (days, steps) = SubscriptionTenure.explained(before: p, chain: chain, graceDays: 60)
                XCTAssertEqual(days, want)
                let sinceRestart = steps.split { if case .restarted = $0 { return true } else { return false } }
                let added = steps.last.map { if case .restarted = $0 { return 0 } else {
                    return (sinceRestart.last ?? []).reduce(0) { if case .paid(_, let d) = $1 { return $0 + d } else { return $0 } } } } ?? 0
                XCTAssertEqual(added, want, "the steps add up to the paid days")
                XCTAssertEqual(steps.filter { switch $0 { case .restarted, .gap: return false; default: return true } }.count,
                               chain.filter { $0.purchaseMs < p }.count, "every earlier transaction is named once")
            }
        }
    }

    /// The explanation of one chain, step by step: a trial, paid months, one refunded, a
    /// transaction without expiry, a lapse of 61 days that restarts the count.
    func testExplainedStepsOfAChain() {
        let year = Self.monthly(from: "2025-01-15", count: 3)          // Jan 31, Feb 28, Mar 31 days
        let trial = Item(purchaseMs: year[0].purchaseMs - 7 * Self.dayMs, expiresMs: year[0].purchaseMs, freeTrial: true)
        var refunded = year[1]
        refunded.fullyRefundedMs = refunded.purchaseMs + Self.dayMs
        let noExpiry = Item(purchaseMs: year[2].purchaseMs + Self.dayMs, expiresMs: nil)
        let afterLapse = Item(purchaseMs: year[2].expiresMs! + 61 * Self.dayMs, expiresMs: year[2].expiresMs! + 91 * Self.dayMs)
        let chain = [afterLapse, year[2], noExpiry, refunded, year[0], trial]   // in no order
        let (days, steps) = SubscriptionTenure.explained(before: afterLapse.expiresMs!, chain: chain, graceDays: 60)
        XCTAssertEqual(days, 30)
        // Refunded February (28 days) leaves a gap of 28 days between January and March: within
        // the grace, shown, the count going on.
        XCTAssertEqual(steps, [.freeTrial(5), .paid(4, days: 31), .refunded(3), .gap(lapseDays: 28, beforeMs: year[2].purchaseMs), .paid(1, days: 31), .noExpiry(2),
                               .restarted(lapseDays: 61, beforeMs: afterLapse.purchaseMs), .paid(0, days: 30)])
        XCTAssertEqual(SubscriptionTenure.explained(before: afterLapse.purchaseMs, chain: chain, graceDays: 60).steps.last,
                       .restarted(lapseDays: 61, beforeMs: afterLapse.purchaseMs), "a lapse just before this purchase")
    }

    /// "Fully refunded" from a stored transaction: a cancellation with no percentage or 100000,
    /// not reversed; trials and zero-price offers are not paid.
    func testChainItemFromTransaction() {
        func t(cancel: Int64? = 5, pct: Int64? = nil, trial: Bool = false, price: Int64? = nil) -> TransactionObservation {
            TransactionObservation(transactionId: "x", originalTransactionId: "o", productId: "vip.monthly", purchaseMs: 1,
                                   expiresMs: 2, cancellationMs: cancel, revocationPercentage: pct, book: .production,
                                   priceMilliunits: price, isFreeTrial: trial)
        }
        XCTAssertEqual(Item(t(), refundReversed: false).fullyRefundedMs, 5)
        XCTAssertEqual(Item(t(pct: 100_000), refundReversed: false).fullyRefundedMs, 5)
        XCTAssertNil(Item(t(pct: 50_000), refundReversed: false).fullyRefundedMs)
        XCTAssertNil(Item(t(), refundReversed: true).fullyRefundedMs)
        XCTAssertNil(Item(t(cancel: nil), refundReversed: false).fullyRefundedMs)
        XCTAssertTrue(Item(t(trial: true), refundReversed: false).freeTrial)
        XCTAssertTrue(Item(t(price: 0), refundReversed: false).freeTrial)
        XCTAssertFalse(Item(t(price: 9990), refundReversed: false).freeTrial)
    }

    // MARK: - Commission by tenure and small business, pure

    static func subscriptionRules() -> Rules {
        Rules(storefronts: [StorefrontRule(storefront: "USA", currency: "USD", taxRate: ExactDecimal("0")!, taxIncluded: false,
                                           effectiveFrom: Day(iso: "2020-01-01")!)],
              prices: [PriceRule(productId: "vip.monthly", storefront: "USA", price: ExactDecimal("9.99")!, effectiveFrom: Day(iso: "2020-01-01")!),
                       PriceRule(productId: "coins.100", storefront: "USA", price: ExactDecimal("0.99")!, effectiveFrom: Day(iso: "2020-01-01")!)],
              products: [ProductRule(productId: "vip.monthly", type: .autoRenewable, units: 0),
                         ProductRule(productId: "coins.100", type: .consumable, units: 100)])
    }

    func sub(_ at: Int64, product: String = "vip.monthly") -> TransactionObservation {
        TransactionObservation(transactionId: "s\(at)", originalTransactionId: "s", productId: product, purchaseMs: at,
                               book: .production, storefront: "USA")
    }

    /// 9.99 USD: 30% is round(299.7) = 300, 15% is round(149.85) = 150.
    func testMonthlySubscriptionGets30PercentUntil365PaidDaysThen15() {
        var config = WorkspaceConfig()
        config.smallBusiness = []
        let poster = Poster(config: config, rules: Self.subscriptionRules())
        let chain = Self.monthly(from: "2025-01-15", count: 14)
        var commissions: [Int64] = []
        for item in chain {
            let days = SubscriptionTenure.paidDays(before: item.purchaseMs, chain: chain, graceDays: config.subscriptionGraceDays)
            guard case .post(let e) = poster.sale(of: sub(item.purchaseMs), subscriptionPaidDays: days) else { return XCTFail() }
            commissions.append(e.figures.commissionMinor)
            XCTAssertTrue(e.rules.commissionReason.contains("\(days) paid days"), e.rules.commissionReason)
        }
        XCTAssertEqual(commissions, Array(repeating: 300, count: 12) + [150, 150])
    }

    /// Small-business range 2026-01-01..2026-06-30 and the tenure rule together.
    func testSmallBusinessRangeAndTenureTogether() {
        var config = WorkspaceConfig()
        config.smallBusiness = [.init(from: Day(iso: "2026-01-01")!, to: Day(iso: "2026-06-30")!)]
        let poster = Poster(config: config, rules: Self.subscriptionRules())
        struct Row { var at: String; var product = "vip.monthly"; var paidDays: Int; var rate: String; var reason: String }
        let rows: [Row] = [
            Row(at: "2025-12-31T23:59:59Z", paidDays: 364, rate: "0.30", reason: "standard: subscription has 364 paid days"),
            Row(at: "2025-12-31T23:59:59Z", paidDays: 365, rate: "0.15", reason: "reduced: subscription has 365 paid days"),
            Row(at: "2026-01-01T00:00:00Z", paidDays: 0, rate: "0.15", reason: "reduced: small business program"),
            Row(at: "2026-03-01T00:00:00Z", paidDays: 400, rate: "0.15", reason: "reduced: subscription has 400 paid days"),
            Row(at: "2026-06-30T23:59:59Z", paidDays: 10, rate: "0.15", reason: "reduced: small business program"),
            Row(at: "2026-07-01T00:00:00Z", paidDays: 10, rate: "0.30", reason: "standard: subscription has 10 paid days"),
            Row(at: "2026-07-01T00:00:00Z", paidDays: 365, rate: "0.15", reason: "reduced: subscription has 365 paid days"),
            // Tenure is for auto-renewables only.
            Row(at: "2026-07-01T00:00:00Z", product: "coins.100", paidDays: 999, rate: "0.30", reason: "standard"),
            Row(at: "2026-02-01T00:00:00Z", product: "coins.100", paidDays: 999, rate: "0.15", reason: "reduced: small business program"),
        ]
        for r in rows {
            guard case .post(let e) = poster.sale(of: sub(Self.ms(r.at), product: r.product), subscriptionPaidDays: r.paidDays) else {
                XCTFail(r.at); continue
            }
            XCTAssertEqual(e.rules.commissionRate, r.rate, "\(r.at) \(r.product) \(r.paidDays)")
            XCTAssertTrue(e.rules.commissionReason.hasPrefix(r.reason), "\(r.at): \(e.rules.commissionReason)")
        }
    }

    // MARK: - Late entries, pure

    /// Entry date in, closed-through month in: posting date and late mark out.
    func testPostingDatesAroundClosedMonths() {
        struct Row { var closed: String?; var day: String; var posted: String; var late: Bool }
        let rows: [Row] = [
            Row(closed: nil, day: "2026-09-25", posted: "2026-09-25", late: false),
            Row(closed: "2026-09", day: "2026-09-25", posted: "2026-10-01", late: true),
            Row(closed: "2026-09", day: "2026-09-30", posted: "2026-10-01", late: true),
            Row(closed: "2026-09", day: "2026-10-01", posted: "2026-10-01", late: false),
            Row(closed: "2026-10", day: "2026-09-25", posted: "2026-11-01", late: true),
            Row(closed: "2026-10", day: "2026-10-20", posted: "2026-11-01", late: true),
            Row(closed: "2026-10", day: "2026-11-03", posted: "2026-11-03", late: false),
            Row(closed: "2026-12", day: "2026-12-31", posted: "2027-01-01", late: true),
        ]
        var config = WorkspaceConfig()
        let poster0 = Poster(config: config, rules: Self.subscriptionRules())
        guard case .post(let sale) = poster0.sale(of: sub(Self.ms("2026-09-10T10:00:00Z"), product: "coins.100")) else { return XCTFail() }
        for r in rows {
            config.closedThrough = r.closed.flatMap { Month(iso: $0) }
            let poster = Poster(config: config, rules: Self.subscriptionRules())
            let day = Day(iso: r.day)!
            let refund = poster.refund(of: sale, on: day, percentage: nil)
            let reversal = poster.reversal(of: refund, on: day)
            for e in [refund, reversal] {
                XCTAssertEqual(e.date.description, r.posted, "\(r)")
                XCTAssertEqual(e.originalDate, day, "\(r)")
                XCTAssertEqual(e.late, r.late, "\(r)")
            }
        }
    }

    // MARK: - End to end

    var ws: TestWorkspace!
    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }

    func ledger() throws -> Ledger { try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path) }
    func rows(_ sql: String) throws -> [[String]] { try ledger().read { try $0.rawRows(sql) } }
    func septemberBalance() throws -> [TrialBalanceRow] {
        try ledger().read { try $0.trialBalance(book: .production, through: Day(iso: "2026-09-30")!) }
    }
    func close(_ month: String, asOf: String, by user: String = "alice") throws -> ClosedPeriods.CloseResult {
        try ClosedPeriods.close(month: Month(iso: month)!, workspace: ws.workspace, asOf: Day(iso: asOf)!,
                                closedBy: user, closedAt: "\(asOf)T09:00:00Z")
    }

    /// Legacy receipts of a monthly subscription renewed 13 times: one run posts 12 months at 30%
    /// and two at 15%; a fully refunded month delays the drop by its length.
    func testNightlyRunAppliesTenureFromTheStoredChain() throws {
        func chain(_ original: String, refundIndex: Int? = nil) -> [String] {
            Self.monthly(from: "2025-09-15", count: 14).enumerated().map { i, it in
                func iso(_ ms: Int64) -> String {
                    let d = Day(epochMilliseconds: ms)
                    return "\(d)T12:00:00Z"
                }
                return Receipt.item("\(original)-\(i)", product: "vip.monthly", purchased: iso(it.purchaseMs),
                                    cancelled: i == refundIndex ? iso(it.purchaseMs + 3 * Self.dayMs) : nil,
                                    original: original, expires: iso(it.expiresMs!))
            }
        }
        try ws.write("inbox/receipts/subs.json", "[" + [
            Receipt.response(chain("A")),
            Receipt.response(chain("B", refundIndex: 5)),      // 2026-02-15..2026-03-15: 28 days refunded
        ].joined(separator: ",") + "]")
        try ws.run("2026-11-20")
        let sales = try rows("SELECT transaction_id, commission_minor FROM entry WHERE kind = 'sale' ORDER BY transaction_id")
        let commission = Dictionary(uniqueKeysWithValues: sales.map { ($0[0], Int64($0[1])!) })
        // A: 2025-09-15 .. 2026-09-15 is 365 days, so A-12 (2026-09-15) and A-13 have the reduced rate.
        XCTAssertEqual((0..<14).map { commission["A-\($0)"] }, Array(repeating: 300, count: 12) + [150, 150])
        // B: its refunded month (28 days) does not count: 337 days before B-12, 395 - 28 = 367 before B-13.
        XCTAssertEqual((0..<14).map { commission["B-\($0)"] }, Array(repeating: 300, count: 13) + [150])
        let reason = try rows("SELECT rules_json FROM entry WHERE transaction_id = 'B-12' AND kind = 'sale'")[0][0]
        XCTAssertTrue(reason.contains("337 paid days"), reason)
    }

    /// `trace` shows the count behind a renewal's rate, period by period, and says when the
    /// chain as it stands now gives other days than the sale was posted with (its earlier
    /// periods arrived after it).
    func testTraceShowsTheSubscriptionTenure() throws {
        let chain = Self.monthly(from: "2025-09-15", count: 14).enumerated().map { i, it in
            Receipt.item("C-\(i)", product: "vip.monthly", purchased: "\(Day(epochMilliseconds: it.purchaseMs))T12:00:00Z",
                         cancelled: i == 5 ? "\(Day(epochMilliseconds: it.purchaseMs + 3 * Self.dayMs))T12:00:00Z" : nil,
                         original: "C", expires: "\(Day(epochMilliseconds: it.expiresMs!))T12:00:00Z")
        }
        // The last renewal arrives first: posted with no earlier period known.
        try ws.write("inbox/receipts/late.json", "[" + Receipt.response([chain[13]]) + "]")
        try ws.run("2026-11-19")
        try ws.write("inbox/receipts/subs.json", "[" + Receipt.response(Array(chain[0..<13])) + "]")
        try ws.run("2026-11-20")
        let config = try ws.workspace.loadConfig(), rules = try ws.workspace.loadRules()
        func trace(_ id: String) throws -> TransactionTrace {
            try ledger().read { r in try TraceOutput.withTenure(try XCTUnwrap(r.traceTransaction(id, asOf: nil)), reader: r, config: config, rules: rules) }
        }
        let t12 = try XCTUnwrap(trace("C-12").subscription)
        XCTAssertEqual(t12.paid_days, 337, "a year less the refunded February (28 days)")
        XCTAssertEqual(t12.posted_with_days, 337)
        // The refunded month leaves a lapse of 28 days before the next: within the grace, shown.
        XCTAssertEqual(t12.steps.map(\.kind), Array(repeating: "paid", count: 5) + ["refunded", "gap"] + Array(repeating: "paid", count: 6))
        XCTAssertEqual(t12.steps[6].days, 28)
        XCTAssertEqual(t12.steps[5].transaction_id, "C-5")
        XCTAssertEqual(t12.steps[0].purchase_date, "2025-09-15T12:00:00Z")
        XCTAssertEqual(t12.steps[0].days, 30)
        let text = TraceOutput.text(try trace("C-12"))
        XCTAssertTrue(text.contains("Subscription tenure (original transaction C"), text)
        XCTAssertTrue(text.contains("2026-02-15T12:00:00Z .. 2026-03-15T12:00:00Z  C-5: fully refunded before this purchase (or at its instant, as an upgrade's), not counted"), text)
        XCTAssertTrue(text.contains("  lapse of 28 whole days before the purchase of 2026-03-15T12:00:00Z: within the 60-day grace, the count goes on"), text)
        XCTAssertTrue(text.contains("  = 337 paid days before this purchase"), text)
        XCTAssertFalse(text.contains("was posted with"), text)

        let t13 = try trace("C-13")
        XCTAssertEqual(t13.subscription?.paid_days, 367)
        XCTAssertEqual(t13.subscription?.posted_with_days, 0, "posted the night before its chain arrived")
        XCTAssertTrue(TraceOutput.text(t13).contains("its sale was posted with 0 paid days"), TraceOutput.text(t13))
        XCTAssertTrue(TraceOutput.json(t13).contains("\"posted_with_days\" : 0"), TraceOutput.json(t13))
        // No original transaction id: no chain, 0 days (as the posting counts them).
        var lone = try ledger().read { r in try XCTUnwrap(r.traceTransaction("C-12", asOf: nil)) }
        lone.original_transaction_id = nil
        let loneTrace = try ledger().read { r in try TraceOutput.withTenure(lone, reader: r, config: config, rules: rules) }
        XCTAssertEqual(loneTrace.subscription?.paid_days, 0)
        XCTAssertEqual(loneTrace.subscription?.steps.count, 0)
        XCTAssertTrue(TraceOutput.text(loneTrace).contains("Subscription tenure: no original transaction id, so no chain: 0 paid days"))
        // Instants to the millisecond (days are counted from them), before 1970 too.
        XCTAssertEqual(TraceOutput.instant(Self.ms("2025-01-15T00:00:00Z") + 500), "2025-01-15T00:00:00.500Z")
        XCTAssertEqual(TraceOutput.instant(Self.ms("2025-01-15T12:34:56Z") + 7), "2025-01-15T12:34:56.007Z")
        XCTAssertEqual(TraceOutput.instant(-1), "1969-12-31T23:59:59.999Z")
        // Not an auto-renewable: no tenure.
        var coins = try ledger().read { r in try XCTUnwrap(r.traceTransaction("C-12", asOf: nil)) }
        coins.product_id = "coins.100"
        XCTAssertNil(try ledger().read { r in try TraceOutput.withTenure(coins, reader: r, config: config, rules: rules) }.subscription)
    }

    /// Two subscriptions whose original transaction ids are canonically equivalent text but
    /// different bytes are two chains: a new one is not given the other's year of tenure.
    func testCanonicallyEquivalentOriginalIdsAreTwoChains() throws {
        let decomposed = "s-cafe\u{301}", precomposed = "s-caf\u{E9}"
        func iso(_ ms: Int64) -> String { "\(Day(epochMilliseconds: ms))T12:00:00Z" }
        let old = Self.monthly(from: "2025-09-15", count: 14).enumerated().map { i, it in
            Receipt.item("old-\(i)", product: "vip.monthly", purchased: iso(it.purchaseMs), original: decomposed, expires: iso(it.expiresMs!))
        }
        let new = Receipt.item("new-0", product: "vip.monthly", purchased: "2026-11-16T12:00:00Z", original: precomposed,
                               expires: "2026-12-16T12:00:00Z")
        try ws.write("inbox/receipts/subs.json", "[" + [Receipt.response(old), Receipt.response([new])].joined(separator: ",") + "]")
        try ws.run("2026-11-20")
        let sales = try rows("SELECT transaction_id, commission_minor FROM entry WHERE kind = 'sale'")
        let commission = Dictionary(uniqueKeysWithValues: sales.map { ($0[0], Int64($0[1])!) })
        XCTAssertEqual(commission["old-13"], 150, "the old chain has its year")
        XCTAssertEqual(commission["new-0"], 300, "the new subscription has no tenure")
    }

    /// Must-show 2: a refund of a September sale arriving in November, with the books closed
    /// through October, posts on November 1st marked late; September's balances do not move.
    func testLateRefundPostsInTheFirstOpenMonthAndLeavesSeptemberUnchanged() throws {
        let sale1001 = Receipt.item("1001", purchased: "2026-09-10T10:00:00Z")
        let sale1002 = Receipt.item("1002", purchased: "2026-09-12T10:00:00Z")
        try ws.write("inbox/receipts/2026-09.jsonl", Receipt.response([sale1001, sale1002]) + "\n")
        try ws.run("2026-09-30")
        let septemberBefore = try septemberBalance()
        XCTAssertFalse(septemberBefore.isEmpty)

        _ = try close("2026-09", asOf: "2026-10-02")
        try ws.write("inbox/receipts/2026-10.jsonl", Receipt.response([Receipt.item("1003", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        try ws.run("2026-10-31")
        let octoberBefore = try ledger().read { try $0.trialBalance(book: .production, through: Day(iso: "2026-10-31")!) }
        _ = try close("2026-10", asOf: "2026-11-01")

        // November: the refunds arrive. 1001 was refunded in October, 1002 already in September.
        try ws.write("inbox/receipts/2026-11.jsonl", Receipt.response([
            Receipt.item("1001", purchased: "2026-09-10T10:00:00Z", cancelled: "2026-10-20T08:00:00Z"),
            Receipt.item("1002", purchased: "2026-09-12T10:00:00Z", cancelled: "2026-09-28T08:00:00Z"),
        ]) + "\n")
        let r = try ws.run("2026-11-05")
        XCTAssertEqual(r.counts.entriesPosted, 2)
        // The night's summary says they were moved into the open month (the log said nothing).
        XCTAssertEqual(r.posted.breakdown(), " (0 sales; 2 refunds; 2 of these dated in a closed month, posted late on 2026-11-01 (the Journal marks them, with their own dates); "
                       + "sets of 2026-09, 2026-10 written before they posted do not say them (a sale that waited is said to wait still): "
                       + "`iapledger report --period 2026-09`, `iapledger report --period 2026-10` write them again, saying where they went)")
        XCTAssertEqual(try rows("SELECT transaction_id, kind, date, original_date, late FROM entry WHERE kind = 'refund' ORDER BY transaction_id"),
                       [["1001", "refund", "2026-11-01", "2026-10-20", "1"], ["1002", "refund", "2026-11-01", "2026-09-28", "1"]])
        XCTAssertEqual(try septemberBalance(), septemberBefore, "September's balances are unchanged to the cent")
        XCTAssertEqual(try ledger().read { try $0.trialBalance(book: .production, through: Day(iso: "2026-10-31")!) }, octoberBefore)
        let refunds = try ledger().read { try $0.trialBalance(book: .production) }.first { $0.account == LedgerAccount.refunds }
        XCTAssertEqual(refunds?.balanceMinor, 99 + 99)

        // The workbook shows the late entries as such: posted date, original date, "late".
        let sheets = try XLSXReader.sheets(r.workbooks[0])
        let journal = try XCTUnwrap(sheets["Journal"])
        let header = try XCTUnwrap(journal.firstIndex { $0.contains("Original date") })
        let cols = journal[header]
        let (date, original, late, kind, tx) = (cols.firstIndex(of: "Date")!, cols.firstIndex(of: "Original date")!,
                                                cols.firstIndex(of: "Late")!, cols.firstIndex(of: "Kind")!, cols.firstIndex(of: "Transaction")!)
        func serial(_ iso: String) -> String { String(Day(iso: iso)!.daysSinceEpoch + 25_569) }
        let refundRows = journal[(header + 1)...].filter { $0.count > kind && $0[kind] == "refund" }
        XCTAssertEqual(refundRows.count, 6)
        for row in refundRows {
            XCTAssertEqual(row[late], "late")
            XCTAssertEqual(row[date], serial("2026-11-01"))
            XCTAssertEqual(row[original], serial(row[tx] == "1001" ? "2026-10-20" : "2026-09-28"))
        }
        let saleRows = journal[(header + 1)...].filter { $0.count > kind && $0[kind] == "sale" }
        XCTAssertTrue(saleRows.allSatisfy { $0.count <= late || $0[late] == "" })
        let info = try XCTUnwrap(sheets["Run Info"])
        XCTAssertTrue(info.contains { $0.count >= 2 && $0[0] == "Closed through" && $0[1] == "2026-10" }, "\(info.prefix(12))")
        XCTAssertTrue(info.contains { $0.count >= 2 && $0[1].hasPrefix("alice on 2026-11-01") })
    }

    /// A month closed after the last night, then that night run again: a new run is recorded
    /// (its row and workbooks say the month is closed); run again, nothing new.
    func testARerunAfterACloseIsANewRun() throws {
        try ws.write("inbox/receipts/a.json", Receipt.response([Receipt.item("2001", purchased: "2026-10-20T10:00:00Z")]))
        try ws.run("2026-11-01")
        _ = try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: ws.workspace, asOf: Day(iso: "2026-11-01")!,
                                    closedBy: "carol", closedAt: "2026-11-01T09:00:00Z")
        let r = try ws.run("2026-11-01")
        XCTAssertEqual(try rows("SELECT id, closed_through FROM run ORDER BY id"), [["1", ""], ["2", "2026-10"]])
        let info = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[0])["Run Info"])
        XCTAssertTrue(info.contains { $0.first == "Closed through" && $0.count > 1 && $0[1].hasPrefix("2026-10") }, "\(info)")
        try ws.run("2026-11-01")
        XCTAssertEqual(try rows("SELECT count(*) FROM run"), [["2"]])
    }

    /// The Pending sheet says a waiting sale of a month closed by then posts late, on the
    /// first open day (its purchase date is not the day it will be dated).
    func testAWaitingSaleOfAClosedMonthSaysItPostsLate() throws {
        try ws.write("inbox/receipts/a.json", Receipt.response([Receipt.item("2101", product: "coins.none", purchased: "2026-10-20T10:00:00Z"),
                                                                 Receipt.item("2102", product: "coins.none", purchased: "2026-11-01T10:00:00Z")]))
        try ws.run("2026-11-01")
        _ = try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: ws.workspace, asOf: Day(iso: "2026-11-02")!,
                                    closedBy: "carol", closedAt: "2026-11-02T09:00:00Z")
        let r = try ws.run("2026-11-02")
        let pending = try XCTUnwrap(try XLSXReader.sheets(r.workbooks[2])["Pending"])
        // (Led by the transaction, then what waits.)
        XCTAssertTrue(pending.contains { $0.count > 1 && $0[1] == "production transaction waits for a rule; its month is closed: it posts late, on 2026-11-01 or later" && $0[0] == "2101" }, "\(pending)")
        XCTAssertTrue(pending.contains { $0.count > 1 && $0[1] == "production transaction waits for a rule" && $0[0] == "2102" }, "\(pending)")
    }

    /// `[periods] closed_through` in the config: recorded in the ledger by the run, late entries
    /// moved; an earlier month later is refused (no silent reopening) and nothing is written.
    func testConfigClosedThroughIsRecordedAndNeverReopened() throws {
        // Not on a ledger's first night: every sale of the month it reads would post late.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n")
        XCTAssertThrowsError(try ws.run("2026-10-10")) {
            XCTAssertTrue("\($0)".contains("closed_through = \"2026-09\" would close a month before any night has run on this ledger"), "\($0)")
        }
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        XCTAssertThrowsError(try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-10")!,
                                                     closedBy: "carol", closedAt: "2026-10-10T09:00:00Z")) {
            XCTAssertTrue("\($0)".contains("ledger.sqlite: no ledger yet; run `iapledger run` first"), "\($0)")
        }
        // On a ledger no night has run on (a first night killed before its commit leaves its
        // schema), `close` says why it cannot close yet.
        _ = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        XCTAssertThrowsError(try ClosedPeriods.close(month: Month(iso: "2026-09")!, workspace: ws.workspace, asOf: Day(iso: "2026-10-10")!,
                                                     closedBy: "carol", closedAt: "2026-10-10T09:00:00Z")) {
            XCTAssertTrue("\($0)".contains("2026-09 cannot be closed yet: no night has run on this ledger"), "\($0)")
        }
        try ws.run("2026-09-30")   // nothing in the inbox yet
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n")
        try ws.write("inbox/receipts/a.json", Receipt.response([Receipt.item("2001", purchased: "2026-09-20T10:00:00Z"),
                                                                 Receipt.item("2002", purchased: "2026-10-03T10:00:00Z")]))
        XCTAssertEqual(try ws.run("2026-10-10").closedByConfig?.description, "2026-09")
        XCTAssertEqual(try rows("SELECT transaction_id, date, original_date, late FROM entry ORDER BY transaction_id"),
                       [["2001", "2026-10-01", "2026-09-20", "1"], ["2002", "2026-10-03", "2026-10-03", "0"]])
        XCTAssertEqual(try rows("SELECT month, source FROM period_close"), [["2026-09", "config"]])

        // Reopening by editing the config is refused, before anything is written.
        let runsBefore = try rows("SELECT count(*) FROM run")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-08\"\n")
        XCTAssertThrowsError(try ws.run("2026-10-11")) { error in
            XCTAssertTrue("\(error)".contains("closed_through = \"2026-08\" is earlier than 2026-09"), "\(error)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM run"), runsBefore)

        // Removing the setting does not reopen either: the ledger's close stands.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        try ws.write("inbox/receipts/b.json", Receipt.response([Receipt.item("2003", purchased: "2026-09-29T10:00:00Z")]))
        try ws.run("2026-10-12")
        XCTAssertEqual(try rows("SELECT date, late FROM entry WHERE transaction_id = '2003'"), [["2026-10-01", "1"]])

        // The same month again in the config changes nothing; a later one is recorded (once its
        // last night has run).
        try ws.write("inbox/receipts/c.json", Receipt.response([Receipt.item("2004", product: "coins.none", purchased: "2026-10-05T10:00:00Z")]))
        XCTAssertNil(try ws.run("2026-10-31").closedByConfig)
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-10\"\n")
        // The run that closes by config says what the closed months leave out, as close does.
        let closing = try ws.run("2026-11-02")
        XCTAssertEqual(closing.closedByConfig?.description, "2026-10")
        XCTAssertEqual(closing.closeWarnings.first?.hasPrefix("  warning: 1 sale dated 2026-10-31 or earlier still waits"), true, "\(closing.closeWarnings)")
        XCTAssertEqual(closing.closeWarnings.dropFirst().first, "    production: 1 waiting, MISSING_RULE (the earliest dated 2026-10-05)")
        XCTAssertNil(try ws.run("2026-11-03").closedByConfig, "recorded once")
        XCTAssertEqual(try rows("SELECT month, source FROM period_close ORDER BY month"), [["2026-09", "config"], ["2026-10", "config"]])
    }

    /// `iapledger close`: who and when recorded; a month already closed or not yet ended refused.
    func testCloseCommandRecordsAndRefuses() throws {
        XCTAssertThrowsError(try close("2026-10", asOf: "2026-10-31")) { XCTAssertTrue("\($0)".contains("has not ended yet"), "\($0)") }
        try ws.run("2026-10-31")
        let first = try close("2026-10", asOf: "2026-11-01", by: "alice")
        XCTAssertNil(first.previous)
        XCTAssertTrue(first.description.contains("Closed 2026-10"))
        XCTAssertTrue(first.description.contains("now post on 2026-11-01"))
        XCTAssertThrowsError(try close("2026-10", asOf: "2026-12-01")) { XCTAssertTrue("\($0)".contains("already closed"), "\($0)") }
        XCTAssertThrowsError(try close("2026-09", asOf: "2026-12-01")) { XCTAssertTrue("\($0)".contains("already closed"), "\($0)") }
        try ws.run("2026-11-30")
        let second = try close("2026-11", asOf: "2026-12-01", by: "bob")
        XCTAssertEqual(second.previous?.month.description, "2026-10")
        XCTAssertEqual(try rows("SELECT month, closed_at, closed_by, source FROM period_close ORDER BY month"),
                       [["2026-10", "2026-11-01T09:00:00Z", "alice", "close command"],
                        ["2026-11", "2026-12-01T09:00:00Z", "bob", "close command"]])

        // A config naming an earlier month is now behind the ledger: the close warns, the run refuses.
        try ws.run("2026-12-31")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n")
        XCTAssertTrue(try close("2026-12", asOf: "2027-01-02").configWarning?.contains("runs refuse") == true)
        XCTAssertThrowsError(try ws.run("2027-01-03"))
        XCTAssertThrowsError(try close("2026-08", asOf: "2027-01-02"))

        XCTAssertEqual(ClosedPeriods.currentUser(environment: ["USER": "carol", "LOGNAME": "x"]), "carol")
        XCTAssertEqual(ClosedPeriods.currentUser(environment: ["USER": "", "LOGNAME": "dave"]), "dave")
        XCTAssertEqual(ClosedPeriods.currentUser(environment: [:]), "unknown")
    }

    /// A config month no run can record (not ended, or its last night not run) closes nothing:
    /// `close` of an earlier month closes it, warning that the config's month is refused, where
    /// it said "already closed" while the ledger and the workbooks said no month was; a first
    /// close asked before any night says so. A run refusing a config month says what to set
    /// instead, the ledger's close counted (it said "or earlier", which that run refused too).
    func testAConfigMonthNoRunRecordsClosesNothing() throws {
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-07\"\n")
        XCTAssertThrowsError(try ws.run("2026-08-05"), "a first night refuses it (nothing written, no ledger left)")
        XCTAssertThrowsError(try close("2026-07", asOf: "2026-08-05")) {
            XCTAssertTrue("\($0)".contains("ledger.sqlite: no ledger yet; run `iapledger run` first"), "\($0)")
        }
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        try ws.run("2026-08-05")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-08\"\n")
        let july = try close("2026-07", asOf: "2026-08-05", by: "carol")
        XCTAssertEqual(july.configWarning?.hasSuffix("has [periods] closed_through = \"2026-08\", which the next run refuses (2026-08 has not ended, or the nights have not run through 2026-08-31): set it to \"2026-07\" or remove it"), true, "\(july.configWarning ?? "")")
        XCTAssertEqual(try rows("SELECT month, source FROM period_close"), [["2026-07", "close command"]])
        XCTAssertThrowsError(try ws.run("2026-08-06")) {
            XCTAssertTrue("\($0)".hasSuffix("names a month that has not ended (this night is as of 2026-08-06): a month can be closed from 2026-09-01 on, by the first night after its last day; set closed_through = \"2026-07\" (the ledger's close) or remove it. Nothing was written"), "\($0)")
        }
        // Later, with August and September run: the months it may name, from the ledger's close on.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        try ws.run("2026-09-30")
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-10\"\n")
        XCTAssertThrowsError(try ws.run("2026-10-02")) {
            XCTAssertTrue("\($0)".hasSuffix("set closed_through to a month from 2026-07 (the ledger's close) to 2026-09, or remove it. Nothing was written"), "\($0)")
        }
        // A config month the next run records is closed already.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-09\"\n")
        XCTAssertThrowsError(try close("2026-08", asOf: "2026-10-02")) {
            XCTAssertTrue("\($0)".contains("2026-08 is already closed: ") && "\($0)".contains("(recorded in the ledger by the next run)"), "\($0)")
        }
        // Judged by the nights run, not by close's own date: September's last night has run, so
        // the next night (as of a later day) records it, whatever day close is asked on.
        XCTAssertThrowsError(try close("2026-08", asOf: "2026-09-30")) {
            XCTAssertTrue("\($0)".contains("2026-08 is already closed: "), "\($0)")
        }
        XCTAssertEqual(ClosedPeriods.latestClosable(asOf: Day(iso: "2026-10-02")!, lastNight: Day(iso: "2026-09-30")!)?.description, "2026-09")
        XCTAssertEqual(ClosedPeriods.latestClosable(asOf: Day(iso: "2026-10-02")!, lastNight: Day(iso: "2026-09-29")!)?.description, "2026-08")
        XCTAssertEqual(ClosedPeriods.latestClosable(asOf: Day(iso: "2026-09-30")!, lastNight: Day(iso: "2026-09-30")!)?.description, "2026-08")
        XCTAssertNil(ClosedPeriods.latestClosable(asOf: Day(iso: "2026-09-30")!, lastNight: nil))
    }

    /// `close` says what the closed months' figures leave out: sales dated in them that still
    /// wait (here one for a rule, counted by book and reason with its date; a later one not
    /// counted) and receipt records still waiting for verification. A month with no such sale
    /// names none.
    func testCloseWarnsOfSalesStillWaitingInTheClosedMonths() throws {
        try ws.write("inbox/receipts/night.json", "[" + [
            Receipt.response([Receipt.item("W-1", product: "coins.9999", purchased: "2026-10-20T10:00:00Z"),
                              Receipt.item("W-2", product: "coins.9999", purchased: "2026-11-01T10:00:00Z"),
                              Receipt.item("P-1", purchased: "2026-10-21T10:00:00Z")]),
            Receipt.response([Receipt.item("S-1", purchased: "2026-10-22T10:00:00Z")], status: 21007),
        ].joined(separator: ",") + "]")
        // Credits naming purchases the store never reported: one of October (its purchase may
        // still arrive, and post late), one of November (not of the closed months).
        try ws.write("inbox/orders/o.csv", ReconciliationTests.header
                     + "ord-g1,acct-1,G-1,coins.100,1,100,2026-10-25T10:01:00Z,production,USA,,\n"
                     + "ord-g2,acct-1,G-2,coins.100,1,100,2026-11-01T10:01:00Z,production,USA,,\n")
        try ws.run("2026-11-01")
        XCTAssertEqual(try rows("SELECT category, order_id FROM exception WHERE resolved_on IS NULL AND category LIKE 'CREDITED%' ORDER BY 2"),
                       [["CREDITED_WITHOUT_TRANSACTION", "ord-g1"], ["CREDITED_WITHOUT_TRANSACTION", "ord-g2"]])
        XCTAssertEqual(try rows("SELECT transaction_id, substr(pending_reason, 1, 12) FROM store_transaction WHERE sale_status = 'pending' ORDER BY 1"),
                       [["W-1", "MISSING_RULE"], ["W-2", "MISSING_RULE"]])
        let september = try close("2026-09", asOf: "2026-11-02")
        XCTAssertTrue(september.waitingSales.isEmpty)
        let october = try close("2026-10", asOf: "2026-11-02")
        XCTAssertEqual(october.waitingSales.map { "\($0.book) \($0.code) \($0.count) \($0.earliest)" }, ["production MISSING_RULE 1 2026-10-20"])
        XCTAssertEqual(october.pendingRecords, 1)
        XCTAssertTrue(october.description.contains("1 sale dated 2026-10-31 or earlier still waits"), october.description)
        XCTAssertTrue(october.description.contains("production: 1 waiting, MISSING_RULE (the earliest dated 2026-10-20)"), october.description)
        XCTAssertTrue(october.description.contains("1 receipt record still waits for verification"), october.description)
        XCTAssertTrue(october.description.contains("  warning: 1 of the backend's credits dated 2026-10-31 or earlier is an open exception for a purchase the books do not hold: "
                                                   + "1 names no purchase the store has reported (CREDITED_WITHOUT_TRANSACTION); if the store's records of it arrive, that sale posts late (`iapledger exceptions` lists them)"),
                      october.description)
        XCTAssertFalse(september.description.contains("sale dated"), september.description)
        XCTAssertFalse(september.description.contains("credits dated"), september.description)
    }

    /// A month is closed only once its last night has run, by `close` or by the config, and no
    /// night runs as of a closed month's day: either would post the rest of the month late, on
    /// the first open day, in none of its own workbooks.
    func testAMonthClosesOnlyAfterItsLastNightAndNoNightRunsInsideIt() throws {
        try ws.write("inbox/receipts/a.json", "[" + Receipt.response([Receipt.item("N-1", purchased: "2026-10-20T10:00:00Z")]) + "]")
        try ws.run("2026-10-20")
        XCTAssertThrowsError(try close("2026-10", asOf: "2026-11-01")) {
            XCTAssertTrue("\($0)".contains("cannot be closed yet: the last night ran as of 2026-10-20"), "\($0)")
            XCTAssertTrue("\($0)".contains("iapledger run --as-of 2026-10-31"), "\($0)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM period_close"), [["0"]])

        // The config may not close a month the night is still in (nor one not ended by it).
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-10\"\n")
        XCTAssertThrowsError(try ws.run("2026-10-31")) {
            XCTAssertTrue("\($0)".contains("closed_through = \"2026-10\" names a month that has not ended (this night is as of 2026-10-31)"), "\($0)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM period_close"), [["0"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM run"), [["1"]])
        // Nor a month whose last night has not run (a night after it, the one before it on 10-20);
        // a month far ahead is answered with the latest month this night could close.
        XCTAssertThrowsError(try ws.run("2026-11-02")) {
            XCTAssertTrue("\($0)".contains("would close a month whose last night has not run: the last night ran as of 2026-10-20"), "\($0)")
            XCTAssertTrue("\($0)".contains("run `iapledger run --as-of 2026-10-31`, then close"), "\($0)")
        }
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig + "\n[periods]\nclosed_through = \"2026-12\"\n")
        XCTAssertThrowsError(try ws.run("2026-10-31")) {
            XCTAssertTrue("\($0)".contains("set closed_through to 2026-09 or earlier"), "\($0)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM period_close"), [["0"]])
        XCTAssertEqual(try rows("SELECT count(*) FROM run"), [["1"]])
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        try ws.run("2026-10-31")
        XCTAssertEqual(try close("2026-10", asOf: "2026-11-01").close.month.description, "2026-10")

        // A night as of the closed month's last day (a re-run of it) is refused; the next day runs.
        try ws.write("inbox/receipts/b.json", "[" + Receipt.response([Receipt.item("N-2", purchased: "2026-10-31T10:00:00Z")]) + "]")
        XCTAssertThrowsError(try ws.run("2026-10-31")) {
            XCTAssertTrue("\($0)".contains("as-of date 2026-10-31 is in a closed month: the books are closed through 2026-10"), "\($0)")
        }
        XCTAssertEqual(try rows("SELECT count(*) FROM entry WHERE transaction_id = 'N-2'"), [["0"]])
        try ws.run("2026-11-01")
        XCTAssertEqual(try rows("SELECT date, original_date, late FROM entry WHERE transaction_id = 'N-2'"), [["2026-11-01", "2026-10-31", "1"]])

        // A ledger with no night yet may not be closed: the whole month, read by its first
        // night, would post late.
        let fresh = try TestWorkspace()
        defer { fresh.remove() }
        XCTAssertThrowsError(try ClosedPeriods.close(month: Month(iso: "2026-10")!, workspace: fresh.workspace, asOf: Day(iso: "2026-11-02")!,
                                                     closedBy: "alice", closedAt: "2026-11-02T09:00:00Z")) {
            XCTAssertTrue("\($0)".contains("ledger.sqlite: no ledger yet; run `iapledger run` first"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: fresh.root.appendingPathComponent("ledger.sqlite").path), "none made to refuse in")
    }

    /// Must-show 3: the store itself refuses any write into a closed month, whoever writes.
    func testStoreRefusesWritesIntoAClosedMonth() throws {
        try ws.write("inbox/receipts/a.json", Receipt.response([Receipt.item("3001", purchased: "2026-09-10T10:00:00Z")]))
        try ws.run("2026-09-30")
        _ = try close("2026-09", asOf: "2026-10-01")
        let ledger = try ledger()
        let septemberBefore = try septemberBalance()

        // Through the store's API, bypassing the Poster: an entry dated in September.
        XCTAssertThrowsError(try ledger.write { w in
            var e = try XCTUnwrap(try w.entry(book: .production, transactionId: "3001", kind: .sale))
            e.transactionId = "direct-1"
            try w.insertEntry(e, runId: 1)
        }) { XCTAssertTrue("\($0)".contains("closed period"), "\($0)") }

        // Plain SQL through GRDB: the triggers refuse it too.
        func insert(_ date: String, _ original: String) -> String {
            """
            INSERT INTO entry (run_id, book, transaction_id, kind, date, original_date, late, product_id, storefront, currency,
                reporting_currency, gross_minor, tax_minor, net_minor, commission_minor, proceeds_minor, gross_reporting_minor,
                net_reporting_minor, commission_reporting_minor, proceeds_reporting_minor, refund_percentage, rules_json, hash)
            VALUES (1, 'production', 'direct-2', 'sale', '\(date)', '\(original)', 0, 'coins.100', 'USA', 'USD', 'USD',
                    100, 0, 100, 30, 70, 100, 100, 30, 70, NULL, '{}', '\(String(repeating: "ab", count: 32))')
            """
        }
        for date in ["2026-09-30", "2026-01-01", "2025-12-31"] {
            XCTAssertThrowsError(try ledger.queue.write { db in
                try db.execute(sql: insert(date, date))
            }, date) { XCTAssertTrue("\($0)".contains("closed period"), "\($0)") }
        }
        // Postings come from their entries (the `posting` view): none can be added to a filed entry.
        XCTAssertThrowsError(try ledger.queue.write { db in
            try db.execute(sql: "INSERT INTO posting (entry_id, account_id, currency, amount_minor, reporting_amount_minor) VALUES (1, 1, 'USD', 5, 5)")
        }) { XCTAssertTrue("\($0)".contains("cannot modify posting because it is a view"), "\($0)") }
        for sql in ["DELETE FROM period_close", "UPDATE period_close SET month = '2026-08'",
                    "INSERT INTO period_close (month, closed_at, closed_by, source) VALUES ('2026-08', 'now', 'mallory', 'close command')"] {
            XCTAssertThrowsError(try ledger.queue.write { db in try db.execute(sql: sql) }, sql)
        }
        // An entry marked late must have been moved forward, and one moved forward must be late.
        XCTAssertThrowsError(try ledger.queue.write { db in
            try db.execute(sql: insert("2026-10-02", "2026-10-01"))
        }) { XCTAssertTrue("\($0)".contains("late"), "\($0)") }

        // The guards run after the row is inserted (v15): a refused insert takes its row with
        // it even when the transaction goes on (the night's own write transaction would).
        try ledger.queue.inDatabase { db in
            try db.inTransaction {
                for (date, original, refusal) in [("2026-09-30", "2026-09-30", "entry dated in a closed period"),
                                                  ("2026-10-02", "2026-10-01", "an entry is late exactly when")] {
                    XCTAssertThrowsError(try db.execute(sql: insert(date, original)), date) {
                        XCTAssertTrue("\($0)".contains(refusal), "\($0)")
                    }
                }
                XCTAssertEqual(try Int.fetchOne(db, sql: "SELECT count(*) FROM entry WHERE transaction_id = 'direct-2'"), 0)
                return .rollback
            }
        }
        XCTAssertEqual(try rows("""
            SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'entry' AND sql LIKE '% AFTER INSERT ON entry%' ORDER BY name
            """), [["entry_late_is_moved_forward"], ["entry_not_in_closed_period"]])

        // The first open month is writable (checked inside a transaction that is rolled back).
        try ledger.queue.inDatabase { db in
            try db.inTransaction {
                try db.execute(sql: insert("2026-10-01", "2026-10-01"))
                return .rollback
            }
        }
        XCTAssertEqual(try septemberBalance(), septemberBefore)
        XCTAssertEqual(try rows("SELECT count(*) FROM entry"), [["1"]])
    }
}

extension SplitMix64: RandomNumberGenerator {}
