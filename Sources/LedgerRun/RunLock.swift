import Foundation

/// An exclusive lock on the workspace for the length of a run, so two runs never interleave.
/// Held with `flock`, which the kernel releases if the process dies.
public final class RunLock {
    private let fd: Int32
    private var released = false

    public init(url: URL) throws {
        fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw RunLockError(message: "\(url.path): cannot create the run lock: \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            close(fd)
            throw RunLockError(message: "another iapledger run is in progress in this workspace (lock \(url.path) is held); try again when it has finished")
        }
    }

    /// Releases the lock (once; later calls do nothing).
    public func release() {
        guard !released else { return }
        released = true
        flock(fd, LOCK_UN)
        close(fd)
    }
}

public struct RunLockError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
