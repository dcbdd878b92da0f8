import CGzip
import Foundation
import LedgerCore
import LedgerReport

/// Writes a table as gzip-compressed CSV (the full journal of a period too big for Excel),
/// aside (in `tempDirectory`, else beside its final name) and renamed into place. The gzip
/// header carries no timestamp, so the same rows give the same bytes; it may carry a comment
/// naming what the file was made from (`inputs`), which lets the next night keep the file
/// (`kept`) instead of writing the same bytes again.
public enum GzipCSVWriter {
    public struct Written: Equatable {
        public var url: URL
        public var rows: Int
        public var sha256: String
    }

    /// The gzip comment of an export made from `inputs`, with its number of rows.
    static func comment(inputs: String, rows: Int) -> String {
        "iapledger journal export; inputs \(inputs); rows \(rows)"
    }

    public static func write(_ table: TableBlock, to url: URL, tempDirectory: URL? = nil, inputs: String? = nil) throws -> Written {
        CrashPoint.hit("write:start \(url.lastPathComponent)")
        let temp = try WriteAside.tempURL(for: url, in: tempDirectory)
        guard let file = fopen(temp.path, "wb") else {
            throw WriteError(message: "\(temp.path): cannot create the journal export")
        }
        // zlib keeps pointers to the stream and the header: both stay put until the end.
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let header = UnsafeMutablePointer<gz_header>.allocate(capacity: 1)
        header.initialize(to: gz_header())
        let commentText = inputs.map { strdup(comment(inputs: $0, rows: table.rowCount)) } ?? nil
        var closed = false
        defer {
            deflateEnd(stream)
            stream.deallocate()
            header.deallocate()
            free(commentText)
            if !closed { fclose(file); try? FileManager.default.removeItem(at: temp) }
        }
        // Level 3: a month's journal is rewritten each night; level 6 took twice the time for a
        // file a fifth smaller (78 MB of CSV: 7.0 MB against 5.5 MB). Window bits 15 + 16: a
        // gzip wrapper. Operating system 3 (Unix) and no time, as gzopen wrote it on Linux.
        guard deflateInit2_(stream, 3, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw WriteError(message: "\(temp.path): cannot start compressing the journal export")
        }
        header.pointee.os = 3
        if let commentText { header.pointee.comment = UnsafeMutableRawPointer(commentText).assumingMemoryBound(to: Bytef.self) }
        guard deflateSetHeader(stream, header) == Z_OK else {
            throw WriteError(message: "\(temp.path): cannot start compressing the journal export")
        }
        var buffer = [UInt8]()
        buffer.reserveCapacity(1 << 16)
        var out = [UInt8](repeating: 0, count: 1 << 16)
        // The file's SHA-256 (for Run Info), taken over the bytes as they are written.
        var sha = StreamingSHA256()
        func deflateBuffer(finish: Bool) throws {
            try buffer.withUnsafeMutableBytes { input in
                stream.pointee.next_in = input.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_in = UInt32(input.count)
                try out.withUnsafeMutableBytes { output in
                    while true {
                        stream.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
                        stream.pointee.avail_out = UInt32(output.count)
                        let status = deflate(stream, finish ? Z_FINISH : Z_NO_FLUSH)
                        guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                            throw WriteError(message: "\(temp.path): cannot compress the journal export (zlib \(status))")
                        }
                        let n = output.count - Int(stream.pointee.avail_out)
                        guard fwrite(output.baseAddress, 1, n, file) == n else {
                            throw WriteError(message: "\(temp.path): cannot write the journal export (disk full?)")
                        }
                        sha.update(bytes: UnsafeRawBufferPointer(rebasing: output[..<n]))
                        // Done when all the input is taken (and, finishing, the stream ended)
                        // with room left in the output.
                        if finish ? status == Z_STREAM_END : (stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0) { break }
                    }
                }
            }
            buffer.removeAll(keepingCapacity: true)
        }
        func line(_ cells: [Cell]) throws {
            for (i, cell) in cells.enumerated() {
                if i > 0 { buffer.append(0x2C) }
                cell.appendPlain(to: &buffer, text: appendField)
            }
            buffer.append(0x0A)
            if buffer.count > 60_000 { try deflateBuffer(finish: false) }
        }
        try line(table.columns.map { .text($0.title) })
        var rows = 0
        try table.rows { r in
            guard r.style == .body else { return }
            rows += 1
            try line(r.cells)
            CrashPoint.tick("write:csv-rows", every: 100)
        }
        try deflateBuffer(finish: true)
        closed = true
        guard fclose(file) == 0 else {
            try? FileManager.default.removeItem(at: temp)
            throw WriteError(message: "\(temp.path): cannot finish the journal export (disk full?)")
        }
        do {
            try WriteAside.moveIntoPlace(temp, to: url)
        } catch {
            try? FileManager.default.removeItem(at: temp)
            throw error
        }
        return Written(url: url, rows: rows, sha256: sha.finalizeHex())
    }

    /// The export at `url` when it was made from `inputs` (its gzip comment says so), holds
    /// `rows` rows and a header line, is whole (one gzip member that decompresses to the file's
    /// last byte with its checksum and length right) and has the bytes registered when it was
    /// written (`registeredSHA256`: an amount changed inside, its comment and rows left as they
    /// were, is not kept). Nil otherwise (missing, never registered, made from other inputs, cut
    /// short, changed, or with anything appended), and the caller writes it again. Rows are
    /// counted as CSV records (a line break inside a quoted field is part of its field).
    /// Checking a month's export took a quarter of a second where writing it took three.
    public static func kept(_ url: URL, inputs: String, rows: Int, registeredSHA256: String?) -> Written? {
        guard let registeredSHA256, let data = try? Data(contentsOf: url),
              gzipComment(data.prefix(4096)) == comment(inputs: inputs, rows: rows) else { return nil }
        let sha = Hashing.sha256Hex(data)
        guard sha == registeredSHA256, let records = csvRecords(gzip: data), records == rows + 1 else { return nil }
        return Written(url: url, rows: rows, sha256: sha)
    }

    /// The number of CSV records in `gzip`, a single gzip member and nothing after it; nil when
    /// it is not that (bad data, bad checksum or length, cut short, bytes after the member).
    static func csvRecords(gzip data: Data) -> Int? {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { inflateEnd(stream); stream.deallocate() }
        guard inflateInit2_(stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        var records = 0, inQuotes = false, atLineStart = true
        // Line ends outside quotes, a stretch between quotes at a time (a doubled quote inside
        // a field closes and opens it again); most exports hold no quote at all.
        func count(_ b: UnsafeRawBufferPointer) {
            guard let base = b.baseAddress else { return }
            var i = 0
            while i < b.count {
                let quote = memchr(base + i, 0x22, b.count - i).map { base.distance(to: UnsafeRawPointer($0)) } ?? b.count
                if inQuotes {
                    if quote < b.count { inQuotes = false }
                    atLineStart = false
                } else {
                    var lineEnds = 0
                    for byte in UnsafeRawBufferPointer(rebasing: b[i..<quote]) where byte == 0x0A { lineEnds += 1 }
                    records += lineEnds
                    if quote > i { atLineStart = b[quote - 1] == 0x0A }
                    if quote < b.count { inQuotes = true; atLineStart = false }
                }
                i = quote + 1
            }
        }
        var out = [UInt8](repeating: 0, count: 1 << 17)
        let ended: Bool = data.withUnsafeBytes { input in
            guard let base = input.baseAddress, input.count > 0 else { return false }
            stream.pointee.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = UInt32(input.count)
            return out.withUnsafeMutableBytes { o in
                while true {
                    stream.pointee.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.pointee.avail_out = UInt32(o.count)
                    let status = inflate(stream, Z_NO_FLUSH)
                    guard status == Z_OK || status == Z_STREAM_END else { return false }
                    let n = o.count - Int(stream.pointee.avail_out)
                    count(UnsafeRawBufferPointer(rebasing: o[..<n]))
                    // The member's end must be the file's end.
                    if status == Z_STREAM_END { return stream.pointee.avail_in == 0 }
                    if n == 0 && stream.pointee.avail_in == 0 { return false }
                }
            }
        }
        guard ended, !inQuotes, atLineStart else { return nil }
        return records
    }

    /// The comment of a gzip file's header (RFC 1952: ID1 ID2 CM FLG MTIME XFL OS, then the
    /// optional extra field, name and comment), nil when it has none or is not gzip.
    static func gzipComment(_ head: Data) -> String? {
        let b = [UInt8](head)
        guard b.count >= 10, b[0] == 0x1F, b[1] == 0x8B, b[2] == 8 else { return nil }
        let flags = b[3]
        var i = 10
        if flags & 4 != 0 {
            guard i + 2 <= b.count else { return nil }
            i += 2 + Int(b[i]) + Int(b[i + 1]) << 8
        }
        func zeroTerminated() -> [UInt8]? {
            guard i <= b.count, let end = b[i...].firstIndex(of: 0) else { return nil }
            defer { i = end + 1 }
            return Array(b[i..<end])
        }
        if flags & 8 != 0 { guard zeroTerminated() != nil else { return nil } }
        guard flags & 16 != 0, let text = zeroTerminated() else { return nil }
        return String(decoding: text, as: UTF8.self)
    }

    /// One CSV text field (RFC 4180): quoted, with its quotes doubled, when it holds a comma, a
    /// quote or a line break; as it is otherwise. Checked byte by byte (all four are ASCII).
    /// A text a spreadsheet would run as a formula gets an apostrophe before it
    /// (as `CSV.escapeText` does); amounts and dates do not come here.
    static func appendField(_ s: String, to buffer: inout [UInt8]) {
        let u = s.utf8
        let formula = SpreadsheetText.readsAsFormula(u)
        guard u.contains(where: { $0 == 0x2C || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D }) else {
            if formula { buffer.append(0x27) }
            buffer.append(contentsOf: u)
            return
        }
        buffer.append(0x22)
        if formula { buffer.append(0x27) }
        for b in u {
            buffer.append(b)
            if b == 0x22 { buffer.append(0x22) }
        }
        buffer.append(0x22)
    }
}
