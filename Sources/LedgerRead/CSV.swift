/// A small RFC 4180 CSV reader that remembers the line each row starts on, so every
/// rejection can name `file:line`. (Quoted fields may hold commas, quotes and newlines.)
public struct CSVRow {
    public var line: Int
    public var fields: [String]
    /// The row's text as it stands in the file (for hashing and the trace).
    public var raw: Substring
}

public struct CSVError: Error, CustomStringConvertible {
    public var line: Int
    public var message: String
    public var description: String { "line \(line): \(message)" }
}

public enum CSV {
    /// Parses `text` into rows. Blank lines are skipped. A leading UTF-8 BOM is ignored.
    public static func parse(_ text: Substring) throws -> [CSVRow] {
        var rows: [CSVRow] = []
        var s = text
        if s.hasPrefix("\u{FEFF}") { s = s.dropFirst() }
        let u = s.utf8
        var i = u.startIndex
        var line = 1
        while i < u.endIndex {
            let rowStart = i
            let rowLine = line
            var fields: [String] = []
            var field: [UInt8] = []
            var inQuotes = false
            var quotedField = false
            var rowDone = false
            while i < u.endIndex && !rowDone {
                let c = u[i]
                if inQuotes {
                    if c == UInt8(ascii: "\"") {
                        let next = u.index(after: i)
                        if next < u.endIndex && u[next] == UInt8(ascii: "\"") {
                            field.append(c); i = u.index(after: next); continue
                        }
                        inQuotes = false
                    } else {
                        if c == UInt8(ascii: "\n") { line += 1 }
                        field.append(c)
                    }
                    i = u.index(after: i)
                    continue
                }
                switch c {
                case UInt8(ascii: "\""):
                    if field.isEmpty && !quotedField { inQuotes = true; quotedField = true }
                    else { throw CSVError(line: line, message: "a quote inside an unquoted field") }
                case UInt8(ascii: ","):
                    fields.append(String(decoding: field, as: UTF8.self)); field = []; quotedField = false
                case UInt8(ascii: "\r"):
                    break
                case UInt8(ascii: "\n"):
                    line += 1; rowDone = true
                default:
                    if quotedField { throw CSVError(line: line, message: "text after a closing quote") }
                    field.append(c)
                }
                i = u.index(after: i)
            }
            if inQuotes { throw CSVError(line: rowLine, message: "a quoted field is never closed") }
            fields.append(String(decoding: field, as: UTF8.self))
            var rawEnd = i
            while rawEnd > rowStart {
                let before = u.index(before: rawEnd)
                if u[before] == UInt8(ascii: "\n") || u[before] == UInt8(ascii: "\r") { rawEnd = before } else { break }
            }
            let raw = s[rowStart..<rawEnd]
            if fields.count == 1 && fields[0].isEmpty && !quotedField { continue } // blank line
            rows.append(CSVRow(line: rowLine, fields: fields, raw: raw))
        }
        return rows
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
    public let rows: [CSVRow]
    private let index: [String: Int]

    public init(path: String, text: Substring, required: [String]) throws {
        self.path = path
        var rows = try CSV.parse(text)
        guard !rows.isEmpty else { throw ReadError.file(path, "is empty: a header row is required (\(required.joined(separator: ",")))") }
        let header = rows.removeFirst().fields.map { String($0.trimmingCharacters(in: .whitespaces)) }
        self.header = header
        var index: [String: Int] = [:]
        for (i, h) in header.enumerated() { index[h] = i }
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
        return row.fields[i].trimmingCharacters(in: .whitespaces)
    }
}

import Foundation
