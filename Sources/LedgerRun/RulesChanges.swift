import LedgerCore
import LedgerRead
import LedgerStore

/// What changed in the config and rules files since the last night, for the days that night
/// had posted through: a rate, tax or price of days already posted. Entries are never
/// changed, so the sales posted by the earlier rules keep them; the night says so, with how
/// many sales each change concerns, for finance to book a correction where one is due.
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

        if paths.contains("rules/fx.csv") {
            for currency in Set(oldRules.fx.keys).union(rules.fx.keys).sorted() {
                let months = Set((oldRules.fx[currency] ?? [:]).keys).union((rules.fx[currency] ?? [:]).keys)
                for month in months.sorted() where month.firstDay <= through {
                    let a = oldRules.fx[currency]?[month], b = rules.fx[currency]?[month]
                    guard a != b else { continue }
                    lines.append("rules/fx.csv: \(currency) \(month) \(a.map { "\($0)" } ?? "(none)") -> \(b.map { "\($0)" } ?? "(none)"): \(count(try r.salesPosted(currency: currency, month: month))) at the rate before")
                }
            }
        }
        if paths.contains("rules/storefronts.csv") {
            for code in Set(oldRules.storefronts.keys).union(rules.storefronts.keys).sorted() {
                let a = oldRules.storefronts[code] ?? [], b = rules.storefronts[code] ?? []
                guard let day = firstDifference(a, b, through: through, \.effectiveFrom, { "\($0.currency) \($0.taxRate) \($0.taxIncluded)" }) else { continue }
                func says(_ s: StorefrontRule?) -> String { s.map { "\($0.currency), tax \($0.taxRate) \($0.taxIncluded ? "included" : "added") from \($0.effectiveFrom)" } ?? "(none)" }
                lines.append("rules/storefronts.csv: \(code) on \(day): \(says(oldRules.storefront(code, on: day))) -> \(says(rules.storefront(code, on: day))): \(count(try r.salesPosted(storefront: code, product: nil, from: day, through: through))) from \(day) by the rows before")
            }
        }
        if paths.contains("rules/prices.csv") {
            for key in Set(oldRules.prices.keys).union(rules.prices.keys).sorted() {
                let a = oldRules.prices[key] ?? [], b = rules.prices[key] ?? []
                guard let day = firstDifference(a, b, through: through, \.effectiveFrom, { "\($0.price)" }),
                      let row = (a.first ?? b.first) else { continue }
                func says(_ p: PriceRule?) -> String { p.map { "\($0.price) from \($0.effectiveFrom)" } ?? "(none)" }
                lines.append("rules/prices.csv: \(row.productId) in \(row.storefront) on \(day): \(says(oldRules.price(product: row.productId, storefront: row.storefront, on: day))) -> \(says(rules.price(product: row.productId, storefront: row.storefront, on: day))): \(count(try r.salesPosted(storefront: row.storefront, product: row.productId, from: day, through: through))) from \(day) at the prices before")
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
            if !what.isEmpty, let first = try r.firstSaleDay() {
                lines.append("iapledger.toml: \(what.joined(separator: ", ")): \(count(try r.salesPosted(from: first, through: through))) through \(through) by the settings before")
            }
            // Small Business Program periods added or removed, as far as they reach into days posted.
            let removed = a.smallBusiness.filter { !b.smallBusiness.contains($0) }, added = b.smallBusiness.filter { !a.smallBusiness.contains($0) }
            for (range, verb) in removed.map({ ($0, "removed") }) + added.map({ ($0, "added") }) where range.from <= through {
                let to = min(range.to, through)
                lines.append("iapledger.toml: small_business \(range.description) \(verb): \(count(try r.salesPosted(from: range.from, through: to))) from \(range.from) through \(to) at the commission before")
            }
        }
        return lines.isEmpty ? nil : (last.id, lines)
    }

    /// The first day on or before `through` on which the rows in force differ (rows sorted by
    /// date; `value` says what a row gives), or nil.
    static func firstDifference<T>(_ a: [T], _ b: [T], through: Day, _ date: KeyPath<T, Day>, _ value: (T) -> String) -> Day? {
        let days = Set(a.map { $0[keyPath: date] } + b.map { $0[keyPath: date] }).filter { $0 <= through }.sorted()
        for day in days {
            let x = Rules.inForce(a, on: day, date).map(value), y = Rules.inForce(b, on: day, date).map(value)
            if x != y { return day }
        }
        return nil
    }
}
