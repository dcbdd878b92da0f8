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
}

/// How a row is styled.
public enum RowStyle: Equatable { case body, total, section }

public struct SheetRow: Equatable {
    public var cells: [Cell]
    public var style: RowStyle
    public init(_ cells: [Cell], style: RowStyle = .body) { self.cells = cells; self.style = style }
}

/// A column of a table: its title, width in characters and the kind of its cells.
public struct Column: Equatable {
    public enum Kind: Equatable { case text, integer, money, date }
    public var title: String
    public var width: Int
    public var kind: Kind
    public init(_ title: String, width: Int, kind: Kind = .text) { self.title = title; self.width = width; self.kind = kind }
}

/// A table inside a sheet: an optional heading, a header row, body rows.
public struct TableBlock {
    public var heading: String?
    public var columns: [Column]
    public var rowCount: Int
    /// Emits the rows in order; streaming keeps big journals out of memory.
    public var rows: (_ emit: (SheetRow) throws -> Void) throws -> Void

    public init(heading: String? = nil, columns: [Column], rows: [SheetRow]) {
        self.heading = heading
        self.columns = columns
        self.rowCount = rows.count
        self.rows = { emit in for r in rows { try emit(r) } }
    }

    public init(heading: String? = nil, columns: [Column], rowCount: Int,
                stream: @escaping (_ emit: (SheetRow) throws -> Void) throws -> Void) {
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
/// one series per value column, over the table's body rows (totals excluded).
public struct ChartSpec: Equatable {
    public enum Kind: Equatable { case column, bar, line }
    public var title: String
    public var kind: Kind
    public var table: Int
    public var categoryColumn: Int
    public var valueColumns: [Int]
    public var yAxisTitle: String
    public init(title: String, kind: Kind, table: Int, categoryColumn: Int, valueColumns: [Int], yAxisTitle: String) {
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
    public var name: String
    public var title: String
    public var subtitle: [String]
    public var tables: [TableBlock]
    /// Charts, placed to the right of the first table, one under the other.
    public var charts: [ChartSpec]
    public init(name: String, title: String, subtitle: [String] = [], tables: [TableBlock], charts: [ChartSpec] = []) {
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
    public init(title: String, subject: String, company: String = "", created: Day, sheets: [SheetModel]) {
        self.title = title
        self.subject = subject
        self.company = company
        self.created = created
        self.sheets = sheets
    }
}
