import Foundation
import ZIPFoundation

/// A finished workbook, read back whole before it is renamed into place: libxlsxwriter
/// stages each part in a temp file and does not check its writes to them, so a disk that
/// filled up while it wrote gave a workbook with empty or cut-short parts (Excel cannot open
/// it), with no error. Checked here: every part inflates; each XML part ends with
/// the closing tag of the element it opens with; the package's own parts are there; and each
/// worksheet holds the rows written to it (`rowsPerSheet`, in the order the sheets were added),
/// so a hole in the middle of a sheet is found too.
public enum XLSXCheck {
    static let requiredParts = ["[Content_Types].xml", "_rels/.rels", "xl/workbook.xml", "xl/_rels/workbook.xml.rels",
                                "xl/styles.xml", "docProps/core.xml", "docProps/app.xml"]

    public static func check(path: String, rowsPerSheet: [Int]) throws {
        func fail(_ why: String) -> WriteError {
            WriteError(message: "\(path): the workbook came out incomplete (\(why)): is the disk full? Nothing was put in place")
        }
        let archive: Archive
        do { archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read) } catch {
            throw fail("it does not read as a ZIP package: \(error)")
        }
        var seen = Set<String>()
        var sheetRows: [Int: Int] = [:]
        for entry in archive where entry.type == .file {
            let name = entry.path
            seen.insert(name)
            var scan = PartScan(countRows: name.hasPrefix("xl/worksheets/sheet") && name.hasSuffix(".xml"))
            do {
                // (Not its CRC: it was taken of the bytes as packaged, cut short or not.)
                _ = try archive.extract(entry, bufferSize: 1 << 20, skipCRC32: true) { data in scan.add(data) }
            } catch {
                throw fail("its part \(name) does not inflate: \(error)")
            }
            guard name.hasSuffix(".xml") || name.hasSuffix(".rels") else { continue }
            guard let root = scan.rootName else { throw fail("its part \(name) is empty") }
            guard scan.endsWith("</\(root)>") || (scan.rootSelfClosed && scan.endsWith("/>")) else {
                throw fail("its part \(name) is cut short: it does not end with </\(root)>")
            }
            if scan.countRows, let n = Int(name.dropFirst("xl/worksheets/sheet".count).dropLast(".xml".count)) {
                sheetRows[n] = scan.rows
            }
        }
        for part in requiredParts where !seen.contains(part) { throw fail("its part \(part) is missing") }
        for (i, expected) in rowsPerSheet.enumerated() {
            guard let found = sheetRows[i + 1] else { throw fail("its sheet \(i + 1) is missing") }
            guard found == expected else {
                throw fail("its sheet \(i + 1) holds \(found) rows of the \(expected) written")
            }
        }
    }

    /// What is checked of a part, as it inflates: its first bytes (the root element's name),
    /// its last, and, for a worksheet, how many `<row ` it holds.
    struct PartScan {
        let countRows: Bool
        var rows = 0
        private var head: [UInt8] = []
        private var tail: [UInt8] = []
        /// The last bytes of the chunks before (fewer than the pattern's): a `<row ` across two
        /// chunks is counted where it ends.
        private var carry: [UInt8] = []
        private static let pattern: [UInt8] = Array("<row ".utf8)

        init(countRows: Bool) { self.countRows = countRows }

        mutating func add(_ data: Data) {
            guard !data.isEmpty else { return }
            data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
                let bytes = buffer.bindMemory(to: UInt8.self)
                if head.count < 512 { head.append(contentsOf: bytes.prefix(512 - head.count)) }
                tail.append(contentsOf: bytes.suffix(64))
                if tail.count > 64 { tail.removeFirst(tail.count - 64) }
                if countRows { count(bytes) }
            }
        }

        private mutating func count(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
            let p = Self.pattern
            // Across the boundary: the carried bytes and the first of this chunk.
            if !carry.isEmpty {
                let joined = carry + Array(bytes.prefix(p.count - 1))
                for start in 0..<carry.count where start + p.count <= joined.count && Array(joined[start..<(start + p.count)]) == p {
                    rows += 1
                }
            }
            // Within the chunk: `<` then `row `, by pointer (a part of 80 MB is 80 million bytes).
            var i = 0, n = 0
            let last = bytes.count - p.count
            while i <= last {
                if base[i] == 0x3C && base[i + 1] == 0x72 && base[i + 2] == 0x6F && base[i + 3] == 0x77 && base[i + 4] == 0x20 {
                    n += 1
                    i += 5
                } else {
                    i += 1
                }
            }
            rows += n
            carry = Array((carry + Array(bytes.suffix(p.count - 1))).suffix(p.count - 1))
        }

        /// The root element's name: the first tag that is no declaration, comment or doctype.
        var rootName: String? {
            var i = 0
            while i < head.count {
                guard head[i] == UInt8(ascii: "<") else { i += 1; continue }
                let next = i + 1 < head.count ? head[i + 1] : 0
                if next == UInt8(ascii: "?") || next == UInt8(ascii: "!") { i += 1; continue }
                var j = i + 1
                while j < head.count, !" \t\r\n/>".utf8.contains(head[j]) { j += 1 }
                return j > i + 1 ? String(decoding: head[(i + 1)..<j], as: UTF8.self) : nil
            }
            return nil
        }

        /// Whether the root element is empty (`<Relationships .../>`).
        var rootSelfClosed: Bool {
            guard let root = rootName,
                  let start = String(decoding: head, as: UTF8.self).range(of: "<" + root) else { return false }
            let rest = String(decoding: head, as: UTF8.self)[start.upperBound...]
            guard let close = rest.firstIndex(of: ">") else { return false }
            return close > rest.startIndex && rest[rest.index(before: close)] == "/"
        }

        func endsWith(_ text: String) -> Bool {
            var end = tail.count
            while end > 0, " \t\r\n".utf8.contains(tail[end - 1]) { end -= 1 }
            let t = Array(text.utf8)
            return end >= t.count && Array(tail[(end - t.count)..<end]) == t
        }
    }
}
