/// A calendar day in UTC, stored as days since 1970-01-01.
///
/// The ledger dates entries by UTC day and groups them by UTC month; a plain integer day
/// avoids time zones and `Calendar` entirely.
public struct Day: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    public let daysSinceEpoch: Int

    public init(daysSinceEpoch: Int) { self.daysSinceEpoch = daysSinceEpoch }

    /// The UTC day containing `ms` milliseconds since the epoch.
    public init(epochMilliseconds ms: Int64) {
        let perDay: Int64 = 86_400_000
        var d = ms / perDay
        if ms % perDay < 0 { d -= 1 }
        self.daysSinceEpoch = Int(d)
    }

    public init(year: Int, month: Int, day: Int) {
        // Howard Hinnant's days_from_civil.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        self.daysSinceEpoch = era * 146_097 + doe - 719_468
    }

    /// Parses `YYYY-MM-DD` (a real date: 2026-02-30 is refused).
    /// `YYYY-MM-DD`, ASCII digits, a real date. Read byte by byte: reports parse a date per row.
    public init?(iso text: Substring) {
        var y = 0, m = 0, d = 0, i = 0
        for c in text.utf8 {
            switch i {
            case 4, 7:
                guard c == 0x2D else { return nil }
            case 0..<10:
                guard c >= 0x30 && c <= 0x39 else { return nil }
                let v = Int(c &- 0x30)
                if i < 4 { y = y * 10 + v } else if i < 7 { m = m * 10 + v } else { d = d * 10 + v }
            default:
                return nil
            }
            i += 1
        }
        guard i == 10, (1...12).contains(m), d >= 1, d <= Day.daysIn(year: y, month: m) else { return nil }
        self.init(year: y, month: m, day: d)
    }

    public init?(iso text: String) { self.init(iso: Substring(text)) }

    public var civil: (year: Int, month: Int, day: Int) {
        // Howard Hinnant's civil_from_days.
        let z = daysSinceEpoch + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }

    public var month: Month { let c = civil; return Month(year: c.year, month: c.month) }

    /// Milliseconds since the epoch at 00:00 UTC of this day.
    public var epochMilliseconds: Int64 { Int64(daysSinceEpoch) * 86_400_000 }

    public var description: String {
        let c = civil
        // YYYY-MM-DD written byte by byte (a posting night formats a few million dates).
        guard (0...9999).contains(c.year) else { return "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))" }
        return String(unsafeUninitializedCapacity: 10) { b in
            writeYearMonth(c.year, c.month, into: b)
            b[7] = 0x2D; b[8] = UInt8(0x30 + c.day / 10); b[9] = UInt8(0x30 + c.day % 10)
            return 10
        }
    }

    /// An instant as ISO 8601 in UTC, to the millisecond when it has one
    /// (`2026-11-03T23:59:59Z`, `2026-11-03T10:00:00.250Z`).
    public static func instantText(_ ms: Int64) -> String {
        let day = Day(epochMilliseconds: ms)
        let inDay = ms - Int64(day.daysSinceEpoch) * 86_400_000
        let s = inDay / 1000, milli = inDay % 1000
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let fraction = milli == 0 ? "" : "." + String(String(milli + 1000).dropFirst())
        return "\(day)T\(two(s / 3600)):\(two(s / 60 % 60)):\(two(s % 60))\(fraction)Z"
    }

    public static func < (a: Day, b: Day) -> Bool { a.daysSinceEpoch < b.daysSinceEpoch }
    public static func + (a: Day, n: Int) -> Day { Day(daysSinceEpoch: a.daysSinceEpoch + n) }
    public static func - (a: Day, b: Day) -> Int { a.daysSinceEpoch - b.daysSinceEpoch }

    public static func daysIn(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    public init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let d = Day(iso: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a YYYY-MM-DD date: \(text)"))
        }
        self = d
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// A calendar month (UTC), the ledger's period.
public struct Month: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let year: Int
    public let month: Int

    public init(year: Int, month: Int) { self.year = year; self.month = month }

    /// Parses `YYYY-MM`.
    public init?(iso text: Substring) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 4, parts[1].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), (1...12).contains(m) else { return nil }
        self.init(year: y, month: m)
    }

    public init?(iso text: String) { self.init(iso: Substring(text)) }

    public var firstDay: Day { Day(year: year, month: month, day: 1) }
    public var lastDay: Day { Day(year: year, month: month, day: Day.daysIn(year: year, month: month)) }
    public var next: Month { month == 12 ? Month(year: year + 1, month: 1) : Month(year: year, month: month + 1) }
    public var previous: Month { month == 1 ? Month(year: year - 1, month: 12) : Month(year: year, month: month - 1) }

    public var description: String {
        guard (0...9999).contains(year), (1...12).contains(month) else { return "\(pad(year, 4))-\(pad(month, 2))" }
        return String(unsafeUninitializedCapacity: 7) { b in writeYearMonth(year, month, into: b); return 7 }
    }

    public static func < (a: Month, b: Month) -> Bool { (a.year, a.month) < (b.year, b.month) }
}

/// Writes `YYYY-MM` (a year in 0...9999, a month in 1...12) into the first 7 bytes of `b`.
@inline(__always)
func writeYearMonth(_ year: Int, _ month: Int, into b: UnsafeMutableBufferPointer<UInt8>) {
    b[0] = UInt8(0x30 + year / 1000); b[1] = UInt8(0x30 + year / 100 % 10)
    b[2] = UInt8(0x30 + year / 10 % 10); b[3] = UInt8(0x30 + year % 10)
    b[4] = 0x2D; b[5] = UInt8(0x30 + month / 10); b[6] = UInt8(0x30 + month % 10)
}

@inline(__always)
func pad(_ n: Int, _ width: Int) -> String {
    let s = String(n)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}
