import Foundation
import LedgerCore
import LedgerReport
import LedgerStore
import LedgerWrite

/// The workbooks of one as-of date under `reports/<as-of>/`, laid out by the workspace's layouts
/// (loaded and checked before the run touches anything).
struct ReportSet {
    let ledger: Ledger
    let config: WorkspaceConfig
    let asOf: Day
    let runId: Int64?
    let workspace: Workspace
    let layouts: ReportLayouts

    func writeAll() throws -> [URL] {
        let dir = workspace.reportDirectory(asOf: asOf)
        var written: [URL] = []
        var exports: [URL] = []
        for (book, workbook) in [(Book.production, ReportWorkbook.finance), (Book.sandbox, ReportWorkbook.sandbox)] {
            let url = dir.appendingPathComponent("\(workbook.rawValue)-\(asOf).xlsx")
            try ledger.read { reader in
                var report = FinanceReport(reader: reader, book: book, asOf: asOf, reportingCurrency: config.reportingCurrency,
                                           toolVersion: NightlyRun.toolVersion, runId: runId, layout: layouts[workbook])
                report.journalRowCap = config.journalRowCap
                // Past the cap, the full journal goes beside the workbook with the Journal sheet's
                // columns; a layout without the Journal sheet has no journal to export.
                if try report.journalOverCap(), let journal = try report.laidOutJournalTable() {
                    let name = (book == .production ? "journal-" : "sandbox-journal-") + "\(asOf).csv.gz"
                    let csv = try GzipCSVWriter.write(journal, to: dir.appendingPathComponent(name))
                    report.journalExport = JournalExport(fileName: name, rows: csv.rows, sha256: csv.sha256)
                    exports.append(csv.url)
                }
                try XLSXWriter.write(try report.workbook(), to: url)
            }
            written.append(url)
        }
        let url = dir.appendingPathComponent("reconciliation-\(asOf).xlsx")
        try ledger.read { reader in
            let report = ReconciliationReport(reader: reader, asOf: asOf, reportingCurrency: config.reportingCurrency, runId: runId,
                                              layout: layouts.reconciliation)
            try XLSXWriter.write(try report.workbook(), to: url)
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
        let layouts = try workspace.loadLayouts()
        let (config, ledger) = try workspace.openExistingLedger()
        let lastNight = try ledger.read { try $0.lastAsOf() }
        var asOf = period.lastDay
        if let last = lastNight, last < asOf { asOf = last }
        guard asOf >= period.firstDay else {
            throw StoreError(message: "\(period) is after the last night (\(lastNight.map(\.description) ?? "none")): nothing to report yet")
        }
        let files = try ReportSet(ledger: ledger, config: config, asOf: asOf, runId: nil, workspace: workspace, layouts: layouts).writeAll()
        return (asOf, files)
    }
}
