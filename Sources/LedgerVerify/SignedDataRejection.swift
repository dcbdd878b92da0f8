// Why a piece of App Store signed data (JWS) was not accepted: one case per plain reason,
// each with a stable machine code and a sentence a finance person or auditor understands.

import Foundation

public enum SignedDataRejection: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a compact JWS (three base64url parts), header or payload not JSON, a known field of the wrong type, ...
    case malformed(String)
    /// Header `alg` is not ES256 (the value found, or "none" when absent).
    case unsupportedAlgorithm(String)
    /// No `x5c` certificate chain in the header.
    case missingCertificateChain
    /// `x5c` must hold exactly 3 certificates (leaf, Apple intermediate, Apple root).
    case wrongCertificateCount(Int)
    /// A certificate in `x5c` is not valid base64 DER, or its key is not the expected kind.
    case invalidCertificate(String)
    /// The leaf and intermediate certificates do not chain up to a trusted root.
    case untrustedChain(String)
    /// Leaf lacks 1.2.840.113635.100.6.11.1 or intermediate lacks 1.2.840.113635.100.6.2.1.
    case missingAppleOID(String)
    /// A certificate of the chain was not valid (expired / not yet valid) at the payload's signedDate.
    case certificateNotValidAtSignedDate(String)
    /// The ES256 signature over header.payload does not match the leaf certificate's key.
    case badSignature
    /// StoreKit testing in Xcode: not a real App Store transaction.
    case xcodeEnvironment
    /// StoreKit local testing: not a real App Store transaction.
    case localTestingEnvironment
    /// The bundle id in the data is not one of the configured app bundle ids ("" when the data carries none).
    case wrongBundleId(found: String, expected: [String])
    /// The `signedTransactionInfo` inside a notification failed verification (the nested reason, with its code).
    case nestedTransactionInvalid(String)
    /// The `signedRenewalInfo` inside a notification failed verification (the nested reason, with its code).
    case nestedRenewalInfoInvalid(String)

    /// Stable machine code, e.g. "BAD_SIGNATURE", "UNTRUSTED_CHAIN".
    public var code: String {
        switch self {
        case .malformed: return "MALFORMED"
        case .unsupportedAlgorithm: return "UNSUPPORTED_ALGORITHM"
        case .missingCertificateChain: return "MISSING_CERTIFICATE_CHAIN"
        case .wrongCertificateCount: return "WRONG_CERTIFICATE_COUNT"
        case .invalidCertificate: return "INVALID_CERTIFICATE"
        case .untrustedChain: return "UNTRUSTED_CHAIN"
        case .missingAppleOID: return "MISSING_APPLE_OID"
        case .certificateNotValidAtSignedDate: return "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE"
        case .badSignature: return "BAD_SIGNATURE"
        case .xcodeEnvironment: return "XCODE_ENVIRONMENT"
        case .localTestingEnvironment: return "LOCAL_TESTING_ENVIRONMENT"
        case .wrongBundleId: return "WRONG_BUNDLE_ID"
        case .nestedTransactionInvalid: return "NESTED_TRANSACTION_INVALID"
        case .nestedRenewalInfoInvalid: return "NESTED_RENEWAL_INFO_INVALID"
        }
    }

    /// The plain sentence.
    public var description: String {
        switch self {
        case .malformed(let why):
            return "The signed data is damaged or not in Apple's format, so it cannot be checked: \(why)."
        case .unsupportedAlgorithm(let alg):
            return "The signed data uses the signing method \"\(alg)\"; the App Store always uses ES256, so it was not signed by Apple."
        case .missingCertificateChain:
            return "The signed data carries no certificate chain (x5c header), so there is no proof it comes from Apple."
        case .wrongCertificateCount(let n):
            return "The signed data carries \(n) certificate(s); App Store data always carries exactly 3 (signing certificate, Apple intermediate, Apple root)."
        case .invalidCertificate(let why):
            return "A certificate in the signed data cannot be read: \(why)."
        case .untrustedChain(let why):
            return "The certificates in the signed data do not lead to a trusted root certificate (Apple Root CA - G3 or a root configured in trusted_roots), so it was not signed by Apple: \(why)."
        case .missingAppleOID(let why):
            return "The certificates are not Apple's App Store signing certificates: \(why)."
        case .certificateNotValidAtSignedDate(let why):
            return "A certificate of the chain was not valid on the date the data says it was signed: \(why)."
        case .badSignature:
            return "The signature does not match the content: the data was changed after Apple signed it, or was not signed with Apple's certificate."
        case .xcodeEnvironment:
            return "The data comes from StoreKit testing in Xcode (environment Xcode): a developer test, not a real App Store transaction."
        case .localTestingEnvironment:
            return "The data comes from StoreKit local testing (environment LocalTesting): a developer test, not a real App Store transaction."
        case .wrongBundleId(let found, let expected):
            let list = expected.joined(separator: ", ")
            if found.isEmpty {
                return "The data names no app (no bundle id); only data of the configured app(s) \(list) is accepted."
            }
            return "The data belongs to another app (bundle id \(found)); only data of the configured app(s) \(list) is accepted."
        case .nestedTransactionInvalid(let why):
            return "The transaction inside the notification failed its own check: \(why)"
        case .nestedRenewalInfoInvalid(let why):
            return "The subscription renewal info inside the notification failed its own check: \(why)"
        }
    }
}

extension SignedDataRejection: LocalizedError {
    public var errorDescription: String? { description }
}

/// Problems setting up a verifier (reading trusted roots), as opposed to rejecting data.
public enum SignedDataSetupError: Error, Equatable, Sendable, CustomStringConvertible, LocalizedError {
    /// The Apple Root CA - G3 resource is missing from the tool, or its fingerprint is wrong.
    case bundledRootUnavailable(String)
    case unreadableFile(path: String, reason: String)
    case notACertificate(String)
    case noTrustedRoots

    public var description: String {
        switch self {
        case .bundledRootUnavailable(let why):
            return "The Apple Root CA - G3 certificate shipped with iapledger cannot be used: \(why)."
        case .unreadableFile(let path, let reason):
            return "The certificate file \(path) cannot be read: \(reason)."
        case .notACertificate(let why):
            return "Not a usable X.509 certificate: \(why)."
        case .noTrustedRoots:
            return "No trusted root certificate is configured, so no signed data could ever be accepted."
        }
    }

    public var errorDescription: String? { description }
}
