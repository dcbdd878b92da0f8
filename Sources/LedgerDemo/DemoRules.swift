import Foundation

// The workspace's configuration and rules files: iapledger.toml and rules/*.csv.
// Small files, written as Strings.

/// The calendar facts every part of the generator shares.
struct DemoWindow {
    /// First day of the data (day number, UTC): the first day of the month three months
    /// before the as-of month.
    let firstDay: Int
    /// The as-of day itself; no data on or after it.
    let asOfDay: Int
    /// (year, month) of each month that holds data, oldest first.
    let months: [(year: Int, month: Int)]

    var dayCount: Int { asOfDay - firstDay }
    var lastDay: Int { asOfDay - 1 }
    var firstMs: Int64 { DemoCalendar.startMs(ofDay: firstDay) }
    var asOfMs: Int64 { DemoCalendar.startMs(ofDay: asOfDay) }

    init(asOfDay: Int) {
        self.asOfDay = asOfDay
        let (y, m, _) = DemoCalendar.civil(asOfDay)
        let startIndex = y * 12 + (m - 1) - 3
        firstDay = DemoCalendar.days(year: startIndex / 12, month: startIndex % 12 + 1, day: 1)
        let (ly, lm, _) = DemoCalendar.civil(asOfDay - 1)
        let lastIndex = ly * 12 + (lm - 1)
        months = (startIndex...lastIndex).map { (year: $0 / 12, month: $0 % 12 + 1) }
    }

    /// First day of the n-th data month (0-based).
    func monthStartDay(_ n: Int) -> Int {
        let index = min(n, months.count - 1)
        return DemoCalendar.days(year: months[index].year, month: months[index].month, day: 1)
    }

    /// First day of the last month that holds data (its FX rate for one currency is missing).
    var lastMonthStartDay: Int { monthStartDay(months.count - 1) }
}

enum DemoRules {
    static let ruleEffectiveFrom = "2020-01-01"

    static func config(window: DemoWindow, bundleId: String) -> String {
        let from = DemoCalendar.dayString(window.firstDay)
        let to = DemoCalendar.dayString(window.monthStartDay(1) + 14)
        return """
        # iapledger workspace configuration (demo)
        #
        # Written by `iapledger demo`: a made-up app that sells coin packs, an ad-free
        # unlock, a VIP subscription and a 30-day pass. Edit freely; see the README.

        # Currency every report total is converted to (rules/fx.csv gives the rates).
        reporting_currency = "USD"
        # Receipts and transactions of any other bundle are rejected.
        bundle_ids = ["\(bundleId)"]
        # Storefront used when neither a transaction nor its order names one.
        default_storefront = "USA"
        # Days a sale with no storefront of its own waits for an order to name one.
        order_wait_days = 2

        [commission]
        standard = "0.30"
        reduced = "0.15"
        # App Store Small Business Program: the reduced rate applies inside these dates.
        small_business = [ { from = "\(from)", to = "\(to)" } ]
        # Auto-renewables: reduced rate after a year of paid service...
        subscription_reduced_after_days = 365
        # ...counted since the last lapse longer than this.
        subscription_grace_days = 60

        [periods]
        # Months up to and including this one are closed: nothing is posted into them.
        # closed_through = "YYYY-MM"

        [reconciliation]
        # Product types checked against the backend's orders (the subscription and the pass
        # are credited by entitlement, not per transaction).
        scope = ["consumable", "non_consumable"]

        """
    }

    static func storefrontsCSV(window: DemoWindow) -> String {
        var text = "storefront,currency,tax_rate,tax_included,effective_from\n"
        for storefront in DemoTables.storefronts {
            text += "\(storefront.code),\(storefront.currency),\(storefront.taxRate),\(storefront.taxIncluded),\(ruleEffectiveFrom)\n"
            if storefront.code == "FRA" {
                let change = DemoCalendar.dayString(window.monthStartDay(2))
                text += "FRA,EUR,\(DemoTables.fraTaxRateChange),true,\(change)\n"
            }
        }
        return text
    }

    static func productsCSV(products: [DemoProduct]) -> String {
        var text = "product_id,type,units\n"
        for product in products { text += "\(product.productId),\(product.type.rawValue),\(product.units)\n" }
        return text
    }

    /// Every product in every storefront, except the yearly subscription in India (the
    /// seeded missing price rule).
    static func pricesCSV(window: DemoWindow, products: [DemoProduct]) -> String {
        var text = "product_id,storefront,price,effective_from\n"
        for (productIndex, product) in products.enumerated() {
            for (storefrontIndex, storefront) in DemoTables.storefronts.enumerated() {
                if productIndex == DemoTables.P.vipYearly && storefrontIndex == DemoTables.S.ind { continue }
                text += "\(product.productId),\(storefront.code),\(storefront.tierPrices[product.tier]),\(ruleEffectiveFrom)\n"
                if productIndex == DemoTables.P.coins550 && storefrontIndex == DemoTables.S.usa {
                    let change = DemoCalendar.dayString(window.monthStartDay(1))
                    text += "\(product.productId),USA,\(DemoTables.usaPrice550Change),\(change)\n"
                }
            }
        }
        return text
    }

    /// One rate per data month and non-USD currency, drifting up to +-2.5% a month; the
    /// last month's BRL rate is left out (the seeded missing FX rule).
    static func fxCSV(window: DemoWindow, seed: UInt64) -> String {
        var random = DemoRandom(seed: seed, stream: 7)
        var current = DemoTables.fxBases.map { $0.mantissa }
        var text = "month,currency,rate\n"
        for (monthIndex, month) in window.months.enumerated() {
            let monthText = DemoCalendar.monthString(year: month.year, month: month.month)
            for (index, base) in DemoTables.fxBases.enumerated() {
                if monthIndex > 0 {
                    let driftBasisPoints = Int64(random.inRange(-250, 250))
                    // Integer rounding half up of mantissa * (1 + drift); exact, no floats.
                    current[index] = (current[index] * (10_000 + driftBasisPoints) + 5_000) / 10_000
                }
                if monthIndex == window.months.count - 1 && base.currency == DemoTables.fxMissingCurrency { continue }
                text += "\(monthText),\(base.currency),\(DemoTables.decimalString(current[index], scale: base.scale))\n"
            }
        }
        return text
    }
}
