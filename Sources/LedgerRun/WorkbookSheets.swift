import Foundation
import ZIPFoundation

/// What `trace` reads of a workbook on disk, from its `xl/workbook.xml` (nil when it cannot be
/// read as one): its sheet names, in order (trace names a sheet from the layouts as they are
/// now, and a workbook written before a layout renamed it has no such sheet), and the row of
/// each sheet's header (its autofilter's first row: a layout whose title or subtitle lines
/// changed since the file was written moves every row below it).
struct WorkbookSheets {
    var names: [String]
    /// The 1-based row of a sheet's table header, by sheet name (sheets with an autofilter).
    var headerRows: [String: Int]

    init?(_ url: URL) {
        guard let archive = try? Archive(url: url, accessMode: .read), let entry = archive["xl/workbook.xml"] else { return nil }
        var data = Data()
        guard (try? archive.extract(entry, consumer: { data.append($0) })) != nil else { return nil }
        let xml = String(decoding: data, as: UTF8.self)
        func unescaped<S: StringProtocol>(_ s: S) -> String {
            String(s).replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
                .replacingOccurrences(of: "&amp;", with: "&")
        }
        func attribute(_ tag: String, _ name: String) -> String? {
            tag.range(of: " \(name)=\"").map { String(tag[$0.upperBound...].prefix { $0 != "\"" }) }
        }
        var names: [String] = []
        var rest = xml[...]
        while let start = rest.range(of: "<sheet ") {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: ">") else { break }
            if let value = attribute(" " + rest[..<end], "name") { names.append(unescaped(value)) }
            rest = rest[end...]
        }
        // <definedName name="_xlnm._FilterDatabase" localSheetId="2" hidden="1">Journal!$A$4:$L$277</definedName>
        var headerRows: [String: Int] = [:]
        rest = xml[...]
        while let start = rest.range(of: "<definedName ") {
            rest = rest[start.upperBound...]
            guard let close = rest.firstIndex(of: ">"), let end = rest.range(of: "</definedName>") else { break }
            let tag = " " + rest[..<close]
            let value = rest[rest.index(after: close)..<end.lowerBound]
            rest = rest[end.upperBound...]
            guard attribute(tag, "name") == "_xlnm._FilterDatabase", let id = attribute(tag, "localSheetId").flatMap({ Int($0) }),
                  names.indices.contains(id), let bang = value.range(of: "!", options: .backwards) else { continue }
            // $A$4 (column letters, then the row), up to the range's colon.
            let first = value[bang.upperBound...].prefix { $0 != ":" }.filter { $0 != "$" }
            if let row = Int(first.drop { $0.isLetter }) { headerRows[names[id]] = row }
        }
        self.names = names
        self.headerRows = headerRows
    }
}
