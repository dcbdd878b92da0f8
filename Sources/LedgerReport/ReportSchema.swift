/// What the report code can put in each workbook: its sheets, their tables and the columns
/// of each, by key, with the kind of their cells. A layout file (`layouts/<workbook>.toml`)
/// picks from these and gives them names, titles, order, widths and number formats; the
/// report code fills every table's cells in the order declared here.
public enum ReportWorkbook: String, CaseIterable {
    case finance, sandbox, reconciliation

    /// The layout file's name (`finance.toml`).
    public var layoutFileName: String { rawValue + ".toml" }

    /// The `{placeholders}` every text of this workbook's layout may use.
    public var placeholders: [String] {
        self == .reconciliation ? ["as_of", "reporting_currency"] : ["as_of", "book", "reporting_currency"]
    }

    /// The sheets the report code can fill, in the tool's own order.
    public var sheets: [SheetSchema] {
        switch self {
        case .finance: return ReportSchema.bookSheets(sandbox: false)
        case .sandbox: return ReportSchema.bookSheets(sandbox: true)
        case .reconciliation: return ReportSchema.reconciliationSheets
        }
    }

    public func sheet(_ key: String) -> SheetSchema? { sheets.first { $0.key == key } }
}

public struct SheetSchema {
    public var key: String
    public var tables: [TableSchema]
    /// `{placeholders}` this sheet's texts may use beyond the workbook's.
    public var placeholders: [String]
    public init(_ key: String, _ tables: [TableSchema], placeholders: [String] = []) {
        self.key = key
        self.tables = tables
        self.placeholders = placeholders
    }
    public func table(_ key: String) -> TableSchema? { tables.first { $0.key == key } }
}

public struct TableSchema {
    public var key: String
    public var columns: [Column]
    public init(_ key: String, _ columns: [Column]) {
        self.key = key
        self.columns = columns
    }
    public func column(_ key: String) -> Column? { columns.first { $0.key == key } }
}

/// The column keys of every table. The report code emits each row's cells in this order.
public enum ReportSchema {
    static func c(_ key: String, _ kind: Column.Kind = .text) -> Column { Column(key: key, kind) }

    // Finance and sandbox workbooks.
    static let summaryByMonth = [
        c("month"), c("units", .integer), c("gross_reporting", .money), c("tax_reporting", .money), c("net_reporting", .money),
        c("commission_reporting", .money), c("proceeds_reporting", .money), c("refunds_reporting", .money),
        c("commission_returned_reporting", .money), c("net_after_refunds_reporting", .money), c("proceeds_after_refunds_reporting", .money),
    ]
    static let summaryByRegion = [
        c("storefront"), c("units", .integer), c("net_after_refunds_reporting", .money), c("proceeds_after_refunds_reporting", .money),
    ]
    static let trialBalance = [
        c("book"), c("account"), c("currency"), c("debit", .money), c("credit", .money), c("balance", .money),
        c("balance_reporting", .money),
    ]
    static let trialBalanceByAccount = [c("book"), c("account"), c("currency"), c("balance_reporting", .money)]
    static let journal = [
        c("entry", .integer), c("date", .date), c("original_date", .date), c("late"), c("kind"), c("transaction"), c("product"),
        c("storefront"), c("account"), c("currency"), c("amount", .money), c("amount_reporting", .money),
    ]
    static let revenueByRegion = [
        c("storefront"), c("month"), c("currency"), c("units", .integer),
        // Commission returned: what the store gave back with the refunds (reversals deducted):
        // proceeds after refunds are proceeds, less refunds, plus it (the Summary's, and the
        // Trial Balance's receivable).
        c("gross", .money), c("tax", .money), c("net", .money), c("commission", .money), c("proceeds", .money), c("refunds", .money),
        c("commission_returned", .money),
        c("gross_reporting", .money), c("tax_reporting", .money), c("net_reporting", .money), c("commission_reporting", .money),
        c("proceeds_reporting", .money), c("refunds_reporting", .money), c("commission_returned_reporting", .money),
    ]
    static let revenueByProduct = [
        c("product"), c("sales", .integer), c("units", .integer), c("gross_reporting", .money), c("tax_reporting", .money),
        c("net_reporting", .money), c("commission_reporting", .money), c("proceeds_reporting", .money),
        c("refund_count", .integer), c("refunds_reporting", .money), c("net_after_refunds_reporting", .money),
        c("commission_returned_reporting", .money), c("proceeds_after_refunds_reporting", .money),
    ]
    static let refunds = [
        c("entry", .integer), c("posted", .date), c("transaction"), c("currency"), c("original_date", .date), c("late"), c("kind"), c("product"),
        c("storefront"), c("refunded_percent", .money), c("net", .money), c("commission", .money),
        c("proceeds", .money), c("net_reporting", .money), c("commission_reporting", .money), c("proceeds_reporting", .money),
    ]
    static let creditedInProduction = [
        c("transaction"), c("order"), c("account"), c("product"), c("amount", .money), c("currency"), c("first_seen", .date),
        c("status"), c("detail"),
    ]
    static let runInfo = [c("item"), c("value")]
    static let runInfoFiles = [
        c("file"), c("kind"), c("sha256"), c("size_bytes", .integer), c("records", .integer), c("new_records", .integer),
    ]
    static let runInfoNotPosted = [
        c("file"), c("line", .integer), c("outcome"), c("code"), c("reason"), c("first_seen", .date), c("age_days", .integer),
    ]
    static let runInfoFindings = [
        c("code"), c("transaction"), c("detail"), c("first_seen", .date), c("age_days", .integer),
    ]

    static func bookSheets(sandbox: Bool) -> [SheetSchema] {
        [
            SheetSchema("summary", [TableSchema("by_month", summaryByMonth), TableSchema("by_region", summaryByRegion)],
                        placeholders: ["sales_waiting", "records_waiting", "commission_returned", "commission_after_refunds", "late_entries", "free_transactions", "rules_changed", "signed_other_roots"]),
            SheetSchema("trial_balance", [TableSchema("balances", trialBalance), TableSchema("by_account", trialBalanceByAccount)]),
            SheetSchema("journal", [TableSchema("postings", journal)]),
            SheetSchema("revenue_by_region", [TableSchema("by_region", revenueByRegion)]),
            SheetSchema("revenue_by_product", [TableSchema("by_product", revenueByProduct)]),
            SheetSchema("refunds", [TableSchema("refunds", refunds)]),
        ] + (sandbox ? [SheetSchema("credited_in_production", [TableSchema("credits", creditedInProduction)])] : []) + [
            SheetSchema("run_info", [TableSchema("info", runInfo), TableSchema("files", runInfoFiles),
                                     TableSchema("not_posted", runInfoNotPosted), TableSchema("findings", runInfoFindings)]),
        ]
    }

    // Reconciliation workbook.
    static let reconciliationByCategory = [
        c("category"), c("meaning"), c("open", .integer), c("new_today", .integer), c("amount_reporting", .money),
    ]
    static let reconciliationMatching = [c("measure"), c("value")]
    static let exceptionBase = [
        c("category"), c("transaction"), c("order"), c("account"), c("product"), c("amount", .money), c("currency"),
        c("amount_reporting", .money), c("purchased", .date), c("first_seen", .date),
    ]
    static let exceptions = exceptionBase + [c("age_days", .integer), c("detail")]
    static let resolved = exceptionBase + [c("resolved", .date), c("days_open", .integer), c("detail")]
    static let pending = [
        c("record_or_transaction"), c("what_waits"), c("code_or_product"), c("purchased", .date), c("reason"), c("first_seen", .date),
        c("age_days", .integer),
    ]

    static let rejected = [
        c("record"), c("code"), c("reason"), c("first_seen", .date), c("age_days", .integer),
    ]

    static let reconciliationSheets = [
        SheetSchema("summary", [TableSchema("by_category", reconciliationByCategory), TableSchema("matching", reconciliationMatching)],
                    placeholders: ["matched", "resolved", "without_amount"]),
        SheetSchema("exceptions", [TableSchema("exceptions", exceptions)]),
        SheetSchema("resolved", [TableSchema("resolved", resolved)]),
        SheetSchema("pending", [TableSchema("pending", pending)]),
        SheetSchema("rejected", [TableSchema("rejected", rejected)]),
    ]
}
