import Foundation
import XCTest
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
