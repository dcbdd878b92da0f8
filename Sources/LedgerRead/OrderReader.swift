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
    /// Whether the row runs to the end of the file with no line end after it.
    public var endsFile = false
    /// A row broken by its quoting: the fields read whole before the break.
    var fieldsBeforeBreak: [String] = []
}

public enum OrderReader {
    public static let requiredColumns = ["order_id", "account_id", "product_id", "credited_at", "environment"]
    /// Every column a row's values are taken from.
    public static let readColumns: Set<String> = Set(requiredColumns + ["transaction_id", "quantity", "credited_units", "storefront",
                                                                        "app_account_token", "reversed_at"])

    /// Reads every row of an orders file. A header problem refuses the whole file (one finding);
    /// a bad row refuses that row only. `header` is the header row's text (nil when the file is refused).
    public static func read(path: String, text: Substring) -> (rows: [OrderRow], fileError: Finding?, header: String?) {
        var reader = Rows(path: path)
        var rows: [OrderRow] = []
        var s = text
        if s.hasPrefix("\u{FEFF}") { s = s.dropFirst() }
        CSV.forEachRow(s, line: 1, final: true) { if let row = reader.take($0) { rows.append(row) } }
        if let last = reader.finish() { rows.append(last) }
        if let e = reader.fileError { return ([], e, nil) }
        return (rows, nil, reader.header)
    }

    /// An orders file's rows read one at a time, as its parsed rows come (`CSV.forEachRow`,
    /// `CSVFile.forEachRow`): the first is the header, each row after it is read or refused
    /// with its reason. A row is handed back once the next one has come (the file's last,
    /// by `finish`, may be one cut short).
    public struct Rows {
        public let path: String
        /// The header refused, or no header at all: the file is refused whole (no rows).
        public private(set) var fileError: Finding?
        /// The header row's text as it stands in the file.
        public private(set) var header: String?
        var table: CSVTable?
        /// Whether `order_id` is the header's first column.
        var orderFirst = false
        /// The row read last, with its parsed fields when it parsed.
        var held: (row: OrderRow, parsed: CSVRow?)?

        public init(path: String) { self.path = path }

        /// Takes the file's first parsed row as its header; false when the header was taken
        /// (or refused) before.
        mutating func takeHeader(_ parsed: Result<CSVRow, CSVError>) -> Bool {
            guard fileError == nil, table == nil else { return false }
            do {
                // The header must be whole.
                let headerRow = try parsed.get()
                let t = try CSVTable(path: path, headerRow: headerRow, required: requiredColumns, reads: readColumns)
                table = t
                header = String(headerRow.raw)
                orderFirst = t.header.first.map { CSV.trimmed($0) == "order_id" } ?? false
            } catch {
                fileError = OrderReader.fileError(error, path: path)
            }
            return true
        }

        /// Takes the next parsed row only to count it: its text when it is a row after the
        /// header (a record), unread (a first reading of a big file: how many rows, which are new).
        public mutating func count(_ parsed: Result<CSVRow, CSVError>) -> Substring? {
            if takeHeader(parsed) || fileError != nil { return nil }
            switch parsed {
            case .success(let r): return r.raw
            case .failure(let e): return e.raw
            }
        }

        /// Takes the next parsed row only for the order it names and its text (a look ahead over
        /// a big file: where it leaves each order): the order id as `take` reads it, its values
        /// not checked; nil for the header, or once the file is refused.
        public mutating func orderAndText(_ parsed: Result<CSVRow, CSVError>) -> (orderId: String?, raw: Substring, endsFile: Bool, valid: Bool)? {
            if takeHeader(parsed) { return nil }
            guard fileError == nil, let table else { return nil }
            switch parsed {
            case .success(let r):
                if case .success = parse(r, table) { return (namedOrder(r, table), r.raw, r.endsFile, true) }
                return (namedOrder(r, table), r.raw, r.endsFile, false)
            case .failure(let e): return (orderFirst ? e.fieldsBefore.first.flatMap(usableOrderId) : nil, e.raw, e.endsFile, false)
            }
        }

        /// Takes the next parsed row of the file; gives the row before it.
        public mutating func take(_ parsed: Result<CSVRow, CSVError>) -> OrderRow? {
            if takeHeader(parsed) { return nil }
            guard fileError == nil, let table else { return nil }
            let row: OrderRow, fields: CSVRow?
            switch parsed {
            case .success(let r):
                row = OrderRow(line: r.line, raw: r.raw, result: parse(r, table), orderId: namedOrder(r, table), endsFile: r.endsFile)
                fields = r
            case .failure(let e):
                // A row broken by a stray or unclosed quote after its first field names its order
                // when `order_id` is the header's first column (as for a row of the wrong length:
                // an unquoted comma before the break would shift any later column), so the valid
                // line of the order read later resolves it.
                let id = orderFirst ? e.fieldsBefore.first.flatMap(usableOrderId) : nil
                row = OrderRow(line: e.line, raw: e.raw,
                               result: .failure(Finding(code: e.code ?? "BAD_CSV", message: e.message + (id.map { " (order \($0))" } ?? ""),
                                                        location: SourceLocation(path: path, line: e.line))),
                               orderId: id, endsFile: e.endsFile, fieldsBeforeBreak: e.fieldsBefore)
                fields = nil
            }
            defer { held = (row, fields) }
            return held?.row
        }

        /// The file's last row, once every row was taken (nil when only counted).
        public mutating func finish() -> OrderRow? {
            guard fileError == nil else { return nil }
            guard let table else {
                fileError = Finding(code: "BAD_CSV", message: "is empty: a header row is required (\(requiredColumns.joined(separator: ",")))",
                                    location: SourceLocation(path: path, line: 1))
                return nil
            }
            guard let h = held else { return nil }
            var last = h.row
            let parsed = h.parsed
            held = nil
            // The file's last row, with no line end after it, that does not read: cut short while
            // the file was being written. Its fields before the last one are in place, so an order
            // id among them names its order (the last may itself be cut).
            // (Cut short: a quote left open, or fewer fields than the header; a whole row with a bad
            // value is refused for it.)
            // (The row itself must reach the end: a row of empty fields after it, no record, is no
            // cut in the row before it.)
            if last.endsFile, case .failure(let f) = last.result,
               f.code == "BAD_CSV" || (parsed.map { $0.fields.count < table.header.count } ?? false) {
                last.result = .failure(Finding(code: "TRUNCATED", message: RawRecord.truncatedReason(f.message), location: f.location))
                // (A quote cut open: the fields before it are whole, and stand where the header
                // puts them, as those of a row cut short do.)
                // (The last field of a row cut short may itself be cut.)
                if last.orderId == nil {
                    last.orderId = parsed.map { orderBeforeTheCut($0.fields, whole: $0.fields.count - 1, table) }
                        ?? orderBeforeTheCut(last.fieldsBeforeBreak, whole: last.fieldsBeforeBreak.count, table)
                }
            }
            return last
        }
    }

    /// A header that does not read, or a file with none: the file's finding.
    static func fileError(_ error: Error, path: String) -> Finding {
        switch error {
        case let e as CSVError:
            return Finding(code: "BAD_CSV", message: e.message, location: SourceLocation(path: path, line: e.line))
        case let e as ReadError:
            // The finding names the file and line already: the message alone.
            let message: String, line: Int
            switch e {
            case let .file(_, m): (message, line) = (m, 1)
            case let .line(_, l, m): (message, line) = (m, l)
            }
            return Finding(code: "BAD_CSV", message: message, location: SourceLocation(path: path, line: line))
        default:
            return Finding(code: "BAD_CSV", message: "\(error)", location: SourceLocation(path: path, line: 1))
        }
    }

    /// The order id among the fields read whole of a row cut short (`whole` of them), where the
    /// header puts it.
    static func orderBeforeTheCut(_ fields: [String], whole: Int, _ t: CSVTable) -> String? {
        guard let i = t.header.firstIndex(where: { CSV.trimmed($0) == "order_id" }), i < whole else { return nil }
        return usableOrderId(fields[i])
    }

    /// A field's text as an order id, when it can name one (not empty, no control characters,
    /// not over the bound).
    static func usableOrderId(_ field: String) -> String? {
        // As an id is read: one with a no-break space is no other order's (it was filed under
        // the order it imitates, and a valid line of that one settled it).
        let id = CSV.idTrimmed(field)
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
            return usableOrderId(row.fields[0])
        }
        return usableOrderId(t.asciiTrimmedValue(row, "order_id"))
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
        // Each id as written, but for plain spaces and tabs around it: a no-break space or a
        // zero-width one at its end is part of it (a receipt's or signed record's id with one is
        // refused; read trimmed, such an order credited the real transaction without a word).
        for name in ["order_id", "account_id", "product_id", "transaction_id", "storefront"] {
            let id = t.asciiTrimmedValue(row, name)
            if !id.isEmpty && !StoreBounds.plausibleIdentifier(id) { return bad(StoreBounds.implausibleIdentifier(name, id)) }
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

/// ISO 8601 timestamps as backends write them: `2026-09-01T10:00:00Z`, in the extended or the
/// basic format (`20260901T100000Z`), with or without seconds (`10:00Z`), a fraction of a second
/// of any length after the seconds (after `.` or `,`), `T`, `t` or a space between date and
/// time, and for the zone `Z`, `z`, an offset as `+02:00`, `+0200` or `+02` (what `strftime`'s
/// `%z`, Java and PHP write) or nothing (UTC); or a bare date, `2026-09-01` or `20260901`
/// (midnight UTC).
public enum ISOTimestamp {
    public static func milliseconds(_ s: String) -> Int64? {
        if let d = Day(iso: s) { return d.epochMilliseconds }
        let u = Array(s.utf8)
        var i = 0
        func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        /// `n` digits at `i` as a number, or nil.
        func digits(_ n: Int) -> Int? {
            guard i + n <= u.count else { return nil }
            var v = 0
            for k in i..<(i + n) { guard isDigit(u[k]) else { return nil }; v = v * 10 + Int(u[k] - 0x30) }
            i += n
            return v
        }
        func take(_ c: Character) -> Bool {
            guard i < u.count, u[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        // The date: YYYY-MM-DD or YYYYMMDD.
        guard digits(4) != nil else { return nil }
        let extended = take("-")
        guard digits(2) != nil, !extended || take("-"), digits(2) != nil else { return nil }
        // A real date (2026-02-30 is refused), read as `Day` reads one.
        let dateText = extended ? String(decoding: u[0..<10], as: UTF8.self)
            : String(decoding: u[0..<4], as: UTF8.self) + "-" + String(decoding: u[4..<6], as: UTF8.self) + "-" + String(decoding: u[6..<8], as: UTF8.self)
        guard let day = Day(iso: dateText) else { return nil }
        // A bare date in the basic format (the extended one is read above).
        if i == u.count { return day.epochMilliseconds }
        guard take("T") || take("t") || take(" ") else { return nil }
        // The time: hh:mm[:ss] (hhmm[ss] in the basic format), the same format as the date.
        guard let h = digits(2), (0...23).contains(h), !extended || take(":"), let m = digits(2), (0...59).contains(m) else { return nil }
        var sec = 0
        var hasSeconds = false
        if extended ? take(":") : (i < u.count && isDigit(u[i])) {
            guard let v = digits(2), (0...60).contains(v) else { return nil }
            sec = v
            hasSeconds = true
        }
        var millis: Int64 = 0
        // A fraction of the seconds only (`10:01.5` would be a fraction of a minute).
        if hasSeconds && (take(".") || take(",")) {
            var count = 0
            while i < u.count, isDigit(u[i]) {
                if count < 3 { millis = millis * 10 + Int64(u[i] - 0x30) }
                count += 1; i += 1
            }
            guard count > 0 else { return nil }
            for _ in min(count, 3)..<3 { millis *= 10 }
        }
        // The zone: Z, z, +hh:mm, +hhmm, +hh (or -), or none (UTC).
        var offsetMinutes = 0
        if take("Z") || take("z") {
        } else if i < u.count, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") {
            let sign = u[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), (0...23).contains(oh) else { return nil }
            var om = 0
            if i < u.count {
                _ = take(":")
                guard let v = digits(2), (0...59).contains(v) else { return nil }
                om = v
            }
            offsetMinutes = sign * (oh * 60 + om)
        }
        guard i == u.count else { return nil }
        return day.epochMilliseconds + Int64(((h * 60 + m - offsetMinutes) * 60 + sec)) * 1000 + millis
    }
}
