import CZstd
import Foundation

/// Consecutive records of one input file, their texts compressed together (Zstandard) into
/// one `source_chunk` row. Each record keeps where its text lies in the chunk's text (its
/// bytes from `offset`, `length` long); the SHA-256 of those bytes is the record's hash, so
/// `verify` proves the stored text is the text read. JSON receipts compress about ten times:
/// the ledger keeps every record's text in a tenth of the room, and a night writes that much less.
///
/// Built on the preparing thread; the writer inserts the chunk (once, before its first record)
/// and remembers its row id.
public final class RecordChunk: @unchecked Sendable {
    /// The compressed text: the records' texts one after another, each followed by a newline.
    public let data: [UInt8]
    /// The uncompressed text's size in bytes.
    public let textBytes: Int
    /// Set by the writer when the chunk is inserted (its `source_chunk` row id).
    var rowId: Int64?

    init(data: [UInt8], textBytes: Int) {
        self.data = data
        self.textBytes = textBytes
    }
}

/// A record's text as it is stored: in its own row (`raw`), or as a range of a chunk.
public enum RecordText: ExpressibleByStringLiteral, Sendable {
    case inline(String)
    case chunk(RecordChunk, offset: Int, length: Int)

    public init(stringLiteral value: String) { self = .inline(value) }

    /// About this much text goes into one chunk: large enough to compress well (about ten
    /// times for receipts), small enough that reading one record back decompresses little.
    /// (A variable for the tests, which make chunks of a few records.)
    nonisolated(unsafe) public static var chunkTextBytes = 128 << 10
    /// A record's text over this size is stored in its own row, uncompressed.
    public static var inlineOverBytes: Int { 4 * chunkTextBytes }
    /// Zstandard's level 1: most of the compression of the higher levels, several times faster.
    static let level: Int32 = 1

    /// The texts, in order, as chunked records: consecutive texts share a chunk until it holds
    /// `chunkTextBytes`. Empty texts and those over `inlineOverBytes` stay inline.
    public static func chunked(_ texts: [Substring]) -> [RecordText] {
        var out: [RecordText] = []
        out.reserveCapacity(texts.count)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(chunkTextBytes + 4096)
        var pending: [(index: Int, offset: Int, length: Int)] = []
        var scratch: [UInt8] = []
        func flush() {
            guard !pending.isEmpty else { return }
            let chunk = RecordChunk(data: compress(buffer, scratch: &scratch), textBytes: buffer.count)
            for p in pending { out[p.index] = .chunk(chunk, offset: p.offset, length: p.length) }
            buffer.removeAll(keepingCapacity: true)
            pending.removeAll(keepingCapacity: true)
        }
        for text in texts {
            let utf8 = text.utf8
            guard !utf8.isEmpty else { out.append(.inline("")); continue }
            // A huge record (a whole JSON document of hundreds of megabytes) is stored as it is:
            // no copy of it waits in a chunk buffer beside its compressed copy.
            guard utf8.count <= Self.inlineOverBytes else { out.append(.inline(String(text))); continue }
            let offset = buffer.count
            // A copy of the bytes at once (a text read from a file is contiguous), not byte by byte.
            if utf8.withContiguousStorageIfAvailable({ buffer.append(contentsOf: $0) }) == nil {
                buffer.append(contentsOf: utf8)
            }
            buffer.append(0x0A)
            pending.append((out.count, offset, utf8.count))
            out.append(.inline(""))
            if buffer.count >= chunkTextBytes { flush() }
        }
        flush()
        return out
    }

    static func compress(_ bytes: [UInt8]) -> [UInt8] {
        var scratch: [UInt8] = []
        return compress(bytes, scratch: &scratch)
    }

    /// The compressed bytes, exactly as many as there are (a chunk kept until the writer stores
    /// it holds its compressed size, not the worst case): compressed into `scratch` first.
    static func compress(_ bytes: [UInt8], scratch: inout [UInt8]) -> [UInt8] {
        let bound = ZSTD_compressBound(bytes.count)
        if scratch.count < bound { scratch = [UInt8](repeating: 0, count: bound) }
        let written = scratch.withUnsafeMutableBytes { dst in
            bytes.withUnsafeBytes { src in
                ZSTD_compress(dst.baseAddress, bound, src.baseAddress, src.count, level)
            }
        }
        // Compressing a buffer into one of ZSTD_compressBound's size cannot fail.
        precondition(ZSTD_isError(written) == 0, "zstd: \(String(cString: ZSTD_getErrorName(written)))")
        return Array(scratch[..<written])
    }

    /// The text a chunk holds: nil when the data is not a Zstandard frame of `textBytes`
    /// bytes (a damaged or altered chunk; `verify` reports it).
    static func decompress(_ data: Data, textBytes: Int) -> [UInt8]? {
        guard textBytes >= 0, textBytes <= 1 << 30 else { return nil }
        // The frame states its size: nothing is allocated for a frame of another size.
        let stated = data.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        guard stated == UInt64(textBytes) else { return nil }
        var out = [UInt8](repeating: 0, count: textBytes)
        let written = out.withUnsafeMutableBytes { dst in
            data.withUnsafeBytes { src in
                ZSTD_decompress(dst.baseAddress, textBytes, src.baseAddress, src.count)
            }
        }
        guard ZSTD_isError(written) == 0, written == textBytes else { return nil }
        return out
    }
}

/// Reads records' texts back from their chunks, keeping the last few chunks decompressed:
/// records read in order (`verify`), or sales whose first records alternate between a day's
/// files, decompress each chunk about once.
struct ChunkReader {
    /// The chunk's uncompressed size and data, by row id (nil when there is no such row).
    let load: (Int64) throws -> (textBytes: Int, data: Data)?
    /// At most this many chunks are kept decompressed (a few megabytes).
    static let kept = 16
    private var texts: [Int64: [UInt8]?] = [:]
    private var order: [Int64] = []

    init(load: @escaping (Int64) throws -> (textBytes: Int, data: Data)?) { self.load = load }

    /// The text of a record stored in chunk `chunkId`; nil when the chunk is missing or cannot
    /// be decompressed, or the range lies outside it.
    mutating func text(chunkId: Int64, offset: Int?, length: Int?) throws -> String? {
        let chunk: [UInt8]?
        if let kept = texts[chunkId] {
            chunk = kept
        } else {
            chunk = try load(chunkId).flatMap { RecordText.decompress($0.data, textBytes: $0.textBytes) }
            if order.count == Self.kept { texts[order.removeFirst()] = nil }
            texts[chunkId] = .some(chunk)
            order.append(chunkId)
        }
        guard let text = chunk, let offset, let length, offset >= 0, length >= 0, offset <= text.count - length else { return nil }
        return String(decoding: text[offset..<(offset + length)], as: UTF8.self)
    }
}
