import Foundation
import XCTest
import ZIPFoundation
import LedgerCore
@testable import LedgerReport
@testable import LedgerWrite

/// A finished workbook is read back whole before it is put in place (`XLSXCheck`): parts
/// empty, cut short, missing, or a sheet missing rows (what libxlsxwriter packaged, with no
/// error, from temp files a full disk cut short) are refused.
final class XLSXCheckTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("xlsxcheck-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    /// The package at `url` written again, each part's bytes through `transform` (nil leaves
    /// the part out).
    static func rewrite(_ url: URL, _ transform: (String, Data) -> Data?) throws {
        let source = try Archive(url: url, accessMode: .read)
        var parts: [(String, Data)] = []
        for entry in source {
            var data = Data()
            _ = try source.extract(entry) { data.append($0) }
            if let kept = transform(entry.path, data) { parts.append((entry.path, kept)) }
        }
        try FileManager.default.removeItem(at: url)
        let target = try Archive(url: url, accessMode: .create)
        for (path, data) in parts {
            try target.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate) { position, size in
                data.subdata(in: Int(position)..<Int(position) + size)
            }
        }
    }

    /// A workbook of two sheets: a table of `rows` rows with a total, and a short one.
    func workbook(rows: Int) -> WorkbookModel {
        let columns = [Column("Id", width: 12, key: "id"), Column("Amount", width: 12, kind: .money, key: "amount")]
        let body = (0..<rows).map { SheetRow([.text("t\($0)"), .money(minor: Int64($0), decimals: 2)]) }
            + [SheetRow([.text("Total"), .money(minor: Int64(rows * (rows - 1) / 2), decimals: 2)], style: .total)]
        return WorkbookModel(title: "Check", subject: "a test", company: "iapledger", created: Day(iso: "2026-11-27")!, sheets: [
            SheetModel(name: "Rows", title: "Rows", subtitle: ["a note"], tables: [TableBlock(key: "rows", columns: columns, rows: body)]),
            SheetModel(name: "Other", title: "Other", tables: [TableBlock(key: "other", columns: columns, rows: [SheetRow([.text("x"), .empty])])]),
        ])
    }

    func testAWholeWorkbookPassesAndEachDamageIsNamed() throws {
        let good = dir.appendingPathComponent("good.xlsx")
        try XLSXWriter.write(workbook(rows: 5000), to: good)
        // Its rows as written: title, note, header, 5,000 rows and the total; the other sheet's
        // title, header and row.
        XCTAssertNoThrow(try XLSXCheck.check(path: good.path, rowsPerSheet: [5004, 3]))
        XCTAssertThrowsError(try XLSXCheck.check(path: good.path, rowsPerSheet: [5005, 3])) {
            XCTAssertTrue("\($0)".hasSuffix("the workbook came out incomplete (its sheet 1 holds 5004 rows of the 5005 written): is the disk full? Nothing was put in place"), "\($0)")
        }

        func damaged(_ name: String, _ transform: @escaping (String, Data) -> Data?) throws -> String {
            let url = dir.appendingPathComponent("\(name).xlsx")
            try? FileManager.default.removeItem(at: url)
            try FileManager.default.copyItem(at: good, to: url)
            try Self.rewrite(url, transform)
            var said = ""
            XCTAssertThrowsError(try XLSXCheck.check(path: url.path, rowsPerSheet: [5004, 3]), name) { said = "\($0)" }
            return said
        }
        // Cut short at its end, as a temp file the disk filled up under.
        XCTAssertTrue(try damaged("cut") { $0 == "xl/worksheets/sheet1.xml" ? $1.prefix($1.count - 300) : $1 }
            .contains("its part xl/worksheets/sheet1.xml is cut short: it does not end with </worksheet>"))
        // Empty, as [Content_Types].xml came out of a full /tmp.
        XCTAssertTrue(try damaged("empty") { $0 == "[Content_Types].xml" ? Data() : $1 }.contains("its part [Content_Types].xml is empty"))
        // A hole in the middle of a sheet: rows lost, the end whole.
        XCTAssertTrue(try damaged("hole") { name, data in
            guard name == "xl/worksheets/sheet1.xml" else { return data }
            let text = String(decoding: data, as: UTF8.self)
            let start = text.range(of: "<row r=\"100\"")!.lowerBound, end = text.range(of: "<row r=\"200\"")!.lowerBound
            return Data((String(text[..<start]) + String(text[end...])).utf8)
        }.contains("its sheet 1 holds 4904 rows of the 5004 written"))
        XCTAssertTrue(try damaged("missing") { $0 == "xl/styles.xml" ? nil : $1 }.contains("its part xl/styles.xml is missing"))
        XCTAssertTrue(try damaged("sheet") { $0 == "xl/worksheets/sheet2.xml" ? nil : $1 }.contains("its sheet 2 is missing"))
        // Not a package at all.
        let junk = dir.appendingPathComponent("junk.xlsx")
        try Data(repeating: 0, count: 100).write(to: junk)
        XCTAssertThrowsError(try XLSXCheck.check(path: junk.path, rowsPerSheet: [])) {
            XCTAssertTrue("\($0)".contains("it does not read as a ZIP package"), "\($0)")
        }
    }

    /// A body row of only empty texts is no row in the file (libxlsxwriter writes no cell for
    /// an empty text without a format): not counted, so a layout showing only a column that is
    /// often empty (the Journal's `late`) is no incomplete workbook.
    func testARowOfEmptyTextsIsNoRowWritten() throws {
        let columns = [Column("Late", width: 8, key: "late"), Column("Note", width: 12, key: "note")]
        let rows = [SheetRow([.text(""), .text("")]), SheetRow([.text("late"), .empty]), SheetRow([.text(""), .empty]),
                    SheetRow([.text(""), .empty], style: .total)]
        let model = WorkbookModel(title: "Check", subject: "a test", created: Day(iso: "2026-11-27")!, sheets: [
            SheetModel(name: "Rows", title: "Rows", tables: [TableBlock(key: "rows", columns: columns, rows: rows)])])
        let url = dir.appendingPathComponent("empty-texts.xlsx")
        XCTAssertNoThrow(try XLSXWriter.write(model, to: url))
        // Title, header, the row with a text and the total row (its blanks have a format).
        XCTAssertNoThrow(try XLSXCheck.check(path: url.path, rowsPerSheet: [4]))
    }

    /// A text right of a number column is indented (a finance review: an age and the detail
    /// after it read as one field, "2 orders)" where 2 was the age); a text after a text, an
    /// empty one, and the total row's are not.
    func testATextRightOfANumberIsIndented() throws {
        let columns = [Column("Age (days)", width: 10, kind: .integer), Column("Detail", width: 30), Column("Note", width: 12)]
        let rows = [SheetRow([.integer(2), .text("orders o1 and o2"), .text("x")]), SheetRow([.integer(3), .text(""), .text("y")]),
                    SheetRow([.integer(5), .text("Total"), .empty], style: .total)]
        let model = WorkbookModel(title: "Check", subject: "a test", created: Day(iso: "2026-11-27")!, sheets: [
            SheetModel(name: "Rows", title: "Rows", tables: [TableBlock(key: "rows", columns: columns, rows: rows)])])
        let url = dir.appendingPathComponent("indent.xlsx")
        try XLSXWriter.write(model, to: url)
        let styles = try XLSXParts.read(url, "xl/styles.xml")
        let xfs = XLSXReader.matches(styles, #"<cellXfs[^>]*>(.*?)</cellXfs>"#).first.map { XLSXReader.matches($0[0], #"(<xf [^>]*/>|<xf [^>]*>.*?</xf>)"#).map { $0[0] } } ?? []
        var indented: [String: Bool] = [:]
        for m in XLSXReader.matches(try XLSXParts.read(url, "xl/worksheets/sheet1.xml"), #"<c r="([A-Z]+\d+)"([^>]*)>"#) {
            let s = XLSXReader.matches(m[1], #"s="(\d+)""#).first.flatMap { Int($0[0]) }
            indented[m[0]] = s.map { $0 < xfs.count && xfs[$0].contains("indent=\"1\"") } ?? false
        }
        // Title on row 1, a blank row, the header on row 3, the body from row 4.
        XCTAssertEqual(indented["B4"], true, "\(indented)")
        XCTAssertEqual(indented["C4"], false, "\(indented)")
        XCTAssertNil(indented["B5"], "an empty text is no cell")
        XCTAssertEqual(indented["B6"], false, "the total row's")
    }

    /// The check counts rows across the chunks a part inflates in, whatever the boundaries.
    func testRowsAreCountedAcrossChunks() {
        let text = Array(String(repeating: "<row r=\"1\"><c/></row>", count: 50).utf8) + Array("</worksheet>".utf8)
        for size in [1, 2, 3, 5, 7, 64, 1000] {
            var scan = XLSXCheck.PartScan(countRows: true)
            var i = 0
            while i < text.count { scan.add(Data(text[i..<min(i + size, text.count)])); i += size }
            XCTAssertEqual(scan.rows, 50, "chunks of \(size)")
            XCTAssertTrue(scan.endsWith("</worksheet>"))
        }
    }
}
