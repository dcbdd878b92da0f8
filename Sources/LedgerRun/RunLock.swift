import Foundation
import LedgerCore

/// An exclusive lock on the workspace for the length of a run, so two runs never interleave.
/// Held with `flock`, which the kernel releases if the process dies, on the lock file and on
/// the workspace's temp folder (`.iapledger-tmp/`, iapledger's own): the lock file deleted
/// while a night held it (taken for one a killed run left, as it still names its holder) let a
/// second night start beside the first. Not the workspace folder itself: a scheduler's own
/// `flock -n <workspace> iapledger run` holds that one.
public final class RunLock {
    private let fd: Int32
    /// The workspace's temp folder, locked too (-1 where it cannot be made or locked).
    private let folder: Int32
    private var released = false

    /// - Parameter command: the command taking it (`run`, `close`, `report`, `dismiss`), written
    ///   into the lock file with the process id and the time, so that another refused says who
    ///   holds it (a night refused by a `report` said "another iapledger run", sending the
    ///   operator to look for a run that was not there).
    public init(url: URL, command: String = "run") throws {
        fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let why = errno
            // Said with what to do (an operator's review: `dismiss` on a read-only mount said
            // only the system's reason).
            let advice = why == EROFS ? "the workspace is on a file system mounted read-only: run the commands that write (run, close, report, dismiss) where it is mounted read-write; nothing was read or written"
                : why == EACCES || why == EPERM ? "the workspace folder cannot be written by this user (uid \(getuid())): run the commands that write (run, close, report, dismiss) as the user the nights run as; nothing was read or written"
                : "nothing was read or written; fix it and run again"
            throw RunLockError(message: "\(url.path): cannot create the run lock: \(String(cString: strerror(why))): \(advice)")
        }
        // The folder first: held by another, the lock is taken (whatever became of the file).
        let temp = url.deletingLastPathComponent().appendingPathComponent(".iapledger-tmp")
        _ = mkdir(temp.path, 0o755)   // there already, or not to be made: then the file's lock alone
        var dir = open(temp.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        var taken = false
        if dir >= 0 && flock(dir, LOCK_EX | LOCK_NB) != 0 {
            taken = errno == EWOULDBLOCK
            close(dir)
            dir = -1   // no such lock on this file system: the file's alone
        }
        folder = dir
        if taken || flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if folder >= 0 { flock(folder, LOCK_UN); close(folder) }
            // A holder that has just taken the locks writes its line a moment later (two
            // nights started at once on a new workspace): waited for, a fifth of a second at
            // most, so that the message names it. (The file's lock is not tried to tell: taken
            // even for a moment, it refused the holder too, and neither command ran.)
            var buffer = [UInt8](repeating: 0, count: 200)
            var n = pread(fd, &buffer, buffer.count, 0)
            var tries = 0
            while n <= 0 && tries < 20 {
                usleep(10_000)
                tries += 1
                n = pread(fd, &buffer, buffer.count, 0)
            }
            close(fd)
            let holder = n > 0 ? TerminalText.visible(String(decoding: buffer.prefix(n), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) : ""
            let parts = holder.split(separator: " ", maxSplits: 2).map(String.init)
            // Named only while that process lives (a line left by a holder before, under a lock
            // now held by a version that writes none, names nobody).
            let who = parts.count == 3 && Int32(parts[0]).map({ kill($0, 0) == 0 || errno == EPERM }) == true
                ? "`iapledger \(parts[1])` (pid \(parts[0]), since \(parts[2]))"
                : "another iapledger run, close, report or dismiss"
            // The folder held and no holder's line: one starting or running whose lock file was
            // deleted, or another program locking iapledger's temp folder (said as possible,
            // not as what happened).
            let held = taken && parts.count != 3
                ? "(lock \(temp.path)/ is held: by an iapledger command starting or running, else \(url.lastPathComponent) was deleted while one ran, or another program locks that folder)"
                : "(lock \(url.path) is held)"
            throw RunLockError(message: "another iapledger command is in progress in this workspace, \(who) \(held); try again when it has finished")
        }
        // Who holds it, for another refused (written in place: nothing reads it but a refused one).
        let line = Array("\(getpid()) \(command) \(ISO8601DateFormatter().string(from: Date()))\n".utf8)
        _ = ftruncate(fd, 0)
        _ = line.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// Releases the lock (once; later calls do nothing).
    public func release() {
        guard !released else { return }
        released = true
        _ = ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
        if folder >= 0 { flock(folder, LOCK_UN); close(folder) }
    }
}

public struct RunLockError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
