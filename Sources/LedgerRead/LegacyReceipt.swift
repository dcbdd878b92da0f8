import Foundation
import LedgerCore

/// One transaction item of a legacy verifyReceipt response (`in_app[]`,
/// `latest_receipt_info`, or an iOS 6 `receipt`), with scalars normalised to strings.
public struct LegacyItem: Equatable {
    public var transactionId: String?
    public var originalTransactionId: String?
    public var productId: String?
    public var quantity: String?
    public var purchaseMs: Int64?
    public var expiresMs: Int64?
    public var cancellationMs: Int64?
    public var cancellationReason: String?
    public var appAccountToken: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var isTrialPeriod: Bool = false
    /// `is_upgraded`: the user upgraded from this subscription (its `cancellation_date` is the upgrade).
    public var isUpgraded: Bool = false
    /// `in_app_ownership_type` `FAMILY_SHARED`: a family member's access, not a purchase.
    public var isFamilyShared: Bool = false
    /// An id field (`transaction_id`, `original_transaction_id`, `product_id`) holding neither
    /// a string nor a whole number written as digits, and its text: `9980000000000001.0`, `1e3`,
    /// `-1` or `true` would name another transaction than the string Apple sent.
    public var badIdentifier: BadIdentifier?
    public struct BadIdentifier: Equatable {
        public var field: String
        public var text: String
    }
    /// A flag (`is_trial_period`, `is_upgraded`) holding neither true nor false, and its text.
    public var badFlag: BadIdentifier?
    /// A cancellation or expiry date that is there but reads as no date (`"abc"`, `1e30`,
    /// `3.5`, `true`), and its text: a refund read as none would leave the sale as if never
    /// refunded, an expiry as none would count no paid days.
    public var badDate: BadIdentifier?
    /// An `_ms` field that is there but no number, passed over for the date text beside it
    /// (`DATE_MS_UNREADABLE`, said; earlier versions took the text without a word).
    public var msPassedOver: BadIdentifier?
    /// Set when the response lists this transaction twice (`in_app` and `latest_receipt_info`)
    /// with a different product or quantity: which one is true cannot be told.
    public var disagreement: String?
    /// Set when its two listings disagree on `is_trial_period`: the first listing's is taken
    /// (as it always was, so stored records read as before) and the night says so.
    public var trialDisagreement = false
    /// The purchase date of the copy that carried `cancellationMs`, when another copy did (the
    /// copies' purchase dates may differ by minutes): a refund is compared with its own copy.
    public var cancellationCopyPurchaseMs: Int64?
}

/// A legacy verifyReceipt response body as Apple sent it, plus the wrapper fields
/// (`received_at`, `account_id`, `order_id`) a backend may keep beside it.
public struct LegacyResponse: Equatable {
    public enum Style: String { case ios7, ios6, none }
    public var status: Int?
    public var statusText: String?
    public var environment: String?
    public var isRetryable: Bool
    public var bundleId: String?
    public var receiptType: String?
    public var style: Style
    public var items: [LegacyItem]
    public var exception: String?
    public var receivedAt: String?
    public var accountId: String?
    public var orderId: String?
    /// The transaction a backend noted beside a response it could not verify.
    public var wrapperTransactionId: String?
    /// What a document without a status looks like instead (`ForeignData`), for its rejection.
    public var foreignHint: String? = nil
}

public enum LegacyParseError: Error, CustomStringConvertible {
    case invalidJSON(String)
    case notAnObject
    case badField(String)
    public var description: String {
        switch self {
        case .invalidJSON(let m): return "not valid JSON (\(m))"
        case .notAnObject: return "not a JSON object (a verifyReceipt response is an object)"
        case .badField(let m): return m
        }
    }
}

/// Parses legacy verifyReceipt responses, tolerating strings or numbers for every scalar
/// (real responses send `"quantity": "1"`; some libraries rewrite them as numbers).
public enum LegacyReceiptParser {
    public static func parse(_ text: Substring) throws -> LegacyResponse {
        try namingJSONErrors { try JSONParser.withFlat(text) { try response($0.root) } }
    }

    /// `parse` through `JSONValue`, the whole document made first: the same response or the
    /// same error (a test holds the two together).
    static func parseTree(_ text: Substring) throws -> LegacyResponse {
        try namingJSONErrors { try response(try JSONParser.parse(text)) }
    }

    /// `body`, with a JSON syntax error given as the record's problem.
    private static func namingJSONErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as JSONError {
            throw LegacyParseError.invalidJSON(e.description)
        }
    }

    /// The response a parsed text holds (read through the flat index, only the strings read
    /// here are made; or through a `JSONValue`).
    static func response<J: JSONReading>(_ document: J) throws -> LegacyResponse {
        var obj = document
        guard obj.isObject else { throw LegacyParseError.notAnObject }
        var receivedAt: String?, accountId: String?, orderId: String?, wrapperTransactionId: String?
        if let inner = obj["response"], obj["status"] == nil {
            guard inner.isObject else { throw LegacyParseError.badField("\"response\" is not an object") }
            receivedAt = obj["received_at"]?.scalarText
            accountId = obj["account_id"]?.scalarText
            orderId = obj["order_id"]?.scalarText
            wrapperTransactionId = obj["transaction_id"]?.scalarText
            obj = inner
        }
        var r = LegacyResponse(status: nil, statusText: obj["status"]?.scalarOrShape, environment: obj["environment"]?.scalarText,
                               isRetryable: obj["is-retryable"]?.bool ?? obj["is_retryable"]?.bool ?? false,
                               bundleId: nil, receiptType: nil, style: .none, items: [],
                               exception: obj["exception"]?.scalarText, receivedAt: receivedAt,
                               accountId: accountId, orderId: orderId, wrapperTransactionId: wrapperTransactionId)
        // (A response with no readable status is in the right folder: not told to go there.)
        if let st = r.statusText { r.status = Int(st) } else { r.foreignHint = ForeignData.hint(obj).flatMap { $0.contains("inbox/receipts/") ? nil : $0 } }

        var items: [LegacyItem] = []
        if let receipt = obj["receipt"], receipt.isObject {
            if receipt["in_app"] != nil || receipt["bundle_id"] != nil || receipt["receipt_type"] != nil {
                r.style = .ios7
                r.bundleId = receipt["bundle_id"]?.scalarText
                r.receiptType = receipt["receipt_type"]?.scalarText
                if let inApp = receipt["in_app"] { items += try objects(inApp, "receipt.in_app", allowObject: false) }
            } else {
                r.style = .ios6
                r.bundleId = receipt["bid"]?.scalarText
                if receipt["transaction_id"] != nil { items.append(item(receipt)) }
            }
        }
        for key in ["latest_receipt_info", "latest_expired_receipt_info"] {
            guard let v = obj[key] else { continue }
            items += try objects(v, key, allowObject: true)
            if v.isObject && r.style == .none { r.style = .ios6 }
        }
        r.items = merge(items)
        return r
    }

    /// The items of a list of transaction objects (or of one object, where Apple sends one); a
    /// list that is something else, or holds something else, is refused by name.
    static func objects<J: JSONReading>(_ v: J, _ name: String, allowObject: Bool) throws -> [LegacyItem] {
        if v.isNull { return [] }
        if allowObject && v.isObject { return [item(v)] }
        guard let list = v.arrayValue else { throw LegacyParseError.badField("\(name) is not a list") }
        return try list.enumerated().map { i, x in
            guard x.isObject else { throw LegacyParseError.badField("\(name)[\(i)] is not an object") }
            return item(x)
        }
    }

    /// The same transaction appears in `in_app` and `latest_receipt_info`: keep one item
    /// per transaction id, preferring the one that carries a cancellation.
    static func merge(_ items: [LegacyItem]) -> [LegacyItem] {
        var order: [String] = []
        var byId: [String: LegacyItem] = [:]
        var anonymous: [LegacyItem] = []
        for it in items {
            guard let id = it.transactionId else { anonymous.append(it); continue }
            if var existing = byId[id] {
                if existing.disagreement == nil {
                    func q(_ text: String?) -> String { text.flatMap { Int64($0) }.map(String.init) ?? text ?? "1" }
                    if existing.productId != it.productId {
                        existing.disagreement = "product \(existing.productId ?? "(none)") or \(it.productId ?? "(none)")"
                    } else if q(existing.quantity) != q(it.quantity) {
                        existing.disagreement = "quantity \(q(existing.quantity)) or \(q(it.quantity))"
                    }
                    // Purchase dates are not compared: real responses differ there (a subscription's
                    // `in_app` and `latest_receipt_info` 16 minutes apart, one with milliseconds).
                }
                if existing.isTrialPeriod != it.isTrialPeriod { existing.trialDisagreement = true }
                if it.isUpgraded { existing.isUpgraded = true }
                // A flag that reads as neither true nor false in either listing refuses the item.
                if existing.badFlag == nil { existing.badFlag = it.badFlag }
                if existing.badDate == nil { existing.badDate = it.badDate }
                if existing.msPassedOver == nil { existing.msPassedOver = it.msPassedOver }
                if existing.cancellationMs == nil, let c = it.cancellationMs {
                    existing.cancellationMs = c
                    existing.cancellationCopyPurchaseMs = it.purchaseMs
                    existing.cancellationReason = it.cancellationReason
                }
                if existing.expiresMs == nil { existing.expiresMs = it.expiresMs }
                if existing.appAccountToken == nil { existing.appAccountToken = it.appAccountToken }
                byId[id] = existing
            } else {
                byId[id] = it
                order.append(id)
            }
        }
        return order.map { byId[$0]! } + anonymous
    }

    static func item<J: JSONReading>(_ d: J) -> LegacyItem {
        var it = LegacyItem()
        // Apple writes ids as strings; some libraries rewrite them as JSON numbers, which are
        // taken when written as plain digits (the same text as the string).
        func identifier(_ field: String) -> String? {
            guard let v = d[field], !v.isNull else { return nil }
            switch v.scalar {
            case .string(let s): return s
            case .number(let n) where !n.isEmpty && n.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }): return n
            default:
                if it.badIdentifier == nil { it.badIdentifier = .init(field: field, text: v.scalarOrShape ?? "") }
                return nil
            }
        }
        it.transactionId = identifier("transaction_id")
        it.originalTransactionId = identifier("original_transaction_id")
        it.productId = identifier("product_id")
        it.quantity = d["quantity"]?.scalarOrShape
        let purchase = date(d, "purchase_date")
        it.purchaseMs = purchase.ms
        // iOS 6 `expires_date` holds milliseconds; iOS 7 has `expires_date_ms`.
        // A cancellation or expiry there (not null, not empty) but no date: said, not taken for absent.
        let expires = date(d, "expires_date"), cancellation = date(d, "cancellation_date")
        it.expiresMs = expires.ms
        it.cancellationMs = cancellation.ms
        it.badDate = cancellation.unreadable ?? expires.unreadable
        // Read as earlier versions read it (a stored record is read again so by `verify`), and said.
        it.msPassedOver = purchase.msPassedOver ?? expires.msPassedOver ?? cancellation.msPassedOver
        it.cancellationReason = d["cancellation_reason"]?.scalarText
        it.appAccountToken = d["app_account_token"]?.scalarText
        it.webOrderLineItemId = d["web_order_line_item_id"]?.scalarText
        it.bundleId = d["bid"]?.scalarText ?? d["bundle_id"]?.scalarText
        // A flag that is there but reads as neither true nor false ("yes", a list) is said: a
        // trial read as paid would post a sale nobody paid for.
        func flag(_ field: String) -> Bool {
            guard let v = d[field], !v.isNull else { return false }
            if let b = v.bool { return b }
            if it.badFlag == nil { it.badFlag = .init(field: field, text: v.scalarOrShape ?? "") }
            return false
        }
        it.isTrialPeriod = flag("is_trial_period")
        it.isUpgraded = flag("is_upgraded")
        it.isFamilyShared = d["in_app_ownership_type"]?.scalarText == "FAMILY_SHARED"
        return it
    }

    /// A time field: `<name>_ms`, else `<name>` as milliseconds or as Apple's
    /// `yyyy-MM-dd HH:mm:ss Etc/GMT` text, else iOS 6's `<name>_formatted` text. When none of them reads, the first of them that is there (not null, not empty) is
    /// `unreadable`, with its text. `msPassedOver`: the `<name>_ms` field when it is there (not
    /// null, not empty) but no number and the time was read from another field instead (Apple's
    /// contract: the `_ms` fields are the time), said, as the item's date may not be Apple's.
    static func date<J: JSONReading>(_ d: J, _ name: String)
        -> (ms: Int64?, unreadable: LegacyItem.BadIdentifier?, msPassedOver: LegacyItem.BadIdentifier?) {
        let msField = d[name + "_ms"]
        if let v = msField?.int64 { return (v, nil, nil) }
        let passedOver = msField.flatMap { v -> LegacyItem.BadIdentifier? in
            guard !v.isNull, let text = v.scalarOrShape, !text.isEmpty else { return nil }
            return .init(field: name + "_ms", text: text)
        }
        if let s = d[name]?.scalarText, let v = Int64(s) ?? parseAppleDate(s) { return (v, nil, passedOver) }
        // iOS 6 style receipts also carry `<name>_formatted` (`2017-09-27 15:09:30 Etc/GMT`).
        if let s = d[name + "_formatted"]?.scalarText, let v = parseAppleDate(s) { return (v, nil, passedOver) }
        for field in [name + "_ms", name, name + "_formatted"] {
            guard let v = d[field], !v.isNull, let text = v.scalarOrShape, !text.isEmpty else { continue }
            return (nil, .init(field: field, text: text), nil)
        }
        return (nil, nil, nil)
    }

    /// Parses `2011-02-17 06:20:57 Etc/GMT` (also `...Z`, ISO `T`) as UTC milliseconds.
    public static func parseAppleDate(_ s: String) -> Int64? {
        var t = Substring(s)
        for suffix in [" Etc/GMT", " GMT", " UTC", "Z"] where t.hasSuffix(suffix) { t = t.dropLast(suffix.count); break }
        let parts = t.split(whereSeparator: { $0 == " " || $0 == "T" })
        guard parts.count == 2 else { return nil }
        let dateParts = parts[0].split(separator: "-"), timeParts = parts[1].split(separator: ":")
        guard dateParts.count == 3, timeParts.count == 3,
              dateParts[0].count == 4, let y = Int(dateParts[0]), let mo = Int(dateParts[1]), let da = Int(dateParts[2]),
              let h = Int(timeParts[0]), let mi = Int(timeParts[1]), (1...12).contains(mo), (1...31).contains(da),
              (0...23).contains(h), (0...59).contains(mi) else { return nil }
        let secText = timeParts[2].split(separator: ".")
        guard let first = secText.first, let sec = Int(first), (0...60).contains(sec) else { return nil }
        let days = Int64(Day(year: y, month: mo, day: da).daysSinceEpoch)
        return ((days * 24 + Int64(h)) * 60 + Int64(mi)) * 60_000 + Int64(sec) * 1000
    }
}
