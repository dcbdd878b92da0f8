import Foundation
import ZIPFoundation

/// The sheet names of a workbook on disk, in order, read from its `xl/workbook.xml` (nil when
/// it cannot be read as one): `trace` names a sheet from the layouts as they are now, and a
/// workbook written before a layout renamed it has no such sheet.
enum WorkbookSheets {
    static func names(_ url: URL) -> [String]? {
        guard let archive = try? Archive(url: url, accessMode: .read), let entry = archive["xl/workbook.xml"] else { return nil }
        var data = Data()
        guard (try? archive.extract(entry, consumer: { data.append($0) })) != nil else { return nil }
        let xml = String(decoding: data, as: UTF8.self)
        var names: [String] = []
        var rest = xml[...]
        while let start = rest.range(of: "<sheet ") {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: ">") else { break }
            let tag = rest[..<end]
            if let n = tag.range(of: "name=\"") {
                let value = tag[n.upperBound...].prefix { $0 != "\"" }
                names.append(String(value).replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                    .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
                    .replacingOccurrences(of: "&amp;", with: "&"))
            }
            rest = rest[end...]
        }
        return names
    }
}
