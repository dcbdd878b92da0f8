import GRDB
import LedgerCore

/// A file written under reports/, as registered.
public struct RegisteredReportFile: Equatable {
    public var path: String
    public var sha256: String
    public var sizeBytes: Int64
    public var writtenAt: String
    public var runId: Int64?
    public var writtenBy: String
    /// The registration's own id (0 where not read from the ledger).
    public var id: Int64 = 0
}

extension LedgerWriter {
    /// Registers files just written under reports/ (path relative to the workspace, SHA-256 of
    /// the bytes on disk, size): by the night `runId`, or by `report` (`runId` nil).
    /// Each registration is chained (schema v27): its hash covers it and the registration
    /// before it, as the entries' hashes do (`ReportFileChain`).
    @discardableResult
    public func registerReportFiles(_ files: [(path: String, sha256: String, sizeBytes: Int64)], writtenAt: String, runId: Int64?) throws -> String? {
        let chained = try ReportFileChain.available(db)
        var previous = chained ? try ReportFileChain.head(db) ?? ReportFileChain.genesis : ReportFileChain.genesis
        var id = try Int64.fetchOne(db, sql: "SELECT max(id) FROM report_file") ?? 0
        for f in files {
            // The same bytes as the last version registered at its path (a night run again that
            // wrote the same workbooks): already known, with when it was first written.
            if let last = try Row.fetchOne(db.cachedStatement(sql: "SELECT sha256, size_bytes FROM report_file WHERE path = ? ORDER BY id DESC LIMIT 1"),
                                           arguments: [f.path]),
               (last[0] as String) == f.sha256, (last[1] as Int64) == f.sizeBytes { continue }
            id += 1
            let registered = RegisteredReportFile(path: f.path, sha256: f.sha256, sizeBytes: f.sizeBytes, writtenAt: writtenAt, runId: runId,
                                                  writtenBy: runId == nil ? "report" : "run")
            let hash = chained ? ReportFileChain.hash(previous: previous, id: id, registered) : nil
            try db.cachedStatement(sql: """
                INSERT INTO report_file (id, path, sha256, size_bytes, written_at, run_id, written_by\(chained ? ", hash" : "")) VALUES (?, ?, ?, ?, ?, ?, ?\(chained ? ", ?" : ""))
                """).execute(arguments: StatementArguments([id, f.path, f.sha256, f.sizeBytes, writtenAt, runId, registered.writtenBy] + (chained ? [hash] : []) as [(any DatabaseValueConvertible)?]))
            if let hash { previous = hash }
        }
        return chained ? previous : nil
    }
}

/// The registrations' hash chain (schema v27 on): each registration's hash is the SHA-256 of
/// `<the hash of the registration before it, or 64 zeros>\nreport <id>|<path>|<sha256>|<size>|<written at>|<run id, or ->|<written by>\n`
/// (registrations made before v27 have none, and the first one hashed starts from 64 zeros).
/// A registration is made after its night's commit (its workbooks come after it), so the seal
/// cannot cover it: the chain's head, printed by the night beside its seal, is the copy kept
/// outside the ledger that a registration forged or removed would have to match.
public enum ReportFileChain {
    public static let genesis = String(repeating: "0", count: 64)

    static func hash(previous: String, id: Int64, _ f: RegisteredReportFile) -> String {
        Hashing.sha256Hex(utf8: "\(previous)\nreport \(id)|\(f.path)|\(f.sha256)|\(f.sizeBytes)|\(f.writtenAt)|\(f.runId.map(String.init) ?? "-")|\(f.writtenBy)\n")
    }

    /// Whether the ledger chains its registrations (schema v27 on).
    static func available(_ db: Database) throws -> Bool {
        try db.tableExists("report_file") && db.columns(in: "report_file").contains { $0.name == "hash" }
    }

    /// The hash of the last registration hashed (nil before any).
    static func head(_ db: Database) throws -> String? {
        try String.fetchOne(db, sql: "SELECT hash FROM report_file WHERE hash IS NOT NULL ORDER BY id DESC LIMIT 1")
    }
}

extension LedgerReader {
    /// The registrations' chain head (nil for a ledger before v27, or with no registration hashed).
    public func reportFilesHead() throws -> String? {
        try ReportFileChain.available(db) ? ReportFileChain.head(db) : nil
    }

    /// The registrations' chain checked again: each hash from its registration and the one
    /// before it; none without a hash after the first hashed; ids without a gap from there.
    /// Returns the problems, the head as the registrations give it now, and how many are chained.
    /// `heads`: the head after each night's or `report`'s registrations (what that night
    /// printed), in order, for a head kept outside to be found.
    public func checkReportFileChain() throws -> (problems: [String], head: String?, chained: Int, heads: [(event: String, head: String)]) {
        guard try ReportFileChain.available(db) else { return ([], nil, 0, []) }
        var problems: [String] = []
        var previous = ReportFileChain.genesis, previousId: Int64? = nil, chained = 0, head: String? = nil
        var heads: [(event: String, head: String)] = []
        var lastEvent: String? = nil
        for r in try Row.fetchAll(db, sql: "SELECT id, path, sha256, size_bytes, written_at, run_id, written_by, hash FROM report_file ORDER BY id") {
            let id: Int64 = r[0]
            guard let stored = r[7] as String? else {
                if previousId != nil { problems.append("report file registration #\(id) (\(r[1] as String)) has no hash, after registrations that have: written by hand") }
                continue
            }
            if let p = previousId, id != p + 1 {
                problems.append("report file registration\(id - p == 2 ? " #\(p + 1) is" : "s #\(p + 1) to #\(id - 1) are") missing: removed (registrations are never deleted)")
            }
            let f = RegisteredReportFile(path: r[1], sha256: r[2], sizeBytes: r[3], writtenAt: r[4], runId: r[5], writtenBy: r[6])
            if ReportFileChain.hash(previous: previous, id: id, f) != stored {
                problems.append("report file registration #\(id) (\(f.path), SHA-256 \(f.sha256)) does not match its hash: it, or one before it, was changed or added by hand")
            }
            previous = stored; previousId = id; chained += 1; head = stored
            // One night's (or report's, or close's) registrations share their time and writer.
            // (`close` registers the sets it writes again as `report` does: one name for both.)
            let event = "\(f.runId.map { "run \($0)" } ?? "report or close") at \(f.writtenAt)"
            if event == lastEvent { heads[heads.count - 1].head = stored } else { heads.append((event, stored)) }
            lastEvent = event
        }
        return (problems, head, chained, heads)
    }
    /// What changed the ledger after a report file was registered: nights finished since and
    /// months closed since (by `close`; a night's close is a night). Nights are told by run
    /// id: those after the night that wrote it, or, for one `report` wrote, after the last
    /// night that registered files before it, and finished in the file's second or later (a
    /// night whose workbooks failed registered none; runs are stamped to the second, so one
    /// of the file's own second is counted, as a report and a night of one second cannot be
    /// ordered by time). A close as `writtenBeforeClose` tells it.
    public func changesSince(_ file: RegisteredReportFile) throws -> (nights: Int, closes: Int) {
        let nights = try Int.fetchOne(db, sql: """
            SELECT count(*) FROM run WHERE finished_at IS NOT NULL
              AND id > coalesce(?, (SELECT max(run_id) FROM report_file WHERE id < ?), 0)
              AND (? IS NOT NULL OR julianday(finished_at) >= julianday(substr(?, 1, 19) || 'Z'))
            """, arguments: [file.runId, file.id, file.runId, file.writtenAt]) ?? 0
        let closes = try periodCloses().filter { try writtenBeforeClose(file, $0) }.count
        return (nights, closes)
    }

    /// Whether the file registered as `file` was written before `close` was recorded. A file a
    /// night wrote is told by runs: before the first night that committed with the month
    /// closed (the night that recorded a config close, or the first after a `close`), which a
    /// time to the second cannot tell (a night records a config close as it starts, and may
    /// write in that second; another may have written in it just before). A file `report` or
    /// `close` wrote, by time: a close kept to the second, one in the file's own second is
    /// taken as before it (`close` writes its months' sets again at once).
    public func writtenBeforeClose(_ file: RegisteredReportFile, _ close: PeriodClose) throws -> Bool {
        if let run = file.runId {
            guard let first = try firstRunClosedThrough(close.month) else {
                // No night has committed with it closed: a night's file is from before it (a
                // close waits for the night's lock), unless the ledger kept no close per run.
                return try runKeepsClosedThrough() ? true : file.writtenAt.prefix(19) <= close.closedAt.prefix(19)
            }
            return run < first
        }
        return file.writtenAt.prefix(19) < close.closedAt.prefix(19)
    }

    /// The first finished night that committed with `month` closed; nil when none did.
    public func firstRunClosedThrough(_ month: Month) throws -> Int64? {
        guard try runKeepsClosedThrough() else { return nil }
        return try Int64.fetchOne(db.cachedStatement(sql: "SELECT min(id) FROM run WHERE finished_at IS NOT NULL AND closed_through >= ?"),
                                  arguments: [month.description])
    }

    func runKeepsClosedThrough() throws -> Bool {
        try db.columns(in: "run").contains { $0.name == "closed_through" }
    }

    /// Whether the ledger registers the report files written (schema v23 and after).
    public func registersReportFiles() throws -> Bool {
        try db.tableExists("report_file")
    }

    /// What tells this ledger from another's, without a column of its own: a hash of its first
    /// finished run (started at, as of, chain head) and the first file it read, none of which
    /// ever changes. A copy or backup of the ledger has the same; another workspace's ledger
    /// another. Nil before any night finished.
    public func identity() throws -> String? {
        guard let r = try Row.fetchOne(db, sql: """
            SELECT started_at, as_of, ifnull(chain_head, ''), ifnull((SELECT path || ' ' || sha256 FROM source_file ORDER BY id LIMIT 1), '')
            FROM run WHERE id = (SELECT min(id) FROM run WHERE finished_at IS NOT NULL)
            """) else { return nil }
        let text = "iapledger ledger\n\(r[0] as String)\n\(r[1] as String)\n\(r[2] as String)\n\(r[3] as String)\n"
        return Hashing.sha256Hex(utf8: text)
    }

    /// Every registration of a file with these bytes, oldest first.
    public func reportFiles(sha256: String) throws -> [RegisteredReportFile] {
        try registered(where: "sha256 = ?", sha256)
    }

    /// The last version registered at each workbook's path (`.xlsx`), in order: its SHA-256 and size.
    public func lastWorkbookRegistrations() throws -> [(path: String, sha256: String, sizeBytes: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT r.path, r.sha256, r.size_bytes FROM report_file r
            JOIN (SELECT path, max(id) AS id FROM report_file WHERE path LIKE '%.xlsx' GROUP BY path) last ON last.id = r.id
            ORDER BY r.path
            """).map { ($0[0], $0[1], $0[2]) }
    }

    /// The as-of dates of the nights run, as text (`2026-11-27`).
    public func nightDays() throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT DISTINCT as_of FROM run"))
    }

    /// Every path a file was ever registered at (workbooks and journal exports).
    public func registeredReportPaths() throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT DISTINCT path FROM report_file"))
    }

    /// Every registration of a path, oldest first (the versions written there).
    public func reportFiles(path: String) throws -> [RegisteredReportFile] {
        try registered(where: "path = ?", path)
    }

    /// The files registered in a folder under `reports/` (`reports/2026-10-31`).
    public func reportFiles(inFolder folder: String) throws -> [RegisteredReportFile] {
        try registered(where: "substr(path, 1, length(?1) + 1) = ?1 || '/' AND instr(substr(path, length(?1) + 2), '/') = 0", folder)
    }

    /// The days of the month-end sets (`reports/<a month's last day>/`) iapledger registered
    /// files in, earliest first.
    public func registeredMonthEndSets() throws -> [Day] {
        guard try registersReportFiles() else { return [] }
        return try String.fetchAll(db, sql: """
            SELECT DISTINCT substr(path, 9, 10) FROM report_file WHERE path GLOB 'reports/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]/*' ORDER BY 1
            """).compactMap { Day(iso: $0) }.filter { $0 == $0.month.lastDay }
    }

    /// How many entries of `book` dated from `first` through `last` were posted after the file
    /// `file` was written: by a night after the one that wrote it, or, for a file `report`
    /// wrote (a report cannot run beside a night), by a night after both the last night whose
    /// files were registered before it and the last night that finished in an earlier second
    /// (runs' times are kept to the second; a night registers its files after its commit, but
    /// one stopped in between registered none).
    public func entriesPosted(after file: RegisteredReportFile, book: String, from first: Day, through last: Day) throws -> Int {
        try Int.fetchOne(db, sql: """
            SELECT count(*) FROM entry WHERE book = ? AND date >= ? AND date <= ? AND run_id > ?
            """, arguments: [book, first.description, last.description, try runsBefore(file)]) ?? 0
    }

    /// Whether any entry of `book` dated on or before `day` was posted after `file` was
    /// written (a month-end set's balances are cumulative: an entry of an earlier month moves
    /// them too). Read from the entries posted since, newest first, not the whole history.
    public func anyEntryPosted(after file: RegisteredReportFile, book: String, through day: Day) throws -> Bool {
        try Bool.fetchOne(db, sql: """
            SELECT 1 FROM entry WHERE \(Self.postedAfterRun) AND book = ? AND date <= ? LIMIT 1
            """, arguments: [try runsBefore(file), book, day.description]) ?? false
    }

    /// The sales of `book` run `runId` posted at `default_storefront` (no storefront of their
    /// own and no order naming one, so booked where the config says, at its prices and tax), by
    /// storefront: how many and their gross in the reporting currency. Read from that run's
    /// entries only, found from the newest back.
    public func salesAtDefaultStorefront(run runId: Int64, book: String) throws -> [(storefront: String, sales: Int, grossReportingMinor: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT storefront, count(*), sum(gross_reporting_minor) FROM entry
            WHERE \(Self.postedAfterRun) AND run_id = ? AND book = ? AND kind = 'sale'
              AND instr(rules_json, '"storefrontSource":"default_storefront"') > 0
            GROUP BY storefront ORDER BY storefront
            """, arguments: [runId - 1, runId, book]).map { ($0[0], $0[1], $0[2]) }
    }

    /// Entries posted after run `?` (SQL over `entry`): those after the last entry of that run or
    /// an earlier one, found from the newest back (runs post one at a time, so entry ids grow
    /// with the run), not by reading the whole history.
    static let postedAfterRun = "id > (SELECT coalesce((SELECT id FROM entry WHERE run_id <= ? ORDER BY id DESC LIMIT 1), 0))"

    /// The last run whose entries `file` holds (see `entriesPosted`).
    func runsBefore(_ file: RegisteredReportFile) throws -> Int64 {
        if let run = file.runId { return run }
        return try Int64.fetchOne(db, sql: """
            SELECT max((SELECT coalesce(max(run_id), 0) FROM report_file WHERE id < ?1),
                       (SELECT coalesce(max(id), 0) FROM run WHERE finished_at IS NOT NULL AND substr(finished_at, 1, 19) < substr(?2, 1, 19)))
            """, arguments: [file.id, file.writtenAt]) ?? 0
    }

    private func registered(where condition: String, _ values: String...) throws -> [RegisteredReportFile] {
        guard try registersReportFiles() else { return [] }
        return try Row.fetchAll(db, sql: """
            SELECT path, sha256, size_bytes, written_at, run_id, written_by, id FROM report_file WHERE \(condition) ORDER BY id
            """, arguments: StatementArguments(values)).map {
            RegisteredReportFile(path: $0[0], sha256: $0[1], sizeBytes: $0[2], writtenAt: $0[3], runId: $0[4], writtenBy: $0[5], id: $0[6])
        }
    }
}
