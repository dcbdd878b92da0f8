import Foundation
import LedgerCore
import LedgerReport
import LedgerStore
import LedgerWrite

/// The workbooks of one as-of date under `reports/<as-of>/`.
struct ReportSet {
    let ledger: Ledger
    let config: WorkspaceConfig
    let asOf: Day
    let runId: Int64?
    let workspace: Workspace

    func writeAll() throws -> [URL] {
        let dir = workspace.reportDirectory(asOf: asOf)
        var written: [URL] = []
        var exports: [URL] = []
        for (book, name) in [(Book.production, "finance"), (Book.sandbox, "sandbox")] {
            let url = dir.appendingPathComponent("\(name)-\(asOf).xlsx")
            try ledger.read { reader in
                var report = FinanceReport(reader: reader, book: book, asOf: asOf, reportingCurrency: config.reportingCurrency,
                                           toolVersion: NightlyRun.toolVersion, runId: runId)
                report.journalRowCap = config.journalRowCap
                if try report.journalOverCap() {
                    let name = (book == .production ? "journal-" : "sandbox-journal-") + "\(asOf).csv.gz"
                    let csv = try GzipCSVWriter.write(try report.journalTable(), to: dir.appendingPathComponent(name))
                    report.journalExport = JournalExport(fileName: name, rows: csv.rows, sha256: csv.sha256)
                    exports.append(csv.url)
                }
                try XLSXWriter.write(try report.workbook(), to: url)
            }
            written.append(url)
        }
        let url = dir.appendingPathComponent("reconciliation-\(asOf).xlsx")
        try ledger.read { reader in
            let report = ReconciliationReport(reader: reader, asOf: asOf, reportingCurrency: config.reportingCurrency, runId: runId)
            try XLSXWriter.write(try report.workbook(), to: url)
        }
        written.append(url)
        return written + exports
    }
}
