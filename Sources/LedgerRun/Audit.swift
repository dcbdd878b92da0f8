import Foundation
import LedgerCore
import LedgerPost
import LedgerRead
import LedgerReconcile
import LedgerStore
import LedgerVerify

/// `iapledger verify`: checks every invariant of the accounting contract, the hash chain,
/// and that re-deriving each entry from its stored source record gives the same entry.
public struct Audit {
    public struct Problem: CustomStringConvertible {
        public var entryId: Int64?
        public var message: String
        /// A problem of the schema (a dropped trigger, an altered view) or of a kept rules file:
        /// listed first, as the cause of what follows from it.
        public var schema = false
        /// A problem of a run as a whole (its chain head, its counts, its seal, its close): said
        /// before those of single transactions and entries, which may follow from it.
        public var run = false
        public var description: String { (entryId.map { "entry #\($0): " } ?? "") + message }
    }

    public struct Report {
        public var entries = 0
        public var rederived = 0
        /// Source records whose stored text was hashed again.
        public var records = 0
        /// Order versions read again from their source line, and those of files read before
        /// schema v25 (which kept no header to read them by).
        public var orderVersions = 0
        public var orderVersionsWithoutHeader = 0
        /// Sales whose recorded rules were checked against the files their run posted by, and
        /// those of runs before schema v26 (which kept no files).
        public var rulesChecked = 0
        public var rulesNotKept = 0
        /// The reconciliation derived again (nil: not, a note says why): its open exceptions and
        /// matched pairs, as the ledger holds them.
        public var reconciliation: (open: Int, matched: Int)? = nil
        /// The report files' registrations chain head as they give it now, and how many are chained.
        public var reportFilesHead: String? = nil
        public var reportFilesChained = 0
        /// The head after each night's or `report`'s registrations, in order.
        public var reportFilesHeads: [(event: String, head: String)] = []
        /// The workbooks iapledger registered that are no longer at their path under the
        /// workspace (deleted or moved: a retention policy, or by hand): said, not a problem.
        public var workbooksGone: [String] = []
        /// The workbooks under `reports/` whose bytes are not the last version iapledger wrote
        /// at their path (opened and saved, or edited): said, not a problem of the ledger.
        public var workbooksChanged: [String] = []
        /// The workbooks and journal exports under `reports/<date>/` at a path iapledger never
        /// wrote (a workbook copied under another date, a registration removed): said, not a
        /// problem of the ledger (an auditor's review: only `verify --workbook` said it).
        public var workbooksUnregistered: [String] = []
        /// What `verify` says besides (a root named in the config that cannot be read), not a
        /// problem of the ledger.
        public var notes: [String] = []
        /// Each finished run's chain head as the ledger's entries now give it (compare with the
        /// head on the Run Info sheet of that night's workbooks, or the run's own output).
        public var runHeads: [LedgerReader.RunHead] = []
        public var runs: Int { runHeads.count }
        public var chainHead = EntryHash.genesis
        /// Every seal, in order (runs' and closes'), to compare with the seals kept outside.
        public var sealList: [LedgerSeal.Stored] = []
        /// How many seals were checked, the latest (nil: the ledger has none yet), each run's.
        public var seals: Int { sealList.count }
        public var seal: String? { sealList.last?.seal }
        public var runSeals: [Int64: String] {
            Dictionary(sealList.compactMap { s in s.runId.map { ($0, s.seal) } }, uniquingKeysWith: { a, _ in a })
        }
        public var problems: [Problem] = []
        public var ok: Bool { problems.isEmpty }
        /// The first entry that fails (lowest id), if any entry does.
        public var firstFailingEntry: Int64? { problems.compactMap(\.entryId).min() }
    }

    public let workspace: Workspace
    /// This check's receipt responses of many items, verified once (`VerifiedReceipts`).
    let verifiedReceipts = VerifiedReceipts()

    public init(workspace: Workspace) { self.workspace = workspace }

    public func run() throws -> Report {
        let (config, ledger) = try workspace.openExistingLedger()
        // SQLite's own check of the file, first: the content checks read the pages they need,
        // and damage elsewhere (an index's pages, rows no check reads) passed unseen.
        let damage = try ledger.pageCheck()
        let damaged = damage.isEmpty ? nil : Problem(entryId: nil, message: "SQLite's own check of the ledger file (PRAGMA quick_check) finds it damaged: "
                                                     + damage.prefix(5).joined(separator: "; ") + (damage.count > 5 ? "; and more" : "")
                                                     + " (a disk fault, a copy or restore cut short, or a tool that wrote the file wrongly): restore it from its latest copy (README, \"A damaged ledger\"); what follows may come from the damage",
                                                     schema: true)
        do {
            return try checks(config: config, ledger: ledger, damaged: damaged)
        } catch let e as StoreError where damaged != nil {
            // The damage stopped the checks (a page they read): it is said, and where they stopped.
            var report = Report()
            report.problems = [damaged!, Problem(entryId: nil, message: "the checks of the ledger's content stopped at an error the damage caused: \(e.message)", schema: true)]
            return report
        }
    }

    func checks(config: WorkspaceConfig, ledger: Ledger, damaged: Problem?) throws -> Report {
        var report = Report()
        if let damaged { report.problems.append(damaged) }
        let schemaDifferences = try ledger.schemaDifferences()
        // A run records the schema it wrote with: one newer than the migrations the ledger
        // has applied means those were deleted (and the schema is compared with the run's).
        if let behind = try ledger.migrationsBehindRuns() {
            report.problems.append(Problem(entryId: nil, message: "run \(behind.runId) recorded writing the ledger with its schema through migration \(behind.recorded), but the ledger's applied migrations (grdb_migrations) end \(behind.lastApplied.map { "at \($0)" } ?? "before the first"): the newer ones were deleted; the schema is compared with the one \(behind.recorded) gives", schema: true))
        }
        let gaps = try ledger.migrationRowsMissing()
        if !gaps.isEmpty {
            report.problems.append(Problem(entryId: nil, message: "the ledger's list of applied schema migrations (grdb_migrations) lacks \(gaps.joined(separator: ", ")), though later ones are applied: \(gaps.count == 1 ? "its row was" : "their rows were") deleted (a night would run \(gaps.count == 1 ? "it" : "them") again on tables already made)", schema: true))
        }
        // The schema: the triggers that keep the ledger append-only, the CHECKs, the unique keys.
        for d in schemaDifferences {
            let key = d.key
            switch (d.expected, d.actual) {
            case (_?, let a?):
                report.problems.append(Problem(entryId: nil, message: "the ledger's \(key) differs from the one iapledger created: it was altered (now: \(a))", schema: true))
            case (let e?, nil):
                report.problems.append(Problem(entryId: nil, message: "the ledger's \(key) is missing: it was dropped, so \(Self.enforced(by: key, sql: e))", schema: true))
            case (nil, let a?):
                report.problems.append(Problem(entryId: nil, message: "the ledger holds \(key), which iapledger never created: \(a)", schema: true))
            case (nil, nil):
                break
            }
        }
        // The checks below read the tables and views by name: one dropped, or without a column
        // it was created with, would stop them with SQLite's error (or GRDB's, reading a row)
        // instead of this list. The schema's problems are the cause; they are what is said.
        let unreadable = try ledger.unreadableObjects()
        if !unreadable.isEmpty {
            let named = unreadable.map { $0.missingColumns.isEmpty ? "\($0.object) (missing, or naming what is missing)" : "\($0.object) (without its column\($0.missingColumns.count == 1 ? "" : "s") \($0.missingColumns.joined(separator: ", ")))" }
            report.problems.append(Problem(entryId: nil, message: "the ledger's content was not checked: its checks read the tables and views iapledger's migrations created, and the ledger no longer has \(named.joined(separator: "; ")). Restore the schema (from a copy of the ledger) and run `iapledger verify` again", schema: true))
            return report
        }
        do { try ledger.read { r in
            // Each run's records are checked again as that night checked them: by the bundle ids
            // and roots it verified with, not by today's config.
            let verifiers = try RunVerifiers(config: config, workspace: workspace, reader: r)
            report.notes += verifiers.notes
            var previous = EntryHash.genesis
            // Sales are kept only for transactions with a refund entry, refunds only for those
            // with a reversal: what re-deriving those needs, not the whole ledger in memory.
            let refunded = try r.entryKeys(kind: .refund), reversed = try r.entryKeys(kind: .refundReversal)
            var sales: [[UInt8]: EntryDraft] = [:]
            var refunds: [[UInt8]: EntryDraft] = [:]
            // The months closed before each entry was written: every finished run records the
            // month the books were closed through when it committed, and the entries written
            // after it may not be dated in it (late ones are moved to the first open day).
            var runHeads = try r.runChainHeads()
            // The chain as the entries give it now (each hash computed from the one computed
            // before, not the one stored), at each run's last entry: what `verify --runs` shows
            // beside the head the run recorded. Equal to the stored hashes while they hold.
            var now = EntryHash.genesis
            var nowAt: [Int64: String] = [:]
            let runEnds = Set(runHeads.compactMap(\.lastEntryId))
            var closedBefore: (month: String, runId: Int64)? = nil
            var nextRun = 0
            // Entry ids run 1, 2, 3, ... with no gap: each entry takes the id after the last one,
            // and none is ever deleted. A gap names the entries removed; the lowest entry whose
            // chain breaks (a gap or a hash) tells a run's head changed alone from its entries.
            var previousId: Int64 = 0
            var firstChainBreak: Int64? = nil
            var postedBy = RunRules()
            var chains = NightlyRun.SubscriptionChains()
            try r.forEachStoredEntry { id, e, rulesJSON, hash in
                report.entries += 1
                func fail(_ m: String) { report.problems.append(Problem(entryId: id, message: "\(e.kind.rawValue) of transaction \(e.transactionId): \(m)")) }
                let gap = id > previousId + 1
                if gap {
                    let missing = previousId + 1 == id - 1 ? "entry #\(id - 1) is" : "entries #\(previousId + 1) to #\(id - 1) are"
                    report.problems.append(Problem(entryId: previousId + 1, message: "\(missing) missing (entry ids run on without a gap, and no entry is ever deleted): removed, the ledger going from #\(previousId) to #\(id)"))
                    firstChainBreak = firstChainBreak ?? previousId + 1
                }
                previousId = id
                while nextRun < runHeads.count, (runHeads[nextRun].lastEntryId ?? 0) < id {
                    if let c = runHeads[nextRun].closedThrough, c > (closedBefore?.month ?? "") { closedBefore = (c, runHeads[nextRun].runId) }
                    nextRun += 1
                }
                // The rules a sale recorded are those of the files its run posted by (kept from
                // schema v26 on): a price, tax or rate rewritten in the entry with every hash
                // after it no longer agrees with the sealed files.
                if e.kind == .sale, nextRun < runHeads.count {
                    switch try postedBy.rules(ofRun: runHeads[nextRun].runId, reader: r) {
                    case .kept(let rules, let runConfig):
                        if let why = Self.recordedRulesDiffer(e, rules: rules, config: runConfig) {
                            fail("its recorded rules are not those of the files run \(runHeads[nextRun].runId) posted by: \(why)")
                        } else {
                            report.rulesChecked += 1
                        }
                    case .notKept:
                        report.rulesNotKept += 1
                    case .unreadable(let why):
                        fail("the files run \(runHeads[nextRun].runId) posted by, as kept, cannot be read: \(why)")
                    }
                }
                // A subscription's paid days, as its sale recorded them, are at most what its
                // chain in the ledger could ever give before it: every earlier period counted,
                // none refunded, no lapse (periods arriving later only add; refunds and lapses
                // only take away). A rate rewritten with a made-up count ("has 400 paid days"),
                // the figures and every hash after it, passed: the rules check takes the count
                // as recorded.
                if e.kind == .sale, let recorded = Self.recordedPaidDays(inReason: e.rules.commissionReason), recorded > 0,
                   let t = try r.transaction(e.transactionId)?.observation, let original = t.originalTransactionId, !original.isEmpty {
                    // Each chain read once, as the night reads them (a subscription of 1,000 daily
                    // periods read its chain for each: verify went from 3 s to 75 s).
                    let chain = try chains.chain(book: t.book, originalTransactionId: original) {
                        try r.subscriptionChain(book: t.book, originalTransactionId: original).map {
                            SubscriptionTenure.ChainItem(purchaseMs: $0.observation.purchaseMs, expiresMs: $0.observation.expiresMs,
                                                         freeTrial: $0.observation.isFreeTrial || $0.observation.priceMilliunits == 0)
                        }
                    }
                    let most = SubscriptionTenure.paidDays(before: t.purchaseMs, chain: chain, graceDays: Int.max)
                    if recorded > most {
                        fail("its commission reason records \(recorded) paid days of its subscription, but the subscription's transactions in the ledger give at most \(most) before it (every earlier period counted, none refunded, no lapse): the count, and the rate it gave, were written into the entry")
                    }
                }
                if let closed = closedBefore, e.date.month.description <= closed.month {
                    fail("dated \(e.date), in a month closed (through \(closed.month)) when run \(closed.runId) committed before this entry was written: posted into a closed month, past the trigger that forbids it")
                } else if nextRun < runHeads.count, let closed = runHeads[nextRun].closedThrough, e.date.month.description <= closed {
                    // The month its own run recorded closed was closed before that run posted
                    // anything: by `iapledger close` (which waits for the lock, so before the run
                    // began) or by the config (recorded before the night posts).
                    fail("dated \(e.date), in a month closed (through \(closed)) before run \(runHeads[nextRun].runId), which wrote it, posted anything: posted into a closed month, past the trigger that forbids it")
                }
                // Each entry sums to zero per currency and in the reporting currency.
                if !e.isBalanced { fail("postings do not sum to zero") }
                // The hash chain.
                let computed = EntryHash.hash(previous: previous, entryId: id, entry: e, rulesJSON: rulesJSON)
                now = now == previous ? computed : EntryHash.hash(previous: now, entryId: id, entry: e, rulesJSON: rulesJSON)
                if runEnds.contains(id) { nowAt[id] = now }
                if computed != hash {
                    fail(gap ? "its stored hash does not match its content, its postings and the hash of the entry before it, #\(id - 1), which is missing (above)"
                             : "its stored hash does not match its content, its postings and the previous hash: the entry or one of its postings was changed after it was written")
                    firstChainBreak = firstChainBreak ?? id
                }
                previous = hash
                // Re-derivation.
                let key = Array("\(e.book.rawValue)|\(e.transactionId)".utf8)
                switch e.kind {
                case .sale:
                    if refunded.contains(key) { sales[key] = e }
                    if let why = try rederiveSale(e, reader: r, verifiers: verifiers, config: config) {
                        fail(why)
                    } else {
                        report.rederived += 1
                    }
                case .refund:
                    if reversed.contains(key) { refunds[key] = e }
                    guard let sale = sales[key] else { fail("a refund with no earlier sale entry"); break }
                    let expected = Poster(config: WorkspaceConfig(), rules: Rules()).refund(of: sale, on: e.originalDate, percentage: e.refundPercentage)
                    if expected.postings != e.postings { fail("re-derived from its sale and refund percentage, its postings differ: expected \(Self.describe(expected.postings)), stored \(Self.describe(e.postings))") }
                    else if let why = Self.copiedFieldsDiffer(e, from: expected, what: "its sale (re-derived at its refund percentage)") { fail(why) }
                    else { report.rederived += 1 }
                case .refundReversal:
                    guard let refund = refunds[key] else { fail("a refund reversal with no earlier refund entry"); break }
                    let negated = refund.postings.map { PostingDraft(account: $0.account, currency: $0.currency, amountMinor: -$0.amountMinor, reportingAmountMinor: -$0.reportingAmountMinor) }
                    if negated != e.postings { fail("is not the exact negation of its refund"); break }
                    if let why = Self.copiedFieldsDiffer(e, from: refund, what: "its refund") { fail(why); break }
                    // Only Apple's REFUND_REVERSED notification asks for a reversal: one must be
                    // stored for the transaction, and its record must verify as one again.
                    if let why = try rederiveReversal(e, reader: r, verifiers: verifiers) { fail(why) } else { report.rederived += 1 }
                }
            }
            report.chainHead = previous
            for i in runHeads.indices { runHeads[i].expected = runHeads[i].lastEntryId.flatMap { nowAt[$0] } ?? EntryHash.genesis }
            // Closed months stay closed: no run committed with the books closed further than
            // they are now, and every late entry's original month is closed.
            let closedNow = try r.closedThroughNow()
            if let latest = runHeads.compactMap({ h in h.closedThrough.map { (month: $0, runId: h.runId) } }).max(by: { $0.month < $1.month }),
               latest.month > (closedNow ?? "") {
                report.problems.append(Problem(entryId: nil, message: "run \(latest.runId) committed with the books closed through \(latest.month), but the ledger's closed periods now end \(closedNow.map { "at \($0)" } ?? "nowhere"): closes were deleted, reopening a closed month"))
            }
            for late in try r.lateEntriesOfOpenMonths() {
                report.problems.append(Problem(entryId: late.entryId, message: "a late entry (moved forward from \(late.originalDate), in a closed month) whose month is not closed now: the close was deleted"))
            }
            // Every stored refund is one a source record of its transaction reports: a refund
            // date written into the ledger by hand would be posted by the next night.
            for refund in try r.storedRefunds() {
                if let why = try refundSupport(refund, reader: r, verifiers: verifiers) {
                    report.problems.append(Problem(entryId: nil, message: "transaction \(refund.transactionId): \(why)"))
                }
            }
            // And the store's last word on a refund kept beside a transaction (a second refund, or
            // a reversal again), which reconciliation reads (REFUNDED_STILL_CREDITED, NOT_CREDITED)
            // and trace tells: one written in by hand passed, and trace told a refund no record
            // reports.
            for word in try r.storeRefundWords() {
                if let why = try storeWordSupport(word, reader: r, verifiers: verifiers) {
                    report.problems.append(Problem(entryId: nil, message: "transaction \(word.transactionId): \(why)"))
                }
            }
            // Every stored refund of a posted sale has its refund entry: a night posts it before it
            // commits (it waits only while its sale does), so one missing was removed, the chain
            // rewritten after it.
            for missing in try r.refundsWithoutEntry() {
                report.problems.append(Problem(entryId: nil, message: "transaction \(missing.transactionId): its stored refund (dated \(Day(epochMilliseconds: missing.cancellationMs))) has no refund entry, though its sale is posted: every night posts such a refund before it commits, so the entry was removed"))
            }
            // Likewise every reversal asked for (REFUND_REVERSED, kept in reversal_request) of a
            // posted refund has its entry: a night posts it before it commits. An auditor's review
            // deleted one (the ids after it moved down, the chain and seals rewritten): it passed,
            // and the next night posted it again saying nothing.
            for missing in try r.reversalsWithoutEntry() {
                report.problems.append(Problem(entryId: nil, message: "transaction \(missing.transactionId) (\(missing.book)): REFUND_REVERSED \(missing.uuid) asks for the reversal of its refund, dated \(missing.date), and its refund is posted, but it has no refund reversal entry: every night posts such a reversal before it commits, so the entry was removed"))
            }
            // And every refund entry is its transaction's stored refund (its date and percentage):
            // a refund taken out of the stored transaction would leave the entry unexplained.
            for e in try r.refundEntriesAndStoredRefunds() {
                func fail(_ m: String) { report.problems.append(Problem(entryId: e.entryId, message: "refund of transaction \(e.transactionId): \(m)")) }
                guard e.stored else { fail("its transaction is not stored in its book"); continue }
                guard let ms = e.cancellationMs else {
                    fail("its transaction stores no refund (no cancellation date): the refund entry was written without one (forged), or the refund was removed from the stored transaction")
                    continue
                }
                if Day(epochMilliseconds: ms).description != e.originalDate {
                    fail("dated \(e.originalDate) (its original date), but its transaction's stored refund is dated \(Day(epochMilliseconds: ms))")
                }
                if e.percentage != (e.storedPercentage ?? 100_000) {
                    fail("of \(e.percentage.map(String.init) ?? "no") thousandths of a percent, but its transaction's stored refund is of \(e.storedPercentage ?? 100_000)")
                }
            }
            // A sale is `posted` exactly when its sale entry exists: a status set by hand would
            // hide a sale waiting for a rule (it would never post) or list an entry as waiting.
            for m in try r.saleStatusMismatches() {
                report.problems.append(Problem(entryId: nil, message: m.hasSale
                    ? "transaction \(m.transactionId) has a sale entry but its status is \(m.status): the status was changed after it was posted"
                    : "transaction \(m.transactionId) is marked posted but has no sale entry: its sale entry was removed, or its status was changed by hand (then its sale will never post)"))
            }
            // Every stored transaction without a sale entry (waiting for a rule, or free) is given
            // again by its first source record, as a posted one is by re-deriving its sale: the
            // night posts what is stored, not what was read. One marked free must be free as the
            // night decides it (a zero gross): a paid sale waiting for a rule, marked free by
            // hand, would never post.
            var rules: Result<Rules, Error>? = nil
            func loadRules() throws -> Rules {
                if rules == nil { rules = Result { try workspace.loadRules() } }
                return try rules!.get()
            }
            try r.forEachTransactionWithoutSale { id, status in
                switch try firstSourceAgrees(id, entry: nil, reader: r, verifiers: verifiers) {
                case .failure(let why):
                    report.problems.append(Problem(entryId: nil, message: "transaction \(id) (\(status), no sale entry): \(why)"))
                case .success(let agreed):
                    guard status == "free", let why = Self.whyNotFree(agreed.observation, rules: loadRules) else { break }
                    // Judged by the rules files as they are now when the transaction has no price
                    // of its own: a free sale keeps no applied rules (it has no entry).
                    let cause = agreed.observation.priceMilliunits == nil
                        ? "its status was set by hand, or rules/prices.csv priced it 0 when the night found it free and has changed since (a free sale keeps no applied rules); unless the price was changed, its sale will never post"
                        : "its status was set by hand, and its sale will never post"
                    report.problems.append(Problem(entryId: nil, message: "transaction \(id) is marked free, but \(why) (\(agreed.where_)): \(cause)"))
                }
            }
            try checkWaitingForRule(r, into: &report)
            for run in runHeads {
                report.runHeads.append(run)
                guard let head = run.head else {
                    report.problems.append(Problem(entryId: nil, message: "run \(run.runId) (as of \(run.asOf)) is finished but has no recorded chain head: it was erased (every run records one when it commits)", run: true))
                    continue
                }
                if head != run.expected {
                    // With the entries up to the run chaining unbroken, what is known is only that
                    // the recorded head differs: blaming the entries named the wrong cause of a
                    // head changed by hand.
                    let chainBroken = firstChainBreak.map { $0 <= (run.lastEntryId ?? 0) + 1 } ?? false
                    report.problems.append(Problem(entryId: nil, message: chainBroken
                        ? "run \(run.runId) committed with chain head \(head), but the ledger's entries up to that run now hash to \(run.expected): entries were added, removed or rewritten"
                        : "run \(run.runId)'s recorded chain head \(head) differs from the head its entries give now, \(run.expected), though their chain is unbroken: the run's recorded head was changed, or its last entries were removed, or the entries up to it rewritten with every hash after them (compare with the head kept outside the ledger for that night)", run: true))
                }
            }
            for p in try r.runTimesOutOfOrder() { report.problems.append(Problem(entryId: nil, message: p, run: true)) }
            // The seals: what the entries' chain does not cover (records, files, runs' counts,
            // closes), sealed as written and chained.
            let seals = try r.checkSeals()
            for p in seals.problems { report.problems.append(Problem(entryId: nil, message: p, run: true)) }
            report.sealList = seals.seals
            // The report files' registrations, chained after the seal's reach.
            let registrations = try r.checkReportFileChain()
            for p in registrations.problems { report.problems.append(Problem(entryId: nil, message: p)) }
            report.reportFilesHead = registrations.head
            report.reportFilesChained = registrations.chained
            report.reportFilesHeads = registrations.heads
            if try r.registersReportFiles() {
                // Each workbook under reports/ is the last version iapledger wrote there, or is
                // said (gone, or changed: opened and saved, or edited), not a problem of the ledger.
                let registered = try r.lastWorkbookRegistrations()
                report.workbooksUnregistered = Self.unregisteredWorkbooks(under: workspace, registered: try r.registeredReportPaths(),
                                                                          nightDays: try r.nightDays())
                for last in registered {
                    let url = workspace.root.appendingPathComponent(last.path)
                    guard FileManager.default.fileExists(atPath: url.path) else { report.workbooksGone.append(last.path); continue }
                    if Int64(NightlyRun.fileSize(url)) != last.sizeBytes || (try? LineReader.hash(url.path).sha256) != last.sha256 {
                        report.workbooksChanged.append(last.path)
                    }
                }
            }
            // Each run recorded how many entries it wrote: entries removed (the chain and head
            // rewritten after them) leave their run short.
            for m in try r.runEntryCountMismatches() {
                report.problems.append(Problem(entryId: nil, message: "run \(m.runId) recorded \(m.recorded) entr\(m.recorded == 1 ? "y" : "ies") posted, but \(m.entries) entr\(m.entries == 1 ? "y belongs" : "ies belong") to it: entries were removed or added after it committed", run: true))
            }
            // A run's entries commit with its finish: an entry of a run that is gone or unfinished was forged or its run altered.
            for (entryId, runId) in try r.entriesOutsideFinishedRuns() {
                report.problems.append(Problem(entryId: entryId, message: "belongs to run \(runId), which is not a finished run of this ledger (entries commit with their run's finish): the run was removed or altered"))
            }
            // A run commits with its finish: one left unfinished in the ledger was made by hand
            // (and while it is the last run, the guards that let only a night's run resolve
            // exceptions and findings let anyone do it).
            for (runId, asOf) in try r.unfinishedRuns() {
                report.problems.append(Problem(entryId: nil, message: "run \(runId) (as of \(asOf)) is not finished, but a night's run is written with its finish, in one transaction: it was added by hand, or its finish removed", run: true))
            }
            // Every record read is kept: each file recorded how many new records it stored, and
            // each run how many it read. Records deleted (past the trigger that forbids it, put
            // back after) leave them short, though every record left still hashes as read.
            for m in try r.sourceFileRecordCountMismatches() {
                report.problems.append(Problem(entryId: nil, message: "source file \(m.path) (read by run \(m.runId)) recorded \(m.recorded) new record\(m.recorded == 1 ? "" : "s"), but \(m.stored) \(m.stored == 1 ? "is" : "are") stored: source records were deleted (or added) after it was read", run: true))
            }
            for m in try r.runRecordCountMismatches() {
                report.problems.append(Problem(entryId: nil, message: "run \(m.runId) recorded reading \(m.recorded) record\(m.recorded == 1 ? "" : "s"), but its files hold \(m.stored): source records were deleted (or added) after it committed", run: true))
            }
            // Every source record's text still hashes to the SHA-256 recorded when it was read
            // (a whole-file rejection keeps the file's hash and no text, or the start of a CSV
            // file that cannot be read).
            // And every transaction a verified record reports is stored: the nights store each
            // (or keep the first of those that conflict), so one missing was deleted, and a sale
            // waiting for a rule with it, which nothing else holds, would never post.
            var unstored: [String] = [], unstoredCount = 0
            // The notifications the records are (each UUID's first record), and the reversals
            // the REFUND_REVERSED among them ask for: every one of a UUID may have asked; the
            // first for a transaction that reports it as stored must have.
            var notificationsMissing: [String] = []
            // And each stored notification is one of them (the record it names is that
            // notification): one added by hand showed in the trace as Apple's.
            var notificationRecords: [String: Int64] = [:]
            // What each UUID's first record says, and the night that read it.
            var notificationSaid: [String: (row: LedgerReader.StoredNotification, runId: Int64)] = [:]
            var reversalsAsked: [String: (uuid: String, day: Day, at: String)] = [:]
            var reversalsSaid: [String: [(uuid: String, day: Day, at: String)]] = [:]
            // Each transaction's first record is the first verified record that reports it (the
            // night stores it from that one: another made its first would give it that record's
            // quantity, price or expiry), and a refund a record reports is stored (the sale
            // waiting with it would post without its refund).
            var notFirst: [String] = [], refundsMissing: [String] = [], flagged = Set<String>()
            // Transactions met before their first record: the earliest record reporting each,
            // as it reports it, and where (only a record giving neither storefront nor price, a
            // legacy receipt's, may be followed by a signed record taken as the first).
            var earliestBefore: [String: (observation: TransactionObservation, at: String)] = [:]
            // And each link of a transaction to a record that told it (what `trace` lists as its
            // sources) names a verified record that reports it: a link made up listed an order
            // line about another transaction among a sale's sources. Read in record order beside
            // the records (no set of links held).
            let links = try r.transactionLinksByRecord()
            var nextLink = try links.next()
            var linksMadeUp: [String] = [], linksMadeUpCount = 0
            func checkLinks(before recordId: Int64, of current: (id: Int64, at: String, reported: Set<String>)? = nil) throws {
                while let l = nextLink, l.recordId < recordId || (l.recordId == current?.id) {
                    if l.recordId != current?.id || current?.reported.contains(l.transactionId) != true {
                        linksMadeUpCount += 1
                        if linksMadeUp.count < 20 {
                            linksMadeUp.append("transaction \(l.transactionId) is linked to \(l.recordId == current?.id ? current!.at : l.at) as a record that told it, but that record \(l.recordId == current?.id ? "does not report it" : "is no verified record of a receipt or signed data that reports it"): made up (trace lists it among the transaction's sources)")
                        }
                    }
                    nextLink = try links.next()
                }
            }
            // And each link of a record that did not verify (or of a verified one with a refused
            // item) to a transaction names one its text names: a link made up (a plain insert)
            // listed a rejected receipt among another sale's sources, and one changed sent a
            // record's transaction to another.
            let unverifiedLinks = try r.unverifiedLinksByRecord()
            var nextUnverified = try unverifiedLinks.next()
            var unverifiedMadeUp: [String] = [], unverifiedMadeUpCount = 0
            // (`named` nil: the record's text cannot be read, said apart; its links are not judged.)
            func checkUnverifiedLinks(before recordId: Int64, of current: (id: Int64, at: String, named: () -> Set<String>?)? = nil) throws {
                var named: Set<String>?? = nil
                while let l = nextUnverified, l.recordId < recordId || (l.recordId == current?.id) {
                    if l.recordId == current?.id, named == nil { named = .some(current!.named()) }
                    let unjudged = l.recordId == current?.id && named! == nil
                    if !unjudged && (l.recordId != current?.id || named!!.contains(l.transactionId) != true) {
                        unverifiedMadeUpCount += 1
                        if unverifiedMadeUp.count < 20 {
                            unverifiedMadeUp.append("transaction \(l.transactionId) is linked to \(l.recordId == current?.id ? current!.at : l.at) as a record that named it (waiting for verification, rejected, or its item refused), but \(l.recordId == current?.id ? "that record's text does not name it" : "the ledger holds no such record"): made up or changed (trace lists it among the transaction's records, and reconciliation takes a credit of it as unverified)")
                        }
                    }
                    nextUnverified = try unverifiedLinks.next()
                }
            }
            var recordFieldsChanged: [String] = [], recordFieldsChangedCount = 0
            try r.forEachSourceRecordText { path, line, outcome, code, recordSHA, fileSHA, chunk, raw, kind, recordId, runId, stored in
                report.records += 1
                try checkLinks(before: recordId)
                try checkUnverifiedLinks(before: recordId, of: (recordId, "\(path):\(line)", { raw.map { Self.namedTransactionIds(kind: kind, path: path, raw: $0) } }))
                guard let raw else {
                    report.problems.append(Problem(entryId: nil, message: "source record \(path):\(line): its text's chunk \(chunk ?? 0) cannot be read (not the compressed text of its recorded size): it was damaged or altered after it was read"))
                    return
                }
                if outcome == "verified" && kind != "orders" {
                    let run = verifiers.forRun(runId)
                    let said = Self.reported(kind: kind, path: path, raw: raw, receiptVerifier: run.receipts, signedVerifier: run.signed)
                    // What the night stored beside the record, read from its text, which trace
                    // tells (an auditor's review: an environment or a wrapper's account id
                    // rewritten passed, a Production receipt said Sandbox).
                    if said.verifies, let given = said.fields, given != stored {
                        recordFieldsChangedCount += 1
                        if recordFieldsChanged.count < 20 {
                            let pairs: [(String, String?, String?)] = [
                                ("environment", stored.environment, given.environment), ("status", stored.statusCode.map(String.init), given.statusCode.map(String.init)),
                                ("account_id", stored.accountId, given.accountId), ("order_id", stored.orderId, given.orderId),
                                ("received_at", stored.receivedAt, given.receivedAt)]
                            let differ = pairs.filter { $0.1 != $0.2 }.map { "the \($0.0) \($0.1 ?? "none") where its text says \($0.2 ?? "none")" }
                            recordFieldsChanged.append("source record \(path):\(line) (#\(recordId)) is stored with \(differ.joined(separator: ", ")): changed in the ledger (trace tells the stored one)")
                        }
                    }
                    try checkLinks(before: recordId, of: (recordId, "\(path):\(line)",
                                                         Set(said.transactions.map(\.transactionId) + [said.notification?.transactionId, said.namedTransactionId].compactMap { $0 })))
                    // A record agrees with the stored transaction when it reports it as stored,
                    // field by field (a refund aside): the night takes a refund, or a reversal,
                    // only from such a record. Judged from the records, not from the findings
                    // the night wrote (plain rows: one made up would switch the checks off).
                    var agreed = true
                    for t in said.transactions {
                        guard let stored = try r.transaction(t.transactionId) else {
                            unstoredCount += 1
                            if unstored.count < 20 { unstored.append("\(t.transactionId) (\(path):\(line))") }
                            agreed = false
                            continue
                        }
                        // No record before the first reports it (a conflicting record comes after
                        // the first), but where the earliest gave neither storefront nor price (a
                        // legacy receipt's) and a signed record became the first while the sale
                        // waited, giving it its own: the first record the night could take so
                        // (one agreeing with the earliest, as the night compares them), every
                        // record before it giving neither, or conflicting with the earliest.
                        // Any signed record was taken as a first after any other: one moved to a
                        // later record of it passed, or to one the night had refused.
                        var notTheFirst: String? = nil
                        if stored.firstRecordId > recordId {
                            let bare = t.storefront == nil && t.priceMilliunits == nil
                            if let earliest = earliestBefore[t.transactionId] {
                                if !bare && Self.takenOver(earliest.observation, by: t) {
                                    notTheFirst = "transaction \(t.transactionId) is given its own storefront and price by \(path):\(line) (record #\(recordId)), the first record the night would take so over \(earliest.at), but the ledger holds record #\(stored.firstRecordId) as its first: changed, so the transaction is given another record's figures"
                                }
                            } else {
                                earliestBefore[t.transactionId] = (t, "\(path):\(line)")
                                if try !bare || r.recordKind(stored.firstRecordId) != "signed" {
                                    notTheFirst = "transaction \(t.transactionId) is first reported by \(path):\(line) (record #\(recordId)), but the ledger holds record #\(stored.firstRecordId) as its first: changed, so the transaction is given another record's figures"
                                }
                            }
                        } else if stored.firstRecordId == recordId, let earliest = earliestBefore[t.transactionId],
                                  (t.storefront == nil && t.priceMilliunits == nil) || !Self.takenOver(earliest.observation, by: t) {
                            notTheFirst = "transaction \(t.transactionId) has \(path):\(line) (record #\(recordId)) as its first, after \(earliest.at), but the night never takes such a record over it (\(t.storefront == nil && t.priceMilliunits == nil ? "it gives no storefront or price of its own" : "it conflicts with it")): changed, so the transaction is given another record's figures"
                        }
                        if let notTheFirst, notFirst.count < 20, flagged.insert(t.transactionId).inserted { notFirst.append(notTheFirst) }
                        let same = Self.reportsAsStored(t, stored.observation)
                        if !same { agreed = false }
                        if same, t.cancellationMs != nil, stored.observation.cancellationMs == nil, refundsMissing.count < 20 {
                            refundsMissing.append("transaction \(t.transactionId): \(path):\(line) reports it refunded, but the ledger stores no refund for it: removed (its sale would post, or stay posted, without its refund)")
                        }
                    }
                    // Each UUID's notification row names the record it was first stored from: a
                    // record after it is a resend, which asks for nothing.
                    if let n = said.notification {
                        if notificationRecords[n.uuid] == nil {
                            notificationRecords[n.uuid] = recordId
                            if let row = said.notificationRow { notificationSaid[n.uuid] = (row, runId) }
                        }
                        let first = try r.notificationRecord(uuid: n.uuid)
                        if first == nil && notificationsMissing.count < 20 { notificationsMissing.append("\(n.type) \(n.uuid) (\(path):\(line))") }
                        if first == recordId, n.type == "REFUND_REVERSED", let id = n.transactionId, let book = n.book, let day = n.day {
                            let key = "\(book.rawValue)|\(id)"
                            // Every one may have asked (the night's own comparison is looser than
                            // this one); one that reports the transaction as stored must have.
                            reversalsSaid[key, default: []].append((n.uuid, day, "\(path):\(line)"))
                            if agreed && reversalsAsked[key] == nil { reversalsAsked[key] = (n.uuid, day, "\(path):\(line)") }
                        }
                    }
                }
                if LedgerReader.textHolds(raw, recordSHA256: recordSHA, fileSHA256: fileSHA, inChunk: chunk != nil, outcome: outcome, reasonCode: code) { return }
                report.problems.append(Problem(entryId: nil, message: "source record \(path):\(line): its stored text no longer hashes to the SHA-256 recorded when it was read (\(recordSHA)): it was changed after it was read"))
            }
            try checkLinks(before: Int64.max)
            try checkUnverifiedLinks(before: Int64.max)
            for m in notFirst + refundsMissing + linksMadeUp + unverifiedMadeUp + recordFieldsChanged { report.problems.append(Problem(entryId: nil, message: m)) }
            if recordFieldsChangedCount > recordFieldsChanged.count {
                report.problems.append(Problem(entryId: nil, message: "and \(recordFieldsChangedCount - recordFieldsChanged.count) more source records stored with other fields than their text gives"))
            }
            if linksMadeUpCount > linksMadeUp.count {
                report.problems.append(Problem(entryId: nil, message: "and \(linksMadeUpCount - linksMadeUp.count) more links of transactions to records that do not report them"))
            }
            if unverifiedMadeUpCount > unverifiedMadeUp.count {
                report.problems.append(Problem(entryId: nil, message: "and \(unverifiedMadeUpCount - unverifiedMadeUp.count) more links of transactions to records that do not name them"))
            }
            for m in notificationsMissing {
                report.problems.append(Problem(entryId: nil, message: "notification \(m) is a verified record, but the ledger holds no notification of that UUID: deleted"))
            }
            for n in try r.storedNotifications() {
                if notificationRecords[n.uuid] != n.recordId {
                    report.problems.append(Problem(entryId: nil, message: "the ledger holds notification \(n.type) \(n.uuid)\(n.transactionId.map { " of transaction \($0)" } ?? "") as read from \(n.at), but "
                        + (notificationRecords[n.uuid] == nil ? "no verified record is a notification of that UUID" : "that record is not it (the first record of it is another)")
                        + ": written by hand (trace shows it as Apple's)"))
                } else if let said = notificationSaid[n.uuid], said.row != n.row || said.runId != n.runId {
                    // Its fields as its record says them, and the night that read it: one
                    // changed showed in `trace` as Apple's (another type, transaction or date).
                    func text(_ ms: Int64?) -> String { ms.map { String($0) } ?? "none" }
                    var pairs: [(String, String, String)] = [("type", said.row.type, n.row.type)]
                    pairs.append(("subtype", said.row.subtype ?? "none", n.row.subtype ?? "none"))
                    pairs.append(("signedDate", text(said.row.signedMs), text(n.row.signedMs)))
                    pairs.append(("environment", said.row.environment ?? "none", n.row.environment ?? "none"))
                    pairs.append(("transaction", said.row.transactionId ?? "none", n.row.transactionId ?? "none"))
                    pairs.append(("run", String(said.runId), String(n.runId)))
                    let fields: [String] = pairs.filter { $0.1 != $0.2 }.map { "\($0.0) \($0.2), its record says \($0.1)" }
                    report.problems.append(Problem(entryId: nil, message: "the ledger holds notification \(n.uuid) as read from \(n.at) with "
                        + fields.joined(separator: "; ") + ": changed in the ledger after it was read (trace shows it as Apple's)"))
                }
            }
            // The reversals asked for are those the notifications ask for, dated as they are: a
            // request deleted would leave the reversal unposted, one changed would date it elsewhere.
            for q in try r.reversalRequests() {
                let key = "\(q.book)|\(q.transactionId)"
                reversalsAsked.removeValue(forKey: key)
                guard let said = reversalsSaid[key]?.first(where: { $0.uuid == q.uuid }) else {
                    report.problems.append(Problem(entryId: nil, message: "the refund reversal of transaction \(q.transactionId) (\(q.book), dated \(q.date), by notification \(q.uuid)) is asked for by no verified REFUND_REVERSED notification of that UUID: written by hand"))
                    continue
                }
                if said.day.description != q.date {
                    report.problems.append(Problem(entryId: nil, message: "the refund reversal of transaction \(q.transactionId) is asked for by REFUND_REVERSED \(q.uuid) dated \(q.date), but the notification that asked for it (\(said.at)) dates it \(said.day): changed in the ledger after it was read"))
                }
            }
            for (key, asked) in reversalsAsked.sorted(by: { $0.key < $1.key }) {
                let id = key.split(separator: "|", maxSplits: 1).last.map(String.init) ?? key
                report.problems.append(Problem(entryId: nil, message: "REFUND_REVERSED \(asked.uuid) (\(asked.at)) asks for the refund reversal of transaction \(id) (dated \(asked.day)), but the ledger holds no such request: deleted (the reversal would never post)"))
            }
            if unstoredCount > 0 {
                report.problems.append(Problem(entryId: nil, message: "\(unstoredCount) transaction\(unstoredCount == 1 ? "" : "s") reported by verified source records \(unstoredCount == 1 ? "is" : "are") not stored: \(unstored.joined(separator: ", "))\(unstoredCount > unstored.count ? ", ..." : ""): deleted from the ledger after \(unstoredCount == 1 ? "it was" : "they were") read (a sale waiting for a rule or an order, deleted, never posts)"))
            }
            // Every order version is its source line read again, by its file's header: a
            // storefront, account or quantity changed in the ledger would price a sale or
            // reconcile an order by what the backend never sent.
            var tables: (header: String, table: CSVTable?)? = nil   // the last file's header, read once
            try r.forEachOrderVersion { version, path, line, header, raw in
                // A night stores a version only from a verified line of an orders file.
                guard let kind = version.sourceKind else {
                    report.problems.append(Problem(entryId: nil, message: version.recordHeld
                        ? "order \(version.orderId) (version #\(version.id)) names source record #\(version.recordId), whose file the ledger no longer holds: its source_file row was deleted"
                        : "order \(version.orderId) (version #\(version.id)) names source record #\(version.recordId), which the ledger does not hold: the version was written by hand (a night stores one only from an order line it read)"))
                    return
                }
                guard kind == "orders", version.sourceOutcome == "verified" else {
                    let what = kind == "orders" ? "an order line the night \(version.sourceOutcome ?? "did not verify") (no version is made from it)" : "a line of a \(kind) file, not an order line"
                    report.problems.append(Problem(entryId: nil, message: "order \(version.orderId) (version #\(version.id)) names \(path):\(line), \(what): the version was written by hand (a night stores one only from a verified line of an orders file)"))
                    return
                }
                guard let header else { report.orderVersionsWithoutHeader += 1; return }
                guard let raw else { return }   // its chunk is named above
                if tables?.header != header { tables = (header, OrderReader.table(path: path, header: header)) }
                // A line an earlier build took whose ids the rules now refuse (a no-break space
                // in an account id) reads as that build read it.
                guard let table = tables?.table, case .success(let o)? = Self.rereadAsTaken(raw, table) else {
                    report.problems.append(Problem(entryId: nil, message: "order \(version.orderId) (version #\(version.id), from \(path):\(line)): its source line no longer reads as an order under its file's header: the line or the header was changed after it was read"))
                    return
                }
                let read: [String: String?] = ["order_id": o.orderId, "account_id": o.accountId, "transaction_id": o.transactionId,
                                               "product_id": o.productId, "quantity": String(o.quantity),
                                               "credited_units": String(o.creditedUnits), "credited_at": o.creditedAt,
                                               "credited_ms": String(o.creditedMs),
                                               "environment": o.environment, "storefront": o.storefront,
                                               "app_account_token": o.appAccountToken, "reversed_at": o.reversedAt]
                let differing = version.fields.filter { f in (read[f.name] ?? nil).flatMap { $0.isEmpty ? nil : $0 } != f.value }
                if differing.isEmpty { report.orderVersions += 1; return }
                let said = differing.map { f in "\(f.name) \(f.value.map { "'\($0)'" } ?? "empty") where the line has \((read[f.name] ?? nil).map { "'\($0)'" } ?? "none")" }
                report.problems.append(Problem(entryId: nil, message: "order \(version.orderId) (version #\(version.id), from \(path):\(line)) is stored with \(said.joined(separator: ", ")): changed in the ledger after it was read"))
            }
            // And none is missing: an order version deleted would leave its sale to post at
            // another storefront (or at the default), and its order out of reconciliation.
            let missing = try r.missingOrderVersions()
            for r in missing.repeated {
                report.problems.append(Problem(entryId: nil, message: "order version #\(r.id) comes from the same line as version #\(r.of): a line makes one version, so one of them was copied in by hand"))
            }
            for id in missing.reordered {
                report.problems.append(Problem(entryId: nil, message: "order version #\(id) comes from a line read before the line of a version before it: versions were reordered (an older line made an order's latest state)"))
            }
            for gap in missing.gaps {
                report.problems.append(Problem(entryId: nil, message: "order version\(gap.count == 1 ? " #\(gap.lowerBound) is" : "s #\(gap.lowerBound) to #\(gap.upperBound) are") missing (version ids run on without a gap, and none is ever deleted): removed"))
            }
            if missing.count > 0 {
                let named = missing.lines.map { "order \($0.orderId) from \($0.path):\($0.line)" }.joined(separator: ", ")
                report.problems.append(Problem(entryId: nil, message: "\(missing.count) verified order line\(missing.count == 1 ? "" : "s") made no order version, though \(missing.count == 1 ? "it repeats" : "they repeat") no earlier line of \(missing.count == 1 ? "its" : "their") order: \(named)\(missing.count > missing.lines.count ? ", ..." : ""): the version\(missing.count == 1 ? " was" : "s were") deleted (a night stores a version for every new line of an order)"))
            }
            let kept = try r.inputTextProblems()
            // A kept rules file altered is the cause of every sale of its runs said to differ
            // from it: listed first, with the schema's problems.
            for p in kept.altered { report.problems.append(Problem(entryId: nil, message: p, schema: true)) }
            for p in kept.missing { report.problems.append(Problem(entryId: nil, message: p)) }
            let dangling = try r.foreignKeyViolations()
            for v in dangling.rows {
                report.problems.append(Problem(entryId: nil, message: "\(v.table) row \(v.rowid.map { "#\($0)" } ?? "(without rowid)") names a row of \(v.parent) that the ledger does not hold: written or deleted by hand with foreign keys off (a night enforces them)"))
            }
            if dangling.count > dangling.rows.count {
                report.problems.append(Problem(entryId: nil, message: "... and \(dangling.count - dangling.rows.count) more rows naming rows the ledger does not hold"))
            }
            // A ledger not upgraded yet: its stored postings are the ones the upgrade will accept.
            if let problem = try r.storedPostingsProblem() {
                report.problems.append(Problem(entryId: nil, message: "the ledger's stored postings: \(problem) (the next `iapledger run` or `close` refuses to upgrade the ledger until it is)", schema: true))
            }
            // The rules the postings are derived by are the accounting contract's.
            if let stored = try r.postingRules() {
                let expected = PostingRule.inStoredOrder
                if stored != expected {
                    let first = zip(stored, expected).first { $0 != $1 }.map { "\(Self.describe($0.0)) where accounting.md gives \(Self.describe($0.1))" }
                        ?? "\(stored.count) rules where accounting.md gives \(expected.count)"
                    report.problems.append(Problem(entryId: nil, message: "the ledger's posting rules (posting_rule), which give every entry its postings, differ from the accounting contract's: \(first)", schema: true))
                }
            }
            // Per book, the trial balance sums to zero in every currency and in the reporting currency.
            var perCurrency: [String: Int64] = [:], reporting: [String: Int64] = [:]
            for row in try r.trialBalanceFromPostings(book: nil) {
                perCurrency["\(row.book) \(row.currency)", default: 0] += row.balanceMinor
                reporting[row.book, default: 0] += row.reportingBalanceMinor
            }
            for (k, v) in perCurrency.sorted(by: { $0.key < $1.key }) where v != 0 {
                report.problems.append(Problem(entryId: nil, message: "the trial balance of \(k) sums to \(v), not zero"))
            }
            for (k, v) in reporting.sorted(by: { $0.key < $1.key }) where v != 0 {
                report.problems.append(Problem(entryId: nil, message: "the \(k) book's reporting-currency balance sums to \(v), not zero"))
            }
            // The month totals the reports read equal the postings and entries they sum.
            let stored = try r.monthTotals(recomputed: false), recomputed = try r.monthTotals(recomputed: true)
            for (name, a, b, keyFields) in [("balance_month", stored.balances, recomputed.balances, 4), ("activity_month", stored.activity, recomputed.activity, 6)] where a != b {
                let differences = Self.rowDifferences(stored: a, given: b, keyFields: keyFields)
                report.problems.append(Problem(entryId: nil, message: "the month totals (\(name)) differ from the postings and entries they sum: "
                    + differences.prefix(3).joined(separator: "; ") + (differences.count > 3 ? "; and \(differences.count - 3) more" : "")))
            }
            // Last, from the transactions and orders checked above: with a problem among them,
            // what the reconciliation gives now follows from it, and is not said as its own.
            // (Its fingerprint is checked whatever else was found: it is no figure derived.)
            let forged = try reconciliationFingerprintForged(r)
            if let forged { report.problems.append(Problem(entryId: nil, message: forged)) }
            if report.problems.isEmpty {
                try checkReconciliation(r, into: &report)
            } else {
                report.notes.append("the reconciliation was not derived again: it is derived from the transactions and orders, and the ledger has the problems listed")
            }
            // Each exception's days are those of the nights its runs name (first seen, last seen,
            // resolved), in order, and a closed episode ended before its exception opened again:
            // an age or a resolution date changed by hand, or an episode moved, passed.
            for m in try r.exceptionDatesAtOdds() { report.problems.append(Problem(entryId: nil, message: m)) }
        } } catch let e as StoreError where !schemaDifferences.isEmpty && damaged == nil {
            // A schema altered in a way the check above does not see (a column of another type)
            // stops the content checks: the schema's problems, listed first, are the cause.
            report.problems.append(Problem(entryId: nil, message: "the checks of the ledger's content stopped at an error the altered schema caused: \(e.message)", schema: true))
        }
        // Problems of the schema first (an altered view or a dropped trigger is the cause of
        // what follows from it), then by entry.
        report.problems.sort {
            if $0.schema != $1.schema { return $0.schema }
            return ($0.entryId ?? Int64.max) < ($1.entryId ?? Int64.max)
        }
        return report
    }

    /// The rows of `stored` and `given` (the first `keyFields` fields their key) that differ,
    /// each said by its key (fields shown joined by `|`): changed, missing (the entries give
    /// it) or extra.
    static func rowDifferences(stored: [[String]], given: [[String]], keyFields: Int) -> [String] {
        func text(_ fields: ArraySlice<String>) -> String { fields.joined(separator: "|") }
        let s = Dictionary(stored.map { (Array($0.prefix(keyFields)), $0) }, uniquingKeysWith: { a, _ in a })
        let g = Dictionary(given.map { (Array($0.prefix(keyFields)), $0) }, uniquingKeysWith: { a, _ in a })
        return Set(s.keys).union(g.keys).sorted { $0.lexicographicallyPrecedes($1) }.compactMap { k in
            switch (s[k], g[k]) {
            case let (a?, b?): return a == b ? nil : "stored \(text(a[...])), the entries give \(text(b[...]))"
            case let (nil, b?): return "no row stored for \(text(k[...])), the entries give \(text(b[...]))"
            case let (a?, nil): return "stored \(text(a[...])), which the entries do not give"
            default: return nil
            }
        }
    }

    static func describe(_ r: PostingRule) -> String {
        let parts: [(String, Int64)] = [("net", r.net), ("commission", r.commission), ("proceeds", r.proceeds)]
        var amount = ""
        for (name, sign) in parts where sign != 0 {
            amount += (amount.isEmpty ? "" : " ") + (sign < 0 ? "-" : "+") + name
        }
        return "\(r.kind.rawValue) line \(r.line): \(r.account) \(amount.isEmpty ? "0" : amount)"
    }

    /// Each figure that differs, expected and stored (in the reporting currency too: a change
    /// to those alone showed the same net and commission twice).
    static func differences(expected a: SaleFigures, stored b: SaleFigures) -> String {
        let fields: [(String, String, String)] = [
            ("currency", a.currency, b.currency), ("gross", "\(a.grossMinor)", "\(b.grossMinor)"), ("tax", "\(a.taxMinor)", "\(b.taxMinor)"),
            ("net", "\(a.netMinor)", "\(b.netMinor)"), ("commission", "\(a.commissionMinor)", "\(b.commissionMinor)"),
            ("proceeds", "\(a.proceedsMinor)", "\(b.proceedsMinor)"), ("reporting currency", a.reportingCurrency, b.reportingCurrency),
            ("gross in \(a.reportingCurrency)", "\(a.grossReportingMinor)", "\(b.grossReportingMinor)"),
            ("net in \(a.reportingCurrency)", "\(a.netReportingMinor)", "\(b.netReportingMinor)"),
            ("commission in \(a.reportingCurrency)", "\(a.commissionReportingMinor)", "\(b.commissionReportingMinor)"),
            ("proceeds in \(a.reportingCurrency)", "\(a.proceedsReportingMinor)", "\(b.proceedsReportingMinor)"),
        ]
        return fields.filter { $0.1 != $0.2 }.map { "\($0.0) expected \($0.1), stored \($0.2)" }.joined(separator: "; ")
    }

    static func describe(_ p: [PostingDraft]) -> String {
        p.map { "\($0.account) \($0.amountMinor)/\($0.reportingAmountMinor)" }.joined(separator: ", ")
    }

    /// Re-reads the sale's first source record, re-verifies it, and recomputes the sale from
    /// that transaction and the rules recorded with the entry. Nil when it agrees.
    func rederiveSale(_ e: EntryDraft, reader: LedgerReader, verifiers: RunVerifiers, config: WorkspaceConfig) throws -> String? {
        let obs: TransactionObservation, where_: String
        switch try firstSourceAgrees(e.transactionId, entry: e, reader: reader, verifiers: verifiers) {
        case .success(let agreed): (obs, where_) = (agreed.observation, agreed.where_)
        case .failure(let why): return why.description
        }

        let r = e.rules
        // Where it was booked: the transaction's own storefront, else an order's that names it,
        // else the default (checked against the run's kept config with the other rules).
        if e.storefront != r.storefront { return "booked in \(e.storefront), but its recorded rules say \(r.storefront)" }
        if let own = obs.storefront, !own.isEmpty {
            let code = Currency.isoUppercased(own)
            if r.storefront != code || r.storefrontSource != "transaction" {
                return "booked in \(r.storefront) (\(r.storefrontSource)), but \(where_) gives the transaction its own storefront, \(code), which it is booked in"
            }
        } else if r.storefrontSource.hasPrefix("order ") {
            let orderId = String(r.storefrontSource.dropFirst(6))
            if try !reader.orderNamesStorefront(orderId: orderId, transactionId: e.transactionId, storefront: r.storefront) {
                return "booked in \(r.storefront) as order \(orderId)'s storefront, but no version of that order names this transaction with that storefront"
            }
        } else if r.storefrontSource == "transaction" {
            return "booked in \(r.storefront) as the transaction's own storefront, but \(where_) gives it none"
        }
        guard let taxRate = ExactDecimal(r.taxRate), let rate = ExactDecimal(r.commissionRate), let fx = ExactDecimal(r.fxRate),
              let exponent = Currency.exponent(e.figures.currency) else { return "its recorded rules cannot be read" }
        let gross: Int64
        if obs.isFreeTrial { gross = 0 }
        else if let milli = obs.priceMilliunits { gross = Currency.minorUnits(milliunits: milli, exponent: exponent) }
        else if let unitText = r.unitPrice, let unit = ExactDecimal(unitText),
                let unitMinor = Currency.minorUnits(ofMajor: unit, currency: e.figures.currency) { gross = unitMinor * obs.quantity }
        else { return "its recorded rules name no unit price" }
        let figures = Poster.figures(grossMinor: gross, currency: e.figures.currency, taxRate: taxRate, taxIncluded: r.taxIncluded,
                                     commissionRate: rate, fx: fx, reportingCurrency: e.figures.reportingCurrency)
        if figures != e.figures { return "re-derived from \(where_) and its recorded rules, the figures differ: \(Self.differences(expected: figures, stored: e.figures))" }
        let postings = PostingRule.postings(kind: .sale, figures: figures)
        if postings != e.postings { return "re-derived from \(where_) and its recorded rules, the postings differ: expected \(Self.describe(postings)), stored \(Self.describe(e.postings))" }
        return nil
    }

    /// Re-reads the transaction's first source record, re-verifies it, and compares what it
    /// gives with the stored transaction field by field (and with `entry`, the sale posted
    /// from it, if any): the transaction as the record gives it, and the record's place; or why not.
    func firstSourceAgrees(_ transactionId: String, entry e: EntryDraft?, reader: LedgerReader,
                           verifiers: RunVerifiers) throws -> Result<(observation: TransactionObservation, where_: String), Why> {
        guard let source = try reader.firstSourceRecord(of: transactionId) else {
            return .failure(Why("no stored source record brought this transaction"))
        }
        let where_ = "\(source.path):\(source.line)"
        let obs: TransactionObservation
        // A response of many items, verified for an earlier of its sales: not read again.
        let known = source.kind == "receipts" ? verifiedReceipts.known(source.recordId) : nil
        let raw = known == nil ? try reader.recordText(source.recordId) : ""
        let run = verifiers.forRun(source.runId)
        switch Self.observation(of: transactionId, kind: source.kind, path: source.path, raw: raw, receiptVerifier: run.receipts,
                                signedVerifier: run.signed, verifiedReceipt: known, keep: { verifiedReceipts.keep(source.recordId, $0) }) {
        case .success(let o): obs = o
        case .failure(let why): return .failure(Why("its source record \(where_) does not give the transaction again: \(why)"))
        }
        guard let stored = try reader.transaction(transactionId)?.observation else { return .failure(Why("the transaction is not stored")) }
        var differences = Self.differingFields(obs, stored)
        // The app it was bought in (a bundle id changed to another app's, or removed, went
        // unsaid; the column is the first schema's).
        if obs.bundleId != stored.bundleId { differences.append("bundle id") }
        var fromEntry: [String] = []
        if let e, obs.productId != e.productId { fromEntry.append("product") }
        if let e, Day(epochMilliseconds: obs.purchaseMs) != e.originalDate { fromEntry.append("date (the purchase date)") }
        if let e, obs.book != e.book { fromEntry.append("book") }
        if !differences.isEmpty || !fromEntry.isEmpty {
            let parts = (differences.isEmpty ? [] : ["from the stored transaction in \(differences.joined(separator: ", "))"])
                + (fromEntry.isEmpty ? [] : ["from its sale entry in \(fromEntry.joined(separator: ", "))"])
            return .failure(Why("its source record \(where_) differs \(parts.joined(separator: ", and "))"))
        }
        return .success((obs, where_))
    }

    /// A night of this very build records the fingerprint of the product rules and config it
    /// kept: another one there was written into the ledger (an auditor's review: a forged one,
    /// its seal made again, turned off the re-derivation of the exceptions, which had been
    /// edited by hand). Nil when it holds, or when another build ran the last night (whose
    /// logic may give another fingerprint: then a note says the check was not made).
    func reconciliationFingerprintForged(_ r: LedgerReader) throws -> String? {
        guard let last = try r.lastFinishedRun(),
              NightlyRun.sameProgram(version: try r.runVersion(last.id), runBuild: try r.runBuild(last.id)) else { return nil }
        var kept = RunRules()
        guard case .kept(let rules, let config) = try kept.rules(ofRun: last.id, reader: r) else { return nil }
        let fingerprint = Reconciler(products: rules.products, scope: config.reconciliationScope).rulesFingerprint
        let recorded = try r.reconciliationRules(ofRun: last.id)
        guard recorded != fingerprint else { return nil }
        return "the last night (run \(last.id)) ran this build of iapledger, whose reconciliation of the product rules and config that night kept has the fingerprint \(fingerprint), but the ledger records \(recorded ?? "none") for it: changed in the ledger, which turns off this re-derivation of the exceptions and matches"
    }

    /// The reconciliation the ledger holds (open exceptions, their figures, matched pairs) is
    /// the one its transactions and orders give, by the product rules and scope the last night
    /// reconciled by (as kept): an exception resolved, changed or made up by hand, or a match,
    /// passed `verify` (the triggers let a night's run resolve exceptions: a run made up and
    /// removed again past its trigger let anyone). Left to the next night, and said, when the
    /// last one reconciled by other rules or another version's logic.
    func checkReconciliation(_ r: LedgerReader, into report: inout Report) throws {
        guard let last = try r.lastFinishedRun() else { return }
        var kept = RunRules()
        guard case .kept(let rules, let config) = try kept.rules(ofRun: last.id, reader: r) else {
            report.notes.append("the reconciliation was not derived again: the ledger does not keep the rules and config the last night (run \(last.id)) reconciled by (a ledger from before schema v26, or they cannot be read)")
            return
        }
        let reconciler = Reconciler(products: rules.products, scope: config.reconciliationScope)
        guard try r.reconciliationRules(ofRun: last.id) == reconciler.rulesFingerprint else {
            // (One this build would have recorded is named by `reconciliationFingerprintForged`.)
            report.notes.append("the reconciliation was not derived again: the last night (run \(last.id)) reconciled by other product rules or another version's logic (the next night reconciles every group again)")
            return
        }
        let (said, count, derived) = try r.reconciliationDifferences(reconciler, defaultStorefront: config.defaultStorefront)
        report.reconciliation = derived
        for m in said { report.problems.append(Problem(entryId: nil, message: m)) }
        if count > said.count {
            report.problems.append(Problem(entryId: nil, message: "and \(count - said.count) more differences between the reconciliation the ledger holds and the one its transactions and orders give"))
        }
    }

    /// Each sale waiting for a rule waits for the reason the config and rules the last night
    /// posted by give it (as kept), when that night ran this build of iapledger: a night tries
    /// such a sale again only when what decides it changed, so a reason written by hand (a sale
    /// that would post, said to wait) would keep it waiting for ever. Another build may decide
    /// otherwise: then the check is left to the next night, which tries them all, and said.
    func checkWaitingForRule(_ r: LedgerReader, into report: inout Report) throws {
        guard let last = try r.lastFinishedRun() else { return }
        guard NightlyRun.sameProgram(version: try r.runVersion(last.id), runBuild: try r.runBuild(last.id)) else {
            report.notes.append("the sales waiting for a rule were not decided again: the last night (run \(last.id)) ran another build of iapledger, whose rules of posting may differ (the next night tries every one again)")
            return
        }
        guard case .kept(let rules, let config) = try RunRules.load(try r.runFiles(last.id), reader: r) else { return }
        let poster = Poster(config: config, rules: rules)
        var wrong: [String] = [], count = 0
        try r.forEachPendingSaleBatch { batch in
            for (t, orderStorefront) in batch {
                // What it waits for, whichever the reason says: a wait for its order written over
                // a missing rule passed (trace and the Pending sheet told the wrong cause).
                guard let reason = t.pendingReason else { continue }
                let obs = t.observation
                let decided: String
                switch NightlyRun.PreparedSales.decide(obs, orderStorefront: orderStorefront, paidDays: 0, poster: poster, asOf: last.asOf) {
                case .missingRule(let why) where "MISSING_RULE: \(why)" == reason: continue
                case .awaitingOrder(let why) where "ORDER_WAIT: \(why)" == reason: continue
                case .missingRule(let why): decided = "another reason: MISSING_RULE: \(why)"
                case .awaitingOrder(let why): decided = "a wait for its order: \(why)"
                case .post, .free: decided = "it a sale to post"
                }
                count += 1
                if wrong.count < 20 { wrong.append("transaction \(obs.transactionId) waits (\(reason)), but the config and rules run \(last.id) posted by give \(decided)") }
            }
        }
        for w in wrong {
            report.problems.append(Problem(entryId: nil, message: w + ": its reason was written by hand (a night tries a sale waiting for a rule again only when what decides it changed, so it could wait for ever; trace and the Pending sheet tell the reason written)"))
        }
        if count > wrong.count {
            report.problems.append(Problem(entryId: nil, message: "... and \(count - wrong.count) more waiting sales with a reason the config and rules do not give"))
        }
    }

    /// The indexes queries name (`INDEXED BY`): without one, those queries fail.
    static let indexesNamedByQueries: Set<String> = [
        "order_version_transaction", "source_record_open", "source_record_unverified_order", "source_record_unverified_sha256",
        "store_transaction_free", "store_transaction_pending_order", "store_transaction_refunds",
    ]

    /// What a schema object (`trigger period_close_no_delete`, `index ...`) enforces, said
    /// when it is missing.
    /// What a dropped schema object (`key`: its type and name; `sql`: as created) stopped
    /// enforcing. A trigger by its name; an index by its own SQL (an auditor's review: each
    /// dropped index was said to enforce what its table's triggers do).
    static func enforced(by key: String, sql: String = "") -> String {
        let name = key.split(separator: " ").last.map(String.init) ?? key
        if key.hasPrefix("index") {
            // The column list: from the first parenthesis to the one that closes it.
            var columns = "", depth = 0
            for c in sql.drop(while: { $0 != "(" }) {
                if c == "(" { depth += 1; if depth == 1 { continue } }
                if c == ")" { depth -= 1; if depth == 0 { break } }
                columns.append(c)
            }
            if sql.uppercased().hasPrefix("CREATE UNIQUE INDEX") {
                return "what it enforces (a unique key: no two rows with the same \(columns)) was not enforced while it was gone"
            }
            // Named by the queries that use it (a diff review: said to be only slower, while
            // the nights and these checks stopped at "no such index").
            if Self.indexesNamedByQueries.contains(name) {
                return "the nights' and these checks' queries that name it (by \(columns)) stop at \"no such index\" until it is made again (it enforces nothing: no figure depends on it)"
            }
            return "the lookups by \(columns) that it serves are slow until it is made again (it enforces nothing: no figure depends on it)"
        }
        guard key.hasPrefix("trigger") else { return "what it enforces was not enforced while it was gone" }
        let rules: [(prefix: String, what: String)] = [
            ("entry_not_in_closed_period", "that no entry is dated in a closed month"),
            ("entry_late_is_moved_forward", "that a late entry is moved to the first open month"),
            ("entry_", "that entries are append-only (never changed or deleted)"),
            ("posting_rule_", "that the posting rules never change"),
            ("posting_", "that postings are never changed or deleted"),
            ("period_close_", "that closed months stay closed (closes forward only, never changed or deleted)"),
            ("run_input_", "that the rules and config a run posted by are recorded once"),
            ("run_", "that finished runs (their counts, chain head and close) are never changed or deleted"),
            ("source_record_resolved_once", "that a resolved source record stays resolved as it was"),
            ("source_record_", "that source records are kept as read (text, hash, outcome, reason) and never deleted"),
            ("source_chunk_", "that the records' stored text is never changed or deleted"),
            ("source_file_header_", "that an orders file's header is kept as read"),
            ("source_file_", "that the files read are recorded once (path, hash, counts) and never removed"),
            ("store_transaction_no_delete", "that stored transactions are never deleted"),
            ("order_version_", "that order versions are kept as read (a correction is a new version)"),
            ("reversal_request_", "that the refund reversals asked for are kept as their notifications asked for them"),
            ("notification_", "that the notifications read are kept as read"),
            ("seal_", "that seals are never changed or deleted"),
            ("exception_episode_", "that closed exception episodes are never changed or removed"),
            ("exception_", "that exceptions are resolved only by a night's reconciliation and never removed"),
            ("finding_dismissal_", "that dismissals are kept as asked and never withdrawn"),
            ("finding_", "that findings are resolved only by a night's run and never removed"),
            ("transaction_source_", "that a transaction's links to the records that told it are never changed or removed"),
            ("unverified_record_transaction_", "that a record's links to the transactions it names are never changed or removed"),
            ("record_dismissal_", "that dismissals are kept as asked and never withdrawn"),
            ("account_", "that accounts keep their names and are never removed"),
        ]
        if let r = rules.first(where: { name.hasPrefix($0.prefix) }) { return "what it enforces (\(r.what)) was not enforced while it was gone" }
        return "what it enforces was not enforced while it was gone"
    }

    /// Nil when the night would find the transaction free (a gross of zero: Poster's `.free`),
    /// otherwise what its gross is. A free trial or a family member's access is free; a signed
    /// price is free when it rounds to zero minor units of its currency (without a currency,
    /// of any: the fewest decimals); a transaction without a price of its own is free only
    /// under a price of 0 for its product in rules/prices.csv (which only a non-consumable may
    /// have) in force on its purchase day, in any storefront (its order's may have given it).
    static func whyNotFree(_ t: TransactionObservation, rules: () throws -> Rules) -> String? {
        if t.isFreeTrial { return nil }
        if let milli = t.priceMilliunits, let gross = t.ownGrossMinor {
            if gross == 0 { return nil }
            return "its signed price, \(milli) milliunits\(t.currency.map { " of \($0)" } ?? ""), is a gross of \(gross) minor unit\(gross == 1 ? "" : "s")"
        }
        let loaded: Rules
        do { loaded = try rules() } catch { return "it has no price of its own, and the rules that could price it 0 cannot be read (\(error))" }
        let prefix = t.productId + "|"
        let zero = loaded.prices.keys.contains { key in
            key.hasPrefix(prefix) && loaded.price(product: t.productId, storefront: String(key.dropFirst(prefix.count)), on: t.purchaseDay)?.price.isZero == true
        }
        return zero ? nil : "it has no price of its own and is no free trial, and rules/prices.csv prices \(t.productId) above 0 (or not at all) on \(t.purchaseDay) in every storefront"
    }

    /// Every transaction id a record's text names, as the night takes them from a record that
    /// does not verify: a receipt response's items and its wrapper's `transaction_id`; a signed
    /// record's payload (or its notification's transaction), unverified. None for an orders
    /// line, or a text that no longer reads.
    static func namedTransactionIds(kind: String, path: String, raw: String) -> Set<String> {
        // As the ledger gives a stored id back: up to a NUL in it (an id a record made up, "\0..."
        // read back as "").
        Set(namedIds(kind: kind, path: path, raw: raw).map { String($0.unicodeScalars.prefix { $0 != "\0" }) })
    }

    private static func namedIds(kind: String, path: String, raw: String) -> Set<String> {
        switch kind {
        case "receipts":
            guard let response = try? LegacyReceiptParser.parse(Substring(raw)) else { return [] }
            return Set(response.items.compactMap(\.transactionId) + (response.wrapperTransactionId.map { [$0] } ?? []))
        case "signed":
            let ext = (path as NSString).pathExtension.lowercased()
            guard let jws = Ingest.jws(in: RawRecord(line: 0, text: Substring(raw)), fileExtension: ext) else { return [] }
            return transactionIdTexts(ofCompactJWS: jws)
        default:
            return []
        }
    }

    /// Nil when a record of the transaction gives the store's last word kept beside it: for a
    /// reversal (share 0), a stored REFUND_REVERSED notification of the transaction signed that
    /// day (each notification row is checked against its record elsewhere); for a refund, a
    /// source record reporting it refunded that day at that share (the night takes a share of
    /// the day's refund from any record of that day). A word kept without its instant (a ledger
    /// from before v31 took it from a finding) needs that finding.
    func storeWordSupport(_ word: (transactionId: String, share: Int64, atMs: Int64?, said: Bool, reversalDays: [Day]),
                          reader: LedgerReader, verifiers: RunVerifiers) throws -> String? {
        let how = word.share == 0 ? "reversed again" : word.share == 100_000 ? "refunded in full" : "refunded \(ExactDecimal(mantissa: word.share, scale: 3))%"
        guard let ms = word.atMs else {
            return word.said ? nil : "the store's last word kept beside it (\(how), undated) is said by no finding of a second refund or reversal: it was written into the ledger, not read"
        }
        let day = Day(epochMilliseconds: ms)
        if word.share == 0 {
            if word.reversalDays.contains(day) { return nil }
            // One with no signedDate is dated as the night dated it: by its transaction's signed
            // date, else its purchase date (read again from the record, verified).
            for n in try reversalsRead(of: word.transactionId, reader: reader, verifiers: verifiers) {
                guard let notification = n.verified, notification.notificationType == "REFUND_REVERSED", notification.signedDateMs == nil,
                      let t = notification.transaction, t.transactionId == word.transactionId,
                      let ms = t.signedDateMs ?? t.purchaseDateMs, Day(epochMilliseconds: ms) == day else { continue }
                return nil
            }
            return "the store's last word kept beside it (\(how) on \(day)) is given by none of its REFUND_REVERSED notifications (\(word.reversalDays.isEmpty ? "none is stored" : "signed " + word.reversalDays.map(\.description).joined(separator: ", "))): it was written into the ledger, not read"
        }
        let read = try sourcesRead(word.transactionId, reader: reader, verifiers: verifiers) {
            $0.cancellationMs.map { Day(epochMilliseconds: $0) == day } == true && ($0.revocationPercentage ?? 100_000) == word.share
        }
        // Sources that no longer verify at all are reported with the sale they brought.
        if read.reports || (read.verified == 0 && read.sources > 0) { return nil }
        return "the store's last word kept beside it (\(how) on \(day)) is reported by none of its \(read.sources) source record\(read.sources == 1 ? "" : "s"): it was written into the ledger, not read"
    }

    /// The transaction's source records read and verified again, newest first, up to the first
    /// that reports it as `reports` asks: whether one does, how many sources it has, how many of
    /// those read give it again, and why each other one does not (`path:line: why`).
    func sourcesRead(_ transactionId: String, reader: LedgerReader, verifiers: RunVerifiers,
                     reports: (TransactionObservation) -> Bool) throws -> (reports: Bool, sources: Int, verified: Int, refused: [String]) {
        let sources = try reader.sources(of: transactionId)
        var verified = 0, refused: [String] = []
        for s in sources {
            let run = verifiers.forRun(s.runId)
            switch Self.observation(of: transactionId, kind: s.kind, path: s.path, raw: s.raw,
                                    receiptVerifier: run.receipts, signedVerifier: run.signed) {
            case .success(let o):
                verified += 1
                if reports(o) { return (true, sources.count, verified, refused) }
            case .failure(let why):
                refused.append("\(s.path):\(s.line): \(why)")
            }
        }
        return (false, sources.count, verified, refused)
    }

    /// Nil when a source record of the transaction reports its stored refund (the same date and
    /// percentage); otherwise why not.
    func refundSupport(_ refund: (transactionId: String, cancellationMs: Int64, percentage: Int64?), reader: LedgerReader,
                       verifiers: RunVerifiers) throws -> String? {
        let read = try sourcesRead(refund.transactionId, reader: reader, verifiers: verifiers) {
            $0.cancellationMs == refund.cancellationMs && $0.revocationPercentage == refund.percentage
        }
        if read.reports { return nil }
        let refused = read.refused
        // Sources that no longer verify at all are reported with the sale they brought.
        if read.verified == 0 && read.sources > 0 { return nil }
        // One that does not give the transaction again may be the one that brought the refund.
        // (Sources come newest first: the one quoted is the oldest of them.)
        if let oldest = refused.last {
            return "its stored refund (dated \(Day(epochMilliseconds: refund.cancellationMs))) is reported by none of its source records that give the transaction again; \(refused.count) do not (\(oldest))"
        }
        return "its stored refund (dated \(Day(epochMilliseconds: refund.cancellationMs))) is reported by none of its \(read.sources) source record\(read.sources == 1 ? "" : "s"): it was written into the ledger, not read"
    }

    /// Nil when a stored REFUND_REVERSED notification of the transaction verifies again as one
    /// (Apple's signature, its type and transaction); otherwise why not.
    func rederiveReversal(_ e: EntryDraft, reader: LedgerReader, verifiers: RunVerifiers) throws -> String? {
        let stored = try reversalsRead(of: e.transactionId, reader: reader, verifiers: verifiers)
        for n in stored {
            if let notification = n.verified, notification.notificationType == "REFUND_REVERSED", notification.notificationUUID == n.uuid,
               notification.transaction?.transactionId == e.transactionId { return nil }
        }
        return stored.isEmpty
            ? "no REFUND_REVERSED notification is stored for the transaction: the reversal was written by hand, or its notification's row was deleted"
            : "none of its \(stored.count) REFUND_REVERSED notification record\(stored.count == 1 ? "" : "s") verifies again as Apple's for this transaction"
    }

    /// The transaction's stored REFUND_REVERSED notification records, oldest first, each read
    /// as the night read it (its file's extension says how it holds its JWS) and verified again
    /// by the roots of the run that read it: `verified` nil when it no longer verifies as a
    /// notification.
    func reversalsRead(of transactionId: String, reader: LedgerReader, verifiers: RunVerifiers) throws -> [(uuid: String, verified: SignedNotification?)] {
        try reader.reversalNotifications(of: transactionId).map { n in
            let ext = (n.path as NSString).pathExtension.lowercased()
            guard let jws = Ingest.jws(in: RawRecord(line: 0, text: Substring(n.raw)), fileExtension: ext),
                  case .notification(.success(let notification)) = verifiers.forRun(n.runId).signed.verify(jws) else { return (n.uuid, nil) }
            return (n.uuid, notification)
        }
    }

    /// Receipt records of many transactions, verified once per `verify`: each of their sales
    /// re-derived read and parsed the whole record again (a response of 4,000 items took
    /// `verify` 110 s, of 16,000 more than 25 minutes). By record id, before its text is read;
    /// only records of many transactions, a few hundred at a time, each with its
    /// transactions by id.
    final class VerifiedReceipts: @unchecked Sendable {
        struct Verified { var outcome: ReceiptOutcome, byId: [String: Int] }
        private let lock = NSLock()
        private var kept: [Int64: Verified] = [:]
        func known(_ recordId: Int64) -> Verified? { lock.lock(); defer { lock.unlock() }; return kept[recordId] }
        static func verified(_ outcome: ReceiptOutcome) -> Verified {
            var byId: [String: Int] = [:]
            if case let .verified(_, transactions, _) = outcome {
                for (i, t) in transactions.enumerated() where byId[t.transactionId] == nil { byId[t.transactionId] = i }
            }
            return Verified(outcome: outcome, byId: byId)
        }
        func keep(_ recordId: Int64, _ v: Verified) {
            guard v.byId.count >= 16 else { return }
            lock.lock(); defer { lock.unlock() }
            if kept.count >= 256 { kept.removeAll(keepingCapacity: true) }
            kept[recordId] = v
        }
    }

    /// An order line read again under its file's header: by the rules now, else, when they
    /// refuse it, by the earlier id rules (a line an earlier build took).
    static func rereadAsTaken(_ raw: String, _ table: CSVTable) -> Result<OrderRecord, Finding>? {
        let read = OrderReader.reread(line: raw, table: table)
        guard case .failure? = read else { return read }
        return StoreBounds.withEarlierIdentifierRules { OrderReader.reread(line: raw, table: table) }
    }

    /// The transaction `id` as the stored raw record reports it, verified again; otherwise why not.
    /// A record whose ids the rules now refuse, which an earlier build took (the transaction is
    /// stored: a night took it), is read as that build read it.
    static func observation(of id: String, kind: String, path: String, raw: String, receiptVerifier: ReceiptVerifier,
                            signedVerifier: SignedDataVerifier, verifiedReceipt: VerifiedReceipts.Verified? = nil,
                            keep: ((VerifiedReceipts.Verified) -> Void)? = nil) -> Result<TransactionObservation, Why> {
        let read = observationNow(of: id, kind: kind, path: path, raw: raw, receiptVerifier: receiptVerifier, signedVerifier: signedVerifier,
                                  verifiedReceipt: verifiedReceipt, keep: keep)
        guard case .failure = read else { return read }
        let earlier = StoreBounds.withEarlierIdentifierRules {
            observationNow(of: id, kind: kind, path: path, raw: raw, receiptVerifier: receiptVerifier, signedVerifier: signedVerifier)
        }
        if case .success = earlier { return earlier }
        return read
    }

    static func observationNow(of id: String, kind: String, path: String, raw: String, receiptVerifier: ReceiptVerifier,
                               signedVerifier: SignedDataVerifier, verifiedReceipt: VerifiedReceipts.Verified? = nil,
                               keep: ((VerifiedReceipts.Verified) -> Void)? = nil) -> Result<TransactionObservation, Why> {
        switch kind {
        case "receipts":
            let verified: VerifiedReceipts.Verified
            if let known = verifiedReceipt {
                verified = known
            } else {
                let response: LegacyResponse
                do { response = try LegacyReceiptParser.parse(Substring(raw)) } catch { return .failure(Why("it no longer parses: \(error)")) }
                verified = VerifiedReceipts.verified(receiptVerifier.verify(response, location: SourceLocation(path: "", line: 0)))
                keep?(verified)
            }
            switch verified.outcome {
            case let .verified(_, transactions, findings):
                guard let t = verified.byId[id].map({ transactions[$0] }) else {
                    // A ledger written by an earlier version may hold an item this one refuses.
                    if let f = findings.first(where: { $0.transactionId == id }) {
                        return .failure(Why("this version of iapledger refuses its item (\(f.message)); an earlier version took it"))
                    }
                    return .failure(Why("it no longer names the transaction"))
                }
                return .success(t)
            case let .pending(code, reason, _), let .rejected(code, reason):
                return .failure(Why("it no longer verifies: \(code): \(reason)"
                    + (code == "WRONG_BUNDLE_ID" ? " (bundle_ids in iapledger.toml no longer lists the app it was verified for)" : "")))
            }
        case "signed":
            // Read as the nightly run reads it: the file's extension says how a record holds its JWS.
            let ext = (path as NSString).pathExtension.lowercased()
            guard let jws = Ingest.jws(in: RawRecord(line: 0, text: Substring(raw)), fileExtension: ext) else {
                return .failure(Why("it no longer holds a signed payload"))
            }
            let transaction: Result<SignedTransaction, Error>
            switch signedVerifier.verify(jws) {
            case .transaction(let r): transaction = r.mapError { $0 as Error }
            case .notification(let r):
                transaction = r.mapError { $0 as Error }.flatMap { n in
                    n.transaction.map { .success($0) } ?? .failure(Why("the notification carries no transaction"))
                }
            default: return .failure(Why("it is no longer a signed transaction or notification"))
            }
            switch transaction {
            case .failure(let e): return .failure(Why("it no longer verifies: \(e)"))
            case .success(let t):
                guard t.transactionId == id else { return .failure(Why("it no longer names the transaction")) }
                return t.observation().mapError { Why("its transaction no longer reads: \($0)") }
            }
        default:
            return .failure(Why("its file kind \(kind) is not one a transaction comes from"))
        }
    }

    /// What a verified record reports, read and verified again as the night did: its
    /// transactions' ids (none when it no longer verifies: the sale it brought says so), and
    /// for a notification its UUID, type, and the transaction, book and day a REFUND_REVERSED
    /// asks a reversal for (as the night dates it: the notification's signedDate).
    struct Reported {
        /// Each transaction as the record reports it.
        var transactions: [TransactionObservation] = []
        var notification: (uuid: String, type: String, transactionId: String?, book: Book?, day: Day?)? = nil
        /// The notification's row as the night stores it from this record (its first).
        var notificationRow: LedgerReader.StoredNotification? = nil
        /// The transaction id a notification names, valid or not (a night links a resent
        /// notification's record to it as it is).
        var namedTransactionId: String? = nil
        /// Whether the record verified again, and what the night stores beside it: the
        /// environment (a response's book, a signed transaction's, a notification's own) and a
        /// response's status and wrapper fields.
        var verifies = false
        var fields: LedgerReader.StoredRecordFields? = nil
    }

    static func reported(kind: String, path: String, raw: String, receiptVerifier: ReceiptVerifier,
                         signedVerifier: SignedDataVerifier) -> Reported {
        switch kind {
        case "receipts":
            guard let response = try? LegacyReceiptParser.parse(Substring(raw)),
                  case let .verified(book, transactions, _) = receiptVerifier.verify(response, location: SourceLocation(path: "", line: 0))
            else { return Reported() }
            // As the night stores a verified response's: its book's (an iOS 6 response of the
            // production service names none).
            return Reported(transactions: transactions, verifies: true,
                            fields: .init(environment: book == .production ? "Production" : "Sandbox", statusCode: response.status,
                                          accountId: response.accountId, orderId: response.orderId, receivedAt: response.receivedAt))
        case "signed":
            let ext = (path as NSString).pathExtension.lowercased()
            guard let jws = Ingest.jws(in: RawRecord(line: 0, text: Substring(raw)), fileExtension: ext) else { return Reported() }
            // A transaction that does not read as one (INVALID_TRANSACTION: out of bounds, no
            // purchase date) is refused by the night, as a refused item of a receipt is.
            var out = Reported()
            let t: SignedTransaction?
            switch signedVerifier.verify(jws) {
            case .transaction(.success(let v)):
                t = v
                out.verifies = true
                out.fields = .init(environment: v.environment)
            case .notification(.success(let n)):
                t = n.transaction
                out.verifies = true
                out.fields = .init(environment: n.environment)
                out.namedTransactionId = n.transaction?.transactionId
                let observed = t.flatMap { try? $0.observation().get() }
                out.notificationRow = .init(type: n.notificationType, subtype: n.subtype, signedMs: n.signedDateMs,
                                            environment: n.environment, transactionId: n.transaction?.transactionId)
                out.notification = (n.notificationUUID, n.notificationType, observed?.transactionId,
                                    t?.environment.flatMap(Book.init(storeEnvironment:)),
                                    t.map { Day(epochMilliseconds: n.signedDateMs ?? $0.signedDateMs ?? $0.purchaseDateMs ?? 0) })
            default: t = nil
            }
            guard let t, case .success(let o) = t.observation() else { return out }
            out.transactions = [o]
            return out
        default:
            return Reported()
        }
    }

    /// The rules and config each run posted by, as kept in the ledger, read once per distinct
    /// set of files.
    struct RunRules {
        enum Kept { case kept(Rules, WorkspaceConfig), notKept, unreadable(String) }
        private var byFiles: [String: Kept] = [:]
        private var byRun: [Int64: Kept] = [:]

        mutating func rules(ofRun runId: Int64, reader: LedgerReader) throws -> Kept {
            if let k = byRun[runId] { return k }
            // A ledger before v26 (opened read-only, not upgraded) kept no files, nor, before v22, their list.
            guard try reader.keepsInputTexts() else { byRun[runId] = .notKept; return .notKept }
            let files = try reader.runFiles(runId)
            let key = files.map { "\($0.path)=\($0.sha256)" }.joined(separator: "\n")
            let kept: Kept
            if let k = byFiles[key] { kept = k }
            else {
                kept = try Self.load(files, reader: reader)
                byFiles[key] = kept
            }
            byRun[runId] = kept
            return kept
        }

        static func load(_ files: [(path: String, sha256: String)], reader: LedgerReader) throws -> Kept {
            guard try reader.keepsInputTexts(), let config = files.first(where: { $0.path == "iapledger.toml" }) else { return .notKept }
            var texts: [String: [UInt8]] = [:]
            for f in files {
                guard let bytes = try reader.inputText(sha256: f.sha256) else { return .notKept }   // before v26 (or deleted: said apart)
                texts[f.path] = bytes
            }
            do {
                let c = try ConfigReader.parse(String(decoding: texts[config.path]!, as: UTF8.self), displayPath: "iapledger.toml (kept)")
                var rules: [String: [UInt8]] = [:]
                for (path, bytes) in texts where path.hasPrefix("rules/") { rules[String(path.dropFirst(6))] = bytes }
                return .kept(try RulesReader.parse(files: rules, displayPrefix: "rules/ (kept) ", checkCodes: false), c)
            } catch {
                return .unreadable("\(error)")
            }
        }
    }

    /// The `.xlsx` and `.csv.gz` files in the dated folders of `reports/` (hidden files and the
    /// copies a night keeps of a workbook edited before it replaced it aside) at paths no
    /// registration names, workspace-relative, sorted.
    /// The folders looked at: those iapledger registered a file in, and those dated on or after
    /// the first night that registered its own set (`nightDays`: the nights' as-of dates), a
    /// night stopped before it registered its files included. A set an earlier iapledger wrote,
    /// registering nothing, lies in a folder of its own dated before it (a night that first
    /// registers also writes the month before's set, in a folder dated earlier: the first
    /// registered folder's date alone flagged every set of the month before the upgrade).
    /// Excel's owner files (`~$name.xlsx`, there while one has it open) aside.
    static func unregisteredWorkbooks(under workspace: Workspace, registered: Set<String>, nightDays: Set<String>) -> [String] {
        let reports = workspace.root.appendingPathComponent("reports")
        let fm = FileManager.default
        var out: [String] = []
        let folders = Set(registered.compactMap { path -> String? in
            let parts = path.split(separator: "/")
            return parts.count == 3 && parts[0] == "reports" ? String(parts[1]) : nil
        })
        let firstNight = folders.intersection(nightDays).compactMap { Day(iso: $0) }.min()
        for day in ((try? fm.contentsOfDirectory(atPath: reports.path)) ?? [])
        where folders.contains(day) || (firstNight.flatMap { first in Day(iso: day).map { $0 >= first } } ?? false) {
            for name in ((try? fm.contentsOfDirectory(atPath: reports.appendingPathComponent(day).path)) ?? [])
            where !name.hasPrefix(".") && !Workspace.isOfficeLockFile(name) && !name.contains(".replaced-")
                && (name.hasSuffix(".xlsx") || name.hasSuffix(".csv.gz")) {
                let path = "reports/\(day)/\(name)"
                if !registered.contains(path) { out.append(path) }
            }
        }
        return out.sorted()
    }

    /// A refund copies its sale's product, storefront, applied rules and figures (the figures
    /// at its share), a reversal its refund's: trace tells them from the refund or reversal
    /// entry itself, so one rewritten there (its postings and hashes left agreeing) is named.
    static func copiedFieldsDiffer(_ e: EntryDraft, from source: EntryDraft, what: String) -> String? {
        var differ: [String] = []
        if e.productId != source.productId { differ.append("product \(e.productId) where \(what) has \(source.productId)") }
        if e.storefront != source.storefront { differ.append("storefront \(e.storefront) where \(what) has \(source.storefront)") }
        if e.figures != source.figures {
            let a = e.figures, b = source.figures
            differ.append("figures (gross, tax, net, commission, proceeds) \(a.grossMinor), \(a.taxMinor), \(a.netMinor), \(a.commissionMinor), \(a.proceedsMinor) \(a.currency) (\(a.grossReportingMinor), \(a.netReportingMinor), \(a.commissionReportingMinor), \(a.proceedsReportingMinor) \(a.reportingCurrency)) where \(what) gives \(b.grossMinor), \(b.taxMinor), \(b.netMinor), \(b.commissionMinor), \(b.proceedsMinor) \(b.currency) (\(b.grossReportingMinor), \(b.netReportingMinor), \(b.commissionReportingMinor), \(b.proceedsReportingMinor) \(b.reportingCurrency))")
        }
        if e.rules != source.rules {
            let fields = Self.ruleFields(e.rules), given = Self.ruleFields(source.rules)
            let named = zip(fields, given).filter { $0.0.value != $0.1.value }.map { "\($0.0.name) \"\($0.0.value)\" where \(what) has \"\($0.1.value)\"" }
            differ.append("applied rules differ: \(named.joined(separator: ", "))")
        }
        if e.kind == .refundReversal, e.refundPercentage != source.refundPercentage {
            differ.append("a share of \(e.refundPercentage.map(String.init) ?? "none") thousandths of a percent where \(what) has \(source.refundPercentage.map(String.init) ?? "none")")
        }
        return differ.isEmpty ? nil : differ.joined(separator: "; ") + ": written into the entry, not derived"
    }

    static func ruleFields(_ a: AppliedRules) -> [(name: String, value: String)] {
        [("storefront", a.storefront), ("storefront source", a.storefrontSource), ("storefront rule from", a.storefrontEffectiveFrom),
         ("tax rate", a.taxRate), ("tax", a.taxIncluded ? "included" : "added"), ("price source", a.priceSource),
         ("unit price", a.unitPrice ?? "none"), ("commission rate", a.commissionRate), ("commission reason", a.commissionReason),
         ("FX rate", a.fxRate), ("FX month", a.fxMonth)]
    }

    /// Nil when the rules a sale recorded are those `rules` and `config` give for it (its
    /// storefront's tax, its unit price and that price's row when the rules priced it, the
    /// month's rate, the commission rate and its reason for its day, product and the paid days
    /// it recorded); otherwise how not.
    static func recordedRulesDiffer(_ e: EntryDraft, rules: Rules, config: WorkspaceConfig) -> String? {
        let a = e.rules, day = e.originalDate
        var differ: [String] = []
        if a.storefrontSource == "default_storefront" && a.storefront.uppercased() != config.defaultStorefront.uppercased() {
            differ.append("booked in \(a.storefront) as default_storefront, which iapledger.toml set to \(config.defaultStorefront)")
        }
        if let sf = rules.storefront(a.storefront, on: day) {
            if sf.taxRate.description != a.taxRate || sf.taxIncluded != a.taxIncluded || sf.effectiveFrom.description != a.storefrontEffectiveFrom {
                differ.append("tax \(a.taxRate) (\(a.taxIncluded ? "included" : "added"), from \(a.storefrontEffectiveFrom)) where rules/storefronts.csv gives \(sf.taxRate) (\(sf.taxIncluded ? "included" : "added"), from \(sf.effectiveFrom)) for \(a.storefront) on \(day)")
            }
        } else {
            differ.append("rules/storefronts.csv has no row for \(a.storefront) in force on \(day)")
        }
        if let unit = a.unitPrice {
            let price = rules.price(product: e.productId, storefront: a.storefront, on: day)
            if price?.price.description != unit {
                differ.append("unit price \(unit) where rules/prices.csv gives \(price.map { "\($0.price)" } ?? "none") for \(e.productId) in \(a.storefront) on \(day)")
            } else if let price {
                // The price's provenance as trace tells it ("rules/prices.csv 0.99 USD from
                // 2026-09-01 x 1"): its row's date rewritten passed, the price being the same.
                // And the quantity it gives, the gross being the unit price times it.
                let said = "rules/prices.csv \(price.price) \(e.figures.currency) from \(price.effectiveFrom) x "
                let quantity = a.priceSource.hasPrefix(said) ? Int64(a.priceSource.dropFirst(said.count)) : nil
                let unitMinor = Currency.minorUnits(ofMajor: price.price, currency: e.figures.currency)
                if quantity == nil || unitMinor.map({ $0.multipliedReportingOverflow(by: quantity!) }).map({ $0.overflow || $0.partialValue != e.figures.grossMinor }) ?? true {
                    differ.append("price source \"\(a.priceSource)\" where rules/prices.csv gives \"\(said)<quantity>\" and the gross \(e.figures.grossMinor) minor units is that price times the quantity")
                }
            }
        } else {
            // A signed price as trace tells it ("signed price 5990 milliunits"), the gross; a
            // sale priced by no rule says nothing else.
            let text = a.priceSource
            let milli = text.hasPrefix("signed price ") && text.hasSuffix(" milliunits")
                ? Int64(text.dropFirst("signed price ".count).dropLast(" milliunits".count)) : nil
            let exponent = Currency.exponent(e.figures.currency) ?? 2
            if milli.map({ Currency.minorUnits(milliunits: $0, exponent: exponent) }) != e.figures.grossMinor
                && !(text == "free trial period" && e.figures.grossMinor == 0) {
                differ.append("price source \"\(text)\" where the sale's gross is \(e.figures.grossMinor) minor units of \(e.figures.currency), priced by no rule")
            }
        }
        let fx = rules.fxRate(currency: e.figures.currency, month: day.month, reportingCurrency: config.reportingCurrency)
        if fx?.description != a.fxRate || a.fxMonth != day.month.description {
            differ.append("rate \(a.fxRate) (\(a.fxMonth)) where rules/fx.csv gives \(fx.map { "\($0)" } ?? "none") for \(e.figures.currency) in \(day.month)")
        }
        if let product = rules.product(e.productId) {
            // The paid days of a subscription are the night's count (its chain), as recorded.
            let paid = Self.paidDays(inReason: a.commissionReason)
            let (rate, reason) = Poster(config: config, rules: rules).commissionRate(product: product, day: day, subscriptionPaidDays: paid)
            // The reason too, which trace tells: one rewritten beside the same rate passed.
            if rate.description != a.commissionRate || reason != a.commissionReason {
                differ.append("commission \(a.commissionRate) (\(a.commissionReason)) where iapledger.toml gives \(rate) (\(reason))")
            }
        } else {
            differ.append("rules/products.csv has no row for \(e.productId)")
        }
        return differ.isEmpty ? nil : differ.joined(separator: "; ")
    }

    /// The paid days a subscription's commission reason records ("... has 400 paid days ..."), 0 for none.
    static func paidDays(inReason reason: String) -> Int { recordedPaidDays(inReason: reason) ?? 0 }

    /// The paid days a commission reason records, or nil when it records none (a sale in a
    /// Small Business period, or not a subscription's).
    static func recordedPaidDays(inReason reason: String) -> Int? {
        guard let has = reason.range(of: "has "), let end = reason.range(of: " paid days", range: has.upperBound..<reason.endIndex) else { return nil }
        return Int(reason[has.upperBound..<end.lowerBound])
    }

    /// The fields in which a record's transaction `t` differs from the stored one `s`, its
    /// refund aside (storefront and currency codes compared in upper case when `codesIgnoringCase`).
    static func differingFields(_ t: TransactionObservation, _ s: TransactionObservation, codesIgnoringCase: Bool = false) -> [String] {
        func code(_ x: String?) -> String? { codesIgnoringCase ? x.map(Currency.isoUppercased) : x }
        var differ: [String] = []
        if t.productId != s.productId { differ.append("product") }
        if t.quantity != s.quantity { differ.append("quantity") }
        if t.purchaseMs != s.purchaseMs { differ.append("purchase date") }
        if t.book != s.book { differ.append("environment") }
        if t.priceMilliunits != s.priceMilliunits { differ.append("price") }
        if t.originalTransactionId != s.originalTransactionId { differ.append("original transaction") }
        if t.appAccountToken != s.appAccountToken { differ.append("app account token") }
        if t.expiresMs != s.expiresMs { differ.append("expiry date") }
        if code(t.storefront) != code(s.storefront) || code(t.currency) != code(s.currency) { differ.append("storefront or currency") }
        if t.isFreeTrial != s.isFreeTrial || t.hasOffer != s.hasOffer { differ.append("trial or offer") }
        return differ
    }

    /// Whether the night takes signed record `t` as the first of a transaction whose first
    /// reported neither storefront nor price (`earliest`), while its sale waits: the same book,
    /// product, quantity and purchase instant, and nothing else that differs as the night
    /// compares (`Ingest.otherDifferences`).
    static func takenOver(_ earliest: TransactionObservation, by t: TransactionObservation) -> Bool {
        earliest.book == t.book && earliest.productId == t.productId && earliest.quantity == t.quantity
            && earliest.purchaseMs == t.purchaseMs && Ingest.otherDifferences(earliest, t).isEmpty
    }

    /// Whether a record reports a transaction as the ledger stores it, field by field, its
    /// refund aside (stricter than the night's own comparison, so a record it took a refund or
    /// a reversal from is one this says agrees, never the reverse).
    static func reportsAsStored(_ t: TransactionObservation, _ s: TransactionObservation) -> Bool {
        differingFields(t, s, codesIgnoringCase: true).isEmpty
    }

    /// Why a stored record does not give its transaction again.
    struct Why: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }
}
