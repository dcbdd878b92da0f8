import LedgerCore

/// What posting a sale decided.
public enum SaleDecision: Equatable {
    /// Post this entry.
    case post(EntryDraft)
    /// Gross is zero (a free offer): no entry, but the transaction counts in the reports.
    case free(AppliedRules, SaleFigures)
    /// A rule the sale needs is missing; the transaction waits (`MISSING_RULE`).
    case missingRule(String)
}

/// The accounting contract (accounting.md) as pure functions: a transaction and the rules in,
/// balanced entries out. Nothing here touches storage or files.
public struct Poster {
    public let config: WorkspaceConfig
    public let rules: Rules

    public init(config: WorkspaceConfig, rules: Rules) {
        self.config = config
        self.rules = rules
    }

    /// The storefront a transaction is booked in, and where that came from: the transaction's
    /// own, else its order's (the earliest credited), else `default_storefront`.
    public func storefront(of t: TransactionObservation, orderStorefront: (code: String, orderId: String)?) -> (code: String, source: String) {
        // A signed record's codes as stored (some write `deu`): rules and Apple write them in upper case.
        if let s = t.storefront, !s.isEmpty { return (Currency.isoUppercased(s), "transaction") }
        if let o = orderStorefront, !o.code.isEmpty { return (o.code, "order \(o.orderId)") }
        return (config.defaultStorefront, "default_storefront")
    }

    /// The day a sale with no storefront of its own and no order naming one waits until, for an
    /// order to name one (`order_wait_days` after its purchase date), or nil when it is booked
    /// now: on that night or a later one it is booked at `default_storefront`.
    ///
    /// A free trial or a family member's access moves no money, so no storefront decides an
    /// amount: it never waits (it waited, was listed among the sales waiting "to be booked at
    /// default_storefront", and was then found free).
    public func orderWait(of t: TransactionObservation, orderStorefront: (code: String, orderId: String)?, asOf: Day) -> Day? {
        guard config.orderWaitDays > 0, !t.isFreeTrial, t.storefront?.isEmpty ?? true, orderStorefront?.code.isEmpty ?? true else { return nil }
        let until = t.purchaseDay + config.orderWaitDays
        return asOf < until ? until : nil
    }

    /// The date an entry is posted on: its own date, or the first day of the first open month
    /// when its month is closed (then marked late, keeping its original date).
    public func postingDate(for day: Day) -> (date: Day, late: Bool) {
        guard let closed = config.closedThrough, day.month <= closed else { return (day, false) }
        return (closed.next.firstDay, true)
    }

    /// Every rule a sale needs that the rules lack, said in one reason (the product's row, the
    /// storefront rule, the price, the month's FX rate), so that one night's fix posts it (a
    /// README review: the reason named the first alone, and fixing it brought up the next,
    /// one rule a night, without a word in the night's summary).
    func missingRules(_ t: TransactionObservation, storefront code: String) -> String {
        let day = t.purchaseDay
        var missing: [String] = []
        if rules.product(t.productId) == nil { missing.append("no row for product \(t.productId) in rules/products.csv") }
        let sf = rules.storefront(code, on: day)
        if sf == nil { missing.append("no storefront rule for \(code) in force on \(day) in rules/storefronts.csv") }
        let priced = t.isFreeTrial || t.priceMilliunits != nil
        if !priced && rules.price(product: t.productId, storefront: code, on: day) == nil {
            missing.append("no price for \(t.productId) in \(code) in force on \(day) in rules/prices.csv")
        }
        // The month's rate, for a sale that moves money, in its currency when known; unknown
        // (no storefront rule to name it), said as what may be needed too.
        if !t.isFreeTrial, t.priceMilliunits != 0 {
            if let currency = t.currency.map(Currency.isoUppercased) ?? sf?.currency {
                if Currency.exponent(currency) != nil,
                   rules.fxRate(currency: currency, month: day.month, reportingCurrency: config.reportingCurrency) == nil {
                    missing.append("no FX rate for \(currency) in \(day.month) in rules/fx.csv")
                }
            } else {
                missing.append("and its storefront's currency needs an FX rate for \(day.month) in rules/fx.csv, unless it has one or is \(config.reportingCurrency)")
            }
        }
        return missing.isEmpty ? "a rule is missing" : missing.joined(separator: "; ")
    }

    /// Computes the sale of `t` (accounting.md "A sale", steps 1-5).
    ///
    /// - Parameter subscriptionPaidDays: days of paid service the subscription already has
    ///   before this purchase (auto-renewables only; see `SubscriptionTenure`).
    public func sale(of t: TransactionObservation, orderStorefront: (code: String, orderId: String)? = nil,
                     subscriptionPaidDays: Int = 0) -> SaleDecision {
        let day = t.purchaseDay
        let (storefrontCode, storefrontSource) = storefront(of: t, orderStorefront: orderStorefront)
        guard let product = rules.product(t.productId), let sf = rules.storefront(storefrontCode, on: day) else {
            return .missingRule(missingRules(t, storefront: storefrontCode))
        }
        let currency = t.currency.map(Currency.isoUppercased) ?? sf.currency
        guard let exponent = Currency.exponent(currency) else {
            return .missingRule("unknown currency \(currency): no ISO 4217 minor-unit exponent")
        }
        guard Currency.exponent(config.reportingCurrency) != nil else {
            return .missingRule("unknown reporting currency \(config.reportingCurrency)")
        }

        // 1. Gross: the transaction's own price, else the price rule times the quantity.
        let grossMinor: Int64
        let priceSource: String
        var unitPrice: String? = nil
        if t.isFreeTrial {
            grossMinor = 0
            priceSource = "free trial period"
        } else if let milli = t.priceMilliunits {
            grossMinor = Currency.minorUnits(milliunits: milli, exponent: exponent)
            priceSource = "signed price \(milli) milliunits"
        } else {
            guard let price = rules.price(product: t.productId, storefront: storefrontCode, on: day) else {
                return .missingRule(missingRules(t, storefront: storefrontCode))
            }
            guard let unitMinor = Currency.minorUnits(ofMajor: price.price, currency: currency) else {
                return .missingRule("price \(price.price) for \(t.productId) in \(storefrontCode) has more decimals than \(currency) allows")
            }
            // (Checked: a price near the rules' bound in a three-decimal currency times a
            // quantity near the receipts' would pass what 64-bit minor units hold.)
            // Bounded as a signed price is (10 billion units): so that sums of sales fit too.
            let (product, overflow) = unitMinor.multipliedReportingOverflow(by: t.quantity)
            guard !overflow, Int128(product) / pow10(exponent) <= Int128(StoreBounds.maxPriceMilliunits / 1000) else {
                return .missingRule("price \(price.price) \(currency) x \(t.quantity) for \(t.productId) in \(storefrontCode) is more than the ledger's amounts hold")
            }
            grossMinor = product
            unitPrice = price.price.description
            priceSource = "rules/prices.csv \(price.price) \(currency) from \(price.effectiveFrom) x \(t.quantity)"
        }

        // 5 (looked up first so a missing rate leaves nothing half-computed). A gross of zero
        // (a free trial) has nothing to convert: free without the month's rate (it waited for
        // one, counted among the sales waiting, and took it from them once it came).
        let month = day.month
        let monthRate = rules.fxRate(currency: currency, month: month, reportingCurrency: config.reportingCurrency)
        guard let fx = monthRate ?? (grossMinor == 0 ? .one : nil) else {
            return .missingRule(missingRules(t, storefront: storefrontCode))
        }

        // (A rate that would take the sale past what the ledger's amounts hold, in the reporting
        // currency, waits as a missing rule does: the night stopped on it.)
        guard Self.reportingFits(grossMinor, fx: fx, currency: currency, reportingCurrency: config.reportingCurrency) else {
            return .missingRule("\(Currency.format(minor: grossMinor, currency: currency)) \(currency) at the rate \(fx) is more than the ledger's amounts hold in \(config.reportingCurrency) (rules/fx.csv for \(currency) in \(month))")
        }

        // 3. Commission rate.
        let (rate, reason) = commissionRate(product: product, day: day, subscriptionPaidDays: subscriptionPaidDays)
        // 2, 4, 5. Net of tax, commission and proceeds, and the reporting amounts.
        let figures = Self.figures(grossMinor: grossMinor, currency: currency, taxRate: sf.taxRate, taxIncluded: sf.taxIncluded,
                                   commissionRate: rate, fx: fx, reportingCurrency: config.reportingCurrency)
        let applied = AppliedRules(storefront: storefrontCode, storefrontSource: storefrontSource,
                                   storefrontEffectiveFrom: sf.effectiveFrom.description,
                                   taxRate: sf.taxRate.description, taxIncluded: sf.taxIncluded,
                                   priceSource: priceSource, commissionRate: rate.description,
                                   commissionReason: reason, fxRate: monthRate == nil ? "none (nothing to convert)" : fx.description, fxMonth: month.description,
                                   unitPrice: unitPrice)
        if grossMinor == 0 { return .free(applied, figures) }

        let (date, late) = postingDate(for: day)
        let entry = EntryDraft(book: t.book, transactionId: t.transactionId, kind: .sale, date: date, originalDate: day,
                               late: late, productId: t.productId, storefront: storefrontCode, figures: figures,
                               refundPercentage: nil, rules: applied, postings: PostingRule.postings(kind: .sale, figures: figures))
        precondition(entry.isBalanced, "unbalanced sale entry for \(t.transactionId)")
        return .post(entry)
    }

    /// A `PRICE_MISMATCH` message when a signed price differs from the price rule in force and
    /// the transaction carries no offer (the signed price is still what is posted).
    public func priceMismatch(of t: TransactionObservation, entry: EntryDraft) -> String? {
        guard let milli = t.priceMilliunits, !t.hasOffer, !t.isFreeTrial,
              let rule = rules.price(product: t.productId, storefront: entry.storefront, on: t.purchaseDay) else { return nil }
        // A price list in the storefront's currency says nothing about a price in another one:
        // the currencies differing is what is said (the signed price is posted as signed).
        if let listed = rules.storefront(entry.storefront, on: t.purchaseDay)?.currency, listed != entry.figures.currency {
            return "signed price \(milli) milliunits in \(entry.figures.currency), but rules/storefronts.csv gives \(entry.storefront) the currency \(listed): not compared with rules/prices.csv \(rule.price) \(listed) for \(t.productId) on \(t.purchaseDay)"
        }
        guard let unit = Currency.minorUnits(ofMajor: rule.price, currency: entry.figures.currency) else { return nil }
        let expected = unit * t.quantity
        guard expected != entry.figures.grossMinor else { return nil }
        return "signed price \(milli) milliunits (\(Currency.format(minor: entry.figures.grossMinor, currency: entry.figures.currency)) \(entry.figures.currency)) differs from rules/prices.csv \(rule.price) x \(t.quantity) = \(Currency.format(minor: expected, currency: entry.figures.currency)) for \(t.productId) in \(entry.storefront) on \(t.purchaseDay), with no offer"
    }

    /// The commission rate and why (accounting.md step 3).
    public func commissionRate(product: ProductRule, day: Day, subscriptionPaidDays: Int) -> (ExactDecimal, String) {
        if product.type == .autoRenewable && subscriptionPaidDays >= config.subscriptionReducedAfterDays {
            return (config.commissionReduced, "reduced: subscription has \(subscriptionPaidDays) paid days (>= \(config.subscriptionReducedAfterDays))")
        }
        if let range = config.smallBusiness.first(where: { $0.contains(day) }) {
            return (config.commissionReduced, "reduced: small business program \(range.description)")
        }
        if product.type == .autoRenewable {
            return (config.commissionStandard, "standard: subscription has \(subscriptionPaidDays) paid days (< \(config.subscriptionReducedAfterDays))")
        }
        return (config.commissionStandard, "standard")
    }

    /// Steps 2, 4 and 5 of a sale: net of tax, commission, proceeds, and their reporting
    /// amounts, each rounded once, half to even. Shared by posting and `iapledger verify`.
    public static func figures(grossMinor: Int64, currency: String, taxRate: ExactDecimal, taxIncluded: Bool,
                               commissionRate rate: ExactDecimal, fx: ExactDecimal, reportingCurrency: String) -> SaleFigures {
        let exponent = Currency.exponent(currency) ?? 2
        let reportingExponent = Currency.exponent(reportingCurrency) ?? 2
        let netMinor = taxIncluded
            ? roundHalfEven(Int128(grossMinor) * taxRate.denominator, taxRate.denominator + Int128(taxRate.mantissa))
            : grossMinor
        let commissionMinor = roundHalfEven(Int128(netMinor) * Int128(rate.mantissa), rate.denominator)
        let grossR = toReporting(grossMinor, fx: fx, exponent: exponent, reportingExponent: reportingExponent)
        let netR = toReporting(netMinor, fx: fx, exponent: exponent, reportingExponent: reportingExponent)
        let commissionR = toReporting(commissionMinor, fx: fx, exponent: exponent, reportingExponent: reportingExponent)
        return SaleFigures(currency: currency, grossMinor: grossMinor, taxMinor: grossMinor - netMinor, netMinor: netMinor,
                           commissionMinor: commissionMinor, proceedsMinor: netMinor - commissionMinor,
                           reportingCurrency: reportingCurrency, grossReportingMinor: grossR, netReportingMinor: netR,
                           commissionReportingMinor: commissionR, proceedsReportingMinor: netR - commissionR)
    }

    /// Whether `grossMinor` of `currency` at rate `fx` stays within the bound of one sale's
    /// amounts (`StoreBounds.maxPriceMilliunits` minor units) in the reporting currency.
    public static func reportingFits(_ grossMinor: Int64, fx: ExactDecimal, currency: String, reportingCurrency: String) -> Bool {
        let exponent = Currency.exponent(currency) ?? 2, reportingExponent = Currency.exponent(reportingCurrency) ?? 2
        let (product, overflow) = Int128(grossMinor.magnitude).multipliedReportingOverflow(by: Int128(fx.mantissa))
        guard !overflow else { return false }
        let (scaled, overflow2) = product.multipliedReportingOverflow(by: pow10(reportingExponent))
        guard !overflow2 else { return false }
        return scaled / (fx.denominator * pow10(exponent)) <= Int128(StoreBounds.maxPriceMilliunits)
    }

    /// `round(amount * r * 10^(e_rep - e_cur))`, computed as one exact fraction.
    static func toReporting(_ minor: Int64, fx: ExactDecimal, exponent: Int, reportingExponent: Int) -> Int64 {
        roundHalfEven(Int128(minor) * Int128(fx.mantissa) * pow10(reportingExponent),
                      fx.denominator * pow10(exponent))
    }

    /// The refund of a posted sale, dated `day` (accounting.md "Refunds"): full when
    /// `percentage` is nil or 100000, else prorated with each figure rounded once.
    public func refund(of sale: EntryDraft, on day: Day, percentage: Int64?) -> EntryDraft {
        precondition(sale.kind == .sale, "a refund reverses a sale")
        let s = sale.figures
        let p = percentage ?? 100_000
        func part(_ v: Int64) -> Int64 { p == 100_000 ? v : roundHalfEven(Int128(v) * Int128(p), 100_000) }
        let n = part(s.netMinor), c = part(s.commissionMinor)
        let nr = part(s.netReportingMinor), cr = part(s.commissionReportingMinor)
        let figures = SaleFigures(currency: s.currency, grossMinor: part(s.grossMinor), taxMinor: part(s.grossMinor) - n,
                                  netMinor: n, commissionMinor: c, proceedsMinor: n - c,
                                  reportingCurrency: s.reportingCurrency, grossReportingMinor: part(s.grossReportingMinor),
                                  netReportingMinor: nr,
                                  commissionReportingMinor: cr, proceedsReportingMinor: nr - cr)
        let (date, late) = postingDate(for: day)
        let entry = EntryDraft(book: sale.book, transactionId: sale.transactionId, kind: .refund, date: date,
                               originalDate: day, late: late, productId: sale.productId, storefront: sale.storefront,
                               figures: figures, refundPercentage: p, rules: sale.rules,
                               postings: PostingRule.postings(kind: .refund, figures: figures))
        precondition(entry.isBalanced, "unbalanced refund entry for \(sale.transactionId)")
        return entry
    }

    /// `REFUND_REVERSED`: the exact negation of the refund, dated `day`.
    public func reversal(of refund: EntryDraft, on day: Day) -> EntryDraft {
        precondition(refund.kind == .refund, "a reversal negates a refund")
        var e = refund
        let (date, late) = postingDate(for: day)
        e.kind = .refundReversal
        e.date = date
        e.originalDate = day
        e.late = late
        e.postings = PostingRule.postings(kind: .refundReversal, figures: refund.figures)
        precondition(e.isBalanced, "unbalanced reversal entry for \(refund.transactionId)")
        return e
    }
}
