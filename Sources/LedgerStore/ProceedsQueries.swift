import GRDB
import LedgerCore

/// What the ledger estimates Apple owes for one currency and product over some days: the
/// production book's sales, less its refunds, plus its refund reversals.
public struct ProceedsRow: Equatable {
    public var currency: String
    public var productId: String
    /// Units sold, less units refunded in full (a prorated refund returns no unit), plus those
    /// whose refund was reversed.
    public var units: Int64
    /// `units` apart: sold (sale entries), and returned (refunds in full, less those reversed).
    public var soldUnits: Int64 = 0
    public var returnedUnits: Int64 = 0
    public var grossMinor: Int64
    public var proceedsMinor: Int64
    public var proceedsReportingMinor: Int64
    public var entries: Int64
}

extension LedgerReader {
    /// The production book's entries with their transactions, of original dates from `?1`
    /// through `?2`. A late entry is dated after its original date, never before: the date
    /// index bounds the read from below.
    static let productionEntriesOfDays = """
        FROM entry e JOIN store_transaction t ON t.transaction_id = e.transaction_id
        WHERE e.book = 'production' AND e.date >= ?1 AND e.original_date >= ?1 AND e.original_date <= ?2
        """

    /// The production book's proceeds by currency and product for entries whose original date
    /// (the day the sale, refund or reversal happened, before a closed month moved a late one
    /// forward) is from `start` through `end`: what Apple's financial report of those days
    /// counts. Sandbox entries are never in it.
    public func proceeds(from start: Day, through end: Day) throws -> [ProceedsRow] {
        let sign = "CASE e.kind WHEN 'refund' THEN -1 ELSE 1 END"
        let full = "ifnull(e.refund_percentage, 100000) = 100000"
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT e.currency, e.product_id,
                   sum(CASE WHEN e.kind = 'sale' OR \(full) THEN \(sign) * t.quantity ELSE 0 END),
                   sum(\(sign) * e.gross_minor), sum(\(sign) * e.proceeds_minor), sum(\(sign) * e.proceeds_reporting_minor),
                   count(*),
                   sum(CASE WHEN e.kind = 'sale' THEN t.quantity ELSE 0 END),
                   sum(CASE WHEN e.kind <> 'sale' AND \(full) THEN -\(sign) * t.quantity ELSE 0 END)
            \(Self.productionEntriesOfDays)
            GROUP BY e.currency, e.product_id ORDER BY e.currency, e.product_id
            """), arguments: [start.description, end.description]).map {
            ProceedsRow(currency: $0[0], productId: $0[1], units: $0[2], soldUnits: $0[7], returnedUnits: $0[8], grossMinor: $0[3],
                        proceedsMinor: $0[4], proceedsReportingMinor: $0[5], entries: $0[6])
        }
    }
}

/// One production entry as Apple's financial report would count it (the demo writes reports
/// from these).
public struct ProceedsEntry: Equatable {
    public var storefront: String
    public var productId: String
    public var currency: String
    public var isRefund: Bool
    public var quantity: Int64
    public var grossMinor: Int64
    public var proceedsMinor: Int64
}

extension LedgerReader {
    /// The production book's sales and refunds in full whose original date is from `start`
    /// through `end`, in id order.
    public func proceedsEntries(from start: Day, through end: Day) throws -> [ProceedsEntry] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT e.storefront, e.product_id, e.currency, e.kind = 'refund', t.quantity, e.gross_minor, e.proceeds_minor
            \(Self.productionEntriesOfDays)
              AND (e.kind = 'sale' OR (e.kind = 'refund' AND ifnull(e.refund_percentage, 100000) = 100000))
            ORDER BY e.id
            """), arguments: [start.description, end.description]).map {
            ProceedsEntry(storefront: $0[0], productId: $0[1], currency: $0[2], isRefund: $0[3], quantity: $0[4],
                          grossMinor: $0[5], proceedsMinor: $0[6])
        }
    }
}
