import Foundation

/// Where a file stops being UTF-8: its first byte that begins no valid sequence (a stray
/// continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a sequence cut
/// short), by line and byte offset, so that a file refused whole names the place to look.
public enum UTF8Position {
    /// The 1-based line and 0-based byte offset of the first invalid byte, or nil when all of
    /// `bytes` is UTF-8.
    public static func firstInvalid<C: Collection>(in bytes: C) -> (line: Int, offset: Int)? where C.Element == UInt8, C.Index == Int {
        var i = bytes.startIndex, line = 1
        let end = bytes.endIndex
        while i < end {
            let b = bytes[i]
            if b < 0x80 {
                if b == 0x0A { line += 1 }
                i += 1
                continue
            }
            // The length of the sequence, and the range its second byte may take (overlongs,
            // surrogates and past U+10FFFF refused there), as the Unicode standard's table 3-7.
            let n: Int, lo: UInt8, hi: UInt8
            switch b {
            case 0xC2...0xDF: (n, lo, hi) = (2, 0x80, 0xBF)
            case 0xE0: (n, lo, hi) = (3, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (n, lo, hi) = (3, 0x80, 0xBF)
            case 0xED: (n, lo, hi) = (3, 0x80, 0x9F)
            case 0xF0: (n, lo, hi) = (4, 0x90, 0xBF)
            case 0xF1...0xF3: (n, lo, hi) = (4, 0x80, 0xBF)
            case 0xF4: (n, lo, hi) = (4, 0x80, 0x8F)
            default: return (line, i - bytes.startIndex)
            }
            guard i + n <= end, bytes[i + 1] >= lo, bytes[i + 1] <= hi else { return (line, i - bytes.startIndex) }
            for k in 2..<max(2, n) where bytes[i + k] < 0x80 || bytes[i + k] > 0xBF { return (line, i - bytes.startIndex) }
            i += n
        }
        return nil
    }
}
