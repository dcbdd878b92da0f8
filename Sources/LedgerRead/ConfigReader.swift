import Foundation
import LedgerCore
import TOMLKit

/// Reads `iapledger.toml` into a `WorkspaceConfig`. Rates are strings (`"0.30"`) so they stay
/// exact decimals; a float rate is refused with a message saying so.
public enum ConfigReader {
    public static func read(path: String, displayPath: String = "iapledger.toml") throws -> WorkspaceConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            // Told apart: `init` makes a workspace only where none is (it refuses a folder with
            // anything named iapledger.toml in it), so it is advice for a missing file alone.
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
                throw ReadError.file(displayPath, isFolder.boolValue
                    ? "is a folder, not the workspace's config file: move it aside and put the config back (from a backup, or the one `iapledger init <new folder>` writes, edited as it was)"
                    : "cannot be read (no permission to read it?): make it readable by the user the nights run as")
            }
            throw ReadError.file(displayPath, "cannot be read (missing); run `iapledger init` to create a workspace")
        }
        var config = try parse(String(decoding: data, as: UTF8.self), displayPath: displayPath)
        config.sourceSHA256 = Hashing.sha256Hex(data)
        config.sourceData = Array(data)
        return config
    }

    public static func parse(_ text: String, displayPath: String = "iapledger.toml") throws -> WorkspaceConfig {
        let table: TOMLTable
        if let bad = TOMLHeaderCheck.problem(in: text) {
            throw ReadError.line(displayPath, bad.line, "not valid TOML: \(bad.message)")
        }
        do {
            table = try TOMLTable(string: text)
        } catch let e as TOMLParseError {
            throw ReadError.line(displayPath, Int(e.source.begin.line), "not valid TOML: \(e.description)")
        } catch {
            throw ReadError.file(displayPath, "not valid TOML: \(error)")
        }
        var c = WorkspaceConfig()
        func fail(_ key: String, _ why: String) -> ReadError { .file(displayPath, "\(key): \(why)") }
        func string(_ t: TOMLTable, _ key: String, _ name: String) throws -> String? {
            guard let v = t[key] else { return nil }
            guard let s = v.string else { throw fail(name, "must be a string") }
            return s
        }
        func rate(_ t: TOMLTable, _ key: String, _ name: String) throws -> ExactDecimal? {
            guard let v = t[key] else { return nil }
            if let s = v.string {
                guard let d = ExactDecimal(s) else {
                    throw fail(name, "\"\(s)\" is not a decimal of digits and one point, with at most 18 decimals and 18 digits in all (such as \"0.30\")")
                }
                guard !d.isNegative, d <= .one else { throw fail(name, "\"\(s)\" is not a rate between 0 and 1") }
                return d
            }
            throw fail(name, "write rates as strings, e.g. \(name) = \"0.30\", so they stay exact")
        }
        func int(_ t: TOMLTable, _ key: String, _ name: String) throws -> Int? {
            guard let v = t[key] else { return nil }
            guard let i = v.int, i >= 0 else { throw fail(name, "must be a non-negative whole number") }
            return i
        }
        func day(_ t: TOMLTable, _ key: String, _ name: String) throws -> Day {
            guard let v = t[key] else { throw fail(name, "is required") }
            if let s = v.string, let d = Day(iso: s) { return d }
            if let d = v.date { return Day(year: d.year, month: Int(d.month), day: Int(d.day)) }
            throw fail(name, "must be a date YYYY-MM-DD")
        }

        // A misspelt key or section would leave its setting at the default without a word (a
        // `[comission]` table posting every sale at the standard rate): every key must be known.
        func onlyKnown(_ t: TOMLTable, _ known: [String], in section: String?) throws {
            for key in t.keys.sorted() where !known.contains(key) {
                let name = section.map { "\($0).\(key)" } ?? key
                throw fail(name, "unknown setting\(section.map { " in [\($0)]" } ?? ""); the known ones are \(known.joined(separator: ", "))")
            }
        }
        try onlyKnown(table, ["reporting_currency", "bundle_ids", "default_storefront", "order_wait_days", "trusted_roots", "database",
                              "commission", "periods", "reports", "reconciliation"], in: nil)
        if let t = table["commission"]?.table {
            try onlyKnown(t, ["standard", "reduced", "subscription_reduced_after_days", "subscription_grace_days", "small_business"], in: "commission")
        }
        if let t = table["periods"]?.table { try onlyKnown(t, ["closed_through"], in: "periods") }
        if let t = table["reports"]?.table { try onlyKnown(t, ["journal_row_cap", "paper"], in: "reports") }
        if let t = table["reconciliation"]?.table { try onlyKnown(t, ["scope"], in: "reconciliation") }

        if let s = try string(table, "reporting_currency", "reporting_currency") {
            guard Currency.isKnown(s) else { throw fail("reporting_currency", "\(s) is not a known ISO 4217 currency") }
            c.reportingCurrency = s
        }
        if let v = table["bundle_ids"] {
            guard let arr = v.array else { throw fail("bundle_ids", "must be an array of strings") }
            c.bundleIds = try arr.map {
                guard let s = $0.string, !s.trimmingCharacters(in: .whitespaces).isEmpty else { throw fail("bundle_ids", "must be an array of bundle ids (non-empty strings)") }
                return s
            }
        }
        if let s = try string(table, "default_storefront", "default_storefront") { c.defaultStorefront = Currency.isoUppercased(s) }   // as orders and transactions are read
        if let n = try int(table, "order_wait_days", "order_wait_days") {
            guard (0...60).contains(n) else { throw fail("order_wait_days", "must be a number of days from 0 to 60") }
            c.orderWaitDays = n
        }
        if let v = table["trusted_roots"] {
            guard let arr = v.array else { throw fail("trusted_roots", "must be an array of file paths") }
            c.trustedRoots = try arr.map { guard let s = $0.string else { throw fail("trusted_roots", "must be an array of file paths") }; return s }
        }
        if let s = try string(table, "database", "database") { c.databasePath = s }

        if let v = table["commission"] {
            guard let t = v.table else { throw fail("commission", "must be a table [commission]") }
            if let r = try rate(t, "standard", "commission.standard") { c.commissionStandard = r }
            if let r = try rate(t, "reduced", "commission.reduced") { c.commissionReduced = r }
            if let n = try int(t, "subscription_reduced_after_days", "commission.subscription_reduced_after_days") { c.subscriptionReducedAfterDays = n }
            if let n = try int(t, "subscription_grace_days", "commission.subscription_grace_days") { c.subscriptionGraceDays = n }
            if let sb = t["small_business"] {
                guard let arr = sb.array else { throw fail("commission.small_business", "must be an array of { from, to } tables") }
                c.smallBusiness = try arr.map { item in
                    guard let it = item.table else { throw fail("commission.small_business", "must be an array of { from, to } tables") }
                    try onlyKnown(it, ["from", "to"], in: "commission.small_business")
                    let from = try day(it, "from", "commission.small_business.from")
                    let to = try day(it, "to", "commission.small_business.to")
                    guard from <= to else { throw fail("commission.small_business", "range \(from)..\(to) ends before it starts") }
                    return .init(from: from, to: to)
                }
            }
        }
        if let v = table["periods"] {
            guard let t = v.table else { throw fail("periods", "must be a table [periods]") }
            if let s = try string(t, "closed_through", "periods.closed_through") {
                guard let m = Month(iso: s) else { throw fail("periods.closed_through", "\"\(s)\" is not a month YYYY-MM") }
                c.closedThrough = m
            }
        }
        if let v = table["reports"] {
            guard let t = v.table else { throw fail("reports", "must be a table [reports]") }
            if let n = try int(t, "journal_row_cap", "reports.journal_row_cap") { c.journalRowCap = n }
            if let s = try string(t, "paper", "reports.paper") {
                guard let p = PaperSize(named: s) else {
                    throw fail("reports.paper", "\"\(s)\" is not a paper size the workbooks know: \(PaperSize.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))")
                }
                c.paper = p
            }
        }
        if let v = table["reconciliation"] {
            guard let t = v.table else { throw fail("reconciliation", "must be a table [reconciliation]") }
            if let s = t["scope"] {
                let known = ProductType.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
                guard let arr = s.array else { throw fail("reconciliation.scope", "must be an array of product types (\(known))") }
                c.reconciliationScope = Set(try arr.map { item in
                    guard let name = item.string, let type = ProductType(rawValue: name) else {
                        throw fail("reconciliation.scope", "\(item.string.map { "\"\($0)\"" } ?? "a value") is not a product type; the types are \(known)")
                    }
                    return type
                })
            }
        }
        return c
    }
}
