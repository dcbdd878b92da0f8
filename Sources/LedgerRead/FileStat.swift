#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file's identity on disk, as `make` and `git` use it to skip unchanged files: device,
/// inode, size, modification time and change time (nanoseconds). Any write to the file
/// changes its change time, which no tool can set back, so the same key means the same bytes,
/// once the file is `settled`: file times have a coarse resolution (a kernel clock tick on
/// ext4, one or two seconds on FAT, HFS+ and many network mounts), so a write in the same tick
/// as the last one could leave every time as it was (git's "racy clean" files). Only a key
/// whose change time is at least `settleNanoseconds` older than this machine's clock is
/// remembered; a change time in the future (a server clock ahead) is never settled.
public enum FileStat {
    public static let settleNanoseconds: Int64 = 2_000_000_000

    /// The key and size of the file at `path`, and whether it is settled; nil when it cannot be stat'ed.
    public static func identity(_ path: String) -> (key: String, sizeBytes: Int, settled: Bool)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        #if canImport(Glibc)
        let m = (st.st_mtim.tv_sec, st.st_mtim.tv_nsec), c = (st.st_ctim.tv_sec, st.st_ctim.tv_nsec)
        #else
        let m = (st.st_mtimespec.tv_sec, st.st_mtimespec.tv_nsec), c = (st.st_ctimespec.tv_sec, st.st_ctimespec.tv_nsec)
        #endif
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let changedNs = Int64(c.0) * 1_000_000_000 + Int64(c.1), nowNs = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        return ("\(st.st_dev):\(st.st_ino):\(st.st_size):\(m.0).\(m.1):\(c.0).\(c.1)", Int(st.st_size),
                changedNs + settleNanoseconds < nowNs)
    }

    public static func key(_ path: String) -> String? { identity(path)?.key }
}
