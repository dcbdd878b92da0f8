import Foundation
import XCTest
@testable import LedgerCore
@testable import LedgerRun
@testable import LedgerStore

/// Helpers of the crash-safety, hostile-input and fuzz tests.
enum Resilience {
    /// Columns that hold the wall clock (when a run started or finished, when a month was
    /// closed): the only ones two runs of the same inputs may differ in.
    /// Columns that differ between two copies of a workspace by nature: wall-clock times, and a
    /// file's identity on disk (inode, change time), which a copied file never keeps.
    static let wallClockColumns: Set<String> = ["run.started_at", "run.finished_at", "period_close.closed_at", "source_file.stat_key"]

    /// Every table of the ledger as text, rows in a canonical order, wall-clock columns left
    /// out. Opening the ledger rolls back what a killed run left in its journal, as the next
    /// run would.
    static func ledgerDump(_ workspace: URL) throws -> [String: [String]] {
        let path = workspace.appendingPathComponent("ledger.sqlite").path
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let ledger = try Ledger(path: path)
        return try ledger.read { r in
            var out: [String: [String]] = [:]
            // report_file is a log of the files written under reports/: when, and as often as
            // they were written (a killed run's next run writes them again).
            let tables = try r.rawRows("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'report_file' ORDER BY name").map { $0[0] }
            for table in tables {
                let columns = try r.rawRows("SELECT name FROM pragma_table_info('\(table)') ORDER BY cid").map { $0[0] }
                let kept = columns.filter { !wallClockColumns.contains("\(table).\($0)") }
                let list = kept.map { "\"\($0)\"" }.joined(separator: ", ")
                // A blob (a chunk of compressed record text) compared by its bytes, in hex.
                let shown = kept.map { "CASE WHEN typeof(\"\($0)\") = 'blob' THEN hex(\"\($0)\") ELSE \"\($0)\" END" }.joined(separator: ", ")
                out[table] = try r.rawRows("SELECT \(shown) FROM \"\(table)\" ORDER BY \(list)").map { $0.joined(separator: "\u{1F}") }
            }
            return out
        }
    }

    /// The files under `dir` (recursively) by relative path, with their bytes.
    static func files(under dir: URL) throws -> [String: Data] {
        var out: [String: Data] = [:]
        guard let e = FileManager.default.enumerator(at: dir, includingPropertiesForKeys: [.isRegularFileKey]) else { return out }
        let base = dir.standardizedFileURL.path + "/"
        // (`reports/.iapledger-ledger` names the ledger, not a report: its own tests check it.)
        for case let url as URL in e where (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true
            && url.lastPathComponent != ".iapledger-ledger" {
            out[String(url.standardizedFileURL.path.dropFirst(base.count))] = try Data(contentsOf: url)
        }
        return out
    }

    static func copy(_ from: URL, to: URL) throws {
        try? FileManager.default.removeItem(at: to)
        try FileManager.default.copyItem(at: from, to: to)
    }

    /// A demo workspace's inbox files moved aside (to `held/`), to arrive night by night by the
    /// date in their names (`release(before:)`).
    struct HeldInbox {
        var files: [(date: String, from: URL, to: URL)] = []

        init(_ ws: URL) throws {
            let fm = FileManager.default
            let held = ws.appendingPathComponent("held")
            for folder in ["receipts", "orders", "signed"] {
                let dir = ws.appendingPathComponent("inbox/\(folder)")
                try fm.createDirectory(at: held.appendingPathComponent(folder), withIntermediateDirectories: true)
                for name in (try? fm.contentsOfDirectory(atPath: dir.path)) ?? [] {
                    let dates: [[String]] = XLSXReader.matches(name, #"(\d{4}-\d{2}-\d{2})"#)
                    let aside = held.appendingPathComponent("\(folder)/\(name)")
                    try fm.moveItem(at: dir.appendingPathComponent(name), to: aside)
                    files.append((dates.first?.first ?? "0000-00-00", aside, dir.appendingPathComponent(name)))
                }
            }
        }

        /// Puts back the files dated before `night` (and not back yet).
        func release(before night: String) throws {
            for file in files where file.date < night && !FileManager.default.fileExists(atPath: file.to.path) {
                try FileManager.default.moveItem(at: file.from, to: file.to)
            }
        }
    }

    static func scratch(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("iapledger-\(name)-\(UUID().uuidString)")
    }

    /// Runs the built `iapledger` (or another built `binary`) with extra environment
    /// variables; output read to the end.
    static func cli(_ args: [String], environment extra: [String: String] = [:], binary: URL = TraceAndCLITests.binary, in folder: URL? = nil) throws
        -> (status: Int32, reason: Process.TerminationReason, out: String, err: String) {
        guard FileManager.default.fileExists(atPath: binary.path) else { throw XCTSkip("iapledger binary not built at \(binary.path)") }
        let p = Process()
        p.executableURL = binary
        p.arguments = args
        if let folder { p.currentDirectoryURL = folder }
        var env = ProcessInfo.processInfo.environment
        for (k, v) in extra { env[k] = v }
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, p.terminationReason, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }
}

/// A test case whose scratch folders (`newScratch`, or any URL appended to `scratch`) are
/// removed after each test.
class ScratchTestCase: XCTestCase {
    var scratch: [URL] = []

    override func tearDown() {
        for url in scratch { try? FileManager.default.removeItem(at: url) }
        scratch = []
        super.tearDown()
    }

    func newScratch(_ name: String) -> URL {
        let url = Resilience.scratch(name)
        scratch.append(url)
        return url
    }
}
