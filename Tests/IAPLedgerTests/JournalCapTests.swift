import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerReport
@testable import LedgerRun
@testable import LedgerWrite

/// Big periods: past the row cap the Journal sheet says so and the full journal is written
/// beside the workbook as gzip CSV; a sheet past Excel's rows continues on "Journal (2)".
final class JournalCapTests: XCTestCase {
    func testJournalOverTheCapGoesToGzipCSV() throws {
        let ws = try TestWorkspace(config: TestWorkspace.defaultConfig + "\n[reports]\njournal_row_cap = 5\n")
        defer { ws.remove() }
        try ws.write("inbox/receipts/r.jsonl", (1...4).map {
            Receipt.response([Receipt.item("90\($0)", purchased: "2026-10-0\($0)T10:00:00Z")])
        }.joined(separator: "\n"))
        let r = try ws.run("2026-10-07")
        let gz = try XCTUnwrap(r.workbooks.first { $0.lastPathComponent == "journal-2026-10-07.csv.gz" })
        // 4 sales x 3 postings = 12 rows, over the cap of 5.
        let csv = try gunzip(gz)
        let lines = csv.split(separator: "\n")
        XCTAssertEqual(lines.count, 13)
        XCTAssertTrue(lines[0].hasPrefix("Entry,Date,Original date"))
        XCTAssertTrue(lines[1].contains("901") && lines[1].contains("0.69"), String(lines[1]))
        let book = try XLSXReader.sheets(r.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") }!)
        let journal = book["Journal"]!
        XCTAssertTrue(journal[1].first?.contains("12 postings, more than the Journal sheet's cap of 5") == true, "\(journal[1])")
        XCTAssertTrue(journal[2].first?.contains("journal-2026-10-07.csv.gz") == true)
        XCTAssertEqual(journal.count, 5, "title, two notes, a blank row and the header: no posting rows")
        // Run Info names, counts and hashes it; the hash is the file's.
        let info = book["Run Info"]!
        XCTAssertTrue(info.contains { $0.first == "Full journal (over the sheet's cap)" && $0[1] == "journal-2026-10-07.csv.gz" })
        XCTAssertTrue(info.contains { $0.first == "  rows" && $0[1] == "12" })
        let shaRow = try XCTUnwrap(info.first { $0.first == "  SHA-256" })
        XCTAssertEqual(shaRow[1], Hashing.sha256Hex(try Data(contentsOf: gz)))
        // Summary sheets stay complete.
        XCTAssertEqual(book["Revenue by Product"]!.first { $0.first == "Total" }?[2], "4")
    }

    func testASheetPastTheRowLimitContinuesOnANumberedSheet() throws {
        let rows = (1...25).map { SheetRow([.integer(Int64($0)), .money(minor: Int64($0) * 100, decimals: 2)]) }
        let model = WorkbookModel(title: "t", subject: "s", created: Day(iso: "2026-10-07")!, sheets: [
            SheetModel(name: "Journal", title: "Journal", tables: [TableBlock(columns: [Column("N", width: 5, kind: .integer),
                                                                                         Column("Amount", width: 9, kind: .money)], rows: rows)]),
        ])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cap-\(UUID().uuidString).xlsx")
        defer { try? FileManager.default.removeItem(at: url) }
        // A 12-row sheet: title, blank, header, then 9 rows per part.
        try XLSXWriter.write(model, to: url, rowsPerSheetMax: 12)
        let sheets = try XLSXReader.sheets(url)
        XCTAssertEqual(Set(sheets.keys), ["Journal", "Journal (2)", "Journal (3)"])
        let numbers = ["Journal", "Journal (2)", "Journal (3)"].flatMap { name in
            sheets[name]!.dropFirst(3).compactMap { $0.first.flatMap { Int($0) } }
        }
        XCTAssertEqual(numbers, Array(1...25), "every row once, in order")
    }

    func gunzip(_ url: URL) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/gzip")
        p.arguments = ["-dc", url.path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
