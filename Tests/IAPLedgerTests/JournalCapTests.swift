import CGzip
import Foundation
import XCTest
import ZIPFoundation
@testable import LedgerCore
@testable import LedgerReport
@testable import LedgerRun
import LedgerRead
import LedgerStore
@testable import LedgerWrite

/// Big periods: past the row cap the Journal sheet says so and the full journal is written
/// beside the workbook as gzip CSV; a sheet past Excel's rows continues on "Journal (2)".
final class JournalCapTests: XCTestCase {
    /// `[reports] paper` sets the paper every sheet of every workbook prints on (A4 unless the
    /// config says otherwise: a US finance team prints on Letter); a paper it does not know
    /// stops the run naming the setting and the papers it knows.
    func testTheConfigNamesThePaperTheSheetsPrintOn() throws {
        func papers(_ url: URL) throws -> Set<String> {
            let archive = try XCTUnwrap(Archive(url: url, accessMode: .read))
            var out: Set<String> = []
            for entry in archive where entry.path.hasPrefix("xl/worksheets/sheet") {
                var data = Data()
                _ = try archive.extract(entry, consumer: { data.append($0) })
                out.formUnion(XLSXReader.matches(String(decoding: data, as: UTF8.self), #"paperSize="(\d+)""#).map { $0[0] })
            }
            return out
        }
        for (setting, code) in [("", "9"), ("\n[reports]\npaper = \"letter\"\n", "1"), ("\n[reports]\npaper = \"Legal\"\n", "5")] {
            let ws = try TestWorkspace(config: TestWorkspace.defaultConfig + setting)
            defer { ws.remove() }
            try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("pp1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
            let r = try ws.run("2026-10-07")
            let books = r.workbooks.filter { $0.pathExtension == "xlsx" }
            XCTAssertEqual(books.count, 3)
            for url in books { XCTAssertEqual(try papers(url), [code], "\(setting) \(url.lastPathComponent)") }
        }
        XCTAssertThrowsError(try ConfigReader.parse(TestWorkspace.defaultConfig + "\n[reports]\npaper = \"B5\"\n")) {
            XCTAssertTrue("\($0)".contains("iapledger.toml") && "\($0)".contains("reports.paper: \"B5\" is not a paper size the workbooks know: \"A4\", \"Letter\", \"Legal\", \"A3\""), "\($0)")
        }
    }

    /// A sheet too wide to print one page wide at 70% of its size prints two or three pages
    /// wide, its first column repeated on each, left to right then down: the Exceptions sheet
    /// printed at 45%. Narrower sheets stay one page wide.
    func testAWideSheetPrintsOnPagesItCanBeReadOn() throws {
        XCTAssertEqual(XLSXWriter.pagesWide([32, 20, 20, 14, 12], paper: .a4), 1)
        XCTAssertEqual(XLSXWriter.pagesWide(Array(repeating: 23, count: 12), paper: .a4), 2, "the Exceptions sheet's 274 characters")
        XCTAssertEqual(XLSXWriter.pagesWide(Array(repeating: 23, count: 12), paper: .a3), 1)
        XCTAssertEqual(XLSXWriter.pagesWide(Array(repeating: 60, count: 12), paper: .letter), 3)
        // Each page after the first leads with the columns that say what a row is: the first and
        // the text or date columns after it, up to four (a region's storefront, month and
        // currency; the storefront alone left rows of figures with no month or currency), and
        // the notes wrap within what the first page surely holds, whichever spreadsheet prints it.
        let region = [10, 9, 9, 9, 13, 12, 13, 12, 13, 12, 13, 13, 12, 13, 15, 14, 13]
        let regionKinds: [Column.Kind] = [.text, .text, .text, .integer] + Array(repeating: .money, count: 13)
        let layout = try XCTUnwrap(XLSXWriter.pageLayout(region, kinds: regionKinds, paper: .a4))
        XCTAssertEqual(layout.pages, 2)
        XCTAssertEqual(layout.repeated, 3)
        let firstPage = region.prefix(layout.firstPage).map(XLSXWriter.columnPixels).reduce(0, +)
        let share = (region.map(XLSXWriter.columnPixels).reduce(0, +) + region.prefix(3).map(XLSXWriter.columnPixels).reduce(0, +)) / 2
        XCTAssertTrue(firstPage <= share * 85 / 100 && firstPage > share / 2, "\(layout)")
        XCTAssertEqual(XLSXWriter.noteColumns(region, kinds: regionKinds, paper: .a4), layout.firstPage)
        XCTAssertEqual(XLSXWriter.noteColumns(region, kinds: regionKinds, paper: .a3), region.count, "one page wide: notes across every column")
        // The Exceptions sheet: its category and transaction (with its order, half a page).
        let exceptionWidths = [32, 20, 16, 16, 32, 12, 9, 13, 12, 12, 10, 90]
        XCTAssertEqual(XLSXWriter.pageLayout(exceptionWidths, kinds: [.text, .text, .text, .text, .text, .money, .text, .money, .date, .date, .integer, .text], paper: .a4)?.repeated, 2)
        // The Refunds sheet: a refund's entry, date, transaction and currency (a finance review:
        // its second page showed amounts in several currencies with no currency beside them).
        let refundWidths = [8, 11, 19, 9, 13, 6, 15, 30, 10, 11, 12, 12, 12, 15, 15, 15]
        let refundKinds: [Column.Kind] = [.integer, .date, .text, .text, .date, .text, .text, .text, .text, .money] + Array(repeating: .money, count: 6)
        XCTAssertEqual(XLSXWriter.pageLayout(refundWidths, kinds: refundKinds, paper: .a4)?.repeated, 4)
        XCTAssertEqual(XLSXWriter.pageLayout(refundWidths, kinds: refundKinds, paper: .letter)?.repeated, 4)
        // A money column second: the first column alone.
        XCTAssertEqual(XLSXWriter.pageLayout(region, kinds: [.text] + Array(repeating: .money, count: 16), paper: .a4)?.repeated, 1)
        let ws = try TestWorkspace()
        defer { ws.remove() }
        try ws.write("inbox/receipts/r.jsonl", Receipt.response([Receipt.item("wp1", purchased: "2026-10-05T10:00:00Z")]) + "\n")
        let r = try ws.run("2026-10-07")
        let url = try XCTUnwrap(r.workbooks.first { $0.lastPathComponent.hasPrefix("reconciliation-") })
        let archive = try XCTUnwrap(Archive(url: url, accessMode: .read))
        func xml(_ path: String) throws -> String {
            var data = Data()
            _ = try archive.extract(try XCTUnwrap(archive[path]), consumer: { data.append($0) })
            return String(decoding: data, as: UTF8.self)
        }
        let workbook = try xml("xl/workbook.xml")
        let names = XLSXReader.matches(workbook, #"<sheet name="([^"]*)""#).map { $0[0] }
        let exceptions = try XCTUnwrap(names.firstIndex(of: "Exceptions")), summary = try XCTUnwrap(names.firstIndex(of: "Summary"))
        let wide = try xml("xl/worksheets/sheet\(exceptions + 1).xml")
        XCTAssertTrue(wide.contains(#"fitToWidth="2""#) && wide.contains(#"pageOrder="overThenDown""#), wide)
        XCTAssertTrue(workbook.contains(#"<definedName name="_xlnm.Print_Titles" localSheetId="\#(exceptions)">Exceptions!$A:$B,Exceptions!$"#), workbook)
        // The finance workbook's Revenue by Region: storefront, month and currency on each page.
        let finance = try XCTUnwrap(Archive(url: try XCTUnwrap(r.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") }), accessMode: .read))
        var financeBook = Data()
        _ = try finance.extract(try XCTUnwrap(finance["xl/workbook.xml"]), consumer: { financeBook.append($0) })
        XCTAssertTrue(String(decoding: financeBook, as: UTF8.self).contains("'Revenue by Region'!$A:$C"), String(decoding: financeBook, as: UTF8.self))
        let narrow = try xml("xl/worksheets/sheet\(summary + 1).xml")
        XCTAssertFalse(narrow.contains("fitToWidth="), narrow)
        XCTAssertTrue(narrow.contains(#"fitToHeight="0""#), narrow)
    }

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
        // An export is kept while what it is made from is the same (its gzip comment), which
        // holds only while the same postings give the same text: pinned here.
        XCTAssertEqual(Hashing.sha256Hex(Data(csv.utf8)), "769889483ee62bdd18b3518a940f471103c2bcbd80aeca572ec8a82489c92bb2",
                       "the export's text changed: raise FinanceReport.journalExportFormat, then pin the new value")
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

        // The set written again with the cap raised: its Journal holds every posting, and the
        // export an earlier write left goes (it stayed beside the workbook, listed nowhere).
        // A file of that name iapledger did not write is left alone.
        try ws.write("iapledger.toml", TestWorkspace.defaultConfig)
        let again = try ws.run("2026-10-07")
        XCTAssertFalse(again.workbooks.contains { $0.lastPathComponent.hasSuffix(".csv.gz") })
        XCTAssertFalse(FileManager.default.fileExists(atPath: gz.path), "the stale export is gone")
        XCTAssertEqual(try XLSXReader.sheets(again.workbooks.first { $0.lastPathComponent.hasPrefix("finance-") }!)["Journal"]!.count, 4 + 12 + 3, "the header's rows, every posting and the three control totals")
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read { try $0.reportFiles(path: "reports/2026-10-07/journal-2026-10-07.csv.gz").count }, 1,
                       "its registration stays")
        try Data("not ours".utf8).write(to: gz)
        _ = try ws.run("2026-10-07")
        XCTAssertEqual(try String(contentsOf: gz, encoding: .utf8), "not ours")
    }

    /// The month before's journal export, written again every night while that month is open,
    /// is kept when what it lists is unchanged: the same file (inode) and bytes, listed with
    /// the set and hashed by its workbook's Run Info. It is written again when it no longer
    /// checks out (cut short, a byte changed), when a late entry joins its month, and when the
    /// layout's columns change.
    func testAnUnchangedJournalExportIsKeptAndAnyChangeWritesItAgain() throws {
        let ws = try TestWorkspace(config: TestWorkspace.defaultConfig + "\n[reports]\njournal_row_cap = 5\n")
        defer { ws.remove() }
        try ws.write("inbox/receipts/oct.jsonl", (1...4).map {
            Receipt.response([Receipt.item("90\($0)", purchased: "2026-10-0\($0)T10:00:00Z")])
        }.joined(separator: "\n"))
        var night = 0
        func nextNight(_ receipt: String = "2026-11-0") throws -> NightlyRun.Result {
            night += 1
            let day = String(format: "2026-11-%02d", night + 1)
            try ws.write("inbox/receipts/n\(night).jsonl", Receipt.response([Receipt.item("95\(night)", purchased: "\(day)T10:00:00Z")]))
            return try ws.run(day)
        }
        func inode(_ url: URL) throws -> Int { try XCTUnwrap(FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? Int) }
        let oct = ws.root.appendingPathComponent("reports/2026-10-31/journal-2026-10-31.csv.gz")
        let octBook = ws.root.appendingPathComponent("reports/2026-10-31/finance-2026-10-31.xlsx")
        _ = try nextNight()
        let first = try Data(contentsOf: oct)
        XCTAssertEqual(try gunzip(oct).split(separator: "\n").count, 13)

        // Nothing new in October: kept.
        let before = try inode(oct)
        let kept = try nextNight()
        XCTAssertEqual(try inode(oct), before, "kept, not written again")
        XCTAssertEqual(try Data(contentsOf: oct), first)
        XCTAssertTrue(kept.workbooks.map(\.standardizedFileURL).contains(oct.standardizedFileURL))
        // Said to be kept (the night's own export, its month still running, is written).
        XCTAssertEqual(kept.keptFiles.map(\.lastPathComponent), ["journal-2026-10-31.csv.gz"])
        let info = try XCTUnwrap(try XLSXReader.sheets(octBook)["Run Info"])
        XCTAssertEqual(info.first { $0.first == "  SHA-256" }?[1], Hashing.sha256Hex(first))
        XCTAssertEqual(info.first { $0.first == "  rows" }?[1], "12")
        // No night ran as of 2026-10-31: its table of files read says so (it was an empty table).
        XCTAssertTrue(info.contains { $0.first == "None: no night ran as of 2026-10-31; the files each night read are on the Run Info of that night's own set" }, "\(info)")

        // Cut short, or a byte of its compressed data changed: written again, the same bytes.
        try first.prefix(first.count - 9).write(to: oct)
        XCTAssertEqual(try nextNight().keptFiles, [])
        XCTAssertEqual(try Data(contentsOf: oct), first)
        var changed = first
        changed[first.count - 20] ^= 0x55
        try changed.write(to: oct)
        _ = try nextNight()
        XCTAssertEqual(try Data(contentsOf: oct), first)
        // Bytes appended after the gzip member (which gunzip and zlib's gzread pass over): written
        // again, so the file Run Info hashes is the one the night wrote.
        try (first + Data("appended".utf8)).write(to: oct)
        XCTAssertEqual(try nextNight().keptFiles, [])
        XCTAssertEqual(try Data(contentsOf: oct), first)
        // A row changed inside, compressed again behind the same comment (whole, as many rows):
        // written again, not kept and vouched for by the workbook's Run Info.
        let rows = try gunzip(oct)
        XCTAssertTrue(rows.contains(",901,"), rows)
        let header = first.prefix(through: try XCTUnwrap(first[10...].firstIndex(of: 0)))
        try Self.gzipMember(header: Data(header), content: Data(rows.replacingOccurrences(of: ",901,", with: ",909,").utf8)).write(to: oct)
        XCTAssertTrue(try gunzip(oct).contains(",909,"), "a whole gzip file")
        XCTAssertEqual(try nextNight().keptFiles, [])
        XCTAssertEqual(try Data(contentsOf: oct), first)

        // A late October sale: the export lists it.
        try ws.write("inbox/receipts/late.jsonl", Receipt.response([Receipt.item("970", purchased: "2026-10-20T10:00:00Z")]))
        _ = try nextNight()
        let late = try gunzip(oct).split(separator: "\n")
        XCTAssertEqual(late.count, 16)
        XCTAssertTrue(late.contains { $0.contains(",970,") }, "\(late)")

        // The layout's columns changed: written again with them.
        try ws.write("layouts/finance.toml", """
            [[sheet]]
            key = "journal"

            [[sheet.table]]
            key = "postings"
            columns = ["transaction", { key = "amount", title = "Montant" }]

            [[sheet]]
            key = "run_info"
            """)
        _ = try nextNight()
        let relaid = try gunzip(oct).split(separator: "\n")
        XCTAssertEqual(relaid.count, 16)
        XCTAssertEqual(relaid[0], "Transaction,Montant")

        // Another ledger with as many October postings but other sales does not keep this
        // ledger's export put in its place: the entries are part of what an export is made of.
        let other = try TestWorkspace(config: TestWorkspace.defaultConfig + "\n[reports]\njournal_row_cap = 5\n")
        defer { other.remove() }
        try other.write("inbox/receipts/oct.jsonl", (1...4).map {
            Receipt.response([Receipt.item("80\($0)", purchased: "2026-10-0\($0)T10:00:00Z")])
        }.joined(separator: "\n"))
        try other.write("reports/2026-10-31/journal-2026-10-31.csv.gz", "")
        try first.write(to: other.root.appendingPathComponent("reports/2026-10-31/journal-2026-10-31.csv.gz"))
        try other.run("2026-11-02")
        let own = try gunzip(other.root.appendingPathComponent("reports/2026-10-31/journal-2026-10-31.csv.gz")).split(separator: "\n")
        XCTAssertEqual(own.count, 13)
        XCTAssertTrue(own.contains { $0.contains(",801,") } && !own.contains { $0.contains(",901,") }, "\(own)")
    }

    /// Rows of an export are CSV records: a line break inside a quoted field is part of its
    /// field (such an export was rewritten every night, its line count never matching), and
    /// anything but exactly one whole gzip member is refused.
    func testAnExportsRecordsAreCountedAsCSV() throws {
        func gzip(_ text: String) throws -> Data {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("records-\(UUID().uuidString).csv.gz")
            defer { try? FileManager.default.removeItem(at: url) }
            let gz = gzopen(url.path, "wb")
            _ = text.utf8CString.withUnsafeBufferPointer { gzwrite(gz, $0.baseAddress, UInt32($0.count - 1)) }
            gzclose(gz)
            return try Data(contentsOf: url)
        }
        XCTAssertEqual(GzipCSVWriter.csvRecords(gzip: try gzip("A,B\n1,2\n")), 2)
        XCTAssertEqual(GzipCSVWriter.csvRecords(gzip: try gzip("A,B\n\"two\nlines\",2\n\"say \"\"hi\"\"\",3\n")), 3)
        // Over many of the reader's 128 KiB chunks, quotes and line breaks at every offset.
        let many = "A,B\n" + (0..<60_000).map { $0 % 3 == 0 ? "\"a\nb \"\"\(String(repeating: "q", count: $0 % 7))\"\"\",\($0)\n" : "\($0),x\n" }.joined()
        XCTAssertEqual(GzipCSVWriter.csvRecords(gzip: try gzip(many)), 60_001)
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: try gzip("A,B\n\"open,2\n")), "a quote left open")
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: try gzip("A,B\n1,2")), "no line end after the last record")
        let whole = try gzip("A\n1\n")
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: whole + Data([0])), "a byte after the member")
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: whole + whole), "a second member")
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: whole.dropLast()), "cut short")
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: Data()))
        XCTAssertNil(GzipCSVWriter.csvRecords(gzip: Data("A\n1\n".utf8)), "not gzip")
    }

    /// The gzip comment is read from the header whatever optional fields come before it, and
    /// a file without one, or not gzip, has none.
    func testTheGzipCommentIsReadFromTheHeader() {
        let plain: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3]
        XCTAssertNil(GzipCSVWriter.gzipComment(Data(plain + [1, 2, 3])))
        XCTAssertNil(GzipCSVWriter.gzipComment(Data("not gzip at all".utf8)))
        // Extra field (2 bytes), a name, then the comment.
        let full: [UInt8] = [0x1F, 0x8B, 8, 4 | 8 | 16, 0, 0, 0, 0, 0, 3, 2, 0, 0xAA, 0xBB] + Array("name\0".utf8) + Array("a comment\0".utf8) + [9, 9]
        XCTAssertEqual(GzipCSVWriter.gzipComment(Data(full)), "a comment")
        // A comment with no end in the bytes read: none.
        XCTAssertNil(GzipCSVWriter.gzipComment(Data([0x1F, 0x8B, 8, 16, 0, 0, 0, 0, 0, 3] + Array("cut".utf8))))
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

    /// A long text in a wide column wrapped in a row as high as it needs (it was cut off by
    /// the cell beside it, on screen and printed); a short one, or one in a narrow column,
    /// keeps its row. A sheet with charts prints its tables alone (the charts beside them
    /// made the printed figures half size).
    func testLongTextsWrapAndASheetWithChartsPrintsItsTables() throws {
        let long = String(repeating: "a reason that goes on ", count: 10)   // 220 characters
        let model = WorkbookModel(title: "t", subject: "s", created: Day(iso: "2026-10-07")!, sheets: [
            SheetModel(name: "Info", title: "Info", tables: [TableBlock(key: "t", columns: [
                Column("Code", width: 10, key: "code"), Column("Detail", width: 50, key: "detail"), Column("N", width: 6, kind: .integer, key: "n"),
            ], rows: [
                SheetRow([.text("SHORT"), .text("fits"), .integer(1)]),
                SheetRow([.text(long), .text(long), .integer(2)]),
                SheetRow([.text("X"), .empty, .integer(3)], style: .total),
            ])], charts: [ChartSpec(title: "N", kind: .column, table: "t", categoryColumn: "code", valueColumns: ["n"], yAxisTitle: "n")]),
        ])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("wrap-\(UUID().uuidString).xlsx")
        defer { try? FileManager.default.removeItem(at: url) }
        try XLSXWriter.write(model, to: url)
        let archive = try XCTUnwrap(Archive(url: url, accessMode: .read))
        func xml(_ path: String) throws -> String {
            var data = Data()
            _ = try archive.extract(try XCTUnwrap(archive[path]), consumer: { data.append($0) })
            return String(decoding: data, as: UTF8.self)
        }
        let sheet = try xml("xl/worksheets/sheet1.xml")
        // Rows 1-based: title, blank, header (3), "SHORT" (4), the long one (5): 220 bytes in
        // 50 characters a line (one a unit of width, as LibreOffice prints) is 5 lines, 75
        // points; the narrow Code column does not count.
        XCTAssertTrue(sheet.contains(#"<row r="5" ht="75" customHeight="1">"#), sheet)
        XCTAssertTrue(sheet.contains(#"<row r="4">"#), sheet)
        let styles = try xml("xl/styles.xml")
        XCTAssertTrue(styles.contains(#"wrapText="1""#))
        let workbook = try xml("xl/workbook.xml")
        XCTAssertTrue(workbook.contains(#"<definedName name="_xlnm.Print_Area" localSheetId="0">Info!$A$1:$C$6</definedName>"#), workbook)
    }

    /// A bar chart of many categories is as tall as they need (at the default height, the
    /// Summary's 16 storefronts showed every second name), and the chart after it starts
    /// below it; a bar chart of a few keeps the default height.
    func testABarChartOfManyCategoriesIsTallerAndTheNextChartStartsBelowIt() throws {
        func drawing(bars: Int) throws -> [(from: Int, to: Int)] {
            let rows = (1...bars).map { SheetRow([.text("S\($0)"), .integer(Int64($0))]) } + [SheetRow([.text("Total"), .integer(0)], style: .total)]
            let model = WorkbookModel(title: "t", subject: "s", created: Day(iso: "2026-10-07")!, sheets: [
                SheetModel(name: "Summary", title: "Summary", tables: [TableBlock(key: "t", columns: [
                    Column("Storefront", width: 10, key: "code"), Column("N", width: 6, kind: .integer, key: "n"),
                ], rows: rows)], charts: [
                    ChartSpec(title: "Bars", kind: .bar, table: "t", categoryColumn: "code", valueColumns: ["n"], yAxisTitle: "n"),
                    ChartSpec(title: "Columns", kind: .column, table: "t", categoryColumn: "code", valueColumns: ["n"], yAxisTitle: "n"),
                ]),
            ])
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("bars-\(UUID().uuidString).xlsx")
            defer { try? FileManager.default.removeItem(at: url) }
            try XLSXWriter.write(model, to: url)
            let xml = try XLSXParts.read(url, "xl/drawings/drawing1.xml")
            let from = XLSXReader.matches(xml, #"<xdr:from><xdr:col>\d+</xdr:col><xdr:colOff>\d+</xdr:colOff><xdr:row>(\d+)</xdr:row>"#).map { Int($0[0])! }
            let to = XLSXReader.matches(xml, #"<xdr:to><xdr:col>\d+</xdr:col><xdr:colOff>\d+</xdr:colOff><xdr:row>(\d+)</xdr:row>"#).map { Int($0[0])! }
            XCTAssertEqual(from.count, 2, xml)
            return Array(zip(from, to)).map { (from: $0.0, to: $0.1) }
        }
        let few = try drawing(bars: 4), many = try drawing(bars: 30)
        XCTAssertEqual(few[0].to - few[0].from, 17, "the default height: 288 pixels x 1.2, 17 rows of 20 and some")
        XCTAssertGreaterThanOrEqual(many[0].to - many[0].from, 30, "30 bars of about 18 pixels, beside the title and axis: \(many)")
        XCTAssertGreaterThan(many[1].from, many[0].to, "the next chart starts below: \(many)")
        XCTAssertGreaterThan(few[1].from, few[0].to)
    }

    /// A gzip member: `header` (another member's, through its comment) before `content`
    /// deflated, its CRC-32 and length after.
    static func gzipMember(header: Data, content: Data) -> Data {
        var stream = z_stream()
        _ = deflateInit2_(&stream, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        var buffer = [UInt8](repeating: 0, count: content.count + 1024)
        content.withUnsafeBytes { src in
            stream.next_in = UnsafeMutablePointer(mutating: src.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = UInt32(src.count)
            buffer.withUnsafeMutableBufferPointer { dst in
                stream.next_out = dst.baseAddress
                stream.avail_out = UInt32(dst.count)
                _ = deflate(&stream, Z_FINISH)
            }
        }
        var out = header
        out.append(contentsOf: buffer[0..<Int(stream.total_out)])
        deflateEnd(&stream)
        let crc = content.withUnsafeBytes { crc32(0, $0.bindMemory(to: Bytef.self).baseAddress, UInt32($0.count)) }
        for v in [UInt32(crc), UInt32(content.count)] { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        return out
    }

    /// A text cell that a spreadsheet would run as a formula (an order id or account read from
    /// the backend's file) is written with an apostrophe before it; amounts, negative ones too,
    /// and other texts as they are.
    func testTextsThatReadAsFormulasAreNotRunByASpreadsheet() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("formula-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let texts = ["=HYPERLINK(\"http://x\",\"y\")", "+1", "-x", "@SUM(A1)", "\tcmd", "=1,2", "acct-=9", "", "ok"]
        let table = TableBlock(columns: [Column("Text", width: 10), Column("Amount", width: 10, kind: .money)],
                               rows: texts.map { SheetRow([.text($0), .money(minor: -1234, decimals: 2)]) })
        let url = dir.appendingPathComponent("j.csv.gz")
        _ = try GzipCSVWriter.write(table, to: url)
        XCTAssertEqual(try gunzip(url), """
            Text,Amount
            "'=HYPERLINK(""http://x"",""y"")",-12.34
            '+1,-12.34
            '-x,-12.34
            '@SUM(A1),-12.34
            '\tcmd,-12.34
            "'=1,2",-12.34
            acct-=9,-12.34
            ,-12.34
            ok,-12.34

            """)
        XCTAssertEqual(["=1", "-5", "a-b", "@x,y"].map(CSV.escapeText), ["'=1", "'-5", "a-b", "\"'@x,y\""])
        XCTAssertEqual(CSV.escape("-5"), "-5", "a number is written as it is")
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
