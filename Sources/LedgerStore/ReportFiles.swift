import GRDB

/// A file written under reports/, as registered.
public struct RegisteredReportFile: Equatable {
    public var path: String
    public var sha256: String
    public var sizeBytes: Int64
    public var writtenAt: String
    public var runId: Int64?
    public var writtenBy: String
}

extension LedgerWriter {
    /// Registers files just written under reports/ (path relative to the workspace, SHA-256 of
    /// the bytes on disk, size): by the night `runId`, or by `report` (`runId` nil).
    public func registerReportFiles(_ files: [(path: String, sha256: String, sizeBytes: Int64)], writtenAt: String, runId: Int64?) throws {
        for f in files {
            try db.cachedStatement(sql: """
                INSERT INTO report_file (path, sha256, size_bytes, written_at, run_id, written_by) VALUES (?, ?, ?, ?, ?, ?)
                """).execute(arguments: [f.path, f.sha256, f.sizeBytes, writtenAt, runId, runId == nil ? "report" : "run"])
        }
    }
}

extension LedgerReader {
    /// Whether the ledger registers the report files written (schema v23 and after).
    public func registersReportFiles() throws -> Bool {
        try db.tableExists("report_file")
    }

    /// Every registration of a file with these bytes, oldest first.
    public func reportFiles(sha256: String) throws -> [RegisteredReportFile] {
        try registered(where: "sha256 = ?", sha256)
    }

    /// Every registration of a path, oldest first (the versions written there).
    public func reportFiles(path: String) throws -> [RegisteredReportFile] {
        try registered(where: "path = ?", path)
    }

    private func registered(where condition: String, _ value: String) throws -> [RegisteredReportFile] {
        guard try registersReportFiles() else { return [] }
        return try Row.fetchAll(db, sql: """
            SELECT path, sha256, size_bytes, written_at, run_id, written_by FROM report_file WHERE \(condition) ORDER BY id
            """, arguments: [value]).map {
            RegisteredReportFile(path: $0[0], sha256: $0[1], sizeBytes: $0[2], writtenAt: $0[3], runId: $0[4], writtenBy: $0[5])
        }
    }
}
