import Foundation
import LedgerCore
import LedgerPost
import LedgerRead
import LedgerReport
import LedgerStore

/// Renders a trace for people (text) or programs (JSON).
public enum TraceOutput {
    /// A trace's Journal rows as the workspace's layouts place them: the sheet's name, and the
    /// rows below its title, subtitle lines and heading (the store counts them for the shipped
    /// layout: one subtitle line, no heading). None when the layout leaves the Journal out.
    /// - Parameter journalRowCap: a month past the cap has its journal in `journal-<date>.csv.gz`
    ///   beside the workbook (row 1 the header), not in the sheet.
    public static func placed(_ t: TransactionTrace, layouts: ReportLayouts, journalRowCap: Int = .max) -> TransactionTrace {
        var t = t
        let layout = t.book == Book.sandbox.rawValue ? layouts.sandbox : layouts.finance
        guard let sheet = layout.sheet("journal"), let table = sheet.tables.first, table.key == "postings" else {
            t.reports = []
            return t
        }
        let shift = sheet.subtitle.count - 1 + (table.heading == nil ? 0 : 1)
        t.reports = t.reports.map { p in
            var p = p
            if p.journalRows > journalRowCap {
                let dir = (p.workbook as NSString).deletingLastPathComponent
                let day = (dir as NSString).lastPathComponent
                p.workbook = "\(dir)/\(t.book == Book.sandbox.rawValue ? "sandbox-journal" : "journal")-\(day).csv.gz"
                p.sheet = "(CSV, line 1 the header)"
                p.rows = p.rows.map { $0 - 4 + 1 }
                p.headerRow = 1
            } else {
                p.sheet = sheet.name
                p.rows = p.rows.map { $0 + shift }
                p.headerRow = 4 + shift
            }
            return p
        }
        return t
    }

    /// An auto-renewable's days of paid service before its purchase, counted again from its
    /// chain as the ledger holds it now (the count the posting made: README, "Subscription
    /// tenure"), with the days its sale was posted with; unchanged for any other product.
    public static func withTenure(_ t: TransactionTrace, reader: LedgerReader, config: WorkspaceConfig,
                                  rules: Rules) throws -> TransactionTrace {
        guard let product = t.product_id, rules.product(product)?.type == .autoRenewable,
              let book = t.book.flatMap(Book.init(rawValue:)),
              let stored = try reader.transaction(t.transaction_id) else { return t }
        let postedWith = t.rules.flatMap { paidDaysStated(in: $0.commissionReason) }
        var out = t
        guard let original = t.original_transaction_id, !original.isEmpty else {
            // No chain to count: the posting counts 0 days too.
            out.subscription = .init(original_transaction_id: nil, grace_days: config.subscriptionGraceDays,
                                     reduced_after_days: config.subscriptionReducedAfterDays, steps: [], paid_days: 0,
                                     posted_with_days: postedWith)
            return out
        }
        let chain = try reader.subscriptionChain(book: book, originalTransactionId: original)
        let items = chain.map { SubscriptionTenure.ChainItem($0.observation, refundReversed: $0.refundReversed) }
        let (days, steps) = SubscriptionTenure.explained(before: stored.observation.purchaseMs, chain: items,
                                                         graceDays: config.subscriptionGraceDays)
        func step(_ kind: String, _ index: Int, days: Int? = nil) -> TransactionTrace.Subscription.Step {
            let o = chain[index].observation
            return .init(kind: kind, transaction_id: o.transactionId, purchase_date: instant(o.purchaseMs),
                         expires_date: o.expiresMs.map(instant), days: days)
        }
        out.subscription = .init(
            original_transaction_id: original, grace_days: config.subscriptionGraceDays,
            reduced_after_days: config.subscriptionReducedAfterDays,
            steps: steps.map { s in
                switch s {
                case .paid(let i, let days): return step("paid", i, days: days)
                case .freeTrial(let i): return step("free_trial", i)
                case .refunded(let i): return step("refunded", i)
                case .noExpiry(let i): return step("no_expiry", i)
                case .restarted(let lapse, let beforeMs): return .init(kind: "restarted", days: lapse, before: instant(beforeMs))
                case .gap(let lapse, let beforeMs): return .init(kind: "gap", days: lapse, before: instant(beforeMs))
                }
            },
            paid_days: days, posted_with_days: postedWith)
        // Strictly later: one bought at the same instant (a receipt listing two at one time) is
        // not "after" it.
        out.subscription?.later_transaction_ids = chain.map(\.observation)
            .filter { $0.purchaseMs > stored.observation.purchaseMs }
            .map(\.transactionId)
        return out
    }

    /// The paid days a commission reason states (`standard: subscription has 92 paid days (< 365)`).
    static func paidDaysStated(in reason: String) -> Int? {
        guard let has = reason.range(of: "subscription has "), let end = reason.range(of: " paid days", range: has.upperBound..<reason.endIndex)
        else { return nil }
        return Int(reason[has.upperBound..<end.lowerBound])
    }

    /// An instant as `2026-08-15T12:00:00Z`, with its milliseconds when it has any
    /// (`...T12:00:00.500Z`): whole days of paid service are counted from these, to the millisecond.
    static func instant(_ ms: Int64) -> String {
        let day = Day(epochMilliseconds: ms)
        let inDay = Int(ms - day.epochMilliseconds), seconds = inDay / 1000, millis = inDay % 1000
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let fraction = millis == 0 ? "" : "." + String(String(millis + 1000).dropFirst())
        return "\(day)T\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60))\(fraction)Z"
    }

    /// Marks each placement whose workbook (or export) is not under the workspace now, with
    /// the registration of the last version iapledger wrote there, if it wrote one; and each
    /// whose file may not hold the rows said (`stale`): the rows are placed from the ledger,
    /// the journal cap and the layouts as they are now, which the file on disk need not be.
    /// - Parameter argument: ` --workspace <folder>` when the command was given one, for the
    ///   commands its notes tell to run (pasted from another folder, they would find no ledger).
    public static func checked(_ t: TransactionTrace, in workspace: Workspace, reader: LedgerReader, argument: String = "") throws -> TransactionTrace {
        var t = t
        t.reports = try t.reports.map { p in
            var p = p
            let url = workspace.root.appendingPathComponent(p.workbook)
            let folder = (p.workbook as NSString).deletingLastPathComponent
            let month = String((folder as NSString).lastPathComponent.prefix(7))
            let again = "`iapledger report --period \(month)\(argument)` writes it again"
            func described(_ f: RegisteredReportFile) -> String {
                "written at \(f.writtenAt) by \(f.runId.map { "night run \($0)" } ?? "`iapledger report` (or `close`)")"
            }
            p.written = FileManager.default.fileExists(atPath: url.path)
            let last = try reader.reportFiles(path: p.workbook).last
            if p.written == false {
                if let last {
                    p.registered = described(last) + ", SHA-256 \(last.sha256)"
                } else if let other = try reader.reportFiles(inFolder: folder).last {
                    // The set was written, without this file: by another journal cap or layouts.
                    p.stale = "not in the set as iapledger wrote it (\(described(other))): the entries posted since, or a change of the journal cap or the layouts, place these rows elsewhere now; \(again)"
                }
            } else if let last {
                let onDisk = try? LineReader.hash(url.path).sha256
                if onDisk != last.sha256 {
                    p.stale = "changed since iapledger last wrote it (\(described(last))): `\(verifyCommand(p.workbook, workspace, argument))` says more; \(again)"
                } else if let book = t.book, let setDay = Day(iso: String((folder as NSString).lastPathComponent)),
                          case let later = try reader.entriesPosted(after: last, book: book, from: setDay.month.firstDay, through: setDay), later > 0 {
                    p.stale = "\(described(last)), before \(later) entr\(later == 1 ? "y" : "ies") of its month posted since: the rows are those it has when written again; \(again)"
                } else if p.workbook.hasSuffix(".xlsx"), let file = WorkbookSheets(url) {
                    if !file.names.contains(p.sheet) {
                        p.stale = "its sheets as written are \(file.names.joined(separator: ", ")), none named \(p.sheet): the layouts have changed since it was written (\(described(last))); \(again)"
                    } else if let header = file.headerRows[p.sheet], header != p.headerRow {
                        // Title or subtitle lines added or taken out since: every row moved by as many.
                        p.rows = p.rows.map { $0 + header - p.headerRow }
                        let d = abs(header - p.headerRow)
                        p.rows_note = "rows as this file has them, its header on row \(header): the layouts changed since it was written (\(described(last))); written now, its header would be on row \(p.headerRow) and these rows \(d) \(header > p.headerRow ? "up" : "down"); \(again)"
                        p.headerRow = header
                    }
                }
            }
            return p
        }
        return t
    }

    /// The `verify --workbook` command for the workbook at `path` (relative to the workspace),
    /// to paste where the trace was run: the file named from the workspace when no
    /// `--workspace` was given, else by its full path (`verify` reads it from the current folder).
    static func verifyCommand(_ path: String, _ workspace: Workspace, _ argument: String) -> String {
        let file = argument.isEmpty ? path : workspace.root.appendingPathComponent(path).standardizedFileURL.path
        return "iapledger verify --workbook \(ShellWord.quoted(file))\(argument)"
    }

    public static func checked(_ o: OrderTrace, in workspace: Workspace, reader: LedgerReader, argument: String = "") throws -> OrderTrace {
        var o = o
        o.transaction = try o.transaction.map { try checked($0, in: workspace, reader: reader, argument: argument) }
        return o
    }

    /// Where the open items of a trace are rows of the last night's lists (`asOf`): the
    /// reconciliation workbook's Pending sheet (a sale waiting for a rule or its order, a record
    /// waiting for verification), its Rejected sheet (a record refused and not settled), its
    /// Exceptions sheet (an open exception), and the book's Run Info (an open finding), each
    /// as the layouts name the sheet and the column to look in (none where a layout leaves the
    /// sheet out). The trace said where its postings were, and nothing of these.
    struct Lists {
        let asOf: Day, layouts: ReportLayouts, workspace: Workspace
        /// The ledger's registrations, to tell a workbook that is not the one iapledger last
        /// wrote at its path (nil: not looked at).
        var reader: LedgerReader? = nil
        /// ` --workspace <folder>` for the commands its notes name (empty: none was given).
        var argument = ""
        /// Each workbook's finding, by path, once hashed.
        let seen = StaleCache()

        final class StaleCache { var byPath: [String: String?] = [:] }

        /// Why the workbook at `path` need not hold the rows said: it is not the file iapledger
        /// last wrote there (nil when it is, or none was registered).
        func stale(_ path: String) -> String? {
            if let known = seen.byPath[path] { return known }
            var said: String? = nil
            if let reader, let last = try? reader.reportFiles(path: path).last,
               let onDisk = try? LineReader.hash(workspace.root.appendingPathComponent(path).path).sha256, onDisk != last.sha256 {
                said = "changed since iapledger last wrote it (at \(last.writtenAt)): `\(TraceOutput.verifyCommand(path, workspace, argument))` says more"
            }
            seen.byPath[path] = .some(said)
            return said
        }

        func workbook(_ w: ReportWorkbook) -> String { Workspace.workbookPath(w, asOf: asOf) }

        /// The sheet `key` of workbook `w` and the title of its column `column`.
        func sheet(_ w: ReportWorkbook, _ key: String, _ column: String) -> (name: String, column: String)? {
            guard let s = layouts[w].sheet(key), let c = s.tables.lazy.flatMap(\.columns).first(where: { $0.key == column }) else { return nil }
            return (s.name, c.title)
        }

        func listing(_ w: ReportWorkbook, _ key: String, _ column: String, _ find: (String) -> String) -> Listing? {
            guard let (name, title) = sheet(w, key, column) else { return nil }
            var l = Listing(workbook: workbook(w), sheet: name, find: find(title))
            l.written = FileManager.default.fileExists(atPath: workspace.root.appendingPathComponent(l.workbook).path)
            if l.written == true { l.stale = stale(l.workbook) }
            return l
        }

        func record(path: String, line: Int, outcome: String) -> Listing? {
            outcome == "pending"
                ? listing(.reconciliation, "pending", "record_or_transaction") { "the row whose \($0) is \(path):\(line) (a record waiting for verification)" }
                : listing(.reconciliation, "rejected", "record") { "the row whose \($0) is \(path):\(line)" }
        }

        func transaction(_ t: TransactionTrace) -> [Listing] {
            var out: [Listing] = []
            // A sale the ledger holds, waiting (a transaction told only by a record waiting for
            // verification is that record's row, below: the Pending sheet lists it by FILE:LINE).
            if t.status == "pending", t.book != nil,
               let sale = listing(.reconciliation, "pending", "record_or_transaction", { "the row whose \($0) is \(t.transaction_id) (its sale, waiting)" }) {
                out.append(sale)
            }
            out += t.sources.filter { $0.outcome != "verified" && $0.resolved_on == nil }
                .compactMap { record(path: $0.path, line: $0.line, outcome: $0.outcome) }
            out += t.order_lines_not_taken.compactMap { record(path: $0.path, line: $0.line, outcome: $0.outcome) }   // (open ones only)
            out += exceptions(t.exceptions)
            // Each open finding on its book's Run Info (a TRANSACTION_CONFLICT on its record's
            // book's), or on every book's when none is known.
            var said = Set<String>()
            for f in t.findings where f.resolved_on == nil {
                let books: [ReportWorkbook] = f.book == Book.sandbox.rawValue ? [.sandbox] : f.book == Book.production.rawValue ? [.finance] : [.finance, .sandbox]
                for w in books where said.insert("\(w) \(f.code)").inserted {
                    if let l = listing(w, "run_info", "transaction", { "the findings' row of code \(f.code) whose \($0) is \(StoreBounds.shownIdentifier(t.transaction_id))" }) { out.append(l) }
                }
            }
            return out
        }

        func exceptions(_ list: [TransactionTrace.Exception]) -> [Listing] {
            list.filter { $0.status == "open" }.flatMap { x -> [Listing] in
                let row = listing(.reconciliation, "exceptions", "transaction") { title in
                    "the \(x.category) row" + (x.transaction_id.map { " whose \(title) is \($0)" } ?? "") + (x.order_id.map { x.transaction_id == nil ? " of order \($0)" : ", order \($0)" } ?? "")
                }
                // A sandbox purchase credited in production is a row of the sandbox book's own
                // list too (an auditor's review: trace named the Exceptions sheet alone).
                let sandbox = x.category != "SANDBOX_CREDITED_IN_PRODUCTION" ? nil
                    : listing(.sandbox, "credited_in_production", "transaction") { title in
                        "the row" + (x.transaction_id.map { " whose \(title) is \($0)" } ?? "") + (x.order_id.map { ", order \($0)" } ?? "")
                    }
                return [row, sandbox].compactMap { $0 }
            }
        }
    }

    /// The trace with the lists of the last night's set (as of `asOf`) where its open items
    /// are rows (`Lists`); none before a first night, or when the layouts cannot be read.
    public static func listed(_ t: TransactionTrace, asOf: Day?, layouts: ReportLayouts?, workspace: Workspace, reader: LedgerReader? = nil, argument: String = "") -> TransactionTrace {
        guard let asOf, let layouts else { return t }
        var t = t
        t.listed = Lists(asOf: asOf, layouts: layouts, workspace: workspace, reader: reader, argument: argument).transaction(t)
        return t
    }

    public static func listed(_ o: OrderTrace, asOf: Day?, layouts: ReportLayouts?, workspace: Workspace, reader: LedgerReader? = nil, argument: String = "") -> OrderTrace {
        guard let asOf, let layouts else { return o }
        var o = o
        o.transaction = o.transaction.map { listed($0, asOf: asOf, layouts: layouts, workspace: workspace, reader: reader, argument: argument) }
        let lists = Lists(asOf: asOf, layouts: layouts, workspace: workspace, reader: reader, argument: argument)
        // Its own open exceptions (a credit naming no transaction is the order's alone) and its
        // lines refused and not settled; the transaction's are listed under it.
        let own = o.exceptions.filter { x in !(o.transaction?.exceptions.contains { $0.category == x.category && $0.order_id == x.order_id && $0.transaction_id == x.transaction_id } ?? false) }
        o.listed = lists.exceptions(own) + o.lines_not_taken.filter { $0.outcome != "verified" && $0.resolved_on == nil }
            .compactMap { lists.record(path: $0.path, line: $0.line, outcome: $0.outcome) }
        return o
    }

    public static func listed(_ r: RecordTrace, asOf: Day?, layouts: ReportLayouts?, workspace: Workspace, reader: LedgerReader? = nil, argument: String = "") -> RecordTrace {
        guard let asOf, let layouts else { return r }
        var r = r
        let lists = Lists(asOf: asOf, layouts: layouts, workspace: workspace, reader: reader, argument: argument)
        // One row per outcome at that FILE:LINE (several versions of the file may hold one open).
        r.listed = Set(r.records.filter { $0.outcome != "verified" && $0.resolved_on == nil }.map(\.outcome)).sorted()
            .compactMap { lists.record(path: r.path, line: r.line, outcome: $0) }
        return r
    }

    /// The text of a trace's listings, under a heading (nothing when there are none).
    static func listingLines(_ listed: [Listing], workspace: String) -> [String] {
        guard !listed.isEmpty else { return [] }
        return ["Listed while open, in the last night's workbooks:"] + listed.map {
            "  \($0.workbook), sheet \($0.sheet): \($0.find)" + ($0.written == false ? " (not under reports/ now)" : "")
                + ($0.stale.map { " (the file there is \($0))" } ?? "")
        }
    }

    public static func placed(_ o: OrderTrace, layouts: ReportLayouts, journalRowCap: Int = .max) -> OrderTrace {
        var o = o
        o.transaction = o.transaction.map { placed($0, layouts: layouts, journalRowCap: journalRowCap) }
        return o
    }

    /// A signed price's milliunits in the currency's units, as booked (`signed price 1190
    /// milliunits` reads ` (1.19 EUR)`); empty for any other price source.
    static func signedPriceInUnits(_ source: String, currency: String?) -> String {
        guard let currency, let exponent = Currency.exponent(currency), source.hasPrefix("signed price "),
              let milli = Int64(source.dropFirst("signed price ".count).prefix { $0.isNumber || $0 == "-" }) else { return "" }
        return " (\(Currency.format(minor: Currency.minorUnits(milliunits: milli, exponent: exponent), currency: currency)) \(currency))"
    }

    /// How an entry's figures were computed (accounting.md, each rounded half to even once),
    /// with the rates its sale recorded: gross, tax and net, commission and proceeds, and the
    /// reporting amounts; a refund's share of its sale; a reversal's negation. Lines to print
    /// under the entry's postings (none for an entry with no figures).
    static func computation(of e: TransactionTrace.Entry, sale: TransactionTrace.Entry?, rules: AppliedRules?) -> [String] {
        guard let f = e.figures else { return [] }
        let cur = f.currency, rep = f.reportingCurrency
        func m(_ minor: Int64) -> String { "\(Currency.format(minor: minor, currency: cur)) \(cur)" }
        func r(_ minor: Int64) -> String { "\(Currency.format(minor: minor, currency: rep)) \(rep)" }
        switch e.kind {
        case EntryKind.sale.rawValue:
            guard let rules else { return [] }
            // Each formula's result is computed here from G and the recorded rates, as posting
            // computes it: a figure the entry holds otherwise (changed after it was posted) is
            // said beside it, not printed as the formula's result.
            let c = ExactDecimal(rules.taxRate).flatMap { tax in ExactDecimal(rules.commissionRate).flatMap { rate in ExactDecimal(rules.fxRate).map { fx in
                Poster.figures(grossMinor: f.grossMinor, currency: cur, taxRate: tax, taxIncluded: rules.taxIncluded,
                               commissionRate: rate, fx: fx, reportingCurrency: rep) } } }
            func got(_ computed: Int64?, _ held: Int64, _ show: (Int64) -> String) -> String {
                guard let computed, computed != held else { return show(held) }
                return "\(show(computed)), but the entry holds \(show(held)) (changed after it was posted: `iapledger verify` says more)"
            }
            var lines = ["computed (accounting.md; each figure rounded half to even once):"]
            lines.append("  gross G = \(m(f.grossMinor)); "
                + (rules.taxIncluded
                    ? "net N = round(G / (1 + \(rules.taxRate))) = \(got(c?.netMinor, f.netMinor, m)); tax T = G - N = \(got(c?.taxMinor, f.taxMinor, m)) (a memo figure: the store remits it)"
                    : "net N = G = \(got(c?.netMinor, f.netMinor, m)) (tax \(rules.taxRate) is added to prices, not in G: no tax in the figures)"))
            lines.append("  commission C = round(N x \(rules.commissionRate)) = \(got(c?.commissionMinor, f.commissionMinor, m)); proceeds P = N - C = \(got(c?.proceedsMinor, f.proceedsMinor, m))")
            let ec = Currency.exponent(cur) ?? 2, er = Currency.exponent(rep) ?? 2
            let k = ec == er ? "" : " x 10^(\(er) - \(ec))"
            lines.append("  in \(rep) at \(rules.fxRate) (\(cur) \(rules.fxMonth))\(k.isEmpty ? "" : ", minor units scaled by 10^(\(er) - \(ec))"): "
                + "N_r = round(N x \(rules.fxRate)\(k)) = \(got(c?.netReportingMinor, f.netReportingMinor, r)), C_r = round(C x \(rules.fxRate)\(k)) = \(got(c?.commissionReportingMinor, f.commissionReportingMinor, r)), "
                + "P_r = N_r - C_r = \(got(c?.proceedsReportingMinor, f.proceedsReportingMinor, r)); gross \(got(c?.grossReportingMinor, f.grossReportingMinor, r)) (a memo figure, as G)")
            return lines
        case EntryKind.refund.rawValue:
            let p = e.refund_percentage ?? 100_000
            if p == 100_000 { return ["computed: the sale's own amounts, reporting amounts included (N' = N, C' = C, P' = P)"] }
            let share = "\(ExactDecimal(mantissa: p, scale: 3))%"
            guard let s = sale?.figures else { return ["computed: \(share) of the sale's amounts, each rounded half to even once"] }
            return ["computed: \(share) of the sale's amounts, each rounded half to even once (accounting.md, prorated refund):",
                    "  N' = round(\(m(s.netMinor)) x \(share)) = \(m(f.netMinor)), C' = round(\(m(s.commissionMinor)) x \(share)) = \(m(f.commissionMinor)), P' = N' - C' = \(m(f.proceedsMinor))",
                    "  N'_r = round(\(r(s.netReportingMinor)) x \(share)) = \(r(f.netReportingMinor)), C'_r = round(\(r(s.commissionReportingMinor)) x \(share)) = \(r(f.commissionReportingMinor)), P'_r = N'_r - C'_r = \(r(f.proceedsReportingMinor))",
                    "  memo figures: gross G' = round(\(m(s.grossMinor)) x \(share)) = \(m(f.grossMinor)), tax T' = G' - N' = \(m(f.taxMinor)), gross in \(rep) round(\(r(s.grossReportingMinor)) x \(share)) = \(r(f.grossReportingMinor))"]
        case EntryKind.refundReversal.rawValue:
            return ["computed: the exact negation of the refund entry (REFUND_REVERSED)"]
        default:
            return []
        }
    }

    /// An order version's storefront (what prices a sale with none of its own) and account
    /// token, where it has them.
    static func orderDetails(_ o: TransactionTrace.Order) -> String {
        (o.storefront.map { ", storefront \($0)" } ?? o.note.map { " (\($0))" } ?? "") + (o.app_account_token.map { ", token \($0)" } ?? "")
    }

    public static func json<T: Encodable>(_ value: T) -> String {
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return TerminalText.jsonEscapingInvisible(String(decoding: (try? enc.encode(value)) ?? Data("{}".utf8), as: UTF8.self)) + "\n"
    }

    /// - Parameter workspace: ` --workspace <folder>` for the commands it prints to paste, as
    ///   the command was given it (empty for the current folder).
    public static func text(_ t: TransactionTrace, indent: String = "", workspace: String = "") -> String {
        var out: [String] = []
        func line(_ s: String) { out.append(indent + s) }
        line("Transaction \(StoreBounds.shownIdentifier(t.transaction_id)): \(t.status)" + (t.book.map { " in the \($0) book" } ?? "")
             + (t.status == "free" ? " (\(t.free_because ?? "free"): no money moved, so no entry)" : "")
             + (t.status == "dismissed" ? " (known only from records an operator dismissed, below: never verified, nothing posted)" : "")
             + (t.status == "unknown to the store" && t.sources.isEmpty ? " (no record of the store's names it: only the backend's orders lines below)" : ""))
        if let r = t.pending_reason { line("  waits: \(r)") }
        if let p = t.product_id {
            line("  product \(p) x \(t.quantity ?? 1), purchased \(t.purchase_date ?? "?")" + (t.original_transaction_id.map { ", original transaction \($0)" } ?? ""))
        }
        if let r = t.refund_date { line("  refunded on \(r)" + (t.refund_reversed_date.map { ", refund reversed on \($0)" } ?? "")) }
        if let share = t.store_refund_share {
            let word = share == 0 ? "reversed again" : share == 100_000 ? "refunded in full" : "refunded \(ExactDecimal(mantissa: share, scale: 3))%"
            line("  the store's latest word: \(word)\(t.store_refund_date.map { " on \($0)" } ?? "") (beyond the one refund and one reversal the ledger posts: reconciliation takes it)")
        }
        line("Sources (\(t.sources.count)):")
        for s in t.sources {
            line("  \(s.path):\(s.line)  file sha256 \(s.sha256)  read by the night of \(s.read_on)")
            line("    \(s.outcome)" + (s.code.map { " \($0)" } ?? "") + (s.environment.map { ", environment \($0)" } ?? "") + (s.verification.map { ": \($0)" } ?? ""))
            if !s.text_holds {
                line("    WARNING: the text the ledger keeps of this record no longer hashes to its record sha256 \(s.record_sha256): changed after it was read; run `iapledger verify`")
            }
            if let on = s.resolved_on {
                line("    settled by the night of \(on)" + (s.resolution.map { ": \($0)" } ?? "") + " (no longer open)")
            }
            if let text = s.text { sourceText(text, indent: indent + "    ", into: &out) }
        }
        if let r = t.rules {
            line("Rules applied:")
            line("  storefront \(r.storefront) (from \(r.storefrontSource), rule effective \(r.storefrontEffectiveFrom)); tax \(r.taxRate) \(r.taxIncluded ? "included in" : "added to") prices")
            // A later version of that order naming another storefront (or another transaction)
            // moves no entry: which version gave the storefront is said (an auditor's review: the
            // trace showed v2's storefront just below the v1 storefront the sale was booked at).
            if r.storefrontSource.hasPrefix("order ") {
                let orderId = String(r.storefrontSource.dropFirst(6))
                let versions = t.orders.filter { $0.order_id == orderId }
                func code(_ o: TransactionTrace.Order) -> String? { o.storefront.map(Currency.isoUppercased) }
                if let latest = versions.last, latest.transaction_id != t.transaction_id || code(latest) != r.storefront {
                    let giving = versions.filter { $0.transaction_id == t.transaction_id && code($0) == r.storefront }.map { "v\($0.version)" }
                    line("    (the storefront of order \(orderId) \(giving.isEmpty ? "as read when the sale posted" : giving.joined(separator: ", ")); its latest version, v\(latest.version) (\(latest.path):\(latest.line)), "
                         + (latest.transaction_id != t.transaction_id ? "names \(latest.transaction_id.map { "transaction \($0)" } ?? "no transaction")"
                            : "names \(code(latest).map { "storefront \($0)" } ?? "no storefront")")
                         + ": a version read after the sale posted moves no entry)")
                }
            }
            line("  price: \(r.priceSource)" + signedPriceInUnits(r.priceSource, currency: t.entries.first { $0.kind == "sale" }?.postings.first?.currency))
            line("  commission \(r.commissionRate): \(r.commissionReason)")
            line("  FX \(r.fxRate) for \(r.fxMonth)")
        }
        if let sub = t.subscription, sub.original_transaction_id == nil {
            line("Subscription tenure: no original transaction id, so no chain: 0 paid days before this purchase")
        } else if let sub = t.subscription, let original = sub.original_transaction_id {
            line("Subscription tenure (original transaction \(original), its chain as the ledger holds it now; a lapse over \(sub.grace_days) days restarts the count; reduced rate from \(sub.reduced_after_days) paid days; by the config now):")
            for s in sub.steps {
                let period = "\(s.purchase_date ?? "?") .. \(s.expires_date ?? "no expiry")  \(s.transaction_id ?? "")"
                switch s.kind {
                case "paid": line("  \(period): \(s.days ?? 0) days paid")
                case "free_trial": line("  \(period): free trial or zero-price offer, no days (keeps the subscription alive)")
                case "refunded": line("  \(period): fully refunded before this purchase (or at its instant, as an upgrade's), not counted")
                case "no_expiry": line("  \(period): no expiry date, not counted")
                case "gap": line("  lapse of \(s.days ?? 0) whole days before the purchase of \(s.before ?? "?"): within the \(sub.grace_days)-day grace, the count goes on")
                default: line("  lapse of \(s.days ?? 0) whole days before the purchase of \(s.before ?? "?"): over the \(sub.grace_days)-day grace, the count starts again from 0")
                }
            }
            line("  = \(sub.paid_days) paid days before this purchase")
            if let posted = sub.posted_with_days, posted != sub.paid_days {
                line("  (its sale was posted with \(posted) paid days: periods of the chain arrived or were refunded after it was posted, or the tenure settings changed; a posted sale keeps its rate)")
            }
            if !sub.later_transaction_ids.isEmpty {
                let n = sub.later_transaction_ids.count
                line("  later in the subscription: \(n) transaction\(n == 1 ? "" : "s") purchased after this one, "
                     + sub.later_transaction_ids.prefix(10).joined(separator: ", ") + (n > 10 ? ", ... (\(n - 10) more)" : "")
                     + " (`iapledger trace <id>\(workspace)` for each)")
            }
        }
        // Amounts right-aligned, so a column of postings reads as one.
        func right(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        line("Entries (\(t.entries.count)):")
        for e in t.entries {
            line("  #\(e.entry_id) \(e.kind) on \(e.date)" + (e.late ? " (late; original date \(e.original_date))" : "")
                 + (e.refund_percentage.map { $0 == 100_000 ? "" : e.kind == EntryKind.refundReversal.rawValue
                        ? " (reverses the \(ExactDecimal(mantissa: $0, scale: 3))% refund)" : " (\(ExactDecimal(mantissa: $0, scale: 3))% refunded)" } ?? "")
                 + ", posted by run \(e.run_id)\(e.run_as_of.map { " (the night of \($0))" } ?? ""), hash \(e.hash)"
                 + (e.hash_holds ? "" : " (WARNING: this hash no longer follows from the entry and the one before it: changed after it was written; run `iapledger verify`)"))
            for p in e.postings {
                line("      \(p.account.padding(toLength: 30, withPad: " ", startingAt: 0)) \(right(Currency.format(minor: p.amount_minor, currency: p.currency), 12)) \(p.currency)   reporting \(right(Currency.format(minor: p.reporting_amount_minor, currency: e.reporting_currency), 12)) \(e.reporting_currency)")
            }
            for step in Self.computation(of: e, sale: t.entries.first { $0.kind == "sale" }, rules: t.rules) { line("      " + step) }
        }
        if !t.notifications.isEmpty {
            line("Notifications (\(t.notifications.count)):")
            for n in t.notifications { line("  \(n.type)\(n.subtype.map { "/\($0)" } ?? "") \(n.uuid) signed \(n.signed_date ?? "?")") }
        }
        line("Orders (\(t.orders.count) \(t.orders.count == 1 ? "version" : "versions")):")
        for o in t.orders {
            // A version naming another transaction (or none): the credit moved away from this one.
            let elsewhere = o.transaction_id == t.transaction_id ? "" : ", names \(o.transaction_id.map { "transaction \($0)" } ?? "no transaction"), not this one"
            line("  \(o.order_id) v\(o.version) \(o.path):\(o.line): account \(o.account_id)\(elsewhere), \(o.product_id) x \(o.quantity), \(o.credited_units) units, \(o.environment)\(orderDetails(o)), credited \(o.credited_at)" + (o.reversed_at.map { ", reversed \($0)" } ?? ""))
            if let text = o.text { sourceText(text, indent: indent + "    ", into: &out) }
        }
        if !t.order_lines_not_taken.isEmpty {
            line("Orders lines naming it that were not taken (\(t.order_lines_not_taken.count)):")
            for l in t.order_lines_not_taken {
                line("  \(l.path):\(l.line) \(l.outcome), read \(l.read_on): \(l.reason)")
                if let text = l.text { sourceText(text, indent: indent + "    ", into: &out) }
                line("    still open: credits nothing until a valid line of its order is read (`iapledger trace \(ShellWord.quoted("\(l.path):\(l.line)"))\(workspace)`)")
            }
        }
        if let r = t.reconciliation, !r.note.isEmpty { line("Reconciliation with the backend's orders: \(r.note)") }
        line("Exceptions (\(t.exceptions.count)):")
        for x in t.exceptions {
            line("  \(x.category) \(x.status), first seen \(x.first_seen), last seen \(x.last_seen)" + (x.resolved_on.map { ", resolved \($0)" } ?? "") + (x.order_id.map { ", order \($0)" } ?? ""))
            line("    \(x.detail)")
        }
        if !t.findings.isEmpty {
            line("Findings:")
            for f in t.findings {
                line("  \(f.code) first seen \(f.first_seen)\(f.resolved_on.map { ", resolved \($0)" } ?? ", open"): \(f.message)")
                if let r = f.resolution { line("    \(r)") }
            }
        }
        if let after = t.dated_after_reports {
            line("In the reports: " + after)
        }
        if !t.reports.isEmpty {
            line(t.dated_after_reports == nil ? "In the reports:" : "In the reports, its entries dated on or before it:")
            for p in t.reports {
                let month = (((p.workbook as NSString).deletingLastPathComponent as NSString).lastPathComponent).prefix(7)
                line("  \(p.workbook), sheet \(p.sheet), rows \(p.rows.map(String.init).joined(separator: ", "))"
                     + (p.stale.map { " (\($0))" } ?? p.rows_note.map { " (\($0))" }
                        ?? (p.written == false
                            ? (p.registered.map { " (missing: iapledger wrote it (\($0)), and it is no longer under reports/: moved or deleted since; `iapledger report --period \(month)\(workspace)` writes it again)" }
                               ?? " (not written yet: `iapledger report --period \(month)\(workspace)` writes it)")
                            : "")))
            }
        }
        for l in listingLines(t.listed, workspace: workspace) { line(l) }
        return out.map(TerminalText.visible).joined(separator: "\n") + "\n"
    }

    /// A free transaction's kind, where the store says it: a trial and a family member's
    /// access are both stored as free (no money moved), and the trace said "a free trial ...,
    /// or a family member's shared access". Told from the verified record that made it free:
    /// a signed one is free only as a family member's (a signed trial has a price of 0); a
    /// legacy receipt's item says `is_trial_period` or `in_app_ownership_type`.
    public static func withFreeKind(_ t: TransactionTrace, reader: LedgerReader) throws -> TransactionTrace {
        guard t.status == "free", t.free_because?.hasPrefix("a free trial") == true else { return t }
        var out = t
        // Receipts first: a receipt's item says which; a signed record only ever family access.
        let verified = t.sources.filter { $0.outcome == "verified" }
        for source in verified where !source.path.hasPrefix("inbox/signed/") {
            // (Cosmetic: a record that cannot be read leaves the words as they were.)
            guard let text = (try? reader.recordText(path: source.path, line: source.line, recordSHA256: source.record_sha256)) ?? nil,
                  let response = try? LegacyReceiptParser.parse(Substring(text)),
                  let item = response.items.first(where: { $0.transactionId == t.transaction_id }) else { continue }
            if item.isFamilyShared {
                out.free_because = "a family member's shared access (in_app_ownership_type FAMILY_SHARED in \(source.path):\(source.line))"
                return out
            }
            if item.isTrialPeriod {
                out.free_because = "a free trial (is_trial_period true in \(source.path):\(source.line))"
                return out
            }
        }
        if let signed = verified.first(where: { $0.path.hasPrefix("inbox/signed/") }) {
            out.free_because = "a family member's shared access (inAppOwnershipType FAMILY_SHARED in its signed record \(signed.path):\(signed.line))"
        }
        return out
    }

    /// What reconciliation made of the transaction, said in words: out of scope (its
    /// product's type is not reconciled: no exception and no match), matched with which orders,
    /// or neither (its exceptions, or no order, say why).
    /// The trace with the lines of the backend's orders files not taken (rejected or pending),
    /// still open, that name it as their transaction: the field in its `transaction_id` column
    /// under the file's header (or, in a file refused whole, any field that is its id).
    public static func withOrderLinesNotTaken(_ t: TransactionTrace, reader: LedgerReader, withText: Bool) throws -> TransactionTrace {
        var out = t
        out.order_lines_not_taken = try reader.orderLinesNotTaken(holding: t.transaction_id, withText: withText).filter {
            namesTransaction(t.transaction_id, line: $0.text, header: $0.header)
        }.map(\.line)
        return out
    }

    /// Whether an orders line names `id` as its transaction (see `withOrderLinesNotTaken`).
    static func namesTransaction(_ id: String, line: String, header: String?) -> Bool {
        // Each field as the night reads an id (`CSV.idTrimmed`: a no-break space after an id is
        // part of it, and the line was refused for it); each row once.
        func rows(_ text: String) -> [[String]?] { CSV.parseRows(Substring(text)).map { (try? $0.get())?.fields.map(CSV.idTrimmed) } }
        let parsed = rows(line)
        // Its first row's fields; of a line broken by its quoting, its comma-separated pieces,
        // quotes taken off.
        let values = (parsed.first ?? nil) ?? line.split(separator: ",", omittingEmptySubsequences: false).map {
            CSV.idTrimmed(String($0)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        // By its place under the header, when the line has a field there (one with more fields,
        // or fewer after it, keeps it there: a field further on that holds the id is another
        // column's).
        if let header {
            if let names = rows(header).first ?? nil, let i = names.firstIndex(of: "transaction_id") {
                return i < values.count && values[i] == id
            }
        } else {
            // A file refused whole keeps its text whole, header first: each row after it, by the
            // header's transaction_id column when it has one, else by any field.
            let whole = parsed.compactMap { $0 }
            if whole.count > 1 {
                let i = whole[0].firstIndex(of: "transaction_id")
                return whole.dropFirst().contains { row in i.map { $0 < row.count && row[$0] == id } ?? row.contains(id) }
            }
        }
        return values.contains(id)
    }

    public static func withReconciliation(_ t: TransactionTrace, config: WorkspaceConfig, rules: Rules?) -> TransactionTrace {
        // A transaction no verified record told yet is not reconciled at all: no such part.
        guard t.book != nil else { var out = t; out.reconciliation = nil; return out }
        guard var r = t.reconciliation, let product = t.product_id else { return t }
        var out = t
        let type = rules?.product(product)?.type
        r.in_scope = rules == nil ? nil : type.map { config.reconciliationScope.contains($0) } ?? true
        let scope = ProductType.names(config.reconciliationScope)
        if r.in_scope == false, let type, t.exceptions.contains(where: { $0.status == "open" }) {
            r.note = "not reconciled for itself: \(product) is \(type.rawValue), and the scope is \(scope) ([reconciliation] scope in iapledger.toml); an order crediting a product in scope against it is checked: see its open exceptions"
        } else if r.in_scope == false, let type {
            r.note = "not reconciled: \(product) is \(type.rawValue), and the scope is \(scope) ([reconciliation] scope in iapledger.toml): the orders naming it are not checked against it, so no exception and no match"
        } else if !r.matched_orders.isEmpty {
            r.note = "matched with order\(r.matched_orders.count == 1 ? "" : "s") \(r.matched_orders.joined(separator: ", ")) as of the last run (no exception between them)"
        } else if t.exceptions.contains(where: { $0.status == "open" }) {
            r.note = "not matched: see its open exceptions"
        } else {
            // Why, from what the trace holds: a refund in full standing (the store's latest word
            // where it goes beyond the entries), the orders' latest versions. (A sale refunded in
            // part, or a sandbox one with a sandbox order, is matched as any other.)
            var why: [String] = []
            let lastRefund = t.entries.last { $0.kind == "refund" || $0.kind == "refund_reversal" }
            let inFull = t.store_refund_share.map { $0 >= 100_000 }
                ?? (lastRefund?.kind == "refund" && (lastRefund?.refund_percentage ?? 100_000) >= 100_000)
            if inFull { why.append("it is refunded in full (a sale refunded in full is matched to no order)") }
            var latest: [String: TransactionTrace.Order] = [:]
            for o in t.orders { latest[o.order_id] = o }
            let active = latest.values.filter { $0.reversed_at == nil && $0.transaction_id == t.transaction_id }
            if t.orders.isEmpty {
                why.append("no order names it")
            } else if active.isEmpty {
                let ids = latest.keys.sorted().joined(separator: ", ")
                why.append("no active order names it now (\(ids): \(latest.count == 1 ? "its latest version is reversed or names" : "their latest versions are reversed or name") another transaction)")
            }
            r.note = why.isEmpty ? "not matched (no active order names it, or the sale is refunded or in the sandbox book)" : "not matched: " + why.joined(separator: "; ")
        }
        out.reconciliation = r
        return out
    }

    /// A record's text as read, under its heading: each of its lines indented, so a JSON
    /// document's record spread over lines stays readable and cannot pass for trace output.
    /// Lines are split at each line feed byte (a CRLF document too); the text outputs then
    /// show every control character but tab as `\u{D}` (`TerminalText.visible`), so none reaches the terminal raw.
    static func sourceText(_ text: String, indent: String, into out: inout [String]) {
        out.append(indent + "text as read (\(text.utf8.count) bytes):")
        for piece in text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false) {
            out.append(indent + "  | " + String(decoding: piece, as: UTF8.self))
        }
    }

    /// An id that is no transaction's or order's own but the original transaction id of some:
    /// a subscription whose first purchase the ledger has not read (or read under another id).
    public static func subscription(_ originalId: String, _ items: [(id: String, book: String, purchaseMs: Int64, product: String, status: String)],
                                    json asJSON: Bool, workspace: String = "") -> String {
        if asJSON {
            struct Item: Encodable { var transaction_id, book, purchase_date, product_id, status: String }
            struct Out: Encodable { var original_transaction_id: String; var transactions: [Item] }
            return json(Out(original_transaction_id: originalId, transactions: items.map {
                Item(transaction_id: $0.id, book: $0.book, purchase_date: instant($0.purchaseMs), product_id: $0.product, status: $0.status)
            }))
        }
        var out = ["Original transaction \(originalId): no transaction or order has this id; it is the original transaction id of \(items.count) transaction\(items.count == 1 ? "" : "s") in the ledger (a subscription's purchase and renewals; its first purchase, whose id this is, has not been read):"]
        for i in items {
            out.append("  \(i.id)  \(instant(i.purchaseMs))  \(i.product)  \(i.book)  \(i.status)")
        }
        out.append("`iapledger trace <id>\(workspace)` traces each (the latest shows the subscription's tenure: its paid days before it)")
        return out.map(TerminalText.visible).joined(separator: "\n") + "\n"
    }

    public static func text(_ t: RecordTrace, workspace: String = "") -> String {
        let versions = Set(t.records.map(\.sha256)).count
        var out: [String] = ["Record \(t.path):\(t.line): \(t.records.count) record\(t.records.count == 1 ? "" : "s") read at this line, from \(versions) version\(versions == 1 ? "" : "s") of the file"]
        for r in t.records {
            out.append("  #\(r.record_id)  file sha256 \(r.sha256)  read by the night of \(r.read_on)")
            out.append("    \(r.outcome)" + (r.environment.map { ", environment \($0)" } ?? "")
                       + ((r.reason_code ?? r.reason).map { _ in ": " + [r.reason_code, r.reason].compactMap { $0 }.joined(separator: ": ") } ?? ""))
            if !r.text_holds {
                out.append("    WARNING: the text the ledger keeps of this record no longer hashes to its record sha256 \(r.record_sha256): changed after it was read; run `iapledger verify`")
            }
            if let on = r.resolved_on { out.append("    settled by the night of \(on)" + (r.resolution.map { ": \($0)" } ?? "") + " (no longer open)") }
            else if r.outcome != "verified" { out.append("    still open (`iapledger dismiss \(ShellWord.quoted("\(t.path):\(t.line)")) --reason \"<why>\"\(workspace)` takes it off the open lists once no later record will settle it)") }
            if !r.transaction_ids.isEmpty { out.append("    transactions: \(r.transaction_ids.joined(separator: ", ")) (`iapledger trace <id>\(workspace)` for each)") }
            if let o = r.order_id { out.append("    order: \(o) (`iapledger trace \(ShellWord.quoted(o))\(workspace)`)") }
            if let text = r.text { sourceText(text, indent: "    ", into: &out) }
        }
        out += listingLines(t.listed, workspace: workspace)
        return out.map(TerminalText.visible).joined(separator: "\n") + "\n"
    }

    public static func text(_ o: OrderTrace, workspace: String = "") -> String {
        var out = "Order \(o.order_id): \(o.versions.count) version(s)\n"
        func textLines(_ text: String?) {
            guard let text else { return }
            var lines: [String] = []
            sourceText(text, indent: "    ", into: &lines)
            out += lines.joined(separator: "\n") + "\n"
        }
        for v in o.versions {
            out += "  v\(v.version) \(v.path):\(v.line): account \(v.account_id), transaction \(v.transaction_id ?? "(none)"), \(v.product_id) x \(v.quantity), \(v.credited_units) units, \(v.environment)\(orderDetails(v)), credited \(v.credited_at)\(v.reversed_at.map { ", reversed \($0)" } ?? "")\n"
            textLines(v.text)
        }
        if !o.lines_not_taken.isEmpty {
            out += "Lines naming it that were not taken (\(o.lines_not_taken.count)):\n"
            for l in o.lines_not_taken {
                out += "  \(l.path):\(l.line) \(l.outcome), read \(l.read_on): \(l.reason)\n"
                textLines(l.text)
                // (A line of a file sent again was read as it is: nothing waits.)
                if l.outcome != "verified" {
                    out += l.resolved_on.map { "    resolved on \($0): \(l.resolution ?? "")\n" }
                        ?? "    still open: a valid line for this order read after it resolves it\n"
                }
            }
        }
        if let naming = o.records_naming_it {
            out += "No line of the backend's orders files names it; store records naming it (their receipt wrapper's order_id) (\(naming.count)):\n"
            for r in naming {
                out += "  \(r.path):\(r.line) \(r.outcome), read \(r.read_on)"
                    + (r.transaction_ids.isEmpty ? "" : ": transaction\(r.transaction_ids.count == 1 ? "" : "s") \(r.transaction_ids.joined(separator: ", "))") + "\n"
            }
        }
        out += "Exceptions (\(o.exceptions.count)):\n"
        for x in o.exceptions {
            // An order's exceptions may be about different transactions (its versions named several).
            let about = ", " + (x.transaction_id.map { "transaction \($0)" } ?? "no transaction")
            out += "  \(x.category) \(x.status)\(about), first seen \(x.first_seen), last seen \(x.last_seen)\(x.resolved_on.map { ", resolved \($0)" } ?? ""): \(x.detail)\n"
        }
        for l in listingLines(o.listed, workspace: workspace) { out += l + "\n" }
        if let t = o.transaction {
            out += (o.versions.isEmpty ? "The transaction its records report:\n" : "The transaction it names:\n") + text(t, indent: "  ", workspace: workspace)
        } else if o.records_naming_it != nil {
            out += "Its records report \(Set(o.records_naming_it!.flatMap(\.transaction_ids)).count > 1 ? "several transactions (`iapledger trace <id>\(workspace)` for each)" : "no transaction the ledger holds").\n"
        } else if o.versions.isEmpty {
            out += "No line of it was taken (only the lines not taken, above): it credits nothing in the ledger until a valid line of it is read.\n"
        } else if let id = o.versions.last?.transaction_id, !id.isEmpty {
            out += "It names transaction \(id), which the ledger does not know (no record of it was read).\n"
        } else {
            out += "It names no transaction.\n"
        }
        // A reason may quote a refused value as it was read: no control character reaches the terminal.
        return out.split(separator: "\n", omittingEmptySubsequences: false).map { TerminalText.visible(String($0)) }.joined(separator: "\n")
    }
}
