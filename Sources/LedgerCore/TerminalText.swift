#if canImport(Glibc)
import Glibc
#endif

/// Standard error, written with write(2): a stderr that is closed or cannot be written (a log
/// on a full disk) loses the text but never stops the process (FileHandle's write traps on a
/// failed write: a night's error became a crash with no message).
public enum StandardError {
    public static func write(_ text: String) {
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(2, base + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// Standard output flushed: nil when all of it was written, else why not (a full disk, a
    /// closed descriptor), for the command to fail on (data cut short must not exit 0).
    public static func flushStandardOutput() -> (why: String, readerGone: Bool)? {
        errno = 0
        let flushed = fflush(stdout) == 0
        let code = errno
        guard !flushed || ferror(stdout) != 0 else { return nil }
        // The error of this flush; one of an earlier write is not known any more (errno moved
        // on), but a pipe whose reader went away still says so (POLLERR on its write end).
        guard !flushed, code != 0 else {
            var p = pollfd(fd: 1, events: Int16(POLLOUT), revents: 0)
            // (Linux reports POLLERR there; other systems may say POLLHUP.)
            let gone = poll(&p, 1, 0) == 1 && p.revents & Int16(POLLERR | POLLHUP) != 0
            return (gone ? String(cString: strerror(EPIPE)) : "an earlier write to it failed", gone)
        }
        return (String(cString: strerror(code)), code == EPIPE)
    }
}

/// Text as a terminal may show it. Reasons and findings quote what they refuse as it was read,
/// and file names are whatever a sender chose: an escape sequence in either (`ESC [2J` clears
/// the screen, `ESC [1A` moves up a line) could hide lines of a run's summary, and a
/// right-to-left override (U+202E) reorders what follows it. Every control character but tab
/// (C0, DEL, C1) and every format character (bidi controls, zero-width spaces and joiners, the
/// byte order mark) is shown as `\u{1B}` instead.
public enum TerminalText {
    /// A character a terminal would act on or hide: C0 (tab included), DEL, C1, and format
    /// characters (bidi controls, zero-width spaces and joiners, the byte order mark).
    public static func needsEscape(_ u: Unicode.Scalar) -> Bool {
        u.value < 0x20 || (0x7F...0x9F).contains(u.value) || u.properties.generalCategory == .format
    }

    /// JSON text with the characters `needsEscape` names that JSON allows raw (DEL, C1, format
    /// characters: JSON escapes only C0) written `\uXXXX` (a pair above the basic plane): the
    /// same JSON, no such character reaching the terminal. They appear only inside strings.
    public static func jsonEscapingInvisible(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: { $0.value >= 0x7F && needsEscape($0) }) else { return json }
        var out = ""
        for u in json.unicodeScalars {
            guard u.value >= 0x7F, needsEscape(u) else { out.unicodeScalars.append(u); continue }
            for unit in String(u).utf16 { out += String(format: "\\u%04x", unit) }
        }
        return out
    }

    public static func visible(_ s: String) -> String {
        // Most text is printable ASCII: returned as it is.
        if s.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F || $0 == 0x09 }) { return s }
        var out = ""
        for u in s.unicodeScalars {
            if needsEscape(u) && u != "\t" {
                out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }
}

/// A path as a shell reads it back, for the commands the tool prints to paste: as it is when
/// it holds only characters no shell treats specially, else in single quotes (a quote in it
/// as `'\''`); what a terminal would not show raw goes through `TerminalText.visible` after.
public enum ShellWord {
    public static func quoted(_ s: String) -> String {
        let plain = !s.isEmpty && s.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "_./-+=:,@%".utf8.contains(b)
        }
        if plain { return s }
        // A character a terminal would not show raw (a control or format character, a tab):
        // bash's `$'...'`, each of its bytes as `\xHH`, so the word pastes back as it is.
        if s.unicodeScalars.contains(where: TerminalText.needsEscape) {
            var out = "$'"
            for u in s.unicodeScalars {
                if u == "\\" || u == "'" { out += "\\" + String(u) }
                else if TerminalText.needsEscape(u) { for b in String(u).utf8 { out += "\\x" + String(format: "%02X", b) } }
                else { out.unicodeScalars.append(u) }
            }
            return out + "'"
        }
        return "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}

/// A table for the terminal: a header, a rule under it, columns padded to their widest cell
/// (numbers to the right), every cell through `TerminalText.visible` (ids and paths come from
/// input files).
public enum TextTable {
    public static func render(_ rows: [[String]], header: [String], rightAligned: Set<Int>) -> String {
        let table = [header] + rows.map { $0.map(TerminalText.visible) }
        let widths = (0..<header.count).map { c in table.map { $0[c].count }.max() ?? 0 }
        return table.enumerated().map { i, row in
            row.enumerated().map { c, cell in
                let pad = String(repeating: " ", count: widths[c] - cell.count)
                return rightAligned.contains(c) ? pad + cell : c == row.count - 1 ? cell : cell + pad
            }.joined(separator: "  ") + (i == 0 ? "\n" + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") : "")
        }.joined(separator: "\n") + "\n"
    }
}
