import Foundation
import LedgerCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads a line-based input file (JSON Lines, one JWS a line) a chunk at a time: memory
/// holds one chunk and one line, never the file, and a file of any size is hashed on the
/// way. Blank lines are skipped; `\n` or `\r\n` end a line. A line that is not UTF-8, or
/// longer than `maxRecordBytes` (its bytes are skipped, not kept), comes back as a record
/// with a problem, so it is rejected with its line number and the rest of the file is read.
public enum LineReader {
    /// 16 MiB: a real receipt response or JWS is a few kilobytes.
    public static let maxRecordBytes = 16 << 20
    static let chunkBytes = 4 << 20

    public struct Result {
        public var records: [RawRecord]
        public var sha256: String
        public var sizeBytes: Int
    }

    /// Calls `body` with each chunk of the file in order; returns its SHA-256 and size.
    static func forEachChunk(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> (sha256: String, sizeBytes: Int) {
        let fd = open(path, O_RDONLY)
        // (Said with the night's advice only for an inbox file: `verify --workbook` reads here too.)
        guard fd >= 0 else { throw ReadError.unreadableInput(path, code: errno, inInbox: path.contains("/inbox/") || path.hasPrefix("inbox/")) }
        defer { close(fd) }
        return try forEachChunk(path, descriptor: fd, body)
    }

    /// The same through an open descriptor, from the file's start, up to `limit` bytes if given
    /// (what a first read found: bytes appended since are not read).
    static func forEachChunk(_ path: String, descriptor fd: Int32, limit: Int? = nil,
                             _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> (sha256: String, sizeBytes: Int) {
        var hasher = StreamingSHA256()
        var size = 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkBytes, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let want = limit.map { min(chunkBytes, $0 - size) } ?? chunkBytes
            if want == 0 { break }
            let n = pread(fd, chunk.baseAddress, want, off_t(size))
            if n < 0 {
                if errno == EINTR { continue }
                throw ReadError.file(path, "read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            let bytes = UnsafeRawBufferPointer(rebasing: chunk[0..<n])
            hasher.update(bytes: bytes)
            size += n
            try body(bytes)
        }
        return (hasher.finalizeHex(), size)
    }

    /// Every record of the file, held in memory.
    public static func read(_ path: String, maxRecordBytes: Int = maxRecordBytes) throws -> Result {
        try read(path, maxRecordBytes: maxRecordBytes, maxRecords: .max)!
    }

    /// Whether `bytes` hold no record: spaces and tabs (and line ends, with `lineEnds`) only,
    /// after a UTF-8 byte order mark at the file's start (a file holding nothing but one, as an
    /// editor saves an empty file, is as empty as one of no bytes: `EMPTY_FILE`, not a record
    /// refused as `MALFORMED` that stayed open once the file arrived whole).
    public static func isBlank<C: Collection>(_ bytes: C, lineEnds: Bool, atFileStart: Bool) -> Bool where C.Element == UInt8 {
        var rest = bytes[...]
        if atFileStart && rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
        return rest.allSatisfy { $0 == 0x20 || $0 == 0x09 || (lineEnds && ($0 == 0x0A || $0 == 0x0D)) }
    }

    /// Every record of the file, or nil once it has more than `maxRecords` (the caller then
    /// reads it a record at a time: `forEachRecord`).
    public static func read(_ path: String, maxRecordBytes: Int = maxRecordBytes, maxRecords: Int) throws -> Result? {
        struct TooMany: Error {}
        var records: [RawRecord] = []
        do {
            let (sha, size) = try forEachRecord(path, maxRecordBytes: maxRecordBytes) { record in
                guard records.count < maxRecords else { throw TooMany() }
                records.append(record)
            }
            return Result(records: records, sha256: sha, sizeBytes: size)
        } catch is TooMany {
            return nil
        }
    }

    /// Calls `body` with each record of the file in order, holding one chunk and one line (and
    /// the record before, to mark the last one `unterminated`), never the file; returns its
    /// SHA-256 and size.
    /// `descriptor`: read through it (from the start, `limit` bytes at most) instead of opening
    /// `path` (named in errors).
    @discardableResult
    public static func forEachRecord(_ path: String, descriptor: Int32? = nil, limit: Int? = nil, maxRecordBytes: Int = maxRecordBytes,
                                     _ body: (RawRecord) throws -> Void) throws -> (sha256: String, sizeBytes: Int) {
        var line: [UInt8] = []
        var lineLength = 0          // bytes of the current line so far (also past the limit)
        var lineNo = 0
        var held: RawRecord?

        func emit(_ record: RawRecord) throws {
            if let before = held { try body(before) }
            held = record
        }

        /// Returns whether the line was a record (not blank).
        @discardableResult
        func finishLine(last: Bool = false) throws -> Bool {
            lineNo += 1
            defer { line.removeAll(keepingCapacity: line.capacity <= 1 << 20); lineLength = 0 }
            if lineLength > maxRecordBytes {
                try emit(RawRecord(line: lineNo, text: "<\(lineLength) bytes>", problem: (
                    "RECORD_TOO_LONG", "line \(lineNo) is \(lineLength) bytes, over the \(maxRecordBytes)-byte limit for one record; its bytes were skipped")))
                return true
            }
            if line.last == 0x0D { line.removeLast() }
            if Self.isBlank(line, lineEnds: false, atFileStart: lineNo == 1) { return false }
            if let text = line.withUnsafeBufferPointer(UTF8Text.string) {
                try emit(RawRecord(line: lineNo, text: Substring(text)))
            } else if last, let cut = Self.droppingCutCharacter(line), let text = cut.withUnsafeBufferPointer(UTF8Text.string) {
                // The file ends inside a character of its last line (still being written): the
                // line as far as its last whole character, cut short (TRUNCATED, settled when
                // the file holds it whole), not a line that is no UTF-8, which nothing settled.
                try emit(RawRecord(line: lineNo, text: Substring(text)))
            } else {
                let digest = Hashing.sha256Hex(line)
                try emit(RawRecord(line: lineNo, text: Substring("<\(line.count) bytes, not UTF-8, sha256 \(digest)>"), problem: (
                    "INVALID_UTF8", "line \(lineNo) is not valid UTF-8 text")))
            }
            return true
        }

        func chunks(_ each: (UnsafeRawBufferPointer) throws -> Void) throws -> (sha256: String, sizeBytes: Int) {
            if let descriptor { return try forEachChunk(path, descriptor: descriptor, limit: limit, each) }
            return try forEachChunk(path, each)
        }
        let (sha, size) = try chunks { bytes in
            let n = bytes.count
            var start = 0
            while start < n {
                let rest = n - start
                let base = UnsafeRawPointer(bytes.baseAddress!)
                let found: UnsafeMutableRawPointer? = memchr(base + start, 0x0A, rest)
                let end: Int = found.map { UnsafeRawPointer($0) - base } ?? n
                let piece = end - start
                if lineLength + piece <= maxRecordBytes {
                    line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                } else if lineLength <= maxRecordBytes {
                    line.removeAll()   // over the limit: stop keeping it
                }
                lineLength += piece
                if found != nil {
                    try finishLine()
                    start = end + 1
                } else {
                    start = n
                }
            }
        }
        if lineLength > 0 {
            // The file ends inside this line (no line end after it): marked, unless it ends in a
            // CR (a classic Mac line end).
            let endsInCR = line.last == 0x0D
            if try finishLine(last: !endsInCR), !endsInCR { held?.unterminated = true }
        }
        if let last = held { try body(last) }
        return (sha, size)
    }

    /// `bytes` without the start of a UTF-8 character they end inside (a lead byte and fewer
    /// continuation bytes than it announces), or nil when they end on a whole character.
    static func droppingCutCharacter(_ bytes: [UInt8]) -> [UInt8]? {
        var i = bytes.count - 1, continuation = 0
        while i >= 0, continuation < 3, bytes[i] & 0xC0 == 0x80 { continuation += 1; i -= 1 }
        guard i >= 0 else { return nil }
        let lead = bytes[i]
        let length = lead & 0xE0 == 0xC0 ? 2 : lead & 0xF0 == 0xE0 ? 3 : lead & 0xF8 == 0xF0 ? 4 : 0
        guard length > 0, continuation < length - 1 else { return nil }
        return Array(bytes[..<i])
    }

    /// The SHA-256 and size of a file, read a chunk at a time.
    public static func hash(_ path: String) throws -> (sha256: String, sizeBytes: Int) {
        try forEachChunk(path) { _ in }
    }
}
