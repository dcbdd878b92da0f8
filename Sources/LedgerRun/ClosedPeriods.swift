import Foundation
import LedgerCore
import LedgerStore

/// A refusal about closed periods the user can act on (a month already closed, a month not
/// ended yet, a config that would reopen a month). One line, non-zero exit.
public struct PeriodError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Closed periods (accounting.md "Closed periods"): the months through the effective
/// closed-through month are closed; an entry dated in them posts on the first day of the first
/// open month, marked late. The effective month is the latest of the config's
/// `[periods] closed_through` and the closes recorded in the ledger, and it only moves forward.
public enum ClosedPeriods {
    /// Who closes: `$USER`, else `$LOGNAME`, else "unknown".
    public static func currentUser(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        for key in ["USER", "LOGNAME"] {
            if let v = environment[key], !v.isEmpty { return v }
        }
        return "unknown"
    }

    /// Reconciles the config with the ledger at the start of a run and returns the effective
    /// closed-through month. A config month later than the ledger's is recorded as closed by
    /// config; an earlier one is refused (a month is never reopened silently).
    static func effective(configMonth: Month?, configPath: String, writer: LedgerWriter, asOf: Day, lastNight: Day?,
                          closedAt: String, closedBy: String) throws -> Month? {
        let latest = try writer.latestClose()
        guard let configMonth else { return latest?.month }
        if let latest, configMonth < latest.month {
            throw PeriodError("\(configPath): [periods] closed_through = \"\(configMonth)\" is earlier than \(latest.month), which the ledger has closed (\(describe(latest))); closed months are never reopened: set closed_through = \"\(latest.month)\" or later, or remove it")
        }
        if latest == nil || configMonth > latest!.month {
            // What to set instead: a month the ledger may close now, not before its own close.
            let upTo = latestClosable(asOf: asOf, lastNight: lastNight)
            func instead() -> String {
                guard let upTo else { return "remove it" }
                if let latest {
                    return upTo <= latest.month ? "set closed_through = \"\(latest.month)\" (the ledger's close) or remove it"
                        : "set closed_through to a month from \(latest.month) (the ledger's close) to \(upTo), or remove it"
                }
                return "set closed_through to \(upTo) or earlier, or remove it"
            }
            // As `close` refuses it: a month still running (or whose last night has not run)
            // would take every later sale of it late, into no workbook of its own.
            guard asOf > configMonth.lastDay else {
                throw PeriodError("\(configPath): [periods] closed_through = \"\(configMonth)\" names a month that has not ended (this night is as of \(asOf)): a month can be closed from \(configMonth.next.firstDay) on, by the first night after its last day; \(instead()). Nothing was written")
            }
            guard let lastNight else {
                throw PeriodError("\(configPath): [periods] closed_through = \"\(configMonth)\" would close a month before any night has run on this ledger: everything dated \(configMonth.lastDay) or earlier that this first night reads would post late, on \(configMonth.next.firstDay), and the closed months' workbooks would hold none of it; remove closed_through, run the nights through \(configMonth.lastDay) (`iapledger run --as-of \(configMonth.lastDay)`), then close. Nothing was written")
            }
            if lastNight < configMonth.lastDay {
                throw PeriodError("\(configPath): [periods] closed_through = \"\(configMonth)\" would close a month whose last night has not run: the last night ran as of \(lastNight), so what arrives for \(lastNight + 1) to \(configMonth.lastDay) is not in the books and would post late; \(instead()), run `iapledger run --as-of \(configMonth.lastDay)`, then close. Nothing was written")
            }
            try writer.recordClose(PeriodClose(month: configMonth, closedAt: closedAt, closedBy: closedBy, source: .config))
        }
        return configMonth
    }

    /// The latest month a night as of `asOf` may close, after nights through `lastNight`: one
    /// that has ended by `asOf` and whose last day the nights have run through (nil: none ran).
    static func latestClosable(asOf: Day, lastNight: Day?) -> Month? {
        guard let lastNight else { return nil }
        return min(lastNight == lastNight.month.lastDay ? lastNight.month : lastNight.month.previous, asOf.month.previous)
    }

    /// "by alice on 2026-10-02T09:00:00Z with the close command"
    public static func describe(_ c: PeriodClose) -> String {
        "by \(c.closedBy) on \(c.closedAt) " + (c.source == .config ? "through [periods] closed_through" : "with the close command")
    }

    /// What `iapledger close` did.
    public struct CloseResult {
        public var close: PeriodClose
        public var previous: PeriodClose?
        public var ledgerPath: String
        /// Set when the config names an earlier month: the next run would refuse until it is updated.
        public var configWarning: String?
        /// Sales dated in a month now closed that still wait (for a rule, for their order), by
        /// book and reason code: they are not in the closed months' figures and, once posted, go
        /// to the first open day, marked late.
        public var waitingSales: [(book: String, code: String, count: Int, earliest: Day)] = []
        /// Receipt records waiting for verification (any date: they may hold sales of the month).
        public var pendingRecords = 0
        /// Credits of the closed months with no purchase the store reported, or none verified.
        public var creditsWithoutPurchase = (withoutTransaction: 0, unverified: 0)
        /// The ledger's seal after the close (LedgerSeal): keep it with the nights' chain heads.
        public var seal: String? = nil

        public var description: String {
            var lines = ["Closed \(close.month): months through \(close.month) are closed in \(ledgerPath)",
                         "  by \(close.closedBy) at \(close.closedAt)",
                         "  previously closed through: \(previous.map { "\($0.month) (\(describe($0)))" } ?? "nothing")",
                         "  entries dated \(close.month.lastDay) or earlier now post on \(close.month.next.firstDay), marked late"]
            if let seal { lines.append("  seal: \(seal) (the ledger's seal, now covering this close; keep it: `iapledger verify` shows it again)") }
            if let w = configWarning { lines.append("  warning: \(w)") }
            lines += ClosedPeriods.warnings(closing: close.month, waitingSales: waitingSales, pendingRecords: pendingRecords,
                                            creditsWithoutPurchase: creditsWithoutPurchase)
            return lines.joined(separator: "\n")
        }
    }

    /// What the closed months' figures leave out, as `close` and a run closing by config say it.
    static func warnings(closing month: Month, waitingSales: [(book: String, code: String, count: Int, earliest: Day)],
                         pendingRecords: Int, creditsWithoutPurchase: (withoutTransaction: Int, unverified: Int)) -> [String] {
        var lines: [String] = []
        if !waitingSales.isEmpty {
            let total = waitingSales.reduce(0) { $0 + $1.count }
            lines.append("  warning: \(total) sale\(total == 1 ? "" : "s") dated \(month.lastDay) or earlier still wait\(total == 1 ? "s" : ""), so \(total == 1 ? "it is" : "they are") not in the closed months' figures; once posted \(total == 1 ? "it goes" : "they go") to \(month.next.firstDay) or later, marked late (see the Pending sheet, or trace each):")
            for w in waitingSales {
                lines.append("    \(w.book): \(w.count) waiting, \(w.code) (the earliest dated \(w.earliest))")
            }
        }
        if pendingRecords > 0 {
            lines.append("  warning: \(pendingRecords) receipt record\(pendingRecords == 1 ? "" : "s") still wait\(pendingRecords == 1 ? "s" : "") for verification and may hold sales of the closed months (Run Info lists them)")
        }
        let (without, unverified) = creditsWithoutPurchase
        if without + unverified > 0 {
            let parts = [without > 0 ? "\(without) name\(without == 1 ? "s" : "") no purchase the store has reported (CREDITED_WITHOUT_TRANSACTION)" : nil,
                         unverified > 0 ? "\(unverified) name\(unverified == 1 ? "s" : "") one whose receipt did not verify (CREDITED_UNVERIFIED)" : nil].compactMap { $0 }
            let total = without + unverified
            lines.append("  warning: \(total) of the backend's credits dated \(month.lastDay) or earlier \(total == 1 ? "is an open exception" : "are open exceptions") for a purchase the books do not hold: \(parts.joined(separator: " and ")); if the store's records of \(total == 1 ? "it arrive, that sale posts" : "them arrive, those sales post") late (`iapledger exceptions` lists them)")
        }
        return lines
    }

    /// `iapledger close YYYY-MM`: records in the ledger that months through `month` are closed.
    /// Refuses a month already closed (by the ledger or the config) and a month that has not
    /// ended by `asOf`.
    /// - Parameter whileLocked: run with the close's result, the close committed, before the
    ///   workspace's lock is let go (the month-end sets written again: no night between).
    public static func close(month: Month, workspace: Workspace, asOf: Day, closedBy: String,
                             closedAt: String, whileLocked: ((CloseResult) throws -> Void)? = nil) throws -> CloseResult {
        let config = try workspace.loadConfig()
        guard asOf > month.lastDay else {
            throw PeriodError("\(month) has not ended yet (as of \(asOf)): a month can be closed from \(month.next.firstDay) on")
        }
        let lock = try RunLock(url: workspace.lockURL, command: "close")
        defer { lock.release() }
        // No ledger yet: nothing to close (and none is made, empty, to refuse in).
        let ledger = try workspace.openLedgerForWriting(config, mustExist: true, refuseEmpty: true)
        // A close seals the ledger as it is: one changed by hand would be sealed with it.
        try ledger.refuseWhenChangedByHand("a close")
        let result = try ledger.write { w in
            let previous = try w.latestClose()
            if let previous, month <= previous.month {
                throw PeriodError("\(month) is already closed: the ledger is closed through \(previous.month) (\(describe(previous))); closed months are never reopened")
            }
            // The month's nights must all have run: a night as of its last day (or later) read
            // what arrived for it. Closed before, the rest of the month would post late.
            guard let last = try w.lastAsOf() else {
                throw PeriodError("\(month) cannot be closed yet: no night has run on this ledger, so nothing dated in it is in the books, and all of it would post late, after the close; run `iapledger run --as-of \(month.lastDay)` (or a later date) first")
            }
            // Closed by the config, for the next run to record: only a month that run may record
            // (the nights ran through it, and the next run, as of a day after the last, is
            // after it); one it refuses closes nothing.
            let configRecordable = config.closedThrough.flatMap { c in latestClosable(asOf: last + 1, lastNight: last).map { c <= $0 } } ?? false
            if let c = config.closedThrough, month <= c, configRecordable {
                throw PeriodError("\(month) is already closed: \(workspace.configURL.path) has [periods] closed_through = \"\(c)\" (recorded in the ledger by the next run)")
            }
            if last < month.lastDay {
                throw PeriodError("\(month) cannot be closed yet: the last night ran as of \(last), so what arrives for \(last + 1) to \(month.lastDay) is not in the books and would post late, after the close; run `iapledger run --as-of \(month.lastDay)` (or a later date) first")
            }
            let close = PeriodClose(month: month, closedAt: closedAt, closedBy: closedBy, source: .closeCommand)
            let seal = try w.recordClose(close)
            var warning: String? = nil
            if let c = config.closedThrough, c < month {
                warning = "\(workspace.configURL.path) has [periods] closed_through = \"\(c)\", now earlier than the ledger: runs refuse until it says \"\(month)\" or later, or is removed"
            } else if let c = config.closedThrough, c > month, !configRecordable {
                warning = "\(workspace.configURL.path) has [periods] closed_through = \"\(c)\", which the next run refuses (\(c) has not ended, or the nights have not run through \(c.lastDay)): set it to \"\(month)\" or remove it"
            }
            var result = CloseResult(close: close, previous: previous, ledgerPath: ledger.path, configWarning: warning)
            result.seal = seal
            result.waitingSales = try w.waitingSales(datedThrough: month.lastDay)
            result.pendingRecords = try w.pendingRecordCountNow()
            result.creditsWithoutPurchase = try w.openCreditsWithoutPurchase(creditedThrough: month.lastDay)
            return result
        }
        try whileLocked?(result)
        return result
    }
}
