import GRDB
import LedgerCore

/// One recorded close: every month up to and including `month` is closed from then on.
public struct PeriodClose: Equatable {
    /// Who or what closed it: the `close` command, or `[periods] closed_through` in the config.
    public enum Source: String, Sendable {
        case closeCommand = "close command"
        case config
    }
    public var month: Month
    public var closedAt: String
    public var closedBy: String
    public var source: Source
    public init(month: Month, closedAt: String, closedBy: String, source: Source) {
        self.month = month
        self.closedAt = closedAt
        self.closedBy = closedBy
        self.source = source
    }
}

extension LedgerReader {
    /// Every close recorded in the ledger, oldest first.
    public func periodCloses() throws -> [PeriodClose] {
        try Row.fetchAll(db.cachedStatement(sql: "SELECT month, closed_at, closed_by, source FROM period_close ORDER BY month")).map {
            PeriodClose(month: Month(iso: $0[0] as String)!, closedAt: $0[1], closedBy: $0[2],
                        source: PeriodClose.Source(rawValue: $0[3])!)
        }
    }

    /// The latest close recorded in the ledger: months up to and including its month are closed.
    public func latestClose() throws -> PeriodClose? {
        try periodCloses().last
    }
}

extension LedgerWriter {
    /// Records that months through `close.month` are closed. The database refuses a month
    /// earlier than or equal to one already closed (periods close forward only).
    /// The close is sealed as it is recorded (LedgerSeal); returns its seal.
    @discardableResult
    public func recordClose(_ close: PeriodClose) throws -> String {
        try db.cachedStatement(sql: "INSERT INTO period_close (month, closed_at, closed_by, source) VALUES (?, ?, ?, ?)").execute(
                       arguments: [close.month.description, close.closedAt, close.closedBy, close.source.rawValue])
        return try sealClose(month: close.month.description)
    }
}
