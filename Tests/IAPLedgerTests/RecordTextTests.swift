import Foundation
import XCTest
@testable import LedgerRun
@testable import LedgerStore

/// Records' texts stored compressed, a chunk of neighbours at a time (RecordText.swift).
final class RecordTextTests: XCTestCase {
    /// Every text reads back byte for byte from its chunk (multi-byte UTF-8, a NUL, a text
    /// larger than a chunk), neighbours share chunks up to the chunk size, and an empty or a
    /// huge text stays in its own row.
    func testTextsReadBackExactlyFromTheirChunks() throws {
        var texts: [Substring] = []
        for i in 0..<5_000 {
            texts.append(Substring("{\"n\": \(i), \"name\": \"caf\u{E9} \u{1F600}\", \"pad\": \"\(String(repeating: "x", count: i % 97))\"}"))
        }
        texts.insert("", at: 10)
        texts.insert("a\u{0}b", at: 20)
        texts.insert(Substring(String(repeating: "{\"big\": 1}", count: 30_000)), at: 30)
        let huge = String(repeating: "h", count: RecordText.inlineOverBytes + 1)
        texts.insert(Substring(huge), at: 40)
        let stored = RecordText.chunked(texts)
        XCTAssertEqual(stored.count, texts.count)
        var chunks: [ObjectIdentifier: RecordChunk] = [:]
        for (text, s) in zip(texts, stored) {
            switch s {
            case .inline(let raw):
                XCTAssertTrue(text.isEmpty || text.utf8.count > RecordText.inlineOverBytes, "only an empty or a huge text stays inline")
                XCTAssertEqual(raw, String(text))
            case let .chunk(chunk, offset, length):
                chunks[ObjectIdentifier(chunk)] = chunk
                let all = try XCTUnwrap(RecordText.decompress(Data(chunk.data), textBytes: chunk.textBytes))
                XCTAssertEqual(Array(all[offset..<(offset + length)]), Array(text.utf8))
            }
        }
        XCTAssertGreaterThanOrEqual(chunks.count, 4)
        let total = texts.reduce(0) { $0 + $1.utf8.count }
        XCTAssertLessThan(chunks.count, total / (RecordText.chunkTextBytes / 2), "neighbours share chunks")
        // Every chunk but the one holding the big text stays near the chunk size.
        let big = texts[30].utf8.count
        XCTAssertTrue(chunks.values.allSatisfy { $0.textBytes < RecordText.chunkTextBytes + 10_000 || $0.textBytes > big })
        // JSON like receipts compresses several times.
        XCTAssertLessThan(chunks.values.reduce(0) { $0 + $1.data.count } * 4, total)
    }

    /// Through the nightly run, with chunks of a few records: records in many chunks (more
    /// than the 16 a reader keeps decompressed), non-ASCII text, a file that grew (its records
    /// read before skipped, the new ones in new chunks) and a second file alternating with it;
    /// `verify` re-derives every sale from its chunk and every record hashes as read.
    func testManyChunksThroughTheNightlyRun() throws {
        RecordText.chunkTextBytes = 700
        defer { RecordText.chunkTextBytes = 128 << 10 }
        let ws = try TestWorkspace()
        defer { ws.remove() }
        func day(_ n: Int, from first: Int, count: Int) -> String {
            (first..<(first + count)).map { i in
                Receipt.response([Receipt.item("9\(n)\(String(format: "%04d", i))", purchased: "2026-10-0\(n)T10:00:00Z")])
                    .replacingOccurrences(of: "\"application_version\": \"1\"", with: "\"application_version\": \"caf\u{E9} \u{1F600} \(i)\"")
            }.joined(separator: "\n") + "\n"
        }
        try ws.write("inbox/receipts/a.jsonl", day(5, from: 0, count: 60))
        try ws.write("inbox/receipts/b.jsonl", day(6, from: 0, count: 40))
        try ws.run("2026-10-07")
        try ws.write("inbox/receipts/a.jsonl", day(5, from: 0, count: 60) + day(5, from: 60, count: 30))
        try ws.run("2026-10-08")
        let ledger = try Ledger(path: ws.root.appendingPathComponent("ledger.sqlite").path, readOnly: true)
        let (chunks, records, spread) = try ledger.read { r in
            (try r.rawRows("SELECT count(*) FROM source_chunk")[0][0],
             try r.rawRows("SELECT count(*) FROM source_record WHERE chunk_id IS NOT NULL")[0][0],
             try r.rawRows("SELECT count(*) FROM (SELECT file_id FROM source_record GROUP BY file_id HAVING count(DISTINCT chunk_id) > 1)")[0][0])
        }
        XCTAssertEqual(records, "130", "every record chunked, the 60 read before not stored again")
        XCTAssertGreaterThan(Int(chunks)!, 40, "far more chunks than a reader keeps")
        XCTAssertEqual(spread, "3", "each file version's records spread over several chunks")
        let audit = try Audit(workspace: ws.workspace).run()
        XCTAssertTrue(audit.ok, "\(audit.problems)")
        XCTAssertEqual(audit.entries, 130)
        XCTAssertEqual(audit.records, 130)
    }

    /// A chunk that is not a Zstandard frame of its recorded size reads as nothing, not a crash.
    func testADamagedChunkReadsAsNothing() {
        let good = RecordText.compress(Array("hello".utf8))
        XCTAssertEqual(RecordText.decompress(Data(good), textBytes: 5), Array("hello".utf8))
        XCTAssertNil(RecordText.decompress(Data(good), textBytes: 4), "wrong size")
        XCTAssertNil(RecordText.decompress(Data(good), textBytes: 6), "wrong size")
        XCTAssertNil(RecordText.decompress(Data(good.dropLast(2)), textBytes: 5), "truncated")
        XCTAssertNil(RecordText.decompress(Data([1, 2, 3]), textBytes: 5), "not a frame")
        XCTAssertNil(RecordText.decompress(Data(good), textBytes: -1))
    }
}
