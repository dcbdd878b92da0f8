import Foundation
import LedgerCore
import LedgerTemplates
import TOMLKit

/// How one workbook is laid out: which sheets, in what order, under what names and titles;
/// per table which columns, in what order, with what titles, widths and number formats.
/// Read from `layouts/<workbook>.toml` (the workspace's, else the one shipped in
/// `templates/workspace/layouts/`), so a layout change needs no code.
public struct ReportLayout: Equatable {
    public struct ColumnLayout: Equatable {
        public var key: String
        public var title: String
        public var width: Int
        /// The column's own number format (else the workbook's `[formats]` for its kind).
        public var format: String?
    }
    public struct TableLayout: Equatable {
        public var key: String
        public var heading: String?
        public var columns: [ColumnLayout]
    }
    public struct SheetLayout: Equatable {
        public var key: String
        public var name: String
        public var title: String
        public var subtitle: [String]
        public var tables: [TableLayout]
    }

    public var workbook: ReportWorkbook
    /// The file it was read from, for messages.
    public var source: String
    public var formats: NumberFormats
    public var sheets: [SheetLayout]

    public func sheet(_ key: String) -> SheetLayout? { sheets.first { $0.key == key } }

    /// The widest Excel column width.
    static let maxWidth = 255

    /// The shipped default layout of a workbook (`templates/workspace/layouts/<workbook>.toml`).
    public static func shipped(_ workbook: ReportWorkbook) throws -> ReportLayout {
        guard let data = LedgerTemplates.layout(workbook.layoutFileName) else {
            throw LayoutError(path: "templates/workspace/layouts/\(workbook.layoutFileName)", key: "",
                              message: "the tool's bundled layout is missing (reinstall iapledger)")
        }
        return try parse(String(decoding: data, as: UTF8.self), workbook: workbook,
                         path: "templates/workspace/layouts/\(workbook.layoutFileName)", defaults: nil)
    }
}

/// A layout file that cannot be used: names the file and the sheet, table or column key.
public struct LayoutError: Error, CustomStringConvertible, Equatable {
    public var path: String
    /// Where in the file: `sheet "journal", table "postings", column "amount"` (empty for the whole file).
    public var key: String
    public var message: String
    public init(path: String, key: String, message: String) {
        self.path = path
        self.key = key
        self.message = message
    }
    public var description: String { key.isEmpty ? "\(path): \(message)" : "\(path): \(key): \(message)" }
}

/// The three layouts of a report set, loaded and checked at the start of a run.
public struct ReportLayouts: Equatable {
    public var finance: ReportLayout
    public var sandbox: ReportLayout
    public var reconciliation: ReportLayout

    public subscript(_ workbook: ReportWorkbook) -> ReportLayout {
        switch workbook {
        case .finance: return finance
        case .sandbox: return sandbox
        case .reconciliation: return reconciliation
        }
    }

    /// The shipped defaults.
    public static func shipped() throws -> ReportLayouts {
        ReportLayouts(finance: try .shipped(.finance), sandbox: try .shipped(.sandbox), reconciliation: try .shipped(.reconciliation))
    }

    /// The layouts of a workspace: `<directory>/<workbook>.toml` where the file exists, else the
    /// shipped default. A value the workspace's file leaves out (a title, a width, a sheet's
    /// tables or a table's columns) is the shipped default's. Any other `*.toml` in the folder
    /// is an error (a misspelt file name would otherwise be ignored without a word).
    public static func load(directory: URL) throws -> ReportLayouts {
        let fm = FileManager.default
        if let names = try? fm.contentsOfDirectory(atPath: directory.path) {
            let known = Set(ReportWorkbook.allCases.map(\.layoutFileName))
            for name in names.sorted() where name.lowercased().hasSuffix(".toml") && !known.contains(name) {
                throw LayoutError(path: directory.appendingPathComponent(name).path, key: "",
                                  message: "not a layout file: the layouts are finance.toml, sandbox.toml and reconciliation.toml")
            }
        }
        func one(_ w: ReportWorkbook) throws -> ReportLayout {
            let shipped = try ReportLayout.shipped(w)
            let url = directory.appendingPathComponent(w.layoutFileName)
            guard fm.fileExists(atPath: url.path) else { return shipped }
            guard let data = fm.contents(atPath: url.path) else {
                throw LayoutError(path: url.path, key: "", message: "cannot be read (permissions?)")
            }
            return try ReportLayout.parse(String(decoding: data, as: UTF8.self), workbook: w, path: url.path, defaults: shipped)
        }
        return ReportLayouts(finance: try one(.finance), sandbox: try one(.sandbox), reconciliation: try one(.reconciliation))
    }
}

// MARK: - Reading a layout file

extension ReportLayout {
    /// Reads and checks a layout file against what the report code can fill (`ReportWorkbook.sheets`).
    /// - Parameter defaults: where a value the file leaves out comes from (the shipped layout);
    ///   without it, a column's title is its key and its width 12.
    public static func parse(_ text: String, workbook: ReportWorkbook, path: String, defaults: ReportLayout?) throws -> ReportLayout {
        let root: TOMLTable
        if let bad = TOMLHeaderCheck.problem(in: text) {
            throw LayoutError(path: "\(path):\(bad.line)", key: "", message: "not valid TOML: \(bad.message)")
        }
        do {
            root = try TOMLTable(string: text)
        } catch let e as TOMLParseError {
            throw LayoutError(path: "\(path):\(e.source.begin.line)", key: "", message: "not valid TOML: \(e.description)")
        } catch {
            throw LayoutError(path: path, key: "", message: "not valid TOML: \(error)")
        }
        func fail(_ key: String, _ message: String) -> LayoutError { LayoutError(path: path, key: key, message: message) }
        func only(_ t: TOMLTable, _ allowed: [String], _ key: String, _ what: String) throws {
            for k in t.keys.sorted() where !allowed.contains(k) {
                throw fail(key, "unknown setting \"\(k)\"; \(what) has \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))")
            }
        }
        func string(_ t: TOMLTable, _ name: String, _ key: String) throws -> String? {
            guard let v = t[name] else { return nil }
            guard let s = v.string else { throw fail(key, "\(name) must be a string in quotes") }
            return s
        }
        try only(root, ["formats", "sheet"], "", "a layout file")

        var formats = defaults?.formats ?? .standard
        if let v = root["formats"] {
            guard let t = v.table else { throw fail("[formats]", "must be a table [formats]") }
            try only(t, ["money", "integer", "date"], "[formats]", "[formats]")
            for (name, kind) in [("money", Column.Kind.money), ("integer", .integer), ("date", .date)] {
                guard let f = try string(t, name, "[formats]") else { continue }
                try checkFormat(f, kind: kind, key: "[formats] \(name)", fail: fail)
                switch kind {
                case .money: formats.money = f
                case .integer: formats.integer = f
                default: formats.date = f
                }
            }
        }

        guard let sheetValues = root["sheet"] else {
            throw fail("", "lists no sheets: add a [[sheet]] block per sheet (the shipped \(workbook.layoutFileName) lists them all)")
        }
        guard let sheetArray = sheetValues.array else { throw fail("sheet", "write each sheet as a [[sheet]] block") }
        let knownSheets = workbook.sheets.map(\.key)
        var sheets: [SheetLayout] = []
        for (i, value) in sheetArray.enumerated() {
            guard let t = value.table else { throw fail("sheet \(i + 1)", "write each sheet as a [[sheet]] block") }
            guard let key = try string(t, "key", "sheet \(i + 1)") else {
                throw fail("sheet \(i + 1)", "has no key; say which sheet it is with key = \"...\" (one of \(list(knownSheets)))")
            }
            let where_ = "sheet \"\(key)\""
            guard let schema = workbook.sheet(key) else {
                throw fail(where_, "unknown sheet key; the \(workbook.rawValue) workbook has \(list(knownSheets))")
            }
            guard !sheets.contains(where: { $0.key == key }) else { throw fail(where_, "is listed twice") }
            try only(t, ["key", "name", "title", "subtitle", "table"], where_, "a [[sheet]] block")
            let fallback = defaults?.sheet(key)
            let placeholders = workbook.placeholders + schema.placeholders
            func text(_ s: String, _ what: String, _ at: String) throws -> String {
                try checkPlaceholders(s, allowed: placeholders, what: what, key: at, fail: fail)
                return s
            }

            guard let name = try string(t, "name", where_) ?? fallback?.name else {
                throw fail(where_, "has no name; give the sheet's tab name with name = \"...\"")
            }
            let title = try text(try string(t, "title", where_) ?? fallback?.title ?? "", "title", where_)
            var subtitle = fallback?.subtitle ?? []
            if let v = t["subtitle"] {
                if let s = v.string { subtitle = [s] }
                else if let a = v.array {
                    subtitle = try a.map { guard let s = $0.string else { throw fail(where_, "subtitle must be a string or a list of strings") }; return s }
                } else { throw fail(where_, "subtitle must be a string or a list of strings") }
                subtitle = try subtitle.map { try text($0, "subtitle", where_) }
            }

            var tables = fallback?.tables ?? schema.tables.map { ts in
                TableLayout(key: ts.key, heading: nil, columns: ts.columns.map { ColumnLayout(key: $0.key, title: $0.key, width: 12, format: nil) })
            }
            if let v = t["table"] {
                guard let arr = v.array else { throw fail(where_, "write each table as a [[sheet.table]] block") }
                let knownTables = schema.tables.map(\.key)
                tables = []
                for (j, tv) in arr.enumerated() {
                    guard let tt = tv.table else { throw fail(where_, "write each table as a [[sheet.table]] block") }
                    guard let tkey = try string(tt, "key", "\(where_), table \(j + 1)") else {
                        throw fail("\(where_), table \(j + 1)", "has no key; say which table it is with key = \"...\" (one of \(list(knownTables)))")
                    }
                    let twhere = "\(where_), table \"\(tkey)\""
                    guard let tschema = schema.table(tkey) else {
                        throw fail(twhere, "unknown table key; sheet \"\(key)\" has \(list(knownTables))")
                    }
                    guard !tables.contains(where: { $0.key == tkey }) else { throw fail(twhere, "is listed twice") }
                    try only(tt, ["key", "heading", "columns"], twhere, "a [[sheet.table]] block")
                    let tfallback = fallback?.tables.first { $0.key == tkey }
                    var heading = tfallback?.heading
                    if tt["heading"] != nil {
                        let h = try text(try string(tt, "heading", twhere) ?? "", "heading", twhere)
                        heading = h.isEmpty ? nil : h
                    }
                    var columns = tfallback?.columns ?? tschema.columns.map { ColumnLayout(key: $0.key, title: $0.key, width: 12, format: nil) }
                    if let cv = tt["columns"] {
                        guard let carr = cv.array else {
                            throw fail(twhere, "columns must be a list: columns = [ { key = \"...\", title = \"...\", width = 12 }, ... ]")
                        }
                        guard !carr.isEmpty else {
                            throw fail(twhere, "lists no columns; list at least one, or leave `columns` out for the default ones")
                        }
                        columns = []
                        for (k, item) in carr.enumerated() {
                            let column = try parseColumn(item, index: k, schema: tschema, tableKey: twhere, fallback: tfallback,
                                                         placeholders: placeholders, fail: fail)
                            guard !columns.contains(where: { $0.key == column.key }) else {
                                throw fail("\(twhere), column \"\(column.key)\"", "is listed twice")
                            }
                            columns.append(column)
                        }
                    }
                    tables.append(TableLayout(key: tkey, heading: heading, columns: columns))
                }
            }
            sheets.append(SheetLayout(key: key, name: name, title: title, subtitle: subtitle, tables: tables))
        }
        guard !sheets.isEmpty else { throw fail("", "lists no sheets: a workbook needs at least one") }
        try checkSheetNames(sheets, fail: fail)
        return ReportLayout(workbook: workbook, source: path, formats: formats, sheets: sheets)
    }

    static func parseColumn(_ item: TOMLValueConvertible, index: Int, schema: TableSchema, tableKey: String, fallback: TableLayout?,
                            placeholders: [String], fail: (String, String) -> LayoutError) throws -> ColumnLayout {
        let known = schema.columns.map(\.key)
        let ckey: String
        var t: TOMLTable? = nil
        if let s = item.string {
            ckey = s
        } else if let tt = item.table {
            guard let v = tt["key"], let s = v.string else {
                throw fail("\(tableKey), column \(index + 1)", "has no key; say which column it is with key = \"...\" (one of \(list(known)))")
            }
            ckey = s
            t = tt
        } else {
            throw fail("\(tableKey), column \(index + 1)", "write a column as { key = \"...\", title = \"...\", width = 12 } or as its key in quotes")
        }
        let at = "\(tableKey), column \"\(ckey)\""
        guard let cschema = schema.column(ckey) else { throw fail(at, "unknown column key; this table has \(list(known))") }
        let def = fallback?.columns.first { $0.key == ckey }
        var column = ColumnLayout(key: ckey, title: def?.title ?? ckey, width: def?.width ?? 12, format: def?.format)
        guard let t else { return column }
        for k in t.keys.sorted() where !["key", "title", "width", "format"].contains(k) {
            throw fail(at, "unknown setting \"\(k)\"; a column has \"key\", \"title\", \"width\", \"format\"")
        }
        if let v = t["title"] {
            guard let s = v.string, !s.trimmingCharacters(in: .whitespaces).isEmpty else { throw fail(at, "title must be a non-empty string in quotes") }
            try checkPlaceholders(s, allowed: placeholders, what: "title", key: at, fail: fail)
            column.title = s
        }
        if let v = t["width"] {
            guard let w = v.int, (1...maxWidth).contains(w) else {
                throw fail(at, "width must be a whole number of characters from 1 to \(maxWidth)")
            }
            column.width = w
        }
        if let v = t["format"] {
            guard let s = v.string, !s.isEmpty else { throw fail(at, "format must be an Excel number format in quotes") }
            guard cschema.kind != .text else {
                throw fail(at, "holds text; a number format applies to money, integer and date columns")
            }
            try checkFormat(s, kind: cschema.kind, key: at, fail: fail)
            column.format = s
        }
        return column
    }

    /// `{decimals}` is the only placeholder of a number format, and only of a money format.
    static func checkFormat(_ format: String, kind: Column.Kind, key: String, fail: (String, String) -> LayoutError) throws {
        for p in placeholders(in: format) {
            guard p == "decimals" else { throw fail(key, "unknown placeholder {\(p)} in the format; a money format may use {decimals}") }
            guard kind == .money else { throw fail(key, "{decimals} is for money formats (the currency's decimals)") }
        }
    }

    static func checkPlaceholders(_ s: String, allowed: [String], what: String, key: String, fail: (String, String) -> LayoutError) throws {
        for p in placeholders(in: s) where !allowed.contains(p) {
            throw fail(key, "unknown placeholder {\(p)} in the \(what); it may use \(allowed.map { "{\($0)}" }.joined(separator: ", "))")
        }
    }

    /// The `{name}` placeholders of a text (lower-case letters and underscores between braces).
    static func placeholders(in s: String) -> [String] {
        var out: [String] = []
        var rest = Substring(s)
        while let open = rest.firstIndex(of: "{") {
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(of: "}") else { break }
            let name = after[..<close]
            if !name.isEmpty, name.allSatisfy({ ("a"..."z").contains($0) || $0 == "_" }) { out.append(String(name)) }
            rest = after
        }
        return out
    }

    /// Excel's rules for sheet names, checked here so a bad one stops the run before it writes.
    static func checkSheetNames(_ sheets: [SheetLayout], fail: (String, String) -> LayoutError) throws {
        var seen: [String: String] = [:]
        let journal = sheets.first { $0.key == "journal" }?.name.lowercased()
        for s in sheets {
            let at = "sheet \"\(s.key)\""
            let name = s.name
            guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw fail(at, "name is empty") }
            guard name.count <= 31 else {
                throw fail(at, "name \"\(name)\" is \(name.count) characters; Excel allows at most 31")
            }
            if let bad = name.first(where: { "[]:*?/\\".contains($0) }) {
                throw fail(at, "name \"\(name)\" has \"\(bad)\"; Excel does not allow [ ] : * ? / \\ in sheet names")
            }
            if let bad = name.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F || $0.value == 0xFFFE || $0.value == 0xFFFF }) {
                throw fail(at, "name \(String(reflecting: name)) holds U+\(String(format: "%04X", bad.value)), which a sheet name cannot hold")
            }
            guard !name.hasPrefix("'"), !name.hasSuffix("'") else { throw fail(at, "name \"\(name)\" may not begin or end with '") }
            guard name.lowercased() != "history" else { throw fail(at, "Excel reserves the sheet name History") }
            if let other = seen[name.lowercased()] {
                throw fail(at, "name \"\(name)\" is also the name of sheet \"\(other)\"; sheet names must differ (Excel ignores case)")
            }
            if let j = journal, s.key != "journal", name.lowercased().hasPrefix(j + " ("), name.hasSuffix(")"),
               Int(name.dropFirst(j.count + 2).dropLast()) != nil {
                throw fail(at, "name \"\(name)\" is the name the journal's continuation sheets take; choose another")
            }
            seen[name.lowercased()] = s.key
        }
    }

    static func list(_ keys: [String]) -> String { keys.joined(separator: ", ") }
}

// MARK: - Applying a layout

/// What the report code produces for one sheet, before a layout names and arranges it:
/// its tables (every column of the schema, in the schema's order), its charts, and the
/// values of its own `{placeholders}`.
public struct SheetContent {
    public var key: String
    public var tables: [TableBlock]
    public var charts: [ChartSpec]
    public var values: [String: String]
    /// Lines the tool writes instead of the layout's subtitle (the Journal past its row cap).
    public var notice: [String]?
    /// Warnings the tool writes after the layout's subtitle, each unless the layout's title or
    /// subtitle uses its placeholder (which then says it): a layout written before the
    /// warning was added (a workspace's own copy) leaves nothing out that finance must see.
    public var warnings: [(placeholder: String, line: String)] = []
    public init(key: String, tables: [TableBlock], charts: [ChartSpec] = [], values: [String: String] = [:], notice: [String]? = nil) {
        self.key = key
        self.tables = tables
        self.charts = charts
        self.values = values
        self.notice = notice
    }
}

extension ReportLayout {
    /// `{name}` replaced by its value, for every value given.
    static func fill(_ s: String, _ values: [String: String]) -> String {
        guard s.contains("{") else { return s }
        var out = s
        for (k, v) in values { out = out.replacingOccurrences(of: "{\(k)}", with: v) }
        return out
    }

    /// One sheet as this layout shows it. `values` fill the workbook's placeholders.
    public func apply(_ layout: SheetLayout, to content: SheetContent, values: [String: String]) -> SheetModel {
        let all = values.merging(content.values) { _, sheet in sheet }
        let tables = layout.tables.compactMap { t -> TableBlock? in
            content.tables.first { $0.key == t.key }.map { $0.laidOut(t) { Self.fill($0, all) } }
        }
        let shown = [layout.title] + layout.subtitle
        let warnings = content.warnings.filter { w in !shown.contains { $0.contains("{\(w.placeholder)}") } }.map(\.line)
        return SheetModel(key: content.key, name: layout.name, title: Self.fill(layout.title, all),
                          subtitle: content.notice ?? (layout.subtitle.map { Self.fill($0, all) } + warnings), tables: tables, charts: content.charts)
    }
}

extension TableBlock {
    /// The table with the layout's columns, in its order, titles, widths and formats. A streamed
    /// table stays streamed: each row is projected as it passes. A totals row whose label (its
    /// first text saying "Total", else its first cell) is in a column left out keeps it in the
    /// first column shown that is no amount column and whose cell is empty, else the first whose
    /// cell is text (the Trial Balance's "Total EUR" in place of the book's name; the Refunds
    /// total's count of late entries kept); a row shown all in figures keeps none.
    func laidOut(_ layout: ReportLayout.TableLayout, title: (String) -> String) -> TableBlock {
        let indices = layout.columns.map { c in columns.firstIndex { $0.key == c.key } }
        let laid = zip(layout.columns, indices).map { c, i -> Column in
            var column = i.map { columns[$0] } ?? Column(key: c.key)
            column.title = title(c.title)
            column.width = c.width
            column.numberFormat = c.format
            return column
        }
        let source = rows
        if indices == columns.indices.map({ Optional($0) }) {
            return TableBlock(key: key, heading: layout.heading.map(title), columns: laid, rowCount: rowCount, stream: source)
        }
        let positions = indices.map { $0 ?? Int.max }
        func isText(_ c: Cell) -> Bool { if case .text = c { return true }; return false }
        return TableBlock(key: key, heading: layout.heading.map(title), columns: laid, rowCount: rowCount) { emit in
            try source { r in
                var cells = positions.map { $0 < r.cells.count ? r.cells[$0] : .empty }
                // A short row stays short (a totals row writes its empty cells, bordered).
                while let last = positions[..<cells.count].last, last >= r.cells.count { cells.removeLast() }
                if r.style != .body,
                   let at = r.cells.firstIndex(where: { if case .text(let s) = $0 { return s.hasPrefix("Total") }; return false })
                            ?? (r.cells.first.map(isText) == true ? 0 : nil),
                   !positions.contains(at),
                   let to = cells.indices.first(where: { cells[$0] == .empty && laid[$0].kind != .money }) ?? cells.firstIndex(where: isText) {
                    cells[to] = r.cells[at]
                }
                try emit(SheetRow(cells, style: r.style))
            }
        }
    }
}
