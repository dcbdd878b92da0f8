import Foundation
import GRDB
import LedgerCore

/// Reads for `iapledger verify`.
extension LedgerReader {
    /// The UTF-8 bytes of "book|transaction id" of every entry of `kind` (read from the entry
    /// key's index alone). Bytes, as SQLite compares ids: Swift's `==` would take two ids
    /// that are canonically equivalent for one.
    public func entryKeys(kind: EntryKind) throws -> Set<[UInt8]> {
        Set(try String.fetchAll(db.cachedStatement(sql: "SELECT book || '|' || transaction_id FROM entry WHERE kind = ?"),
                                arguments: [kind.rawValue]).map { Array($0.utf8) })
    }

    /// Every entry in id order, rebuilt, with the stored rules text and hash.
    public func forEachStoredEntry(_ body: (_ id: Int64, _ entry: EntryDraft, _ rulesJSON: String, _ hash: String) throws -> Void) throws {
        // The entries and their postings as two streams in entry order, walked side by side
        // (a posting query per entry cost a tenth of verify).
        let cursor = try Row.fetchCursor(db, sql: "SELECT * FROM entry ORDER BY id")
        let postings = try Row.fetchCursor(db, sql: """
            SELECT p.entry_id, a.name, p.currency, p.amount_minor, p.reporting_amount_minor
            FROM posting p JOIN account a ON a.id = p.account_id ORDER BY p.entry_id, \(try postingOrder())
            """)
        var next: (entryId: Int64, posting: PostingDraft)? = nil
        func advance() throws {
            next = try postings.next().map { ($0[0], PostingDraft(account: $0[1], currency: $0[2], amountMinor: $0[3], reportingAmountMinor: $0[4])) }
        }
        try advance()
        while let r = try cursor.next() {
            let id: Int64 = r["id"]
            var own: [PostingDraft] = []
            // Postings of no entry (only a ledger that stored them could have one) are passed over.
            while let n = next, n.entryId <= id {
                if n.entryId == id { own.append(n.posting) }
                try advance()
            }
            try body(id, try draft(r, postings: own), r["rules_json"], r["hash"])
        }
    }

    /// A finished run as `verify` checks it: its recorded chain head, and the hash of the last
    /// entry it could see (entries of runs up to it) as the ledger now holds them.
    public struct RunHead {
        public var runId: Int64
        public var asOf: String
        public var finishedAt: String
        public var head: String?
        public var expected: String
        /// The last entry the run could see (nil: none yet).
        public var lastEntryId: Int64?
        /// The month the books were closed through when it committed (nil: none closed, or a
        /// run recorded before runs kept it).
        public var closedThrough: String? = nil
    }

    /// The furthest month any finished run recorded the books closed through, and that run.
    public func latestRecordedClosedThrough() throws -> (runId: Int64, month: String)? {
        try Row.fetchOne(db, sql: """
            SELECT id, closed_through FROM run WHERE finished_at IS NOT NULL AND closed_through IS NOT NULL
            ORDER BY closed_through DESC, id LIMIT 1
            """).map { ($0[0], $0[1]) }
    }

    /// Finished runs whose clock times are out of order: one finished before it started, or
    /// started before the run before it finished (nights run one at a time, under the lock).
    /// Run times are not sealed (the same data gives the same workbooks, seal included, whenever
    /// it runs): their order is what can be checked, to within `slack` seconds (a clock set back
    /// a little by NTP while a night ran is no tampering). At most ten, then how many more.
    public func runTimesOutOfOrder(slack: TimeInterval = 300) throws -> [String] {
        var problems: [String] = []
        var before: (id: Int64, finished: String)? = nil
        let cause = "changed by hand, or the machine's clock was set back in between"
        let iso = ISO8601DateFormatter(), fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        /// Whether `a` is more than `slack` before `b` (as text when either is no timestamp).
        func earlier(_ a: String, _ b: String) -> Bool {
            guard let x = iso.date(from: a) ?? fractional.date(from: a), let y = iso.date(from: b) ?? fractional.date(from: b) else { return a < b }
            return x.addingTimeInterval(slack) < y
        }
        for r in try Row.fetchAll(db, sql: "SELECT id, started_at, finished_at FROM run WHERE finished_at IS NOT NULL ORDER BY id") {
            let id: Int64 = r[0], started: String = r[1], finished: String = r[2]
            if earlier(finished, started) {
                problems.append("run \(id) finished at \(finished), before it started (\(started)): its times were \(cause)")
            }
            if let b = before, earlier(started, b.finished) {
                problems.append("run \(id) started at \(started), before run \(b.id) finished (\(b.finished)), though nights run one at a time: their times were \(cause)")
            }
            before = (id, finished)
        }
        return problems.count <= 10 ? problems : Array(problems.prefix(10)) + ["... and \(problems.count - 10) more runs' times out of order"]
    }

    /// The latest month of the ledger's closed periods (nil: none).
    public func closedThroughNow() throws -> String? {
        try String.fetchOne(db, sql: "SELECT max(month) FROM period_close")
    }

    /// Late entries (moved forward from a closed month) whose original month is not closed
    /// now: the close that moved them was deleted. The first 50.
    public func lateEntriesOfOpenMonths() throws -> [(entryId: Int64, originalDate: String)] {
        try Row.fetchAll(db, sql: """
            SELECT id, original_date FROM entry
            WHERE late = 1 AND substr(original_date, 1, 7) > ifnull((SELECT max(month) FROM period_close), '')
            ORDER BY id LIMIT 50
            """).map { ($0[0], $0[1]) }
    }

    /// Every finished run's recorded chain head and the hash of the last entry it could see
    /// (entries of runs up to it): one pass over the entries' run ids, not one per run.
    public func runChainHeads() throws -> [RunHead] {
        var lastOfRun: [(runId: Int64, entryId: Int64)] = try Row.fetchAll(db, sql: "SELECT run_id, max(id) FROM entry GROUP BY run_id ORDER BY run_id")
            .map { ($0[0], $0[1]) }
        lastOfRun.reverse()
        var lastSeen: Int64? = nil
        var heads: [RunHead] = []
        let hasClosedThrough = try Bool.fetchOne(db, sql: "SELECT count(*) FROM pragma_table_info('run') WHERE name = 'closed_through'") ?? false
        for r in try Row.fetchAll(db, sql: """
            SELECT id, as_of, finished_at, chain_head, \(hasClosedThrough ? "closed_through" : "NULL") FROM run
            WHERE finished_at IS NOT NULL ORDER BY id
            """) {
            let runId: Int64 = r[0]
            while let next = lastOfRun.last, next.runId <= runId {
                lastSeen = max(lastSeen ?? next.entryId, next.entryId)
                lastOfRun.removeLast()
            }
            let expected = try lastSeen.flatMap {
                try String.fetchOne(db.cachedStatement(sql: "SELECT hash FROM entry WHERE id = ?"), arguments: [$0])
            } ?? EntryHash.genesis
            heads.append(RunHead(runId: runId, asOf: r[1], finishedAt: r[2], head: r[3], expected: expected, lastEntryId: lastSeen,
                                 closedThrough: r[4]))
        }
        return heads
    }

    /// Runs without a finish (a night's run commits finished: none should be).
    public func unfinishedRuns() throws -> [(runId: Int64, asOf: String)] {
        try Row.fetchAll(db, sql: "SELECT id, as_of FROM run WHERE finished_at IS NULL ORDER BY id LIMIT 50").map { ($0[0], $0[1]) }
    }

    /// Entries whose run is missing or never finished (a run's entries commit with its finish).
    public func entriesOutsideFinishedRuns() throws -> [(entryId: Int64, runId: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT e.id, e.run_id FROM entry e LEFT JOIN run r ON r.id = e.run_id
            WHERE r.id IS NULL OR r.finished_at IS NULL ORDER BY e.id LIMIT 50
            """).map { ($0[0], $0[1]) }
    }

    /// Every source record's stored text and the SHA-256 recorded when it was read, with its
    /// file's path and hash, in id order (streamed: the text of a big ledger is gigabytes).
    /// `chunk` is the id of the chunk holding the text (nil for a text kept in its own row);
    /// `raw` is nil when that chunk cannot be read (damaged or altered).
    /// `kind` is the file's (`receipts`, `signed`, `orders`).
    public func forEachSourceRecordText(_ body: (_ path: String, _ line: Int, _ outcome: String, _ reasonCode: String?,
                                                 _ recordSHA256: String, _ fileSHA256: String, _ chunk: Int64?,
                                                 _ raw: String?, _ kind: String, _ recordId: Int64, _ runId: Int64,
                                                 _ stored: StoredRecordFields) throws -> Void) throws {
        var chunks = chunkReader()
        let cursor = try Row.fetchCursor(db, sql: """
            SELECT f.path, r.line, r.outcome, r.reason_code, r.record_sha256, f.sha256, CAST(r.raw AS BLOB), \(chunkColumns), f.kind, r.id, f.run_id,
                   r.environment, r.status_code, r.account_id, r.order_id, r.received_at
            FROM source_record r JOIN source_file f ON f.id = r.file_id ORDER BY r.id
            """)
        while let r = try cursor.next() {
            try body(r[0], r[1], r[2], r[3], r[4], r[5], r[7], try Self.text(r, raw: 6, chunk: 7, &chunks), r[10], r[11], r[12],
                     StoredRecordFields(environment: r[13], statusCode: r[14], accountId: r[15], orderId: r[16], receivedAt: r[17]))
        }
    }

    /// What a source record stores beside its text, read from it by the night: the
    /// environment, and a legacy response's status and wrapper fields.
    public struct StoredRecordFields: Equatable {
        public var environment: String?
        public var statusCode: Int?
        public var accountId: String?
        public var orderId: String?
        public var receivedAt: String?
        public init(environment: String?, statusCode: Int? = nil, accountId: String? = nil, orderId: String? = nil, receivedAt: String? = nil) {
            self.environment = environment; self.statusCode = statusCode; self.accountId = accountId; self.orderId = orderId; self.receivedAt = receivedAt
        }
    }

    /// An order version as stored, field by field (the names of the orders file's columns),
    /// each as its text (nil when empty).
    public struct StoredOrderVersion {
        public var id: Int64
        public var orderId: String
        public var fields: [(name: String, value: String?)]
        /// The source record it names, and that record's file kind and outcome (nil when the
        /// ledger holds no such record: a version a night stores always names its orders line).
        public var recordId: Int64
        public var sourceKind: String?
        public var sourceOutcome: String?
        /// Whether the ledger holds the record it names (its file may be gone all the same).
        public var recordHeld: Bool
    }

    /// Rows naming a row of another table that the ledger does not hold (SQLite's
    /// `foreign_key_check`): a night writes with foreign keys enforced, so each was written
    /// by hand with them off (the sqlite3 shell's default). At most `limit`, and how many.
    public func foreignKeyViolations(limit: Int = 20) throws -> (rows: [(table: String, rowid: Int64?, parent: String)], count: Int) {
        var rows: [(table: String, rowid: Int64?, parent: String)] = [], count = 0
        let cursor = try Row.fetchCursor(db, sql: "PRAGMA foreign_key_check")
        while let r = try cursor.next() {
            count += 1
            if rows.count < limit { rows.append((r[0], r[1], r[2])) }
        }
        return (rows, count)
    }

    /// Every order version with its source line (file, line, text) and its file's header row
    /// (nil for a file read before schema v25, which kept none), in id order, streamed.
    public func forEachOrderVersion(_ body: (_ version: StoredOrderVersion, _ path: String, _ line: Int, _ header: String?,
                                             _ raw: String?) throws -> Void) throws {
        var chunks = chunkReader()
        let header = try db.tableExists("source_file_header")
            ? "(SELECT header FROM source_file_header h WHERE h.file_id = r.file_id)" : "NULL"
        let cursor = try Row.fetchCursor(db, sql: """
            SELECT v.id, v.order_id, v.account_id, v.transaction_id, v.product_id, v.quantity, v.credited_units, v.credited_at,
                   v.credited_ms, v.environment, v.storefront, v.app_account_token, v.reversed_at,
                   f.path, r.line, \(header), CAST(r.raw AS BLOB), \(chunkColumns), v.record_id, f.kind, r.outcome, r.id IS NOT NULL
            FROM order_version v LEFT JOIN source_record r ON r.id = v.record_id LEFT JOIN source_file f ON f.id = r.file_id
            ORDER BY v.id
            """)
        // credited_ms orders an order's credits (the earliest credited names a sale's
        // storefront): read again from credited_at like the rest.
        let names = ["order_id", "account_id", "transaction_id", "product_id", "quantity", "credited_units", "credited_at",
                     "credited_ms", "environment", "storefront", "app_account_token", "reversed_at"]
        while let r = try cursor.next() {
            let fields = names.enumerated().map { i, name -> (name: String, value: String?) in
                let v = r[i + 1] as DatabaseValue
                switch v.storage {
                case .int64(let n): return (name, String(n))
                case .string(let t): return (name, t.isEmpty ? nil : t)
                default: return (name, nil)
                }
            }
            try body(StoredOrderVersion(id: r[0], orderId: r[1], fields: fields, recordId: r[20], sourceKind: r[21], sourceOutcome: r[22], recordHeld: r[23]),
                     r[13] ?? "", r[14] ?? 0, r[15], try Self.text(r, raw: 16, chunk: 17, &chunks))
        }
    }

    /// Order versions missing: ids that do not run on without a gap (a version deleted from
    /// the middle), and verified order lines that made no version though they repeat no earlier
    /// line of their order that made one (a night stores a version for every line but one that
    /// repeats its order's line as it stands, or one whose file's last line for the order
    /// does). At most `limit` of each.
    /// `reordered`: versions whose source line was read before the line of the version before
    /// them (a night stores versions in the order it reads their lines: ids swapped would make an
    /// older line an order's latest state).
    public func missingOrderVersions(limit: Int = 20) throws -> (gaps: [ClosedRange<Int64>], lines: [(orderId: String, path: String, line: Int)], count: Int,
                                                                 reordered: [Int64], repeated: [(id: Int64, of: Int64)]) {
        var gaps: [ClosedRange<Int64>] = [], reordered: [Int64] = [], repeated: [(id: Int64, of: Int64)] = []
        // A line makes one version: each version after the first from a line was copied in by
        // hand (whichever version it copies; it is not also said to be reordered).
        var copies: [Int64: Int64] = [:]
        let twice = try Row.fetchCursor(db, sql: """
            SELECT v.id, d.first FROM order_version v
            JOIN (SELECT record_id, min(id) AS first FROM order_version GROUP BY record_id HAVING count(*) > 1) d ON d.record_id = v.record_id
            WHERE v.id > d.first ORDER BY v.id
            """)
        while let t = try twice.next() {
            let id: Int64 = t[0], first: Int64 = t[1]
            copies[id] = first
            if repeated.count < limit { repeated.append((id, first)) }
        }
        var previous: Int64 = 0, previousRecord: Int64 = 0
        var recordIds: [Int64] = []
        let versions = try Row.fetchCursor(db, sql: "SELECT id, record_id FROM order_version ORDER BY id")
        while let v = try versions.next() {
            let id: Int64 = v[0], record: Int64 = v[1]
            if id > previous + 1 && gaps.count < limit { gaps.append((previous + 1)...(id - 1)) }
            if copies[id] != nil { previous = id; continue }
            if record < previousRecord && reordered.count < limit { reordered.append(id) }
            previous = id; previousRecord = max(previousRecord, record)
            recordIds.append(record)
        }
        recordIds.sort()
        var next = 0, count = 0
        var lines: [(orderId: String, path: String, line: Int)] = []
        // As the night decides: a line repeats its order's latest version read before it, or,
        // in a file whose bytes were read before under another name (sent again), any version.
        let latest = try db.cachedStatement(sql: """
            SELECT r2.record_sha256 FROM order_version v JOIN source_record r2 ON r2.id = v.record_id
            WHERE v.order_id = ? AND v.record_id < ? ORDER BY v.record_id DESC LIMIT 1
            """)
        let any = try db.cachedStatement(sql: """
            SELECT EXISTS (SELECT 1 FROM order_version v JOIN source_record r2 ON r2.id = v.record_id
                           WHERE v.order_id = ? AND r2.record_sha256 = ? AND r2.id < ?)
            """)
        let resent = try db.cachedStatement(sql: """
            SELECT EXISTS (SELECT 1 FROM source_file f2 WHERE f2.sha256 = ? AND f2.path <> ? AND f2.id < ?)
            """)
        let records = try Row.fetchCursor(db, sql: """
            SELECT r.id, r.order_id, r.record_sha256, f.path, r.line, f.id, f.sha256 FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.outcome = 'verified' AND f.kind = 'orders' ORDER BY r.id
            """)
        // Where a file leaves each order: its last verified line's hash, read for a file when
        // one of its lines made no version (a file's lines are read together).
        var endsFile: Int64 = 0, ends: [String: String] = [:]
        func fileLeaves(_ fileId: Int64, _ orderId: String, at sha: String?) throws -> Bool {
            guard let sha else { return false }
            if endsFile != fileId {
                endsFile = fileId
                ends = [:]
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT order_id, record_sha256 FROM source_record WHERE file_id = ? AND outcome = 'verified' AND order_id IS NOT NULL
                    ORDER BY id
                    """, arguments: [fileId])
                while let e = try rows.next() { ends[e[0]] = e[1] }
            }
            return ends[orderId] == sha
        }
        while let r = try records.next() {
            let id: Int64 = r[0]
            while next < recordIds.count && recordIds[next] < id { next += 1 }
            if next < recordIds.count && recordIds[next] == id { continue }
            guard let orderId: String = r[1] else { continue }
            let sha: String = r[2]
            let before = try String.fetchOne(latest, arguments: [orderId, id])
            if try before == sha || fileLeaves(r[5], orderId, at: before) { continue }
            if try Bool.fetchOne(resent, arguments: [r[6] as String, r[3] as String, r[5] as Int64]) == true,
               try Bool.fetchOne(any, arguments: [orderId, sha, id]) == true { continue }
            count += 1
            if lines.count < limit { lines.append((orderId, r[3], r[4])) }
        }
        return (gaps, lines, count, reordered, repeated)
    }

    /// Whether a version of order `orderId` names transaction `transactionId` with `storefront`
    /// (in upper case, as a sale is booked in it).
    public func orderNamesStorefront(orderId: String, transactionId: String, storefront: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT EXISTS (SELECT 1 FROM order_version WHERE order_id = ? AND transaction_id = ? AND upper(storefront) = ?)
            """), arguments: [orderId, transactionId, storefront]) ?? false
    }

    /// The record a notification was first stored from (nil when no notification of that UUID is stored).
    public func notificationRecord(uuid: String) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT record_id FROM notification WHERE uuid = ?"), arguments: [uuid])
    }

    /// The links of transactions to the records that told them (`transaction_source`), in
    /// record order, each with where its record was read (or its id, when the ledger holds no
    /// such record).
    public func transactionLinksByRecord() throws -> RecordCursor<(recordId: Int64, transactionId: String, at: String)> {
        try linksByRecord(in: "transaction_source")
    }

    /// The links of records that did not verify (and of verified ones with a refused item) to
    /// the transactions they name (`unverified_record_transaction`), in record order, as
    /// `transactionLinksByRecord`.
    public func unverifiedLinksByRecord() throws -> RecordCursor<(recordId: Int64, transactionId: String, at: String)> {
        try linksByRecord(in: "unverified_record_transaction")
    }

    /// The (record, transaction) links of `table`, in record order, each with where its record
    /// was read (or its id, when the ledger holds no such record).
    private func linksByRecord(in table: String) throws -> RecordCursor<(recordId: Int64, transactionId: String, at: String)> {
        let rows = try Row.fetchCursor(db, sql: """
            SELECT l.record_id, l.transaction_id, ifnull(f.path || ':' || r.line, 'record #' || l.record_id)
            FROM \(table) l LEFT JOIN source_record r ON r.id = l.record_id LEFT JOIN source_file f ON f.id = r.file_id
            ORDER BY l.record_id, l.transaction_id
            """)
        return RecordCursor { try rows.next().map { ($0[0], $0[1], $0[2]) } }
    }

    /// Exceptions and their closed episodes whose days are not those of the runs they name
    /// (first seen, last seen, resolved: each the as-of date of its run), or whose runs are out
    /// of order (first, then last seen, then resolved; an episode resolved before its exception
    /// opened again). At most 20, then a count of the rest.
    public func exceptionDatesAtOdds() throws -> [String] {
        let atOdds = """
            x.first_seen IS NOT f.as_of OR x.last_seen IS NOT l.as_of OR x.resolved_on IS NOT res.as_of
            OR x.first_run_id > x.last_run_id OR (x.resolved_run_id IS NOT NULL AND x.resolved_run_id <= x.last_run_id)
            """
        let runs = "LEFT JOIN run f ON f.id = x.first_run_id LEFT JOIN run l ON l.id = x.last_run_id LEFT JOIN run res ON res.id = x.resolved_run_id"
        var out: [String] = []
        var count = 0
        func say(_ rows: RowCursor, _ what: (Row) -> String) throws {
            while let row = try rows.next() {
                count += 1
                if out.count < 20 { out.append(what(row)) }
            }
        }
        func dates(_ row: Row, from i: Int) -> String {
            "first seen \(row[i] as String? ?? "?") (run \(row[i + 1] as Int64? ?? 0), as of \(row[i + 2] as String? ?? "no such run")), "
            + "last seen \(row[i + 3] as String? ?? "?") (run \(row[i + 4] as Int64? ?? 0), as of \(row[i + 5] as String? ?? "no such run")), "
            + "resolved \(row[i + 6] as String? ?? "no") (run \((row[i + 7] as Int64?).map(String.init) ?? "none"), as of \(row[i + 8] as String? ?? "none"))"
        }
        let columns = "x.first_seen, x.first_run_id, f.as_of, x.last_seen, x.last_run_id, l.as_of, x.resolved_on, x.resolved_run_id, res.as_of"
        try say(Row.fetchCursor(db, sql: """
            SELECT x.category, x.transaction_id, x.order_id, \(columns) FROM exception x \(runs) WHERE \(atOdds) ORDER BY x.id
            """)) { row in
            "exception \(row[0] as String) (transaction \(row[1] as String), order \(row[2] as String)): \(dates(row, from: 3)): "
                + "its days are not those of the nights its runs name, or its runs are out of order: changed by hand (its age or its resolution)"
        }
        if try db.tableExists("exception_episode") {
            try say(Row.fetchCursor(db, sql: """
                SELECT e.category, e.transaction_id, e.order_id, \(columns), e.first_run_id FROM exception_episode x JOIN exception e ON e.id = x.exception_id \(runs)
                WHERE \(atOdds) OR x.resolved_run_id IS NULL OR x.resolved_run_id >= e.first_run_id ORDER BY x.id
                """)) { row in
                "a closed episode of exception \(row[0] as String) (transaction \(row[1] as String), order \(row[2] as String)): \(dates(row, from: 3)), "
                    + "the exception open again since run \(row[12] as Int64): its days are not those of the nights its runs name, or its runs are out of order: changed by hand"
            }
        }
        if count > out.count { out.append("and \(count - out.count) more exceptions or episodes whose days are not those of their runs") }
        return out
    }

    /// A notification's row as stored (what its record says of it).
    public struct StoredNotification: Equatable, Sendable {
        public var type: String, subtype: String?, signedMs: Int64?, environment: String?, transactionId: String?
        public init(type: String, subtype: String?, signedMs: Int64?, environment: String?, transactionId: String?) {
            (self.type, self.subtype, self.signedMs, self.environment, self.transactionId) = (type, subtype, signedMs, environment, transactionId)
        }
    }

    /// Every stored notification: its UUID, type, transaction, record and where that was read,
    /// its row, and the night that stored it.
    public func storedNotifications() throws -> [(uuid: String, type: String, transactionId: String?, recordId: Int64, at: String,
                                                  row: StoredNotification, runId: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT n.uuid, n.notification_type, n.transaction_id, n.record_id, ifnull(f.path || ':' || r.line, 'record #' || n.record_id),
                   n.subtype, n.signed_ms, n.environment, n.run_id
            FROM notification n LEFT JOIN source_record r ON r.id = n.record_id LEFT JOIN source_file f ON f.id = r.file_id ORDER BY n.uuid
            """).map { ($0[0], $0[1], $0[2], $0[3], $0[4],
                         StoredNotification(type: $0[1], subtype: $0[5], signedMs: $0[6], environment: $0[7], transactionId: $0[2]), $0[8]) }
    }

    /// Refund reversals asked for that no verified signed record can have asked for (the
    /// checks a night makes before it writes; `verify` reads each record again): one whose
    /// notification is not a REFUND_REVERSED of its transaction, or whose notification's record
    /// is not a verified JWS of a signed-data file. The night posted a reversal so made up (a
    /// review's insider, past no trigger: inserts are not refused). Only the requests are read
    /// (few: Apple's REFUND_REVERSED), not every notification, which a backend forwarding them
    /// all makes one per purchase.
    public func reversalsNotFromSignedRecords(limit: Int = 5) throws -> [String] {
        try Row.fetchAll(db, sql: """
            SELECT q.transaction_id, q.notification_uuid,
                   n.uuid IS NULL OR n.notification_type <> 'REFUND_REVERSED' OR n.transaction_id IS NOT q.transaction_id,
                   ifnull(f.path || ':' || r.line, 'record #' || n.record_id)
            FROM reversal_request q LEFT JOIN notification n ON n.uuid = q.notification_uuid
            LEFT JOIN source_record r ON r.id = n.record_id LEFT JOIN source_file f ON f.id = r.file_id
            WHERE n.uuid IS NULL OR n.notification_type <> 'REFUND_REVERSED' OR n.transaction_id IS NOT q.transaction_id
               OR r.id IS NULL OR r.outcome <> 'verified' OR r.reason_code IS NOT 'JWS_VERIFIED' OR f.kind IS NOT 'signed'
            ORDER BY q.book, q.transaction_id LIMIT ?
            """, arguments: [limit]).map { row in
            let (id, uuid, notItsOwn, at): (String, String, Bool, String?) = (row[0], row[1], row[2], row[3])
            return notItsOwn
                ? "its refund reversal of transaction \(id) is asked for by \(uuid), which is no REFUND_REVERSED notification of it: written by hand"
                : "its refund reversal of transaction \(id) is asked for by notification \(uuid), whose record \(at ?? "?") is no verified signed record: written by hand"
        }
    }

    /// The kind of file a record was read from (`receipts`, `signed`, `orders`).
    public func recordKind(_ recordId: Int64) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT f.kind FROM source_record r JOIN source_file f ON f.id = r.file_id WHERE r.id = ?"),
                            arguments: [recordId])
    }

    /// Every refund reversal asked for.
    public func reversalRequests() throws -> [(book: String, transactionId: String, date: String, uuid: String)] {
        try Row.fetchAll(db, sql: "SELECT book, transaction_id, date, notification_uuid FROM reversal_request ORDER BY book, transaction_id")
            .map { ($0[0], $0[1], $0[2], $0[3]) }
    }

    /// Reads chunks by id for `text(_:raw:chunk:_:)`.
    func chunkReader() -> ChunkReader {
        ChunkReader { [db] id in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT text_bytes, data FROM source_chunk WHERE id = ?"), arguments: [id])
                .map { ($0[0], $0[1] ?? Data()) }
        }
    }

    /// A record's text from a row holding `raw` at column `raw` and the chunk id, offset and
    /// length from column `chunk` on; nil when its chunk is missing or damaged.
    static func text(_ row: Row, raw: Int, chunk: Int, _ reader: inout ChunkReader) throws -> String? {
        guard let id: Int64 = row[chunk] else { return text(row[raw]) }
        return try reader.text(chunkId: id, offset: row[chunk + 1], length: row[chunk + 2])
    }

    /// What stands for a text whose chunk cannot be read: it hashes to nothing stored, and
    /// `verify` names the chunk.
    static let unreadableText = "(its chunk cannot be read: it is damaged or was altered)"

    /// Whether a source record's kept text still hashes to the SHA-256 recorded when it was
    /// read (`verify` and `trace` ask the same). A whole-file rejection keeps the file's hash
    /// with no text (or the start of an unreadable CSV file) in its own row; a text in a chunk
    /// is always the record's own.
    public static func textHolds(_ text: String, recordSHA256: String, fileSHA256: String, inChunk: Bool, outcome: String, reasonCode: String?) -> Bool {
        if Hashing.sha256Hex(utf8: text) == recordSHA256 { return true }
        return !inChunk && outcome == "rejected" && recordSHA256 == fileSHA256
            && (text.isEmpty || !["EMPTY_FILE", "INVALID_UTF8", "FILE_TOO_LARGE"].contains(reasonCode ?? ""))
    }

    /// The column that orders an entry's postings: `line` of the view (schema v13 on), which
    /// SQLite reads in order, or `id` of a ledger that stores its postings (opened read-only
    /// by `verify`, `trace` or `report --period`, which do not upgrade it).
    func postingOrder() throws -> String {
        try postingsAreDerived() ? "p.line" : "p.id"
    }

    /// Whether `posting` is the view of the entries (schema v13 on), not a table of its own.
    func postingsAreDerived() throws -> Bool {
        try String.fetchOne(db, sql: "SELECT type FROM sqlite_schema WHERE name = 'posting'") != "table"
    }

    /// In a ledger that stores its postings (before schema v13), the first posting that is not
    /// the one its entry's amounts give (see `Schema.storedPostingsProblem`); nil when each is,
    /// or when the ledger derives them.
    public func storedPostingsProblem() throws -> String? {
        try postingsAreDerived() ? nil : Schema.storedPostingsProblem(db)
    }

    /// The posting rules the ledger's `posting` view applies (schema v13 on), with their
    /// accounts by name; nil for a ledger that stores its postings (before v13).
    public func postingRules() throws -> [PostingRule]? {
        guard try db.tableExists("posting_rule") else { return nil }
        return try Row.fetchAll(db, sql: """
            SELECT r.kind, r.line, ifnull(a.name, '(no account ' || r.account_id || ')'), r.net, r.commission, r.proceeds
            FROM posting_rule r LEFT JOIN account a ON a.id = r.account_id ORDER BY r.kind, r.line
            """).map {
            PostingRule(kind: EntryKind(rawValue: $0[0]) ?? .sale, line: $0[1], account: $0[2], net: $0[3], commission: $0[4], proceeds: $0[5])
        }
    }

    /// The ledger's schema objects (tables, indexes, triggers, views) by type and name, with their SQL.
    public func schemaObjects() throws -> [String: String] {
        var objects: [String: String] = [:]
        for r in try Row.fetchAll(db, sql: "SELECT type, name, ifnull(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite_stat%'") {
            objects["\(r[0] as String) \(r[1] as String)"] = r[2]
        }
        return objects
    }

    /// The source record that first brought a transaction, without its text: its id, the
    /// file's kind and path, the line (`recordText` reads the text when it is needed).
    public func firstSourceRecord(of transactionId: String) throws -> (recordId: Int64, kind: String, path: String, line: Int, runId: Int64)? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT r.id, f.kind, f.path, r.line, f.run_id FROM store_transaction t
            JOIN source_record r ON r.id = t.first_record_id JOIN source_file f ON f.id = r.file_id
            WHERE t.transaction_id = ?
            """), arguments: [transactionId]).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) }
    }

    /// A source record's text, as kept.
    public func recordText(_ recordId: Int64) throws -> String {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT CAST(r.raw AS BLOB), \(chunkColumns) FROM source_record r WHERE r.id = ?"), arguments: [recordId])
            .flatMap { try Self.text($0, raw: 0, chunk: 1, &chunkCache) } ?? Self.unreadableText
    }

    /// The chain head the latest finished run recorded, if it recorded one.
    public func latestRecordedChainHead() throws -> (runId: Int64, hash: String)? {
        try Row.fetchOne(db, sql: "SELECT id, chain_head FROM run WHERE finished_at IS NOT NULL ORDER BY id DESC LIMIT 1")
            .flatMap { r in (r[1] as String?).map { (r[0], $0) } }
    }

    /// The hash of the ledger's last entry (nil when it has none).
    public func lastEntryHash() throws -> String? {
        try String.fetchOne(db, sql: "SELECT hash FROM entry ORDER BY id DESC LIMIT 1")
    }

    /// Month totals that do not sum to zero per book and currency ("reporting" for the
    /// reporting-currency amounts).
    public func unbalancedMonthTotals() throws -> [(book: String, currency: String, sum: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT book, currency, sum(balance_minor) FROM balance_month GROUP BY book, currency HAVING sum(balance_minor) <> 0
            UNION ALL
            SELECT book, 'the reporting currency', sum(reporting_balance_minor) FROM balance_month GROUP BY book HAVING sum(reporting_balance_minor) <> 0
            """).map { ($0[0], $0[1], $0[2]) }
    }

    /// Where the month totals of sales and refunds (`activity_month`, which the revenue sheets
    /// read) do not give the month balances (`balance_month`, the trial balance's) by the
    /// posting rules: a row of either deleted, added or changed. The difference per book,
    /// month, account and currency (the balances' less what the activity gives), in the
    /// currency and in the reporting currency.
    public func activityBalanceDifferences() throws -> [(book: String, month: String, account: String, currency: String, difference: Int64, reporting: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT d.book, d.month, a.name, d.currency, sum(d.amount), sum(d.reporting) FROM (
                SELECT book, month, account_id, currency, balance_minor AS amount, reporting_balance_minor AS reporting FROM balance_month
                UNION ALL
                SELECT m.book, m.month, r.account_id, m.currency,
                       -sum(r.net * m.net_minor + r.commission * m.commission_minor + r.proceeds * m.proceeds_minor),
                       -sum(r.net * m.net_reporting_minor + r.commission * m.commission_reporting_minor + r.proceeds * m.proceeds_reporting_minor)
                FROM activity_month m JOIN posting_rule r ON r.kind = m.kind GROUP BY 1, 2, 3, 4
            ) d JOIN account a ON a.id = d.account_id
            GROUP BY 1, 2, 3, 4 HAVING sum(d.amount) <> 0 OR sum(d.reporting) <> 0 ORDER BY 1, 2, 3, 4
            """).map { ($0[0], $0[1], $0[2], $0[3], $0[4], $0[5]) }
    }

    /// Every stored source record of a transaction: the one that stored it and those linked
    /// after it, the latest read first (a refund usually comes with the latest).
    public func sources(of transactionId: String) throws -> [(kind: String, path: String, line: Int, raw: String, runId: Int64)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT f.kind, f.path, r.line, CAST(r.raw AS BLOB), \(chunkColumns), f.run_id FROM source_record r JOIN source_file f ON f.id = r.file_id
            WHERE r.id = (SELECT first_record_id FROM store_transaction WHERE transaction_id = ?1)
               OR r.id IN (SELECT record_id FROM transaction_source WHERE transaction_id = ?1)
            ORDER BY r.id DESC
            """), arguments: [transactionId]).map { ($0[0], $0[1], $0[2], try Self.text($0, raw: 3, chunk: 4, &chunkCache) ?? Self.unreadableText, $0[7]) }
    }

    /// Transactions whose sale status says otherwise than their entries: `posted` with no sale
    /// entry, or a sale entry with another status (the first `limit`).
    public func saleStatusMismatches(limit: Int = 50) throws -> [(transactionId: String, status: String, hasSale: Bool)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT transaction_id, sale_status, has_sale FROM (
                SELECT t.transaction_id, t.sale_status,
                       EXISTS (SELECT 1 FROM entry e WHERE e.book = t.book AND e.transaction_id = t.transaction_id AND e.kind = 'sale') AS has_sale
                FROM store_transaction t)
            WHERE (sale_status = 'posted') <> has_sale
            LIMIT ?
            """), arguments: [limit]).map { ($0[0], $0[1], $0[2]) }
    }

    /// Every stored transaction without a sale entry, with its sale status (`pending` or
    /// `free`; `posted` is a mismatch named by `saleStatusMismatches`), in the order of the
    /// records that brought them (their texts are read in chunk order).
    public func forEachTransactionWithoutSale(_ body: (_ transactionId: String, _ status: String) throws -> Void) throws {
        let cursor = try Row.fetchCursor(db, sql: """
            SELECT t.transaction_id, t.sale_status FROM store_transaction t
            WHERE NOT EXISTS (SELECT 1 FROM entry e WHERE e.book = t.book AND e.transaction_id = t.transaction_id AND e.kind = 'sale')
            ORDER BY t.first_record_id, t.transaction_id
            """)
        while let r = try cursor.next() { try body(r[0], r[1]) }
    }

    /// Refunds a night would have posted: a stored refund of a transaction whose sale is
    /// posted, with no refund entry. Every night posts them before it commits (a refund waits
    /// only while its sale does), so after a finished run there is none. The first `limit`.
    public func refundsWithoutEntry(limit: Int = 50) throws -> [(transactionId: String, cancellationMs: Int64)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT t.transaction_id, t.cancellation_ms FROM store_transaction t
            WHERE t.cancellation_ms IS NOT NULL AND t.sale_status = 'posted'
              AND NOT EXISTS (SELECT 1 FROM entry e WHERE e.book = t.book AND e.transaction_id = t.transaction_id AND e.kind = 'refund')
            ORDER BY t.cancellation_ms, t.transaction_id LIMIT ?
            """), arguments: [limit]).map { ($0[0], $0[1]) }
    }

    /// The reversals asked for (`reversal_request`) whose refund is posted and whose reversal
    /// is not (a night posts each before it commits: none, unless one was removed).
    public func reversalsWithoutEntry(limit: Int = 50) throws -> [(book: String, transactionId: String, date: String, uuid: String)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT q.book, q.transaction_id, q.date, q.notification_uuid FROM reversal_request q
            WHERE EXISTS (SELECT 1 FROM entry e WHERE e.book = q.book AND e.transaction_id = q.transaction_id AND e.kind = 'refund')
              AND NOT EXISTS (SELECT 1 FROM entry e WHERE e.book = q.book AND e.transaction_id = q.transaction_id AND e.kind = 'refund_reversal')
            ORDER BY q.date, q.transaction_id LIMIT ?
            """), arguments: [limit]).map { ($0[0], $0[1], $0[2], $0[3]) }
    }

    /// Every refund entry with its transaction's stored refund: `stored` false when the
    /// transaction is not stored (in the entry's book), `cancellationMs` nil when it stores no refund.
    public func refundEntriesAndStoredRefunds() throws
        -> [(entryId: Int64, transactionId: String, originalDate: String, percentage: Int64?, stored: Bool, cancellationMs: Int64?, storedPercentage: Int64?)] {
        try Row.fetchAll(db, sql: """
            SELECT e.id, e.transaction_id, e.original_date, e.refund_percentage, t.transaction_id IS NOT NULL, t.cancellation_ms, t.revocation_percentage
            FROM entry e LEFT JOIN store_transaction t ON t.transaction_id = e.transaction_id AND t.book = e.book
            WHERE e.kind = 'refund' ORDER BY e.id
            """).map { ($0[0], $0[1], $0[2], $0[3], $0[4], $0[5], $0[6]) }
    }

    /// Finished runs whose recorded `entries_posted` is not the number of entries written with
    /// their id (a night counts every entry it writes, sales, refunds and reversals).
    public func runEntryCountMismatches() throws -> [(runId: Int64, recorded: Int64, entries: Int64)] {
        var counts: [Int64: Int64] = [:]
        for r in try Row.fetchAll(db, sql: "SELECT run_id, count(*) FROM entry GROUP BY run_id") { counts[r[0]] = r[1] }
        return try Row.fetchAll(db, sql: "SELECT id, entries_posted FROM run WHERE finished_at IS NOT NULL ORDER BY id").compactMap { r in
            let id: Int64 = r[0], recorded: Int64 = r[1]
            return recorded == counts[id] ?? 0 ? nil : (id, recorded, counts[id] ?? 0)
        }
    }

    /// Source files whose stored records are not as many as the file recorded as new when it
    /// was read (`new_records`: each is stored as one record, a whole-file rejection as one).
    /// The first `limit`.
    public func sourceFileRecordCountMismatches(limit: Int = 50) throws -> [(path: String, runId: Int64, recorded: Int64, stored: Int64)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT path, run_id, new_records, stored FROM (
                SELECT f.id, f.path, f.run_id, f.new_records, (SELECT count(*) FROM source_record r WHERE r.file_id = f.id) AS stored
                FROM source_file f)
            WHERE new_records <> stored ORDER BY id LIMIT ?
            """), arguments: [limit]).map { ($0[0], $0[1], $0[2], $0[3]) }
    }

    /// Finished runs whose recorded `records_read` is not the number of records stored from
    /// the files they read.
    public func runRecordCountMismatches() throws -> [(runId: Int64, recorded: Int64, stored: Int64)] {
        try Row.fetchAll(db, sql: """
            SELECT id, records_read, stored FROM (
                SELECT run.id, run.records_read,
                       (SELECT count(*) FROM source_file f JOIN source_record r ON r.file_id = f.id WHERE f.run_id = run.id) AS stored
                FROM run WHERE run.finished_at IS NOT NULL)
            WHERE records_read <> stored ORDER BY id
            """).map { ($0[0], $0[1], $0[2]) }
    }

    /// The refunds (cancellation or revocation) stored with transactions.
    public func storedRefunds() throws -> [(transactionId: String, cancellationMs: Int64, percentage: Int64?)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT transaction_id, cancellation_ms, revocation_percentage FROM store_transaction
            WHERE cancellation_ms IS NOT NULL ORDER BY transaction_id
            """)).map { ($0[0], $0[1], $0[2]) }
    }

    /// The store's last word on a refund kept beside a transaction (`store_refund_share`: a
    /// second refund or reversal): its share and instant (nil in ledgers from before v31, which
    /// took it from a finding), whether a finding that says such a word names the transaction,
    /// and the days of its stored REFUND_REVERSED notifications (their signed dates).
    public func storeRefundWords() throws -> [(transactionId: String, share: Int64, atMs: Int64?, said: Bool, reversalDays: [Day])] {
        guard try db.columns(in: "store_transaction").contains(where: { $0.name == "store_refund_share" }) else { return [] }
        return try Row.fetchAll(db.cachedStatement(sql: """
            SELECT t.transaction_id, t.store_refund_share, t.store_refund_ms,
                   EXISTS (SELECT 1 FROM finding f WHERE f.transaction_id = t.transaction_id
                           AND f.code IN ('REFUND_AFTER_REVERSAL', 'REFUND_AGAIN', 'REVERSAL_REPEATED')),
                   (SELECT group_concat(n.signed_ms) FROM notification n
                    WHERE n.transaction_id = t.transaction_id AND n.notification_type = 'REFUND_REVERSED' AND n.signed_ms IS NOT NULL)
            FROM store_transaction t WHERE t.store_refund_share IS NOT NULL ORDER BY t.transaction_id
            """)).map { row in
            let days = ((row[4] as String?) ?? "").split(separator: ",").compactMap { Int64($0) }.map { Day(epochMilliseconds: $0) }
            return (row[0], row[1], row[2], row[3], days)
        }
    }

    /// The REFUND_REVERSED notifications stored for a transaction, with their record's text.
    public func reversalNotifications(of transactionId: String) throws -> [(uuid: String, path: String, line: Int, raw: String, runId: Int64)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT n.uuid, f.path, r.line, CAST(r.raw AS BLOB), \(chunkColumns), f.run_id FROM notification n
            JOIN source_record r ON r.id = n.record_id JOIN source_file f ON f.id = r.file_id
            WHERE n.transaction_id = ? AND n.notification_type = 'REFUND_REVERSED' ORDER BY r.id
            """), arguments: [transactionId]).map { ($0[0], $0[1], $0[2], try Self.text($0, raw: 3, chunk: 4, &chunkCache) ?? Self.unreadableText, $0[7]) }
    }

    /// A record's raw text read as its bytes: SQLite keeps a text's NUL characters, but reading
    /// it back as a C string would stop at the first one.
    static func text(_ bytes: Data?) -> String {
        bytes.map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}

/// A cursor over rows read one at a time (`next()` nil at the end).
public struct RecordCursor<Element> {
    let step: () throws -> Element?
    public func next() throws -> Element? { try step() }
}
