import CXlsxWriter
import Foundation
import LedgerCore
import LedgerReport

public struct WriteError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Writes a `WorkbookModel` as an XLSX file through libxlsxwriter, in constant-memory mode
/// (rows stream to disk in order). The file is written aside (in `tempDirectory`, else beside
/// its final name) and renamed into place, so a half-written workbook is never visible.
public enum XLSXWriter {
    /// - Parameter rowsPerSheetMax: Excel's 1,048,576 rows; a smaller number only in tests.
    /// - Parameter tempDirectory: where the file is written before the rename (see `WriteAside`).
    public static func write(_ model: WorkbookModel, to url: URL, rowsPerSheetMax: UInt32 = 1_048_576,
                             tempDirectory: URL? = nil) throws {
        CrashPoint.hit("write:start \(url.lastPathComponent)")
        let temp = try WriteAside.tempURL(for: url, in: tempDirectory)
        try? FileManager.default.removeItem(at: temp)
        do {
            try writeFile(model, path: temp.path, rowsPerSheetMax: rowsPerSheetMax)
            try WriteAside.moveIntoPlace(temp, to: url)
        } catch {
            try? FileManager.default.removeItem(at: temp)
            throw error
        }
    }

    static func check(_ e: lxw_error, _ what: String, _ path: String) throws {
        if e != LXW_NO_ERROR {
            throw WriteError(message: "\(path): cannot write workbook (\(what)): \(String(cString: lxw_strerror(e)))")
        }
    }

    static func writeFile(_ model: WorkbookModel, path: String, rowsPerSheetMax: UInt32) throws {
        var options = lxw_workbook_options(constant_memory: 1, tmpdir: nil, use_zip64: 1)
        guard let wb = workbook_new_opt(path, &options) else {
            throw WriteError(message: "\(path): cannot create workbook (is the folder writable?)")
        }
        var closed = false
        defer { if !closed { workbook_close(wb) } }

        let f = Formats(wb)
        try withDocumentProperties(model) { props in
            try check(workbook_set_properties(wb, props), "document properties", path)
        }
        for sheet in model.sheets {
            guard let ws = workbook_add_worksheet(wb, sheet.name) else {
                throw WriteError(message: "\(path): cannot add sheet \(sheet.name)")
            }
            try writeSheet(sheet, ws, wb, f, path, lastRow: rowsPerSheetMax - 1)
        }
        closed = true
        try check(workbook_close(wb), "closing", path)
    }

    static func withDocumentProperties(_ m: WorkbookModel, _ body: (UnsafeMutablePointer<lxw_doc_properties>) throws -> Void) throws {
        let title = strdup(m.title), subject = strdup(m.subject), author = strdup("iapledger"),
            company = strdup(m.company), category = strdup("Finance"), keywords = strdup("in-app purchases, ledger, App Store")
        defer { for p in [title, subject, author, company, category, keywords] { free(p) } }
        var props = lxw_doc_properties()
        props.title = title
        props.subject = subject
        props.author = author
        props.company = company
        props.category = category
        props.keywords = keywords
        // The creation time is the as-of date (midnight UTC), never the wall clock, so the
        // same inputs give byte-identical workbooks.
        props.created = time_t(m.created.epochMilliseconds / 1000)
        try withUnsafeMutablePointer(to: &props) { try body($0) }
    }

    /// The cell formats, made once per workbook.
    final class Formats {
        let title, subtitle, header, headerRight, section, text, integer, date: UnsafeMutablePointer<lxw_format>
        let money: [UnsafeMutablePointer<lxw_format>]       // by decimals 0...3
        let totalText, totalInteger: UnsafeMutablePointer<lxw_format>
        let totalMoney: [UnsafeMutablePointer<lxw_format>]

        init(_ wb: UnsafeMutablePointer<lxw_workbook>) {
            func make(_ setup: (UnsafeMutablePointer<lxw_format>) -> Void) -> UnsafeMutablePointer<lxw_format> {
                let f = workbook_add_format(wb)!
                setup(f)
                return f
            }
            title = make { format_set_bold($0); format_set_font_size($0, 14) }
            subtitle = make { format_set_italic($0); format_set_font_color($0, 0x595959) }
            header = make { format_set_bold($0); format_set_bg_color($0, 0xD9E1F2); format_set_bottom($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_text_wrap($0); format_set_align($0, UInt8(LXW_ALIGN_VERTICAL_TOP.rawValue)) }
            headerRight = make { format_set_bold($0); format_set_bg_color($0, 0xD9E1F2); format_set_bottom($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_text_wrap($0); format_set_align($0, UInt8(LXW_ALIGN_RIGHT.rawValue)); format_set_align($0, UInt8(LXW_ALIGN_VERTICAL_TOP.rawValue)) }
            section = make { format_set_bold($0); format_set_font_size($0, 12) }
            text = make { _ in }
            integer = make { format_set_num_format($0, "#,##0") }
            date = make { format_set_num_format($0, "yyyy-mm-dd"); format_set_align($0, UInt8(LXW_ALIGN_LEFT.rawValue)) }
            money = (0...3).map { d in make { format_set_num_format($0, Formats.moneyFormat(d)) } }
            totalText = make { format_set_bold($0); format_set_top($0, UInt8(LXW_BORDER_THIN.rawValue)) }
            totalInteger = make { format_set_bold($0); format_set_top($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_num_format($0, "#,##0") }
            totalMoney = (0...3).map { d in make { format_set_bold($0); format_set_top($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_num_format($0, Formats.moneyFormat(d)) } }
        }

        /// Thousands separators, the currency's decimals, negatives in red with a minus sign.
        static func moneyFormat(_ decimals: Int) -> String {
            let body = decimals == 0 ? "#,##0" : "#,##0." + String(repeating: "0", count: decimals)
            return "\(body);[Red]-\(body)"
        }
    }

    /// Column widths and print setup of a sheet.
    static func setUp(_ ws: UnsafeMutablePointer<lxw_worksheet>, _ sheet: SheetModel) {
        // Column widths: the widest column spec of any table at that position.
        var widths: [Int] = []
        for t in sheet.tables {
            for (i, c) in t.columns.enumerated() {
                if i >= widths.count { widths.append(c.width) } else { widths[i] = max(widths[i], c.width) }
            }
        }
        for (i, w) in widths.enumerated() {
            worksheet_set_column(ws, lxw_col_t(i), lxw_col_t(i), Double(w), nil)
        }
        // Printing: landscape, one page wide, header row repeated, sheet name and page numbers.
        worksheet_set_landscape(ws)
        worksheet_set_paper(ws, 9) // A4
        worksheet_fit_to_pages(ws, 1, 0)
        worksheet_set_footer(ws, "&L&A&R&P / &N")
    }

    static func writeSheet(_ sheet: SheetModel, _ firstSheet: UnsafeMutablePointer<lxw_worksheet>, _ wb: UnsafeMutablePointer<lxw_workbook>,
                           _ f: Formats, _ path: String, lastRow maxRow: UInt32) throws {
        var ws = firstSheet
        setUp(ws, sheet)
        var part = 1
        var row: UInt32 = 0
        worksheet_write_string(ws, row, 0, sheet.title, f.title)
        row += 1
        for line in sheet.subtitle {
            worksheet_write_string(ws, row, 0, line, f.subtitle)
            row += 1
        }
        row += 1
        var bodies: [(first: UInt32, last: UInt32)] = []   // body rows of each table (0-based)
        var totalsSeen: [Bool] = []
        for (ti, table) in sheet.tables.enumerated() {
            if ti > 0 { row += 1 }
            if let heading = table.heading {
                worksheet_write_string(ws, row, 0, heading, f.section)
                row += 1
            }
            var headerRow = row
            // Two lines high, so wrapped column titles stay readable.
            worksheet_set_row(ws, row, 30, nil)
            for (i, c) in table.columns.enumerated() {
                let right = c.kind == .money || c.kind == .integer
                worksheet_write_string(ws, row, lxw_col_t(i), c.title, right ? f.headerRight : f.header)
            }
            row += 1
            if ti == 0 {
                // The first table's header stays in view and carries the filter.
                worksheet_freeze_panes(ws, row, 0)
                worksheet_repeat_rows(ws, headerRow, headerRow)
            }
            var lastRow = row
            let firstBody = row
            var lastBody: UInt32? = nil
            try table.rows { r in
                if row > maxRow {
                    // Past Excel's last row: the first table continues on "<name> (2)", "(3)", ...
                    guard ti == 0 && sheet.tables.count == 1 else {
                        throw WriteError(message: "\(path): sheet \(sheet.name) would pass the \(maxRow + 1) rows a sheet can hold")
                    }
                    worksheet_autofilter(ws, headerRow, 0, lastRow, lxw_col_t(table.columns.count - 1))
                    part += 1
                    guard let next = workbook_add_worksheet(wb, "\(sheet.name) (\(part))") else {
                        throw WriteError(message: "\(path): cannot add sheet \(sheet.name) (\(part))")
                    }
                    ws = next
                    setUp(ws, sheet)
                    worksheet_write_string(ws, 0, 0, "\(sheet.title) (continued, part \(part))", f.title)
                    worksheet_set_row(ws, 2, 30, nil)
                    for (i, c) in table.columns.enumerated() {
                        let right = c.kind == .money || c.kind == .integer
                        worksheet_write_string(ws, 2, lxw_col_t(i), c.title, right ? f.headerRight : f.header)
                    }
                    worksheet_freeze_panes(ws, 3, 0)
                    worksheet_repeat_rows(ws, 2, 2)
                    headerRow = 2
                    row = 3
                }
                if r.style == .body { lastBody = row }
                let total = r.style == .total
                for (i, cell) in r.cells.enumerated() {
                    let col = lxw_col_t(i)
                    switch cell {
                    case .empty:
                        if total { worksheet_write_blank(ws, row, col, f.totalText) }
                    case .text(let s):
                        worksheet_write_string(ws, row, col, s, total ? f.totalText : (r.style == .section ? f.section : f.text))
                    case .integer(let v):
                        worksheet_write_number(ws, row, col, cellNumber(v, decimals: 0), total ? f.totalInteger : f.integer)
                    case let .money(minor, decimals):
                        let d = min(max(decimals, 0), 3)
                        worksheet_write_number(ws, row, col, cellNumber(minor, decimals: decimals), total ? f.totalMoney[d] : f.money[d])
                    case .date(let day):
                        // Excel's serial day: days since 1899-12-30.
                        worksheet_write_number(ws, row, col, cellNumber(Int64(day.daysSinceEpoch + 25_569), decimals: 0), f.date)
                    }
                }
                lastRow = row
                row += 1
                CrashPoint.tick("write:rows", every: 200)
            }
            if ti == 0 && !table.columns.isEmpty {
                worksheet_autofilter(ws, headerRow, 0, max(lastRow, headerRow), lxw_col_t(table.columns.count - 1))
            }
            bodies.append((firstBody, lastBody ?? firstBody))
            totalsSeen.append(lastBody != nil)
        }
        // Charts to the right of the first table, one under the other.
        let anchorColumn = lxw_col_t((sheet.tables.first?.columns.count ?? 0) + 1)
        for (ci, c) in sheet.charts.enumerated() where c.table < bodies.count && totalsSeen[c.table] {
            let type: UInt8
            switch c.kind {
            case .column: type = UInt8(LXW_CHART_COLUMN.rawValue)
            case .bar: type = UInt8(LXW_CHART_BAR.rawValue)
            case .line: type = UInt8(LXW_CHART_LINE.rawValue)
            }
            guard let chart = workbook_add_chart(wb, type) else { continue }
            let (first, last) = bodies[c.table]
            for v in c.valueColumns {
                let series = chart_add_series(chart, nil, nil)
                chart_series_set_categories(series, sheet.name, first, lxw_col_t(c.categoryColumn), last, lxw_col_t(c.categoryColumn))
                chart_series_set_values(series, sheet.name, first, lxw_col_t(v), last, lxw_col_t(v))
                chart_series_set_name_range(series, sheet.name, bodies[c.table].first - 1, lxw_col_t(v))
            }
            chart_title_set_name(chart, c.title)
            chart_axis_set_name(c.kind == .bar ? chart.pointee.x_axis : chart.pointee.y_axis, c.yAxisTitle)
            chart_legend_set_position(chart, UInt8(LXW_CHART_LEGEND_BOTTOM.rawValue))
            var options = lxw_chart_options()
            options.x_scale = 1.3
            options.y_scale = 1.2
            worksheet_insert_chart_opt(ws, bodies[0].first - 1 + UInt32(ci * 20), anchorColumn, chart, &options)
        }
    }

    /// The numeric value of a cell. XLSX stores every number as an IEEE double, so this is the
    /// one place an amount leaves integer minor units: minor / 10^decimals, exact for any
    /// amount below 2^53 minor units.
    @inline(__always)
    static func cellNumber(_ minor: Int64, decimals: Int) -> Double {
        decimals == 0 ? Double(minor) : Double(minor) / pow10Double[decimals]
    }
    static let pow10Double: [Double] = [1, 10, 100, 1000, 10000, 100000, 1000000]
}
