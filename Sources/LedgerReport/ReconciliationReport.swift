import LedgerCore
import LedgerReconcile
import LedgerStore

/// The reconciliation workbook: the store against the backend's credits, as of a date.
public struct ReconciliationReport {
    public let reader: LedgerReader
    public let asOf: Day
    public let reportingCurrency: String
    public let runId: Int64?

    public init(reader: LedgerReader, asOf: Day, reportingCurrency: String, runId: Int64?) {
        self.reader = reader
        self.asOf = asOf
        self.reportingCurrency = reportingCurrency
        self.runId = runId
    }

    var rd: Int { Currency.exponent(reportingCurrency) ?? 2 }

    public func workbook() throws -> WorkbookModel {
        WorkbookModel(title: "iapledger reconciliation \(asOf)",
                      subject: "Store transactions against the backend's credits, as of \(asOf)",
                      created: asOf,
                      sheets: [try summarySheet(), try exceptionsSheet(), try resolvedSheet(), try pendingSheet()])
    }

    public func summarySheet() throws -> SheetModel {
        let open = try reader.exceptions(status: "open")
        var rows: [SheetRow] = []
        var totalCount: Int64 = 0, totalAmount: Int64 = 0
        for c in ExceptionCategory.allCases {
            let list = open.filter { $0.category == c.rawValue }
            let amount = list.compactMap(\.netReportingMinor).reduce(0, +)
            let new = list.filter { $0.firstSeen == asOf }.count
            rows.append(SheetRow([.text(c.rawValue), .text(c.meaning), .integer(Int64(list.count)), .integer(Int64(new)),
                                  .money(minor: amount, decimals: rd)]))
            totalCount += Int64(list.count)
            totalAmount += amount
        }
        rows.append(SheetRow([.text("Total open exceptions"), .empty, .integer(totalCount),
                              .integer(Int64(open.filter { $0.firstSeen == asOf }.count)), .money(minor: totalAmount, decimals: rd)],
                             style: .total))
        let matched = try runId.map { try reader.matchedCount(runId: $0) } ?? 0
        let resolved = try resolvedSinceLastNight().count
        return SheetModel(
            name: "Summary", title: "Reconciliation summary",
            subtitle: ["As of \(asOf). Open exceptions per category (the Meaning column says what each is), with the net sale amount in \(reportingCurrency) where a store transaction is involved.",
                       "Matched order/transaction pairs: \(matched). Resolved since the previous night: \(resolved)."],
            tables: [
                TableBlock(columns: [
                    Column("Category", width: 32), Column("Meaning", width: 70), Column("Open", width: 8, kind: .integer),
                    Column("New today", width: 10, kind: .integer), Column("Amount (\(reportingCurrency), net)", width: 18, kind: .money),
                ], rows: rows),
                TableBlock(heading: "Matching", columns: [Column("Measure", width: 32), Column("Value", width: 70)], rows: [
                    SheetRow([.text("Matched order/transaction pairs"), .integer(Int64(matched))]),
                    SheetRow([.text("Resolved since the previous night"), .integer(Int64(resolved))]),
                ]),
            ])
    }

    static let exceptionColumns = [
        Column("Category", width: 32), Column("Transaction", width: 20), Column("Order", width: 16), Column("Account", width: 16),
        Column("Product", width: 32), Column("Amount", width: 12, kind: .money), Column("Currency", width: 9),
        Column("First seen", width: 12, kind: .date),
    ]

    func cells(_ e: ExceptionRow) -> [Cell] {
        [.text(e.category), .text(e.transactionId), .text(e.orderId ?? ""), .text(e.accountId ?? ""), .text(e.productId ?? ""),
         e.grossMinor.map { .money(minor: $0, decimals: Currency.exponent(e.currency ?? "") ?? 2) } ?? .empty,
         .text(e.currency ?? ""), .date(e.firstSeen)]
    }

    public func exceptionsSheet() throws -> SheetModel {
        let rows = try reader.exceptions(status: "open").map {
            SheetRow(cells($0) + [.integer(Int64($0.ageDays(asOf: asOf))), .text($0.detail)])
        }
        return SheetModel(
            name: "Exceptions", title: "Open exceptions",
            subtitle: ["Every difference between the store and the backend still open on \(asOf), oldest first within each category. Age in days = as-of date minus first seen."],
            tables: [TableBlock(columns: Self.exceptionColumns + [Column("Age (days)", width: 10, kind: .integer), Column("Detail", width: 90)], rows: rows)])
    }

    /// Exceptions resolved after the previous night's as-of date, up to this one.
    func resolvedSinceLastNight() throws -> [ExceptionRow] {
        let previous = try reader.previousAsOf(before: asOf)
        return try reader.exceptions(status: "resolved").filter { e in
            guard let r = e.resolvedOn else { return false }
            return r <= asOf && (previous.map { r > $0 } ?? true)
        }
    }

    public func resolvedSheet() throws -> SheetModel {
        let rows = try resolvedSinceLastNight().map {
            SheetRow(cells($0) + [.date($0.resolvedOn!), .integer(Int64($0.ageDays(asOf: asOf))), .text($0.detail)])
        }
        return SheetModel(
            name: "Resolved", title: "Resolved since the previous night",
            subtitle: ["Exceptions a run no longer detects (the order arrived, the credit was reversed, ...), resolved after the previous night and on or before \(asOf)."],
            tables: [TableBlock(columns: Self.exceptionColumns + [Column("Resolved", width: 12, kind: .date),
                                                               Column("Days open", width: 10, kind: .integer), Column("Detail", width: 90)],
                                rows: rows)])
    }

    public func pendingSheet() throws -> SheetModel {
        var rows: [SheetRow] = []
        for p in try reader.recordProblems() where p.outcome == "pending" && !p.resolved {
            rows.append(SheetRow([.text("record waits for verification"), .text("\(p.path):\(p.line)"), .text(p.code), .text(p.reason),
                                  .date(p.firstSeen), .integer(Int64(asOf - p.firstSeen))]))
        }
        for t in try reader.pendingTransactions() {
            rows.append(SheetRow([.text("\(t.book) transaction waits for a rule"), .text(t.transactionId), .text(t.productId),
                                  .text(t.reason), .date(t.firstSeen), .integer(Int64(asOf - t.firstSeen))]))
        }
        return SheetModel(
            name: "Pending", title: "Pending: waiting for verification or a rule",
            subtitle: ["Records kept until a verified record for their transaction arrives, and verified transactions waiting for a missing rule (posted by the first run that has it)."],
            tables: [TableBlock(columns: [
                Column("What waits", width: 34), Column("Record / transaction", width: 44), Column("Code / product", width: 34),
                Column("Reason", width: 90), Column("First seen", width: 12, kind: .date), Column("Age (days)", width: 10, kind: .integer),
            ], rows: rows)])
    }
}
