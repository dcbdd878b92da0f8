import LedgerCore

extension SignedTransaction {
    /// The verified signed transaction as a store transaction, or why it cannot be one.
    public func observation() -> Result<TransactionObservation, SignedItemProblem> {
        guard StoreBounds.plausibleIdentifier(transactionId) else {
            return .failure(.init(StoreBounds.implausibleIdentifier("transactionId", transactionId)))
        }
        if let original = originalTransactionId, !original.isEmpty, !StoreBounds.plausibleIdentifier(original) {
            return .failure(.init(StoreBounds.implausibleIdentifier("originalTransactionId", original, of: transactionId)))
        }
        guard let product = productId, !product.isEmpty else { return .failure(.init("transaction \(transactionId) has no productId")) }
        guard StoreBounds.plausibleIdentifier(product) else {
            return .failure(.init(StoreBounds.implausibleIdentifier("productId", product, of: transactionId)))
        }
        guard let purchase = purchaseDateMs else { return .failure(.init("transaction \(transactionId) has no purchaseDate")) }
        guard StoreBounds.plausibleDate(purchase) else {
            return .failure(.init("transaction \(transactionId) has purchase date \(Day(epochMilliseconds: purchase)), outside 2008-2099"))
        }
        let q = quantity ?? 1
        guard q > 0 && q <= 1_000_000 else { return .failure(.init("transaction \(transactionId) has quantity \(q): not from 1 to 1000000")) }
        guard let env = environment, let book = Book(storeEnvironment: env) else {
            return .failure(.init("transaction \(transactionId) has environment \(environment ?? "(none)"): not Production or Sandbox"))
        }
        if let p = priceMilliunits, p < 0 { return .failure(.init("transaction \(transactionId) has a negative price \(p)")) }
        if let p = priceMilliunits, p > StoreBounds.maxPriceMilliunits {
            return .failure(.init("transaction \(transactionId) has price \(p) milliunits, more than \(StoreBounds.maxPriceMilliunits)"))
        }
        if let e = expiresDateMs, !StoreBounds.plausibleDate(e) {
            return .failure(.init("transaction \(transactionId) has expires date \(Day(epochMilliseconds: e)), outside 2008-2099"))
        }
        // Kept as read; a code in lower case (`aud`) is the same code, booked in upper case.
        if let c = currency, !Currency.isKnown(Currency.isoUppercased(c)) {
            return .failure(.init("transaction \(transactionId) has unknown currency \(c)"))
        }
        // A family-sharing revocation takes access away; nobody is refunded.
        var cancellation: Int64? = nil
        var percentage: Int64? = nil
        if let r = revocationDateMs, revocationType != "FAMILY_REVOKE" {
            guard StoreBounds.plausibleDate(r) else {
                return .failure(.init("transaction \(transactionId) has revocation date \(Day(epochMilliseconds: r)), outside 2008-2099"))
            }
            guard r >= purchase else {
                return .failure(.init(StoreBounds.refundedBeforeBought(transactionId, refundMs: r, purchaseMs: purchase)))
            }
            cancellation = r
            if revocationType == "REFUND_PRORATED", let p = revocationPercentage {
                guard p > 0 && p <= 100_000 else {
                    return .failure(.init("transaction \(transactionId) has revocationPercentage \(p): not from 1 to 100000"))
                }
                percentage = p
            }
        }
        var observed = TransactionObservation(
            transactionId: transactionId, originalTransactionId: originalTransactionId, productId: product, quantity: q,
            purchaseMs: purchase, expiresMs: expiresDateMs, cancellationMs: cancellation, revocationPercentage: percentage,
            book: book, bundleId: bundleId, storefront: storefront, currency: currency, priceMilliunits: priceMilliunits,
            appAccountToken: appAccountToken?.lowercased(), hasOffer: offerType != nil || offerIdentifier != nil,
            // A family member's access to what the purchaser bought: the purchaser's transaction
            // is the paid one; booking this one too would count the revenue twice.
            isFreeTrial: inAppOwnershipType == "FAMILY_SHARED", upgraded: isUpgraded == true)
        observed.shareUnknown = cancellation != nil && revocationType == "REFUND_PRORATED" && percentage == nil
        observed.shareSaid = cancellation != nil && (revocationType == "REFUND_FULL" || percentage != nil)
        return .success(observed)
    }
}

/// Why a verified signed transaction cannot be posted.
public struct SignedItemProblem: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
