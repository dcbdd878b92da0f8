import LedgerCore

/// A small RFC 4180 CSV reader that remembers the line each row starts on, so every
/// rejection can name `file:line`. (Quoted fields may hold commas, quotes and newlines.)
public struct CSVRow {
    public var line: Int
    public var fields: [String]
    /// The row's text as it stands in the file (for hashing and the trace).
    public var raw: Substring
    /// Whether the row runs to the end of the text with no line end after it.
    public var endsFile = false
}

public struct CSVError: Error, CustomStringConvertible {
    public var line: Int
    public var message: String
    /// The text of the row's first line (for a row refused on its own).
    public var raw: Substring = ""
    /// The row's fields read whole before the one that broke the quoting rules (for a row
    /// refused on its own): an order id first among them still names its order.
    public var fieldsBefore: [String] = []
    /// Whether the row runs to the end of the text with no line end after it (a quote left
    /// open to the end, or a broken last line).
    public var endsFile = false
    /// The refusal's code when it is not a row that breaks the CSV rules (`BAD_CSV`): a line
    /// too long to hold (`RECORD_TOO_LONG`).
    public var code: String? = nil
    public var description: String { "line \(line): \(message)" }
}

public enum CSV {
    /// `field` without leading and trailing whitespace (`CharacterSet.whitespaces`: spaces,
    /// tabs and the other Unicode space separators). Most fields have none: when the first and
    /// last bytes are ASCII and neither a space nor a tab, the field is returned as it is,
    /// without Foundation's trim (a quarter of the time spent reading an orders file).
    public static func trimmed(_ field: String) -> String {
        var field = field
        let clean = field.withUTF8 { bytes -> Bool in
            guard let first = bytes.first, let last = bytes.last else { return true }
            func plain(_ b: UInt8) -> Bool { b < 0x80 && b != 0x20 && b != 0x09 }
            return plain(first) && plain(last)
        }
        return clean ? field : field.trimmingCharacters(in: .whitespaces)
    }

    /// `field` as an id is read: without the plain spaces and tabs around it only (a no-break
    /// space after an id is part of it, to be refused); as `trimmed` under the rules of earlier
    /// versions (`StoreBounds.earlierIdentifierRules`).
    public static func idTrimmed(_ field: String) -> String {
        if StoreBounds.earlierIdentifierRules { return trimmed(field) }
        // Most ids have nothing around them: returned as they are, nothing copied (five id
        // fields a row of an orders file of millions).
        let utf8 = field.utf8
        guard let first = utf8.first, let last = utf8.last,
              first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 else { return field }
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// The most bytes a quoted field may hold (16 MiB, as a line of JSON Lines: an order's
    /// fields are ids and dates, and a column the reader does not use, a receipt in base64,
    /// say, is far smaller): past it, its quote is taken as never closed and the row refused
    /// at its first line. (Tests set a smaller one.)
    nonisolated(unsafe) public static var maxQuotedFieldBytes = 16 << 20

    /// Parses `text` into rows. Blank lines are skipped. A leading UTF-8 BOM is ignored. The
    /// first row that breaks the quoting rules stops the parse (rules files must be whole).
    public static func parse(_ text: Substring) throws -> [CSVRow] {
        try parseRows(text).map { try $0.get() }
    }

    /// Parses `text` row by row: a row that breaks the quoting rules (a stray or unclosed
    /// quote) is an error of its own, and reading goes on at the line after that row's first
    /// line, so one bad row of an input file leaves the others readable.
    public static func parseRows(_ text: Substring) -> [Result<CSVRow, CSVError>] {
        var rows: [Result<CSVRow, CSVError>] = []
        var s = text
        if s.hasPrefix("\u{FEFF}") { s = s.dropFirst() }
        forEachRow(s, line: 1, final: true) { rows.append($0) }
        return rows
    }

    /// Parses the rows of `s` (its first on line `line`) one at a time, as `parseRows` does,
    /// handing each to `body`. Not `final` (`s` is the start of more text: a file read a chunk
    /// at a time), it stops before a row that may go on past the end of `s` (one not ended by
    /// a line end, a quote still open, a bad row whose first line does not end, a CR last),
    /// and returns where that row starts and its line, to be read again with the text after;
    /// the rows it gave are those the whole text gives. (`s.endIndex` when every row was given.)
    @discardableResult
    public static func forEachRow(_ s: Substring, line firstLine: Int, final: Bool,
                                  _ body: (Result<CSVRow, CSVError>) throws -> Void) rethrows -> (rest: Substring.Index, line: Int) {
        let u = s.utf8
        var i = u.startIndex
        var line = firstLine
        func followedByLF(_ at: Substring.UTF8View.Index) -> Bool {
            let next = u.index(after: at)
            return next < u.endIndex && u[next] == UInt8(ascii: "\n")
        }
        /// Whether the byte at `at` is the text's last (what follows it is not known unless `final`).
        func last(_ at: Substring.UTF8View.Index) -> Bool { u.index(after: at) == u.endIndex }
        /// The end of the line that starts at `from`: its LF, or a CR not followed by one.
        func lineEnd(from: Substring.UTF8View.Index) -> Substring.UTF8View.Index {
            var e = from
            while e < u.endIndex && u[e] != UInt8(ascii: "\n") && !(u[e] == UInt8(ascii: "\r") && !followedByLF(e)) { e = u.index(after: e) }
            return e
        }
        while i < u.endIndex {
            let rowStart = i
            let rowLine = line
            var fields: [String] = []
            var field: [UInt8] = []
            var inQuotes = false
            var quotedField = false
            var anyQuoted = false
            var rowDone = false
            var broken: String? = nil
            var overlong = false
            scan: while i < u.endIndex && !rowDone {
                let c = u[i]
                if inQuotes {
                    if c == UInt8(ascii: "\"") {
                        let next = u.index(after: i)
                        if next < u.endIndex && u[next] == UInt8(ascii: "\"") {
                            field.append(c); i = u.index(after: next); continue
                        }
                        inQuotes = false
                    } else {
                        if c == UInt8(ascii: "\n") || (c == UInt8(ascii: "\r") && !followedByLF(i)) { line += 1 }
                        field.append(c)
                        // A quote left open would take the rest of the file into one field, held
                        // until the file's end (a 500 MB orders file took 2 GB): past this size it
                        // is taken as never closed, whatever follows, read whole or a chunk at a time.
                        if field.count > maxQuotedFieldBytes { overlong = true; break scan }
                    }
                    i = u.index(after: i)
                    continue
                }
                switch c {
                case UInt8(ascii: "\""):
                    if field.isEmpty && !quotedField { inQuotes = true; quotedField = true; anyQuoted = true }
                    else { broken = "a quote inside an unquoted field"; break scan }
                case UInt8(ascii: ","):
                    fields.append(String(decoding: field, as: UTF8.self)); field = []; quotedField = false
                case UInt8(ascii: "\r"):
                    // CR LF ends the row at its LF; a CR alone (classic Mac line ends, still
                    // written by some spreadsheet exports) ends it here.
                    if !final && last(i) { return (rowStart, rowLine) }
                    if !followedByLF(i) { line += 1; rowDone = true }
                case UInt8(ascii: "\n"):
                    line += 1; rowDone = true
                default:
                    if quotedField { broken = "text after a closing quote"; break scan }
                    field.append(c)
                }
                i = u.index(after: i)
            }
            if !final && broken == nil && !rowDone && !overlong { return (rowStart, rowLine) }
            if inQuotes || broken != nil {
                // Refuse this row alone and go on at the line after its first line.
                let firstLineEnd = lineEnd(from: rowStart)
                if !final && (firstLineEnd == u.endIndex || (u[firstLineEnd] == UInt8(ascii: "\r") && last(firstLineEnd))) {
                    return (rowStart, rowLine)
                }
                var rawEnd = firstLineEnd
                if rawEnd > rowStart && u[u.index(before: rawEnd)] == UInt8(ascii: "\r") { rawEnd = u.index(before: rawEnd) }
                let message: String
                if let why = broken {
                    message = line > rowLine ? "a quoted field is never properly closed: line \(line) has \(why)" : why
                } else if overlong {
                    message = "a quoted field runs on past \(maxQuotedFieldBytes) bytes (still open at line \(line)): taken as never closed"
                } else {
                    message = "a quoted field is never closed"
                }
                // The fields before the broken one, each read whole (the first of them is on the
                // row's first line; a later one may hold lines of the file after it).
                try body(.failure(CSVError(line: rowLine, message: message, raw: s[rowStart..<rawEnd],
                                           fieldsBefore: fields,
                                           // (A quote left open runs to the end: cut short
                                           // only where the text ends with no line end.)
                                           endsFile: overlong ? false
                                               : broken == nil ? !(u.last == UInt8(ascii: "\n") || u.last == UInt8(ascii: "\r"))
                                               : firstLineEnd == u.endIndex)))
                i = firstLineEnd < u.endIndex ? u.index(after: firstLineEnd) : firstLineEnd
                line = rowLine + 1
                continue
            }
            fields.append(String(decoding: field, as: UTF8.self))
            var rawEnd = i
            while rawEnd > rowStart {
                let before = u.index(before: rawEnd)
                if u[before] == UInt8(ascii: "\n") || u[before] == UInt8(ascii: "\r") { rawEnd = before } else { break }
            }
            let raw = s[rowStart..<rawEnd]
            // A blank line, or a row of empty fields (`,,,,,,,`: the rows a spreadsheet writes
            // for rows cleared of their values) or of spaces: no record, as a blank line is none.
            if !anyQuoted && fields.allSatisfy({ $0.utf8.allSatisfy { $0 == 0x20 || $0 == 0x09 } }) { continue }
            try body(.success(CSVRow(line: rowLine, fields: fields, raw: raw, endsFile: !rowDone)))
        }
        return (u.endIndex, line)
    }

    /// A text field of an output file (an id, a product, a message): as `escape`, with an
    /// apostrophe put before a text a spreadsheet would run as a formula (`SpreadsheetText.readsAsFormula`),
    /// so an order id such as `=HYPERLINK(...)` read from the backend's file is shown, not run.
    /// Not for numbers: a negative amount is written as it is, with `escape`.
    public static func escapeText(_ field: String) -> String {
        escape(SpreadsheetText.readsAsFormula(field.utf8) ? "'" + field : field)
    }

    /// Quotes a field for output when it needs it.
    public static func escape(_ field: String) -> String {
        if field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) {
            return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        }
        return field
    }
}

/// A CSV file with a header row, read by column name.
public struct CSVTable {
    public let path: String
    public let header: [String]
    /// The header row's text as it stands in the file (kept with the file, so each row can be
    /// read again by column name).
    public let headerRaw: Substring
    public let rows: [CSVRow]
    private let index: [String: Int]

    /// Rows refused on their own (only when read with `rowByRow`).
    public let badRows: [CSVError]

    /// - Parameter rowByRow: a row that breaks the quoting rules goes to `badRows` instead of
    ///   stopping the read (input files; rules files stop at the first bad row).
    /// - Parameter reads: the columns the reader takes values from (nil: every column): a name
    ///   given twice is refused among those only.
    public init(path: String, text: Substring, required: [String], rowByRow: Bool = false, reads: Set<String>? = nil) throws {
        var rows: [CSVRow] = []
        var bad: [CSVError] = []
        for r in CSV.parseRows(text) {
            switch r {
            case .success(let row): rows.append(row)
            case .failure(let e):
                // The header must be whole, and so must every row of a file read strictly.
                if !rowByRow || rows.isEmpty { throw e }
                bad.append(e)
            }
        }
        guard !rows.isEmpty else { throw ReadError.file(path, "is empty: a header row is required (\(required.joined(separator: ",")))") }
        let headerRow = rows.removeFirst()
        try self.init(path: path, headerRow: headerRow, rows: rows, badRows: bad, required: required, reads: reads)
    }

    /// A table of `headerRow` and the rows after it (an orders file read a row at a time has none).
    public init(path: String, headerRow: CSVRow, rows: [CSVRow] = [], badRows: [CSVError] = [], required: [String], reads: Set<String>? = nil) throws {
        self.path = path
        self.badRows = badRows
        let header = headerRow.fields.map(CSV.trimmed)
        self.header = header
        self.headerRaw = headerRow.raw
        var index: [String: Int] = [:]
        for (i, h) in header.enumerated() {
            // Two columns of one name: which one a row means cannot be told.
            if !h.isEmpty, index[h] != nil, reads?.contains(h) ?? true {
                throw ReadError.file(path, "header names column \(h) twice (columns \(index[h]! + 1) and \(i + 1)): which one holds the value cannot be told")
            }
            index[h] = i
        }
        self.index = index
        self.rows = rows
        let missing = required.filter { index[$0] == nil }
        guard missing.isEmpty else {
            throw ReadError.file(path, "header lacks column(s) \(missing.joined(separator: ", ")) (found: \(header.joined(separator: ",")))")
        }
    }

    public func has(_ column: String) -> Bool { index[column] != nil }

    /// The trimmed value of `column` in `row`, or "" when the row is short or lacks the column.
    public func value(_ row: CSVRow, _ column: String) -> String {
        guard let i = index[column], i < row.fields.count else { return "" }
        return CSV.trimmed(row.fields[i])
    }

    /// The field without the plain spaces and tabs around it only: an id's other spaces and
    /// invisible characters are its own, to be refused (`value` trims every Unicode space).
    public func asciiTrimmedValue(_ row: CSVRow, _ column: String) -> String {
        guard let i = index[column], i < row.fields.count else { return "" }
        return CSV.idTrimmed(row.fields[i])
    }
}

import Foundation
