// Tests of LedgerVerify's App Store signed-data (JWS) verification, on Apple's MIT test fixtures
// (Fixtures/apple-server-library, see its SOURCES.md) and on data signed here by TestSigner with
// Apple's published test key.

import Foundation
import XCTest
@testable import LedgerVerify

final class SignedDataVerifierTests: XCTestCase {

    // MARK: Helpers

    private func mock(_ name: String) throws -> String {
        try TestSigner.appleFixtureText("swift/mock_signed_data/\(name)")
    }

    private func rejection<T>(_ result: Result<T, SignedDataRejection>, file: StaticString = #filePath, line: UInt = #line)
        -> SignedDataRejection?
    {
        switch result {
        case .success(let value):
            XCTFail("expected a rejection, got \(value)", file: file, line: line)
            return nil
        case .failure(let why):
            return why
        }
    }

    private func accepted<T>(_ result: Result<T, SignedDataRejection>, file: StaticString = #filePath, line: UInt = #line)
        -> T?
    {
        switch result {
        case .success(let value):
            return value
        case .failure(let why):
            XCTFail("expected acceptance, got [\(why.code)] \(why.description)", file: file, line: line)
            return nil
        }
    }

    /// Changes one character of a compact JWS part (0 header, 1 payload, 2 signature) at `offset`
    /// to another base64url character.
    private func tamper(_ jws: String, part: Int, offset: Int) -> String {
        var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var chars = Array(parts[part])
        let index = min(offset, chars.count - 2)
        chars[index] = chars[index] == "A" ? "B" : "A"
        parts[part] = String(chars)
        return parts.joined(separator: ".")
    }

    // MARK: Shipped root

    /// Signed payloads are read with the ledger's JSON parser: whole numbers exact, fractions
    /// as Double, a number past Double's range and a non-object refused, nesting kept.
    func testSignedPayloadJSONReadsAsBefore() throws {
        let object = try SignedDataJSON.parseObject(Data(#"{"a": 1698148900000, "b": 2.5, "c": "x\u00e9", "d": [true, null], "e": {"f": -9223372036854775808}, "g": 9223372036854775808}"#.utf8))
        XCTAssertEqual(object["a"], .integer(1_698_148_900_000))
        XCTAssertEqual(object["b"], .fractional(2.5))
        XCTAssertEqual(object["c"], .string("xé"))
        XCTAssertEqual(object["d"], .array([.bool(true), .null]))
        XCTAssertEqual(object["e"], .object(["f": .integer(Int64.min)]))
        XCTAssertEqual(object["g"], .fractional(9_223_372_036_854_775_808), "past Int64: a fraction, as JSONDecoder gave")
        // Named for what it may be: a whole number past 64 bits was called "a fractional number".
        XCTAssertThrowsError(try SignedDataFields(object: object).string("g")) {
            XCTAssertEqual(($0 as? SignedDataJSONError)?.message, "field g should be text but is a number that is no whole number within 64 bits")
        }
        // A whole number past 64 bits is said to be one, not quoted as a fraction alone (a
        // hostile-input review: "should be a whole number but is 1e+23").
        XCTAssertThrowsError(try SignedDataFields(object: try SignedDataJSON.parseObject(Data(#"{"price": 99999999999999999999999}"#.utf8))).int64("price")) {
            XCTAssertEqual(($0 as? SignedDataJSONError)?.message, "field price should be a whole number but is one past 64 bits (about 1e+23)")
        }
        XCTAssertThrowsError(try SignedDataFields(object: object).int64("b")) {
            XCTAssertEqual(($0 as? SignedDataJSONError)?.message, "field b should be a whole number but is 2.5")
        }
        XCTAssertThrowsError(try SignedDataJSON.parseObject(Data(#"{"a": 1e400}"#.utf8)))
        let whole = try SignedDataJSON.parseObject(Data(#"{"p": 1990.0, "t": 1.7e12, "z": -0.0, "f": 0.5, "k": 1}"#.utf8))
        XCTAssertEqual(whole["p"], .integer(1990), "a whole value written with a fraction, as JSONDecoder read it")
        XCTAssertEqual(whole["t"], .integer(1_700_000_000_000))
        XCTAssertEqual(whole["z"], .integer(0))
        XCTAssertEqual(whole["f"], .fractional(0.5))
        XCTAssertEqual(whole["k"], .integer(1))
        XCTAssertThrowsError(try SignedDataJSON.parseObject(Data(#"{"k": 1, "k": 2}"#.utf8)), "a name given twice: refused (it kept the first)")
        // Whole values past 2^53 written with a fraction or an exponent keep every digit (Double would round).
        let big = try SignedDataJSON.parseObject(Data(#"{"a": 9007199254740993.0, "b": -12345678901234567.000, "c": 9.007199254740993e15, "d": 1.25e1, "e": 12e-1, "f": 5e-400, "g": 9223372036854775807.0, "h": 9223372036854775808.0}"#.utf8))
        XCTAssertEqual(big["a"], .integer(9_007_199_254_740_993))
        XCTAssertEqual(big["b"], .integer(-12_345_678_901_234_567))
        XCTAssertEqual(big["c"], .integer(9_007_199_254_740_993))
        XCTAssertEqual(big["d"], .fractional(12.5))
        XCTAssertEqual(big["e"], .fractional(1.2))
        XCTAssertEqual(big["f"], .fractional(0), "a fraction too small for Double is zero, not whole")
        XCTAssertEqual(big["g"], .integer(Int64.max))
        XCTAssertEqual(big["h"], .fractional(9_223_372_036_854_775_808), "past Int64: a fraction")
        XCTAssertThrowsError(try SignedDataJSON.parseObject(Data("[1]".utf8)))
        XCTAssertThrowsError(try SignedDataJSON.parseObject(Data([0x7B, 0xFF, 0x7D])))
    }

    func testShippedAppleRootIsAppleRootCAG3() throws {
        let der = try SignedDataVerifier.appleRootCAG3()
        let fixture = try TestSigner.appleFixtureDERFromBase64("real-apple-certs/real-apple-root.der.b64")
        XCTAssertEqual(der, fixture)
        XCTAssertEqual(SignedDataVerifier.appleRootCAG3SHA256,
                       "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79"
                           .replacingOccurrences(of: ":", with: ""))
        XCTAssertNoThrow(try SignedDataVerifier(bundleIds: []))
    }

    func testLoadCertificateFilePEMAndDER() throws {
        let pemDER = try SignedDataVerifier.loadCertificateFile(TestSigner.appleFixture("java/certs/testCA.pem"))
        XCTAssertEqual(pemDER, try TestSigner.testCADER())
        // A PEM file with openssl's text dump before the block.
        let leafDER = try SignedDataVerifier.loadCertificateFile(TestSigner.appleFixture("java/certs/testLeaf.pem"))
        XCTAssertEqual(leafDER.base64EncodedString(), try TestSigner.base64DER(ofPEM: "java/certs/testLeaf.pem"))
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-test-\(UUID().uuidString).der")
        defer { try? FileManager.default.removeItem(at: tmp) }
        try TestSigner.testCADER().write(to: tmp)
        XCTAssertEqual(try SignedDataVerifier.loadCertificateFile(tmp), try TestSigner.testCADER())
        // Not a certificate.
        XCTAssertThrowsError(try SignedDataVerifier.loadCertificateFile(TestSigner.appleFixture("test-private-keys/testLeaf.key")))
        XCTAssertThrowsError(try SignedDataVerifier(trustedRootsDER: [], bundleIds: []))
    }

    // MARK: 1. Apple's mock signed data

    func testAppleMockNotificationAcceptedUnderTestCARejectedUnderAppleRoot() throws {
        let jws = try mock("testNotification")
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let n = try XCTUnwrap(accepted(verifier.verifyNotification(jws)))
        XCTAssertEqual(n.notificationType, "TEST")
        XCTAssertEqual(n.notificationUUID, "9ad56bd2-0bc6-42e0-af24-fd996d87a1e6")
        XCTAssertEqual(n.bundleId, "com.example")
        XCTAssertEqual(n.environment, "Sandbox")
        XCTAssertEqual(n.appAppleId, 1234)
        XCTAssertEqual(n.signedDateMs, 1_681_314_324_000)
        XCTAssertNil(n.transaction, "a TEST notification carries no signedTransactionInfo")
        XCTAssertNil(n.renewalInfoJSON)
        XCTAssertTrue(n.rawPayloadJSON.contains("\"notificationType\":\"TEST\""))
        XCTAssertEqual(signedDataKind(ofCompactJWS: jws), .notification)

        let real = try SignedDataVerifier(bundleIds: ["com.example"])
        XCTAssertEqual(rejection(real.verifyNotification(jws))?.code, "UNTRUSTED_CHAIN")
    }

    func testAppleMockTransactionInfoVerifiesButHasNoTransactionId() throws {
        let jws = try mock("transactionInfo")
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        // Chain and signature are good...
        let payload = try XCTUnwrap(accepted(verifier.verifySignedPayload(jws)))
        XCTAssertEqual(payload.signedDateMs, 1_672_956_154_000)
        XCTAssertEqual(payload.environment, "Sandbox")
        XCTAssertEqual(payload.signerSubject.contains("Leaf"), true)
        // ...but Apple's mock payload has no transactionId, so it is not a usable transaction.
        let why = try XCTUnwrap(rejection(verifier.verifyTransaction(jws)))
        XCTAssertEqual(why.code, "MALFORMED")
        XCTAssertTrue(why.description.contains("transactionId"), why.description)

        let real = try SignedDataVerifier()
        XCTAssertEqual(rejection(real.verifySignedPayload(jws))?.code, "UNTRUSTED_CHAIN")
        XCTAssertEqual(rejection(real.verifyTransaction(jws))?.code, "UNTRUSTED_CHAIN")
    }

    func testAppleMockRenewalInfoAcceptedUnderTestCARejectedUnderAppleRoot() throws {
        let jws = try mock("renewalInfo")
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let json = try XCTUnwrap(accepted(verifier.verifyRenewalInfo(jws)))
        XCTAssertTrue(json.contains("1672956154000"), json)
        let real = try SignedDataVerifier()
        XCTAssertEqual(rejection(real.verifyRenewalInfo(jws))?.code, "UNTRUSTED_CHAIN")
    }

    // MARK: 2. Tampering

    func testOneCharacterChangedInPayloadIsBadSignature() throws {
        let signer = try TestSigner.appleTest()
        let jws = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "2000000000000001", priceMilliunits: 990, currency: "USD"))
        let verifier = try TestSigner.testVerifier()
        XCTAssertNotNil(accepted(verifier.verifyTransaction(jws)))
        // Change the payload so it still decodes as JSON: the price 990 -> 999.
        let parts = jws.split(separator: ".").map(String.init)
        let payload = String(decoding: Data(base64Encoded: base64(parts[1]))!, as: UTF8.self)
        XCTAssertTrue(payload.contains("\"price\":990"))
        let forgedPayload = payload.replacingOccurrences(of: "\"price\":990", with: "\"price\":999")
        let forged = [parts[0], TestSigner.base64URL(Data(forgedPayload.utf8)), parts[2]].joined(separator: ".")
        let why = try XCTUnwrap(rejection(verifier.verifyTransaction(forged)))
        XCTAssertEqual(why, .badSignature)
        XCTAssertEqual(why.code, "BAD_SIGNATURE")

        // One raw character changed in Apple's own mock payload: bad signature or undecodable, never accepted.
        let mockJWS = try mock("testNotification")
        for offset in [5, 40, 100] {
            let tampered = tamper(mockJWS, part: 1, offset: offset)
            let code = try XCTUnwrap(rejection(verifier.verifyNotification(tampered))).code
            XCTAssertTrue(["BAD_SIGNATURE", "MALFORMED"].contains(code), code)
        }
    }

    func testOneCharacterChangedInSignatureIsBadSignature() throws {
        let verifier = try TestSigner.testVerifier()
        let jws = try mock("testNotification")
        for offset in [0, 10, 42] {
            let why = try XCTUnwrap(rejection(verifier.verifyNotification(tamper(jws, part: 2, offset: offset))))
            XCTAssertEqual(why, .badSignature, why.description)
        }
        // A truncated signature.
        let parts = jws.split(separator: ".").map(String.init)
        let short = [parts[0], parts[1], String(parts[2].dropLast(8))].joined(separator: ".")
        XCTAssertEqual(rejection(verifier.verifyNotification(short)), .badSignature)
    }

    func testNotACompactJWSIsMalformed() throws {
        let verifier = try TestSigner.testVerifier()
        for text in ["", "abc", "a.b", "a.b.c.d", "!!!.???.###", "e30.e30"] {
            XCTAssertEqual(rejection(verifier.verifyTransaction(text))?.code, "MALFORMED", text)
        }
        // Header that is not JSON.
        let notJSON = TestSigner.base64URL(Data("hello".utf8)) + ".e30.AAAA"
        XCTAssertEqual(rejection(verifier.verifyTransaction(notJSON))?.code, "MALFORMED")
        XCTAssertEqual(signedDataKind(ofCompactJWS: "garbage"), .unknown)
    }

    // MARK: 3. Missing chain, wrong bundle

    func testMissingX5CHeaderClaimIsMissingChain() throws {
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let why = try XCTUnwrap(rejection(verifier.verifyNotification(mock("missingX5CHeaderClaim"))))
        XCTAssertEqual(why, .missingCertificateChain)
        XCTAssertEqual(why.code, "MISSING_CERTIFICATE_CHAIN")
        XCTAssertTrue(why.description.contains("no certificate chain"))
    }

    func testWrongBundleIdIsRejected() throws {
        // Apple's wrongBundleId mock has no signedDate: the chain is checked at the verifier's clock,
        // fixed here inside the test certificates' validity so the test does not depend on today.
        var verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        verifier.currentTime = { Date(timeIntervalSince1970: 1_700_000_000) }
        let why = try XCTUnwrap(rejection(verifier.verifyNotification(mock("wrongBundleId"))))
        XCTAssertEqual(why, .wrongBundleId(found: "com.example.wrong", expected: ["com.example"]))
        XCTAssertEqual(why.code, "WRONG_BUNDLE_ID")
        XCTAssertTrue(why.description.contains("com.example.wrong"))
        // Without configured bundle ids the same data is accepted.
        var open = try TestSigner.testVerifier(bundleIds: [])
        open.currentTime = { Date(timeIntervalSince1970: 1_700_000_000) }
        XCTAssertEqual(accepted(open.verifyNotification(try mock("wrongBundleId")))?.bundleId, "com.example.wrong")

        // A transaction of another app.
        let signer = try TestSigner.appleTest()
        let tx = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "77", bundleId: "com.other.app"))
        XCTAssertEqual(rejection(verifier.verifyTransaction(tx)), .wrongBundleId(found: "com.other.app", expected: ["com.example"]))
        let noBundle = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "78", bundleId: nil))
        XCTAssertEqual(rejection(verifier.verifyTransaction(noBundle)), .wrongBundleId(found: "", expected: ["com.example"]))
    }

    // MARK: 4. Xcode / LocalTesting

    func testXcodeSignedTransactionIsRejectedAsXcode() throws {
        let jws = try TestSigner.appleFixtureText("swift/xcode/xcode-signed-transaction")
        let why = try XCTUnwrap(rejection(TestSigner.testVerifier().verifyTransaction(jws)))
        XCTAssertEqual(why, .xcodeEnvironment)
        XCTAssertEqual(why.code, "XCODE_ENVIRONMENT")
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(jws)), .xcodeEnvironment)
        XCTAssertEqual(signedDataKind(ofCompactJWS: jws), .transaction)
        let renewal = try TestSigner.appleFixtureText("swift/xcode/xcode-signed-renewal-info")
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyRenewalInfo(renewal)), .xcodeEnvironment)
        XCTAssertEqual(signedDataKind(ofCompactJWS: renewal), .renewalInfo)
        // A record saying Xcode whose signature fails, or that carries no certificate, is refused
        // for that, whatever its payload says (a forged one read as a developer test).
        let trimmed = jws.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(tamper(trimmed, part: 2, offset: 10))), .badSignature)
        XCTAssertNotEqual(rejection(try SignedDataVerifier().verifyTransaction(tamper(trimmed, part: 1, offset: 30))), .xcodeEnvironment)
        let parts = trimmed.split(separator: ".").map(String.init)
        let noChain = TestSigner.base64URL(Data(#"{"alg":"ES256"}"#.utf8)) + "." + parts[1] + "." + parts[2]
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(noChain)), .missingCertificateChain)
        // Signed by a key of its own (Apple's test key, its own certificate in x5c): still a
        // developer test once its signature holds.
        let signer = try TestSigner.appleTest()
        let own = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "79", environment: "Xcode"))
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(own)), .xcodeEnvironment)
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(tamper(own, part: 2, offset: 5))), .badSignature)
        // Its payload swapped for another Xcode payload, the signature kept: refused as changed.
        let other = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "80", environment: "Xcode")).split(separator: ".")
        let ownParts = own.split(separator: ".")
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction([ownParts[0], other[1], ownParts[2]].joined(separator: "."))), .badSignature)
    }

    func testLocalTestingEnvironmentIsRejected() throws {
        let signer = try TestSigner.appleTest()
        let jws = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1", environment: "LocalTesting"))
        XCTAssertEqual(rejection(try TestSigner.testVerifier().verifyTransaction(jws)), .localTestingEnvironment)
    }

    // MARK: 5. TestSigner round trips

    func testSignedTransactionWithPriceAndPartialRefundDecodes() throws {
        let signer = try TestSigner.appleTest()
        let jws = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "2000000123456789",
            originalTransactionId: "2000000123456000",
            webOrderLineItemId: "2000000099999999",
            productId: "com.example.coins.100",
            purchaseDateMs: 1_699_999_000_000,
            signedDateMs: 1_700_000_000_000,
            revocationDateMs: 1_700_000_500_000,
            revocationReason: 1,
            revocationType: "REFUND_PRORATED",
            revocationPercentage: 50_000,
            quantity: 1,
            type: "Consumable",
            appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138",
            offerType: 2,
            offerIdentifier: "promo-1",
            offerDiscountType: "PAY_AS_YOU_GO",
            priceMilliunits: 1990,
            currency: "USD",
            extra: ["someFutureField": ["nested": true], "advancedCommerceInfo": ["x": 1]]))
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let tx = try XCTUnwrap(accepted(verifier.verifyTransaction(jws)))
        XCTAssertEqual(tx.transactionId, "2000000123456789")
        XCTAssertEqual(tx.originalTransactionId, "2000000123456000")
        XCTAssertEqual(tx.webOrderLineItemId, "2000000099999999")
        XCTAssertEqual(tx.bundleId, "com.example")
        XCTAssertEqual(tx.productId, "com.example.coins.100")
        XCTAssertEqual(tx.purchaseDateMs, 1_699_999_000_000)
        XCTAssertEqual(tx.originalPurchaseDateMs, 1_699_999_000_000)
        XCTAssertEqual(tx.signedDateMs, 1_700_000_000_000)
        XCTAssertEqual(tx.revocationDateMs, 1_700_000_500_000)
        XCTAssertEqual(tx.revocationReason, 1)
        XCTAssertEqual(tx.revocationType, "REFUND_PRORATED")
        XCTAssertEqual(tx.revocationPercentage, 50_000)
        XCTAssertEqual(tx.quantity, 1)
        XCTAssertEqual(tx.type, "Consumable")
        XCTAssertEqual(tx.appAccountToken, "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        XCTAssertEqual(tx.inAppOwnershipType, "PURCHASED")
        XCTAssertEqual(tx.offerType, 2)
        XCTAssertEqual(tx.offerIdentifier, "promo-1")
        XCTAssertEqual(tx.offerDiscountType, "PAY_AS_YOU_GO")
        XCTAssertEqual(tx.environment, "Sandbox")
        XCTAssertEqual(tx.storefront, "USA")
        XCTAssertEqual(tx.storefrontId, "143441")
        XCTAssertEqual(tx.transactionReason, "PURCHASE")
        XCTAssertEqual(tx.currency, "USD")
        XCTAssertEqual(tx.priceMilliunits, 1990)
        XCTAssertTrue(tx.rawPayloadJSON.contains("someFutureField"), "unknown fields are kept in the raw JSON")
        XCTAssertEqual(signedDataKind(ofCompactJWS: jws), .transaction)
        // The same data is not Apple's.
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(jws))?.code, "UNTRUSTED_CHAIN")
    }

    func testRefundNotificationWithNestedTransactionDecodes() throws {
        let signer = try TestSigner.appleTest()
        let tx = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "2000000000000042",
            type: "Auto-Renewable Subscription",
            priceMilliunits: 1990, currency: "USD",
            extra: ["revocationDate": Int64(1_700_000_100_000), "revocationReason": Int64(0)]))
        let renewal = try signer.sign(payload: TestSigner.renewalInfoPayload(originalTransactionId: "2000000000000042"))
        let jws = try signer.sign(payload: TestSigner.notificationPayload(
            notificationType: "REFUND",
            notificationUUID: "0f4d3a1e-0000-4000-8000-000000000001",
            status: 1,
            signedTransactionInfo: tx,
            signedRenewalInfo: renewal))
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let n = try XCTUnwrap(accepted(verifier.verifyNotification(jws)))
        XCTAssertEqual(n.notificationType, "REFUND")
        XCTAssertNil(n.subtype)
        XCTAssertEqual(n.notificationUUID, "0f4d3a1e-0000-4000-8000-000000000001")
        XCTAssertEqual(n.version, "2.0")
        XCTAssertEqual(n.signedDateMs, TestSigner.defaultSignedDateMs)
        XCTAssertEqual(n.environment, "Sandbox")
        XCTAssertEqual(n.bundleId, "com.example")
        XCTAssertEqual(n.appAppleId, 1234)
        XCTAssertEqual(n.status, 1)
        let nested = try XCTUnwrap(n.transaction)
        XCTAssertEqual(nested.transactionId, "2000000000000042")
        XCTAssertEqual(nested.priceMilliunits, 1990)
        XCTAssertEqual(nested.currency, "USD")
        XCTAssertEqual(nested.revocationDateMs, 1_700_000_100_000)
        XCTAssertEqual(nested.revocationReason, 0)
        XCTAssertEqual(nested, accepted(verifier.verifyTransaction(tx)))
        XCTAssertTrue(try XCTUnwrap(n.renewalInfoJSON).contains("\"autoRenewStatus\":1"))
        XCTAssertEqual(signedDataKind(ofCompactJWS: renewal), .renewalInfo)

        // The HTTP body form {"signedPayload": "..."} is accepted too.
        let body = "{\"signedPayload\":\"\(jws)\"}"
        XCTAssertEqual(accepted(verifier.verifyNotification(body)), n)
    }

    func testRefundReversedWithUnknownFieldsAndValues() throws {
        let signer = try TestSigner.appleTest()
        let tx = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "55", revocationType: "SOME_FUTURE_REVOCATION", type: "Some-Future-Type",
            priceMilliunits: 9_223_372_036_854_775_807, currency: "XTS"))
        let jws = try signer.sign(payload: TestSigner.notificationPayload(
            notificationType: "REFUND_REVERSED", subtype: "SOME_NEW_SUBTYPE", signedTransactionInfo: tx,
            extraData: ["consumptionRequestReason": "UNINTENDED_PURCHASE"], extra: ["brandNewTopLevel": [1, 2, 3]]))
        let n = try XCTUnwrap(accepted(try TestSigner.testVerifier().verifyNotification(jws)))
        XCTAssertEqual(n.notificationType, "REFUND_REVERSED")
        XCTAssertEqual(n.subtype, "SOME_NEW_SUBTYPE")
        XCTAssertEqual(n.transaction?.type, "Some-Future-Type")
        XCTAssertEqual(n.transaction?.revocationType, "SOME_FUTURE_REVOCATION")
        XCTAssertEqual(n.transaction?.priceMilliunits, Int64.max, "integers are decoded exactly, never through Double")
        XCTAssertTrue(n.rawPayloadJSON.contains("brandNewTopLevel"))
    }

    func testIntegersAreExactAndNumericTextIsAccepted() throws {
        let signer = try TestSigner.appleTest()
        // 2^53 + 1 cannot be represented by a Double.
        let payload = """
        {"transactionId":"9","bundleId":"com.example","price":9007199254740993,"quantity":"2",\
        "signedDate":1700000000000,"environment":"Production","storefrontId":143441}
        """
        let jws = try signer.sign(payloadJSON: payload)
        let tx = try XCTUnwrap(accepted(try TestSigner.testVerifier().verifyTransaction(jws)))
        XCTAssertEqual(tx.priceMilliunits, 9_007_199_254_740_993)
        XCTAssertEqual(tx.quantity, 2)
        XCTAssertEqual(tx.storefrontId, "143441")
        XCTAssertEqual(tx.environment, "Production")
        XCTAssertEqual(tx.rawPayloadJSON, payload, "the raw payload is kept byte for byte")

        // A fractional price is not a whole number of milliunits: malformed, naming the field.
        let bad = try signer.sign(payloadJSON: #"{"transactionId":"9","price":1990.5,"signedDate":1700000000000}"#)
        let why = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyTransaction(bad)))
        XCTAssertEqual(why.code, "MALFORMED")
        XCTAssertTrue(why.description.contains("price"), why.description)
    }

    func testNestedTransactionFailureIsReportedWithItsReason() throws {
        let signer = try TestSigner.appleTest()
        let tx = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1", priceMilliunits: 990, currency: "EUR"))
        let broken = tamper(tx, part: 2, offset: 3)
        let jws = try signer.sign(payload: TestSigner.notificationPayload(notificationType: "REFUND", signedTransactionInfo: broken))
        let why = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyNotification(jws)))
        guard case .nestedTransactionInvalid(let inner) = why else { return XCTFail("got \(why)") }
        XCTAssertTrue(inner.contains("BAD_SIGNATURE"), inner)
        XCTAssertEqual(why.code, "NESTED_TRANSACTION_INVALID")

        // A nested transaction of another app.
        let other = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "2", bundleId: "com.other"))
        let n2 = try signer.sign(payload: TestSigner.notificationPayload(notificationType: "DID_RENEW", signedTransactionInfo: other))
        let why2 = try XCTUnwrap(rejection(try TestSigner.testVerifier(bundleIds: ["com.example"]).verifyNotification(n2)))
        guard case .nestedTransactionInvalid(let inner2) = why2 else { return XCTFail("got \(why2)") }
        XCTAssertTrue(inner2.contains("WRONG_BUNDLE_ID"), inner2)

        // A nested renewal info that is Xcode data.
        let xcodeRenewal = try TestSigner.appleFixtureText("swift/xcode/xcode-signed-renewal-info")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let n3 = try signer.sign(payload: TestSigner.notificationPayload(notificationType: "DID_RENEW", signedRenewalInfo: xcodeRenewal))
        let why3 = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyNotification(n3)))
        XCTAssertEqual(why3.code, "NESTED_RENEWAL_INFO_INVALID")
    }

    func testKindMismatchIsMalformed() throws {
        let signer = try TestSigner.appleTest()
        let verifier = try TestSigner.testVerifier()
        let notification = try signer.sign(payload: TestSigner.notificationPayload(notificationType: "TEST"))
        let why = try XCTUnwrap(rejection(verifier.verifyTransaction(notification)))
        XCTAssertEqual(why.code, "MALFORMED")
        XCTAssertTrue(why.description.contains("server notification"), why.description)
        let tx = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "5"))
        XCTAssertEqual(rejection(verifier.verifyNotification(tx))?.code, "MALFORMED")
    }

    // MARK: 6. Header and chain rules

    func testWrongAlgorithmIsRejected() throws {
        let signer = try TestSigner.appleTest()
        let payload = TestSigner.transactionPayload(transactionId: "1")
        let hs256 = try signer.sign(payload: payload, alg: "HS256")
        let why = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyTransaction(hs256)))
        XCTAssertEqual(why, .unsupportedAlgorithm("HS256"))
        XCTAssertEqual(why.code, "UNSUPPORTED_ALGORITHM")
        let none = try signer.sign(payloadJSON: #"{"transactionId":"1","signedDate":1700000000000}"#,
                                   header: ["x5c": signer.x5c])
        XCTAssertEqual(rejection(try TestSigner.testVerifier().verifyTransaction(none)), .unsupportedAlgorithm("none"))
    }

    func testCertificateCountMustBeThree() throws {
        let signer = try TestSigner.appleTest()
        let payload = TestSigner.transactionPayload(transactionId: "1")
        let two = try signer.sign(payload: payload, x5c: Array(signer.x5c.prefix(2)))
        let why = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyTransaction(two)))
        XCTAssertEqual(why, .wrongCertificateCount(2))
        XCTAssertEqual(why.code, "WRONG_CERTIFICATE_COUNT")
        let four = try signer.sign(payload: payload, x5c: signer.x5c + [signer.x5c[2]])
        XCTAssertEqual(rejection(try TestSigner.testVerifier().verifyTransaction(four)), .wrongCertificateCount(4))
        let garbage = try signer.sign(payload: payload, x5c: ["not base64!", signer.x5c[1], signer.x5c[2]])
        XCTAssertEqual(rejection(try TestSigner.testVerifier().verifyTransaction(garbage))?.code, "INVALID_CERTIFICATE")
        let notCert = try signer.sign(payload: payload, x5c: ["AAAA", signer.x5c[1], signer.x5c[2]])
        XCTAssertEqual(rejection(try TestSigner.testVerifier().verifyTransaction(notCert))?.code, "INVALID_CERTIFICATE")
    }

    func testLeafWithoutAppleOIDIsRejected() throws {
        // testInvalidOIDLeaf.pem has the test leaf's key, is issued by the test intermediate, but carries
        // OID 1.2.840.113635.100.6.11.2 instead of .11.1.
        let signer = try TestSigner.appleTest(leafPEM: "testInvalidOIDLeaf.pem")
        let jws = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1"))
        let why = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyTransaction(jws)))
        guard case .missingAppleOID(let detail) = why else { return XCTFail("got \(why)") }
        XCTAssertTrue(detail.contains("1.2.840.113635.100.6.11.1"), detail)
        XCTAssertEqual(why.code, "MISSING_APPLE_OID")
    }

    func testIntermediateWithoutAppleOIDIsRejected() throws {
        // testInvalidOIDIntermediate.pem has the test intermediate's name and key but OID .6.2.2.
        let signer = try TestSigner.appleTest(intermediatePEM: "testInvalidOIDIntermediate.pem")
        let jws = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1"))
        let why = try XCTUnwrap(rejection(try TestSigner.testVerifier().verifyTransaction(jws)))
        guard case .missingAppleOID(let detail) = why else { return XCTFail("got \(why)") }
        XCTAssertTrue(detail.contains("1.2.840.113635.100.6.2.1"), detail)
    }

    func testX5CRootIsNotTrustedByItself() throws {
        // The chain's own x5c[2] is the test CA, but the verifier trusts only the real Apple root.
        let signer = try TestSigner.appleTest()
        let jws = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1"))
        let why = try XCTUnwrap(rejection(try SignedDataVerifier().verifyTransaction(jws)))
        XCTAssertEqual(why.code, "UNTRUSTED_CHAIN")
        XCTAssertTrue(why.description.contains("trusted root"), why.description)
        // Claiming the real Apple root as x5c[2] changes nothing.
        let realRoot = try TestSigner.appleFixtureDERFromBase64("real-apple-certs/real-apple-root.der.b64").base64EncodedString()
        let claimed = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1"),
                                      x5c: [signer.x5c[0], signer.x5c[1], realRoot])
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(claimed))?.code, "UNTRUSTED_CHAIN")
    }

    func testWithoutSignedDateTheClockIsUsed() throws {
        var verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let jws = try mock("wrongBundleId") // no signedDate in its payload
        verifier.currentTime = { Date(timeIntervalSince1970: 2_100_000_000) } // 2036: test certificates expired
        let why = try XCTUnwrap(rejection(verifier.verifyNotification(jws)))
        XCTAssertEqual(why.code, "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE")
        XCTAssertTrue(why.description.contains("no signedDate"), why.description)
    }

    func testChainIsCheckedAtSignedDate() throws {
        let signer = try TestSigner.appleTest()
        let verifier = try TestSigner.testVerifier()
        // The test certificates are valid 2023-01-05 .. 2033-01-01.
        let before = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "1", purchaseDateMs: 1_600_000_000_000, signedDateMs: 1_600_000_000_000)) // 2020
        let why = try XCTUnwrap(rejection(verifier.verifyTransaction(before)))
        XCTAssertEqual(why.code, "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE")
        XCTAssertTrue(why.description.contains("2020-09-13"), why.description)
        let after = try signer.sign(payload: TestSigner.transactionPayload(
            transactionId: "1", signedDateMs: 2_000_000_000_000)) // 2033-05-18
        XCTAssertEqual(rejection(verifier.verifyTransaction(after))?.code, "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE")
        // Inside the window: accepted whatever today's date is.
        let inside = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1", signedDateMs: 1_673_000_000_000))
        XCTAssertNotNil(accepted(verifier.verifyTransaction(inside)))
    }

    func testRealAppleCertificatesChainToShippedRoot() throws {
        // The real leaf and WWDR G6 intermediate, as x5c, reach the shipped Apple Root CA - G3. We
        // cannot sign with Apple's key, so the signature check must be the one that fails.
        let leaf = try TestSigner.appleFixtureDERFromBase64("real-apple-certs/real-apple-signing-certificate.der.b64")
        let intermediate = try TestSigner.appleFixtureDERFromBase64("real-apple-certs/real-apple-intermediate.der.b64")
        let root = try SignedDataVerifier.appleRootCAG3()
        let signer = try TestSigner.appleTest()
        let x5c = [leaf, intermediate, root].map { $0.base64EncodedString() }
        let inWindow = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1", signedDateMs: 1_760_000_000_000), x5c: x5c)
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(inWindow)), .badSignature)
        // Before the real leaf's validity (2025-09-19): the chain check says so first.
        let early = try signer.sign(payload: TestSigner.transactionPayload(transactionId: "1", signedDateMs: 1_700_000_000_000), x5c: x5c)
        XCTAssertEqual(rejection(try SignedDataVerifier().verifyTransaction(early))?.code, "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE")
    }

    func testVerifyingFromManyConcurrentTasksDoesNotBlockThePool() async throws {
        // The synchronous API runs swift-certificates' async Verifier on the calling thread; called
        // from more tasks than the machine has cores, it must neither deadlock nor mix results up.
        let signer = try TestSigner.appleTest()
        let verifier = try TestSigner.testVerifier(bundleIds: ["com.example"])
        let jwsList = try (0..<16).map { i in
            try signer.sign(payload: TestSigner.transactionPayload(transactionId: "\(i)", priceMilliunits: Int64(i) * 1000, currency: "USD"))
        }
        let ids = await withTaskGroup(of: String?.self) { group in
            for jws in jwsList {
                group.addTask { try? verifier.verifyTransaction(jws).get().transactionId }
            }
            var ids: [String] = []
            for await id in group { if let id { ids.append(id) } }
            return ids
        }
        XCTAssertEqual(Set(ids), Set((0..<16).map { "\($0)" }))
    }

    func testEveryRejectionHasCodeAndPlainSentence() {
        let all: [SignedDataRejection] = [
            .malformed("x"), .unsupportedAlgorithm("HS256"), .missingCertificateChain, .wrongCertificateCount(2),
            .invalidCertificate("x"), .untrustedChain("x"), .missingAppleOID("x"), .certificateNotValidAtSignedDate("x"),
            .badSignature, .xcodeEnvironment, .localTestingEnvironment, .wrongBundleId(found: "a", expected: ["b"]),
            .nestedTransactionInvalid("x"), .nestedRenewalInfoInvalid("x"),
        ]
        XCTAssertEqual(Set(all.map(\.code)).count, all.count)
        for r in all {
            XCTAssertFalse(r.description.isEmpty)
            XCTAssertEqual(r.code, r.code.uppercased())
        }
    }

    private func base64(_ base64url: String) -> String {
        var s = base64url.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return s
    }
}
