import ArgumentParser
import Foundation
import Synchronization
import LedgerCore
import LedgerRead
import LedgerRun
import LedgerStore
import LedgerReconcile
import LedgerReport

@main
struct IAPLedger: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iapledger",
        abstract: "Nightly in-app-purchase books: verified store data in, double-entry ledger and XLSX workbooks out.",
        version: NightlyRun.toolVersion,
        subcommands: [Init.self, Run.self, Balance.self, Exceptions.self, Findings.self, Trace.self, Verify.self, Close.self, Dismiss.self, Report.self, TrueUpCommand.self, Demo.self]
    )

    static func main() {
        // A reader that went away (`| head`, a logger that died) makes a write fail with EPIPE,
        // which the commands see and exit 1 on, instead of SIGPIPE ending the process where it
        // stands: a night killed so after its commit wrote no workbooks and said nothing.
        signal(SIGPIPE, SIG_IGN)
        var command: ParsableCommand
        do { command = try parseAsRoot(nil) } catch { exitCleanly(error) }
        do {
            try command.run()
        } catch let e as ValidationError {
            // A value a command checks when it runs (a date that is no date, a month, a
            // category): said with that command's usage, as its parse says an unknown option,
            // not the top-level one.
            let sub = type(of: command)
            let name = sub == IAPLedger.self ? "iapledger" : "iapledger \(sub._commandName)"
            StandardError.write("Error: \(e.message)\nUsage: \(usageString(for: sub))\n  See '\(name) --help' for more information.\n")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        } catch {
            exitCleanly(error)
        }
    }

    /// Ends the process for `error`. `--help`, `help CMD` and `--version` (a clean exit) are
    /// printed here, so that output cut short (a full disk) exits 1 as every command's does;
    /// it exited 0.
    static func exitCleanly(_ error: Error) -> Never {
        guard exitCode(for: error) == .success else { exit(withError: error) }
        let message = fullMessage(for: error)
        if !message.isEmpty { print(message) }
        if let failed = StandardError.flushStandardOutput() {
            if !failed.readerGone {
                StandardError.write("iapledger: error: its output could not be written to standard output (\(failed.why))\n")
            }
            Foundation.exit(ExitCode.failure.rawValue)
        }
        Foundation.exit(0)
    }
}

/// Options every command shares.
struct WorkspaceOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The workspace folder (default: the current folder).", valueName: "folder"))
    var workspace: String?

    var path: String { workspace ?? "." }

    var url: URL { URL(fileURLWithPath: path) }
    /// ` --workspace <the folder, absolute>` for the commands a message tells to run again (a
    /// log read later, from another folder), when the command was given one.
    var argument: String { path == "." ? "" : " --workspace " + ShellWord.quoted(url.standardizedFileURL.path) }
}

/// Turns known failures into one clear line on stderr and a non-zero exit.
/// - Parameter sayReaderGone: say on stderr that the output was cut short also when its reader
///   went away (a night's log piped to a logger that died), not only on a full disk.
func runReporting(sayReaderGone: Bool = false, _ body: () throws -> Void) throws {
    do {
        try body()
        // What it printed is its result (a CSV, a trace, a night's chain head): cut short by a
        // full disk or a closed output, it must not exit 0.
        if let failed = StandardError.flushStandardOutput() {
            // A reader that stopped reading (`| head`) was told what it wanted: said by the status
            // alone (but for a night, whose summary is its log).
            if !failed.readerGone || sayReaderGone {
                StandardError.write("iapledger: error: its output could not be written to standard output (\(failed.why)): what the command did is done, what it printed is lost or cut short\n")
            }
            throw ExitCode.failure
        }
    } catch let e as ExitCode {
        throw e
    } catch let e as CleanExit {
        throw e
    } catch let e as ValidationError {
        throw e
    } catch {
        StandardError.write("iapledger: error: \(TerminalText.visible("\(error)"))\(Ledger.damageAdvice(for: error) ?? "")\n")
        throw ExitCode.failure
    }
}

/// Text that says something: not blank, no control characters (it is recorded in the ledger).
func isNamed(_ text: String) -> Bool {
    !text.trimmingCharacters(in: .whitespaces).isEmpty && text.unicodeScalars.allSatisfy { !CharacterSet.controlCharacters.contains($0) }
}

/// `--by NAME` of `close` and `dismiss`, trimmed (nil when not given: the caller takes $USER).
func namedBy(_ by: String?) throws -> String? {
    guard let by else { return nil }
    guard isNamed(by) else { throw ValidationError("--by must name someone (no control characters), got \"\(TerminalText.visible(by))\"") }
    return by.trimmingCharacters(in: .whitespaces)
}

func parseDay(_ text: String?) throws -> Day {
    guard let text else { return todayUTC() }
    guard let d = Day(iso: text) else { throw ValidationError("--as-of must be a date YYYY-MM-DD, got \(text)") }
    return d
}

/// An as-of date refused before anything is opened.
struct AsOfError: Error, CustomStringConvertible {
    var description: String
}

/// The as-of date of `run` and `close` (default: today, UTC), refused when later than
/// tomorrow: `run` records its date and nights go forward, so one run dated in 2030 made every
/// later plain `run` fail. Tomorrow is allowed for `run`: it is already tomorrow in time zones
/// east of UTC. Not for `close` (`tomorrowAllowed` false): on a month's last day (UTC) it would
/// close the month while the ledger's days still run in it. Checked before the workspace is
/// opened, so a refused date writes nothing.
func parseAsOf(_ text: String?, today: Day = todayUTC(), tomorrowAllowed: Bool = true, why: String) throws -> Day {
    let day = try parseDay(text)
    let latest = tomorrowAllowed ? today + 1 : today
    guard day <= latest else {
        throw AsOfError(description: "--as-of \(day) is later than \(tomorrowAllowed ? "tomorrow" : "today") (\(latest), UTC): \(why). Nothing was written")
    }
    return day
}

/// Today, UTC.
func todayUTC() -> Day { Day(epochMilliseconds: Int64(Date().timeIntervalSince1970) * 1000) }

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a workspace with a commented example config and example rules.",
        discussion: "Writes iapledger.toml (commented), the example rules in rules/ (commented), the workbook layouts in layouts/, and the empty inbox folders (inbox/receipts, inbox/signed, inbox/orders) and reports/. It replaces no file: a folder already holding one of them is refused, naming it, with nothing written.")

    @Argument(help: ArgumentHelp("The folder to create (default: the current folder).", valueName: "dir"))
    var folder: String?
    var dir: String { folder ?? "." }

    func run() throws {
        try runReporting {
            let ws = try Workspace.create(at: URL(fileURLWithPath: dir))
            print("Created workspace \(ws.root.path)")
            print("  edit \(ws.configURL.path) and the CSV files in \(ws.rulesURL.path)/")
            print("  put receipt responses in inbox/receipts/, orders in inbox/orders/, signed data in inbox/signed/")
            print("  the workbooks' sheets, columns and formats are in \(ws.layoutsURL.path)/ (optional)")
            print("  then run: iapledger run --workspace \(ShellWord.quoted(ws.root.path))")
        }
    }
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The nightly job: read new inbox files, post, write the workbooks.")

    @OptionGroup var ws: WorkspaceOption
    @Option(name: .customLong("as-of"), help: "The books' date, YYYY-MM-DD (default: today, UTC).")
    var asOf: String?
    @Flag(help: "Print each stage's wall time, count, throughput and the peak memory after the summary.")
    var timings = false
    @Flag(name: .customLong("no-progress"), help: "No progress line, even on a terminal (there is none under cron).")
    var noProgress = false

    func run() throws {
        StopSignals.sayWhenStopped(asOf: asOf, workspaceArgument: ws.argument)
        try runReporting(sayReaderGone: true) {
            let day = try parseAsOf(asOf, why: "the ledger keeps each night's date and nights go forward, so every later run dated today would be refused")
            let progress = RunProgress(showProgress: noProgress ? false : nil)
            var nightly = NightlyRun(workspace: Workspace(ws.url), asOf: day, progress: progress)
            nightly.workspaceArgument = ws.argument
            // The summary is said at the commit, before the workbooks are written (a night stopped
            // while writing them has it in its log all the same); the files as written, after.
            nightly.didCommit = { runId in StopSignals.committedRun.store(runId, ordering: .relaxed) }
            nightly.committed = { committed in
                StopSignals.committedRun.store(committed.runId, ordering: .relaxed)
                defer { StopSignals.summarySaid.store(true, ordering: .relaxed) }
                printSummary(committed, workspace: ws.argument,
                             setWritten: { FileManager.default.fileExists(atPath: Workspace(ws.url).reportDirectory(asOf: $0.lastDay).path) })
                // Dated tomorrow (UTC; allowed, as it is already tomorrow east of UTC): until
                // midnight UTC a plain `run` (as of today) is refused, nights going forward.
                let today = todayUTC()
                if day > today {
                    print("  note: as of \(day), after today (\(today), UTC): until midnight UTC a run as of today (a plain `iapledger run`) is refused as dated before this one")
                }
                fflush(stdout)
            }
            let result: NightlyRun.Result
            do {
                result = try nightly.run()
            } catch let failed as WorkbooksNotWritten {
                // Committed: the files written whole before the error, then the error.
                printReportFiles(failed.result)
                fflush(stdout)
                throw failed
            } catch {
                // Stopped before its commit (a rules file missing, an input that cannot be
                // read): the night rolled back, which the message says where it does not yet.
                throw NightNotWritten.saying(error, again: "iapledger run --as-of \(day)\(ws.argument)")
            }
            printReportFiles(result)
            if timings {
                print("  timings:")
                print(progress.table(), terminator: "")
            }
        }
    }
}

/// A night that stopped before its commit, said with what that means for the ledger.
struct NightNotWritten: Error, CustomStringConvertible {
    var description: String

    /// - Parameter again: the command that runs the night again.
    static func saying(_ error: Error, again: String) -> Error {
        let text = "\(error)"
        guard !(error is ExitCode), !(error is CleanExit), !(error is ValidationError) else { return error }
        let committed = StopSignals.committedRun.load(ordering: .relaxed)
        if committed > 0 {
            // Committed, and stopped before its summary was said (a read after the commit).
            guard !StopSignals.summarySaid.load(ordering: .relaxed) else { return error }
            return NightNotWritten(description: text + "; the night is committed (run \(committed): the ledger holds it), but its summary and workbooks were not written: run `\(again)` again to write them")
        }
        let said = ["othing was written", "nothing of this run was written", "the ledger is as it was", "othing was read or written"]
        guard !said.contains(where: { text.contains($0) }) else { return error }
        return NightNotWritten(description: text + "; nothing of this night was written (the ledger holds what it held before it)")
    }
}

/// SIGTERM (systemd's stop or timeout) and SIGINT end the night as SIGKILL would (the
/// ledger as before the night, or after its commit), but with a line in the log saying so.
enum StopSignals {
    nonisolated(unsafe) static var sources: [DispatchSourceSignal] = []
    /// The night's run id once its commit is said (0 before): the line a signal leaves says
    /// whether the ledger holds the night.
    static let committedRun = Atomic<Int64>(0)
    /// Whether the committed night's summary has been printed.
    static let summarySaid = Atomic<Bool>(false)
    /// Its own thread: the global queues may all be busy with the night's work.
    static let queue = DispatchQueue(label: "iapledger.stop-signals")

    static func sayWhenStopped(asOf: String?, workspaceArgument: String = "") {
        for (sig, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            // A signal ignored when the process started (SIGINT of a background job) stays so.
            func address(_ h: __sighandler_t?) -> UInt { h.map { unsafeBitCast($0, to: UInt.self) } ?? 0 }
            if address(signal(sig, SIG_IGN)) == address(SIG_IGN) { continue }
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                let again = "`iapledger run\(asOf.map { " --as-of \($0)" } ?? "")\(workspaceArgument)`"
                let run = committedRun.load(ordering: .relaxed)
                let message = run > 0
                    ? "iapledger: stopped by \(name) after the night's commit (run \(run)\(summarySaid.load(ordering: .relaxed) ? ", its summary above" : "")): the ledger holds the night; some of its workbooks may not be written; run \(again) again: it writes them\n"
                    : "iapledger: stopped by \(name): a night stopped before its commit leaves the ledger as it was, one stopped after it lacks only its workbooks; run \(again) again: it completes what this one did not\n"
                StandardError.write(message)
                // Ended by the signal itself, as without this handler (a scheduler sees why).
                signal(sig, SIG_DFL)
                var set = sigset_t()
                sigemptyset(&set)
                sigaddset(&set, sig)
                pthread_sigmask(SIG_UNBLOCK, &set, nil)
                raise(sig)
                _exit(128 + sig)
            }
            source.resume()
            sources.append(source)
        }
    }
}

/// - Parameter workspace: the `--workspace` argument the commands it names take ("" for none).
func printSummary(_ r: NightlyRun.Result, workspace: String = "", setWritten: (Month) -> Bool = { _ in true }) {
    let c = r.counts
    if let last = r.nothingNewSinceRun {
        // A re-run of the same night with nothing new: nothing recorded, run `last`'s workbooks again.
        print("iapledger run as of \(r.asOf): nothing new since run \(last) (same as-of date, \(r.filesSkipped) files unchanged, nothing to post); its workbooks are written again")
    } else {
        print("iapledger run \(r.runId) as of \(r.asOf)")
        print("  files: \(r.filesRead) read, \(r.filesSkipped) unchanged (skipped)")
        print("  records: \(c.read) new: \(c.verified) verified"
              + (c.repeatedOrderLines > 0 ? " (\(c.repeatedOrderLines) of them order lines that change nothing: each repeats its order's current version, or its file's last line for the order does)" : "")
              + ", \(c.pending) pending, \(c.rejected) rejected"
              + (r.recordsSettledSameNight > 0 ? " (\(r.recordsSettledSameNight) of these settled the same night: by a later record, a transaction already verified, or as the repeat of a record read before)" : "")
              + "; \(c.skipped) already read")
        print("  entries posted: \(c.entriesPosted)" + r.posted.breakdown(workspace: workspace, setWritten: setWritten))
    }
    if !r.repeatedFiles.isEmpty {
        print("  files read that repeat a file read before under another name (copied or renamed: their records are kept as theirs; nothing they report is posted twice, and a record of theirs still pending or rejected is listed once, as the one it repeats): "
              + r.repeatedFiles.map { "\(TerminalText.visible($0.path)) (as \(TerminalText.visible($0.earlier)), read by the night of \($0.readOn))" }.joined(separator: ", "))
    }
    if r.recordsSettled > 0 {
        print("  records settled by this night's data: \(r.recordsSettled) pending or rejected before (verified by another record, a cut line read whole, an order line corrected), off the open lists (trace says how)")
    }
    if r.recordsDismissed > 0 {
        print("  records dismissed (`iapledger dismiss`): \(r.recordsDismissed), off the open lists with who dismissed them and why (trace shows it)")
    }
    if r.findingsDismissed > 0 {
        print("  findings dismissed (`iapledger dismiss --finding`): \(r.findingsDismissed), off the open lists with who dismissed them and why (trace shows it)")
    }
    if !r.changedFiles.isEmpty {
        print("  files read before and changed since (their new records read; a line changed after it was read is a new record): "
              + r.changedFiles.map { "\(TerminalText.visible($0.path)) (\($0.newRecords) new record\($0.newRecords == 1 ? "" : "s"))" }.joined(separator: ", "))
    }
    if !r.putBackFiles.isEmpty {
        print("  files put back to a version read before (skipped: a change undone in place is not read again, and what the later version brought stands; to bring back rows as they were, send them in a new file that is no byte copy of an earlier one): "
              + r.putBackFiles.map(TerminalText.visible).joined(separator: ", "))
    }
    for o in r.otherRoots {
        // Apple signs App Store data under Apple Root CA - G3 only: a root of the config's own
        // (a test root) let these in; production data under it is not Apple's.
        print("  \(o.production > 0 ? "WARNING: " : "")signed records verified to \(TerminalText.visible(o.root)) (trusted_roots), not to Apple Root CA - G3: \(o.records)"
              + (o.production > 0 ? ", \(o.production) of them saying they are production data, which Apple signs under its own root only: not Apple's, unless that root is (take it out of trusted_roots once testing is done)" : " (test data)"))
        // Said where a scheduler mails what a night says (the night goes on: the records verify).
        if o.production > 0 {
            StandardError.write("iapledger: WARNING: \(o.production) signed record\(o.production == 1 ? "" : "s") saying \(o.production == 1 ? "it is" : "they are") production data verified to \(TerminalText.visible(o.root)) (trusted_roots), not to Apple Root CA - G3\n")
        }
    }
    let taken = r.rejectedOfBundleIdsNowNamed
    if taken.records > 0 {
        // A first night run before bundle_ids named the app's: the config fixed, the files stay read.
        print("  note: \(taken.records) record\(taken.records == 1 ? "" : "s") rejected by earlier nights as of another app (WRONG_BUNDLE_ID) \(taken.records == 1 ? "is" : "are") of "
              + taken.bundleIds.map(TerminalText.visible).joined(separator: ", ") + ", which bundle_ids now names: a file read is not read again, so \(taken.records == 1 ? "it stays" : "they stay") rejected; "
              + "put a copy of each file under another name in its inbox folder (read as a new file), then `iapledger dismiss FILE` the original: "
              + taken.files.prefix(10).map(TerminalText.visible).joined(separator: ", ")
              + (taken.files.count > 10 ? " and \(taken.files.count - 10) more (`iapledger findings` and the Rejected sheet list them)" : ""))
    }
    if !r.ordersBroughtBack.isEmpty {
        let undone = r.ordersBroughtBack.filter(\.reversalUndone).count
        print("  orders brought back to an earlier version, or credited again after their reversal, by rows read tonight (a later row replaces an earlier one; an old export sent again, not as a byte copy, undoes what came after it): \(r.ordersBroughtBack.count)"
              + (undone > 0 ? ", \(undone) of them with their reversal undone (credited again)" : "") + ": "
              + r.ordersBroughtBack.prefix(10).map { "\(TerminalText.visible($0.orderId)) (\(TerminalText.visible($0.location))\($0.reversalUndone ? ", reversal undone" : ""))" }.joined(separator: ", ")
              + (r.ordersBroughtBack.count > 10 ? " and \(r.ordersBroughtBack.count - 10) more (`iapledger trace ORDER` shows each one's versions)" : ""))
    }
    if !r.goneFiles.isEmpty {
        print("  files gone before they were read (moved or removed while the night ran: not read, and read by the night they are back): "
              + r.goneFiles.prefix(10).map(TerminalText.visible).joined(separator: ", ")
              + (r.goneFiles.count > 10 ? " and \(r.goneFiles.count - 10) more" : ""))
    }
    let t = r.totals
    print("  ledger: \(t.transactionsPosted) transactions posted, \(t.transactionsPending) waiting (for a rule or an order), \(t.transactionsFree) free; \(t.entries) entries")
    if let changed = r.rulesChanged {
        print("  rules changed since run \(changed.runId): posted sales the rules now book otherwise (entries never change: book a correction where one is due; each is an open RULES_CHANGED finding, `iapledger dismiss --finding RULES_CHANGED:ID` once booked):")
        for line in changed.lines { print("    " + TerminalText.visible(line)) }
    }
    let x = r.exceptions
    if x.openTotal > 0 || x.resolved > 0 {
        let tonight = r.nothingNewSinceRun == nil ? " (\(x.opened) opened by this run, \(x.resolved) resolved)" : ""
        print("  reconciliation: \(x.openTotal) exception\(x.openTotal == 1 ? "" : "s") open\(tonight)"
              + (x.open.isEmpty ? "" : ": " + x.open.map { "\($0.count) \($0.category)" }.joined(separator: ", "))
              + "; `iapledger exceptions` lists them, the reconciliation workbook has them with their age")
    } else {
        print("  reconciliation: no exception open")
    }
    print("  chain head: \(t.chainHead) (the last entry's hash; keep it: `iapledger verify --runs` shows it again)")
    if let seal = t.seal { print("  seal: \(seal) (the ledger's seal: its records, files and closes too; keep it: `iapledger verify` shows it again)") }
    if !r.problems.isEmpty || r.findingsReopened > 0 {
        let findings = r.newFindings
        print("  this run: \(r.problemRecords) record\(r.problemRecords == 1 ? "" : "s") still pending or rejected (not posted), \(findings) new finding\(findings == 1 ? "" : "s")"
              + (r.findingsReopened > 0 ? " and \(r.findingsReopened) of earlier nights opened again (found again after they were resolved)" : "")
              + (r.problems.isEmpty ? "; `iapledger findings` lists them, Run Info in the workbook too" : "; see Run Info in the workbook:"))
        // Records, then findings: each kind with its count by reason, then its first ten lines.
        func list(_ lines: ArraySlice<String>, total: Int, counts: [(key: String, count: Int)], noun: String, all: String) {
            guard !lines.isEmpty else { return }
            print("    \(noun)s: " + counts.map { "\($0.count) \(TerminalText.visible($0.key))" }.joined(separator: ", "))
            for p in lines.prefix(10) { print("      " + TerminalText.visible(p)) }
            if total > 10 { print("      ... and \(total - 10) more \(noun)\(total - 10 == 1 ? "" : "s") (\(all))") }
        }
        list(r.problems.prefix(r.problemRecordsListed), total: r.problemRecords, counts: r.recordCounts, noun: "record", all: "Run Info lists the first thousand of each code, the reconciliation workbook 100,000")
        list(r.problems.dropFirst(r.problemRecordsListed), total: r.newFindings, counts: r.findingCounts, noun: "finding",
             all: "`iapledger findings` lists them all, Run Info the first \(FinanceReport.findingsListed) of each code")
    }
    if r.datedAfterAsOf.count > 0, let latest = r.datedAfterAsOf.latest {
        let n = r.datedAfterAsOf.count
        print("  \(n) entr\(n == 1 ? "y is" : "ies are") dated after \(r.asOf) (the latest \(latest)): in the ledger, in no workbook as of \(r.asOf) (`iapledger balance --through \(latest)` includes \(n == 1 ? "it" : "them"))")
    }
    if let m = r.closedByConfig {
        print("  closed through \(m): [periods] closed_through in iapledger.toml; entries dated \(m.lastDay) or earlier now post on \(m.next.firstDay), marked late")
        for line in r.closeWarnings { print(line) }
    }
    if !r.rulesNotRead.isEmpty {
        print("  rules files not read: the nights read rules/\(RulesReader.files.joined(separator: ", ")) only; the rows of these are not used (move them into those files):")
        for path in r.rulesNotRead { print("    " + TerminalText.visible(path)) }
    }
    if !r.notRead.isEmpty {
        print("  inbox files not read (a file in transfer is read once it has its final name; any other: rename or move it):")
        // Every one: a folder of more than a few such files is already one line.
        for line in r.notRead { print("    " + TerminalText.visible(line)) }
    }
}

/// The files of a night's sets, as written or kept, and the registrations' head after them.
func printReportFiles(_ r: NightlyRun.Result) {
    let kept = Set(r.keptFiles)
    for m in r.setsMissing {
        if !m.paths.isEmpty {
            print("  not written by the night as of \(m.day) (it stopped after its commit): \(m.paths.joined(separator: ", ")); `\(m.command)` writes that day's set from the ledger as it stands")
        }
        if !m.stale.isEmpty {
            print("  not written again by the last night as of \(m.day) (run \(m.run), stopped after its commit): \(m.stale.joined(separator: ", ")) \(m.stale.count == 1 ? "is" : "are") an earlier night's of that date, without run \(m.run)'s data; `\(m.command)` writes that day's set from the ledger as it stands")
        }
    }
    for w in r.workbooks {
        printReportFile(w, kept: kept.contains(w))
        if let note = r.keptAsideNotes[w] { print("    " + TerminalText.visible(note)) }
    }
    if let head = r.totals.reportFilesHead, !r.workbooks.isEmpty {
        printRegistrationHead(head)
    }
}

/// The registrations' chain head after the files a command wrote, for the operator to keep.
func printRegistrationHead(_ head: String) {
    print("  report files: \(head) (the registrations' chain head after these files; keep it: `iapledger verify --runs` shows it again)")
}

/// One file of a set under `reports/`: written, or kept as it was.
/// The files a set written again (`report`, `close`) wrote, each with what it replaced: the
/// version registered at its path before, the same bytes or other (and why), or a file kept aside.
func printReportFiles(_ files: [ReportFile]) {
    for f in files {
        printReportFile(f.url, kept: f.kept)
        if let note = f.keptAsideNote { print("    " + TerminalText.visible(note)) }
        if let earlier = f.earlier { print("    " + earlier) }
    }
}

func printReportFile(_ url: URL, kept: Bool) {
    let path = TerminalText.visible(url.path)
    print(kept ? "  kept \(path) (its entries and columns unchanged since it was written)" : "  wrote \(path)")
}

struct Balance: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the trial balance.")

    enum BookChoice: String, ExpressibleByArgument, CaseIterable { case production, sandbox, all }
    enum Format: String, ExpressibleByArgument, CaseIterable { case table, csv, json }

    @OptionGroup var ws: WorkspaceOption
    @Option(help: "Which book: production, sandbox or all.") var book: BookChoice = .all
    @Option(help: "Output format: table, csv or json.") var format: Format = .table
    @Option(help: "Entries dated on or before this day, YYYY-MM-DD (default: the last run's as-of date, as its Trial Balance sheet; `all` for every entry).")
    var through: String?

    func run() throws {
        try runReporting {
            let (config, ledger) = try Workspace(ws.url).openExistingLedger()
            let day: Day?
            switch through {
            case "all"?: day = nil
            case let text?:
                guard let d = Day(iso: text) else { throw ValidationError("--through must be a date YYYY-MM-DD or all, got \(text)") }
                day = d
            case nil: day = try ledger.read { try $0.lastAsOf() }
            }
            let chosen = book == .all ? nil : Book(rawValue: book.rawValue)
            let rows = try ledger.read { try $0.trialBalance(book: chosen, through: day) }
            let which = chosen.map { "the \($0.rawValue) book" } ?? "either book"
            let empty = day.map { "No postings in \(which) dated on or before \($0)." } ?? "No postings in \(which) yet."
            print(BalanceOutput.render(rows, format: format.rawValue, reportingCurrency: config.reportingCurrency, empty: empty), terminator: "")
            // Entries dated later are left out, as on the Trial Balance sheet: said, on stderr so
            // that csv and json stay data.
            if let day, case let later = try ledger.read({ try $0.entriesDated(after: day, book: chosen) }), later.count > 0, let latest = later.latest {
                StandardError.write("balance through \(day): \(later.count) entr\(later.count == 1 ? "y" : "ies") dated after it (the latest \(latest)) left out; `--through \(latest)` or `--through all` includes \(later.count == 1 ? "it" : "them")\n")
            }
            // Books that do not balance are a broken ledger, not a report: said on stderr (csv and
            // json stay data), and the exit is 1, as for `verify`, for a script to stop on.
            let unbalanced = BalanceOutput.unbalanced(rows, reportingCurrency: config.reportingCurrency)
            if !unbalanced.isEmpty {
                StandardError.write("balance: the balances do not sum to zero: \(unbalanced.joined(separator: ", ")); run `iapledger verify`\n")
                throw ExitCode.failure
            }
        }
    }
}

struct TrueUpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "true-up",
        abstract: "Compare App Store Connect financial reports (what Apple pays) with the ledger's estimates of the same days, by currency and product.",
        discussion: "Reads Apple's monthly financial reports (tab-separated, one per region and fiscal month, as downloaded from App Store Connect), checks each against its own footer, and compares their units and proceeds with the production book's entries whose original date falls in the report's days, in the currencies the reports name. A report that cannot be read or whose footer disagrees with its rows, the same report given twice, or reports whose periods overlap stop the command naming the file (and line). Nothing is written to the ledger: the differences are for finance to true up. Exit 0 when the comparison was made, differences or not.")

    enum Format: String, ExpressibleByArgument, CaseIterable { case table, csv, json }

    @OptionGroup var ws: WorkspaceOption
    @Argument(help: "Financial report files (paths as given, not inside the workspace).") var files: [String]
    @Option(help: "Output format: table, csv or json.") var format: Format = .table
    @Option(help: "Also write the comparison as a workbook to this path (.xlsx).") var xlsx: String?

    func run() throws {
        try runReporting {
            // The payments summary, given with the reports (a download folder's files), is
            // passed over and said; a report that cannot be read stops the command.
            var reports: [FinancialReport] = []
            var summaries: [FinancialReport.PaymentsSummary] = []
            for file in files {
                do { reports.append(try FinancialReport.read(path: file)) }
                catch let summary as FinancialReport.PaymentsSummary { summaries.append(summary) }
            }
            for summary in summaries { StandardError.write("iapledger: note: \(TerminalText.visible(summary.description))\n") }
            if reports.isEmpty, !summaries.isEmpty {
                throw ValidationError("no financial report by product among the files given (only the payments summary, which true-up does not read): give the reports by region, as downloaded from App Store Connect's Payments and Financial Reports")
            }
            let (config, ledger) = try Workspace(ws.url).openExistingLedger()
            let trueUp = try ledger.read { r in
                try TrueUp.compare(reports: reports, reportingCurrency: config.reportingCurrency,
                                   waiting: { try r.productionSalesWaiting(purchasedFrom: $0, through: $1, currencies: $2) }) { try r.proceeds(from: $0, through: $1) }
            }
            for w in trueUp.warnings { StandardError.write("iapledger: warning: \(w)\n") }
            print(trueUp.render(format: format.rawValue), terminator: "")
            if let xlsx {
                let url = URL(fileURLWithPath: xlsx)
                // Its folder must be there (a mistyped path made folders, and said it wrote).
                var isFolder: ObjCBool = false
                let folder = url.deletingLastPathComponent()
                guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else {
                    throw ReadError.file(folder.path, "is no folder: --xlsx writes into a folder that exists (nothing written)")
                }
                try trueUp.writeWorkbook(to: url, reports: reports, paper: config.paper)
                StandardError.write("wrote \(url.path)\n")
            }
        }
    }
}

struct Close: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Close the books through a month: entries dated in it that arrive later post on the first open day, marked late.",
        discussion: "Records in the ledger who closed it and when. A month already closed is refused (closed months are never reopened), and so is a month that has not ended yet. It warns of sales dated in the closed months that still wait (for a rule, for their order) and of receipt records still waiting for verification: once posted they go to the first open day, marked late.")

    @Argument(help: "The last month to close, YYYY-MM.") var month: String
    @OptionGroup var ws: WorkspaceOption
    @Option(name: .customLong("as-of"), help: "Today's date, YYYY-MM-DD (default: today, UTC); the month must have ended before it.")
    var asOf: String?
    @Option(help: "Who closes the books, as recorded in the ledger (default: $USER, else $LOGNAME, else unknown).")
    var by: String?

    func run() throws {
        try runReporting {
            guard let m = Month(iso: month) else { throw ValidationError("the month must be YYYY-MM, got \(month)") }
            let day = try parseAsOf(asOf, tomorrowAllowed: false, why: "a close dated after today could close a month that is still running")
            let who = try namedBy(by)
            // The month-end sets of the months it closed, written while they were open, said so
            // in every page header and on Run Info ("still open: its figures may change"): the
            // nights no longer write a closed month's set, so they said it for good. Written
            // again here, as `report --period` does (the same figures), under the close's lock.
            let workspace = Workspace(ws.url)
            _ = try ClosedPeriods.close(month: m, workspace: workspace, asOf: day,
                                        closedBy: who ?? ClosedPeriods.currentUser(), closedAt: NightlyRun.timestamp()) { result in
                print(result.description)
                if result.close.closedBy == "unknown" && by == nil {
                    print("  note: recorded as closed by \"unknown\": neither USER nor LOGNAME is set (cron, systemd without User=); name who closes with --by NAME")
                }
                var month = m
                var toWrite: [Month] = []
                while result.previous.map({ month > $0.month }) ?? true {
                    // Any workbook of the set there (one of them moved away is written again too).
                    if ReportWorkbook.allCases.contains(where: { FileManager.default.fileExists(atPath: workspace.root.appendingPathComponent(Workspace.workbookPath($0, asOf: month.lastDay)).path) }) {
                        toWrite.append(month)
                    }
                    month = month.previous
                    if month.lastDay < Day(year: 2008, month: 1, day: 1) { break }
                }
                for closed in toWrite.reversed() {
                    let written: (asOf: Day, files: [ReportFile], note: String?, head: String?)
                    do { written = try PeriodReport.write(workspace: workspace, period: closed, lockHeld: true) } catch {
                        throw StoreError(message: "the close is recorded, but the set of \(closed) (written while it was open, and saying so) could not be written again: \(error); `iapledger report --period \(closed)\(ws.argument)` writes it")
                    }
                    print("  \(closed)'s set written again, closed (it said the month was open):")
                    printReportFiles(written.files)
                    if let note = written.note { print("  note: the files were written, \(note)") }
                    else if let head = written.head { printRegistrationHead(head) }
                }
            }
        }
    }
}

struct Dismiss: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Take records left pending or rejected that no later record will settle, or findings finance has booked by hand, off the open lists, with who and why.",
        discussion: "For a line or a file read by mistake (a file saved by a spreadsheet and put back as it was, an Excel lock file an earlier version read): the ask is kept in the ledger as made, and the next night resolves each record with \"dismissed by <who> on <day>: <why>\" (sealed with its run; trace shows it). Nothing is posted and what a record carried is not applied. A file or line with no record pending or rejected is refused; records settled already are said and left. A finding (--finding) is one finance books by hand (\(LedgerRun.Dismiss.dismissableFindingCodes.joined(separator: ", "))); those the nights resolve themselves (\(LedgerRun.Dismiss.selfResolvingFindingCodes.joined(separator: ", "))) are refused.")

    @Argument(help: "Files read, as the night's summary, Run Info and trace name them (inbox/orders/orders.csv), each with :LINE for one line, else every record of the file (every version read) not settled.")
    var records: [String] = []
    @Option(name: .customLong("finding"), help: "A finding left for finance to book by hand, CODE:TRANSACTION (PRICE_MISMATCH:2000000375872989), once booked: it leaves the open lists as it reads now (found again with another message, it opens again); CODE:* for every open finding of that code (RULES_CHANGED:*, once the correction of all is booked). Repeatable.")
    var findings: [String] = []
    @OptionGroup var ws: WorkspaceOption
    @Option(help: "Why they are dismissed, as recorded in the ledger.") var reason: String
    @Option(help: "Who dismisses them, as recorded in the ledger (default: $USER, else $LOGNAME, else unknown).")
    var by: String?

    func run() throws {
        try runReporting {
            guard isNamed(reason) else { throw ValidationError("--reason must say why (no control characters), got \"\(TerminalText.visible(reason))\"") }
            let who = try namedBy(by)
            guard !records.isEmpty || !findings.isEmpty else { throw ValidationError("name at least one file, file:line or --finding CODE:TRANSACTION") }
            let findingTargets = try findings.map { text -> (code: String, transactionId: String) in
                // An empty TRANSACTION names the findings of items that carry none (INVALID_TRANSACTION).
                guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
                    throw ValidationError("--finding must be CODE:TRANSACTION (PRICE_MISMATCH:2000000375872989), got \"\(TerminalText.visible(text))\"")
                }
                let code = String(text[..<colon])
                // A code that is not one finance dismisses (a typo, or one the nights resolve): a
                // value not among those allowed, refused as the parse refuses one (exit 64).
                if let why = LedgerRun.Dismiss.refusal(code: code) {
                    throw ValidationError("--finding \(TerminalText.visible(text)): \(why)")
                }
                return (code, String(text[text.index(after: colon)...]))
            }
            let workspace = Workspace(ws.url)
            let targets = records.map { LedgerRun.Dismiss.Target($0, workspace: workspace) }
            // Lines are counted from 1 (a line 0 named no record, said as one not pending).
            if let zero = records.indices.first(where: { targets[$0].line == 0 }) {
                throw ValidationError("\(TerminalText.visible(records[zero])): lines are counted from 1")
            }
            let result = try LedgerRun.Dismiss.dismiss(targets, findings: findingTargets, workspace: workspace,
                                                       reason: reason.trimmingCharacters(in: .whitespaces),
                                                       by: who ?? ClosedPeriods.currentUser(),
                                                       at: NightlyRun.timestamp())
            print(result.description)
            if by == nil && ClosedPeriods.currentUser() == "unknown" && !(result.asked.isEmpty && result.askedFindings.isEmpty) {
                print("  note: recorded as dismissed by \"unknown\": neither USER nor LOGNAME is set; name who dismisses with --by NAME")
            }
        }
    }
}

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Generate a realistic demo workspace and run the nightly job on it.")

    @Option(help: "The folder to create the demo workspace in.") var dir: String = "demo"
    @Option(help: "How many store transactions to generate.") var transactions: Int = 3000
    @Option(help: "Random seed: the same seed gives the same data.") var seed: UInt64 = 42
    @Option(name: .customLong("as-of"), help: "The books' date, YYYY-MM-DD (default: today, UTC; later than tomorrow is refused, as for run).") var asOf: String?

    /// Before anything is made (a refused count left a half-made folder behind, which the
    /// next try then refused as not empty).
    func validate() throws {
        guard (1...100_000_000).contains(transactions) else {
            throw ValidationError("--transactions must be between 1 and 100000000, got \(transactions)")
        }
    }

    func run() throws {
        StopSignals.sayWhenStopped(asOf: asOf, workspaceArgument: " --workspace " + ShellWord.quoted(URL(fileURLWithPath: dir).standardizedFileURL.path))
        try runReporting {
            let day = try parseAsOf(asOf, why: "the demo's night would be dated in the future, and every run before that date refused")
            let result = try DemoWorkspace.create(at: URL(fileURLWithPath: dir), transactions: transactions, seed: seed, asOf: day)
            print(result.description)
            let run = try NightlyRun(workspace: Workspace(URL(fileURLWithPath: dir)), asOf: day).run()
            printSummary(run, workspace: " --workspace " + ShellWord.quoted(URL(fileURLWithPath: dir).standardizedFileURL.path))
            printReportFiles(run)
            print("")
            // (The folder as the user named it: shown, never raw, as every path printed.)
            print("Workbooks are in \(TerminalText.visible(Workspace(URL(fileURLWithPath: dir)).reportDirectory(asOf: day).path))/")
            // Ids to try `trace` on: they change with the demo's as-of date and seed.
            let ledger = try Workspace(URL(fileURLWithPath: dir)).openExistingLedger().1
            if let example = try ledger.read({ try $0.traceExample() }) {
                print("Trace a refunded sale and the order that credited it (sources, rules, entries, exceptions, workbook rows):")
                print("  iapledger trace \(ShellWord.quoted(example.transactionId)) --workspace \(ShellWord.quoted(dir))")
                print("  iapledger trace \(ShellWord.quoted(example.orderId)) --workspace \(ShellWord.quoted(dir))")
            }
            // Apple's financial reports of the last whole month, to try `true-up` on.
            if let apple = try DemoAppleReports.write(into: URL(fileURLWithPath: dir), ledger: ledger, asOf: day) {
                print("Apple's financial reports for \(apple.month) (made from the demo's sales, with differences seeded) are in \(TerminalText.visible(dir))/apple-reports/:")
                for s in apple.seeded { print("  seeded: \(s)") }
                print("Compare them with the ledger:")
                print("  iapledger true-up --workspace \(ShellWord.quoted(dir)) \(ShellWord.quoted(dir + "/apple-reports"))/*.txt")
            } else {
                print("No Apple financial reports written (apple-reports/): the ledger has no sale in \(day.month.previous), the last whole month, to make them from; a demo of more transactions has some")
            }
        }
    }
}

struct Exceptions: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List reconciliation exceptions (store against the backend's credits).")

    enum Status: String, ExpressibleByArgument, CaseIterable { case open, resolved, all }
    enum Format: String, ExpressibleByArgument, CaseIterable { case table, csv, json }

    @OptionGroup var ws: WorkspaceOption
    @Option(help: "open, resolved or all.") var status: Status = .open
    @Option(help: "Only this category (e.g. NOT_CREDITED).") var category: String?
    @Option(help: "Output format: table, csv or json.") var format: Format = .table

    func run() throws {
        try runReporting {
            let (_, ledger) = try Workspace(ws.url).openExistingLedger()
            if let c = category, !ExceptionsOutput.categories.contains(c) {
                throw ValidationError("unknown category \(c); one of \(ExceptionsOutput.categories.joined(separator: ", "))")
            }
            // Written to a temporary file a row at a time, then printed once the ledger is let go:
            // memory holds none of them (a million open ones took 1.3 GB held), and a slow
            // reader of the output (a pager) does not hold the ledger from a night's commit.
            // In $TMPDIR when set (a host with a small /tmp), else /tmp; removed at once (the
            // open file is all that holds it).
            let folder = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
            var template = Array((folder.hasSuffix("/") ? folder : folder + "/").utf8CString.dropLast()) + Array("iapledger-exceptions-XXXXXX".utf8CString)
            let fd = mkstemp(&template)
            guard fd >= 0, let spool = fdopen(fd, "w+") else {
                throw StoreError(message: "cannot make a temporary file for the list (in \(folder): $TMPDIR, else /tmp): \(String(cString: strerror(errno)))")
            }
            unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            defer { fclose(spool) }
            func put(_ text: String) throws {
                guard fputs(text, spool) >= 0 else { throw StoreError(message: "cannot write the list to a temporary file (in \(folder): $TMPDIR, else /tmp): \(String(cString: strerror(errno)))") }
            }
            try ledger.read { r in
                var writer = ExceptionsOutput.Writer(asOf: try r.lastAsOf() ?? parseDay(nil), format: format.rawValue)
                try put(writer.begin())
                try r.forEachException(status: status.rawValue, category: category) { e in
                    let sandbox = try e.netReportingMinor != nil && !r.sandboxTransactions(of: [e.transactionId]).isEmpty
                    try put(writer.add(e, sandbox: sandbox))
                }
                try put(writer.end())
            }
            guard fflush(spool) == 0 else { throw StoreError(message: "cannot write the list to a temporary file (in \(folder): $TMPDIR, else /tmp): \(String(cString: strerror(errno)))") }
            rewind(spool)
            fflush(stdout)
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = fread(&buffer, 1, buffer.count, spool)
                if n == 0 { break }
                _ = buffer.withUnsafeBytes { fwrite($0.baseAddress, 1, n, stdout) }
            }
            fflush(stdout)
        }
    }
}

struct Findings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List findings (MISSING_RULE, ORDER_WAIT, PRICE_MISMATCH, RULES_CHANGED, ...): every one, where Run Info lists the first of each code.",
        discussion: "Open ones by default. --format csv for a spreadsheet, json for one JSON object a line (JSON Lines). Each row: code, transaction, book, status (open, resolved, or dismissed with `iapledger dismiss`), first seen, resolved on, the dismissal's note, the detail.")

    enum Status: String, ExpressibleByArgument, CaseIterable { case open, resolved, all }
    enum Format: String, ExpressibleByArgument, CaseIterable { case table, csv, json }

    @OptionGroup var ws: WorkspaceOption
    @Option(help: "open, resolved or all.") var status: Status = .open
    @Option(help: "Only this code (e.g. RULES_CHANGED).") var code: String?
    @Option(help: "Output format: table, csv or json (JSON Lines).") var format: Format = .table

    func run() throws {
        try runReporting {
            let (_, ledger) = try Workspace(ws.url).openExistingLedger()
            // A code no night opens (a typo read as nothing to book): refused with the codes
            // there are, as `exceptions` refuses an unknown category (a code an older ledger
            // holds is listed all the same).
            if let code, !LedgerRun.Dismiss.findingCodes.contains(code), !(try ledger.read { try $0.findingCodes() }).contains(code) {
                throw ValidationError("unknown finding code \(TerminalText.visible(code)); one of \(LedgerRun.Dismiss.findingCodes.joined(separator: ", "))")
            }
            let n = try FindingsOutput.write(ledger, status: status.rawValue, code: code, format: format.rawValue) { print($0, terminator: "") }
            // A code the ledger has never held: said on stderr, with the codes it holds.
            if n == 0, let code, let held = try? ledger.read({ try $0.findingCodes() }), !held.contains(code) {
                StandardError.write("iapledger: this ledger holds no finding of code \"\(TerminalText.visible(code))\", of any status; the codes it holds: \(held.isEmpty ? "none" : held.joined(separator: ", "))\n")
            }
        }
    }
}

struct Trace: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Trace a transaction or an order: sources, verification, rules, entries, orders, exceptions, report rows.")

    enum Format: String, ExpressibleByArgument, CaseIterable { case text, json }

    @OptionGroup var ws: WorkspaceOption
    @Argument(help: "A store transaction id, a backend order id, or FILE:LINE (an input record by the path and line a summary names).") var id: String
    @Option(help: "Output format: text or json.") var format: Format = .text
    @Flag(name: .customLong("source-text"),
          help: "Also show the text of each source record and order line as it was read (the ledger keeps it).")
    var sourceText = false

    func run() throws {
        try runReporting {
            let workspace = Workspace(ws.url)
            let (config, ledger) = try workspace.openExistingLedger()
            // The Journal rows as the layouts place them (a broken layout is the run's to report).
            let layouts = try? workspace.loadLayouts()
            // The rules say which products are auto-renewable (their tenure is shown); broken
            // rules are the run's to report.
            let rules = try? workspace.loadRules()
            let found: String? = try ledger.read { r in
                let asOf = try r.lastAsOf()
                func withTenure(_ t: TransactionTrace) throws -> TransactionTrace {
                    let t = TraceOutput.withReconciliation(try TraceOutput.withOrderLinesNotTaken(try TraceOutput.withFreeKind(t, reader: r), reader: r, withText: sourceText),
                                                           config: config, rules: rules)
                    guard let rules else { return t }
                    return try TraceOutput.withTenure(t, reader: r, config: config, rules: rules)
                }
                if var t = try r.traceTransaction(id, asOf: asOf, withText: sourceText) {
                    if let layouts { t = TraceOutput.placed(t, layouts: layouts, journalRowCap: config.journalRowCap) }
                    t = try withTenure(TraceOutput.checked(t, in: workspace, reader: r, argument: ws.argument))
                    t = TraceOutput.listed(t, asOf: asOf, layouts: layouts, workspace: workspace, reader: r, argument: ws.argument)
                    return format == .json ? TraceOutput.json(t) : TraceOutput.text(t, workspace: ws.argument)
                }
                // An order's trace, and the transaction it names, as a transaction's is shown.
                func shown(_ order: OrderTrace) throws -> String {
                    var o = order
                    o.transaction = try o.transaction.map(withTenure)
                    if let layouts { o = TraceOutput.placed(o, layouts: layouts, journalRowCap: config.journalRowCap) }
                    o = try TraceOutput.checked(o, in: workspace, reader: r, argument: ws.argument)
                    o = TraceOutput.listed(o, asOf: asOf, layouts: layouts, workspace: workspace, reader: r, argument: ws.argument)
                    return format == .json ? TraceOutput.json(o) : TraceOutput.text(o, workspace: ws.argument)
                }
                if let o = try r.traceOrder(id, asOf: asOf, withText: sourceText) { return try shown(o) }
                // FILE:LINE, a record that names no transaction or order (a line that is no JSON).
                // The path as `dismiss` takes it: relative to the workspace, or a path to the file
                // (`./inbox/...`, absolute, or from inside the workspace).
                let target = LedgerRun.Dismiss.Target(id, workspace: workspace)
                if let line = target.line, line > 0 {
                    for path in [target.path] + (target.fromCurrentFolder.map { [$0] } ?? []) {
                        if var t = try r.traceRecord(path: path, line: line, withText: sourceText) {
                            t = TraceOutput.listed(t, asOf: asOf, layouts: layouts, workspace: workspace, reader: r, argument: ws.argument)
                            return format == .json ? TraceOutput.json(t) : TraceOutput.text(t, workspace: ws.argument)
                        }
                    }
                }
                // A subscription's original transaction id, its first purchase not read.
                let subscription = try r.subscriptionTransactions(originalId: id)
                if !subscription.isEmpty {
                    return TraceOutput.subscription(id, subscription, json: format == .json, workspace: ws.argument)
                }
                // An order only a receipt's wrapper names (a lost order): the records naming it.
                if let o = try r.traceOrderNamedByRecords(id, asOf: asOf, withText: sourceText) { return try shown(o) }
                // A transaction only orders lines not taken name (a line refused: the store
                // keeps it under its order).
                if let t = try r.traceTransaction(id, asOf: asOf, withText: sourceText, evenIfUnknown: true),
                   case let t = try TraceOutput.withOrderLinesNotTaken(t, reader: r, withText: sourceText), !t.order_lines_not_taken.isEmpty {
                    let shown = TraceOutput.listed(t, asOf: asOf, layouts: layouts, workspace: workspace, reader: r, argument: ws.argument)
                    return format == .json ? TraceOutput.json(shown) : TraceOutput.text(shown, workspace: ws.argument)
                }
                return nil
            }
            guard let found else {
                // FILE:0 names no record (lines are counted from 1): a command line that does not
                // parse, as `dismiss` says it (an id ending in ":0" would have been found above).
                if LedgerRun.Dismiss.Target(id, workspace: Workspace(ws.url)).line == 0 {
                    throw ValidationError("\(TerminalText.visible(id)): lines are counted from 1")
                }
                // The id is what the user typed (or pasted): shown escaped, as everything else printed is.
                StandardError.write("iapledger: error: no transaction or order with id \"\(TerminalText.visible(id))\" in this ledger"
                                    + (id.contains(":") ? " (nor a record at it, as FILE:LINE: the inbox path and line a summary names)" : "") + "\n")
                throw ExitCode.failure
            }
            print(found, terminator: "")
        }
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the ledger: every accounting invariant, the hash chain, and re-derivation of every entry from its source record.")

    @OptionGroup var ws: WorkspaceOption
    @Flag(help: "Also list every finished run with the chain head its entries give now and its seal, each close's seal, and the report files' head after each night's, report's or close's files: to compare with the heads and seals printed and kept (a night's on its Run Info sheet).")
    var runs = false
    @Option(name: .customLong("workbook"), parsing: .upToNextOption,
            help: "Only check these files (a workbook or journal export someone holds): whether iapledger wrote them as they are, where, when and by which night or `report`, and whether it has written that path again since.")
    var workbooks: [String] = []

    func run() throws {
        try runReporting {
            if !workbooks.isEmpty {
                guard !runs else { throw ValidationError("--runs checks the ledger and --workbook only files: give one of them") }
                if try !checkWorkbooks() { throw ExitCode.failure }
                return
            }
            let report = try Audit(workspace: Workspace(ws.url)).run()
            if runs {
                print("run  as of      finished at           last entry  chain head now                                                    seal")
                for r in report.runHeads {
                    let last = r.lastEntryId.map { "#\($0)" } ?? "none"
                    let differs = r.head.map { $0 != r.expected } ?? true
                    print("\(String(r.runId).padding(toLength: 4, withPad: " ", startingAt: 0)) \(r.asOf) \(r.finishedAt.padding(toLength: 21, withPad: " ", startingAt: 0)) \(last.padding(toLength: 11, withPad: " ", startingAt: 0)) \(r.expected)\(differs ? "*" : " ") \(report.runSeals[r.runId] ?? "-")")
                }
                if report.runHeads.contains(where: { r in r.head.map { $0 != r.expected } ?? true }) {
                    print("* the run recorded another chain head: see the problems below")
                }
                if !report.sealList.isEmpty {
                    print("seals, in order (each night's and each close's, to find one kept outside the ledger):")
                    for s in report.sealList {
                        let event = s.runId.map { "run \($0)" } ?? "close of \(s.closeMonth ?? "?")"
                        print("  #\(String(s.id).padding(toLength: 5, withPad: " ", startingAt: 0)) \(event.padding(toLength: 20, withPad: " ", startingAt: 0)) \(s.seal)")
                    }
                }
                if !report.reportFilesHeads.isEmpty {
                    print("report files, the registrations' head after each night's, report's or close's files (as it printed them), in order:")
                    // Padded to the longest: an event's time is what finds a head kept (a width
                    // of 34 cut "report or close at ..." in the middle of its time).
                    let width = report.reportFilesHeads.map(\.event.count).max() ?? 0
                    for h in report.reportFilesHeads {
                        print("  \(h.event.padding(toLength: width, withPad: " ", startingAt: 0)) \(h.head)")
                    }
                }
            }
            if report.ok {
                print("verify: OK: \(report.entries) entries in an unbroken hash chain (head \(report.chainHead)), \(report.rederived) re-derived from their source records, \(report.rulesChecked) sale\(report.rulesChecked == 1 ? "'s" : "s'") recorded rules as the config and rules files kept with \(report.rulesChecked == 1 ? "its" : "their") run give them\(report.rulesNotKept > 0 ? " (\(report.rulesNotKept) more posted by runs before this version, which kept no files)" : ""), \(report.runs) run\(report.runs == 1 ? "" : "s") with \(report.runs == 1 ? "its chain head" : "their chain heads"), \(report.records) source records hashing as when read, every transaction they report stored, \(report.orderVersions) order version\(report.orderVersions == 1 ? "" : "s") as their lines give \(report.orderVersions == 1 ? "it" : "them")\(report.orderVersionsWithoutHeader > 0 ? " (\(report.orderVersionsWithoutHeader) more from files read before this version, which kept no header to read them by)" : ""), the schema's triggers and keys as created, every entry and every book balanced, the month totals equal to the postings\(report.reconciliation.map { ", the reconciliation (\($0.open) open exception\($0.open == 1 ? "" : "s"), \($0.matched) matched pair\($0.matched == 1 ? "" : "s")) as its transactions and orders give it" } ?? "")\(report.reportFilesHead.map { ", \(report.reportFilesChained) report file registration\(report.reportFilesChained == 1 ? "" : "s") in an unbroken chain (head \($0))" } ?? "")\(report.seal.map { ", \(report.seals) seal\(report.seals == 1 ? " matching what it sealed" : "s matching what they sealed") (latest \($0))" } ?? "")")
                printWorkbooksGone(report)
                return
            }
            // The report on standard output, as `verify: OK` is (a log kept with `> verify.log`
            // keeps it), its first line on standard error too (what a scheduler mails).
            let headline = "verify: FAILED: \(report.problems.count) problem(s)\(report.firstFailingEntry.map { "; first failing entry #\($0)" } ?? "")"
            print(headline)
            // The schema's problems, then those of runs as a whole (a run's entries deleted: its
            // head, its count), before those of single transactions and entries: they are the
            // cause, and were cut off past the fiftieth line, after one line per transaction.
            let listed = report.problems.filter { $0.schema } + report.problems.filter { !$0.schema && $0.run }
                + report.problems.filter { !$0.schema && !$0.run }
            for p in listed.prefix(50) { print("  \(TerminalText.visible("\(p)"))") }
            if listed.count > 50 { print("  ... and \(listed.count - 50) more") }
            printWorkbooksGone(report)
            StandardError.write(headline + " (the problems are on standard output)\n")
            throw ExitCode.failure
        }
    }
}

extension Verify {
    /// The workbooks iapledger registered that are gone from their path: said (the ledger is
    /// not wrong for it: a retention policy may delete old sets), with how to write them again.
    func printWorkbooksGone(_ report: Audit.Report) {
        for note in report.notes { print("note: \(TerminalText.visible(note))") }
        if !report.workbooksChanged.isEmpty {
            let n = report.workbooksChanged.count
            print("note: \(n) workbook\(n == 1 ? "" : "s") under reports/ \(n == 1 ? "is" : "are") not the bytes iapledger last wrote there (opened and saved, or edited): "
                + report.workbooksChanged.prefix(5).map { TerminalText.visible($0) }.joined(separator: ", ") + (n > 5 ? ", and \(n - 5) more" : "")
                + "; `iapledger verify --workbook FILE` says what a file is, and `iapledger report --as-of DATE` (or `--period YYYY-MM`) writes a set again")
        }
        if !report.workbooksUnregistered.isEmpty {
            let n = report.workbooksUnregistered.count
            print("note: \(n) file\(n == 1 ? "" : "s") under reports/ \(n == 1 ? "is" : "are") at \(n == 1 ? "a path" : "paths") iapledger never wrote (copied or moved there, or \(n == 1 ? "its" : "their") registration removed): "
                + report.workbooksUnregistered.prefix(5).map { TerminalText.visible($0) }.joined(separator: ", ") + (n > 5 ? ", and \(n - 5) more" : "")
                + "; `iapledger verify --workbook FILE` says what a file is")
        }
        guard !report.workbooksGone.isEmpty else { return }
        let n = report.workbooksGone.count
        print("note: \(n) workbook\(n == 1 ? "" : "s") iapledger wrote \(n == 1 ? "is" : "are") no longer at \(n == 1 ? "its path" : "their paths") (deleted or moved): "
            + report.workbooksGone.prefix(5).map { TerminalText.visible($0) }.joined(separator: ", ") + (n > 5 ? ", and \(n - 5) more" : "")
            + "; `iapledger report --as-of DATE` (or `--period YYYY-MM`) writes a set again, and `verify --workbook FILE` tells whether a copy kept elsewhere is iapledger's")
    }

    /// `--workbook`: each file's registrations (where, when, by which night or `report`); false
    /// when one is not a file iapledger wrote as it is, or cannot be read.
    func checkWorkbooks() throws -> Bool {
        let workspace = Workspace(ws.url)
        let (_, ledger) = try workspace.openExistingLedger()
        guard try ledger.read({ try $0.registersReportFiles() }) else {
            throw StoreError(message: "\(ledger.path): this ledger registers no report files yet (its next night upgrades it)")
        }
        var allKnown = true
        // The answers rest on the registrations: a chain that does not hold is said first.
        let chain = try ledger.read { try $0.checkReportFileChain() }
        for p in chain.problems {
            allKnown = false
            print("the ledger's report file registrations do not hold together, so the answers below cannot be trusted: \(p)")
        }
        for path in workbooks {
            let sha: String
            do { sha = try LineReader.hash(path).sha256 } catch {
                allKnown = false
                // The error names the path itself ("<path>: cannot be read: ...").
                let said = "\(error)"
                print(said.hasPrefix(path) ? TerminalText.visible(said) : "\(TerminalText.visible(path)): \(TerminalText.visible(said))")
                continue
            }
            let found = try ledger.read { try $0.reportFiles(sha256: sha) }
            let relative = workspace.relative(URL(fileURLWithPath: path))
            if found.isEmpty {
                allKnown = false
                print("\(TerminalText.visible(path)): NOT written by iapledger as it is (SHA-256 \(sha) matches no file this ledger registered): changed since it was written, or not from this workspace"
                      + (relative.hasPrefix("reports/") ? " (or written in place by a night stopped before it registered its files: running that night again, or `iapledger report --as-of` its date, writes and registers it)" : ""))
            }
            for f in found {
                print("\(TerminalText.visible(path)): written as \(TerminalText.visible(f.path)) at \(f.writtenAt) by \(f.runId.map { "night run \($0)" } ?? "`iapledger report` (or `close`)") (SHA-256 \(sha))")
                // Genuine, and superseded: iapledger wrote that path again since (a month-end set
                // written again with entries posted since, say).
                if relative != f.path,
                   let last = try ledger.read({ try $0.reportFiles(path: f.path) }).last, last.sha256 != sha {
                    print("  iapledger has written \(TerminalText.visible(f.path)) again since (at \(last.writtenAt), SHA-256 \(last.sha256)): this copy is an earlier version of it")
                }
            }
            // A file in the workspace's reports/ must be the last version iapledger wrote at that
            // path: another workbook it wrote, copied over it (another day's), or an earlier
            // version put back, is genuine bytes in the wrong place.
            let atPath = relative.hasPrefix("reports/") && !found.isEmpty ? try ledger.read { try $0.reportFiles(path: relative) } : []
            if let last = atPath.last, last.sha256 != sha {
                allKnown = false
                let earlier = found.contains { $0.path == relative }
                print("\(TerminalText.visible(path)): NOT the file iapledger last wrote at \(TerminalText.visible(relative)) (at \(last.writtenAt), SHA-256 \(last.sha256)): \(earlier ? "an earlier version written there was put back" : "another file it wrote was copied there")")
            } else if relative.hasPrefix("reports/"), let first = found.first, atPath.isEmpty {
                // Genuine bytes at a path of the sets it never wrote: another day's workbook
                // passing for a set of a day no night or report wrote.
                allKnown = false
                print("\(TerminalText.visible(path)): NOT where iapledger wrote it: it never wrote \(TerminalText.visible(relative)); this is its \(TerminalText.visible(first.path)), copied there")
            }
        }
        return allKnown
    }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a month's workbooks again (closed months included): the books as of the month's last day; or a day's.")

    @OptionGroup var ws: WorkspaceOption
    @Option(help: "The month, YYYY-MM: its set as of its last day (or the last night's, for the month running).") var period: String?
    @Option(name: .customLong("as-of"), help: "A day up to the last night's, YYYY-MM-DD: its set (a night's, when its workbooks failed after its commit and a later night has run).")
    var asOf: String?

    func validate() throws {
        if (period == nil) == (asOf == nil) { throw ValidationError("give --period YYYY-MM or --as-of YYYY-MM-DD (one of them, not both)") }
    }

    func run() throws {
        try runReporting {
            let written: (asOf: Day, files: [ReportFile], note: String?, head: String?), title: String
            if let asOf {
                guard let day = Day(iso: asOf) else { throw ValidationError("--as-of must be a date YYYY-MM-DD, got \(asOf)") }
                (written, title) = (try PeriodReport.write(workspace: Workspace(ws.url), asOf: day), "as of \(day)")
            } else {
                guard let period, let month = Month(iso: period) else { throw ValidationError("--period must be a month YYYY-MM, got \(period ?? "")") }
                (written, title) = (try PeriodReport.write(workspace: Workspace(ws.url), period: month), month.description)
            }
            print("iapledger report \(title): the books as of \(written.asOf)")
            printReportFiles(written.files)
            if let note = written.note { print("  note: the files were written, \(note)") }
            else if let head = written.head {
                printRegistrationHead(head)
            }
        }
    }
}
