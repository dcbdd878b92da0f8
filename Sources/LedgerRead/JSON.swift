import Foundation

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

    public var isArray: Bool { if case .array = self { return true } else { return false } }

    /// The value as a scalar (nil for null, a list or an object); `JSONReading` reads it.
    public var scalar: JSONScalar? {
        switch self {
        case .string(let s): return .string(s)
        case .number(let n): return .number(n)
        case .bool(let b): return .bool(b)
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

    /// Parses `text` as `parse` does (the same checks, the same errors) into a flat index of
    /// its values, which makes no string until one is asked for, and gives it to `body`: the
    /// index reads the text in place, so it is valid only there. A verifyReceipt response
    /// holds some eighty strings, of which a posting reads about ten: making them all (most
    /// are over 15 bytes, a heap allocation each) and freeing them was most of its parse.
    /// No `FlatJSON` or `FlatValue` may leave `body`: they point into the text.
    public static func withFlat<T>(_ text: Substring, _ body: (FlatJSON) throws -> T) throws -> T {
        func run(_ buf: UnsafeBufferPointer<UInt8>) throws -> T {
            // Node offsets are 32-bit (inputs are at most 512 MiB: a file read whole).
            guard buf.count < Int(Int32.max) else { throw JSONError(offset: 0, message: "text over 2 GiB") }
            var p = JSONParser(buf)
            p.flat = true
            // About one value per 16 bytes in a receipt; a huge text grows the index as it goes.
            p.nodes.reserveCapacity(min(buf.count / 16, 4096))
            _ = try p.parseDocument()
            return try body(FlatJSON(bytes: buf, nodes: p.nodes, decoded: p.decoded))
        }
        if let result = try text.utf8.withContiguousStorageIfAvailable(run) { return result }
        return try Array(text.utf8).withUnsafeBufferPointer(run)
    }

    private let b: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    /// In flat mode (`withFlat`) values are indexed in `nodes`, not built: the parse returns
    /// `.null`. Strings that are not plain ASCII without escapes are made and kept in `decoded`.
    private var flat = false
    private var nodes: [FlatJSON.Node] = []
    private var decoded: [String] = []
    /// The hashes of the member names of the objects being read, innermost last (`parseObject`).
    private var nameHashes: [UInt64] = []

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
        let end = i
        skipSpace()
        guard i == b.count else {
            // Documents one a line in a file read whole (a `.json` meant to be `.jsonl`).
            let another = b[end..<i].contains(0x0A) && (b[i] == UInt8(ascii: "{") || b[i] == UInt8(ascii: "["))
            // Two documents parted by a carriage return alone (classic Mac line ends): one line
            // to a JSON Lines reader, which ends lines with LF or CR LF.
            let loneCR = !another && b[end..<i].contains(0x0D) && !b[end..<i].contains(0x0A)
                && (b[i] == UInt8(ascii: "{") || b[i] == UInt8(ascii: "["))
            throw fail(another ? "unexpected text after the JSON value: another document starts on a later line (a .json file holds one document or an array; documents one a line go in a .jsonl file)"
                       : loneCR ? "unexpected text after the JSON value: another document follows a carriage return alone (a classic Mac line end: JSON Lines end each line with LF or CR LF; convert the file's line ends and send it again)"
                       : "unexpected text after the JSON value")
        }
        return v
    }

    private mutating func parseValue() throws -> JSONValue {
        guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
        if flat { try indexValue(); return .null }
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

    /// `parseValue` in flat mode: the same checks in the same order, the value indexed.
    private mutating func indexValue() throws {
        let start = i
        switch b[i] {
        case UInt8(ascii: "{"): _ = try parseObject()
        case UInt8(ascii: "["): _ = try parseArray()
        case UInt8(ascii: "\""): try indexString()
        case UInt8(ascii: "t"): try literal("true"); nodes.append(.init(kind: .true, start: start, end: i))
        case UInt8(ascii: "f"): try literal("false"); nodes.append(.init(kind: .false, start: start, end: i))
        case UInt8(ascii: "n"): try literal("null"); nodes.append(.init(kind: .null, start: start, end: i))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try scanNumber()
            nodes.append(.init(kind: .number, start: start, end: i))
        default: throw fail("unexpected character")
        }
    }

    /// A string in flat mode: plain ASCII without escapes is indexed where it is; any other
    /// is read again from its quote by `parseString` (its checks and errors) and kept.
    private mutating func indexString() throws {
        let quote = i
        var j = i + 1
        while j < b.count {
            let c = b[j]
            if c == UInt8(ascii: "\"") {
                nodes.append(.init(kind: .string, start: quote + 1, end: j))
                i = j + 1
                return
            }
            if c == UInt8(ascii: "\\") || c < 0x20 || c >= 0x80 { break }
            j += 1
        }
        let text = try parseString()
        decoded.append(text)
        nodes.append(.init(kind: .decoded, start: decoded.count - 1, end: 0))
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
        // Flat: the object's node, then each member's name and value; its count and the
        // index after its last value are set when it closes.
        let node = nodes.count
        if flat { nodes.append(.init(kind: .object, start: i, end: 0)) }
        i += 1
        var members: [(String, JSONValue)] = []
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; close(node, count: 0); return .object(members) }
        var count = 0
        // A name given twice in one object is refused: JSON leaves it open which value counts
        // (this parser took the first, most readers the last), so the backend and the ledger
        // could read different facts from one record ("environment" Production, then Sandbox).
        // Each name's 64-bit hash (FNV-1a over its text) goes on `nameHashes`, a stack shared by
        // the objects being read (no allocation per object); a name is compared with the names
        // before it only when its hash is among theirs. Past 32 members the object's hashes are
        // also kept in a set: an object of a million names (a 16 MiB line) is read in linear
        // time, not compared name by name (it stalled the night).
        let hashBase = nameHashes.count
        defer { nameHashes.removeSubrange(hashBase...) }
        var hashSet: Set<UInt64>? = nil
        while true {
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
            guard b[i] == UInt8(ascii: "\"") else { throw fail("expected a member name in quotes") }
            let nameAt = i
            var key = ""
            if flat { try indexString() } else { key = try parseString() }
            let hash: UInt64
            if flat {
                let n = nodes[nodes.count - 1]
                hash = n.kind == .decoded ? Self.nameHash(decoded[n.start].utf8) : Self.nameHash(UnsafeBufferPointer(rebasing: b[n.start..<n.end]))
            } else {
                hash = Self.nameHash(key.utf8)
            }
            let seenBefore: Bool
            if hashSet != nil {
                // Inserted in place (a copy of the set taken out first would copy it each time).
                seenBefore = !hashSet!.insert(hash).inserted
            } else {
                seenBefore = nameHashes[hashBase...].contains(hash)
                if count == 32 { hashSet = Set(nameHashes[hashBase...]).union([hash]) }
            }
            nameHashes.append(hash)
            // The same hash: the same name, unless two names share a hash (checked by their text).
            if seenBefore, flat ? flatNameRepeats(object: node, count: count) : members.contains(where: { $0.0 == key }) {
                let name = flat ? flatName(nodes.count - 1) : key
                throw JSONError(offset: nameAt, message: "the member \"\(name)\" is given twice in one object (JSON does not say which value counts, and readers differ)")
            }
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail(i < b.count ? "expected ':'" : "unexpected end of input (truncated JSON)") }
            i += 1
            skipSpace()
            let value = try parseValue()
            if !flat { members.append((key, value)) }
            count += 1
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "}") { i += 1; close(node, count: count); return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    /// A member name's hash for `parseObject`'s check of names given twice (FNV-1a, 64 bits,
    /// over its text: equal names, equal hashes).
    private static func nameHash<C: Sequence>(_ utf8: C) -> UInt64 where C.Element == UInt8 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in utf8 { h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return h
    }

    /// A name node's text (flat mode).
    private func flatName(_ k: Int) -> String {
        let n = nodes[k]
        return n.kind == .decoded ? decoded[n.start] : String(decoding: UnsafeBufferPointer(rebasing: b[n.start..<n.end]), as: UTF8.self)
    }

    /// Flat mode: whether the name just indexed (the last node) is one of the `count` names
    /// before it in the object at node `object`.
    private func flatNameRepeats(object: Int, count: Int) -> Bool {
        let name = flatName(nodes.count - 1)
        var k = object + 1
        for _ in 0..<count {
            if flatName(k) == name { return true }
            // Past the member's value: a closed object or array's `next`, else the node after.
            let v = nodes[k + 1]
            k = v.kind == .object || v.kind == .array ? v.next : k + 2
        }
        return false
    }

    /// Flat mode: an object's or array's member count and the index after its last value.
    private mutating func close(_ node: Int, count: Int) {
        guard flat else { return }
        nodes[node].count = count
        nodes[node].next = nodes.count
    }

    private mutating func parseArray() throws -> JSONValue {
        try enter(); defer { depth -= 1 }
        let node = nodes.count
        if flat { nodes.append(.init(kind: .array, start: i, end: 0)) }
        i += 1
        var items: [JSONValue] = []
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; close(node, count: 0); return .array(items) }
        var count = 0
        while true {
            skipSpace()
            let value = try parseValue()
            if !flat { items.append(value) }
            count += 1
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input (truncated JSON)") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "]") { i += 1; close(node, count: count); return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func parseNumber() throws -> String {
        let start = i
        try scanNumber()
        return String(decoding: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self)
    }

    /// Checks the number at `i` and moves past it.
    private mutating func scanNumber() throws {
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

/// A JSON scalar: a string, a number as written, or a boolean.
public enum JSONScalar {
    case string(String), number(String), bool(Bool)
}

/// What the readers of store JSON ask of a value: `JSONValue` and `FlatValue` answer alike,
/// reading their scalars the same way (below).
/// What a JSON object read where it does not belong looks like: said in its rejection, so the
/// file can be put where it belongs (another store's data, or another inbox folder's).
public enum ForeignData {
    public static func hint<J: JSONReading>(_ obj: J) -> String? {
        guard obj.isObject else { return nil }
        // The fields it has, named (a voided-purchases list has no packageName).
        let google = ["packageName", "purchaseToken", "voidedPurchases", "voidedPurchaseNotification", "subscriptionNotification",
                      "oneTimeProductNotification"].filter { obj[$0] != nil }
        if !google.isEmpty {
            return "it looks like Google Play data (\(google.prefix(2).joined(separator: ", "))): iapledger reads the App Store's only"
        }
        if obj["signedPayload"] != nil || obj["signedTransactionInfo"] != nil {
            return "it is App Store signed data: signed transactions and notifications go in inbox/signed/"
        }
        if obj["status"] != nil && (obj["receipt"] != nil || obj["latest_receipt_info"] != nil) {
            return "it is a verifyReceipt response: those go in inbox/receipts/"
        }
        return nil
    }
}

public protocol JSONReading {
    subscript(key: String) -> Self? { get }
    var isObject: Bool { get }
    var isArray: Bool { get }
    var isNull: Bool { get }
    var arrayValue: [Self]? { get }
    var scalar: JSONScalar? { get }
}

extension JSONReading {
    /// A scalar as text: strings as they are, numbers as written, booleans `true`/`false`.
    public var scalarText: String? {
        switch scalar {
        case .string(let s), .number(let s): return s
        case .bool(let b): return b ? "true" : "false"
        case nil: return nil
        }
    }

    /// A whole number (from a JSON integer or a string of digits) that fits in Int64.
    public var int64: Int64? {
        switch scalar {
        case .string(let n), .number(let n): return Int64(n)
        default: return nil
        }
    }

    /// A scalar as text; a list or object as `[...]` / `{...}` (so a wrong type is named, not
    /// taken for a missing field); nil for null.
    public var scalarOrShape: String? { isArray ? "[...]" : isObject ? "{...}" : scalarText }

    /// true/false, also written as a string (`"true"`, any case) or as 1/0 (a number or a string).
    public var bool: Bool? {
        switch scalar {
        case .bool(let b): return b
        case .string(let s):
            switch s.lowercased() {
            case "true", "1": return true
            case "false", "0": return false
            default: return nil
            }
        case .number(let n): return n == "1" ? true : n == "0" ? false : nil
        case nil: return nil
        }
    }
}

extension JSONValue: JSONReading {
    public var isNull: Bool { self == .null }
}
extension FlatValue: JSONReading {}

/// A JSON text parsed by `JSONParser.withFlat`: its values in document order, each object or
/// array followed by its members (an object's as name, value, name, value...), read from the
/// text in place. Valid only inside `withFlat`'s body.
public struct FlatJSON {
    struct Node {
        enum Kind: UInt8 { case object, array, string, decoded, number, `true`, `false`, null }
        var kind: Kind
        /// The text's byte range (a string's without its quotes), or for `decoded` its index
        /// in `decoded`. (32 bits each: a node takes 20 bytes, less than a parsed value.)
        private var start32: Int32
        private var end32: Int32
        /// An object's or array's member count, and the index after its last value.
        private var count32: Int32 = 0
        private var next32: Int32 = 0
        init(kind: Kind, start: Int, end: Int) {
            self.kind = kind
            start32 = Int32(truncatingIfNeeded: start)
            end32 = Int32(truncatingIfNeeded: end)
        }
        var start: Int { Int(start32) }
        var end: Int { Int(end32) }
        var count: Int {
            get { Int(count32) }
            set { count32 = Int32(truncatingIfNeeded: newValue) }
        }
        var next: Int {
            get { Int(next32) }
            set { next32 = Int32(truncatingIfNeeded: newValue) }
        }
    }
    let bytes: UnsafeBufferPointer<UInt8>
    let nodes: [Node]
    let decoded: [String]

    /// The document's value.
    public var root: FlatValue { FlatValue(doc: self, index: 0) }
}

/// One value of a `FlatJSON`, read as `JSONValue` reads its values (the same answers).
public struct FlatValue {
    let doc: FlatJSON
    let index: Int
    private var node: FlatJSON.Node { doc.nodes[index] }

    public var isObject: Bool { node.kind == .object }
    public var isArray: Bool { node.kind == .array }
    public var isNull: Bool { node.kind == .null }

    /// The index after value `v` and everything in it.
    private func after(_ v: Int) -> Int {
        let n = doc.nodes[v]
        return n.kind == .object || n.kind == .array ? n.next : v + 1
    }

    /// Whether string node `k` is `key` (compared as `String`s compare, as `JSONValue` does;
    /// a plain ASCII name is equal to an ASCII key exactly when its bytes are).
    private func isKey(_ k: Int, _ key: String, asciiKey: Bool) -> Bool {
        let n = doc.nodes[k]
        if n.kind == .decoded || !asciiKey { return text(n) == key }
        let count = n.end - n.start
        guard count == key.utf8.count else { return false }
        if count == 0 { return true }
        let bytes = doc.bytes.baseAddress! + n.start
        return key.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, bytes, count) == 0 }
            ?? key.utf8.elementsEqual(UnsafeBufferPointer(start: bytes, count: count))
    }

    /// The value of `key` in an object (the first, if repeated).
    public subscript(key: String) -> FlatValue? {
        let n = node
        guard n.kind == .object else { return nil }
        let asciiKey = key.utf8.allSatisfy { $0 < 0x80 }
        var k = index + 1
        for _ in 0..<n.count {
            if isKey(k, key, asciiKey: asciiKey) { return FlatValue(doc: doc, index: k + 1) }
            k = after(k + 1)
        }
        return nil
    }

    /// An array's items.
    public var arrayValue: [FlatValue]? {
        let n = node
        guard n.kind == .array else { return nil }
        var items: [FlatValue] = []
        items.reserveCapacity(n.count)
        var k = index + 1
        for _ in 0..<n.count {
            items.append(FlatValue(doc: doc, index: k))
            k = after(k)
        }
        return items
    }

    private func text(_ n: FlatJSON.Node) -> String {
        n.kind == .decoded ? doc.decoded[n.start]
            : String(decoding: UnsafeBufferPointer(rebasing: doc.bytes[n.start..<n.end]), as: UTF8.self)
    }

    /// The value as a scalar (nil for null, a list or an object); `JSONReading` reads it.
    public var scalar: JSONScalar? {
        let n = node
        switch n.kind {
        case .string, .decoded: return .string(text(n))
        case .number: return .number(text(n))
        case .true: return .bool(true)
        case .false: return .bool(false)
        default: return nil
        }
    }
}
