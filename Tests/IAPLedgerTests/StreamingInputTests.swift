import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerRead
@testable import LedgerRun
@testable import LedgerStore

/// Line-based inputs are read a chunk at a time: a line that is not UTF-8 or is longer than
/// the record limit is one rejected record, the lines around it post, and a 2 GB line costs
/// no memory.
final class StreamingInputTests: XCTestCase {
    var ws: TestWorkspace!
    override func setUpWithError() throws { ws = try TestWorkspace() }
    override func tearDown() { ws.remove() }

    func record(_ id: String) -> String { Receipt.response([Receipt.item(id, purchased: "2026-10-05T10:00:00Z")]) }

    func outcomes(_ path: String) throws -> [Int: (outcome: String, code: String?)] {
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path)
        return try ledger.read { r in
            var out: [Int: (String, String?)] = [:]
            for row in try r.rawRows("""
                SELECT r.line, r.outcome, ifnull(r.reason_code, '') FROM source_record r JOIN source_file f ON f.id = r.file_id
                WHERE f.path = '\(path)'
                """) {
                out[Int(row[0])!] = (row[1], row[2].isEmpty ? nil : row[2])
            }
            return out
        }
    }

    func testALineThatIsNotUTF8IsOneRejectedRecord() throws {
        var bytes = Data((record("8101") + "\n").utf8)
        bytes.append(contentsOf: [0x7B, 0x22, 0xC3, 0x28, 0xFF, 0x22, 0x7D, 0x0A])  // {"\xC3(\xFF"}
        bytes.append(Data((record("8102") + "\r\n\n   \n").utf8))
        try FileManager.default.createDirectory(at: ws.root.appendingPathComponent("inbox/receipts"), withIntermediateDirectories: true)
        try bytes.write(to: ws.root.appendingPathComponent("inbox/receipts/mixed.jsonl"))
        let r = try ws.run("2026-10-06")
        XCTAssertEqual(r.counts.read, 3)
        XCTAssertEqual(r.counts.verified, 2)
        XCTAssertEqual(r.counts.rejected, 1)
        let seen = try outcomes("inbox/receipts/mixed.jsonl")
        XCTAssertEqual(seen[1]?.outcome, "verified")
        XCTAssertEqual(seen[2]?.outcome, "rejected")
        XCTAssertEqual(seen[2]?.code, "INVALID_UTF8")
        XCTAssertEqual(seen[3]?.outcome, "verified")
        XCTAssertTrue(r.problems.contains { $0.hasPrefix("inbox/receipts/mixed.jsonl:2: rejected: line 2 is not valid UTF-8") }, "\(r.problems)")
        // Read again: nothing new, nothing twice.
        let again = try ws.run("2026-10-06")
        XCTAssertEqual(again.counts.read, 0)
    }

    /// A `.json` document's element (or the document) longer than a record may be is refused as
    /// a line of JSON Lines that long is, its text not kept (an operator's review: a 250 MB
    /// element went into the ledger whole, the night at 1 GB); the elements around it are read.
    func testAnOverlongElementOfAJSONDocumentIsRefusedAndSkipped() throws {
        let doc = "[\n {\"status\": 21003},\n {\"status\": 0, \"pad\": \"" + String(repeating: "A", count: 40) + "\"},\n {\"status\": 21004}\n]\n"
        let recs = RecordSplitter.jsonDocument(Substring(doc), maxRecordBytes: 32)
        XCTAssertEqual(recs.map(\.line), [2, 3, 4])
        XCTAssertEqual(recs.map { $0.problem?.code }, [nil, "RECORD_TOO_LONG", nil])
        XCTAssertEqual(recs[1].problem?.reason, "the array element starting on line 3 is 64 bytes, over the 32-byte limit for one record; its bytes were skipped")
        XCTAssertEqual(recs[1].text, "<64 bytes>")
        let whole = RecordSplitter.jsonDocument(Substring("\n{\"status\": 0, \"pad\": \"" + String(repeating: "A", count: 40) + "\"}\n"), maxRecordBytes: 32)
        XCTAssertEqual(whole.map { $0.problem?.code }, ["RECORD_TOO_LONG"])
        XCTAssertEqual(whole.first?.line, 2)
        // Cut short while copied (inside the long element, or the document): refused the same,
        // not kept whole as a record cut short (a diff review).
        let cut = RecordSplitter.jsonDocument(Substring(String(doc.prefix(60))), maxRecordBytes: 32)
        XCTAssertEqual(cut.map { $0.problem?.code }, [nil, "RECORD_TOO_LONG"])
        XCTAssertEqual(cut.last?.text, "<37 bytes>")
        let cutWhole = RecordSplitter.jsonDocument(Substring("{\"status\": 0, \"pad\": \"" + String(repeating: "A", count: 40)), maxRecordBytes: 32)
        XCTAssertEqual(cutWhole.map { $0.problem?.code }, ["RECORD_TOO_LONG"])
        // Text after the array, long, cut short or not: refused the same (it was kept whole).
        let pad = "{\"status\": 0, \"pad\": \"" + String(repeating: "A", count: 40)
        for after in [pad, pad + "\"}"] {
            let more = RecordSplitter.jsonDocument(Substring("[{\"status\": 1}]\n" + after), maxRecordBytes: 32)
            XCTAssertEqual(more.map { $0.problem?.code }, [nil, "RECORD_TOO_LONG"], after)
        }
        // Through a night, at the real limit (16 MiB).
        let big = "[{\"status\": 21003},\n{\"status\": 0, \"pad\": \"" + String(repeating: "A", count: LineReader.maxRecordBytes) + "\"},\n{\"status\": 21004}]\n"
        try ws.write("inbox/receipts/huge.json", big)
        let r = try ws.run("2026-10-06")
        XCTAssertEqual(r.counts.rejected, 3)
        let seen = try outcomes("inbox/receipts/huge.json")
        XCTAssertEqual(seen[2]?.code, "RECORD_TOO_LONG")
        XCTAssertEqual(try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path).read {
            try $0.rawRows("SELECT max(length(raw)) FROM source_record")
        }.first?.first.flatMap { Int($0) }.map { $0 < 1000 }, true, "no record's text is kept whole")
    }

    func testReaderKeepsLinesAcrossChunksAndSkipsOverlongOnes() throws {
        let path = ws.root.appendingPathComponent("lines.jsonl").path
        // Lines longer than a 4 MiB chunk, one over a small limit, a last line without "\n".
        let long = String(repeating: "a", count: (4 << 20) + 123)
        let text = "first\n\(long)\n\n" + String(repeating: "b", count: 70) + "\nlast"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let read = try LineReader.read(path, maxRecordBytes: 64)
        XCTAssertEqual(read.records.map(\.line), [1, 2, 4, 5])
        XCTAssertEqual(read.records[0].text, "first")
        XCTAssertEqual(read.records[1].problem?.code, "RECORD_TOO_LONG")
        XCTAssertEqual(read.records[2].problem?.code, "RECORD_TOO_LONG")
        XCTAssertEqual(read.records[3].text, "last")
        XCTAssertEqual(read.sha256, Hashing.sha256Hex(Data(text.utf8)))
        XCTAssertEqual(read.sizeBytes, text.utf8.count)
        let big = try LineReader.read(path)
        XCTAssertEqual(big.records[1].text.count, long.count, "under the real limit the long line is a record")
        // A record at a time, the same records (the last marked as having no line end after it).
        var streamed: [RawRecord] = []
        let (sha, size) = try LineReader.forEachRecord(path, maxRecordBytes: 64) { streamed.append($0) }
        XCTAssertEqual(streamed.map(\.line), [1, 2, 4, 5])
        XCTAssertEqual(streamed.map { String($0.text) }, read.records.map { String($0.text) })
        XCTAssertEqual(streamed.map(\.unterminated), [false, false, false, true])
        XCTAssertEqual(read.records.map(\.unterminated), [false, false, false, true])
        XCTAssertEqual(sha, read.sha256)
        XCTAssertEqual(size, read.sizeBytes)
        // Past a number of records, not held: the caller reads it a record at a time.
        XCTAssertNil(try LineReader.read(path, maxRecordBytes: 64, maxRecords: 3))
        XCTAssertEqual(try LineReader.read(path, maxRecordBytes: 64, maxRecords: 4)?.records.count, 4)
        try Data("a\n\nb\r\n".utf8).write(to: URL(fileURLWithPath: path))
        var ended: [RawRecord] = []
        try LineReader.forEachRecord(path) { ended.append($0) }
        XCTAssertEqual(ended.map { String($0.text) }, ["a", "b"])
        XCTAssertEqual(ended.map(\.unterminated), [false, false])
    }

    /// A file read a part at a time (past a number of records) is read twice, through one
    /// descriptor: bytes appended between the reads (a file still being written) are left for
    /// the next night, as a file read whole leaves them; moved away meanwhile, it is read as it
    /// was opened; gone before it was opened, the night goes on without it and names it; bytes
    /// of it rewritten between the reads stop the night, the ledger as it was.
    func testABigLineFileIsReadAsItStoodWhenTheNightOpenedIt() throws {
        defer { PreparedFile.linesAboveRecords = 100_000; Ingest.readHook = nil }
        PreparedFile.linesAboveRecords = 2
        let url = ws.root.appendingPathComponent("inbox/receipts/big.jsonl")
        try ws.write("inbox/receipts/big.jsonl", ["8301", "8302", "8303"].map(record).joined(separator: "\n") + "\n")
        let db = ws.root.appendingPathComponent("ledger.sqlite")
        // Rewritten in place (the same size): the night stops, nothing stored.
        Ingest.readHook = { stage, _ in
            guard stage == "between", let h = FileHandle(forUpdatingAtPath: url.path) else { return }
            try? h.seek(toOffset: 40)
            h.write(Data("X".utf8))
            try? h.close()
        }
        XCTAssertThrowsError(try ws.run("2026-10-06")) { error in
            XCTAssertEqual("\(error)", "\(url.path): was rewritten while the night read it (read twice, as it has more than 2 records or 64 MiB; bytes appended are not read until the next night, bytes changed are): nothing of the night was written; run again")
        }
        if FileManager.default.fileExists(atPath: db.path) { XCTAssertEqual(try outcomes("inbox/receipts/big.jsonl").count, 0, "nothing stored") }
        // Appended to between the reads, then moved away: read as it stood when opened.
        try ws.write("inbox/receipts/big.jsonl", ["8301", "8302", "8303"].map(record).joined(separator: "\n") + "\n")
        let moved = ws.root.appendingPathComponent("moved.jsonl")
        Ingest.readHook = { stage, _ in
            guard stage == "between" else { return }
            try? TestWorkspace.appendText(url, self.record("8304") + "\n")
            try? FileManager.default.moveItem(at: url, to: moved)
        }
        let r = try ws.run("2026-10-06")
        XCTAssertEqual(r.counts.read, 3)
        XCTAssertEqual(r.counts.verified, 3)
        XCTAssertEqual(r.filesRead, 1)
        // Back, with its appended line: the next night reads that line alone.
        Ingest.readHook = nil
        try FileManager.default.moveItem(at: moved, to: url)
        let next = try ws.run("2026-10-07")
        XCTAssertEqual(next.counts.read, 1)
        XCTAssertEqual(try outcomes("inbox/receipts/big.jsonl").count, 4)
        // Gone before it was opened: named, not read, the night goes on.
        try ws.write("inbox/receipts/other.jsonl", ["8401", "8402", "8403"].map(record).joined(separator: "\n") + "\n")
        try ws.write("inbox/receipts/small.jsonl", record("8405") + "\n")
        let other = ws.root.appendingPathComponent("inbox/receipts/other.jsonl")
        Ingest.readHook = { stage, u in
            guard stage == "open", u == other else { return }
            try? FileManager.default.removeItem(at: other)
        }
        let gone = try ws.run("2026-10-08")
        XCTAssertEqual(gone.goneFiles, ["inbox/receipts/other.jsonl"])
        XCTAssertEqual(gone.counts.read, 1, "the small file")
        XCTAssertEqual(gone.filesRead, 1)
    }

    /// An orders file read by the writer a chunk at a time (over `ordersAboveBytes`) is read
    /// twice, as a big line file is: bytes appended between the reads wait for the next night,
    /// bytes rewritten stop the night with nothing stored, a file gone before it was opened is
    /// named and the night goes on.
    func testABigOrdersFileIsReadAsItStoodWhenTheNightOpenedIt() throws {
        defer { PreparedFile.ordersAboveBytes = 16 << 20; Ingest.readHook = nil }
        PreparedFile.ordersAboveBytes = 10
        let header = OrderStreamingTests.header + "\n"
        let url = ws.root.appendingPathComponent("inbox/orders/big.csv")
        try ws.write("inbox/orders/big.csv", header + (1...3).map { OrderStreamingTests.row($0) + "\n" }.joined())
        Ingest.readHook = { stage, _ in
            guard stage == "between", let h = FileHandle(forUpdatingAtPath: url.path) else { return }
            try? h.seek(toOffset: UInt64(header.utf8.count + 1))
            h.write(Data("X".utf8))
            try? h.close()
        }
        XCTAssertThrowsError(try ws.run("2026-10-06")) { error in
            XCTAssertEqual("\(error)", "\(url.path): was rewritten while the night read it (read twice, as it is over 0 MiB; bytes appended are not read until the next night, bytes changed are): nothing of the night was written; run again")
        }
        let db = ws.root.appendingPathComponent("ledger.sqlite")
        if FileManager.default.fileExists(atPath: db.path) { XCTAssertEqual(try outcomes("inbox/orders/big.csv").count, 0, "nothing stored") }
        try ws.write("inbox/orders/big.csv", header + (1...3).map { OrderStreamingTests.row($0) + "\n" }.joined())
        Ingest.readHook = { stage, _ in
            guard stage == "between" else { return }
            try? TestWorkspace.appendText(url, OrderStreamingTests.row(4) + "\n")
        }
        let r = try ws.run("2026-10-06")
        XCTAssertEqual(r.counts.read, 3)
        XCTAssertEqual(r.counts.verified, 3)
        Ingest.readHook = nil
        let next = try ws.run("2026-10-07")
        XCTAssertEqual(next.counts.read, 1, "the row appended")
        XCTAssertEqual(try outcomes("inbox/orders/big.csv").count, 4)
        // The file's row counts the new rows alone (its path read before: counted by the writer,
        // against the rows stored), as `verify` checks.
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        let other = ws.root.appendingPathComponent("inbox/orders/other.csv")
        try ws.write("inbox/orders/other.csv", header + OrderStreamingTests.row(5) + "\n")
        Ingest.readHook = { stage, u in
            guard stage == "open", u == other else { return }
            try? FileManager.default.removeItem(at: other)
        }
        let gone = try ws.run("2026-10-08")
        XCTAssertEqual(gone.goneFiles, ["inbox/orders/other.csv"])
        XCTAssertEqual(gone.counts.read, 0)
    }

    /// A 2 GiB line (a sparse file: no disk) between two good records, read by the real
    /// binary: the run succeeds, the line is rejected, and the process stays small.
    func testATwoGigabyteLineIsRejectedWithoutUsingMemory() throws {
        let binary = TraceAndCLITests.binary
        guard FileManager.default.fileExists(atPath: binary.path) else { throw XCTSkip("iapledger binary not built at \(binary.path)") }
        let url = ws.root.appendingPathComponent("inbox/receipts/huge.jsonl")
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data((record("8201") + "\n").utf8).write(to: url)
        let h = try FileHandle(forWritingTo: url)
        let start = try h.seekToEnd()
        try h.truncate(atOffset: start + (2 << 30))
        try h.seekToEnd()
        try h.write(contentsOf: Data(("\n" + record("8202") + "\n").utf8))
        try h.close()

        var pid: pid_t = 0
        // The run's own high-water mark of resident memory (VmHWM, its --timings table):
        // wait4's ru_maxrss also counts this test process's peak, which Linux carries into a
        // child across exec (it grows with the tests run before this one).
        let out = ws.root.appendingPathComponent("run-output.txt")
        let args = [binary.path, "run", "--workspace", ws.root.path, "--as-of", "2026-10-06", "--no-progress", "--timings"]
        let cArgs = args.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, out.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        XCTAssertEqual(posix_spawn(&pid, binary.path, &actions, nil, cArgs, environ), 0)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) == -1 && errno == EINTR {}
        XCTAssertEqual(status, 0, "the run exits 0: a bad record is data, not a failure")
        let printed = try String(contentsOf: out, encoding: .utf8)
        let total = try XCTUnwrap(printed.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("total ") }, printed)
        let mib = try XCTUnwrap(total.split(separator: " ").dropLast().last.flatMap { Int($0) }, String(total))
        XCTAssertTrue(total.hasSuffix("MiB"), String(total))
        XCTAssertLessThan(mib, 300, "peak memory stays far below the line's 2 GiB: \(total)")

        let seen = try outcomes("inbox/receipts/huge.jsonl")
        XCTAssertEqual(seen[1]?.outcome, "verified")
        XCTAssertEqual(seen[2]?.outcome, "rejected")
        XCTAssertEqual(seen[2]?.code, "RECORD_TOO_LONG")
        XCTAssertEqual(seen[3]?.outcome, "verified")
    }
}
