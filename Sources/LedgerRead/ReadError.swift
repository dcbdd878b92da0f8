import Foundation

/// An input problem that stops the run before anything is written (a missing or broken
/// config or rules file): the message names the path and, when known, the line.
public enum ReadError: Error, CustomStringConvertible, Equatable {
    case file(String, String)
    case line(String, Int, String)

    public var description: String {
        switch self {
        case let .file(path, message): return "\(path): \(message)"
        case let .line(path, line, message): return "\(path):\(line): \(message)"
        }
    }
}

extension ReadError {
    /// An input file (an inbox file, a rules file) that cannot be opened, `code` the system's
    /// errno: said with what to do. A link whose target is gone is said to be one, with its
    /// target ("No such file or directory" of a file the folder lists sent the reader looking
    /// for a file that was there); a file the night may not read, by whom.
    public static func unreadableInput(_ path: String, shown: String? = nil, code: Int32, inInbox: Bool = true) -> ReadError {
        let named = shown ?? path
        let why = String(cString: strerror(code))
        let away = inInbox ? ", or move it out of the inbox," : ""
        var st = stat()
        if code == ENOENT, lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFLNK {
            var target = [CChar](repeating: 0, count: 4097)
            let n = readlink(path, &target, 4096)
            let to = n > 0 ? String(decoding: target.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
            return .file(named, "is a link to \(to), which does not exist (a share not mounted, a file moved?): restore what it points to, or remove the link\(inInbox ? " (nothing was read from it)" : ""), and run again")
        }
        if code == ENOENT {
            return .file(named, "cannot be read: \(why): \(inInbox ? "it was listed in its folder and then gone; run again (a file still being moved in is read the next night)" : "restore it and run again")")
        }
        if code == EACCES || code == EPERM {
            return .file(named, "cannot be read: \(why) (the night runs as uid \(getuid())): make it readable by that user (chmod, chown, or the folder's default ACL)\(away) and run again")
        }
        return .file(named, "cannot be read: \(why): fix or replace the file\(away) and run again")
    }
}
