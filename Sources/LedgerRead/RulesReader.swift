import Foundation
import LedgerCore

/// Reads `rules/{storefronts,prices,products,fx}.csv`. A broken rules file stops the run
/// (with file and line): posting by half-read rules would put wrong figures in the books.
public enum RulesReader {
    public static let files = ["storefronts.csv", "prices.csv", "products.csv", "fx.csv"]

    public static func read(rulesDirectory dir: URL, displayPrefix: String = "rules/") throws -> Rules {
        var files: [String: [UInt8]] = [:]
        for name in Self.files {
            let path = dir.appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                var st = stat()
                if lstat(path, &st) != 0 {
                    throw ReadError.file(displayPrefix + name, "is missing: the rules are \(Self.files.joined(separator: ", ")) in \(displayPrefix) (README, \"Rules\"); restore it from a backup and run again (the example `iapledger init` writes holds example prices and rates, not yours)")
                }
                if stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR {
                    throw ReadError.file(displayPrefix + name, "is a folder, not a file: move it aside, put the rules file there, and run again")
                }
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                let code = fd < 0 ? errno : EIO
                if fd >= 0 { close(fd) }
                throw ReadError.unreadableInput(path, shown: displayPrefix + name, code: code, inInbox: false)
            }
            files[name] = Array(data)
        }
        return try parse(files: files, displayPrefix: displayPrefix)
    }

    /// The rules of the files' bytes, by name (`prices.csv` and the rest): the workspace's, or
    /// those a run kept in the ledger.
    ///
    /// - Parameter checkCodes: refuse a storefront code not written as Apple writes them and a
    ///   price naming a product or storefront the other files have no row for (checks added
    ///   after nights had run: the copies earlier runs kept, which `verify` reads back, are read
    ///   as those nights read them).
    public static func parse(files: [String: [UInt8]], displayPrefix: String = "rules/", checkCodes: Bool = true) throws -> Rules {
        guard !checkCodes else { return try parse(files: files, displayPrefix: displayPrefix, checkCodes: true, comments: true) }
        // A copy kept by an earlier version holds no comment lines (they were refused), but may
        // hold a row that would read as one (an id starting with #): read as written first.
        do { return try parse(files: files, displayPrefix: displayPrefix, checkCodes: false, comments: false) }
        catch { return try parse(files: files, displayPrefix: displayPrefix, checkCodes: false, comments: true) }
    }

    static func parse(files: [String: [UInt8]], displayPrefix: String, checkCodes: Bool, comments: Bool) throws -> Rules {
        var digests: [String: String] = [:]
        func load(_ name: String, _ required: [String]) throws -> CSVTable {
            let display = displayPrefix + name
            guard let data = files[name] else { throw ReadError.file(display, "cannot be read (missing or unreadable)") }
            digests[name] = Hashing.sha256Hex(data)
            guard let text = String(validatingUTF8Data: Data(data)) else {
                // Named at its line, as a bad row is (a file saved in Latin-1 by a spreadsheet).
                let at = UTF8Position.firstInvalid(in: data) ?? (line: 1, offset: 0)
                throw ReadError.line(display, at.line, "is not valid UTF-8 text: its first byte that is not is at byte offset \(at.offset) of the file; save it as UTF-8")
            }
            let table: CSVTable
            do {
                table = try CSVTable(path: display, text: Substring(comments ? withoutComments(text) : text), required: required)
            } catch let e as CSVError {
                throw ReadError.line(display, e.line, e.message)
            }
            // Values are read by column name: a row with a value past the header's last column
            // (a decimal comma, `1,0823`, splits a value in two) would read a column's neighbour
            // or a part of its value, so it stops the read, named. Empty fields past it (a
            // spreadsheet's trailing commas) and a short row (its missing values read as empty,
            // and refused as such where a value is needed) are read as before; the copies earlier
            // runs kept are read as those nights read them.
            let width = table.header.count
            if checkCodes, let row = table.rows.first(where: { $0.fields.count > width && $0.fields[width...].contains { !CSV.trimmed($0).isEmpty } }) {
                throw ReadError.line(display, row.line, "has \(row.fields.count) fields, the header has \(width) (a decimal comma? decimals are written with a point, 1.0823; a value holding a comma is quoted)")
            }
            return table
        }
        let sf = try load("storefronts.csv", ["storefront", "currency", "tax_rate", "tax_included", "effective_from"])
        let pr = try load("prices.csv", ["product_id", "storefront", "price", "effective_from"])
        let pd = try load("products.csv", ["product_id", "type", "units"])
        let fx = try load("fx.csv", ["month", "currency", "rate"])

        var storefronts: [StorefrontRule] = []
        var seen = Set<String>()
        for row in sf.rows {
            let err = { (m: String) in ReadError.line(sf.path, row.line, m) }
            let code = sf.value(row, "storefront"), cur = sf.value(row, "currency")
            guard !code.isEmpty else { throw err("storefront is empty") }
            if checkCodes, let problem = storefrontCodeProblem(code) { throw err(problem) }
            guard Currency.isKnown(cur) else { throw err("currency \"\(cur)\" is not a known ISO 4217 code") }
            guard let tax = ExactDecimal(sf.value(row, "tax_rate")), !tax.isNegative, tax < .one else {
                throw err("tax_rate \"\(sf.value(row, "tax_rate"))\" is not a decimal from 0 to below 1 of digits and one point, with at most 18 decimals (such as 0.19)")
            }
            guard let incl = parseBool(sf.value(row, "tax_included")) else {
                throw err("tax_included \"\(sf.value(row, "tax_included"))\" must be true or false (yes/no and 1/0 are read too)")
            }
            guard let from = Day(iso: sf.value(row, "effective_from")) else { throw err("effective_from must be a date YYYY-MM-DD") }
            guard seen.insert("\(code)|\(from)").inserted else { throw err("a second row for \(code) effective \(from)") }
            storefronts.append(StorefrontRule(storefront: code, currency: cur, taxRate: tax, taxIncluded: incl, effectiveFrom: from))
        }

        var products: [ProductRule] = []
        seen = []
        for row in pd.rows {
            let err = { (m: String) in ReadError.line(pd.path, row.line, m) }
            let id = pd.value(row, "product_id")
            guard !id.isEmpty else { throw err("product_id is empty") }
            guard let type = ProductType(rawValue: pd.value(row, "type")) else {
                throw err("type \"\(pd.value(row, "type"))\" is not one of \(ProductType.names())")
            }
            let unitsText = pd.value(row, "units")
            // Digits past what Int64 holds are a whole number too large (said below), not none.
            let digits = unitsText.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            guard let units = unitsText.isEmpty ? 0 : Int64(unitsText) ?? (digits ? .max : nil), units >= 0 else {
                throw err("units \"\(unitsText)\" is not a whole number >= 0")
            }
            // Units credited for one unit bought; times the largest quantity a transaction may
            // have (StoreBounds), the units an order must credit stay a number the ledger holds.
            guard units <= Self.maxUnits else { throw err("units \(unitsText) is more than \(Self.maxUnits) credited for one unit bought: a typo?") }
            guard seen.insert(id).inserted else { throw err("a second row for product \(id)") }
            products.append(ProductRule(productId: id, type: type, units: units))
        }

        let productIds = Set(products.map(\.productId)), storefrontCodes = Set(storefronts.map(\.storefront))
        var prices: [PriceRule] = []
        var priceLines: [Int] = []
        seen = []
        for row in pr.rows {
            let err = { (m: String) in ReadError.line(pr.path, row.line, m) }
            let id = pr.value(row, "product_id"), code = pr.value(row, "storefront")
            guard !id.isEmpty, !code.isEmpty else { throw err("product_id and storefront are required") }
            if checkCodes, let problem = storefrontCodeProblem(code) { throw err(problem) }
            // A row naming a product or storefront the other files do not have prices no sale
            // (a typo such as `coins.10O` left the old price in force without a word).
            guard !checkCodes || productIds.contains(id) else {
                throw err("product \(id) has no row in \(pd.path): a price for it prices nothing (a typo? add the product there, or remove this row)")
            }
            guard !checkCodes || storefrontCodes.contains(code) else {
                throw err("storefront \(code) has no row in \(sf.path): a price in it prices nothing (a typo? add the storefront there, or remove this row)")
            }
            guard let price = ExactDecimal(pr.value(row, "price")), !price.isNegative else {
                throw err("price \"\(pr.value(row, "price"))\" is not a decimal >= 0 of digits and one point, with at most 18 decimals (such as 0.99)")
            }
            // The bound a signed price has (10 billion units): past it a sale's amounts could
            // pass what the ledger's integers hold.
            guard !checkCodes || price <= Self.maxPrice else {
                throw err("price \(price) is more than \(Self.maxPrice), the most a price may be")
            }
            // A price of 0 made every sale of a product "free": only a non-consumable may be
            // listed at 0 (Apple's free tier, for a free time-limited trial of it); a trial or a
            // zero-price offer of anything else comes with its transaction, not the price list.
            if price.isZero, let type = products.first(where: { $0.productId == id })?.type, type != .nonConsumable {
                throw err("price 0 for \(id), a \(type.rawValue) product: only a non-consumable may be priced 0 (free trials and zero-price offers of other products come with their transactions)")
            }
            guard let from = Day(iso: pr.value(row, "effective_from")) else { throw err("effective_from must be a date YYYY-MM-DD") }
            guard seen.insert("\(id)|\(code)|\(from)").inserted else { throw err("a second price for \(id) in \(code) effective \(from)") }
            prices.append(PriceRule(productId: id, storefront: code, price: price, effectiveFrom: from))
            priceLines.append(row.line)
        }
        try checkPriceDecimals(prices, lines: priceLines, storefronts: storefronts, path: pr.path)

        var rates: [(Month, String, ExactDecimal)] = []
        seen = []
        for row in fx.rows {
            let err = { (m: String) in ReadError.line(fx.path, row.line, m) }
            guard let m = Month(iso: fx.value(row, "month")) else { throw err("month must be YYYY-MM") }
            let cur = fx.value(row, "currency")
            guard Currency.isKnown(cur) else { throw err("currency \"\(cur)\" is not a known ISO 4217 code") }
            guard let r = ExactDecimal(fx.value(row, "rate")), !r.isNegative, !r.isZero else {
                throw err("rate \"\(fx.value(row, "rate"))\" is not a positive decimal of digits and one point, with at most 18 decimals and 18 digits in all (such as 1.0823)")
            }
            // No currency is worth a million units of another (a point misplaced, a rate
            // written the wrong way round); past it a sale's reporting amounts could pass
            // what the ledger's integers hold.
            guard !checkCodes || r <= Self.maxRate else {
                throw err("rate \(r) is more than \(Self.maxRate) units of the reporting currency for one \(cur): a point misplaced, or the rate the wrong way round?")
            }
            guard seen.insert("\(m)|\(cur)").inserted else { throw err("a second rate for \(cur) in \(m)") }
            rates.append((m, cur, r))
        }
        var rules = Rules(storefronts: storefronts, prices: prices, products: products, fx: rates)
        rules.sourceSHA256 = digests
        rules.sourceData = files
        return rules
    }

    /// A price with more decimals than its storefront's currency has (`0.999` in USD) stops the
    /// run here, naming file and line, as every other bad rules value does: it only surfaced
    /// later, as a MISSING_RULE of each sale it should have priced. Checked against the currency
    /// of every storefront row in force while the price is (from its `effective_from` to the
    /// next price of the same product and storefront): a storefront may change currency. A
    /// storefront with no row then is MISSING_RULE at posting, as before.
    static func checkPriceDecimals(_ prices: [PriceRule], lines: [Int], storefronts: [StorefrontRule], path: String) throws {
        let rowsByStorefront = Dictionary(grouping: storefronts, by: \.storefront).mapValues { $0.sorted { $0.effectiveFrom < $1.effectiveFrom } }
        var nextFrom: [Int: Day] = [:]
        let byKey = Dictionary(grouping: prices.indices, by: { "\(prices[$0].productId)|\(prices[$0].storefront)" })
        for indices in byKey.values {
            let sorted = indices.sorted { prices[$0].effectiveFrom < prices[$1].effectiveFrom }
            for (a, b) in zip(sorted, sorted.dropFirst()) { nextFrom[a] = prices[b].effectiveFrom }
        }
        for (i, p) in prices.enumerated() {
            let rows = rowsByStorefront[p.storefront] ?? []
            let until = nextFrom[i]
            // The row in force on the price's first day, and every row that starts while it is.
            let inForce = rows.last { $0.effectiveFrom <= p.effectiveFrom }
            let later = rows.filter { row in row.effectiveFrom > p.effectiveFrom && until.map { row.effectiveFrom < $0 } ?? true }
            for sf in (inForce.map { [$0] } ?? []) + later {
                guard let exponent = Currency.exponent(sf.currency), p.price.scale > exponent else { continue }
                throw ReadError.line(path, lines[i], "price \(p.price) for \(p.productId) in \(p.storefront) has more decimals than \(sf.currency) allows (\(exponent); the storefront's currency from \(sf.effectiveFrom) in storefronts.csv)")
            }
        }
    }

    /// Why `code` is not a storefront code as Apple writes them (ISO 3166-1 alpha-3 in
    /// capitals: `SWE`), or nil. Sales name their storefront that way (signed records and
    /// orders in lower case are read in capitals), so a row keyed `swe` or `SE` matched none.
    static func storefrontCodeProblem(_ code: String) -> String? {
        let bytes = Array(code.utf8)
        if bytes.count == 3 && bytes.allSatisfy({ (65...90).contains($0) }) { return nil }
        let upper = bytes.count == 3 && bytes.allSatisfy({ (65...90).contains($0) || (97...122).contains($0) })
        return "storefront \"\(code)\" is not a storefront code: three capital letters, as Apple writes them (ISO 3166-1 alpha-3\(upper ? ": \(code.uppercased())" : ", such as SWE"))"
    }

    /// The text with each comment line (its first character other than a space or tab `#`,
    /// outside a quoted field) made blank: the CSV reader skips it, and every other line keeps
    /// its number for the messages.
    static func withoutComments(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "#")) else { return text }
        // By bytes: a Swift string counts "\r\n" as one character, so a file saved with
        // Windows line ends would not split on "\n" (its line ends are kept as they are).
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var inQuotes = false
        for (i, line) in text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            if i > 0 { out.append(0x0A) }
            let first = line.first { $0 != 0x20 && $0 != 0x09 }
            if !inQuotes && first == UInt8(ascii: "#") {
                if line.last == 0x0D { out.append(0x0D) }   // a blank line, with its line end as written
                continue
            }
            out.append(contentsOf: line)
            for c in line where c == UInt8(ascii: "\"") { inQuotes.toggle() }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The highest FX rate the rules may give.
    static let maxRate = ExactDecimal(mantissa: 1_000_000, scale: 0)

    /// The most virtual units a product may credit for one unit bought (a trillion).
    public static let maxUnits: Int64 = 1_000_000_000_000

    /// The highest unit price the rules may give: `StoreBounds.maxPriceMilliunits`, in units.
    static let maxPrice = ExactDecimal(mantissa: StoreBounds.maxPriceMilliunits / 1000, scale: 0)

    static func parseBool(_ s: String) -> Bool? {
        switch s.lowercased() {
        case "true", "yes", "1": return true
        case "false", "no", "0": return false
        default: return nil
        }
    }
}

extension String {
    /// Decodes UTF-8, refusing invalid bytes instead of replacing them.
    public init?(validatingUTF8Data data: Data) {
        guard let s = String(data: data, encoding: .utf8) else { return nil }
        self = s
    }
}
