/// Text written to a CSV file that a spreadsheet will open.
public enum SpreadsheetText {
    /// Whether a text field would be taken for a formula by a spreadsheet opening the file:
    /// it begins with `=`, `+`, `-`, `@`, a tab or a carriage return (OWASP, "CSV Injection").
    /// Such a field is written with an apostrophe before it, which shows it as text.
    public static func readsAsFormula<S: Collection>(_ utf8: S) -> Bool where S.Element == UInt8 {
        guard let first = utf8.first else { return false }
        return first == 0x3D || first == 0x2B || first == 0x2D || first == 0x40 || first == 0x09 || first == 0x0D
    }
}
