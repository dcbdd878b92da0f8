import CGzip
import Foundation
import LedgerCore
import LedgerReport

/// Writes a table as gzip-compressed CSV (the full journal of a period too big for Excel),
/// aside (in `tempDirectory`, else beside its final name) and renamed into place. The gzip
/// header carries no timestamp, so the same rows give the same bytes.
public enum GzipCSVWriter {
    public struct Written: Equatable {
        public var url: URL
        public var rows: Int
        public var sha256: String
    }

    public static func write(_ table: TableBlock, to url: URL, tempDirectory: URL? = nil) throws -> Written {
        CrashPoint.hit("write:start \(url.lastPathComponent)")
        let temp = try WriteAside.tempURL(for: url, in: tempDirectory)
        // Level 3: a month's journal is rewritten each night; level 6 took twice the time for a
        // file a fifth smaller (78 MB of CSV: 7.0 MB against 5.5 MB).
        guard let gz = gzopen(temp.path, "wb3") else {
            throw WriteError(message: "\(temp.path): cannot create the journal export")
        }
        var closed = false
        defer { if !closed { gzclose(gz); try? FileManager.default.removeItem(at: temp) } }
        var buffer = [UInt8]()
        buffer.reserveCapacity(1 << 16)
        func flush() throws {
            guard !buffer.isEmpty else { return }
            let n = buffer.withUnsafeBytes { gzwrite(gz, $0.baseAddress, UInt32($0.count)) }
            guard n == Int32(buffer.count) else { throw WriteError(message: "\(temp.path): cannot write the journal export (disk full?)") }
            buffer.removeAll(keepingCapacity: true)
        }
        func line(_ fields: [String]) throws {
            for (i, field) in fields.enumerated() {
                if i > 0 { buffer.append(0x2C) }
                appendField(field, to: &buffer)
            }
            buffer.append(0x0A)
            if buffer.count > 60_000 { try flush() }
        }
        try line(table.columns.map(\.title))
        var rows = 0
        try table.rows { r in
            guard r.style == .body else { return }
            rows += 1
            try line(r.cells.map(\.plain))
            CrashPoint.tick("write:csv-rows", every: 100)
        }
        try flush()
        closed = true
        guard gzclose(gz) == Z_OK else { throw WriteError(message: "\(temp.path): cannot finish the journal export") }
        var sha = StreamingSHA256()
        do {
            sha.update(try Data(contentsOf: temp))
            try WriteAside.moveIntoPlace(temp, to: url)
        } catch {
            try? FileManager.default.removeItem(at: temp)
            throw error
        }
        return Written(url: url, rows: rows, sha256: sha.finalizeHex())
    }

    /// One CSV field (RFC 4180): quoted, with its quotes doubled, when it holds a comma, a
    /// quote or a line break; as it is otherwise. Checked byte by byte (all four are ASCII).
    static func appendField(_ s: String, to buffer: inout [UInt8]) {
        let u = s.utf8
        guard u.contains(where: { $0 == 0x2C || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D }) else {
            buffer.append(contentsOf: u)
            return
        }
        buffer.append(0x22)
        for b in u {
            buffer.append(b)
            if b == 0x22 { buffer.append(0x22) }
        }
        buffer.append(0x22)
    }
}
