import Foundation
import LedgerCore

/// An App Store Connect financial report (iap-formats.md section 4): what Apple pays for one
/// region and one of its fiscal months, tab-separated, one row per product, country, price and
/// sale or return, then the footer rows `Total_Rows`, `Total_Amount` and `Total_Units`. It is
/// anonymous (no transaction ids), so it is compared with the ledger by totals.
public struct FinancialReport: Equatable {
    public struct Row: Equatable {
        /// The row's line in the file (the header is line 1).
        public var line: Int
        public var start: Day
        public var end: Day
        /// `Vendor Identifier`: the product's SKU, for an in-app purchase its product id.
        public var vendorIdentifier: String
        public var title: String
        /// Units: negative on a return (`Sales or Return` `R`).
        public var quantity: Int64
        /// `Partner Share` per unit and `Extended Partner Share` (quantity times it), in minor
        /// units of `partnerShareCurrency`: the proceeds, after Apple's commission and the tax.
        public var partnerShareMinor: Int64
        public var extendedPartnerShareMinor: Int64
        public var partnerShareCurrency: String
        public var isReturn: Bool
        /// ISO 3166 alpha-2, as Apple writes it.
        public var countryOfSale: String
        public var promoCode: String
        /// `Customer Price` per unit (tax included, negative on a return), in minor units of
        /// `customerCurrency`.
        public var customerPriceMinor: Int64
        public var customerCurrency: String
        public var productTypeIdentifier: String
    }

    public var path: String
    /// The file's SHA-256 (the same report given twice, under any name, is refused).
    public var sha256: String = ""
    public var rows: [Row]
    /// The footer's figures as Apple wrote them (checked against the rows when read).
    public var totalRows: Int
    public var totalAmount: ExactDecimal
    public var totalUnits: Int64

    /// The fiscal periods the rows name (a report holds one).
    public var periods: [ClosedDays] {
        Array(Set(rows.map { ClosedDays(start: $0.start, end: $0.end) })).sorted()
    }

    /// A row's amounts (10^12 minor units) and units (10^9) at most: more is no report of
    /// Apple's, and the products and sums of such values stay far inside 128 bits.
    static let maxAmountMinor: UInt64 = 1_000_000_000_000
    static let maxQuantity: UInt64 = 1_000_000_000
    /// The largest file read as a report (a region's month is a few megabytes).
    static let maxBytes = 256 << 20

    /// Apple's 22 columns, in Apple's order (iap-formats.md section 4).
    public static let columns = ["Start Date", "End Date", "UPC", "ISRC/ISBN", "Vendor Identifier", "Quantity", "Partner Share",
                                 "Extended Partner Share", "Partner Share Currency", "Sales or Return", "Apple Identifier",
                                 "Artist/Show/Developer/Author", "Title", "Label/Studio/Network/Developer/Publisher", "Grid",
                                 "Product Type Identifier", "ISAN/Other Identifier", "Country Of Sale", "Pre-order Flag", "Promo Code",
                                 "Customer Price", "Customer Currency"]

    /// The columns iapledger reads, by name (Apple's 22 columns, in any order; others ignored).
    static let needed = ["Start Date", "End Date", "Vendor Identifier", "Quantity", "Partner Share",
                         "Extended Partner Share", "Partner Share Currency", "Sales or Return", "Title",
                         "Product Type Identifier", "Country Of Sale", "Promo Code", "Customer Price",
                         "Customer Currency"]

    /// Reads the report at `path`. Any row that cannot be read, a footer that does not agree
    /// with the rows, or a missing footer refuses the whole file (`ReadError` naming the line):
    /// a report is compared by its totals, so a part of it would give wrong differences.
    public static func read(path: String) throws -> FinancialReport {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        guard exists, !isDirectory.boolValue else {
            throw ReadError.file(path, "\(!exists ? "no such file" : "a folder, not a file"): not read as an App Store Connect financial report")
        }
        // Read through a file descriptor: a pipe (`<(...)`) reads as a file does.
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            throw ReadError.file(path, "cannot be read: \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let tooBig = ReadError.file(path, "more than \(maxBytes >> 20) MiB: not one App Store Connect financial report")
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > off_t(maxBytes) { throw tooBig }
        let data: Data
        do {
            // Read up to the bound and one byte more: a region's month is a few megabytes, so a
            // bigger file is not a report (and is not taken into memory whole).
            data = try handle.read(upToCount: maxBytes + 1) ?? Data()
        } catch {
            throw ReadError.file(path, "cannot be read: \(error.localizedDescription)")
        }
        guard data.count <= maxBytes else { throw tooBig }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ReadError.file(path, "not UTF-8 text: not an App Store Connect financial report")
        }
        var report = try parse(text, path: path)
        report.sha256 = Hashing.sha256Hex(data)
        return report
    }

    /// App Store Connect's payments summary (`financial_report.csv`: each region's units,
    /// earnings, withholding tax, exchange rate and proceeds in the bank's currency), given
    /// with the reports by product: not one of them, and not read (`true-up` passes it over).
    public struct PaymentsSummary: Error, CustomStringConvertible {
        public var path: String
        public var description: String {
            "\(path): the payments summary (each region's totals, withholding tax and exchange rate, as in financial_report.csv), not a financial report by product: not read"
        }
    }

    /// Whether `text` is the payments summary: its title line ("Payments and Financial
    /// Reports") or its header ("Region (Currency),Units Sold,...") among its first lines.
    static func isPaymentsSummary(_ text: String) -> Bool {
        let first = text.prefix(4096).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }).prefix(5)
        return first.contains { line in
            let l = line.drop(while: { $0 == "\"" || $0 == "\u{FEFF}" })
            return l.contains("Payments and Financial Reports") || (l.hasPrefix("Region (Currency),") && l.contains("Withholding Tax"))
        }
    }

    public static func parse(_ text: String, path: String) throws -> FinancialReport {
        if isPaymentsSummary(text) { throw PaymentsSummary(path: path) }
        // Lines end in LF or CRLF (a report opened and saved on Windows); Swift takes CRLF as one
        // character, so both are separators.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let headerLine = lines.first else { throw ReadError.file(path, "empty: not an App Store Connect financial report") }
        let header = headerLine.split(separator: "\t", omittingEmptySubsequences: false).map {
            String($0).trimmingCharacters(in: .whitespaces)
        }
        var column: [String: Int] = [:]
        for (i, name) in header.enumerated() {
            // Two columns of one name: which one Apple meant cannot be told.
            guard column[name] == nil || name.isEmpty || !needed.contains(name) else {
                throw ReadError.line(path, 1, "the column '\(name)' twice in the header")
            }
            if column[name] == nil { column[name] = i }
        }
        let missing = needed.filter { column[$0] == nil }
        guard missing.isEmpty else {
            throw ReadError.line(path, 1, "not an App Store Connect financial report: no column \(missing.map { "'\($0)'" }.joined(separator: ", ")) in the header")
        }

        var rows: [Row] = []
        var footer: [String: (line: Int, value: Substring)] = [:]
        for (index, line) in lines.enumerated().dropFirst() {
            let number = index + 1
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            let first = fields.first.map { String($0).trimmingCharacters(in: .whitespaces) } ?? ""
            if first.hasPrefix("Total_") {
                guard fields.count >= 2 else { throw ReadError.line(path, number, "\(first) has no value") }
                guard footer[first] == nil else { throw ReadError.line(path, number, "\(first) a second time") }
                footer[first] = (number, fields[1])
                continue
            }
            guard footer.isEmpty else {
                throw ReadError.line(path, number, "a row after the footer (Total_ rows end the report)")
            }
            if line.allSatisfy({ $0 == "\t" || $0 == " " }) { continue }
            guard fields.count >= header.count else {
                throw ReadError.line(path, number, "\(fields.count) fields, the header has \(header.count)")
            }
            func field(_ name: String) -> String {
                String(fields[column[name]!]).trimmingCharacters(in: .whitespaces)
            }
            func day(_ name: String) throws -> Day {
                let text = field(name)
                // Apple writes MM/DD/YYYY.
                let parts = text.split(separator: "/")
                guard parts.count == 3, let m = Int(parts[0]), let d = Int(parts[1]), let y = Int(parts[2]),
                      parts[2].count == 4, (1...12).contains(m), (1...Day.daysIn(year: y, month: m)).contains(d) else {
                    throw ReadError.line(path, number, "\(name) '\(text)' is not a date MM/DD/YYYY")
                }
                return Day(year: y, month: m, day: d)
            }
            func currency(_ name: String) throws -> String {
                let code = field(name)
                guard Currency.isKnown(code) else { throw ReadError.line(path, number, "\(name) '\(code)' is not a currency iapledger knows") }
                return code
            }
            func minor(_ name: String, _ code: String) throws -> Int64 {
                let text = field(name)
                guard let value = ExactDecimal(text), let minor = minorUnits(value, code) else {
                    throw ReadError.line(path, number, "\(name) '\(text)' is not an amount in \(code) (\(Currency.exponent(code) ?? 2) decimals)")
                }
                // Bounded (a trillion minor units a row): more is no report of Apple's.
                guard minor.magnitude <= maxAmountMinor else {
                    throw ReadError.line(path, number, "\(name) '\(text)' is implausibly large for one row of a report")
                }
                return minor
            }
            let start = try day("Start Date"), end = try day("End Date")
            guard !(end < start) else { throw ReadError.line(path, number, "End Date \(end) is before Start Date \(start)") }
            let quantityText = field("Quantity")
            guard let quantity = Int64(quantityText), quantity.magnitude <= maxQuantity else {
                throw ReadError.line(path, number, "Quantity '\(quantityText)' is not a whole number of units (at most a billion a row)")
            }
            let partnerCurrency = try currency("Partner Share Currency"), customerCurrency = try currency("Customer Currency")
            // Partner Share is the unit's (Apple writes it positive on a return too); Extended
            // Partner Share is Quantity times it, so negative on a return.
            let share = abs(try minor("Partner Share", partnerCurrency))
            let extended = try minor("Extended Partner Share", partnerCurrency)
            let times = quantity.multipliedReportingOverflow(by: share)
            guard !times.overflow, extended == times.partialValue else {
                throw ReadError.line(path, number, "Extended Partner Share \(field("Extended Partner Share")) is not Quantity \(quantity) x Partner Share \(field("Partner Share"))")
            }
            let kind = field("Sales or Return")
            guard kind == "S" || kind == "R" else {
                throw ReadError.line(path, number, "Sales or Return '\(kind)' is neither S nor R")
            }
            // A sale's units are positive, a return's negative; a customer price takes the
            // sign of its units (a free unit's is 0).
            guard kind == "S" ? quantity > 0 : quantity < 0 else {
                throw ReadError.line(path, number, "Quantity \(quantity) on \(kind == "S" ? "a sale (S): a sale's units are positive" : "a return (R): a return's units are negative")")
            }
            let customerPrice = try minor("Customer Price", customerCurrency)
            guard kind == "S" ? customerPrice >= 0 : customerPrice <= 0 else {
                throw ReadError.line(path, number, "Customer Price \(field("Customer Price")) on \(kind == "S" ? "a sale (S) is negative" : "a return (R) is positive")")
            }
            let product = field("Vendor Identifier")
            guard !product.isEmpty else { throw ReadError.line(path, number, "no Vendor Identifier") }
            rows.append(Row(
                line: number, start: start, end: end, vendorIdentifier: product, title: field("Title"),
                quantity: quantity, partnerShareMinor: share, extendedPartnerShareMinor: extended,
                partnerShareCurrency: partnerCurrency, isReturn: kind == "R", countryOfSale: field("Country Of Sale"),
                promoCode: field("Promo Code"), customerPriceMinor: customerPrice,
                customerCurrency: customerCurrency, productTypeIdentifier: field("Product Type Identifier")))
        }

        // The footer, checked against the rows.
        let lastLine = lines.count
        func footerValue(_ name: String) throws -> (line: Int, value: String) {
            guard let f = footer[name] else {
                throw ReadError.line(path, lastLine, "no \(name) row: the report is cut short or not Apple's")
            }
            return (f.line, String(f.value).trimmingCharacters(in: .whitespaces))
        }
        let rowsFooter = try footerValue("Total_Rows")
        guard let totalRows = Int(rowsFooter.value), totalRows == rows.count else {
            throw ReadError.line(path, rowsFooter.line, "Total_Rows \(rowsFooter.value) but the report has \(rows.count) rows")
        }
        let amountFooter = try footerValue("Total_Amount")
        guard let totalAmount = ExactDecimal(amountFooter.value) else {
            throw ReadError.line(path, amountFooter.line, "Total_Amount '\(amountFooter.value)' is not an amount")
        }
        // A report is one region's fiscal month, paid in one currency: its Total_Amount is the
        // sum of its Extended Partner Share in that currency.
        if let first = rows.first, let other = rows.first(where: { $0.start != first.start || $0.end != first.end }) {
            throw ReadError.line(path, other.line, "the period \(ClosedDays(start: other.start, end: other.end)), but line \(first.line) has \(ClosedDays(start: first.start, end: first.end)): a report covers one fiscal month")
        }
        if let first = rows.first, let other = rows.first(where: { $0.partnerShareCurrency != first.partnerShareCurrency }) {
            throw ReadError.line(path, other.line, "Partner Share Currency \(other.partnerShareCurrency), but line \(first.line) has \(first.partnerShareCurrency): a report pays in one currency")
        }
        if let code = rows.first?.partnerShareCurrency {
            let sum = try exactSum(rows.map { Int128($0.extendedPartnerShareMinor) }, path: path)
            guard minorUnits(totalAmount, code) == sum else {
                throw ReadError.line(path, amountFooter.line, "Total_Amount \(amountFooter.value) but the rows' Extended Partner Share sums to \(Currency.format(minor: sum, currency: code)) \(code)")
            }
        }
        let unitsFooter = try footerValue("Total_Units")
        // Total_Units: the example reports in Apple's format give the units sold, returns left out (20 for 20 sold and
        // one returned); the net count is accepted too, as Apple does not document which.
        let sold = try exactSum(rows.map { Int128(max($0.quantity, 0)) }, path: path)
        let net = try exactSum(rows.map { Int128($0.quantity) }, path: path)
        guard let totalUnits = Int64(unitsFooter.value), totalUnits == sold || totalUnits == net else {
            throw ReadError.line(path, unitsFooter.line, "Total_Units \(unitsFooter.value) but the rows sell \(sold) units (\(net) net of returns)")
        }
        return FinancialReport(path: path, rows: rows, totalRows: totalRows, totalAmount: totalAmount, totalUnits: totalUnits)
    }

    /// The sum of `values`, exact, or an error naming `path` when it does not fit 64 bits.
    public static func exactSum(_ values: [Int128], path: String) throws -> Int64 {
        guard let sum = Int64(exactly: values.reduce(Int128(0), +)) else {
            throw ReadError.file(path, "amounts too large to add up: not a report of Apple's")
        }
        return sum
    }

    /// Minor units of `code` for a major-unit amount, trailing zero decimals beyond the
    /// currency's dropped (Apple prints JPY as `119.00`); nil when a decimal beyond them is not zero.
    public static func minorUnits(_ value: ExactDecimal, _ code: String) -> Int64? {
        guard let e = Currency.exponent(code) else { return nil }
        var v = value
        while v.scale > e && v.mantissa % 10 == 0 { v = ExactDecimal(mantissa: v.mantissa / 10, scale: v.scale - 1) }
        return Currency.minorUnits(ofMajor: v, currency: code)
    }
}

/// Days from `start` through `end`, both included: a fiscal month of Apple's.
public struct ClosedDays: Hashable, Comparable, CustomStringConvertible {
    public var start: Day
    public var end: Day
    public init(start: Day, end: Day) { self.start = start; self.end = end }
    public static func < (a: ClosedDays, b: ClosedDays) -> Bool { (a.start, a.end) < (b.start, b.end) }
    public var description: String { "\(start)..\(end)" }
}
