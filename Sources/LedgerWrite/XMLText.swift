import Foundation

/// Text as a workbook can hold it. A sheet is XML, and XML 1.0 has no place for U+FFFE or
/// U+FFFF (valid UTF-8, so an input file can carry them in any field): one such character in
/// one cell made the whole sheet unreadable (Excel offers to "repair" it by dropping its
/// contents; openpyxl refuses to open it). A NUL would end the C string libxlsxwriter is given
/// and cut the cell short. Each becomes U+FFFD, the replacement character, so the cell shows
/// that something was there. libxlsxwriter writes the other control characters as Excel's
/// `_xHHHH_` escapes itself.
enum XMLText {
    /// The most characters (UTF-16 code units, as Excel counts them) a cell holds: libxlsxwriter
    /// refuses a longer string, and the cell stayed empty.
    static let maxCellCharacters = 32_767

    /// `s` unchanged when it holds none of those characters (checked on its UTF-8 bytes, no
    /// copy) and fits in a cell; otherwise a copy with each replaced, cut to fit with a note
    /// of its full length.
    static func safe(_ s: String) -> String {
        var s = s
        if s.utf8.count > maxCellCharacters, s.utf16.count > maxCellCharacters {
            let note = "\u{2026} (cut here: \(s.utf16.count) characters in all; a cell holds \(maxCellCharacters))"
            let budget = maxCellCharacters - note.utf16.count
            var units = 0, end = s.startIndex
            for i in s.indices {
                units += s[i].utf16.count
                if units > budget { break }
                end = s.index(after: i)
            }
            s = String(s[..<end]) + note
        }
        let clean = s.withUTF8 { bytes -> Bool in
            // U+FFFE and U+FFFF are EF BF BE and EF BF BF in UTF-8.
            guard let base = bytes.baseAddress else { return true }
            let n = bytes.count
            if memchr(base, 0, n) != nil { return false }
            var i = 0
            while i < n, let p = memchr(base + i, 0xEF, n - i) {
                let at = base.distance(to: p.assumingMemoryBound(to: UInt8.self))
                if at + 2 < n && base[at + 1] == 0xBF && (base[at + 2] == 0xBE || base[at + 2] == 0xBF) { return false }
                i = at + 1
            }
            return true
        }
        if clean { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars {
            out.append(u.value == 0 || u.value == 0xFFFE || u.value == 0xFFFF ? "\u{FFFD}" : u)
        }
        return String(out)
    }
}
