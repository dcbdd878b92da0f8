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
            let changes = Set(oldRules.storefronts.keys).union(rules.storefronts.keys).sorted().compactMap { code -> (String, Day)? in
                firstDifference(oldRules.storefronts[code] ?? [], rules.storefronts[code] ?? [], through: through, \.effectiveFrom) {
                    $0.currency == $1.currency && $0.taxRate == $1.taxRate && $0.taxIncluded == $1.taxIncluded
                }.map { (code, $0) }
            }
            if !changes.isEmpty {
                let counts = try r.salesPostedByDay(pricedByRules: false)
                func says(_ s: StorefrontRule?) -> String { s.map { "\($0.currency), tax \($0.taxRate) \($0.taxIncluded ? "included" : "added") from \($0.effectiveFrom)" } ?? "(none)" }
                for (code, day) in changes {
                    let n = sum(counts[code], from: day)
                    guard n > 0 else { continue }
                    lines.append("rules/storefronts.csv: \(code) on \(day): \(says(oldRules.storefront(code, on: day))) -> \(says(rules.storefront(code, on: day))): \(count(n)) from \(day) by the rows before")
                }
            }
        }
        if paths.contains("rules/prices.csv") {
            let changes = Set(oldRules.prices.keys).union(rules.prices.keys).sorted().compactMap { key -> (PriceRule, Day)? in
                let a = oldRules.prices[key] ?? [], b = rules.prices[key] ?? []
                guard let row = a.first ?? b.first else { return nil }
                return firstDifference(a, b, through: through, \.effectiveFrom) { $0.price == $1.price }.map { (row, $0) }
            }
            if !changes.isEmpty {
                let counts = try r.salesPostedByDay(pricedByRules: true)
                func says(_ p: PriceRule?) -> String { p.map { "\($0.price) from \($0.effectiveFrom)" } ?? "(none)" }
                for (row, day) in changes {
                    let n = sum(counts[row.storefront + "|" + row.productId], from: day)
                    guard n > 0 else { continue }
                    lines.append("rules/prices.csv: \(row.productId) in \(row.storefront) on \(day): \(says(oldRules.price(product: row.productId, storefront: row.storefront, on: day))) -> \(says(rules.price(product: row.productId, storefront: row.storefront, on: day))): \(count(n)) from \(day) at the prices before")
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
                let all = try r.salesPostedByDay(pricedByRules: false).values.reduce(into: [Day: Int]()) { total, byDay in
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

    /// The first day on or before `through` on which the rows in force differ (rows sorted by
    /// date; `same` says whether two rows give the same), or nil.
    static func firstDifference<T>(_ a: [T], _ b: [T], through: Day, _ date: KeyPath<T, Day>, _ same: (T, T) -> Bool) -> Day? {
        let days = Set(a.map { $0[keyPath: date] } + b.map { $0[keyPath: date] }).filter { $0 <= through }.sorted()
        for day in days {
            switch (Rules.inForce(a, on: day, date), Rules.inForce(b, on: day, date)) {
            case (nil, nil): continue
            case let (x?, y?) where same(x, y): continue
            default: return day
            }
        }
        return nil
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
