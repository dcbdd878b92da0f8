import Foundation
import LedgerCore
import LedgerReconcile
import LedgerStore
import LedgerRead
import LedgerReport

/// Renders reconciliation exceptions for the terminal, CSV or JSON.
public enum ExceptionsOutput {
    public static let categories = ExceptionCategory.allCases.map(\.rawValue)

    struct JSONRow: Encodable {
        var category: String
        var transaction_id: String
        var order_id: String?
        var status: String
        var first_seen: String
        var resolved_on: String?
        var age_days: Int
        var detail: String
        // The workbook's figures (added after the columns above: a CSV read by position reads
        // those as before): the account and product, the customer's gross price in its currency
        // and the sale's net in the reporting currency (null when the exception names no booked
        // sale), all in minor units.
        var account_id: String?
        var product_id: String?
        var gross_minor: Int64?
        var currency: String?
        var net_reporting_minor: Int64?

        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(category, forKey: .category)
            try c.encode(transaction_id.isEmpty ? nil : transaction_id, forKey: .transaction_id)   // null when it names none
            try c.encode(order_id, forKey: .order_id)   // null when the exception names no order
            try c.encode(status, forKey: .status)
            try c.encode(first_seen, forKey: .first_seen)
            try c.encode(resolved_on, forKey: .resolved_on)   // null while open
            try c.encode(age_days, forKey: .age_days)
            try c.encode(detail, forKey: .detail)
            try c.encode(account_id, forKey: .account_id)
            try c.encode(product_id, forKey: .product_id)
            try c.encode(gross_minor, forKey: .gross_minor)
            try c.encode(currency, forKey: .currency)
            try c.encode(net_reporting_minor, forKey: .net_reporting_minor)
        }
        enum CodingKeys: String, CodingKey {
            case category, transaction_id, order_id, status, first_seen, resolved_on, age_days, detail
            case account_id, product_id, gross_minor, currency, net_reporting_minor
        }
    }

    /// `sandbox`: the transactions of `rows` in the sandbox book.
    public static func render(_ rows: [ExceptionRow], asOf: Day, format: String, sandbox: Set<String> = []) -> String {
        var out = ""
        var writer = Writer(asOf: asOf, format: format)
        out += writer.begin()
        for r in rows { out += writer.add(r, sandbox: sandbox.contains(r.transactionId)) }
        return out + writer.end()
    }

    /// Writes the exceptions one at a time, as `render` does them all: a beginning, a piece per
    /// exception, an ending (`exceptions` spools them so: a million open ones took 1.3 GB held).
    public struct Writer {
        let asOf: Day, format: String
        private var count = 0
        private let encoder: JSONEncoder = {
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            return enc
        }()

        public init(asOf: Day, format: String) {
            self.asOf = asOf
            self.format = format
        }

        public func begin() -> String {
            switch format {
            case "json": return "[\n"
            case "csv": return "category,transaction_id,order_id,status,first_seen,resolved_on,age_days,detail,account_id,product_id,gross_minor,currency,net_reporting_minor\n"
            default: return ""
            }
        }

        /// `sandbox`: its transaction is in the sandbox book: its net is left out (null, an
        /// empty field) as the workbook leaves its cell empty, but under
        /// SANDBOX_CREDITED_IN_PRODUCTION (a test sale, which no one paid, summed by category
        /// with the real ones counted test money).
        public mutating func add(_ e: ExceptionRow, sandbox: Bool = false) -> String {
            var e = e
            if !ReconciliationReport.amountCounts(category: e.category, sandbox: sandbox) { e.netReportingMinor = nil }
            let r = JSONRow(category: e.category, transaction_id: e.transactionId, order_id: e.orderId,
                            status: e.isOpen ? "open" : "resolved", first_seen: e.firstSeen.description,
                            resolved_on: e.resolvedOn?.description, age_days: e.ageDays(asOf: asOf), detail: e.detail,
                            account_id: e.accountId, product_id: e.productId, gross_minor: e.grossMinor, currency: e.currency,
                            net_reporting_minor: e.netReportingMinor)
            count += 1
            switch format {
            case "json":
                // An element of the array as JSONEncoder writes one: its lines indented by two.
                let object = TerminalText.jsonEscapingInvisible(String(decoding: (try? encoder.encode(r)) ?? Data("{}".utf8), as: UTF8.self))
                var element = count > 1 ? ",\n  " : "  "
                element.unicodeScalars.reserveCapacity(object.utf8.count + 64)
                for u in object.unicodeScalars {
                    element.unicodeScalars.append(u)
                    if u == "\n" { element += "  " }
                }
                return element
            case "csv":
                // Ids and details are text as read from the inputs: escapeText keeps a spreadsheet
                // from running one that begins like a formula. The age and amounts are numbers.
                let text = [r.category, r.transaction_id, r.order_id ?? "", r.status, r.first_seen, r.resolved_on ?? ""].map(CSV.escapeText)
                let figures = [r.account_id ?? "", r.product_id ?? ""].map(CSV.escapeText)
                    + [r.gross_minor.map(String.init) ?? "", CSV.escapeText(r.currency ?? ""), r.net_reporting_minor.map(String.init) ?? ""]
                return (text + [String(r.age_days), CSV.escapeText(r.detail)] + figures).joined(separator: ",") + "\n"
            default:
                // A detail may quote an order's fields as read: no control character reaches the terminal.
                return "\(r.status.padding(toLength: 9, withPad: " ", startingAt: 0)) \(r.category.padding(toLength: 31, withPad: " ", startingAt: 0)) tx \(r.transaction_id.isEmpty ? "-" : TerminalText.visible(r.transaction_id)) order \(TerminalText.visible(r.order_id ?? "-")) first seen \(r.first_seen)\(r.resolved_on.map { " resolved \($0)" } ?? "") age \(r.age_days)d\n    \(TerminalText.visible(r.detail))\n"
            }
        }

        public func end() -> String {
            switch format {
            case "json": return "\n]\n"
            case "csv": return ""
            default: return count == 0 ? "No exceptions.\n" : "\(count) exception(s) as of \(asOf)\n"
            }
        }
    }
}

/// Lists findings (`iapledger findings`) for the terminal, CSV or JSON Lines, a page at a
/// time: a rules change may open one for every posted sale, more than a workbook's Run Info
/// lists, and each page is read in a short transaction (the output may be read slowly).
public enum FindingsOutput {
    struct JSONRow: Encodable {
        var code: String
        var transaction_id: String?
        var book: String?
        var status: String
        var first_seen: String
        var resolved_on: String?
        var resolution: String?
        var detail: String

        // Every key, null where there is nothing (as `exceptions --format json` writes them).
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(code, forKey: .code)
            try c.encode(transaction_id, forKey: .transaction_id)
            try c.encode(book, forKey: .book)
            try c.encode(status, forKey: .status)
            try c.encode(first_seen, forKey: .first_seen)
            try c.encode(resolved_on, forKey: .resolved_on)
            try c.encode(resolution, forKey: .resolution)
            try c.encode(detail, forKey: .detail)
        }
        enum CodingKeys: String, CodingKey { case code, transaction_id, book, status, first_seen, resolved_on, resolution, detail }
    }

    /// Writes every finding of `status` (and `code`) through `write`; returns how many.
    @discardableResult
    public static func write(_ ledger: Ledger, status: String, code: String?, format: String, pageSize: Int = 5_000,
                             write: (String) -> Void) throws -> Int {
        var n = 0
        let enc = JSONEncoder()
        enc.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if format == "csv" { write("code,transaction_id,book,status,first_seen,resolved_on,resolution,detail\n") }
        var after: LedgerReader.FindingKey? = nil
        while true {
            let page = try ledger.read { try $0.findingsPage(status: status, code: code, after: after, limit: pageSize) }
            for (f, note, _) in page {
                n += 1
                let status = f.resolvedOn == nil ? "open" : (note == nil ? "resolved" : "dismissed")
                switch format {
                case "json":
                    let row = JSONRow(code: f.code, transaction_id: f.transactionId.isEmpty ? nil : f.transactionId, book: f.book, status: status,
                                      first_seen: f.firstSeen.description, resolved_on: f.resolvedOn?.description, resolution: note, detail: f.message)
                    write(TerminalText.jsonEscapingInvisible(String(decoding: (try? enc.encode(row)) ?? Data("{}".utf8), as: UTF8.self)) + "\n")
                case "csv":
                    write([f.code, f.transactionId, f.book ?? "", status, f.firstSeen.description, f.resolvedOn?.description ?? "", note ?? "", f.message]
                        .map(CSV.escapeText).joined(separator: ",") + "\n")
                default:
                    write("\(status.padding(toLength: 9, withPad: " ", startingAt: 0)) \(f.code.padding(toLength: 26, withPad: " ", startingAt: 0)) tx \(f.transactionId.isEmpty ? "-" : TerminalText.visible(StoreBounds.shownIdentifier(f.transactionId))) \(f.book ?? "-") first seen \(f.firstSeen)\(f.resolvedOn.map { " resolved \($0)" } ?? "")\n    \(TerminalText.visible(f.message))\(note.map { "\n    " + TerminalText.visible($0) } ?? "")\n")
                }
            }
            guard page.count == pageSize, let last = page.last else { break }
            after = last.key
        }
        if format == "table" { write(n == 0 ? "No findings.\n" : "\(n) finding(s)\n") }
        return n
    }
}
