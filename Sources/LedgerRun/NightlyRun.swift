import CMalloc
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

    /// The open `WRONG_BUNDLE_ID` records whose bundle id (as their reason names it) is one
    /// `bundleIds` names now: the bundle ids, the records and their files.
    static func rejectedOfBundleIdsNowNamed(_ bundleIds: [String], reader: LedgerReader) throws -> (bundleIds: [String], records: Int, files: [String]) {
        let named = Set(bundleIds)
        var ids = Set<String>(), files: [String] = [], seen = Set<String>(), records = 0
        for r in try reader.openRejected(code: "WRONG_BUNDLE_ID") {
            // "receipt of another app: bundle id X, expected Y" (ReceiptVerifier), "... another
            // app (bundle id X); only data of ..." (signed data).
            guard let from = r.reason.range(of: "bundle id ")?.upperBound,
                  let to = [", expected ", "); only "].compactMap({ r.reason.range(of: $0, range: from..<r.reason.endIndex)?.lowerBound }).min(),
                  case let id = String(r.reason[from..<to]), named.contains(id) else { continue }
            ids.insert(id)
            records += 1
            if seen.insert(r.path).inserted { files.append(r.path) }
        }
        return (ids.sorted(), records, files)
    }

    public struct Result {
        public var runId: Int64
        public var asOf: Day
        public var counts: LedgerWriter.RunCounts
        public var filesRead: Int
        public var filesSkipped: Int
        public var totals: LedgerTotals
        /// The files of the night's sets, workbooks first (kept ones included).
        public var workbooks: [URL]
        /// Those of them kept as they were (a journal export unchanged since it was written).
        public var keptFiles: [URL] = []
        /// What was said of a workbook whose file before it was kept aside (its bytes were no
        /// version iapledger wrote there), by the workbook written.
        public var keptAsideNotes: [URL: String] = [:]
        /// The records this run read and could not post (still open at its end), then the
        /// first of the findings it opened (`MISSING_RULE`, `PRICE_MISMATCH`, ...; all of
        /// them are `newFindings`), one line each.
        public var problems: [String]
        /// How many findings this run opened (still open at its end), and how many of earlier
        /// runs it opened again (found again after they were resolved).
        public var newFindings = 0
        public var findingsReopened = 0
        /// How many records this run read and could not post (still open at its end), and how
        /// many of them `problems` lists (the first thousand; the rest of it are findings).
        public var problemRecords = 0
        public var problemRecordsListed = 0
        /// The records of `problems` by outcome and reason code ("pending RETRYABLE"), and its
        /// findings by code ("MISSING_RULE"), each with its count, the commonest first.
        public var recordCounts: [(key: String, count: Int)] = []
        public var findingCounts: [(key: String, count: Int)] = []
        /// Set when this run was a re-run of the last night that changed nothing: it recorded
        /// nothing and wrote the workbooks of that run (`runId`) again.
        public var nothingNewSinceRun: Int64? = nil
        /// Files under `inbox/` that are not read: not inputs by their names
        /// (`receipts.jsonl.gz`, `notes.txt`, with what the folder reads) or not in an input
        /// folder (with where inputs are read from): listed every night they stay.
        public var notRead: [String] = []
        /// Files in `rules/` the nights do not read (a rules file split in two, a copy kept
        /// beside it): named every night they stay, as the inbox's are, so that their rows are
        /// not left out without a word.
        public var rulesNotRead: [String] = []
        /// Files read before whose bytes changed since (a new version read), with how many of
        /// their records were new: lines added, or lines changed after they were read.
        public var changedFiles: [(path: String, newRecords: Int)] = []
        /// Files whose bytes are those of an earlier version than the one read last (a change
        /// undone in place): skipped, their rows standing as the later version left them.
        public var putBackFiles: [String] = []
        /// Files listed in the inbox that were gone (moved or removed) before the night read
        /// them: not read, read by the night they are back.
        public var goneFiles: [String] = []
        /// Orders a file read this night brought back to an earlier version's state (an old
        /// export sent again, not as a byte copy), or credited again after their reversal: each
        /// with its last row, and whether it undid the order's reversal.
        public var ordersBroughtBack: [(orderId: String, location: String, reversalUndone: Bool)] = []
        /// Signed records this run verified to a trusted root other than Apple Root CA - G3 (a
        /// test root, or a root that is not Apple's): by root, how many, and how many of them
        /// say they are production data (Apple signs those under its own root only).
        public var otherRoots: [(root: String, records: Int, production: Int)] = []
        /// Records rejected by earlier nights as of another app (`WRONG_BUNDLE_ID`), still open,
        /// whose bundle id the config's `bundle_ids` now names: a file read is not read again,
        /// so they stay rejected until a copy of their file is read (the operator is told how).
        public var rejectedOfBundleIdsNowNamed: (bundleIds: [String], records: Int, files: [String]) = ([], 0, [])
        /// Files read whose bytes a file read before under another name had (copied or renamed
        /// in the inbox): their records are stored again as theirs, nothing is posted twice.
        public var repeatedFiles: [(path: String, earlier: String, readOn: String)] = []
        /// Entries dated after the as-of date (a purchase or refund dated in the future of the
        /// night: posted, in none of its workbooks), and the latest of their dates.
        public var datedAfterAsOf: (count: Int, latest: Day?) = (0, nil)
        /// The month this run closed by the config's `closed_through` (nil when it closed
        /// none), and what those months' figures leave out, as `close` says it.
        public var closedByConfig: Month? = nil
        public var closeWarnings: [String] = []
        /// Reconciliation exceptions after the run: open (by category, the commonest first),
        /// opened by this run (new or reopened), and resolved by it.
        public var exceptions = ExceptionCounts()
        /// On the first night after a config or rules file changed: the posted sales the rules
        /// now book otherwise, added up by what differs (each an open `RULES_CHANGED` finding),
        /// and those they book as posted again; nil when no file changed or nothing differs.
        public var rulesChanged: (runId: Int64, lines: [String])? = nil
        /// Records an operator dismissed (`iapledger dismiss`) that this run resolved.
        public var recordsDismissed = 0
        /// Records of earlier nights pending or rejected that this run's data settled (a pending
        /// record verified by another, a cut line read whole, a refused order line corrected),
        /// dismissals aside.
        public var recordsSettled = 0
        /// Of the records this night read pending or rejected, those a later record of the
        /// same night settled.
        public var recordsSettledSameNight = 0
        /// The night's entries by kind, and its sales that had waited (summary line).
        public var posted = NightlyRun.Posted()
        /// Findings finance dismissed (`iapledger dismiss --finding`) that this run resolved.
        public var findingsDismissed = 0
        /// The workbooks of the night before that it never wrote (it stopped after its commit),
        /// by that night's date: said, with the command that writes them. `stale`: those in
        /// place as an earlier night of that date wrote them, which the last did not write again.
        public var setsMissing: [(day: Day, paths: [String], stale: [String], run: Int64, command: String)] = []
    }

    /// What an inbox folder reads, by extension.
    struct InboxFolder {
        var folder: String
        var extensions: Set<String>
        var described: String
        static let orders = InboxFolder(folder: "orders", extensions: ["csv"], described: "orders are *.csv")
        static let receipts = InboxFolder(folder: "receipts", extensions: ["json", "jsonl"],
                                          described: "receipt responses are *.json or *.jsonl")
        static let signed = InboxFolder(folder: "signed", extensions: ["jws", "txt", "json", "jsonl"],
                                        described: "signed data is *.jws, *.txt, *.json or *.jsonl")
        static let all = [orders, receipts, signed]
    }

    public let workspace: Workspace
    public let asOf: Day
    public var log: (String) -> Void
    /// Stage timings, and progress lines on a terminal.
    public var progress: RunProgress
    /// Called once the night is committed, before its workbooks are written, with its result
    /// but the files (`workbooks`, `keptFiles` empty; `totals.reportFilesHead` the head
    /// before them).
    public var committed: ((Result) -> Void)? = nil
    /// Called as soon as the night's transaction has committed, with its run id: before the
    /// reads that make its summary (which could still fail, a full disk's temp files), so that
    /// what happens after is told as after the commit.
    public var didCommit: ((Int64) -> Void)? = nil
    /// ` --workspace <folder>` for the commands its messages tell to run (the command's own).
    public var workspaceArgument = ""

    public init(workspace: Workspace, asOf: Day, progress: RunProgress = .silent, log: @escaping (String) -> Void = { _ in }) {
        self.workspace = workspace
        self.asOf = asOf
        self.progress = progress
        self.log = log
    }

    public func run() throws -> Result {
        CrashPoint.hit("start:run")
        let config = try workspace.loadConfig()
        // Without bundle ids every app's receipts would be taken as this one's revenue. (The
        // commands that only read the ledger do without.)
        guard !config.bundleIds.isEmpty else {
            throw ReadError.file(workspace.configURL.path, "bundle_ids: must name your app's bundle id (bundle_ids = [\"com.example.app\"]): receipts and signed data of any other app are rejected by it, and without it every app's would be posted as your revenue")
        }
        let rules = try workspace.loadRules()
        // A default storefront the rules do not know would leave every sale without a storefront
        // of its own waiting for a rule: one line here, instead of a finding for each.
        guard rules.storefronts[config.defaultStorefront] != nil else {
            throw ReadError.file(workspace.configURL.path, "default_storefront: \(config.defaultStorefront) has no row in rules/storefronts.csv, so every sale without a storefront of its own (and no order naming one) would wait for a rule: add its row, or name a storefront that has one")
        }
        let layouts = try workspace.loadLayouts()
        try workspace.checkReportsFolder()
        try workspace.checkSetFolders(asOf: asOf)
        let lock = try RunLock(url: workspace.lockURL)
        defer { lock.release() }
        CrashPoint.hit("start:locked")
        workspace.removeStaleTempFiles()

        try workspace.refuseForeignLedger(config)
        let ledgerURL = workspace.ledgerURL(config)
        let ledgerIsNew = !FileManager.default.fileExists(atPath: ledgerURL.path)
        let ledger = try workspace.openLedgerForWriting(config)
        // A first night refused before it commits leaves no ledger behind: it says nothing was
        // read or written (an operator's review: a folder named like an input left a ledger
        // file of empty tables).
        var nightCommitted = false
        defer { if ledgerIsNew && !nightCommitted { Self.removeUnusedLedger(ledger, at: ledgerURL) } }
        // A ledger changed by hand is not built on: what was changed would be carried into
        // every later night's books.
        try ledger.refuseWhenChangedByHand("a night")
        try workspace.refuseLedgerOlderThanReports(ledger, config: config)
        // Nights go forward: a run dated before the last one would age exceptions backwards and
        // could date entries after its own as-of date. The same date again is a re-run.
        if let last = try ledger.read({ try $0.lastAsOf() }), asOf < last {
            throw StoreError(message: "as-of date \(asOf) is before the last run's (\(last)): nights go forward; "
                + "an earlier day's workbooks are written by `iapledger report --as-of \(asOf)`, an earlier month's by `iapledger report --period YYYY-MM`")
        }
        // A night as of a closed month's day would post what it reads after that day (late, on
        // the first open day), into none of its own workbooks.
        let latestClose = try ledger.read { try $0.latestClose() }
        if let closed = latestClose, asOf <= closed.month.lastDay {
            throw PeriodError("as-of date \(asOf) is in a closed month: the books are closed through \(closed.month) (\(ClosedPeriods.describe(closed))); "
                + "nights run as of \(closed.month.next.firstDay) or later, and a closed month's workbooks are written again by `iapledger report --period \(closed.month)`")
        }
        try workspace.checkPreviousSetWritable(asOf: asOf, closedThrough: [config.closedThrough, latestClose?.month].compactMap { $0 }.max())
        let verifier = ReceiptVerifier(bundleIds: config.bundleIds)
        let roots = try Self.trustedRoots(config: config, workspace: workspace)
        let signedVerifier = try SignedDataVerifier(trustedRootsDER: roots.map(\.der), bundleIds: config.bundleIds, rootNames: roots.map(\.name))

        // A folder earlier nights read from must be there (a missing one is no empty night).
        let kindsRead = try ledger.read { try $0.fileKindsRead() }
        let orderFiles = try workspace.inboxFiles(InboxFolder.orders.folder, extensions: InboxFolder.orders.extensions, readBefore: kindsRead.contains("orders"))
        let receiptFiles = try workspace.inboxFiles(InboxFolder.receipts.folder, extensions: InboxFolder.receipts.extensions, readBefore: kindsRead.contains("receipts"))
        let signedFiles = try workspace.inboxFiles(InboxFolder.signed.folder, extensions: InboxFolder.signed.extensions, readBefore: kindsRead.contains("signed"))
        let notRead = workspace.unreadInboxFiles(InboxFolder.all.map { ($0.folder, $0.extensions, $0.described) })
        let inputFiles = orderFiles.map { ($0, "orders") } + receiptFiles.map { ($0, "receipts") } + signedFiles.map { ($0, "signed") }
        let totalBytes = inputFiles.reduce(0) { $0 + Self.fileSize($1.0) }
        let progress = self.progress
        // A status line left by a stage that failed (the commit) is cleared before the error.
        defer { progress.clearStatus() }
        var commitStart: UInt64 = 0
        var filesRead = 0, filesSkipped = 0
        var changedFiles: [(path: String, newRecords: Int)] = []
        var putBackFiles: [String] = []
        var goneFiles: [String] = []
        var ordersBroughtBack: [(orderId: String, location: String, reversalUndone: Bool)] = []
        var otherRoots: [(root: String, records: Int, production: Int)] = []
        var postedKinds = Posted()
        var closedThrough: Month? = nil
        var closedByConfig: Month? = nil
        var nothingNewSince: Int64? = nil
        var dismissed = 0, findingsDismissed = 0, findingsReopened = 0
        var rulesChanged: (runId: Int64, lines: [String])? = nil
        let (runId, counts) = try NothingNew.catching(&nothingNewSince) { try ledger.write { w -> (Int64, LedgerWriter.RunCounts) in
            let sameNight = try w.sameNight(asOf: asOf)
            let lastNight = try w.lastAsOf()
            let runId = try w.beginRun(asOf: asOf, toolVersion: Self.toolVersion, startedAt: Self.timestamp())
            // What the night posts by, fingerprinted as read (sealed with the run).
            try w.recordInputs(runId: runId, (config.sourceSHA256.map { [("iapledger.toml", $0)] } ?? [])
                                + rules.sourceSHA256.sorted { $0.key < $1.key }.map { ("rules/" + $0.key, $0.value) }
                                + roots.map { ("trusted root: " + $0.name, Hashing.sha256Hex($0.der)) }
                                // And the program that decides (its GNU build ID): a sale left waiting
                                // for a rule is tried again when another build runs.
                                + (BuildIdentity.current.map { [(LedgerReader.buildInput, $0)] } ?? []))
            // And the files themselves, once per distinct content (what `verify` checks the
            // entries' recorded rules against, and what the next night compares its rules with).
            for bytes in (config.sourceData.map { [$0] } ?? []) + rules.sourceData.values { try w.keepInputText(bytes) }
            // And the roots it verifies signed data to (their DER, under the fingerprint it
            // recorded): `verify` checks tonight's signed records again against them, whatever
            // trusted_roots names by then.
            for root in roots { try w.keepInputText([UInt8](root.der)) }
            // Findings finance dismissed since (booked by hand), first: the rules check below
            // then knows which corrections were booked (a rule undone the same night asks for
            // their reversal; checked before, the booking was lost).
            findingsDismissed = try w.applyFindingDismissals(runId: runId)
            let reconciler = Reconciler(products: rules.products, scope: config.reconciliationScope)
            try w.skipTouchedKeysIfReconcilingAll(reconciler, runId: runId)
            // Closed periods first: a config that would reopen a month stops the run here, and the
            // Poster dates entries by the effective closed-through month (the store checks it too).
            var postingConfig = config
            let closedBefore = try w.latestClose()?.month
            postingConfig.closedThrough = try ClosedPeriods.effective(
                configMonth: config.closedThrough, configPath: workspace.configURL.path, writer: w, asOf: asOf,
                lastNight: lastNight, closedAt: Self.timestamp(), closedBy: ClosedPeriods.currentUser())
            closedThrough = postingConfig.closedThrough
            closedByConfig = closedThrough != closedBefore ? closedThrough : nil
            let poster = Poster(config: postingConfig, rules: rules)
            var counts = LedgerWriter.RunCounts()
            var ingest = Ingest(writer: w, runId: runId, verifier: verifier, counts: counts)
            ingest.signedVerifier = signedVerifier
            // Files are read, hashed, split, parsed and verified on other threads (two where
            // there are two cores), a few files ahead; this thread only writes to the ledger,
            // in input order.
            let versionsRead = try w.filesRead()
            // A signed file read before that has changed (grown) is mostly records already
            // stored: their hashes go to the preparing threads, which verify only the others.
            var storedSigned: [String: Set<String>] = [:]
            for url in signedFiles {
                let path = workspace.relative(url)
                guard let versions = versionsRead[path] else { continue }
                let identity = FileStat.identity(url.path)
                if let identity, versions.statKeys[identity.key] != nil { continue }
                // Bytes read before under a new identity on disk (a workspace copied or restored)
                // are skipped unread: their records' hashes are not needed (a big file's take
                // a night with nothing new seconds and hundreds of megabytes). Hashed only at a
                // size read before: a file grown daily is not read once more for it.
                if let identity, versions.sizes.contains(identity.sizeBytes),
                   let (sha, _) = try? LineReader.hash(url.path), versions.sha256s.contains(sha) { continue }
                // (Not its lines cut short and still open: one that ends now is read again.)
                let before = try w.recordsReadBefore(path: path)
                storedSigned[path] = Set(before.hashes.keys).subtracting(before.cut)
            }
            let prepared = PreparedFiles(inputs: inputFiles, workspace: workspace, verifier: verifier,
                                         signedVerifier: signedVerifier, alreadyRead: versionsRead, storedSigned: storedSigned)
            defer { prepared.cancel() }
            try progress.stage("read, verify and store", total: totalBytes) { tick in
                var bytes = 0
                // In a function of its own, so that no copy of the file outlives it: the
                // thread that prepared the file frees it once it is given back.
                func store(_ handed: PreparedFiles.Handed) throws {
                    let file = try handed.item!.get()
                    let input = file.input
                    CrashPoint.hit("read:\(input.path)")
                    bytes += input.sizeBytes
                    if case .gone = file.body {
                        goneFiles.append(input.path)
                        return
                    }
                    if case .alreadyRead(let newStatKey) = file.body {
                        if newStatKey, let key = input.statKey { try w.rememberStatKey(key, path: input.path, sha256: input.sha256) }
                        filesSkipped += 1
                        if let latest = versionsRead[input.path]?.latestSHA256, latest != input.sha256 { putBackFiles.append(input.path) }
                        try ingest.resolveCutLines(file)
                        return
                    }
                    let before = ingest.counts.read
                    do {
                        try ingest.store(file)
                    } catch is Ingest.FileGone {
                        // A big file read by the writer itself, gone before it opened it.
                        goneFiles.append(input.path)
                        return
                    }
                    filesRead += 1
                    tick.done = bytes
                    tick.advance(by: ingest.counts.read - before)
                    // Read before with other bytes: a file changed after it was read (an orders
                    // file sent again with corrections, a signed file grown, or one edited).
                    if versionsRead[input.path] != nil { changedFiles.append((input.path, ingest.counts.read - before)) }
                }
                while let handed = prepared.next() {
                    try store(handed)
                    prepared.stored(handed)
                }
            }
            counts = ingest.counts
            ordersBroughtBack = ingest.ordersBroughtBack
            otherRoots = ingest.otherRoots.sorted { $0.key < $1.key }.map { ($0.key, $0.value.records, $0.value.production) }
            CrashPoint.hit("post:start")
            // The sales waiting to post that tonight tries (tonight's, those waiting for an
            // order, and those waiting for a rule unless nothing they wait for changed): the
            // percent's total.
            let toTry = try w.salesToTry(everyWaitingForRule: try Self.retryEveryWaitingSale(w, poster: poster))
            postedKinds = try progress.stage("post entries", total: toTry.count, unit: "transactions") { tick in
                try Self.post(writer: w, poster: poster, runId: runId, asOf: asOf, sales: toTry, tick: tick)
            }
            counts.entriesPosted = postedKinds.entries
            try ingest.openWaitingReversals()
            // The sales posted before against the rules now, once tonight's entries are in: a
            // refund posted tonight (a share of a sale refunded) is part of what is left to
            // correct (checked before reading, the finding said the sale's whole difference).
            rulesChanged = try RulesChanges.sinceLastNight(w, runId: runId, rules: rules, config: config, progress: progress).map { ($0.runId, $0.lines) }
            // Records an operator dismissed (`iapledger dismiss`) since: resolved with the ask.
            dismissed = try w.applyDismissals(runId: runId)
            CrashPoint.hit("reconcile:start")
            let matched = try progress.stage("reconcile", unit: "groups") { tick -> Int in
                try w.reconcile(reconciler, runId: runId, asOf: asOf, defaultStorefront: poster.config.defaultStorefront) { tick.advance(by: $0) }.matched
            }
            findingsReopened = w.findingsReopened
            // A re-run of the last night that changed nothing records nothing (rolled back, run row included).
            if let same = sameNight, filesRead == 0, counts.entriesPosted == 0, dismissed == 0, findingsDismissed == 0,
               try w.changedNothing(since: same, matched: matched) { throw NothingNew(lastRunId: same.lastRunId) }
            // The commit stage: the run's row and seal (LedgerSeal), then SQLite's commit.
            commitStart = DispatchTime.now().uptimeNanoseconds
            progress.status("commit: sealing the run and writing the ledger to disk")
            try w.finishRun(runId, counts: counts, finishedAt: Self.timestamp())
            CrashPoint.hit("commit:before")
            return (runId, counts)
        } }
        nightCommitted = true
        // Committed (or nothing new: the last night's as it stands): said before anything else
        // can fail, so that a failure from here on is not told as a night not written.
        progress.clearStatus()
        if nothingNewSince == nil { didCommit?(runId) }
        CrashPoint.hit("commit:after")
        if commitStart > 0 {
            progress.record(.init(name: "commit", seconds: Double(DispatchTime.now().uptimeNanoseconds - commitStart) / 1e9,
                                  count: 0, unit: "", peakBytes: RunProgress.peakResidentBytes()))
        }

        // The night's summary, as it stands at its commit: said (`committed`) before the
        // workbooks are written, so that a night stopped while writing them (SIGTERM from a
        // scheduler, the machine going down) has left its summary in the log all the same.
        let totals = try ledger.read { try $0.totals() }
        let datedAfter = try ledger.read { try $0.entriesDated(after: asOf) }
        // What this run read and could not post, as it stands at the end of the run.
        // Counted, and the first thousand listed (a file of a million bad lines is not read whole).
        let notPostedRecords = try ledger.read { try $0.openRecordProblems(.readBy(runId: runId), perCode: .max, total: 1000) }
        let notPosted = notPostedRecords.listed.map { "\($0.path):\($0.line): \($0.outcome): \($0.reason)" }
        // The findings it opened: counted by code and the first of them (a rules change may open
        // one for every posted sale: not read whole).
        let opened = try ledger.read { try $0.findingsOpened(byRun: runId, limit: 10) }
        let newFindings = opened.first.map { "\($0.code) \(StoreBounds.shownIdentifier($0.transactionId)): \($0.message)" }
        let problems = nothingNewSince == nil ? notPosted + newFindings : []
        var result = Result(runId: runId, asOf: asOf, counts: counts, filesRead: filesRead, filesSkipped: filesSkipped,
                      totals: totals, workbooks: [], problems: problems,
                      problemRecords: nothingNewSince == nil ? notPostedRecords.counts.reduce(0) { $0 + $1.count } : 0,
                      problemRecordsListed: nothingNewSince == nil ? notPosted.count : 0,
                      recordCounts: nothingNewSince == nil
                        ? notPostedRecords.counts.map { (key: "\($0.outcome) \($0.code)", count: $0.count) }
                            .sorted { $0.count != $1.count ? $0.count > $1.count : $0.key < $1.key } : [],
                      findingCounts: nothingNewSince == nil ? opened.counts.map { (key: $0.code, count: $0.count) } : [],
                      nothingNewSinceRun: nothingNewSince,
                      notRead: notRead, changedFiles: changedFiles, putBackFiles: putBackFiles, goneFiles: goneFiles, datedAfterAsOf: datedAfter, closedByConfig: closedByConfig,
                      closeWarnings: try closedByConfig.map { m in
                          try ledger.read { r in
                              ClosedPeriods.warnings(closing: m, waitingSales: try r.waitingSales(datedThrough: m.lastDay),
                                                     pendingRecords: try r.pendingRecordCountNow(),
                                                     creditsWithoutPurchase: try r.openCreditsWithoutPurchase(creditedThrough: m.lastDay))
                          }
                      } ?? [],
                      exceptions: try ledger.read { try $0.exceptionCounts(runId: runId) },
                      rulesChanged: rulesChanged)
        result.newFindings = nothingNewSince == nil ? opened.counts.reduce(0) { $0 + $1.count } : 0
        result.findingsReopened = nothingNewSince == nil ? findingsReopened : 0
        result.recordsDismissed = dismissed
        result.findingsDismissed = findingsDismissed
        if nothingNewSince == nil {
            result.recordsSettled = max(0, try ledger.read { try $0.recordsResolved(byRun: runId) } - dismissed)
            result.recordsSettledSameNight = try ledger.read { try $0.recordsReadAndSettled(byRun: runId) }
        }
        result.rulesNotRead = workspace.unreadRulesFiles()
        if nothingNewSince == nil { result.repeatedFiles = try ledger.read { try $0.filesRepeatingEarlierOnes(runId: runId) } }
        result.ordersBroughtBack = ordersBroughtBack
        result.otherRoots = otherRoots
        result.rejectedOfBundleIdsNowNamed = try ledger.read { try Self.rejectedOfBundleIdsNowNamed(config.bundleIds, reader: $0) }
        if nothingNewSince == nil { result.posted = postedKinds }
        committed?(result)

        // The month before, while it is still open, is written again as of its last day: late
        // data for it changes its books until it is closed. Both sets are written together,
        // independent workbooks in parallel.
        var sets = [try ReportSet(ledger: ledger, config: config, asOf: asOf, runId: runId, workspace: workspace, layouts: layouts)]
        let previous = asOf.month.previous
        if closedThrough.map({ previous > $0 }) ?? true, try ledger.read({ try $0.hasEntries(through: previous.lastDay) }) {
            CrashPoint.hit("report:previous month \(previous)")
            sets.append(try ReportSet(ledger: ledger, config: config, asOf: previous.lastDay, runId: nil, workspace: workspace, layouts: layouts))
        }
        // An earlier month still open whose set iapledger wrote before, and whose books have
        // entries posted since, dated in it or before it (a sale that waited for its rule; the
        // set's balances are cumulative): written again, so that no set under reports/ leaves
        // out what the ledger holds for it. Judged by the ledger as it stands, not by what this
        // night posted: a night stopped after its commit, run again, writes it too. A month
        // whose set was never written is left to `report --period`.
        let monthEndSets = try ledger.read { try $0.registeredMonthEndSets() }
        for day in monthEndSets
        where day.month < previous && closedThrough.map({ day.month > $0 }) ?? true {
            let behind = try ledger.read { r in
                try [("production", ReportWorkbook.finance), ("sandbox", ReportWorkbook.sandbox)].contains { book, workbook in
                    guard let last = try r.reportFiles(path: Workspace.workbookPath(workbook, asOf: day)).last else { return false }
                    return try r.anyEntryPosted(after: last, book: book, through: day)
                }
            }
            guard behind else { continue }
            CrashPoint.hit("report:earlier month \(day.month)")
            sets.append(try ReportSet(ledger: ledger, config: config, asOf: day, runId: nil, workspace: workspace, layouts: layouts))
        }
        // A closed month's set whose books' workbooks iapledger last wrote before the month was
        // closed says "still open" on every page and on Run Info: written again, closed, as
        // `close` writes it. That is a month the config closed (`closed_through`, recorded
        // tonight or by a night stopped after its commit), or one `close` closed and could not
        // write again in full (a full disk). Each of the two books' workbooks is judged (the
        // reconciliation workbook says nothing of the close: written again with the same bytes,
        // it is not registered again); one left behind by a write that failed part-way is
        // written with the set. Its figures are those it had: nothing is posted into a closed month.
        let closes = try ledger.read { try $0.periodCloses() }
        for day in monthEndSets where !sets.contains(where: { $0.asOf == day }) {
            guard let close = closes.first(where: { $0.month >= day.month }) else { continue }
            let behind = try ledger.read { r in
                try [ReportWorkbook.finance, .sandbox].contains { w in
                    guard let last = try r.reportFiles(path: Workspace.workbookPath(w, asOf: day)).last else { return false }
                    return try r.writtenBeforeClose(last, close)
                }
            }
            guard behind else { continue }
            CrashPoint.hit("report:closed month \(day.month)")
            sets.append(try ReportSet(ledger: ledger, config: config, asOf: day, runId: nil, workspace: workspace, layouts: layouts))
        }
        // The workbooks of the night before this one that it never wrote (it stopped after its
        // commit: killed, a full disk) and nothing wrote since: said, with the command that
        // writes them, instead of left missing without a word. Never written is missing and
        // never registered (a workbook moved away after it was written is registered).
        // (The last seven nights': one killed so after another is said too.) So are those in
        // place as an earlier night of that date wrote them, when the last night of the date
        // (a second night as of a day, stopped after its commit) wrote none of them again and
        // no `report` wrote them since it started: their books leave out that night's data.
        let written = Set(sets.map(\.asOf))
        result.setsMissing = try ledger.read { r in
            guard try r.registersReportFiles() else { return [] }
            var missing: [(day: Day, paths: [String], stale: [String], run: Int64, command: String)] = [], day = asOf
            for _ in 0..<7 {
                guard let before = try r.lastRun(onOrBefore: day + -1) else { break }
                day = before.asOf
                if written.contains(day) { continue }
                // To the second, as the run's start is kept (a registration's time has milliseconds).
                let started = String(try r.runStartedAt(before.id)?.prefix(19) ?? "")
                var paths: [String] = [], stale: [String] = []
                for path in ReportWorkbook.allCases.map({ Workspace.workbookPath($0, asOf: day) }) {
                    let registered = try r.reportFiles(path: path)
                    if registered.isEmpty {
                        if !FileManager.default.fileExists(atPath: workspace.root.appendingPathComponent(path).path) { paths.append(path) }
                    } else if !registered.contains(where: { $0.runId.map { $0 >= before.id } ?? ($0.writtenAt.prefix(19) >= started) }) {
                        stale.append(path)
                    }
                }
                if !paths.isEmpty || !stale.isEmpty {
                    missing.append((day, paths, stale, before.id, "iapledger report --as-of \(day)\(workspaceArgument)"))
                }
            }
            return missing
        }
        var files: [ReportFile] = []
        var workbooksFailed: Error? = nil
        do {
            // Which ledger writes reports/ (a night on another's ledger is refused).
            if let identity = try ledger.read({ try $0.identity() }) { try workspace.writeLedgerMarker(identity) }
            files = try ReportSet.write(sets, progress: progress)
            result.totals.reportFilesHead = try ReportFile.register(files, workspace: workspace, ledger: ledger, runId: runId) ?? result.totals.reportFilesHead
        } catch {
            // Those written whole before the failure are in place: registered all the same.
            if let partly = error as? SetsPartlyWritten {
                files = partly.written
                if let head = try? ReportFile.register(partly.written, workspace: workspace, ledger: ledger, runId: runId) {
                    result.totals.reportFilesHead = head
                }
            }
            // The ledger is committed; only files under reports/ are missing (none half-written).
            workbooksFailed = error
        }
        result.workbooks = files.map(\.url)
        result.keptFiles = files.filter(\.kept).map(\.url)
        for f in files { if let note = f.keptAsideNote { result.keptAsideNotes[f.url] = note } }
        if let workbooksFailed {
            throw WorkbooksNotWritten(result: result, message: "\(workbooksFailed)".replacingOccurrences(of: "\n", with: "; ")
                + "; the night's ledger is committed (run \(runId)) but its workbooks were not all written: fix the cause and run "
                + "`iapledger run --as-of \(asOf)\(workspaceArgument)` again, which writes them again (after a later night has run, `iapledger report --as-of \(asOf)\(workspaceArgument)` does)")
        }
        CrashPoint.hit("report:done")
        return result
    }

    /// Removes a ledger file this night created, when it holds no run (the night stopped
    /// before its commit), with SQLite's files beside it.
    static func removeUnusedLedger(_ ledger: Ledger, at url: URL) {
        // Read, and no run in it (a ledger that cannot be read is left as it is).
        let runs: Day?? = { do { return .some(try ledger.read { try $0.lastAsOf() }) } catch { return nil } }()
        guard case .some(.none) = runs else { return }
        for suffix in ["", "-journal", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: url.path + suffix)
        }
    }

    /// Tests set it to have every night try every sale waiting for a rule (to see that trying
    /// only those touched changes nothing but the nights' `finding.last_run_id`).
    nonisolated(unsafe) static var alwaysRetryEveryWaitingSale = false

    /// Whether tonight tries again every sale waiting for a rule, not only those its records
    /// touched: on the ledger's first night, when the config or a rules file differs from the
    /// ones the night before posted by (its `run_input`, as sealed), and when that night was
    /// run by another version of iapledger or schema, or another build of it (its GNU build
    /// ID; a build without one, every night). Otherwise each untouched one would be
    /// decided as the night before decided it, for the same reason (`salesToTry`).
    static func retryEveryWaitingSale(_ w: LedgerWriter, poster: Poster) throws -> Bool {
        guard let last = try w.lastFinishedRun() else { return true }
        var current: [String: String]? = nil
        if let configSHA = poster.config.sourceSHA256 {
            current = ["iapledger.toml": configSHA]
            for (name, sha) in poster.rules.sourceSHA256 { current?["rules/" + name] = sha }
        }
        var before: [String: String] = [:]
        for f in try w.runFiles(last.id) { before[f.path] = f.sha256 }
        return retryEveryWaitingSale(files: current, lastNightFiles: before, lastNightVersion: try w.runVersion(last.id),
                                     lastNightBuild: try w.runBuild(last.id))
    }

    /// `retryEveryWaitingSale` from the config and rules files tonight posts by (nil: not read
    /// from files), those the last night posted by, and the version and schema it ran with.
    static func retryEveryWaitingSale(files: [String: String]?, lastNightFiles: [String: String],
                                      lastNightVersion: (tool: String, newestSchema: Bool)?,
                                      build: String? = BuildIdentity.current, lastNightBuild: String?) -> Bool {
        guard !alwaysRetryEveryWaitingSale, let files, files == lastNightFiles else { return true }
        return !sameProgram(version: lastNightVersion, build: build, runBuild: lastNightBuild)
    }

    /// Whether a run with this version (and schema) and build was run by this program: this
    /// version, the newest schema, and this build (a program without a build ID is never known
    /// to be the same).
    static func sameProgram(version: (tool: String, newestSchema: Bool)?, build: String? = BuildIdentity.current, runBuild: String?) -> Bool {
        guard let version, let build else { return false }
        return version.tool == toolVersion && version.newestSchema && runBuild == build
    }

    /// Posts every sale still waiting that `sales` names (new ones, and those that waited for
    /// an order or a rule; every one when nil) and every refund that is due. Returns the number
    /// of entries written.
    static func post(writer w: LedgerWriter, poster: Poster, runId: Int64, asOf: Day, sales toTry: LedgerReader.SalesToTry? = nil,
                     tick: RunProgress.Ticker? = nil) throws -> Posted {
        var kinds = Posted()
        // Subscription chains read once per stage: posting changes no transaction a chain holds.
        var chains = SubscriptionChains()
        // Each batch of sales is decided, and its entries prepared (rules JSON, hashed text), on
        // a second thread while this one stores the batch before it. A decision is a pure
        // function of the sale, its order's storefront, its subscription's paid days (read here
        // first) and the rules; the batches are stored in the same order as one by one, so every
        // entry id and hash is the same.
        let preparing = DispatchQueue(label: "iapledger.post.prepare")
        var ahead: PreparedSales? = nil
        func store(_ batch: PreparedSales) throws {
            for ((t, _), decision) in zip(batch.sales, batch.decisions()) {
                tick?.advance()
                let id = t.observation.transactionId
                switch decision {
                case .post(let entry, let priceMismatch):
                    try w.insertEntry(entry, runId: runId, quantity: t.observation.quantity)
                    kinds.sales += 1
                    kinds.noteLate(entry.entry)
                    if entry.entry.rules.storefrontSource == "default_storefront" && entry.entry.book == .production { kinds.atDefaultStorefront += 1 }
                    // A sale that waited on an earlier night carries the reason it waited.
                    if let waited = t.pendingReason {
                        if waited.hasPrefix("MISSING_RULE:") { kinds.afterRuleWait += 1 } else if waited.hasPrefix("ORDER_WAIT:") { kinds.afterOrderWait += 1 }
                    }
                    if let priceMismatch {
                        try w.openFinding(code: "PRICE_MISMATCH", transactionId: id, recordId: nil, message: priceMismatch, runId: runId)
                    }
                    try w.setSaleStatus(transactionId: id, status: "posted", pendingReason: nil)
                    try w.resolveFinding(code: "MISSING_RULE", transactionId: id, runId: runId)
                    try w.resolveFinding(code: "ORDER_WAIT", transactionId: id, runId: runId)
                    CrashPoint.tick("post:sales", every: 10)
                case .free:
                    try w.setSaleStatus(transactionId: id, status: "free", pendingReason: nil)
                    try w.resolveFinding(code: "MISSING_RULE", transactionId: id, runId: runId)
                    try w.resolveFinding(code: "ORDER_WAIT", transactionId: id, runId: runId)
                case .missingRule(let why):
                    try waits(t, code: "MISSING_RULE", why, not: "ORDER_WAIT")
                case .awaitingOrder(let why):
                    // Not a missing rule: which rules apply waits for the storefront. Said as a
                    // finding too (open while it waits), so that Run Info lists it and a
                    // workbook written again for a date it waited on lists it as waiting then.
                    try waits(t, code: "ORDER_WAIT", why, not: "MISSING_RULE")
                }
            }
        }
        /// A sale still waiting, for what `code` says: its reason and open finding, and the
        /// finding of the other wait resolved (it waits for this one now).
        func waits(_ t: StoredTransaction, code: String, _ why: String, not other: String) throws {
            let id = t.observation.transactionId
            // Still waiting for the same thing (most nights): the row stays as it is.
            let reason = "\(code): \(why)"
            if t.pendingReason != reason {
                try w.setSaleStatus(transactionId: id, status: "pending", pendingReason: reason)
            }
            try w.resolveFinding(code: other, transactionId: id, runId: runId)
            try w.openFinding(code: code, transactionId: id, recordId: nil, message: why, runId: runId)
        }
        try w.forEachPendingSaleBatch(batchSize: postingBatchSize, of: toTry) { sales in
            let paidDays = try sales.map { try subscriptionPaidDays(of: $0.sale.observation, writer: w, poster: poster, chains: &chains) }
            let batch = PreparedSales(sales, paidDays: paidDays, poster: poster, asOf: asOf, on: preparing)
            if let before = ahead {
                try store(before)
                before.free(on: preparing)
            }
            ahead = batch
        }
        if let last = ahead {
            try store(last)
            last.free(on: preparing)
        }
        for t in try w.refundsDue() {
            let obs = t.observation
            guard let ms = obs.cancellationMs,
                  let sale = try w.entry(book: obs.book, transactionId: obs.transactionId, kind: .sale) else { continue }
            let refund = poster.refund(of: sale, on: Day(epochMilliseconds: ms), percentage: obs.revocationPercentage)
            try w.insertEntry(refund, runId: runId, quantity: obs.quantity)
            try w.resolveFinding(code: "REFUND_NOT_DATED", transactionId: obs.transactionId, runId: runId)
            kinds.refunds += 1
            kinds.noteLate(refund)
            CrashPoint.tick("post:refunds", every: 2)
        }
        for r in try w.reversalsDue() {
            guard let refund = try w.entry(book: r.book, transactionId: r.transactionId, kind: .refund) else { continue }
            let reversal = poster.reversal(of: refund, on: r.date)
            try w.insertEntry(reversal, runId: runId)
            try w.resolveFinding(code: "REVERSAL_WAITING", transactionId: r.transactionId, runId: runId)
            kinds.reversals += 1
            kinds.noteLate(reversal)
        }
        return kinds
    }

    /// The entries a night posted, by kind, and of its sales those that waited on an earlier
    /// night (for a rule, or for their order to name their storefront).
    public struct Posted: Equatable, Sendable {
        public var entries: Int { sales + refunds + reversals }
        public var sales = 0
        public var refunds = 0
        public var reversals = 0
        public var afterRuleWait = 0
        public var afterOrderWait = 0
        /// Production sales booked at `default_storefront`: no storefront of their own and no
        /// order naming one.
        public var atDefaultStorefront = 0
        /// Entries dated in a closed month, posted on the first open day instead (late), and
        /// the days they were posted on.
        public var late = 0
        public var lateOn: Set<Day> = []
        /// The closed months the late entries are dated in.
        public var lateFrom: Set<Month> = []

        mutating func noteLate(_ e: EntryDraft) {
            guard e.late else { return }
            late += 1
            lateOn.insert(e.date)
            lateFrom.insert(e.originalDate.month)
        }

        /// What the night's entries were, for its summary: sales (and of them those that had
        /// waited on an earlier night, for a rule or their order, and those booked at
        /// `default_storefront`), refunds, reversals; empty when there were none.
        /// - Parameters:
        ///   - workspace: the `--workspace` argument of the commands it names.
        ///   - setWritten: whether a month's set is under `reports/` (one never written is not
        ///     to write again).
        public func breakdown(workspace: String = "", setWritten: (Month) -> Bool = { _ in true }) -> String {
            guard entries > 0 else { return "" }
            var parts = ["\(sales) sale\(sales == 1 ? "" : "s")"]
            var waited: [String] = []
            if afterRuleWait > 0 { waited.append("\(afterRuleWait) that waited for a rule") }
            if afterOrderWait > 0 { waited.append("\(afterOrderWait) that waited for their order (its storefront, or the end of the wait: the default storefront)") }
            if !waited.isEmpty { parts[0] += ", of them " + waited.joined(separator: " and ") + " on an earlier night" }
            if atDefaultStorefront > 0 {
                parts[0] += ", \(atDefaultStorefront) booked at default_storefront (production; no storefront of their own, no order naming one)"
            }
            if refunds > 0 { parts.append("\(refunds) refund\(refunds == 1 ? "" : "s")") }
            if reversals > 0 { parts.append("\(reversals) refund reversal\(reversals == 1 ? "" : "s")") }
            // An operator reading the log learns of entries moved into the open month as the
            // workbooks say it (their Summary's late line, the Journal's mark).
            if late > 0 {
                // A closed month's set is no longer written by the nights: written when it
                // closed, it still says these wait (a finance review), until written again.
                let months = lateFrom.sorted().filter(setWritten)
                let commands = months.map { "`iapledger report --period \($0)\(workspace)`" }.joined(separator: ", ")
                let sets = months.isEmpty ? ""
                    : months.count == 1 ? "; a set of \(months[0]) written before they posted does not say them (a sale that waited is said to wait still): \(commands) writes it again, saying where they went"
                    : "; sets of \(months.map(\.description).joined(separator: ", ")) written before they posted do not say them (a sale that waited is said to wait still): \(commands) write them again, saying where they went"
                parts.append("\(late) of these dated in a closed month, posted late on \(lateOn.sorted().map(\.description).joined(separator: ", ")) (the Journal marks them, with their own dates)" + sets)
            }
            return " (" + parts.joined(separator: "; ") + ")"
        }
    }

    /// Pending sales read, decided and stored a batch at a time (tests set a small one to
    /// see that the batches, prepared ahead, change nothing).
    nonisolated(unsafe) static var postingBatchSize = 10_000

    /// One batch of pending sales and the decisions on them, made on the preparing queue as
    /// soon as the batch is created (`decisions()` waits for them).
    final class PreparedSales: @unchecked Sendable {
        enum Decision {
            case post(PreparedEntry, priceMismatch: String?)
            case free
            case missingRule(String)
            /// No storefront yet: it waits for an order to name one (the pending reason).
            case awaitingOrder(String)
        }
        private(set) var sales: [LedgerReader.PendingSale]
        private var made: [Decision] = []
        private let done = DispatchGroup()

        /// Frees the stored batch on the preparing queue (after the next batch's decisions):
        /// freeing 10,000 sales and their entries took the writer's thread about 4% of posting.
        func free(on queue: DispatchQueue) {
            queue.async { [self] in
                sales = []
                made = []
            }
        }

        init(_ sales: [LedgerReader.PendingSale], paidDays: [Int], poster: Poster, asOf: Day, on queue: DispatchQueue) {
            self.sales = sales
            queue.async(group: done) { [self] in
                made = zip(sales, paidDays).map { sale, paid in
                    Self.decide(sale.sale.observation, orderStorefront: sale.orderStorefront, paidDays: paid, poster: poster, asOf: asOf)
                }
            }
        }

        /// The decisions, in the order of `sales`, once made.
        func decisions() -> [Decision] {
            done.wait()
            return made
        }

        static func decide(_ t: TransactionObservation, orderStorefront: (code: String, orderId: String)?, paidDays: Int,
                           poster: Poster, asOf: Day) -> Decision {
            if let until = poster.orderWait(of: t, orderStorefront: orderStorefront, asOf: asOf) {
                return .awaitingOrder("""
                    no storefront of its own, and no order naming one yet: waits for an order until the night of \(until) \
                    (order_wait_days = \(poster.config.orderWaitDays)), then is booked at default_storefront \(poster.config.defaultStorefront)
                    """)
            }
            switch poster.sale(of: t, orderStorefront: orderStorefront, subscriptionPaidDays: paidDays) {
            case .post(let entry): return .post(PreparedEntry(entry), priceMismatch: poster.priceMismatch(of: t, entry: entry))
            case .free: return .free
            case .missingRule(let why): return .missingRule(why)
            }
        }
    }

    /// Days of paid service an auto-renewable subscription has before this purchase (the chain
    /// of its `original_transaction_id` in its book); 0 for every other product type.
    static func subscriptionPaidDays(of t: TransactionObservation, writer w: LedgerWriter, poster: Poster,
                                     chains: inout SubscriptionChains) throws -> Int {
        guard poster.rules.product(t.productId)?.type == .autoRenewable,
              let original = t.originalTransactionId, !original.isEmpty else { return 0 }
        let chain = try chains.chain(book: t.book, originalTransactionId: original) {
            try w.subscriptionChain(book: t.book, originalTransactionId: original)
                .map { SubscriptionTenure.ChainItem($0.observation, refundReversed: $0.refundReversed) }
        }
        return SubscriptionTenure.paidDays(before: t.purchaseMs, chain: chain, graceDays: poster.config.subscriptionGraceDays)
    }

    /// Subscription chains read during one posting stage (its sales come in purchase order, a
    /// chain's renewals months apart), at most `limit` of them: past it the cache starts over.
    struct SubscriptionChains {
        static let limit = 100_000
        /// Keyed by bytes, as SQLite compares ids (Swift's `==` equates canonically
        /// equivalent ids, which are different subscriptions).
        private var chains: [[UInt8]: [SubscriptionTenure.ChainItem]] = [:]

        mutating func chain(book: Book, originalTransactionId: String,
                            read: () throws -> [SubscriptionTenure.ChainItem]) rethrows -> [SubscriptionTenure.ChainItem] {
            let key = Array("\(book.rawValue) \(originalTransactionId)".utf8)
            if let chain = chains[key] { return chain }
            if chains.count >= Self.limit { chains.removeAll(keepingCapacity: true) }
            let chain = try read()
            chains[key] = chain
            return chain
        }
    }

    static func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// The verifier of signed data: Apple Root CA - G3 plus the config's `trusted_roots`.
    static func signedDataVerifier(config: WorkspaceConfig, workspace: Workspace) throws -> SignedDataVerifier {
        try SignedDataVerifier(trustedRootsDER: trustedRoots(config: config, workspace: workspace).map(\.der), bundleIds: config.bundleIds)
    }

    /// The roots signed data is verified to: Apple Root CA - G3 (built in), then the config's
    /// `trusted_roots`, each named and as DER (its SHA-256 is the certificate's fingerprint).
    static func trustedRoots(config: WorkspaceConfig, workspace: Workspace) throws -> [(name: String, der: Data)] {
        let read = try readTrustedRoots(config: config, workspace: workspace)
        if let first = read.unreadable.first { throw ReadError.file(first.path, "trusted_roots: \(first.why)") }
        return read.roots
    }

    /// `trustedRoots`, each that can be read, and those that cannot (their name in the config,
    /// their path, why): `verify` checks the runs that trusted another root all the same.
    static func readTrustedRoots(config: WorkspaceConfig, workspace: Workspace) throws
        -> (roots: [(name: String, der: Data)], unreadable: [(name: String, path: String, why: String)]) {
        var roots = [("Apple Root CA - G3 (built in)", try SignedDataVerifier.appleRootCAG3())]
        var unreadable: [(name: String, path: String, why: String)] = []
        for path in config.trustedRoots {
            let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : workspace.root.appendingPathComponent(path)
            do {
                roots.append((path, try SignedDataVerifier.loadCertificateFile(url)))
            } catch {
                unreadable.append((path, url.path, "\(error)"))
            }
        }
        return (roots, unreadable)
    }

    /// The current time as an ISO 8601 UTC timestamp (`2026-10-02T09:00:00Z`).
    public static func timestamp(milliseconds: Bool = false) -> String {
        let f = ISO8601DateFormatter()
        if milliseconds { f.formatOptions = [.withInternetDateTime, .withFractionalSeconds] }
        return f.string(from: Date())
    }
}

/// One input file, read whole and hashed.
struct InputFile {
    var url: URL
    var path: String
    var kind: String
    var sizeBytes: Int
    var sha256: String
    /// The file's identity on disk when it was read (`FileStat.key`), nil when it changed while being read.
    var statKey: String? = nil

    static func load(url: URL, kind: String, workspace: Workspace) throws -> (InputFile, Data) {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            // Said with what to do, by the system's reason for not opening it.
            let fd = open(url.path, O_RDONLY | O_CLOEXEC)
            if fd < 0 { throw ReadError.unreadableInput(url.path, code: errno) }
            close(fd)
            throw ReadError.file(url.path, "cannot be read: \(WriteAside.describe(error))")
        }
        return (InputFile(url: url, path: workspace.relative(url), kind: kind, sizeBytes: data.count,
                          sha256: Hashing.sha256Hex(data)), data)
    }
}

/// A file's records, split, hashed, parsed and (receipts) verified: everything that needs
/// no ledger, done off the writer's thread.
struct PreparedFile {
    enum Body {
        /// Not UTF-8 text: where its first byte that is not (line, byte offset).
        case notText(line: Int, offset: Int)
        /// Empty, or nothing but blanks.
        case empty
        /// Read by an earlier run (the same path and SHA-256): only hashed.
        /// Read before, unchanged. `newStatKey`: found by its hash, its identity on disk is new.
        case alreadyRead(newStatKey: Bool)
        /// A whole-file format (JSON document, CSV) past `maxWholeFileBytes`.
        case tooLarge
        /// Signed data: one JWS (or notification body) a line, or a `.json` document's elements,
        /// each verified.
        case signed([PreparedSigned])
        case orders(rows: [OrderRow], hashes: [String], texts: [RecordText], fileError: Finding?, text: String, header: String?)
        case receipts([PreparedReceipt])
        /// A line-based file (receipts or signed data) too big to hold prepared: the writer
        /// reads it itself, twice, a part at a time (`Ingest.lines`). `statKey` is its identity
        /// on disk before it was read, if settled.
        case lines(signed: Bool, statKey: String?)
        /// An orders file too big to hold parsed (`ordersAboveBytes`), read once through: its
        /// SHA-256, size and rows counted, its header read. The writer reads it again, a part of
        /// its rows at a time, through the same open file (`Ingest.orderRows`).
        case orderRows(OrderRowsRead)
        /// Listed, then gone before it could be read (moved or removed while the night ran).
        case gone
    }
    /// A big orders file read once through (`Body.orderRows`).
    struct OrderRowsRead {
        /// Open since it was read: read again as it was then, wherever it was moved meanwhile.
        var file: OpenFile
        var records: Int
        /// Rows not read from an earlier version of the same path; nil for a path read before
        /// (the writer counts them, against the hashes it has: the preparing thread has none).
        var fresh: Int?
        var header: String?
        /// Where the file leaves each order (`OrderFileEnds`), told by this first read; nil for
        /// a path read before (the writer tells it as it counts the new rows).
        var ends: Ingest.OrderFileEnds?
    }
    struct PreparedReceipt {
        var record: RawRecord
        var sha256: String
        var parsed: Result<(LegacyResponse, ReceiptOutcome), RecordProblem>
        /// The record's text as it is stored (compressed with its neighbours).
        var text: RecordText = ""
    }
    /// A signed-data record, hashed, its JWS found and verified (signature, chain, bundle).
    struct PreparedSigned {
        var record: RawRecord
        var sha256: String
        var jws: String?
        /// Nil when the record holds no JWS (or could not be read).
        var verdict: SignedVerdict?
        /// The record's text as it is stored (compressed with its neighbours).
        var text: RecordText = ""

        /// - Parameter stored: hashes of the records of this path the ledger has: such a record is
        ///   skipped by the writer, so it is not verified again.
        init(_ record: RawRecord, fileExtension ext: String, verifier: SignedDataVerifier, stored: Set<String>) {
            self.record = record
            sha256 = Hashing.sha256Hex(utf8: record.text)
            if stored.contains(sha256) {
                jws = nil
                verdict = nil
            } else {
                jws = Ingest.jws(in: record, fileExtension: ext)
                verdict = jws.map { verifier.verify($0) }
            }
        }
    }
    var input: InputFile
    var body: Body

    /// A JSON document or an orders CSV is read whole (a file past this size is one rejected
    /// record); JSON Lines and one-JWS-a-line files are read a chunk at a time, any size.
    static let maxWholeFileBytes = 512 << 20
    /// A `.json` document (receipts or signed data) is parsed whole, which takes three to five
    /// times its size: past this one it is one rejected record (JSON Lines are read a line at a
    /// time, any size). A hostile-input review saw a 472 MB document take the night to 1.4 GB.
    /// (Tests set a smaller one.)
    nonisolated(unsafe) static var maxJSONDocumentBytes = 64 << 20

    /// The most bytes a whole-file input of `kind` may have.
    static func maxWholeBytes(kind: String) -> Int { kind == "orders" ? maxWholeFileBytes : maxJSONDocumentBytes }

    /// Whether a file listed for the night is gone (moved or removed before it was read: a
    /// backend archiving its inbox while the night runs): not there tonight, as if never
    /// listed. (A link still there whose target is gone stops the night, as documented.) Its
    /// folder gone too (a share unmounted mid-night) is no empty night: an error.
    static func isGone(_ url: URL) throws -> Bool {
        var st = stat()
        guard url.path.withCString({ lstat($0, &st) != 0 && errno == ENOENT }) else { return false }
        let folder = url.deletingLastPathComponent()
        guard FileManager.default.fileExists(atPath: folder.path) else {
            throw ReadError.file(folder.path, "disappeared while the night read it (a share unmounted, or the folder moved?): restore it and run again")
        }
        return true
    }

    /// A line-based file of more records or bytes than these is not prepared whole ahead of the
    /// writer, but read by it a part at a time (`Body.lines`): a file of 1.1 million bad lines
    /// held 760 MiB prepared (about 700 bytes a record, whatever its length), and a file of
    /// long lines its own size and more. (Variables for the tests.)
    nonisolated(unsafe) static var linesAboveRecords = 100_000
    nonisolated(unsafe) static var linesAboveBytes = 64 << 20
    /// An orders file of more bytes than this is read by the writer a part of its rows at a time
    /// (`Body.orderRows`), not parsed whole ahead of it: parsed whole, an orders file takes about
    /// nine times its size (a file of a million rows, 147 MB, took its night to 1,367 MiB).
    nonisolated(unsafe) static var ordersAboveBytes = 16 << 20

    /// - Parameter pathReadBefore: a file of its path was read before (a big orders file's new
    ///   rows are then counted by the writer).
    static func prepare(url: URL, kind: String, workspace: Workspace, verifier: ReceiptVerifier,
                        signedVerifier: SignedDataVerifier, storedSigned: Set<String> = [], pathReadBefore: Bool = true) throws -> PreparedFile {
        let ext = url.pathExtension.lowercased()
        let path = workspace.relative(url)
        if kind == "receipts" && ext == "jsonl" || kind == "signed" && ["jsonl", "jws", "txt"].contains(ext) {
            let size = NightlyRun.fileSize(url)
            guard size <= linesAboveBytes, let read = try LineReader.read(url.path, maxRecords: linesAboveRecords) else {
                // Its SHA-256 and records are known once the writer has read it.
                return PreparedFile(input: InputFile(url: url, path: path, kind: kind, sizeBytes: size, sha256: ""),
                                    body: .lines(signed: kind == "signed", statKey: nil))
            }
            let input = InputFile(url: url, path: path, kind: kind, sizeBytes: read.sizeBytes, sha256: read.sha256)
            if read.records.isEmpty { return PreparedFile(input: input, body: .empty) }
            if kind == "signed" {
                return PreparedFile(input: input, body: .signed(withTexts(read.records.map {
                    PreparedSigned($0, fileExtension: ext, verifier: signedVerifier, stored: storedSigned)
                })))
            }
            return PreparedFile(input: input, body: .receipts(withTexts(read.records.map { prepareReceipt($0, path: path, verifier: verifier) })))
        }
        let size = NightlyRun.fileSize(url)
        if kind == "orders" && size > ordersAboveBytes && size <= maxWholeFileBytes {
            return try orderRows(url: url, path: path, kind: kind, readBefore: pathReadBefore)
        }
        if size > maxWholeBytes(kind: kind) {
            let (sha, size) = try LineReader.hash(url.path)
            return PreparedFile(input: InputFile(url: url, path: path, kind: kind, sizeBytes: size, sha256: sha), body: .tooLarge)
        }
        let (input, data) = try InputFile.load(url: url, kind: kind, workspace: workspace)
        if LineReader.isBlank(data, lineEnds: true, atFileStart: true) { return PreparedFile(input: input, body: .empty) }
        guard let text = String(validatingUTF8Data: data) else {
            let at = UTF8Position.firstInvalid(in: data) ?? (line: 1, offset: 0)
            return PreparedFile(input: input, body: .notText(line: at.line, offset: at.offset))
        }
        switch kind {
        case "orders":
            let (rows, fileError, header) = OrderReader.read(path: input.path, text: Substring(text))
            return PreparedFile(input: input, body: .orders(rows: rows, hashes: rows.map { Hashing.sha256Hex(utf8: $0.raw) },
                                                           texts: RecordText.chunked(rows.map(\.raw)), fileError: fileError, text: text,
                                                           header: header))
        case "receipts":
            return PreparedFile(input: input, body: .receipts(withTexts(RecordSplitter.jsonDocument(Substring(text)).map {
                prepareReceipt($0, path: path, verifier: verifier)
            })))
        default:
            return PreparedFile(input: input, body: .signed(withTexts(RecordSplitter.jsonDocument(Substring(text)).map {
                PreparedSigned($0, fileExtension: ext, verifier: signedVerifier, stored: storedSigned)
            })))
        }
    }

    /// A big orders file read once through, a chunk at a time: told as a file read whole is
    /// (blank, then not UTF-8, then refused by its header, else its rows), its rows counted (all
    /// new unless its path was `readBefore`), and left open for the writer to read again.
    static func orderRows(url: URL, path: String, kind: String, readBefore: Bool) throws -> PreparedFile {
        Ingest.readHook?("open", url)
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadError.unreadableInput(url.path, code: errno) }
        let file = OpenFile(fd)
        var rows = OrderReader.Rows(path: path)
        var records = 0
        // Counted, not stored: the writer reads each row again. For a path new to the ledger,
        // whose rows are all new, where the file leaves each order is told here too.
        var ends = Ingest.OrderFileEnds()
        let read = try CSVFile.forEachRow(url.path, descriptor: fd) { parsed in
            if readBefore {
                if rows.count(parsed) != nil { records += 1 }
            } else if let row = rows.orderAndText(parsed) {
                records += 1
                if let id = row.orderId, !row.endsFile, row.valid { ends.note(orderId: id, sha256: Hashing.sha256Hex(utf8: row.raw)) }
            }
        }
        _ = rows.finish()
        let input = InputFile(url: url, path: path, kind: kind, sizeBytes: read.sizeBytes, sha256: read.sha256)
        if read.blank { return PreparedFile(input: input, body: .empty) }
        if let at = read.notUTF8 { return PreparedFile(input: input, body: .notText(line: at.line, offset: at.offset)) }
        if let e = rows.fileError {
            return PreparedFile(input: input, body: .orders(rows: [], hashes: [], texts: [], fileError: e,
                                                           text: try CSVFile.head(url.path, descriptor: fd, characters: 4096), header: nil))
        }
        return PreparedFile(input: input, body: .orderRows(OrderRowsRead(file: file, records: records, fresh: readBefore ? nil : records,
                                                                         header: rows.header, ends: readBefore ? nil : ends)))
    }

    /// The records with their texts as stored: compressed together, a chunk of neighbours at a time.
    /// (The array is taken over, not copied: a day of receipts is set in place.)
    static func withTexts<R: PreparedRecord>(_ records: consuming [R]) -> [R] {
        let texts = RecordText.chunked(records.map(\.record.text))
        var out = consume records
        for i in out.indices { out[i].text = texts[i] }
        return out
    }

    static func prepareReceipt(_ record: RawRecord, path: String, verifier: ReceiptVerifier) -> PreparedReceipt {
        let parsed: Result<(LegacyResponse, ReceiptOutcome), RecordProblem>
        if let problem = record.problem {
            parsed = .failure(RecordProblem(code: problem.code, reason: problem.reason))
        } else {
            do {
                let response = try LegacyReceiptParser.parse(record.text)
                parsed = .success((response, verifier.verify(response, location: SourceLocation(path: path, line: record.line))))
            } catch {
                // JSON that ends before it is complete, on a last line with no line end: cut short.
                // So is one that ends inside a string, an object or an array, whatever the parser
                // met first (a `.json` document cut inside a string, a line end after the cut,
                // met a control character in a string, and was MALFORMED for good).
                let why = (error as? LegacyParseError)?.description ?? "\(error)"
                parsed = .failure(record.unterminated && (why.contains("end of input") || why.contains("truncated") || RecordSplitter.endsInside(record.text))
                                  ? RecordProblem(code: "TRUNCATED", reason: RawRecord.truncatedReason(why))
                                                                                     : RecordProblem(code: "MALFORMED", reason: why))
            }
        }
        return PreparedReceipt(record: record, sha256: Hashing.sha256Hex(utf8: record.text), parsed: parsed)
    }
}

/// Parts made on one thread and taken, in order, on another: at most `capacity` wait.
final class Handoff<Part>: @unchecked Sendable {
    private let condition = NSCondition()
    private var parts: [Part] = []
    private var finished = false
    private var failure: Error?
    private var cancelled = false
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Hands a part over, once there is room; false when the taker has given up (stop).
    func put(_ part: Part) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while parts.count >= capacity && !cancelled { condition.wait() }
        guard !cancelled else { return false }
        parts.append(part)
        condition.broadcast()
        return true
    }

    /// No more parts (the maker's error, if it failed).
    func finish(_ error: Error?) {
        condition.lock()
        finished = true
        failure = error
        condition.broadcast()
        condition.unlock()
    }

    /// The next part; nil once the maker has finished; its error if it failed.
    func next() throws -> Part? {
        condition.lock()
        defer { condition.unlock() }
        while parts.isEmpty && !finished { condition.wait() }
        if !parts.isEmpty {
            condition.broadcast()
            return parts.removeFirst()
        }
        if let failure { throw failure }
        return nil
    }

    /// The taker gives up: the maker's next `put` is refused.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for the maker to finish.
    func waitFinished() {
        condition.lock()
        while !finished { condition.wait() }
        condition.unlock()
    }
}

/// A file left open by the thread that read it, for another to read again; closed once no one
/// holds it (stored, or the night given up).
final class OpenFile: @unchecked Sendable {
    let descriptor: Int32
    init(_ descriptor: Int32) { self.descriptor = descriptor }
    deinit { close(descriptor) }
}

/// A prepared receipt or signed record: the record read and its text as it is stored.
protocol PreparedRecord {
    var record: RawRecord { get }
    var text: RecordText { get set }
}
extension PreparedFile.PreparedReceipt: PreparedRecord {}
extension PreparedFile.PreparedSigned: PreparedRecord {}

/// Why a record could not be read (rejected with this code and reason).
struct RecordProblem: Error {
    var code: String
    var reason: String
}

/// The input files prepared on other threads, handed over in order. Every file is prepared
/// on its own (what is known before the run began, its versions read and the hashes of its
/// signed records stored, is all it depends on), so files are prepared side by side: the first
/// thread takes the first file no thread took, the others the first small one (under
/// `aheadBytes`) no thread took, past the big ones they leave to the first. A thread starts on
/// a file only while fewer than `ahead` files are taken and not yet handed over, and under
/// `aheadBytes` of input is taken (being prepared, or prepared and queued): the first thread
/// counts every file taken, the others the small ones alone (so that they go on past a big
/// file the first thread holds); a file skipped by its identity on disk counts nothing. The
/// file the writer waits for is always being prepared or ready. Memory holds a few files, not the whole inbox: the one being stored and those taken
/// (a prepared day of receipts takes a few times its size; with days over `aheadBytes`, the
/// one being stored, the next, and a few small files beyond them).
///
/// Two threads, because the read stage is bound in turns by the writer (a day of receipts is
/// slower to store than to prepare) and by the preparing (signed data, whose signatures take
/// longer to check than their records to store, and orders): with one, the writer's thread
/// waited for a third of the read stage of a 300,000-transaction night on a 2-core machine;
/// with two, the second core prepares the smaller files beside the first, and while the first
/// prepares a run of big days (a night's receipts, in input order between its orders and its
/// signed files), the second prepares the small files after them (at 1M, 5-12% off night 2's
/// read stage, with 15 MiB more at its peak). Big files (`aheadBytes` or more: a night's days
/// of receipts) are taken by both threads, at most one each ahead of the writer: once the
/// writer's own work per record had shrunk, it waited half the read stage of a
/// million-transaction night 1 on the one thread that prepared them (read stage 25 s to 23 s,
/// peak 5 to 14 MiB more, with the arenas trimmed after each big file, see `freeStored`; an
/// earlier try of both threads taking any file had cost 70 MiB).
///
/// A file is handed over in a `Handed` box, which the writer gives back (`stored`) once the
/// file is stored: the thread that prepared it, which allocated its parsed records, frees
/// them before it starts on its next file. Freeing the parsed days took the writer's thread
/// about a second per 300,000 transactions, and freeing memory allocated by another thread
/// contends for its arena. Files given back while their thread prepares one wait for it to
/// finish that file.
final class PreparedFiles: @unchecked Sendable {
    /// A prepared file handed to the writer, until it gives it back.
    final class Handed {
        fileprivate(set) var item: Result<PreparedFile, Error>?
        /// The preparing thread that allocated it, and frees it.
        let preparer: Int
        /// Its input bytes (0 for a file skipped by its identity on disk).
        let bytes: Int
        /// Its place in the order files were taken by the preparing threads.
        let sequence: Int
        fileprivate init(_ item: Result<PreparedFile, Error>, preparer: Int, bytes: Int, sequence: Int) {
            self.item = item
            self.preparer = preparer
            self.bytes = bytes
            self.sequence = sequence
        }
    }
    private let condition = NSCondition()
    private let count: Int
    /// Prepared files not yet handed over, by input position, with the thread that prepared each.
    private var ready: [Int: (item: Result<PreparedFile, Error>, preparer: Int, sequence: Int)] = [:]
    /// How many files were taken so far (each file's place in that order, for the tests).
    private var takenSoFar = 0
    /// The input bytes of each input.
    private let sizes: [Int]
    /// The files taken by a thread; every file before `lowestUntaken` is.
    private var taken: [Bool]
    private var lowestUntaken = 0
    /// The files taken and not yet handed over, and their input bytes; the same for the
    /// small ones (under `aheadBytes`) alone.
    private var outstanding = 0, takenBytes = 0
    private var outstandingSmall = 0, takenSmallBytes = 0
    /// The next file the writer is handed.
    private var nextToHand = 0
    private var cancelled = false
    /// Files stored by the writer, for the thread that prepared each to free.
    private var stored: [[Handed]]
    /// Set when `next` has handed over every file: the preparing threads may end.
    private var handedAll = false
    /// The preparing threads still running: `cancel` waits for none, so that no thread reads
    /// an input file once the run has ended (and released its lock).
    private var running = 0
    private let ahead = 3
    private let aheadBytes = PreparedFiles.aheadBytes
    /// (A variable for the tests, which make it a few bytes: every file waits for room.)
    nonisolated(unsafe) static var aheadBytes = 8 << 20

    /// How many threads prepare files: two where there are two cores or more. (A variable for
    /// the tests, which check that any number stores the same ledger.)
    nonisolated(unsafe) static var preparers = min(2, max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// - Parameter alreadyRead: every version of each path read before. A file whose identity
    ///   on disk (device, inode, size, modification and change times) is that of a version read
    ///   before is skipped without reading it; any other file read before is hashed, and skipped
    ///   unparsed when its SHA-256 is that of a version read before.
    init(inputs: [(URL, String)], workspace: Workspace, verifier: ReceiptVerifier, signedVerifier: SignedDataVerifier,
         alreadyRead: [String: FileVersions], storedSigned: [String: Set<String>] = [:], preparers: Int = PreparedFiles.preparers) {
        count = inputs.count
        // A file skipped by its identity on disk is neither read nor held: it counts nothing.
        sizes = inputs.map { url, _ in
            guard let identity = FileStat.identity(url.path),
                  alreadyRead[workspace.relative(url)]?.statKeys[identity.key] == nil else { return 0 }
            return identity.sizeBytes
        }
        taken = Array(repeating: false, count: inputs.count)
        stored = Array(repeating: [], count: max(1, preparers))
        running = max(1, preparers)
        for preparer in 0..<max(1, preparers) {
            let thread = Thread { [self] in
                defer {
                    condition.lock()
                    running -= 1
                    condition.broadcast()
                    condition.unlock()
                }
                while true {
                    // Room first, then the file: a prepared file never waits outside the queue.
                    condition.lock()
                    var chosen: (index: Int, sequence: Int)?
                    while true {
                        if freeStored(preparer) { continue }
                        if cancelled { break }
                        // Each thread takes the first file no thread took while there is room
                        // for it; past it, a thread but the first takes the first small one.
                        var i = lowestUntaken
                        guard i < count else { break }
                        // The file the writer waits for always has room; another file has room
                        // while few are taken ahead: a small one while their bytes are few, a
                        // big one while fewer big ones than threads are (so that each thread
                        // prepares one of a night's big receipt files, in turn: the writer
                        // stores them faster than one thread prepares them).
                        let bigOutstanding = outstanding - outstandingSmall
                        func hasRoom(_ i: Int) -> Bool {
                            if sizes[i] >= aheadBytes { return outstanding < ahead && bigOutstanding < preparers }
                            return outstanding < ahead && takenBytes < aheadBytes
                        }
                        var room = hasRoom(i)
                        if i != nextToHand && !room && preparer > 0 {
                            // Small files taken past a big one count apart.
                            while i < count && (taken[i] || sizes[i] >= aheadBytes) { i += 1 }
                            guard i < count else { condition.wait(); continue }
                            room = outstandingSmall < ahead && takenSmallBytes < aheadBytes
                        }
                        let small = sizes[i] < aheadBytes
                        if i == nextToHand || room {
                            chosen = (i, takenSoFar)
                            takenSoFar += 1
                            taken[i] = true
                            // A file skipped by its identity on disk (size 0) holds nothing.
                            if sizes[i] > 0 {
                                outstanding += 1
                                takenBytes += sizes[i]
                                if small { outstandingSmall += 1; takenSmallBytes += sizes[i] }
                            }
                            while lowestUntaken < count && taken[lowestUntaken] { lowestUntaken += 1 }
                            break
                        }
                        condition.wait()
                    }
                    condition.unlock()
                    guard let (index, sequence) = chosen else { break }
                    let (url, kind) = inputs[index]
                    let item = Result { () throws -> PreparedFile in
                      do {
                        let path = workspace.relative(url)
                        let identity = FileStat.identity(url.path)
                        // Remembered only when settled, and unchanged while it was read.
                        let before = identity?.settled == true ? identity?.key : nil
                        if let versions = alreadyRead[path] {
                            if let identity, let sha = versions.statKeys[identity.key] {
                                return PreparedFile(input: InputFile(url: url, path: path, kind: kind, sizeBytes: identity.sizeBytes, sha256: sha,
                                                                     statKey: identity.key),
                                                    body: .alreadyRead(newStatKey: false))
                            }
                            let (sha, size) = try LineReader.hash(url.path)
                            if versions.sha256s.contains(sha) {
                                let same = before != nil && FileStat.key(url.path) == before
                                return PreparedFile(input: InputFile(url: url, path: path, kind: kind, sizeBytes: size, sha256: sha,
                                                                     statKey: same ? before : nil), body: .alreadyRead(newStatKey: same))
                            }
                        }
                        var file = try PreparedFile.prepare(url: url, kind: kind, workspace: workspace, verifier: verifier,
                                                            signedVerifier: signedVerifier, storedSigned: storedSigned[path] ?? [],
                                                            pathReadBefore: alreadyRead[path] != nil)
                        file.input.statKey = before != nil && FileStat.key(url.path) == before ? before : nil
                        // Read by the writer: its identity is checked there, after its reads.
                        if case .lines(let signed, _) = file.body { file.body = .lines(signed: signed, statKey: before) }
                        return file
                      } catch {
                        guard try PreparedFile.isGone(url) else { throw error }
                        return PreparedFile(input: InputFile(url: url, path: workspace.relative(url), kind: kind, sizeBytes: 0, sha256: ""), body: .gone)
                      }
                    }
                    condition.lock()
                    if cancelled { condition.unlock(); return }
                    ready[index] = (item, preparer, sequence)
                    condition.broadcast()
                    condition.unlock()
                }
                // The files still being stored are freed here as they come back.
                condition.lock()
                while true {
                    if freeStored(preparer) { continue }
                    if cancelled || handedAll { break }
                    condition.wait()
                }
                condition.unlock()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    /// On a preparing thread, with the lock held: frees the files it prepared that the writer
    /// gave back, outside the lock. Returns whether there were any.
    private func freeStored(_ preparer: Int) -> Bool {
        guard !stored[preparer].isEmpty else { return false }
        var done = stored[preparer]
        stored[preparer] = []
        condition.unlock()
        for handed in done { handed.item = nil }
        // What a big file took goes back to the system (every arena is trimmed): glibc keeps
        // memory freed in one thread's arena for that arena only, so the pages one thread
        // freed could not serve another's, and the peak counted both. Trimmed, the peak of a
        // 100,000-transaction night 2 on a million-transaction ledger fell from 295-306 MiB
        // to 232-243 MiB, in the same time.
        let big = done.contains { $0.bytes >= aheadBytes }
        done = []
        if big { _ = iap_malloc_trim(0) }
        condition.lock()
        return true
    }

    /// The next file in input order, or nil when every file has been handed over.
    func next() -> Handed? {
        condition.lock()
        defer { condition.unlock() }
        while nextToHand < count && ready[nextToHand] == nil && !cancelled { condition.wait() }
        guard nextToHand < count, let (item, preparer, sequence) = ready.removeValue(forKey: nextToHand) else {
            handedAll = true
            condition.broadcast()
            return nil
        }
        let size = sizes[nextToHand]
        if size > 0 {
            outstanding -= 1
            takenBytes -= size
            if size < aheadBytes { outstandingSmall -= 1; takenSmallBytes -= size }
        }
        nextToHand += 1
        condition.broadcast()
        return Handed(item, preparer: preparer, bytes: size, sequence: sequence)
    }

    /// Gives a file back once stored, for the thread that prepared it to free. The caller
    /// keeps no copy of what it holds.
    func stored(_ handed: Handed) {
        condition.lock()
        if cancelled || handedAll {
            condition.unlock()
            handed.item = nil
            return
        }
        stored[handed.preparer].append(handed)
        condition.broadcast()
        condition.unlock()
    }

    /// Stops the preparing threads (the run failed or finished early) and returns once they
    /// have ended: a thread preparing a file finishes it first, then drops it.
    func cancel() {
        condition.lock()
        cancelled = true
        ready.removeAll()
        for i in stored.indices { stored[i].removeAll() }
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// Whether freed memory is handed back after big files (glibc's `malloc_trim`; for the tests).
    static var trimsArenas: Bool { iap_malloc_trim_available() != 0 }

    /// How many files the preparing threads have taken so far (for the tests).
    var filesTaken: Int {
        condition.lock()
        defer { condition.unlock() }
        return takenSoFar
    }

    /// How many preparing threads are still running (for the tests).
    var threadsRunning: Int {
        condition.lock()
        defer { condition.unlock() }
        return running
    }
}

/// Reading and verifying the records of new input files into the ledger.
struct Ingest {
    let writer: LedgerWriter
    let runId: Int64
    let verifier: ReceiptVerifier
    /// Signed data's verifier, for a signed file read here a part at a time (`lines`).
    var signedVerifier: SignedDataVerifier?
    var counts: LedgerWriter.RunCounts
    /// The refund reversals asked for this night, each with the REVERSAL_WAITING it opens if
    /// its refund is still not posted once the night's entries are (see `openWaitingReversals`).
    var reversalsAsked: [AskedReversal] = []
    /// Signed records verified to a root other than Apple's, by root (`Result.otherRoots`).
    var otherRoots: [String: (records: Int, production: Int)] = [:]
    /// Orders brought back to an earlier version this night (see `Result.ordersBroughtBack`).
    var ordersBroughtBack: [(orderId: String, location: String, reversalUndone: Bool)] = []

    struct AskedReversal {
        var book: Book
        var transactionId: String
        var recordId: Int64
        var message: String
    }

    /// Opens REVERSAL_WAITING for the reversals asked this night that did not post: their
    /// refund is not posted yet. Decided after the posting stage, as a refund that arrives the
    /// same night (before or after its reversal) posts there, and its reversal with it.
    func openWaitingReversals() throws {
        for r in reversalsAsked where try writer.entry(book: r.book, transactionId: r.transactionId, kind: .refundReversal) == nil {
            try writer.openFinding(code: "REVERSAL_WAITING", transactionId: r.transactionId, recordId: r.recordId,
                                   message: r.message, runId: runId)
        }
    }

    /// The paths with a line cut short (TRUNCATED) still open, read once a night; the night's
    /// own are added as they are stored.
    var truncatedPaths: Set<String>? = nil

    init(writer: LedgerWriter, runId: Int64, verifier: ReceiptVerifier, counts: LedgerWriter.RunCounts) {
        self.writer = writer
        self.runId = runId
        self.verifier = verifier
        self.counts = counts
    }

    /// Stores the records of one prepared file.
    mutating func store(_ file: PreparedFile) throws {
        switch file.body {
        case .notText(let line, let offset): try notText(file.input, line: line, offset: offset)
        case .empty: try empty(file.input)
        case .alreadyRead, .gone: break
        case .tooLarge: try tooLarge(file.input)
        case .signed(let records): try signed(file.input, records: records)
        case let .orders(rows, hashes, texts, fileError, text, header):
            try orders(file.input, rows: rows, hashes: hashes, texts: texts, fileError: fileError, text: text, header: header)
        case .receipts(let records): try receipts(file.input, records)
        case let .lines(signed, statKey):
            // Its cut lines resolved as it is read (its records are not held).
            try lines(file.input, signed: signed, statKey: statKey)
            return
        case .orderRows(let read):
            try orderRows(file.input, read)
            return
        }
        try resolveCutLines(file)
    }

    /// A file listed for the night and gone before it was opened (moved or removed meanwhile).
    struct FileGone: Error {}

    /// Records a line-based file's part at a time: at most this many records prepared at once.
    nonisolated(unsafe) static var linesPart = 2_000
    /// A test's hook, called before such a file is opened ("open") and between its two reads
    /// ("between"), nil in use.
    nonisolated(unsafe) static var readHook: ((_ stage: String, _ url: URL) -> Void)?

    /// A line-based file too big to hold prepared (`PreparedFile.Body.lines`), read here twice
    /// a record at a time, through one open descriptor: once for its SHA-256, size, records and
    /// new records (the file's row, written before its records), then for its records, prepared
    /// and stored a part at a time. Stores what the file prepared whole would: the same file
    /// row, records and texts, outcomes and cut lines resolved. The second read stops where the
    /// first did (a file still being appended to is read as it stood, as a file read whole is);
    /// the file moved, removed or replaced meanwhile is read as it was opened; gone before it
    /// was opened, it is `FileGone` (not read tonight, nothing written). Bytes of it rewritten
    /// between the two reads stop the night: the ledger stays as it was.
    mutating func lines(_ listed: InputFile, signed: Bool, statKey before: String?) throws {
        let path = listed.path, url = listed.url, ext = url.pathExtension.lowercased()
        Self.readHook?("open", url)
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let why = errno
            if try PreparedFile.isGone(url) { throw FileGone() }
            throw ReadError.unreadableInput(url.path, code: why)
        }
        defer { close(fd) }
        let seen = try writer.recordsReadBefore(path: path)
        // Each pass over the file takes the records read before from a copy of its own.
        var unread = seen
        func isNew(_ r: RawRecord) -> Bool { seen.isEmpty || !unread.take(Hashing.sha256Hex(utf8: r.text), unterminated: r.unterminated) }
        var records = 0, fresh = 0
        let first = try LineReader.forEachRecord(url.path, descriptor: fd) { r in
            records += 1
            if isNew(r) { fresh += 1 }
        }
        unread = seen
        Self.readHook?("between", url)
        var input = listed
        input.sha256 = first.sha256
        input.sizeBytes = first.sizeBytes
        input.statKey = before != nil && FileStat.key(url.path) == before ? before : nil
        guard records > 0 else { return try empty(input) }
        let fileId = try addFile(input, records: records, fresh: fresh, readBefore: !seen.isEmpty)
        if truncatedPaths == nil { truncatedPaths = try writer.pathsWithOpenTruncatedLines() }
        // Lines earlier versions ended inside, still open: the records whole now where they stood.
        let cuts = truncatedPaths!.contains(path) ? try writer.openCuts(path: path, otherThan: input.sha256) : nil
        var whole: [(line: Int, text: Substring)] = []
        var part: [RawRecord] = []
        func store() throws {
            guard !part.isEmpty else { return }
            if signed {
                guard let signedVerifier else { throw ReadError.file(url.path, "signed data read with no verifier") }
                for p in PreparedFile.withTexts(part.map { PreparedFile.PreparedSigned($0, fileExtension: ext, verifier: signedVerifier, stored: []) }) {
                    if cuts?.wants(line: p.record.line, sha256: p.sha256) == true && Self.isWhole(p) { whole.append((p.record.line, p.record.text)) }
                    try signedRecord(p, fileId: fileId, path: path)
                }
            } else {
                for p in PreparedFile.withTexts(part.map { PreparedFile.prepareReceipt($0, path: path, verifier: verifier) }) {
                    counts.read += 1
                    if cuts?.wants(line: p.record.line, sha256: p.sha256) == true && Self.isWhole(p) { whole.append((p.record.line, p.record.text)) }
                    try receipt(p, sha: p.sha256, fileId: fileId, path: path)
                    CrashPoint.tick("verify:receipts", every: 10)
                }
            }
            part.removeAll(keepingCapacity: true)
        }
        let second = try LineReader.forEachRecord(url.path, descriptor: fd, limit: first.sizeBytes) { r in
            guard isNew(r) else {
                // Stored from an earlier version of the file: whole unless cut short (its last line).
                if cuts?.wants(line: r.line) == true && (!r.unterminated || (signed
                    ? signedVerifier.map { Self.isWhole(PreparedFile.PreparedSigned(r, fileExtension: ext, verifier: $0, stored: [])) } ?? false
                    : Self.isWhole(PreparedFile.prepareReceipt(r, path: path, verifier: verifier)))) {
                    whole.append((r.line, Substring(String(r.text))))
                }
                return
            }
            part.append(r)
            if part.count >= Self.linesPart { try store() }
        }
        try store()
        guard second.sha256 == first.sha256, second.sizeBytes == first.sizeBytes else {
            throw ReadError.file(url.path, "was rewritten while the night read it (read twice, as it has more than \(PreparedFile.linesAboveRecords) records or \(PreparedFile.linesAboveBytes >> 20) MiB; bytes appended are not read until the next night, bytes changed are): nothing of the night was written; run again")
        }
        if let cuts, !whole.isEmpty { try writer.settleCuts(cuts, path: path, records: whole, runId: runId) }
    }

    /// An orders file too big to hold parsed (`PreparedFile.Body.orderRows`), read through once
    /// by its preparing thread, read again here a chunk at a time through the same open file
    /// (wherever it was moved meanwhile), its rows stored a part at a time. Stores what the file
    /// parsed whole would (`orders`): the same file row, header, records, texts, order versions
    /// and outcomes, cut lines resolved. The second read stops where the first did (bytes
    /// appended meanwhile are read the next night, as for a file read whole); bytes rewritten
    /// between the two reads stop the night: the ledger stays as it was.
    mutating func orderRows(_ input: InputFile, _ read: PreparedFile.OrderRowsRead) throws {
        let path = input.path, url = input.url
        Self.readHook?("between", url)
        let seen = try writer.recordsReadBefore(path: path)
        // Each pass over the file takes the records read before from a copy of its own.
        var unread = seen
        func isNew(_ sha: String, endsFile: Bool) -> Bool { seen.isEmpty || !unread.take(sha, unterminated: endsFile) }
        let rewritten = ReadError.file(url.path, "was rewritten while the night read it (read twice, as it is over \(PreparedFile.ordersAboveBytes >> 20) MiB; bytes appended are not read until the next night, bytes changed are): nothing of the night was written; run again")
        // Its path read before: its new rows counted here, against the hashes of those stored
        // (read once more, through the same descriptor, as far as the first read went).
        var fresh = read.fresh ?? 0
        var ends = read.ends ?? OrderFileEnds()
        if read.fresh == nil {
            // And where the file's new rows leave each order.
            var rows = OrderReader.Rows(path: path)
            let again = try CSVFile.forEachRow(url.path, descriptor: read.file.descriptor, limit: input.sizeBytes) { parsed in
                guard let row = rows.orderAndText(parsed) else { return }
                let sha = Hashing.sha256Hex(utf8: row.raw)
                if isNew(sha, endsFile: row.endsFile) {
                    fresh += 1
                    if let id = row.orderId, !row.endsFile, row.valid { ends.note(orderId: id, sha256: sha) }
                }
            }
            guard again.sha256 == input.sha256, again.sizeBytes == input.sizeBytes else { throw rewritten }
            unread = seen
        }
        let resent = try writer.fileReadBefore(sha256: input.sha256, otherThan: input.path)
        let fileId = try addFile(input, records: read.records, fresh: fresh, readBefore: !seen.isEmpty)
        var file = try OrdersFile(self, input: input, fileId: fileId, resent: resent, header: read.header, ends: ends)
        defer { ordersBroughtBack += file.broughtBack }
        if truncatedPaths == nil { truncatedPaths = try writer.pathsWithOpenTruncatedLines() }
        let cuts = truncatedPaths!.contains(path) ? try writer.openCuts(path: path, otherThan: input.sha256) : nil
        var whole: [(line: Int, text: Substring)] = []
        // Parsed, hashed and compressed on a thread of its own a part at a time, while this one
        // stores the part before (as the preparing threads do for a file read whole).
        let parts = Handoff<OrderPart>(capacity: 2)
        let second = ReadResult()
        let part = Self.linesPart, opened = read.file, size = input.sizeBytes
        let reader = Thread {
            do {
                var rows = OrderReader.Rows(path: path)
                var taken: [OrderRow] = []
                func handOver() -> Bool {
                    defer { taken.removeAll(keepingCapacity: true) }
                    return parts.put(OrderPart(rows: taken, hashes: taken.map { Hashing.sha256Hex(utf8: $0.raw) },
                                               texts: RecordText.chunked(taken.map(\.raw))))
                }
                struct GivenUp: Error {}
                let r = try CSVFile.forEachRow(url.path, descriptor: opened.descriptor, limit: size) { parsed in
                    guard let row = rows.take(parsed) else { return }
                    taken.append(row)
                    if taken.count >= part, !handOver() { throw GivenUp() }
                }
                if let row = rows.finish() { taken.append(row) }
                if !taken.isEmpty, !handOver() { throw GivenUp() }
                second.value = (r.sha256, r.sizeBytes)
                parts.finish(nil)
            } catch {
                parts.finish(error)
            }
        }
        reader.start()
        defer { parts.cancel(); parts.waitFinished() }
        while let p = try parts.next() {
            for i in p.rows.indices {
                if cuts?.wants(line: p.rows[i].line, sha256: p.hashes[i]) == true && !Self.isCut(p.rows[i]) { whole.append((p.rows[i].line, p.rows[i].raw)) }
                if isNew(p.hashes[i], endsFile: p.rows[i].endsFile) { try orderRow(p.rows[i], raw: p.texts[i], sha: p.hashes[i], file: &file) }
            }
        }
        guard let (sha, bytes) = second.value, sha == input.sha256, bytes == input.sizeBytes else { throw rewritten }
        if let cuts, !whole.isEmpty { try writer.settleCuts(cuts, path: path, records: whole, runId: runId) }
    }

    /// A part of a big orders file's rows, with their hashes and their texts as stored.
    struct OrderPart {
        var rows: [OrderRow]
        var hashes: [String]
        var texts: [RecordText]
    }

    /// What a reading thread found, read once it has finished.
    final class ReadResult: @unchecked Sendable {
        var value: (sha256: String, sizeBytes: Int)?
    }

    /// An orders row cut short (the file's last, while it was being written).
    static func isCut(_ row: OrderRow) -> Bool {
        if case .failure(let f) = row.result, f.code == "TRUNCATED" { return true }
        return false
    }

    /// Resolves the lines earlier versions of this file ended inside (TRUNCATED) that this
    /// version holds whole: in its records (read now, or when these bytes were read before:
    /// a file skipped as read), or a line whose text was stored before.
    mutating func resolveCutLines(_ file: PreparedFile) throws {
        let path = file.input.path
        if truncatedPaths == nil { truncatedPaths = try writer.pathsWithOpenTruncatedLines() }
        guard truncatedPaths!.contains(path) else { return }
        // A JSON document: a cut record of an earlier version is settled when this one holds it
        // whole at the place it stood (one cut inside its first element began on the
        // document's first line, its element on the next), by what it held, not by line alone.
        if file.input.url.pathExtension.lowercased() == "json" {
            // Whole records: a signed one stored before (not verified again) is whole as read.
            let records: [(line: Int, text: Substring)]
            switch file.body {
            case .receipts(let r): records = r.filter(Self.isWhole).map { ($0.record.line, $0.record.text) }
            case .signed(let r): records = r.filter(Self.isWhole).map { ($0.record.line, $0.record.text) }
            // A version read before (unchanged since, or put back): its records as the file holds
            // them (the ledger stored only those it brought first: a record an earlier version
            // brought is in it too), else as stored.
            case .alreadyRead:
                // (Read whole only within a document's cap: one past it was never read whole.)
                if file.input.sizeBytes <= PreparedFile.maxJSONDocumentBytes,
                   let data = try? Data(contentsOf: file.input.url), Hashing.sha256Hex(data) == file.input.sha256,
                   let text = String(validatingUTF8Data: data) {
                    records = RecordSplitter.jsonDocument(Substring(text)).filter { !$0.unterminated && $0.problem == nil }.map { ($0.line, $0.text) }
                } else {
                    records = try writer.storedRecords(path: path, sha256: file.input.sha256).map { ($0.line, Substring($0.text)) }
                }
            default: return
            }
            // Only so, not by line alone: the next batch written to the same path holds whole
            // records on the same lines, and settled the cut one (its transaction lost).
            if !records.isEmpty { try writer.settleCuts(try writer.openCuts(path: path, otherThan: file.input.sha256), path: path, records: records, runId: runId) }
            return
        }
        // A line file or an orders CSV: the same, a record whole where the cut one stood.
        let cuts = try writer.openCuts(path: path, otherThan: file.input.sha256)
        let whole: [(line: Int, text: Substring)]
        switch file.body {
        case .receipts(let records):
            whole = records.filter { cuts.wants(line: $0.record.line, sha256: $0.sha256) && Self.isWhole($0) }.map { ($0.record.line, $0.record.text) }
        case .signed(let records):
            whole = records.filter { cuts.wants(line: $0.record.line, sha256: $0.sha256) && Self.isWhole($0) }.map { ($0.record.line, $0.record.text) }
        case let .orders(rows, rowHashes, _, _, _, _):
            whole = rows.indices.filter { cuts.wants(line: rows[$0].line, sha256: rowHashes[$0]) && !Self.isCut(rows[$0]) }.map { (rows[$0].line, rows[$0].raw) }
        case .alreadyRead:
            whole = try writer.storedRecords(path: path, sha256: file.input.sha256).filter { cuts.wants(line: $0.line) }.map { ($0.line, Substring($0.text)) }
        default: whole = []
        }
        if !whole.isEmpty { try writer.settleCuts(cuts, path: path, records: whole, runId: runId) }
    }

    /// A record read whole (not the file's last line cut short): what settles a line an
    /// earlier version of its file ended inside.
    static func isWhole(_ r: PreparedFile.PreparedReceipt) -> Bool {
        if !r.record.unterminated { return true }
        if case .success = r.parsed { return true }
        return false
    }
    static func isWhole(_ r: PreparedFile.PreparedSigned) -> Bool { cutShort(r) == nil }

    /// An empty or blank file (a transfer that failed?): one rejected record, not silence.
    mutating func empty(_ input: InputFile) throws {
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256, statKey: input.statKey,
                                        sizeBytes: Int64(input.sizeBytes), records: 1, newRecords: 1)
        _ = try writer.addRecord(.init(fileId: fileId, line: 1, sha256: input.sha256, outcome: .rejected, reasonCode: "EMPTY_FILE",
                                       reason: "the file is empty or blank: no records (an incomplete transfer?)", raw: ""))
        counts.read += 1
        counts.rejected += 1
    }

    /// A file that is not UTF-8 text: one rejected record naming the file.
    mutating func notText(_ input: InputFile, line: Int, offset: Int) throws {
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256, statKey: input.statKey,
                                        sizeBytes: Int64(input.sizeBytes), records: 1, newRecords: 1)
        // A whole-file format (a CSV, a JSON document) is read whole or not at all: the place of
        // its first byte that is not UTF-8 is said, to find and fix it (the file is kept as a
        // rejection of line 1, its records unread).
        _ = try writer.addRecord(.init(fileId: fileId, line: 1, sha256: input.sha256, outcome: .rejected,
                                       reasonCode: "INVALID_UTF8",
                                       reason: "the file is not valid UTF-8 text: its first byte that is not is on line \(line) (byte offset \(offset)); save it as UTF-8 (an export in another encoding?) and send it again: none of its records was read",
                                       raw: ""))
        counts.read += 1
        counts.rejected += 1
    }

    /// A whole-file format too large to read: one rejected record naming the file.
    mutating func tooLarge(_ input: InputFile) throws {
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256, statKey: input.statKey,
                                        sizeBytes: Int64(input.sizeBytes), records: 1, newRecords: 1)
        _ = try writer.addRecord(.init(fileId: fileId, line: 1, sha256: input.sha256, outcome: .rejected, reasonCode: "FILE_TOO_LARGE",
                                       reason: input.kind == "orders"
                                        ? "the file is \(input.sizeBytes) bytes, over the \(PreparedFile.maxWholeFileBytes)-byte limit for an orders CSV file (split it into several files, each with the header)"
                                        : "the file is \(input.sizeBytes) bytes, over the \(PreparedFile.maxJSONDocumentBytes)-byte limit for a JSON document, which is read whole (send JSON Lines, a record a line, read a line at a time, or split it)",
                                       raw: ""))
        counts.read += 1
        counts.rejected += 1
    }

    mutating func orders(_ input: InputFile, rows: [OrderRow], hashes: [String], texts: [RecordText], fileError: Finding?,
                         text: String, header: String?) throws {
        let seen = try writer.recordsReadBefore(path: input.path)
        if let e = fileError { return try refusedOrders(input, e, text: String(text.prefix(4096))) }
        let resent = try writer.fileReadBefore(sha256: input.sha256, otherThan: input.path)
        let (fileId, fresh) = try addFile(input, hashes: hashes, seen: seen) { rows[$0].endsFile }
        var ends = OrderFileEnds()
        for i in fresh {
            if let id = rows[i].orderId, !rows[i].endsFile, case .success = rows[i].result { ends.note(orderId: id, sha256: hashes[i]) }
        }
        var file = try OrdersFile(self, input: input, fileId: fileId, resent: resent, header: header, ends: ends)
        defer { ordersBroughtBack += file.broughtBack }
        for i in fresh { try orderRow(rows[i], raw: texts[i], sha: hashes[i], file: &file) }
    }

    /// An orders file refused whole (its header): one rejected record, its first 4096 characters.
    mutating func refusedOrders(_ input: InputFile, _ e: Finding, text: String) throws {
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256, statKey: input.statKey,
                                        sizeBytes: Int64(input.sizeBytes), records: 1, newRecords: 1)
        _ = try writer.addRecord(.init(fileId: fileId, line: e.location?.line ?? 1, sha256: input.sha256, outcome: .rejected,
                                       reasonCode: e.code, reason: e.message, raw: .inline(text)))
        counts.read += 1
        counts.rejected += 1
    }

    /// An orders file being stored: its row, whether it was sent before, and the orders it
    /// changes, as they stood before it and as its last row for each leaves them: one brought
    /// back to an earlier version is said once the file is read (a history export, a credit row
    /// then its reversal row, sent again in other bytes, leaves the order as it was: nothing is
    /// said).
    struct OrdersFile {
        var path: String
        var fileId: Int64
        /// Its bytes were read before under another name: a file sent again, whose rows are kept
        /// as records but make no new versions (as ones they would bring back what later versions
        /// replaced: a reversal undone).
        var resent: Bool
        var touched: [String: (before: LedgerWriter.OrderVersionFields, beforeReversed: Bool, earlier: [LedgerWriter.OrderVersionFields],
                               last: LedgerWriter.OrderVersionFields, lastReversed: Bool, location: String)] = [:]
        var touchedOrder: [String] = []
        /// Where its new rows leave each order.
        var ends: OrderFileEnds

        /// Also keeps its header (and seals it) with the file: each line can be read again by column.
        init(_ ingest: Ingest, input: InputFile, fileId: Int64, resent: Bool, header: String?, ends: OrderFileEnds) throws {
            path = input.path
            self.fileId = fileId
            self.resent = resent
            self.ends = ends
            if let header { try ingest.writer.addFileHeader(fileId: fileId, header: header) }
        }

        /// Back to an earlier version, or credited again after their reversal (whatever else it
        /// says: a credit taken back is given again).
        var broughtBack: [(orderId: String, location: String, reversalUndone: Bool)] {
            touchedOrder.compactMap { id in
                guard let t = touched[id], t.last != t.before, t.earlier.contains(t.last) || (t.beforeReversed && !t.lastReversed) else { return nil }
                return (id, t.location, t.beforeReversed && !t.lastReversed)
            }
        }
    }

    /// Where an orders file leaves each order: the SHA-256 of the last new row naming each order,
    /// whatever it holds (a look ahead over the file, told before its rows are stored: a big
    /// file's values are not checked twice; a row refused is none the order's versions repeat,
    /// so it only stops the look ahead, which `verify` asks no more of), but the file's last
    /// line when no line end follows it (a line cut short while the file was written: which
    /// order it names is told only once it is whole, and a file read whole and one read a part
    /// at a time would tell it otherwise). Kept small for a file
    /// of a million orders: a 64-bit hash of the order id, the hash's first 64 bits. Two ids of
    /// one key only lose the look ahead (a row of one order is not the latest of another); a
    /// false match, one in 2^64, is named by `verify`, which compares whole hashes.
    /// Where a file's new rows leave each order: its last valid row for the order, a row
    /// refused (a quote broken, a line too long to hold, a value that does not read) saying
    /// nothing of where the file leaves it, even when it names the order.
    struct OrderFileEnds: Sendable {
        private var last: [Int: UInt64] = [:]

        mutating func note(orderId: String, sha256: String) {
            last[Self.key(orderId)] = Self.prefix(sha256)
        }

        /// Whether the file's last new row naming order `orderId` has the hash `sha256`.
        func leaves(orderId: String, atRowOf sha256: String) -> Bool {
            last[Self.key(orderId)].map { $0 == Self.prefix(sha256) } ?? false
        }

        static func key(_ id: String) -> Int { var h = Hasher(); h.combine(id); return h.finalize() }
        static func prefix(_ hex: String) -> UInt64 { UInt64(hex.prefix(16), radix: 16) ?? 0 }
    }

    /// Stores one new row of an orders file.
    mutating func orderRow(_ row: OrderRow, raw: RecordText, sha: String, file: inout OrdersFile) throws {
        let path = file.path, fileId = file.fileId
        counts.read += 1
        CrashPoint.tick("read:orders", every: 10)
        switch row.result {
        case .success(let o):
            // In a new file, a row that repeats the order's latest version changes nothing; one
            // that repeats an earlier version brings the order back to it (a credit restored
            // after a reversal, a correction undone): the later row replaces the earlier. A row
            // whose file leaves its order at its latest version (the file's last new row for it
            // repeats that version) changes nothing either: a cumulative export's credit row
            // then its reversal row, sent each night, make no versions, as the reversal row
            // alone would make none.
            let repeated: Bool
            if file.resent {
                repeated = try writer.orderHasVersion(orderId: o.orderId, sha256: sha)
            } else {
                let versions = try writer.orderVersionsToMatch(orderId: o.orderId, milliseconds: ISOTimestamp.milliseconds)
                repeated = versions.first.map { $0.sha256 == sha || file.ends.leaves(orderId: o.orderId, atRowOf: $0.sha256) } ?? false
                // Said: a backend sending an old export again (under a new name, its bytes
                // not a copy: other line ends, quoting, column order) undoes what later
                // versions did, a reversal included. Told by what the rows say, not their
                // bytes: the latest said again in other bytes brings nothing back.
                if !repeated, let latest = versions.first {
                    let says = LedgerWriter.OrderVersionFields(
                        accountId: o.accountId, transactionId: o.transactionId, productId: o.productId, quantity: o.quantity,
                        creditedUnits: o.creditedUnits, creditedMs: o.creditedMs, environment: o.environment, storefront: o.storefront,
                        appAccountToken: o.appAccountToken, reversedMs: o.reversedAt.flatMap(ISOTimestamp.milliseconds))
                    if var t = file.touched[o.orderId] {
                        t.last = says; t.lastReversed = o.reversedAt != nil; t.location = "\(path):\(row.line)"
                        file.touched[o.orderId] = t
                    } else {
                        file.touched[o.orderId] = (latest.fields, latest.reversed, versions.dropFirst().map(\.fields), says, o.reversedAt != nil,
                                              "\(path):\(row.line)")
                        file.touchedOrder.append(o.orderId)
                    }
                }
            }
            let recordId = try writer.addRecord(.init(fileId: fileId, line: row.line, sha256: sha, outcome: .verified,
                                                      reason: o.note, environment: o.environment, accountId: o.accountId,
                                                      orderId: o.orderId, raw: raw))
            if repeated { counts.verified += 1; counts.repeatedOrderLines += 1; return }
            try writer.insertOrderVersion(orderId: o.orderId, recordId: recordId, accountId: o.accountId,
                                          transactionId: o.transactionId, productId: o.productId, quantity: o.quantity,
                                          creditedUnits: o.creditedUnits, creditedAt: o.creditedAt,
                                          creditedMs: o.creditedMs, environment: o.environment,
                                          storefront: o.storefront, appAccountToken: o.appAccountToken,
                                          reversedAt: o.reversedAt)
            try writer.resolveRejectedOrderLines(orderId: o.orderId, recordId: recordId, sha256: sha, runId: runId,
                                                 note: "order \(o.orderId) read again from \(path):\(row.line)")
            counts.verified += 1
        case .failure(let f):
            let info = LedgerWriter.RecordInfo(fileId: fileId, line: row.line, sha256: sha, outcome: .rejected,
                                               reasonCode: f.code, reason: f.message, orderId: row.orderId, raw: raw)
            let recordId = try writer.addRecord(info)
            if f.code == "TRUNCATED" { truncatedPaths?.insert(path) } else { try writer.resolveRepeatedRecord(recordId: recordId, info, runId: runId) }
            if let id = row.orderId { try writer.noteRejectedOrderLine(orderId: id) }
            counts.rejected += 1
        }
    }

    mutating func receipts(_ input: InputFile, _ records: [PreparedFile.PreparedReceipt]) throws {
        let seen = try writer.recordsReadBefore(path: input.path)
        let (fileId, fresh) = try addFile(input, hashes: records.map(\.sha256), seen: seen) { records[$0].record.unterminated }
        for i in fresh {
            counts.read += 1
            try receipt(records[i], sha: records[i].sha256, fileId: fileId, path: input.path)
            CrashPoint.tick("verify:receipts", every: 10)
        }
    }

    /// Records an input file, given its records' SHA-256s, and returns the positions of those
    /// not read from an earlier version of the same path (all of them, for a file new to the
    /// ledger); the others count as skipped. Positions, not copies: copying a day's parsed
    /// records into new arrays cost the writer's thread more than a tenth of a second per
    /// 100,000 records.
    /// (`unterminated`: whether the record at a position is the file's last line, with no line
    /// end after it: a line cut short before and still so is not read again.)
    mutating func addFile(_ input: InputFile, hashes: [String], seen: RecordsReadBefore,
                          unterminated: (Int) -> Bool) throws -> (fileId: Int64, fresh: [Int]) {
        var unread = seen
        let fresh = seen.isEmpty ? Array(hashes.indices) : hashes.indices.filter { !unread.take(hashes[$0], unterminated: unterminated($0)) }
        return (try addFile(input, records: hashes.count, fresh: fresh.count, readBefore: !seen.isEmpty), fresh)
    }

    /// Records an input file of `records` records, `fresh` of them new (`readBefore`: the
    /// path was read before); the others count as skipped.
    mutating func addFile(_ input: InputFile, records: Int, fresh: Int, readBefore: Bool) throws -> Int64 {
        let fileId = try writer.addFile(runId: runId, path: input.path, kind: input.kind, sha256: input.sha256, statKey: input.statKey,
                                        sizeBytes: Int64(input.sizeBytes), records: records, newRecords: fresh)
        counts.skipped += records - fresh
        if readBefore && records > 0 {
            try writer.resolveWholeFileRejections(path: input.path, fileId: fileId, runId: runId,
                                                  note: "\(input.path) was read again, whole (\(records) record\(records == 1 ? "" : "s"))")
        }
        return fileId
    }

    mutating func receipt(_ prepared: PreparedFile.PreparedReceipt, sha: String, fileId: Int64, path: String) throws {
        let record = prepared.record
        let location = SourceLocation(path: path, line: record.line)
        let raw = prepared.text
        let response: LegacyResponse, outcome: ReceiptOutcome
        switch prepared.parsed {
        case .failure(let e):
            try reject(fileId: fileId, location: location, sha: sha, code: e.code, reason: e.reason, raw: raw)
            return
        case .success(let parsed):
            (response, outcome) = parsed
        }
        var info = LedgerWriter.RecordInfo(fileId: fileId, line: record.line, sha256: sha, outcome: .verified,
                                           statusCode: response.status, environment: response.environment,
                                           accountId: response.accountId, orderId: response.orderId,
                                           receivedAt: response.receivedAt, raw: raw)
        switch outcome {
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
            // One that repeats a record still waiting (a file sent again) is listed once, as it.
            try writer.resolveRepeatedRecord(recordId: recordId, info, runId: runId)
        case let .verified(book, transactions, findings):
            info.environment = book == .production ? "Production" : "Sandbox"
            let recordId = try writer.addRecord(info)
            counts.verified += 1
            for f in findings {
                // Two listings of a transaction that disagree (its trial): said once per
                // transaction, by the record that first said it; later responses repeating the
                // subscription's history say it again.
                if f.code == "TRANSACTION_CONFLICT", let id = f.transactionId {
                    if try writer.findingMessage(code: f.code, transactionId: id) == nil {
                        try writer.openFinding(code: f.code, transactionId: id, recordId: nil, message: "\(location): \(f.message)", runId: runId)
                    }
                    continue
                }
                try openRecordFinding(code: f.code, transactionId: f.transactionId ?? "", recordId: recordId,
                                      location: location, saying: f.message)
                try noteRefused(f.code, transactionId: f.transactionId, recordId: recordId)
            }
            for t in transactions {
                try observe(t, recordId: recordId, location: location)
            }
        }
    }

    /// Opens a finding of a record (`LOCATION: what it says`), but for a refused item
    /// (`INVALID_TRANSACTION`) a finding of its transaction says already, from another record:
    /// every later response of a subscription lists its history again, and a file sent again
    /// repeats its records, each opening one more finding to dismiss (found again saying the
    /// same, one dismissed stays so). The record is linked to the transaction all the same.
    mutating func openRecordFinding(code: String, transactionId: String, recordId: Int64, location: SourceLocation,
                                    saying text: String) throws {
        if code == "INVALID_TRANSACTION" || code == "DATE_MS_UNREADABLE", !transactionId.isEmpty,
           try writer.findingMessages(code: code, transactionId: transactionId).contains(where: { $0.hasSuffix(": " + StoreBounds.boundedMessage(text)) }) {
            return
        }
        try writer.openFinding(code: code, transactionId: transactionId, recordId: recordId, message: "\(location): \(text)", runId: runId)
    }

    /// A transaction the store named in a verified record but whose item was refused
    /// (`INVALID_TRANSACTION`) is known to the ledger as unverified: an order crediting it is
    /// `CREDITED_UNVERIFIED`, not a credit of a transaction the store never reported, and
    /// `trace` finds the record.
    mutating func noteRefused(_ code: String, transactionId: String?, recordId: Int64) throws {
        guard code == "INVALID_TRANSACTION", let id = transactionId, !id.isEmpty else { return }
        try writer.noteUnverifiedRecord(recordId, transactionIds: [id])
    }

    mutating func reject(fileId: Int64, location: SourceLocation, sha: String, code: String, reason: String, raw: RecordText,
                         info: LedgerWriter.RecordInfo? = nil, transactionIds: [String] = []) throws {
        var r = info ?? LedgerWriter.RecordInfo(fileId: fileId, line: location.line, sha256: sha, outcome: .rejected, raw: raw)
        r.outcome = .rejected
        r.reasonCode = code
        r.reason = reason
        let recordId = try writer.addRecord(r)
        if !transactionIds.isEmpty { try writer.noteUnverifiedRecord(recordId, transactionIds: transactionIds) }
        // A line cut short is settled by its file's later versions (`settleCuts`), not as a repeat.
        if code == "TRUNCATED" { truncatedPaths?.insert(location.path) } else { try writer.resolveRepeatedRecord(recordId: recordId, r, runId: runId) }
        counts.rejected += 1
    }

    /// One verified transaction: new ones are stored (their sale is posted below); one seen
    /// before is the same transaction, and brings only what it did not have (a refund).
    /// Returns false when the record contradicts the stored transaction (TRANSACTION_CONFLICT):
    /// nothing it claims beyond the transaction is trusted.
    @discardableResult
    mutating func observe(_ t: TransactionObservation, recordId: Int64, location: SourceLocation,
                          refundSaidByCaller: Bool = false) throws -> Bool {
        var agrees = true
        if try writer.insertTransactionIfNew(t, recordId: recordId, runId: runId) {
            // New: its sale is posted below.
            if t.cancellationMs != nil {
                try noteUpgradeRefund(t, location: location)
                try refundAfterReversal(t, recordId: recordId, location: location)
            }
        } else if let existing = try writer.transaction(t.transactionId) {
            let e = existing.observation
            var differences: [String] = []
            if e.book != t.book { differences.append("environment \(e.book.rawValue) vs \(t.book.rawValue)") }
            if e.productId != t.productId { differences.append("product \(e.productId) vs \(t.productId)") }
            if e.quantity != t.quantity { differences.append("quantity \(e.quantity) vs \(t.quantity)") }
            if e.purchaseMs != t.purchaseMs {
                // The same day apart by hours: the instants say what differs.
                let (a, b) = (Day(epochMilliseconds: e.purchaseMs), Day(epochMilliseconds: t.purchaseMs))
                differences.append(a == b ? "purchase instant \(Day.instantText(e.purchaseMs)) vs \(Day.instantText(t.purchaseMs))"
                                          : "purchase date \(a) vs \(b)")
            }
            // Signed records carry the price and storefront (receipts do not, and the first
            // source is kept): a record that disagrees with the stored ones is not that purchase.
            if let a = e.priceMilliunits, let b = t.priceMilliunits,
               a != b || (e.currency != nil && t.currency != nil && Currency.isoUppercased(e.currency!) != Currency.isoUppercased(t.currency!)) {
                func price(_ milliunits: Int64, _ currency: String?) -> String {
                    "\(ExactDecimal(mantissa: milliunits, scale: 3))" + (currency.map { " \($0)" } ?? "")
                }
                differences.append("price \(price(a, e.currency)) vs \(price(b, t.currency))")
            }
            if let a = e.storefront, let b = t.storefront, !a.isEmpty, !b.isEmpty, Currency.isoUppercased(a) != Currency.isoUppercased(b) {
                differences.append("storefront \(a) vs \(b)")
            }
            // A signed record of the purchase a legacy receipt brought (which names no storefront
            // or price, so none was compared above): it gives the transaction its own.
            var conflict = false
            if differences.isEmpty, existing.firstRecordId != recordId, e.storefront == nil, e.priceMilliunits == nil,
               t.storefront != nil || t.priceMilliunits != nil {
                switch try signedOverReceipt(existing, t, recordId: recordId, location: location) {
                case .adopted:
                    try writer.resolvePendingRecords(transactionId: t.transactionId, runId: runId, note: "verified by \(location)")
                    if let c = t.cancellationMs {
                        if let held = e.cancellationMs, Day(epochMilliseconds: held) != Day(epochMilliseconds: c) {
                            // Another day's refund than the receipt's, which is kept: said, as by any record.
                            try refundAgain(t, held: held, book: e.book, recordId: recordId, location: location)
                        } else {
                            try noteUpgradeRefund(t, location: location)
                            // The receipt's refund, whose share this record gives (the refund is now
                            // this record's: its instant and its share).
                            if let share = t.revocationPercentage, e.cancellationMs != nil,
                               try writer.takeRefundShare(transactionId: t.transactionId, cancellationMs: c, percentage: share) {
                                try resolveFullRefundFindings(t.transactionId, share: share, location: location)
                            }
                        }
                    }
                    return true
                case .kept: break
                // Said (TRANSACTION_CONFLICT): a record that contradicts the transaction asks for
                // nothing (no reversal from its notification), as one differing below.
                case .conflict: conflict = true
                }
            }
            // (A receipt may list a transaction twice: its first record is not linked again.)
            if existing.firstRecordId != recordId { try writer.linkSource(transactionId: t.transactionId, recordId: recordId) }
            if conflict {
                try writer.resolvePendingRecords(transactionId: t.transactionId, runId: runId, note: "verified by \(location)")
                return false
            }
            agrees = differences.isEmpty
            if !agrees {
                // A record that contradicts the transaction is not trusted for its refund either:
                // the refund waits for a record that agrees with the first source.
                let refund = e.cancellationMs == nil ? t.cancellationMs.map {
                    "; the refund it reports (cancelled \(Day(epochMilliseconds: $0))) is not posted from it, but when a record agreeing with the first source reports it"
                } : nil
                // Another environment: the ledger holds one transaction per id, so a purchase of
                // this record's book under an id the other book holds is in none of its figures.
                // A production transaction taken from an unsigned receipt that Apple's signed data
                // calls sandbox: the production book may hold a test purchase, said on its Run
                // Info (`findingBook`), not as test data on the sandbox one.
                var signedSaysSandbox = false
                if e.book == .production && t.book == .sandbox {
                    signedSaysSandbox = try writer.recordKind(recordId) == "signed" && writer.recordKind(existing.firstRecordId) != "signed"
                }
                let otherBook = e.book == t.book ? ""
                    : signedSaysSandbox
                    ? "; so the production book holds a purchase Apple's signed data calls sandbox, on the word of its first source, an unsigned receipt: if it is a test purchase, reverse it by hand"
                    : "; so this \(t.book.rawValue) purchase is in no \(t.book.rawValue) figure (the ledger holds one transaction per id, in the \(e.book.rawValue) book)"
                      + (t.book == .production ? ": if it is real, book it by hand" : ": a test purchase, nothing to book")
                try writer.openFinding(code: "TRANSACTION_CONFLICT", transactionId: t.transactionId, recordId: recordId,
                                       message: "\(location) reports transaction \(t.transactionId) differently from its first source\(try firstSourceNamed(existing.firstRecordId, location)): \(differences.joined(separator: ", ")); the first is kept\(otherBook)\(refund ?? "")",
                                       runId: runId)
            } else if e.cancellationMs == nil, let c = t.cancellationMs {
                try writer.setCancellation(transactionId: t.transactionId, cancellationMs: c, percentage: t.revocationPercentage)
                try noteUpgradeRefund(t, location: location)
                try refundAfterReversal(t, recordId: recordId, location: location)
            } else if let share = t.revocationPercentage, e.revocationPercentage == nil, existing.saleStatus == "pending",
                      let held = e.cancellationMs, let c = t.cancellationMs, Day(epochMilliseconds: held) == Day(epochMilliseconds: c),
                      try writer.takeRefundShare(transactionId: t.transactionId, cancellationMs: c, percentage: share) {
                // The share of the refund held in full, given while the sale waits: taken, as an
                // adopted record's is (whichever of a file's records is read first).
                try resolveFullRefundFindings(t.transactionId, share: share, location: location)
            } else if t.upgraded || t.shareUnknown, e.revocationPercentage == nil, let held = e.cancellationMs, let c = t.cancellationMs,
                      Day(epochMilliseconds: held) == Day(epochMilliseconds: c) {
                // The refund the ledger holds in full, now known to be an upgrade's (a later
                // record says so); one whose share is held was not posted in full.
                try noteUpgradeRefund(t, location: location)
            } else if t.shareSaid, let held = e.cancellationMs, let c = t.cancellationMs,
                      Day(epochMilliseconds: held) == Day(epochMilliseconds: c) {
                // The same day's refund, from a signed record saying its share (a receipt says none).
                let heldShare = e.revocationPercentage ?? 100_000
                if (t.revocationPercentage ?? 100_000) != heldShare {
                    // At another share than the one the ledger holds: not dropped.
                    try refundShareDiffers(t, held: held, heldShare: heldShare, recordId: recordId, location: location)
                } else if c >= held {
                    // At its own: the store's word again if a record of that day had said another
                    // (Apple taking back what it said).
                    try writer.restoreStoreRefundShare(transactionId: t.transactionId, share: heldShare, atMs: c)
                }
            } else if !refundSaidByCaller, let held = e.cancellationMs, let c = t.cancellationMs,
                      Day(epochMilliseconds: held) != Day(epochMilliseconds: c) {
                // One refund per transaction (accounting.md): a record reporting it refunded on
                // another day posts nothing, and is said, not dropped, as a signed REFUND is (a
                // notification says it itself, with what a reversal makes of it).
                try refundAgain(t, held: held, book: e.book, recordId: recordId, location: location)
            }
        }
        try writer.resolvePendingRecords(transactionId: t.transactionId, runId: runId, note: "verified by \(location)")
        return agrees
    }

    /// The findings that said a refund was posted in full for want of its share (UPGRADE_REFUND,
    /// REFUND_SHARE_UNKNOWN), once a record gives the share while the sale waits: resolved,
    /// saying so.
    mutating func resolveFullRefundFindings(_ transactionId: String, share: Int64, location: SourceLocation) throws {
        for code in ["UPGRADE_REFUND", "REFUND_SHARE_UNKNOWN"] {
            try writer.resolveFinding(code: code, transactionId: transactionId, runId: runId,
                                      saying: "\(location) gives the refund's share, \(ExactDecimal(mantissa: share, scale: 3))%: posted at it, as Apple refunded it")
        }
    }

    /// The transaction's first refund, read after a reversal asked for it (a REFUND_REVERSED
    /// read first waits for the refund it reverses) but dated after that reversal: the refund
    /// is the store's last word for reconciliation (the ledger posts the reversal all the same,
    /// so the sale stands in the books): said once (`REFUND_AFTER_REVERSAL`), as the books and
    /// reconciliation then disagree.
    mutating func refundAfterReversal(_ t: TransactionObservation, recordId: Int64, location: SourceLocation) throws {
        guard let c = t.cancellationMs, let reversal = try writer.reversalRequest(book: t.book, transactionId: t.transactionId),
              Day(epochMilliseconds: c) > reversal.date else { return }
        try writer.setStoreRefundShare(transactionId: t.transactionId, share: t.revocationPercentage ?? 100_000, atMs: c)
        try sayRefundAfterItsReversal(t.transactionId, refundMs: c, reversal: reversal, recordId: recordId, location: location)
    }

    /// The refund the ledger holds dated after the reversal that reverses it (read before or
    /// after it): both are posted, so the sale stands in the books, while reconciliation takes
    /// the latest-dated word, the refund. Said once (`REFUND_AFTER_REVERSAL`).
    mutating func sayRefundAfterItsReversal(_ transactionId: String, refundMs: Int64, reversal: (uuid: String, date: Day),
                                            recordId: Int64, location: SourceLocation) throws {
        let day = Day(epochMilliseconds: refundMs)
        guard try !writer.secondRefundSaid(transactionId: transactionId, day: day) else { return }
        try writer.openFinding(code: "REFUND_AFTER_REVERSAL", transactionId: transactionId, recordId: recordId,
                               message: "\(location): transaction \(transactionId)'s refund (revoked \(day)) is dated after REFUND_REVERSED \(reversal.uuid) (dated \(reversal.date)), which reverses it: the ledger posts both, so the sale stands in the books, while reconciliation takes the latest-dated word, the refund. If Apple refunded it after reversing, finance books the refund by hand; if a date is wrong, dismiss this once checked",
                               runId: runId)
    }

    /// A record reporting the transaction refunded on another day than the refund the ledger
    /// holds (`held`): nothing posted, the store's last word kept when it is the latest, and
    /// said once for that day (`REFUND_AGAIN`: receipts list every transaction again).
    mutating func refundAgain(_ t: TransactionObservation, held: Int64, book: Book, recordId: Int64, location: SourceLocation) throws {
        guard let c = t.cancellationMs else { return }
        let day = Day(epochMilliseconds: c)
        let reversal = try storeWordUnlessReversedLater(t.transactionId, book: book, share: t.revocationPercentage ?? 100_000, atMs: c)
        guard try !writer.secondRefundSaid(transactionId: t.transactionId, day: day) else { return }
        let reversed = reversal.map { " (reversed since by REFUND_REVERSED \($0.uuid), dated \($0.date))" } ?? " (kept)"
        try writer.openFinding(code: "REFUND_AGAIN", transactionId: t.transactionId, recordId: recordId,
                               message: "\(location) reports transaction \(t.transactionId) refunded on \(day), but the ledger holds its refund of \(Day(epochMilliseconds: held))\(reversed): nothing is posted from it. If Apple refunded it a second time, finance books that refund by hand",
                               runId: runId)
    }

    /// The store's last word on the refund, `share` dated `atMs`, unless the ledger keeps a
    /// reversal dated on or after that day (the later word); the reversal kept, if any.
    @discardableResult
    mutating func storeWordUnlessReversedLater(_ transactionId: String, book: Book, share: Int64, atMs: Int64) throws -> (uuid: String, date: Day)? {
        let reversal = try writer.reversalRequest(book: book, transactionId: transactionId)
        if reversal.map({ Day(epochMilliseconds: atMs) > $0.date }) ?? true {
            try writer.setStoreRefundShare(transactionId: transactionId, share: share, atMs: atMs)
        }
        return reversal
    }

    /// A signed record giving the refund the ledger holds (the same day's) another share: nothing
    /// posted (one refund per transaction), its share the store's last word for reconciliation
    /// (an order still crediting a sale now refunded in full is REFUNDED_STILL_CREDITED), and
    /// said once per share (`REFUND_AGAIN`), for finance to book the difference by hand.
    /// Only a record whose refund instant is not before the held one's (`held`) is the store's
    /// later word: an older record of that day read late is said, not taken.
    mutating func refundShareDiffers(_ t: TransactionObservation, held: Int64, heldShare: Int64, recordId: Int64, location: SourceLocation) throws {
        guard let c = t.cancellationMs else { return }
        let share = t.revocationPercentage ?? 100_000
        let day = Day(epochMilliseconds: c)
        if c >= held { try storeWordUnlessReversedLater(t.transactionId, book: t.book, share: share, atMs: c) }
        func percent(_ s: Int64) -> String { "\(ExactDecimal(mantissa: s, scale: 3))%" }
        let said = "refunded on \(day) at \(percent(share)), but the ledger holds"
        guard try !writer.findingSaid(code: "REFUND_AGAIN", transactionId: t.transactionId, containing: said) else { return }
        try writer.openFinding(code: "REFUND_AGAIN", transactionId: t.transactionId, recordId: recordId,
                               message: "\(location) reports transaction \(t.transactionId) \(said) that day's refund at \(percent(heldShare)): nothing is posted from it (one refund per transaction). If Apple refunded \(share > heldShare ? "more" : "less") than the ledger holds, finance books the difference by hand",
                               runId: runId)
    }

    /// A refund the ledger takes from the cancellation of a subscription the user upgraded from
    /// (`is_upgraded`) with no refund percentage: posted in full, as accounting.md books a
    /// cancellation, but Apple refunds an upgrade's unused time only, prorated. Said once per
    /// transaction (`UPGRADE_REFUND`), for finance to book the difference by hand.
    ///
    /// A refund Apple calls prorated (`REFUND_PRORATED`) whose record gives no share is posted in
    /// full too, and said once per transaction (`REFUND_SHARE_UNKNOWN`).
    mutating func noteUpgradeRefund(_ t: TransactionObservation, location: SourceLocation) throws {
        // (A free trial, a family member's access or a signed price of 0 moves no money: no refund.)
        guard t.upgraded || t.shareUnknown, t.revocationPercentage == nil, !t.shareSaid, let c = t.cancellationMs, !t.isFreeTrial, t.ownGrossMinor != 0 else { return }
        if t.shareUnknown {
            guard try writer.findingMessage(code: "REFUND_SHARE_UNKNOWN", transactionId: t.transactionId) == nil else { return }
            try writer.openFinding(code: "REFUND_SHARE_UNKNOWN", transactionId: t.transactionId, recordId: nil, message: """
                \(location): transaction \(t.transactionId) was refunded on \(Day(epochMilliseconds: c)) with revocationType REFUND_PRORATED \
                but no revocationPercentage: the share refunded cannot be told, so the refund is posted in full. Compare with \
                Apple's financial report (iapledger true-up) and book the difference by hand
                """, runId: runId)
            return
        }
        guard try writer.findingMessage(code: "UPGRADE_REFUND", transactionId: t.transactionId) == nil else { return }
        let refunded = t.expiresMs.map { expires in
            expires > c ? "; its period ran to \(Day(epochMilliseconds: expires)), so Apple's refund is about the unused part from \(Day(epochMilliseconds: c))" : ""
        } ?? ""
        try writer.openFinding(code: "UPGRADE_REFUND", transactionId: t.transactionId, recordId: nil, message: """
            \(location): transaction \(t.transactionId) was cancelled on \(Day(epochMilliseconds: c)) because the user upgraded \
            (is_upgraded, isUpgraded in signed data): its refund is posted in full, as accounting.md books a cancellation with no refund percentage, \
            but Apple refunds an upgraded subscription's unused time only, prorated\(refunded). Compare with Apple's \
            financial report (iapledger true-up) and book the difference by hand
            """, runId: runId)
    }

    /// A signed record `t` of the purchase a legacy receipt brought (`existing`, which names no
    /// storefront or price): accounting.md books the sale in the transaction's own storefront
    /// at its own price. While the sale waits, the transaction is taken from the signed record
    /// (true), unless it gives more than storefront and price differently (said, the first
    /// kept, so that a renewal never moves chain unseen); once posted, a booking that differs is
    /// said (entries are never rewritten).
    enum SignedOverReceipt { case adopted, kept, conflict }

    mutating func signedOverReceipt(_ existing: StoredTransaction, _ t: TransactionObservation, recordId: Int64,
                                    location: SourceLocation) throws -> SignedOverReceipt {
        let e = existing.observation
        switch existing.saleStatus {
        case "pending":
            let others = Self.otherDifferences(e, t)
            guard others.isEmpty else {
                try writer.openFinding(code: "TRANSACTION_CONFLICT", transactionId: t.transactionId, recordId: recordId, message: """
                    \(location) reports transaction \(t.transactionId) differently from its first source, a legacy receipt: \
                    \(others.joined(separator: ", ")); the first is kept, and the storefront and price the signed record gives are not taken
                    """, runId: runId)
                return .conflict
            }
            return try writer.adoptRecord(t, recordId: recordId, previousRecordId: existing.firstRecordId) ? .adopted : .kept
        case "posted":
            guard let booked = try writer.entry(book: e.book, transactionId: t.transactionId, kind: .sale) else { return .kept }
            let currency = Currency.isoUppercased(t.currency ?? booked.figures.currency)
            let own = t.priceMilliunits.map { Currency.minorUnits(milliunits: $0, exponent: Currency.exponent(currency) ?? 2) }
            guard (t.storefront.map { Currency.isoUppercased($0) != booked.storefront } ?? false)
                    || currency != booked.figures.currency || (own.map { $0 != booked.figures.grossMinor } ?? false) else { return .kept }
            func amount(_ minor: Int64, _ currency: String) -> String { Currency.format(minor: minor, currency: currency) + " " + currency }
            // One finding per sale, not per record: refreshed by a later record that says
            // something else, left as it is (naming the record that first said it, and
            // dismissed if finance dismissed it) by one that says the same.
            let says = """
                 gives storefront \(t.storefront ?? "(none)")\(own.map { ", price " + amount($0, currency) } ?? ""); \
                the sale was booked on \(booked.date) from its legacy receipt, which names neither, at storefront \(booked.storefront), \
                gross \(amount(booked.figures.grossMinor, booked.figures.currency)). The entry stays as posted (entries are never rewritten): \
                book the difference by hand if it matters
                """
            if try writer.findingMessage(code: "SIGNED_AFTER_POSTING", transactionId: t.transactionId)?.hasSuffix(says) == true { return .kept }
            try writer.openFinding(code: "SIGNED_AFTER_POSTING", transactionId: t.transactionId, recordId: nil,
                                   message: "\(location)" + says, runId: runId)
            return .kept
        default:
            return .kept
        }
    }

    /// The first source of a transaction, named for a conflict read at `location`: " (path:line,
    /// read by run N)", saying so when it is the same line of an earlier version of the file
    /// (the file was changed after it was read).
    func firstSourceNamed(_ recordId: Int64, _ location: SourceLocation) throws -> String {
        guard let place = try writer.recordPlace(recordId) else { return "" }
        if place.path == location.path && place.line == location.line {
            return " (the same line of this file as run \(place.runId) read it: the file was changed after it was read)"
        }
        return " (\(place.path):\(place.line), read by run \(place.runId))"
    }

    /// Where a signed record `b` of the same purchase gives more than storefront and price
    /// differently from the stored `a`: the subscription it renews, its expiry, whether it is
    /// free (a trial, or a price of 0), its account token (each compared when both give it).
    static func otherDifferences(_ a: TransactionObservation, _ b: TransactionObservation) -> [String] {
        var out: [String] = []
        if let x = a.originalTransactionId, let y = b.originalTransactionId, x != y { out.append("original transaction \(x) vs \(y)") }
        if let x = a.expiresMs, let y = b.expiresMs, x != y { out.append("expiry \(Day.instantText(x)) vs \(Day.instantText(y))") }
        // Free by the record itself: a trial or shared access, or (signed) a price that is no
        // minor unit of its currency, as the night decides a gross of zero: Apple signs a free
        // trial as an offer (`FREE_TRIAL`) at price 0.
        func free(_ o: TransactionObservation) -> Bool { o.isFreeTrial || o.ownGrossMinor == 0 }
        if free(a) != free(b) { out.append(free(a) ? "free vs paid" : "paid vs free") }
        if let x = a.appAccountToken, let y = b.appAccountToken, x != y { out.append("app account token \(x) vs \(y)") }
        return out
    }
}

/// A night committed, and its workbooks were not all written: the night's summary, and why.
public struct WorkbooksNotWritten: Error, CustomStringConvertible {
    public var result: NightlyRun.Result
    public var message: String
    public var description: String { message }
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
