import Foundation
import LedgerCore

/// Stage timings of a run, and progress lines for long stages when a person is watching.
///
/// On a terminal (stderr is a TTY) a long stage redraws one line in place: the stage, the
/// count so far and the percent done, at most five times a second. Under cron or systemd
/// (no TTY) it prints nothing: the scheduler's log gets only the summary lines and errors.
public final class RunProgress {
    public struct Stage: Equatable {
        public var name: String
        public var seconds: Double
        /// What the stage handled (records, postings, rows), if it counts anything.
        public var count: Int
        public var unit: String
        /// The process's peak resident memory at the end of the stage, in bytes.
        public var peakBytes: Int
        /// False for a part of a stage shown on its own line (one workbook of several written
        /// in parallel): the total counts the whole stage once.
        public var inTotal: Bool = true
    }

    public private(set) var stages: [Stage] = []
    let showProgress: Bool
    let out: (String) -> Void

    /// - Parameter showProgress: nil decides from the terminal: stderr is a TTY and TERM is not `dumb`.
    public init(showProgress: Bool? = nil, out: @escaping (String) -> Void = RunProgress.stderrWrite) {
        self.showProgress = showProgress ?? RunProgress.stderrIsTerminal()
        self.out = out
    }

    /// A progress that never prints (tests, library use).
    public static var silent: RunProgress { RunProgress(showProgress: false, out: { _ in }) }

    public static func stderrIsTerminal() -> Bool {
        isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }

    public static func stderrWrite(_ s: String) {
        StandardError.write(s)
    }

    /// Times `body` as one stage. `total` (in `unit`s) gives the percent; the body reports
    /// how far it is through the ticker.
    public func stage<T>(_ name: String, total: Int? = nil, unit: String = "records",
                         _ body: (Ticker) throws -> T) rethrows -> T {
        let ticker = Ticker(progress: self, name: name, total: total, unit: unit)
        let start = DispatchTime.now().uptimeNanoseconds
        defer {
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            ticker.finish()
            stages.append(Stage(name: name, seconds: seconds, count: ticker.count, unit: unit,
                                peakBytes: RunProgress.peakResidentBytes()))
        }
        return try body(ticker)
    }

    /// Shows `text` as the progress line (a stage that counts nothing, or one counted on other
    /// threads: the commit, the workbooks), until `clearStatus`; nothing without a terminal.
    /// Safe from any thread.
    public func status(_ text: String) {
        guard showProgress else { return }
        lock.lock(); defer { lock.unlock() }
        out("\r  \(text)\u{1B}[K")
        statusShown = true
    }

    public func clearStatus() {
        guard showProgress else { return }
        lock.lock(); defer { lock.unlock() }
        if statusShown { out("\r\u{1B}[K") }
        statusShown = false
    }
    private var statusShown = false

    /// Adds a stage measured elsewhere (for example by another thread).
    public func record(_ stage: Stage) {
        lock.lock(); defer { lock.unlock() }
        stages.append(stage)
    }
    private let lock = NSLock()

    /// Counts the work of one stage and redraws the progress line now and then.
    public final class Ticker {
        let progress: RunProgress
        let name: String
        public var total: Int?
        let unit: String
        public private(set) var count = 0
        /// How far through `total` the stage is, when that is not `count` (e.g. bytes read).
        public var done: Int?
        var lastDraw: UInt64 = 0
        var drawn = false

        init(progress: RunProgress, name: String, total: Int?, unit: String) {
            self.progress = progress
            self.name = name
            self.total = total
            self.unit = unit
        }

        @inline(__always)
        public func advance(by n: Int = 1) {
            count += n
            guard progress.showProgress, count & 0x3FF == 0 || n > 1 else { return }
            draw()
        }

        func draw(force: Bool = false) {
            let now = DispatchTime.now().uptimeNanoseconds
            guard force || now - lastDraw > 200_000_000 else { return }
            lastDraw = now
            var line = "\r  \(name): \(RunProgress.grouped(count)) \(unit)"
            if let total, total > 0 {
                let at = min(done ?? count, total)
                line += " (\(at * 100 / total)%)"
            }
            progress.out(line + "\u{1B}[K")
            drawn = true
        }

        func finish() {
            guard progress.showProgress, drawn else { return }
            progress.out("\r\u{1B}[K")
        }
    }

    /// Peak resident memory of this process so far (Linux reports ru_maxrss in KiB).
    public static func peakResidentBytes() -> Int {
        // The high-water mark of this program's own memory (`VmHWM`): `ru_maxrss` also counts
        // the memory of the process that started it (Linux keeps it across `exec`), so a run
        // started by a big parent (the benchmark) reported the parent's peak as its own.
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
           let kib = Int(line.dropFirst("VmHWM:".count).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") {
            return kib * 1024
        }
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        return Int(usage.ru_maxrss) * 1024
    }

    /// 1234567 as "1,234,567".
    public static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return n < 0 ? "-" + out : out
    }

    /// The stage table `iapledger run --timings` prints: one line a stage, plain text.
    public func table() -> String {
        // Wide enough for a workbook's name (`reconciliation-2026-11-26.xlsx`, indented).
        var lines = ["  stage                               seconds      count  per second   peak memory"]
        for s in stages {
            let perSecond = s.seconds > 0 ? Int(Double(s.count) / s.seconds) : 0
            let rate = perSecond > 0 ? RunProgress.grouped(perSecond) + "/s" : ""
            lines.append("  " + s.name.padding(toLength: 34, withPad: " ", startingAt: 0)
                         + String(format: "%9.2f", s.seconds)
                         + (s.count > 0 ? RunProgress.grouped(s.count) : "").leftPadded(11)
                         + rate.leftPadded(12)
                         + (s.peakBytes > 0 ? "\(s.peakBytes / (1024 * 1024)) MiB" : "").leftPadded(14))
        }
        let total = stages.filter(\.inTotal).reduce(0) { $0 + $1.seconds }
        lines.append("  " + "total".padding(toLength: 34, withPad: " ", startingAt: 0) + String(format: "%9.2f", total)
                     + "".leftPadded(23) + "\(RunProgress.peakResidentBytes() / (1024 * 1024)) MiB".leftPadded(14))
        return lines.joined(separator: "\n") + "\n"
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
