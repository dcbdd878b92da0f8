import Foundation

/// The running program's GNU build ID (`NT_GNU_BUILD_ID`, what `file` and `readelf -n` show),
/// as hex: it changes with every build whose code changed, where the version number may not.
/// A night records it (`run_input`, `iapledger build`), so that the next night knows whether
/// the program that decided the sales still waiting for a rule is the one running now. Read
/// from the program's own ELF notes (a few kilobytes); nil where there is none (not Linux,
/// or a program linked without one).
public enum BuildIdentity {
    public static let current: String? = read(path: "/proc/self/exe")

    static func read(path: String) -> String? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        func bytes(at offset: UInt64, _ count: Int) -> [UInt8]? {
            guard count > 0, count < 1 << 20, (try? file.seek(toOffset: offset)) != nil,
                  let data = try? file.read(upToCount: count), data.count == count else { return nil }
            return [UInt8](data)
        }
        func integer(_ b: [UInt8], _ at: Int, _ size: Int) -> UInt64 {
            (0..<size).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) }
        }
        // A 64-bit little-endian ELF file: its program headers, each PT_NOTE segment's notes.
        guard let header = bytes(at: 0, 64), header[0..<4] == [0x7F, 0x45, 0x4C, 0x46], header[4] == 2, header[5] == 1 else { return nil }
        let phoff = integer(header, 0x20, 8), phentsize = Int(integer(header, 0x36, 2)), phnum = Int(integer(header, 0x38, 2))
        guard phentsize >= 56, phnum > 0, phnum < 256, let table = bytes(at: phoff, phentsize * phnum) else { return nil }
        for i in 0..<phnum {
            let at = i * phentsize
            guard integer(table, at, 4) == 4 else { continue }   // PT_NOTE
            let offset = integer(table, at + 0x08, 8), size = Int(integer(table, at + 0x20, 8))
            guard let notes = bytes(at: offset, size) else { continue }
            var p = 0
            while p + 12 <= notes.count {
                let namesz = Int(integer(notes, p, 4)), descsz = Int(integer(notes, p + 4, 4)), type = integer(notes, p + 8, 4)
                let name = p + 12, desc = name + (namesz + 3) / 4 * 4
                guard desc + descsz <= notes.count else { break }
                if type == 3, namesz == 4, notes[name..<name + 4] == [0x47, 0x4E, 0x55, 0x00], descsz > 0 {   // NT_GNU_BUILD_ID, "GNU"
                    return notes[desc..<desc + descsz].map { String(format: "%02x", $0) }.joined()
                }
                p = desc + (descsz + 3) / 4 * 4
            }
        }
        return nil
    }
}
