import Foundation
import LedgerCore

/// Writing a report file aside and renaming it into place, so a reader (or a run killed at
/// any moment) never sees a half-written file under `reports/`.
///
/// The file is written as `<name>.<pid>.partial` in a temp folder (the workspace's
/// `.iapledger-tmp/`, on the same filesystem, so the rename is atomic); without one, as a
/// hidden file beside its final name. A partial file left by a killed process is deleted by
/// the next run (`Workspace.removeStaleTempFiles`).
public enum WriteAside {
    /// The temp file for `url`, its folder created if needed.
    public static func tempURL(for url: URL, in tempDirectory: URL?) throws -> URL {
        func folder(_ dir: URL) throws {
            do {
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            } catch {
                throw WriteError(message: "\(dir.path): cannot make the folder for \(url.lastPathComponent): \(describe(error))"
                    + " (a file of that name in the way?)")
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
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        return ns.localizedDescription
    }

    /// Renames the finished temp file to `url` (replacing an older file of that name at once).
    public static func moveIntoPlace(_ temp: URL, to url: URL) throws {
        CrashPoint.hit("rename:before \(url.lastPathComponent)")
        if rename(temp.path, url.path) != 0 {
            let err = errno
            guard err == EXDEV else {
                throw WriteError(message: "\(url.path): cannot move the finished file into place: \(String(cString: strerror(err)))")
            }
            // reports/ on another filesystem than the temp folder: copy beside, then rename there.
            let beside = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).partial")
            do {
                try? FileManager.default.removeItem(at: beside)
                try FileManager.default.copyItem(at: temp, to: beside)
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
        CrashPoint.hit("rename:after \(url.lastPathComponent)")
    }
}
