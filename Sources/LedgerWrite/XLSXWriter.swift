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
        // libxlsxwriter stages every sheet in temp files and does not check its writes to them:
        // with no space left there (a full /tmp), it packaged empty or cut-short parts and said
        // nothing. They are made in the folder the workbook is written in (the workspace's temp
        // folder, on the disk of reports/, not /tmp), and the finished file is checked whole
        // (`XLSXCheck`) before it is renamed into place.
        let tmpdir = strdup((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent)
        defer { free(tmpdir) }
        var options = lxw_workbook_options(constant_memory: 1, tmpdir: tmpdir, use_zip64: 1)
        guard let wb = workbook_new_opt(path, &options) else {
            throw WriteError(message: "\(path): cannot create workbook (is the folder writable?)")
        }
        var closed = false
        defer { if !closed { _ = close(wb) } }

        let f = Formats(wb, numberFormats: model.numberFormats)
        try withDocumentProperties(model) { props in
            try check(workbook_set_properties(wb, props), "document properties", path)
        }
        let tally = RowTally()
        for sheet in model.sheets {
            guard let ws = workbook_add_worksheet(wb, sheet.name) else {
                throw WriteError(message: "\(path): cannot add sheet \(sheet.name)")
            }
            tally.add(ws)
            try writeSheet(sheet, ws, wb, f, path, lastRow: rowsPerSheetMax - 1, header: model.subject, paper: model.paper, tally: tally)
        }
        // The rows streamed so far: a write that failed (no space left) is found here.
        for ws in tally.worksheets {
            if let file = ws.pointee.optimize_tmpfile, fflush(file) != 0 || ferror(file) != 0 {
                throw WriteError(message: "\(path): cannot write workbook: writing its rows to a temp file in \(String(cString: tmpdir!)) failed (\(String(cString: strerror(errno)))): is the disk full?")
            }
        }
        closed = true
        try check(close(wb), "closing", path)
        afterPackaging?(path)
        try XLSXCheck.check(path: path, rowsPerSheet: tally.rows)
    }

    /// A test's hook, called with each packaged workbook before it is checked (nil in use): a
    /// test cuts a part short there, as a disk that filled up did.
    nonisolated(unsafe) public static var afterPackaging: ((String) -> Void)?

    /// The rows each worksheet holds as written, in the order the sheets were added (sheet1,
    /// sheet2, ... in the package): a row is in the file when a cell was written in it or its
    /// height set. Rows go down a sheet in order (constant-memory mode), so a row is counted
    /// when it differs from the sheet's last.
    final class RowTally {
        private(set) var worksheets: [UnsafeMutablePointer<lxw_worksheet>] = []
        private(set) var rows: [Int] = []
        private var last: [UInt32] = []
        private var current = -1

        func add(_ ws: UnsafeMutablePointer<lxw_worksheet>) {
            worksheets.append(ws)
            rows.append(0)
            last.append(.max)
            current = worksheets.count - 1
        }

        func touch(_ ws: UnsafeMutablePointer<lxw_worksheet>, _ row: UInt32) {
            if current < 0 || worksheets[current] != ws {
                guard let i = worksheets.lastIndex(of: ws) else { return }
                current = i
            }
            if last[current] != row {
                last[current] = row
                rows[current] += 1
            }
        }
    }

    /// libxlsxwriter writes the package's dates (`docProps/core.xml`) through `gmtime()`, whose
    /// result is one static struct per process: two workbooks closed at the same moment on two
    /// threads could swap their dates (seen: an October workbook dated 2026-10-03, the day of
    /// the November set written beside it). Workbooks are therefore closed (packaged) one at a
    /// time; their sheets are still written in parallel.
    static let packaging = NSLock()

    static func close(_ wb: UnsafeMutablePointer<lxw_workbook>) -> lxw_error {
        packaging.lock()
        defer { packaging.unlock() }
        return workbook_close(wb)
    }

    static func withDocumentProperties(_ m: WorkbookModel, _ body: (UnsafeMutablePointer<lxw_doc_properties>) throws -> Void) throws {
        let title = strdup(XMLText.safe(m.title)), subject = strdup(XMLText.safe(m.subject)), author = strdup("iapledger"),
            company = strdup(XMLText.safe(m.company)), category = strdup("Finance"), keywords = strdup("in-app purchases, ledger, App Store")
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

    /// The cell formats, made once per workbook; a number format a layout asks for is made the
    /// first time a cell needs it.
    final class Formats {
        let title, subtitle, header, headerRight, section, integer, date: UnsafeMutablePointer<lxw_format>
        /// Plain text cells take the workbook's default format (nil). A format of our own with
        /// no properties would equal the default, and libxlsxwriter then looks a duplicate
        /// format up in its hash table on every cell instead of once.
        let text: UnsafeMutablePointer<lxw_format>? = nil
        let money: [UnsafeMutablePointer<lxw_format>]       // by decimals 0...3
        let totalText, totalInteger: UnsafeMutablePointer<lxw_format>
        /// A long text in a wide column (a finding's detail, a record's reason), wrapped (at the
        /// foot of its row, as Excel sets wrapped text: level with the row's numbers and dates).
        let wrappedText: UnsafeMutablePointer<lxw_format>
        /// Text right of a right-aligned number column, indented as a date there is: an age
        /// and the detail after it read as one field ("2 orders)", the 2 an age: a finance review).
        let indentedText, indentedWrappedText: UnsafeMutablePointer<lxw_format>
        let totalMoney: [UnsafeMutablePointer<lxw_format>]
        let numberFormats: NumberFormats
        private let wb: UnsafeMutablePointer<lxw_workbook>
        /// Number formats by role and format string (the standard ones above included).
        private var byFormat: [String: UnsafeMutablePointer<lxw_format>] = [:]

        init(_ wb: UnsafeMutablePointer<lxw_workbook>, numberFormats: NumberFormats = .standard) {
            self.wb = wb
            self.numberFormats = numberFormats
            func make(_ setup: (UnsafeMutablePointer<lxw_format>) -> Void) -> UnsafeMutablePointer<lxw_format> {
                let f = workbook_add_format(wb)!
                setup(f)
                return f
            }
            title = make { format_set_bold($0); format_set_font_size($0, 14) }
            subtitle = make {
                format_set_italic($0); format_set_font_color($0, 0x595959)
                format_set_text_wrap($0); format_set_align($0, UInt8(LXW_ALIGN_VERTICAL_TOP.rawValue))
            }
            header = make { format_set_bold($0); format_set_bg_color($0, 0xD9E1F2); format_set_bottom($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_text_wrap($0); format_set_align($0, UInt8(LXW_ALIGN_VERTICAL_TOP.rawValue)) }
            headerRight = make { format_set_bold($0); format_set_bg_color($0, 0xD9E1F2); format_set_bottom($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_text_wrap($0); format_set_align($0, UInt8(LXW_ALIGN_RIGHT.rawValue)); format_set_align($0, UInt8(LXW_ALIGN_VERTICAL_TOP.rawValue)) }
            section = make { format_set_bold($0); format_set_font_size($0, 12) }
            integer = make { format_set_num_format($0, "#,##0") }
            // Indented: a date after a right-aligned number (an entry id) would read as one field.
            date = make { format_set_num_format($0, "yyyy-mm-dd"); format_set_align($0, UInt8(LXW_ALIGN_LEFT.rawValue)); format_set_indent($0, 1) }
            money = (0...3).map { d in make { format_set_num_format($0, Formats.moneyFormat(d)) } }
            totalText = make { format_set_bold($0); format_set_top($0, UInt8(LXW_BORDER_THIN.rawValue)) }
            wrappedText = make { format_set_text_wrap($0) }
            indentedText = make { format_set_indent($0, 1) }
            indentedWrappedText = make { format_set_text_wrap($0); format_set_indent($0, 1) }
            totalInteger = make { format_set_bold($0); format_set_top($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_num_format($0, "#,##0") }
            totalMoney = (0...3).map { d in make { format_set_bold($0); format_set_top($0, UInt8(LXW_BORDER_THIN.rawValue)); format_set_num_format($0, Formats.moneyFormat(d)) } }
            byFormat["integer|#,##0"] = integer
            byFormat["integerTotal|#,##0"] = totalInteger
            byFormat["date|yyyy-mm-dd"] = date
            for d in 0...3 {
                byFormat["money|\(Formats.moneyFormat(d))"] = money[d]
                byFormat["moneyTotal|\(Formats.moneyFormat(d))"] = totalMoney[d]
            }
        }

        /// The format of a number or date cell with this number format: plain, bold with a top
        /// border in a totals row, or left-aligned for a date.
        func number(_ role: ColumnFormats.Role, _ numFormat: String) -> UnsafeMutablePointer<lxw_format> {
            let key = "\(role)|\(numFormat)"
            if let f = byFormat[key] { return f }
            let f = workbook_add_format(wb)!
            switch role {
            case .integerTotal, .moneyTotal: format_set_bold(f); format_set_top(f, UInt8(LXW_BORDER_THIN.rawValue))
            case .date: format_set_align(f, UInt8(LXW_ALIGN_LEFT.rawValue)); format_set_indent(f, 1)
            case .integer, .money: break
            }
            format_set_num_format(f, numFormat)
            byFormat[key] = f
            return f
        }

        /// Thousands separators, the currency's decimals, negatives in red with a minus sign.
        static func moneyFormat(_ decimals: Int) -> String {
            let body = decimals == 0 ? "#,##0" : "#,##0." + String(repeating: "0", count: decimals)
            return "\(body);[Red]-\(body)"
        }
    }

    /// The formats of one column's number and date cells: the column's own number format for
    /// cells of its kind, else the workbook's. Made on first use, so a workbook carries only
    /// the formats its cells use.
    final class ColumnFormats {
        enum Role { case integer, integerTotal, date, money, moneyTotal }
        let formats: Formats
        let integerFormat, dateFormat, moneyFormat: String
        private var slots = [UnsafeMutablePointer<lxw_format>?](repeating: nil, count: 11)

        init(_ column: Column?, _ f: Formats) {
            formats = f
            let own = column?.numberFormat
            let kind = column?.kind
            integerFormat = (kind == .integer ? own : nil) ?? f.numberFormats.integer
            dateFormat = (kind == .date ? own : nil) ?? f.numberFormats.date
            moneyFormat = (kind == .money ? own : nil) ?? f.numberFormats.money
        }

        @inline(__always)
        private func slot(_ i: Int, _ make: () -> UnsafeMutablePointer<lxw_format>) -> UnsafeMutablePointer<lxw_format> {
            if let f = slots[i] { return f }
            let f = make()
            slots[i] = f
            return f
        }
        func integer(total: Bool) -> UnsafeMutablePointer<lxw_format> {
            slot(total ? 1 : 0) { formats.number(total ? .integerTotal : .integer, integerFormat) }
        }
        func date() -> UnsafeMutablePointer<lxw_format> { slot(2) { formats.number(.date, dateFormat) } }
        /// `decimals` 0...3.
        func money(decimals d: Int, total: Bool) -> UnsafeMutablePointer<lxw_format> {
            slot((total ? 7 : 3) + d) { formats.number(total ? .moneyTotal : .money, NumberFormats.money(moneyFormat, decimals: d)) }
        }
    }

    /// A continuation sheet's name, `Journal (2)`, within Excel's 31 characters.
    static func continuationName(_ name: String, part: Int) -> String {
        let suffix = " (\(part))"
        var base = name
        while base.unicodeScalars.count + suffix.count > 31 { base.removeLast() }
        return base + suffix
    }

    /// Columns this wide or wider wrap a longer text (narrower ones hold codes and amounts).
    static let wrapFromWidth = 30

    /// The lines a text takes in a column `width` wide (one character of the default font per
    /// unit of width, a unit being a digit's width; bytes counted). Excel fits about 1.2, but
    /// LibreOffice prints a column's text wider: at 1.2 a reason of 84 characters in a column
    /// 40 wide took three lines of a row two high, the last cut off.
    @inline(__always)
    static func lines(_ s: String, width: Int) -> Int {
        let perLine = max(1, width), n = s.utf8.count
        return n <= perLine ? 1 : (n + perLine - 1) / perLine
    }

    /// Column widths: the widest column spec of any table at that position.
    static func columnWidths(_ sheet: SheetModel) -> [Int] {
        var widths: [Int] = []
        for t in sheet.tables {
            for (i, c) in t.columns.enumerated() {
                if i >= widths.count { widths.append(c.width) } else { widths[i] = max(widths[i], c.width) }
            }
        }
        return widths
    }

    /// libxlsxwriter's (and Excel's) number of a paper size.
    static func paperCode(_ paper: PaperSize) -> UInt8 {
        switch paper {
        case .letter: return 1
        case .legal: return 5
        case .a3: return 8
        case .a4: return 9
        }
    }

    /// How many pages wide a sheet prints: one while that prints it at 70% of its size or more;
    /// else as many (up to three) as print it at about 85% or more. One page wide, the
    /// Exceptions sheet (274 characters of columns) printed at 45%, too small to read.
    /// A column `w` characters wide is `7w + 5` pixels (Excel's default font); a landscape
    /// page holds its width less 0.7-inch margins, at 96 pixels an inch.
    static func pagesWide(_ widths: [Int], paper: PaperSize) -> Int {
        let pixels = widths.reduce(0) { $0 + columnPixels($1) }
        let page = pagePixels(paper)
        guard pixels * 7 > page * 10 else { return 1 }
        return min(3, max(2, (pixels * 85 / 100 + page - 1) / page))
    }

    /// How a sheet printed several pages wide is laid out: on how many pages, the leading
    /// columns repeated on each (the first column, and the text or date columns after it, up to
    /// four: a region's storefront, month and currency; a refund's entry, date, transaction and
    /// currency; the first alone left a second page of figures whose rows said only their
    /// storefront, and a refund's amounts in its currency came without it), and the columns the first page surely
    /// holds. The repeated columns take at most two fifths of a page (an exception's category
    /// and transaction). Nil for a sheet printed one page wide.
    ///
    /// The pages are fitted, not broken at set columns: spreadsheets measure a column
    /// differently (LibreOffice prints one a third wider than Excel), and each, fitting the
    /// pages, scales by its own measure, where set breaks at a set scale fell elsewhere in one
    /// of them. So the first page's columns are those within 85% of its share of the width.
    struct PageLayout: Equatable {
        var pages: Int
        var repeated: Int
        var firstPage: Int
    }

    static func pageLayout(_ widths: [Int], kinds: [Column.Kind], paper: PaperSize) -> PageLayout? {
        let wide = pagesWide(widths, paper: paper)
        guard wide > 1 else { return nil }
        let pixels = widths.map(columnPixels), page = pagePixels(paper)
        var repeated = 1
        while repeated < min(4, widths.count - 1), repeated < kinds.count, kinds[repeated] == .text || kinds[repeated] == .date,
              pixels.prefix(repeated + 1).reduce(0, +) * 5 <= page * 2 { repeated += 1 }
        let lead = pixels.prefix(repeated).reduce(0, +), total = pixels.reduce(0, +)
        let share = (total + lead * (wide - 1)) / wide * 85 / 100
        var n = 0, used = 0
        for p in pixels {
            guard used + p <= share else { break }
            used += p
            n += 1
        }
        return PageLayout(pages: wide, repeated: repeated, firstPage: max(1, n))
    }

    /// The columns a sheet's notes wrap within: all of them, or, on a sheet printed several
    /// pages wide, those its first page holds (a note across every column was cut mid-line at
    /// each page's edge).
    static func noteColumns(_ widths: [Int], kinds: [Column.Kind], paper: PaperSize) -> Int {
        guard let layout = pageLayout(widths, kinds: kinds, paper: paper) else { return widths.count }
        return min(widths.count, layout.firstPage)
    }

    /// The kinds of the first table's columns (the sheet's body: what its leading columns are).
    static func kinds(_ sheet: SheetModel) -> [Column.Kind] { sheet.tables.first?.columns.map(\.kind) ?? [] }

    /// A column `width` characters wide, in pixels (Excel's default font).
    static func columnPixels(_ width: Int) -> Int { 7 * width + 5 }

    /// The width of a landscape page of `paper` less 0.7-inch margins, in pixels (96 an inch).
    static func pagePixels(_ paper: PaperSize) -> Int {
        let hundredths: Int
        switch paper {
        case .a4: hundredths = 1169
        case .letter: hundredths = 1100
        case .legal: hundredths = 1400
        case .a3: hundredths = 1654
        }
        return (hundredths - 140) * 96 / 100
    }

    /// Column widths and print setup of a sheet; returns the widths it set.
    @discardableResult
    static func setUp(_ ws: UnsafeMutablePointer<lxw_worksheet>, _ sheet: SheetModel, header: String, paper: PaperSize) -> [Int] {
        let widths = columnWidths(sheet)
        for (i, w) in widths.enumerated() {
            worksheet_set_column(ws, lxw_col_t(i), lxw_col_t(i), Double(w), nil)
        }
        // Printing: landscape, one page wide (two or three for a wide sheet, the columns that
        // say what a row is repeated on each page),
        // header row repeated, sheet name and page numbers.
        worksheet_set_landscape(ws)
        worksheet_set_paper(ws, paperCode(paper))
        if let layout = pageLayout(widths, kinds: kinds(sheet), paper: paper) {
            worksheet_fit_to_pages(ws, UInt16(layout.pages), 0)
            worksheet_repeat_columns(ws, 0, lxw_col_t(layout.repeated - 1))
            // Left to right, then down: a row's parts on facing pages.
            worksheet_print_across(ws)
        } else {
            worksheet_fit_to_pages(ws, 1, 0)
        }
        worksheet_set_footer(ws, "&L&A&R&P / &N")
        // Every printed page says which workbook it is: the book and the as-of date.
        worksheet_set_header(ws, "&L" + XMLText.safe(header).replacingOccurrences(of: "&", with: "&&"))
        return widths
    }

    static func writeSheet(_ sheet: SheetModel, _ firstSheet: UnsafeMutablePointer<lxw_worksheet>, _ wb: UnsafeMutablePointer<lxw_workbook>,
                           _ f: Formats, _ path: String, lastRow maxRow: UInt32, header: String, paper: PaperSize, tally: RowTally) throws {
        var ws = firstSheet
        let widths = setUp(ws, sheet, header: header, paper: paper)
        var part = 1
        var row: UInt32 = 0
        worksheet_write_string(ws, row, 0, XMLText.safe(sheet.title), f.title)
        tally.touch(ws, row)
        row += 1
        // Each note wraps within the columns the sheet's tables use (merged across them, as
        // high as its text needs): unwrapped, a long note ran past the last column and was cut
        // off where the sheet prints one page wide.
        let span = max(1, noteColumns(widths, kinds: kinds(sheet), paper: paper))
        // About 1.1 characters of the default font per unit of column width, 15 points a line.
        let perLine = max(20, widths.prefix(span).reduce(0, +) * 11 / 10)
        for line in sheet.subtitle {
            let text = XMLText.safe(line)
            let lines = max(1, (text.count + perLine - 1) / perLine)
            worksheet_set_row(ws, row, Double(15 * lines), nil)
            tally.touch(ws, row)
            if span > 1 {
                worksheet_merge_range(ws, row, 0, row, lxw_col_t(span - 1), text, f.subtitle)
            } else {
                worksheet_write_string(ws, row, 0, text, f.subtitle)
            }
            row += 1
        }
        row += 1
        var bodies: [(first: UInt32, last: UInt32)] = []   // body rows of each table (0-based)
        var totalsSeen: [Bool] = []
        for (ti, table) in sheet.tables.enumerated() {
            if ti > 0 { row += 1 }
            if let heading = table.heading {
                worksheet_write_string(ws, row, 0, XMLText.safe(heading), f.section)
                tally.touch(ws, row)
                row += 1
            }
            var headerRow = row
            // Two lines high, so wrapped column titles stay readable.
            worksheet_set_row(ws, row, 30, nil)
            tally.touch(ws, row)
            for (i, c) in table.columns.enumerated() {
                let right = c.kind == .money || c.kind == .integer
                worksheet_write_string(ws, row, lxw_col_t(i), XMLText.safe(c.title), right ? f.headerRight : f.header)
            }
            row += 1
            if ti == 0 {
                // The first table's header stays in view and carries the filter; not below a
                // sheet's notes (a Summary's), which frozen would fill a laptop's screen.
                if headerRow <= 4 { worksheet_freeze_panes(ws, row, 0) }
                // Printed, the header repeats on every page where it is the only table's: above
                // another table's rows (Run Info's files and findings) it would name the wrong columns.
                if sheet.tables.count == 1 { worksheet_repeat_rows(ws, headerRow, headerRow) }
            }
            let firstBody = row
            var lastBody: UInt32? = nil
            // The filter stops above the table's closing total rows: sorting must not move them.
            var lastBeforeTotals = headerRow, previousWasTotal = false
            let columnFormats = table.columns.map { ColumnFormats($0, f) }
            // The text columns right of a number column (integer or money: right-aligned).
            let afterNumber = table.columns.indices.map { $0 > 0 && [.integer, .money].contains(table.columns[$0 - 1].kind) && table.columns[$0].kind == .text }
            let otherFormats = ColumnFormats(nil, f)
            try table.rows { r in
                if row > maxRow {
                    // Past Excel's last row: the first table continues on "<name> (2)", "(3)", ...
                    guard ti == 0 && sheet.tables.count == 1 else {
                        throw WriteError(message: "\(path): sheet \(sheet.name) would pass the \(maxRow + 1) rows a sheet can hold")
                    }
                    worksheet_autofilter(ws, headerRow, 0, lastBeforeTotals, lxw_col_t(table.columns.count - 1))
                    part += 1
                    let name = continuationName(sheet.name, part: part)
                    guard let next = workbook_add_worksheet(wb, name) else {
                        throw WriteError(message: "\(path): cannot add sheet \(name)")
                    }
                    ws = next
                    tally.add(ws)
                    setUp(ws, sheet, header: header, paper: paper)
                    worksheet_write_string(ws, 0, 0, XMLText.safe("\(sheet.title) (continued, part \(part))"), f.title)
                    tally.touch(ws, 0)
                    worksheet_set_row(ws, 2, 30, nil)
                    tally.touch(ws, 2)
                    for (i, c) in table.columns.enumerated() {
                        let right = c.kind == .money || c.kind == .integer
                        worksheet_write_string(ws, 2, lxw_col_t(i), XMLText.safe(c.title), right ? f.headerRight : f.header)
                    }
                    worksheet_freeze_panes(ws, 3, 0)
                    worksheet_repeat_rows(ws, 2, 2)
                    headerRow = 2
                    row = 3
                    lastBeforeTotals = headerRow
                }
                if r.style == .body { lastBody = row }
                let total = r.style == .total
                // A text longer than its wide column (a detail, a reason) wraps in a row as high
                // as it needs: unwrapped, the cell beside it cut it off, on screen and printed.
                var lines = 1
                if r.style == .body {
                    for (i, cell) in r.cells.enumerated() where i < widths.count && widths[i] >= Self.wrapFromWidth {
                        if case .text(let s) = cell { lines = max(lines, Self.lines(s, width: widths[i])) }
                    }
                    if lines > 1 { worksheet_set_row(ws, row, Double(15 * min(lines, 20)), nil); tally.touch(ws, row) }
                }
                if total && !previousWasTotal && ti == 0 && !table.columns.isEmpty {
                    // Set while the row above is still the one being written: in constant-memory
                    // mode libxlsxwriter ignores a range that ends on a row already written out.
                    worksheet_autofilter(ws, headerRow, 0, lastBeforeTotals, lxw_col_t(table.columns.count - 1))
                }
                previousWasTotal = total
                if !total { lastBeforeTotals = row }
                // Whether a cell of this row is in the file (the row then is).
                var wrote = false
                for (i, cell) in r.cells.enumerated() {
                    let col = lxw_col_t(i)
                    let cf = i < columnFormats.count ? columnFormats[i] : otherFormats
                    switch cell {
                    case .empty:
                        if total { worksheet_write_blank(ws, row, col, f.totalText); wrote = true }
                    case .text(let s):
                        let wraps = lines > 1 && i < widths.count && widths[i] >= Self.wrapFromWidth && Self.lines(s, width: widths[i]) > 1
                        let indent = r.style == .body && i < afterNumber.count && afterNumber[i] && !s.isEmpty
                        let format = total ? f.totalText : (r.style == .section ? f.section
                            : indent ? (wraps ? f.indentedWrappedText : f.indentedText) : (wraps ? f.wrappedText : f.text))
                        let text = XMLText.safe(s)
                        // An empty text with no format is no cell: libxlsxwriter writes none.
                        if text.isEmpty && format == nil { break }
                        worksheet_write_string(ws, row, col, text, format)
                        wrote = true
                    case .integer(let v):
                        worksheet_write_number(ws, row, col, cellNumber(v, decimals: 0), cf.integer(total: total))
                        wrote = true
                    case let .money(minor, decimals):
                        let d = min(max(decimals, 0), 3)
                        worksheet_write_number(ws, row, col, cellNumber(minor, decimals: decimals), cf.money(decimals: d, total: total))
                        wrote = true
                    case .date(let day):
                        // Excel's serial day: days since 1899-12-30.
                        worksheet_write_number(ws, row, col, cellNumber(Int64(day.daysSinceEpoch + 25_569), decimals: 0), cf.date())
                        wrote = true
                    }
                }
                if wrote { tally.touch(ws, row) }
                row += 1
                CrashPoint.tick("write:rows", every: 200)
            }
            if ti == 0 && !table.columns.isEmpty && !previousWasTotal {
                worksheet_autofilter(ws, headerRow, 0, lastBeforeTotals, lxw_col_t(table.columns.count - 1))
            }
            bodies.append((firstBody, lastBody ?? firstBody))
            totalsSeen.append(lastBody != nil)
        }
        // Charts to the right of the first table, one under the other. A chart finds its table
        // and columns by key wherever the layout put them; a series whose column the layout
        // left out is not drawn, nor a chart without its table, category column or any series.
        let anchorColumn = lxw_col_t((sheet.tables.first?.columns.count ?? 0) + 1)
        var drawn = 0, chartRow: UInt32 = 0
        for c in sheet.charts {
            guard let ti = sheet.tables.firstIndex(where: { $0.key == c.table }), totalsSeen[ti] else { continue }
            let columns = sheet.tables[ti].columns
            guard let category = columns.firstIndex(where: { $0.key == c.categoryColumn }) else { continue }
            let values = c.valueColumns.compactMap { v in columns.firstIndex { $0.key == v } }
            guard !values.isEmpty else { continue }
            let type: UInt8
            switch c.kind {
            case .column: type = UInt8(LXW_CHART_COLUMN.rawValue)
            case .bar: type = UInt8(LXW_CHART_BAR.rawValue)
            case .line: type = UInt8(LXW_CHART_LINE.rawValue)
            }
            guard let chart = workbook_add_chart(wb, type) else { continue }
            let (first, last) = bodies[ti]
            for v in values {
                let series = chart_add_series(chart, nil, nil)
                chart_series_set_categories(series, sheet.name, first, lxw_col_t(category), last, lxw_col_t(category))
                chart_series_set_values(series, sheet.name, first, lxw_col_t(v), last, lxw_col_t(v))
                chart_series_set_name_range(series, sheet.name, first - 1, lxw_col_t(v))
            }
            chart_title_set_name(chart, XMLText.safe(c.title))
            // (libxlsxwriter's x axis of a bar chart is its value axis, drawn across.)
            let valueAxis = c.kind == .bar ? chart.pointee.x_axis : chart.pointee.y_axis
            let categoryAxis = c.kind == .bar ? chart.pointee.y_axis : chart.pointee.x_axis
            chart_axis_set_name(valueAxis, XMLText.safe(c.yAxisTitle))
            // Amounts with thousands separators (General showed 12000), and every category named
            // (LibreOffice named every second of 16 storefronts).
            chart_axis_set_num_format(valueAxis, "#,##0")
            chart_axis_set_interval_unit(categoryAxis, 1)
            // A bar chart lists its categories top down, as its table does (Excel draws the first
            // at the bottom: the biggest storefront came last), the value axis kept at the bottom.
            if c.kind == .bar {
                chart_axis_set_reverse(categoryAxis)
                chart_axis_set_crossing_max(categoryAxis)
                // Names in 8 points, so that each fits its bar's height (at the default size
                // LibreOffice still left every second one out).
                var font = lxw_chart_font()
                font.size = 8
                chart_axis_set_num_font(categoryAxis, &font)
            }
            chart_legend_set_position(chart, UInt8(LXW_CHART_LEGEND_BOTTOM.rawValue))
            var options = lxw_chart_options()
            options.x_scale = 1.3
            // A bar chart is as tall as its categories need (about 18 pixels each, beside 120 for
            // its title, axis and legend): at the default height, 16 storefronts showed every
            // second name. Charts stand one under the other, 20 rows (of 20 pixels) apart at least.
            let categories = Int(last) - Int(first) + 1
            options.y_scale = c.kind == .bar ? max(1.2, Double(120 + 18 * categories) / 288) : 1.2
            worksheet_insert_chart_opt(ws, bodies[0].first - 1 + chartRow, anchorColumn, chart, &options)
            chartRow += max(20, UInt32((288 * options.y_scale / 20).rounded(.up)) + 3)
            drawn += 1
        }
        // Printed, a sheet with charts beside its tables is its tables, one page wide: with the
        // charts in the page too, the figures came out at half size.
        if drawn > 0, row > 0, !widths.isEmpty {
            worksheet_print_area(ws, 0, 0, row - 1, lxw_col_t(widths.count - 1))
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
