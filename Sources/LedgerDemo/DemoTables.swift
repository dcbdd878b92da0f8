// The demo's fixed reference tables: storefronts with their currencies and tax, products,
// price tiers and base FX rates. Prices and rates are exact decimal strings; nothing here
// is ever converted to binary floating point.

enum DemoProductType: String {
    case consumable
    case nonConsumable = "non_consumable"
    case autoRenewable = "auto_renewable"
    case nonRenewing = "non_renewing"
}

struct DemoProduct {
    let productId: String
    let type: DemoProductType
    let units: Int
    /// Index into each storefront's `tierPrices`.
    let tier: Int
    /// Relative popularity among new production purchases.
    let weight: Int
    /// iOS 6 receipts carry the product's numeric App Store item id.
    let itemId: String

    var isReconciled: Bool { type == .consumable || type == .nonConsumable }
}

struct DemoStorefront {
    let code: String
    let currency: String
    let currencyDecimals: Int
    let taxRate: String
    let taxIncluded: Bool
    /// Relative share of accounts living in this storefront.
    let weight: Int
    /// Customer prices in major units with the currency's decimals, cheapest tier first.
    let tierPrices: [String]
}

struct DemoFxBase {
    let currency: String
    /// The rate as an integer mantissa: `mantissa / 10^scale` USD per unit.
    let mantissa: Int64
    let scale: Int
}

enum DemoTables {
    static let otherBundleId = "com.othercompany.game"
    static let otherProducts = ["com.othercompany.game.gems_500", "com.othercompany.game.starter_pack"]

    /// Product indexes, named for the code that forces a choice.
    enum P {
        static let coins100 = 0, coins550 = 1, coins1200 = 2, coins2500 = 3, coins6500 = 4
        static let removeAds = 5, vipMonthly = 6, vipYearly = 7, pass30 = 8
        static let consumables = [0, 1, 2, 3, 4]
    }

    static func products(bundleId: String) -> [DemoProduct] {
        return [
            DemoProduct(productId: "\(bundleId).100", type: .consumable, units: 100, tier: 0, weight: 30, itemId: "1498765501"),
            DemoProduct(productId: "\(bundleId).550", type: .consumable, units: 550, tier: 2, weight: 22, itemId: "1498765502"),
            DemoProduct(productId: "\(bundleId).1200", type: .consumable, units: 1200, tier: 4, weight: 14, itemId: "1498765503"),
            DemoProduct(productId: "\(bundleId).2500", type: .consumable, units: 2500, tier: 5, weight: 8, itemId: "1498765504"),
            DemoProduct(productId: "\(bundleId).6500", type: .consumable, units: 6500, tier: 6, weight: 3, itemId: "1498765505"),
            DemoProduct(productId: "\(bundleId).removeads", type: .nonConsumable, units: 0, tier: 1, weight: 5, itemId: "1498765506"),
            DemoProduct(productId: "\(bundleId).vip.monthly", type: .autoRenewable, units: 0, tier: 3, weight: 11, itemId: "1498765507"),
            DemoProduct(productId: "\(bundleId).vip.yearly", type: .autoRenewable, units: 0, tier: 7, weight: 3, itemId: "1498765508"),
            DemoProduct(productId: "\(bundleId).pass.30day", type: .nonRenewing, units: 0, tier: 4, weight: 4, itemId: "1498765509"),
        ]
    }

    /// Tier order: 0.99, 2.99, 4.99, 7.99, 9.99, 19.99, 49.99, 59.99 (USD equivalents).
    static let storefronts: [DemoStorefront] = [
        DemoStorefront(code: "USA", currency: "USD", currencyDecimals: 2, taxRate: "0", taxIncluded: false, weight: 34,
                       tierPrices: ["0.99", "2.99", "4.99", "7.99", "9.99", "19.99", "49.99", "59.99"]),
        DemoStorefront(code: "CAN", currency: "CAD", currencyDecimals: 2, taxRate: "0", taxIncluded: false, weight: 5,
                       tierPrices: ["1.39", "3.99", "6.99", "10.99", "13.99", "27.99", "69.99", "82.99"]),
        DemoStorefront(code: "DEU", currency: "EUR", currencyDecimals: 2, taxRate: "0.19", taxIncluded: true, weight: 7,
                       tierPrices: ["0.99", "2.99", "4.99", "7.99", "9.99", "19.99", "49.99", "59.99"]),
        DemoStorefront(code: "FRA", currency: "EUR", currencyDecimals: 2, taxRate: "0.20", taxIncluded: true, weight: 5,
                       tierPrices: ["0.99", "2.99", "4.99", "7.99", "9.99", "19.99", "49.99", "59.99"]),
        DemoStorefront(code: "NLD", currency: "EUR", currencyDecimals: 2, taxRate: "0.21", taxIncluded: true, weight: 3,
                       tierPrices: ["0.99", "2.99", "4.99", "7.99", "9.99", "19.99", "49.99", "59.99"]),
        DemoStorefront(code: "GBR", currency: "GBP", currencyDecimals: 2, taxRate: "0.20", taxIncluded: true, weight: 7,
                       tierPrices: ["0.99", "2.99", "4.99", "7.99", "9.99", "19.99", "49.99", "59.99"]),
        DemoStorefront(code: "JPN", currency: "JPY", currencyDecimals: 0, taxRate: "0.10", taxIncluded: true, weight: 8,
                       tierPrices: ["160", "500", "800", "1300", "1500", "3000", "7800", "9800"]),
        DemoStorefront(code: "KOR", currency: "KRW", currencyDecimals: 0, taxRate: "0.10", taxIncluded: true, weight: 4,
                       tierPrices: ["1500", "4400", "7500", "12000", "14000", "29000", "73000", "88000"]),
        DemoStorefront(code: "KWT", currency: "KWD", currencyDecimals: 3, taxRate: "0", taxIncluded: true, weight: 1,
                       tierPrices: ["0.300", "0.990", "1.490", "2.490", "2.990", "5.990", "14.990", "17.990"]),
        DemoStorefront(code: "BHR", currency: "BHD", currencyDecimals: 3, taxRate: "0.10", taxIncluded: true, weight: 1,
                       tierPrices: ["0.400", "1.190", "1.990", "3.190", "3.990", "7.990", "19.990", "23.990"]),
        DemoStorefront(code: "AUS", currency: "AUD", currencyDecimals: 2, taxRate: "0.10", taxIncluded: true, weight: 4,
                       tierPrices: ["1.49", "4.49", "7.99", "12.99", "14.99", "29.99", "79.99", "89.99"]),
        DemoStorefront(code: "CHE", currency: "CHF", currencyDecimals: 2, taxRate: "0.081", taxIncluded: true, weight: 2,
                       tierPrices: ["1.00", "3.00", "5.00", "8.00", "10.00", "20.00", "50.00", "60.00"]),
        DemoStorefront(code: "BRA", currency: "BRL", currencyDecimals: 2, taxRate: "0", taxIncluded: false, weight: 4,
                       tierPrices: ["5.90", "16.90", "27.90", "44.90", "54.90", "109.90", "279.90", "329.90"]),
        DemoStorefront(code: "IND", currency: "INR", currencyDecimals: 2, taxRate: "0.18", taxIncluded: true, weight: 5,
                       tierPrices: ["89.00", "249.00", "449.00", "699.00", "899.00", "1799.00", "4499.00", "5499.00"]),
        DemoStorefront(code: "MEX", currency: "MXN", currencyDecimals: 2, taxRate: "0.16", taxIncluded: true, weight: 3,
                       tierPrices: ["19.00", "59.00", "99.00", "159.00", "199.00", "399.00", "999.00", "1199.00"]),
        DemoStorefront(code: "CHL", currency: "CLP", currencyDecimals: 0, taxRate: "0.19", taxIncluded: true, weight: 2,
                       tierPrices: ["990", "2990", "4990", "7990", "9990", "19990", "49990", "59990"]),
    ]

    /// Storefront indexes the generator refers to by name.
    enum S {
        static let usa = 0, fra = 3, bra = 12, ind = 13
    }

    /// FRA's VAT moves to this rate on the first day of the data's third month (a demo
    /// scenario, so effective dates matter).
    static let fraTaxRateChange = "0.21"
    /// The USA price of the 550-coin pack from the first day of the data's second month.
    static let usaPrice550Change = "5.99"

    /// Base rates (USD per unit) for the first data month; later months drift a little.
    static let fxBases: [DemoFxBase] = [
        DemoFxBase(currency: "AUD", mantissa: 6548, scale: 4),
        DemoFxBase(currency: "BHD", mantissa: 26525, scale: 4),
        DemoFxBase(currency: "BRL", mantissa: 1836, scale: 4),
        DemoFxBase(currency: "CAD", mantissa: 7312, scale: 4),
        DemoFxBase(currency: "CHF", mantissa: 11287, scale: 4),
        DemoFxBase(currency: "CLP", mantissa: 10725, scale: 7),
        DemoFxBase(currency: "EUR", mantissa: 10823, scale: 4),
        DemoFxBase(currency: "GBP", mantissa: 12741, scale: 4),
        DemoFxBase(currency: "INR", mantissa: 11985, scale: 6),
        DemoFxBase(currency: "JPY", mantissa: 6712, scale: 6),
        DemoFxBase(currency: "KRW", mantissa: 73812, scale: 8),
        DemoFxBase(currency: "KWD", mantissa: 32541, scale: 4),
        DemoFxBase(currency: "MXN", mantissa: 5512, scale: 5),
    ]
    /// The currency whose rate is left out for the last data month.
    static let fxMissingCurrency = "BRL"

    /// Sandbox purchasers: QA devices and App Review (all in the USA storefront).
    static let testerAccountIds = ["acct-qa-01", "acct-qa-02", "acct-qa-03", "acct-qa-04", "acct-qa-05", "acct-appreview"]

    /// Relative purchase activity per UTC hour (US evenings at 00-05, EU evenings at 17-22).
    static let hourWeights = [60, 55, 50, 45, 35, 25, 20, 18, 20, 25, 35, 40, 45, 45, 42, 45, 50, 60, 70, 75, 75, 72, 68, 65]
    /// Relative activity per weekday, Sunday first.
    static let weekdayWeights = [125, 100, 95, 95, 100, 110, 130]

    /// Formats `mantissa / 10^scale` as a plain decimal string.
    static func decimalString(_ mantissa: Int64, scale: Int) -> String {
        var digits = String(mantissa)
        if scale == 0 { return digits }
        if digits.count <= scale { digits = String(repeating: "0", count: scale - digits.count + 1) + digits }
        let split = digits.index(digits.endIndex, offsetBy: -scale)
        return "\(digits[..<split]).\(digits[split...])"
    }
}
