import Foundation
import GRDB
import LedgerCore

/// A migration that refuses a ledger whose content it cannot carry forward as it is.
struct SchemaRefusal: Error {
    var message: String
}

/// The ledger's schema. Migrations are numbered and never edited once shipped; each says why.
/// The database carries the invariants too: STRICT tables, NOT NULL, CHECK on closed
/// vocabularies, UNIQUE natural keys and triggers that keep entries and postings append-only.
enum Schema {
    static func migrator() -> DatabaseMigrator {
        var m = DatabaseMigrator()
        // v1: the nightly run's ledger: runs, source files and records, store transactions,
        // double-entry entries and postings, findings, and the backend's order versions.
        m.registerMigration("v1-ledger") { db in
            try db.execute(sql: """
            CREATE TABLE run (
                id INTEGER PRIMARY KEY,
                as_of TEXT NOT NULL,
                started_at TEXT NOT NULL,
                finished_at TEXT,
                tool_version TEXT NOT NULL,
                records_read INTEGER NOT NULL DEFAULT 0,
                records_verified INTEGER NOT NULL DEFAULT 0,
                records_pending INTEGER NOT NULL DEFAULT 0,
                records_rejected INTEGER NOT NULL DEFAULT 0,
                records_skipped INTEGER NOT NULL DEFAULT 0,
                entries_posted INTEGER NOT NULL DEFAULT 0,
                orders_matched INTEGER NOT NULL DEFAULT 0,
                -- The hash of the ledger's last entry when the run committed.
                chain_head TEXT
            ) STRICT;

            CREATE TABLE source_file (
                id INTEGER PRIMARY KEY,
                run_id INTEGER NOT NULL REFERENCES run(id),
                path TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('receipts', 'orders', 'signed')),
                sha256 TEXT NOT NULL,
                size_bytes INTEGER NOT NULL,
                records INTEGER NOT NULL,
                new_records INTEGER NOT NULL,
                UNIQUE (path, sha256)
            ) STRICT;

            CREATE TABLE source_record (
                id INTEGER PRIMARY KEY,
                file_id INTEGER NOT NULL REFERENCES source_file(id),
                line INTEGER NOT NULL,
                record_sha256 TEXT NOT NULL,
                outcome TEXT NOT NULL CHECK (outcome IN ('verified', 'pending', 'rejected')),
                reason_code TEXT,
                reason TEXT,
                status_code INTEGER,
                environment TEXT,
                account_id TEXT,
                order_id TEXT,
                received_at TEXT,
                resolved_run_id INTEGER REFERENCES run(id),
                resolved_note TEXT,
                raw TEXT NOT NULL,
                CHECK (outcome = 'verified' OR reason IS NOT NULL)
            ) STRICT;
            CREATE INDEX source_record_file ON source_record(file_id);
            CREATE INDEX source_record_open ON source_record(outcome) WHERE outcome <> 'verified';

            -- Transactions named by records that did not verify (pending or rejected): a later
            -- verified record resolves a pending one; reconciliation tells credits for them apart.
            CREATE TABLE unverified_record_transaction (
                record_id INTEGER NOT NULL REFERENCES source_record(id),
                transaction_id TEXT NOT NULL,
                PRIMARY KEY (transaction_id, record_id)
            ) STRICT, WITHOUT ROWID;

            CREATE TABLE store_transaction (
                transaction_id TEXT PRIMARY KEY,
                book TEXT NOT NULL CHECK (book IN ('production', 'sandbox')),
                original_transaction_id TEXT,
                product_id TEXT NOT NULL,
                quantity INTEGER NOT NULL CHECK (quantity > 0),
                purchase_ms INTEGER NOT NULL,
                expires_ms INTEGER,
                cancellation_ms INTEGER,
                revocation_percentage INTEGER CHECK (revocation_percentage BETWEEN 0 AND 100000),
                storefront TEXT,
                currency TEXT,
                price_milliunits INTEGER,
                app_account_token TEXT,
                bundle_id TEXT,
                has_offer INTEGER NOT NULL DEFAULT 0 CHECK (has_offer IN (0, 1)),
                is_free_trial INTEGER NOT NULL DEFAULT 0 CHECK (is_free_trial IN (0, 1)),
                first_record_id INTEGER NOT NULL REFERENCES source_record(id),
                first_run_id INTEGER NOT NULL REFERENCES run(id),
                sale_status TEXT NOT NULL CHECK (sale_status IN ('pending', 'posted', 'free')),
                pending_reason TEXT,
                CHECK (sale_status <> 'pending' OR pending_reason IS NOT NULL)
            ) STRICT, WITHOUT ROWID;
            CREATE INDEX store_transaction_pending ON store_transaction(sale_status) WHERE sale_status = 'pending';
            CREATE INDEX store_transaction_original ON store_transaction(original_transaction_id);

            CREATE TABLE transaction_source (
                transaction_id TEXT NOT NULL,
                record_id INTEGER NOT NULL REFERENCES source_record(id),
                PRIMARY KEY (transaction_id, record_id)
            ) STRICT, WITHOUT ROWID;

            CREATE TABLE account (
                id INTEGER PRIMARY KEY,
                name TEXT NOT NULL UNIQUE
            ) STRICT;

            CREATE TABLE entry (
                id INTEGER PRIMARY KEY,
                run_id INTEGER NOT NULL REFERENCES run(id),
                book TEXT NOT NULL CHECK (book IN ('production', 'sandbox')),
                transaction_id TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('sale', 'refund', 'refund_reversal')),
                date TEXT NOT NULL,
                original_date TEXT NOT NULL,
                late INTEGER NOT NULL CHECK (late IN (0, 1)),
                product_id TEXT NOT NULL,
                storefront TEXT NOT NULL,
                currency TEXT NOT NULL,
                reporting_currency TEXT NOT NULL,
                gross_minor INTEGER NOT NULL,
                tax_minor INTEGER NOT NULL,
                net_minor INTEGER NOT NULL,
                commission_minor INTEGER NOT NULL,
                proceeds_minor INTEGER NOT NULL,
                gross_reporting_minor INTEGER NOT NULL,
                net_reporting_minor INTEGER NOT NULL,
                commission_reporting_minor INTEGER NOT NULL,
                proceeds_reporting_minor INTEGER NOT NULL,
                refund_percentage INTEGER,
                rules_json TEXT NOT NULL,
                -- Tamper evidence: SHA-256 over this entry's content, its postings and the
                -- previous entry's hash (a chain over the whole ledger, in id order).
                hash TEXT NOT NULL CHECK (length(hash) = 64),
                UNIQUE (book, transaction_id, kind),
                CHECK (proceeds_minor = net_minor - commission_minor),
                CHECK (proceeds_reporting_minor = net_reporting_minor - commission_reporting_minor)
            ) STRICT;
            CREATE INDEX entry_date ON entry(book, date);

            CREATE TABLE posting (
                id INTEGER PRIMARY KEY,
                entry_id INTEGER NOT NULL REFERENCES entry(id),
                account_id INTEGER NOT NULL REFERENCES account(id),
                currency TEXT NOT NULL,
                amount_minor INTEGER NOT NULL,
                reporting_amount_minor INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX posting_entry ON posting(entry_id);

            CREATE TRIGGER entry_no_update BEFORE UPDATE ON entry
                BEGIN SELECT RAISE(ABORT, 'entries are append-only: post a correcting entry instead'); END;
            CREATE TRIGGER entry_no_delete BEFORE DELETE ON entry
                BEGIN SELECT RAISE(ABORT, 'entries are append-only: post a correcting entry instead'); END;
            CREATE TRIGGER posting_no_update BEFORE UPDATE ON posting
                BEGIN SELECT RAISE(ABORT, 'postings are append-only: post a correcting entry instead'); END;
            CREATE TRIGGER posting_no_delete BEFORE DELETE ON posting
                BEGIN SELECT RAISE(ABORT, 'postings are append-only: post a correcting entry instead'); END;

            CREATE TABLE finding (
                id INTEGER PRIMARY KEY,
                code TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                record_id INTEGER REFERENCES source_record(id),
                message TEXT NOT NULL,
                first_run_id INTEGER NOT NULL REFERENCES run(id),
                last_run_id INTEGER NOT NULL REFERENCES run(id),
                resolved_run_id INTEGER REFERENCES run(id)
            ) STRICT;
            -- A finding is about a transaction (record_id NULL) or about one record.
            CREATE UNIQUE INDEX finding_key ON finding(code, transaction_id, ifnull(record_id, 0));

            -- Server Notifications V2: notificationUUID makes a resent notification a no-op.
            CREATE TABLE notification (
                uuid TEXT PRIMARY KEY,
                record_id INTEGER NOT NULL REFERENCES source_record(id),
                run_id INTEGER NOT NULL REFERENCES run(id),
                notification_type TEXT NOT NULL,
                subtype TEXT,
                signed_ms INTEGER,
                environment TEXT,
                transaction_id TEXT
            ) STRICT, WITHOUT ROWID;
            CREATE INDEX notification_transaction ON notification(transaction_id);

            -- REFUND_REVERSED asks for the refund's negation, posted once the refund exists.
            CREATE TABLE reversal_request (
                book TEXT NOT NULL CHECK (book IN ('production', 'sandbox')),
                transaction_id TEXT NOT NULL,
                date TEXT NOT NULL,
                notification_uuid TEXT NOT NULL,
                PRIMARY KEY (book, transaction_id)
            ) STRICT, WITHOUT ROWID;

            CREATE TABLE order_version (
                id INTEGER PRIMARY KEY,
                order_id TEXT NOT NULL,
                record_id INTEGER NOT NULL REFERENCES source_record(id),
                account_id TEXT NOT NULL,
                transaction_id TEXT,
                product_id TEXT NOT NULL,
                quantity INTEGER NOT NULL CHECK (quantity > 0),
                credited_units INTEGER NOT NULL CHECK (credited_units >= 0),
                credited_at TEXT NOT NULL,
                credited_ms INTEGER NOT NULL,
                environment TEXT NOT NULL CHECK (environment IN ('production', 'sandbox')),
                storefront TEXT,
                app_account_token TEXT,
                reversed_at TEXT
            ) STRICT;
            CREATE INDEX order_version_order ON order_version(order_id, id);
            CREATE INDEX order_version_transaction ON order_version(transaction_id);

            -- Reconciliation exceptions, identified by (category, transaction, order); open from
            -- the first run that detects one until a run no longer does.
            CREATE TABLE exception (
                id INTEGER PRIMARY KEY,
                category TEXT NOT NULL CHECK (category IN ('DUPLICATE_CREDIT', 'SANDBOX_CREDITED_IN_PRODUCTION', 'REFUNDED_STILL_CREDITED', 'NOT_CREDITED', 'CREDITED_WITHOUT_TRANSACTION', 'CREDITED_UNVERIFIED', 'ACCOUNT_MISMATCH', 'PRODUCT_MISMATCH', 'QUANTITY_MISMATCH', 'UNITS_MISMATCH')),
                transaction_id TEXT NOT NULL,
                order_id TEXT NOT NULL,
                account_id TEXT,
                product_id TEXT,
                gross_minor INTEGER,
                currency TEXT,
                net_reporting_minor INTEGER,
                detail TEXT NOT NULL,
                first_seen TEXT NOT NULL,
                first_run_id INTEGER NOT NULL REFERENCES run(id),
                last_seen TEXT NOT NULL,
                last_run_id INTEGER NOT NULL REFERENCES run(id),
                resolved_on TEXT,
                resolved_run_id INTEGER REFERENCES run(id),
                UNIQUE (category, transaction_id, order_id)
            ) STRICT;
            CREATE INDEX exception_transaction ON exception(transaction_id);
            CREATE INDEX exception_order ON exception(order_id);
            """)
        }
        // v2: closed periods. Finance closes each month and files it; from then on nothing may
        // be written into it (a late entry posts on the first open day instead, see Poster).
        // The Poster moves the dates; these triggers are the paired check in the store, so a
        // bug or a hand-written INSERT cannot restate a filed month either. Closes are
        // append-only and move forward only: reopening a month is not something to do silently.
        m.registerMigration("v2-closed-periods") { db in
            try db.execute(sql: """
            CREATE TABLE period_close (
                id INTEGER PRIMARY KEY,
                month TEXT NOT NULL UNIQUE CHECK (month GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]'),
                closed_at TEXT NOT NULL,
                closed_by TEXT NOT NULL,
                source TEXT NOT NULL CHECK (source IN ('close command', 'config'))
            ) STRICT;

            CREATE TRIGGER period_close_forward_only BEFORE INSERT ON period_close
                WHEN NEW.month <= (SELECT max(month) FROM period_close)
                BEGIN SELECT RAISE(ABORT, 'period already closed: periods close forward only and are never reopened'); END;
            CREATE TRIGGER period_close_no_update BEFORE UPDATE ON period_close
                BEGIN SELECT RAISE(ABORT, 'period closes are append-only: a closed month is never reopened'); END;
            CREATE TRIGGER period_close_no_delete BEFORE DELETE ON period_close
                BEGIN SELECT RAISE(ABORT, 'period closes are append-only: a closed month is never reopened'); END;

            CREATE TRIGGER entry_not_in_closed_period BEFORE INSERT ON entry
                WHEN substr(NEW.date, 1, 7) <= (SELECT max(month) FROM period_close)
                BEGIN SELECT RAISE(ABORT, 'entry dated in a closed period: post it on the first day of the first open month, marked late'); END;
            CREATE TRIGGER posting_not_in_closed_period BEFORE INSERT ON posting
                WHEN (SELECT substr(date, 1, 7) FROM entry WHERE id = NEW.entry_id) <= (SELECT max(month) FROM period_close)
                BEGIN SELECT RAISE(ABORT, 'posting into an entry of a closed period: closed months are never restated'); END;
            -- A late entry was moved forward from its original date; an entry on its own date is not late.
            CREATE TRIGGER entry_late_is_moved_forward BEFORE INSERT ON entry
                WHEN (NEW.late = 1) <> (NEW.date > NEW.original_date)
                BEGIN SELECT RAISE(ABORT, 'an entry is late exactly when it is posted after its original date'); END;
            """)
        }
        // The sales still to post, in posting order: the night walks them a batch at a time
        // (memory holds one batch, not every new transaction of a million-transaction night).
        m.registerMigration("v3-pending-order") { db in
            try db.execute(sql: """
            CREATE INDEX store_transaction_pending_order ON store_transaction(purchase_ms, transaction_id)
                WHERE sale_status = 'pending';
            """)
        }
        // v4: reconciliation by groups. A night reconciles only the transactions and orders it
        // touched; the matched pairs are kept so the ledger-wide count needs no full pass, and
        // each run records how it reconciled and under which product rules (a change of those
        // rules makes the next run reconcile everything again).
        m.registerMigration("v4-incremental-reconciliation") { db in
            try db.execute(sql: """
            CREATE TABLE reconciled_match (
                transaction_id TEXT NOT NULL,
                order_id TEXT NOT NULL,
                PRIMARY KEY (transaction_id, order_id)
            ) STRICT, WITHOUT ROWID;
            ALTER TABLE run ADD COLUMN reconciliation TEXT CHECK (reconciliation IN ('full', 'incremental'));
            ALTER TABLE run ADD COLUMN reconciliation_rules TEXT;
            """)
        }
        // v5: a file's identity on disk when it was read (device, inode, size, modification and
        // change times). A night skips a file read before without hashing it again when its
        // identity is unchanged: any write to a file changes its change time, which no tool can
        // set back. Older rows have none and are hashed as before.
        m.registerMigration("v5-file-identity") { db in
            try db.execute(sql: """
                ALTER TABLE source_file ADD COLUMN stat_key TEXT;
                -- The ledger's totals count free sales from this small index, not the whole table.
                CREATE INDEX store_transaction_free ON store_transaction(sale_status) WHERE sale_status = 'free';
                """)
        }
        // v6: CHECK constraints with a list of three or more values (`kind IN ('a', 'b', 'c')`)
        // are written as `(kind = 'a' OR kind = 'b' OR kind = 'c')`: the same constraint, but
        // SQLite builds a temporary table for an IN list on every row it checks, a quarter of the
        // cost of inserting a record. SQLite cannot alter a CHECK; its documented way for a
        // change that leaves the stored data valid and the file format as it is ("Making Other
        // Kinds Of Table Schema Changes") edits the table's SQL in sqlite_schema and bumps the
        // schema version, inside this migration's transaction (a failure rolls it all back).
        m.registerMigration("v6-check-lists") { db in
            let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
            var edits: [(name: String, sql: String)] = []
            for row in try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND sql IS NOT NULL") {
                let sql: String = row[1]
                let expanded = expandCheckLists(sql)
                if expanded != sql { edits.append((row[0], expanded)) }
            }
            guard !edits.isEmpty else { return }
            try db.execute(sql: "PRAGMA writable_schema = ON")
            for edit in edits {
                try db.execute(sql: "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?", arguments: [edit.sql, edit.name])
            }
            try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
            try db.execute(sql: "PRAGMA writable_schema = OFF")
            // The edited tables must parse (a malformed schema fails here, and the migration rolls back).
            for edit in edits { _ = try Row.fetchAll(db, sql: "SELECT * FROM \"\(edit.name)\" LIMIT 0") }
        }
        // v7: the refunds still to post are found from the refunded transactions alone, not by
        // reading every transaction of the ledger each night.
        m.registerMigration("v7-refunds-due") { db in
            try db.execute(sql: """
                CREATE INDEX store_transaction_refunded ON store_transaction(cancellation_ms, transaction_id)
                    WHERE cancellation_ms IS NOT NULL
                """)
        }
        // v8: month totals (MonthTotals.swift): the trial balance and the entry sums per month,
        // kept up to date by every write transaction, so a night's reports read history from a
        // few rows per month instead of re-adding every posting since the ledger began.
        m.registerMigration("v8-month-totals") { db in
            try db.execute(sql: MonthTotals.createSQL)
            try MonthTotals.add(afterEntryId: 0, db: db)
        }
        // v9: what `verify` anchors on is kept as written: a finished run (its counts and the
        // chain head it committed with) and a source record's text, hash and outcome are never
        // changed, and neither is deleted (a pending record is still marked resolved later).
        m.registerMigration("v9-runs-and-records-fixed") { db in
            try db.execute(sql: """
                CREATE TRIGGER run_finished_no_update BEFORE UPDATE ON run WHEN OLD.finished_at IS NOT NULL
                    BEGIN SELECT RAISE(ABORT, 'a finished run is never changed: its counts and chain head are the record of that night'); END;
                CREATE TRIGGER run_no_delete BEFORE DELETE ON run
                    BEGIN SELECT RAISE(ABORT, 'runs are never deleted'); END;
                CREATE TRIGGER source_record_text_fixed BEFORE UPDATE OF file_id, line, record_sha256, outcome, raw ON source_record
                    BEGIN SELECT RAISE(ABORT, 'a source record is kept as it was read: its text, hash and outcome never change'); END;
                CREATE TRIGGER source_record_no_delete BEFORE DELETE ON source_record
                    BEGIN SELECT RAISE(ABORT, 'source records are never deleted'); END;
                """)
        }
        // v10: the transactions a record names, found by the record: a pending record is resolved
        // once every transaction it names is verified, checked from the record's side.
        m.registerMigration("v10-unverified-by-record") { db in
            try db.execute(sql: "CREATE INDEX unverified_record_transaction_record ON unverified_record_transaction(record_id, transaction_id)")
        }
        // v11: the records not verified that name an order (rejected lines of orders files keep
        // their order id): `trace` of an order and the valid line that resolves them find them
        // without reading every record.
        m.registerMigration("v11-unverified-by-order") { db in
            try db.execute(sql: "CREATE INDEX source_record_unverified_order ON source_record(order_id) WHERE outcome <> 'verified'")
        }
        // v12: the records' texts compressed (RecordText.swift): consecutive records of a file
        // share a `source_chunk` row of Zstandard-compressed text, and a record read from then
        // on keeps its range of that text (`raw` is then empty). Records stored before keep
        // their `raw`. A chunk, like its records, is never changed or deleted.
        m.registerMigration("v12-record-chunks") { db in
            try db.execute(sql: """
                CREATE TABLE source_chunk (
                    id INTEGER PRIMARY KEY,
                    codec TEXT NOT NULL CHECK (codec = 'zstd'),
                    text_bytes INTEGER NOT NULL CHECK (text_bytes >= 0),
                    data BLOB NOT NULL
                ) STRICT;
                CREATE TRIGGER source_chunk_no_update BEFORE UPDATE ON source_chunk
                    BEGIN SELECT RAISE(ABORT, 'a source chunk is kept as it was read: its records'' text never changes'); END;
                CREATE TRIGGER source_chunk_no_delete BEFORE DELETE ON source_chunk
                    BEGIN SELECT RAISE(ABORT, 'source chunks are never deleted'); END;
                ALTER TABLE source_record ADD COLUMN chunk_id INTEGER REFERENCES source_chunk(id);
                ALTER TABLE source_record ADD COLUMN chunk_offset INTEGER;
                ALTER TABLE source_record ADD COLUMN chunk_length INTEGER;
                DROP TRIGGER source_record_text_fixed;
                CREATE TRIGGER source_record_text_fixed
                    BEFORE UPDATE OF file_id, line, record_sha256, outcome, raw, chunk_id, chunk_offset, chunk_length ON source_record
                    BEGIN SELECT RAISE(ABORT, 'a source record is kept as it was read: its text, hash and outcome never change'); END;
                """)
        }
        // v13: postings derived from their entry's amounts instead of stored beside them. Every
        // entry of a kind has the same three postings (accounting.md), each one of the entry's
        // net, commission or proceeds with a sign: `posting_rule` holds those nine rules and
        // the `posting` view gives each posting from its entry by them, with the id, entry,
        // account, currency and amounts the table held. A posting can then never disagree with
        // its entry, and a night writes one row per entry instead of four (the entry's hash
        // still covers its postings). The stored postings are checked, one by one, to be the
        // ones the rules give before the table is dropped; a ledger whose postings are not is
        // left as it is, for `iapledger verify` to name what was changed.
        m.registerMigration("v13-postings-from-entries") { db in
            try db.execute(sql: """
                INSERT OR IGNORE INTO account (name) VALUES
                    ('Assets:AppStore:Receivable'), ('Expenses:AppStore:Commission'), ('Revenue:InApp:Sales'), ('Revenue:InApp:Refunds');
                CREATE TABLE posting_rule (
                    kind TEXT NOT NULL CHECK ((kind = 'sale' OR kind = 'refund' OR kind = 'refund_reversal')),
                    line INTEGER NOT NULL CHECK (line BETWEEN 1 AND 3),
                    account_id INTEGER NOT NULL REFERENCES account(id),
                    -- The entry's amount the posting takes, with its sign: exactly one is 1 or -1.
                    net INTEGER NOT NULL CHECK (net BETWEEN -1 AND 1),
                    commission INTEGER NOT NULL CHECK (commission BETWEEN -1 AND 1),
                    proceeds INTEGER NOT NULL CHECK (proceeds BETWEEN -1 AND 1),
                    PRIMARY KEY (kind, line),
                    CHECK (abs(net) + abs(commission) + abs(proceeds) = 1)
                ) STRICT, WITHOUT ROWID;
                WITH rule (kind, line, account, net, commission, proceeds) AS (VALUES \(postingRuleValues))
                INSERT INTO posting_rule (kind, line, account_id, net, commission, proceeds)
                SELECT r.kind, r.line, a.id, r.net, r.commission, r.proceeds FROM rule r JOIN account a ON a.name = r.account;
                CREATE TRIGGER posting_rule_no_insert BEFORE INSERT ON posting_rule
                    BEGIN SELECT RAISE(ABORT, 'the posting rules are the accounting contract''s: they are never changed'); END;
                CREATE TRIGGER posting_rule_no_update BEFORE UPDATE ON posting_rule
                    BEGIN SELECT RAISE(ABORT, 'the posting rules are the accounting contract''s: they are never changed'); END;
                CREATE TRIGGER posting_rule_no_delete BEFORE DELETE ON posting_rule
                    BEGIN SELECT RAISE(ABORT, 'the posting rules are the accounting contract''s: they are never changed'); END;
                """)
            if let problem = try storedPostingsProblem(db) { throw SchemaRefusal(message: problem) }
            try db.execute(sql: """
                DROP TABLE posting;
                CREATE VIEW posting (id, entry_id, line, account_id, currency, amount_minor, reporting_amount_minor) AS
                    SELECT e.id * 3 + r.line - 3, e.id, r.line, r.account_id, e.currency,
                           r.net * e.net_minor + r.commission * e.commission_minor + r.proceeds * e.proceeds_minor,
                           r.net * e.net_reporting_minor + r.commission * e.commission_reporting_minor
                               + r.proceeds * e.proceeds_reporting_minor
                    FROM entry e JOIN posting_rule r ON r.kind = e.kind;
                """)
        }
        // v14: one index of the pending sales. `store_transaction_pending_order` (v3) lists them
        // in posting order and answers "which are pending" as well; the older index of the
        // same rows cost every sale an index row written on arrival and removed when posted.
        m.registerMigration("v14-one-pending-index") { db in
            try db.execute(sql: "DROP INDEX store_transaction_pending")
        }
        // v15: the two guards of an inserted entry (v2) run after the row is inserted instead
        // of before: SQLite runs a BEFORE INSERT trigger on a row it has not placed yet, which
        // cost each entry more than the same check after it (both abort the statement, and the
        // row with it, with the same message). Measured with the sqlite3 shell copying
        // 1,117,358 entries: 4.6 s of CPU with the BEFORE triggers, 4.0 s with the AFTER ones,
        // 2.8 s with none.
        m.registerMigration("v15-entry-guards-after-insert") { db in
            try db.execute(sql: """
            DROP TRIGGER entry_not_in_closed_period;
            DROP TRIGGER entry_late_is_moved_forward;
            CREATE TRIGGER entry_not_in_closed_period AFTER INSERT ON entry
                WHEN substr(NEW.date, 1, 7) <= (SELECT max(month) FROM period_close)
                BEGIN SELECT RAISE(ABORT, 'entry dated in a closed period: post it on the first day of the first open month, marked late'); END;
            -- A late entry was moved forward from its original date; an entry on its own date is not late.
            CREATE TRIGGER entry_late_is_moved_forward AFTER INSERT ON entry
                WHEN (NEW.late = 1) <> (NEW.date > NEW.original_date)
                BEGIN SELECT RAISE(ABORT, 'an entry is late exactly when it is posted after its original date'); END;
            """)
        }
        // v16: the refunds and their reversals by book and date, for the Refunds sheet. Without
        // it each workbook walked every entry of its book to find the few that are not sales:
        // 0.37 s a workbook on a ledger of 1.1 million entries (33,609 refunds), growing with
        // the history; 0.07 s with it. Only refunds and reversals get an index row. Foreign
        // keys checked as it runs (an index changes no row), not by GRDB's check of every
        // row after it: 1.7 s on that ledger, for nothing.
        m.registerMigration("v16-refund-entries-index", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "CREATE INDEX entry_refund_date ON entry(book, date) WHERE kind <> 'sale'")
        }
        // v17: the index of refunded transactions (v7) holds their status and book, so that the
        // refunds still to post are found from it alone: each night read every refunded
        // transaction's row to learn both (0.24 s for 33,609 refunds, growing with the
        // history; 0.09 s from the index). Only refunded transactions have a row in it.
        m.registerMigration("v17-refunds-due-covered", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                DROP INDEX store_transaction_refunded;
                CREATE INDEX store_transaction_refunds ON store_transaction(cancellation_ms, transaction_id, sale_status, book)
                    WHERE cancellation_ms IS NOT NULL;
                """)
        }
        // Each run records the month the books were closed through when it committed (its row
        // never changes once finished): closes deleted afterwards (a month reopened, past the
        // trigger that forbids it) show in `verify`, as do entries posted into a month closed
        // before them.
        m.registerMigration("v18-run-closed-through", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "ALTER TABLE run ADD COLUMN closed_through TEXT")
        }
        // A file's record (path, hash, size, counts, the run that read it) never changes: only
        // its identity on disk (`stat_key`) is remembered later. Its path could be rewritten to
        // name another file in `trace`; its rows are kept by the records that reference them.
        m.registerMigration("v19-source-files-fixed", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TRIGGER source_file_fixed BEFORE UPDATE OF id, run_id, path, kind, sha256, size_bytes, records, new_records ON source_file
                    BEGIN SELECT RAISE(ABORT, 'source files are recorded once: a file read again is a new version'); END;
                CREATE TRIGGER source_file_no_delete BEFORE DELETE ON source_file
                    BEGIN SELECT RAISE(ABORT, 'source files are recorded once and never removed'); END;
                """)
        }
        // Each run records the newest migration of the schema it wrote with (its row never
        // changes once finished). The migrations applied are rows of grdb_migrations: deleting
        // the newest with what they created (v19's triggers, say) made `verify` compare the
        // ledger with the older schema and find nothing missing. It now compares the ledger
        // with the newest schema a finished run wrote with, and names the deleted migrations.
        m.registerMigration("v20-run-schema", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "ALTER TABLE run ADD COLUMN schema_migration TEXT")
        }
        // An exception found again after it was resolved reopens its row (one per category,
        // transaction and order): the row took the new episode's dates, and the episode before
        // it (when found, when resolved) was gone from the ledger, from `trace` and from the
        // workbooks written again for a date inside it. Each closed episode is kept here when
        // its exception reopens, never changed.
        m.registerMigration("v21-exception-episodes", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TABLE exception_episode (
                    id INTEGER PRIMARY KEY,
                    exception_id INTEGER NOT NULL REFERENCES exception(id),
                    detail TEXT NOT NULL,
                    first_seen TEXT NOT NULL,
                    first_run_id INTEGER NOT NULL REFERENCES run(id),
                    last_seen TEXT NOT NULL,
                    last_run_id INTEGER NOT NULL REFERENCES run(id),
                    resolved_on TEXT NOT NULL,
                    resolved_run_id INTEGER NOT NULL REFERENCES run(id)
                ) STRICT;
                CREATE INDEX exception_episode_exception ON exception_episode(exception_id);
                CREATE TRIGGER exception_episode_no_update BEFORE UPDATE ON exception_episode
                    BEGIN SELECT RAISE(ABORT, 'an exception episode is history: it never changes'); END;
                CREATE TRIGGER exception_episode_no_delete BEFORE DELETE ON exception_episode
                    BEGIN SELECT RAISE(ABORT, 'an exception episode is history: it is never removed'); END;
                """)
        }
        // The ledger's seal (LedgerSeal.swift): the entries' hash chain covered the entries
        // alone, so a record's outcome, reason or resolution, a file's name or a run's counts
        // edited by hand (a rejected record marked resolved, its text rewritten with its hash),
        // or a close deleted, left every chain head as it was. Each run and each close now
        // seals what it wrote, chained to the seal before it. A record's reason and the rest of
        // what it was read with never change, and a resolved record stays resolved as it was.
        m.registerMigration("v22-seals", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TABLE run_input (
                    run_id INTEGER NOT NULL REFERENCES run(id),
                    path TEXT NOT NULL,
                    sha256 TEXT NOT NULL,
                    PRIMARY KEY (run_id, path)
                ) STRICT;
                CREATE TRIGGER run_input_no_update BEFORE UPDATE ON run_input
                    BEGIN SELECT RAISE(ABORT, 'the rules and config a run posted by are recorded once: never changed'); END;
                CREATE TRIGGER run_input_no_delete BEFORE DELETE ON run_input
                    BEGIN SELECT RAISE(ABORT, 'the rules and config a run posted by are recorded once: never removed'); END;
                CREATE TABLE seal (
                    id INTEGER PRIMARY KEY,
                    run_id INTEGER UNIQUE REFERENCES run(id),
                    close_month TEXT UNIQUE,
                    last_record_id INTEGER,
                    digest TEXT NOT NULL,
                    seal TEXT NOT NULL,
                    CHECK ((run_id IS NULL) <> (close_month IS NULL)),
                    CHECK ((run_id IS NULL) = (last_record_id IS NULL))
                ) STRICT;
                CREATE TRIGGER seal_no_update BEFORE UPDATE ON seal
                    BEGIN SELECT RAISE(ABORT, 'a seal is never changed'); END;
                CREATE TRIGGER seal_no_delete BEFORE DELETE ON seal
                    BEGIN SELECT RAISE(ABORT, 'seals are never deleted'); END;
                DROP TRIGGER source_record_text_fixed;
                CREATE TRIGGER source_record_text_fixed
                    BEFORE UPDATE OF file_id, line, record_sha256, outcome, raw, chunk_id, chunk_offset, chunk_length,
                                     reason_code, reason, status_code, environment, account_id, order_id, received_at ON source_record
                    BEGIN SELECT RAISE(ABORT, 'a source record is kept as it was read: its text, hash, outcome and reason never change'); END;
                CREATE TRIGGER source_record_resolved_once BEFORE UPDATE OF resolved_run_id, resolved_note ON source_record
                    WHEN OLD.resolved_run_id IS NOT NULL OR NEW.resolved_run_id IS NULL
                      OR NOT EXISTS (SELECT 1 FROM run WHERE id = NEW.resolved_run_id AND finished_at IS NULL)
                    BEGIN SELECT RAISE(ABORT, 'a source record is resolved once, by the night running, and stays resolved as it was'); END;
                CREATE INDEX source_record_resolved ON source_record(resolved_run_id) WHERE resolved_run_id IS NOT NULL;
                """)
        }
        // Every workbook and export written under reports/ is registered as written (its path,
        // SHA-256, size, when, by which night or `report`), never changed or deleted: a file
        // finance or an auditor holds can be checked against it (`verify --workbook`), and the
        // versions written over by later ones stay known.
        m.registerMigration("v23-report-files", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TABLE report_file (
                    id INTEGER PRIMARY KEY,
                    path TEXT NOT NULL,
                    sha256 TEXT NOT NULL,
                    size_bytes INTEGER NOT NULL,
                    written_at TEXT NOT NULL,
                    run_id INTEGER REFERENCES run(id),
                    written_by TEXT NOT NULL CHECK (written_by = 'run' OR written_by = 'report')
                ) STRICT;
                CREATE INDEX report_file_sha256 ON report_file(sha256);
                CREATE TRIGGER report_file_no_update BEFORE UPDATE ON report_file
                    BEGIN SELECT RAISE(ABORT, 'a registered report file is never changed'); END;
                CREATE TRIGGER report_file_no_delete BEFORE DELETE ON report_file
                    BEGIN SELECT RAISE(ABORT, 'registered report files are never removed'); END;
                """)
        }
        // unverified_record_transaction (v1) also holds, from v24 on, the transactions named by
        // verified records whose item was refused (INVALID_TRANSACTION): such a transaction
        // is known to the ledger as unverified, as one named by a record that did not verify:
        // nights from now on note it as they open the finding; this notes those of the nights
        // before (the first night after it reconciles every group again, its logic having changed).
        m.registerMigration("v24-refused-items-unverified", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                INSERT OR IGNORE INTO unverified_record_transaction (record_id, transaction_id)
                SELECT record_id, transaction_id FROM finding
                WHERE code = 'INVALID_TRANSACTION' AND record_id IS NOT NULL AND transaction_id <> ''
                """)
        }
        // What the store keeps of what it read is kept as read. A stored transaction is never
        // removed (a sale waiting for a rule, its row deleted, would never post, and nothing
        // chained or sealed held it), nor an order version changed or removed (its storefront
        // prices a sale that has none of its own). The header of each orders file is kept, and
        // sealed with its file, so `verify` can read every order version again from its line.
        m.registerMigration("v25-kept-as-read", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TRIGGER store_transaction_no_delete BEFORE DELETE ON store_transaction
                    BEGIN SELECT RAISE(ABORT, 'stored transactions are never deleted'); END;
                CREATE TRIGGER order_version_no_update BEFORE UPDATE ON order_version
                    BEGIN SELECT RAISE(ABORT, 'an order version is kept as it was read: a correction is a new version'); END;
                CREATE TRIGGER order_version_no_delete BEFORE DELETE ON order_version
                    BEGIN SELECT RAISE(ABORT, 'order versions are never deleted'); END;
                CREATE TABLE source_file_header (
                    file_id INTEGER PRIMARY KEY REFERENCES source_file(id),
                    header TEXT NOT NULL
                ) STRICT;
                CREATE TRIGGER source_file_header_no_update BEFORE UPDATE ON source_file_header
                    BEGIN SELECT RAISE(ABORT, 'an orders file''s header is kept as it was read'); END;
                CREATE TRIGGER source_file_header_no_delete BEFORE DELETE ON source_file_header
                    BEGIN SELECT RAISE(ABORT, 'an orders file''s header is never removed'); END;
                """)
        }
        // The config and rules files a run posts by were recorded by their SHA-256 alone
        // (`run_input`, sealed): their content is now kept too, once per distinct file, so the
        // rules each entry recorded can be checked against the files its run read (`verify`),
        // and a night can say what changed in them since the last (a rate of a month already
        // posted). Its key is the SHA-256 the seal covers.
        m.registerMigration("v26-input-texts", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TABLE input_text (
                    sha256 TEXT PRIMARY KEY,
                    codec TEXT NOT NULL CHECK (codec = 'zstd'),
                    text_bytes INTEGER NOT NULL CHECK (text_bytes >= 0),
                    data BLOB NOT NULL
                ) STRICT, WITHOUT ROWID;
                CREATE TRIGGER input_text_no_update BEFORE UPDATE ON input_text
                    BEGIN SELECT RAISE(ABORT, 'a kept config or rules file is never changed'); END;
                CREATE TRIGGER input_text_no_delete BEFORE DELETE ON input_text
                    BEGIN SELECT RAISE(ABORT, 'a kept config or rules file is never removed'); END;
                """)
        }
        // The report files' registrations are made after their night's commit, out of the
        // seal's reach: a registration forged for an edited workbook (or one removed) held
        // together. Each is now chained to the one before it (ReportFileChain); the night
        // prints the head, the copy kept outside the ledger.
        m.registerMigration("v27-report-file-chain", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "ALTER TABLE report_file ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64)")
        }
        // A refund reversal asked for by Apple's REFUND_REVERSED waits in reversal_request until
        // its refund posts: deleted, the reversal never posted; its date changed, it posted on
        // another day. Requests and the notifications they come from are kept as written.
        m.registerMigration("v28-reversals-kept", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TRIGGER reversal_request_no_update BEFORE UPDATE ON reversal_request
                    BEGIN SELECT RAISE(ABORT, 'a refund reversal asked for is kept as its notification asked for it'); END;
                CREATE TRIGGER reversal_request_no_delete BEFORE DELETE ON reversal_request
                    BEGIN SELECT RAISE(ABORT, 'a refund reversal asked for is never removed'); END;
                CREATE TRIGGER notification_no_update BEFORE UPDATE ON notification
                    BEGIN SELECT RAISE(ABORT, 'a notification is kept as it was read'); END;
                CREATE TRIGGER notification_no_delete BEFORE DELETE ON notification
                    BEGIN SELECT RAISE(ABORT, 'notifications are never deleted'); END;
                """)
        }
        // A record left pending or rejected that no later record will settle leaves the open
        // lists when an operator dismisses it (`iapledger dismiss`, with who and why): the ask is
        // kept as made, and the next night resolves the record with it (sealed with its run).
        m.registerMigration("v29-record-dismissal", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE TABLE record_dismissal (
                    id INTEGER PRIMARY KEY,
                    record_id INTEGER NOT NULL UNIQUE REFERENCES source_record(id),
                    asked_at TEXT NOT NULL,
                    asked_by TEXT NOT NULL CHECK (length(asked_by) > 0),
                    reason TEXT NOT NULL CHECK (length(trim(reason)) > 0)
                ) STRICT;
                CREATE TRIGGER record_dismissal_no_update BEFORE UPDATE ON record_dismissal
                    BEGIN SELECT RAISE(ABORT, 'a dismissal is kept as it was asked'); END;
                CREATE TRIGGER record_dismissal_no_delete BEFORE DELETE ON record_dismissal
                    BEGIN SELECT RAISE(ABORT, 'a dismissal is never withdrawn'); END;
                """)
        }
        // A finding left for finance to book by hand (PRICE_MISMATCH, STOREFRONT_AFTER_POSTING,
        // ...) leaves the open lists once finance has booked it: `iapledger dismiss --finding`
        // asks (kept as made, for the finding's message as it then read), the next night
        // resolves it with the ask's note. Found again with another message, it opens again.
        m.registerMigration("v30-finding-dismissal", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                ALTER TABLE finding ADD COLUMN resolved_note TEXT;
                CREATE TABLE finding_dismissal (
                    id INTEGER PRIMARY KEY,
                    finding_id INTEGER NOT NULL REFERENCES finding(id),
                    message TEXT NOT NULL,
                    asked_at TEXT NOT NULL,
                    asked_by TEXT NOT NULL CHECK (length(asked_by) > 0),
                    reason TEXT NOT NULL CHECK (length(trim(reason)) > 0),
                    UNIQUE (finding_id, message)
                ) STRICT;
                CREATE TRIGGER finding_dismissal_no_update BEFORE UPDATE ON finding_dismissal
                    BEGIN SELECT RAISE(ABORT, 'a dismissal is kept as it was asked'); END;
                CREATE TRIGGER finding_dismissal_no_delete BEFORE DELETE ON finding_dismissal
                    BEGIN SELECT RAISE(ABORT, 'a dismissal is never withdrawn'); END;
                """)
        }
        // The ledger posts one refund and one reversal per transaction; a second refund
        // (REFUND_AFTER_REVERSAL, REFUND_AGAIN) or reversal (REVERSAL_REPEATED) is said, for
        // finance to book by hand. What the store said last of the refund is kept beside it,
        // for reconciliation: the share it refunded (100000 in full), 0 when it reversed it
        // again, and when (the refund's or the reversal's date: a word dated before the one
        // kept, read late, changes nothing); NULL while the ledger's refund and reversal say it all.
        m.registerMigration("v31-store-refund-share", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                ALTER TABLE store_transaction ADD COLUMN store_refund_share INTEGER
                    CHECK (store_refund_share BETWEEN 0 AND 100000);
                ALTER TABLE store_transaction ADD COLUMN store_refund_ms INTEGER;
                """)
            // The nights before said the same in their findings: the latest says it (a second
            // refund taken as in full: its share is in its record, not in the finding; undated).
            try db.execute(sql: """
                UPDATE store_transaction SET store_refund_share = (
                    SELECT CASE f.code WHEN 'REVERSAL_REPEATED' THEN 0 ELSE 100000 END FROM finding f
                    WHERE f.transaction_id = store_transaction.transaction_id
                      AND f.code IN ('REFUND_AFTER_REVERSAL', 'REFUND_AGAIN', 'REVERSAL_REPEATED')
                    ORDER BY f.last_run_id DESC, f.id DESC LIMIT 1)
                WHERE transaction_id IN (SELECT transaction_id FROM finding
                                         WHERE code IN ('REFUND_AFTER_REVERSAL', 'REFUND_AGAIN', 'REVERSAL_REPEATED'))
                """)
        }
        // Seals of the second form (LedgerSeal): a run's seal covers its tool version and its
        // reconciliation's figures too, and the finding dismissals asked up to it (by id: the
        // last one sealed is kept with the seal, NULL in seals of the first form). Account
        // names are kept as created (the workbooks and `verify` name accounts by them).
        m.registerMigration("v32-seal-2", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                ALTER TABLE seal ADD COLUMN last_finding_dismissal_id INTEGER;
                CREATE TRIGGER account_no_update BEFORE UPDATE ON account
                    BEGIN SELECT RAISE(ABORT, 'an account keeps its name: entries and workbooks name it'); END;
                CREATE TRIGGER account_no_delete BEFORE DELETE ON account
                    BEGIN SELECT RAISE(ABORT, 'accounts are never removed: postings name them'); END;
                """)
        }
        // Files found by their bytes (a file read before under another path): each night's
        // summary looked up every file it read among all files ever read, a scan each (50,000
        // one-record files took a night 300 s, 280 of them in that lookup, after its commit).
        m.registerMigration("v33-file-by-hash", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "CREATE INDEX source_file_sha256 ON source_file(sha256)")
        }
        // Exceptions listed in the order the workbook and `iapledger exceptions` give them (by
        // category, first seen, transaction, order): read a category at a time along it, not
        // sorted whole (a million open exceptions took the reconciliation workbook 7 s to sort).
        m.registerMigration("v34-exception-list", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "CREATE INDEX exception_list ON exception(category, first_seen, transaction_id, order_id)")
        }
        // Guards on what had none: the links of transactions to the records that told them (a
        // link deleted by hand took a source off `trace`, or left a pending record open for
        // good), and the resolution and identity of exceptions and findings (what they are
        // about, when first seen, when resolved), which only a night's run sets (an exception
        // closed by hand with an UPDATE, or moved to a first seen in 2999, was gone from every
        // list, incremental nights never looking at it again). Their details and figures, which
        // every night refreshes, are not guarded (a trigger per row of a million). A night's run
        // is the last run, not finished yet: `max(id)` is its row, read through the key.
        // `verify` compares the schema with this one, so a guard dropped is said.
        m.registerMigration("v35-link-and-resolution-guards", foreignKeyChecks: .immediate) { db in
            let noNight = "NOT EXISTS (SELECT 1 FROM run WHERE id = (SELECT max(id) FROM run) AND finished_at IS NULL)"
            try db.execute(sql: """
                CREATE TRIGGER transaction_source_no_update BEFORE UPDATE ON transaction_source
                    BEGIN SELECT RAISE(ABORT, 'a transaction''s link to a record that told it is kept as it was made'); END;
                CREATE TRIGGER transaction_source_no_delete BEFORE DELETE ON transaction_source
                    BEGIN SELECT RAISE(ABORT, 'a transaction''s link to a record that told it is never removed'); END;
                CREATE TRIGGER unverified_record_transaction_no_update BEFORE UPDATE ON unverified_record_transaction
                    BEGIN SELECT RAISE(ABORT, 'a record''s link to the transaction it names is kept as it was made'); END;
                CREATE TRIGGER unverified_record_transaction_no_delete BEFORE DELETE ON unverified_record_transaction
                    BEGIN SELECT RAISE(ABORT, 'a record''s link to the transaction it names is never removed'); END;
                CREATE TRIGGER exception_resolved_by_a_run
                    BEFORE UPDATE OF resolved_on, resolved_run_id, first_seen, first_run_id, category, transaction_id, order_id ON exception
                    WHEN \(noNight)
                    BEGIN SELECT RAISE(ABORT, 'an exception is resolved or found again only by a night''s reconciliation'); END;
                CREATE TRIGGER exception_no_delete BEFORE DELETE ON exception
                    BEGIN SELECT RAISE(ABORT, 'an exception is never removed: a night resolves it'); END;
                CREATE TRIGGER exception_added_by_a_run BEFORE INSERT ON exception
                    WHEN \(noNight)
                    BEGIN SELECT RAISE(ABORT, 'an exception is opened only by a night''s reconciliation'); END;
                CREATE TRIGGER finding_resolved_by_a_run
                    BEFORE UPDATE OF resolved_run_id, code, transaction_id, record_id, first_run_id ON finding
                    WHEN \(noNight)
                    BEGIN SELECT RAISE(ABORT, 'a finding is resolved only by a night''s run (`iapledger dismiss` asks the next night to)'); END;
                CREATE TRIGGER finding_no_delete BEFORE DELETE ON finding
                    BEGIN SELECT RAISE(ABORT, 'a finding is never removed: a night resolves it'); END;
                CREATE TRIGGER finding_added_by_a_run BEFORE INSERT ON finding
                    WHEN \(noNight)
                    BEGIN SELECT RAISE(ABORT, 'a finding is opened only by a night''s run'); END;
                """)
        }
        // Pending and rejected records found by their bytes, outcome and reason (and line): a
        // record that repeats one read before (a file sent again under another name, a line
        // twice) is settled as that record's repeat, so each stays on the open lists once; the
        // lookup (one per pending or rejected record, and `verify`'s check of each such
        // resolution) seeks this index of the few records that did not verify (by the hash
        // alone, the same bytes given another reason were read one by one: a night of 30,000
        // of them took 640 s).
        m.registerMigration("v36-repeated-records", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: """
                CREATE INDEX source_record_unverified_sha256 ON source_record(record_sha256, outcome, reason_code, reason, line)
                    WHERE outcome <> 'verified'
                """)
        }
        return m
    }

    /// How this version is named where a ledger's schema is newer than it knows.
    static var toolVersionNote: String { "whose newest is \(newestMigration)" }

    /// The newest migration: what a run writing the ledger records (`run.schema_migration`).
    static let newestMigration = migrator().migrations.last!

    /// The nine posting rules of accounting.md as SQL rows (kind, line, account, net,
    /// commission, proceeds), as migration v13 stores them: written out here, not built from
    /// `PostingRule.all`, so the migration stays as it shipped (`verify` compares the stored
    /// rules with `PostingRule.all`, and a test compares the two).
    static let postingRuleValues = """
        ('sale', 1, 'Assets:AppStore:Receivable', 0, 0, 1), ('sale', 2, 'Expenses:AppStore:Commission', 0, 1, 0),
        ('sale', 3, 'Revenue:InApp:Sales', -1, 0, 0), ('refund', 1, 'Revenue:InApp:Refunds', 1, 0, 0),
        ('refund', 2, 'Expenses:AppStore:Commission', 0, -1, 0), ('refund', 3, 'Assets:AppStore:Receivable', 0, 0, -1),
        ('refund_reversal', 1, 'Revenue:InApp:Refunds', -1, 0, 0), ('refund_reversal', 2, 'Expenses:AppStore:Commission', 0, 1, 0),
        ('refund_reversal', 3, 'Assets:AppStore:Receivable', 0, 0, 1)
        """

    /// In a ledger that stores its postings (schema v12 and before), the first one that is
    /// not the posting its entry's amounts give by the rules, or a count that is not three
    /// per entry; nil when each is. Posting ids run 1, 2, 3 for entry 1, 4, 5, 6 for entry 2
    /// and so on: every entry was written with its three postings, in line order, and none
    /// was ever deleted, so a posting's id names its entry and line. Migration v13 refuses a
    /// ledger with such a posting; `verify` of a ledger not upgraded yet names it.
    static func storedPostingsProblem(_ db: Database) throws -> String? {
        if let differing = try Row.fetchOne(db, sql: """
            WITH rule (kind, line, account, net, commission, proceeds) AS (VALUES \(postingRuleValues))
            SELECT p.id, p.entry_id, e.id IS NULL FROM posting p
            LEFT JOIN entry e ON e.id = p.entry_id
            LEFT JOIN rule r ON r.kind = e.kind AND r.line = p.id - e.id * 3 + 3
            LEFT JOIN account a ON a.id = p.account_id
            WHERE r.kind IS NULL OR a.name IS NOT r.account OR p.currency <> e.currency
               OR p.amount_minor <> r.net * e.net_minor + r.commission * e.commission_minor + r.proceeds * e.proceeds_minor
               OR p.reporting_amount_minor <> r.net * e.net_reporting_minor + r.commission * e.commission_reporting_minor
                                               + r.proceeds * e.proceeds_reporting_minor
            ORDER BY p.id LIMIT 1
            """) {
            let id: Int64 = differing[0], entry: Int64 = differing[1]
            return (differing[2] as Bool)
                ? "posting \(id) names entry \(entry), which the ledger does not hold"
                : "posting \(id) (of entry \(entry)) is not the one its entry's amounts give"
        }
        let entries = try Int64.fetchOne(db, sql: "SELECT count(*) FROM entry") ?? 0
        let postings = try Int64.fetchOne(db, sql: "SELECT count(*) FROM posting") ?? 0
        return postings == entries * 3 ? nil : "the ledger has \(postings) postings for \(entries) entries, not three for each"
    }

    /// `column IN ('a', 'b', 'c', ...)` (three or more quoted values) as `(column = 'a' OR ...)`.
    static func expandCheckLists(_ sql: String) -> String {
        // Not after NOT (a NOT IN list stays as it is); values without quotes or ", " inside.
        let pattern = #"\b(?!(?i:NOT)\b)(\w+) IN \(('[^',]*'(?:, '[^',]*'){2,})\)"#
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return sql }
        let text = sql as NSString
        let out = NSMutableString(string: sql)
        for match in regex.matches(in: sql, range: NSRange(location: 0, length: text.length)).reversed() {
            let column = text.substring(with: match.range(at: 1))
            let values = text.substring(with: match.range(at: 2)).components(separatedBy: ", ")
            out.replaceCharacters(in: match.range, with: "(" + values.map { "\(column) = \($0)" }.joined(separator: " OR ") + ")")
        }
        return out as String
    }
}
