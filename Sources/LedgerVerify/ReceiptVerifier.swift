import LedgerCore
import LedgerRead

/// What verifying one legacy receipt record decided (iap-formats.md section 1).
public enum ReceiptOutcome: Equatable {
    /// Apple vouched for it: its transactions go to the book of `book`.
    case verified(book: Book, transactions: [TransactionObservation], findings: [Finding])
    /// Not verifiable now; kept and re-checked when a later verified record for the same
    /// transaction arrives.
    case pending(code: String, reason: String, transactionIds: [String])
    /// Never verifiable.
    case rejected(code: String, reason: String)
}

/// Classifies legacy verifyReceipt responses by status, bundle id and environment, and turns
/// their items into normalised transactions.
public struct ReceiptVerifier {
    public let bundleIds: Set<String>

    public init(bundleIds: [String]) { self.bundleIds = Set(bundleIds) }

    /// Plain meanings of Apple's status codes.
    public static func meaning(of status: Int) -> String {
        switch status {
        case 0: return "valid"
        case 21000: return "the request to the App Store was not made with HTTP POST"
        case 21001: return "status 21001 is no longer sent by the App Store"
        case 21002: return "the receipt data was malformed or the service had a temporary issue"
        case 21003: return "the receipt could not be authenticated"
        case 21004: return "the shared secret does not match the account's"
        case 21005: return "the receipt server was temporarily unable to provide the receipt"
        case 21006: return "valid, but the subscription has expired"
        case 21007: return "a sandbox receipt was sent to the production verification service"
        case 21008: return "a production receipt was sent to the sandbox verification service"
        case 21009: return "internal data access error"
        case 21010: return "the user account cannot be found or has been deleted"
        case 21100...21199: return "internal data access error"
        default: return "unknown status"
        }
    }

    public func verify(_ r: LegacyResponse, location: SourceLocation) -> ReceiptOutcome {
        guard let status = r.status else {
            if let text = r.statusText { return .rejected(code: "BAD_STATUS", reason: "status \"\(text)\" is not a number") }
            return .rejected(code: "NO_STATUS", reason: "no status field: not a verifyReceipt response" + (r.foreignHint.map { " (\($0))" } ?? ""))
        }
        let ids = r.items.compactMap(\.transactionId) + (r.wrapperTransactionId.map { [$0] } ?? [])
        switch status {
        case 0, 21006:
            break
        case 21007:
            return .pending(code: "SANDBOX_RECEIPT_SENT_TO_PRODUCTION", reason: "status 21007: \(Self.meaning(of: status)); verify it against the sandbox", transactionIds: ids)
        case 21008:
            return .pending(code: "PRODUCTION_RECEIPT_SENT_TO_SANDBOX", reason: "status 21008: \(Self.meaning(of: status)); verify it against production", transactionIds: ids)
        case 21002, 21005, 21009, 21100...21199:
            if r.isRetryable {
                return .pending(code: "RETRYABLE", reason: "status \(status): \(Self.meaning(of: status)) (is-retryable); waiting for a verified record", transactionIds: ids)
            }
            return .rejected(code: "STATUS_\(status)", reason: "status \(status): \(Self.meaning(of: status)), not marked retryable")
        default:
            return .rejected(code: "STATUS_\(status)", reason: "status \(status): \(Self.meaning(of: status))")
        }
        if status == 21006 && r.style == .ios7 {
            return .rejected(code: "STATUS_21006", reason: "status 21006 is only valid for iOS 6 style receipts")
        }
        guard r.style != .none else {
            return .rejected(code: "NO_RECEIPT", reason: "status \(status) but no receipt in the response")
        }
        // The environment decides the book. iOS 6 style responses of the production service
        // carry no `environment`; the sandbox always names itself.
        let envText = r.environment ?? (r.receiptType.map { $0.lowercased().contains("sandbox") ? "Sandbox" : "Production" } ?? "Production")
        guard let book = Book(storeEnvironment: envText) else {
            return .rejected(code: "BAD_ENVIRONMENT", reason: "environment \"\(envText)\" is not Production or Sandbox")
        }
        if !bundleIds.isEmpty {
            guard let bundle = r.bundleId ?? r.items.first(where: { $0.bundleId != nil })?.bundleId else {
                return .rejected(code: "NO_BUNDLE_ID", reason: "the receipt names no bundle id; expected one of \(bundleIds.sorted().joined(separator: ", "))")
            }
            guard bundleIds.contains(bundle) else {
                return .rejected(code: "WRONG_BUNDLE_ID", reason: "receipt of another app: bundle id \(bundle), expected \(bundleIds.sorted().joined(separator: ", "))")
            }
        }
        var transactions: [TransactionObservation] = []
        var findings: [Finding] = []
        for item in r.items {
            switch observation(item, book: book, bundleId: r.bundleId) {
            case .success(let t):
                transactions.append(t)
                if let passed = item.msPassedOver {
                    let name = String(passed.field.dropLast(3))
                    findings.append(Finding(code: "DATE_MS_UNREADABLE", message: "transaction \(t.transactionId) has \(passed.field) \(String(reflecting: String(passed.text.prefix(64)))): not a number of milliseconds, so this record's date for it is read from \(name) (or its other forms) instead (the transaction keeps the date its first record gave); the _ms fields are the time Apple means: check the date against Apple's records",
                                            location: location, transactionId: t.transactionId))
                }
                // Apple's own sandbox responses list a subscription's first period as a free
                // trial in one array and not in the other: booked by the first listing, said.
                if item.trialDisagreement {
                    findings.append(Finding(code: "TRANSACTION_CONFLICT", message: "transaction \(t.transactionId) is listed twice in the response, "
                        + "a free trial (is_trial_period) in one listing and not in the other: taken as its first listing says (is_trial_period \(item.isTrialPeriod)); "
                        + "book a correction if Apple's financial report says otherwise",
                        location: location, transactionId: t.transactionId))
                }
            case .failure(let why):
                findings.append(Finding(code: "INVALID_TRANSACTION", message: why.message, location: location, transactionId: item.transactionId))
            }
        }
        return .verified(book: book, transactions: transactions, findings: findings)
    }

    func observation(_ it: LegacyItem, book: Book, bundleId: String?) -> Result<TransactionObservation, ItemProblem> {
        if let bad = it.badIdentifier {
            return .failure(ItemProblem("\(it.transactionId.map { "transaction \($0) has " } ?? "")\(bad.field) \(String(reflecting: String(bad.text.prefix(64)))): neither a string nor a whole number written as digits"))
        }
        guard let id = it.transactionId, !id.isEmpty else { return .failure(ItemProblem("an item without transaction_id")) }
        if let bad = it.badFlag {
            return .failure(ItemProblem("transaction \(id) has \(bad.field) \(String(reflecting: String(bad.text.prefix(64)))): neither true nor false, so whether it was \(bad.field == "is_trial_period" ? "paid for" : "upgraded from") cannot be told"))
        }
        if let bad = it.badDate {
            return .failure(ItemProblem("transaction \(id) has \(bad.field) \(String(reflecting: String(bad.text.prefix(64)))): not a date (milliseconds since 1970, or Apple's date text), so \(bad.field.hasPrefix("cancellation") ? "when it was refunded" : "when it expires") cannot be told"))
        }
        if let d = it.disagreement {
            return .failure(ItemProblem("transaction \(String(reflecting: String(id.prefix(64)))) is listed twice in the response with a different \(d): which is true cannot be told"))
        }
        guard StoreBounds.plausibleIdentifier(id) else {
            return .failure(ItemProblem(StoreBounds.implausibleIdentifier("transaction_id", id)))
        }
        if let original = it.originalTransactionId, !original.isEmpty, !StoreBounds.plausibleIdentifier(original) {
            return .failure(ItemProblem(StoreBounds.implausibleIdentifier("original_transaction_id", original, of: id)))
        }
        guard let product = it.productId, !product.isEmpty else { return .failure(ItemProblem("transaction \(id) has no product_id")) }
        guard StoreBounds.plausibleIdentifier(product) else {
            return .failure(ItemProblem(StoreBounds.implausibleIdentifier("product_id", product, of: id)))
        }
        let qText = it.quantity ?? "1"
        guard let q = Int64(qText), q > 0, q <= 1_000_000 else { return .failure(ItemProblem("transaction \(id) has quantity \"\(qText)\": not a whole number from 1 to 1000000")) }
        guard let purchase = it.purchaseMs else { return .failure(ItemProblem("transaction \(id) has no readable purchase_date")) }
        // Dates outside 2008 (the App Store's opening) ... 2100 are not real store dates.
        guard StoreBounds.plausibleDate(purchase) else {
            return .failure(ItemProblem("transaction \(id) has purchase date \(Day(epochMilliseconds: purchase)), outside 2008-2099"))
        }
        if let c = it.cancellationMs, !StoreBounds.plausibleDate(c) {
            return .failure(ItemProblem("transaction \(id) has cancellation date \(Day(epochMilliseconds: c)), outside 2008-2099"))
        }
        if let c = it.cancellationMs, case let bought = min(purchase, it.cancellationCopyPurchaseMs ?? purchase), c < bought {
            return .failure(ItemProblem(StoreBounds.refundedBeforeBought(id, refundMs: c, purchaseMs: bought)))
        }
        if let e = it.expiresMs, !StoreBounds.plausibleDate(e) {
            return .failure(ItemProblem("transaction \(id) has expires date \(Day(epochMilliseconds: e)), outside 2008-2099"))
        }
        return .success(TransactionObservation(
            transactionId: id, originalTransactionId: it.originalTransactionId, productId: product, quantity: q,
            purchaseMs: purchase, expiresMs: it.expiresMs, cancellationMs: it.cancellationMs,
            revocationPercentage: nil, book: book, bundleId: it.bundleId ?? bundleId, storefront: nil, currency: nil,
            priceMilliunits: nil, appAccountToken: it.appAccountToken, hasOffer: false,
            // A family member's shared access moves no money, like a trial: the purchaser's
            // transaction is the paid one, and booking both would count the revenue twice.
            isFreeTrial: it.isTrialPeriod || it.isFamilyShared, upgraded: it.isUpgraded))
    }
}

/// Why one item of a verified receipt cannot be a transaction.
struct ItemProblem: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
