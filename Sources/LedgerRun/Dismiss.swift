import Foundation
import LedgerCore
import LedgerStore

/// `iapledger dismiss`: records left pending or rejected that no later record will settle,
/// taken off the open lists by the next night with who asked and why (see `DismissCandidate`).
public enum Dismiss {
    /// A file (`inbox/orders/x.csv`, as the summary, Run Info and trace name it) and a line of
    /// it, or every line (`line` nil).
    public struct Target: Equatable {
        public var path: String
        public var line: Int?
        /// The path as a file from the current folder, relative to the workspace, when it
        /// differs (`orders.csv` typed inside `inbox/orders/`): tried when `path` names none.
        public var fromCurrentFolder: String? = nil
        public init(path: String, line: Int?) { self.path = path; self.line = line }

        /// `path` or `path:line`: the path relative to the workspace (as the summary, Run Info
        /// and trace name files), or a path to the file inside the workspace.
        public init(_ text: String, workspace: Workspace) {
            var path = text, line: Int? = nil
            if let colon = text.lastIndex(of: ":"), case let digits = text[text.index(after: colon)...],
               !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(digits) {
                path = String(text[..<colon]); line = n
            }
            // Through links too (`Workspace.relative`).
            let relative = workspace.relative(URL(fileURLWithPath: path))
            if path.hasPrefix("/") { self.path = relative } else {
                // `./inbox/...`: the workspace's folder as the summary names it.
                self.path = path.hasPrefix("./") ? String(path.dropFirst(2)) : path
                if relative != path && !relative.hasPrefix("/") { fromCurrentFolder = relative }
            }
            self.line = line
        }

        public var description: String { line.map { "\(path):\($0)" } ?? path }
    }

    /// The findings finance books by hand, which it may dismiss once booked; the others
    /// (a sale or a refund waiting) the nights resolve when what they wait for arrives.
    /// In the order `dismiss --help` and its refusals list them.
    public static let dismissableFindingCodes: [String] = [
        "PRICE_MISMATCH", "RULES_CHANGED", "SIGNED_AFTER_POSTING", "STOREFRONT_AFTER_POSTING", "TRANSACTION_CONFLICT",
        "REFUND_AGAIN", "REFUND_AFTER_REVERSAL", "REVERSAL_REPEATED", "INVALID_TRANSACTION", "UPGRADE_REFUND", "REFUND_SHARE_UNKNOWN",
        "NOTIFICATION_UUID_REUSED", "DATE_MS_UNREADABLE",
    ]
    public static let dismissableFindings = Set(dismissableFindingCodes)
    /// The findings of a sale or a refund waiting, which the nights resolve themselves.
    public static let selfResolvingFindingCodes: [String] = ["MISSING_RULE", "ORDER_WAIT", "REVERSAL_WAITING", "REFUND_NOT_DATED"]
    /// Every finding code a night opens, in the order `findings` lists them when refusing one.
    public static let findingCodes: [String] = selfResolvingFindingCodes + dismissableFindingCodes

    public struct Result: CustomStringConvertible {
        public var asked: [DismissCandidate] = []
        public var alreadySettled: [DismissCandidate] = []
        public var alreadyAsked: [DismissCandidate] = []
        public var askedFindings: [FindingCandidate] = []
        public var findingsAlreadySettled: [FindingCandidate] = []
        public var findingsAlreadyAsked: [FindingCandidate] = []
        public var note: String

        public var description: String {
            var lines: [String] = []
            // The first ten of a list, and how many more.
            func list(_ items: [String], more: String) {
                lines += items.prefix(10).map { "  " + $0 }
                if items.count > 10 { lines.append("  ... and \(items.count - 10) \(more)") }
            }
            if asked.isEmpty && askedFindings.isEmpty {
                lines.append("nothing dismissed: every record or finding named is settled already or dismissed before")
            } else if !asked.isEmpty {
                let codes: [String] = asked.map { String($0.reason.prefix { $0 != ":" }) }
                let counted: [(key: String, value: Int)] = Dictionary(codes.map { ($0, 1) }, uniquingKeysWith: +)
                    .sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                let byCode = counted.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                let one = asked.count == 1
                let it = one ? "it" : "them"
                lines.append("dismissed \(asked.count) record\(one ? "" : "s") (\(byCode)): the next night resolves \(it) with \"\(note)\" "
                             + "and takes \(it) off the open lists (Run Info, the reconciliation workbook's Pending and Rejected sheets); nothing is posted")
                list(asked.map { "\($0.path):\($0.line) \($0.outcome): \($0.reason)" }, more: "more")
            }
            list(alreadyAsked.map { "already dismissed, for the next night: \($0.path):\($0.line)" }, more: "more already dismissed")
            list(alreadySettled.map { "already settled: \($0.path):\($0.line) (\($0.resolvedNote ?? ""))" }, more: "more already settled")
            if !askedFindings.isEmpty {
                let n = askedFindings.count
                lines.append("dismissed \(n) finding\(n == 1 ? "" : "s"): the next night resolves \(n == 1 ? "it" : "them") with \"\(note)\" "
                             + "and takes \(n == 1 ? "it" : "them") off the open lists (Run Info); found again with another message, \(n == 1 ? "it opens" : "each opens") again")
                list(askedFindings.map { "\($0.code) \($0.transactionId): \($0.message)" }, more: "more")
            }
            list(findingsAlreadyAsked.map { "already dismissed, for the next night: \($0.code) \($0.transactionId)" }, more: "more already dismissed")
            list(findingsAlreadySettled.map { "already resolved: \($0.code) \($0.transactionId)\($0.resolvedNote.map { " (\($0))" } ?? "")" },
                 more: "more already resolved")
            return lines.map(TerminalText.visible).joined(separator: "\n")
        }
    }

    /// Why finance cannot dismiss findings of `code` (nil when it can): one the nights resolve
    /// themselves, or no finding code at all.
    public static func refusal(code: String) -> String? {
        if dismissableFindings.contains(code) { return nil }
        return selfResolvingFindingCodes.contains(code)
            ? "\(code) is resolved by the nights themselves, when what it waits for arrives (a rule, an order, a refund, a date): add it instead"
            : "no such finding code; those finance may dismiss once booked are \(dismissableFindingCodes.joined(separator: ", "))"
    }

    public static func dismiss(_ targets: [Target], findings: [(code: String, transactionId: String)] = [], workspace: Workspace,
                               reason: String, by: String, at: String) throws -> Result {
        for f in findings {
            if let why = refusal(code: f.code) { throw StoreError(message: "\(f.code):\(f.transactionId): \(why); nothing was dismissed") }
        }
        let config = try workspace.loadConfig()
        let lock = try RunLock(url: workspace.lockURL, command: "dismiss")
        defer { lock.release() }
        let ledgerURL = workspace.ledgerURL(config)
        guard FileManager.default.fileExists(atPath: ledgerURL.path) else {
            throw StoreError(message: "\(ledgerURL.path): no ledger yet; run `iapledger run` first")
        }
        let ledger = try workspace.openLedgerForWriting(config, mustExist: true, refuseEmpty: true)
        var result = Result(note: DismissalNote.text(by: by, at: at, reason: reason))
        try ledger.write { w in
            var seen = Set<Int64>()
            for target in targets {
                var found = try w.dismissCandidates(path: target.path, line: target.line)
                if found.isEmpty, let other = target.fromCurrentFolder { found = try w.dismissCandidates(path: other, line: target.line) }
                guard !found.isEmpty else {
                    throw StoreError(message: "\(target.description): no record of it is pending or rejected in the ledger "
                        + "(name the file as the night's summary, Run Info and trace do, such as inbox/orders/orders.csv:12); nothing was dismissed")
                }
                for c in found where seen.insert(c.recordId).inserted {
                    if c.resolvedNote != nil { result.alreadySettled.append(c) }
                    else if c.asked { result.alreadyAsked.append(c) }
                    else { result.asked.append(c) }
                }
            }
            var seenFindings = Set<Int64>()
            for f in findings {
                // CODE:* is every finding of the code open now (a rules change opens one per sale).
                let found = f.transactionId == "*" ? try w.openFindingCandidates(code: f.code)
                    : try w.findingCandidates(code: f.code, transactionId: f.transactionId)
                guard !found.isEmpty else {
                    throw StoreError(message: "\(f.code):\(f.transactionId): the ledger holds no such finding\(f.transactionId == "*" ? " open" : ""); nothing was dismissed")
                }
                for c in found where seenFindings.insert(c.findingId).inserted {
                    if c.resolved { result.findingsAlreadySettled.append(c) }
                    else if c.asked { result.findingsAlreadyAsked.append(c) }
                    else { result.askedFindings.append(c) }
                }
            }
            try w.askDismissal(recordIds: result.asked.map(\.recordId), askedAt: at, askedBy: by, reason: reason)
            try w.askFindingDismissal(result.askedFindings, askedAt: at, askedBy: by, reason: reason)
        }
        return result
    }
}
