import LedgerCore
import LedgerPost
import LedgerRead
import LedgerStore

/// The posted sales the rules now in force would book otherwise, checked on the first night
/// after a config or rules file changed. Entries never change: each such sale of the
/// production book is an open `RULES_CHANGED` finding (on Run Info's open findings, in
/// `trace`), saying what differs and what today's rules would book, for finance to book a
/// correction where one is due and dismiss it (`iapledger dismiss --finding`); the night's
/// summary adds them up by change, with the difference in the reporting currency.
///
/// Each sale is compared with the rules as they are now, from what its entry recorded (its
/// storefront, the paid days of its subscription, the unit price the rules gave it): so an
/// edit and its undoing leave nothing open (the sale posted between the two, by the mistaken
/// value, is what stays), a rule dated after the last night behind a sale already posted for
/// that date counts, and so does a product's type (the commission of a subscription). Values
/// are compared as numbers (`0.190` is `0.19`), and a row that changes nothing booked (a
/// storefront row repeated from a later date) concerns no sale. A finding whose sale the
/// rules book as posted again is resolved.
enum RulesChanges {
    static let code = "RULES_CHANGED"

    /// What one posted sale recorded and what the rules now give instead.
    struct Change: Hashable, Comparable {
        var file: String
        var key: String
        var was: String
        var now: String
        var description: String { "\(file): \(key.isEmpty ? "" : key + " ")\(was) -> \(now)" }
        static func < (a: Change, b: Change) -> Bool { (a.file, a.key, a.was, a.now) < (b.file, b.key, b.was, b.now) }
    }

    /// A posted sale the rules now book otherwise: what differs, and the figures they give
    /// (nil when they cannot book it: a rule it needs is gone).
    struct Restated {
        var changes: [Change]
        var figures: SaleFigures?
    }

    struct Outcome {
        var runId: Int64
        var lines: [String]
        var opened: Int
        var resolved: Int
    }

    /// Checks every posted production sale against the rules now in force when a config or
    /// rules file changed since the last night (a stage of the night, timed as one); nil when
    /// none changed.
    static func sinceLastNight(_ w: LedgerWriter, runId: Int64, rules: Rules, config: WorkspaceConfig,
                               progress: RunProgress = .silent) throws -> Outcome? {
        guard let last = try w.lastFinishedRun() else { return nil }
        var current: [String: String] = [:]
        if let sha = config.sourceSHA256 { current["iapledger.toml"] = sha }
        for (name, sha) in rules.sourceSHA256 { current["rules/" + name] = sha }
        let files = try w.runFiles(last.id)
        let changed = files.filter { f in current[f.path].map { $0 != f.sha256 } ?? false }
        guard !changed.isEmpty else { return nil }
        // The config alone changed, in nothing a sale is priced by (closed_through each month,
        // the journal cap, the reconciliation scope): nothing to check.
        if changed.map(\.path) == ["iapledger.toml"], case .kept(_, let then) = try Audit.RunRules.load(files, reader: w),
           samePricing(then, config) {
            return nil
        }
        return try progress.stage("check sales against changed rules", total: try w.postedSales(book: .production), unit: "sales") { tick in
            try check(w, runId: runId, lastRun: last.id, rules: rules, config: config, tick: tick)
        }
    }

    static func check(_ w: LedgerWriter, runId: Int64, lastRun: Int64, rules: Rules, config: WorkspaceConfig,
                      tick: RunProgress.Ticker) throws -> Outcome? {
        // A sale of a closed month is corrected in an open one: the finding says so.
        let closedThrough = try w.latestClose()?.month
        // The transactions with a finding of an earlier change; what each says is read only
        // for those (a finding that says the same as tonight's check, open or dismissed once
        // booked, is not said again).
        let earlier = try w.transactionsWithFinding(code: code)
        // Sales refunded in full (refunds less reversals): booked back at their posted amounts,
        // so nothing is left to correct; and the share refunded of the others.
        let refunded = try w.refundedShares(book: .production)
        // The subscription's paid days: those the sale recorded, unless it recorded none (a
        // sale in a Small Business period) or its night counted them with another grace period
        // (the config it posted by, as its run kept it): then counted again from the chain.
        var postedBy = Audit.RunRules()
        var chains = NightlyRun.SubscriptionChains()
        let poster = Poster(config: config, rules: rules)
        func paidDays(_ e: EntryDraft, runId: Int64) throws -> Int? {
            guard rules.product(e.productId)?.type == .autoRenewable else { return nil }
            var recount = Audit.recordedPaidDays(inReason: e.rules.commissionReason) == nil
            if !recount, case .kept(_, let then) = try postedBy.rules(ofRun: runId, reader: w), then.subscriptionGraceDays != config.subscriptionGraceDays {
                recount = true
            }
            guard recount, let t = try w.transaction(e.transactionId)?.observation else { return nil }
            return try NightlyRun.subscriptionPaidDays(of: t, writer: w, poster: poster, chains: &chains)
        }

        // A rules-priced sale whose currency is not its storefront's now: the transaction may
        // have named its own (read only then).
        func ownCurrency(_ e: EntryDraft) throws -> String? {
            guard e.rules.unitPrice != nil, let sf = rules.storefront(e.rules.storefront, on: e.originalDate), sf.currency != e.figures.currency
            else { return nil }
            return try w.transaction(e.transactionId)?.observation.currency.map(Currency.isoUppercased)
        }

        var groups: [[Change]: (count: Int, net: Int64, commission: Int64, proceeds: Int64, unbookable: Int, closed: Int)] = [:]
        var opened = 0, resolved = 0, reversals = 0, reversalsOpen = 0
        // Every finding open after tonight, new or not: what is left to book in all.
        var open = (count: 0, net: Int64(0), commission: Int64(0), proceeds: Int64(0))
        try w.forEachPostedSale(book: .production) { e, postedByRun in
            tick.advance()
            let known = earlier.contains(e.transactionId) ? try w.transactionFinding(code: code, transactionId: e.transactionId) : nil
            let share = refunded[e.transactionId] ?? 0
            // The month the entry is in (a late one's is its posting date's, open when it posted).
            let closed = closedThrough.map { e.date.month <= $0 } ?? false
            let restatedNow = share < 100_000 ? try restated(e, rules: rules, config: config, paidDays: try paidDays(e, runId: postedByRun),
                                                             transactionCurrency: try ownCurrency(e)) : nil
            // Refunded in part, and what is left of it after the refund the rules would book as
            // posted, to the minor unit in both currencies: nothing to correct, as for a sale the
            // rules book as posted (a finding would ask finance to book 0.00).
            let leftAsPosted: Bool = {
                guard share > 0, let f = restatedNow?.figures, f.currency == e.figures.currency else { return false }
                let left = leftToCorrect(net: (e.figures.netMinor, f.netMinor), commission: (e.figures.commissionMinor, f.commissionMinor), refundedShare: share)
                let leftR = leftToCorrect(net: (e.figures.netReportingMinor, f.netReportingMinor),
                                          commission: (e.figures.commissionReportingMinor, f.commissionReportingMinor), refundedShare: share)
                return left == (0, 0, 0) && leftR == (0, 0, 0)
            }()
            let percent = ExactDecimal(mantissa: share, scale: 3)
            guard let r = restatedNow, !leftAsPosted else {
                if let known, known.open, known.message.hasPrefix(reversalPrefix) {
                    reversalsOpen += 1   // still to reverse
                } else if let known, known.open, let booked = bookedCorrection(known) {
                    // Open again after a correction was booked, and now as posted (or refunded
                    // in full at its posted amounts): that correction is to be reversed.
                    try w.openFinding(code: code, transactionId: e.transactionId, recordId: nil,
                                      message: reversal(e, dismissedAs: booked.text, note: booked.note, closed: closed, refunded: share >= 100_000,
                                                        leftAsPostedAfter: leftAsPosted ? percent : nil), runId: runId)
                    reversals += 1
                    reversalsOpen += 1
                } else if let known, known.open {
                    try w.resolveFinding(code: code, transactionId: e.transactionId, runId: runId,
                                         saying: "resolved: " + (share >= 100_000 ? "refunded in full since (its refund booked at the posted amounts), nothing is left to correct"
                                                                 : leftAsPosted ? "refunded \(percent)% at its posted amounts, and what is left of it the rules book as posted: nothing to correct"
                                                                 : "the rules book it as posted again, no correction is due") + "; it said: " + known.message)
                    resolved += 1
                } else if let known, known.dismissed, !known.message.hasPrefix(reversalPrefix) {
                    // A correction was booked for it (dismissed), and the rules book it as
                    // posted again (or it was refunded in full since, at its posted amounts):
                    // that correction is to be reversed.
                    try w.openFinding(code: code, transactionId: e.transactionId, recordId: nil,
                                      message: reversal(e, dismissedAs: known.message, note: known.note, closed: closed, refunded: share >= 100_000,
                                                        leftAsPostedAfter: leftAsPosted ? percent : nil), runId: runId)
                    reversals += 1
                    reversalsOpen += 1
                }
                return
            }
            let base = message(e, r, refundedShare: share, closed: closed)
            // The finding as versions before this one worded it: a late sale's (its original
            // date, and closed by its original month), a sale refunded in part (its difference,
            // "the rest is to correct"), or both: the same finding, not a new one.
            let wordedLate = e.late && e.date != e.originalDate
            let closedBefore = closedThrough.map { e.originalDate.month <= $0 } ?? false
            let earlierBases = [(true, false), (false, true), (true, true)]
                .filter { late, refund in (!late || wordedLate) && (!refund || share > 0) }
                .map { late, refund in message(e, r, refundedShare: share, closed: late ? closedBefore : closed, wordedBefore: late, refundWordedBefore: refund) }
            // The correction booked for exactly this (dismissed as it reads now): nothing new.
            if let known, known.dismissed, ([base] + earlierBases).contains(where: { known.message == $0 || known.message.hasPrefix($0 + " ") }) { return }
            // A correction booked and not reversed (a dismissed finding that said something
            // else, an open reversal, an open finding that carries one): set against this one.
            let booked = known.flatMap(bookedCorrection)
            func withBooking(_ message: String) -> String { booked.map { message + " " + followsBooking(note: $0.note, dismissedAs: $0.text) } ?? message }
            let said = withBooking(base)
            let delta = r.figures.map { f in
                Self.leftToCorrect(net: (e.figures.netReportingMinor, f.netReportingMinor),
                                   commission: (e.figures.commissionReportingMinor, f.commissionReportingMinor), refundedShare: share)
            }
            if let known, known.open, known.message == said || earlierBases.map(withBooking).contains(known.message) {
                if let delta { open.count += 1; open.net += delta.0; open.commission += delta.1; open.proceeds += delta.2 }
                return
            }
            try w.openFinding(code: code, transactionId: e.transactionId, recordId: nil, message: said, runId: runId)
            opened += 1
            var g = groups[r.changes] ?? (0, 0, 0, 0, 0, 0)
            g.count += 1
            if closed { g.closed += 1 }
            if let delta {
                g.net += delta.0; g.commission += delta.1; g.proceeds += delta.2
                open.count += 1; open.net += delta.0; open.commission += delta.1; open.proceeds += delta.2
            } else {
                g.unbookable += 1
            }
            groups[r.changes] = g
        }
        var lines: [String] = []
        let reporting = config.reportingCurrency
        func amount(_ minor: Int64) -> String { (minor > 0 ? "+" : "") + Currency.format(minor: minor, currency: reporting) }
        let shown = 20
        let sorted = groups.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) })
        for (changes, g) in sorted.prefix(shown) {
            let booked = g.count - g.unbookable
            var line = changes.map(\.description).joined(separator: "; ") + ": \(g.count) sale\(g.count == 1 ? "" : "s") posted"
                + (g.closed > 0 ? " (\(g.closed) of them in months closed: corrected in an open one)" : "")
            if booked > 0 {
                line += ", today's rules would book net \(amount(g.net)), commission \(amount(g.commission)), proceeds \(amount(g.proceeds)) \(reporting)"
                    + (g.unbookable > 0 ? " (\(g.unbookable) of them they cannot book)" : "")
            } else {
                line += ", which today's rules cannot book"
            }
            lines.append(line)
        }
        if sorted.count > shown {
            let more = sorted.dropFirst(shown).reduce(0) { $0 + $1.value.count }
            lines.append("... and \(sorted.count - shown) more changes (\(more) sales): the RULES_CHANGED findings name each sale")
        }
        if reversals > 0 {
            lines.append("\(reversals) sale\(reversals == 1 ? "" : "s") whose RULES_CHANGED finding was dismissed (a correction booked) the rules book as posted again (or refunded since: in full, or in part with nothing left to correct): reverse \(reversals == 1 ? "that correction" : "those corrections") (a finding each, open again)")
        }
        // What is open in all, said with the night's news when earlier findings are open too.
        if (open.count > 0 && open.count != groups.values.reduce(0, { $0 + $1.count - $1.unbookable }) || reversalsOpen > reversals)
            && (!groups.isEmpty || reversals > 0 || resolved > 0) {
            let toBook = "\(open.count) RULES_CHANGED finding\(open.count == 1 ? "" : "s") to book, today's rules would book net \(amount(open.net)), commission \(amount(open.commission)), proceeds \(amount(open.proceeds)) \(reporting)"
            let toReverse = "\(reversalsOpen) correction\(reversalsOpen == 1 ? "" : "s") to reverse"
            lines.append("open in all after tonight: "
                + (open.count == 0 ? toReverse : reversalsOpen == 0 ? toBook : toBook + ", and " + toReverse)
                + " (`iapledger findings --code RULES_CHANGED` lists them)")
        }
        if resolved > 0 {
            lines.append("\(resolved) sale\(resolved == 1 ? "" : "s") the rules book as posted again (or refunded since: in full, or in part with nothing left to correct): \(resolved == 1 ? "its" : "their") RULES_CHANGED finding\(resolved == 1 ? "" : "s") resolved")
        }
        return lines.isEmpty ? nil : Outcome(runId: lastRun, lines: lines, opened: opened + reversals, resolved: resolved)
    }

    /// Whether two configs price a sale alike (what `Poster` reads of them).
    static func samePricing(_ a: WorkspaceConfig, _ b: WorkspaceConfig) -> Bool {
        a.reportingCurrency == b.reportingCurrency && Currency.isoUppercased(a.defaultStorefront) == Currency.isoUppercased(b.defaultStorefront)
            && a.commissionStandard == b.commissionStandard && a.commissionReduced == b.commissionReduced
            && a.smallBusiness == b.smallBusiness && a.subscriptionReducedAfterDays == b.subscriptionReducedAfterDays
            && a.subscriptionGraceDays == b.subscriptionGraceDays
    }

    /// The finding's message: what differs, and what each set of rules books.
    static let reversalPrefix = "reverse the correction: "

    /// What is left to correct of a sale (net, commission; posted and as today's rules book it)
    /// once `refundedShare` of it was refunded: what each set of rules leaves after its refund
    /// (the amount less the refund's `round(amount * p / 100000)`, as accounting.md rounds a
    /// prorated refund), the one less the other; proceeds are net less commission (P = N - C,
    /// as every figure is). The share of the difference, rounded, was a cent out where the two
    /// refunds round apart (commission 89 posted, 46 now, 40% refunded: 53 and 28 are left, so
    /// -25, not 60% of -43, -26).
    static func leftToCorrect(net: (posted: Int64, now: Int64), commission: (posted: Int64, now: Int64),
                              refundedShare share: Int64) -> (net: Int64, commission: Int64, proceeds: Int64) {
        func kept(_ x: Int64) -> Int64 { share == 0 ? x : x - roundHalfEven(Int128(x) * Int128(share), 100_000) }
        let n = kept(net.now) - kept(net.posted), c = kept(commission.now) - kept(commission.posted)
        return (n, c, n - c)
    }

    /// - Parameter wordedBefore: as versions before 2026-11-26 worded it for a late sale (its
    ///   original date as the day posted, its original month as the one closed).
    /// - Parameter refundWordedBefore: as versions before 2026-11-27 worded it for a sale
    ///   refunded in part (the sale's difference, "the rest is to correct", not what is left).
    static func message(_ e: EntryDraft, _ r: Restated, refundedShare share: Int64 = 0, closed: Bool = false, wordedBefore: Bool = false,
                        refundWordedBefore: Bool = false) -> String {
        let f0 = e.figures
        func money(_ minor: Int64, _ currency: String, signed: Bool = false) -> String {
            (signed && minor > 0 ? "+" : "") + Currency.format(minor: minor, currency: currency) + " " + currency
        }
        func said(_ f: SaleFigures) -> String {
            "net \(money(f.netMinor, f.currency)) (\(money(f.netReportingMinor, f.reportingCurrency))), "
                + "commission \(money(f.commissionMinor, f.currency)) (\(money(f.commissionReportingMinor, f.reportingCurrency)))"
        }
        let what = r.changes.map(\.description).joined(separator: "; ")
        let now = r.figures.map { "today's rules would book \(said($0))" } ?? "today's rules cannot book it"
        // The correction, where both sets book in one currency: the difference of each amount.
        let difference = r.figures.flatMap { f -> String? in
            guard f.currency == f0.currency else { return nil }
            return "; the difference: net \(money(f.netMinor - f0.netMinor, f.currency, signed: true)) (\(money(f.netReportingMinor - f0.netReportingMinor, f.reportingCurrency, signed: true))), "
                + "commission \(money(f.commissionMinor - f0.commissionMinor, f.currency, signed: true)) (\(money(f.commissionReportingMinor - f0.commissionReportingMinor, f.reportingCurrency, signed: true))), "
                + "proceeds \(money(f.proceedsMinor - f0.proceedsMinor, f.currency, signed: true)) (\(money(f.proceedsReportingMinor - f0.proceedsReportingMinor, f.reportingCurrency, signed: true)))"
        } ?? ""
        // A sale refunded in part: its refund was booked at the posted amounts, so what is to
        // correct is what today's rules leave after their refund less what the posted ones left
        // (the summary's figure), which the sale's difference less that share can miss by a
        // cent where the two refunds round apart.
        let percent = ExactDecimal(mantissa: share, scale: 3)
        let refunded: String
        if share == 0 {
            refunded = ""
        } else if refundWordedBefore || difference.isEmpty {
            refunded = " (refunded \(percent)% at the posted amounts: the rest is to correct)"
        } else if let f = r.figures {
            let left = leftToCorrect(net: (f0.netMinor, f.netMinor), commission: (f0.commissionMinor, f.commissionMinor), refundedShare: share)
            let leftR = leftToCorrect(net: (f0.netReportingMinor, f.netReportingMinor),
                                      commission: (f0.commissionReportingMinor, f.commissionReportingMinor), refundedShare: share)
            refunded = "; refunded \(percent)% at the posted amounts, so what is left to correct (today's rules after their refund less the posted after theirs): "
                + "net \(money(left.net, f.currency, signed: true)) (\(money(leftR.net, f.reportingCurrency, signed: true))), "
                + "commission \(money(left.commission, f.currency, signed: true)) (\(money(leftR.commission, f.reportingCurrency, signed: true))), "
                + "proceeds \(money(left.proceeds, f.currency, signed: true)) (\(money(leftR.proceeds, f.reportingCurrency, signed: true)))"
        } else {
            refunded = ""
        }
        let month = closed ? " (its month, \((wordedBefore ? e.originalDate : e.date).month), is closed: correct it in an open month)" : ""
        return "posted \(wordedBefore ? e.originalDate.description : postedOn(e)) by rules the files now give otherwise: \(what); posted at \(said(f0)), \(now)\(difference)\(refunded)\(month): book a correction where one is due (entries never change)"
    }

    /// What a finding adds when a correction was booked for an earlier finding of the sale.
    static let bookedMarker = "A correction was booked for its earlier finding"
    static let bookedSaid = ": set it against this one (reverse it and book this difference). The earlier finding said: "
    static let reversalSaid = ". The finding said: "

    /// The correction booked for a sale and not reversed, as its finding `known` tells it: a
    /// finding dismissed (booked as it read), an open reversal or an open finding that carries
    /// one (both quote it, with its dismissal's note); nil when none stands (a reversal itself
    /// dismissed: booked and reversed).
    static func bookedCorrection(_ known: (message: String, open: Bool, dismissed: Bool, note: String?)) -> (note: String?, text: String)? {
        let m = known.message
        if known.dismissed { return m.hasPrefix(reversalPrefix) ? nil : (known.note, m) }
        guard known.open else { return nil }
        if m.hasPrefix(reversalPrefix) {
            let note = between(m, "was dismissed (", "), a correction booked")
            return (note, m.range(of: reversalSaid).map { String(m[$0.upperBound...]) } ?? m)
        }
        guard let marker = m.range(of: bookedMarker) else { return nil }
        let tail = m[marker.upperBound...]
        let note = tail.hasPrefix(" (") ? between(String(tail), " (", bookedSaid) : nil
        return (note, tail.range(of: bookedSaid).map { String(tail[$0.upperBound...]) } ?? String(tail))
    }

    static func between(_ s: String, _ a: String, _ b: String) -> String? {
        guard let r = s.range(of: a), let e = s.range(of: b, range: r.upperBound..<s.endIndex) else { return nil }
        return String(s[r.upperBound..<e.lowerBound])
    }

    static func followsBooking(note: String?, dismissedAs message: String) -> String {
        bookedMarker + (note.map { " (\($0))" } ?? "") + bookedSaid + message
    }

    /// The finding of a sale whose earlier finding was dismissed (its correction booked) and
    /// that the rules book as posted again.
    static func reversal(_ e: EntryDraft, dismissedAs message: String, note: String?, closed: Bool, refunded: Bool = false,
                         leftAsPostedAfter percent: ExactDecimal? = nil) -> String {
        reversalPrefix + "posted \(postedOn(e)), "
            + (refunded ? "it was refunded in full since, at its posted amounts"
               : percent.map { "it was refunded \($0)% at its posted amounts, and what is left of it the rules book as posted" }
               ?? "it is booked again as the rules now give it")
            + "; its earlier RULES_CHANGED finding was dismissed"
            + (note.map { " (\($0))" } ?? "") + ", a correction booked for it, which is to be reversed"
            + (closed ? " in an open month (its month, \(e.date.month), is closed)" : "") + reversalSaid + message
    }

    /// The day a sale is posted on: its date, and for one posted late, the date it keeps
    /// ("2026-08-01 (late; original date 2026-07-31)", as `trace` says it).
    static func postedOn(_ e: EntryDraft) -> String {
        e.late && e.date != e.originalDate ? "\(e.date) (late; original date \(e.originalDate))" : "\(e.date)"
    }

    /// Nil when the rules now in force book the posted sale `e` as it was posted (the same
    /// amounts); otherwise what differs and what they give. Its storefront is the one it
    /// recorded (unless that was `default_storefront`, which is the config's now), its paid
    /// days those it recorded, its quantity its gross over the unit price the rules gave it.
    /// - Parameter transactionCurrency: the currency the transaction named itself, if any (a
    ///   rules-priced sale is priced in it, not in its storefront's).
    static func restated(_ e: EntryDraft, rules: Rules, config: WorkspaceConfig, paidDays: Int? = nil,
                         transactionCurrency: String? = nil) -> Restated? {
        let a = e.rules, day = e.originalDate, old = e.figures
        var changes: [Change] = []
        var bookable = true
        var code = a.storefront
        if a.storefrontSource == "default_storefront" && Currency.isoUppercased(config.defaultStorefront) != Currency.isoUppercased(a.storefront) {
            code = config.defaultStorefront
            changes.append(Change(file: "iapledger.toml", key: "default_storefront", was: a.storefront, now: code))
        }
        let sf = rules.storefront(code, on: day)
        func taxText(_ rate: String, _ included: Bool) -> String { "tax \(rate) \(included ? "included" : "added")" }
        let storefrontKey = code == a.storefront ? code : "\(a.storefront) -> \(code)"
        if let sf {
            if ExactDecimal(a.taxRate).map({ $0 != sf.taxRate }) ?? true || sf.taxIncluded != a.taxIncluded {
                changes.append(Change(file: "rules/storefronts.csv", key: storefrontKey, was: taxText(a.taxRate, a.taxIncluded),
                                      now: taxText(sf.taxRate.description, sf.taxIncluded)))
            }
        } else {
            changes.append(Change(file: "rules/storefronts.csv", key: storefrontKey, was: taxText(a.taxRate, a.taxIncluded), now: "(no row)"))
            bookable = false
        }

        // The gross: the rules' unit price times the quantity, or what the transaction paid.
        var gross = old.grossMinor, currency = old.currency
        if let unitText = a.unitPrice, let unit = ExactDecimal(unitText), let sf {
            let price = rules.price(product: e.productId, storefront: code, on: day)
            let oldUnitMinor = Currency.minorUnits(ofMajor: unit, currency: old.currency) ?? 0
            // The currency it is priced in: the transaction's own when it named one (as posting
            // takes it), else the storefront's.
            let priced = transactionCurrency ?? sf.currency
            let key = code == a.storefront ? "\(e.productId) in \(code)" : "\(e.productId) in \(a.storefront) -> \(code)"
            if let price, price.price != unit || code != a.storefront {
                changes.append(Change(file: "rules/prices.csv", key: key, was: "\(unitText) \(old.currency)", now: "\(price.price) \(priced)"))
            } else if price != nil, priced != old.currency {
                changes.append(Change(file: "rules/storefronts.csv", key: "\(code) currency", was: old.currency, now: priced))
            } else if price == nil {
                changes.append(Change(file: "rules/prices.csv", key: key, was: "\(unitText) \(old.currency)", now: "(no price)"))
            }
            if let price, oldUnitMinor > 0, let newUnit = Currency.minorUnits(ofMajor: price.price, currency: priced),
               case let (g, overflow) = newUnit.multipliedReportingOverflow(by: old.grossMinor / oldUnitMinor), !overflow {
                gross = g
                currency = priced
            } else if price?.price != unit || priced != old.currency {
                bookable = false
            }
        }

        let rate = rules.fxRate(currency: currency, month: day.month, reportingCurrency: config.reportingCurrency)
        if currency == old.currency, let recorded = ExactDecimal(a.fxRate) {
            if rate.map({ $0 != recorded }) ?? true {
                changes.append(Change(file: "rules/fx.csv", key: "\(currency) \(day.month)", was: a.fxRate, now: rate.map(\.description) ?? "(no rate)"))
            }
        } else if rate == nil {
            changes.append(Change(file: "rules/fx.csv", key: "\(currency) \(day.month)", was: "(none)", now: "(no rate)"))
        }
        if rate == nil { bookable = false }

        var commission: ExactDecimal? = nil
        if let product = rules.product(e.productId) {
            let (c, reason) = Poster(config: config, rules: rules).commissionRate(product: product, day: day, subscriptionPaidDays: paidDays ?? Audit.paidDays(inReason: a.commissionReason))
            commission = c
            if ExactDecimal(a.commissionRate).map({ $0 != c }) ?? true {
                changes.append(Change(file: "commission rate", key: "",
                                      was: "\(a.commissionRate) (\(reasonKind(a.commissionReason)))", now: "\(c) (\(reasonKind(reason)))"))
            }
        } else {
            changes.append(Change(file: "rules/products.csv", key: e.productId, was: "a product", now: "(no row)"))
            bookable = false
        }

        if let rate, !Poster.reportingFits(gross, fx: rate, currency: currency, reportingCurrency: config.reportingCurrency) { bookable = false }
        guard bookable, let sf, let rate, let commission else {
            return changes.isEmpty ? nil : Restated(changes: changes, figures: nil)
        }
        let figures = Poster.figures(grossMinor: gross, currency: currency, taxRate: sf.taxRate, taxIncluded: sf.taxIncluded,
                                     commissionRate: commission, fx: rate, reportingCurrency: config.reportingCurrency)
        let same = figures.currency == old.currency && figures.grossMinor == old.grossMinor && figures.netMinor == old.netMinor
            && figures.commissionMinor == old.commissionMinor && figures.proceedsMinor == old.proceedsMinor
            && figures.netReportingMinor == old.netReportingMinor && figures.commissionReportingMinor == old.commissionReportingMinor
            && figures.proceedsReportingMinor == old.proceedsReportingMinor
        // Rules written otherwise that book the same amounts concern no correction.
        guard !same, !changes.isEmpty else { return nil }
        return Restated(changes: changes, figures: figures)
    }

    /// A commission reason without what varies sale by sale (a subscription's paid days), so
    /// that sales changed alike add up under one change.
    static func reasonKind(_ reason: String) -> String {
        if reason.hasPrefix("reduced: small business program") { return String(reason.dropFirst("reduced: ".count)) }
        if reason.contains("subscription has") { return (reason.hasPrefix("reduced") ? "reduced" : "standard") + ": subscription's paid days" }
        return reason
    }
}
