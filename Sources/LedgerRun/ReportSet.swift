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
                CrashPoint.hit("report:\(url.lastPathComponent)")
                var report = FinanceReport(reader: reader, book: book, asOf: asOf, reportingCurrency: config.reportingCurrency,
                                           toolVersion: NightlyRun.toolVersion, runId: runId)
                report.journalRowCap = config.journalRowCap
                if try report.journalOverCap() {
                    let name = (book == .production ? "journal-" : "sandbox-journal-") + "\(asOf).csv.gz"
                    let csv = try GzipCSVWriter.write(try report.journalTable(), to: dir.appendingPathComponent(name),
                                                      tempDirectory: workspace.tempURL)
                    report.journalExport = JournalExport(fileName: name, rows: csv.rows, sha256: csv.sha256)
                    exports.append(csv.url)
                }
                try XLSXWriter.write(try report.workbook(), to: url, tempDirectory: workspace.tempURL)
            }
            written.append(url)
        }
        let url = dir.appendingPathComponent("reconciliation-\(asOf).xlsx")
        try ledger.read { reader in
            CrashPoint.hit("report:\(url.lastPathComponent)")
            let report = ReconciliationReport(reader: reader, asOf: asOf, reportingCurrency: config.reportingCurrency, runId: runId)
            try XLSXWriter.write(try report.workbook(), to: url, tempDirectory: workspace.tempURL)
        }
        written.append(url)
        return written + exports
    }
}

/// `iapledger report --period YYYY-MM`: writes a month's workbooks again, closed months
/// included: the books as of the month's last day (or the last night's date, for the month
/// still running), into `reports/<that date>/`.
public enum PeriodReport {
    public static func write(workspace: Workspace, period: Month) throws -> (asOf: Day, files: [URL]) {
        let (config, ledger) = try workspace.openExistingLedger()
        let lastNight = try ledger.read { try $0.lastAsOf() }
        var asOf = period.lastDay
        if let last = lastNight, last < asOf { asOf = last }
        guard asOf >= period.firstDay else {
            throw StoreError(message: "\(period) is after the last night (\(lastNight.map(\.description) ?? "none")): nothing to report yet")
        }
        workspace.removeStaleTempFiles()
        let files = try ReportSet(ledger: ledger, config: config, asOf: asOf, runId: nil, workspace: workspace).writeAll()
        return (asOf, files)
    }
}
