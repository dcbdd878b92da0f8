// A test helper that signs ARBITRARY payloads as App Store signed data (compact JWS, ES256, 3-cert x5c)
// with the private key Apple PUBLISHES for its library tests (Fixtures/apple-server-library/
// test-private-keys/testLeaf.key) and x5c = [testLeaf.pem, testIntermediate.pem, testCA.pem]
// (java/certs). The result verifies under a SignedDataVerifier that trusts Apple's test CA
// (`TestSigner.testVerifier()`), and is rejected (UNTRUSTED_CHAIN) by the default verifier that trusts
// only the real Apple Root CA - G3.
//
// Use it to build signed transactions (prices, refunds/revocations) and notifications (REFUND,
// REFUND_REVERSED, DID_RENEW, ...) with nested signed transactions:
//
//     let signer = try TestSigner.appleTest()
//     let tx = try signer.sign(payload: TestSigner.transactionPayload(
//         transactionId: "1001", priceMilliunits: 1990, currency: "USD"))
//     let refund = try signer.sign(payload: TestSigner.notificationPayload(
//         notificationType: "REFUND", signedTransactionInfo: tx))
//     let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
//     let result = verifier.verifyNotification(refund)
//
// Dates: the test certificates are valid from 2023-01-05 to 2033-01-01, and the chain is checked at
// the payload's signedDate, so keep signedDate inside that window (the builders default it to
// TestSigner.defaultSignedDateMs, 2023-11-14T22:13:20Z).

import Foundation
import Crypto
import LedgerVerify

struct TestSigner {
    enum SignerError: Error, CustomStringConvertible {
        case fixture(String)
        var description: String {
            switch self { case .fixture(let why): return "test fixture problem: \(why)" }
        }
    }

    /// 2023-11-14T22:13:20Z, inside the validity window of Apple's test certificates.
    static let defaultSignedDateMs: Int64 = 1_700_000_000_000

    let privateKey: P256.Signing.PrivateKey
    /// Standard-base64 DER certificates for the x5c header (leaf first).
    let x5c: [String]

    init(privateKey: P256.Signing.PrivateKey, x5c: [String]) {
        self.privateKey = privateKey
        self.x5c = x5c
    }

    // MARK: Fixtures

    /// The test bundle's Fixtures folder.
    static var fixturesURL: URL {
        Bundle.module.url(forResource: "Fixtures", withExtension: nil)!
    }

    /// A file under Fixtures/apple-server-library/, e.g. "java/certs/testLeaf.pem".
    static func appleFixture(_ relativePath: String) -> URL {
        fixturesURL.appendingPathComponent("apple-server-library/\(relativePath)")
    }

    static func appleFixtureText(_ relativePath: String) throws -> String {
        try String(contentsOf: appleFixture(relativePath), encoding: .utf8)
    }

    /// DER bytes of a `.der.b64` fixture.
    static func appleFixtureDERFromBase64(_ relativePath: String) throws -> Data {
        let text = try appleFixtureText(relativePath)
        guard let der = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
            throw SignerError.fixture("\(relativePath) is not base64")
        }
        return der
    }

    /// Standard base64 of the DER inside a one-certificate PEM fixture.
    static func base64DER(ofPEM relativePath: String) throws -> String {
        // Some PEM fixtures start with openssl's text dump: keep only the lines inside the block.
        let text = try appleFixtureText(relativePath)
        guard let begin = text.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = text.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<text.endIndex)
        else {
            throw SignerError.fixture("\(relativePath) holds no PEM certificate block")
        }
        let body = text[begin.upperBound..<end.lowerBound]
            .split(whereSeparator: { $0 == "\n" || $0 == "\r" })
            .joined()
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard let der = Data(base64Encoded: body) else {
            throw SignerError.fixture("\(relativePath) is not a PEM certificate")
        }
        return der.base64EncodedString()
    }

    /// Apple's test CA (swift/certs/testCA.der), the root the signer's chain leads to.
    static func testCADER() throws -> Data {
        try appleFixtureDERFromBase64("swift/certs/testCA.der.b64")
    }

    /// A verifier that trusts Apple's test CA instead of the real Apple root.
    static func testVerifier(bundleIds: [String] = []) throws -> SignedDataVerifier {
        try SignedDataVerifier(trustedRootsDER: [testCADER()], bundleIds: bundleIds)
    }

    /// The signer with Apple's published test leaf key and the chain testLeaf -> testIntermediate -> testCA.
    /// `leafPEM` / `intermediatePEM` pick other java/certs files with the same keys (e.g.
    /// "testInvalidOIDLeaf.pem", "testInvalidOIDIntermediate.pem") for negative tests.
    static func appleTest(
        leafPEM: String = "testLeaf.pem",
        intermediatePEM: String = "testIntermediate.pem",
        rootPEM: String = "testCA.pem"
    ) throws -> TestSigner {
        let key = try P256.Signing.PrivateKey(pemRepresentation: appleFixtureText("test-private-keys/testLeaf.key"))
        let chain = try [leafPEM, intermediatePEM, rootPEM].map { try base64DER(ofPEM: "java/certs/\($0)") }
        return TestSigner(privateKey: key, x5c: chain)
    }

    // MARK: Signing

    /// Signs the payload JSON text exactly as given. `header` replaces the default header
    /// {"alg": alg, "x5c": x5c (or the signer's chain)} when given (for negative tests).
    func sign(payloadJSON: String, alg: String = "ES256", x5c: [String]? = nil, header: [String: Any]? = nil) throws
        -> String
    {
        let headerObject = header ?? ["alg": alg, "x5c": x5c ?? self.x5c, "typ": "JWT"]
        let headerJSON = try JSONSerialization.data(withJSONObject: headerObject, options: [.sortedKeys])
        let signingInput = Self.base64URL(headerJSON) + "." + Self.base64URL(Data(payloadJSON.utf8))
        let signature = try privateKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    /// Signs a payload given as a dictionary (Int64 values stay exact integers in the JSON).
    func sign(payload: [String: Any], alg: String = "ES256", x5c: [String]? = nil) throws -> String {
        let json = try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
        return try sign(payloadJSON: String(decoding: json, as: UTF8.self), alg: alg, x5c: x5c)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    // MARK: Payload builders

    /// A `JWSTransactionDecodedPayload`. nil arguments are left out; `extra` adds or overrides fields.
    static func transactionPayload(
        transactionId: String,
        originalTransactionId: String? = nil,
        webOrderLineItemId: String? = nil,
        bundleId: String? = "com.example",
        productId: String? = "com.example.product",
        purchaseDateMs: Int64? = defaultSignedDateMs - 60_000,
        originalPurchaseDateMs: Int64? = nil,
        expiresDateMs: Int64? = nil,
        signedDateMs: Int64? = defaultSignedDateMs,
        revocationDateMs: Int64? = nil,
        revocationReason: Int64? = nil,
        revocationType: String? = nil,
        revocationPercentage: Int64? = nil,
        quantity: Int64? = 1,
        type: String? = "Consumable",
        appAccountToken: String? = nil,
        inAppOwnershipType: String? = "PURCHASED",
        offerType: Int64? = nil,
        offerIdentifier: String? = nil,
        offerDiscountType: String? = nil,
        environment: String? = "Sandbox",
        storefront: String? = "USA",
        storefrontId: String? = "143441",
        transactionReason: String? = "PURCHASE",
        priceMilliunits: Int64? = nil,
        currency: String? = nil,
        extra: [String: Any] = [:]
    ) -> [String: Any] {
        var p: [String: Any] = ["transactionId": transactionId]
        let optional: [(String, Any?)] = [
            ("originalTransactionId", originalTransactionId ?? transactionId),
            ("webOrderLineItemId", webOrderLineItemId),
            ("bundleId", bundleId),
            ("productId", productId),
            ("purchaseDate", purchaseDateMs),
            ("originalPurchaseDate", originalPurchaseDateMs ?? purchaseDateMs),
            ("expiresDate", expiresDateMs),
            ("signedDate", signedDateMs),
            ("revocationDate", revocationDateMs),
            ("revocationReason", revocationReason),
            ("revocationType", revocationType),
            ("revocationPercentage", revocationPercentage),
            ("quantity", quantity),
            ("type", type),
            ("appAccountToken", appAccountToken),
            ("inAppOwnershipType", inAppOwnershipType),
            ("offerType", offerType),
            ("offerIdentifier", offerIdentifier),
            ("offerDiscountType", offerDiscountType),
            ("environment", environment),
            ("storefront", storefront),
            ("storefrontId", storefrontId),
            ("transactionReason", transactionReason),
            ("price", priceMilliunits),
            ("currency", currency),
        ]
        for (key, value) in optional {
            if let value { p[key] = value }
        }
        for (key, value) in extra { p[key] = value }
        return p
    }

    /// A `ResponseBodyV2DecodedPayload` (Server Notification V2). Pass nested JWS made with `sign`.
    static func notificationPayload(
        notificationType: String,
        subtype: String? = nil,
        notificationUUID: String = UUID().uuidString.lowercased(),
        version: String? = "2.0",
        signedDateMs: Int64? = defaultSignedDateMs,
        environment: String? = "Sandbox",
        bundleId: String? = "com.example",
        appAppleId: Int64? = 1234,
        status: Int64? = nil,
        signedTransactionInfo: String? = nil,
        signedRenewalInfo: String? = nil,
        extraData: [String: Any] = [:],
        extra: [String: Any] = [:]
    ) -> [String: Any] {
        var data: [String: Any] = [:]
        let dataFields: [(String, Any?)] = [
            ("environment", environment),
            ("bundleId", bundleId),
            ("appAppleId", appAppleId),
            ("status", status),
            ("signedTransactionInfo", signedTransactionInfo),
            ("signedRenewalInfo", signedRenewalInfo),
        ]
        for (key, value) in dataFields {
            if let value { data[key] = value }
        }
        for (key, value) in extraData { data[key] = value }
        var p: [String: Any] = [
            "notificationType": notificationType,
            "notificationUUID": notificationUUID,
            "data": data,
        ]
        if let subtype { p["subtype"] = subtype }
        if let version { p["version"] = version }
        if let signedDateMs { p["signedDate"] = signedDateMs }
        for (key, value) in extra { p[key] = value }
        return p
    }

    /// A `JWSRenewalInfoDecodedPayload`.
    static func renewalInfoPayload(
        originalTransactionId: String,
        autoRenewProductId: String = "com.example.subscription",
        productId: String = "com.example.subscription",
        autoRenewStatus: Int64 = 1,
        signedDateMs: Int64 = defaultSignedDateMs,
        environment: String = "Sandbox",
        extra: [String: Any] = [:]
    ) -> [String: Any] {
        var p: [String: Any] = [
            "originalTransactionId": originalTransactionId,
            "autoRenewProductId": autoRenewProductId,
            "productId": productId,
            "autoRenewStatus": autoRenewStatus,
            "signedDate": signedDateMs,
            "environment": environment,
        ]
        for (key, value) in extra { p[key] = value }
        return p
    }
}
