// Compact in-memory records of the generator. Strings are produced only when a record is
// rendered, so live state stays small at benchmark sizes.

/// One store transaction as the receipts show it.
struct DemoTxn {
    var id: UInt64
    var originalId: UInt64
    /// 0 when the product has none (only auto-renewables carry one).
    var webOrderLineItemId: UInt64 = 0
    var purchaseMs: Int64
    var originalPurchaseMs: Int64
    /// 0 when the product does not expire.
    var expiresMs: Int64 = 0
    /// 0 unless the record shows the transaction refunded.
    var cancelMs: Int64 = 0
    var cancelReason: UInt8 = 0
    /// Account index (>= 0), or a sandbox tester (-1 - tester index).
    var account: Int32
    /// Index into the product table; >= `DemoEngine.otherProductBase` for another app's product.
    var product: Int
    var quantity: Int
    var trial = false
    var sandbox = false
    /// Sent as an iOS 6 style transaction receipt (then every later record of it is too).
    var legacyStyle = false
    /// The backend order crediting it (0 when none).
    var orderNo: UInt64 = 0
}

/// One backend order row (a new credit, or an update of one with `reversed_at`).
struct DemoOrder {
    var orderNo: UInt64
    /// The account credited (its id and app_account_token go into the row).
    var account: Int32
    /// 0 writes an empty transaction_id.
    var txnId: UInt64
    var product: Int
    var quantity: Int
    var creditedUnits: Int
    var creditedMs: Int64
    var sandboxEnvironment: Bool
    var storefront: Int
    var reversedMs: Int64 = 0
    /// When the row was written: `creditedMs`, or `reversedMs` for an update.
    var rowMs: Int64
    var seq: Int = 0
}

/// One verifyReceipt record (Apple's body, optionally inside the backend's wrapper).
struct DemoRecord {
    enum Body {
        /// iOS 7 style app receipt, status 0.
        case app(inApp: [DemoTxn], latest: [DemoTxn], autoRenewStatus: Int8, otherApp: Bool)
        /// iOS 6 style single-transaction receipt, status 0.
        case legacy(DemoTxn, withEnvironment: Bool)
        /// Any failure status; Apple sends no receipt with these.
        case failure(status: Int, retryable: Bool, withEnvironment: Bool)
    }

    var ms: Int64
    var seq: Int
    var account: Int32
    var sandbox: Bool
    var body: Body
    var wrapped: Bool
    var orderNo: UInt64 = 0
    /// Set on failure wrappers: the transaction and product the app reported.
    var namedTxn: UInt64 = 0
    var namedProduct: Int = 0
    /// Written as its own pretty-printed .json file (an operator's manual re-check).
    var manual = false
}

/// An auto-renewable subscription: every transaction sharing one original_transaction_id.
struct DemoChain {
    var txns: [DemoTxn]
    var ended = false
    var autoRenew = true
}

enum DemoEventKind {
    /// The next period of a chain (`lapseReturn`: the user comes back after a lapse).
    case renewal(chain: Int, lapseReturn: Bool)
    /// A refund of `txn` shows up in a receipt; `order` gets `reversed_at` unless nil.
    case refund(txn: DemoTxn, chain: Int, order: DemoOrder?)
    /// The app re-sends an unfinished transaction in a later receipt.
    case repeatReceipt(txn: DemoTxn)
    /// A transaction whose first verification failed arrives verified.
    case verifiedLater(txn: DemoTxn)
    /// An order update row (reversal).
    case orderRow(DemoOrder)
}

struct DemoEvent {
    var ms: Int64
    var seq: Int
    var kind: DemoEventKind
}

/// Seeded anomalies, placed at chosen transaction ordinals.
enum DemoSeedKind: Int, CaseIterable {
    // Applied to the next new purchase.
    case retryableThenVerified, status21007ThenSandbox, status21008ThenProduction
    case duplicateCredit, sandboxCreditedInProduction, refundedStillCredited, notCredited
    case accountMismatch, productMismatch, quantityMismatch, unitsMismatch
    case missingPrice, subscriptionLapse
    // Standalone: extra records and orders that are not verified transactions.
    case retryableNeverVerified, rejected, otherApp, creditedWithoutTransaction, status21007Pending

    var isStandalone: Bool { rawValue >= DemoSeedKind.retryableNeverVerified.rawValue }
    var needsSandbox: Bool { self == .status21007ThenSandbox || self == .sandboxCreditedInProduction || self == .status21007Pending }
}

/// Per-account facts, derived from the seed and the account index (nothing is stored).
struct DemoAccountInfo {
    var accountId: String
    var token: String?
    var storefront: Int
    var downloadId: UInt64
    var installMs: Int64
    var originalApplicationVersion: String
    var deviceIdentifier: String
    var vendorIdentifier: String
}
