import Foundation
import LedgerCore

/// A CSV file read a chunk at a time (an orders file too big to hold parsed whole): its rows
/// handed over one by one, as `CSV.parseRows` gives them from the whole text, holding a chunk
/// and the rows not yet ended, never the file.
public enum CSVFile {
    /// What a read found besides its rows.
    public struct Read {
        public var sha256: String
        public var sizeBytes: Int
        /// The first byte that is not UTF-8 (line, byte offset in the file), as `UTF8Position`
        /// finds it in the whole file: the rows before it were given, none after.
        public var notUTF8: (line: Int, offset: Int)?
        /// Nothing but spaces, tabs and line ends (or nothing).
        public var blank: Bool
    }

    /// The most bytes handed to the parser at once (the tests make it small, to cut rows,
    /// quoted fields, CR LF and UTF-8 sequences at every place).
    nonisolated(unsafe) public static var feedBytes = Int.max

    /// The longest line a row may start with (16 MiB, as a line of JSON Lines; files read a
    /// chunk at a time are over 16 MiB, so a file read whole has none longer). One whose line
    /// end has not come once it is past this (up to a chunk more: 16 to 20 MiB) is refused,
    /// `RECORD_TOO_LONG`, its bytes skipped to its line end and not kept: held whole, a 300 MB
    /// line took 1.35 GB and was kept in the ledger. (The tests make it small.)
    nonisolated(unsafe) public static var maxLineBytes = 16 << 20

    /// A row's first field when it ends (at a comma) within `head`, its first bytes: unquoted,
    /// or quoted with its doubled quotes read as one; nil when it runs past them or is no UTF-8.
    static func firstField(_ head: ArraySlice<UInt8>) -> String? {
        var i = head.startIndex
        var field: [UInt8] = []
        if i < head.endIndex, head[i] == UInt8(ascii: "\"") {
            i += 1
            while i < head.endIndex {
                if head[i] == UInt8(ascii: "\"") {
                    if i + 1 < head.endIndex, head[i + 1] == UInt8(ascii: "\"") { field.append(head[i]); i += 2; continue }
                    i += 1
                    break
                }
                field.append(head[i])
                i += 1
            }
            guard i < head.endIndex, head[i] == UInt8(ascii: ",") else { return nil }
        } else {
            guard let comma = head.firstIndex(of: UInt8(ascii: ",")) else { return nil }
            field = Array(head[i..<comma])
        }
        return String(validating: field, as: UTF8.self)
    }

    /// Calls `body` with each row of the file, in order: read through `descriptor` from the
    /// start, `limit` bytes at most (what a first read found), `path` named in errors.
    @discardableResult
    public static func forEachRow(_ path: String, descriptor fd: Int32, limit: Int? = nil,
                                  _ body: (Result<CSVRow, CSVError>) throws -> Void) throws -> Read {
        var pending: [UInt8] = []
        var line = 1
        var lineEnds = 0            // LFs in the bytes parsed (UTF8Position counts lines by LF)
        var parsedBytes = 0         // the file's bytes before `pending`
        var atStart = true
        var notUTF8: (line: Int, offset: Int)?
        var blank = true
        // Parsed again only once it has doubled: a row longer than a chunk is not parsed again
        // for every chunk that does not end it.
        var waitFor = 0
        // A line over `maxLineBytes` being skipped: its line, its bytes so far and its first
        // field, when whole within its first bytes (an order id there still names its order).
        var skipping: (line: Int, bytes: Int, first: String?)? = nil

        func skipped(endsFile: Bool) throws {
            guard let s = skipping else { return }
            skipping = nil
            try body(.failure(CSVError(line: s.line, message: "line \(s.line) is \(s.bytes) bytes, over the \(maxLineBytes)-byte limit for one line; its bytes were skipped",
                                       raw: Substring("<\(s.bytes) bytes>"), fieldsBefore: s.first.map { [$0] } ?? [], endsFile: endsFile, code: "RECORD_TOO_LONG")))
        }

        func parse(final: Bool) throws {
            guard notUTF8 == nil else { pending.removeAll(); return }
            if !final && pending.count < waitFor { return }
            // Up to the last line end: a line end is no part of a UTF-8 sequence, so what is
            // before it is whole if it is UTF-8 at all.
            var cut = pending.count
            if !final {
                while cut > 0 && pending[cut - 1] != 0x0A && pending[cut - 1] != 0x0D { cut -= 1 }
                if cut == 0 {
                    // A row's first line past the limit: skipped to its end, not held.
                    if pending.count > maxLineBytes {
                        if blank { blank = false }
                        skipping = (line, pending.count, firstField(pending.prefix(4096)))
                        parsedBytes += pending.count
                        pending.removeAll()
                        waitFor = 0
                        atStart = false
                        return
                    }
                    waitFor = min(pending.count * 2, maxLineBytes + 1)
                    return
                }
            }
            let region = pending[0..<cut]
            guard let text = region.withUnsafeBufferPointer({ String(validating: $0, as: UTF8.self) }) else {
                let at = UTF8Position.firstInvalid(in: region) ?? (line: 1, offset: 0)
                notUTF8 = (lineEnds + at.line, parsedBytes + at.offset)
                pending.removeAll()
                return
            }
            var s = Substring(text)
            // Two BOMs, as a file read whole loses them: Foundation's decoding takes one, the
            // parser the next.
            if atStart { for _ in 0..<2 where s.hasPrefix("\u{FEFF}") { s = s.dropFirst() } }
            let (rest, restLine) = try CSV.forEachRow(s, line: line, final: final, body)
            let used = final ? cut : cut - s.utf8.distance(from: rest, to: s.endIndex)
            guard used > 0 else { waitFor = min(pending.count * 2, maxLineBytes + 1); return }
            atStart = false
            line = restLine
            for b in pending[0..<used] where b == 0x0A { lineEnds += 1 }
            parsedBytes += used
            pending.removeFirst(used)
            waitFor = 0
        }

        let (sha, size) = try LineReader.forEachChunk(path, descriptor: fd, limit: limit) { chunk in
            var from = 0
            while from < chunk.count {
                let to = min(chunk.count, from + max(1, feedBytes))
                var piece = UnsafeRawBufferPointer(rebasing: chunk[from..<to])
                from = to
                if skipping != nil {
                    // To the line's end: its line end starts what follows (a blank line).
                    guard let end = piece.firstIndex(where: { $0 == 0x0A || $0 == 0x0D }) else {
                        skipping!.bytes += piece.count
                        parsedBytes += piece.count
                        continue
                    }
                    skipping!.bytes += end
                    parsedBytes += end
                    try skipped(endsFile: false)
                    piece = UnsafeRawBufferPointer(rebasing: piece[end...])
                }
                if blank { blank = piece.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 } }
                if notUTF8 == nil { pending.append(contentsOf: piece) }
                try parse(final: false)
            }
        }
        try skipped(endsFile: true)
        try parse(final: true)
        return Read(sha256: sha, sizeBytes: size, notUTF8: notUTF8, blank: blank)
    }

    /// The file's first `characters` characters, without the BOM a file read whole loses (the
    /// text kept of a file refused whole): read as far as they go (a character is a few bytes
    /// but for combining marks, without bound).
    public static func head(_ path: String, descriptor fd: Int32, characters: Int) throws -> String {
        var bytes: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = block.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ReadError.file(path, "read failed: \(String(cString: strerror(errno)))")
            }
            bytes += block.prefix(n)
            // Up to the last whole UTF-8 sequence (the block may end inside one).
            var end = bytes.count
            if n > 0, let lead = (max(0, end - 4)..<end).last(where: { bytes[$0] & 0xC0 != 0x80 }) {
                let length = bytes[lead] >= 0xF0 ? 4 : bytes[lead] >= 0xE0 ? 3 : bytes[lead] >= 0xC0 ? 2 : 1
                if lead + length > end { end = lead }
            }
            let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
            var text = Substring(String(decoding: bytes[min(start, end)..<end], as: UTF8.self))
            // More than asked: the last of those asked is whole, as a character after it began.
            if n == 0 || text.count > characters {
                text = text.prefix(characters)
                return String(text)
            }
        }
    }
}
