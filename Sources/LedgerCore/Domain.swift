import Foundation

/// The two books of the ledger. Sandbox activity never touches a production figure.
public enum Book: String, CaseIterable, Sendable, Codable {
    case production, sandbox

    /// The book of a store environment, or nil for environments that are not real store
    /// transactions (`Xcode`, `LocalTesting`) or unknown ones.
    public init?(storeEnvironment: String) {
        switch storeEnvironment.lowercased() {
        case "production": self = .production
        case "sandbox": self = .sandbox
        default: return nil
        }
    }
}

/// The kinds of ledger entry (accounting.md).
public enum EntryKind: String, CaseIterable, Sendable, Codable {
    case sale, refund, refundReversal = "refund_reversal"
}

/// The ledger's accounts, named as in accounting.md.
public enum LedgerAccount {
    public static let receivable = "Assets:AppStore:Receivable"
    public static let commission = "Expenses:AppStore:Commission"
    public static let sales = "Revenue:InApp:Sales"
    public static let refunds = "Revenue:InApp:Refunds"
}

/// How an entry's postings follow from its amounts (accounting.md: "A sale", "Refunds",
/// "Refund reversals"): each entry of a kind has the same three postings, line by line, each
/// an account and the entry's net, commission or proceeds with a sign. The ledger stores the
/// entry's amounts once and these nine rules (`posting_rule`); its `posting` view gives each
/// posting from them, so a posting can never disagree with its entry.
public struct PostingRule: Sendable, Equatable {
    public var kind: EntryKind
    /// 1, 2, 3: the posting's place in its entry.
    public var line: Int
    public var account: String
    /// Which of the entry's amounts the posting takes, each -1, 0 or 1 (exactly one non-zero).
    public var net: Int64, commission: Int64, proceeds: Int64

    public init(kind: EntryKind, line: Int, account: String, net: Int64, commission: Int64, proceeds: Int64) {
        self.kind = kind; self.line = line; self.account = account
        self.net = net; self.commission = commission; self.proceeds = proceeds
    }

    /// `all` as the ledger stores and reads them (`posting_rule`, by kind and line).
    public static var inStoredOrder: [PostingRule] { all.sorted { ($0.kind.rawValue, $0.line) < ($1.kind.rawValue, $1.line) } }

    public static let all: [PostingRule] = [
        PostingRule(kind: .sale, line: 1, account: LedgerAccount.receivable, net: 0, commission: 0, proceeds: 1),
        PostingRule(kind: .sale, line: 2, account: LedgerAccount.commission, net: 0, commission: 1, proceeds: 0),
        PostingRule(kind: .sale, line: 3, account: LedgerAccount.sales, net: -1, commission: 0, proceeds: 0),
        PostingRule(kind: .refund, line: 1, account: LedgerAccount.refunds, net: 1, commission: 0, proceeds: 0),
        PostingRule(kind: .refund, line: 2, account: LedgerAccount.commission, net: 0, commission: -1, proceeds: 0),
        PostingRule(kind: .refund, line: 3, account: LedgerAccount.receivable, net: 0, commission: 0, proceeds: -1),
        PostingRule(kind: .refundReversal, line: 1, account: LedgerAccount.refunds, net: -1, commission: 0, proceeds: 0),
        PostingRule(kind: .refundReversal, line: 2, account: LedgerAccount.commission, net: 0, commission: 1, proceeds: 0),
        PostingRule(kind: .refundReversal, line: 3, account: LedgerAccount.receivable, net: 0, commission: 0, proceeds: 1),
    ]

    /// The postings of an entry of `kind` with these figures, in line order.
    public static func postings(kind: EntryKind, figures f: SaleFigures) -> [PostingDraft] {
        all.filter { $0.kind == kind }.map { r in
            PostingDraft(account: r.account, currency: f.currency,
                         amountMinor: r.net * f.netMinor + r.commission * f.commissionMinor + r.proceeds * f.proceedsMinor,
                         reportingAmountMinor: r.net * f.netReportingMinor + r.commission * f.commissionReportingMinor
                             + r.proceeds * f.proceedsReportingMinor)
        }
    }
}

/// Where a record came from: a workspace-relative file path and a 1-based line.
public struct SourceLocation: Hashable, Sendable, CustomStringConvertible {
    public var path: String
    public var line: Int
    public init(path: String, line: Int) { self.path = path; self.line = line }
    public var description: String { "\(path):\(line)" }
}

/// One store transaction as a source reported it, normalised across legacy receipts and
/// signed transactions. Times are milliseconds since the epoch (UTC).
public struct TransactionObservation: Sendable, Equatable {
    public var transactionId: String
    public var originalTransactionId: String?
    public var productId: String
    public var quantity: Int64
    public var purchaseMs: Int64
    public var expiresMs: Int64?
    /// Legacy `cancellation_date_ms` or signed `revocationDate`.
    public var cancellationMs: Int64?
    /// Thousandths of a percent refunded (100000 = 100%); nil means a full refund.
    public var revocationPercentage: Int64?
    public var book: Book
    public var bundleId: String?
    public var storefront: String?
    public var currency: String?
    /// App Store Server API `price`, tax-inclusive, covering the quantity.
    public var priceMilliunits: Int64?
    public var appAccountToken: String?
    /// Whether the transaction carries an offer (a signed price then may differ from the price rule).
    public var hasOffer: Bool
    /// A free trial period (legacy `is_trial_period`): nothing was paid, so no sale is posted.
    public var isFreeTrial: Bool
    /// A subscription the user upgraded from (legacy `is_upgraded`, signed `isUpgraded`): its
    /// cancellation is the upgrade, for which Apple refunds the unused time, prorated.
    public var upgraded: Bool
    /// A refund Apple calls prorated (`REFUND_PRORATED`) whose record gives no share
    /// (`revocationPercentage`): posted in full, said.
    public var shareUnknown = false
    /// The record says what share was refunded (`REFUND_FULL`, or a percentage): no upgrade's
    /// refund is guessed at.
    public var shareSaid = false

    public init(transactionId: String, originalTransactionId: String? = nil, productId: String,
                quantity: Int64 = 1, purchaseMs: Int64, expiresMs: Int64? = nil, cancellationMs: Int64? = nil,
                revocationPercentage: Int64? = nil, book: Book, bundleId: String? = nil,
                storefront: String? = nil, currency: String? = nil, priceMilliunits: Int64? = nil,
                appAccountToken: String? = nil, hasOffer: Bool = false, isFreeTrial: Bool = false, upgraded: Bool = false) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.quantity = quantity
        self.purchaseMs = purchaseMs
        self.expiresMs = expiresMs
        self.cancellationMs = cancellationMs
        self.revocationPercentage = revocationPercentage
        self.book = book
        self.bundleId = bundleId
        self.storefront = storefront
        self.currency = currency
        self.priceMilliunits = priceMilliunits
        self.appAccountToken = appAccountToken
        self.hasOffer = hasOffer
        self.isFreeTrial = isFreeTrial
        self.upgraded = upgraded
    }

    public var purchaseDay: Day { Day(epochMilliseconds: purchaseMs) }

    /// Its own price (signed) as a gross in minor units of its own currency, or of the fewest
    /// decimals without one; nil without a price. A gross of 0 is a free purchase.
    public var ownGrossMinor: Int64? {
        priceMilliunits.map {
            Currency.minorUnits(milliunits: $0, exponent: currency.flatMap { Currency.exponent(Currency.isoUppercased($0)) } ?? 0)
        }
    }
}

/// One posting of an entry: debit positive, credit negative, in minor units of `currency`,
/// and the same amount in minor units of the reporting currency.
public struct PostingDraft: Sendable, Equatable {
    public var account: String
    public var currency: String
    public var amountMinor: Int64
    public var reportingAmountMinor: Int64
    public init(account: String, currency: String, amountMinor: Int64, reportingAmountMinor: Int64) {
        self.account = account
        self.currency = currency
        self.amountMinor = amountMinor
        self.reportingAmountMinor = reportingAmountMinor
    }
}

/// The rules a sale was computed by, kept with the entry so a trace can explain it.
public struct AppliedRules: Sendable, Equatable, Codable {
    public var storefront: String
    public var storefrontSource: String      // "transaction", "order ORD-1", "default_storefront"
    public var storefrontEffectiveFrom: String
    public var taxRate: String
    public var taxIncluded: Bool
    public var priceSource: String           // "signed price" or "prices.csv 0.99 from 2026-01-01"
    public var commissionRate: String
    public var commissionReason: String      // "standard", "small_business 2026-01-01..2026-12-31", ...
    public var fxRate: String
    public var fxMonth: String
    /// The price rule's unit price in major units (nil for a signed price or a free trial).
    public var unitPrice: String?
    public init(storefront: String, storefrontSource: String, storefrontEffectiveFrom: String, taxRate: String,
                taxIncluded: Bool, priceSource: String, commissionRate: String, commissionReason: String,
                fxRate: String, fxMonth: String, unitPrice: String? = nil) {
        self.unitPrice = unitPrice
        self.storefront = storefront
        self.storefrontSource = storefrontSource
        self.storefrontEffectiveFrom = storefrontEffectiveFrom
        self.taxRate = taxRate
        self.taxIncluded = taxIncluded
        self.priceSource = priceSource
        self.commissionRate = commissionRate
        self.commissionReason = commissionReason
        self.fxRate = fxRate
        self.fxMonth = fxMonth
    }
}

/// The figures of a sale (accounting.md, "A sale"), in transaction and reporting currency.
public struct SaleFigures: Sendable, Equatable, Codable {
    public var currency: String
    public var grossMinor: Int64
    public var taxMinor: Int64
    public var netMinor: Int64
    public var commissionMinor: Int64
    public var proceedsMinor: Int64
    public var reportingCurrency: String
    /// Gross in the reporting currency, `round(G * r * k)`; tax in it is gross minus net.
    public var grossReportingMinor: Int64
    public var netReportingMinor: Int64
    public var commissionReportingMinor: Int64
    public var proceedsReportingMinor: Int64
    public init(currency: String, grossMinor: Int64, taxMinor: Int64, netMinor: Int64, commissionMinor: Int64,
                proceedsMinor: Int64, reportingCurrency: String, grossReportingMinor: Int64, netReportingMinor: Int64,
                commissionReportingMinor: Int64, proceedsReportingMinor: Int64) {
        self.grossReportingMinor = grossReportingMinor
        self.currency = currency
        self.grossMinor = grossMinor
        self.taxMinor = taxMinor
        self.netMinor = netMinor
        self.commissionMinor = commissionMinor
        self.proceedsMinor = proceedsMinor
        self.reportingCurrency = reportingCurrency
        self.netReportingMinor = netReportingMinor
        self.commissionReportingMinor = commissionReportingMinor
        self.proceedsReportingMinor = proceedsReportingMinor
    }
}

/// An entry ready to be stored: balanced postings plus what explains them.
public struct EntryDraft: Sendable, Equatable {
    public var book: Book
    public var transactionId: String
    public var kind: EntryKind
    /// The date the entry is posted on (a closed month moves it to the first open day).
    public var date: Day
    /// The economic date (purchase or refund date).
    public var originalDate: Day
    public var late: Bool
    public var productId: String
    public var storefront: String
    public var figures: SaleFigures
    /// Thousandths of a percent, for refunds (100000 = full).
    public var refundPercentage: Int64?
    public var rules: AppliedRules
    public var postings: [PostingDraft]

    public init(book: Book, transactionId: String, kind: EntryKind, date: Day, originalDate: Day, late: Bool,
                productId: String, storefront: String, figures: SaleFigures, refundPercentage: Int64?,
                rules: AppliedRules, postings: [PostingDraft]) {
        self.book = book
        self.transactionId = transactionId
        self.kind = kind
        self.date = date
        self.originalDate = originalDate
        self.late = late
        self.productId = productId
        self.storefront = storefront
        self.figures = figures
        self.refundPercentage = refundPercentage
        self.rules = rules
        self.postings = postings
    }

    /// Whether every currency's postings and the reporting amounts each sum to zero.
    public var isBalanced: Bool {
        var perCurrency: [String: Int64] = [:]
        var reporting: Int64 = 0
        for p in postings {
            perCurrency[p.currency, default: 0] += p.amountMinor
            reporting += p.reportingAmountMinor
        }
        return reporting == 0 && perCurrency.values.allSatisfy { $0 == 0 }
    }

    /// Whether the postings are the ones its kind's posting rules give from its amounts: the
    /// only postings the ledger can hold (it derives them from the amounts, `PostingRule`).
    public var followsPostingRules: Bool {
        postings == PostingRule.postings(kind: kind, figures: figures)
    }
}

/// A data problem found while reading, verifying or posting: never fatal to the night.
public struct Finding: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var location: SourceLocation?
    public var transactionId: String?
    public init(code: String, message: String, location: SourceLocation? = nil, transactionId: String? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.transactionId = transactionId
    }
    public var description: String {
        (location.map { "\($0): " } ?? "") + "\(code): \(message)"
    }
}

/// The outcome of one input record (nothing is lost: every record ends in one of these).
public enum RecordOutcome: String, Sendable, Codable {
    case verified, pending, rejected
}

/// Hex SHA-256 helpers.
public enum Hashing {
    public static func sha256Hex<D: DataProtocol>(_ data: D) -> String {
        hex(SHA256Digest.of(data))
    }

    /// The hex SHA-256 of a text's UTF-8 bytes, hashed in place (no copy into `Data`).
    public static func sha256Hex<S: StringProtocol>(utf8 text: S) -> String {
        if let hex = text.utf8.withContiguousStorageIfAvailable({ sha256Hex(UnsafeRawBufferPointer($0)) }) { return hex }
        var copy = String(text)
        return copy.withUTF8 { sha256Hex(UnsafeRawBufferPointer($0)) }
    }

    static func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        let bytes = Array(bytes)
        return String(unsafeUninitializedCapacity: 2 * bytes.count) { out in
            var n = 0
            for b in bytes {
                out[n] = hexDigit(b >> 4); out[n + 1] = hexDigit(b & 0x0f)
                n += 2
            }
            return n
        }
    }

    @inline(__always) static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x57 + v }
}

extension AppliedRules {
    /// The rules as stored with an entry and covered by its hash: a JSON object with sorted
    /// keys and no spaces, `unitPrice` left out when nil. The same bytes Foundation's
    /// `JSONEncoder` with `.sortedKeys` writes (a test holds them together), made without
    /// it: posting a million entries should not pay for a general encoder a million times.
    public var canonicalJSON: String {
        var s = "{"
        func key(_ k: String, _ first: Bool = false) { if !first { s += "," }; s += "\"\(k)\":" }
        key("commissionRate", true); Self.appendString(commissionRate, to: &s)
        key("commissionReason"); Self.appendString(commissionReason, to: &s)
        key("fxMonth"); Self.appendString(fxMonth, to: &s)
        key("fxRate"); Self.appendString(fxRate, to: &s)
        key("priceSource"); Self.appendString(priceSource, to: &s)
        key("storefront"); Self.appendString(storefront, to: &s)
        key("storefrontEffectiveFrom"); Self.appendString(storefrontEffectiveFrom, to: &s)
        key("storefrontSource"); Self.appendString(storefrontSource, to: &s)
        key("taxIncluded"); s += taxIncluded ? "true" : "false"
        key("taxRate"); Self.appendString(taxRate, to: &s)
        if let unitPrice { key("unitPrice"); Self.appendString(unitPrice, to: &s) }
        s += "}"
        return s
    }

    /// Reads rules as the ledger stores them (`canonicalJSON`; any flat JSON object of these
    /// keys with string, boolean or null values, without spaces) without Foundation's
    /// `JSONDecoder`, whose cost was most of reading an entry back: `verify` reads every
    /// entry's, and the night the sale of every refund. Nil for anything else (spaces, another
    /// key, a key twice, a wrong type, a missing key, invalid escapes): the caller then decodes
    /// it with `JSONDecoder`, which says what is wrong.
    public init?(storedJSON text: String) {
        var fields = [String?](repeating: nil, count: Self.storedKeys.count)
        var taxIncluded: Bool?
        var unitPriceIsNull = false
        var text = text
        let ok = text.withUTF8 { b -> Bool in
            var i = 0
            func byte(_ c: UInt8) -> Bool {
                guard i < b.count, b[i] == c else { return false }
                i += 1
                return true
            }
            func literal(_ word: StaticString) -> Bool {
                let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
                guard b.count - i >= w.count, zip(b[i..<(i + w.count)], w).allSatisfy({ $0 == $1 }) else { return false }
                i += w.count
                return true
            }
            func hex4() -> UInt32? {
                guard b.count - i >= 4 else { return nil }
                var v: UInt32 = 0
                for _ in 0..<4 {
                    let c = b[i]
                    let d: UInt8
                    switch c {
                    case 0x30...0x39: d = c - 0x30
                    case 0x41...0x46: d = c - 0x37
                    case 0x61...0x66: d = c - 0x57
                    default: return nil
                    }
                    v = v << 4 | UInt32(d)
                    i += 1
                }
                return v
            }
            func string() -> String? {
                guard byte(0x22) else { return nil }
                var out: [UInt8] = []
                var start = i
                while i < b.count {
                    let c = b[i]
                    if c == 0x22 {
                        out.append(contentsOf: b[start..<i])
                        i += 1
                        return String(decoding: out, as: UTF8.self)
                    }
                    if c < 0x20 { return nil }
                    guard c == 0x5C else { i += 1; continue }
                    out.append(contentsOf: b[start..<i])
                    i += 1
                    guard i < b.count else { return nil }
                    let e = b[i]
                    i += 1
                    switch e {
                    case 0x22, 0x5C, 0x2F: out.append(e)
                    case 0x62: out.append(0x08)
                    case 0x66: out.append(0x0C)
                    case 0x6E: out.append(0x0A)
                    case 0x72: out.append(0x0D)
                    case 0x74: out.append(0x09)
                    case 0x75:
                        guard var v = hex4() else { return nil }
                        if (0xD800...0xDBFF).contains(v) {
                            guard byte(0x5C), byte(0x75), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                            v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(v) else { return nil }
                        out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: return nil
                    }
                    start = i
                }
                return nil
            }
            guard byte(0x7B) else { return false }
            var first = true
            while !byte(0x7D) {
                if !first { guard byte(0x2C) else { return false } }
                first = false
                guard let key = string(), byte(0x3A) else { return false }
                if key == "taxIncluded" {
                    guard taxIncluded == nil else { return false }
                    if literal("true") { taxIncluded = true } else if literal("false") { taxIncluded = false } else { return false }
                    continue
                }
                guard let k = Self.storedKeys.firstIndex(of: key), fields[k] == nil, !(k == Self.unitPriceKey && unitPriceIsNull) else { return false }
                if k == Self.unitPriceKey && literal("null") { unitPriceIsNull = true; continue }
                guard let value = string() else { return false }
                fields[k] = value
            }
            return i == b.count
        }
        guard ok, let taxIncluded else { return nil }
        let f = fields
        guard let commissionRate = f[0], let commissionReason = f[1], let fxMonth = f[2], let fxRate = f[3],
              let priceSource = f[4], let storefront = f[5], let storefrontEffectiveFrom = f[6],
              let storefrontSource = f[7], let taxRate = f[8] else { return nil }
        self.init(storefront: storefront, storefrontSource: storefrontSource, storefrontEffectiveFrom: storefrontEffectiveFrom,
                  taxRate: taxRate, taxIncluded: taxIncluded, priceSource: priceSource, commissionRate: commissionRate,
                  commissionReason: commissionReason, fxRate: fxRate, fxMonth: fxMonth, unitPrice: f[9])
    }

    /// The string-valued keys `init(storedJSON:)` reads, in `canonicalJSON`'s order.
    static let storedKeys = ["commissionRate", "commissionReason", "fxMonth", "fxRate", "priceSource", "storefront",
                             "storefrontEffectiveFrom", "storefrontSource", "taxRate", "unitPrice"]
    static let unitPriceKey = 9

    /// A JSON string literal, escaped as Foundation's JSONEncoder escapes it (`/` as `\/`).
    /// Runs of bytes that need no escape are appended whole (escapes are all ASCII, so a
    /// UTF-8 byte at or above 0x80 is never one).
    static func appendString(_ v: String, to s: inout String) {
        s += "\""
        let u = v.utf8
        var start = u.startIndex, i = start
        while i != u.endIndex {
            let b = u[i]
            guard b < 0x20 || b == 0x22 || b == 0x5C || b == 0x2F else { i = u.index(after: i); continue }
            s += v[start..<i]
            switch b {
            case 0x22: s += "\\\""
            case 0x5C: s += "\\\\"
            case 0x2F: s += "\\/"
            case 0x0A: s += "\\n"
            case 0x0D: s += "\\r"
            case 0x09: s += "\\t"
            case 0x08: s += "\\b"
            case 0x0C: s += "\\f"
            default:
                let hex = String(b, radix: 16)
                s += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
            i = u.index(after: i)
            start = i
        }
        s += v[start..<u.endIndex]
        s += "\""
    }
}

/// Strict UTF-8 decoding for input bytes.
public enum UTF8Text {
    /// Whether every byte is ASCII (below 0x80), eight bytes at a time.
    public static func isASCII(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = b.baseAddress else { return true }
        let raw = UnsafeRawPointer(base), n = b.count
        var acc: UInt64 = 0, i = 0
        while i + 8 <= n { acc |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self); i += 8 }
        while i < n { acc |= UInt64(base[i]); i += 1 }
        return acc & 0x8080_8080_8080_8080 == 0
    }

    /// The text of UTF-8 `bytes`, or nil when they are not valid UTF-8 (never repaired). ASCII,
    /// most store data, skips the general validation, which costs more than the rest of a read.
    public static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }
}
