/// Bounds on what store data can plausibly hold. A value outside them is a broken record
/// (kept as a finding or rejected, with the reason), never posted, and never let near
/// arithmetic that could overflow.
public enum StoreBounds {
    /// 2008-01-01T00:00:00Z (the App Store opened in July 2008).
    public static let earliestMs: Int64 = 1_199_145_600_000
    /// 2100-01-01T00:00:00Z, exclusive.
    public static let endMs: Int64 = 4_102_444_800_000

    /// Inside 2008-2099.
    public static func plausibleDate(_ ms: Int64) -> Bool { ms >= earliestMs && ms < endMs }

    /// An identifier (transaction, product, order, account) as stores and backends write them:
    /// 1 to 256 bytes, no control characters (C0, DEL, C1: SQLite text ends at a NUL, so an id
    /// holding one would not read back as itself), no non-characters (U+FDD0 to U+FDEF and
    /// the last two code points of every plane: U+FFFE and U+FFFF cannot be written into a
    /// workbook's XML at all), no format characters (zero-width spaces and joiners, bidi
    /// controls, the byte order mark: `"9920000000000002\u{200B}"` looks like a real id and
    /// would be another transaction), no spaces but the plain one (U+0020), which is not at
    /// either end (a no-break or ideographic space, a line separator: `"2000…\u{00A0}"` too
    /// looked like the real id, and was posted as another sale of the same purchase), and no
    /// other character Unicode says shows as nothing (default-ignorable: the Hangul fillers,
    /// the combining grapheme joiner).
    public static func plausibleIdentifier(_ s: String) -> Bool {
        // Blank, or with spaces around it (" 2000…" is another transaction than "2000…", and
        // an order's field is read trimmed): no store writes one.
        !s.isEmpty && s.utf8.first != 0x20 && s.utf8.last != 0x20 && s.utf8.count <= 256 && !s.unicodeScalars.contains { u in
            let v = u.value
            if v >= 0x20 && v < 0x7F { return false }
            return implausible(u)
        }
    }

    /// Whether ids are judged as versions before 2026-11-28 judged them: spaces other than the
    /// plain one and characters that show as nothing taken (and an orders field trimmed of every
    /// space). `verify` reads again by them a record the rules now refuse: an earlier build took
    /// it (an account id with a no-break space), and it is not said to be changed since it was
    /// read. Nights refuse such ids.
    nonisolated(unsafe) public static var earlierIdentifierRules = false

    /// `body` with ids judged as earlier versions judged them (`earlierIdentifierRules`).
    public static func withEarlierIdentifierRules<T>(_ body: () throws -> T) rethrows -> T {
        let before = earlierIdentifierRules
        earlierIdentifierRules = true
        defer { earlierIdentifierRules = before }
        return try body()
    }

    /// A scalar no identifier holds (ASCII's printable ones aside).
    static func implausible(_ u: Unicode.Scalar) -> Bool { kind(of: u) != nil }

    /// What kind of scalar no identifier holds `u` is, or nil when an id may hold it.
    static func kind(of u: Unicode.Scalar) -> String? {
        let v = u.value
        if v < 0x20 || (v >= 0x7F && v <= 0x9F) { return "a control character" }
        if (v >= 0xFDD0 && v <= 0xFDEF) || v & 0xFFFE == 0xFFFE { return "a non-character" }
        if u.properties.generalCategory == .format { return "a format character (zero-width, joiner, bidi control or byte order mark)" }
        guard v > 0x7F, !earlierIdentifierRules else { return nil }
        if u.properties.isWhitespace { return "a space other than the plain one" }
        return u.properties.isDefaultIgnorableCodePoint ? "a character that shows as nothing (a filler or joiner)" : nil
    }

    /// What makes `id` no identifier (`plausibleIdentifier`), said: the first fault found.
    public static func identifierFault(_ id: String) -> String {
        if id.isEmpty { return "is blank" }
        if id.utf8.count > 256 { return "is over 256 bytes (\(id.utf8.count))" }
        for (i, u) in id.unicodeScalars.enumerated() {
            guard let kind = kind(of: u) else { continue }
            let hex = String(u.value, radix: 16, uppercase: true)
            return "holds \(kind), U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex), at character \(i + 1)"
        }
        return "has spaces around it"
    }

    /// Why an identifier field is refused by `plausibleIdentifier`, quoting it (up to 64
    /// characters, then how many it has in all) and saying its fault: the field on its own
    /// (`name "…" holds …`), or a field of `transaction` (`transaction T has name "…": …`).
    public static func implausibleIdentifier(_ name: String, _ id: String, of transaction: String? = nil) -> String {
        let quoted = quotedIdentifier(id)
        let fault = identifierFault(id)
        guard let transaction else { return "\(name) \(quoted) \(fault)" }
        return "transaction \(transaction) has \(name) \(quoted): it \(fault)"
    }

    /// `id` quoted as Swift writes a string, what an id may not hold as `\u{…}` (a no-break
    /// space or a zero-width one would not show), its first 64 characters, then how many it has.
    public static func quotedIdentifier(_ id: String) -> String {
        let count = id.unicodeScalars.count
        var quoted = "\""
        for u in id.unicodeScalars.prefix(64) {
            if u == "\"" || u == "\\" { quoted += "\\" + String(u) }
            else if !implausible(u) { quoted.unicodeScalars.append(u) }
            else { quoted += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}" }
        }
        return quoted + "\"" + (count > 64 ? "\u{2026} (\(count) characters in all)" : "")
    }

    /// An id as lines for people show it: as it is when it is one a store writes, else quoted
    /// (`quotedIdentifier`): a refused id of 10,000 characters made a summary line of as many,
    /// and one ending in a no-break space read as the valid id it imitates.
    public static func shownIdentifier(_ id: String) -> String {
        plausibleIdentifier(id) ? id : quotedIdentifier(id)
    }

    /// The longest reason or finding message kept, in characters. A reason quotes what it
    /// refuses (a bundle id, an environment, a status), and a record can hold a value of
    /// megabytes: such a reason filled the run's summary with one line of 100,000 characters
    /// and was too long for a workbook cell (Excel's limit is 32,767), where it showed as
    /// nothing. The record's text is kept whole in the ledger (`trace --source-text`).
    public static let maxMessageCharacters = 1_000

    /// `message` as kept: whole when it is at most `maxMessageCharacters` long, else its start
    /// and how long it was.
    /// Counted in Unicode scalars (a character of one letter and 100,000 combining marks is
    /// 100,001 of them).
    public static func boundedMessage(_ message: String) -> String {
        // A NUL (in a value the message quotes: a bundle id, a header) ended the text as SQLite
        // hands it back, the rest of the message lost: kept as `\u{0}`, as the terminal shows it.
        let message = message.utf8.contains(0) ? message.replacingOccurrences(of: "\u{0}", with: "\\u{0}") : message
        guard message.utf8.count > maxMessageCharacters else { return message }
        let count = message.unicodeScalars.count
        guard count > maxMessageCharacters else { return message }
        var kept = String.UnicodeScalarView()
        kept.append(contentsOf: message.unicodeScalars.prefix(maxMessageCharacters - 60))
        return String(kept) + "\u{2026} (cut here: \(count) characters in all)"
    }

    /// Why a transaction whose refund (cancellation or revocation) is dated before its purchase
    /// is not taken: a refund entry would land in a month before its sale, or before the
    /// books' first sale of it.
    public static func refundedBeforeBought(_ id: String, refundMs: Int64, purchaseMs: Int64) -> String {
        let r = Day(epochMilliseconds: refundMs), p = Day(epochMilliseconds: purchaseMs)
        return "transaction \(id) was refunded before it was bought: refund dated \(r), purchase \(p)"
            + (r == p ? " (\((purchaseMs - refundMs + 999) / 1000) s earlier)" : "")
    }

    /// The largest signed price accepted, in milliunits: 10 billion units of any currency, far
    /// above any App Store price, and small enough that no figure or sum of figures derived from
    /// it can overflow 64-bit minor units.
    public static let maxPriceMilliunits: Int64 = 10_000_000_000_000
}
