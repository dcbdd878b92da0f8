import Foundation
import GRDB
import LedgerCore

/// A list of the last night's workbooks where an open item is a row: a record not posted or a
/// sale waiting (the reconciliation workbook's Pending and Rejected sheets), an open exception
/// (its Exceptions sheet), an open finding (the finance or sandbox workbook's Run Info). These
/// lists are sorted by code and date and cut at a number per code or category, so the row is
/// said by what it holds (`find`), not by number.
public struct Listing: Encodable, Equatable {
    public var workbook: String
    public var sheet: String
    public var find: String
    /// Whether the workbook is under `reports/` now (nil: not looked at).
    public var written: Bool? = nil
    /// The workbook there is not the file iapledger last wrote at that path (another copied
    /// over it, or edited): why its rows need not be as said (nil: it is, or not looked at).
    public var stale: String? = nil
    public init(workbook: String, sheet: String, find: String) {
        self.workbook = workbook
        self.sheet = sheet
        self.find = find
    }
}

/// Everything the ledger knows about one transaction or one order, for auditors.
public struct TransactionTrace: Encodable {
    public struct Source: Encodable {
        public var path: String
        public var line: Int
        public var sha256: String
        public var record_sha256: String
        public var outcome: String
        /// The reason code of a record not verified (`WRONG_BUNDLE_ID`, `STATUS_21003`, ...).
        public var code: String? = nil
        public var verification: String?
        public var environment: String?
        public var read_on: String
        /// For a record not verified (pending, rejected) that a later one settled: the day of
        /// the night that did, and how (`verified by inbox/receipts/...:15`).
        public var resolved_on: String? = nil
        public var resolution: String? = nil
        /// The record's text as it was read (kept in the ledger), when asked for.
        public var text: String?
        /// False when the text the ledger keeps no longer hashes to `record_sha256` (changed
        /// after it was read, or its chunk damaged: `verify` says more).
        public var text_holds: Bool = true
        enum CodingKeys: String, CodingKey {
            case path, line, sha256, record_sha256, outcome, code, verification, environment, read_on, resolved_on, resolution, text, text_holds
        }
    }
    public struct Posting: Encodable {
        public var account: String
        public var currency: String
        public var amount_minor: Int64
        public var reporting_amount_minor: Int64
    }
    public struct Entry: Encodable {
        public var entry_id: Int64
        /// The run that posted it, and its hash (the chain `verify` checks).
        public var run_id: Int64
        /// The run's as-of date (the night it was).
        public var run_as_of: String? = nil
        public var hash: String
        /// False when its hash no longer follows from its content and the entry before it (it
        /// was changed after it was written: `verify` says more).
        public var hash_holds: Bool
        public var kind: String
        public var date: String
        public var original_date: String
        public var late: Bool
        public var refund_percentage: Int64?
        public var reporting_currency: String
        public var postings: [Posting]
        /// The entry's figures (accounting.md's G, T, N, C, P and their reporting amounts, in
        /// minor units): what its postings and the workbooks' gross and tax columns come from.
        public var figures: SaleFigures? = nil
    }
    public struct Order: Encodable {
        public var order_id: String
        public var version: Int
        public var path: String
        public var line: Int
        public var account_id: String
        public var transaction_id: String?
        public var product_id: String
        public var quantity: Int64
        public var credited_units: Int64
        public var credited_at: String
        public var environment: String
        public var storefront: String?
        public var app_account_token: String?
        public var reversed_at: String?
        /// What the line held that was not taken (a storefront that is no code, read as none).
        public var note: String?
        /// The order line's text as it was read, when asked for.
        public var text: String?
    }
    public struct Exception: Encodable {
        public var category: String
        /// The transaction it is about (nil when it names none: a credit without a transaction;
        /// `null` in JSON, as `exceptions --format json` says it).
        public var transaction_id: String?
        public var order_id: String?
        public var status: String
        public var first_seen: String
        public var last_seen: String
        public var resolved_on: String?
        public var detail: String
        enum CodingKeys: String, CodingKey { case category, transaction_id, order_id, status, first_seen, last_seen, resolved_on, detail }
        /// `transaction_id`, `order_id` and `resolved_on` are `null` when absent (not left
        /// out), as in `exceptions --format json`.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(category, forKey: .category)
            try c.encode(transaction_id, forKey: .transaction_id)
            try c.encode(order_id, forKey: .order_id)
            try c.encode(status, forKey: .status)
            try c.encode(first_seen, forKey: .first_seen)
            try c.encode(last_seen, forKey: .last_seen)
            try c.encode(resolved_on, forKey: .resolved_on)
            try c.encode(detail, forKey: .detail)
        }
    }
    public struct Finding: Encodable {
        public var code: String
        public var message: String
        public var first_seen: String
        public var resolved_on: String?
        /// How it was resolved, when by a dismissal (`dismissed by <who> on <day>: <why>`).
        public var resolution: String? = nil
        /// The book whose Run Info lists it while open (not in the JSON): its transaction's, but
        /// a TRANSACTION_CONFLICT's is its record's (nil: none known, listed by every book).
        public var book: String? = nil
        enum CodingKeys: String, CodingKey { case code, message, first_seen, resolved_on, resolution }
    }
    public struct Notification: Encodable {
        public var uuid: String
        public var type: String
        public var subtype: String?
        public var signed_date: String?
    }
    public struct Placement: Encodable {
        public var workbook: String
        public var sheet: String
        public var rows: [Int]
        /// Postings in that Journal's month (not shown in the JSON).
        public var journalRows: Int = 0
        /// Whether the workbook (or export) is under `reports/` now (nil: not looked at). A
        /// month before the last night's month and the one before it is written by
        /// `iapledger report --period`, or was written while it was open.
        public var written: Bool? = nil
        /// When it is not under `reports/`: the registration of its last version written there
        /// (`written at ... by ...`), if iapledger wrote it (it was moved or deleted since).
        public var registered: String? = nil
        /// When the file under `reports/` may not hold these rows as said: changed since
        /// iapledger wrote it, or written before entries of its month were posted (the rows
        /// are those the set has when written again), or, not there, its set written with
        /// another journal cap or layouts.
        public var stale: String? = nil
        /// The sheet row of the Journal's header the rows are counted from (not shown in the
        /// JSON): 4 in the shipped layout, as the layouts place it, or as the file has it.
        public var headerRow: Int = 4
        /// When the file's header is elsewhere than the layouts put it now (a layout changed
        /// since it was written): the rows are the file's, and this says so.
        public var rows_note: String? = nil
        enum CodingKeys: String, CodingKey { case workbook, sheet, rows, written, registered, stale, rows_note }
    }

    public var transaction_id: String
    public var book: String?
    public var status: String
    public var pending_reason: String?
    /// Why a free transaction moved no money: a trial or a family member's access, a signed
    /// price of 0, or the rules' price of 0 (a non-consumable's free tier).
    public var free_because: String? = nil
    public var product_id: String?
    public var quantity: Int64?
    public var purchase_date: String?
    public var original_transaction_id: String?
    public var storefront: String?
    public var app_account_token: String?
    public var refund_date: String?
    /// The date of its refund's reversal (the `refund_reversal` entry's own date), if posted.
    public var refund_reversed_date: String?
    /// The store's latest word on the refund where it goes beyond the ledger's one refund and
    /// one reversal (a second refund or reversal, a refund of the same day at another share):
    /// the share refunded (100000 in full, 0 reversed again) and its date. Reconciliation takes
    /// it; the ledger posts no more.
    public var store_refund_share: Int64? = nil
    public var store_refund_date: String? = nil
    public var sources: [Source]
    public var rules: AppliedRules?
    public var entries: [Entry]
    public var orders: [Order]
    public var exceptions: [Exception]
    public var findings: [Finding]
    public var notifications: [Notification]
    public var reports: [Placement]
    /// Its entries dated after the last night's as-of date (a purchase or refund dated in the
    /// future of the night): in the ledger, in no workbook yet, said (the trace said nothing of
    /// where they were).
    public var dated_after_reports: String? = nil
    /// The last night's lists where it is a row while open: its waiting sale, its records not
    /// posted, its open exceptions and findings (set by `trace`).
    public var listed: [Listing] = []
    /// An auto-renewable's days of paid service before this purchase, counted again from its
    /// chain as the ledger holds it now (set by `trace`; nil for other products).
    public var subscription: Subscription? = nil
    /// How reconciliation took it: the orders matched with it cleanly (as of the last run),
    /// and, set by `trace` from the rules, whether its product is in the scope at all.
    public var reconciliation: Reconciliation? = nil
    /// Lines of the backend's orders files that name it as their transaction but were not
    /// taken (rejected, or pending), with why (set by `trace`: an orders line is kept under
    /// its order, so the transaction's own records do not hold it).
    public var order_lines_not_taken: [OrderTrace.LineNotTaken] = []

    public struct Reconciliation: Encodable {
        /// Nil when the rules could not be read.
        public var in_scope: Bool?
        public var matched_orders: [String]
        public var note: String
    }

    /// The count behind the commission rate of an auto-renewable sale (README, "Subscription
    /// tenure"): each earlier transaction of its chain, in purchase order, and each lapse that
    /// restarted the count.
    public struct Subscription: Encodable {
        public struct Step: Encodable {
            /// `paid`, `free_trial`, `refunded` (fully, before this purchase), `no_expiry`,
            /// `restarted` (a lapse longer than the grace days), or `gap` (a lapse of a whole
            /// day or more within them).
            public var kind: String
            /// The earlier transaction (not for `restarted`).
            public var transaction_id: String?
            public var purchase_date: String?
            public var expires_date: String?
            /// The whole days counted (`paid`), or the lapse's length (`restarted`).
            public var days: Int?
            /// `restarted`: the purchase the lapse came before.
            public var before: String?
            public init(kind: String, transaction_id: String? = nil, purchase_date: String? = nil, expires_date: String? = nil,
                        days: Int? = nil, before: String? = nil) {
                self.kind = kind
                self.transaction_id = transaction_id
                self.purchase_date = purchase_date
                self.expires_date = expires_date
                self.days = days
                self.before = before
            }
        }
        /// Nil when the transaction names none: no chain, 0 days (as the posting counts them).
        public var original_transaction_id: String?
        public var grace_days: Int
        public var reduced_after_days: Int
        public var steps: [Step]
        /// The days the steps add up to: what the sale's rate would rest on if posted now.
        public var paid_days: Int
        /// The days the sale's own entry was posted with (from its applied rules), when it says.
        public var posted_with_days: Int?
        /// The subscription's transactions purchased after this one (its renewals), in order.
        public var later_transaction_ids: [String] = []
        public init(original_transaction_id: String?, grace_days: Int, reduced_after_days: Int, steps: [Step], paid_days: Int,
                    posted_with_days: Int?) {
            self.original_transaction_id = original_transaction_id
            self.grace_days = grace_days
            self.reduced_after_days = reduced_after_days
            self.steps = steps
            self.paid_days = paid_days
            self.posted_with_days = posted_with_days
        }
    }
}

/// The records read at one line of an input file (every version of the file read), for one
/// that names no transaction or order to trace it by: a line refused as no JSON, a whole file
/// refused.
public struct RecordTrace: Encodable {
    public var path: String
    public var line: Int
    public struct Record: Encodable {
        public var record_id: Int64
        /// The file's version it was read from (its SHA-256) and the night that read it.
        public var sha256: String
        public var read_on: String
        public var record_sha256: String
        public var text_holds: Bool
        public var outcome: String
        public var reason_code: String?
        public var reason: String?
        public var environment: String?
        public var resolved_on: String?
        public var resolution: String?
        /// The transactions it reports or names (stored from it, or waiting for a verified record).
        public var transaction_ids: [String]
        public var order_id: String?
        public var text: String?
    }
    public var records: [Record]
    /// The last night's lists where it is a row while open (set by `trace`).
    public var listed: [Listing] = []
}

/// The versions of one backend order and the transaction it names.
public struct OrderTrace: Encodable {
    /// A line of an orders file that named the order but was not taken (rejected, or a line of
    /// a file sent again: verified, no version), with why, and what resolved it if anything did
    /// (a valid line of the order read after it).
    public struct LineNotTaken: Encodable {
        public var path: String
        public var line: Int
        public var outcome: String
        public var reason: String
        public var read_on: String
        public var resolved_on: String?
        public var resolution: String?
        /// The line's text as it was read, when asked for.
        public var text: String?
    }
    /// A store record (a receipt response's wrapper) that names the order: an order no line
    /// of the backend's orders files names is known from these alone.
    public struct RecordNamingIt: Encodable {
        public var path: String
        public var line: Int
        public var outcome: String
        public var read_on: String
        public var transaction_ids: [String]
    }
    public var order_id: String
    public var versions: [TransactionTrace.Order]
    public var lines_not_taken: [LineNotTaken]
    /// Only for an order no orders line names (left out otherwise).
    public var records_naming_it: [RecordNamingIt]? = nil
    public var transaction: TransactionTrace?
    public var exceptions: [TransactionTrace.Exception]
    /// The last night's lists where its open exceptions and lines not taken are rows (set by `trace`).
    public var listed: [Listing] = []
}

extension LedgerReader {
    /// How a verified receipt response was verified, by the status Apple's service gave it
    /// (0, or 21006 for an iOS 6 receipt of an expired subscription, whose purchase stands).
    static func receiptVerification(outcome: String, kind: String, status: Int64?) -> String? {
        guard outcome == "verified", kind == "receipts" else { return nil }
        let code = status ?? 0
        return "Apple verifyReceipt status \(code) (\(code == 21006 ? "the subscription has expired; the receipt is valid, " : "")verified by Apple's service; the response, as the backend stored it, carries no signature of Apple's to check)"
    }

    /// - Parameter withText: also read each source record's (and order line's) text as it was read.
    /// - Parameter evenIfUnknown: a trace (status "unknown to the store") also when no record,
    ///   entry or order version names it (`trace` then shows the orders lines not taken that do).
    public func traceTransaction(_ id: String, asOf: Day?, withText: Bool = false, evenIfUnknown: Bool = false) throws -> TransactionTrace? {
        let stored = try transaction(id)
        let sources = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.path, r.line, f.sha256, r.record_sha256, r.outcome, r.reason, r.environment, run.as_of, r.id,
                   resolved.as_of, r.resolved_note, r.chunk_id IS NOT NULL, r.reason_code, r.status_code, f.kind
            FROM source_record r JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            LEFT JOIN run resolved ON resolved.id = r.resolved_run_id
            WHERE r.id IN (SELECT first_record_id FROM store_transaction WHERE transaction_id = ?1
                           UNION SELECT record_id FROM transaction_source WHERE transaction_id = ?1
                           UNION SELECT record_id FROM unverified_record_transaction WHERE transaction_id = ?1
                           UNION SELECT record_id FROM finding WHERE transaction_id = ?1 AND record_id IS NOT NULL)
            ORDER BY r.id
            """), arguments: [id]).map {
            // The text is checked against its hash, shown or not (a whole file refused keeps the
            // file's hash, as `verify` allows).
            let text = try recordText($0[8]) ?? Self.unreadableText
            let recordSHA: String = $0[3], fileSHA: String = $0[2]
            let holds = Self.textHolds(text, recordSHA256: recordSHA, fileSHA256: fileSHA, inChunk: $0[11], outcome: $0[4], reasonCode: $0[12])
            return TransactionTrace.Source(path: $0[0], line: $0[1], sha256: fileSHA, record_sha256: recordSHA, outcome: $0[4],
                                           code: ($0[4] as String) == "verified" ? nil : $0[12],
                                           verification: $0[5] ?? Self.receiptVerification(outcome: $0[4], kind: $0[14], status: $0[13]),
                                           environment: $0[6], read_on: $0[7], resolved_on: $0[9], resolution: $0[10],
                                           text: withText ? text : nil, text_holds: holds)
        }
        // Every version of each order that ever named it, numbered as the order's own: a later
        // version that moved the credit to another transaction (or reversed it) is part of the story.
        let orders = try orderVersions(where: "v.order_id IN (SELECT order_id FROM order_version WHERE transaction_id = ?)", id, withText: withText)
        if stored == nil && sources.isEmpty && orders.isEmpty && !evenIfUnknown { return nil }

        var entries: [TransactionTrace.Entry] = []
        var rules: AppliedRules?
        for r in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT entry.*, (SELECT as_of FROM run WHERE run.id = entry.run_id) AS run_as_of FROM entry
            WHERE book IN ('production', 'sandbox') AND transaction_id = ? ORDER BY id
            """), arguments: [id]) {
            let d = try draft(r)
            if d.kind == .sale { rules = d.rules }
            let entryId: Int64 = r["id"], hash: String = r["hash"]
            let previous = try String.fetchOne(db.cachedStatement(sql: "SELECT hash FROM entry WHERE id < ? ORDER BY id DESC LIMIT 1"),
                                               arguments: [entryId]) ?? EntryHash.genesis
            let holds = EntryHash.hash(previous: previous, entryId: entryId, entry: d, rulesJSON: r["rules_json"]) == hash
            entries.append(.init(entry_id: entryId, run_id: r["run_id"], run_as_of: r["run_as_of"], hash: hash, hash_holds: holds, kind: d.kind.rawValue, date: d.date.description,
                                 original_date: d.originalDate.description, late: d.late, refund_percentage: d.refundPercentage,
                                 reporting_currency: d.figures.reportingCurrency,
                                 postings: d.postings.map { .init(account: $0.account, currency: $0.currency, amount_minor: $0.amountMinor,
                                                                  reporting_amount_minor: $0.reportingAmountMinor) },
                                 figures: d.figures))
        }
        let status: String
        if let s = stored { status = s.saleStatus }   // pending, posted or free (the table's CHECK)
        else if sources.contains(where: { $0.outcome == "pending" && $0.resolved_on == nil }) { status = "pending" }
        // Known only from records an operator dismissed (`iapledger dismiss`): not rejected by
        // the night, taken off the open lists.
        else if !sources.isEmpty, sources.allSatisfy({ $0.resolution?.hasPrefix("dismissed by ") == true }) { status = "dismissed" }
        else if !sources.isEmpty { status = "rejected" }
        else { status = "unknown to the store" }
        let obs = stored?.observation
        // (Kept from schema v31 on.)
        let storeWord = try db.columns(in: "store_transaction").contains(where: { $0.name == "store_refund_share" })
            ? try Row.fetchOne(db.cachedStatement(sql: """
                SELECT store_refund_share, store_refund_ms FROM store_transaction WHERE transaction_id = ? AND store_refund_share IS NOT NULL
                """), arguments: [id]).map { (share: $0[0] as Int64, date: ($0[1] as Int64?).map { Day(epochMilliseconds: $0).description }) }
            : nil
        let freeBecause: String? = status != "free" || obs == nil ? nil
            : obs!.isFreeTrial ? "a free trial or introductory period, or a family member's shared access"
            : obs!.priceMilliunits.map { $0 == 0 ? "its signed price is 0 (an offer)" : "its signed price, \($0) milliunits, is less than the currency's smallest unit" }
            ?? "rules/prices.csv priced it 0 on its purchase date (a non-consumable's free tier)"
        var trace = TransactionTrace(
            transaction_id: id, book: obs?.book.rawValue, status: status,
            pending_reason: stored?.saleStatus == "pending" ? stored?.pendingReason : (status == "pending" ? sources.first { $0.outcome == "pending" && $0.resolved_on == nil }?.verification : nil),
            product_id: obs?.productId, quantity: obs?.quantity, purchase_date: obs.map { Day(epochMilliseconds: $0.purchaseMs).description },
            original_transaction_id: obs?.originalTransactionId, storefront: rules?.storefront ?? obs?.storefront,
            app_account_token: obs?.appAccountToken, refund_date: obs?.cancellationMs.map { Day(epochMilliseconds: $0).description },
            refund_reversed_date: entries.first { $0.kind == EntryKind.refundReversal.rawValue }?.original_date,
            store_refund_share: storeWord?.share, store_refund_date: storeWord?.date,
            sources: sources, rules: rules, entries: entries, orders: orders,
            exceptions: try traceExceptions(where: "transaction_id = ?", id),
            findings: try Row.fetchAll(db.cachedStatement(sql: """
                SELECT f.code, f.message, r1.as_of, r2.as_of, \(try hasFindingNotes() ? "f.resolved_note" : "NULL"), \(Self.findingBook)
                FROM finding f JOIN run r1 ON r1.id = f.first_run_id
                LEFT JOIN run r2 ON r2.id = f.resolved_run_id WHERE f.transaction_id = ? ORDER BY f.id
                """), arguments: [id]).map { .init(code: $0[0], message: $0[1], first_seen: $0[2], resolved_on: $0[3], resolution: $0[4], book: $0[5]) },
            notifications: try Row.fetchAll(db.cachedStatement(sql: """
                SELECT uuid, notification_type, subtype, signed_ms FROM notification WHERE transaction_id = ? ORDER BY signed_ms, uuid
                """), arguments: [id]).map { .init(uuid: $0[0], type: $0[1], subtype: $0[2], signed_date: ($0[3] as Int64?).map { Day(epochMilliseconds: $0).description }) },
            reports: try placements(id, book: obs?.book, asOf: asOf),
            dated_after_reports: Self.datedAfter(entries.map(\.date), asOf: asOf),
            reconciliation: TransactionTrace.Reconciliation(in_scope: nil, matched_orders: try String.fetchAll(db.cachedStatement(sql: """
                SELECT order_id FROM reconciled_match WHERE transaction_id = ? ORDER BY order_id
                """), arguments: [id]), note: ""))
        trace.free_because = freeBecause
        return trace
    }

    /// The records read at `line` of the file at `path` (every version of it read), nil when none.
    public func traceRecord(path: String, line: Int, withText: Bool = false) throws -> RecordTrace? {
        let rows = try Row.fetchAll(db, sql: """
            SELECT r.id, f.sha256, run.as_of, r.record_sha256, r.outcome, r.reason_code, r.reason, r.environment,
                   resolved.as_of, r.resolved_note, r.order_id, r.chunk_id IS NOT NULL
            FROM source_record r JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            LEFT JOIN run resolved ON resolved.id = r.resolved_run_id
            WHERE f.path = ? AND r.line = ? ORDER BY r.id
            """, arguments: [path, line])
        guard !rows.isEmpty else { return nil }
        return RecordTrace(path: path, line: line, records: try rows.map { r in
            let id: Int64 = r[0]
            let text = try recordText(id) ?? Self.unreadableText
            let transactions = try recordTransactions(id)
            return .init(record_id: id, sha256: r[1], read_on: r[2], record_sha256: r[3],
                         text_holds: Self.textHolds(text, recordSHA256: r[3], fileSHA256: r[1], inChunk: r[11], outcome: r[4], reasonCode: r[5]),
                         outcome: r[4], reason_code: r[5], reason: r[6], environment: r[7], resolved_on: r[8], resolution: r[9],
                         transaction_ids: transactions, order_id: r[10], text: withText ? text : nil)
        })
    }

    /// The orders lines not taken (rejected or pending) and still open whose text holds `text`,
    /// each with the header of its file as kept (nil when the whole file was refused), for
    /// `trace` to tell which name a transaction (the store keeps a refused line under its order
    /// alone). Read by the index of the records not verified, a row at a time: the open ones
    /// only (a line settled since is history its order's trace tells), which a backend whose
    /// lines are corrected keeps few (300,000 lines refused and left open took 3.5 s).
    public func orderLinesNotTaken(holding text: String, withText: Bool = false) throws -> [(line: OrderTrace.LineNotTaken, text: String, header: String?)] {
        let headers = try db.tableExists("source_file_header")
        var found: [(line: OrderTrace.LineNotTaken, text: String, header: String?)] = []
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT f.path, r.line, r.outcome, coalesce(r.reason_code || ': ', '') || coalesce(r.reason, ''), run.as_of,
                   r.id, \(headers ? "(SELECT header FROM source_file_header h WHERE h.file_id = f.id)" : "NULL")
            FROM source_record r JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            WHERE r.outcome <> 'verified' AND r.resolved_run_id IS NULL AND f.kind = 'orders' ORDER BY r.id
            """))
        while let row = try rows.next() {
            guard let raw = try recordText(row[5]), raw.contains(text) else { continue }
            found.append((OrderTrace.LineNotTaken(path: row[0], line: row[1], outcome: row[2], reason: row[3], read_on: row[4],
                                                  resolved_on: nil, resolution: nil, text: withText ? raw : nil), raw, row[6]))
        }
        return found
    }

    public func traceOrder(_ orderId: String, asOf: Day?, withText: Bool = false) throws -> OrderTrace? {
        let versions = try orderVersions(where: "v.order_id = ?", orderId, withText: withText)
        let notTaken = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.path, r.line, r.outcome, coalesce(r.reason_code || ': ', '') || coalesce(r.reason, ''), run.as_of,
                   resolved.as_of, r.resolved_note, r.id
            FROM source_record r JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            LEFT JOIN run resolved ON resolved.id = r.resolved_run_id
            WHERE r.outcome <> 'verified' AND r.order_id = ? AND f.kind = 'orders' ORDER BY r.id
            """), arguments: [orderId]).map {
            OrderTrace.LineNotTaken(path: $0[0], line: $0[1], outcome: $0[2], reason: $0[3], read_on: $0[4],
                                    resolved_on: $0[5], resolution: $0[6], text: withText ? try recordText($0[7]) : nil)
        }
        // Lines of a file sent again (the bytes of one read before, under another name): kept as
        // verified records, they make no version (they would bring back what later versions
        // replaced), and are found by their place in the file they repeat.
        let sentAgain = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f2.path, r2.line, r2.outcome, f.path, run.as_of, r2.id
            FROM order_version v JOIN source_record r ON r.id = v.record_id JOIN source_file f ON f.id = r.file_id
            JOIN source_file f2 ON f2.sha256 = f.sha256 AND f2.id <> f.id AND f2.kind = 'orders'
            JOIN source_record r2 ON r2.file_id = f2.id AND r2.line = r.line AND r2.order_id = v.order_id
            JOIN run ON run.id = f2.run_id
            WHERE v.order_id = ? AND NOT EXISTS (SELECT 1 FROM order_version w WHERE w.record_id = r2.id)
            GROUP BY r2.id ORDER BY r2.id
            """), arguments: [orderId]).map {
            OrderTrace.LineNotTaken(path: $0[0], line: $0[1], outcome: $0[2],
                                    reason: "a file sent again (the same bytes as \($0[3] as String), read before): its lines make no new version (a file sent again is not taken again, as its lines could bring back what later versions replaced)",
                                    read_on: $0[4], resolved_on: nil, resolution: nil, text: withText ? try recordText($0[5]) : nil)
        }
        guard !versions.isEmpty || !notTaken.isEmpty else { return nil }
        return OrderTrace(order_id: orderId, versions: versions, lines_not_taken: notTaken + sentAgain,
                          transaction: try versions.last?.transaction_id.flatMap { try traceTransaction($0, asOf: asOf, withText: withText) },
                          exceptions: try traceExceptions(where: "order_id = ?", orderId))
    }

    /// An order no orders line names, named by a receipt's wrapper (its `order_id`): traced from
    /// those records (a lost order, the backend's credit never sent), nil when none names it.
    /// `trace`'s last resort, after a transaction, an order, FILE:LINE and a subscription: the
    /// verified records have no index by order, so this reads them all.
    public func traceOrderNamedByRecords(_ orderId: String, asOf: Day?, withText: Bool = false) throws -> OrderTrace? {
        let naming = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.path, r.line, r.outcome, run.as_of, r.id
            FROM source_record r JOIN source_file f ON f.id = r.file_id JOIN run ON run.id = f.run_id
            WHERE r.order_id = ? AND f.kind <> 'orders' ORDER BY r.id
            """), arguments: [orderId]).map { r in
            OrderTrace.RecordNamingIt(path: r[0], line: r[1], outcome: r[2], read_on: r[3], transaction_ids: try recordTransactions(r[4]))
        }
        guard !naming.isEmpty else { return nil }
        // The transaction they report, when they report one.
        let ids = Set(naming.flatMap(\.transaction_ids))
        return OrderTrace(order_id: orderId, versions: [], lines_not_taken: [], records_naming_it: naming,
                          transaction: try (ids.count == 1 ? ids.first : nil).flatMap { try traceTransaction($0, asOf: asOf, withText: withText) },
                          exceptions: try traceExceptions(where: "order_id = ?", orderId))
    }

    /// The transactions whose original transaction id is `originalId` (a subscription's), in
    /// purchase order: what `trace` lists for an id that is no transaction's or order's own.
    public func subscriptionTransactions(originalId: String) throws -> [(id: String, book: String, purchaseMs: Int64, product: String, status: String)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT transaction_id, book, purchase_ms, product_id, sale_status FROM store_transaction
            WHERE original_transaction_id = ? ORDER BY purchase_ms, transaction_id
            """), arguments: [originalId]).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) }
    }

    /// The transactions a record reports or names (stored from it, or waiting for a verified
    /// record), or the transaction an orders line taken as an order's version names.
    func recordTransactions(_ recordId: Int64) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: """
            SELECT transaction_id FROM store_transaction WHERE first_record_id = ?1
            UNION SELECT transaction_id FROM transaction_source WHERE record_id = ?1
            UNION SELECT transaction_id FROM unverified_record_transaction WHERE record_id = ?1
            UNION SELECT transaction_id FROM order_version WHERE record_id = ?1 AND transaction_id <> ''
            ORDER BY 1
            """), arguments: [recordId])
    }

    func orderVersions(where condition: String, _ value: String, withText: Bool = false) throws -> [TransactionTrace.Order] {
        var version: [String: Int] = [:]
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT v.order_id, f.path, r.line, v.account_id, v.transaction_id, v.product_id, v.quantity, v.credited_units,
                   v.credited_at, v.environment, v.storefront, v.app_account_token, v.reversed_at, r.id, r.reason
            FROM order_version v JOIN source_record r ON r.id = v.record_id JOIN source_file f ON f.id = r.file_id
            WHERE \(condition) ORDER BY v.id
            """), arguments: [value]).map { row in
            let id: String = row[0]
            version[id, default: 0] += 1
            return .init(order_id: id, version: version[id]!, path: row[1], line: row[2], account_id: row[3], transaction_id: row[4],
                         product_id: row[5], quantity: row[6], credited_units: row[7], credited_at: row[8], environment: row[9],
                         storefront: row[10], app_account_token: row[11], reversed_at: row[12], note: row[14],
                         text: withText ? try recordText(row[13]) : nil)
        }
    }

    /// The text of the record read at `path`:`line` with this record hash (one of a line's
    /// records: a JSON array's on a single line share it), nil when none is.
    public func recordText(path: String, line: Int, recordSHA256: String) throws -> String? {
        guard let id = try Int64.fetchOne(db.cachedStatement(sql: """
            SELECT r.id FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE f.path = ? AND r.line = ? AND r.record_sha256 = ? ORDER BY r.id LIMIT 1
            """), arguments: [path, line, recordSHA256]) else { return nil }
        return try recordText(id)
    }

    /// A source record's text as it was read: its own row's, or its range of its chunk.
    func recordText(_ recordId: Int64) throws -> String? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT CAST(r.raw AS BLOB), \(chunkColumns) FROM source_record r WHERE r.id = ?"),
                         arguments: [recordId]).map { try Self.text($0, raw: 0, chunk: 1, &chunkCache) ?? Self.unreadableText }
    }

    func traceExceptions(where condition: String, _ value: String) throws -> [TransactionTrace.Exception] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT category, order_id, first_seen, last_seen, resolved_on, detail, transaction_id FROM (\(try episodesSQL))
            WHERE \(condition) ORDER BY exception_id, first_seen
            """), arguments: [value]).map {
            let order: String = $0[1]
            let transaction: String? = $0[6]
            return .init(category: $0[0], transaction_id: transaction?.isEmpty == false ? transaction : nil, order_id: order.isEmpty ? nil : order,
                         status: ($0[4] as String?) == nil ? "open" : "resolved",
                         first_seen: $0[2], last_seen: $0[3], resolved_on: $0[4], detail: $0[5])
        }
    }

    /// Of its entries' dates, those after `asOf` (the last night's): how many and the latest, said.
    static func datedAfter(_ dates: [String], asOf: Day?) -> String? {
        guard let asOf else { return nil }
        let after = dates.filter { $0 > asOf.description }
        guard let latest = after.max() else { return nil }
        let n = after.count
        return "\(n == 1 ? "its entry is" : "\(n) of its entries are") dated after the last night's as-of date \(asOf) (the latest \(latest)): in the ledger, in no workbook yet; the set of the first night as of \(latest) or later lists \(n == 1 ? "it" : "them")"
    }

    /// Where the transaction's postings sit in the Journal sheets: each workbook set's
    /// Journal lists the postings of its month (from the 1st to the set's date), so a posting
    /// dated in the last night's month is in that night's set, one dated in an earlier month
    /// in the set as of that month's last day (`reports/<last day>/`, written while the month
    /// was open and by `report --period`). Rows are 1-based sheet rows (title, subtitle, a
    /// blank row, then the header on row 4); `journalRows` is the month's posting count, so a
    /// reader can tell when the month passed the sheet's row cap.
    func placements(_ id: String, book: Book?, asOf: Day?) throws -> [TransactionTrace.Placement] {
        guard let book, let asOf else { return [] }
        let dates = try String.fetchAll(db.cachedStatement(sql: """
            SELECT DISTINCT date FROM entry WHERE transaction_id = ? AND book = ? AND date <= ? ORDER BY date
            """), arguments: [id, book.rawValue, asOf.description]).compactMap { Day(iso: $0) }
        let months = dates.reduce(into: [Month]()) { if $0.last != $1.month { $0.append($1.month) } }
        let name = book == .production ? "finance" : "sandbox"
        return try months.map { month in
            let setDay = month == asOf.month ? asOf : month.lastDay
            let (first, last) = (month.firstDay.description, setDay.description)
            let rows = try Int.fetchAll(db.cachedStatement(sql: """
                SELECT (SELECT count(*) FROM entry e2 JOIN posting p2 ON p2.entry_id = e2.id
                        WHERE e2.book = e.book AND e2.date >= ? AND e2.date <= ?
                          AND (e2.date < e.date OR (e2.date = e.date AND (e2.id < e.id OR (e2.id = e.id AND p2.id <= p.id)))))
                FROM entry e JOIN posting p ON p.entry_id = e.id
                WHERE e.transaction_id = ? AND e.book = ? AND e.date >= ? AND e.date <= ? ORDER BY e.date, e.id, p.id
                """), arguments: [first, last, id, book.rawValue, first, last])
            let count = try journalCount(book: book, from: month.firstDay, through: setDay)
            return .init(workbook: "reports/\(setDay)/\(name)-\(setDay).xlsx", sheet: "Journal", rows: rows.map { $0 + 4 },
                         journalRows: count)
        }
    }
}
