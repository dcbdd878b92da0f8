import Foundation
import LedgerCore
import LedgerRead
import LedgerStore

/// The demo's App Store Connect financial reports, to try `iapledger true-up` on: for the last
/// whole month before the demo's as-of date, one file per currency in Apple's tab-separated
/// format, made from the demo's own production sales and full refunds of that month (calendar
/// days: Apple's fiscal months, which end on a Saturday, would leave the edges to tell apart),
/// with two differences seeded as Apple's real reports have them: a sale Apple counted that
/// never reached the ledger, and a refund Apple counts in its next period.
public enum DemoAppleReports {
    public struct Written {
        public var month: Month
        public var files: [URL]
        /// What was seeded, said by the demo.
        public var seeded: [String]
    }

    /// ISO 3166 alpha-3 to alpha-2 for the demo's storefronts (Apple's reports use alpha-2).
    static let alpha2: [String: String] = [
        "USA": "US", "CAN": "CA", "DEU": "DE", "FRA": "FR", "NLD": "NL", "GBR": "GB", "JPN": "JP", "KOR": "KR",
        "KWT": "KW", "BHR": "BH", "AUS": "AU", "CHE": "CH", "BRA": "BR", "IND": "IN", "MEX": "MX", "CHL": "CL",
        "ITA": "IT", "ESP": "ES", "SWE": "SE", "NOR": "NO", "DNK": "DK", "POL": "PL", "TUR": "TR", "CHN": "CN",
    ]
    /// Apple's region codes of a report file's name, by currency.
    static let regions: [String: String] = [
        "USD": "US", "EUR": "EU", "GBP": "GB", "JPY": "JP", "CAD": "CA", "AUD": "AU", "CHF": "CH", "KRW": "KR",
    ]

    struct Row: Hashable {
        var country: String
        var productId: String
        var currency: String
        var isReturn: Bool
        var unitPriceMinor: Int64
        var unitShareMinor: Int64
    }

    /// Writes the reports into `root/apple-reports/`; nil when that month has no sales.
    public static func write(into root: URL, ledger: Ledger, asOf: Day, vendor: String = "85012345") throws -> Written? {
        let month = asOf.month.previous
        let entries = try ledger.read { try $0.proceedsEntries(from: month.firstDay, through: month.lastDay) }
        guard !entries.isEmpty else { return nil }
        // Apple lists units by price and share: an entry of several units whose amounts do not
        // divide evenly becomes units of its own, the remainder on the last.
        var quantities: [Row: Int64] = [:]
        var order: [Row] = []
        func add(_ row: Row, _ units: Int64) {
            if quantities[row] == nil { order.append(row) }
            quantities[row, default: 0] += units
        }
        for e in entries where e.quantity > 0 {
            let country = alpha2[e.storefront] ?? String(e.storefront.prefix(2))
            func row(_ price: Int64, _ share: Int64) -> Row {
                Row(country: country, productId: e.productId, currency: e.currency, isReturn: e.isRefund, unitPriceMinor: price, unitShareMinor: share)
            }
            if e.grossMinor % e.quantity == 0 && e.proceedsMinor % e.quantity == 0 {
                add(row(e.grossMinor / e.quantity, e.proceedsMinor / e.quantity), e.quantity)
            } else {
                let price = e.grossMinor / e.quantity, share = e.proceedsMinor / e.quantity
                if e.quantity > 1 { add(row(price, share), e.quantity - 1) }
                add(row(e.grossMinor - price * (e.quantity - 1), e.proceedsMinor - share * (e.quantity - 1)), 1)
            }
        }
        var seeded: [String] = []
        // A sale Apple counted that never reached the ledger: one more unit of the month's
        // most sold row.
        if let top = order.filter({ !$0.isReturn }).max(by: { quantities[$0]! < quantities[$1]! }) {
            quantities[top]! += 1
            seeded.append("\(top.currency) \(top.productId): Apple counts one more unit sold than the ledger (a sale whose receipt never reached it)")
        }
        // A refund Apple counts in its next period: the first return of another currency left out.
        let topCurrency = seeded.isEmpty ? nil : order.filter { !$0.isReturn }.max(by: { quantities[$0]! < quantities[$1]! })?.currency
        if let refund = order.first(where: { $0.isReturn && $0.currency != topCurrency && quantities[$0] == 1 }) {
            quantities[refund] = 0
            seeded.append("\(refund.currency) \(refund.productId): a refund the ledger has that Apple counts in its next period")
        }

        let dir = root.appendingPathComponent("apple-reports")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let mmyy = String(format: "%02d%02d", month.month, month.year % 100)
        func date(_ d: Day) -> String { let p = d.description.split(separator: "-"); return "\(p[1])/\(p[2])/\(p[0])" }
        func amount(_ minor: Int64, _ currency: String) -> String { Currency.format(minor: minor, currency: currency) }
        var files: [URL] = []
        for currency in Set(order.map(\.currency)).sorted() {
            let rows = order.filter { $0.currency == currency && quantities[$0]! != 0 }
            guard !rows.isEmpty else { continue }
            var text = FinancialReport.columns.joined(separator: "\t") + "\n"
            var total: Int64 = 0, sold: Int64 = 0
            for r in rows {
                let units = quantities[r]! * (r.isReturn ? -1 : 1)
                total += units * r.unitShareMinor
                sold += max(units, 0)
                text += [date(month.firstDay), date(month.lastDay), "", "", r.productId, String(units), amount(r.unitShareMinor, currency),
                         amount(units * r.unitShareMinor, currency), currency, r.isReturn ? "R" : "S", "", "Example Coins Inc.",
                         r.productId.split(separator: ".").suffix(2).joined(separator: " "), "", "", "IA1", "", r.country, "", "",
                         amount(r.isReturn ? -r.unitPriceMinor : r.unitPriceMinor, currency), currency].joined(separator: "\t") + "\n"
            }
            text += "Total_Rows\t\(rows.count)\nTotal_Amount\t\(amount(total, currency))\nTotal_Units\t\(sold)\n"
            let url = dir.appendingPathComponent("\(vendor)_\(mmyy)_\(regions[currency] ?? String(currency.prefix(2))).txt")
            try Data(text.utf8).write(to: url)
            files.append(url)
        }
        return Written(month: month, files: files, seeded: seeded)
    }
}
