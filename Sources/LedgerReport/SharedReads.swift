import Foundation
import LedgerCore
import LedgerStore

/// Reads of the whole ledger that every workbook of a night makes alike (its totals, every
/// finding, every record not posted), made once and shared by the workbooks written after
/// the night's commit, whatever their as-of date: nothing writes to the ledger while they
/// are written (the run holds its lock), so each thread's connection reads the same rows.
/// Each workbook filters them for its own date and book. At a million transactions the three
/// took 0.4 s for each of the four finance and sandbox workbooks of a night.
public final class SharedReads: @unchecked Sendable {
    private let lock = NSLock()
    private var totals: LedgerTotals?
    private var openFindings: [String: (rows: [FindingRow], counts: [String: Int])] = [:]
    private var problems: [RecordProblem]?

    public init() {}

    /// The value at `slot`, read through `read` by the first workbook that asks (the others
    /// wait for it, then share it).
    private func once<T>(_ slot: ReferenceWritableKeyPath<SharedReads, T?>, _ read: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        if let value = self[keyPath: slot] { return value }
        let value = try read()
        self[keyPath: slot] = value
        return value
    }

    func totals(_ reader: LedgerReader) throws -> LedgerTotals { try once(\.totals) { try reader.totals() } }
    /// The findings of `book` open on `day`, at most `limit` of each code, with their counts.
    func findingsOpen(on day: Day, book: String, limit: Int, _ reader: LedgerReader) throws -> (rows: [FindingRow], counts: [String: Int]) {
        lock.lock()
        defer { lock.unlock() }
        let key = "\(day)|\(book)|\(limit)"
        if let value = openFindings[key] { return value }
        let value = try reader.findingsOpen(on: day, book: book, limit: limit)
        openFindings[key] = value
        return value
    }
    func recordProblems(_ reader: LedgerReader) throws -> [RecordProblem] { try once(\.problems) { try reader.recordProblems() } }
}

extension Optional where Wrapped == SharedReads {
    /// Through the shared reads when there are any, else straight from `reader`.
    func totals(_ reader: LedgerReader) throws -> LedgerTotals { try self?.totals(reader) ?? reader.totals() }
    func findingsOpen(on day: Day, book: String, limit: Int, _ reader: LedgerReader) throws -> (rows: [FindingRow], counts: [String: Int]) {
        try self?.findingsOpen(on: day, book: book, limit: limit, reader) ?? reader.findingsOpen(on: day, book: book, limit: limit)
    }
    func recordProblems(_ reader: LedgerReader) throws -> [RecordProblem] { try self?.recordProblems(reader) ?? reader.recordProblems() }
}
