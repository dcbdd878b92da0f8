import Foundation
import LedgerCore
import LedgerPost
import LedgerRead
import LedgerReconcile
import LedgerReport
import LedgerStore
import LedgerVerify
import LedgerWrite

/// The nightly job, one pipeline (style.md):
///
/// 1. read     the config, the rules and every new file under `inbox/`
/// 2. verify   each record (status, bundle id, environment) and normalise its transactions
/// 3. post     pending sales and due refunds by the rules in force on their dates (an entry
///             dated in a closed month posts on the first open day, marked late)
/// 4. reconcile store transactions against the backend's credits (exceptions and their age)
/// 5. store    all of it in one database transaction (a run lands whole or not at all)
/// 6. report   build the report models from the ledger
/// 7. write    the workbooks under `reports/<as-of>/`
public struct NightlyRun {
    public static let toolVersion = "0.1.0"

    public struct Result {
        public var runId: Int64
        public var asOf: Day
        public var counts: LedgerWriter.RunCounts
        public var filesRead: Int
        public var filesSkipped: Int
        public var totals: LedgerTotals
        public var workbooks: [URL]
        public var problems: [String]
        /// Set when this run was a re-run of the last night that changed nothing: it recorded
        /// nothing and wrote the workbooks of that run (`runId`) again.
        public var nothingNewSinceRun: Int64? = nil
    }

    public let workspace: Workspace
    public let asOf: Day
    public var log: (String) -> Void

    public init(workspace: Workspace, asOf: Day, log: @escaping (String) -> Void = { _ in }) {
        self.workspace = workspace
        self.asOf = asOf
        self.log = log
    }

    public func run() throws -> Result {
        CrashPoint.hit("start:run")
        let config = try workspace.loadConfig()
        let rules = try workspace.loadRules()
        let lock = try RunLock(url: workspace.lockURL)
        defer { lock.release() }
        CrashPoint.hit("start:locked")
        workspace.removeStaleTempFiles()

        let ledger = try Ledger(path: workspace.ledgerURL(config).path)
        let verifier = ReceiptVerifier(bundleIds: config.bundleIds)
        let signedVerifier = try Self.signedDataVerifier(config: config, workspace: workspace)

        let orderFiles = try workspace.inboxFiles("orders", extensions: ["csv"])
        let receiptFiles = try workspace.inboxFiles("receipts", extensions: ["json", "jsonl"])
        let signedFiles = try workspace.inboxFiles("signed", extensions: ["jws", "txt", "json", "jsonl"])
        let inputs = try (orderFiles.map { ($0, "orders") } + receiptFiles.map { ($0, "receipts") }
                          + signedFiles.map { ($0, "signed") }).map { url, kind in
            try InputFile.load(url: url, kind: kind, workspace: workspace)
        }

        var filesRead = 0, filesSkipped = 0
        var closedThrough: Month? = nil
        var nothingNewSince: Int64? = nil
        let (runId, counts) = try NothingNew.catching(&nothingNewSince) { try ledger.write { w -> (Int64, LedgerWriter.RunCounts) in
            let sameNight = try w.sameNight(asOf: asOf)
            let runId = try w.beginRun(asOf: asOf, toolVersion: Self.toolVersion, startedAt: Self.timestamp())
            // Closed periods first: a config that would reopen a month stops the run here, and the
            // Poster dates entries by the effective closed-through month (the store checks it too).
            var postingConfig = config
            postingConfig.closedThrough = try ClosedPeriods.effective(
                configMonth: config.closedThrough, configPath: workspace.configURL.path, writer: w,
                closedAt: Self.timestamp(), closedBy: ClosedPeriods.currentUser())
            closedThrough = postingConfig.closedThrough
            let poster = Poster(config: postingConfig, rules: rules)
            var counts = LedgerWriter.RunCounts()
            var ingest = Ingest(writer: w, runId: runId, verifier: verifier, counts: counts)
            for input in inputs {
                CrashPoint.hit("read:\(input.path)")
                if try w.fileAlreadyRead(path: input.path, sha256: input.sha256) {
                    filesSkipped += 1
                    continue
                }
                filesRead += 1
                switch input.kind {
                case "orders": try ingest.orders(input)
                case "signed": try ingest.signed(input, verifier: signedVerifier)
                default: try ingest.receipts(input)
                }
            }
            counts = ingest.counts
            CrashPoint.hit("post:start")
            counts.entriesPosted = try Self.post(writer: w, poster: poster, runId: runId)
            CrashPoint.hit("reconcile:start")
            let inputs = try w.reconciliationInputs()
            let reconciled = Reconciler(products: rules.products)
                .reconcile(transactions: inputs.transactions, orders: inputs.orders, unverifiedIds: inputs.unverifiedIds)
            CrashPoint.hit("reconcile:apply")
            try w.applyReconciliation(reconciled, runId: runId, asOf: asOf)
            // A re-run of the last night that changed nothing records nothing (rolled back, run row included).
            if let same = sameNight, filesRead == 0, counts.entriesPosted == 0,
               try w.changedNothing(since: same, matched: reconciled.matched) { throw NothingNew(lastRunId: same.lastRunId) }
            try w.finishRun(runId, counts: counts, finishedAt: Self.timestamp())
            CrashPoint.hit("commit:before")
            return (runId, counts)
        } }
        CrashPoint.hit("commit:after")

        var workbooks = try ReportSet(ledger: ledger, config: config, asOf: asOf, runId: runId, workspace: workspace).writeAll()
        // The month before, while it is still open, is written again as of its last day: late
        // data for it changes its books until it is closed.
        let previous = asOf.month.previous
        if closedThrough.map({ previous > $0 }) ?? true, try ledger.read({ try $0.hasEntries(through: previous.lastDay) }) {
            CrashPoint.hit("report:previous month \(previous)")
            workbooks += try ReportSet(ledger: ledger, config: config, asOf: previous.lastDay, runId: nil, workspace: workspace).writeAll()
        }
        let totals = try ledger.read { try $0.totals() }
        // What this run read and could not post, as it stands at the end of the run.
        let notPosted = try ledger.read { try $0.recordProblems() }.filter { $0.runId == runId && !$0.resolved }
            .map { "\($0.path):\($0.line): \($0.outcome): \($0.reason)" }
        let newFindings = try ledger.read { try $0.findings(openOnly: true) }.filter { $0.firstRunId == runId }
            .map { "\($0.code) \($0.transactionId): \($0.message)" }
        let problems = nothingNewSince == nil ? notPosted + newFindings : []
        CrashPoint.hit("report:done")
        return Result(runId: runId, asOf: asOf, counts: counts, filesRead: filesRead, filesSkipped: filesSkipped,
                      totals: totals, workbooks: workbooks, problems: problems, nothingNewSinceRun: nothingNewSince)
    }

    /// Posts every sale still waiting (new ones and those that waited for a rule) and every
    /// refund that is due. Returns the number of entries written.
    static func post(writer w: LedgerWriter, poster: Poster, runId: Int64) throws -> Int {
        var posted = 0
        for t in try w.pendingSales() {
            let obs = t.observation
            let hint = try w.orderStorefront(transactionId: obs.transactionId)
            let paidDays = try subscriptionPaidDays(of: obs, writer: w, poster: poster)
            switch poster.sale(of: obs, orderStorefront: hint, subscriptionPaidDays: paidDays) {
            case .post(let entry):
                try w.insertEntry(entry, runId: runId)
                if let mismatch = poster.priceMismatch(of: obs, entry: entry) {
                    try w.openFinding(code: "PRICE_MISMATCH", transactionId: obs.transactionId, recordId: nil, message: mismatch, runId: runId)
                }
                try w.setSaleStatus(transactionId: obs.transactionId, status: "posted", pendingReason: nil)
                try w.resolveFinding(code: "MISSING_RULE", transactionId: obs.transactionId, runId: runId)
                posted += 1
                CrashPoint.tick("post:sales", every: 10)
            case .free:
                try w.setSaleStatus(transactionId: obs.transactionId, status: "free", pendingReason: nil)
                try w.resolveFinding(code: "MISSING_RULE", transactionId: obs.transactionId, runId: runId)
            case .missingRule(let why):
                try w.setSaleStatus(transactionId: obs.transactionId, status: "pending", pendingReason: "MISSING_RULE: \(why)")
                try w.openFinding(code: "MISSING_RULE", transactionId: obs.transactionId, recordId: nil, message: why, runId: runId)
            }
        }
        for t in try w.refundsDue() {
            let obs = t.observation
            guard let ms = obs.cancellationMs,
                  let sale = try w.entry(book: obs.book, transactionId: obs.transactionId, kind: .sale) else { continue }
            let refund = poster.refund(of: sale, on: Day(epochMilliseconds: ms), percentage: obs.revocationPercentage)
            try w.insertEntry(refund, runId: runId)
            posted += 1
            CrashPoint.tick("post:refunds", every: 2)
        }
        for r in try w.reversalsDue() {
            guard let refund = try w.entry(book: r.book, transactionId: r.transactionId, kind: .refund) else { continue }
            try w.insertEntry(poster.reversal(of: refund, on: r.date), runId: runId)
            posted += 1
        }
        return posted
    }

    /// Days of paid service an auto-renewable subscription has before this purchase (the chain
    /// of its `original_transaction_id` in its book); 0 for every other product type.
    static func subscriptionPaidDays(of t: TransactionObservation, writer w: LedgerWriter, poster: Poster) throws -> Int {
        guard poster.rules.product(t.productId)?.type == .autoRenewable,
              let original = t.originalTransactionId, !original.isEmpty else { return 0 }
        let chain = try w.subscriptionChain(book: t.book, originalTransactionId: original)
            .map { SubscriptionTenure.ChainItem($0.observation, refundReversed: $0.refundReversed) }
        return SubscriptionTenure.paidDays(before: t.purchaseMs, chain: chain, graceDays: poster.config.subscriptionGraceDays)
    }

    /// The verifier of signed data: Apple Root CA - G3 plus the config's `trusted_roots`.
    static func signedDataVerifier(config: WorkspaceConfig, workspace: Workspace) throws -> SignedDataVerifier {
        var roots = [try SignedDataVerifier.appleRootCAG3()]
        for path in config.trustedRoots {
            let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : workspace.root.appendingPathComponent(path)
            do {
                roots.append(try SignedDataVerifier.loadCertificateFile(url))
            } catch {
                throw ReadError.file(url.path, "trusted_roots: \(error)")
            }
        }
        return try SignedDataVerifier(trustedRootsDER: roots, bundleIds: config.bundleIds)
    }

    /// The current time as an ISO 8601 UTC timestamp (`2026-10-02T09:00:00Z`).
    public static func timestamp() -> String {
        ISO8601DateFormatter().string(from: Date())
    }
}

/// One input file, read whole and hashed.
struct InputFile {
    var url: URL
    var path: String
    var kind: String
    var data: Data
    var sha256: String

    static func load(url: URL, kind: String, workspace: Workspace) throws -> InputFile {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw ReadError.file(url.path, "cannot be read (permissions?)")
        }
        return InputFile(url: url, path: workspace.relative(url), kind: kind, data: data, sha256: Hashing.sha256Hex(data))
    }
}

/// Reading and verifying the records of new input files into the ledger.
struct Ingest {
    let writer: LedgerWriter
    let runId: Int64
    let verifier: ReceiptVerifier
    var counts: LedgerWriter.RunCounts

    init(writer: LedgerWriter, runId: Int64, verifier: ReceiptVerifier, counts: LedgerWriter.RunCounts) {
        self.writer = writer
        self.runId = runId
        self.verifier = verifier
        self.counts = counts
    }

    /// The text of a file, or nil (and a rejected record naming the file) when it is not UTF-8.
    mutating func text(_ input: InputFile) throws -> String? {
        // An empty or blank file (a transfer that failed?) is one rejected record, not silence.
        if input.data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256,
                                            sizeBytes: Int64(input.data.count), records: 1, newRecords: 1)
            _ = try writer.addRecord(.init(fileId: fileId, line: 1, sha256: input.sha256, outcome: .rejected, reasonCode: "EMPTY_FILE",
                                           reason: "the file is empty or blank: no records (an incomplete transfer?)", raw: ""))
            counts.read += 1
            counts.rejected += 1
            return nil
        }
        if let s = String(validatingUTF8Data: input.data) { return s }
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256,
                                        sizeBytes: Int64(input.data.count), records: 1, newRecords: 1)
        _ = try writer.addRecord(.init(fileId: fileId, line: 1, sha256: input.sha256, outcome: .rejected,
                                       reasonCode: "INVALID_UTF8", reason: "the file is not valid UTF-8 text", raw: ""))
        counts.read += 1
        counts.rejected += 1
        return nil
    }

    mutating func orders(_ input: InputFile) throws {
        guard let text = try text(input) else { return }
        let seen = try writer.recordHashes(path: input.path)
        let (rows, fileError) = OrderReader.read(path: input.path, text: Substring(text))
        if let e = fileError {
            let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256,
                                            sizeBytes: Int64(input.data.count), records: 1, newRecords: 1)
            _ = try writer.addRecord(.init(fileId: fileId, line: e.location?.line ?? 1, sha256: input.sha256, outcome: .rejected,
                                           reasonCode: e.code, reason: e.message, raw: String(text.prefix(4096))))
            counts.read += 1
            counts.rejected += 1
            return
        }
        let (fileId, fresh) = try addFile(input, rows, seen: seen) { $0.raw }
        for (row, sha) in fresh {
            counts.read += 1
            CrashPoint.tick("read:orders", every: 10)
            switch row.result {
            case .success(let o):
                let recordId = try writer.addRecord(.init(fileId: fileId, line: row.line, sha256: sha, outcome: .verified,
                                                          environment: o.environment, accountId: o.accountId,
                                                          orderId: o.orderId, raw: String(row.raw)))
                try writer.insertOrderVersion(orderId: o.orderId, recordId: recordId, accountId: o.accountId,
                                              transactionId: o.transactionId, productId: o.productId, quantity: o.quantity,
                                              creditedUnits: o.creditedUnits, creditedAt: o.creditedAt,
                                              creditedMs: o.creditedMs, environment: o.environment,
                                              storefront: o.storefront, appAccountToken: o.appAccountToken,
                                              reversedAt: o.reversedAt)
                counts.verified += 1
            case .failure(let f):
                _ = try writer.addRecord(.init(fileId: fileId, line: row.line, sha256: sha, outcome: .rejected,
                                               reasonCode: f.code, reason: f.message, raw: String(row.raw)))
                counts.rejected += 1
            }
        }
    }

    mutating func receipts(_ input: InputFile) throws {
        guard let text = try text(input) else { return }
        let seen = try writer.recordHashes(path: input.path)
        let sub = Substring(text)
        let records = input.url.pathExtension.lowercased() == "jsonl" ? RecordSplitter.jsonLines(sub) : RecordSplitter.jsonDocument(sub)
        let (fileId, fresh) = try addFile(input, records, seen: seen) { $0.text }
        for (record, sha) in fresh {
            counts.read += 1
            try receipt(record, sha: sha, fileId: fileId, path: input.path)
            CrashPoint.tick("verify:receipts", every: 10)
        }
    }

    /// Records an input file and returns its records not read from an earlier version of the
    /// same path, each with its SHA-256; the others count as skipped.
    mutating func addFile<R>(_ input: InputFile, _ records: [R], seen: Set<String>,
                             text: (R) -> Substring) throws -> (fileId: Int64, fresh: [(R, String)]) {
        let fresh = records.map { ($0, Hashing.sha256Hex(Data(text($0).utf8))) }.filter { !seen.contains($0.1) }
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256,
                                        sizeBytes: Int64(input.data.count), records: records.count, newRecords: fresh.count)
        counts.skipped += records.count - fresh.count
        return (fileId, fresh)
    }

    mutating func receipt(_ record: RawRecord, sha: String, fileId: Int64, path: String) throws {
        let location = SourceLocation(path: path, line: record.line)
        let raw = String(record.text)
        let response: LegacyResponse
        do {
            response = try LegacyReceiptParser.parse(record.text)
        } catch let e as LegacyParseError {
            try reject(fileId: fileId, location: location, sha: sha, code: "MALFORMED", reason: e.description, raw: raw)
            return
        }
        var info = LedgerWriter.RecordInfo(fileId: fileId, line: record.line, sha256: sha, outcome: .verified,
                                           statusCode: response.status, environment: response.environment,
                                           accountId: response.accountId, orderId: response.orderId,
                                           receivedAt: response.receivedAt, raw: raw)
        switch verifier.verify(response, location: location) {
        case let .rejected(code, reason):
            let named = response.items.compactMap(\.transactionId) + (response.wrapperTransactionId.map { [$0] } ?? [])
            try reject(fileId: fileId, location: location, sha: sha, code: code, reason: reason, raw: raw, info: info,
                       transactionIds: named)
        case let .pending(code, reason, ids):
            info.outcome = .pending
            info.reasonCode = code
            info.reason = reason
            let recordId = try writer.addRecord(info)
            try writer.noteUnverifiedRecord(recordId, transactionIds: ids)
            counts.pending += 1
            // A record for a transaction that is already verified has nothing left to wait for.
            for id in ids where try writer.transaction(id) != nil {
                try writer.resolvePendingRecords(transactionId: id, runId: runId, note: "transaction \(id) is already verified")
            }
        case let .verified(book, transactions, findings):
            info.environment = book == .production ? "Production" : "Sandbox"
            let recordId = try writer.addRecord(info)
            counts.verified += 1
            for f in findings {
                try writer.openFinding(code: f.code, transactionId: f.transactionId ?? "", recordId: recordId,
                                       message: "\(location): \(f.message)", runId: runId)
            }
            for t in transactions {
                try observe(t, recordId: recordId, location: location)
            }
        }
    }

    mutating func reject(fileId: Int64, location: SourceLocation, sha: String, code: String, reason: String, raw: String,
                         info: LedgerWriter.RecordInfo? = nil, transactionIds: [String] = []) throws {
        var r = info ?? LedgerWriter.RecordInfo(fileId: fileId, line: location.line, sha256: sha, outcome: .rejected, raw: raw)
        r.outcome = .rejected
        r.reasonCode = code
        r.reason = reason
        let recordId = try writer.addRecord(r)
        if !transactionIds.isEmpty { try writer.noteUnverifiedRecord(recordId, transactionIds: transactionIds) }
        counts.rejected += 1
    }

    /// One verified transaction: new ones are stored (their sale is posted below); one seen
    /// before is the same transaction, and brings only what it did not have (a refund).
    mutating func observe(_ t: TransactionObservation, recordId: Int64, location: SourceLocation) throws {
        if let existing = try writer.transaction(t.transactionId) {
            try writer.linkSource(transactionId: t.transactionId, recordId: recordId)
            let e = existing.observation
            var differences: [String] = []
            if e.book != t.book { differences.append("environment \(e.book.rawValue) vs \(t.book.rawValue)") }
            if e.productId != t.productId { differences.append("product \(e.productId) vs \(t.productId)") }
            if e.quantity != t.quantity { differences.append("quantity \(e.quantity) vs \(t.quantity)") }
            if e.purchaseMs != t.purchaseMs { differences.append("purchase date \(Day(epochMilliseconds: e.purchaseMs)) vs \(Day(epochMilliseconds: t.purchaseMs))") }
            if !differences.isEmpty {
                try writer.openFinding(code: "TRANSACTION_CONFLICT", transactionId: t.transactionId, recordId: recordId,
                                       message: "\(location) reports transaction \(t.transactionId) differently from its first source: \(differences.joined(separator: ", ")); the first is kept",
                                       runId: runId)
            }
            if e.cancellationMs == nil, let c = t.cancellationMs, e.book == t.book {
                try writer.setCancellation(transactionId: t.transactionId, cancellationMs: c, percentage: t.revocationPercentage)
            }
        } else {
            try writer.insertTransaction(t, recordId: recordId, runId: runId)
        }
        try writer.resolvePendingRecords(transactionId: t.transactionId, runId: runId, note: "verified by \(location)")
    }
}

/// Thrown inside the run's database transaction when a re-run of the last night changed
/// nothing: the transaction rolls back and the run carries on as that last run.
struct NothingNew: Error {
    var lastRunId: Int64

    /// `body`'s result, or the last run's id and no counts when it threw `NothingNew`.
    static func catching(_ since: inout Int64?, _ body: () throws -> (Int64, LedgerWriter.RunCounts)) throws -> (Int64, LedgerWriter.RunCounts) {
        do {
            return try body()
        } catch let same as NothingNew {
            since = same.lastRunId
            return (same.lastRunId, LedgerWriter.RunCounts())
        }
    }
}
