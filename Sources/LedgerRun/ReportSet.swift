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
        for (book, name) in [(Book.production, "finance"), (Book.sandbox, "sandbox")] {
            let url = dir.appendingPathComponent("\(name)-\(asOf).xlsx")
            try ledger.read { reader in
                let report = FinanceReport(reader: reader, book: book, asOf: asOf, reportingCurrency: config.reportingCurrency,
                                           toolVersion: NightlyRun.toolVersion, runId: runId)
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
        return written
    }
}
