/// An exact decimal number read from text (`"0.19"`, `"1.0823"`, `"-3"`): `mantissa / 10^scale`.
///
/// Rates (tax, commission, FX) and major-unit prices are read into this type and never into
/// binary floating point, so `0.19` stays exactly nineteen hundredths.
public struct ExactDecimal: Hashable, Sendable, CustomStringConvertible, Comparable {
    public let mantissa: Int64
    public let scale: Int

    public init(mantissa: Int64, scale: Int) {
        precondition(scale >= 0 && scale <= 18, "decimal scale out of range")
        self.mantissa = mantissa
        self.scale = scale
    }

    /// Parses plain decimal text: optional sign, digits, optional point and digits.
    /// Exponents, thousands separators and more than 18 decimals are refused.
    public init?(_ text: Substring) {
        var s = text.trimmingSpaces()
        var negative = false
        if s.first == "-" { negative = true; s = s.dropFirst() } else if s.first == "+" { s = s.dropFirst() }
        guard !s.isEmpty else { return nil }
        var mantissa: Int64 = 0
        var scale = 0
        var seenPoint = false
        var digits = 0
        for ch in s.utf8 {
            if ch == UInt8(ascii: ".") {
                if seenPoint { return nil }
                seenPoint = true
                continue
            }
            guard ch >= 48 && ch <= 57 else { return nil }
            let (m1, o1) = mantissa.multipliedReportingOverflow(by: 10)
            let (m2, o2) = m1.addingReportingOverflow(Int64(ch - 48))
            if o1 || o2 { return nil }
            mantissa = m2
            digits += 1
            if seenPoint { scale += 1 }
        }
        guard digits > 0, scale <= 18 else { return nil }
        self.mantissa = negative ? -mantissa : mantissa
        self.scale = scale
    }

    public init?(_ text: String) { self.init(Substring(text)) }

    public static let zero = ExactDecimal(mantissa: 0, scale: 0)
    public static let one = ExactDecimal(mantissa: 1, scale: 0)

    public var isZero: Bool { mantissa == 0 }
    public var isNegative: Bool { mantissa < 0 }

    /// `10^scale` as an `Int128`.
    public var denominator: Int128 { pow10(scale) }

    public static func < (a: ExactDecimal, b: ExactDecimal) -> Bool {
        let s = max(a.scale, b.scale)
        return Int128(a.mantissa) * pow10(s - a.scale) < Int128(b.mantissa) * pow10(s - b.scale)
    }

    public static func == (a: ExactDecimal, b: ExactDecimal) -> Bool {
        let s = max(a.scale, b.scale)
        return Int128(a.mantissa) * pow10(s - a.scale) == Int128(b.mantissa) * pow10(s - b.scale)
    }

    public func hash(into hasher: inout Hasher) {
        // Normalise trailing zeros so that 0.10 and 0.1 hash alike (they compare equal).
        var m = mantissa, s = scale
        while s > 0 && m % 10 == 0 { m /= 10; s -= 1 }
        hasher.combine(m); hasher.combine(s)
    }

    /// Appends `description`'s UTF-8 bytes to `out`, with no string made on the way (the
    /// journal export writes a million amounts or more).
    public func appendDescription(to out: inout [UInt8]) {
        if mantissa < 0 { out.append(0x2D) }
        var m = mantissa.magnitude
        // The digits, last first; at least scale + 1 of them (leading zeros: 0.05).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 40) { digits in
            var n = 0
            repeat {
                digits[n] = UInt8(0x30 + m % 10)
                m /= 10
                n += 1
            } while m > 0
            while n < scale + 1 { digits[n] = 0x30; n += 1 }
            while n > 0 {
                if n == scale { out.append(0x2E) }
                n -= 1
                out.append(digits[n])
            }
        }
    }

    /// The canonical text, with exactly `scale` decimals (`0.19`, `1.0823`, `120`).
    public var description: String {
        let negative = mantissa < 0
        let digits = String(mantissa.magnitude)
        guard scale > 0 else { return (negative ? "-" : "") + digits }
        let padded = String(repeating: "0", count: max(0, scale + 1 - digits.count)) + digits
        let cut = padded.index(padded.endIndex, offsetBy: -scale)
        return (negative ? "-" : "") + padded[..<cut] + "." + padded[cut...]
    }
}

/// `10^n` as an `Int128` (n in 0...36).
@inline(__always)
public func pow10(_ n: Int) -> Int128 {
    precondition(n >= 0 && n <= 36, "power of ten out of range")
    var r: Int128 = 1
    for _ in 0..<n { r *= 10 }
    return r
}

/// Divides `numerator` by `denominator` and rounds the quotient half to even.
///
/// This is the only rounding in the ledger: every amount that needs rounding is expressed
/// as one exact fraction and rounded once here (accounting.md, "Units and rounding").
public func roundHalfEven(_ numerator: Int128, _ denominator: Int128) -> Int64 {
    precondition(denominator != 0, "division by zero")
    var n = numerator, d = denominator
    if d < 0 { n = -n; d = -d }
    var q = n / d
    var r = n % d
    if r < 0 { q -= 1; r += d } // floor division: 0 <= r < d
    let twice = r * 2
    if twice > d || (twice == d && q % 2 != 0) { q += 1 }
    guard let result = Int64(exactly: q) else { preconditionFailure("rounded amount overflows Int64") }
    return result
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" || f == "\r" || f == "\n" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" || l == "\n" { s = s.dropLast() }
        return s
    }
}
