import Foundation
import LedgerCore
import LedgerStore

/// Reads of the whole ledger that every workbook of a night makes alike (its totals, the
/// open findings and records not posted), made once and shared by the workbooks written after
/// the night's commit, whatever their as-of date: nothing writes to the ledger while they
/// are written (the run holds its lock), so each thread's connection reads the same rows.
/// Each workbook filters them for its own date and book. At a million transactions the three
/// took 0.4 s for each of the four finance and sandbox workbooks of a night.
public final class SharedReads: @unchecked Sendable {
    private let lock = NSLock()
    private var totals: LedgerTotals?
    private var openFindings: [String: (rows: [FindingRow], counts: [String: Int])] = [:]
    private var openRecords: [String: OpenRecords] = [:]
    private var otherRoots: [Int64: [(book: Book, root: String, records: Int)]] = [:]
    public typealias OpenRecords = (listed: [RecordProblem], counts: [(outcome: String, code: String, count: Int)], more: [(code: String, count: Int)])

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
    /// The signed records verified to a root other than Apple's, read by runs up to `runId`.
    func signedVerifiedToOtherRoots(throughRun runId: Int64?, _ reader: LedgerReader) throws -> [(book: Book, root: String, records: Int)] {
        lock.lock()
        defer { lock.unlock() }
        if let value = otherRoots[runId ?? -1] { return value }
        let value = try reader.signedVerifiedToOtherRoots(throughRun: runId)
        otherRoots[runId ?? -1] = value
        return value
    }
    /// The records not posted of `scope`, at most `perCode` of each code and `total` in all.
    func openRecordProblems(_ scope: LedgerReader.RecordProblemScope, perCode: Int, total: Int, _ reader: LedgerReader) throws -> OpenRecords {
        lock.lock()
        defer { lock.unlock() }
        let key = "\(scope)|\(perCode)|\(total)"
        if let value = openRecords[key] { return value }
        let value = try reader.openRecordProblems(scope, perCode: perCode, total: total)
        openRecords[key] = value
        return value
    }
}

extension Optional where Wrapped == SharedReads {
    /// Through the shared reads when there are any, else straight from `reader`.
    func totals(_ reader: LedgerReader) throws -> LedgerTotals { try self?.totals(reader) ?? reader.totals() }
    func findingsOpen(on day: Day, book: String, limit: Int, _ reader: LedgerReader) throws -> (rows: [FindingRow], counts: [String: Int]) {
        try self?.findingsOpen(on: day, book: book, limit: limit, reader) ?? reader.findingsOpen(on: day, book: book, limit: limit)
    }
    func signedVerifiedToOtherRoots(throughRun runId: Int64?, _ reader: LedgerReader) throws -> [(book: Book, root: String, records: Int)] {
        try self?.signedVerifiedToOtherRoots(throughRun: runId, reader) ?? reader.signedVerifiedToOtherRoots(throughRun: runId)
    }
    func openRecordProblems(_ scope: LedgerReader.RecordProblemScope, perCode: Int, total: Int, _ reader: LedgerReader) throws -> SharedReads.OpenRecords {
        try self?.openRecordProblems(scope, perCode: perCode, total: total, reader) ?? reader.openRecordProblems(scope, perCode: perCode, total: total)
    }
}
