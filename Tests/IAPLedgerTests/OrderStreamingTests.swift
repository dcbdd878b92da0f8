import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore

/// An orders file too big to parse whole is read a chunk at a time (`CSVFile`): the rows, their
/// findings and order ids are those of the whole text, wherever a chunk ends (inside a quoted
/// field, between CR and LF, inside a UTF-8 sequence), and a night stores the same ledger.
final class OrderStreamingTests: XCTestCase {
    static let header = "order_id,account_id,transaction_id,product_id,quantity,credited_units,credited_at,environment,storefront,app_account_token,reversed_at"
    static func row(_ n: Int, _ token: String = "") -> String {
        "o\(n),a\(n),\(7000 + n),com.example.gems,1,100,2026-10-0\(n % 9 + 1)T10:00:00Z,production,USA,\(token),"
    }

    /// Texts that take the parser through every path: CR LF, CR alone, quoted commas, quotes and
    /// line ends, a BOM, blank and empty rows, broken rows (a stray quote, a quote never properly
    /// closed, one left open to the end), rows of the wrong length, a last row cut short or bad,
    /// text that is not ASCII, and files refused whole by their header.
    static let texts: [String] = [
        header + "\n" + row(1) + "\n" + row(2) + "\n",
        "\u{FEFF}" + header + "\r\n" + row(1) + "\r\n\r\n" + row(2, "\"tok,en\"") + "\r\n",
        header + "\r" + row(1) + "\r" + row(2) + "\r",
        header + "\n" + row(1, "\"a \"\"quoted\"\" token\nover two lines\"") + "\n" + row(2) + "\n,,,,,,,,,,\n   \n" + row(3, "é✓😀") + "\n",
        header + "\n" + row(1) + "\n" + "o2,a2,70\"02,com.example.gems,1,100,2026-10-01T10:00:00Z,production,USA,,\n" + row(3) + "\n",
        header + "\n" + row(1) + "\n" + "o2,a2,\"7002\nx\"y,com.example.gems\n" + row(3) + "\n" + row(4) + "\n",
        header + "\n" + row(1) + "\n" + "o2,a2,\"7002,com.example.gems\n" + row(3) + "\n",
        header + "\n" + row(1) + "\n" + "o2,a2,7002\n" + row(3) + ",extra\n" + row(4),
        header + "\n" + row(1) + "\n" + "o2,a2,7002,com.exa",
        header + "\n" + row(1) + "\n" + "o2,a2,\"7002,com.exa",
        header + "\n" + row(1) + "\n" + "o2,a2,7002,com.example.gems,zero,100,2026-10-01T10:00:00Z,production,USA,,",
        header + "\n" + row(1) + "\n,,,,\n",
        header + "\n",
        header,
        "order_id,account_id,product_id\n" + row(1) + "\n",
        "order_id,order_id,account_id,product_id,credited_at,environment\n" + row(1) + "\n",
        "order_\"id,account_id\n" + row(1) + "\n",
        ",,,,\n\n",
        "\n\n" + header + "\n" + row(1) + "\n",
        "\u{FEFF}\u{FEFF}" + header + "\n" + row(1) + "\n",
        "\u{FEFF}order_\"id,account_id\n" + row(1) + "\n",
    ]

    func description(_ rows: [OrderRow], _ error: Finding?, _ header: String?) -> [String] {
        rows.map { "\($0.line)|\($0.raw)|\($0.result)|\($0.orderId ?? "-")|\($0.endsFile)" } + ["error: \(String(describing: error))", "header: \(header ?? "-")"]
    }

    func streamed(_ data: Data, feedBytes: Int) throws -> (rows: [String], read: CSVFile.Read) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString).csv")
        try data.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let fd = open(url.path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        CSVFile.feedBytes = feedBytes
        defer { CSVFile.feedBytes = .max }
        var reader = OrderReader.Rows(path: "inbox/orders/x.csv")
        var rows: [OrderRow] = []
        let read = try CSVFile.forEachRow(url.path, descriptor: fd) { if let row = reader.take($0) { rows.append(row) } }
        if let last = reader.finish() { rows.append(last) }
        return (description(reader.fileError == nil ? rows : [], reader.fileError, reader.fileError == nil ? reader.header : nil), read)
    }

    func testOrdersReadAChunkAtATimeGiveTheRowsOfTheWholeText() throws {
        var checked = 0
        for text in Self.texts {
            // As a night reads a file whole: decoded by Foundation (which takes a BOM), then parsed.
            let decoded = try XCTUnwrap(String(validatingUTF8Data: Data(text.utf8)))
            let whole = OrderReader.read(path: "inbox/orders/x.csv", text: Substring(decoded))
            let expected = description(whole.rows, whole.fileError, whole.header)
            for feed in [1, 2, 3, 5, 8, 13, 64, 200, Int.max] {
                let (rows, read) = try streamed(Data(text.utf8), feedBytes: feed)
                XCTAssertEqual(rows, expected, "fed \(feed) bytes at a time: \(String(reflecting: text))")
                XCTAssertEqual(read.sha256, Hashing.sha256Hex(Data(text.utf8)))
                XCTAssertEqual(read.sizeBytes, text.utf8.count)
                XCTAssertNil(read.notUTF8)
                XCTAssertEqual(read.blank, text.utf8.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 })
                checked += 1
            }
        }
        XCTAssertEqual(checked, Self.texts.count * 9)
        // The texts reach every kind of row: read, refused for a value, broken, cut short, and
        // files refused whole.
        let all = Self.texts.flatMap { t -> [String] in
            let r = OrderReader.read(path: "x.csv", text: Substring(String(validatingUTF8Data: Data(t.utf8))!))
            return description(r.rows, r.fileError, r.header)
        }.joined(separator: "\n")
        for code in ["success(", "BAD_ORDER", "BAD_CSV", "TRUNCATED", "never properly closed", "a quote inside an unquoted field",
                     "never closed", "header lacks", "twice", "is empty"] {
            XCTAssertTrue(all.contains(code), code)
        }
    }

    /// The parser stops before a row the text may not end, wherever the text is cut (between
    /// CR and LF, inside a quoted field, after a quote that may be doubled, inside a bad row's
    /// first line), and the rest read with the text after it gives the rows of the whole.
    func testRowsParsedUpToAnyCutAndOnGiveTheRowsOfTheWhole() {
        func rows(_ text: String, line: Int, final: Bool) -> (rows: [String], rest: String, line: Int) {
            var out: [String] = []
            let s = Substring(text)
            let (rest, next) = CSV.forEachRow(s, line: line, final: final) { r in
                switch r {
                case .success(let row): out.append("\(row.line)|\(row.fields)|\(row.raw)|\(row.endsFile)")
                case .failure(let e): out.append("\(e.line)|\(e.message)|\(e.raw)|\(e.fieldsBefore)|\(e.endsFile)")
                }
            }
            return (out, String(s[rest...]), next)
        }
        var cuts = 0
        for text in Self.texts + ["a,b\r", "a,\"b\"\"\"\r\nc,d\r\r\ne", "a,\"b\r\n\r\nc\"\"\r\n", "x\"y\r\nz,\"w\r"] {
            let whole = rows(text, line: 1, final: true).rows
            let scalars = text.unicodeScalars
            for k in scalars.indices + [scalars.endIndex] {
                let headText = String(scalars[..<k])
                let head = rows(headText, line: 1, final: false)
                let tail = rows(head.rest + String(scalars[k...]), line: head.line, final: true)
                XCTAssertEqual(head.rows + tail.rows, whole, "cut after \(String(reflecting: headText))")
                cuts += 1
            }
        }
        XCTAssertGreaterThan(cuts, 3_000)
    }

    /// A line longer than the most a row's line may hold (16 MiB; 200 bytes here), in a file
    /// read a chunk at a time, quoted or not, is refused (RECORD_TOO_LONG) and its bytes skipped
    /// to its line end, not held nor kept: a 300 MB line took 1.35 GB and went into the ledger
    /// whole. The rows around it are read, at their lines, wherever the chunks end.
    func testALineTooLongToHoldIsSkippedAndTheRestIsRead() throws {
        XCTAssertEqual(CSVFile.maxLineBytes, 16 << 20)
        CSVFile.maxLineBytes = 200
        defer { CSVFile.maxLineBytes = 16 << 20 }
        let long = Self.row(2, "\"" + String(repeating: "B", count: 500) + "\"")
        let unquoted = Self.row(4, String(repeating: "C", count: 450))
        let text = Self.header.replacingOccurrences(of: "account_id,", with: "") .replacingOccurrences(of: "order_id,", with: "order_id,account_id,")
            + "\n" + Self.row(1) + "\n" + long + "\r\n" + Self.row(3) + "\n" + unquoted + "\n" + Self.row(5) + "\n" + unquoted
        // (Held, a line is looked at as it grows past the limit: here, fed in pieces under it.)
        for feed in [1, 7, 64, 150] {
            let (rows, read) = try streamed(Data(text.utf8), feedBytes: feed)
            XCTAssertEqual(rows.count, 6 + 2, "fed \(feed): \(rows)")
            XCTAssertEqual(rows.filter { $0.contains("RECORD_TOO_LONG") }.map { $0.split(separator: "|").first.map(String.init) ?? "" }, ["3", "5", "7"], "fed \(feed): \(rows)")
            XCTAssertTrue(rows.contains { $0.hasPrefix("3|<\(long.utf8.count) bytes>|failure(") && $0.contains("line 3 is \(long.utf8.count) bytes, over the 200-byte limit for one line; its bytes were skipped") }, "fed \(feed): \(rows)")
            // Each names its order, its first field (an operator's review: a later valid line of
            // the order did not settle it, which named none).
            for (line, order) in [(3, "o2"), (5, "o4")] {
                XCTAssertTrue(rows.contains { $0.hasPrefix("\(line)|<") && $0.contains("its bytes were skipped (order \(order))") }, "fed \(feed): \(rows)")
            }
            XCTAssertTrue(rows.contains { $0.hasPrefix("7|<\(unquoted.utf8.count) bytes>|") && $0.hasSuffix("|true") }, "the last, with no line end: cut short? \(rows)")
            for (line, n) in [(2, 1), (4, 3), (6, 5)] {
                XCTAssertTrue(rows.contains { $0.hasPrefix("\(line)|\(Self.row(n))|success(") }, "fed \(feed): row \(n) at line \(line): \(rows)")
            }
            XCTAssertEqual(read.sha256, Hashing.sha256Hex(Data(text.utf8)))
            XCTAssertEqual(read.sizeBytes, text.utf8.count)
        }
    }

    func testTheFirstFieldOfALineTooLongIsReadFromItsFirstBytes() {
        func first(_ s: String) -> String? { CSVFile.firstField(ArraySlice(Array(s.utf8))) }
        XCTAssertEqual(first("o-101,a,b"), "o-101")
        XCTAssertEqual(first("\"o,\"\"1\",a"), "o,\"1")
        XCTAssertNil(first("o-101-and-on"), "no comma within the first bytes")
        XCTAssertNil(first("\"o-101"), "a quote left open")
        XCTAssertNil(first("\"o\"x,"), "a quoted field with more after its quote")
    }

    /// A quote left open is taken as never closed once its field passes the most a field may
    /// hold (16 MiB; 1 MiB here): its row is refused at its first line and the rows after it
    /// are read, whole or a chunk at a time (held to the file's end, a 500 MB orders file with
    /// a quote left open took 2 GB). A closed field under it, over many lines, is read.
    func testAQuoteLeftOpenPastTheLimitRefusesItsRowAndTheRestIsRead() throws {
        XCTAssertEqual(CSV.maxQuotedFieldBytes, 16 << 20)
        CSV.maxQuotedFieldBytes = 1 << 20
        defer { CSV.maxQuotedFieldBytes = 16 << 20 }
        let blob = String(repeating: "QUJD\n", count: 200_000)
        let closed = OrderReader.read(path: "inbox/orders/x.csv", text: Substring(
            Self.header + ",receipt_data\n" + Self.row(1) + ",\"" + blob + "\"\n" + Self.row(2) + ",\n"))
        XCTAssertEqual(closed.rows.map(\.line), [2, 200_003], "a closed field of 1 MB over 200,000 lines is read")
        XCTAssertNotNil(try? closed.rows[0].result.get())
        var text = Self.header + "\n" + Self.row(1).replacingOccurrences(of: "a1,", with: "\"a1,") + "\n"
        var n = 2
        while text.utf8.count < CSV.maxQuotedFieldBytes + 100_000 { text += Self.row(n) + "\n"; n += 1 }
        let whole = OrderReader.read(path: "inbox/orders/x.csv", text: Substring(text))
        XCTAssertNil(whole.fileError)
        XCTAssertEqual(whole.rows.count, n - 1, "every row: the refused one and each after it")
        XCTAssertEqual(whole.rows[0].line, 2)
        guard case .failure(let refused) = whole.rows[0].result else { return XCTFail("the open quote's row is refused") }
        XCTAssertEqual(refused.code, "BAD_CSV")
        XCTAssertTrue(refused.message.contains("a quoted field runs on past 1048576 bytes (still open at line "), refused.message)
        XCTAssertEqual(whole.rows[1].line, 3)
        XCTAssertNotNil(try? whole.rows[1].result.get())
        let all = description(whole.rows, whole.fileError, whole.header)
        for feed in [65_536, Int.max] {
            XCTAssertEqual(try streamed(Data(text.utf8), feedBytes: feed).rows, all, "fed \(feed)")
        }
    }

    /// A byte that is not UTF-8 is found where the whole file's check finds it, by line and
    /// offset, wherever the chunks end, and a blank file is told blank.
    func testAByteThatIsNotUTF8IsFoundWhereTheWholeFileSaysAndABlankFileIsBlank() throws {
        var bytes = Data((Self.header + "\n" + Self.row(1, "é") + "\r\n" + Self.row(2) + "\n").utf8)
        let at = bytes.count
        bytes.append(contentsOf: [0x6F, 0x33, 0xC3, 0x28])
        bytes.append(Data(("\n" + Self.row(4) + "\n").utf8))
        let expected = try XCTUnwrap(UTF8Position.firstInvalid(in: [UInt8](bytes)))
        XCTAssertEqual(expected.line, 4)
        XCTAssertEqual(expected.offset, at + 2)
        for feed in [1, 3, 7, 100, Int.max] {
            let (_, read) = try streamed(bytes, feedBytes: feed)
            XCTAssertEqual(read.notUTF8?.line, expected.line, "fed \(feed)")
            XCTAssertEqual(read.notUTF8?.offset, expected.offset, "fed \(feed)")
            XCTAssertEqual(read.sizeBytes, bytes.count)
            XCTAssertFalse(read.blank)
        }
        // Cut inside its last sequence: not UTF-8 either.
        let cut = Data((Self.header + "\n" + Self.row(1) + "é").utf8).dropLast()
        for feed in [1, Int.max] {
            XCTAssertEqual(try streamed(Data(cut), feedBytes: feed).read.notUTF8?.line, 2)
        }
        XCTAssertTrue(try streamed(Data(" \r\n\t\n".utf8), feedBytes: 2).read.blank)
    }
}
