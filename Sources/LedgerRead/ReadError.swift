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
