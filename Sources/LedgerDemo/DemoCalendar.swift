// Civil-calendar arithmetic in plain integers (UTC), plus the America/Los_Angeles offset
// Apple prints in the `_pst` date fields. No Foundation Calendar: output must not depend on
// the platform's time-zone database.

import LedgerCore

enum DemoCalendar {
    static let msPerDay: Int64 = 86_400_000

    /// Days since 1970-01-01 for a proleptic Gregorian date (LedgerCore's `Day`).
    static func days(year: Int, month: Int, day: Int) -> Int {
        Day(year: year, month: month, day: day).daysSinceEpoch
    }

    /// The date of a day number (inverse of `days(year:month:day:)`).
    static func civil(_ dayNumber: Int) -> (year: Int, month: Int, day: Int) {
        Day(daysSinceEpoch: dayNumber).civil
    }

    /// 0 = Sunday ... 6 = Saturday.
    static func weekday(_ dayNumber: Int) -> Int {
        let w = (dayNumber + 4) % 7
        return w >= 0 ? w : w + 7
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        let next = month == 12 ? days(year: year + 1, month: 1, day: 1) : days(year: year, month: month + 1, day: 1)
        return next - days(year: year, month: month, day: 1)
    }

    /// Parses `YYYY-MM-DD` strictly; nil when malformed or not a real date.
    static func parseDay(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == 45, bytes[7] == 45 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let b = bytes[index]
                guard b >= 48, b <= 57 else { return nil }
                value = value * 10 + Int(b - 48)
            }
            return value
        }
        guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10),
              (1...12).contains(m), d >= 1, d <= daysInMonth(year: y, month: m) else { return nil }
        return days(year: y, month: m, day: d)
    }

    static func dayString(_ dayNumber: Int) -> String {
        let (y, m, d) = civil(dayNumber)
        return "\(pad4(y))-\(pad2(m))-\(pad2(d))"
    }

    static func monthString(year: Int, month: Int) -> String {
        return "\(pad4(year))-\(pad2(month))"
    }

    static func pad2(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
    static func pad4(_ v: Int) -> String {
        let s = "\(v)"
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    @inline(__always)
    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    static func dayNumber(ofMs ms: Int64) -> Int { Int(floorDiv(ms, msPerDay)) }

    static func startMs(ofDay dayNumber: Int) -> Int64 { Int64(dayNumber) * msPerDay }

    /// The same UTC time of day `months` calendar months later; the day is clamped to the
    /// length of the target month (Jan 31 + 1 month = Feb 28/29), as subscription periods do.
    static func addMonths(_ ms: Int64, _ months: Int) -> Int64 {
        let dayNumber = dayNumber(ofMs: ms)
        let timeOfDay = ms - startMs(ofDay: dayNumber)
        let (y, m, d) = civil(dayNumber)
        let total = y * 12 + (m - 1) + months
        let ny = total / 12, nm = total % 12 + 1
        let nd = min(d, daysInMonth(year: ny, month: nm))
        return startMs(ofDay: days(year: ny, month: nm, day: nd)) + timeOfDay
    }

    /// UTC offset of America/Los_Angeles in seconds at an instant: US rules since 2007,
    /// daylight time from the second Sunday of March 10:00 UTC to the first Sunday of
    /// November 09:00 UTC.
    static func losAngelesOffsetSeconds(_ ms: Int64) -> Int64 {
        let year = civil(dayNumber(ofMs: ms)).year
        let march1 = days(year: year, month: 3, day: 1)
        let secondSunday = march1 + (7 - weekday(march1)) % 7 + 7
        let november1 = days(year: year, month: 11, day: 1)
        let firstSunday = november1 + (7 - weekday(november1)) % 7
        let dstStart = startMs(ofDay: secondSunday) + 10 * 3_600_000
        let dstEnd = startMs(ofDay: firstSunday) + 9 * 3_600_000
        return (ms >= dstStart && ms < dstEnd) ? -7 * 3600 : -8 * 3600
    }
}
