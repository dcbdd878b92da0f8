// Rendering records into Apple's verifyReceipt JSON and order rows into CSV, byte by byte.
// Field names, order and string-typed scalars follow real responses (see the fixtures in
// shared/fixtures/verifyreceipt): `_ms` as digit strings, `_pst` in America/Los_Angeles,
// numbers only for adam_id, app_item_id, download_id, version_external_identifier.

extension DemoEngine {
    static let appAdamId: Int64 = 1_498_765_432
    static let otherAppAdamId: Int64 = 1_122_334_455
    /// Apple's fixed original purchase date of sandbox app receipts.
    static let sandboxOriginalPurchaseMs: Int64 = 1_375_340_400_000

    func productId(_ index: Int) -> String {
        if index >= DemoEngine.otherProductBase {
            return DemoTables.otherProducts[(index - DemoEngine.otherProductBase) % DemoTables.otherProducts.count]
        }
        return products[index].productId
    }

    /// The app build current on a day: a release every two weeks.
    func applicationVersion(atMs ms: Int64) -> Int64 {
        let dayNumber = DemoCalendar.dayNumber(ofMs: ms)
        return 400 + Int64(max(0, dayNumber - window.firstDay) / 14)
    }

    func render(_ record: DemoRecord) {
        if record.wrapped {
            let info = accountInfo(record.account)
            writer.beginObject()
            writer.key("response")
            renderBody(record)
            writer.key("received_at")
            writer.byte(34); writer.isoInstant(record.ms); writer.byte(34)
            writer.key("account_id")
            writer.string(info.accountId)
            if record.orderNo != 0 {
                writer.key("order_id")
                writer.string(orderId(record.orderNo))
            }
            if record.namedTxn != 0 {
                writer.key("transaction_id")
                writer.digits(record.namedTxn)
                writer.key("product_id")
                writer.string(productId(record.namedProduct))
            }
            writer.endObject()
        } else {
            renderBody(record)
        }
    }

    func orderId(_ number: UInt64) -> String { "ord-\(number)" }

    private func renderBody(_ record: DemoRecord) {
        switch record.body {
        case .failure(let status, let retryable, let withEnvironment):
            writer.beginObject()
            writer.key("status"); writer.number(Int64(status))
            if withEnvironment { writer.key("environment"); writer.string("Production") }
            if retryable { writer.key("is-retryable"); writer.bool(true) }
            writer.endObject()
        case .legacy(let txn, let withEnvironment):
            renderLegacy(txn, withEnvironment: withEnvironment)
        case .app(let inApp, let latest, let autoRenewStatus, let otherApp):
            renderApp(record, inApp: inApp, latest: latest, autoRenewStatus: autoRenewStatus, otherApp: otherApp)
        }
    }

    private func dateTriple(_ name: StaticString, _ msName: StaticString, _ pstName: StaticString, _ ms: Int64) {
        writer.key(name); writer.gmtDate(ms)
        writer.key(msName); writer.digits(ms)
        writer.key(pstName); writer.pstDate(ms)
    }

    private func renderApp(_ record: DemoRecord, inApp: [DemoTxn], latest: [DemoTxn], autoRenewStatus: Int8, otherApp: Bool) {
        let info = accountInfo(record.account)
        let sandbox = record.sandbox
        writer.beginObject()
        writer.key("status"); writer.number(0)
        writer.key("environment"); writer.string(sandbox ? "Sandbox" : "Production")
        writer.key("receipt")
        writer.beginObject()
        writer.key("receipt_type"); writer.string(sandbox ? "ProductionSandbox" : "Production")
        let adamId: Int64 = sandbox ? 0 : (otherApp ? DemoEngine.otherAppAdamId : DemoEngine.appAdamId)
        writer.key("adam_id"); writer.number(adamId)
        writer.key("app_item_id"); writer.number(adamId)
        writer.key("bundle_id"); writer.string(otherApp ? DemoTables.otherBundleId : options.bundleId)
        let version = otherApp ? 27 : applicationVersion(atMs: record.ms)
        writer.key("application_version"); writer.digits(version)
        writer.key("download_id"); writer.number(sandbox ? 0 : Int64(info.downloadId))
        writer.key("version_external_identifier"); writer.number(sandbox ? 0 : 850_000_000 + version * 37)
        var creationMs: Int64 = 0
        for txn in inApp { creationMs = max(creationMs, txn.purchaseMs) }
        dateTriple("receipt_creation_date", "receipt_creation_date_ms", "receipt_creation_date_pst", creationMs)
        dateTriple("request_date", "request_date_ms", "request_date_pst", record.ms)
        dateTriple("original_purchase_date", "original_purchase_date_ms", "original_purchase_date_pst",
                   sandbox ? DemoEngine.sandboxOriginalPurchaseMs : info.installMs)
        writer.key("original_application_version")
        writer.string(sandbox ? "1.0" : info.originalApplicationVersion)
        writer.key("in_app")
        writer.beginArray()
        for txn in inApp {
            writer.element()
            renderItem(txn, token: otherApp ? nil : info.token)
        }
        writer.endArray()
        writer.endObject()
        if !latest.isEmpty {
            writer.key("latest_receipt_info")
            writer.beginArray()
            for txn in latest {
                writer.element()
                renderItem(txn, token: info.token)
            }
            writer.endArray()
            writer.key("latest_receipt")
            renderFakeReceipt(latest[0].originalId &+ UInt64(latest.count))
            if autoRenewStatus >= 0 {
                let last = latest[latest.count - 1]
                let product = productId(last.product)
                writer.key("pending_renewal_info")
                writer.beginArray()
                writer.element()
                writer.beginObject()
                writer.key("auto_renew_product_id"); writer.string(product)
                writer.key("product_id"); writer.string(product)
                writer.key("original_transaction_id"); writer.digits(last.originalId)
                writer.key("auto_renew_status"); writer.string(autoRenewStatus == 1 ? "1" : "0")
                writer.endObject()
                writer.endArray()
            }
        }
        writer.endObject()
    }

    private func renderItem(_ txn: DemoTxn, token: String?) {
        let product = txn.product < DemoEngine.otherProductBase ? products[txn.product] : nil
        let subscription = product?.type == .autoRenewable
        writer.beginObject()
        writer.key("quantity"); writer.digits(Int64(txn.quantity))
        writer.key("product_id"); writer.string(productId(txn.product))
        writer.key("transaction_id"); writer.digits(txn.id)
        writer.key("original_transaction_id"); writer.digits(txn.originalId)
        dateTriple("purchase_date", "purchase_date_ms", "purchase_date_pst", txn.purchaseMs)
        dateTriple("original_purchase_date", "original_purchase_date_ms", "original_purchase_date_pst", txn.originalPurchaseMs)
        if txn.expiresMs > 0 { dateTriple("expires_date", "expires_date_ms", "expires_date_pst", txn.expiresMs) }
        if txn.cancelMs > 0 {
            dateTriple("cancellation_date", "cancellation_date_ms", "cancellation_date_pst", txn.cancelMs)
            writer.key("cancellation_reason"); writer.digits(Int64(txn.cancelReason))
        }
        if txn.webOrderLineItemId > 0 { writer.key("web_order_line_item_id"); writer.digits(txn.webOrderLineItemId) }
        writer.key("is_trial_period"); writer.string(txn.trial ? "true" : "false")
        if subscription { writer.key("is_in_intro_offer_period"); writer.string("false") }
        writer.key("in_app_ownership_type"); writer.string("PURCHASED")
        if let token { writer.key("app_account_token"); writer.string(token) }
        writer.endObject()
    }

    /// iOS 6 style transaction receipt, with the field order of the real samples.
    private func renderLegacy(_ txn: DemoTxn, withEnvironment: Bool) {
        let info = accountInfo(txn.account)
        writer.beginObject()
        writer.key("receipt")
        writer.beginObject()
        writer.key("original_purchase_date_pst"); writer.pstDate(txn.originalPurchaseMs)
        writer.key("purchase_date_ms"); writer.digits(txn.purchaseMs)
        writer.key("unique_identifier"); writer.string(info.deviceIdentifier)
        writer.key("original_transaction_id"); writer.digits(txn.originalId)
        writer.key("bvrs"); writer.digits(applicationVersion(atMs: txn.purchaseMs))
        writer.key("transaction_id"); writer.digits(txn.id)
        writer.key("quantity"); writer.digits(Int64(txn.quantity))
        writer.key("unique_vendor_identifier"); writer.string(info.vendorIdentifier)
        writer.key("item_id"); writer.string(products[txn.product].itemId)
        writer.key("product_id"); writer.string(productId(txn.product))
        writer.key("purchase_date"); writer.gmtDate(txn.purchaseMs)
        writer.key("original_purchase_date"); writer.gmtDate(txn.originalPurchaseMs)
        writer.key("purchase_date_pst"); writer.pstDate(txn.purchaseMs)
        writer.key("bid"); writer.string(options.bundleId)
        writer.key("original_purchase_date_ms"); writer.digits(txn.originalPurchaseMs)
        if txn.cancelMs > 0 {
            dateTriple("cancellation_date", "cancellation_date_ms", "cancellation_date_pst", txn.cancelMs)
            writer.key("cancellation_reason"); writer.digits(Int64(txn.cancelReason))
        }
        writer.endObject()
        writer.key("status"); writer.number(0)
        if withEnvironment { writer.key("environment"); writer.string("Production") }
        writer.endObject()
    }

    /// A stand-in for the base64 receipt blob: deterministic, base64 alphabet, DER-like "MII" start.
    private func renderFakeReceipt(_ salt: UInt64) {
        let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        writer.raw("\"MIIT")
        var state = DemoSplitMix64(salt ^ options.seed)
        alphabet.withUTF8Buffer { letters in
            for _ in 0..<10 {
                var bits = state.next()
                for _ in 0..<10 {
                    writer.byte(letters[Int(bits & 63)])
                    bits >>= 6
                }
            }
        }
        writer.raw("=\"")
    }

    func renderOrder(_ row: DemoOrder) {
        let info = accountInfo(row.account)
        writer.raw(orderId(row.orderNo)); writer.byte(44)
        writer.csvField(info.accountId); writer.byte(44)
        if row.txnId != 0 { writer.uint(row.txnId) }
        writer.byte(44)
        writer.csvField(productId(row.product)); writer.byte(44)
        writer.uint(UInt64(row.quantity)); writer.byte(44)
        writer.uint(UInt64(row.creditedUnits)); writer.byte(44)
        writer.isoInstant(row.creditedMs); writer.byte(44)
        writer.raw(row.sandboxEnvironment ? "sandbox" : "production"); writer.byte(44)
        writer.raw(DemoTables.storefronts[row.storefront].code); writer.byte(44)
        if let token = info.token { writer.raw(token) }
        writer.byte(44)
        if row.reversedMs > 0 { writer.isoInstant(row.reversedMs) }
        writer.byte(10)
    }
}
