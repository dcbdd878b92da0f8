import Foundation
import LedgerCore
import LedgerRead
import LedgerReport
import LedgerStore
import LedgerTemplates
import LedgerWrite

/// The folder that holds one app's books:
///
///     iapledger.toml            configuration
///     rules/                    storefronts.csv, prices.csv, products.csv, fx.csv
///     inbox/receipts/           legacy verifyReceipt responses (*.json, *.jsonl)
///     inbox/orders/             the backend's order/credit records (*.csv)
///     inbox/signed/             App Store signed transactions and notifications
///     layouts/                  the workbooks' sheet layouts (optional: the shipped ones otherwise)
///     ledger.sqlite             the ledger (by default)
///     reports/<as-of>/          the workbooks
public struct Workspace {
    public let root: URL

    public init(_ root: URL) { self.root = root.standardizedFileURL }

    public var configURL: URL { root.appendingPathComponent("iapledger.toml") }
    public var rulesURL: URL { root.appendingPathComponent("rules") }
    public var inboxURL: URL { root.appendingPathComponent("inbox") }
    public var reportsURL: URL { root.appendingPathComponent("reports") }
    public var lockURL: URL { root.appendingPathComponent(".iapledger.lock") }
    public var layoutsURL: URL { root.appendingPathComponent("layouts") }
    /// Where workbooks and exports are written before they are renamed into `reports/`: inside
    /// the workspace (the same filesystem, so the rename is atomic) and outside `reports/`, so a
    /// killed run leaves no partial file there.
    public var tempURL: URL { root.appendingPathComponent(".iapledger-tmp") }

    public func ledgerURL(_ config: WorkspaceConfig) -> URL {
        config.databasePath.hasPrefix("/") ? URL(fileURLWithPath: config.databasePath) : root.appendingPathComponent(config.databasePath)
    }

    /// The config and the ledger opened read-only, for commands that only look (balance,
    /// exceptions, trace); an error naming the path when no run has created the ledger yet.
    public func openExistingLedger() throws -> (WorkspaceConfig, Ledger) {
        let config = try loadConfig()
        let url = ledgerURL(config)
        switch try Self.ledgerFile(url) {
        case .missing, .unknown:
            // Missing where nights wrote sets: a ledger moved or on a share not mounted (a night
            // would refuse it too), not one never made.
            if let last = earlierSets().last {
                throw StoreError(message: "\(url.path): is missing, but reports/ holds the workbooks of nights up to \(last): restore the ledger (or mount its share, or correct `database` in iapledger.toml)")
            }
            throw StoreError(message: "\(url.path): no ledger yet; run `iapledger run` first")
        case .empty:
            throw StoreError(message: "\(url.path): is empty (0 bytes: a copy or restore that failed?): no ledger to read; restore it from its copy")
        case .present: break
        }
        let ledger = try Ledger(path: url.path, readOnly: true)
        try checkReportingCurrency(config, ledger)
        return (config, ledger)
    }

    /// Opens the ledger for writing (creating it on the first run). A ledger missing where
    /// `reports/` holds earlier nights' workbooks is refused: a new one would write over the
    /// month-end sets from nothing (a ledger moved, misspelt in `database`, or on a share not
    /// mounted).
    /// - Parameters:
    ///   - mustExist: `dismiss`: a ledger must be there (a dismissal asks about what a night read).
    ///   - refuseEmpty: `close` and `dismiss`: an empty file (0 bytes: a copy or restore that
    ///     failed) is refused whatever `reports/` holds, not taken for a new ledger (`close` may
    ///     start one: months may be closed before the first night).
    public func openLedgerForWriting(_ config: WorkspaceConfig, mustExist: Bool = false, refuseEmpty: Bool = false) throws -> Ledger {
        let url = ledgerURL(config)
        try Self.refuseDanglingLink(url)
        let file = try Self.ledgerFile(url)
        if mustExist && file == .missing { throw StoreError(message: "\(url.path): no ledger yet; run `iapledger run` first") }
        if refuseEmpty && file == .empty {
            throw StoreError(message: "\(url.path): is empty (0 bytes: a copy or restore that failed?): no ledger to change; restore it from its copy")
        }
        // An empty file (a copy or restore that failed) is no ledger either: SQLite would start
        // one in it.
        let missing = file == .missing ? "is missing" : file == .empty ? "is empty (0 bytes: a copy or restore that failed?)" : nil
        if let missing {
            let sets = earlierSets()
            if let last = sets.last {
                // Counted by date (a night writes its own and, while open, the month before's).
                throw ReadError.file(url.path, "\(missing), but reports/ holds the workbooks of \(sets.count) "
                    + "\(sets.count == 1 ? "date" : "dates") (the last \(last)) that nights wrote: a new ledger would write over them from nothing. "
                    + "Nothing was read or written. Restore the ledger (or mount its share, or correct `database` in "
                    + "iapledger.toml); to start new books from the inbox, move reports/ aside first")
            }
            // A folder that is not there: SQLite says only that it cannot open the file.
            let folder = url.deletingLastPathComponent()
            var isFolder: ObjCBool = false
            if !FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder) || !isFolder.boolValue {
                throw ReadError.file(url.path, "cannot be made: its folder \(folder.path) \(isFolder.boolValue ? "" : FileManager.default.fileExists(atPath: folder.path) ? "is no folder" : "does not exist") "
                    + "(`database` in iapledger.toml; a night makes the ledger file, not its folder). Nothing was read or written")
            }
        }
        let ledger = try Ledger(path: url.path)
        try checkReportingCurrency(config, ledger)
        return ledger
    }

    /// A ledger older than the workbooks under `reports/` (a backup restored over the latest
    /// ledger: its last night is before the latest set the nights wrote) is refused before
    /// anything is read: built on, it numbered its next night as the lost one, wrote other
    /// workbooks under dates already written, disowned the genuine ones (`verify --workbook`),
    /// and lost the dismissals and closes made since, all with exit 0.
    func refuseLedgerOlderThanReports(_ ledger: Ledger, config: WorkspaceConfig) throws {
        let sets = earlierSets()
        guard let newest = sets.last else { return }
        let last = try ledger.read { try $0.lastAsOf() }
        if let last, newest <= last { return }
        let dates = sets.filter { last == nil || $0 > last! }
        throw StoreError(message: "\(ledgerURL(config).path): the ledger's last night is "
            + (last.map { "as of \($0)" } ?? "none (it holds no night)")
            + ", but reports/ holds the workbooks of \(dates.count) later \(dates.count == 1 ? "date" : "dates") (\(dates.first!)"
            + (dates.count > 1 ? " to \(dates.last!)" : "") + ") that a later ledger wrote: an older copy of the ledger restored? "
            + "Nothing was read or written. Put the latest ledger back; to go on from this one (the nights since are lost: "
            + "their inbox files are read again), move those folders of reports/ aside first")
    }

    /// Stops when `reporting_currency` is not the one the ledger's entries were posted in:
    /// every stored reporting amount would be relabelled, not converted, and totals would mix.
    func checkReportingCurrency(_ config: WorkspaceConfig, _ ledger: Ledger) throws {
        let stored = try ledger.read { try $0.entriesReportingCurrencies() }
        guard let mismatch = stored.first(where: { $0 != config.reportingCurrency }) else { return }
        throw ReadError.file(configURL.path, "reporting_currency is \(config.reportingCurrency), but the ledger's entries "
            + "are posted in \(stored.joined(separator: " and ")): every stored reporting amount is in \(mismatch), and "
            + "relabelling it would mix currencies in every total. Set reporting_currency = \"\(mismatch)\" again, or keep "
            + "books in \(config.reportingCurrency) in a new ledger (`database` in iapledger.toml)")
    }

    public func reportDirectory(asOf: Day) -> URL { reportsURL.appendingPathComponent(asOf.description) }

    /// A set's workbook as the ledger registers it (`reports/<day>/<workbook>-<day>.xlsx`).
    public static func workbookPath(_ workbook: ReportWorkbook, asOf: Day) -> String {
        "reports/\(asOf)/" + workbookName(workbook, asOf: asOf)
    }

    /// A set's workbook's file name (`finance-<day>.xlsx`).
    static func workbookName(_ workbook: ReportWorkbook, asOf: Day) -> String { "\(workbook.rawValue)-\(asOf).xlsx" }

    /// A book's journal export's file name, beside the workbook past the journal cap.
    static func journalExportName(_ book: Book, asOf: Day) -> String {
        (book == .production ? "journal-" : "sandbox-journal-") + "\(asOf).csv.gz"
    }

    /// `reports/.iapledger-ledger`: the identity of the ledger whose nights write the sets in
    /// `reports/` (`LedgerReader.identity`), written by each night after its commit. In
    /// `reports/`, so that it goes where the sets go (another workspace's `reports/` brings its
    /// own; a copy of the workspace's folders keeps it).
    public var ledgerMarkerURL: URL { reportsURL.appendingPathComponent(".iapledger-ledger") }

    /// Refuses a ledger other than the one whose nights wrote `reports/` (another workspace's
    /// ledger copied in, or another's `reports/`): a night on it would write over this
    /// workspace's sets from the other's books. Read before the ledger is opened for writing
    /// (nothing is written, not even a schema upgrade). A copy or backup of the same ledger
    /// has its identity; no marker (sets written before it existed), no set in `reports/`
    /// (moved aside: new books on purpose) or a ledger with no night finished says nothing.
    public func refuseForeignLedger(_ config: WorkspaceConfig) throws {
        let url = ledgerURL(config)
        // A marker there that cannot be read (its permissions, not UTF-8) is said, not taken
        // for no marker: that let another ledger write over these sets without a word.
        var st = stat()
        var text: String? = nil
        if lstat(ledgerMarkerURL.path, &st) == 0 {
            var why: String? = nil
            if stat(ledgerMarkerURL.path, &st) != 0 {
                why = "a link to nothing"
            } else if st.st_mode & S_IFMT != S_IFREG {
                why = st.st_mode & S_IFMT == S_IFDIR ? "a folder, not a file" : "not a regular file"
            } else {
                let fd = open(ledgerMarkerURL.path, O_RDONLY | O_CLOEXEC)
                if fd < 0 {
                    why = String(cString: strerror(errno))
                } else {
                    var bytes = [UInt8](repeating: 0, count: 4096)
                    let n = read(fd, &bytes, bytes.count)
                    let error = errno
                    close(fd)
                    if n < 0 { why = String(cString: strerror(error)) }
                    else if let t = String(validating: bytes.prefix(n), as: UTF8.self) {
                        // Never written empty (written aside, then renamed): empty is a copy or a
                        // disk that cut it short, not the absence of a marker.
                        let trimmed = t.trimmingCharacters(in: .whitespacesAndNewlines)
                        if trimmed.isEmpty { why = "it is empty: cut short?" } else { text = trimmed }
                    }
                    else { why = "not text" }
                }
            }
            if let why {
                throw ReadError.file(ledgerMarkerURL.path, "cannot be read (\(why)): "
                    + "it names the ledger whose nights wrote reports/, which each night checks before it writes; nothing was read or written. "
                    + "Make it a readable file again, or, sure that this ledger is the one whose nights wrote reports/, delete it (the next night writes it again); "
                    + "to start these books anew, move reports/ aside")
            }
        }
        guard let marker = text, !earlierSets().isEmpty, try Self.ledgerFile(url) == .present else { return }
        guard let identity = try Ledger(path: url.path, readOnly: true, migrate: false).read({ try $0.identity() }),
              identity != marker else { return }
        throw ReadError.file(url.path, "is not the ledger whose nights wrote reports/ (\(relative(ledgerMarkerURL)) names "
            + "another): the ledger of another workspace, or reports/ of another? (Or this ledger's first run or first file, "
            + "which the name is made from, changed by hand: `iapledger verify` says.) Nothing was read or written. Put back this "
            + "workspace's ledger (`iapledger verify --workbook` on a workbook says whether this ledger wrote it); to start these "
            + "books anew from this ledger, move reports/ aside first")
    }

    /// Writes `reports/.iapledger-ledger` (aside, then renamed) when it does not hold `identity`.
    public func writeLedgerMarker(_ identity: String) throws {
        if (try? String(contentsOf: ledgerMarkerURL, encoding: .utf8)) == identity + "\n" { return }
        try FileManager.default.createDirectory(at: reportsURL, withIntermediateDirectories: true)
        let temp = try WriteAside.tempURL(for: ledgerMarkerURL, in: tempURL)
        try Data((identity + "\n").utf8).write(to: temp)
        try WriteAside.moveIntoPlace(temp, to: ledgerMarkerURL)
    }

    /// The days of `reports/` holding a workbook a night wrote (`reports/<date>/*.xlsx`), in order.
    func earlierSets() -> [Day] {
        let fm = FileManager.default
        return ((try? fm.contentsOfDirectory(atPath: reportsURL.path)) ?? []).compactMap { name -> Day? in
            guard let day = Day(iso: name),
                  let files = try? fm.contentsOfDirectory(atPath: reportsURL.appendingPathComponent(name).path),
                  files.contains(where: { $0.hasSuffix(".xlsx") && !$0.hasPrefix(".") }) else { return nil }
            return day
        }.sorted()
    }

    /// `reports/` can take the night's sets: checked before anything is read or written, so that
    /// a share not mounted (`reports/` a link to a missing folder) or a file in its place stops
    /// the night with the ledger as it was, instead of after its commit with its workbooks
    /// missing. A missing `reports/` (not a link) is made when the first set is written.
    public func checkReportsFolder() throws {
        try Self.refuseDanglingLink(reportsURL)
        var st = stat()
        guard stat(reportsURL.path, &st) == 0 else { return }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw ReadError.file(reportsURL.path, "is not a folder: the workbooks are written into reports/<date>/; nothing was read or written; move it away and run again")
        }
    }

    /// The folders of the sets a night as of `asOf` writes (its day's, and the month before's
    /// while open) can take them: a file (or a link to nothing) in the place of one stopped the
    /// night after its commit, its workbooks unwritten; now before anything is read or written.
    /// So can the files of those sets (a folder at a workbook's path cannot be renamed over),
    /// and the folder each file is written in before its rename (`.iapledger-tmp`): a file in
    /// its place, or a folder at a workbook's path, also stopped the night after its commit.
    /// An earlier month's set already under `reports/` is written again when entries dated in
    /// it post while it is open: its folder is checked too.
    public func checkSetFolders(asOf: Day) throws {
        let previous = asOf.month.previous
        let earlier = ((try? FileManager.default.contentsOfDirectory(atPath: reportsURL.path)) ?? []).compactMap(Day.init(iso:))
            .filter { $0 == $0.month.lastDay && $0.month < previous }.sorted()
        for day in [asOf, previous.lastDay] + earlier {
            let dir = reportDirectory(asOf: day)
            try Self.refuseDanglingLink(dir)
            var st = stat()
            guard stat(dir.path, &st) == 0 else { continue }
            guard st.st_mode & S_IFMT == S_IFDIR else {
                throw ReadError.file(dir.path, "is not a folder: the workbooks of \(day) are written into it; nothing was read or written; move it away and run again")
            }
            for name in Self.setFileNames(asOf: day) {
                let file = dir.appendingPathComponent(name)
                // lstat: a link at the path is renamed over (the link replaced), whatever it names.
                guard lstat(file.path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { continue }
                throw ReadError.file(file.path, "is a folder at the path of a file of the set of \(day), which a night may write: it cannot write over a folder; nothing was read or written; move it away and run again")
            }
        }
        try Self.refuseDanglingLink(tempURL)
        var st = stat()
        if stat(tempURL.path, &st) == 0, st.st_mode & S_IFMT != S_IFDIR {
            throw ReadError.file(tempURL.path, "is not a folder: each workbook is written in it, then renamed into reports/; nothing was read or written; move it away and run again (it is made again)")
        }
        // And the night's own set's folder can be written (or, not there yet, the folder it is
        // made in), and the one each workbook is written in first: a read-only mount or folder
        // (or `chattr +i`) stopped the night after its commit. The month before's, written only
        // while that month is open, is checked once the ledger says (`checkPreviousSetWritable`);
        // an earlier month's set is written only when entries dated in it post: not checked.
        try Self.refuseUnwritable(reportDirectory(asOf: asOf), "the workbooks of \(asOf) are written into reports/\(asOf)/")
        try Self.refuseUnwritable(tempURL, "each workbook is written in .iapledger-tmp/, then renamed into reports/")
    }

    /// The folder of the month before's set can be written while that month is open (the night
    /// writes its set again); a closed month's (an archive made read-only) is not written.
    public func checkPreviousSetWritable(asOf: Day, closedThrough: Month?) throws {
        let previous = asOf.month.previous
        guard closedThrough.map({ previous > $0 }) ?? true else { return }
        try Self.refuseUnwritable(reportDirectory(asOf: previous.lastDay),
                                  "the workbooks of \(previous.lastDay) are written into reports/\(previous.lastDay)/ while \(previous) is open")
    }

    /// The files a night's set as of `day` may write into `reports/<day>/`: its workbooks and
    /// the journal exports beside them.
    static func setFileNames(asOf day: Day) -> [String] {
        ReportWorkbook.allCases.map { workbookName($0, asOf: day) } + [Book.production, .sandbox].map { journalExportName($0, asOf: day) }
    }

    /// What is at a ledger's path, read through a link as SQLite opens it: nothing (`missing`),
    /// an empty file (a copy or restore that failed), a ledger file, or what cannot be told
    /// (`unknown`: a folder on the way that cannot be searched; SQLite says why). A folder (or a
    /// device, a pipe) is said as such: SQLite's own words were a disk I/O error or a file that
    /// cannot be written.
    enum LedgerFile { case missing, empty, present, unknown }

    static func ledgerFile(_ url: URL) throws -> LedgerFile {
        var st = stat()
        guard stat(url.path, &st) == 0 else { return errno == ENOENT ? .missing : .unknown }
        guard st.st_mode & S_IFMT == S_IFREG else {
            let what = st.st_mode & S_IFMT == S_IFDIR ? "a folder" : "not a regular file"
            throw ReadError.file(url.path, "is \(what), not a ledger file: `database` in iapledger.toml names the ledger's file; nothing was read or written")
        }
        return st.st_size == 0 ? .empty : .present
    }

    /// A folder the night reads or writes that is a link to a folder gone (a share not
    /// mounted) stops it before it reads or writes anything.
    static func refuseDanglingLink(_ url: URL) throws {
        var st = stat(), target = stat()
        guard lstat(url.path, &st) == 0, st.st_mode & S_IFMT == S_IFLNK, stat(url.path, &target) != 0 else { return }
        let to = (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) ?? "?"
        throw ReadError.file(url.path, "is a link to \(to), which is missing (a share not mounted?): nothing was read or written; mount or restore it and run again")
    }

    /// A folder the night writes into, or the folder it would be made in while it is not there
    /// yet, that this process may not write (a read-only mount, its permissions, the immutable
    /// attribute) stops it before it reads or writes anything, naming the folder.
    static func refuseUnwritable(_ url: URL, _ what: String) throws {
        var folder = url.standardizedFileURL
        var st = stat()
        while stat(folder.path, &st) != 0, folder.path != "/" { folder = folder.deletingLastPathComponent() }
        guard access(folder.path, W_OK | X_OK) != 0 else { return }
        let reason = String(cString: strerror(errno))
        throw ReadError.file(folder.path, "cannot be written (\(reason)): \(what); nothing was read or written; make it writable (or mount it read-write) and run again")
    }

    /// Deletes the partial files of processes that died while writing (a killed run); files of
    /// a process still alive (a `report` command running beside) are left alone.
    public func removeStaleTempFiles() {
        let fm = FileManager.default
        func alive(_ pid: Int32) -> Bool { pid != getpid() && (kill(pid, 0) == 0 || errno == EPERM) }
        for name in (try? fm.contentsOfDirectory(atPath: tempURL.path)) ?? [] {
            if let pid = WriteAside.pid(ofTempName: name), alive(pid) { continue }
            try? fm.removeItem(at: tempURL.appendingPathComponent(name))
        }
        // With reports/ on another filesystem a finished file is copied beside its final name
        // (`.<name>.<pid>.partial`) before its rename: a killed copy is left there.
        for day in (try? fm.contentsOfDirectory(atPath: reportsURL.path)) ?? [] {
            let dir = reportsURL.appendingPathComponent(day)
            for name in (try? fm.contentsOfDirectory(atPath: dir.path)) ?? [] where name.hasPrefix(".") {
                guard let pid = WriteAside.pid(ofTempName: String(name.dropFirst())), !alive(pid) else { continue }
                try? fm.removeItem(at: dir.appendingPathComponent(name))
            }
        }
    }

    /// Reads the configuration and the rules; a problem here stops the run before anything is written.
    public func loadConfig() throws -> WorkspaceConfig {
        guard FileManager.default.fileExists(atPath: configURL.path) else {
            // A file named as the workspace (its iapledger.toml, say): the folder is wanted.
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: root.path, isDirectory: &isFolder), !isFolder.boolValue {
                throw ReadError.file(root.path, "is a file, not a folder: give the workspace's folder (the one holding iapledger.toml)")
            }
            // A folder of a workspace's own (inbox/..., rules, reports, layouts) is pointed at
            // the workspace, not told to make another one there; a folder that merely lies below
            // one holding a config is not said to be in it.
            let here = root.standardizedFileURL.resolvingSymlinksInPath()
            var up = here
            while up.pathComponents.count > 1 {
                up.deleteLastPathComponent()
                let below = here.pathComponents.dropFirst(up.pathComponents.count).first
                if let below, ["inbox", "rules", "reports", "layouts"].contains(below),
                   FileManager.default.fileExists(atPath: Workspace(up).configURL.path) {
                    throw ReadError.file(configURL.path, "not found: \(root.path) is not an iapledger workspace, but a folder inside the workspace \(up.path): run the command there, or give `--workspace \(ShellWord.quoted(up.path))`")
                }
            }
            // A workspace that lost its config (deleted, a restore that left it out) is told to
            // restore it: `init` refuses a folder holding rules or inbox files.
            let held = ["ledger.sqlite", "rules", "inbox", "reports"].filter {
                FileManager.default.fileExists(atPath: root.appendingPathComponent($0).path)
            }
            if held.contains("ledger.sqlite") || held.count >= 2 {
                throw ReadError.file(configURL.path, "not found, though \(root.path) holds a workspace's \(held.joined(separator: ", ")): its config is missing (deleted, or left out of a restore): restore iapledger.toml from its backup or version control; nothing was read or written")
            }
            throw ReadError.file(configURL.path, "not found: \(root.path) is not an iapledger workspace (run `iapledger init \(ShellWord.quoted(root.path))`)")
        }
        return try ConfigReader.read(path: configURL.path, displayPath: configURL.path)
    }

    public func loadRules() throws -> Rules {
        try RulesReader.read(rulesDirectory: rulesURL, displayPrefix: rulesURL.path + "/")
    }

    /// The workbook layouts: `layouts/<workbook>.toml` where the workspace has one, else the
    /// shipped default. A broken layout stops the run before anything is written.
    public func loadLayouts() throws -> ReportLayouts {
        try ReportLayouts.load(directory: layoutsURL)
    }

    /// The files in `rules/` that are not the four the nights read, by name (hidden files
    /// aside): their rows are not used.
    public func unreadRulesFiles() -> [String] {
        guard let names = try? Self.fileNames(in: rulesURL) else { return [] }
        return names.filter { !$0.name.hasPrefix(".") && !RulesReader.files.contains($0.name) }.map { "rules/\($0.shown)" }.sorted()
    }

    /// A workspace-relative path, as stored in the ledger and shown to people.
    public func relative(_ url: URL) -> String {
        let p = url.standardizedFileURL.path, r = root.path.hasSuffix("/") ? root.path : root.path + "/"
        if p.hasPrefix(r) { return String(p.dropFirst(r.count)) }
        // Through links (the workspace reached as /srv/books, a link to /data/books; a file
        // named through either): both resolved, the path's from its deepest folder that exists
        // (a file gone since is still named).
        let realRoot = Self.resolved(root.path), real = Self.resolved(p)
        let rr = realRoot.hasSuffix("/") ? realRoot : realRoot + "/"
        return real.hasPrefix(rr) ? String(real.dropFirst(rr.count)) : p
    }

    /// `path` with its links resolved, as far as it exists (the rest appended as given).
    static func resolved(_ path: String) -> String {
        var existing = URL(fileURLWithPath: path).standardizedFileURL, rest: [String] = []
        while !FileManager.default.fileExists(atPath: existing.path) && existing.path != "/" {
            rest.insert(existing.lastPathComponent, at: 0)
            existing = existing.deletingLastPathComponent()
        }
        var out = existing.resolvingSymlinksInPath()
        for c in rest { out.appendPathComponent(c) }
        return out.path
    }

    /// The order a night reads a folder's files in: by name, a run of digits compared by its
    /// value (`orders-2026-11-9.csv` before `orders-2026-11-10.csv`, `export-9` before
    /// `export-10`), so that an order's later row in a later export replaces the earlier one
    /// (in plain text order `export-10` came first, and an older export read after it undid a
    /// reversal). Names equal so (`07`, `7`) fall back to plain text order.
    static func readsBefore(_ a: String, _ b: String) -> Bool {
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        func isDigit(_ c: Unicode.Scalar) -> Bool { c.value >= 48 && c.value <= 57 }
        var i = 0, j = 0
        while i < x.count && j < y.count {
            if isDigit(x[i]) && isDigit(y[j]) {
                var ei = i, ej = j
                while ei < x.count && isDigit(x[ei]) { ei += 1 }
                while ej < y.count && isDigit(y[ej]) { ej += 1 }
                // The value: leading zeros aside, the longer run is the larger, else the first
                // digit that differs.
                var si = i, sj = j
                while si < ei - 1 && x[si] == "0" { si += 1 }
                while sj < ej - 1 && y[sj] == "0" { sj += 1 }
                if ei - si != ej - sj { return ei - si < ej - sj }
                for k in 0..<(ei - si) where x[si + k] != y[sj + k] { return x[si + k].value < y[sj + k].value }
                i = ei; j = ej
            } else {
                if x[i] != y[j] { return x[i].value < y[j].value }
                i += 1; j += 1
            }
        }
        // One name the start of the other: the shorter first; the same names so: text order.
        if (i == x.count) != (j == y.count) { return i == x.count }
        return a < b
    }

    /// The input files of one inbox folder with the given extensions, in the order a night
    /// reads them (`readsBefore`).
    /// `readBefore`: earlier nights read files from this folder. Then the folder missing is a
    /// failure, not an empty night: a share not mounted read as "nothing arrived" would let sales
    /// stop waiting for their orders and post at the default storefront. A link to a folder
    /// that is gone is always one.
    public func inboxFiles(_ folder: String, extensions: Set<String>, readBefore: Bool = false) throws -> [URL] {
        let dir = inboxURL.appendingPathComponent(folder)
        guard FileManager.default.fileExists(atPath: dir.path) else {
            try Self.refuseDanglingLink(dir)
            if readBefore {
                throw ReadError.file(dir.path, "is missing, though earlier nights read files from it (a share not mounted, or the folder moved?): nothing was read or written, since a night that found nothing there would post sales that wait for their orders at the default storefront; restore the folder (empty, if nothing is to be read) and run again")
            }
            return []
        }
        let inputs = try Self.fileNames(in: dir).filter {
            !$0.name.hasPrefix(".") && !Self.isOfficeLockFile($0.name) && extensions.contains(($0.name as NSString).pathExtension.lowercased())
        }
        // An input whose name is not UTF-8 cannot be recorded by its path: the night stops naming it.
        if let bad = inputs.first(where: \.invalid) {
            throw ReadError.file(dir.path, "holds a file whose name is not valid UTF-8 (\(bad.shown)): rename it (every input is recorded by its path), then run again")
        }
        let files = inputs.map(\.name)
            .sorted(by: Self.readsBefore)
            .map { dir.appendingPathComponent($0) }
        for url in files {
            // A named pipe or a device (or a link to one) would block or never end: refused
            // before anything is read. A missing link target is reported when the file is read.
            var st = stat()
            if stat(url.path, &st) == 0 {
                let type = st.st_mode & S_IFMT
                if type == S_IFDIR {
                    throw ReadError.file(url.path, "is a folder named like an input file: inputs are files, and a folder's files are not read; nothing was read or written; move or rename it and run again")
                }
                if type != S_IFREG {
                    throw ReadError.file(url.path, "is not a regular file (a named pipe, a device or a socket, or a link to one): move it out of the inbox")
                }
            }
        }
        return files
    }

    /// A folder under `inbox/` with more files than this not read is one line of
    /// `unreadInboxFiles`, with their count.
    static let filesListedPerFolder = 3

    /// Every file under `inbox/` that the night does not read, workspace-relative, each with
    /// the reason: in an input folder, a name without one of its extensions
    /// (`receipts.jsonl.gz`, `notes.txt`: `described` says what it reads); anywhere else (the
    /// top of `inbox/`, a folder of another name such as `Receipts/`, a folder inside an input
    /// folder such as `archive/`) where it lies. A misplaced file was passed over without a
    /// word. Names starting with `.` (transfers in progress, system files), files and folders,
    /// are passed over in silence.
    public func unreadInboxFiles(_ folders: [(folder: String, extensions: Set<String>, described: String)]) -> [String] {
        let inputFolders = folders.map { "inbox/\($0.folder)/" }.joined(separator: ", ")
        var lines: [String] = []
        func isDirectory(_ url: URL) -> Bool {
            // lstat: a link to a folder is not followed (it could lead back up, or out of the inbox).
            var st = stat()
            return lstat(url.path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
        }
        // The files under `dir` (shown as `shown`), each with `reason`; a folder of more than a
        // few (an archive kept in the inbox) as one line with their count, not a line a file
        // every night.
        func walk(_ dir: URL, shown: String, reason: String) {
            var files: [String] = [], unlisted: [String] = []
            func collect(_ dir: URL, _ shown: String) {
                guard let names = try? Self.fileNames(in: dir) else { unlisted.append(shown); return }
                for entry in names where !entry.name.hasPrefix(".") {
                    let url = dir.appendingPathComponent(entry.name)
                    if isDirectory(url) { collect(url, "\(shown)/\(entry.shown)") } else { files.append("\(shown)/\(entry.shown)") }
                }
            }
            collect(dir, shown)
            lines += unlisted.map { "\($0)/: not read (it cannot be listed)" }
            if files.count <= Self.filesListedPerFolder {
                lines += files.map { "\($0): not read (\(reason))" }
            } else {
                lines.append("\(shown)/: \(files.count) files not read, in it and the folders inside it (\(reason))")
            }
        }
        guard let top = try? Self.fileNames(in: inboxURL) else { return [] }
        for entry in top where !entry.name.hasPrefix(".") {
            let url = inboxURL.appendingPathComponent(entry.name)
            guard let f = folders.first(where: { $0.folder == entry.name }) else {
                let reason = "inputs are read from \(inputFolders) only; names are case-sensitive"
                if isDirectory(url) { walk(url, shown: "inbox/\(entry.shown)", reason: reason) }
                else { lines.append("inbox/\(entry.shown): not read (\(reason))") }
                continue
            }
            // Listed as the night lists its inputs (an input folder may be a link to one).
            guard let names = try? Self.fileNames(in: url) else { continue }
            for e in names where !e.name.hasPrefix(".") {
                let child = url.appendingPathComponent(e.name)
                let shown = "inbox/\(f.folder)/\(e.shown)"
                let ext = (e.name as NSString).pathExtension.lowercased()
                if isDirectory(child) {
                    // A folder named like an input stops the night (`inboxFiles`): not listed here.
                    if f.extensions.contains(ext) { continue }
                    walk(child, shown: shown, reason: "in a folder inside inbox/\(f.folder)/: only the files directly in it are read")
                } else if Self.isOfficeLockFile(e.name) {
                    // Excel's own, gone when the file is closed: nothing to rename or move.
                    continue
                } else if !f.extensions.contains(ext) {
                    // A kind another folder reads (an orders CSV among the receipts) is pointed
                    // there; `.txt`, notes as often as signed data, is not.
                    let there = folders.filter { $0.folder != f.folder && !["", "txt"].contains(ext) && $0.extensions.contains(ext) }.map { "inbox/\($0.folder)/" }
                    lines.append("\(shown): not read (\(f.described)\(there.isEmpty ? "" : "; *.\(ext) files are read from \(there.joined(separator: " and ")): move it there if it is one of theirs"))")
                }
            }
        }
        return lines.sorted()
    }

    /// `~$orders.csv`: the lock file Excel (or Word) keeps beside a file it has open, a few
    /// bytes of the user's name, never an input (read as orders, it was a rejected file whose
    /// rejection stayed open after Excel removed it).
    static func isOfficeLockFile(_ name: String) -> Bool { name.hasPrefix("~$") }

    /// The names in a folder, read as bytes: a name that is not UTF-8 would come back from
    /// Foundation with replacement characters, naming a file that does not exist. Such a name
    /// comes back decoded with replacement characters and `invalid` set, with `shown` escaping its bytes.
    static func fileNames(in dir: URL) throws -> [(name: String, invalid: Bool, shown: String)] {
        guard let handle = opendir(dir.path) else {
            throw ReadError.file(dir.path, "cannot be listed: \(String(cString: strerror(errno)))")
        }
        defer { closedir(handle) }
        var names: [(name: String, invalid: Bool, shown: String)] = []
        // readdir returns NULL at the end and on an error (EIO, ESTALE on a network mount):
        // errno tells them apart, and a listing cut short would drop the rest of the inbox.
        while true {
            errno = 0
            guard let entry = readdir(handle) else {
                if errno != 0 { throw ReadError.file(dir.path, "cannot be listed: \(String(cString: strerror(errno)))") }
                break
            }
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if let name = String(validating: bytes, as: UTF8.self) {
                if name != "." && name != ".." { names.append((name, false, name)) }
            } else {
                let shown = bytes.map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : String(format: "\\x%02X", $0) }.joined()
                names.append((String(decoding: bytes, as: UTF8.self), true, shown))
            }
        }
        return names
    }

    /// Creates a workspace with the commented example config, example rules and the workbook
    /// layouts from `templates/`.
    public static func create(at root: URL) throws -> Workspace {
        let fm = FileManager.default
        let ws = Workspace(root)
        if fm.fileExists(atPath: ws.configURL.path) {
            throw ReadError.file(ws.configURL.path, "already exists: \(root.path) is already a workspace")
        }
        var isFolder: ObjCBool = false
        if fm.fileExists(atPath: root.path, isDirectory: &isFolder), !isFolder.boolValue {
            throw ReadError.file(root.path, "is a file, not a folder: name a folder to make the workspace in")
        }
        // Every file it would write checked first: one already there stops it before anything
        // is written (it left a half-made workspace that a second `init` refused).
        // (lstat: a link there, even one leading nowhere, is there; a folder it needs that is a
        // file is in the way too.)
        func present(_ url: URL) -> mode_t? {
            var st = stat()
            return lstat(url.path, &st) == 0 ? st.st_mode & S_IFMT : nil
        }
        func named(_ url: URL) -> String { String(url.path.dropFirst(ws.root.path.count).drop { $0 == "/" }) }
        let folders = ["rules", "layouts", "inbox", "inbox/receipts", "inbox/orders", "inbox/signed", "reports"].map { ws.root.appendingPathComponent($0) }
        let targets = RulesReader.files.map { ws.rulesURL.appendingPathComponent($0) }
            + ReportWorkbook.allCases.map { ws.layoutsURL.appendingPathComponent($0.layoutFileName) }
        let there = folders.filter { present($0).map { $0 != S_IFDIR } ?? false } + targets.filter { present($0) != nil }
        if !there.isEmpty {
            throw ReadError.file(root.path, "already holds \(there.map(named).joined(separator: ", ")): nothing was written (init replaces no file); move \(there.count == 1 ? "it" : "them") aside, or make the workspace in another folder")
        }
        do {
            for sub in ["rules", "inbox/receipts", "inbox/orders", "inbox/signed", "reports"] {
                try fm.createDirectory(at: root.appendingPathComponent(sub), withIntermediateDirectories: true)
            }
            try Templates.write("iapledger.toml", to: ws.configURL)
            for name in RulesReader.files {
                try Templates.write("rules/\(name)", to: ws.rulesURL.appendingPathComponent(name))
            }
            try ws.copyShippedLayouts()
        } catch let e as ReadError {
            throw e
        } catch {
            // As the system says it ("Permission denied"), not Foundation's error domain and codes.
            throw ReadError.file(root.path, "cannot be made a workspace: \(WriteAside.describe(error))")
        }
        return ws
    }

    /// Writes the shipped workbook layouts into `layouts/`, to be edited there.
    func copyShippedLayouts() throws {
        try FileManager.default.createDirectory(at: layoutsURL, withIntermediateDirectories: true)
        for w in ReportWorkbook.allCases {
            try Templates.write("layouts/\(w.layoutFileName)", to: layoutsURL.appendingPathComponent(w.layoutFileName))
        }
    }
}

/// The example workspace files shipped with the tool (the repository's `templates/workspace`,
/// compiled into it).
public enum Templates {
    /// Writes one of them (`rules/fx.csv`) to `url`, refusing to replace a file there.
    static func write(_ path: String, to url: URL) throws {
        guard let data = LedgerTemplates.workspaceFile(path) else {
            throw ReadError.file("templates/workspace/\(path)", "not among the tool's templates")
        }
        do {
            try data.write(to: url, options: .withoutOverwriting)
        } catch {
            throw ReadError.file(url.path, FileManager.default.fileExists(atPath: url.path)
                                 ? "already exists: not replaced" : "cannot be written: \(error.localizedDescription)")
        }
    }
}
