import LedgerCore

/// The exception categories of reconciliation.md, in the order they are checked.
public enum ExceptionCategory: String, CaseIterable, Sendable {
    case duplicateCredit = "DUPLICATE_CREDIT"
    case sandboxCreditedInProduction = "SANDBOX_CREDITED_IN_PRODUCTION"
    case refundedStillCredited = "REFUNDED_STILL_CREDITED"
    case notCredited = "NOT_CREDITED"
    case creditedWithoutTransaction = "CREDITED_WITHOUT_TRANSACTION"
    case creditedUnverified = "CREDITED_UNVERIFIED"
    case accountMismatch = "ACCOUNT_MISMATCH"
    case productMismatch = "PRODUCT_MISMATCH"
    case quantityMismatch = "QUANTITY_MISMATCH"
    case unitsMismatch = "UNITS_MISMATCH"

    /// What the category means, for the workbook.
    public var meaning: String {
        switch self {
        case .duplicateCredit: return "two or more active orders credit the same transaction"
        case .sandboxCreditedInProduction: return "a production credit for a sandbox (test) purchase"
        case .refundedStillCredited: return "the purchase was refunded in full but the credit stands"
        case .notCredited: return "a paid production purchase that no order credits (lost order)"
        case .creditedWithoutTransaction: return "a production credit naming no store transaction, or one the store never reported"
        case .creditedUnverified: return "a production credit whose transaction is pending verification or was rejected"
        case .accountMismatch: return "the app account token of the order and of the transaction differ"
        case .productMismatch: return "the order's product differs from the transaction's"
        case .quantityMismatch: return "the order's quantity differs from the transaction's"
        case .unitsMismatch: return "units credited differ from the product's units times the quantity"
        }
    }
}

/// A store transaction as reconciliation sees it.
public struct ReconTransaction: Sendable {
    public var transactionId: String
    public var book: Book
    public var productId: String
    public var quantity: Int64
    public var appAccountToken: String?
    /// Refunded in full and not reversed.
    public var refundedInFull: Bool
    /// Refunded at all (full or prorated), not reversed.
    public var refunded: Bool
    public var grossMinor: Int64?
    public var currency: String?
    public var netReportingMinor: Int64?
    public init(transactionId: String, book: Book, productId: String, quantity: Int64, appAccountToken: String?,
                refundedInFull: Bool, refunded: Bool, grossMinor: Int64?, currency: String?, netReportingMinor: Int64?) {
        self.transactionId = transactionId
        self.book = book
        self.productId = productId
        self.quantity = quantity
        self.appAccountToken = appAccountToken
        self.refundedInFull = refundedInFull
        self.refunded = refunded
        self.grossMinor = grossMinor
        self.currency = currency
        self.netReportingMinor = netReportingMinor
    }
}

/// The latest version of a backend order.
public struct ReconOrder: Sendable {
    public var orderId: String
    public var accountId: String
    public var transactionId: String?
    public var productId: String
    public var quantity: Int64
    public var creditedUnits: Int64
    public var creditedMs: Int64
    public var environment: String
    public var appAccountToken: String?
    public var active: Bool
    public init(orderId: String, accountId: String, transactionId: String?, productId: String, quantity: Int64,
                creditedUnits: Int64, creditedMs: Int64, environment: String, appAccountToken: String?, active: Bool) {
        self.orderId = orderId
        self.accountId = accountId
        self.transactionId = transactionId
        self.productId = productId
        self.quantity = quantity
        self.creditedUnits = creditedUnits
        self.creditedMs = creditedMs
        self.environment = environment
        self.appAccountToken = appAccountToken
        self.active = active
    }
}

/// One detected difference between the store and the backend.
public struct DetectedException: Equatable, Sendable {
    public var category: ExceptionCategory
    public var transactionId: String
    /// Empty for exceptions about a transaction alone (NOT_CREDITED).
    public var orderId: String
    public var accountId: String?
    public var productId: String?
    public var grossMinor: Int64?
    public var currency: String?
    public var netReportingMinor: Int64?
    public var detail: String
}

public struct ReconciliationResult: Sendable {
    public var exceptions: [DetectedException]
    /// Order/transaction pairs that raise no exception.
    public var matched: Int
}

/// Store transactions against the backend's credits (reconciliation.md), as a pure function.
public struct Reconciler {
    public var products: [String: ProductRule]
    /// Product types in scope (default: consumable and non-consumable).
    public var scope: Set<ProductType>

    public init(products: [String: ProductRule], scope: Set<ProductType> = [.consumable, .nonConsumable]) {
        self.products = products
        self.scope = scope
    }

    /// In scope when its type is; a product missing from the rules is kept in scope (nothing proves it is not).
    func inScope(_ productId: String) -> Bool {
        guard let p = products[productId] else { return true }
        return scope.contains(p.type)
    }

    public func reconcile(transactions: [ReconTransaction], orders: [ReconOrder], unverifiedIds: Set<String>) -> ReconciliationResult {
        var byId: [String: ReconTransaction] = [:]
        for t in transactions { byId[t.transactionId] = t }
        let active = orders.filter(\.active).sorted { ($0.creditedMs, $0.orderId) < ($1.creditedMs, $1.orderId) }
        var out: [DetectedException] = []
        var pairs: [String: Bool] = [:]   // order id -> raised something

        func raise(_ c: ExceptionCategory, _ t: ReconTransaction?, _ o: ReconOrder?, transactionId: String? = nil, _ detail: String) {
            out.append(DetectedException(category: c, transactionId: t?.transactionId ?? transactionId ?? o?.transactionId ?? "",
                                         orderId: o?.orderId ?? "", accountId: o?.accountId, productId: t?.productId ?? o?.productId,
                                         grossMinor: t?.grossMinor, currency: t?.currency, netReportingMinor: t?.netReportingMinor,
                                         detail: detail))
            if let o { pairs[o.orderId] = true }
        }

        // DUPLICATE_CREDIT: every active order after the earliest for the same transaction.
        var creditsByTransaction: [String: [ReconOrder]] = [:]
        for o in active { if let id = o.transactionId { creditsByTransaction[id, default: []].append(o) } }
        for (id, list) in creditsByTransaction where list.count > 1 {
            for o in list.dropFirst() {
                raise(.duplicateCredit, byId[id], o, transactionId: id,
                      "order \(o.orderId) credits transaction \(id) again; first credited by order \(list[0].orderId) (\(list.count) active orders)")
            }
        }
        for o in active {
            guard let id = o.transactionId, let t = byId[id] else { continue }
            if o.environment == "production" && t.book == .sandbox {
                raise(.sandboxCreditedInProduction, t, o, "production order \(o.orderId) credits sandbox transaction \(id)")
            }
            if t.refundedInFull {
                raise(.refundedStillCredited, t, o, "transaction \(id) was refunded in full; order \(o.orderId) is still active (no reversed_at)")
            }
        }
        // NOT_CREDITED: verified production purchases in scope, not refunded, that no active order names.
        for t in transactions where t.book == .production && !t.refunded && inScope(t.productId) && creditsByTransaction[t.transactionId] == nil {
            raise(.notCredited, t, nil, "paid production transaction \(t.transactionId) (\(t.productId) x \(t.quantity)) has no active order")
        }
        for o in active where o.environment == "production" {
            guard let id = o.transactionId, !id.isEmpty else {
                raise(.creditedWithoutTransaction, nil, o, transactionId: "", "order \(o.orderId) credits \(o.productId) with no transaction id")
                continue
            }
            if byId[id] == nil {
                if unverifiedIds.contains(id) {
                    raise(.creditedUnverified, nil, o, "order \(o.orderId) credits transaction \(id), which is pending verification or was rejected")
                } else {
                    raise(.creditedWithoutTransaction, nil, o, "order \(o.orderId) credits transaction \(id), which the store never reported")
                }
            }
        }
        // Field checks on every active order naming a known, in-scope transaction.
        for o in active {
            guard let id = o.transactionId, let t = byId[id], inScope(t.productId) else { continue }
            if let a = o.appAccountToken, let b = t.appAccountToken, a.lowercased() != b.lowercased() {
                raise(.accountMismatch, t, o, "order \(o.orderId) (account \(o.accountId)) has app_account_token \(a); the transaction has \(b)")
            }
            if o.productId != t.productId {
                raise(.productMismatch, t, o, "order \(o.orderId) credits \(o.productId); the transaction bought \(t.productId)")
            }
            if o.quantity != t.quantity {
                raise(.quantityMismatch, t, o, "order \(o.orderId) credits quantity \(o.quantity); the transaction bought \(t.quantity)")
            }
            if let p = products[t.productId], o.creditedUnits != p.units * t.quantity {
                raise(.unitsMismatch, t, o, "order \(o.orderId) credited \(o.creditedUnits) units; \(t.productId) x \(t.quantity) is \(p.units * t.quantity)")
            }
        }
        let matched = active.filter { o in
            guard let id = o.transactionId, byId[id] != nil else { return false }
            return pairs[o.orderId] == nil
        }.count
        let order = Dictionary(uniqueKeysWithValues: ExceptionCategory.allCases.enumerated().map { ($1, $0) })
        out.sort { (order[$0.category]!, $0.transactionId, $0.orderId) < (order[$1.category]!, $1.transactionId, $1.orderId) }
        return ReconciliationResult(exceptions: out, matched: matched)
    }
}
