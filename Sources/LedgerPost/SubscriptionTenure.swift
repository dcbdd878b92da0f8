import LedgerCore

/// Days of paid service an auto-renewable subscription already has before a purchase
/// (accounting.md "A sale", step 3): the store's commission drops to the reduced rate once a
/// subscriber has `subscription_reduced_after_days` of them.
///
/// The choices the contract leaves open, written down in the README as well:
/// - a period counts `floor((expires - purchase) / 86,400,000)` whole days; a transaction
///   without an expiry date contributes nothing;
/// - only periods purchased strictly before this purchase count;
/// - free trial periods (and zero-price offers) are not paid service, but they keep the
///   subscription alive: they do not make a lapse;
/// - a period fully refunded before this purchase neither counts nor keeps the subscription
///   alive (a partial refund leaves the period paid; a reversed refund is no refund);
/// - a lapse is a gap, in whole days, between the latest expiry so far and the next purchase;
///   a lapse longer than `subscription_grace_days` restarts the count, and so does such a gap
///   before this very purchase.
public enum SubscriptionTenure {
    /// Milliseconds in one day (UTC days have no leap seconds in epoch time).
    public static let millisecondsPerDay: Int64 = 86_400_000

    /// One transaction of a subscription's chain (same `original_transaction_id`, same book).
    public struct ChainItem: Sendable, Equatable {
        public var purchaseMs: Int64
        public var expiresMs: Int64?
        /// When the period was fully refunded (a refund later reversed is no refund): nil if it never was.
        public var fullyRefundedMs: Int64?
        /// A free trial period or a zero-price offer: nothing was paid.
        public var freeTrial: Bool

        public init(purchaseMs: Int64, expiresMs: Int64?, fullyRefundedMs: Int64? = nil, freeTrial: Bool = false) {
            self.purchaseMs = purchaseMs
            self.expiresMs = expiresMs
            self.fullyRefundedMs = fullyRefundedMs
            self.freeTrial = freeTrial
        }

        /// The chain item of a stored transaction. `refundReversed`: a `REFUND_REVERSED` undid its refund.
        public init(_ t: TransactionObservation, refundReversed: Bool) {
            let full = t.revocationPercentage == nil || t.revocationPercentage == 100_000
            self.init(purchaseMs: t.purchaseMs, expiresMs: t.expiresMs,
                      fullyRefundedMs: full && !refundReversed ? t.cancellationMs : nil,
                      freeTrial: t.isFreeTrial || t.priceMilliunits == 0)
        }
    }

    /// Whole days from `fromMs` to `toMs` (floor; 0 when `toMs` is not later).
    public static func wholeDays(from fromMs: Int64, to toMs: Int64) -> Int {
        toMs > fromMs ? Int((toMs - fromMs) / millisecondsPerDay) : 0
    }

    /// Days of paid service before `purchaseMs`, counted since the last lapse longer than `graceDays`.
    public static func paidDays(before purchaseMs: Int64, chain: [ChainItem], graceDays: Int) -> Int {
        let earlier = chain
            .filter { $0.purchaseMs < purchaseMs && $0.expiresMs != nil }
            .filter { item in item.fullyRefundedMs.map { $0 >= purchaseMs } ?? true }
            .sorted { ($0.purchaseMs, $0.expiresMs!) < ($1.purchaseMs, $1.expiresMs!) }
        var paidDays = 0
        var coveredUntilMs: Int64? = nil
        for item in earlier {
            let expiresMs = item.expiresMs!
            if let covered = coveredUntilMs, wholeDays(from: covered, to: item.purchaseMs) > graceDays {
                paidDays = 0
            }
            if !item.freeTrial { paidDays += wholeDays(from: item.purchaseMs, to: expiresMs) }
            coveredUntilMs = max(coveredUntilMs ?? expiresMs, expiresMs)
        }
        if let covered = coveredUntilMs, wholeDays(from: covered, to: purchaseMs) > graceDays {
            return 0
        }
        return paidDays
    }
}
