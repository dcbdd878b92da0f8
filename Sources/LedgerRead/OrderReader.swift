import LedgerCore

/// One credit the app's backend granted (reconciliation.md, "Order records").
public struct OrderRecord: Equatable, Sendable {
    public var orderId: String
    public var accountId: String
    public var transactionId: String?
    public var productId: String
    public var quantity: Int64
    public var creditedUnits: Int64
    public var creditedAt: String
    public var creditedMs: Int64
    public var environment: String       // "production" or "sandbox"
    public var storefront: String?
    public var appAccountToken: String?
    public var reversedAt: String?
    /// What the row holds that is not taken (a storefront that is no code), kept as the
    /// verified record's reason.
    public var note: String? = nil

    public var isActive: Bool { reversedAt == nil }
}

/// One row of an orders CSV, read or refused with a reason.
public struct OrderRow {
    public var line: Int
    public var raw: Substring
    public var result: Result<OrderRecord, Finding>
    /// The row's `order_id` when it has a usable one, also when the row is refused: a
    /// rejected line is kept under its order, for `trace` and for the valid line that
    /// replaces it.
    public var orderId: String? = nil
}

public enum OrderReader {
    public static let requiredColumns = ["order_id", "account_id", "product_id", "credited_at", "environment"]
    /// Every column a row's values are taken from.
    public static let readColumns: Set<String> = Set(requiredColumns + ["transaction_id", "quantity", "credited_units", "storefront",
                                                                        "app_account_token", "reversed_at"])

    /// Reads every row of an orders file. A header problem refuses the whole file (one finding);
    /// a bad row refuses that row only. `header` is the header row's text (nil when the file is refused).
    public static func read(path: String, text: Substring) -> (rows: [OrderRow], fileError: Finding?, header: Substring?) {
        let table: CSVTable
        do {
            table = try CSVTable(path: path, text: text, required: requiredColumns, rowByRow: true, reads: readColumns)
        } catch let e as CSVError {
            return ([], Finding(code: "BAD_CSV", message: e.message, location: SourceLocation(path: path, line: e.line)), nil)
        } catch let e as ReadError {
            // The finding names the file and line already: the message alone.
            let message: String, line: Int
            switch e {
            case let .file(_, m): (message, line) = (m, 1)
            case let .line(_, l, m): (message, line) = (m, l)
            }
            return ([], Finding(code: "BAD_CSV", message: message, location: SourceLocation(path: path, line: line)), nil)
        } catch {
            return ([], Finding(code: "BAD_CSV", message: "\(error)", location: SourceLocation(path: path, line: 1)), nil)
        }
        let bad = table.badRows.map { e in
            OrderRow(line: e.line, raw: e.raw, result: .failure(Finding(code: "BAD_CSV", message: e.message,
                                                                        location: SourceLocation(path: path, line: e.line))))
        }
        var rows = (table.rows.map { row in
            OrderRow(line: row.line, raw: row.raw, result: parse(row, table), orderId: namedOrder(row, table))
        } + bad).sorted { $0.line < $1.line }
        // The file's last row, with no line end after it, that does not read: cut short while
        // the file was being written. Its fields before the last one are in place, so an order
        // id among them names its order (the last may itself be cut).
        // (Cut short: a quote left open, or fewer fields than the header; a whole row with a bad
        // value is refused for it.)
        let last = text.utf8.last
        if last != 0x0A && last != 0x0D, let i = rows.indices.last, case .failure(let f) = rows[i].result {
            let row = table.rows.last.flatMap { $0.line == rows[i].line ? $0 : nil }
            if f.code == "BAD_CSV" || (row.map { $0.fields.count < table.header.count } ?? false) {
                rows[i].result = .failure(Finding(code: "TRUNCATED", message: RawRecord.truncatedReason(f.message), location: f.location))
                if rows[i].orderId == nil, let row { rows[i].orderId = orderBeforeTheCut(row, table) }
            }
        }
        return (rows, nil, table.headerRaw)
    }

    static func orderBeforeTheCut(_ row: CSVRow, _ t: CSVTable) -> String? {
        guard let i = t.header.firstIndex(where: { CSV.trimmed($0) == "order_id" }), i < row.fields.count - 1 else { return nil }
        let id = CSV.trimmed(row.fields[i])
        return !id.isEmpty && StoreBounds.plausibleIdentifier(id) ? id : nil
    }

    /// The table of an orders file's header row as kept (nil when it does not read as one),
    /// to read its lines again one at a time (`reread`).
    public static func table(path: String, header: String) -> CSVTable? {
        try? CSVTable(path: path, text: Substring(header), required: requiredColumns, rowByRow: true, reads: readColumns)
    }

    /// One line of an orders file read again under its header's table; nil when it is not one row.
    public static func reread(line raw: String, table: CSVTable) -> Result<OrderRecord, Finding>? {
        let rows = CSV.parseRows(Substring(raw))
        guard rows.count == 1, case .success(let row) = rows[0] else { return nil }
        return parse(row, table)
    }

    static func namedOrder(_ row: CSVRow, _ t: CSVTable) -> String? {
        // A row with more or fewer fields than the header may have them shifted: its
        // order_id column may hold another field, so it names no order; unless order_id is
        // the first column (a field missing or split in two lies after it), as backends write
        // it. Then a valid line of the order read later resolves the refused one.
        if row.fields.count != t.header.count {
            // (At least two fields: the id is followed by its comma, so it was written whole.)
            guard row.fields.count >= 2, t.header.first.map({ CSV.trimmed($0) == "order_id" }) == true else { return nil }
            let id = CSV.trimmed(row.fields[0])
            return !id.isEmpty && StoreBounds.plausibleIdentifier(id) ? id : nil
        }
        let id = t.value(row, "order_id")
        return !id.isEmpty && StoreBounds.plausibleIdentifier(id) ? id : nil
    }

    static func parse(_ row: CSVRow, _ t: CSVTable) -> Result<OrderRecord, Finding> {
        let loc = SourceLocation(path: t.path, line: row.line)
        func bad(_ m: String) -> Result<OrderRecord, Finding> { .failure(Finding(code: "BAD_ORDER", message: m, location: loc)) }
        if row.fields.count != t.header.count {
            return bad("has \(row.fields.count) fields, the header has \(t.header.count)" + (namedOrder(row, t).map { " (order \($0))" } ?? ""))
        }
        let orderId = t.value(row, "order_id"), account = t.value(row, "account_id"), product = t.value(row, "product_id")
        guard !orderId.isEmpty else { return bad("order_id is empty") }
        guard !account.isEmpty else { return bad("account_id is empty (order \(orderId))") }
        guard !product.isEmpty else { return bad("product_id is empty (order \(orderId))") }
        for (name, id) in [("order_id", orderId), ("account_id", account), ("product_id", product), ("transaction_id", t.value(row, "transaction_id")),
                          ("storefront", t.value(row, "storefront"))]
            where !id.isEmpty && !StoreBounds.plausibleIdentifier(id) {
            return bad(StoreBounds.implausibleIdentifier(name, id))
        }
        // A token is the backend's own text (it may even span lines): bounded, and no NUL (SQLite
        // text ends there, so it would not read back as itself).
        let token = t.value(row, "app_account_token")
        guard token.utf8.count <= 256, !token.utf8.contains(0) else {
            return bad("app_account_token \(String(reflecting: String(token.prefix(64)))) holds a NUL or is over 256 bytes")
        }
        let qText = t.value(row, "quantity")
        guard let q = qText.isEmpty ? 1 : Int64(qText), q > 0 else { return bad("quantity \"\(qText)\" is not a whole number >= 1 (order \(orderId))") }
        let uText = t.value(row, "credited_units")
        guard let units = uText.isEmpty ? 0 : Int64(uText), units >= 0 else { return bad("credited_units \"\(uText)\" is not a whole number >= 0 (order \(orderId))") }
        let at = t.value(row, "credited_at")
        guard let ms = ISOTimestamp.milliseconds(at) else { return bad("credited_at \"\(at)\" is not an ISO 8601 timestamp (order \(orderId))") }
        guard StoreBounds.plausibleDate(ms) else { return bad("credited_at \(at) is outside 2008-2099 (order \(orderId))") }
        let env = t.value(row, "environment").lowercased()
        guard env == "production" || env == "sandbox" else { return bad("environment \"\(t.value(row, "environment"))\" is not production or sandbox (order \(orderId))") }
        let reversed = t.value(row, "reversed_at")
        if !reversed.isEmpty && ISOTimestamp.milliseconds(reversed) == nil {
            return bad("reversed_at \"\(reversed)\" is not an ISO 8601 timestamp (order \(orderId))")
        }
        // A credit taken back before it was given: the row contradicts itself.
        if let r = ISOTimestamp.milliseconds(reversed), r < ms {
            return bad("reversed_at \(reversed) is before credited_at \(at) (order \(orderId))")
        }
        func opt(_ c: String) -> String? { let v = t.value(row, c); return v.isEmpty ? nil : v }
        // ISO 3166-1 codes are upper case, as the rules and Apple write them: a `usa` from the
        // backend was stored as written, and its sale found no storefront rule (MISSING_RULE).
        // Only ASCII letters change: any other text is kept as it is, to be reported as it was.
        var storefront = opt("storefront").map { String(decoding: $0.utf8.map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 }, as: UTF8.self) }
        // Three letters (reconciliation.md: ISO 3166-1 alpha-3): a `US` is read as no storefront
        // (no rule can name it: the sale it priced waited for ever), which the record's reason
        // says (its text keeps it as written); the rest of the row, a credit or its reversal,
        // counts as ever.
        let note = storefront.flatMap { RulesReader.storefrontCodeProblem($0) }.map {
            "\($0): read as none, so it prices no sale (one it would price takes its own storefront, else default_storefront)"
        }
        if note != nil { storefront = nil }
        return .success(OrderRecord(orderId: orderId, accountId: account, transactionId: opt("transaction_id"), productId: product,
                                    quantity: q, creditedUnits: units, creditedAt: at, creditedMs: ms, environment: env,
                                    storefront: storefront, appAccountToken: opt("app_account_token"),
                                    reversedAt: opt("reversed_at"), note: note))
    }
}

/// ISO 8601 timestamps as backends write them: `2026-09-01T10:00:00Z`, with fractions or an
/// offset (`+02:00`), or a bare date (midnight UTC).
public enum ISOTimestamp {
    public static func milliseconds(_ s: String) -> Int64? {
        if let d = Day(iso: s) { return d.epochMilliseconds }
        guard s.count >= 19 else { return nil }
        let u = Array(s.utf8)
        guard u[10] == UInt8(ascii: "T") || u[10] == UInt8(ascii: " "),
              let day = Day(iso: String(decoding: u[0..<10], as: UTF8.self)),
              u[13] == UInt8(ascii: ":"), u[16] == UInt8(ascii: ":"),
              let h = Int(String(decoding: u[11..<13], as: UTF8.self)), (0...23).contains(h),
              let m = Int(String(decoding: u[14..<16], as: UTF8.self)), (0...59).contains(m),
              let sec = Int(String(decoding: u[17..<19], as: UTF8.self)), (0...60).contains(sec) else { return nil }
        var i = 19
        var millis: Int64 = 0
        if i < u.count, u[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < u.count, u[i] >= 0x30, u[i] <= 0x39 {
                if digits < 3 { millis = millis * 10 + Int64(u[i] - 0x30) }
                digits += 1; i += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 3)..<3 { millis *= 10 }
        }
        var offsetMinutes = 0
        if i < u.count {
            if u[i] == UInt8(ascii: "Z") && i == u.count - 1 { i += 1 }
            else if (u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-")) && u.count - i == 6 && u[i + 3] == UInt8(ascii: ":"),
                    let oh = Int(String(decoding: u[(i + 1)..<(i + 3)], as: UTF8.self)),
                    let om = Int(String(decoding: u[(i + 4)..<(i + 6)], as: UTF8.self)) {
                offsetMinutes = (oh * 60 + om) * (u[i] == UInt8(ascii: "-") ? -1 : 1)
                i = u.count
            } else { return nil }
        }
        guard i == u.count else { return nil }
        return day.epochMilliseconds + Int64(((h * 60 + m - offsetMinutes) * 60 + sec)) * 1000 + millis
    }
}
