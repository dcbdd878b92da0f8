import Foundation

/// The day-by-day simulation behind `DemoGenerator.generate`.
///
/// Each day: split the day's transaction quota between due renewals and new purchases,
/// walk every purchase and scheduled event in time order (refunds, re-sent receipts,
/// late verifications and order reversals come back as events on later days), then write
/// that day's receipts and orders files. Seeded anomalies are pinned to transaction
/// ordinals drawn up front and applied to the next suitable purchase.
final class DemoEngine {
    /// "1 transaction", "0 transactions".
    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
    static let otherProductBase = 1000

    let options: DemoOptions
    let window: DemoWindow
    let directory: URL
    let products: [DemoProduct]
    let accountCount: Int

    var random: DemoRandom
    var summary = DemoSummary()

    // Identifier sequences (Apple-like 16-digit ids, increasing with time, never reused).
    var nextTransactionId: UInt64
    var nextWebOrderLineItemId: UInt64
    var nextOrderNo: UInt64 = 10_000_001
    var nextSeq = 0

    // Day state.
    var dayIndex = 0
    var dayStartMs: Int64 = 0
    var dayRecords: [DemoRecord] = []
    var dayManualRecords: [DemoRecord] = []
    var dayOrders: [DemoOrder] = []
    var buckets: [[DemoEvent]]
    var renewalsAllowedToday = 0

    // Subscriptions.
    var chains: [DemoChain] = []

    // Seeded anomalies.
    var seedPlan: [(ordinal: Int, kind: DemoSeedKind)] = []
    var seedPlanNext = 0
    var pendingSeeds: [DemoSeedKind] = []
    var pendingSeedsHead = 0
    var ordinal = 0
    var standaloneCounts = [Int](repeating: 0, count: DemoSeedKind.allCases.count)
    var braPurchaseForced = false
    var manualFilesLeft = 2

    // File layout.
    var jsonDays: Set<Int> = []
    var malformedDay = -1
    var malformedWritten = false

    var writer = DemoByteWriter()
    var accountCache: [(key: Int32, info: DemoAccountInfo)?] = Array(repeating: nil, count: 4096)

    init(options: DemoOptions, window: DemoWindow, directory: URL) {
        self.options = options
        self.window = window
        self.directory = directory
        self.products = DemoTables.products(bundleId: options.bundleId)
        self.accountCount = max(40, options.transactions / 3)
        self.random = DemoRandom(seed: options.seed, stream: 1)
        self.buckets = Array(repeating: [], count: window.dayCount)
        var idRandom = DemoRandom(seed: options.seed, stream: 2)
        nextTransactionId = 2_000_000_000_000_000 + 300_000_000 + UInt64(idRandom.below(100_000_000))
        nextWebOrderLineItemId = 2_300_000_000_000_000 + 100_000_000 + UInt64(idRandom.below(100_000_000))
    }

    // MARK: - Run

    func run() throws -> DemoSummary {
        let fileManager = FileManager.default
        for folder in ["rules", "inbox/receipts", "inbox/orders"] {
            try fileManager.createDirectory(at: directory.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try writeText("iapledger.toml", DemoRules.config(window: window, bundleId: options.bundleId))
        try writeText("rules/storefronts.csv", DemoRules.storefrontsCSV(window: window))
        try writeText("rules/products.csv", DemoRules.productsCSV(products: products))
        try writeText("rules/prices.csv", DemoRules.pricesCSV(window: window, products: products))
        try writeText("rules/fx.csv", DemoRules.fxCSV(window: window, seed: options.seed))

        planSeeds()
        planFileLayout()
        let quotas = dailyQuotas()

        summary.accounts = accountCount
        summary.firstDay = DemoCalendar.dayString(window.firstDay)
        summary.lastDay = DemoCalendar.dayString(window.lastDay)

        for index in 0..<window.dayCount {
            dayIndex = index
            dayStartMs = DemoCalendar.startMs(ofDay: window.firstDay + index)
            runDay(quota: quotas[index])
            try writeDay()
        }
        finishSummary()
        return summary
    }

    private func writeText(_ relativePath: String, _ text: String) throws {
        let url = directory.appendingPathComponent(relativePath)
        guard fileManager(createAt: url, contents: Data(text.utf8)) else { throw DemoError.cannotWrite(url.path) }
        summary.files.append(relativePath)
    }

    private func fileManager(createAt url: URL, contents: Data) -> Bool {
        return FileManager.default.createFile(atPath: url.path, contents: contents)
    }

    /// Splits the transaction count over the days: weekends and paydays busier, slow
    /// growth, a little noise; largest-remainder rounding so the quotas sum exactly.
    private func dailyQuotas() -> [Int] {
        var quotaRandom = DemoRandom(seed: options.seed, stream: 3)
        var weights: [Int64] = []
        for index in 0..<window.dayCount {
            let dayNumber = window.firstDay + index
            let weekday = Int64(DemoTables.weekdayWeights[DemoCalendar.weekday(dayNumber)])
            let dayOfMonth = DemoCalendar.civil(dayNumber).day
            let payday: Int64 = (dayOfMonth == 1 || dayOfMonth == 15) ? 115 : 100
            let noise = Int64(quotaRandom.inRange(900, 1100))
            weights.append(weekday * Int64(1000 + 3 * index) * noise * payday)
        }
        let total = weights.reduce(0, +)
        let n = Int64(options.transactions)
        var quotas = weights.map { Int(n * $0 / total) }
        let remainders = weights.map { n * $0 % total }
        var missing = options.transactions - quotas.reduce(0, +)
        let order = (0..<weights.count).sorted { remainders[$0] != remainders[$1] ? remainders[$0] > remainders[$1] : $0 < $1 }
        var cursor = 0
        while missing > 0 {
            quotas[order[cursor % order.count]] += 1
            missing -= 1
            cursor += 1
        }
        return quotas
    }

    /// A handful of each seeded anomaly (more at benchmark sizes), at random ordinals in the
    /// first 80% of the transactions so refunds and late verifications still fit the window.
    private func planSeeds() {
        var planRandom = DemoRandom(seed: options.seed, stream: 4)
        let n = options.transactions
        let perKind = min(max(4, n / 800), n / 40)
        guard perKind > 0 else { return }
        let low = n / 20
        for kind in DemoSeedKind.allCases {
            let high = kind == .subscriptionLapse ? max(low + 1, n * 4 / 10) : max(low + 1, n * 8 / 10)
            for _ in 0..<perKind { seedPlan.append((planRandom.inRange(low, high - 1), kind)) }
        }
        seedPlan.sort { $0.ordinal != $1.ordinal ? $0.ordinal < $1.ordinal : $0.kind.rawValue < $1.kind.rawValue }
    }

    /// A few days write a pretty-printed .json array instead of .jsonl; one .jsonl day
    /// holds the truncated line.
    private func planFileLayout() {
        var layoutRandom = DemoRandom(seed: options.seed, stream: 5)
        let days = window.dayCount
        for fifth in [1, 3] { jsonDays.insert(min(days - 1, days * fifth / 5 + layoutRandom.below(3))) }
        jsonDays.insert(max(0, days - 3 - layoutRandom.below(3)))
        malformedDay = days / 2
        while jsonDays.contains(malformedDay) { malformedDay += 1 }
    }

    // MARK: - A day

    private func runDay(quota: Int) {
        var events = buckets[dayIndex]
        buckets[dayIndex] = []
        var dueRenewals = 0
        for event in events {
            if case .renewal(let chain, _) = event.kind, !chains[chain].ended { dueRenewals += 1 }
        }
        renewalsAllowedToday = min(dueRenewals, quota)
        let newPurchases = quota - renewalsAllowedToday

        // Purchases and events in time order; a purchase is (ms, seq, -1).
        var slots: [(ms: Int64, seq: Int, event: Int)] = []
        slots.reserveCapacity(newPurchases + events.count)
        for _ in 0..<newPurchases { slots.append((randomTimeOfDay(), takeSeq(), -1)) }
        for (index, event) in events.enumerated() { slots.append((event.ms, event.seq, index)) }
        slots.sort { $0.ms != $1.ms ? $0.ms < $1.ms : $0.seq < $1.seq }
        for slot in slots {
            if slot.event < 0 {
                newPurchase(at: slot.ms)
            } else {
                handle(events[slot.event])
            }
        }
        events.removeAll()
    }

    private func takeSeq() -> Int { nextSeq += 1; return nextSeq }

    private func randomTimeOfDay() -> Int64 {
        let hour = random.weighted(DemoTables.hourWeights, total: 1120)
        let second = hour * 3600 + random.below(3600)
        return dayStartMs + Int64(second) * 1000
    }

    /// Keeps a timestamp inside the current day's file.
    private func clampToDay(_ ms: Int64) -> Int64 {
        return min(ms, dayStartMs + DemoCalendar.msPerDay - 1)
    }

    private func dayIndex(ofMs ms: Int64) -> Int {
        return DemoCalendar.dayNumber(ofMs: ms) - window.firstDay
    }

    /// Runs `kind` at `ms`: now if that is today, later through the day's bucket, never when
    /// it falls on or after the as-of day. Returns whether it will happen.
    @discardableResult
    private func schedule(_ ms: Int64, _ kind: DemoEventKind) -> Bool {
        let target = dayIndex(ofMs: ms)
        precondition(target >= dayIndex, "demo: event scheduled in the past")
        if target >= window.dayCount { return false }
        let event = DemoEvent(ms: ms, seq: takeSeq(), kind: kind)
        if target == dayIndex {
            if case .renewal = kind { preconditionFailure("demo: same-day renewal") }
            handle(event)
        } else {
            buckets[target].append(event)
        }
        return true
    }

    /// A random moment on a day `minDays...maxDays` after today (clamped to the window), or
    /// later today when today is the last day.
    private func laterMoment(after ms: Int64, minDays: Int, maxDays: Int) -> Int64 {
        let target = min(dayIndex + random.inRange(minDays, maxDays), window.dayCount - 1)
        if target == dayIndex { return clampToDay(ms + Int64(random.inRange(120, 7200)) * 1000) }
        return DemoCalendar.startMs(ofDay: window.firstDay + target) + Int64(random.below(86_400)) * 1000
    }

    // MARK: - Accounts

    private func accountHash(_ account: Int32, _ salt: UInt64) -> UInt64 {
        let base = DemoSplitMix64.mix(options.seed ^ 0xACC0_07D5_EED0_0000)
        return DemoSplitMix64.mix(base ^ (UInt64(bitPattern: Int64(account)) &* 0x9E37_79B9_7F4A_7C15 &+ salt &* 0xD1B5_4A32_D192_ED03))
    }

    /// The storefront an account lives in: the first accounts cover every storefront once,
    /// the rest follow the storefront weights.
    func storefront(of account: Int32) -> Int {
        if account < 0 { return DemoTables.S.usa }
        if Int(account) < DemoTables.storefronts.count { return Int(account) }
        let total = DemoTables.storefronts.reduce(0) { $0 + $1.weight }
        var roll = Int(accountHash(account, 1) % UInt64(total))
        for (index, storefront) in DemoTables.storefronts.enumerated() {
            if roll < storefront.weight { return index }
            roll -= storefront.weight
        }
        return 0
    }

    /// About 5% of accounts use an old app version that sets no appAccountToken.
    func hasToken(_ account: Int32) -> Bool {
        return account < 0 || accountHash(account, 2) % 100 >= 5
    }

    func accountInfo(_ account: Int32) -> DemoAccountInfo {
        let slot = Int(UInt32(bitPattern: account) & 4095)
        if let cached = accountCache[slot], cached.key == account { return cached.info }
        let info = makeAccountInfo(account)
        accountCache[slot] = (account, info)
        return info
    }

    private func makeAccountInfo(_ account: Int32) -> DemoAccountInfo {
        let accountId = account < 0
            ? DemoTables.testerAccountIds[Int(-1 - account) % DemoTables.testerAccountIds.count]
            : "acct-\(1_000_000 + Int(account))"
        let token = hasToken(account) ? uuid(accountHash(account, 3), accountHash(account, 4), uppercase: false) : nil
        let installDays = Int64(accountHash(account, 5) % 900) + 1
        let installMs = window.firstMs - installDays * DemoCalendar.msPerDay + Int64(accountHash(account, 6) % 86_400) * 1000
        let originalVersion = "\(100 + accountHash(account, 7) % 300)"
        return DemoAccountInfo(
            accountId: accountId,
            token: token,
            storefront: storefront(of: account),
            downloadId: account < 0 ? 0 : 80_000_000_000_000 + accountHash(account, 8) % 9_000_000_000_000,
            installMs: installMs,
            originalApplicationVersion: originalVersion,
            deviceIdentifier: hex(accountHash(account, 9), 16) + hex(accountHash(account, 10), 16) + hex(accountHash(account, 11), 8),
            vendorIdentifier: uuid(accountHash(account, 12), accountHash(account, 13), uppercase: true))
    }

    private func hex(_ value: UInt64, _ digits: Int) -> String {
        let text = String(value, radix: 16)
        let padded = String(repeating: "0", count: max(0, 16 - text.count)) + text
        return String(padded.suffix(digits))
    }

    private func uuid(_ a: UInt64, _ b: UInt64, uppercase: Bool) -> String {
        let high = (a & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let h = hex(high, 16), l = hex(low, 16)
        let text = "\(h.prefix(8))-\(h.dropFirst(8).prefix(4))-\(h.suffix(4))-\(l.prefix(4))-\(l.suffix(12))"
        return uppercase ? text.uppercased() : text
    }

    /// Repeat buyers: the minimum of two uniform draws favours low account numbers.
    private func pickAccount() -> Int32 {
        return Int32(min(random.below(accountCount), random.below(accountCount)))
    }

    private func pickTester() -> Int32 {
        return Int32(-1 - random.below(DemoTables.testerAccountIds.count))
    }

    /// An account in `storefront`, found from a random starting point.
    private func account(in storefront: Int) -> Int32 {
        var candidate = random.below(accountCount)
        for _ in 0..<accountCount {
            if self.storefront(of: Int32(candidate)) == storefront { return Int32(candidate) }
            candidate = (candidate + 1) % accountCount
        }
        return Int32(storefront)
    }

    private func otherAccount(than account: Int32) -> Int32 {
        while true {
            let candidate = pickAccount()
            if candidate != account && hasToken(candidate) { return candidate }
        }
    }

    // MARK: - Transactions

    private func takeTransactionId() -> UInt64 {
        nextTransactionId += 1 + UInt64(random.below(300))
        return nextTransactionId
    }

    private func takeWebOrderLineItemId() -> UInt64 {
        nextWebOrderLineItemId += 1 + UInt64(random.below(40))
        return nextWebOrderLineItemId
    }

    private func takeOrderNo() -> UInt64 {
        nextOrderNo += 1
        summary.orders += 1
        return nextOrderNo
    }

    private func pickProduct(sandbox: Bool) -> Int {
        if sandbox {
            let choices = [DemoTables.P.coins100, DemoTables.P.coins550, DemoTables.P.coins1200, DemoTables.P.removeAds]
            return choices[random.weighted([50, 25, 15, 10], total: 100)]
        }
        return random.weighted(products.map { $0.weight }, total: products.reduce(0) { $0 + $1.weight })
    }

    private func pickConsumable() -> Int {
        return DemoTables.P.consumables[random.weighted([40, 30, 18, 9, 3], total: 100)]
    }

    private func pickQuantity(product: Int) -> Int {
        guard products[product].type == .consumable else { return 1 }
        switch random.below(100) {
        case 0..<88: return 1
        case 88..<94: return 2
        case 94..<97: return 3
        case 97..<98: return 4
        default: return 5
        }
    }

    /// Bookkeeping for every verified transaction; fires the seeds planned at this ordinal.
    private func countTransaction(_ txn: DemoTxn, at ms: Int64) {
        summary.transactions += 1
        if txn.sandbox { summary.sandboxTransactions += 1 } else { summary.productionTransactions += 1 }
        if txn.trial { summary.trialTransactions += 1 }
        let storefront = storefront(of: txn.account)
        if txn.product == DemoTables.P.vipYearly && storefront == DemoTables.S.ind { bump(DemoAnomaly.missingPrice) }
        if storefront == DemoTables.S.bra && DemoCalendar.dayNumber(ofMs: txn.purchaseMs) >= window.lastMonthStartDay {
            bump(DemoAnomaly.missingFx)
        }
        ordinal += 1
        while seedPlanNext < seedPlan.count && seedPlan[seedPlanNext].ordinal < ordinal {
            let kind = seedPlan[seedPlanNext].kind
            seedPlanNext += 1
            if kind.isStandalone { runStandalone(kind, at: ms) } else { pendingSeeds.append(kind) }
        }
    }

    private func bump(_ key: String, by amount: Int = 1) {
        summary.anomalies[key, default: 0] += amount
    }

    /// One new purchase (not a renewal), possibly carrying a seeded anomaly.
    private func newPurchase(at purchaseMs: Int64) {
        var seed: DemoSeedKind? = nil
        var account: Int32
        var forceBrazil = false
        if !braPurchaseForced && window.firstDay + dayIndex >= window.lastMonthStartDay {
            // Make sure the missing BRL rate of the last month has a transaction waiting on it.
            braPurchaseForced = true
            forceBrazil = true
        } else if pendingSeedsHead < pendingSeeds.count {
            seed = pendingSeeds[pendingSeedsHead]
            pendingSeedsHead += 1
        }

        let sandbox = seed.map { $0.needsSandbox } ?? (!forceBrazil && random.chance(240))
        var product: Int
        if sandbox {
            account = pickTester()
            product = seed == nil ? pickProduct(sandbox: true) : pickConsumable()
        } else {
            account = forceBrazil ? self.account(in: DemoTables.S.bra) : pickAccount()
            switch seed {
            case nil: product = pickProduct(sandbox: false)
            case .missingPrice?:
                product = DemoTables.P.vipYearly
                account = self.account(in: DemoTables.S.ind)
            case .subscriptionLapse?: product = DemoTables.P.vipMonthly
            case .accountMismatch?:
                product = pickConsumable()
                while !hasToken(account) { account = pickAccount() }
            default: product = pickConsumable()
            }
        }
        let quantity = pickQuantity(product: product)
        var txn = DemoTxn(id: takeTransactionId(), originalId: 0, purchaseMs: purchaseMs, originalPurchaseMs: purchaseMs,
                          account: account, product: product, quantity: quantity, sandbox: sandbox)
        txn.originalId = txn.id
        let type = products[product].type
        let plain = seed == nil
        if plain && !sandbox && products[product].isReconciled && random.chance(500) { txn.legacyStyle = true }

        // Subscriptions: open a chain and plan its next period.
        var chainIndex = -1
        if type == .autoRenewable {
            txn.webOrderLineItemId = takeWebOrderLineItemId()
            if product == DemoTables.P.vipYearly {
                txn.expiresMs = DemoCalendar.addMonths(purchaseMs, 12)
            } else if plain && random.chance(600) {
                txn.trial = true
                txn.expiresMs = purchaseMs + 7 * DemoCalendar.msPerDay
            } else {
                txn.expiresMs = DemoCalendar.addMonths(purchaseMs, 1)
            }
            chainIndex = chains.count
            chains.append(DemoChain(txns: []))
        }

        // The backend's order.
        let requestMs = clampToDay(purchaseMs + Int64(random.inRange(2, 90)) * 1000 + Int64(random.below(1000)))
        var order: DemoOrder? = nil
        if seed != .notCredited {
            var row = DemoOrder(orderNo: takeOrderNo(), account: account, txnId: txn.id, product: product, quantity: quantity,
                                creditedUnits: products[product].units * quantity,
                                creditedMs: clampToDay(requestMs + Int64(random.inRange(1, 20)) * 1000),
                                sandboxEnvironment: sandbox, storefront: storefront(of: account), rowMs: 0)
            switch seed {
            case .sandboxCreditedInProduction?: row.sandboxEnvironment = false
            case .accountMismatch?: row.account = otherAccount(than: account)
            case .productMismatch?:
                var other = pickConsumable()
                while other == product { other = pickConsumable() }
                row.product = other
            case .quantityMismatch?: row.quantity = quantity + 1
            case .unitsMismatch?: row.creditedUnits += products[product].units
            default: break
            }
            txn.orderNo = row.orderNo
            order = row
        }
        countTransaction(txn, at: purchaseMs)
        if let seed { bump(seedName(seed)) }

        if chainIndex >= 0 {
            chains[chainIndex].txns.append(txn)
            planNextPeriod(chain: chainIndex, forceLapse: seed == .subscriptionLapse)
        }

        // Receipt records.
        switch seed {
        case .retryableThenVerified?:
            let status = standaloneCounts[DemoSeedKind.retryableThenVerified.rawValue] % 2 == 0 ? 21005 : 21100 + random.below(100)
            standaloneCounts[DemoSeedKind.retryableThenVerified.rawValue] += 1
            addFailure(status: status, retryable: true, at: requestMs, txn: txn)
            schedule(laterMoment(after: requestMs, minDays: 1, maxDays: 3), .verifiedLater(txn: txn))
        case .status21008ThenProduction?:
            addFailure(status: 21008, retryable: false, at: requestMs, txn: txn)
            addPurchaseRecord(txn, chain: chainIndex, at: clampToDay(requestMs + Int64(random.inRange(2, 6)) * 1000))
        case .status21007ThenSandbox?:
            addFailure(status: 21007, retryable: false, at: requestMs, txn: txn)
            addPurchaseRecord(txn, chain: chainIndex, at: clampToDay(requestMs + Int64(random.inRange(2, 6)) * 1000))
        default:
            addPurchaseRecord(txn, chain: chainIndex, at: requestMs)
        }

        if var row = order {
            row.rowMs = row.creditedMs
            addOrder(row)
            if seed == .duplicateCredit {
                var duplicate = row
                duplicate.orderNo = takeOrderNo()
                duplicate.creditedMs = clampToDay(row.creditedMs + Int64(random.inRange(30, 3600)) * 1000)
                duplicate.rowMs = duplicate.creditedMs
                addOrder(duplicate)
            }
        }

        // Refunds (after the purchase record: a same-day refund updates the chain):
        // a seeded one keeps its credit; natural ones get their order reversed.
        var refundScheduled = false
        if seed == .refundedStillCredited {
            refundScheduled = scheduleRefund(txn, chain: chainIndex, order: nil, forced: true)
        } else if plain && !sandbox && !txn.trial {
            // About 3% of transactions end up refunded (late purchases have no time left to be).
            let basisPoints = products[product].isReconciled || type == .nonRenewing ? 380 : (product == DemoTables.P.vipMonthly ? 250 : 150)
            if random.chance(basisPoints) { refundScheduled = scheduleRefund(txn, chain: chainIndex, order: order, forced: false) }
        }

        // Unfinished consumables come back in later receipts.
        if plain && !sandbox && !refundScheduled && type == .consumable && random.chance(400) {
            schedule(laterMoment(after: requestMs, minDays: 0, maxDays: 5), .repeatReceipt(txn: txn))
        }
    }

    private func seedName(_ seed: DemoSeedKind) -> String {
        switch seed {
        case .retryableThenVerified: return DemoAnomaly.retryableThenVerified
        case .status21007ThenSandbox: return DemoAnomaly.status21007ThenSandbox
        case .status21008ThenProduction: return DemoAnomaly.status21008ThenProduction
        case .duplicateCredit: return DemoAnomaly.duplicateCredit
        case .sandboxCreditedInProduction: return DemoAnomaly.sandboxCreditedInProduction
        case .refundedStillCredited: return DemoAnomaly.refundedStillCredited
        case .notCredited: return DemoAnomaly.notCredited
        case .accountMismatch: return DemoAnomaly.accountMismatch
        case .productMismatch: return DemoAnomaly.productMismatch
        case .quantityMismatch: return DemoAnomaly.quantityMismatch
        case .unitsMismatch: return DemoAnomaly.unitsMismatch
        case .missingPrice: return "MISSING_PRICE_SEEDED"
        case .subscriptionLapse: return "SUBSCRIPTION_LAPSE_SEEDED"
        case .retryableNeverVerified: return DemoAnomaly.retryableNeverVerified
        case .rejected: return "REJECTED"
        case .otherApp: return DemoAnomaly.otherAppReceipt
        case .creditedWithoutTransaction: return DemoAnomaly.creditedWithoutTransaction
        case .status21007Pending: return DemoAnomaly.status21007Pending
        }
    }

    /// Decides what follows the chain's latest period: a renewal at expiry (most), a return
    /// after a lapse of 8-40 days (within the 60-day grace), or nothing (churn).
    private func planNextPeriod(chain: Int, forceLapse: Bool) {
        guard let last = chains[chain].txns.last, last.product == DemoTables.P.vipMonthly else {
            chains[chain].autoRenew = true
            return
        }
        let roll = random.below(10_000)
        if forceLapse || (roll >= 800 && roll < 1100) {
            chains[chain].autoRenew = false
            let gapDays = Int64(random.inRange(8, 40))
            let returnMs = last.expiresMs + gapDays * DemoCalendar.msPerDay + Int64(random.below(86_400)) * 1000
            if !schedule(returnMs, .renewal(chain: chain, lapseReturn: true)) { chains[chain].ended = true }
        } else if roll < 800 {
            chains[chain].autoRenew = false
            chains[chain].ended = true
        } else {
            chains[chain].autoRenew = true
            if !schedule(last.expiresMs, .renewal(chain: chain, lapseReturn: false)) { chains[chain].ended = true }
        }
    }

    /// Plans a refund some hours to three weeks after purchase (inside the subscription
    /// period for auto-renewables, which then stop). Forced refunds squeeze in before as-of.
    private func scheduleRefund(_ txn: DemoTxn, chain: Int, order: DemoOrder?, forced: Bool) -> Bool {
        var delayMs = Int64(random.inRange(2 * 3600, 21 * 86_400)) * 1000
        if txn.expiresMs > 0 { delayMs = min(delayMs, max(3_600_000, (txn.expiresMs - txn.purchaseMs) / 2)) }
        var refundMs = txn.purchaseMs + delayMs
        let latest = window.asOfMs - 3_600_000
        if refundMs >= latest {
            guard forced else { return false }
            refundMs = max(txn.purchaseMs + 600_000, latest)
            if refundMs >= window.asOfMs { refundMs = window.asOfMs - 1000 }
        }
        // A refund must follow the purchase record of the same day.
        refundMs = max(refundMs, txn.purchaseMs + 300_000)
        guard schedule(refundMs, .refund(txn: txn, chain: chain, order: order)) else { return false }
        if chain >= 0 {
            chains[chain].ended = true
            chains[chain].autoRenew = false
        }
        return true
    }

    // MARK: - Events

    private func handle(_ event: DemoEvent) {
        switch event.kind {
        case .renewal(let chain, let lapseReturn):
            renew(chain: chain, at: event.ms, lapseReturn: lapseReturn)
        case .refund(let txn, let chain, let order):
            refund(txn, chain: chain, order: order, at: event.ms)
        case .repeatReceipt(let txn):
            summary.repeatedRecords += 1
            var record = purchaseRecord(txn, inApp: [txn], latest: [], autoRenew: -1, at: clampToDay(event.ms))
            record.orderNo = 0
            // Two of them (one early, one in the middle of the window) an operator re-checked
            // by hand: each is saved as its own pretty-printed .json file.
            let manualDue = manualFilesLeft == 2 || (manualFilesLeft == 1 && dayIndex >= window.dayCount / 2)
            if manualDue && manualFilesLeft > 0 && !txn.legacyStyle {
                manualFilesLeft -= 1
                record.manual = true
                record.wrapped = false
                dayManualRecords.append(record)
            } else {
                dayRecords.append(record)
            }
        case .verifiedLater(let txn):
            addPurchaseRecord(txn, chain: -1, at: clampToDay(event.ms))
        case .orderRow(let row):
            addOrder(row)
        }
    }

    private func renew(chain: Int, at purchaseMs: Int64, lapseReturn: Bool) {
        guard !chains[chain].ended else { return }
        guard renewalsAllowedToday > 0 else {
            // The day's quota is spent: this subscriber churns instead.
            chains[chain].ended = true
            return
        }
        renewalsAllowedToday -= 1
        let previous = chains[chain].txns[chains[chain].txns.count - 1]
        var txn = DemoTxn(id: takeTransactionId(), originalId: previous.originalId, purchaseMs: purchaseMs,
                          originalPurchaseMs: previous.originalPurchaseMs, account: previous.account,
                          product: previous.product, quantity: 1, sandbox: previous.sandbox)
        txn.webOrderLineItemId = takeWebOrderLineItemId()
        txn.expiresMs = DemoCalendar.addMonths(purchaseMs, 1)
        chains[chain].txns.append(txn)
        summary.renewals += 1
        if lapseReturn { bump(DemoAnomaly.subscriptionLapse) }
        countTransaction(txn, at: purchaseMs)
        planNextPeriod(chain: chain, forceLapse: false)
        let requestMs = clampToDay(purchaseMs + Int64(random.inRange(5, 300)) * 1000 + Int64(random.below(1000)))
        addPurchaseRecord(txn, chain: chain, at: requestMs)
        if random.chance(250) { _ = scheduleRefund(txn, chain: chain, order: nil, forced: false) }
    }

    private func refund(_ original: DemoTxn, chain: Int, order: DemoOrder?, at refundMs: Int64) {
        var txn = original
        txn.cancelMs = refundMs
        txn.cancelReason = random.chance(3000) ? 1 : 0
        summary.refunds += 1
        let requestMs = clampToDay(refundMs + Int64(random.inRange(60, 3600)) * 1000 + Int64(random.below(1000)))
        if chain >= 0 {
            for index in chains[chain].txns.indices where chains[chain].txns[index].id == txn.id {
                chains[chain].txns[index] = txn
            }
            let all = chains[chain].txns
            dayRecords.append(purchaseRecord(txn, inApp: all, latest: all, autoRenew: 0, at: requestMs))
        } else {
            var record = purchaseRecord(txn, inApp: [txn], latest: [], autoRenew: -1, at: requestMs)
            record.orderNo = 0
            dayRecords.append(record)
        }
        if var row = order {
            var reversedMs = refundMs + Int64(random.inRange(300, 8 * 3600)) * 1000
            if reversedMs >= window.asOfMs { reversedMs = window.asOfMs - 1000 }
            row.reversedMs = reversedMs
            row.rowMs = reversedMs
            summary.reversedOrders += 1
            schedule(reversedMs, .orderRow(row))
        }
    }

    // MARK: - Standalone seeds

    private func runStandalone(_ kind: DemoSeedKind, at ms: Int64) {
        let at = clampToDay(ms + Int64(random.inRange(10, 600)) * 1000 + Int64(random.below(1000)))
        let count = standaloneCounts[kind.rawValue]
        standaloneCounts[kind.rawValue] += 1
        bump(seedName(kind))
        switch kind {
        case .retryableNeverVerified:
            let txn = unverifiedTxn(account: pickAccount(), product: pickConsumable(), at: at)
            addFailure(status: count % 2 == 0 ? 21005 : 21100 + random.below(100), retryable: true, at: at, txn: txn)
            if count % 3 == 1 {
                addFailure(status: 21005, retryable: true, at: clampToDay(at + Int64(random.inRange(600, 3600)) * 1000), txn: txn)
            }
            addUnverifiedOrder(for: txn, sandboxEnvironment: false, at: at)
            bump(DemoAnomaly.creditedUnverified)
        case .rejected:
            let txn = unverifiedTxn(account: pickAccount(), product: pickConsumable(), at: at)
            let status = count % 2 == 0 ? 21003 : 21010
            bump(status == 21003 ? DemoAnomaly.rejected21003 : DemoAnomaly.rejected21010)
            addFailure(status: status, retryable: false, at: at, txn: txn)
            addUnverifiedOrder(for: txn, sandboxEnvironment: false, at: at)
            bump(DemoAnomaly.creditedUnverified)
        case .otherApp:
            // A jailbreak tool replays another app's valid receipt; the backend credits coins.
            var txn = unverifiedTxn(account: pickAccount(), product: DemoEngine.otherProductBase + count % 2, at: at)
            txn.orderNo = 0
            let record = DemoRecord(ms: at, seq: takeSeq(), account: txn.account, sandbox: false,
                                    body: .app(inApp: [txn], latest: [], autoRenewStatus: -1, otherApp: true),
                                    wrapped: true)
            dayRecords.append(record)
            var credited = txn
            credited.product = DemoTables.P.coins2500
            addUnverifiedOrder(for: credited, sandboxEnvironment: false, at: at)
            bump(DemoAnomaly.creditedUnverified)
        case .creditedWithoutTransaction:
            let account = pickAccount()
            let product = pickConsumable()
            // Half name no transaction at all, half a made-up id that no receipt ever shows.
            let txnId: UInt64 = count % 2 == 0 ? 0 : takeTransactionId()
            addOrder(DemoOrder(orderNo: takeOrderNo(), account: account, txnId: txnId, product: product, quantity: 1,
                               creditedUnits: products[product].units, creditedMs: at, sandboxEnvironment: false,
                               storefront: storefront(of: account), rowMs: at))
        case .status21007Pending:
            let txn = unverifiedTxn(account: pickTester(), product: pickConsumable(), at: at)
            addFailure(status: 21007, retryable: false, at: at, txn: txn)
            addUnverifiedOrder(for: txn, sandboxEnvironment: true, at: at)
        default:
            preconditionFailure("demo: \(kind) is not standalone")
        }
    }

    private func unverifiedTxn(account: Int32, product: Int, at ms: Int64) -> DemoTxn {
        summary.unverifiedTransactions += 1
        // Apple's purchase times are whole seconds.
        let purchaseMs = (ms / 1000 - Int64(random.inRange(2, 60))) * 1000
        let id = takeTransactionId()
        return DemoTxn(id: id, originalId: id, purchaseMs: purchaseMs, originalPurchaseMs: purchaseMs,
                       account: account, product: product, quantity: 1, sandbox: account < 0)
    }

    private func addUnverifiedOrder(for txn: DemoTxn, sandboxEnvironment: Bool, at ms: Int64) {
        let credited = clampToDay(ms + Int64(random.inRange(1, 20)) * 1000)
        addOrder(DemoOrder(orderNo: takeOrderNo(), account: txn.account, txnId: txn.id, product: txn.product,
                           quantity: txn.quantity, creditedUnits: products[txn.product].units * txn.quantity,
                           creditedMs: credited, sandboxEnvironment: sandboxEnvironment,
                           storefront: storefront(of: txn.account), rowMs: credited))
    }

    // MARK: - Records and rows

    private func addOrder(_ row: DemoOrder) {
        var row = row
        row.seq = takeSeq()
        dayOrders.append(row)
    }

    private func addFailure(status: Int, retryable: Bool, at ms: Int64, txn: DemoTxn) {
        var record = DemoRecord(ms: ms, seq: takeSeq(), account: txn.account, sandbox: txn.sandbox,
                                body: .failure(status: status, retryable: retryable, withEnvironment: status >= 21100),
                                wrapped: true)
        record.orderNo = txn.orderNo
        record.namedTxn = txn.id
        record.namedProduct = txn.product
        dayRecords.append(record)
    }

    /// The record showing a purchase or renewal: the whole chain for subscriptions.
    private func addPurchaseRecord(_ txn: DemoTxn, chain: Int, at ms: Int64) {
        if chain >= 0 {
            let all = chains[chain].txns
            dayRecords.append(purchaseRecord(txn, inApp: all, latest: all, autoRenew: chains[chain].autoRenew ? 1 : 0, at: ms))
        } else {
            dayRecords.append(purchaseRecord(txn, inApp: [txn], latest: [], autoRenew: -1, at: ms))
        }
    }

    private func purchaseRecord(_ txn: DemoTxn, inApp: [DemoTxn], latest: [DemoTxn], autoRenew: Int8, at ms: Int64) -> DemoRecord {
        let body: DemoRecord.Body = txn.legacyStyle
            ? .legacy(txn, withEnvironment: random.chance(5000))
            : .app(inApp: inApp, latest: latest, autoRenewStatus: autoRenew, otherApp: false)
        if txn.legacyStyle { summary.legacyReceiptRecords += 1 }
        var record = DemoRecord(ms: ms, seq: takeSeq(), account: txn.account, sandbox: txn.sandbox, body: body,
                                wrapped: random.chance(txn.legacyStyle ? 3000 : 5000))
        record.orderNo = txn.orderNo
        return record
    }

    // MARK: - Writing a day

    private func writeDay() throws {
        let date = DemoCalendar.dayString(window.firstDay + dayIndex)
        dayRecords.sort { $0.ms != $1.ms ? $0.ms < $1.ms : $0.seq < $1.seq }
        dayOrders.sort { $0.rowMs != $1.rowMs ? $0.rowMs < $1.rowMs : $0.seq < $1.seq }

        let isJsonDay = jsonDays.contains(dayIndex)
        // A day without a receipt has no file (an empty one is refused, EMPTY_FILE: a small
        // demo's inbox was full of them).
        if !dayRecords.isEmpty { try writeReceipts(date: date, json: isJsonDay) }
        try writeRestOfDay(date: date)
    }

    private func writeReceipts(date: String, json isJsonDay: Bool) throws {
        let receiptsPath = "inbox/receipts/receipts-\(date).\(isJsonDay ? "json" : "jsonl")"
        let sink = try DemoFileSink(url: directory.appendingPathComponent(receiptsPath))
        summary.files.append(receiptsPath)
        if isJsonDay {
            writer.pretty = true
            writer.resetStructure()
            if dayRecords.count != 1 { writer.beginArray() }
            for record in dayRecords {
                if dayRecords.count != 1 { writer.element() }
                render(record)
                try sink.drain(&writer)
            }
            if dayRecords.count != 1 { writer.endArray() }
            writer.byte(10)
        } else {
            writer.pretty = false
            for record in dayRecords {
                let start = writer.bytes.count
                writer.resetStructure()
                render(record)
                if dayIndex >= malformedDay && !malformedWritten, case .app = record.body {
                    // The verification server crashed mid-write, then logged the record again.
                    malformedWritten = true
                    let full = Array(writer.bytes[start...])
                    writer.bytes.removeSubrange(start...)
                    writer.bytes.append(contentsOf: full[0..<(full.count * 3 / 5)])
                    writer.byte(10)
                    writer.bytes.append(contentsOf: full)
                    bump(DemoAnomaly.malformedLine)
                }
                writer.byte(10)
                try sink.drain(&writer)
            }
        }
        summary.receiptRecords += dayRecords.count
        try sink.close(&writer)
    }

    private func writeRestOfDay(date: String) throws {

        for record in dayManualRecords {
            let path = "inbox/receipts/receipts-\(date)-recheck-\(transactionIdOf(record)).json"
            let manualSink = try DemoFileSink(url: directory.appendingPathComponent(path))
            summary.files.append(path)
            writer.pretty = true
            writer.resetStructure()
            render(record)
            writer.byte(10)
            try manualSink.close(&writer)
            summary.receiptRecords += 1
        }
        writer.pretty = false

        let ordersPath = "inbox/orders/orders-\(date).csv"
        let ordersSink = try DemoFileSink(url: directory.appendingPathComponent(ordersPath))
        summary.files.append(ordersPath)
        writer.raw("order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at\n")
        for row in dayOrders {
            renderOrder(row)
            try ordersSink.drain(&writer)
        }
        summary.orderRows += dayOrders.count
        try ordersSink.close(&writer)

        dayRecords.removeAll(keepingCapacity: true)
        dayManualRecords.removeAll(keepingCapacity: true)
        dayOrders.removeAll(keepingCapacity: true)
    }

    private func transactionIdOf(_ record: DemoRecord) -> UInt64 {
        switch record.body {
        case .app(let inApp, _, _, _): return inApp.first?.id ?? 0
        case .legacy(let txn, _): return txn.id
        case .failure: return record.namedTxn
        }
    }

    private func finishSummary() {
        summary.anomalies.removeValue(forKey: "MISSING_PRICE_SEEDED")
        summary.anomalies.removeValue(forKey: "SUBSCRIPTION_LAPSE_SEEDED")
        summary.anomalies.removeValue(forKey: "REJECTED")
        for key in DemoAnomaly.reconciliationCategories + [
            DemoAnomaly.retryableThenVerified, DemoAnomaly.retryableNeverVerified, DemoAnomaly.status21007ThenSandbox,
            DemoAnomaly.status21007Pending, DemoAnomaly.status21008ThenProduction, DemoAnomaly.rejected21003,
            DemoAnomaly.rejected21010, DemoAnomaly.otherAppReceipt, DemoAnomaly.malformedLine, DemoAnomaly.missingPrice,
            DemoAnomaly.missingFx, DemoAnomaly.subscriptionLapse,
        ] where summary.anomalies[key] == nil {
            summary.anomalies[key] = 0
        }
        let lastMonth = window.months[window.months.count - 1]
        let yearly = products[DemoTables.P.vipYearly].productId
        summary.notes = [
            "rules/prices.csv has no price for \(yearly) in IND: of the \(Self.count(summary.anomalies[DemoAnomaly.missingPrice] ?? 0, "transaction")) of IND accounts, those booked in IND (their order names it) wait with a MISSING_RULE finding; a renewal no order names is booked at default_storefront once order_wait_days pass.",
            "rules/fx.csv has no \(DemoTables.fxMissingCurrency) rate for \(DemoCalendar.monthString(year: lastMonth.year, month: lastMonth.month)): of the \(Self.count(summary.anomalies[DemoAnomaly.missingFx] ?? 0, "transaction")) of BRA accounts that month, those booked in BRA (their order names it) wait with a MISSING_RULE finding; one no order names is booked at default_storefront once order_wait_days pass.",
            "One line of one .jsonl receipts file is truncated JSON (the complete record follows it).",
            "Failed verifications (status 21005/211xx/21007/21008/21003/21010) are wrapped records naming the transaction in the wrapper's transaction_id and product_id.",
        ]
    }
}
