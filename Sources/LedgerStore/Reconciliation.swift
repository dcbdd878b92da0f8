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

    /// Days open as of `asOf` (or until it was resolved).
    public func ageDays(asOf: Day) -> Int { (resolvedOn ?? asOf) - firstSeen }
}

extension Statement {
    /// Each result row mapped as it is stepped: only the mapped values are kept, never an
    /// array of every `Row` (a million rows of a million transactions).
    func mapWithoutRows<T>(_ transform: (Row) throws -> T) throws -> [T] {
        var out: [T] = []
        let cursor = try Row.fetchCursor(self)
        while let row = try cursor.next() { out.append(try transform(row)) }
        return out
    }
}

extension LedgerReader {
    /// What reconciliation needs: transactions with their refund state and sale amounts,
    /// the latest version of every order, and the ids named only by unverified records.
    public func reconciliationInputs() throws -> (transactions: [ReconTransaction], orders: [ReconOrder], unverifiedIds: Set<String>) {
        let transactions = try (db.cachedStatement(sql: """
            SELECT t.transaction_id, t.book, t.product_id, t.quantity, t.app_account_token, t.cancellation_ms,
                   t.revocation_percentage,
                   EXISTS (SELECT 1 FROM reversal_request q WHERE q.book = t.book AND q.transaction_id = t.transaction_id),
                   e.gross_minor, e.currency, e.net_reporting_minor
            FROM store_transaction t
            LEFT JOIN entry e ON e.book = t.book AND e.transaction_id = t.transaction_id AND e.kind = 'sale'
            ORDER BY t.transaction_id
            """)).mapWithoutRows { r -> ReconTransaction in
            let cancelled = (r[5] as Int64?) != nil
            let percentage: Int64? = r[6]
            let reversed: Bool = r[7]
            let refunded = cancelled && !reversed
            return ReconTransaction(transactionId: r[0], book: Book(rawValue: r[1])!, productId: r[2], quantity: r[3],
                                    appAccountToken: r[4], refundedInFull: refunded && (percentage == nil || percentage == 100_000),
                                    refunded: refunded, grossMinor: r[8], currency: r[9], netReportingMinor: r[10])
        }
        let orders = try (db.cachedStatement(sql: """
            SELECT v.order_id, v.account_id, v.transaction_id, v.product_id, v.quantity, v.credited_units, v.credited_ms,
                   v.environment, v.app_account_token, v.reversed_at
            FROM order_version v JOIN (SELECT order_id, max(id) AS id FROM order_version GROUP BY order_id) m ON m.id = v.id
            ORDER BY v.order_id
            """)).mapWithoutRows { r in
            ReconOrder(orderId: r[0], accountId: r[1], transactionId: r[2], productId: r[3], quantity: r[4],
                       creditedUnits: r[5], creditedMs: r[6], environment: r[7], appAccountToken: r[8],
                       active: (r[9] as String?) == nil)
        }
        let unverified = Set(try String.fetchAll(db.cachedStatement(sql: "SELECT DISTINCT transaction_id FROM unverified_record_transaction")))
        return (transactions, orders, unverified)
    }

    /// Stored exceptions; `status` is "open", "resolved" or "all".
    public func exceptions(status: String = "all", category: String? = nil) throws -> [ExceptionRow] {
        var conditions: [String] = []
        var args: [(any DatabaseValueConvertible)?] = []
        if status == "open" { conditions.append("resolved_on IS NULL") }
        if status == "resolved" { conditions.append("resolved_on IS NOT NULL") }
        if let category { conditions.append("category = ?"); args.append(category) }
        let whereSQL = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let order = ExceptionCategory.allCases.enumerated().map { "WHEN '\($1.rawValue)' THEN \($0)" }.joined(separator: " ")
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT category, transaction_id, order_id, account_id, product_id, gross_minor, currency, net_reporting_minor,
                   detail, first_seen, last_seen, resolved_on
            FROM exception \(whereSQL)
            ORDER BY CASE category \(order) END, first_seen, transaction_id, order_id
            """), arguments: StatementArguments(args)).map(Self.exceptionRow)
    }

    /// Exceptions about one transaction or one order (for the trace).
    public func exceptions(transactionId: String?, orderId: String?) throws -> [ExceptionRow] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT category, transaction_id, order_id, account_id, product_id, gross_minor, currency, net_reporting_minor,
                   detail, first_seen, last_seen, resolved_on
            FROM exception WHERE transaction_id = ? OR order_id = ? ORDER BY id
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

    /// Transactions whose sale waits for a rule, with the day they were first read.
    public func pendingTransactions() throws -> [(transactionId: String, book: String, productId: String, reason: String, firstSeen: Day)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT t.transaction_id, t.book, t.product_id, t.pending_reason, r.as_of FROM store_transaction t JOIN run r ON r.id = t.first_run_id
            WHERE t.sale_status = 'pending' ORDER BY r.as_of, t.transaction_id
            """)).map { ($0[0], $0[1], $0[2], $0[3] ?? "", Day(iso: $0[4] as String)!) }
    }
}

extension LedgerWriter {
    /// Applies one reconciliation to the stored exceptions: new ones open (first seen today),
    /// open ones stay open (last seen today), open ones no longer detected are resolved today.
    /// Running a night again changes nothing but the last-seen run.
    public func applyReconciliation(_ result: ReconciliationResult, runId: Int64, asOf: Day) throws {
        var existing: [String: (id: Int64, open: Bool)] = [:]
        for r in try Row.fetchAll(db.cachedStatement(sql: "SELECT id, category, transaction_id, order_id, resolved_on IS NULL FROM exception")) {
            existing["\(r[1] as String)|\(r[2] as String)|\(r[3] as String)"] = (r[0], r[4])
        }
        var seen = Set<Int64>()
        let day = asOf.description
        for e in result.exceptions {
            let key = "\(e.category.rawValue)|\(e.transactionId)|\(e.orderId)"
            if let (id, open) = existing[key] {
                seen.insert(id)
                if open {
                    try db.cachedStatement(sql: """
                        UPDATE exception SET last_seen = ?, last_run_id = ?, detail = ?, account_id = ?, product_id = ?,
                            gross_minor = ?, currency = ?, net_reporting_minor = ? WHERE id = ?
                        """).execute( arguments: [day, runId, e.detail, e.accountId, e.productId, e.grossMinor, e.currency, e.netReportingMinor, id])
                } else {
                    // Detected again after it was resolved: a new episode.
                    try db.cachedStatement(sql: """
                        UPDATE exception SET first_seen = ?, first_run_id = ?, last_seen = ?, last_run_id = ?, resolved_on = NULL,
                            resolved_run_id = NULL, detail = ? WHERE id = ?
                        """).execute( arguments: [day, runId, day, runId, e.detail, id])
                }
            } else {
                try db.cachedStatement(sql: """
                    INSERT INTO exception (category, transaction_id, order_id, account_id, product_id, gross_minor, currency,
                        net_reporting_minor, detail, first_seen, first_run_id, last_seen, last_run_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """).execute( arguments: [e.category.rawValue, e.transactionId, e.orderId, e.accountId, e.productId, e.grossMinor,
                                     e.currency, e.netReportingMinor, e.detail, day, runId, day, runId])
            }
        }
        for (_, value) in existing where value.open && !seen.contains(value.id) {
            try db.cachedStatement(sql: "UPDATE exception SET resolved_on = ?, resolved_run_id = ? WHERE id = ?").execute( arguments: [day, runId, value.id])
        }
        try db.cachedStatement(sql: "UPDATE run SET orders_matched = ? WHERE id = ?").execute( arguments: [result.matched, runId])
    }
}

extension LedgerReader {
    /// The as-of date of the latest run.
    public func lastAsOf() throws -> Day? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT as_of FROM run ORDER BY id DESC LIMIT 1")).flatMap { Day(iso: $0) }
    }
}
