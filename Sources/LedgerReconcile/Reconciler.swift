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
        case .sandboxCreditedInProduction: return "a production credit for a sandbox (test) purchase; its amount is the test sale's, which nobody paid: left out of the total"
        case .refundedStillCredited: return "the purchase was refunded in full but the credit stands"
        case .notCredited: return "a production purchase (paid, or free) that no order credits (lost order)"
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
    /// `refunded` is the store's word on a second refund or reversal the ledger did not post
    /// (its REFUND_AFTER_REVERSAL, REFUND_AGAIN or REVERSAL_REPEATED finding).
    public var refundedAgain = false
    public var grossMinor: Int64?
    public var currency: String?
    public var netReportingMinor: Int64?
    /// Its sale is booked at `default_storefront` and it has no storefront of its own (booked
    /// there for want of an order's, or because its order named it: its applied rules say which).
    public var bookedAtDefaultStorefront: Bool
    public init(transactionId: String, book: Book, productId: String, quantity: Int64, appAccountToken: String?,
                refundedInFull: Bool, refunded: Bool, grossMinor: Int64?, currency: String?, netReportingMinor: Int64?,
                bookedAtDefaultStorefront: Bool = false) {
        self.bookedAtDefaultStorefront = bookedAtDefaultStorefront
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
    /// It names a storefront other than `default_storefront`.
    public var namesOtherStorefront: Bool
    public init(orderId: String, accountId: String, transactionId: String?, productId: String, quantity: Int64,
                creditedUnits: Int64, creditedMs: Int64, environment: String, appAccountToken: String?, active: Bool,
                namesOtherStorefront: Bool = false) {
        self.namesOtherStorefront = namesOtherStorefront
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

/// Everything reconciliation looks at for one transaction id: the transaction (if the store
/// reported it), every active order naming that id, and whether a record that did not verify
/// named it. An order naming no transaction at all is a group of its own (`transactionId` nil).
/// Groups are independent: no exception or match depends on two groups, so a night can
/// reconcile only the groups its new data touched.
public struct ReconGroup: Sendable {
    public var transactionId: String?
    public var transaction: ReconTransaction?
    public var orders: [ReconOrder]
    public var unverified: Bool
    public init(transactionId: String?, transaction: ReconTransaction?, orders: [ReconOrder], unverified: Bool) {
        self.transactionId = transactionId
        self.transaction = transaction
        self.orders = orders
        self.unverified = unverified
    }
}

/// What one group gives: its exceptions (in category order) and the orders matched cleanly.
public struct GroupResult: Sendable {
    public var exceptions: [DetectedException]
    public var matchedOrderIds: [String]
}

/// Store transactions against the backend's credits (reconciliation.md), as a pure function.
public struct Reconciler {
    public var products: [String: ProductRule]
    /// Product types in scope (default: consumable and non-consumable).
    public var scope: Set<ProductType>

    public init(products: [String: ProductRule], scope: Set<ProductType> = ProductType.reconciledByDefault) {
        self.products = products
        self.scope = scope
    }

    /// In scope when its type is; a product missing from the rules is kept in scope (nothing proves it is not).
    func inScope(_ productId: String) -> Bool {
        guard let p = products[productId] else { return true }
        return scope.contains(p.type)
    }

    /// What this version decides, as a number in the fingerprint: raised when a version
    /// decides differently (2: out-of-scope groups raise nothing and match nothing; 3: a
    /// second refund or reversal the ledger did not post is the store's last word; 4: an order of
    /// a product in scope naming a transaction out of scope is checked; 5: a reversed order naming
    /// another storefront than a sale's default one opens STOREFRONT_AFTER_POSTING), so the
    /// first night after an upgrade reconciles every group again instead of keeping what the
    /// version before decided for the groups it does not touch.
    static let logicVersion = 5

    /// A hash of the rules reconciliation depends on (each product's type and units, the
    /// scope, the logic's version): when it changes, every group is reconciled again, not only
    /// the touched ones.
    public var rulesFingerprint: String {
        var text = "logic:\(Self.logicVersion)\nscope:" + scope.map(\.rawValue).sorted().joined(separator: ",") + "\n"
        for id in products.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            let p = products[id]!
            text += "\(id.utf8.count):\(id) \(p.type.rawValue) \(p.units)\n"
        }
        return Hashing.sha256Hex(Array(text.utf8))
    }

    static let categoryOrder = Dictionary(uniqueKeysWithValues: ExceptionCategory.allCases.enumerated().map { ($1, $0) })

    static func inReportOrder(_ a: DetectedException, _ b: DetectedException) -> Bool {
        (categoryOrder[a.category]!, a.transactionId, a.orderId) < (categoryOrder[b.category]!, b.transactionId, b.orderId)
    }

    /// Reconciles one group (see `ReconGroup`).
    public func reconcile(_ g: ReconGroup) -> GroupResult {
        var active = g.orders.filter(\.active).sorted { ($0.creditedMs, $0.orderId) < ($1.creditedMs, $1.orderId) }
        var out: [DetectedException] = []
        var raised = Set<String>()   // order ids that raised something

        // Scope (reconciliation.md): only transactions of products whose type is in scope are
        // reconciled. One out of scope, and the orders naming it for what it is, raise nothing
        // and are not matched either (nothing was checked). An order crediting a product in
        // scope is checked whatever it names: against a transaction out of scope (coins
        // credited on a subscription's transaction) it is checked alone, without the orders of
        // the transaction's own kind (it raises PRODUCT_MISMATCH); naming no transaction the
        // ledger holds, every order of the group is checked if one of them is in scope.
        if let t = g.transaction, !inScope(t.productId) {
            active = active.filter { inScope($0.productId) }
            guard !active.isEmpty else { return GroupResult(exceptions: [], matchedOrderIds: []) }
        } else if g.transaction == nil && !active.contains(where: { inScope($0.productId) }) {
            return GroupResult(exceptions: [], matchedOrderIds: [])
        }

        func raise(_ c: ExceptionCategory, _ t: ReconTransaction?, _ o: ReconOrder?, transactionId: String? = nil, _ detail: String) {
            out.append(DetectedException(category: c, transactionId: t?.transactionId ?? transactionId ?? o?.transactionId ?? "",
                                         orderId: o?.orderId ?? "", accountId: o?.accountId, productId: t?.productId ?? o?.productId,
                                         grossMinor: t?.grossMinor, currency: t?.currency, netReportingMinor: t?.netReportingMinor,
                                         detail: detail))
            if let o { raised.insert(o.orderId) }
        }

        guard let id = g.transactionId else {
            // Orders naming no transaction.
            for o in active where o.environment == "production" {
                raise(.creditedWithoutTransaction, nil, o, transactionId: "", "order \(o.orderId) credits \(o.productId) with no transaction id")
            }
            return GroupResult(exceptions: out.sorted(by: Self.inReportOrder), matchedOrderIds: [])
        }
        let t = g.transaction
        // DUPLICATE_CREDIT: every active order after the earliest for the same transaction.
        if active.count > 1 {
            for o in active.dropFirst() {
                raise(.duplicateCredit, t, o, transactionId: id,
                      "order \(o.orderId) credits transaction \(id) again; first credited by order \(active[0].orderId) (\(active.count) active orders)")
            }
        }
        if let t {
            for o in active {
                if o.environment == "production" && t.book == .sandbox {
                    raise(.sandboxCreditedInProduction, t, o, "production order \(o.orderId) credits sandbox transaction \(id)")
                }
                if t.refundedInFull {
                    raise(.refundedStillCredited, t, o, t.refundedAgain
                        ? "transaction \(id) was refunded in full, as the store said last (a refund dated after its reversal, or a second refund the ledger does not post: its trace shows which); order \(o.orderId) is still active (no reversed_at)"
                        : "transaction \(id) was refunded in full; order \(o.orderId) is still active (no reversed_at)")
                }
            }
            // NOT_CREDITED: a verified production purchase in scope, not refunded, that no active order names.
            if active.isEmpty && t.book == .production && !t.refunded {
                raise(.notCredited, t, nil, "production transaction \(t.transactionId) (\(t.productId) x \(t.quantity)) has no active order")
            }
        }
        for o in active where o.environment == "production" {
            if id.isEmpty {
                raise(.creditedWithoutTransaction, nil, o, transactionId: "", "order \(o.orderId) credits \(o.productId) with no transaction id")
            } else if t == nil {
                if g.unverified {
                    raise(.creditedUnverified, nil, o, "order \(o.orderId) credits transaction \(id), which is pending verification or was rejected")
                } else {
                    raise(.creditedWithoutTransaction, nil, o, "order \(o.orderId) credits transaction \(id), which the store never reported")
                }
            }
        }
        // Field checks on every active order naming a known transaction.
        if let t {
            for o in active {
                if let a = o.appAccountToken, let b = t.appAccountToken, a.lowercased() != b.lowercased() {
                    raise(.accountMismatch, t, o, "order \(o.orderId) (account \(o.accountId)) has app_account_token \(a); the transaction has \(b)")
                }
                if o.productId != t.productId {
                    raise(.productMismatch, t, o, "order \(o.orderId) credits \(o.productId); the transaction bought \(t.productId)")
                }
                if o.quantity != t.quantity {
                    raise(.quantityMismatch, t, o, "order \(o.orderId) credits quantity \(o.quantity); the transaction bought \(t.quantity)")
                }
                // Checked: units a rule allows times a quantity a transaction may have stay far
                // inside Int64, but a trap here would stop every night.
                if let p = products[t.productId] {
                    let (due, overflow) = p.units.multipliedReportingOverflow(by: t.quantity)
                    if overflow || o.creditedUnits != due {
                        raise(.unitsMismatch, t, o, "order \(o.orderId) credited \(o.creditedUnits) units; \(t.productId) x \(t.quantity) is "
                              + (overflow ? "more than \(Int64.max)" : "\(due)"))
                    }
                }
            }
        }
        let matched = t == nil ? [] : active.map(\.orderId).filter { !raised.contains($0) }
        return GroupResult(exceptions: out.sorted(by: Self.inReportOrder), matchedOrderIds: matched)
    }

    /// Reconciles everything given at once (the groups formed here), for callers that hold it
    /// all in memory; the nightly run streams the groups from the ledger instead.
    public func reconcile(transactions: [ReconTransaction], orders: [ReconOrder], unverifiedIds: Set<String>) -> ReconciliationResult {
        var byId: [String: ReconTransaction] = [:]
        for t in transactions { byId[t.transactionId] = t }
        var ordersById: [String: [ReconOrder]] = [:]
        var exceptions: [DetectedException] = []
        var matched = 0
        for o in orders where o.active {
            guard let id = o.transactionId else {
                exceptions += reconcile(ReconGroup(transactionId: nil, transaction: nil, orders: [o], unverified: false)).exceptions
                continue
            }
            ordersById[id, default: []].append(o)
        }
        for id in Set(byId.keys).union(ordersById.keys) {
            let r = reconcile(ReconGroup(transactionId: id, transaction: byId[id], orders: ordersById[id] ?? [],
                                         unverified: unverifiedIds.contains(id)))
            exceptions += r.exceptions
            matched += r.matchedOrderIds.count
        }
        return ReconciliationResult(exceptions: exceptions.sorted(by: Self.inReportOrder), matched: matched)
    }
}
