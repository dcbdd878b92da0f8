import GRDB
import LedgerCore

/// One transaction of a subscription's chain, as the tenure rule needs it.
public struct ChainTransaction: Equatable {
    public var observation: TransactionObservation
    /// A `REFUND_REVERSED` notification undid this transaction's refund.
    public var refundReversed: Bool
}

extension LedgerReader {
    /// Every stored transaction of `book` with this `original_transaction_id` (whatever its sale
    /// status: a period waiting for a rule was still paid for), oldest purchase first.
    public func subscriptionChain(book: Book, originalTransactionId: String) throws -> [ChainTransaction] {
        var query = FastStatement(try db.cachedStatement(sql: """
            SELECT \(LedgerReader.storedColumns), EXISTS (SELECT 1 FROM reversal_request q
                                WHERE q.book = t.book AND q.transaction_id = t.transaction_id) AS refund_reversed
            FROM store_transaction t
            WHERE t.book = ? AND t.original_transaction_id = ?
            ORDER BY t.purchase_ms, t.transaction_id
            """), in: db)
        query.bind(book.rawValue); query.bind(originalTransactionId)
        var chain: [ChainTransaction] = []
        // By position (through the C API): `refund_reversed` follows the table's 20 columns.
        try query.forEachRow { chain.append(ChainTransaction(observation: Self.stored($0).observation, refundReversed: $0.int64(20) != 0)) }
        return chain
    }
}
