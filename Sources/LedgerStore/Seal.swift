import GRDB
import GRDBSQLite
import LedgerCore

/// The ledger's seal: what the entries' hash chain does not cover, sealed as it is written.
///
/// Each finished run and each close (by `close` or by the config) is a seal row, in the order
/// written: a digest of what it wrote and the seal, `SHA-256("<seal before>\n<digest>")`, the
/// seal before being 64 zeros for the first. A run's digest is the SHA-256 of a text of lines
/// (fields separated by tabs; a backslash, tab, carriage return or line feed inside a field
/// written `\\`, `\t`, `\r`, `\n`, and NULL written `\N`):
///
///     iapledger seal 1
///     run  <id> <as of> <records read> <verified> <pending> <rejected> <skipped> <entries posted> <chain head> <closed through> <schema migration> <reconciliation>
///     input  <path> <sha256>                  the config and rules files it posted by, by path
///     file  <id> <path> <kind> <sha256> <size> <records> <new records>    the files it read, by id
///     header  <file id> <header row>           after an orders file's line: its header row as read
///     record  <id> <file id> <line> <sha256> <outcome> <reason code> <reason> <status code> <environment> <account id> <order id> <received at>
///     resolved  <id> <resolved by run> <note>  the records it resolved, by id
///     dismissal  <id> <record id> <asked at> <asked by> <reason>  the dismissals those applied, by id
///
/// (the records of the files it read, by id; the first run sealed covers the files and
/// records of the runs before it too, and the records they resolved). A close's digest is that of
///
///     iapledger seal 1
///     close  <month> <closed by> <source>
///
/// (not when: a close the config makes is dated by the clock of the night that makes it, and
/// a night run again after a crash gives the same ledger).
///
/// Seals of the second form (schema v32 on; the seal row keeps `last_finding_dismissal_id`)
/// begin `iapledger seal 2`, and a run's line ends with three more fields, its tool version,
/// the order/transaction pairs its reconciliation matched and the rules it reconciled by:
///
///     run  <id> ... <reconciliation> <tool version> <orders matched> <reconciliation rules>
///
/// and after its dismissals come the finding dismissals asked since the seal before (by id,
/// up to the one the seal keeps), as asked:
///
///     fdismissal  <id> <finding id> <message> <asked at> <asked by> <reason>
///
/// A run's clock times are not sealed: a night's workbooks show its seal, and the same data
/// gives the same workbooks, whenever it runs; `verify` checks their order instead.
///
/// So a record's outcome, reason or resolution, its text with its hash, a file's name, a run's
/// counts or a close, changed or deleted by hand, no longer give the seal, and `verify` says
/// which seal; the latest seal, kept outside the ledger, covers the whole ledger.
public enum LedgerSeal {
    public static let genesis = String(repeating: "0", count: 64)

    /// The seal after `previous`, for an event whose digest is `digest`.
    public static func chain(previous: String, digest: String) -> String {
        Hashing.sha256Hex(utf8: previous + "\n" + digest)
    }

    /// The text of a digest, hashed as it is written.
    struct Text {
        private var hasher = StreamingSHA256()
        private var line: [UInt8] = []

        init(form: Int = 1) {
            line.reserveCapacity(512)
            line.append(contentsOf: Array("iapledger seal \(form)\n".utf8))
        }

        /// A tab before every field but a line's first.
        private mutating func separate() {
            if line.last != 0x0A && !line.isEmpty { line.append(0x09) }
        }

        mutating func field(_ text: String?) {
            separate()
            guard var text else { null(); return }
            text.withUTF8 { append(escaping: UnsafeRawBufferPointer($0)) }
        }

        mutating func field(_ value: Int64?) {
            separate()
            guard let value else { null(); return }
            // Decimal digits straight into the line (a million records a night, three each).
            if value < 0 { line.append(0x2D) }
            var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                         UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            var n = value.magnitude, count = 0
            withUnsafeMutableBytes(of: &digits) { d in
                repeat { d[19 - count] = 0x30 + UInt8(n % 10); n /= 10; count += 1 } while n > 0
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: d[(20 - count)...]))
            }
        }

        /// NULL, told apart from an empty text (`\N`: a backslash in a text is written `\\`).
        private mutating func null() { line.append(0x5C); line.append(0x4E) }

        mutating func nullField() {
            separate()
            null()
        }

        mutating func field(bytes: UnsafeRawBufferPointer) {
            separate()
            append(escaping: bytes)
        }

        private mutating func append(escaping bytes: UnsafeRawBufferPointer) {
            // Runs of plain bytes are copied whole; only \\ tab CR LF are escaped.
            var start = 0
            for i in 0..<bytes.count {
                let b = bytes[i]
                guard b == 0x5C || b == 0x09 || b == 0x0D || b == 0x0A else { continue }
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                line.append(0x5C)
                line.append(b == 0x5C ? 0x5C : b == 0x09 ? 0x74 : b == 0x0D ? 0x72 : 0x6E)
                start = i + 1
            }
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
        }

        /// Ends a line (and hands the text so far to the hash).
        mutating func endLine() {
            line.append(0x0A)
            if line.count >= 64 * 1024 { flush() }
        }

        private mutating func flush() {
            line.withUnsafeBytes { hasher.update(bytes: $0) }
            line.removeAll(keepingCapacity: true)
        }

        mutating func digest() -> String {
            flush()
            return hasher.finalizeHex()
        }
    }

    /// The digest of run `runId`'s seal, from the ledger as it stands: the run itself, its
    /// config and rules, and the files, records and resolutions of the runs after
    /// `previousRunId` (the run sealed before it; 0 for the first) up to it, whose records are
    /// those after `previousLastRecordId` up to `lastRecordId`.
    /// `findingDismissals`: for a seal of the second form, the finding dismissals it covers (ids
    /// after the first, up to the second); nil for the first form.
    static func runDigest(_ db: Database, runId: Int64, previousRunId: Int64, previousLastRecordId: Int64,
                          lastRecordId: Int64, findingDismissals: (after: Int64, through: Int64)? = nil) throws -> String? {
        let second = findingDismissals != nil
        guard let run = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT id, as_of, records_read, records_verified, records_pending, records_rejected, records_skipped,
                   entries_posted, chain_head, closed_through, schema_migration, reconciliation\(second ? ", tool_version, orders_matched, reconciliation_rules" : "")
            FROM run WHERE id = ?
            """), arguments: [runId]) else { return nil }
        var text = Text(form: second ? 2 : 1)
        text.field("run"); text.field(run[0] as Int64); text.field(run[1] as String)
        for i in 2...7 { text.field(run[i] as Int64) }
        for i in 8...11 { text.field(run[i] as String?) }
        if second { text.field(run[12] as String); text.field(run[13] as Int64); text.field(run[14] as String?) }
        text.endLine()
        for r in try Row.fetchAll(db.cachedStatement(sql: "SELECT path, sha256 FROM run_input WHERE run_id = ? ORDER BY path"),
                                  arguments: [runId]) {
            text.field("input"); text.field(r[0] as String); text.field(r[1] as String); text.endLine()
        }
        // An orders file's header (schema v25 on) is sealed with its file: a `header` line after
        // the file's (none for a file read before v25, so earlier seals are as they were).
        let header = try db.tableExists("source_file_header")
            ? "(SELECT header FROM source_file_header h WHERE h.file_id = source_file.id)" : "NULL"
        for r in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT id, path, kind, sha256, size_bytes, records, new_records, \(header) FROM source_file
            WHERE run_id > ? AND run_id <= ? ORDER BY id
            """), arguments: [previousRunId, runId]) {
            text.field("file"); text.field(r[0] as Int64); text.field(r[1] as String); text.field(r[2] as String)
            text.field(r[3] as String); text.field(r[4] as Int64); text.field(r[5] as Int64); text.field(r[6] as Int64)
            text.endLine()
            if let h = r[7] as String? {
                text.field("header"); text.field(r[0] as Int64); text.field(h); text.endLine()
            }
        }
        var records = FastStatement(try db.cachedStatement(sql: """
            SELECT id, file_id, line, record_sha256, outcome, reason_code, reason, status_code, environment, account_id,
                   order_id, received_at FROM source_record
            WHERE id > ? AND id <= ? ORDER BY id
            """), in: db)
        records.bind(previousLastRecordId); records.bind(lastRecordId)
        try records.forEachRow { r in
            text.field("record"); text.field(r.int64(0)); text.field(r.int64(1)); text.field(r.int64(2))
            for i: Int32 in 3...11 {
                if r.isNull(i) { text.nullField() }
                else if i == 7 { text.field(r.int64(i)) }
                else { text.field(bytes: r.bytes(i)) }
            }
            text.endLine()
        }
        for r in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT id, resolved_run_id, resolved_note FROM source_record
            WHERE resolved_run_id > ? AND resolved_run_id <= ? ORDER BY id
            """), arguments: [previousRunId, runId]) {
            text.field("resolved"); text.field(r[0] as Int64); text.field(r[1] as Int64); text.field(r[2] as String?)
            text.endLine()
        }
        // The dismissals those resolutions applied (schema v29 on), as asked.
        if try db.tableExists("record_dismissal") {
            for r in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT d.id, d.record_id, d.asked_at, d.asked_by, d.reason FROM record_dismissal d
                JOIN source_record r ON r.id = d.record_id
                WHERE r.resolved_run_id > ? AND r.resolved_run_id <= ? ORDER BY d.id
                """), arguments: [previousRunId, runId]) {
                text.field("dismissal"); text.field(r[0] as Int64); text.field(r[1] as Int64)
                text.field(r[2] as String); text.field(r[3] as String); text.field(r[4] as String)
                text.endLine()
            }
        }
        if let range = findingDismissals {
            for r in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT id, finding_id, message, asked_at, asked_by, reason FROM finding_dismissal WHERE id > ? AND id <= ? ORDER BY id
                """), arguments: [range.after, range.through]) {
                text.field("fdismissal"); text.field(r[0] as Int64); text.field(r[1] as Int64)
                for i in 2...5 { text.field(r[i] as String) }
                text.endLine()
            }
        }
        return text.digest()
    }

    /// The digest of the close of `month`'s seal; nil when no such close is recorded.
    static func closeDigest(_ db: Database, month: String) throws -> String? {
        guard let r = try Row.fetchOne(db.cachedStatement(sql: "SELECT month, closed_by, source FROM period_close WHERE month = ?"),
                                       arguments: [month]) else { return nil }
        var text = Text()
        text.field("close"); text.field(r[0] as String); text.field(r[1] as String); text.field(r[2] as String)
        text.endLine()
        return text.digest()
    }

    /// Records marked resolved by a run that never finished, or by one after the last seal (a
    /// night resolves records only while it runs, and seals them as it commits): set by hand.
    static func resolutionsUnsealed(_ db: Database, lastSealedRun: Int64, unsealedRuns: Set<Int64> = []) throws -> [String] {
        let rows = try Row.fetchAll(db, sql: """
            SELECT r.id, r.resolved_run_id FROM source_record r
            WHERE r.resolved_run_id IS NOT NULL
              AND (r.resolved_run_id > ? OR NOT EXISTS (SELECT 1 FROM run WHERE run.id = r.resolved_run_id AND run.finished_at IS NOT NULL))
            ORDER BY r.id LIMIT 11
            """, arguments: [lastSealedRun])
        guard let first = rows.first else { return [] }
        let ids = rows.prefix(10).map { "#\($0[0] as Int64)" }.joined(separator: ", ") + (rows.count > 10 ? ", ..." : "")
        let run: Int64 = first[1]
        if unsealedRuns.contains(run) {
            return ["source record\(rows.count == 1 ? "" : "s") \(ids) \(rows.count == 1 ? "is" : "are") marked resolved by run \(run), whose seal is missing (above)"]
        }
        return ["source record\(rows.count == 1 ? "" : "s") \(ids) \(rows.count == 1 ? "is" : "are") marked resolved by run \(run), which \(run > lastSealedRun ? "sealed nothing (none after run \(lastSealedRun) did)" : "is not a finished run"): set by hand (a night resolves records while it runs and seals them as it commits)"]
    }

    /// Finished runs after the first sealed one that have no seal (deleted).
    static func unsealedRuns(_ db: Database) throws -> [Int64] {
        guard let first = try Int64.fetchOne(db, sql: "SELECT run_id FROM seal WHERE run_id IS NOT NULL ORDER BY id LIMIT 1") else { return [] }
        return try Int64.fetchAll(db, sql: """
            SELECT id FROM run WHERE finished_at IS NOT NULL AND id > ? AND id NOT IN (SELECT run_id FROM seal WHERE run_id IS NOT NULL) ORDER BY id
            """, arguments: [first])
    }

    static func describeUnsealed(_ runs: [Int64]) -> [String] {
        runs.isEmpty ? [] : ["run\(runs.count == 1 ? "" : "s") \(runs.map(String.init).joined(separator: ", ")) finished with no seal (every run seals what it wrote as it commits): the seal was deleted"]
    }

    /// Closes a seal names that the ledger no longer holds (deleted, reopening their month).
    static func sealedClosesGone(_ db: Database) throws -> [String] {
        try String.fetchAll(db, sql: """
            SELECT close_month FROM seal WHERE close_month IS NOT NULL AND close_month NOT IN (SELECT month FROM period_close) ORDER BY id
            """)
    }

    /// Resolved records with nothing that resolves them in the run named: a pending record is
    /// resolved once every transaction it names is stored; a rejected order line by a later
    /// valid line of its order that the run read; a rejected whole file (empty, not UTF-8, too
    /// large, a bad header) by a later version of the same file that the run read; a line cut
    /// short (TRUNCATED) by another version of the file (which held it whole: which lines a
    /// version held is not kept, only its records; the resolution is sealed); any record by a
    /// dismissal asked for it (`iapledger dismiss`, schema v29), whose note it carries; a record
    /// read by that run that repeats an earlier one as the night settles repeats
    /// (`LedgerWriter.resolveRepeatedRecord`), with the note it writes. Any other
    /// resolution (a rejected receipt, say) was written by hand, even through a run made up.
    static func implausibleResolutions(_ db: Database) throws -> [String] {
        // A record's twin read before it, as `LedgerWriter.resolveRepeatedRecord` finds it.
        let twin = LedgerWriter.repeatTwin(sha256: "r.record_sha256", outcome: "r.outcome", reasonCode: "r.reason_code", reason: "r.reason")
        // Through the index of twins (schema v36 on): the planner took the index of open records
        // by outcome, reading every open record before each (a night of 230,000 did not end).
        let twins = try db.indexes(on: "source_record").contains { $0.name == "source_record_unverified_sha256" }
            ? "source_record e INDEXED BY source_record_unverified_sha256" : "source_record e"
        // A dismissal asked before the night that applied it (to the second: both are kept so).
        let dismissed = try db.tableExists("record_dismissal") ? """
            OR EXISTS (SELECT 1 FROM record_dismissal d JOIN run ON run.id = r.resolved_run_id
                       WHERE d.record_id = r.id AND r.resolved_note = \(DismissalNote.sql)
                         AND substr(d.asked_at, 1, 19) <= substr(run.started_at, 1, 19))
            """ : ""
        // The note of the dismissal asked for a record, when one was: a resolution whose note
        // is not it says which changed.
        let askedNote = try db.tableExists("record_dismissal")
            ? "(SELECT \(DismissalNote.sql) FROM record_dismissal d WHERE d.record_id = r.id)" : "NULL"
        let rows = try Row.fetchAll(db, sql: """
            SELECT r.id, r.resolved_run_id, f.path, r.line, r.outcome, r.reason_code, r.resolved_note, \(askedNote) FROM source_record r
            JOIN source_file f ON f.id = r.file_id
            WHERE r.resolved_run_id IS NOT NULL AND NOT (
                (r.outcome = 'pending'
                 AND EXISTS (SELECT 1 FROM unverified_record_transaction u WHERE u.record_id = r.id)
                 AND NOT EXISTS (SELECT 1 FROM unverified_record_transaction u WHERE u.record_id = r.id
                                 AND NOT EXISTS (SELECT 1 FROM store_transaction t WHERE t.transaction_id = u.transaction_id)))
                OR (r.outcome = 'rejected' AND f.kind = 'orders' AND r.order_id IS NOT NULL
                    AND EXISTS (SELECT 1 FROM order_version v JOIN source_record r2 ON r2.id = v.record_id
                                JOIN source_file f2 ON f2.id = r2.file_id
                                WHERE v.order_id = r.order_id AND f2.run_id = r.resolved_run_id AND r2.id > r.id))
                OR (r.outcome = 'rejected' AND (r.reason_code = 'EMPTY_FILE' OR r.reason_code = 'INVALID_UTF8'
                                                OR r.reason_code = 'FILE_TOO_LARGE' OR r.reason_code = 'BAD_CSV')
                    AND EXISTS (SELECT 1 FROM source_file f2 WHERE f2.path = f.path AND f2.run_id = r.resolved_run_id AND f2.id > f.id))
                OR (r.outcome = 'rejected' AND r.reason_code = 'TRUNCATED'
                    AND EXISTS (SELECT 1 FROM source_file f2 WHERE f2.path = f.path AND f2.sha256 <> f.sha256))
                OR (substr(r.resolved_note, 1, \(LedgerWriter.repeatNotePrefix.utf8.count)) = '\(LedgerWriter.repeatNotePrefix)'
                    AND f.run_id = r.resolved_run_id
                    -- Not a cut line, nor a whole file's rejection (every empty file has the same bytes).
                    AND r.reason_code IS NOT 'TRUNCATED' AND r.reason_code NOT IN ('EMPTY_FILE', 'FILE_TOO_LARGE')
                    AND substr(r.reason, 1, 9) <> 'the file ' AND NOT (f.kind = 'orders' AND r.record_sha256 = f.sha256)
                    AND CASE WHEN \(LedgerWriter.identifiesRecord("r", file: "f"))
                        THEN EXISTS (SELECT 1 FROM \(twins) WHERE \(twin) AND e.id < r.id)
                        -- A bare response: only at its line of a byte copy of its file.
                        ELSE EXISTS (SELECT 1 FROM \(twins) JOIN source_file ef ON ef.id = e.file_id
                                     WHERE \(twin) AND e.line = r.line AND ef.sha256 = f.sha256 AND e.id < r.id) END)
                \(dismissed)
            )
            ORDER BY r.id LIMIT 11
            """)
        return rows.prefix(10).map { r in
            let record = "source record #\(r[0] as Int64) (\(r[2] as String):\(r[3] as Int64), \(r[4] as String)\((r[5] as String?).map { " " + $0 } ?? ""))"
            if let asked = r[7] as String?, let note = r[6] as String?, note != asked {
                return "\(record) is marked resolved by run \(r[1] as Int64) with the note \"\(note)\", but the dismissal asked for it reads \"\(asked)\" (a night writes the note of the dismissal it applies): the note, or the dismissal, was changed by hand"
            }
            return "\(record) is marked resolved by run \(r[1] as Int64), but nothing that run read resolves it (a verified record of each transaction it names, a later valid line of its order, a later whole version of its file, another version of the file, for a cut line, an earlier record it repeats, read before it, a dismissal asked with `iapledger dismiss`): resolved by hand"
        } + (rows.count > 10 ? ["... and more source records resolved by hand"] : [])
    }

    /// Sales still waiting for a rule whose MISSING_RULE findings are all resolved: the night
    /// resolves that finding only when the sale posts (or waits for something else), so the
    /// finding was resolved by hand (past its guard: a run made up and removed), taking the
    /// waiting sale off `findings` and Run Info. Read along the index of waiting sales (few).
    static func waitingSalesWithFindingResolved(_ db: Database) throws -> [String] {
        let ids = try String.fetchAll(db, sql: """
            SELECT t.transaction_id FROM store_transaction t
            WHERE t.sale_status = 'pending' AND t.pending_reason LIKE 'MISSING_RULE:%'
              AND EXISTS (SELECT 1 FROM finding f WHERE f.code = 'MISSING_RULE' AND f.transaction_id = t.transaction_id)
              AND NOT EXISTS (SELECT 1 FROM finding f WHERE f.code = 'MISSING_RULE' AND f.transaction_id = t.transaction_id
                              AND f.resolved_run_id IS NULL)
            ORDER BY t.transaction_id LIMIT 11
            """)
        return ids.prefix(10).map {
            "transaction \($0) still waits for a rule (MISSING_RULE), but its MISSING_RULE finding is marked resolved: resolved by hand (the nights resolve it only when the sale posts)"
        } + (ids.count > 10 ? ["... and more waiting sales whose MISSING_RULE finding is marked resolved"] : [])
    }

    /// Findings marked dismissed (a resolution note) with no dismissal asked for them as they
    /// read, before the night that resolved them, that gives that note and is under that
    /// night's seal: made up, or the note changed, by hand (the night writes the note of the
    /// dismissal it applies, kept as asked, and seals the dismissals asked before it; a
    /// dismissal made up afterwards, dated back, is under no seal of that night). A night sealed
    /// in the first form (before v32) takes the dismissals the first seal of the second form
    /// covers (every one asked before it); before any such seal, none is required.
    static func findingDismissalsUnasked(_ db: Database) throws -> [String] {
        guard try db.tableExists("finding_dismissal") else { return [] }
        let sealed = try secondForm(db) ? """
            AND d.id <= coalesce((SELECT last_finding_dismissal_id FROM seal WHERE run_id = f.resolved_run_id),
                                 (SELECT last_finding_dismissal_id FROM seal WHERE last_finding_dismissal_id IS NOT NULL ORDER BY id LIMIT 1),
                                 9223372036854775807)
            """ : ""
        let rows = try Row.fetchAll(db, sql: """
            SELECT f.id, f.code, f.transaction_id, f.resolved_note FROM finding f
            WHERE f.resolved_note IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM finding_dismissal d JOIN run ON run.id = f.resolved_run_id
                WHERE d.finding_id = f.id AND d.message = f.message AND \(DismissalNote.sql) = f.resolved_note
                  AND substr(d.asked_at, 1, 19) <= substr(run.started_at, 1, 19) \(sealed))
            ORDER BY f.id LIMIT 11
            """)
        // Seals cover finding dismissals from id 1 on: one below it is under none.
        let stray = try Int64.fetchOne(db, sql: "SELECT min(id) FROM finding_dismissal WHERE id < 1").map {
            ["finding dismissal #\($0) has an id below 1, under no seal: added by hand"]
        } ?? []
        return stray + rows.prefix(10).map {
            "finding #\($0[0] as Int64) (\($0[1] as String) \($0[2] as String)) reads \"\($0[3] as String)\", but no dismissal asked for it as it reads, before the night that resolved it and sealed by that night, says so: written by hand (`iapledger dismiss --finding` asks, as kept, and the next night applies and seals it)"
        } + (rows.count > 10 ? ["... and more findings marked dismissed by hand"] : [])
    }

    /// A seal row as stored.
    public struct Stored {
        public var id: Int64
        public var runId: Int64?
        public var closeMonth: String?
        public var lastRecordId: Int64?
        public var digest: String
        public var seal: String
        /// A run's seal of the second form: the last finding dismissal it covers (0 for none yet).
        public var lastFindingDismissalId: Int64?
    }

    /// Whether seals of the second form can be kept (schema v32 on).
    static func secondForm(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT count(*) FROM pragma_table_info('seal') WHERE name = 'last_finding_dismissal_id'") ?? false
    }

    static func stored(_ db: Database, sql: String, arguments: StatementArguments = []) throws -> [Stored] {
        let second = try secondForm(db) ? "last_finding_dismissal_id" : "NULL"
        return try Row.fetchAll(db, sql: "SELECT id, run_id, close_month, last_record_id, digest, seal, \(second) FROM seal " + sql, arguments: arguments).map {
            Stored(id: $0[0], runId: $0[1], closeMonth: $0[2], lastRecordId: $0[3], digest: $0[4], seal: $0[5], lastFindingDismissalId: $0[6])
        }
    }

    /// Whether the ledger has seals (schema v22 and after).
    static func available(_ db: Database) throws -> Bool {
        try db.tableExists("seal")
    }
}

extension LedgerWriter {
    /// Records what the run posts by: its config and rules files (path and SHA-256 as read) and
    /// the roots it verifies signed data to (their certificates' SHA-256).
    public func recordInputs(runId: Int64, _ inputs: [(path: String, sha256: String)]) throws {
        for i in inputs {
            try db.cachedStatement(sql: "INSERT INTO run_input (run_id, path, sha256) VALUES (?, ?, ?)").execute(arguments: [runId, i.path, i.sha256])
        }
    }

    /// The seal the ledger holds last (64 zeros for none).
    func latestSeal() throws -> String {
        try String.fetchOne(db.cachedStatement(sql: "SELECT seal FROM seal ORDER BY id DESC LIMIT 1")) ?? LedgerSeal.genesis
    }

    /// Seals the finished run `runId` (called as it finishes, in its transaction). Returns the seal.
    @discardableResult
    func sealRun(_ runId: Int64) throws -> String {
        let previous = try Row.fetchOne(db.cachedStatement(sql: "SELECT run_id, last_record_id FROM seal WHERE run_id IS NOT NULL ORDER BY id DESC LIMIT 1"))
        let previousRunId: Int64 = previous?[0] ?? 0, previousLast: Int64 = previous?[1] ?? 0
        let last = try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM source_record")) ?? 0
        // The finding dismissals asked since the last seal of the second form (all, at the first).
        let dismissals = (after: try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(last_finding_dismissal_id) FROM seal")) ?? 0,
                          through: try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM finding_dismissal")) ?? 0)
        guard let digest = try LedgerSeal.runDigest(db, runId: runId, previousRunId: previousRunId, previousLastRecordId: previousLast,
                                                    lastRecordId: last, findingDismissals: (dismissals.after, max(dismissals.after, dismissals.through))) else {
            fatalError("run \(runId) is sealed in its own transaction")
        }
        let seal = LedgerSeal.chain(previous: try latestSeal(), digest: digest)
        try db.cachedStatement(sql: "INSERT INTO seal (run_id, last_record_id, digest, seal, last_finding_dismissal_id) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [runId, last, digest, seal, max(dismissals.after, dismissals.through)])
        return seal
    }

    /// Seals the close of `month`, just recorded. Returns the seal.
    @discardableResult
    func sealClose(month: String) throws -> String {
        guard let digest = try LedgerSeal.closeDigest(db, month: month) else { fatalError("the close of \(month) is sealed as it is recorded") }
        let seal = LedgerSeal.chain(previous: try latestSeal(), digest: digest)
        try db.cachedStatement(sql: "INSERT INTO seal (close_month, digest, seal) VALUES (?, ?, ?)").execute(arguments: [month, digest, seal])
        return seal
    }
}

extension LedgerReader {
    /// The last run sealed, nil before any.
    func latestSealedRun() throws -> Int64? {
        guard try LedgerSeal.available(db) else { return nil }
        return try Int64.fetchOne(db, sql: "SELECT max(run_id) FROM seal")
    }

    /// The ledger's latest seal, nil when it has none (a ledger no run has sealed yet).
    public func latestSeal() throws -> LedgerSeal.Stored? {
        guard try LedgerSeal.available(db) else { return nil }
        return try LedgerSeal.stored(db, sql: "ORDER BY id DESC LIMIT 1").first
    }

    /// Each seal, checked again from the ledger as it stands: every problem found, and the
    /// seals as stored, in order.
    public func checkSeals() throws -> (problems: [String], seals: [LedgerSeal.Stored]) {
        guard try LedgerSeal.available(db) else { return ([], []) }
        let seals = try LedgerSeal.stored(db, sql: "ORDER BY id")
        var problems: [String] = []
        var previous = LedgerSeal.genesis, previousRunId: Int64 = 0, previousLast: Int64 = 0, previousId: Int64 = 0
        var previousFindingDismissal: Int64 = 0
        var firstSealedRun: Int64? = nil
        for s in seals {
            let afterGap = s.id != previousId + 1
            if afterGap {
                problems.append("seal\(s.id - 1 == previousId + 1 ? " #\(previousId + 1) is" : "s #\(previousId + 1) to #\(s.id - 1) are") missing (seal ids run on without a gap, and none is ever deleted)")
            }
            previousId = s.id
            let what: String, digest: String?
            if let runId = s.runId, let last = s.lastRecordId {
                what = "run \(runId)'s seal (#\(s.id))"
                firstSealedRun = firstSealedRun ?? runId
                if last < previousLast {
                    problems.append("\(what) ends at record #\(last), before the seal before it (#\(previousLast))")
                }
                if let through = s.lastFindingDismissalId, through < previousFindingDismissal {
                    problems.append("\(what) ends at finding dismissal #\(through), before the seal before it (#\(previousFindingDismissal))")
                }
                digest = try LedgerSeal.runDigest(db, runId: runId, previousRunId: previousRunId, previousLastRecordId: previousLast,
                                                  lastRecordId: last, findingDismissals: s.lastFindingDismissalId.map { (previousFindingDismissal, $0) })
                if digest == nil { problems.append("\(what) seals run \(runId), which the ledger no longer holds") }
                else if afterGap {
                    // What it sealed began where the missing seal ended: not known here.
                    problems.append("\(what) was not compared with what it sealed: the seal before it is missing (above), and with it where this one's records begin")
                } else if digest != s.digest {
                    problems.append("\(what) does not match what it sealed: the run's counts or chain head\(s.lastFindingDismissalId != nil ? ", tool version or reconciliation figures" : ""), the config and rules it posted by, or the files, records (their text's hash, outcome, reason) and resolutions of records up to #\(last)\(s.lastFindingDismissalId.map { $0 > previousFindingDismissal ? " or the finding dismissals up to #\($0)" : "" } ?? "") were changed since it was written")
                }
                // A record the seal covers must belong to a file of the runs it seals.
                if let stray = try Row.fetchOne(db, sql: """
                    SELECT r.id, f.run_id FROM source_record r LEFT JOIN source_file f ON f.id = r.file_id
                    WHERE r.id > ? AND r.id <= ? AND (f.run_id IS NULL OR f.run_id <= ? OR f.run_id > ?) LIMIT 1
                    """, arguments: [previousLast, last, previousRunId, runId]) {
                    problems.append("record #\(stray[0] as Int64), under \(what), belongs to \((stray[1] as Int64?).map { "run \($0)" } ?? "no file the ledger holds"), not to the runs it seals")
                }
                previousRunId = runId; previousLast = last
                if let through = s.lastFindingDismissalId { previousFindingDismissal = max(previousFindingDismissal, through) }
            } else if let month = s.closeMonth {
                what = "the seal of the close of \(month) (#\(s.id))"
                digest = try LedgerSeal.closeDigest(db, month: month)
                if digest == nil { problems.append("\(what) seals a close the ledger no longer holds: it was deleted") }
                else if digest != s.digest { problems.append("\(what) does not match the close as recorded now (who closed, how): changed since") }
            } else {
                what = "seal #\(s.id)"; digest = nil
                problems.append("seal #\(s.id) seals neither a run nor a close")
            }
            if LedgerSeal.chain(previous: previous, digest: s.digest) != s.seal {
                problems.append("\(what) does not follow from the seal before it and its digest: the seals were rewritten")
            }
            previous = s.seal
        }
        // What came after the first seal is sealed: every finished run, every close, every record.
        if firstSealedRun != nil {
            // Every file read belongs to a finished run the seals cover (a file row made up, of no
            // run or of a run that never finished, would have the next night skip the file it
            // names as read), and every record has an id from 1 on.
            for r in try Row.fetchAll(db, sql: """
                SELECT f.id, f.path, f.run_id FROM source_file f
                WHERE f.run_id > ? OR NOT EXISTS (SELECT 1 FROM run WHERE run.id = f.run_id AND run.finished_at IS NOT NULL)
                ORDER BY f.id LIMIT 10
                """, arguments: [previousRunId]) {
                problems.append("source file #\(r[0] as Int64) (\(r[1] as String)) belongs to run \(r[2] as Int64), which is not a finished run under a seal: added by hand (a night would take the file it names as read, and skip it)")
            }
            if let stray = try Int64.fetchOne(db, sql: "SELECT min(id) FROM source_record WHERE id < 1") {
                problems.append("source record #\(stray) has an id below 1, under no seal: added by hand")
            }
            let unsealed = try LedgerSeal.unsealedRuns(db)
            problems += LedgerSeal.describeUnsealed(unsealed)
            let lastRecord = try Int64.fetchOne(db, sql: "SELECT max(id) FROM source_record") ?? 0
            if lastRecord > previousLast {
                problems.append("records #\(previousLast + 1) to #\(lastRecord) are under no seal: "
                    + (unsealed.contains { $0 > previousRunId } ? "the seal of the run that stored them is missing (above)" : "written after the last run, by hand"))
            }
            problems += try LedgerSeal.resolutionsUnsealed(db, lastSealedRun: previousRunId, unsealedRuns: Set(unsealed))
        }
        problems += try LedgerSeal.implausibleResolutions(db)
        problems += try LedgerSeal.waitingSalesWithFindingResolved(db)
        problems += try LedgerSeal.findingDismissalsUnasked(db)
        // Closes are forward only: those from the first seal on are sealed (a close recorded by
        // hand, past the seal, is named), those before it predate seals.
        if let first = seals.first {
            let from: (month: String, inclusive: Bool)
            if let month = first.closeMonth { from = (month, true) }
            else { from = (try String.fetchOne(db, sql: "SELECT ifnull(closed_through, '') FROM run WHERE id = ?", arguments: [first.runId]) ?? "", false) }
            let unsealed = try String.fetchAll(db, sql: """
                SELECT month FROM period_close WHERE (month > ? OR (? AND month = ?))
                  AND month NOT IN (SELECT close_month FROM seal WHERE close_month IS NOT NULL) ORDER BY month
                """, arguments: [from.month, from.inclusive, from.month])
            if !unsealed.isEmpty {
                problems.append("the close\(unsealed.count == 1 ? "" : "s") of \(unsealed.joined(separator: ", ")) \(unsealed.count == 1 ? "has" : "have") no seal (every close seals itself as it is recorded): recorded by hand, or its seal deleted")
            }
        }
        return (problems, seals)
    }
}
