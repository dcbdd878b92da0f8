import XCTest
@testable import LedgerCore
@testable import LedgerReport

final class MoneyTests: XCTestCase {
    func testRoundHalfEvenTable() {
        // numerator, denominator, expected
        let cases: [(Int128, Int128, Int64)] = [
            (15, 10, 2), (25, 10, 2), (35, 10, 4), (45, 10, 4), (-15, 10, -2), (-25, 10, -2),
            (14, 10, 1), (16, 10, 2), (-14, 10, -1), (-16, 10, -2), (0, 7, 0), (7, 7, 1), (1, 3, 0), (2, 3, 1),
            (5, -10, 0), (15, -10, -2),
        ]
        for (n, d, want) in cases {
            XCTAssertEqual(roundHalfEven(n, d), want, "\(n)/\(d)")
        }
    }

    func testExactDecimalParsesWithoutFloatingPoint() {
        XCTAssertEqual(ExactDecimal("0.19"), ExactDecimal(mantissa: 19, scale: 2))
        XCTAssertEqual(ExactDecimal("1.990")?.description, "1.990")
        XCTAssertEqual(ExactDecimal("-3")?.mantissa, -3)
        XCTAssertEqual(ExactDecimal("0.10"), ExactDecimal("0.1"))
        XCTAssertEqual(Set([ExactDecimal("0.10")!, ExactDecimal("0.1")!]).count, 1)
        for bad in ["", "1e5", "1,000", "0.1.2", "abc", "-", "99999999999999999999"] {
            XCTAssertNil(ExactDecimal(bad), bad)
        }
    }

    func testMinorUnitsPerCurrencyExponent() {
        XCTAssertEqual(Currency.minorUnits(ofMajor: ExactDecimal("0.99")!, currency: "USD"), 99)
        XCTAssertEqual(Currency.minorUnits(ofMajor: ExactDecimal("160")!, currency: "JPY"), 160)
        XCTAssertEqual(Currency.minorUnits(ofMajor: ExactDecimal("0.300")!, currency: "KWD"), 300)
        XCTAssertEqual(Currency.minorUnits(ofMajor: ExactDecimal("1.5")!, currency: "BHD"), 1500)
        XCTAssertNil(Currency.minorUnits(ofMajor: ExactDecimal("0.999")!, currency: "USD"), "more decimals than USD has")
        XCTAssertNil(Currency.minorUnits(ofMajor: ExactDecimal("1.5")!, currency: "JPY"))
        XCTAssertEqual(Currency.format(minor: -1230, currency: "USD"), "-12.30")
        XCTAssertEqual(Currency.format(minor: 300, currency: "KWD"), "0.300")
        XCTAssertEqual(Currency.format(minor: 1500, currency: "KRW"), "1500")
        // ISO 4217's whole current list is known (a storefront in BIF stopped the night).
        XCTAssertEqual(Currency.exponent("BIF"), 0)
        XCTAssertEqual(Currency.exponent("MGA"), 2)
        XCTAssertEqual(Currency.exponent("MRU"), 2)
        XCTAssertNil(Currency.exponent("CLF"), "a unit of account of four decimals, no sales currency")
    }

    func testDaysAndMonths() {
        XCTAssertEqual(Day(iso: "1970-01-01")?.daysSinceEpoch, 0)
        XCTAssertEqual(Day(iso: "2026-11-21")?.description, "2026-11-21")
        XCTAssertEqual(Day(epochMilliseconds: -1).description, "1969-12-31")
        XCTAssertEqual(Day(epochMilliseconds: 1_599_185_002_000).description, "2020-09-04")
        XCTAssertNil(Day(iso: "2026-02-29"))
        XCTAssertNotNil(Day(iso: "2024-02-29"))
        XCTAssertEqual(Month(iso: "2026-12")!.next.description, "2027-01")
        XCTAssertEqual(Day(iso: "2026-09-30")!.month, Month(year: 2026, month: 9))
        for s in ["2000-02-29", "2100-12-31", "1999-01-01"] {
            XCTAssertEqual(Day(iso: s)!.description, s)
        }
        // Every day from 1900 to 2200 written byte by byte as the padded interpolation writes
        // it, and read back to the same day; years outside 0...9999 keep the general form.
        var day = Day(iso: "1900-01-01")!, count = 0
        while day.civil.year < 2200 {
            let c = day.civil
            XCTAssertEqual(day.description, "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))")
            XCTAssertEqual(Day(iso: day.description), day)
            XCTAssertEqual(day.month.description, "\(pad(c.year, 4))-\(pad(c.month, 2))")
            day = day + 1; count += 1
        }
        XCTAssertEqual(count, 109_573)
        XCTAssertEqual(Month(year: 10_000, month: 1).description, "10000-01")
        XCTAssertEqual(Month(year: 0, month: 7).description, "0000-07")
    }

    /// The bytes the journal export writes for an amount are `description`'s, for every
    /// scale, sign and size, Int64's ends included; and a cell's `appendPlain` is its `plain`.
    func testAnAmountsBytesAreItsDescription() {
        var values: [Int64] = [0, 1, -1, 5, -5, 9, 10, 99, 100, 101, -100, 12_345, -12_345, Int64.max, Int64.min, Int64.min + 1]
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2_000 {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            let magnitude = Int64(bitPattern: seed) >> Int(seed % 63)
            values.append(magnitude)
        }
        for v in values {
            for scale in [0, 1, 2, 3, 4, 8, 18] {
                let d = ExactDecimal(mantissa: v, scale: scale)
                var out: [UInt8] = []
                d.appendDescription(to: &out)
                XCTAssertEqual(String(decoding: out, as: UTF8.self), d.description, "\(v) scale \(scale)")
            }
        }
        let cells: [Cell] = [.empty, .text("plain"), .text("with, comma"), .integer(-42), .integer(Int64.min),
                             .money(minor: -5, decimals: 2), .money(minor: 123_456, decimals: 3), .money(minor: 7, decimals: 0),
                             .date(Day(iso: "2026-11-21")!)]
        for cell in cells {
            var out: [UInt8] = []
            cell.appendPlain(to: &out) { s, o in o.append(contentsOf: s.utf8) }
            XCTAssertEqual(String(decoding: out, as: UTF8.self), cell.plain)
        }
    }

}
