import XCTest
@testable import LedgerCore
@testable import LedgerPost

/// Hand-checked posting scenarios (accounting.md), written as small tables:
/// a transaction in, the expected figures out.
final class PostingScenarioTests: XCTestCase {
    static func rules() -> Rules {
        func d(_ s: String) -> Day { Day(iso: s)! }
        func x(_ s: String) -> ExactDecimal { ExactDecimal(s)! }
        return Rules(
            storefronts: [
                StorefrontRule(storefront: "USA", currency: "USD", taxRate: x("0"), taxIncluded: false, effectiveFrom: d("2020-01-01")),
                StorefrontRule(storefront: "DEU", currency: "EUR", taxRate: x("0.19"), taxIncluded: true, effectiveFrom: d("2020-01-01")),
                StorefrontRule(storefront: "JPN", currency: "JPY", taxRate: x("0.10"), taxIncluded: true, effectiveFrom: d("2020-01-01")),
                StorefrontRule(storefront: "KWT", currency: "KWD", taxRate: x("0"), taxIncluded: true, effectiveFrom: d("2020-01-01")),
            ],
            prices: [
                PriceRule(productId: "coins.100", storefront: "USA", price: x("0.99"), effectiveFrom: d("2020-01-01")),
                PriceRule(productId: "coins.100", storefront: "DEU", price: x("1.09"), effectiveFrom: d("2020-01-01")),
                PriceRule(productId: "coins.100", storefront: "JPN", price: x("160"), effectiveFrom: d("2020-01-01")),
                PriceRule(productId: "coins.100", storefront: "KWT", price: x("0.300"), effectiveFrom: d("2020-01-01")),
                PriceRule(productId: "coins.550", storefront: "USA", price: x("4.99"), effectiveFrom: d("2020-01-01")),
                PriceRule(productId: "coins.550", storefront: "USA", price: x("5.99"), effectiveFrom: d("2026-10-01")),
            ],
            products: [
                ProductRule(productId: "coins.100", type: .consumable, units: 100),
                ProductRule(productId: "coins.550", type: .consumable, units: 550),
            ],
            fx: [
                (Month(iso: "2026-09")!, "EUR", x("1.05")), (Month(iso: "2026-10")!, "EUR", x("1.10")),
                (Month(iso: "2026-10")!, "JPY", x("0.006712")), (Month(iso: "2026-10")!, "KWD", x("3.2541")),
            ])
    }

    static func config(smallBusiness: [WorkspaceConfig.DateRange] = [], closedThrough: Month? = nil) -> WorkspaceConfig {
        var c = WorkspaceConfig()
        c.reportingCurrency = "USD"
        c.smallBusiness = smallBusiness
        c.closedThrough = closedThrough
        return c
    }

    func tx(_ id: String = "t1", product: String = "coins.100", storefront: String? = nil, quantity: Int64 = 1,
            at iso: String, price: Int64? = nil, currency: String? = nil, book: Book = .production) -> TransactionObservation {
        TransactionObservation(transactionId: id, productId: product, quantity: quantity, purchaseMs: ISOTimestamp_ms(iso),
                               book: book, storefront: storefront, currency: currency, priceMilliunits: price)
    }

    func ISOTimestamp_ms(_ iso: String) -> Int64 { Receipt.ms(iso) }

    /// storefront, product, quantity, purchase time, signed price (milliunits) -> G, N, C, P, N_r, C_r, P_r
    struct Row {
        var name: String
        var storefront: String
        var product = "coins.100"
        var quantity: Int64 = 1
        var at = "2026-10-05T12:00:00Z"
        var price: Int64? = nil
        var currency: String? = nil
        var want: [Int64]   // gross, net, commission, proceeds, netR, commissionR, proceedsR
    }

    let table: [Row] = [
        // USD, tax excluded: 0.99 -> C = round(29.7) = 30.
        Row(name: "tax-excluded USD", storefront: "USA", want: [99, 99, 30, 69, 99, 30, 69]),
        // EUR, 19% included: N = round(109 / 1.19) = round(91.597) = 92; C = round(27.6) = 28;
        // October rate 1.10: N_r = round(101.2) = 101, C_r = round(30.8) = 31.
        Row(name: "tax-included EUR", storefront: "DEU", want: [109, 92, 28, 64, 101, 31, 70]),
        // Same sale in September at 1.05: N_r = round(96.6) = 97, C_r = round(29.4) = 29.
        Row(name: "FX by purchase month", storefront: "DEU", at: "2026-09-30T23:59:59Z", want: [109, 92, 28, 64, 97, 29, 68]),
        // JPY (0 decimals), 10% included: N = round(160 / 1.1) = 145; C = round(43.5) = 44 (half to even);
        // k = 100: N_r = round(145 * 0.006712 * 100) = round(97.324) = 97, C_r = round(29.5328) = 30.
        Row(name: "0-decimal JPY", storefront: "JPN", want: [160, 145, 44, 101, 97, 30, 67]),
        // KWD (3 decimals) x2: G = 600; C = 180; k = 1/10: N_r = round(195.246) = 195, C_r = round(58.5738) = 59.
        Row(name: "3-decimal KWD", storefront: "KWT", quantity: 2, want: [600, 600, 180, 420, 195, 59, 136]),
        // Half to even on the commission: 0.15 * 0.30 = 4.5 -> 4; 0.25 * 0.30 = 7.5 -> 8.
        Row(name: "half-even commission down", storefront: "USA", price: 150, currency: "USD", want: [15, 15, 4, 11, 15, 4, 11]),
        Row(name: "half-even commission up", storefront: "USA", price: 250, currency: "USD", want: [25, 25, 8, 17, 25, 8, 17]),
        // Milliunits to minor units, half to even: 1995 -> 199.5 -> 200; 1985 -> 198.5 -> 198.
        Row(name: "milliunits half up", storefront: "USA", price: 1995, currency: "USD", want: [200, 200, 60, 140, 200, 60, 140]),
        Row(name: "milliunits half down", storefront: "USA", price: 1985, currency: "USD", want: [198, 198, 59, 139, 198, 59, 139]),
        // A signed price already covers the quantity.
        Row(name: "signed price covers quantity", storefront: "USA", quantity: 3, price: 2970, currency: "USD", want: [297, 297, 89, 208, 297, 89, 208]),
        // Price change on its effective date (4.99 until 2026-09-30, 5.99 from 2026-10-01).
        Row(name: "price before change", storefront: "USA", product: "coins.550", at: "2026-09-30T23:59:59Z", want: [499, 499, 150, 349, 499, 150, 349]),
        Row(name: "price on change day", storefront: "USA", product: "coins.550", at: "2026-10-01T00:00:00Z", want: [599, 599, 180, 419, 599, 180, 419]),
    ]

    func testScenarioTable() {
        let poster = Poster(config: Self.config(), rules: Self.rules())
        for r in table {
            let t = tx(storefront: r.storefront, quantity: r.quantity, at: r.at, price: r.price, currency: r.currency)
            var t2 = t
            t2.productId = r.product
            guard case .post(let e) = poster.sale(of: t2) else { XCTFail("\(r.name): not posted: \(poster.sale(of: t2))"); continue }
            let f = e.figures
            XCTAssertEqual([f.grossMinor, f.netMinor, f.commissionMinor, f.proceedsMinor, f.netReportingMinor,
                            f.commissionReportingMinor, f.proceedsReportingMinor], r.want, r.name)
            XCTAssertEqual(f.taxMinor, f.grossMinor - f.netMinor, r.name)
            XCTAssertTrue(e.isBalanced, r.name)
            XCTAssertEqual(e.postings.map(\.account), [LedgerAccount.receivable, LedgerAccount.commission, LedgerAccount.sales])
            XCTAssertEqual(e.postings.map(\.amountMinor), [f.proceedsMinor, f.commissionMinor, -f.netMinor], r.name)
            XCTAssertEqual(e.postings.map(\.reportingAmountMinor), [f.proceedsReportingMinor, f.commissionReportingMinor, -f.netReportingMinor], r.name)
            XCTAssertEqual(e.date, Day(epochMilliseconds: t.purchaseMs), r.name)
        }
    }

    /// Gross in the reporting currency, for the tax and gross columns of the reports:
    /// EUR 109 x 1.10 = 119.9 -> 120; JPY 160 x 0.6712 = 107.392 -> 107; KWD 600 x 0.32541 = 195.246 -> 195.
    func testGrossInReportingCurrency() {
        let poster = Poster(config: Self.config(), rules: Self.rules())
        for (storefront, quantity, want) in [("DEU", Int64(1), Int64(120)), ("JPN", 1, 107), ("KWT", 2, 195), ("USA", 1, 99)] {
            guard case .post(let e) = poster.sale(of: tx(storefront: storefront, quantity: quantity, at: "2026-10-05T12:00:00Z")) else {
                XCTFail(storefront); continue
            }
            XCTAssertEqual(e.figures.grossReportingMinor, want, storefront)
        }
    }

    func testReportingRoundingHalfToEven() {
        XCTAssertEqual(Poster.toReporting(10, fx: ExactDecimal("1.05")!, exponent: 2, reportingExponent: 2), 10) // 10.5 -> 10
        XCTAssertEqual(Poster.toReporting(30, fx: ExactDecimal("1.05")!, exponent: 2, reportingExponent: 2), 32) // 31.5 -> 32
        XCTAssertEqual(Poster.toReporting(-30, fx: ExactDecimal("1.05")!, exponent: 2, reportingExponent: 2), -32)
    }

    func testSmallBusinessRangeEdges() {
        let range = WorkspaceConfig.DateRange(from: Day(iso: "2026-01-01")!, to: Day(iso: "2026-06-30")!)
        let poster = Poster(config: Self.config(smallBusiness: [range]), rules: Self.rules())
        let cases: [(String, Int64)] = [
            ("2025-12-31T23:59:59Z", 30), // the day before: standard 30% of 99 = 29.7 -> 30
            ("2026-01-01T00:00:00Z", 15), // first day: reduced 15% of 99 = 14.85 -> 15
            ("2026-06-30T23:59:59Z", 15), // last day, inclusive
            ("2026-07-01T00:00:00Z", 30), // the day after
        ]
        for (at, commission) in cases {
            guard case .post(let e) = poster.sale(of: tx(storefront: "USA", at: at)) else { XCTFail(at); continue }
            XCTAssertEqual(e.figures.commissionMinor, commission, at)
            XCTAssertEqual(e.rules.commissionRate, commission == 15 ? "0.15" : "0.30", at)
        }
    }

    func testMissingRulesWaitWithTheirReason() {
        let poster = Poster(config: Self.config(), rules: Self.rules())
        func reason(_ t: TransactionObservation) -> String? {
            if case .missingRule(let why) = poster.sale(of: t) { return why }
            return nil
        }
        XCTAssertTrue(reason(tx(storefront: "FRA", at: "2026-10-05T00:00:00Z"))?.contains("storefront rule for FRA") == true)
        XCTAssertTrue(reason(tx(storefront: "DEU", at: "2026-08-05T00:00:00Z"))?.contains("FX rate for EUR in 2026-08") == true)
        XCTAssertTrue(reason(tx(product: "coins.550", storefront: "DEU", at: "2026-10-05T00:00:00Z"))?.contains("no price for coins.550 in DEU") == true)
        XCTAssertTrue(reason(tx(product: "unknown.sku", storefront: "USA", at: "2026-10-05T00:00:00Z"))?.contains("product unknown.sku") == true)
        XCTAssertTrue(reason(tx(storefront: "USA", at: "2019-12-31T00:00:00Z"))?.contains("in force on 2019-12-31") == true)
        // Every rule missing is said at once, so one fix posts the sale (it named the first
        // alone: a product row added, the night after said the price was missing).
        XCTAssertEqual(reason(tx(product: "unknown.sku", storefront: "DEU", at: "2026-08-05T00:00:00Z")),
                       "no row for product unknown.sku in rules/products.csv; no price for unknown.sku in DEU in force on 2026-08-05 in rules/prices.csv; no FX rate for EUR in 2026-08 in rules/fx.csv")
        XCTAssertEqual(reason(tx(product: "unknown.sku", storefront: "FRA", at: "2026-10-05T00:00:00Z")),
                       "no row for product unknown.sku in rules/products.csv; no storefront rule for FRA in force on 2026-10-05 in rules/storefronts.csv; no price for unknown.sku in FRA in force on 2026-10-05 in rules/prices.csv; "
                       + "and its storefront's currency needs an FX rate for 2026-10 in rules/fx.csv, unless it has one or is USD")
        XCTAssertEqual(reason(tx(storefront: "DEU", at: "2026-08-05T00:00:00Z")), "no FX rate for EUR in 2026-08 in rules/fx.csv")
    }

    func testStorefrontComesFromTransactionThenOrderThenDefault() {
        let poster = Poster(config: Self.config(), rules: Self.rules())
        let t = tx(at: "2026-10-05T00:00:00Z")
        XCTAssertEqual(poster.storefront(of: t, orderStorefront: nil).code, "USA")
        XCTAssertEqual(poster.storefront(of: t, orderStorefront: nil).source, "default_storefront")
        XCTAssertEqual(poster.storefront(of: t, orderStorefront: ("DEU", "ord-1")).code, "DEU")
        var own = t
        own.storefront = "JPN"
        XCTAssertEqual(poster.storefront(of: own, orderStorefront: ("DEU", "ord-1")).code, "JPN")
    }

    func testFullAndProratedRefundAndReversal() {
        let poster = Poster(config: Self.config(), rules: Self.rules())
        guard case .post(let sale) = poster.sale(of: tx(storefront: "DEU", at: "2026-10-05T00:00:00Z")) else { return XCTFail() }
        let refundDay = Day(iso: "2026-10-20")!
        let full = poster.refund(of: sale, on: refundDay, percentage: nil)
        XCTAssertEqual(full.kind, .refund)
        XCTAssertEqual(full.date, refundDay)
        XCTAssertEqual(full.postings.map(\.account), [LedgerAccount.refunds, LedgerAccount.commission, LedgerAccount.receivable])
        XCTAssertEqual(full.postings.map(\.amountMinor), [92, -28, -64])
        XCTAssertEqual(full.postings.map(\.reportingAmountMinor), [101, -31, -70], "historical rate, not the refund month's")
        // 50%: N' = 46, C' = 14, P' = 32; N_r' = round(50.5) = 50, C_r' = round(15.5) = 16, P_r' = 34.
        let half = poster.refund(of: sale, on: refundDay, percentage: 50_000)
        XCTAssertEqual(half.postings.map(\.amountMinor), [46, -14, -32])
        XCTAssertEqual(half.postings.map(\.reportingAmountMinor), [50, -16, -34])
        XCTAssertTrue(half.isBalanced)
        let reversal = poster.reversal(of: half, on: Day(iso: "2026-10-25")!)
        XCTAssertEqual(reversal.kind, .refundReversal)
        XCTAssertEqual(reversal.postings.map(\.amountMinor), [-46, 14, 32])
        XCTAssertEqual(zip(half.postings, reversal.postings).map { $0.reportingAmountMinor + $1.reportingAmountMinor }, [0, 0, 0])
    }

    func testFreeOfferPostsNothing() {
        let poster = Poster(config: Self.config(), rules: Self.rules())
        guard case .free(_, let f) = poster.sale(of: tx(storefront: "USA", at: "2026-10-05T00:00:00Z", price: 0, currency: "USD")) else {
            return XCTFail("a zero price is a free offer")
        }
        XCTAssertEqual(f.grossMinor, 0)
    }

    /// A free trial (or a family member's access) moves no money: it is free without the
    /// month's FX rate and without waiting for an order to name its storefront (it waited,
    /// counted among the sales waiting for a rule, "then booked at default_storefront").
    func testAFreeTrialNeedsNoRateAndWaitsForNoOrder() {
        var config = Self.config()
        config.orderWaitDays = 3
        let poster = Poster(config: config, rules: Self.rules())
        var trial = tx(storefront: "DEU", at: "2026-08-05T00:00:00Z")
        trial.isFreeTrial = true
        guard case .free(let applied, let f) = poster.sale(of: trial) else { return XCTFail("no EUR rate for 2026-08, yet free") }
        XCTAssertEqual([f.grossMinor, f.netMinor, f.netReportingMinor, f.proceedsReportingMinor], [0, 0, 0, 0])
        XCTAssertEqual(applied.fxRate, "none (nothing to convert)")
        let paid = tx(storefront: "DEU", at: "2026-08-05T00:00:00Z")
        guard case .missingRule = poster.sale(of: paid) else { return XCTFail("a paid sale still waits for the rate") }
        var shared = tx(at: "2026-10-05T00:00:00Z")
        shared.isFreeTrial = true
        XCTAssertNil(poster.orderWait(of: shared, orderStorefront: nil, asOf: Day(iso: "2026-10-06")!))
        XCTAssertEqual(poster.orderWait(of: tx(at: "2026-10-05T00:00:00Z"), orderStorefront: nil, asOf: Day(iso: "2026-10-06")!),
                       Day(iso: "2026-10-08"))
    }

    func testClosedMonthMovesEntryToFirstOpenDay() {
        let poster = Poster(config: Self.config(closedThrough: Month(iso: "2026-09")), rules: Self.rules())
        guard case .post(let e) = poster.sale(of: tx(storefront: "USA", at: "2026-09-15T00:00:00Z")) else { return XCTFail() }
        XCTAssertEqual(e.date.description, "2026-10-01")
        XCTAssertEqual(e.originalDate.description, "2026-09-15")
        XCTAssertTrue(e.late)
    }
}
