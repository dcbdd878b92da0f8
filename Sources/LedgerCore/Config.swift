/// The workspace configuration (`iapledger.toml`), as accounting.md describes it.
public struct WorkspaceConfig: Sendable, Equatable {
    public struct DateRange: Sendable, Equatable {
        public var from: Day
        public var to: Day
        public init(from: Day, to: Day) { self.from = from; self.to = to }
        public func contains(_ day: Day) -> Bool { from <= day && day <= to }
        public var description: String { "\(from)..\(to)" }
    }

    /// The SHA-256 of the config file as read, when read from a file.
    public var sourceSHA256: String? = nil
    /// The config file's bytes as read (kept in the ledger with the run that posts by them).
    public var sourceData: [UInt8]? = nil
    public var reportingCurrency: String = "USD"
    public var bundleIds: [String] = []
    public var defaultStorefront: String = "USA"
    /// Days a sale with no storefront of its own (a legacy receipt's) waits, after its purchase
    /// date, for an order to name one before it is booked at `defaultStorefront`: backend orders
    /// often arrive a night after their receipts, and a sale posted before its order would be
    /// booked where a rebuild of the ledger would not book it.
    public var orderWaitDays: Int = 2
    public var commissionStandard: ExactDecimal = ExactDecimal("0.30")!
    public var commissionReduced: ExactDecimal = ExactDecimal("0.15")!
    public var smallBusiness: [DateRange] = []
    public var subscriptionReducedAfterDays: Int = 365
    public var subscriptionGraceDays: Int = 60
    /// Months up to and including this one are closed.
    public var closedThrough: Month?
    /// Extra trusted root certificates for signed data (paths relative to the workspace).
    public var trustedRoots: [String] = []
    /// Ledger database path, relative to the workspace.
    public var databasePath: String = "ledger.sqlite"
    /// The Journal sheet lists every posting up to this many rows.
    public var journalRowCap: Int = 250_000
    /// The paper the workbooks' sheets are set up to print on (`[reports] paper`).
    public var paper: PaperSize = .a4
    /// Product types whose transactions reconciliation checks against the orders
    /// (reconciliation.md: consumable and non-consumable, configurable).
    public var reconciliationScope: Set<ProductType> = ProductType.reconciledByDefault

    public init() {}
}

/// One row of `rules/storefronts.csv`.
public struct StorefrontRule: Sendable, Equatable {
    public var storefront: String
    public var currency: String
    public var taxRate: ExactDecimal
    public var taxIncluded: Bool
    public var effectiveFrom: Day
    public init(storefront: String, currency: String, taxRate: ExactDecimal, taxIncluded: Bool, effectiveFrom: Day) {
        self.storefront = storefront
        self.currency = currency
        self.taxRate = taxRate
        self.taxIncluded = taxIncluded
        self.effectiveFrom = effectiveFrom
    }
}

/// One row of `rules/prices.csv`: the customer price of one unit in major units.
public struct PriceRule: Sendable, Equatable {
    public var productId: String
    public var storefront: String
    public var price: ExactDecimal
    public var effectiveFrom: Day
    public init(productId: String, storefront: String, price: ExactDecimal, effectiveFrom: Day) {
        self.productId = productId
        self.storefront = storefront
        self.price = price
        self.effectiveFrom = effectiveFrom
    }
}

public enum ProductType: String, Sendable, CaseIterable {
    case consumable, nonConsumable = "non_consumable", autoRenewable = "auto_renewable", nonRenewing = "non_renewing"

    /// The types reconciliation checks unless `[reconciliation] scope` says otherwise
    /// (reconciliation.md).
    public static let reconciledByDefault: Set<ProductType> = [.consumable, .nonConsumable]

    /// The names of `types`, in the order the types are declared (`consumable, non_consumable`).
    public static func names(_ types: Set<ProductType> = Set(allCases)) -> String {
        allCases.filter(types.contains).map(\.rawValue).joined(separator: ", ")
    }
}

/// One row of `rules/products.csv`.
public struct ProductRule: Sendable, Equatable {
    public var productId: String
    public var type: ProductType
    public var units: Int64
    public init(productId: String, type: ProductType, units: Int64) {
        self.productId = productId
        self.type = type
        self.units = units
    }
}

/// All rules of a workspace, with "the row in force on a date" lookups.
///
/// A rule applies from its `effective_from` (inclusive) until the next row for the same key.
public struct Rules: Sendable {
    public private(set) var storefronts: [String: [StorefrontRule]] = [:]
    public private(set) var prices: [String: [PriceRule]] = [:]   // key "product|storefront"
    public private(set) var products: [String: ProductRule] = [:]
    public private(set) var fx: [String: [Month: ExactDecimal]] = [:]
    /// The SHA-256 of each rules file as read (`prices.csv` and the rest), when read from files.
    public var sourceSHA256: [String: String] = [:]
    /// Each rules file's bytes as read (kept in the ledger with the run that posts by them).
    public var sourceData: [String: [UInt8]] = [:]

    public init(storefronts: [StorefrontRule] = [], prices: [PriceRule] = [], products: [ProductRule] = [],
                fx: [(Month, String, ExactDecimal)] = []) {
        for s in storefronts { self.storefronts[s.storefront, default: []].append(s) }
        for k in self.storefronts.keys { self.storefronts[k]!.sort { $0.effectiveFrom < $1.effectiveFrom } }
        for p in prices { self.prices[Rules.priceKey(p.productId, p.storefront), default: []].append(p) }
        for k in self.prices.keys { self.prices[k]!.sort { $0.effectiveFrom < $1.effectiveFrom } }
        for p in products { self.products[p.productId] = p }
        for (m, c, r) in fx { self.fx[c, default: [:]][m] = r }
    }

    static func priceKey(_ product: String, _ storefront: String) -> String { product + "|" + storefront }

    public func storefront(_ code: String, on day: Day) -> StorefrontRule? {
        storefronts[code].flatMap { Rules.inForce($0, on: day, \.effectiveFrom) }
    }

    public func price(product: String, storefront: String, on day: Day) -> PriceRule? {
        prices[Rules.priceKey(product, storefront)].flatMap { Rules.inForce($0, on: day, \.effectiveFrom) }
    }

    public func product(_ id: String) -> ProductRule? { products[id] }

    /// Units of the reporting currency per one unit of `currency` in `month`.
    public func fxRate(currency: String, month: Month, reportingCurrency: String) -> ExactDecimal? {
        if currency == reportingCurrency { return .one }
        return fx[currency]?[month]
    }

    /// The last row whose effective date is on or before `day` (rows sorted by date).
    public static func inForce<T>(_ rows: [T], on day: Day, _ date: KeyPath<T, Day>) -> T? {
        var lo = 0, hi = rows.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if rows[mid][keyPath: date] <= day { lo = mid + 1 } else { hi = mid }
        }
        return lo == 0 ? nil : rows[lo - 1]
    }
}

/// The paper a workbook's sheets print on: A4 (the default) or US Letter, Legal, A3.
public enum PaperSize: String, CaseIterable, Sendable {
    case a4 = "A4", letter = "Letter", legal = "Legal", a3 = "A3"

    /// Read without case (`letter`, `A4`).
    public init?(named name: String) {
        guard let p = Self.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
        self = p
    }
}
