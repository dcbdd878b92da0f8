import Foundation
import GRDB
import XCTest
import ZIPFoundation
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerRead
@testable import LedgerStore
@testable import LedgerReport

/// Shared helpers of the test suite.
enum Fixtures {
    static var root: URL { Bundle.module.url(forResource: "Fixtures", withExtension: nil)! }
    static func url(_ relative: String) -> URL { root.appendingPathComponent(relative) }
    static func text(_ relative: String) throws -> String { try String(contentsOf: url(relative), encoding: .utf8) }

    /// `../shared/fixtures` beside the project, when this machine has it (never required).
    static var shared: URL? {
        var dir = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { dir.deleteLastPathComponent() }
        let candidate = dir.deletingLastPathComponent().appendingPathComponent("shared/fixtures")
        return FileManager.default.fileExists(atPath: candidate.path) ? candidate : nil
    }
}

/// A scratch workspace in a temporary folder, with small hand-made rules.
struct TestWorkspace {
    let root: URL
    var workspace: Workspace { Workspace(root) }

    static let defaultConfig = """
    reporting_currency = "USD"
    bundle_ids = ["com.example.coins"]
    default_storefront = "USA"
    # The tests' receipts mostly come without orders: booked at once (OrderWaitTests sets a wait).
    order_wait_days = 0

    [commission]
    standard = "0.30"
    reduced = "0.15"
    small_business = []
    subscription_reduced_after_days = 365
    subscription_grace_days = 60
    """

    static let defaultStorefronts = """
    storefront,currency,tax_rate,tax_included,effective_from
    USA,USD,0,false,2020-01-01
    DEU,EUR,0.19,true,2020-01-01
    JPN,JPY,0.10,true,2020-01-01
    KWT,KWD,0,true,2020-01-01
    """

    static let defaultPrices = """
    product_id,storefront,price,effective_from
    coins.100,USA,0.99,2020-01-01
    coins.100,DEU,1.09,2020-01-01
    coins.100,JPN,160,2020-01-01
    coins.100,KWT,0.300,2020-01-01
    coins.550,USA,4.99,2020-01-01
    coins.550,USA,5.99,2026-10-01
    vip.monthly,USA,9.99,2020-01-01
    """

    static let defaultProducts = """
    product_id,type,units
    coins.100,consumable,100
    coins.550,consumable,550
    vip.monthly,auto_renewable,0
    """

    static let defaultFX = """
    month,currency,rate
    2026-09,EUR,1.05
    2026-10,EUR,1.10
    2026-09,JPY,0.0068
    2026-10,JPY,0.006712
    2026-09,KWD,3.25
    2026-10,KWD,3.2541
    """

    init(config: String = defaultConfig, storefronts: String = defaultStorefronts, prices: String = defaultPrices,
         products: String = defaultProducts, fx: String = defaultFX) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-test-\(UUID().uuidString)")
        for sub in ["rules", "inbox/receipts", "inbox/orders", "inbox/signed"] {
            try FileManager.default.createDirectory(at: root.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        try write("iapledger.toml", config)
        try write("rules/storefronts.csv", storefronts)
        try write("rules/prices.csv", prices)
        try write("rules/products.csv", products)
        try write("rules/fx.csv", fx)
    }

    func write(_ relative: String, _ text: String) throws {
        let url = root.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    func writeData(_ relative: String, _ data: Data) throws {
        let url = root.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    func append(_ relative: String, _ text: String) throws {
        let url = root.appendingPathComponent(relative)
        let h = try FileHandle(forWritingTo: url)
        h.seekToEndOfFile()
        h.write(Data(text.utf8))
        h.closeFile()
    }

    @discardableResult
    func run(_ asOf: String) throws -> NightlyRun.Result {
        try NightlyRun(workspace: workspace, asOf: Day(iso: asOf)!).run()
    }

    func remove() { try? FileManager.default.removeItem(at: root) }
}

/// Builds legacy verifyReceipt responses the way Apple writes them (scalars as strings).
enum Receipt {
    static func ms(_ iso: String) -> Int64 { ISOTimestamp.milliseconds(iso)! }

    static func item(_ id: String, product: String = "coins.100", quantity: Int = 1, purchased: String,
                     cancelled: String? = nil, original: String? = nil, expires: String? = nil, token: String? = nil,
                     trial: Bool = false, upgraded: Bool = false) -> String {
        var fields = [
            "\"quantity\": \"\(quantity)\"", "\"product_id\": \"\(product)\"", "\"transaction_id\": \"\(id)\"",
            "\"original_transaction_id\": \"\(original ?? id)\"", "\"purchase_date\": \"\(purchased.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: "")) Etc/GMT\"",
            "\"purchase_date_ms\": \"\(ms(purchased))\"", "\"is_trial_period\": \"\(trial)\"",
        ]
        if let c = cancelled { fields += ["\"cancellation_date_ms\": \"\(ms(c))\"", "\"cancellation_reason\": \"0\""] }
        if let e = expires { fields += ["\"expires_date_ms\": \"\(ms(e))\""] }
        if let t = token { fields += ["\"app_account_token\": \"\(t)\""] }
        if upgraded { fields += ["\"is_upgraded\": \"true\""] }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    static func response(_ items: [String], environment: String = "Production", bundle: String = "com.example.coins",
                         status: Int = 0) -> String {
        "{\"status\": \(status), \"environment\": \"\(environment)\", \"receipt\": {\"receipt_type\": \"\(environment == "Sandbox" ? "ProductionSandbox" : "Production")\", \"bundle_id\": \"\(bundle)\", \"application_version\": \"1\", \"in_app\": [\(items.joined(separator: ", "))]}}"
    }
}

/// Reads an .xlsx back (cell values as text, by sheet name) through ZIPFoundation.
enum XLSXReader {
    static func sheets(_ url: URL) throws -> [String: [[String]]] {
        let archive = try Archive(url: url, accessMode: .read)
        func read(_ path: String) throws -> String {
            guard let entry = archive[path] else { throw NSError(domain: "xlsx", code: 1, userInfo: [NSLocalizedDescriptionKey: "missing \(path)"]) }
            var data = Data()
            _ = try archive.extract(entry) { data.append($0) }
            return String(decoding: data, as: UTF8.self)
        }
        let workbook = try read("xl/workbook.xml")
        let names = matches(workbook, #"<sheet name="([^"]*)""#).map { unescape($0[0]) }
        var out: [String: [[String]]] = [:]
        for (i, name) in names.enumerated() {
            let xml = try read("xl/worksheets/sheet\(i + 1).xml")
            var rows: [[String]] = []
            for row in matches(xml, #"<row r="(\d+)"[^>]*>(.*?)</row>"#) {
                let r = Int(row[0])! - 1
                while rows.count <= r { rows.append([]) }
                for cell in matches(row[1], #"<c r="([A-Z]+)\d+"[^>]*?(?:/>|>(.*?)</c>)"#) {
                    let col = cell[0].unicodeScalars.reduce(0) { $0 * 26 + Int($1.value) - 64 } - 1
                    var value = ""
                    if let v = matches(cell[1], #"<v>(.*?)</v>"#).first { value = v[0] }
                    if let t = matches(cell[1], #"<t[^>]*>(.*?)</t>"#).first { value = unescape(t[0]) }
                    while rows[r].count <= col { rows[r].append("") }
                    rows[r][col] = value
                }
            }
            out[name] = rows
        }
        return out
    }

    /// A numeric cell's text (as libxlsxwriter wrote it, `%.16G`) back in minor units.
    static func minor(_ text: String, decimals: Int) -> Int64? {
        guard var d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
        for _ in 0..<decimals { d *= 10 }
        var rounded = Decimal()
        NSDecimalRound(&rounded, &d, 0, .plain)
        return Int64(truncating: rounded as NSDecimalNumber)
    }

    static func matches(_ s: String, _ pattern: String) -> [[String]] {
        let re = try! NSRegularExpression(pattern: pattern, options: [.dotMatchesLineSeparators])
        let ns = s as NSString
        return re.matches(in: s, range: NSRange(location: 0, length: ns.length)).map { m in
            (1..<m.numberOfRanges).map { m.range(at: $0).location == NSNotFound ? "" : ns.substring(with: m.range(at: $0)) }
        }
    }

    static func unescape(_ s: String) -> String {
        s.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}

/// A hand with write access to the ledger file, covering its tracks.
enum Tamper {
    /// Runs `sql` on the ledger at `path` past the triggers that refuse it, then creates the
    /// triggers again as they were (only the content checks can catch it).
    static func run(_ path: String, past trigger: String, _ sql: String) throws {
        try run(path, pastAll: [trigger], sql)
    }

    static func run(_ path: String, pastAll triggers: [String], _ sql: String) throws {
        let db = try DatabaseQueue(path: path)
        let create = try db.read { d in try triggers.map { try String.fetchOne(d, sql: "SELECT sql FROM sqlite_schema WHERE name = ?", arguments: [$0])! } }
        try db.write { d in
            for t in triggers { try d.execute(sql: "DROP TRIGGER \(t)") }
            try d.execute(sql: sql)
            for c in create { try d.execute(sql: c) }
        }
    }
}

extension Ledger {
    /// The texts (other cells empty) of a table of the production finance workbook's Run Info
    /// as of `asOf`, listing at most `findingsLimit` records and findings of each code.
    func runInfoTexts(_ key: String, asOf: String, findingsLimit: Int) throws -> [[String]] {
        try read { r in
            var report = FinanceReport(reader: r, book: .production, asOf: Day(iso: asOf)!, reportingCurrency: "USD",
                                       toolVersion: "t", runId: nil, layout: try ReportLayout.shipped(.finance))
            report.findingsLimit = findingsLimit
            let table = try XCTUnwrap(try report.runInfoSheet().tables.first { $0.key == key })
            var out: [[String]] = []
            try table.rows { row in out.append(row.cells.map { if case .text(let t) = $0 { return t }; return "" }) }
            return out
        }
    }
}
