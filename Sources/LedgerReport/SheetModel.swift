import LedgerCore

/// A typed cell, independent of any spreadsheet library (hledger's Spreadsheet cell model).
public enum Cell: Equatable {
    case empty
    case text(String)
    case integer(Int64)
    /// An amount in minor units, shown in major units with `decimals` decimals.
    case money(minor: Int64, decimals: Int)
    case date(Day)

    /// The cell as plain text, for golden tests and CSV output.
    public var plain: String {
        switch self {
        case .empty: return ""
        case .text(let s): return s
        case .integer(let i): return String(i)
        case let .money(minor, decimals): return ExactDecimal(mantissa: minor, scale: decimals).description
        case .date(let d): return d.description
        }
    }

    /// `plain`'s UTF-8 bytes appended to `out`; text through `text` (which may quote it),
    /// numbers and dates written straight in (none of them holds a comma, a quote or a line
    /// break).
    public func appendPlain(to out: inout [UInt8], text: (String, inout [UInt8]) -> Void) {
        switch self {
        case .empty: return
        case .text(let s): text(s, &out)
        case .integer(let i): ExactDecimal(mantissa: i, scale: 0).appendDescription(to: &out)
        case let .money(minor, decimals): ExactDecimal(mantissa: minor, scale: decimals).appendDescription(to: &out)
        case .date(let d): out.append(contentsOf: d.description.utf8)
        }
    }
}

/// How a row is styled.
public enum RowStyle: Equatable { case body, total, section }

public struct SheetRow: Equatable {
    public var cells: [Cell]
    public var style: RowStyle
    public init(_ cells: [Cell], style: RowStyle = .body) { self.cells = cells; self.style = style }
}

/// A column of a table: its key (what the report code fills in, named by layouts), its title,
/// width in characters, the kind of its cells, and optionally its own number format.
public struct Column: Equatable {
    public enum Kind: Equatable { case text, integer, money, date }
    public var key: String
    public var title: String
    public var width: Int
    public var kind: Kind
    /// An Excel number format for this column's cells of its kind, instead of the workbook's
    /// (`NumberFormats`); for money, `{decimals}` stands for each cell's currency decimals.
    public var numberFormat: String?
    public init(_ title: String, width: Int, kind: Kind = .text, key: String = "", numberFormat: String? = nil) {
        self.key = key
        self.title = title
        self.width = width
        self.kind = kind
        self.numberFormat = numberFormat
    }
    /// A column as the report code declares it: its key and kind; a layout gives the rest.
    public init(key: String, _ kind: Kind = .text) {
        self.init(key, width: 12, kind: kind, key: key)
    }
}

/// The workbook's number formats per kind of cell. `{decimals}` in the money format stands for
/// the decimal point and one `0` per decimal of the cell's currency (nothing for JPY), so
/// every amount keeps its currency's decimals.
public struct NumberFormats: Equatable {
    public var money: String
    public var integer: String
    public var date: String
    public init(money: String, integer: String, date: String) {
        self.money = money
        self.integer = integer
        self.date = date
    }
    /// Thousands separators, the currency's decimals, negatives in red with a minus sign.
    public static let standard = NumberFormats(money: "#,##0{decimals};[Red]-#,##0{decimals}", integer: "#,##0", date: "yyyy-mm-dd")

    /// A money format template with `{decimals}` filled in.
    public static func money(_ template: String, decimals: Int) -> String {
        template.replacingOccurrences(of: "{decimals}", with: decimals <= 0 ? "" : "." + String(repeating: "0", count: decimals))
    }
}

/// A table inside a sheet: an optional heading, a header row, body rows.
public struct TableBlock {
    /// Names the table in a layout (`by_month`, `postings`); empty for ad-hoc tables.
    public var key: String
    public var heading: String?
    public var columns: [Column]
    public var rowCount: Int
    /// Emits the rows in order; streaming keeps big journals out of memory.
    public var rows: (_ emit: (SheetRow) throws -> Void) throws -> Void

    public init(key: String = "", heading: String? = nil, columns: [Column], rows: [SheetRow]) {
        self.key = key
        self.heading = heading
        self.columns = columns
        self.rowCount = rows.count
        self.rows = { emit in for r in rows { try emit(r) } }
    }

    public init(key: String = "", heading: String? = nil, columns: [Column], rowCount: Int,
                stream: @escaping (_ emit: (SheetRow) throws -> Void) throws -> Void) {
        self.key = key
        self.heading = heading
        self.columns = columns
        self.rowCount = rowCount
        self.rows = stream
    }

    /// Every row, collected (for tests and small tables).
    public func collect() throws -> [SheetRow] {
        var out: [SheetRow] = []
        try rows { out.append($0) }
        return out
    }
}

/// A native Excel chart over one table of the same sheet: categories from one column,
/// one series per value column, over the table's body rows (totals excluded). Table and
/// columns are named by key, so a chart follows its columns wherever a layout puts them; a
/// series whose column the layout leaves out is not drawn, nor a chart left with no series,
/// no category column or no table.
public struct ChartSpec: Equatable {
    public enum Kind: Equatable { case column, bar, line }
    public var title: String
    public var kind: Kind
    public var table: String
    public var categoryColumn: String
    public var valueColumns: [String]
    public var yAxisTitle: String
    public init(title: String, kind: Kind, table: String, categoryColumn: String, valueColumns: [String], yAxisTitle: String) {
        self.title = title
        self.kind = kind
        self.table = table
        self.categoryColumn = categoryColumn
        self.valueColumns = valueColumns
        self.yAxisTitle = yAxisTitle
    }
}

/// One worksheet: a title block, then tables. The first table's header is frozen and filtered.
public struct SheetModel {
    /// Names the sheet in a layout (`summary`, `journal`); empty for ad-hoc sheets.
    public var key: String
    public var name: String
    public var title: String
    public var subtitle: [String]
    public var tables: [TableBlock]
    /// Charts, placed to the right of the first table, one under the other.
    public var charts: [ChartSpec]
    public init(key: String = "", name: String, title: String, subtitle: [String] = [], tables: [TableBlock], charts: [ChartSpec] = []) {
        self.key = key
        self.name = name
        self.title = title
        self.subtitle = subtitle
        self.tables = tables
        self.charts = charts
    }
}

/// A workbook: sheets in order, and document properties.
public struct WorkbookModel {
    public var title: String
    public var subject: String
    public var company: String
    /// The creation date written into the file: the as-of date, so the same inputs give the same bytes.
    public var created: Day
    public var sheets: [SheetModel]
    /// Number formats of money, integer and date cells (a column may have its own).
    public var numberFormats: NumberFormats
    /// The paper every sheet is set up to print on.
    public var paper: PaperSize = .a4
    public init(title: String, subject: String, company: String = "", created: Day, sheets: [SheetModel],
                numberFormats: NumberFormats = .standard) {
        self.title = title
        self.subject = subject
        self.company = company
        self.created = created
        self.sheets = sheets
        self.numberFormats = numberFormats
    }
}
