import LedgerCore
import LedgerRead
import LedgerStore

/// What changed in the config and rules files since the last night, for the days that night
/// had posted through: a rate, tax or price of days already posted. Entries are never
/// changed, so the sales posted by the earlier rules keep them; the night says so, with how
/// many sales each change concerns, for finance to book a correction where one is due.
///
/// Values are compared as numbers (`0.190` is `0.19`), and a change that concerns no posted
/// sale is not said: a rule added where none was in force (the way to clear a `MISSING_RULE`)
/// priced nothing yet. The counts come from one pass over the sales per kind of rule.
enum RulesChanges {
    /// The lines to say, or nil when nothing posted is concerned (no earlier night, no file
    /// changed, or only rows of days after the last night's as-of date).
    static func sinceLastNight(_ r: LedgerReader, rules: Rules, config: WorkspaceConfig) throws -> (runId: Int64, lines: [String])? {
        guard let last = try r.lastFinishedRun() else { return nil }
        var current: [String: String] = [:]
        if let sha = config.sourceSHA256 { current["iapledger.toml"] = sha }
        for (name, sha) in rules.sourceSHA256 { current["rules/" + name] = sha }
        let files = try r.runFiles(last.id)
        let changed = files.filter { f in current[f.path].map { $0 != f.sha256 } ?? false }
        guard !changed.isEmpty else { return nil }
        guard case .kept(let oldRules, let oldConfig) = try Audit.RunRules.load(files, reader: r) else {
            return (last.id, changed.map { "\($0.path): changed (run \(last.id) kept no copy of it, so what changed cannot be said)" })
        }
        let through = last.asOf
        var lines: [String] = []
        let paths = Set(changed.map { $0.path })
        func count(_ n: Int) -> String { "\(n) sale\(n == 1 ? "" : "s") posted" }
        /// Sales dated from `from` through `through` among counts by day.
        func sum(_ byDay: [Day: Int]?, from: Day, to: Day = through) -> Int {
            (byDay ?? [:]).reduce(0) { $0 + ($1.key >= from && $1.key <= to ? $1.value : 0) }
        }
        // The sales by storefront and day, read once (storefronts and the config both need them).
        var byStorefront: [String: [Day: Int]]? = nil
        func salesByStorefront() throws -> [String: [Day: Int]] {
            if byStorefront == nil { byStorefront = try r.salesPostedByDay(pricedByRules: false) }
            return byStorefront!
        }

        if paths.contains("rules/fx.csv") {
            var changes: [(currency: String, month: Month, a: ExactDecimal?, b: ExactDecimal?)] = []
            for currency in Set(oldRules.fx.keys).union(rules.fx.keys).sorted() {
                let months = Set((oldRules.fx[currency] ?? [:]).keys).union((rules.fx[currency] ?? [:]).keys)
                for month in months.sorted() where month.firstDay <= through {
                    let a = oldRules.fx[currency]?[month], b = rules.fx[currency]?[month]
                    if a != b { changes.append((currency, month, a, b)) }
                }
            }
            if !changes.isEmpty {
                let counts = try r.salesPostedByCurrencyAndMonth()
                for c in changes {
                    let n = counts["\(c.currency) \(c.month)"] ?? 0
                    guard n > 0 else { continue }
                    lines.append("rules/fx.csv: \(c.currency) \(c.month) \(c.a.map { "\($0)" } ?? "(none)") -> \(c.b.map { "\($0)" } ?? "(none)"): \(count(n)) at the rate before")
                }
            }
        }
        if paths.contains("rules/storefronts.csv") {
            func same(_ x: StorefrontRule, _ y: StorefrontRule) -> Bool {
                x.currency == y.currency && x.taxRate == y.taxRate && x.taxIncluded == y.taxIncluded
            }
            var changes: [(String, Span<StorefrontRule>)] = []
            for code in Set(oldRules.storefronts.keys).union(rules.storefronts.keys).sorted() {
                let spans = differingSpans(oldRules.storefronts[code] ?? [], rules.storefronts[code] ?? [], through: through, \StorefrontRule.effectiveFrom, same)
                changes += spans.map { (code, $0) }
            }
            if !changes.isEmpty {
                let counts = try salesByStorefront()
                func says(_ s: StorefrontRule?) -> String { s.map { "\($0.currency), tax \($0.taxRate) \($0.taxIncluded ? "included" : "added")" } ?? "(none)" }
                for (code, span) in changes {
                    let n = sum(counts[code], from: span.from, to: span.to)
                    guard n > 0 else { continue }
                    lines.append("rules/storefronts.csv: \(code) \(span.from)..\(span.to): \(says(span.old)) -> \(says(span.new)): \(count(n)) by the rows before")
                }
            }
        }
        if paths.contains("rules/prices.csv") {
            var changes: [(PriceRule, Span<PriceRule>)] = []
            for key in Set(oldRules.prices.keys).union(rules.prices.keys).sorted() {
                let a = oldRules.prices[key] ?? [], b = rules.prices[key] ?? []
                guard let row = a.first ?? b.first else { continue }
                let spans = differingSpans(a, b, through: through, \PriceRule.effectiveFrom) { $0.price == $1.price }
                changes += spans.map { (row, $0) }
            }
            if !changes.isEmpty {
                let counts = try r.salesPostedByDay(pricedByRules: true)
                func says(_ p: PriceRule?) -> String { p.map { "\($0.price)" } ?? "(none)" }
                for (row, span) in changes {
                    let n = sum(counts[row.storefront + "|" + row.productId], from: span.from, to: span.to)
                    guard n > 0 else { continue }
                    lines.append("rules/prices.csv: \(row.productId) in \(row.storefront) \(span.from)..\(span.to): \(says(span.old)) -> \(says(span.new)): \(count(n)) at the prices before")
                }
            }
        }
        if paths.contains("iapledger.toml") {
            let a = oldConfig, b = config
            var what: [String] = []
            if a.commissionStandard != b.commissionStandard { what.append("standard commission \(a.commissionStandard) -> \(b.commissionStandard)") }
            if a.commissionReduced != b.commissionReduced { what.append("reduced commission \(a.commissionReduced) -> \(b.commissionReduced)") }
            if a.subscriptionReducedAfterDays != b.subscriptionReducedAfterDays { what.append("subscription_reduced_after_days \(a.subscriptionReducedAfterDays) -> \(b.subscriptionReducedAfterDays)") }
            if a.subscriptionGraceDays != b.subscriptionGraceDays { what.append("subscription_grace_days \(a.subscriptionGraceDays) -> \(b.subscriptionGraceDays)") }
            if a.defaultStorefront != b.defaultStorefront { what.append("default_storefront \(a.defaultStorefront) -> \(b.defaultStorefront)") }
            let periods = smallBusinessChanges(a.smallBusiness, b.smallBusiness, through: through)
            if !what.isEmpty || !periods.isEmpty {
                let all = try salesByStorefront().values.reduce(into: [Day: Int]()) { total, byDay in
                    for (d, n) in byDay { total[d, default: 0] += n }
                }
                if !what.isEmpty, let first = all.keys.min() {
                    let n = sum(all, from: first)
                    if n > 0 { lines.append("iapledger.toml: \(what.joined(separator: ", ")): \(count(n)) through \(through) by the settings before") }
                }
                for p in periods {
                    let n = sum(all, from: p.from, to: p.to)
                    guard n > 0 else { continue }
                    lines.append("iapledger.toml: small_business: \(p.from)..\(p.to) \(p.nowIn ? "now in the program (it was not)" : "no longer in the program (it was)"): \(count(n)) at the commission before")
                }
            }
        }
        return lines.isEmpty ? nil : (last.id, lines)
    }

    /// A run of days on which the rows in force before and now differ.
    struct Span<T> { var from: Day; var to: Day; var old: T?; var new: T? }

    /// The runs of days on or before `through` on which a row was in force before and the rows
    /// in force differ (rows sorted by date; `same` says whether two rows give the same): a rate
    /// changed for September alone is September, not September to the last night. Days on which
    /// no row was in force before priced nothing, and are left out.
    static func differingSpans<T>(_ a: [T], _ b: [T], through: Day, _ date: KeyPath<T, Day>, _ same: (T, T) -> Bool) -> [Span<T>] {
        let days = Set(a.map { $0[keyPath: date] } + b.map { $0[keyPath: date] }).filter { $0 <= through }.sorted()
        var out: [Span<T>] = []
        for (i, day) in days.enumerated() {
            let end = i + 1 < days.count ? days[i + 1] + (-1) : through
            let x = Rules.inForce(a, on: day, date), y = Rules.inForce(b, on: day, date)
            guard let x else { continue }
            if let y, same(x, y) { continue }
            out.append(Span(from: day, to: end, old: x, new: y))
        }
        return out
    }

    /// The runs of days on or before `through` whose Small Business Program membership differs
    /// between the two lists of periods (a period shortened by five days is those five days).
    static func smallBusinessChanges(_ a: [WorkspaceConfig.DateRange], _ b: [WorkspaceConfig.DateRange], through: Day)
        -> [(from: Day, to: Day, nowIn: Bool)] {
        let bounds = Set((a + b).flatMap { [$0.from, $0.to + 1] }).filter { $0 <= through }.sorted()
        var out: [(from: Day, to: Day, nowIn: Bool)] = []
        for (i, start) in bounds.enumerated() {
            let end = i + 1 < bounds.count ? bounds[i + 1] + (-1) : through
            let was = a.contains { $0.contains(start) }, now = b.contains { $0.contains(start) }
            guard was != now else { continue }
            if let lastRun = out.last, lastRun.nowIn == now, lastRun.to + 1 == start { out[out.count - 1].to = end }
            else { out.append((start, end, now)) }
        }
        return out
    }
}
