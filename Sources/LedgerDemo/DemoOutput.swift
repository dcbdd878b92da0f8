import Foundation

// Byte-level writers. The generator streams gigabytes at benchmark sizes, so records are
// rendered straight into a reusable byte buffer (no intermediate Strings, no JSONEncoder)
// and the buffer is flushed to the file every megabyte.

/// A JSON (and CSV) byte writer with optional Apple-style pretty printing.
struct DemoByteWriter {
    var bytes: [UInt8] = []
    var pretty = false
    private var depth = 0
    private var first = true

    init() { bytes.reserveCapacity(1 << 21) }

    // MARK: raw bytes

    @inline(__always) mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inline(__always) mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    @inline(__always) mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint(_ value: UInt64) {
        var count = 1
        var probe = value
        while probe >= 10 { probe /= 10; count += 1 }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(48, count: count))
        var rest = value
        var index = start + count - 1
        repeat {
            bytes[index] = 48 + UInt8(rest % 10)
            rest /= 10
            index -= 1
        } while rest > 0
    }

    mutating func int(_ value: Int64) {
        if value < 0 { byte(45); uint(UInt64(-value)) } else { uint(UInt64(value)) }
    }

    @inline(__always) mutating func two(_ value: Int) {
        bytes.append(48 + UInt8(value / 10))
        bytes.append(48 + UInt8(value % 10))
    }

    /// `YYYY-MM-DD hh:mm:ss` of an instant shifted by `offsetSeconds`.
    mutating func civilTime(_ ms: Int64, offsetSeconds: Int64, dateTimeSeparator: UInt8) {
        let seconds = DemoCalendar.floorDiv(ms, 1000) + offsetSeconds
        let dayNumber = DemoCalendar.floorDiv(seconds, 86_400)
        let secondOfDay = Int(seconds - dayNumber * 86_400)
        let (y, m, d) = DemoCalendar.civil(Int(dayNumber))
        two(y / 100); two(y % 100); byte(45); two(m); byte(45); two(d)
        byte(dateTimeSeparator)
        two(secondOfDay / 3600); byte(58); two(secondOfDay / 60 % 60); byte(58); two(secondOfDay % 60)
    }

    // MARK: JSON structure

    private mutating func newline() {
        bytes.append(10)
        bytes.append(contentsOf: repeatElement(32, count: depth * 2))
    }

    /// Starts a value inside an array (a comma and, when pretty, a new line).
    @inline(__always) mutating func element() {
        if !first { bytes.append(44) }
        if pretty { newline() }
        first = false
    }

    @inline(__always) mutating func key(_ name: StaticString) {
        element()
        bytes.append(34)
        raw(name)
        bytes.append(34)
        bytes.append(58)
        if pretty { bytes.append(32) }
    }

    mutating func beginObject() { bytes.append(123); depth += 1; first = true }
    mutating func endObject() {
        depth -= 1
        if pretty && !first { newline() }
        bytes.append(125)
        first = false
    }
    mutating func beginArray() { bytes.append(91); depth += 1; first = true }
    mutating func endArray() {
        depth -= 1
        if pretty && !first { newline() }
        bytes.append(93)
        first = false
    }

    /// Forgets structure state between top-level records.
    mutating func resetStructure() { depth = 0; first = true }

    // MARK: JSON values

    @inline(__always) mutating func string(_ text: StaticString) {
        bytes.append(34); raw(text); bytes.append(34)
    }

    /// A JSON string; the demo only writes ASCII identifiers, but quotes and backslashes
    /// are escaped anyway so a future table entry cannot break the output.
    mutating func string(_ text: String) {
        bytes.append(34)
        for b in text.utf8 {
            if b == 34 || b == 92 { bytes.append(92) }
            bytes.append(b)
        }
        bytes.append(34)
    }

    /// An unsigned integer written as a JSON string, the way Apple sends scalars.
    mutating func digits(_ value: UInt64) { bytes.append(34); uint(value); bytes.append(34) }
    mutating func digits(_ value: Int64) { bytes.append(34); int(value); bytes.append(34) }
    mutating func number(_ value: Int64) { int(value) }
    mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    /// `"2026-08-01 12:34:56 Etc/GMT"`
    mutating func gmtDate(_ ms: Int64) {
        bytes.append(34)
        civilTime(ms, offsetSeconds: 0, dateTimeSeparator: 32)
        raw(" Etc/GMT\"")
    }

    /// `"2026-08-01 05:34:56 America/Los_Angeles"`
    mutating func pstDate(_ ms: Int64) {
        bytes.append(34)
        civilTime(ms, offsetSeconds: DemoCalendar.losAngelesOffsetSeconds(ms), dateTimeSeparator: 32)
        raw(" America/Los_Angeles\"")
    }

    /// ISO 8601 UTC without fractional seconds: `2026-08-01T12:34:56Z` (unquoted).
    mutating func isoInstant(_ ms: Int64) {
        civilTime(ms, offsetSeconds: 0, dateTimeSeparator: 84)
        bytes.append(90)
    }

    /// A CSV field, quoted per RFC 4180 only when it holds a comma, quote or line break.
    mutating func csvField(_ text: String) {
        var needsQuotes = false
        for b in text.utf8 where b == 44 || b == 34 || b == 10 || b == 13 { needsQuotes = true; break }
        if !needsQuotes { raw(text); return }
        bytes.append(34)
        for b in text.utf8 {
            if b == 34 { bytes.append(34) }
            bytes.append(b)
        }
        bytes.append(34)
    }
}

/// One output file written in large chunks.
final class DemoFileSink {
    private let handle: FileHandle
    private static let flushThreshold = 1 << 20

    init(url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw DemoError.cannotWrite(url.path)
        }
        handle = try FileHandle(forWritingTo: url)
    }

    /// Moves the writer's bytes to the file when enough have piled up.
    func drain(_ writer: inout DemoByteWriter, force: Bool = false) throws {
        if writer.bytes.count >= DemoFileSink.flushThreshold || (force && !writer.bytes.isEmpty) {
            try handle.write(contentsOf: writer.bytes)
            writer.bytes.removeAll(keepingCapacity: true)
        }
    }

    func close(_ writer: inout DemoByteWriter) throws {
        try drain(&writer, force: true)
        try handle.close()
    }
}
