import Foundation
import LedgerCore
import LedgerReport
import LedgerRead
import LedgerStore
import LedgerWrite

/// The workbooks of one as-of date under `reports/<as-of>/`, laid out by the workspace's layouts
/// (loaded and checked before the run touches anything).
struct ReportSet {
    let ledger: Ledger
    let config: WorkspaceConfig
    let asOf: Day
    let runId: Int64?
    let workspace: Workspace
    let layouts: ReportLayouts

    /// `runId` nil (a set written again for an earlier date: the month before's, by a later
    /// night, or `report --period`) takes the last run dated `asOf`, if one is: the set then
    /// tells that night's run as the night's own set did (its number, what it read, its input
    /// files), not only the ledger's state.
    init(ledger: Ledger, config: WorkspaceConfig, asOf: Day, runId: Int64?, workspace: Workspace, layouts: ReportLayouts) throws {
        self.ledger = ledger
        self.config = config
        self.asOf = asOf
        self.runId = try runId ?? ledger.read { try $0.lastRun(onOrBefore: asOf).flatMap { $0.asOf == asOf ? $0.id : nil } }
        self.workspace = workspace
        self.layouts = layouts
    }

    /// Why a set written again has other bytes than the version before it: the ledger changed
    /// (nights since, a month closed since), or, with neither, what it was written by (the
    /// layouts, the config, the tool's version).
    static func whyOtherBytes(_ since: (nights: Int, closes: Int)) -> String {
        var changes: [String] = []
        if since.nights > 0 { changes.append("\(since.nights) night\(since.nights == 1 ? "" : "s") ran since (its Summary and Run Info say what they changed)") }
        if since.closes > 0 { changes.append("\(since.closes == 1 ? "a month was" : "\(since.closes) months were") closed since") }
        return changes.isEmpty
            ? "no night ran and no month was closed since, so the layouts, the config (the journal cap) or iapledger's version changed since"
            : "the ledger changed: " + changes.joined(separator: ", and ")
    }

    /// One workbook (with its journal export, if any) to write.
    struct Job {
        var name: String
        var write: (LedgerReader) throws -> [ReportFile]
    }

    /// The set's workbooks as independent jobs: finance (and its journal export), sandbox,
    /// reconciliation. Each reads the ledger through the reader it is given.
    func jobs(shared: SharedReads? = nil) -> [Job] {
        let dir = workspace.reportDirectory(asOf: asOf)
        var jobs: [Job] = []
        for (book, workbook) in [(Book.production, ReportWorkbook.finance), (Book.sandbox, ReportWorkbook.sandbox)] {
            let url = dir.appendingPathComponent(Workspace.workbookName(workbook, asOf: asOf))
            jobs.append(Job(name: url.lastPathComponent) { [self] reader in
                CrashPoint.hit("report:\(url.lastPathComponent)")
                var report = FinanceReport(reader: reader, book: book, asOf: asOf, reportingCurrency: config.reportingCurrency,
                                           toolVersion: NightlyRun.toolVersion, runId: runId, layout: layouts[workbook])
                report.journalRowCap = config.journalRowCap
                report.shared = shared
                var exports: [ReportFile] = []
                let exportName = Workspace.journalExportName(book, asOf: asOf)
                // Past the cap, the full journal goes beside the workbook with the Journal sheet's
                // columns; a layout without the Journal sheet has no journal to export.
                if try report.journalOverCap(), let journal = try report.laidOutJournalTable() {
                    // An export made from the same entries and columns is the same file: kept
                    // (the month before, most nights), once checked whole.
                    let inputs = try report.journalExportInputs(journal)
                    let target = dir.appendingPathComponent(exportName)
                    // Kept only as registered when written: an export changed since (its gzip
                    // comment and row count left as they were) is written again, not vouched for.
                    let registered = try reader.reportFiles(path: workspace.relative(target)).last?.sha256
                    let kept = GzipCSVWriter.kept(target, inputs: inputs, rows: journal.rowCount, registeredSHA256: registered)
                    let csv = try kept ?? GzipCSVWriter.write(journal, to: target, tempDirectory: workspace.tempURL, inputs: inputs)
                    report.journalExport = JournalExport(fileName: exportName, rows: csv.rows, sha256: csv.sha256)
                    exports.append(ReportFile(url: csv.url, kept: kept != nil))
                }
                let aside = try Self.keepAsideIfNotWritten(url, reader: reader, workspace: workspace)
                var model = try report.workbook()
                model.paper = config.paper
                try XLSXWriter.write(model, to: url, tempDirectory: workspace.tempURL)
                let keptAside = Self.asideStillNeeded(aside, written: url)
                // A set written again with no export (the cap raised, or lifted, since): the export
                // an earlier write of it left is no longer the set's, and goes, once this
                // workbook is in place (only a file iapledger wrote there: its registration
                // stays in the ledger).
                if exports.isEmpty {
                    let stale = dir.appendingPathComponent(exportName)
                    if FileManager.default.fileExists(atPath: stale.path), let sha = try? LineReader.hash(stale.path).sha256,
                       try reader.reportFiles(path: workspace.relative(stale)).contains(where: { $0.sha256 == sha }) {
                        try FileManager.default.removeItem(at: stale)
                    }
                }
                return [ReportFile(url: url, keptAside: keptAside)] + exports
            })
        }
        let url = dir.appendingPathComponent(Workspace.workbookName(.reconciliation, asOf: asOf))
        jobs.append(Job(name: url.lastPathComponent) { [self] reader in
            CrashPoint.hit("report:\(url.lastPathComponent)")
            var report = ReconciliationReport(reader: reader, asOf: asOf, reportingCurrency: config.reportingCurrency, runId: runId,
                                              layout: layouts.reconciliation)
            report.shared = shared
            report.scope = config.reconciliationScope
            let aside = try Self.keepAsideIfNotWritten(url, reader: reader, workspace: workspace)
            var model = try report.workbook()
            model.paper = config.paper
            try XLSXWriter.write(model, to: url, tempDirectory: workspace.tempURL)
            return [ReportFile(url: url, keptAside: Self.asideStillNeeded(aside, written: url))]
        })
        return jobs
    }

    /// A workbook about to be written over whose bytes are no version iapledger registered at
    /// its path (edited in place after it was written, or put there by hand) is kept beside
    /// it, as `<name>.replaced-<UTC time>.xlsx`, by a second link to it (the new file is
    /// renamed over the name; the kept one is untouched): the change is not lost silently.
    /// Nothing is kept where the ledger registers no files (no version to compare with).
    /// Returns the kept file and the bytes' SHA-256.
    static func keepAsideIfNotWritten(_ url: URL, reader: LedgerReader, workspace: Workspace) throws -> (url: URL, sha256: String)? {
        guard FileManager.default.fileExists(atPath: url.path), try reader.registersReportFiles(),
              let sha = try? LineReader.hash(url.path).sha256,
              !(try reader.reportFiles(path: workspace.relative(url))).contains(where: { $0.sha256 == sha })
        else { return nil }
        // Kept already, by a night stopped before it wrote the workbook: that copy serves (two
        // stopped nights left two copies of one file).
        if let kept = keptCopies(of: url).first(where: { (try? LineReader.hash($0.path).sha256) == sha }) { return (kept, sha) }
        let stamp = NightlyRun.timestamp(milliseconds: false).replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
        let stem = url.deletingPathExtension().lastPathComponent, ext = url.pathExtension
        var aside = url.deletingLastPathComponent().appendingPathComponent("\(stem).replaced-\(stamp).\(ext)")
        var n = 1
        while FileManager.default.fileExists(atPath: aside.path) {
            n += 1
            aside = url.deletingLastPathComponent().appendingPathComponent("\(stem).replaced-\(stamp)-\(n).\(ext)")
        }
        // A second link, or a copy where the folder takes none (a share without hard links).
        if link(url.path, aside.path) != 0 {
            let linkError = errno
            do { try FileManager.default.copyItem(at: url, to: aside) } catch {
                throw StoreError(message: "\(url.path): holds bytes no version iapledger wrote there has (edited after it was written?), and it cannot be kept beside it as \(aside.lastPathComponent) before it is written again: \(String(cString: strerror(linkError))); nothing was written over it: move it away and run again")
            }
        }
        return (aside, sha)
    }

    /// The file kept aside, unless the workbook written has its very bytes (a night stopped
    /// after writing it and before registering it, run again): then the second link goes, and
    /// so does any copy an earlier stopped night kept of those bytes (the workbook a night
    /// stopped before registering, kept aside by a night stopped in turn, stayed under
    /// `reports/` as a "replaced" file no one had edited).
    static func asideStillNeeded(_ aside: (url: URL, sha256: String)?, written url: URL) -> URL? {
        let written = try? LineReader.hash(url.path).sha256
        if let written {
            for copy in keptCopies(of: url) where (try? LineReader.hash(copy.path).sha256) == written {
                try? FileManager.default.removeItem(at: copy)
            }
        }
        guard let aside, written != aside.sha256 else { return nil }
        return aside.url
    }

    /// The files kept aside beside `url` (`<name>.replaced-<UTC time>[-n].<ext>`), oldest first.
    static func keptCopies(of url: URL) -> [URL] {
        let dir = url.deletingLastPathComponent()
        let stem = url.deletingPathExtension().lastPathComponent, ext = url.pathExtension
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasPrefix("\(stem).replaced-") && $0.hasSuffix(".\(ext)") }.sorted().map { dir.appendingPathComponent($0) }
    }

    /// Writes the workbooks of one set, one after the other (`report --period`).
    func writeAll() throws -> [ReportFile] {
        try Self.write([self], progress: .silent, threads: 1)
    }

    /// Writes the workbooks of several sets on up to `threads` threads, each thread with its
    /// own read-only connection to the ledger (nothing writes to it now: the run has
    /// committed and holds the run lock). The list of files written comes back in job order
    /// (workbooks first, journal exports last), whatever order the threads finish in.
    static func write(_ sets: [ReportSet], progress: RunProgress, threads: Int = min(2, ProcessInfo.processInfo.activeProcessorCount)) throws -> [ReportFile] {
        guard let first = sets.first else { return [] }
        // Reads of the whole ledger are made once for all the sets' workbooks.
        let shared = SharedReads()
        let jobs = sets.flatMap { $0.jobs(shared: shared) }
        // The finance workbooks (the big Journals) start first, so the small ones fill in.
        let order = jobs.indices.filter { jobs[$0].name.hasPrefix("finance-") } + jobs.indices.filter { !jobs[$0].name.hasPrefix("finance-") }
        let results = JobResults(count: jobs.count)
        let start = DispatchTime.now().uptimeNanoseconds
        let workers = max(1, min(threads, jobs.count))
        progress.status("write workbooks: 0 of \(jobs.count) files (0%)")
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            let ledger: Ledger
            do {
                ledger = workers == 1 ? first.ledger : try Ledger(path: first.ledger.path, readOnly: true)
            } catch {
                results.fail(error)
                return
            }
            while let claimed = results.claim() {
                let i = order[claimed]
                let t0 = DispatchTime.now().uptimeNanoseconds
                do {
                    let files = try ledger.read { try jobs[i].write($0) }
                    let done = results.finish(i, files: files, seconds: Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
                    progress.status("write workbooks: \(done) of \(jobs.count) files (\(done * 100 / jobs.count)%), \(jobs[i].name) written")
                } catch {
                    results.fail(error)
                }
            }
        }
        progress.clearStatus()
        if let error = results.error { throw SetsPartlyWritten(written: results.files.flatMap { $0 }, error: error) }
        for (i, job) in jobs.enumerated() {
            progress.record(.init(name: "  " + job.name, seconds: results.seconds[i], count: 0, unit: "",
                                  peakBytes: 0, inTotal: false))
        }
        progress.record(.init(name: "write workbooks (\(workers) threads)", seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9,
                              count: jobs.count, unit: "files", peakBytes: RunProgress.peakResidentBytes()))
        let files = results.files.flatMap { $0 }
        return files.filter { $0.url.pathExtension == "xlsx" } + files.filter { $0.url.pathExtension != "xlsx" }
    }
}

/// Writing sets failed: the error, and the files that were written whole before it (in place
/// under reports/, registered all the same).
public struct SetsPartlyWritten: Error, CustomStringConvertible {
    public var written: [ReportFile]
    public var error: Error
    public var description: String { "\(error)" }
}

/// A file of a set under `reports/`: written by this run, or kept as it was (a journal export
/// whose entries and columns are unchanged since it was written).
public struct ReportFile: Equatable {
    public var url: URL
    public var kept: Bool = false
    /// For `report`: how the file written compares with the version registered at its path
    /// before (the same bytes, or other bytes and by whom they were written), nil when none was.
    public var earlier: String? = nil
    /// The file that was at the path, kept beside it because its bytes were no version
    /// iapledger registered there (`ReportSet.keepAsideIfNotWritten`).
    public var keptAside: URL? = nil

    public init(url: URL, kept: Bool = false, keptAside: URL? = nil) {
        self.url = url
        self.kept = kept
        self.keptAside = keptAside
    }

    /// The line said under a file written when the file it replaced was kept aside.
    public var keptAsideNote: String? {
        keptAside.map { "the file there had bytes no version iapledger registered at this path has (edited after it was written, put there by hand, or written by a night stopped before it registered it): kept beside it as \($0.lastPathComponent) (`iapledger verify --workbook FILE` tells whether a copy is iapledger's)" }
    }
}

extension ReportFile {
    /// Registers the files written (not those kept as they were) in the ledger: path, SHA-256
    /// of the bytes on disk, size, when, and the night (`runId`) or `report` (nil) that wrote them.
    /// Registers the files written (not those kept as they were); the registrations' head after them.
    @discardableResult
    static func register(_ files: [ReportFile], workspace: Workspace, ledger: Ledger, runId: Int64?) throws -> String? {
        var entries: [(path: String, sha256: String, sizeBytes: Int64)] = []
        for f in files where !f.kept {
            let (sha, size) = try LineReader.hash(f.url.path)
            entries.append((workspace.relative(f.url), sha, Int64(size)))
        }
        guard !entries.isEmpty else { return nil }
        // To the millisecond: the files of one night or `report` share it, and tell it apart
        // from the next one's (`verify --runs` lists the head after each).
        let at = NightlyRun.timestamp(milliseconds: true)
        return try ledger.write { w in try w.registerReportFiles(entries, writtenAt: at, runId: runId) }
    }
}

/// Job results shared by the writing threads.
final class JobResults: @unchecked Sendable {
    private let lock = NSLock()
    private var nextJob = 0
    private let count: Int
    private(set) var files: [[ReportFile]]
    private(set) var seconds: [Double]
    private(set) var error: Error?

    init(count: Int) {
        self.count = count
        files = Array(repeating: [], count: count)
        seconds = Array(repeating: 0, count: count)
    }

    /// The next job to do, or nil when all are taken or one failed.
    func claim() -> Int? {
        lock.lock(); defer { lock.unlock() }
        guard error == nil, nextJob < count else { return nil }
        nextJob += 1
        return nextJob - 1
    }

    /// Records job `i` done; how many jobs are done now.
    @discardableResult
    func finish(_ i: Int, files: [ReportFile], seconds: Double) -> Int {
        lock.lock(); defer { lock.unlock() }
        self.files[i] = files
        self.seconds[i] = seconds
        finished += 1
        return finished
    }
    private var finished = 0

    func fail(_ e: Error) {
        lock.lock(); defer { lock.unlock() }
        if error == nil { error = e }
    }
}

/// `iapledger report --period YYYY-MM`: writes a month's workbooks again, closed months
/// included: the books as of the month's last day (or the last night's date, for the month
/// still running), into `reports/<that date>/`.
public enum PeriodReport {
    /// - Parameter lockHeld: the caller holds the workspace's lock already (`close`).
    public static func write(workspace: Workspace, period: Month, lockHeld: Bool = false) throws -> (asOf: Day, files: [ReportFile], note: String?, head: String?) {
        try write(workspace: workspace, lockHeld: lockHeld) { lastNight in
            var asOf = period.lastDay
            if let last = lastNight, last < asOf { asOf = last }
            guard asOf >= period.firstDay else {
                throw StoreError(message: "\(period) is after the last night (\(lastNight.map(\.description) ?? "none")): nothing to report yet")
            }
            return asOf
        }
    }

    /// `iapledger report --as-of YYYY-MM-DD`: the set of a day up to the last night, into
    /// `reports/<day>/` (a night's own, with its Run Info, when a night ran as of that day): a
    /// night whose workbooks failed after its commit gets them back after a later night ran.
    public static func write(workspace: Workspace, asOf day: Day) throws -> (asOf: Day, files: [ReportFile], note: String?, head: String?) {
        try write(workspace: workspace) { lastNight in
            guard let last = lastNight, day <= last else {
                throw StoreError(message: "\(day) is after the last night (\(lastNight.map(\.description) ?? "none")): a night's workbooks are written by the night of that day, `iapledger run --as-of \(day)`, once it has come (a night is refused later than tomorrow, UTC)")
            }
            return day
        }
    }

    static func write(workspace: Workspace, lockHeld: Bool = false, day: (Day?) throws -> Day) throws -> (asOf: Day, files: [ReportFile], note: String?, head: String?) {
        // A folder that is no workspace is said before anything is made in it (the lock).
        let loaded = try workspace.loadConfig()
        let layouts = try workspace.loadLayouts()
        try workspace.checkReportsFolder()
        // Not beside a night writing the same sets (the last rename would win, file by file).
        let lock = lockHeld ? nil : try RunLock(url: workspace.lockURL, command: "report")
        defer { lock?.release() }
        // Another workspace's ledger (or reports/) would write over these sets from its books,
        // as a night would: refused the same way.
        try workspace.refuseForeignLedger(loaded)
        let (config, ledger) = try workspace.openExistingLedger()
        // Books written from a ledger changed by hand would be registered, and then vouched
        // for by `verify --workbook`, as iapledger's own: refused as a night refuses.
        try ledger.refuseWhenChangedByHand("a report")
        let asOf = try day(try ledger.read { try $0.lastAsOf() })
        // A day before anything the ledger holds (a typo, `--period 0001-01`) would write, and
        // register for good, a set of empty books.
        let (earliestEntry, firstNight) = try ledger.read { r in (try r.earliestEntryDate(), try r.firstNight()) }
        if earliestEntry == nil && firstNight == nil {
            throw StoreError(message: "no night has run on this ledger: nothing to report, nothing written (`iapledger run` first)")
        }
        if let start = [earliestEntry, firstNight].compactMap({ $0 }).min(), asOf < start {
            throw StoreError(message: "\(asOf) is before anything the ledger holds (its earliest entry is dated \(earliestEntry.map { $0.description } ?? "none"), its first night ran as of \(firstNight.map { $0.description } ?? "none")): nothing to report, nothing written")
        }
        workspace.removeStaleTempFiles()
        // Registered in the ledger when it can be written and registers them (a copy of the
        // ledger kept read-only, or one no night has upgraded yet, is left as it is).
        /// Why the files were not registered (nil when they were), and the registrations' head
        /// after them (as the transaction that registered them left it).
        func register(_ files: [ReportFile]) -> (note: String?, head: String?) {
            guard !files.isEmpty else { return (nil, nil) }
            do {
                let writable = try Ledger(path: ledger.path, readOnly: false, migrate: false)
                guard try writable.read({ try $0.registersReportFiles() }) else {
                    return ("not registered: this ledger registers no report files yet (its next night upgrades it)", nil)
                }
                return (nil, try ReportFile.register(files, workspace: workspace, ledger: writable, runId: nil))
            } catch {
                return ("not registered in the ledger (\(error)); `verify --workbook` will not know them", nil)
            }
        }
        var files: [ReportFile]
        do {
            files = try ReportSet(ledger: ledger, config: config, asOf: asOf, runId: nil, workspace: workspace, layouts: layouts).writeAll()
        } catch let partly as SetsPartlyWritten {
            _ = register(partly.written)
            throw partly.error
        }
        // A set written again (a closed month's, for one) is compared with the version
        // registered before it at each path: a controller holding that version is told whether
        // this one has its bytes (nothing said where the ledger registers no files).
        if (try? ledger.read({ try $0.registersReportFiles() })) == true {
            for i in files.indices where !files[i].kept {
                guard let before = try? ledger.read({ try $0.reportFiles(path: workspace.relative(files[i].url)) }).last,
                      let (sha, _) = try? LineReader.hash(files[i].url.path) else { continue }
                let by = before.runId.map { "the night of run \($0)" } ?? "`iapledger report` (or `close`)"
                // A file there that was not that version (kept aside, said apart) is not called
                // the one this replaces: this one is only compared with the version registered.
                let replaced = files[i].keptAside == nil
                files[i].earlier = sha == before.sha256
                    ? "the same bytes as the version written \(before.writtenAt) by \(by)"
                    : "other bytes than the version written \(before.writtenAt) by \(by)" + (replaced ? ", which it replaces" : "")
                        + ((try? ledger.read { try $0.changesSince(before) }).map { ": " + ReportSet.whyOtherBytes($0) } ?? "")
                        + (replaced ? " (`iapledger verify --workbook FILE` tells which version a copy is)" : "")
            }
        }
        let registered = register(files)
        return (asOf, files, registered.note, registered.head)
    }
}
