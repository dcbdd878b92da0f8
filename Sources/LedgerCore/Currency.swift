/// ISO 4217 currencies and their minor-unit exponents.
public enum Currency {
    /// Minor-unit exponents of the currencies the App Store sells in (ISO 4217), plus a few
    /// common others. Not inferred from text: financial reports print JPY with `.00`.
    public static let exponents: [String: Int] = [
        "AED": 2, "AUD": 2, "BGN": 2, "BHD": 3, "BRL": 2, "CAD": 2, "CHF": 2, "CLP": 0,
        "CNY": 2, "COP": 2, "CZK": 2, "DKK": 2, "EGP": 2, "EUR": 2, "GBP": 2, "GHS": 2,
        "HKD": 2, "HUF": 2, "IDR": 2, "ILS": 2, "INR": 2, "ISK": 0, "JOD": 3, "JPY": 0,
        "KES": 2, "KRW": 0, "KWD": 3, "KZT": 2, "MXN": 2, "MYR": 2, "NGN": 2, "NOK": 2,
        "NZD": 2, "OMR": 3, "PEN": 2, "PHP": 2, "PKR": 2, "PLN": 2, "QAR": 2, "RON": 2,
        "RUB": 2, "SAR": 2, "SEK": 2, "SGD": 2, "THB": 2, "TND": 3, "TRY": 2, "TWD": 2,
        "TZS": 2, "UAH": 2, "UGX": 0, "USD": 2, "VND": 0, "ZAR": 2, "XAF": 0, "XOF": 0,
        "PYG": 0, "RWF": 0, "KMF": 0, "DJF": 0, "GNF": 0, "VUV": 0, "XPF": 0, "IQD": 3,
        "LYD": 3, "ARS": 2, "BDT": 2, "LKR": 2, "MAD": 2, "DZD": 2, "AZN": 2, "GEL": 2,
        "AMD": 2, "BYN": 2, "MNT": 2, "MOP": 2, "BOB": 2, "CRC": 2, "DOP": 2, "GTQ": 2,
        "HNL": 2, "NIO": 2, "PAB": 2, "UYU": 2, "TTD": 2, "JMD": 2, "BWP": 2, "MUR": 2,
        "NAD": 2, "ZMW": 2, "MZN": 2, "AOA": 2, "ETB": 2, "XCD": 2, "BND": 2, "KHR": 2,
        "LAK": 2, "MMK": 2, "NPR": 2, "UZS": 2, "TJS": 2, "KGS": 2, "MDL": 2, "MKD": 2,
        "ALL": 2, "RSD": 2, "BAM": 2, "HRK": 2, "FJD": 2, "PGK": 2, "WST": 2, "TOP": 2,
        "SBD": 2, "MVR": 2, "SCR": 2, "CVE": 2, "GMD": 2, "LRD": 2, "SLL": 2, "MWK": 2,
        // The rest of ISO 4217's current list (BIF, MGA and MRU stopped a night whose rules
        // named them). Not the funds codes and units of account (CLF, UYW: four decimals).
        "AFN": 2, "ANG": 2, "AWG": 2, "BBD": 2, "BIF": 0, "BMD": 2, "BSD": 2, "BTN": 2,
        "BZD": 2, "CDF": 2, "CUP": 2, "ERN": 2, "FKP": 2, "GIP": 2, "GYD": 2, "HTG": 2,
        "IRR": 2, "KPW": 2, "KYD": 2, "LBP": 2, "LSL": 2, "MGA": 2, "MRU": 2, "SDG": 2,
        "SHP": 2, "SLE": 2, "SOS": 2, "SRD": 2, "SSP": 2, "STN": 2, "SVC": 2, "SYP": 2,
        "SZL": 2, "TMT": 2, "VES": 2, "XCG": 2, "YER": 2, "ZWG": 2, "ZWL": 2,
    ]

    /// The exponent of `code`, or nil for a currency iapledger does not know (upper case only:
    /// a signed record's `eur` is read through `isoUppercased` where it is booked).
    public static func exponent(_ code: String) -> Int? { exponents[code] }

    /// Whether `code` looks like an ISO 4217 code and is known.
    public static func isKnown(_ code: String) -> Bool { exponents[code] != nil }

    /// An ISO code as the rules and Apple write it: its ASCII letters in upper case.
    public static func isoUppercased(_ code: String) -> String {
        guard code.utf8.contains(where: { $0 >= 0x61 && $0 <= 0x7A }) else { return code }
        return String(decoding: code.utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
    }

    /// Converts a major-unit decimal (`"1.990"`, `"120"`) to minor units of `code`.
    /// Nil when the text has more decimals than the currency allows (a price of `0.999 USD`
    /// is a rule error to report, not something to round silently).
    public static func minorUnits(ofMajor value: ExactDecimal, currency code: String) -> Int64? {
        guard let e = exponent(code), value.scale <= e else { return nil }
        return Int64(exactly: Int128(value.mantissa) * pow10(e - value.scale))
    }

    /// An App Store Server API price in milliunits as minor units of a currency with `exponent`
    /// decimals, half to even (accounting.md: `minor = price * 10^exponent / 1000`).
    public static func minorUnits(milliunits: Int64, exponent: Int) -> Int64 {
        roundHalfEven(Int128(milliunits) * pow10(exponent), 1000)
    }

    /// Formats minor units as major-unit text with the currency's decimals (`-12.30`, `1500`, `0.300`).
    public static func format(minor: Int64, currency code: String) -> String {
        ExactDecimal(mantissa: minor, scale: exponent(code) ?? 2).description
    }
}
