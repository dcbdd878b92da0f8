import Foundation

/// What `iapledger demo` (and the benchmark) asks the generator for.
public struct DemoOptions: Sendable, Equatable {
    /// Same seed and options give byte-identical files.
    public var seed: UInt64 = 42
    /// Store transactions (purchases and renewals, production and sandbox) that arrive verified.
    public var transactions: Int = 3000
    /// `YYYY-MM-DD`: the data covers the three full calendar months before this day's month
    /// plus this day's month up to the day before it.
    public var asOf: String
    public var bundleId: String = "com.example.coins"

    public init(seed: UInt64 = 42, transactions: Int = 3000, asOf: String) {
        self.seed = seed
        self.transactions = transactions
        self.asOf = asOf
    }
}

/// What the generator wrote: counts for the command's output and for tests.
public struct DemoSummary: Sendable, Equatable {
    /// Paths written, relative to the workspace directory, in writing order.
    public var files: [String] = []
    /// Verified store transactions of the app (production + sandbox); equals the option.
    public var transactions = 0
    public var productionTransactions = 0
    public var sandboxTransactions = 0
    /// Auto-renewable renewals (including returns after a lapse); part of `transactions`.
    public var renewals = 0
    /// Free-trial subscription periods (`is_trial_period` "true"); part of `transactions`.
    public var trialTransactions = 0
    /// Transactions that arrive refunded (a later receipt with `cancellation_date`).
    public var refunds = 0
    /// Distinct backend orders, and order rows written (updates repeat an order_id).
    public var orders = 0
    public var orderRows = 0
    /// Orders updated with `reversed_at` after their transaction was refunded.
    public var reversedOrders = 0
    /// verifyReceipt records written (lines of .jsonl files, elements of .json files).
    public var receiptRecords = 0
    /// iOS 6 style single-transaction responses among `receiptRecords`.
    public var legacyReceiptRecords = 0
    /// Records that list an earlier transaction again (unfinished transactions re-sent).
    public var repeatedRecords = 0
    /// Transaction ids seen only in failed, rejected or other-app records (not in `transactions`).
    public var unverifiedTransactions = 0
    public var accounts = 0
    /// First and last day holding data (`YYYY-MM-DD`).
    public var firstDay = ""
    public var lastDay = ""
    /// Seeded anomalies and reconciliation cases by name (see `DemoAnomaly` for the keys):
    /// each reconciliation category of reconciliation.md, receipt statuses, the malformed
    /// line, transactions waiting for the missing price / FX rule, subscription lapses.
    public var anomalies: [String: Int] = [:]
    /// Plain-language notes on the seeded gaps, for the command to print.
    public var notes: [String] = []
}

/// The names used as keys of `DemoSummary.anomalies`.
public enum DemoAnomaly {
    public static let duplicateCredit = "DUPLICATE_CREDIT"
    public static let sandboxCreditedInProduction = "SANDBOX_CREDITED_IN_PRODUCTION"
    public static let refundedStillCredited = "REFUNDED_STILL_CREDITED"
    public static let notCredited = "NOT_CREDITED"
    public static let creditedWithoutTransaction = "CREDITED_WITHOUT_TRANSACTION"
    public static let creditedUnverified = "CREDITED_UNVERIFIED"
    public static let accountMismatch = "ACCOUNT_MISMATCH"
    public static let productMismatch = "PRODUCT_MISMATCH"
    public static let quantityMismatch = "QUANTITY_MISMATCH"
    public static let unitsMismatch = "UNITS_MISMATCH"
    /// The ten reconciliation categories, in reconciliation.md's order.
    public static let reconciliationCategories = [
        duplicateCredit, sandboxCreditedInProduction, refundedStillCredited, notCredited,
        creditedWithoutTransaction, creditedUnverified, accountMismatch, productMismatch,
        quantityMismatch, unitsMismatch,
    ]

    public static let retryableThenVerified = "RETRYABLE_THEN_VERIFIED"
    public static let retryableNeverVerified = "RETRYABLE_NEVER_VERIFIED"
    public static let status21007ThenSandbox = "STATUS_21007_THEN_SANDBOX"
    public static let status21007Pending = "STATUS_21007_PENDING"
    public static let status21008ThenProduction = "STATUS_21008_THEN_PRODUCTION"
    public static let rejected21003 = "REJECTED_21003"
    public static let rejected21010 = "REJECTED_21010"
    public static let otherAppReceipt = "OTHER_APP_RECEIPT"
    public static let malformedLine = "MALFORMED_LINE"
    public static let missingPrice = "MISSING_PRICE"
    public static let missingFx = "MISSING_FX"
    public static let subscriptionLapse = "SUBSCRIPTION_LAPSE"
}

public enum DemoError: Error, CustomStringConvertible {
    case invalidAsOf(String)
    case invalidTransactionCount(Int)
    case cannotWrite(String)

    public var description: String {
        switch self {
        case .invalidAsOf(let text): return "demo: as-of date '\(text)' is not a valid YYYY-MM-DD date"
        case .invalidTransactionCount(let count): return "demo: transaction count \(count) must be between 1 and 100000000"
        case .cannotWrite(let path): return "demo: cannot create \(path)"
        }
    }
}

/// The seeded generator of demo workspaces.
public enum DemoGenerator {
    /// Writes iapledger.toml, rules/*.csv, inbox/receipts/* and inbox/orders/* under
    /// `directory` (created if missing; existing files of the same names are overwritten).
    ///
    /// Output streams day by day: memory grows with the number of live subscriptions and
    /// scheduled refunds, not with the size of the files.
    public static func generate(into directory: URL, options: DemoOptions) throws -> DemoSummary {
        guard let asOfDay = DemoCalendar.parseDay(options.asOf) else { throw DemoError.invalidAsOf(options.asOf) }
        guard options.transactions >= 1, options.transactions <= 100_000_000 else {
            throw DemoError.invalidTransactionCount(options.transactions)
        }
        let engine = DemoEngine(options: options, window: DemoWindow(asOfDay: asOfDay), directory: directory)
        return try engine.run()
    }
}
