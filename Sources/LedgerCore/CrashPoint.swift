import Foundation

/// A test hook for the crash-safety test: named points along the nightly run where the test
/// can kill the process with SIGKILL. Inactive unless the environment sets one of
///
/// - `IAPLEDGER_TEST_KILL_AT=N`: the process kills itself (SIGKILL, no clean-up of any kind)
///   at the Nth point it passes (SIGTERM with `IAPLEDGER_TEST_KILL_SIGNAL=TERM`);
/// - `IAPLEDGER_TEST_CHECKPOINT_LOG=path`: each point passed appends `N<TAB>name` to `path`,
///   so a test can count the points of a run and choose where to kill.
///
/// Inactive, a point costs one branch on a constant. Names are `stage:detail`, the stage being
/// one of start, read, verify, post, reconcile, commit, report, write, rename.
///
/// Only a debug build (the one `make test` builds) reads those variables: a release build
/// never kills itself, whatever its environment holds.
public enum CrashPoint {
    #if DEBUG
    public static let isActive: Bool = killAt != nil || logPath != nil
    #else
    public static let isActive = false
    #endif

    private static let killAt: Int? = ProcessInfo.processInfo.environment["IAPLEDGER_TEST_KILL_AT"].flatMap { Int($0) }
    private static let logPath: String? = ProcessInfo.processInfo.environment["IAPLEDGER_TEST_CHECKPOINT_LOG"]
    private static let lock = NSLock()
    nonisolated(unsafe) private static var hits = 0
    nonisolated(unsafe) private static var ticks: [String: Int] = [:]

    /// One point.
    @inline(__always)
    public static func hit(_ name: @autoclosure () -> String) {
        guard isActive else { return }
        passed(name())
    }

    /// A point every `every` calls with this name (inside loops over records or rows).
    @inline(__always)
    public static func tick(_ name: StaticString, every: Int) {
        guard isActive else { return }
        let key = "\(name)"
        lock.lock()
        let n = (ticks[key] ?? 0) + 1
        ticks[key] = n
        lock.unlock()
        if n % every == 0 { passed("\(key) \(n)") }
    }

    private static func passed(_ name: String) {
        lock.lock()
        defer { lock.unlock() }
        hits += 1
        if let path = logPath {
            // One write(2) per line, straight to the kernel: it survives the SIGKILL below.
            let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            if fd >= 0 {
                let line = Array("\(hits)\t\(name)\n".utf8)
                _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
            }
        }
        if let k = killAt, hits == k {
            // `IAPLEDGER_TEST_KILL_SIGNAL=TERM`: SIGTERM instead, as systemd stops a service,
            // and this thread waits here for the process to end.
            if ProcessInfo.processInfo.environment["IAPLEDGER_TEST_KILL_SIGNAL"] == "TERM" {
                kill(getpid(), SIGTERM)
                while true { sleep(1) }
            }
            kill(getpid(), SIGKILL)
        }
    }
}
