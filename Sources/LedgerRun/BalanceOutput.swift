import Foundation
import LedgerCore
import LedgerRead
import LedgerStore

/// Renders the trial balance for the terminal, CSV or JSON.
public enum BalanceOutput {
    /// - Parameter empty: what the table says when no posting is in it (the book, the day).
    public static func render(_ rows: [TrialBalanceRow], format: String, reportingCurrency: String,
                              empty: String = "No postings in this book yet.") -> String {
        switch format {
        case "json":
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys]
            return String(decoding: (try? enc.encode(rows)) ?? Data("[]".utf8), as: UTF8.self) + "\n"
        case "csv":
            var out = "book,account,currency,debit_minor,credit_minor,balance_minor,reporting_balance_minor\n"
            for r in rows {
                out += [r.book, r.account, r.currency, String(r.debitMinor), String(r.creditMinor), String(r.balanceMinor),
                        String(r.reportingBalanceMinor)].map(CSV.escape).joined(separator: ",") + "\n"
            }
            return out
        default:
            let header = ["Book", "Account", "Currency", "Debit", "Credit", "Balance", "Balance (\(reportingCurrency))"]
            if rows.isEmpty { return empty + "\n" }
            return TextTable.render(rows.map { r in
                [r.book, r.account, r.currency,
                 Currency.format(minor: r.debitMinor, currency: r.currency),
                 Currency.format(minor: r.creditMinor, currency: r.currency),
                 Currency.format(minor: r.balanceMinor, currency: r.currency),
                 Currency.format(minor: r.reportingBalanceMinor, currency: reportingCurrency)]
            }, header: header, rightAligned: [3, 4, 5, 6])
        }
    }
}
