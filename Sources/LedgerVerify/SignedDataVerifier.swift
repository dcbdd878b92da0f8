// Verification of App Store signed data (JWS): App Store Server API transactions, renewal info,
// and App Store Server Notifications V2, offline.
//
// Rules (the same as Apple's app-store-server-library ChainVerifier with online checks off):
//  1. compact JWS: three base64url parts, JSON header and payload;
//  2. payload environment Xcode / LocalTesting: rejected with its own reason (StoreKit test data is
//     signed by one self-signed Xcode certificate; checked before the chain), once its signature
//     holds by the certificate it carries, whoever signed it (a record with a broken signature or
//     none, whatever its payload says, is refused for that: a forged record said "Xcode" read as a
//     developer test); it is refused either way;
//  3. header alg ES256; x5c present with exactly three standard-base64 DER certificates;
//  4. x5c[0] (leaf) and x5c[1] (intermediate) chain to one of the configured trusted roots (x5c[2] is
//     read but never trusted by itself; by default the only root is Apple Root CA - G3, shipped);
//  5. leaf carries extension OID 1.2.840.113635.100.6.11.1, intermediate 1.2.840.113635.100.6.2.1;
//  6. every certificate of the chain is valid at the payload's signedDate (ms since epoch), not "now":
//     this is offline verification of data that may be years old (when a payload has no signedDate,
//     the time of verification is used, as Apple's library does);
//  7. ES256 signature (raw r||s, 64 bytes) over "header.payload" by the leaf's P-256 key;
//  8. bundle id among the configured ones (when any are configured);
//  9. inside a notification, signedTransactionInfo and signedRenewalInfo are verified with the same rules.
// Chain building and RFC 5280 checks are done by swift-certificates' `Verifier`, the signature by
// swift-crypto's P256.

import Foundation
import Crypto
import LedgerCore
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

public struct SignedDataVerifier: Sendable {
    /// OID Apple puts in App Store receipt/data signing (leaf) certificates.
    public static let appleLeafOID = "1.2.840.113635.100.6.11.1"
    /// OID Apple puts in its WWDR intermediate certificates.
    public static let appleIntermediateOID = "1.2.840.113635.100.6.2.1"

    /// SHA-256 fingerprint of Apple Root CA - G3, as Apple publishes it
    /// (https://www.apple.com/certificateauthority/): 63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:
    /// 7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79. The shipped Roots/AppleRootCA-G3.der was decoded
    /// from app-store-server-library-swift's REAL_APPLE_ROOT_BASE64_ENCODED and checked to have exactly
    /// this fingerprint (openssl x509 -fingerprint -sha256); `appleRootCAG3()` checks it again on load.
    public static let appleRootCAG3SHA256 =
        "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179"

    /// Apple Root CA - G3 (DER), `Roots/AppleRootCA-G3.der` compiled into the tool (a copied
    /// binary needs no resource folder beside it).
    public static func appleRootCAG3() throws -> Data {
        let der = Data(PackageResources.AppleRootCA_G3_der)
        let fingerprint = SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined()
        guard fingerprint == appleRootCAG3SHA256 else {
            throw SignedDataSetupError.bundledRootUnavailable(
                "its SHA-256 fingerprint is \(fingerprint), not Apple's \(appleRootCAG3SHA256)")
        }
        return der
    }

    /// Reads a certificate file for the config's `trusted_roots`: PEM (exactly one certificate) or DER.
    /// Returns the DER bytes.
    public static func loadCertificateFile(_ url: URL) throws -> Data {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw SignedDataSetupError.unreadableFile(path: url.path, reason: error.localizedDescription)
        }
        let der: Data
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") {
            let blocks = pemBlocks(text, label: "CERTIFICATE")
            guard blocks.count == 1, let block = blocks.first else {
                throw SignedDataSetupError.unreadableFile(
                    path: url.path,
                    reason: blocks.isEmpty
                        ? "it is PEM but holds no \"BEGIN CERTIFICATE\" block"
                        : "it holds \(blocks.count) certificates; give one certificate per file")
            }
            guard let decoded = Data(base64Encoded: block, options: .ignoreUnknownCharacters) else {
                throw SignedDataSetupError.unreadableFile(path: url.path, reason: "its PEM base64 text is damaged")
            }
            der = decoded
        } else {
            der = data
        }
        do {
            _ = try Certificate(derEncoded: Array(der))
        } catch {
            throw SignedDataSetupError.unreadableFile(path: url.path, reason: "it is not an X.509 certificate (\(error))")
        }
        return der
    }

    /// The base64 bodies of the PEM blocks with the given label.
    static func pemBlocks(_ text: String, label: String) -> [String] {
        var blocks: [String] = []
        var current: String?
        for rawLine in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line == "-----BEGIN \(label)-----" {
                current = ""
            } else if line == "-----END \(label)-----" {
                if let body = current { blocks.append(body) }
                current = nil
            } else if current != nil {
                current! += line
            }
        }
        return blocks
    }

    let trustedRoots: [Certificate]
    /// Each trusted root as a record names it (`SignedDataAnchor`), in the order of `trustedRoots`.
    public let anchors: [SignedDataAnchor]
    /// Accepted app bundle ids; empty = any.
    public let bundleIds: [String]
    /// The clock used as validation time ONLY for payloads without a signedDate (Apple's library does
    /// the same). Fix it in tests so that they do not depend on today's date.
    public var currentTime: @Sendable () -> Date = { Date() }
    /// Chains already verified by this verifier (all notifications of a period share a few).
    let chainCache = SignedDataChainCache()

    /// `trustedRootsDER`: DER certificates that anchor the chain (Apple Root CA - G3 for real data,
    /// Apple's test CA in tests). `bundleIds`: accepted app bundle ids; empty accepts any.
    /// `rootNames`: how each root is named where a record says which one its chain led to
    /// (default: Apple Root CA - G3 by its name, the others by their place in the list).
    public init(trustedRootsDER: [Data], bundleIds: [String], rootNames: [String]? = nil) throws {
        guard !trustedRootsDER.isEmpty else { throw SignedDataSetupError.noTrustedRoots }
        self.anchors = trustedRootsDER.enumerated().map { index, der in
            let isApple = SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined() == Self.appleRootCAG3SHA256
            let name = rootNames.flatMap { index < $0.count ? $0[index] : nil }
                ?? (isApple ? "Apple Root CA - G3" : "trusted root #\(index + 1)")
            return SignedDataAnchor(name: name, isApple: isApple)
        }
        self.trustedRoots = try trustedRootsDER.enumerated().map { index, der in
            do {
                return try Certificate(derEncoded: Array(der))
            } catch {
                throw SignedDataSetupError.notACertificate("trusted root #\(index + 1) cannot be parsed (\(error))")
            }
        }
        self.bundleIds = bundleIds
    }

    /// The default verifier: trusts only Apple Root CA - G3 (shipped with the tool).
    public init(bundleIds: [String] = []) throws {
        try self.init(trustedRootsDER: [try Self.appleRootCAG3()], bundleIds: bundleIds)
    }

    // MARK: - Public verification entry points

    /// Verifies a signed transaction (`signedTransactionInfo`, or a transaction from the App Store Server API).
    public func verifyTransaction(_ compactJWS: String) -> Result<SignedTransaction, SignedDataRejection> {
        Result { () throws(SignedDataRejection) -> SignedTransaction in
            try transaction(from: try SignedDataCompactJWS(compactJWS))
        }
    }

    func transaction(from parsed: SignedDataCompactJWS) throws(SignedDataRejection) -> SignedTransaction {
        do {
            let (jws, verified) = try verifyEnvelope(parsed)
            var transaction: SignedTransaction
            do {
                transaction = try SignedTransaction(payload: jws.payload, rawPayloadJSON: jws.payloadJSON)
            } catch {
                throw .malformed(Self.message(error))
            }
            transaction.anchor = verified.anchor
            try checkBundleId(transaction.bundleId)
            return transaction
        }
    }

    /// Verifies any App Store signed data, read once: a signed transaction, a notification
    /// (with its transaction) or renewal info, by what its payload holds; `unknown` when the
    /// text is not a compact JWS of any of them.
    public func verify(_ compactJWS: String) -> SignedVerdict {
        guard let parsed = try? SignedDataCompactJWS(compactJWS) else { return .unknown }
        switch SignedDataKind(payload: parsed.payload) {
        case .transaction:
            return .transaction(Result { () throws(SignedDataRejection) in try transaction(from: parsed) })
        case .notification:
            return .notification(Result { () throws(SignedDataRejection) in try notification(from: parsed) })
        case .renewalInfo:
            return .renewalInfo(Result { () throws(SignedDataRejection) in try verifyEnvelope(parsed).jws.payloadJSON })
        case .unknown:
            do throws(SignedDataRejection) { _ = try verifyEnvelope(parsed); return .otherPayload(nil) }
            catch { return .otherPayload(error) }
        }
    }

    /// Verifies a Server Notification V2 `signedPayload` (the compact JWS; the HTTP body
    /// `{"signedPayload": "..."}` is accepted too), and the transaction and renewal info inside it.
    public func verifyNotification(_ compactJWS: String) -> Result<SignedNotification, SignedDataRejection> {
        Result { () throws(SignedDataRejection) -> SignedNotification in
            try notification(from: try SignedDataCompactJWS(Self.unwrapSignedPayloadBody(compactJWS)))
        }
    }

    func notification(from parsed: SignedDataCompactJWS) throws(SignedDataRejection) -> SignedNotification {
        do {
            let (jws, verified) = try verifyEnvelope(parsed)
            var notification: SignedNotification
            var nestedTransactionJWS: String?
            var nestedRenewalJWS: String?
            do {
                let f = SignedDataFields(object: jws.payload)
                guard let type = try f.string("notificationType"), !type.isEmpty else {
                    throw SignedDataJSONError(
                        message: "the signed data has no notificationType, so it is not a server notification"
                            + SignedDataKind(payload: jws.payload).kindHint)
                }
                guard let uuid = try f.string("notificationUUID"), !uuid.isEmpty else {
                    throw SignedDataJSONError(message: "the notification has no notificationUUID")
                }
                let data = try f.object("data")
                let summary = try f.object("summary")
                let externalPurchaseToken = try f.object("externalPurchaseToken")
                // RESCIND_CONSENT names its app in `appData` (no transaction); read only when it
                // is an object (it is no field of the other types, whose checks it must not fail).
                let appData = (try? f.object("appData")) ?? nil
                notification = SignedNotification(
                    notificationType: type,
                    subtype: try f.string("subtype"),
                    notificationUUID: uuid,
                    version: try f.string("version"),
                    signedDateMs: try f.int64("signedDate"),
                    environment: try data?.string("environment") ?? summary?.string("environment") ?? appData?.string("environment"),
                    bundleId: try data?.string("bundleId") ?? summary?.string("bundleId")
                        ?? externalPurchaseToken?.string("bundleId") ?? appData?.string("bundleId"),
                    appAppleId: try data?.int64("appAppleId") ?? summary?.int64("appAppleId")
                        ?? externalPurchaseToken?.int64("appAppleId") ?? appData?.int64("appAppleId"),
                    status: try data?.int64("status"),
                    transaction: nil,
                    renewalInfoJSON: nil,
                    rawPayloadJSON: jws.payloadJSON)
                nestedTransactionJWS = try data?.string("signedTransactionInfo")
                nestedRenewalJWS = try data?.string("signedRenewalInfo")
            } catch {
                throw .malformed(Self.message(error))
            }
            notification.anchor = verified.anchor
            try checkBundleId(notification.bundleId)
            if let nested = nestedTransactionJWS {
                switch verifyTransaction(nested) {
                case .success(let transaction): notification.transaction = transaction
                case .failure(let why): throw .nestedTransactionInvalid("[\(why.code)] \(why.description)")
                }
            }
            if let nested = nestedRenewalJWS {
                switch verifyRenewalInfo(nested) {
                case .success(let json): notification.renewalInfoJSON = json
                case .failure(let why): throw .nestedRenewalInfoInvalid("[\(why.code)] \(why.description)")
                }
            }
            return notification
        }
    }

    /// Verifies signed renewal info (`signedRenewalInfo`); returns its payload as raw JSON text.
    /// (Renewal info carries no bundle id, so no bundle check applies.)
    public func verifyRenewalInfo(_ compactJWS: String) -> Result<String, SignedDataRejection> {
        Result { () throws(SignedDataRejection) -> String in
            try verifyEnvelope(compactJWS).jws.payloadJSON
        }
    }

    /// Verifies header, chain and signature of any App Store signed data without reading it as a
    /// particular kind and without the bundle id check.
    public func verifySignedPayload(_ compactJWS: String) -> Result<VerifiedSignedPayload, SignedDataRejection> {
        Result { () throws(SignedDataRejection) -> VerifiedSignedPayload in
            try verifyEnvelope(compactJWS).verified
        }
    }

    // MARK: - Steps

    static func unwrapSignedPayloadBody(_ text: String) -> String {
        let trimmed = trimmedText(text)
        guard trimmed.hasPrefix("{"),
              let object = try? SignedDataJSON.parseObject(Data(trimmed.utf8)),
              case .string(let jws)? = object["signedPayload"]
        else { return text }
        return jws
    }

    static func message(_ error: Error) -> String {
        if let e = error as? SignedDataJSONError { return e.message }
        return String(describing: error)
    }

    func checkBundleId(_ found: String?) throws(SignedDataRejection) {
        guard !bundleIds.isEmpty else { return }
        guard let found, bundleIds.contains(found) else {
            throw .wrongBundleId(found: found ?? "", expected: bundleIds)
        }
    }

    /// Steps 1-7: format, environment, header, chain, OIDs, validity at signedDate, signature.
    func verifyEnvelope(_ compactJWS: String) throws(SignedDataRejection)
        -> (jws: SignedDataCompactJWS, verified: VerifiedSignedPayload)
    {
        try verifyEnvelope(try SignedDataCompactJWS(compactJWS))
    }

    func verifyEnvelope(_ jws: SignedDataCompactJWS) throws(SignedDataRejection)
        -> (jws: SignedDataCompactJWS, verified: VerifiedSignedPayload)
    {
        let payloadFields = SignedDataFields(object: jws.payload)
        // environment: top level (transaction, renewal info) or data / summary (notification).
        var environment: String?
        if case .string(let value)? = jws.payload["environment"] {
            environment = value
        } else {
            for container in ["data", "summary", "appData"] {
                if case .object(let inner)? = jws.payload[container], case .string(let value)? = inner["environment"] {
                    environment = value
                    break
                }
            }
            // An app transaction (AppTransaction) names its environment `receiptType`.
            if environment == nil, case .string(let value)? = jws.payload["receiptType"] { environment = value }
        }
        var testEnvironment: SignedDataRejection?
        if let environment {
            switch environment.lowercased() {
            case "xcode": testEnvironment = .xcodeEnvironment
            case "localtesting": testEnvironment = .localTestingEnvironment
            default: break
            }
        }
        /// Whether the JWS's signature holds by `key` (raw r||s, 64 bytes, over "header.payload").
        func signatureHolds(_ key: P256.Signing.PublicKey) throws(SignedDataRejection) -> Bool {
            guard let signatureBytes = SignedDataCompactJWS.base64URLDecode(jws.signatureSegment) else {
                throw .malformed("the signature part is not base64url text")
            }
            guard signatureBytes.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
            else { return false }
            return key.isValidSignature(signature, for: Data(jws.signingInput.utf8))
        }

        // Header.
        let alg: String
        switch jws.header["alg"] {
        case .string(let a)?: alg = a
        case nil, .null?: throw .unsupportedAlgorithm("none")
        case let other?: throw .malformed("the header field alg should be text but is \(other.typeName)")
        }
        guard alg == "ES256" else { throw .unsupportedAlgorithm(alg) }
        let x5c: [SignedDataJSON]
        switch jws.header["x5c"] {
        case nil, .null?: throw .missingCertificateChain
        case .array(let list)?: x5c = list
        case let other?: throw .invalidCertificate("the x5c header should be a list of certificates but is \(other.typeName)")
        }
        // StoreKit test data (one self-signed certificate): said as such once its signature holds
        // by the certificate it carries; otherwise refused as any record whose signature fails.
        if let testEnvironment {
            guard case .string(let base64)? = x5c.first, let der = Data(base64Encoded: trimmedText(base64)),
                  let certificate = try? Certificate(derEncoded: Array(der)), let key = P256.Signing.PublicKey(certificate.publicKey)
            else { throw x5c.isEmpty ? .missingCertificateChain : .invalidCertificate("the signing certificate (x5c[0]) is not an X.509 certificate with a P-256 key") }
            guard try signatureHolds(key) else { throw .badSignature }
            throw testEnvironment
        }
        guard x5c.count == 3 else { throw .wrongCertificateCount(x5c.count) }
        let roles = ["signing (leaf) certificate", "intermediate certificate", "root certificate"]
        var certificates: [Certificate] = []
        for (index, entry) in x5c.enumerated() {
            guard case .string(let base64) = entry else {
                throw .invalidCertificate("the \(roles[index]) (x5c[\(index)]) is not base64 text")
            }
            // Most records carry the same chain: a certificate is parsed once per run.
            if let known = chainCache.certificate(base64) {
                certificates.append(known)
                continue
            }
            guard let der = Data(base64Encoded: trimmedText(base64)) else {
                throw .invalidCertificate("the \(roles[index]) (x5c[\(index)]) is not base64 text")
            }
            do {
                let certificate = try Certificate(derEncoded: Array(der))
                chainCache.remember(base64, certificate)
                certificates.append(certificate)
            } catch {
                throw .invalidCertificate("the \(roles[index]) (x5c[\(index)]) is not an X.509 certificate (\(error))")
            }
        }
        let leaf = certificates[0]
        let intermediate = certificates[1]
        guard let leafKey = P256.Signing.PublicKey(leaf.publicKey) else {
            throw .invalidCertificate("the signing (leaf) certificate does not hold a P-256 key, which ES256 needs")
        }

        // Validation time: the payload's signedDate.
        let signedDateMs: Int64?
        do {
            signedDateMs = try payloadFields.int64("signedDate")
        } catch {
            throw .malformed(Self.message(error))
        }
        // Checked before the chain: a date far outside any certificate's life (year -292 million)
        // is not a time the certificate library can represent.
        if let ms = signedDateMs, !StoreBounds.plausibleDate(ms) {
            throw .malformed("signedDate \(ms) is outside 2008-2099")
        }
        let validationTime = signedDateMs.map { Date(timeIntervalSince1970: TimeInterval($0) / 1000) } ?? currentTime()

        // Chain, OIDs, validity.
        let root = try SignedDataChainCheck(roots: trustedRoots, cache: chainCache).check(
            leaf: leaf, intermediate: intermediate, at: validationTime, signedDateGiven: signedDateMs != nil)

        // Signature.
        guard try signatureHolds(leafKey) else { throw .badSignature }

        let verified = VerifiedSignedPayload(
            rawPayloadJSON: jws.payloadJSON,
            signedDateMs: signedDateMs,
            validationTime: validationTime,
            environment: environment,
            kind: SignedDataKind(payload: jws.payload),
            signerSubject: leaf.subject.description,
            anchor: trustedRoots.firstIndex(of: root).map { anchors[$0] })
        return (jws, verified)
    }
}

// MARK: - Compact JWS parsing

struct SignedDataCompactJWS {
    let headerSegment: String
    let payloadSegment: String
    let signatureSegment: String
    let header: [String: SignedDataJSON]
    let payload: [String: SignedDataJSON]
    /// The payload bytes as received, as UTF-8 text.
    let payloadJSON: String

    var signingInput: String { headerSegment + "." + payloadSegment }

    init(_ text: String) throws(SignedDataRejection) {
        let trimmed = trimmedText(text)
        if trimmed.isEmpty { throw .malformed("the text is empty") }
        // Split on the dot byte (ASCII: always between characters), not by Character.
        let parts = trimmed.utf8.split(separator: 0x2E, omittingEmptySubsequences: false).map { String(Substring($0)) }
        guard parts.count == 3 else {
            throw .malformed("a signed record has 3 parts separated by dots, this one has \(parts.count)")
        }
        guard !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw .malformed("a part of the signed record is empty")
        }
        guard let headerData = Self.base64URLDecode(parts[0]) else {
            throw .malformed("the header part is not base64url text")
        }
        guard let payloadData = Self.base64URLDecode(parts[1]) else {
            throw .malformed("the payload part is not base64url text")
        }
        do {
            header = try SignedDataJSON.parseObject(headerData)
        } catch {
            throw .malformed("the header is not a JSON object (\(Self.why(error)))")
        }
        do {
            payload = try SignedDataJSON.parseObject(payloadData)
        } catch {
            // Named with where and why (a number past range, nesting too deep, a key twice), as
            // a receipt's JSON is: a record signed as Apple signs was said to be no JWS at all.
            throw .malformed("the payload is not a JSON object (\(Self.why(error)))")
        }
        guard let json = String(data: payloadData, encoding: .utf8) else {
            throw .malformed("the payload is not UTF-8 text")
        }
        headerSegment = parts[0]
        payloadSegment = parts[1]
        signatureSegment = parts[2]
        payloadJSON = json
    }

    static func why(_ error: Error) -> String {
        (error as? SignedDataJSONError)?.message ?? "\(error)"
    }

    /// base64url (RFC 4648 section 5), padding optional.
    /// base64url (the standard alphabet's `+` and `/` accepted too), `=` padding optional and
    /// only at the end; nil for anything else. Decoded byte by byte (a JWS carries three
    /// certificates: a few kilobytes per record).
    static func base64URLDecode(_ text: String) -> Data? {
        let bytes = Array(text.utf8)
        var end = bytes.count
        while end > 0 && bytes[end - 1] == 0x3D { end -= 1 }
        guard end % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(end * 3 / 4)
        var accumulator: UInt32 = 0, bits = 0
        for c in bytes[..<end] {
            let value: UInt32
            switch c {
            case 0x41...0x5A: value = UInt32(c - 0x41)          // A-Z
            case 0x61...0x7A: value = UInt32(c - 0x61) + 26     // a-z
            case 0x30...0x39: value = UInt32(c - 0x30) + 52     // 0-9
            case 0x2D, 0x2B: value = 62                         // - or +
            case 0x5F, 0x2F: value = 63                         // _ or /
            default: return nil
            }
            accumulator = (accumulator << 6) | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((accumulator >> UInt32(bits)) & 0xFF))
            }
        }
        return Data(out)
    }

    static func base64URLEncode(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

// MARK: - Certificate chain

/// Chain checks on leaf + intermediate against the trusted roots, with swift-certificates' Verifier.
struct SignedDataChainCheck {
    let roots: [Certificate]
    var cache: SignedDataChainCache?

    /// Returns the trusted root the chain leads to.
    @discardableResult
    func check(leaf: Certificate, intermediate: Certificate, at validationTime: Date, signedDateGiven: Bool)
        throws(SignedDataRejection) -> Certificate
    {
        if let cache, let root = cache.accepts(leaf: leaf, intermediate: intermediate, at: validationTime) { return root }
        let rootStore = CertificateStore(roots)
        let intermediates = CertificateStore([intermediate])

        // 1. Does the leaf chain through the intermediate to a trusted root (signatures, basic
        //    constraints, name constraints; dates are checked separately below for a precise reason)?
        let structural = SignedDataSync.run {
            var verifier = Verifier(rootCertificates: rootStore) { RFC5280Policy.withValidityCheckDisabled() }
            return await verifier.validate(leaf: leaf, intermediates: intermediates)
        }
        let chain: [Certificate]
        switch structural {
        case .validCertificate(let validated):
            chain = Array(validated)
        case .couldNotValidate(let failures):
            var why = "\"\(leaf.subject)\" issued by \"\(leaf.issuer)\", through \"\(intermediate.subject)\" issued by \"\(intermediate.issuer)\", reaches none of the \(roots.count) trusted root(s)"
            if let first = failures.first {
                why += " (\(first.policyFailureReason))"
            }
            throw .untrustedChain(why)
        }
        guard chain.count == 3, chain[1] == intermediate else {
            throw .untrustedChain(
                "the chain found has \(chain.count) certificate(s); App Store data is signed by a leaf certificate under an Apple intermediate under the root")
        }

        // 2. Apple's OIDs.
        func hasExtension(_ certificate: Certificate, _ oid: String) -> Bool {
            certificate.extensions.contains { $0.oid.description == oid }
        }
        guard hasExtension(leaf, SignedDataVerifier.appleLeafOID) else {
            throw .missingAppleOID(
                "the signing certificate \"\(leaf.subject)\" lacks Apple's App Store signing mark (OID \(SignedDataVerifier.appleLeafOID))")
        }
        guard hasExtension(intermediate, SignedDataVerifier.appleIntermediateOID) else {
            throw .missingAppleOID(
                "the intermediate certificate \"\(intermediate.subject)\" lacks Apple's WWDR intermediate mark (OID \(SignedDataVerifier.appleIntermediateOID))")
        }

        // 3. The full RFC 5280 policy with expiry checked at the validation time (the signedDate).
        let full = SignedDataSync.run {
            var verifier = Verifier(rootCertificates: rootStore) {
                RFC5280Policy(fixedExpiryValidationTime: validationTime)
            }
            return await verifier.validate(leaf: leaf, intermediates: intermediates)
        }
        if case .couldNotValidate(let failures) = full {
            let when = signedDateGiven
                ? "the data was signed on \(Self.format(validationTime))"
                : "the data has no signedDate and was checked at \(Self.format(validationTime))"
            let names = ["signing certificate", "intermediate certificate", "root certificate"]
            for (index, certificate) in chain.enumerated()
            where validationTime < certificate.notValidBefore || validationTime > certificate.notValidAfter {
                throw .certificateNotValidAtSignedDate(
                    "the \(names[index]) \"\(certificate.subject)\" is valid from \(Self.format(certificate.notValidBefore)) to \(Self.format(certificate.notValidAfter)), but \(when)")
            }
            throw .untrustedChain(failures.first.map { "\($0.policyFailureReason)" } ?? "the chain does not meet RFC 5280 at \(Self.format(validationTime))")
        }
        cache?.remember(leaf: leaf, intermediate: intermediate, chain: chain)
        return chain[2]
    }

    static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}

/// Remembers leaf + intermediate pairs that passed every chain check, with the time window in which
/// all certificates of their chain are valid: the same pair checked at a time inside that window would
/// pass again (the checks depend only on the certificates, the fixed trusted roots and the time).
final class SignedDataChainCache: @unchecked Sendable {
    private struct Key: Hashable {
        let leaf: Certificate
        let intermediate: Certificate
    }
    private let lock = NSLock()
    private var windows: [Key: (window: ClosedRange<Date>, root: Certificate)] = [:]
    private let limit = 64
    /// Certificates parsed from their x5c base64 text (the same text always gives the same one).
    private var certificates: [String: Certificate] = [:]

    func certificate(_ base64: String) -> Certificate? {
        lock.lock()
        defer { lock.unlock() }
        return certificates[base64]
    }

    func remember(_ base64: String, _ certificate: Certificate) {
        lock.lock()
        defer { lock.unlock() }
        if certificates.count >= limit { certificates.removeAll() }
        certificates[base64] = certificate
    }

    /// The root of the chain, when the pair passed every check for a time whose window holds `time`.
    func accepts(leaf: Certificate, intermediate: Certificate, at time: Date) -> Certificate? {
        lock.lock()
        defer { lock.unlock() }
        guard let known = windows[Key(leaf: leaf, intermediate: intermediate)], known.window.contains(time) else { return nil }
        return known.root
    }

    func remember(leaf: Certificate, intermediate: Certificate, chain: [Certificate]) {
        guard let start = chain.map(\.notValidBefore).max(), let end = chain.map(\.notValidAfter).min(), start <= end
        else { return }
        lock.lock()
        defer { lock.unlock() }
        if windows.count >= limit { windows.removeAll() }
        windows[Key(leaf: leaf, intermediate: intermediate)] = (start...end, chain[2])
    }
}

// MARK: - Running swift-certificates' async Verifier from synchronous code

/// swift-certificates' `Verifier.validate` is `async` but, with in-memory certificate stores, never
/// waits on anything. The public API of this module is synchronous, so the check runs as a task whose
/// jobs are executed on the calling thread (a task executor drained right here): no thread of the
/// Swift concurrency pool is blocked, so this cannot deadlock even when called from async code.
enum SignedDataSync {
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
            let executor = CallerThreadExecutor()
            let box = ResultBox<T>()
            Task(executorPreference: executor) {
                let value = await body()
                box.set(value)
                executor.finish()
            }
            executor.runUntilFinished()
            return box.get()!
        } else {
            let box = ResultBox<T>()
            let semaphore = DispatchSemaphore(value: 0)
            Task.detached {
                box.set(await body())
                semaphore.signal()
            }
            semaphore.wait()
            return box.get()!
        }
    }

    final class ResultBox<T>: @unchecked Sendable {
        private let lock = NSLock()
        private var value: T?
        func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
        func get() -> T? { lock.lock(); defer { lock.unlock() }; return value }
    }

    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
    final class CallerThreadExecutor: TaskExecutor, @unchecked Sendable {
        private let condition = NSCondition()
        private var jobs: [UnownedJob] = []
        private var finished = false

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            condition.lock()
            jobs.append(job)
            condition.signal()
            condition.unlock()
        }

        func finish() {
            condition.lock()
            finished = true
            condition.signal()
            condition.unlock()
        }

        func runUntilFinished() {
            while true {
                condition.lock()
                while jobs.isEmpty && !finished { condition.wait() }
                if jobs.isEmpty {
                    condition.unlock()
                    return
                }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }
}

/// `text` without surrounding whitespace and newlines. Printable ASCII at both ends (every JWS)
/// has nothing to trim, and skips Foundation's pass over a few kilobytes of text per record.
func trimmedText(_ text: String) -> String {
    if let first = text.utf8.first, let last = text.utf8.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last) {
        return text
    }
    return text.trimmingCharacters(in: .whitespacesAndNewlines)
}
