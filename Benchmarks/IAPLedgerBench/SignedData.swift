// App Store signed transactions for the benchmark: the demo generator writes legacy receipts
// only, so the benchmark signs a share of the same purchases as App Store Server API
// transactions (compact JWS, ES256, a three-certificate x5c chain under a root it makes and
// adds to the workspace's `trusted_roots`, with Apple's marker extensions). A backend that
// forwards both sees each such purchase twice: iapledger verifies the signature and the
// chain, stores the record and links it to the transaction the receipt brought (nothing is
// posted twice). ECDSA signatures are randomised, so these files differ between runs: they
// are for the benchmark only, never in `iapledger demo` (whose workbooks are byte-identical).
import Crypto
import Foundation
import X509

struct BenchSigner {
    let leafKey: P256.Signing.PrivateKey
    /// Standard base64 of the DER certificates, leaf first.
    let x5c: [String]
    let rootPEM: String
    /// The base64url header, the same for every record.
    let headerSegment: String

    init() throws {
        let rootKey = P256.Signing.PrivateKey(), intermediateKey = P256.Signing.PrivateKey()
        leafKey = P256.Signing.PrivateKey()
        let from = Date(timeIntervalSince1970: 1_577_836_800)   // 2020-01-01
        let until = Date(timeIntervalSince1970: 2_208_988_800)  // 2040-01-01
        func name(_ cn: String) throws -> DistinguishedName {
            try DistinguishedName { CommonName(cn); OrganizationName("iapledger benchmark") }
        }
        let marker: ArraySlice<UInt8> = [0x05, 0x00]   // ASN.1 NULL, as Apple's marker extensions
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: from, notValidAfter: until,
            issuer: try name("Benchmark Root CA"), subject: try name("Benchmark Root CA"), signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: from, notValidAfter: until,
            issuer: root.subject, subject: try name("Benchmark Intermediate CA"), signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: marker)
            },
            issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: from, notValidAfter: until,
            issuer: intermediate.subject, subject: try name("Benchmark App Store signing"), signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: marker)
            },
            issuerPrivateKey: .init(intermediateKey))
        x5c = try [leaf, intermediate, root].map { Data(try $0.serializeAsPEM().derBytes).base64EncodedString() }
        rootPEM = try root.serializeAsPEM().pemString
        headerSegment = Self.base64URL(try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": x5c], options: [.sortedKeys]))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A compact JWS of `payload` (ES256 over header.payload, the raw r||s signature).
    func sign(_ payload: [String: Any]) throws -> String {
        let body = try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
        let input = headerSegment + "." + Self.base64URL(body)
        let signature = try leafKey.signature(for: Data(input.utf8))
        return input + "." + Self.base64URL(signature.rawRepresentation)
    }
}

/// Signs the purchases of every `every`-th response of each day's JSON Lines receipts (verified
/// production ones) as signed transactions, into `inbox/signed/signed-<day>.jws` (one JWS a
/// line), and trusts the signer's root.
/// Returns how many were written.
func addSignedTransactions(workspace root: URL, bundleId: String, every: Int) throws -> Int {
    let signer = try BenchSigner()
    let fm = FileManager.default
    try Data(signer.rootPEM.utf8).write(to: root.appendingPathComponent("bench-root.pem"))
    // A top-level key: before the config's first [table].
    let configURL = root.appendingPathComponent("iapledger.toml")
    var config = try String(contentsOf: configURL, encoding: .utf8)
    let line = "# The benchmark's own signing root (its signed transactions; see iapledger-bench).\ntrusted_roots = [\"bench-root.pem\"]\n"
    if let table = config.range(of: "\n[") { config.insert(contentsOf: "\n" + line, at: table.lowerBound) } else { config += line }
    try Data(config.utf8).write(to: configURL)

    let receipts = root.appendingPathComponent("inbox/receipts")
    let signedDir = root.appendingPathComponent("inbox/signed")
    try fm.createDirectory(at: signedDir, withIntermediateDirectories: true)
    var written = 0, lineNumber = 0
    for name in try fm.contentsOfDirectory(atPath: receipts.path).sorted() where name.hasSuffix(".jsonl") {
        let text = try String(contentsOf: receipts.appendingPathComponent(name), encoding: .utf8)
        var out = ""
        for line in text.utf8.split(separator: 0x0A).map({ Substring($0) }) {
            lineNumber += 1
            guard lineNumber % every == 0, let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  (object["status"] as? Int) == 0, (object["environment"] as? String) == "Production",
                  let receipt = object["receipt"] as? [String: Any], let items = receipt["in_app"] as? [[String: Any]] else { continue }
            for item in items {
                guard let id = item["transaction_id"] as? String, let product = item["product_id"] as? String,
                      let purchased = (item["purchase_date_ms"] as? String).flatMap({ Int64($0) }),
                      let quantity = (item["quantity"] as? String).flatMap({ Int64($0) }) else { continue }
                let payload: [String: Any] = [
                    "transactionId": id, "originalTransactionId": item["original_transaction_id"] as? String ?? id,
                    "bundleId": bundleId, "productId": product, "purchaseDate": purchased, "originalPurchaseDate": purchased,
                    "signedDate": purchased + 3_600_000, "quantity": quantity, "type": "Consumable",
                    "inAppOwnershipType": "PURCHASED", "environment": "Production", "transactionReason": "PURCHASE",
                ]
                out += try signer.sign(payload) + "\n"
                written += 1
            }
        }
        if !out.isEmpty {
            let day = name.range(of: #"\d{4}-\d{2}-\d{2}"#, options: .regularExpression).map { String(name[$0]) } ?? "undated"
            try Data(out.utf8).write(to: signedDir.appendingPathComponent("signed-\(day).jws"), options: .atomic)
        }
    }
    return written
}
