import Foundation

/// One record's text inside an input file, with the line it starts on.
public struct RawRecord {
    public var line: Int
    public var text: Substring
    /// Set when the record could not be read as text (not UTF-8, longer than the limit): the
    /// record is rejected with this code and reason, and `text` holds a short description.
    public var problem: (code: String, reason: String)?
    /// Set on a file's last line when no line end follows it: the file may have been read while
    /// it was still being written, and the line cut short (one that does not read is then
    /// `TRUNCATED`, and read again when the file is read whole).
    public var unterminated = false

    /// The reason (`TRUNCATED`) of a file's last line that does not read and has no line end after it.
    public static func truncatedReason(_ why: String) -> String {
        "cut short: the file ends inside this line, with no line end after it (it was still being written when read); resolved when a later version of the file is read with this line whole (\(why))"
    }
    public init(line: Int, text: Substring, problem: (code: String, reason: String)? = nil) {
        self.line = line
        self.text = text
        self.problem = problem
    }
}

/// Splits input files into records: JSON Lines (one record a line) or a JSON document that
/// is one record or an array of them. The split keeps each record's own text, so the ledger
/// can hash and store exactly what arrived, and name the line a bad record starts on.
public enum RecordSplitter {
    /// One record per non-blank line (`\n` or `\r\n` line ends). Works on bytes: Swift
    /// treats `\r\n` as one Character, which a split on "\n" would not see.
    public static func jsonLines(_ text: Substring) -> [RawRecord] {
        var out: [RawRecord] = []
        let u = text.utf8
        var lineNo = 0
        var start = u.startIndex
        while start < u.endIndex {
            lineNo += 1
            var end = start
            while end < u.endIndex && u[end] != 0x0A { end = u.index(after: end) }
            var contentEnd = end
            if contentEnd > start && u[u.index(before: contentEnd)] == 0x0D { contentEnd = u.index(before: contentEnd) }
            let line = text[start..<contentEnd]
            if !line.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
                var record = RawRecord(line: lineNo, text: line)
                record.unterminated = end == u.endIndex && contentEnd == end
                out.append(record)
            }
            start = end < u.endIndex ? u.index(after: end) : end
        }
        return out
    }

    /// A `.json` document: the elements of a top-level array, or the whole document.
    /// A document that does not split cleanly is returned whole, so the parser names its error;
    /// an array cut off part-way keeps its complete elements, the rest is one record (which
    /// the parser then names as truncated).
    public static func jsonDocument(_ text: Substring, maxRecordBytes: Int = LineReader.maxRecordBytes) -> [RawRecord] {
        var records = jsonDocumentRecords(text, maxRecordBytes: maxRecordBytes)
        // A document that ends inside a value, its last record running to the end: cut short
        // while it was copied (TRUNCATED, read again once whole), as the last line of a JSON
        // Lines file is, whether or not the cut fell just after a line end (a pretty-printed
        // document has one every few bytes, so one cut in four dozen fell there and stayed
        // MALFORMED for good).
        if let last = records.last, last.text.endIndex == text.endIndex, endsInside(text) {
            records[records.count - 1].unterminated = true
        }
        // Any other record past the limit (an array's last element cut short, text after the
        // array, cut short or not) is refused as a whole one is: cut short while copied, a
        // 250 MB element went into the ledger whole as TRUNCATED.
        for i in records.indices where records[i].text.utf8.count > maxRecordBytes {
            let unterminated = records[i].unterminated
            records[i] = tooLong(line: records[i].line, bytes: records[i].text.utf8.count, what: "the record", limit: maxRecordBytes)
            records[i].unterminated = unterminated
        }
        return records
    }

    /// Whether `text` ends inside a JSON value: an object, array or string left open (an array
    /// cut between its elements included; a file saved whole without a line end at its end, as
    /// HTTP bodies are, is not cut short).
    public static func endsInside(_ text: Substring) -> Bool {
        var depth = 0, inString = false, escaped = false
        for c in text.utf8 {
            if inString {
                if escaped { escaped = false } else if c == UInt8(ascii: "\\") { escaped = true } else if c == UInt8(ascii: "\"") { inString = false }
            } else if c == UInt8(ascii: "\"") { inString = true }
            else if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
            else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") { depth -= 1 }
        }
        return inString || depth > 0
    }

    static func jsonDocumentRecords(_ text: Substring, maxRecordBytes: Int = LineReader.maxRecordBytes) -> [RawRecord] {
        // Read in place: a copy of the bytes was one more file's size held (a 500 MB document
        // took its night to 1.6 GB).
        if let records = text.utf8.withContiguousStorageIfAvailable({ jsonDocumentRecords(text, bytes: $0, maxRecordBytes: maxRecordBytes) }) { return records }
        return jsonDocumentRecords(text, bytes: Array(text.utf8), maxRecordBytes: maxRecordBytes)
    }

    /// A record of more than `maxRecordBytes` (a whole document, or an array's element), as a
    /// line of JSON Lines that long is: `RECORD_TOO_LONG`, its text not kept (a 250 MB element
    /// went into the ledger whole, the night at 1 GB). A real response or JWS is a few kilobytes.
    static func tooLong(line: Int, bytes: Int, what: String, limit: Int) -> RawRecord {
        RawRecord(line: line, text: Substring("<\(bytes) bytes>"), problem: (
            "RECORD_TOO_LONG", "\(what) starting on line \(line) is \(bytes) bytes, over the \(limit)-byte limit for one record; its bytes were skipped"))
    }

    static func jsonDocumentRecords<Bytes: RandomAccessCollection>(_ text: Substring, bytes u: Bytes, maxRecordBytes: Int) -> [RawRecord]
    where Bytes.Element == UInt8, Bytes.Index == Int {
        var i = 0
        var line = 1
        func skipSpace() {
            while i < u.count, u[i] == 0x20 || u[i] == 0x09 || u[i] == 0x0A || u[i] == 0x0D {
                if u[i] == 0x0A { line += 1 }
                i += 1
            }
        }
        skipSpace()
        if i < u.count, u[i] == 0xEF { i += 3; skipSpace() } // UTF-8 BOM
        guard i < u.count else { return [] }
        let startLine = line
        guard u[i] == UInt8(ascii: "[") else {
            if u.count - i > maxRecordBytes, !endsInside(text) {
                var end = u.count
                while end > i, [0x20, 0x09, 0x0A, 0x0D].contains(u[end - 1]) { end -= 1 }
                if end - i > maxRecordBytes { return [tooLong(line: startLine, bytes: end - i, what: "the document", limit: maxRecordBytes)] }
            }
            return [RawRecord(line: startLine, text: text)]
        }
        i += 1
        var records: [RawRecord] = []
        // The text from `offset` to the end, as the last record of a cut-off array.
        func rest(_ offset: Int, line: Int) -> [RawRecord] {
            records + [RawRecord(line: line, text: text[text.utf8.index(text.startIndex, offsetBy: offset)...])]
        }
        // What follows the array's closing bracket (`i` just after it), when anything does: one
        // record refused as it reads (a second document, a stray bracket), not dropped unseen
        // (a record after the array was read by nothing and listed nowhere).
        func after() -> [RawRecord] {
            skipSpace()
            guard i < u.count else { return records }
            var end = u.count
            while end > i, [0x20, 0x09, 0x0A, 0x0D].contains(u[end - 1]) { end -= 1 }
            let from = text.utf8.index(text.startIndex, offsetBy: i), to = text.utf8.index(text.startIndex, offsetBy: end)
            let more = text[from..<to]
            // Running to the file's end inside a value: cut short as the file was written (read
            // again, and settled, once it is whole), as an array's last element is.
            if to == text.endIndex && endsInside(more) {
                return records + [RawRecord(line: line, text: more, problem: (
                    "TRUNCATED", RawRecord.truncatedReason("the file ends inside more text after its top-level array")))]
            }
            return records + [RawRecord(line: line, text: more, problem: (
                "MALFORMED", "more text after the end of the file's top-level array: a .json file holds one JSON document (a record, or an array of records); records one per line go in a .jsonl file"))]
        }
        var commaAt = 0, commaLine = startLine
        while true {
            skipSpace()
            guard i < u.count else { return records.isEmpty ? [RawRecord(line: startLine, text: text)] : rest(commaAt, line: commaLine) }
            if u[i] == UInt8(ascii: "]") && records.isEmpty { i += 1; return after() }
            let elementStart = i, elementLine = line
            var depth = 0
            var inString = false
            while i < u.count {
                let c = u[i]
                if inString {
                    if c == UInt8(ascii: "\\") { i += 2; continue }
                    if c == UInt8(ascii: "\"") { inString = false }
                    if c == 0x0A { line += 1 }
                } else {
                    if c == UInt8(ascii: "\"") { inString = true }
                    else if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
                    else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                        if depth == 0 { break }
                        depth -= 1
                    } else if c == UInt8(ascii: ",") && depth == 0 { break }
                    else if c == 0x0A { line += 1 }
                }
                i += 1
            }
            guard i < u.count else { return records.isEmpty ? [RawRecord(line: startLine, text: text)] : rest(elementStart, line: elementLine) }
            var end = i
            while end > elementStart, [0x20, 0x09, 0x0A, 0x0D].contains(u[end - 1]) { end -= 1 }
            if end - elementStart > maxRecordBytes {
                records.append(tooLong(line: elementLine, bytes: end - elementStart, what: "the array element", limit: maxRecordBytes))
            } else {
                let startIdx = text.utf8.index(text.startIndex, offsetBy: elementStart)
                let endIdx = text.utf8.index(text.startIndex, offsetBy: end)
                records.append(RawRecord(line: elementLine, text: text[startIdx..<endIdx]))
            }
            if u[i] == UInt8(ascii: "]") { i += 1; return after() }
            commaAt = i
            commaLine = line
            i += 1 // the comma
        }
    }
}
