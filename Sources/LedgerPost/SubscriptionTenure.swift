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
/// - a period fully refunded before this purchase, or at its very instant (an upgrade: Apple
///   dates the refund of the period upgraded from at the upgrade), neither counts nor keeps the
///   subscription alive (a partial refund leaves the period paid; a reversed refund is no refund);
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

    /// What the count made of one earlier transaction of the chain (by its index in the chain
    /// given), or of a lapse (`explained`).
    public enum Step: Equatable, Sendable {
        /// A paid period: its whole days were added.
        case paid(Int, days: Int)
        /// A free trial or zero-price offer: no days, but the subscription stayed alive.
        case freeTrial(Int)
        /// Fully refunded before this purchase (or at its instant): no days, and it did not keep the subscription alive.
        case refunded(Int)
        /// No expiry date: nothing to count.
        case noExpiry(Int)
        /// A lapse longer than the grace days before the purchase at `beforeMs` (an earlier
        /// period's, or this one's): the count started again from zero.
        case restarted(lapseDays: Int, beforeMs: Int64)
        /// A lapse of a whole day or more, but no longer than the grace days, before the
        /// purchase at `beforeMs`: the count went on (shown, so that a lapse just inside the
        /// grace, counted in whole days, is seen with its length).
        case gap(lapseDays: Int, beforeMs: Int64)
    }

    /// Days of paid service before `purchaseMs`, counted since the last lapse longer than `graceDays`.
    public static func paidDays(before purchaseMs: Int64, chain: [ChainItem], graceDays: Int) -> Int {
        walk(before: purchaseMs, chain: chain, graceDays: graceDays, visit: nil)
    }

    /// `paidDays`, with what the count made of each earlier transaction of the chain and of
    /// each lapse that restarted it, in purchase order: what `trace` shows an auditor.
    public static func explained(before purchaseMs: Int64, chain: [ChainItem], graceDays: Int) -> (paidDays: Int, steps: [Step]) {
        var steps: [Step] = []
        let days = walk(before: purchaseMs, chain: chain, graceDays: graceDays) { steps.append($0) }
        return (days, steps)
    }

    /// The count, one earlier transaction at a time in purchase order; `visit` is told each step.
    private static func walk(before purchaseMs: Int64, chain: [ChainItem], graceDays: Int, visit: ((Step) -> Void)?) -> Int {
        let earlier = chain.indices
            .filter { chain[$0].purchaseMs < purchaseMs }
            .sorted { (chain[$0].purchaseMs, chain[$0].expiresMs ?? .min, $0) < (chain[$1].purchaseMs, chain[$1].expiresMs ?? .min, $1) }
        var paidDays = 0
        var coveredUntilMs: Int64? = nil
        for index in earlier {
            let item = chain[index]
            guard let expiresMs = item.expiresMs else { visit?(.noExpiry(index)); continue }
            if let refunded = item.fullyRefundedMs, refunded <= purchaseMs { visit?(.refunded(index)); continue }
            if let covered = coveredUntilMs, case let lapse = wholeDays(from: covered, to: item.purchaseMs), lapse > 0 {
                if lapse > graceDays {
                    paidDays = 0
                    visit?(.restarted(lapseDays: lapse, beforeMs: item.purchaseMs))
                } else {
                    visit?(.gap(lapseDays: lapse, beforeMs: item.purchaseMs))
                }
            }
            if item.freeTrial {
                visit?(.freeTrial(index))
            } else {
                let days = wholeDays(from: item.purchaseMs, to: expiresMs)
                paidDays += days
                visit?(.paid(index, days: days))
            }
            coveredUntilMs = max(coveredUntilMs ?? expiresMs, expiresMs)
        }
        if let covered = coveredUntilMs, case let lapse = wholeDays(from: covered, to: purchaseMs), lapse > 0 {
            if lapse > graceDays {
                visit?(.restarted(lapseDays: lapse, beforeMs: purchaseMs))
                return 0
            }
            visit?(.gap(lapseDays: lapse, beforeMs: purchaseMs))
        }
        return paidDays
    }
}
