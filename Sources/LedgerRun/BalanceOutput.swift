import Foundation
import LedgerCore
import LedgerRead
import LedgerStore

/// Renders the trial balance for the terminal, CSV or JSON.
public enum BalanceOutput {
    /// The books and currencies whose balances do not sum to zero ("production USD", "sandbox in
    /// USD" for the reporting currency): none in a ledger that holds together.
    public static func unbalanced(_ rows: [TrialBalanceRow], reportingCurrency: String) -> [String] {
        var out: [String] = []
        var books: [String] = []
        for r in rows where !books.contains(r.book) { books.append(r.book) }
        for book in books {
            let own = rows.filter { $0.book == book }
            var byCurrency: [String: Int64] = [:]
            for r in own { byCurrency[r.currency, default: 0] += r.balanceMinor }
            for (c, b) in byCurrency.sorted(by: { $0.key < $1.key }) where b != 0 { out.append("\(book) \(c)") }
            if own.reduce(Int64(0), { $0 + $1.reportingBalanceMinor }) != 0 { out.append("\(book) in \(reportingCurrency)") }
        }
        return out
    }

    /// - Parameter empty: what the table says when no posting is in it (the book, the day).
    public static func render(_ rows: [TrialBalanceRow], format: String, reportingCurrency: String,
                              empty: String = "No postings in this book yet.") -> String {
        switch format {
        case "json":
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            return String(decoding: (try? enc.encode(rows)) ?? Data("[]".utf8), as: UTF8.self) + "\n"
        case "csv":
            var out = "book,account,currency,debit_minor,credit_minor,balance_minor,reporting_balance_minor\n"
            for r in rows {
                out += ([r.book, r.account, r.currency].map(CSV.escapeText)
                        + [r.debitMinor, r.creditMinor, r.balanceMinor, r.reportingBalanceMinor].map { String($0) })
                    .joined(separator: ",") + "\n"
            }
            return out
        default:
            let header = ["Book", "Account", "Currency", "Debit", "Credit", "Balance", "Balance (\(reportingCurrency))"]
            if rows.isEmpty { return empty + "\n" }
            // Each book's accounts, then its total per currency and in the reporting currency:
            // each sums to zero (debits equal credits), as the Trial Balance sheet shows it.
            var lines: [[String]] = []
            var books: [String] = []
            for r in rows where !books.contains(r.book) { books.append(r.book) }
            for book in books {
                let own = rows.filter { $0.book == book }
                lines += own.map { r in
                    [r.book, r.account, r.currency,
                     Currency.format(minor: r.debitMinor, currency: r.currency),
                     Currency.format(minor: r.creditMinor, currency: r.currency),
                     Currency.format(minor: r.balanceMinor, currency: r.currency),
                     Currency.format(minor: r.reportingBalanceMinor, currency: reportingCurrency)]
                }
                var currencies: [String] = []
                for r in own where !currencies.contains(r.currency) { currencies.append(r.currency) }
                for c in currencies.sorted() {
                    let inC = own.filter { $0.currency == c }
                    let (d, cr, b, rb) = inC.reduce((Int64(0), Int64(0), Int64(0), Int64(0))) { ($0.0 + $1.debitMinor, $0.1 + $1.creditMinor, $0.2 + $1.balanceMinor, $0.3 + $1.reportingBalanceMinor) }
                    lines.append([book, "Total", c, Currency.format(minor: d, currency: c), Currency.format(minor: cr, currency: c),
                                  Currency.format(minor: b, currency: c), Currency.format(minor: rb, currency: reportingCurrency)])
                }
                let all = own.reduce(Int64(0)) { $0 + $1.reportingBalanceMinor }
                lines.append([book, "Total, all currencies", "", "", "", "", Currency.format(minor: all, currency: reportingCurrency)])
            }
            let table = TextTable.render(lines, header: header, rightAligned: [3, 4, 5, 6])
            let unbalanced = unbalanced(rows, reportingCurrency: reportingCurrency)
            return table + (unbalanced.isEmpty
                ? "Each book's balances sum to zero in each currency and in \(reportingCurrency) (debits equal credits).\n"
                : "WARNING: balances do not sum to zero: \(unbalanced.joined(separator: ", ")); run `iapledger verify`\n")
        }
    }
}
