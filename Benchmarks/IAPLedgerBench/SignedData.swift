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
/// line), and trusts the signer's root. Each carries what Apple's do: its storefront (its
/// order's, the earliest credited; the config's default storefront for a purchase no order
/// names), currency and price (the rules' price in force on the purchase day times the
/// quantity, in milliunits; 0 with a free-trial offer for a trial), type, expiry and account
/// token, so that iapledger takes the storefront and price from the signed record as it does
/// from Apple's (the receipt's transaction is booked the same, the price now signed).
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

    let rules = try BenchRules(workspace: root)
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
                let storefront = rules.orderStorefront[id] ?? rules.defaultStorefront
                guard let currency = rules.currency(storefront: storefront, on: purchased),
                      let unitMilli = rules.priceMilliunits(product: product, storefront: storefront, on: purchased) else { continue }
                let trial = (item["is_trial_period"] as? String) == "true"
                var payload: [String: Any] = [
                    "transactionId": id, "originalTransactionId": item["original_transaction_id"] as? String ?? id,
                    "bundleId": bundleId, "productId": product, "purchaseDate": purchased,
                    "originalPurchaseDate": (item["original_purchase_date_ms"] as? String).flatMap { Int64($0) } ?? purchased,
                    "signedDate": purchased + 3_600_000, "quantity": quantity, "type": rules.signedType(product: product),
                    "inAppOwnershipType": item["in_app_ownership_type"] as? String ?? "PURCHASED", "environment": "Production",
                    "transactionReason": "PURCHASE", "storefront": storefront, "currency": currency,
                    "price": trial ? 0 : unitMilli * quantity,
                ]
                if trial { payload["offerType"] = 1; payload["offerDiscountType"] = "FREE_TRIAL" }
                if let expires = (item["expires_date_ms"] as? String).flatMap({ Int64($0) }) { payload["expiresDate"] = expires }
                if let line = item["web_order_line_item_id"] as? String { payload["webOrderLineItemId"] = line }
                if let token = item["app_account_token"] as? String { payload["appAccountToken"] = token }
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

/// What the benchmark's signed transactions take from the workspace: each transaction's
/// storefront from the orders, the rules' currencies and prices, the products' types.
struct BenchRules {
    var orderStorefront: [String: String] = [:]
    var defaultStorefront = "USA"
    /// Rows of a rule by key, each `(effective from, value)`, sorted by date.
    var currencies: [String: [(from: Int64, value: String)]] = [:]
    var prices: [String: [(from: Int64, value: Int64)]] = [:]
    var types: [String: String] = [:]

    init(workspace root: URL) throws {
        func rows(_ path: String) throws -> [[String: String]] {
            let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
            let lines = text.split(whereSeparator: \.isNewline).map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            guard let header = lines.first else { return [] }
            return lines.dropFirst().map { Dictionary(zip(header, $0), uniquingKeysWith: { a, _ in a }) }
        }
        func day(_ text: String?) -> Int64 {
            let parts = (text ?? "").split(separator: "-").compactMap { Int($0) }
            guard parts.count == 3 else { return 0 }
            var c = DateComponents(); c.year = parts[0]; c.month = parts[1]; c.day = parts[2]
            var calendar = Calendar(identifier: .gregorian); calendar.timeZone = TimeZone(identifier: "UTC")!
            return Int64(calendar.date(from: c)!.timeIntervalSince1970) * 1000
        }
        let config = try String(contentsOf: root.appendingPathComponent("iapledger.toml"), encoding: .utf8)
        if let r = config.range(of: #"(?m)^default_storefront\s*=\s*"([A-Z]{3})""#, options: .regularExpression) {
            defaultStorefront = String(config[r].suffix(4).prefix(3))
        }
        for row in try rows("rules/storefronts.csv") {
            if let s = row["storefront"], let c = row["currency"] { currencies[s, default: []].append((day(row["effective_from"]), c)) }
        }
        for row in try rows("rules/prices.csv") {
            guard let p = row["product_id"], let s = row["storefront"], let price = row["price"] else { continue }
            // Major units as written ("0.99", "120", "1.990") to milliunits, exactly.
            let parts = price.split(separator: ".", omittingEmptySubsequences: false)
            let fraction = parts.count > 1 ? String(parts[1]) : ""
            guard parts.count <= 2, fraction.count <= 3, let whole = Int64(parts[0]),
                  let milli = Int64(fraction.padding(toLength: 3, withPad: "0", startingAt: 0)) else { continue }
            prices[p + "|" + s, default: []].append((day(row["effective_from"]), whole * 1000 + milli))
        }
        for row in try rows("rules/products.csv") { if let p = row["product_id"], let t = row["type"] { types[p] = t } }
        for key in currencies.keys { currencies[key]!.sort { $0.from < $1.from } }
        for key in prices.keys { prices[key]!.sort { $0.from < $1.from } }
        // The earliest credited order naming a transaction gives its storefront.
        var credited: [String: String] = [:]
        let orders = root.appendingPathComponent("inbox/orders")
        for name in try FileManager.default.contentsOfDirectory(atPath: orders.path).sorted() where name.hasSuffix(".csv") {
            for row in try rows("inbox/orders/" + name) {
                guard let id = row["transaction_id"], !id.isEmpty, let s = row["storefront"], !s.isEmpty,
                      (row["environment"] ?? "production").lowercased() == "production" else { continue }
                let at = row["credited_at"] ?? ""
                if let before = credited[id], before <= at { continue }
                credited[id] = at; orderStorefront[id] = s
            }
        }
    }

    static func inForce<T>(_ rows: [(from: Int64, value: T)]?, on ms: Int64) -> T? {
        rows?.last { $0.from <= ms }?.value
    }
    func currency(storefront: String, on ms: Int64) -> String? { Self.inForce(currencies[storefront], on: ms) }
    func priceMilliunits(product: String, storefront: String, on ms: Int64) -> Int64? {
        Self.inForce(prices[product + "|" + storefront], on: ms)
    }
    func signedType(product: String) -> String {
        switch types[product] {
        case "non_consumable": return "Non-Consumable"
        case "auto_renewable": return "Auto-Renewable Subscription"
        case "non_renewing": return "Non-Renewing Subscription"
        default: return "Consumable"
        }
    }
}
