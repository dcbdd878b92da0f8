import Foundation
import LedgerCore
import LedgerDemo
import LedgerRead

/// `iapledger demo`: a generated workspace with realistic data, ready for the nightly run.
public enum DemoWorkspace {
    public struct Created: CustomStringConvertible {
        public var root: URL
        public var summary: DemoSummary

        public var description: String {
            let s = summary
            let truncated = s.anomalies[DemoAnomaly.malformedLine] ?? 0
            let inbox = s.files.filter { $0.hasPrefix("inbox/") }.count
            var lines = [
                "Generated demo workspace \(TerminalText.visible(root.path))",
                "  \(s.transactions) store transaction\(s.transactions == 1 ? "" : "s") \(s.firstDay)..\(s.lastDay): \(s.productionTransactions) production, \(s.sandboxTransactions) sandbox, \(s.renewals) renewals, \(s.refunds) refunds",
                // As the night counts them: the inbox's files (the rules and config besides), and
                // a line cut short before its complete copy as a record of its own.
                "  \(s.receiptRecords) receipt records" + (truncated > 0 ? " (\(truncated == 1 ? "one" : "\(truncated)") also written cut short before \(truncated == 1 ? "it" : "them"): \(s.receiptRecords + truncated) lines)" : "")
                    + ", \(s.orderRows) order rows, \(inbox) inbox files (and \(s.files.count - inbox) rules and config files)",
            ]
            let seeded = s.anomalies.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            if !seeded.isEmpty { lines.append("  seeded cases: " + seeded.joined(separator: ", ")) }
            lines += s.notes.map { "  note: \($0)" }
            return lines.joined(separator: "\n")
        }
    }

    public static func create(at root: URL, transactions: Int, seed: UInt64, asOf: Day) throws -> Created {
        let fm = FileManager.default
        // A folder with anything in it is refused before a file is written: the demo's data
        // written into a workspace (or any folder) would mix with what is there, and its
        // layouts failed to copy only after the inbox was filled.
        if let existing = try? fm.contentsOfDirectory(atPath: root.path), !existing.isEmpty {
            throw ReadError.file(root.path, "already exists and is not empty: the demo creates a new workspace (remove the folder, or name another with --dir)")
        }
        for sub in ["rules", "inbox/receipts", "inbox/orders", "inbox/signed", "reports"] {
            try fm.createDirectory(at: root.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        let summary = try DemoGenerator.generate(into: root, options: DemoOptions(seed: seed, transactions: transactions, asOf: asOf.description))
        // The shipped workbook layouts, to try a layout change on the demo's books.
        try Workspace(root).copyShippedLayouts()
        return Created(root: root.standardizedFileURL, summary: summary)
    }
}
