// Signed data (App Store Server API / Server Notifications V2 JWS): the decoded models.
//
// Every model keeps the payload exactly as received (`rawPayloadJSON`), so fields that this
// version does not know about are never lost. Enum-like values (type, revocationType,
// environment, notificationType, ...) are kept as raw strings: Apple adds new values over time.
// Integers (dates in ms since epoch, price in milliunits, ...) are decoded to Int64 exactly,
// never through Double.

import Foundation
import LedgerRead

/// What `SignedDataVerifier.verify` found: the kind the payload holds and its verification.
public enum SignedVerdict: Sendable {
    case transaction(Result<SignedTransaction, SignedDataRejection>)
    case notification(Result<SignedNotification, SignedDataRejection>)
    /// The renewal info's payload JSON.
    case renewalInfo(Result<String, SignedDataRejection>)
    /// Not a compact JWS of any kind the tool reads.
    case unknown
    /// A compact JWS whose payload is of no kind the tool reads, with why its signature or
    /// chain does not verify (nil when it verifies): data that does not chain to a trusted root
    /// is refused for that before anything it says is judged.
    case otherPayload(SignedDataRejection?)
}

/// What a compact JWS holds, judged from its payload only (nothing is verified).
public enum SignedDataKind: String, Sendable, Equatable {
    case transaction, notification, renewalInfo, unknown
}

/// Decodes a compact JWS payload WITHOUT verifying it, only to tell the kinds apart by content:
/// a notification payload has `notificationType`; a transaction has `transactionId`; renewal info
/// has `autoRenewStatus` / `autoRenewProductId` and no `transactionId`. Anything else, or text
/// that is not a compact JWS with a JSON object payload, is `.unknown`.
public func signedDataKind(ofCompactJWS compactJWS: String) -> SignedDataKind {
    guard let parts = try? SignedDataCompactJWS(compactJWS) else { return .unknown }
    return SignedDataKind(payload: parts.payload)
}

/// Whether `text` is a compact JWS (three base64url parts, a JSON object header and payload),
/// of whatever kind; nothing is verified.
public func isCompactJWS(_ text: String) -> Bool { (try? SignedDataCompactJWS(text)) != nil }

/// Why `text` is not a compact JWS (its three parts, each base64url, header and payload JSON
/// objects), in words; nil when it is one.
public func compactJWSProblem(_ text: String) -> String? {
    do { _ = try SignedDataCompactJWS(text); return nil } catch {
        if case .malformed(let why) = error { return why }
        return error.description
    }
}

/// Whether `text` is a compact JWS whose signature part is a whole ES256 signature (64 bytes:
/// the App Store's algorithm), so not cut short inside it; nothing is verified.
public func compactJWSHasWholeSignature(_ text: String) -> Bool {
    guard let parts = try? SignedDataCompactJWS(text) else { return false }
    return SignedDataCompactJWS.base64URLDecode(parts.signatureSegment)?.count == 64
}

extension SignedDataKind {
    init(payload: [String: SignedDataJSON]) {
        if payload["notificationType"] != nil {
            self = .notification
        } else if payload["transactionId"] != nil {
            self = .transaction
        } else if payload["autoRenewStatus"] != nil || payload["autoRenewProductId"] != nil {
            self = .renewalInfo
        } else {
            self = .unknown
        }
    }
}

/// A verified App Store transaction (`JWSTransactionDecodedPayload`).
public struct SignedTransaction: Equatable, Sendable {
    public var transactionId: String
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var purchaseDateMs: Int64?
    public var originalPurchaseDateMs: Int64?
    public var expiresDateMs: Int64?
    public var signedDateMs: Int64?
    public var revocationDateMs: Int64?
    public var quantity: Int64?
    /// Raw: "Consumable", "Non-Consumable", "Auto-Renewable Subscription", "Non-Renewing Subscription", or an unknown value as sent.
    public var type: String?
    public var appAccountToken: String?
    public var inAppOwnershipType: String?
    /// 0 other reason, 1 an issue in the app (raw number, unknown values kept).
    public var revocationReason: Int64?
    /// REFUND_FULL / REFUND_PRORATED / FAMILY_REVOKE / unknown values kept raw.
    public var revocationType: String?
    /// Thousandths of a percent: 100000 = 100%.
    public var revocationPercentage: Int64?
    /// The user upgraded from this subscription to another of its group.
    public var isUpgraded: Bool?
    public var offerType: Int64?
    public var offerIdentifier: String?
    public var offerDiscountType: String?
    /// Raw "Sandbox" / "Production" (Xcode and LocalTesting data is rejected before it gets here).
    public var environment: String?
    public var storefront: String?
    public var storefrontId: String?
    public var transactionReason: String?
    /// ISO 4217 code.
    public var currency: String?
    /// From `price`: milliunits of `currency`, tax-inclusive, after offer discounts, times quantity.
    public var priceMilliunits: Int64?
    /// The decoded payload as received (UTF-8 JSON text), so unknown fields are kept.
    public var rawPayloadJSON: String

    public init(
        transactionId: String, originalTransactionId: String? = nil, webOrderLineItemId: String? = nil,
        bundleId: String? = nil, productId: String? = nil, purchaseDateMs: Int64? = nil,
        originalPurchaseDateMs: Int64? = nil, expiresDateMs: Int64? = nil, signedDateMs: Int64? = nil,
        revocationDateMs: Int64? = nil, quantity: Int64? = nil, type: String? = nil,
        appAccountToken: String? = nil, inAppOwnershipType: String? = nil, revocationReason: Int64? = nil,
        revocationType: String? = nil, revocationPercentage: Int64? = nil, isUpgraded: Bool? = nil, offerType: Int64? = nil,
        offerIdentifier: String? = nil, offerDiscountType: String? = nil, environment: String? = nil,
        storefront: String? = nil, storefrontId: String? = nil, transactionReason: String? = nil,
        currency: String? = nil, priceMilliunits: Int64? = nil, rawPayloadJSON: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.webOrderLineItemId = webOrderLineItemId
        self.bundleId = bundleId
        self.productId = productId
        self.purchaseDateMs = purchaseDateMs
        self.originalPurchaseDateMs = originalPurchaseDateMs
        self.expiresDateMs = expiresDateMs
        self.signedDateMs = signedDateMs
        self.revocationDateMs = revocationDateMs
        self.quantity = quantity
        self.type = type
        self.appAccountToken = appAccountToken
        self.inAppOwnershipType = inAppOwnershipType
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.isUpgraded = isUpgraded
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.environment = environment
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.transactionReason = transactionReason
        self.currency = currency
        self.priceMilliunits = priceMilliunits
        self.rawPayloadJSON = rawPayloadJSON
    }

    /// The trusted root its certificate chain was verified to (nil: not set by a verifier).
    public var anchor: SignedDataAnchor? = nil
}

/// The trusted root a signed record's chain leads to: its name (as the verifier was given
/// it: `Apple Root CA - G3 (built in)`, or a path of `trusted_roots`), and whether it is Apple
/// Root CA - G3 (Apple signs its production data under no other root).
public struct SignedDataAnchor: Equatable, Sendable {
    public var name: String
    public var isApple: Bool
    public init(name: String, isApple: Bool) { self.name = name; self.isApple = isApple }
}

/// A verified App Store Server Notification V2 (`ResponseBodyV2DecodedPayload`).
public struct SignedNotification: Equatable, Sendable {
    /// Raw, unknown types kept (ONE_TIME_CHARGE, SUBSCRIBED, DID_RENEW, REFUND, REFUND_REVERSED, ...).
    public var notificationType: String
    public var subtype: String?
    /// The idempotency key of the notification.
    public var notificationUUID: String
    public var version: String?
    public var signedDateMs: Int64?
    /// `data.environment` (or `summary.environment` for summary notifications).
    public var environment: String?
    /// `data.bundleId` (or `summary.bundleId` / `externalPurchaseToken.bundleId` / `appData.bundleId`).
    public var bundleId: String?
    public var appAppleId: Int64?
    /// `data.status` (subscription status: 1 active, 2 expired, ...), raw.
    public var status: Int64?
    /// `data.signedTransactionInfo`, itself verified with the same rules; nil when the notification carries none.
    public var transaction: SignedTransaction?
    /// `data.signedRenewalInfo` payload (verified) as raw JSON text; nil when the notification carries none.
    public var renewalInfoJSON: String?
    /// The decoded notification payload as received (the nested JWS strings are left as they are).
    public var rawPayloadJSON: String

    public init(
        notificationType: String, subtype: String? = nil, notificationUUID: String, version: String? = nil,
        signedDateMs: Int64? = nil, environment: String? = nil, bundleId: String? = nil,
        appAppleId: Int64? = nil, status: Int64? = nil, transaction: SignedTransaction? = nil,
        renewalInfoJSON: String? = nil, rawPayloadJSON: String
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = version
        self.signedDateMs = signedDateMs
        self.environment = environment
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.status = status
        self.transaction = transaction
        self.renewalInfoJSON = renewalInfoJSON
        self.rawPayloadJSON = rawPayloadJSON
    }

    /// The trusted root its certificate chain was verified to (nil: not set by a verifier).
    public var anchor: SignedDataAnchor? = nil
}

/// Any signed payload whose header, certificate chain and signature were verified, before it is
/// read as a transaction, notification or renewal info.
public struct VerifiedSignedPayload: Equatable, Sendable {
    /// The decoded payload as received (UTF-8 JSON text).
    public var rawPayloadJSON: String
    /// Payload `signedDate` (ms since epoch), when present.
    public var signedDateMs: Int64?
    /// The time the certificate chain was checked at: `signedDate`, or the time of verification when the payload has none.
    public var validationTime: Date
    /// Payload `environment` (or `data.environment`), raw.
    public var environment: String?
    /// What the payload looks like (see `signedDataKind(ofCompactJWS:)`).
    public var kind: SignedDataKind
    /// Subject of the leaf (signing) certificate, for audit trails.
    public var signerSubject: String
    /// The trusted root the chain leads to.
    public var anchor: SignedDataAnchor? = nil
}

// MARK: - Exact JSON values

/// A JSON value that keeps integers exact (Int64) and never goes through Double for them.
enum SignedDataJSON: Equatable, Sendable {
    case string(String)
    case integer(Int64)
    /// A number that is not an Int64 (fraction, exponent or out of range), kept as its Double.
    case fractional(Double)
    case bool(Bool)
    case null
    case array([SignedDataJSON])
    case object([String: SignedDataJSON])

    /// Parses JSON text whose top level must be an object.
    static func parseObject(_ data: Data) throws -> [String: SignedDataJSON] {
        // The ledger's own JSON parser (bytes, exact number text), not JSONDecoder into this
        // enum: that was a sixth of the cost of verifying a signed record.
        guard let text = String(validatingUTF8Data: data) else { throw SignedDataJSONError(message: "the JSON is not UTF-8 text") }
        guard case .object(let object) = try SignedDataJSON(try JSONParser.parse(text)) else {
            throw SignedDataJSONError(message: "the payload is JSON but not a JSON object")
        }
        return object
    }

    /// A parsed value as this enum: a number is an Int64 when its text is a whole number in
    /// range, else a finite Double (a number past Double's range is refused, as before).
    init(_ value: JSONValue) throws {
        switch value {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .string(let s): self = .string(s)
        case .number(let text):
            // As JSONDecoder read them: a whole value written with a fraction or an exponent
            // (`1990.0`, `1.7e12`) is still a whole number (read from its digits, never through
            // Double, which rounds past 2^53); others are fractions.
            if let i = Self.wholeNumber(text) { self = .integer(i) }
            else if let d = Double(text), d.isFinite { self = .fractional(d) }
            else { throw SignedDataJSONError(message: "the number \(text.prefix(40)) is out of range") }
        case .array(let items): self = .array(try items.map(SignedDataJSON.init))
        case .object(let members):
            var object: [String: SignedDataJSON] = [:]
            object.reserveCapacity(members.count)
            // A repeated key keeps its first value, as JSONDecoder and the rest of the ledger read it.
            for (key, member) in members where object[key] == nil { object[key] = try SignedDataJSON(member) }
            self = .object(object)
        }
    }

    /// The Int64 a JSON number's text stands for when it is a whole number in range (`1990`,
    /// `1990.00`, `1.7e12`, `-0.0`), by its digits; nil for a fraction or past Int64.
    static func wholeNumber(_ text: String) -> Int64? {
        if let i = Int64(text) { return i }
        var s = Substring(text)
        let negative = s.first == "-"
        if negative { s = s.dropFirst() }
        var exponent = 0
        if let e = s.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let x = Int(s[s.index(after: e)...]), abs(x) <= 400 else { return nil }
            exponent = x
            s = s[..<e]
        }
        let point = s.firstIndex(of: ".") ?? s.endIndex
        let digits = s[..<point] + s[point...].dropFirst()
        let whole = s.distance(from: s.startIndex, to: point) + exponent   // digits before the point
        guard whole >= 0 else { return digits.allSatisfy { $0 == "0" } ? 0 : nil }
        guard digits.dropFirst(whole).allSatisfy({ $0 == "0" }) else { return nil }
        let wholeDigits = String(digits.prefix(whole)) + String(repeating: "0", count: max(0, whole - digits.count))
        let significant = wholeDigits.drop { $0 == "0" }
        guard significant.count <= 19 else { return nil }
        return Int64((negative ? "-" : "") + (significant.isEmpty ? "0" : significant))
    }

    var typeName: String {
        switch self {
        case .string: return "text"
        case .integer: return "a whole number"
        // (A whole number past 64 bits is held so too: "fractional" misnamed 20000000000000000004.)
        case .fractional: return "a number that is no whole number within 64 bits"
        case .bool: return "true/false"
        case .null: return "null"
        case .array: return "a list"
        case .object: return "an object"
        }
    }
}

struct SignedDataJSONError: Error {
    var message: String
}

/// Typed, tolerant reads of known fields from a JSON object. Unknown fields are ignored (they stay in
/// the raw JSON). A known field of the wrong type is an error naming the field.
struct SignedDataFields {
    var object: [String: SignedDataJSON]
    /// Prefix for messages, e.g. "data." for fields of the notification's data object.
    var path: String = ""

    /// Text field; a whole number is accepted and kept as its decimal text (e.g. storefrontId).
    func string(_ key: String) throws -> String? {
        switch object[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case .integer(let n)?: return String(n)
        case let other?:
            throw SignedDataJSONError(message: "field \(path)\(key) should be text but is \(other.typeName)")
        }
    }

    /// Whole-number field decoded exactly; numeric text (e.g. "1990") is accepted too.
    func int64(_ key: String) throws -> Int64? {
        switch object[key] {
        case nil, .null?: return nil
        case .integer(let n)?: return n
        case .string(let s)?:
            if let n = Int64(s.trimmingCharacters(in: .whitespaces)) { return n }
            throw SignedDataJSONError(message: "field \(path)\(key) should be a whole number but is the text \"\(s)\"")
        case .fractional(let d)?:
            // A whole number past 64 bits is read as a fraction (99999999999999999999999 as
            // 1e+23): said as such, not as a fraction it was not written as.
            throw SignedDataJSONError(message: "field \(path)\(key) should be a whole number but is "
                                      + (d == d.rounded() && abs(d) >= 9.2e18 ? "one past 64 bits (about \(d))" : "\(d)"))
        case let other?:
            throw SignedDataJSONError(message: "field \(path)\(key) should be a whole number but is \(other.typeName)")
        }
    }

    /// true/false field; `"true"`/`"false"` as text and 1/0 are accepted, as numeric text is for numbers.
    func bool(_ key: String) throws -> Bool? {
        switch object[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case .integer(let n)? where n == 0 || n == 1: return n == 1
        case .string(let s)? where ["true", "false", "1", "0"].contains(s.lowercased()): return s.lowercased() == "true" || s == "1"
        case let other?:
            throw SignedDataJSONError(message: "field \(path)\(key) should be true or false but is \(other.typeName)")
        }
    }

    func object(_ key: String) throws -> SignedDataFields? {
        switch object[key] {
        case nil, .null?: return nil
        case .object(let o)?: return SignedDataFields(object: o, path: "\(path)\(key).")
        case let other?:
            throw SignedDataJSONError(message: "field \(path)\(key) should be an object but is \(other.typeName)")
        }
    }
}

extension SignedTransaction {
    /// Reads a transaction from a verified payload.
    init(payload: [String: SignedDataJSON], rawPayloadJSON: String) throws {
        let f = SignedDataFields(object: payload)
        guard let transactionId = try f.string("transactionId"), !transactionId.isEmpty else {
            throw SignedDataJSONError(message: "the signed data has no transactionId, so it is not a transaction"
                + SignedDataKind(payload: payload).kindHint)
        }
        self.init(
            transactionId: transactionId,
            originalTransactionId: try f.string("originalTransactionId"),
            webOrderLineItemId: try f.string("webOrderLineItemId"),
            bundleId: try f.string("bundleId"),
            productId: try f.string("productId"),
            purchaseDateMs: try f.int64("purchaseDate"),
            originalPurchaseDateMs: try f.int64("originalPurchaseDate"),
            expiresDateMs: try f.int64("expiresDate"),
            signedDateMs: try f.int64("signedDate"),
            revocationDateMs: try f.int64("revocationDate"),
            quantity: try f.int64("quantity"),
            type: try f.string("type"),
            appAccountToken: try f.string("appAccountToken"),
            inAppOwnershipType: try f.string("inAppOwnershipType"),
            revocationReason: try f.int64("revocationReason"),
            revocationType: try f.string("revocationType"),
            revocationPercentage: try f.int64("revocationPercentage"),
            isUpgraded: try f.bool("isUpgraded"),
            offerType: try f.int64("offerType"),
            offerIdentifier: try f.string("offerIdentifier"),
            offerDiscountType: try f.string("offerDiscountType"),
            environment: try f.string("environment"),
            storefront: try f.string("storefront"),
            storefrontId: try f.string("storefrontId"),
            transactionReason: try f.string("transactionReason"),
            currency: try f.string("currency"),
            priceMilliunits: try f.int64("price"),
            rawPayloadJSON: rawPayloadJSON
        )
    }
}

extension SignedDataKind {
    var kindHint: String {
        switch self {
        case .notification: return " (it is a server notification)"
        case .renewalInfo: return " (it is subscription renewal info)"
        case .transaction: return " (it is a transaction)"
        case .unknown: return ""
        }
    }
}

/// The `receiptType` of a compact JWS whose payload is an app transaction (`AppTransaction`:
/// the app's own purchase or download, with a `receiptType` and a bundle id, no
/// `transactionId`), read WITHOUT verification; nil for any other text.
public func appTransactionReceiptType(ofCompactJWS compactJWS: String) -> String? {
    guard let parts = try? SignedDataCompactJWS(compactJWS), SignedDataKind(payload: parts.payload) == .unknown,
          case .string(let type)? = parts.payload["receiptType"], case .string? = parts.payload["bundleId"]
    else { return nil }
    return type
}

/// Every transaction id a JWS may be taken to name, unverified: its own `transactionId` and a
/// notification's nested `signedTransactionInfo`'s, each as text or as a whole number (kept as
/// its decimal text, as a verified record's id is read): what `verify` checks a record's links
/// against (a refused item's id, read from the verified record, may be a number).
public func transactionIdTexts(ofCompactJWS compactJWS: String) -> Set<String> {
    guard let outer = try? SignedDataCompactJWS(compactJWS) else { return [] }
    func id(_ payload: [String: SignedDataJSON]) -> String? {
        switch payload["transactionId"] {
        case .string(let s)?: return s
        case .integer(let n)?: return String(n)
        default: return nil
        }
    }
    var ids = Set(id(outer.payload).map { [$0] } ?? [])
    if case .object(let data)? = outer.payload["data"], case .string(let inner)? = data["signedTransactionInfo"],
       let nested = try? SignedDataCompactJWS(inner), let n = id(nested.payload) {
        ids.insert(n)
    }
    return ids
}

/// The transaction id a JWS claims (its own `transactionId`, or a notification's nested
/// `signedTransactionInfo`'s), read WITHOUT verification: only so that a credit for a
/// rejected transaction is reported as unverified rather than unknown.
public func unverifiedTransactionIds(ofCompactJWS compactJWS: String) -> [String] {
    guard let outer = try? SignedDataCompactJWS(compactJWS) else { return [] }
    if case .string(let id)? = outer.payload["transactionId"] { return [id] }
    if case .object(let data)? = outer.payload["data"], case .string(let inner)? = data["signedTransactionInfo"],
       let nested = try? SignedDataCompactJWS(inner), case .string(let id)? = nested.payload["transactionId"] {
        return [id]
    }
    return []
}
