import CXattr
import Foundation
import LedgerCore

/// Writing a report file aside and renaming it into place, so a reader (or a run killed at
/// any moment) never sees a half-written file under `reports/`.
///
/// The file is written as `<name>.<pid>.partial` in a temp folder (the workspace's
/// `.iapledger-tmp/`, on the same filesystem, so the rename is atomic); without one, as a
/// hidden file beside its final name (and copied there when it cannot be renamed from the
/// temp folder as it is: `moveIntoPlace`). A partial file left by a killed process is deleted by
/// the next run (`Workspace.removeStaleTempFiles`). Before the rename the finished file takes
/// what a file created in its folder would have taken (`settle`) and is flushed to disk.
public enum WriteAside {
    /// A test's hook, called just before each finished file is renamed into place (nil in
    /// use): a test puts something in the way there, after the night's checks and its commit,
    /// as a share or a person could, to see what a night whose workbooks fail does.
    nonisolated(unsafe) public static var beforeRename: ((URL) -> Void)?

    /// The temp file for `url`, its folder created if needed.
    public static func tempURL(for url: URL, in tempDirectory: URL?) throws -> URL {
        func folder(_ dir: URL) throws {
            do {
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            } catch {
                // The hint only where it is the cause: a file where a folder goes.
                var st = stat(), path = dir.path, found = false
                while !path.isEmpty && path != "." {
                    if stat(path, &st) == 0 { found = true; break }
                    let up = (path as NSString).deletingLastPathComponent
                    if up == path { break }
                    path = up
                }
                let inTheWay = found && st.st_mode & S_IFMT != S_IFDIR ? " (\(path) is a file, in the way)" : ""
                throw WriteError(message: "\(dir.path): cannot make the folder for \(url.lastPathComponent): \(describe(error))" + inTheWay)
            }
        }
        try folder(url.deletingLastPathComponent())
        guard let dir = tempDirectory else {
            return url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).partial")
        }
        try folder(dir)
        return dir.appendingPathComponent("\(url.lastPathComponent).\(getpid()).partial")
    }

    /// The pid in a temp file's name (`<name>.<pid>.partial`), if it is one.
    public static func pid(ofTempName name: String) -> Int32? {
        guard name.hasSuffix(".partial") else { return nil }
        let parts = name.dropLast(".partial".count).split(separator: ".")
        return parts.last.flatMap { Int32($0) }
    }

    /// A Foundation file error as its cause (`No space left on device`), not its dump.
    public static func describe(_ error: Error) -> String {
        // Our own (a copy's write or flush): its message says the system's reason ("No space
        // left on device"); as an NSError it said only "LedgerWrite.WriteError error 1".
        if let own = error as? WriteError { return own.message }
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        // Foundation's own codes, said as the system says them ("The operation could not be
        // completed. The file doesn't exist." said less than "No such file or directory").
        if let c = error as? CocoaError {
            switch c.code {
            case .fileReadNoSuchFile, .fileNoSuchFile: return String(cString: strerror(ENOENT))
            case .fileReadNoPermission, .fileWriteNoPermission: return String(cString: strerror(EACCES))
            case .fileWriteOutOfSpace: return String(cString: strerror(ENOSPC))
            case .fileWriteVolumeReadOnly: return String(cString: strerror(EROFS))
            default: break
            }
        }
        return ns.localizedDescription
    }

    /// Renames the finished temp file to `url` (replacing an older file of that name at once),
    /// settled first (`settle`), and flushes the folder's entries to disk. Where the temp file
    /// cannot take what the folder gives (the folder on another filesystem, or a group the
    /// process may not give a file of its own), it is copied into a new file beside its final
    /// name, which the kernel creates with them, and renamed there.
    public static func moveIntoPlace(_ temp: URL, to url: URL) throws {
        let folder = url.deletingLastPathComponent()
        var a = stat(), b = stat()
        let sameFilesystem = stat(temp.path, &a) == 0 && stat(folder.path, &b) == 0 && a.st_dev == b.st_dev
        let settled = sameFilesystem ? try settle(temp, into: folder) : false
        CrashPoint.hit("rename:before \(url.lastPathComponent)")
        beforeRename?(url)
        if settled {
            guard rename(temp.path, url.path) == 0 else {
                throw WriteError(message: "\(url.path): cannot move the finished file into place: \(String(cString: strerror(errno)))")
            }
        } else {
            let beside = folder.appendingPathComponent(".\(url.lastPathComponent).\(getpid()).partial")
            do {
                try copy(temp, to: beside)
                try? FileManager.default.removeItem(at: temp)
            } catch {
                try? FileManager.default.removeItem(at: beside)
                throw WriteError(message: "\(url.path): cannot copy the finished file into place: \(Self.describe(error))")
            }
            if rename(beside.path, url.path) != 0 {
                let e = errno
                try? FileManager.default.removeItem(at: beside)
                throw WriteError(message: "\(url.path): cannot move the finished file into place: \(String(cString: strerror(e)))")
            }
        }
        syncFolder(folder)
        // And the folder's own entry (reports/<date>/, made for this set) in reports/.
        syncFolder(folder.deletingLastPathComponent())
        CrashPoint.hit("rename:after \(url.lastPathComponent)")
    }

    /// `from`'s bytes into a new file `to`, created (mode 0666 through the umask, or the
    /// folder's default ACL; the folder's group when it is set-group-ID) and flushed to disk.
    static func copy(_ from: URL, to: URL) throws {
        try? FileManager.default.removeItem(at: to)
        let input = open(from.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw WriteError(message: "\(from.path): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        let output = open(to.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard output >= 0 else { throw WriteError(message: "\(to.path): \(String(cString: strerror(errno)))") }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw WriteError(message: "\(from.path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = buffer.withUnsafeBytes { write(output, $0.baseAddress! + done, n - done) }
                if w < 0 && errno == EINTR { continue }
                guard w > 0 else { throw WriteError(message: "\(to.path): \(String(cString: strerror(errno)))") }
                done += w
            }
        }
        guard fsync(output) == 0 else { throw WriteError(message: "\(to.path): cannot flush it to disk: \(String(cString: strerror(errno)))") }
    }

    /// Gives the finished temp file what a file created in `folder` would have taken from it:
    /// its group, when the folder is set-group-ID (a share's `chmod g+s reports`), and its POSIX
    /// default ACL (`setfacl -d -m g:finance:r reports`) as the file's own, masked by the mode a
    /// new file is created with (0666), as the kernel does (`posix_acl_create`); then flushes
    /// the file to disk, so that the ledger never registers a report file whose bytes a power
    /// cut could still lose. The temp file is written in the workspace's `.iapledger-tmp/`, so
    /// without this the folder's settings never reached it (the umask alone did). False when
    /// the folder's group could not be given (a process outside that group may not give it to
    /// a file; the kernel gives it to a file created there): the caller copies it there.
    @discardableResult
    public static func settle(_ temp: URL, into folder: URL) throws -> Bool {
        let fd = open(temp.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw WriteError(message: "\(temp.path): cannot open the finished file again: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var dir = stat(), file = stat()
        if stat(folder.path, &dir) == 0 {
            if dir.st_mode & 0o2000 != 0, fstat(fd, &file) == 0, file.st_gid != dir.st_gid,
               fchown(fd, uid_t.max, dir.st_gid) != 0 {
                return false
            }
            if let acl = defaultACL(of: folder) {
                _ = acl.withUnsafeBytes { iap_fsetxattr(fd, "system.posix_acl_access", $0.baseAddress, $0.count) }
            }
        }
        if fsync(fd) != 0 {
            throw WriteError(message: "\(temp.path): cannot flush the finished file to disk: \(String(cString: strerror(errno)))")
        }
        return true
    }

    /// The folder's default ACL (the `system.posix_acl_default` attribute: a 4-byte version,
    /// then 8-byte entries of tag, permissions and id, little-endian) as a new file's access
    /// ACL: the execute bit taken from the owner, the mask (the owning group without one) and
    /// others, as creating a file with mode 0666 does. Nil when the folder has none.
    static func defaultACL(of folder: URL) -> [UInt8]? {
        let name = "system.posix_acl_default"
        let size = iap_getxattr(folder.path, name, nil, 0)
        guard size > 4, (size - 4) % 8 == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: size)
        guard bytes.withUnsafeMutableBytes({ iap_getxattr(folder.path, name, $0.baseAddress, size) }) == size else { return nil }
        let entries = stride(from: 4, to: size, by: 8)
        func tag(_ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
        let (userObj, groupObj, mask, other): (UInt16, UInt16, UInt16, UInt16) = (0x01, 0x04, 0x10, 0x20)
        let hasMask = entries.contains { tag($0) == mask }
        for at in entries {
            let t = tag(at)
            if t == userObj || t == mask || t == other || (t == groupObj && !hasMask) { bytes[at + 2] &= 0o6 }
        }
        return bytes
    }

    /// The folder's entries flushed to disk (the rename that put a file there), as far as the
    /// filesystem allows.
    static func syncFolder(_ folder: URL) {
        let fd = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
