import Foundation
import GRDB
import LedgerCore
import LedgerReconcile

/// An exception as stored, with its lifecycle.
public struct ExceptionRow: Equatable {
    public var category: String
    public var transactionId: String
    public var orderId: String?
    public var accountId: String?
    public var productId: String?
    public var grossMinor: Int64?
    public var currency: String?
    public var netReportingMinor: Int64?
    public var detail: String
    public var firstSeen: Day
    public var lastSeen: Day
    public var resolvedOn: Day?

    public var isOpen: Bool { resolvedOn == nil }

    /// Days open as of `asOf` (or until it was resolved, if by then): a list written again for
    /// an earlier date counts to that date, not to a resolution after it.
    public func ageDays(asOf: Day) -> Int { (resolvedOn.map { min($0, asOf) } ?? asOf) - firstSeen }
}

extension LedgerReader {
    /// Stored exceptions; `status` is "open", "resolved" or "all". An exception that was
    /// resolved and found again counts once per episode: its earlier episodes (kept when it
    /// reopened) are resolved rows of their own, with their own dates.
    /// - Parameter openOn: only those open on that day (detected on or before it, not resolved by then).
    public func exceptions(status: String = "all", category: String? = nil, openOn day: Day? = nil) throws -> [ExceptionRow] {
        var out: [ExceptionRow] = []
        try forEachException(status: status, category: category, openOn: day) { out.append($0) }
        return out
    }

    /// The same, one at a time, none held (a million open exceptions, a backend's export of
    /// credits gone wrong, took 1.4 GB held). `resolvedAfter`/`resolvedThrough`: only those
    /// resolved after and on or before those days.
    /// `perCategory`: the first so many of each category only.
    public func forEachException(status: String = "all", category: String? = nil, openOn day: Day? = nil,
                                 resolvedAfter: Day? = nil, resolvedThrough: Day? = nil, perCategory: Int? = nil,
                                 _ body: (ExceptionRow) throws -> Void) throws {
        let (filter, args) = Self.exceptionFilter(status: status, category: category, openOn: day, resolvedAfter: resolvedAfter,
                                                  resolvedThrough: resolvedThrough)
        let columns = """
            category, transaction_id, order_id, account_id, product_id, gross_minor, currency, net_reporting_minor,
            detail, first_seen, last_seen, resolved_on
            """
        // A category at a time, in the categories' order, each along the index `exception_list`
        // (by first seen, transaction, order: no sort; schema v34), the earlier episodes of
        // exceptions found again (few) merged in. (The index unforced: a ledger read before the
        // next run upgrades it has none. The table's CHECK admits only these categories.)
        let known = ExceptionCategory.allCases.map(\.rawValue)
        let current = try db.cachedStatement(sql: """
            SELECT \(columns) FROM exception WHERE category = ?\(filter)
            ORDER BY first_seen, transaction_id, order_id LIMIT ?
            """)
        let episodes = try earlierEpisodesSQL.map { try db.cachedStatement(sql: """
            SELECT \(columns) FROM (\($0)) WHERE category = ?\(filter)
            ORDER BY first_seen, transaction_id, order_id
            """) }
        /// Whether `a` sorts before `b` (first seen, transaction, order; SQLite's BINARY order).
        func before(_ a: Row, _ b: Row) -> Bool {
            for i in [9, 1, 2] {
                let x = (a[i] as String?) ?? "", y = (b[i] as String?) ?? ""
                if !LedgerWriter.sameId(x, y) { return LedgerWriter.binaryOrder(x, y) }
            }
            return false
        }
        let limit = perCategory ?? -1
        for c in known where category == nil || category == c {
            let rows = try Row.fetchCursor(current, arguments: StatementArguments([c] + args + [limit]))
            var earlier = try episodes.map { try Row.fetchAll($0, arguments: StatementArguments([c] + args)) } ?? []
            earlier.reverse()
            var given = 0
            func give(_ row: Row) throws -> Bool {
                guard perCategory.map({ given < $0 }) ?? true else { return false }
                given += 1
                try body(Self.exceptionRow(row))
                return true
            }
            rows: while let row = try rows.next() {
                while let e = earlier.last, before(e, row) { guard try give(earlier.removeLast()) else { break rows } }
                guard try give(row) else { break }
            }
            while let e = earlier.popLast(), try give(e) {}
        }
    }

    /// The conditions `forEachException` takes (each after an `AND`), with their arguments.
    static func exceptionFilter(status: String, category: String?, openOn day: Day?, resolvedAfter: Day?,
                                resolvedThrough: Day?) -> (sql: String, arguments: [(any DatabaseValueConvertible)?]) {
        var conditions: [String] = []
        var args: [(any DatabaseValueConvertible)?] = []
        if let day {
            conditions.append("first_seen <= ? AND (resolved_on IS NULL OR resolved_on > ?)")
            args += [day.description, day.description]
        }
        if status == "open" { conditions.append("resolved_on IS NULL") }
        if status == "resolved" { conditions.append("resolved_on IS NOT NULL") }
        if let category { conditions.append("category = ?"); args.append(category) }
        if let resolvedAfter { conditions.append("resolved_on > ?"); args.append(resolvedAfter.description) }
        if let resolvedThrough { conditions.append("resolved_on <= ?"); args.append(resolvedThrough.description) }
        return (conditions.map { " AND " + $0 }.joined(), args)
    }

    /// How many exceptions of each category `forEachException` gives with these filters.
    public func exceptionCounts(status: String = "all", openOn day: Day? = nil, resolvedAfter: Day? = nil,
                                resolvedThrough: Day? = nil) throws -> [String: Int] {
        let (filter, args) = Self.exceptionFilter(status: status, category: nil, openOn: day, resolvedAfter: resolvedAfter,
                                                  resolvedThrough: resolvedThrough)
        var out: [String: Int] = [:]
        for r in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT category, count(*) FROM (\(try episodesSQL)) WHERE 1\(filter) GROUP BY category
            """), arguments: StatementArguments(args)) {
            out[r[0]] = r[1]
        }
        return out
    }

    /// What a summary of the exceptions open on `day` adds up, one at a time: each one's
    /// category, transaction, net in the reporting currency (nil where none, or where its sale
    /// was posted by a run after `postedAfterRun`: not booked as of that run), first day seen,
    /// and whether its transaction is in the sandbox book.
    public func forEachOpenExceptionFigure(openOn day: Day, postedAfterRun: Int64?,
                                           _ body: (_ category: String, _ transactionId: String, _ net: Int64?, _ firstSeen: Day, _ sandbox: Bool) throws -> Void) throws {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT x.category, x.transaction_id,
                   CASE WHEN ?2 IS NOT NULL AND EXISTS (SELECT 1 FROM entry e WHERE e.book IN ('production', 'sandbox') AND e.transaction_id = x.transaction_id
                                                          AND e.kind = 'sale' AND e.run_id > ?2)
                        THEN NULL ELSE x.net_reporting_minor END,
                   x.first_seen,
                   x.net_reporting_minor IS NOT NULL AND EXISTS (SELECT 1 FROM store_transaction t WHERE t.transaction_id = x.transaction_id AND t.book = 'sandbox')
            FROM (\(try episodesSQL)) x WHERE x.first_seen <= ?1 AND (x.resolved_on IS NULL OR x.resolved_on > ?1)
            """), arguments: [day.description, postedAfterRun])
        while let r = try rows.next() { try body(r[0], r[1], r[2], Day(iso: r[3] as String)!, r[4]) }
    }

    /// Every episode of every exception: each row as it stands (its current episode), and the
    /// earlier episodes of those found again after they were resolved (a ledger read as it is,
    /// before the next run upgrades it to keep them, has none).
    var episodesSQL: String {
        get throws {
            let current = """
                SELECT category, transaction_id, order_id, account_id, product_id, gross_minor, currency, net_reporting_minor,
                       detail, first_seen, last_seen, resolved_on, id AS exception_id FROM exception
                """
            guard let earlier = try earlierEpisodesSQL else { return current }
            return current + "\nUNION ALL\n" + earlier
        }
    }

    /// The earlier episodes alone, with the columns of `episodesSQL` (nil when the ledger keeps none).
    var earlierEpisodesSQL: String? {
        get throws {
            guard try db.tableExists("exception_episode") else { return nil }
            return """
                SELECT x.category, x.transaction_id, x.order_id, x.account_id, x.product_id, x.gross_minor, x.currency,
                       x.net_reporting_minor, p.detail, p.first_seen, p.last_seen, p.resolved_on, x.id AS exception_id
                FROM exception_episode p JOIN exception x ON x.id = p.exception_id
                """
        }
    }

    /// Exceptions about one transaction or one order (for the trace), every episode, oldest first.
    public func exceptions(transactionId: String?, orderId: String?) throws -> [ExceptionRow] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT category, transaction_id, order_id, account_id, product_id, gross_minor, currency, net_reporting_minor,
                   detail, first_seen, last_seen, resolved_on FROM (\(try episodesSQL))
            WHERE transaction_id = ? OR order_id = ? ORDER BY exception_id, first_seen
            """), arguments: [transactionId ?? "\u{0}", orderId ?? "\u{0}"]).map(Self.exceptionRow)
    }

    static func exceptionRow(_ r: Row) -> ExceptionRow {
        let order: String = r[2]
        return ExceptionRow(category: r[0], transactionId: r[1], orderId: order.isEmpty ? nil : order, accountId: r[3],
                            productId: r[4], grossMinor: r[5], currency: r[6], netReportingMinor: r[7], detail: r[8],
                            firstSeen: Day(iso: r[9] as String)!, lastSeen: Day(iso: r[10] as String)!,
                            resolvedOn: (r[11] as String?).flatMap { Day(iso: $0) })
    }

    /// The as-of date of the latest run before `asOf` (a different, earlier night).
    public func previousAsOf(before asOf: Day) throws -> Day? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT max(as_of) FROM run WHERE as_of < ?"), arguments: [asOf.description]).flatMap { Day(iso: $0) }
    }

    /// Matched order/transaction pairs found by the latest run.
    public func matchedCount(runId: Int64) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT orders_matched FROM run WHERE id = ?"), arguments: [runId]) ?? 0
    }

    /// Those of `transactionIds` whose sale a run after `runId` posted: not booked in the state
    /// that run left (a workbook written again for its date shows them as not booked then).
    public func salesPosted(afterRun runId: Int64, of transactionIds: Set<String>) throws -> Set<String> {
        guard try runExists(after: runId) else { return [] }
        return try transactionIds.filter { try salePosted(afterRun: runId, transactionId: $0) }
    }

    /// Whether the sale of `transactionId` was posted by a run after run `runId`.
    public func salePosted(afterRun runId: Int64, transactionId: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT 1 FROM entry WHERE book IN ('production', 'sandbox') AND transaction_id = ? AND kind = 'sale' AND run_id > ?
            """), arguments: [transactionId, runId]) ?? false
    }

    /// Whether a run came after run `runId`.
    public func runExists(after runId: Int64) throws -> Bool {
        try (Int64.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM run")) ?? 0) > runId
    }

    /// Those of `transactionIds` in the sandbox book: their amounts are test sales', which no
    /// production total holds.
    public func sandboxTransactions(of transactionIds: Set<String>) throws -> Set<String> {
        let statement = try db.cachedStatement(sql: "SELECT 1 FROM store_transaction WHERE transaction_id = ? AND book = 'sandbox'")
        return try transactionIds.filter { try Bool.fetchOne(statement, arguments: [$0]) ?? false }
    }

    /// The finished runs as of `day` before run `runId` (a night run again the same day with
    /// more data), in order.
    public func earlierRuns(asOf day: Day, before runId: Int64) throws -> [Int64] {
        try Int64.fetchAll(db.cachedStatement(sql: "SELECT id FROM run WHERE as_of = ? AND id < ? AND finished_at IS NOT NULL ORDER BY id"),
                           arguments: [day.description, runId])
    }

    /// The last run whose as-of date is on or before `day`: the state a workbook as of `day`
    /// reports (reconciliation, records and sales waiting), nil when no run had happened by then.
    public func lastRun(onOrBefore day: Day) throws -> (id: Int64, asOf: Day)? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, as_of FROM run WHERE as_of <= ? ORDER BY as_of DESC, id DESC LIMIT 1"),
                                       arguments: [day.description]) else { return nil }
        return (r[0], Day(iso: r[1] as String)!)
    }

    /// When night run `id` started (nil: no such run).
    public func runStartedAt(_ id: Int64) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT started_at FROM run WHERE id = ?"), arguments: [id])
    }

    /// The month run `id` closed the books through (nil: none closed then).
    /// (A ledger of schema v17 or before, read as it is, kept none: nil.)
    public func closedThrough(ofRun id: Int64) throws -> Month? {
        guard try db.columns(in: "run").contains(where: { $0.name == "closed_through" }) else { return nil }
        return try String.fetchOne(db, sql: "SELECT closed_through FROM run WHERE id = ?", arguments: [id]).flatMap(Month.init(iso:))
    }

    /// The MISSING_RULE findings open on day `?1` with their transactions (`t`) and the run
    /// that found them (`found`): the sales that waited for a rule then, still waiting or
    /// posted by a later run.
    /// The sales waiting on a day: their MISSING_RULE or ORDER_WAIT finding was open then.
    static let waitingOpenOn = """
        FROM finding f JOIN run found ON found.id = f.first_run_id LEFT JOIN run resolver ON resolver.id = f.resolved_run_id
        JOIN store_transaction t ON t.transaction_id = f.transaction_id
        WHERE f.code IN ('MISSING_RULE', 'ORDER_WAIT') AND found.as_of <= ?1 AND (resolver.as_of IS NULL OR resolver.as_of > ?1)
        """

    /// Whether a workbook as of `day` shows the ledger's current state: no run is dated after it.
    func isCurrent(_ day: Day) throws -> Bool { try lastAsOf().map { $0 <= day } ?? true }

    /// The sales waiting as a workbook as of `day` lists them: those waiting now, or (for a date
    /// before the last run) those that waited then, for a rule or for their order (their
    /// MISSING_RULE or ORDER_WAIT finding was open), posted since or not.
    /// At most `limit` of them (in the order listed), and how many there are in all: a night
    /// that leaves a million sales waiting (a region with no price yet) lists the first, as a
    /// sheet holds 1,048,576 rows and every row is held in memory while the workbook is built.
    public func pendingTransactions(on day: Day, limit: Int = Int(Int32.max)) throws -> (listed: [WaitingSale], count: Int) {
        guard try !isCurrent(day) else {
            let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM store_transaction WHERE sale_status = 'pending'")) ?? 0
            return (try pendingTransactions(limit: limit), count)
        }
        let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) \(Self.waitingOpenOn)"), arguments: [day.description]) ?? 0
        let listed = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.transaction_id, t.book, t.product_id, f.code || ': ' || f.message, found.as_of, t.purchase_ms \(Self.waitingOpenOn)
            ORDER BY found.as_of, f.transaction_id LIMIT ?2
            """), arguments: [day.description, limit]).map(WaitingSale.init(row:))
        return (listed, count)
    }

    /// A sale waiting for a rule or for its order, as a workbook lists it.
    public struct WaitingSale {
        public var transactionId: String, book: String, productId: String, reason: String
        /// The first night that found it waiting.
        public var firstSeen: Day
        /// Its purchase date (UTC): the day its entry will be dated (or the first open day, late).
        public var purchased: Day

        init(row: Row) {
            transactionId = row[0]; book = row[1]; productId = row[2]; reason = row[3] ?? ""
            firstSeen = Day(iso: row[4] as String)!
            purchased = Day(epochMilliseconds: row[5] as Int64)
        }
    }

    /// The book's sales dated on or before `day` (their purchase date, UTC) that wait for a rule
    /// now: what a workbook's figures as of `day` (the entries dated on or before it, as the
    /// ledger holds them when it is written) leave out. A sale that waited on `day` and was
    /// posted since is in those figures; one that waits still is not, whenever it was read.
    public func waitingSaleCount(book: String, datedThrough day: Day) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) FROM store_transaction INDEXED BY store_transaction_pending_order
            WHERE sale_status = 'pending' AND purchase_ms < ? AND book = ?
            """), arguments: [(day + 1).epochMilliseconds, book]) ?? 0
    }

    /// The sales waiting now (for a rule, for their order) whose purchase date (UTC) is `day` or
    /// earlier, counted by book and by the code their reason starts with, each with the earliest
    /// such date: what `close` warns of, since once posted they go to the first open day, late.
    public func waitingSales(datedThrough day: Day) throws -> [(book: String, code: String, count: Int, earliest: Day)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT book, CASE WHEN instr(pending_reason, ':') > 0 THEN substr(pending_reason, 1, instr(pending_reason, ':') - 1)
                              ELSE pending_reason END AS code, count(*), min(purchase_ms)
            FROM store_transaction INDEXED BY store_transaction_pending_order
            WHERE sale_status = 'pending' AND purchase_ms < ?
            GROUP BY book, code ORDER BY book, code
            """), arguments: [(day + 1).epochMilliseconds]).map {
            ($0[0], $0[1], $0[2], Day(epochMilliseconds: $0[3] as Int64))
        }
    }

    /// The backend's production credits of `day` or earlier (their order's latest version) with
    /// no purchase the store reported (CREDITED_WITHOUT_TRANSACTION open) or none verified
    /// (CREDITED_UNVERIFIED open): purchases the books may still be missing, which would post
    /// after a close of that day's month, late. What `close` warns of.
    public func openCreditsWithoutPurchase(creditedThrough day: Day) throws -> (withoutTransaction: Int, unverified: Int) {
        let counts = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT e.category, count(*) FROM exception e
            WHERE e.resolved_on IS NULL AND e.category IN ('CREDITED_WITHOUT_TRANSACTION', 'CREDITED_UNVERIFIED')
              AND (SELECT v.credited_ms FROM order_version v WHERE v.order_id = e.order_id ORDER BY v.id DESC LIMIT 1) < ?
            GROUP BY e.category
            """), arguments: [(day + 1).epochMilliseconds]).reduce(into: [String: Int]()) { $0[$1[0]] = $1[1] }
        return (counts["CREDITED_WITHOUT_TRANSACTION"] ?? 0, counts["CREDITED_UNVERIFIED"] ?? 0)
    }

    /// The book's free transactions (a free trial or offer, a family member's access: a gross of
    /// zero, no entry) dated on or before `day`: counted in the Summary, as accounting.md asks.
    public func freeTransactionCount(book: String, datedThrough day: Day) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) FROM store_transaction INDEXED BY store_transaction_free
            WHERE sale_status = 'free' AND book = ? AND purchase_ms < ?
            """), arguments: [book, (day + 1).epochMilliseconds]) ?? 0
    }

    /// The receipt records waiting for verification now (read by any run so far): a record that
    /// did not verify tells no date, so any of them may belong to a workbook's figures.
    public func pendingRecordCountNow() throws -> Int {
        guard let last = try lastAsOf() else { return 0 }
        return try pendingRecordCount(openOn: last)
    }

    /// How many production sales purchased from `from` through `through` (UTC days) wait, as
    /// the ledger stands (for a rule, or for their order to name a storefront), in one of
    /// `currencies` or in none known yet (a legacy receipt names none).
    public func productionSalesWaiting(purchasedFrom from: Day, through: Day, currencies: Set<String>) throws -> Int {
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT currency FROM store_transaction WHERE sale_status = 'pending' AND book = 'production' AND purchase_ms >= ? AND purchase_ms < ?
            """), arguments: [from.epochMilliseconds, (through + 1).epochMilliseconds])
        return rows.filter { ($0[0] as String?).map { currencies.contains(Currency.isoUppercased($0)) } ?? true }.count
    }

    /// Transactions whose sale waits for a rule, with the day they were first read.
    public func pendingTransactions(limit: Int = Int(Int32.max)) throws -> [WaitingSale] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT t.transaction_id, t.book, t.product_id, t.pending_reason, r.as_of, t.purchase_ms FROM store_transaction t JOIN run r ON r.id = t.first_run_id
            WHERE t.sale_status = 'pending' ORDER BY r.as_of, t.transaction_id LIMIT ?
            """), arguments: [limit]).map(WaitingSale.init(row:))
    }
}

/// The transactions and orders a run changed in ways reconciliation looks at: new
/// transactions, refunds, entries, reversal requests, records that did not verify, new order
/// versions. Past `limit` keys the run stops keeping them and reconciles every group.
public struct TouchedKeys {
    public static let limit = 500_000
    /// An id compared by its bytes, as SQLite compares it (Swift's `==` equates canonically
    /// equivalent strings, which the ledger keeps apart).
    struct Key: Hashable {
        var text: String
        static func == (a: Key, b: Key) -> Bool { LedgerWriter.sameId(a.text, b.text) }
        func hash(into hasher: inout Hasher) {
            var copy = text
            copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }
    private(set) var transactionKeys: Set<Key> = []
    private(set) var orderKeys: Set<Key> = []
    public private(set) var overflowed = false

    public var transactions: [String] { transactionKeys.map(\.text) }
    /// How many keys are kept.
    public var count: Int { transactionKeys.count + orderKeys.count }
    public var orders: [String] { orderKeys.map(\.text) }

    mutating func transaction(_ id: String) {
        guard !overflowed else { return }
        transactionKeys.insert(Key(text: id))
        checkLimit()
    }

    mutating func order(_ id: String, transactionId: String?) {
        guard !overflowed else { return }
        orderKeys.insert(Key(text: id))
        if let transactionId { transactionKeys.insert(Key(text: transactionId)) }
        checkLimit()
    }

    /// Stops tracking: the run reconciles every group anyway.
    mutating func stop() {
        overflowed = true
        transactionKeys = []
        orderKeys = []
    }

    private mutating func checkLimit() {
        guard transactionKeys.count + orderKeys.count > Self.limit else { return }
        overflowed = true
        transactionKeys = []
        orderKeys = []
    }
}

/// How a run reconciled.
/// Reconciliation exceptions as a run leaves them.
public struct ExceptionCounts: Equatable, Sendable {
    /// Open, by category, the commonest first.
    public var open: [(category: String, count: Int)] = []
    public var openTotal: Int { open.reduce(0) { $0 + $1.count } }
    /// Opened by the run (first seen, or seen again after they were resolved).
    public var opened = 0
    /// Resolved by the run (no longer detected).
    public var resolved = 0
    public init() {}
    public static func == (a: Self, b: Self) -> Bool {
        a.open.map { "\($0.category) \($0.count)" } == b.open.map { "\($0.category) \($0.count)" } && a.opened == b.opened && a.resolved == b.resolved
    }
}

extension LedgerReader {
    /// The exceptions open after run `runId`, those it opened and those it resolved.
    public func exceptionCounts(runId: Int64) throws -> ExceptionCounts {
        var c = ExceptionCounts()
        c.open = try Row.fetchAll(db, sql: """
            SELECT category, count(*) FROM exception WHERE resolved_run_id IS NULL GROUP BY category ORDER BY 2 DESC, 1
            """).map { ($0[0], $0[1]) }
        c.opened = try Int.fetchOne(db, sql: "SELECT count(*) FROM exception WHERE resolved_run_id IS NULL AND first_run_id = ?",
                                    arguments: [runId]) ?? 0
        c.resolved = try Int.fetchOne(db, sql: "SELECT count(*) FROM exception WHERE resolved_run_id = ?", arguments: [runId]) ?? 0
        return c
    }
}

public struct ReconciliationSummary: Equatable {
    /// "full" (every group) or "incremental" (only the groups the run touched).
    public var mode: String
    /// Why every group was reconciled (nil for an incremental run).
    public var fullBecause: String?
    /// Groups reconciled (one per transaction id, one per order naming none).
    public var groups: Int
    /// Order/transaction pairs matched without an exception, in the whole ledger after the run.
    public var matched: Int
}

extension LedgerReader {
    /// What reconciliation reads of a stored transaction (`reconTransaction`) and of an order's
    /// latest version (`reconOrder`); `?1` is the config's default storefront.
    static let reconTransactionColumns = """
        SELECT t.transaction_id, t.book, t.product_id, t.quantity, t.app_account_token, t.cancellation_ms,
               t.revocation_percentage,
               EXISTS (SELECT 1 FROM reversal_request q WHERE q.book = t.book AND q.transaction_id = t.transaction_id),
               e.gross_minor, e.currency, e.net_reporting_minor,
               t.storefront IS NULL AND e.storefront = ?1, t.store_refund_share
        """
    static let reconSaleJoin = "LEFT JOIN entry e ON e.book = t.book AND e.transaction_id = t.transaction_id AND e.kind = 'sale'"
    static let reconOrderColumns = """
        SELECT v.order_id, v.account_id, NULLIF(v.transaction_id, ''), v.product_id, v.quantity, v.credited_units,
               v.credited_ms, v.environment, v.app_account_token,
               v.storefront IS NOT NULL AND v.storefront <> '' AND upper(v.storefront) <> ?1,
               v.reversed_at IS NULL
        """
    /// The latest version of each order; reversed ones too, in a transaction's group: they
    /// raise nothing (the Reconciler takes the active ones), but posting takes a reversed
    /// order's storefront, so one naming another storefront than a sale was booked at by
    /// default is a STOREFRONT_AFTER_POSTING as an active one is (it was left unsaid).
    static let reconLatestOrder = "v.id = (SELECT max(w.id) FROM order_version w WHERE w.order_id = v.order_id)"
    static let reconLatestActiveOrder = "v.reversed_at IS NULL AND \(reconLatestOrder)"
    /// Every group of the ledger (a full reconciliation, and `verify`'s).
    static let reconAllTransactionsSQL = "\(reconTransactionColumns) FROM store_transaction t \(reconSaleJoin) ORDER BY t.transaction_id"
    static let reconAllOrdersSQL = "\(reconOrderColumns) FROM order_version v INDEXED BY order_version_transaction WHERE \(reconLatestOrder) ORDER BY v.transaction_id"

    /// SQLite's BINARY order (UTF-8 bytes, then length), compared in place with `memcmp`: the
    /// touched ids of a night are sorted with it (110,000 at 1M, 0.3 s through
    /// `utf8.lexicographicallyPrecedes`).
    static func binaryOrder(_ a: String, _ b: String) -> Bool {
        var x = a, y = b
        return x.withUTF8 { p in
            y.withUTF8 { q in
                let n = min(p.count, q.count)
                let c = n == 0 ? 0 : memcmp(p.baseAddress!, q.baseAddress!, n)
                return c != 0 ? c < 0 : p.count < q.count
            }
        }
    }

    /// Byte equality, as SQLite compares (Swift's `==` equates canonically equivalent strings),
    /// compared in place (`utf8.elementsEqual` went through a generic collection's element
    /// reads, a few percent of the read stage where touched ids are kept).
    static func sameId(_ a: String, _ b: String) -> Bool {
        var x = a, y = b
        return x.withUTF8 { p in
            y.withUTF8 { q in p.count == q.count && (p.isEmpty || memcmp(p.baseAddress!, q.baseAddress!, p.count) == 0) }
        }
    }

    static func reconTransaction(_ r: Row) -> ReconTransaction {
        let cancelled = (r[5] as Int64?) != nil
        let percentage: Int64? = r[6]
        let reversed: Bool = r[7]
        var refunded = cancelled && !reversed
        var inFull = refunded && (percentage == nil || percentage == 100_000)
        // A second refund or reversal the ledger did not post: the store's last word.
        let share = r[12] as Int64?
        if let share {
            refunded = share > 0
            inFull = share == 100_000
        }
        var t = ReconTransaction(transactionId: r[0], book: Book(rawValue: r[1])!, productId: r[2], quantity: r[3],
                                 appAccountToken: r[4], refundedInFull: inFull,
                                 refunded: refunded, grossMinor: r[8], currency: r[9], netReportingMinor: r[10],
                                 bookedAtDefaultStorefront: (r[11] as Bool?) ?? false)
        t.refundedAgain = share != nil
        return t
    }

    static func reconOrder(_ r: Row) -> ReconOrder {
        ReconOrder(orderId: r[0], accountId: r[1], transactionId: r[2], productId: r[3], quantity: r[4],
                   creditedUnits: r[5], creditedMs: r[6], environment: r[7], appAccountToken: r[8], active: (r[10] as Bool?) ?? true,
                   namesOtherStorefront: (r[9] as Bool?) ?? false)
    }

    /// The groups reconciliation reconciles (`ReconGroup`: a transaction id with its stored
    /// transaction and its orders, or an order naming none), streamed in transaction-id order
    /// from the transactions and orders the SQL gives (`loneOrdersSQL`: orders naming no
    /// transaction, read first). Memory does not grow with the ledger.
    func forEachReconGroup(transactionsSQL: String, ordersSQL: String, loneOrdersSQL: String?, defaultStorefront: String,
                           _ body: (ReconGroup) throws -> Void) throws {
        var unverified = FastStatement(try db.cachedStatement(sql: "SELECT 1 FROM unverified_record_transaction WHERE transaction_id = ? LIMIT 1"), in: db)
        if let loneOrdersSQL {
            let lone = try Row.fetchCursor(db, sql: loneOrdersSQL, arguments: [defaultStorefront])
            while let r = try lone.next() {
                try body(ReconGroup(transactionId: nil, transaction: nil, orders: [Self.reconOrder(r)], unverified: false))
            }
        }
        // A merge of two streams in transaction-id order (SQLite's BINARY order: UTF-8 bytes).
        let tCursor = try Row.fetchCursor(db, sql: transactionsSQL, arguments: [defaultStorefront])
        let oCursor = try Row.fetchCursor(db, sql: ordersSQL, arguments: [defaultStorefront])
        var nextT = try tCursor.next().map(Self.reconTransaction)
        var nextO = try oCursor.next().map(Self.reconOrder)
        while let o = nextO, o.transactionId == nil {
            if o.active { try body(ReconGroup(transactionId: nil, transaction: nil, orders: [o], unverified: false)) }
            nextO = try oCursor.next().map(Self.reconOrder)
        }
        while nextT != nil || nextO != nil {
            let id: String
            switch (nextT?.transactionId, nextO?.transactionId) {
            case let (a?, b?): id = Self.binaryOrder(a, b) ? a : b
            case let (a?, nil): id = a
            case let (nil, b?): id = b
            case (nil, nil): preconditionFailure("an order without a transaction id after the first (NULL ids sort first)")
            }
            var transaction: ReconTransaction? = nil
            if let t = nextT, Self.sameId(t.transactionId, id) {
                transaction = t
                nextT = try tCursor.next().map(Self.reconTransaction)
            }
            var orders: [ReconOrder] = []
            while let o = nextO, let oid = o.transactionId, Self.sameId(oid, id) {
                orders.append(o)
                nextO = try oCursor.next().map(Self.reconOrder)
            }
            // Reversed orders alone, of no stored transaction: no group (as before they were read).
            if transaction == nil && !orders.contains(where: \.active) { continue }
            var isUnverified = false
            if transaction == nil && orders.contains(where: { $0.environment == "production" && $0.active }) {
                unverified.bind(id)
                try unverified.forEachRow { _ in isUnverified = true }
            }
            try body(ReconGroup(transactionId: id, transaction: transaction, orders: orders, unverified: isUnverified))
        }
    }
}

extension LedgerReader {
    /// The reconciliation the ledger's transactions and orders give now (every group, by
    /// `reconciler`: the rules the last night reconciled by), against the one it holds: the open
    /// exceptions, their figures and detail, and the matched pairs. A night keeps them as it
    /// found them; an exception resolved or changed by hand, or a match made up or removed,
    /// passed `verify` and showed in the trace and the workbooks as the night's. What differs,
    /// the first `limit` said, and how many in all.
    public func reconciliationDifferences(_ reconciler: Reconciler, defaultStorefront: String, limit: Int = 20) throws
        -> (said: [String], count: Int, derived: (open: Int, matched: Int)) {
        typealias Figures = (detail: String, account: String?, product: String?, gross: Int64?, currency: String?, net: Int64?)
        // Keyed by the ids' bytes, as SQLite compares them (Swift's String equality would take an
        // id in NFC and one in NFD for one: a review's false difference).
        func key(_ parts: String...) -> [UInt8] { Array(parts.joined(separator: "\u{1F}").utf8) }
        var open: [[UInt8]: Figures] = [:]
        let rows = try Row.fetchCursor(db, sql: """
            SELECT category, transaction_id, order_id, detail, account_id, product_id, gross_minor, currency, net_reporting_minor
            FROM exception WHERE resolved_on IS NULL
            """)
        while let r = try rows.next() {
            open[key(r[0], r[1], r[2])] = (r[3], r[4], r[5], r[6], r[7], r[8])
        }
        var said: [String] = [], count = 0
        func say(_ m: String) { count += 1; if said.count < limit { said.append(m) } }
        func name(_ category: String, _ transactionId: String, _ orderId: String) -> String {
            "\(category) of " + [transactionId.isEmpty ? nil : "transaction \(transactionId)", orderId.isEmpty ? nil : "order \(orderId)"]
                .compactMap { $0 }.joined(separator: " and ")
        }
        func text(_ v: Any?) -> String { v.map { "\($0)" } ?? "none" }
        var matchedSeen = 0, derivedOpen = 0, derivedMatched = 0
        let matches = try db.cachedStatement(sql: "SELECT order_id FROM reconciled_match WHERE transaction_id = ?")
        let resolved = try db.cachedStatement(sql: "SELECT resolved_on, resolved_run_id FROM exception WHERE category = ? AND transaction_id = ? AND order_id = ? AND resolved_on IS NOT NULL")
        try forEachReconGroup(transactionsSQL: Self.reconAllTransactionsSQL, ordersSQL: Self.reconAllOrdersSQL, loneOrdersSQL: nil,
                              defaultStorefront: defaultStorefront) { group in
            let result = reconciler.reconcile(group)
            derivedOpen += result.exceptions.count
            for e in result.exceptions {
                let what = name(e.category.rawValue, e.transactionId, e.orderId)
                guard let s = open.removeValue(forKey: key(e.category.rawValue, e.transactionId, e.orderId)) else {
                    if let r = try Row.fetchOne(resolved, arguments: [e.category.rawValue, e.transactionId, e.orderId]) {
                        say("exception \(what) is stored resolved (on \(text(r[0] as String?)), by run \(text(r[1] as Int64?))), but the ledger's transactions and orders still give it: resolved by hand (or they were changed since the night)")
                    } else {
                        say("exception \(what) is not stored, but the ledger's transactions and orders give it: deleted (or they were changed since the night)")
                    }
                    continue
                }
                var differ: [String] = []
                if s.detail != e.detail { differ.append("its detail reads \"\(s.detail)\" where they give \"\(e.detail)\"") }
                if s.account != e.accountId { differ.append("its account \(text(s.account)) where they give \(text(e.accountId))") }
                if s.product != e.productId { differ.append("its product \(text(s.product)) where they give \(text(e.productId))") }
                if s.gross != e.grossMinor || s.currency != e.currency {
                    differ.append("its price \(text(s.gross)) \(text(s.currency)) (minor units) where they give \(text(e.grossMinor)) \(text(e.currency))")
                }
                if s.net != e.netReportingMinor { differ.append("its net \(text(s.net)) (minor units) where they give \(text(e.netReportingMinor))") }
                if !differ.isEmpty { say("exception \(what): " + differ.joined(separator: "; ") + ": changed by hand (or they were changed since the night)") }
            }
            if let id = group.transactionId {
                let have = Set(try String.fetchAll(matches, arguments: [id]).map { Array($0.utf8) })
                let want = Set(result.matchedOrderIds.map { Array($0.utf8) })
                matchedSeen += have.count
                derivedMatched += want.count
                for o in have.subtracting(want).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                    say("transaction \(id) is stored as matched with order \(String(decoding: o, as: UTF8.self)), but its orders do not match it so (an exception between them, or no such active order): made up")
                }
                for o in want.subtracting(have).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                    say("transaction \(id) and order \(String(decoding: o, as: UTF8.self)) match, but the ledger does not hold them as matched: removed")
                }
            }
        }
        for k in open.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let part = k.split(separator: 0x1F, maxSplits: 2, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            say("exception \(name(part[0], part[1], part[2])) is stored open, but the ledger's transactions and orders do not give it: made up, or its resolution removed (or they were changed since the night)")
        }
        let stored = try Int.fetchOne(db, sql: "SELECT count(*) FROM reconciled_match") ?? 0
        if stored > matchedSeen {
            say("\(stored - matchedSeen) matched pair\(stored - matchedSeen == 1 ? "" : "s") name\(stored - matchedSeen == 1 ? "s" : "") a transaction id with no transaction or order in the ledger: made up")
        }
        return (said, count, (derivedOpen, derivedMatched))
    }
}

extension LedgerWriter {
    /// Why `reconcile` will reconcile every group whatever the run touches (the ledger's first
    /// reconciliation, or the product rules changed since the last), or nil.
    func fullWhatever(_ reconciler: Reconciler, runId: Int64) throws -> String? {
        Self.fullWhatever(reconciler, previousRules: try previousRun(runId)?.rules)
    }

    /// The last committed run before `runId`: the product rules its reconciliation used and
    /// the pairs it left matched.
    private func previousRun(_ runId: Int64) throws -> (rules: String?, matched: Int?)? {
        try Row.fetchOne(db, sql: "SELECT reconciliation_rules, orders_matched FROM run WHERE id < ? ORDER BY id DESC LIMIT 1",
                         arguments: [runId]).map { ($0[0], $0[1]) }
    }

    /// `fullWhatever` from the last run's rules: a run that recorded no reconciliation (one
    /// before migration v4, or none) leaves nothing to go on, and everything is reconciled again.
    private static func fullWhatever(_ reconciler: Reconciler, previousRules: String?) -> String? {
        guard let previousRules else {
            return "the last run recorded no reconciliation (the ledger's first, or one from before reconciliation by groups)"
        }
        return previousRules != reconciler.rulesFingerprint ? "the reconciliation rules changed (a product's type or units, the scope, or iapledger's own)" : nil
    }

    /// Called as a run begins: when its reconciliation will be full whatever it touches, what
    /// it touches is not tracked (on a first night of a million transactions, half a million
    /// ids were kept until the limit stopped them).
    public func skipTouchedKeysIfReconcilingAll(_ reconciler: Reconciler, runId: Int64) throws {
        if try fullWhatever(reconciler, runId: runId) != nil { touched.stop() }
    }

    /// Reconciles the ledger (reconciliation.md) and keeps the stored exceptions up to date:
    /// new ones open (first seen today), open ones stay open (last seen today), open ones no
    /// longer detected are resolved today. Running a night again changes nothing but the
    /// last-seen run.
    ///
    /// Reconciliation is a function of independent groups (`ReconGroup`): a run reconciles
    /// only the groups its new data touched, unless it is the ledger's first reconciliation,
    /// the product rules changed since the last one, it touched more than `TouchedKeys.limit`
    /// keys, or `full` is set. Either way the groups are streamed from the ledger in
    /// transaction-id order, one at a time: memory does not grow with the history.
    /// - Parameter defaultStorefront: the config's, to find sales booked at it whose orders name
    ///   another storefront since (STOREFRONT_AFTER_POSTING).
    public func reconcile(_ reconciler: Reconciler, runId: Int64, asOf: Day, full forceFull: Bool = false,
                          defaultStorefront: String = "", progress: (Int) -> Void = { _ in }) throws -> ReconciliationSummary {
        let fingerprint = reconciler.rulesFingerprint
        let last = try previousRun(runId)
        let fullBecause: String?
        if forceFull { fullBecause = "asked for" }
        else if let why = Self.fullWhatever(reconciler, previousRules: last?.rules) { fullBecause = why }
        else if touched.overflowed { fullBecause = "the run touched more than \(TouchedKeys.limit) transactions and orders" }
        else { fullBecause = nil }
        let full = fullBecause != nil

        let transactionsSQL, ordersSQL, exceptionsSQL: String
        var loneOrdersSQL: String? = nil
        // Matched pairs in the ledger: those kept from the last reconciliation, less the pairs of
        // the groups reconciled again, plus what those groups match now.
        var matched = 0
        if full {
            (transactionsSQL, ordersSQL) = (Self.reconAllTransactionsSQL, Self.reconAllOrdersSQL)
            exceptionsSQL = "SELECT id, category, transaction_id, order_id, resolved_on IS NULL FROM exception"
            try db.execute(sql: "DELETE FROM reconciled_match")
        } else {
            try fillTouchedTables()
            try db.execute(sql: "DELETE FROM reconciled_match WHERE transaction_id IN (SELECT transaction_id FROM temp.recon_touched)")
            matched = (last?.matched ?? 0) - db.changesCount
            // CROSS JOIN keeps the touched keys the outer loop (SQLite has no statistics on a
            // temporary table and could otherwise walk the whole ledger to probe them).
            transactionsSQL = "\(Self.reconTransactionColumns) FROM temp.recon_touched k CROSS JOIN store_transaction t ON t.transaction_id = k.transaction_id \(Self.reconSaleJoin) ORDER BY k.transaction_id"
            ordersSQL = "\(Self.reconOrderColumns) FROM temp.recon_touched k CROSS JOIN order_version v ON v.transaction_id = k.transaction_id WHERE \(Self.reconLatestOrder) ORDER BY k.transaction_id"
            loneOrdersSQL = "\(Self.reconOrderColumns) FROM temp.recon_touched_order k CROSS JOIN order_version v ON v.order_id = k.order_id WHERE (v.transaction_id IS NULL OR v.transaction_id = '') AND \(Self.reconLatestActiveOrder) ORDER BY k.order_id"
            exceptionsSQL = """
                SELECT id, category, transaction_id, order_id, resolved_on IS NULL FROM exception
                WHERE transaction_id IN (SELECT transaction_id FROM temp.recon_touched)
                   OR (transaction_id = '' AND order_id IN (SELECT order_id FROM temp.recon_touched_order))
                """
        }

        // The stored exceptions of the groups about to be reconciled (a small share of the ledger).
        var existing: [String: (id: Int64, open: Bool)] = [:]
        for r in try Row.fetchAll(db, sql: exceptionsSQL) {
            existing["\(r[1] as String)|\(r[2] as String)|\(r[3] as String)"] = (r[0], r[4])
        }
        var seen = Set<Int64>()
        let day = asOf.description
        var addMatch = FastStatement(try db.cachedStatement(sql: "INSERT OR IGNORE INTO reconciled_match (transaction_id, order_id) VALUES (?, ?)"), in: db)
        // (Bound through the C API: a night of a million exceptions, a third of its reconcile
        // stage was GRDB's arguments, bound and reset for each.)
        var stillOpen = FastStatement(try db.cachedStatement(sql: """
            UPDATE exception SET last_seen = ?, last_run_id = ?, detail = ?, account_id = ?, product_id = ?,
                gross_minor = ?, currency = ?, net_reporting_minor = ? WHERE id = ?
            """), in: db)
        var addException = FastStatement(try db.cachedStatement(sql: """
            INSERT INTO exception (category, transaction_id, order_id, first_seen, first_run_id, last_seen, last_run_id,
                detail, account_id, product_id, gross_minor, currency, net_reporting_minor)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """), in: db)
        /// Binds what an exception says as detected now (both statements take it in this order).
        func bindFigures(_ e: DetectedException, _ statement: inout FastStatement) {
            statement.bind(day)
            statement.bind(runId)
            statement.bind(e.detail)
            statement.bind(e.accountId)
            statement.bind(e.productId)
            statement.bind(e.grossMinor)
            statement.bind(e.currency)
            statement.bind(e.netReportingMinor)
        }
        var groups = 0

        func apply(_ group: ReconGroup) throws {
            let result = reconciler.reconcile(group)
            for e in result.exceptions {
                let key = "\(e.category.rawValue)|\(e.transactionId)|\(e.orderId)"
                if let (id, open) = existing[key] {
                    seen.insert(id)
                    if open {
                        bindFigures(e, &stillOpen)
                        stillOpen.bind(id)
                        try stillOpen.run()
                    } else {
                        // Detected again after it was resolved: a new episode. The one before
                        // it is kept as history first.
                        try db.cachedStatement(sql: """
                            INSERT INTO exception_episode (exception_id, detail, first_seen, first_run_id, last_seen, last_run_id,
                                resolved_on, resolved_run_id)
                            SELECT id, detail, first_seen, first_run_id, last_seen, last_run_id, resolved_on, resolved_run_id
                            FROM exception WHERE id = ?
                            """).execute(arguments: [id])
                        // Its figures as they are now (the first episode may have been found
                        // while the sale waited, with no entry to take an amount from).
                        try db.cachedStatement(sql: """
                            UPDATE exception SET first_seen = ?, first_run_id = ?, last_seen = ?, last_run_id = ?, resolved_on = NULL,
                                resolved_run_id = NULL, detail = ?, account_id = ?, product_id = ?, gross_minor = ?, currency = ?,
                                net_reporting_minor = ? WHERE id = ?
                            """).execute(arguments: [day, runId, day, runId, e.detail, e.accountId, e.productId, e.grossMinor, e.currency,
                                                     e.netReportingMinor, id])
                    }
                } else {
                    addException.bind(e.category.rawValue)
                    addException.bind(e.transactionId)
                    addException.bind(e.orderId)
                    addException.bind(day)
                    addException.bind(runId)
                    bindFigures(e, &addException)
                    try addException.run()
                }
            }
            if let id = group.transactionId {
                for orderId in result.matchedOrderIds {
                    addMatch.bind(id)
                    addMatch.bind(orderId)
                    try addMatch.run()
                    matched += db.changesCount
                }
            }
            groups += 1
            if groups % 1024 == 0 { progress(1024) }
            CrashPoint.tick("reconcile:groups", every: 16)
        }

        try forEachReconGroup(transactionsSQL: transactionsSQL, ordersSQL: ordersSQL, loneOrdersSQL: loneOrdersSQL,
                              defaultStorefront: defaultStorefront) { group in
            try apply(group)
            if let t = group.transaction, t.bookedAtDefaultStorefront, group.orders.contains(where: \.namesOtherStorefront) {
                try storefrontNamedAfterPosting(t, booked: defaultStorefront, runId: runId)
            }
        }
        progress(groups % 1024)

        for (_, value) in existing where value.open && !seen.contains(value.id) {
            try db.cachedStatement(sql: "UPDATE exception SET resolved_on = ?, resolved_run_id = ? WHERE id = ?").execute(arguments: [day, runId, value.id])
        }
        // Open exceptions of groups not reconciled again are still there: seen today too.
        try db.cachedStatement(sql: "UPDATE exception SET last_seen = ?, last_run_id = ? WHERE resolved_on IS NULL AND last_run_id <> ?")
            .execute(arguments: [day, runId, runId])
        try db.cachedStatement(sql: "UPDATE run SET orders_matched = ?, reconciliation = ?, reconciliation_rules = ? WHERE id = ?")
            .execute(arguments: [matched, full ? "full" : "incremental", fingerprint, runId])
        return ReconciliationSummary(mode: full ? "full" : "incremental", fullBecause: fullBecause, groups: groups, matched: matched)
    }

    /// A sale booked at `default_storefront` (no storefront of its own, no order naming one
    /// within `order_wait_days`) whose orders now name another storefront: accounting.md books
    /// a sale in its order's storefront, and a posted entry is never rewritten, so finance is
    /// told (STOREFRONT_AFTER_POSTING) to book the difference by hand. The order is the one
    /// posting takes: the earliest credited naming a storefront (latest version of each order).
    /// Called for the few groups whose columns flag the case, so the night reads no more for
    /// the others than it did.
    func storefrontNamedAfterPosting(_ t: ReconTransaction, booked: String, runId: Int64) throws {
        guard let text = try String.fetchOne(db.cachedStatement(sql: "SELECT \(Self.orderStorefrontSQL(of: "?"))"),
                                             arguments: [t.transactionId]),
              let (named, orderId) = Self.orderStorefront(text), !named.isEmpty, named != booked else { return }
        // Booked there for want of any other, not because an order named it (its applied rules
        // say which).
        guard try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT instr(rules_json, '"storefrontSource":"default_storefront"') > 0 FROM entry
            WHERE book = ? AND transaction_id = ? AND kind = 'sale'
            """), arguments: [t.book.rawValue, t.transactionId]) == true else { return }
        try openFinding(code: "STOREFRONT_AFTER_POSTING", transactionId: t.transactionId, recordId: nil, message: """
            booked at default_storefront \(booked): no storefront of its own and no order naming one when it was posted; \
            order \(orderId), read since, names \(named). The entry stays as posted (entries are never rewritten): \
            book the difference by hand if it matters
            """, runId: runId)
    }

    /// Which waiting sales to try. A sale waiting for a rule (`MISSING_RULE: ...`) is decided by
    /// its stored transaction, its order's storefront (the latest version of each order naming
    /// it), the config and rules files and iapledger's code, and by nothing else: not by the
    /// date. Unless `everyWaitingForRule`, only those of them that tonight's records touched
    /// (their transaction stored or changed, or an order naming them now or before read again)
    /// are tried, with every other waiting sale (new tonight, or waiting for an order, which
    /// the date decides); the caller asks for every one when the config, rules or version
    /// changed since the night before. More touched keys than `TouchedKeys` keeps: every one.
    public func salesToTry(everyWaitingForRule: Bool) throws -> SalesToTry {
        var filter = ""
        // Trying a waiting sale again (read, decided, its finding said again) costs far more
        // than listing a touched key for the filter: a night with few sales ever waiting for a
        // rule, against the keys it touched, tries them all (the same ledger either way).
        let waitedForRule = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM finding WHERE code = 'MISSING_RULE'")) ?? 0
        let touchedOnly = !everyWaitingForRule && !touched.overflowed && waitedForRule * 32 > touched.count
        if touchedOnly {
            try fillTouchedTables()
            filter = " AND (substr(t.pending_reason, 1, 13) <> 'MISSING_RULE:' OR t.transaction_id IN (SELECT transaction_id FROM temp.recon_touched))"
        }
        let count = try Int.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) FROM store_transaction t INDEXED BY store_transaction_pending_order WHERE sale_status = 'pending'\(filter)
            """)) ?? 0
        return SalesToTry(filter: filter, count: count)
    }

    /// The keys this run touched so far, as temporary tables: `temp.recon_touched_order` the
    /// orders, `temp.recon_touched` the transactions, with every transaction a touched order
    /// ever named (a new version may name another one, or none: the one it named before is
    /// concerned again, in its match and in the storefront its order gives its sale).
    func fillTouchedTables() throws {
        try db.execute(sql: """
            CREATE TEMP TABLE IF NOT EXISTS recon_touched (transaction_id TEXT PRIMARY KEY) WITHOUT ROWID;
            CREATE TEMP TABLE IF NOT EXISTS recon_touched_order (order_id TEXT PRIMARY KEY) WITHOUT ROWID;
            DELETE FROM temp.recon_touched;
            DELETE FROM temp.recon_touched_order;
            """)
        var addT = FastStatement(try db.cachedStatement(sql: "INSERT OR IGNORE INTO temp.recon_touched (transaction_id) VALUES (?)"), in: db)
        for id in touched.transactions.sorted(by: Self.binaryOrder) where !id.isEmpty {
            addT.bind(id)
            try addT.run()
        }
        var addO = FastStatement(try db.cachedStatement(sql: "INSERT OR IGNORE INTO temp.recon_touched_order (order_id) VALUES (?)"), in: db)
        for id in touched.orders.sorted(by: Self.binaryOrder) {
            addO.bind(id)
            try addO.run()
        }
        try db.execute(sql: """
            INSERT OR IGNORE INTO temp.recon_touched (transaction_id)
            SELECT v.transaction_id FROM temp.recon_touched_order k JOIN order_version v ON v.order_id = k.order_id
            WHERE v.transaction_id IS NOT NULL AND v.transaction_id <> '';
            """)
    }
}

extension LedgerReader {
    /// The as-of date of the latest run.
    public func lastAsOf() throws -> Day? { try latestRun()?.asOf }

    /// The as-of date of the ledger's first run (nil: none ran).
    public func firstNight() throws -> Day? {
        try String.fetchOne(db, sql: "SELECT as_of FROM run ORDER BY id LIMIT 1").flatMap(Day.init(iso:))
    }

    /// The date of the ledger's earliest entry, either book (nil: none).
    public func earliestEntryDate() throws -> Day? {
        try String.fetchOne(db, sql: "SELECT min(date) FROM entry").flatMap(Day.init(iso:))
    }

    /// The ledger's latest run.
    public func latestRun() throws -> (id: Int64, asOf: Day)? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, as_of FROM run ORDER BY id DESC LIMIT 1")) else { return nil }
        return (r[0], Day(iso: r[1] as String)!)
    }
}
