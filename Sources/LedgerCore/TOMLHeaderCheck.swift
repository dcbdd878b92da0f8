// A table header whose name does not begin as a key can (`[`, `[[`, `[.a]`, `[#]`, `[ = ]`,
// `[é]`) trips an assertion in the TOML parser (toml++, through TOMLKit) that aborts the
// process instead of giving an error: every command stopped with SIGABRT on one typo in
// `iapledger.toml` or a layout file. Such a header is found here first, and said as the
// parser says its other errors: the file's line and what it expected.

/// Finds the first table header (a line at the top level beginning with `[`, outside strings,
/// arrays and inline tables) whose name does not begin with a bare key character (ASCII
/// letters, digits, `_`, `-`), a quote or `]` (an empty name, which the parser refuses itself).
public enum TOMLHeaderCheck {
    /// The 1-based line of the first such header and what it holds after its bracket, or nil.
    public static func problem(in text: String) -> (line: Int, message: String)? {
        let bytes = Array(text.utf8)
        var i = 0, line = 1, depth = 0
        // A UTF-8 byte order mark (Notepad writes one) is not the first line's text.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
        var atLineStart = true
        enum Str { case none, basic, literal, multiBasic, multiLiteral }
        var str = Str.none
        func starts(_ s: String, at j: Int) -> Bool {
            let u = Array(s.utf8)
            return j + u.count <= bytes.count && Array(bytes[j..<j + u.count]) == u
        }
        /// At `i` in a multi-line string of `quote`: closed by three of them (up to two more
        /// before them are the string's own), else one byte on.
        func closesMultiLine(_ quote: UInt8) {
            var run = 0
            while i + run < bytes.count, bytes[i + run] == quote, run < 5 { run += 1 }
            if run >= 3 { str = .none; i += run } else { i += 1 }
        }
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x0A {
                line += 1; i += 1; atLineStart = true
                if str == .basic || str == .literal { str = .none }   // not valid TOML; the parser says so
                continue
            }
            switch str {
            case .multiBasic:
                if c == 0x5C {
                    if i + 1 < bytes.count, bytes[i + 1] == 0x0A { line += 1 }
                    i += 2; continue
                }
                closesMultiLine(0x22)
                continue
            case .multiLiteral:
                closesMultiLine(0x27)
                continue
            case .basic:
                if c == 0x5C { i += 2; continue }
                if c == 0x22 { str = .none }
                i += 1
                continue
            case .literal:
                if c == 0x27 { str = .none }
                i += 1
                continue
            case .none: break
            }
            if atLineStart && (c == 0x20 || c == 0x09 || c == 0x0D) { i += 1; continue }
            if atLineStart && depth == 0 && c == 0x5B {
                var j = i + 1
                if j < bytes.count && bytes[j] == 0x5B { j += 1 }
                while j < bytes.count && (bytes[j] == 0x20 || bytes[j] == 0x09) { j += 1 }
                let next: UInt8? = j < bytes.count ? bytes[j] : nil
                let bare: (UInt8) -> Bool = { b in
                    (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x2D
                }
                if let n = next, !(bare(n) || n == 0x22 || n == 0x27 || n == 0x5D) {
                    let end = bytes[i...].firstIndex(where: { $0 == 0x0A || $0 == 0x0D }) ?? bytes.count
                let rest = String(decoding: bytes[i..<end], as: UTF8.self)
                    return (line, "a table header names its table, [name] or [[name]] (letters, digits, _ and -, or a quoted name), but this line is \(rest.debugDescription)")
                }
                // The header itself: on to its end (a name in quotes may hold brackets).
                atLineStart = false
                i = j
                continue
            }
            atLineStart = false
            if c == 0x23 {   // a comment: to the line's end
                while i < bytes.count && bytes[i] != 0x0A { i += 1 }
                continue
            }
            if starts("\"\"\"", at: i) { str = .multiBasic; i += 3; continue }
            if starts("'''", at: i) { str = .multiLiteral; i += 3; continue }
            if c == 0x22 { str = .basic; i += 1; continue }
            if c == 0x27 { str = .literal; i += 1; continue }
            if c == 0x5B || c == 0x7B { depth += 1 } else if c == 0x5D || c == 0x7D { depth = max(0, depth - 1) }
            i += 1
        }
        return nil
    }
}
