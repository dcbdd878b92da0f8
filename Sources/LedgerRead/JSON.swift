/// A JSON value with numbers kept as their exact text.
///
/// Store data carries 16-digit ids, millisecond times and prices that must never pass
/// through binary floating point, and hostile input (deep nesting, huge numbers, invalid
/// UTF-8) must give an error, not a crash; so the ledger parses JSON itself rather than
/// through `JSONSerialization`, which turns numbers into `Double`-backed `NSNumber`s.
public enum JSONValue: Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The value of `key` in an object (the first, if repeated).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        for (k, v) in members where k == key { return v }
        return nil
    }

    public var objectMembers: [(String, JSONValue)]? { if case .object(let m) = self { return m } else { return nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var isObject: Bool { if case .object = self { return true } else { return false } }

    /// A scalar as text: strings as they are, numbers as written, booleans `true`/`false`.
    public var scalarText: String? {
        switch self {
        case .string(let s): return s
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        default: return nil
        }
    }

    /// A whole number (from a JSON integer or a string of digits) that fits in Int64.
    public var int64: Int64? {
        switch self {
        case .number(let n), .string(let n): return Int64(n)
        default: return nil
        }
    }

    /// A scalar as text; a list or object as `[...]` / `{...}` (so a wrong type is named, not
    /// taken for a missing field); nil for null.
    public var scalarOrShape: String? {
        switch self {
        case .array: return "[...]"
        case .object: return "{...}"
        default: return scalarText
        }
    }

    public var bool: Bool? {
        switch self {
        case .bool(let b): return b
        case .string(let s): return s == "true" ? true : s == "false" ? false : nil
        case .number(let n): return n == "1" ? true : n == "0" ? false : nil
        default: return nil
        }
    }
}

public struct JSONError: Error, CustomStringConvertible, Equatable {
    /// Byte offset in the text where parsing failed.
    public var offset: Int
    public var message: String
    public var description: String { "\(message) at byte \(offset)" }
}

/// A strict RFC 8259 parser with a nesting limit.
public struct JSONParser {
    public static let maxDepth = 64

    public static func parse(_ text: Substring) throws -> JSONValue {
        var result: JSONValue = .null
        var thrown: JSONError?
        text.utf8.withContiguousStorageIfAvailable { buf in
            var p = JSONParser(buf)
            do { result = try p.parseDocument() } catch let e as JSONError { thrown = e } catch {}
        } ?? {
            let bytes = Array(text.utf8)
            bytes.withUnsafeBufferPointer { buf in
                var p = JSONParser(buf)
                do { result = try p.parseDocument() } catch let e as JSONError { thrown = e } catch {}
            }
        }()
        if let e = thrown { throw e }
        return result
    }

    public static func parse(_ text: String) throws -> JSONValue { try parse(Substring(text)) }

    private let b: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0

    private init(_ b: UnsafeBufferPointer<UInt8>) { self.b = b }

    private func fail(_ m: String) -> JSONError { JSONError(offset: i, message: m) }

    private mutating func skipSpace() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    private mutating func parseDocument() throws -> JSONValue {
        if b.count >= 3, b[0] == 0xEF, b[1] == 0xBB, b[2] == 0xBF { i = 3 }
        skipSpace()
        guard i < b.count else { throw fail("empty input") }
        // What a JSON array cut off after a comma leaves for its next record.
        if b[i] == UInt8(ascii: ",") { throw fail("a ',' with no value after it: the array is cut off (truncated JSON)") }
        let v = try parseValue()
        skipSpace()
        guard i == b.count else { throw fail("unexpected text after the JSON value") }
        return v
    }

    private mutating func parseValue() throws -> JSONValue {
        guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
        switch b[i] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character")
        }
    }

    private mutating func literal(_ word: String) throws {
        let w = Array(word.utf8)
        guard i + w.count <= b.count else { throw fail("unexpected end of input (truncated JSON)") }
        for k in 0..<w.count where b[i + k] != w[k] { throw fail("invalid literal") }
        i += w.count
    }

    private mutating func enter() throws {
        depth += 1
        if depth > JSONParser.maxDepth { throw fail("nested deeper than \(JSONParser.maxDepth) levels") }
    }

    private mutating func parseObject() throws -> JSONValue {
        try enter(); defer { depth -= 1 }
        i += 1
        var members: [(String, JSONValue)] = []
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
        while true {
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
            guard b[i] == UInt8(ascii: "\"") else { throw fail("expected a member name in quotes") }
            let key = try parseString()
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail(i < b.count ? "expected ':'" : "unexpected end of input (truncated JSON)") }
            i += 1
            skipSpace()
            members.append((key, try parseValue()))
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    private mutating func parseArray() throws -> JSONValue {
        try enter(); defer { depth -= 1 }
        i += 1
        var items: [JSONValue] = []
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
        while true {
            skipSpace()
            items.append(try parseValue())
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func parseNumber() throws -> String {
        let start = i
        if b[i] == UInt8(ascii: "-") { i += 1 }
        func digits() -> Int { let s = i; while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }; return i - s }
        guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
        if b[i] == UInt8(ascii: "0") { i += 1 } else if digits() == 0 { throw fail("invalid number") }
        if i < b.count, b[i] == UInt8(ascii: ".") { i += 1; if digits() == 0 { throw fail("invalid number") } }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            if digits() == 0 { throw fail("invalid number") }
        }
        if i - start > 400 { throw fail("number longer than 400 characters") }
        return String(decoding: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self)
    }

    private mutating func parseString() throws -> String {
        i += 1
        let start = i
        // Fast path: no escapes (and, most often, only ASCII: no UTF-8 to validate).
        var high: UInt8 = 0
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { break }
            high |= c
            i += 1
        }
        if i < b.count, b[i] == UInt8(ascii: "\"") {
            let slice = UnsafeBufferPointer(rebasing: b[start..<i])
            i += 1
            if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
            guard let s = String(validating: slice, as: UTF8.self) else { i -= 1; throw fail("invalid UTF-8 in a string") }
            return s
        }
        var out = Array(UnsafeBufferPointer(rebasing: b[start..<i]))
        while true {
            guard i < b.count else { throw fail("unexpected end of input (unterminated string)") }
            let c = b[i]
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c < 0x20 { throw fail("control character in a string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < b.count else { throw fail("unexpected end of input (unterminated string)") }
            let e = b[i]; i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 1 < b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else { throw fail("unpaired surrogate") }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) { throw fail("unpaired surrogate") }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
        return s
    }

    private mutating func hex4() throws -> UInt32 {
        guard i + 4 <= b.count else { throw fail("unexpected end of input (truncated JSON)") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]; i += 1
            v <<= 4
            switch c {
            case 0x30...0x39: v |= UInt32(c - 0x30)
            case 0x41...0x46: v |= UInt32(c - 0x41 + 10)
            case 0x61...0x66: v |= UInt32(c - 0x61 + 10)
            default: throw fail("invalid \\u escape")
            }
        }
        return v
    }
}
