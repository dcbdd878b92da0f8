import Foundation
import LedgerCore
import LedgerRead
import LedgerStore
import LedgerVerify

/// Reading App Store Server API signed data from `inbox/signed/`: signed transactions and
/// Server Notifications V2, each JWS verified to a trusted root before anything is posted.
extension Ingest {
    /// The compact JWS a record holds: a `*.jws`/`*.txt` line is one (or a notification body);
    /// `*.json`/`*.jsonl` records are notification bodies `{"signedPayload": ...}` (also
    /// `signedTransactionInfo`). Nil when it holds none.
    static func jws(in record: RawRecord, fileExtension ext: String) -> String? {
        guard record.problem == nil else { return nil }
        if ext == "jws" || ext == "txt" {
            // Trimmed by its bytes (spaces and tabs): Foundation's trimming walked the ~3 KB
            // line as UTF-16, a fifth of the cost of reading a signed record.
            // A UTF-8 byte order mark (written by some Windows editors and exports at the start
            // of a file) is no part of the JWS: skipped, as the JSON and CSV readers skip it. It
            // made the file's first line MALFORMED.
            var text = record.text
            if text.unicodeScalars.first == "\u{FEFF}" { text = Substring(text.unicodeScalars.dropFirst()) }
            let bytes = text.utf8
            guard let first = bytes.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
                  let last = bytes.lastIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return "" }
            let s = Substring(text.utf8[first...last])
            return s.hasPrefix("{") ? jwsInBody(s) : String(s)
        }
        return jwsInBody(record.text)
    }

    /// The JWS inside a notification body, or nil when the body is not one.
    static func jwsInBody(_ text: Substring) -> String? {
        guard let v = try? JSONParser.parse(text) else { return nil }
        // Only text is a JWS (`{"signedPayload": 5}` was read as the JWS "5": "has 1 part").
        for key in ["signedPayload", "signedTransactionInfo"] {
            if case .string(let jws)? = v[key]?.scalar { return jws }
        }
        return nil
    }

    /// Why a body's `signedPayload` (or `signedTransactionInfo`) is no JWS: it is there but
    /// not text (nil when it is text, or not there).
    static func signedFieldNotText<J: JSONReading>(_ v: J) -> String? {
        for key in ["signedPayload", "signedTransactionInfo"] {
            guard let field = v[key] else { continue }
            let kind: String
            switch field.scalar {
            case .string?: return nil
            case .number(let n)?: kind = "the number \(n.prefix(64))"
            case .bool(let b)?: kind = b ? "true" : "false"
            case nil: kind = field.isNull ? "null" : field.isArray ? "an array" : "an object"
            }
            return "its \(key) is \(kind), not the signed text (a JWS: three base64url parts joined by dots)"
        }
        return nil
    }

    /// The records of a signed-data file (a line each, or the elements of a `.json` document),
    /// verified on the preparing thread: only what they bring is written here.
    mutating func signed(_ input: InputFile, records: [PreparedFile.PreparedSigned]) throws {
        let seen = try writer.recordsReadBefore(path: input.path)
        let (fileId, fresh) = try addFile(input, hashes: records.map(\.sha256), seen: seen) { records[$0].record.unterminated }
        for i in fresh { try signedRecord(records[i], fileId: fileId, path: input.path) }
    }

    /// One new record of a signed-data file, verified on the thread that prepared it.
    mutating func signedRecord(_ prepared: PreparedFile.PreparedSigned, fileId: Int64, path: String) throws {
        let sha = prepared.sha256
        counts.read += 1
        CrashPoint.tick("verify:signed", every: 10)
        let record = prepared.record
        let location = SourceLocation(path: path, line: record.line)
        let raw = prepared.text
        if let problem = record.problem {
            try reject(fileId: fileId, location: location, sha: sha, code: problem.code, reason: problem.reason, raw: raw)
            return
        }
        if let failed = Self.cutShort(prepared) {
            try reject(fileId: fileId, location: location, sha: sha, code: "TRUNCATED", reason: RawRecord.truncatedReason(failed), raw: raw)
            return
        }
        guard let jws = prepared.jws, let verdict = prepared.verdict else {
            // Which of the two: JSON that does not parse (with where and why), or no body.
            var reason = "not a notification body {\"signedPayload\": \"...\"}"
            do {
                let value = try JSONParser.parse(record.text)
                if let why = Self.signedFieldNotText(value) { reason += ": \(why)" }
                else if let hint = ForeignData.hint(value), !hint.contains("inbox/signed/") { reason += " (\(hint))" }
            } catch { reason = "not valid JSON (\(error))" }
            try reject(fileId: fileId, location: location, sha: sha, code: "MALFORMED", reason: reason, raw: raw)
            return
        }
        switch verdict {
        case .transaction(let result):
            try signedTransaction(result, jws: jws, fileId: fileId, location: location, sha: sha, raw: raw)
        case .notification(let result):
            try notification(result, jws: jws, fileId: fileId, location: location, sha: sha, raw: raw)
        case .renewalInfo(let result):
            switch result {
            case .success:
                _ = try writer.addRecord(.init(fileId: fileId, line: location.line, sha256: sha, outcome: .verified,
                                               reasonCode: "RENEWAL_INFO", reason: "signed renewal info, verified; no money moves", raw: raw))
                counts.verified += 1
            case .failure(let why):
                try reject(fileId: fileId, location: location, sha: sha, code: why.code, reason: why.description, raw: raw)
            }
        case .otherPayload(let failure?):
            // Not chained to a trusted root (or not signed by it): refused for that first,
            // as a transaction or notification would be, whatever its payload says.
            try reject(fileId: fileId, location: location, sha: sha, code: failure.code, reason: failure.description, raw: raw)
        case .otherPayload(nil) where appTransactionReceiptType(ofCompactJWS: jws) != nil:
            // An app transaction (the app's own purchase or download, as StoreKit's
            // AppTransaction gives it), signed by Apple: verified and kept, as renewal info is.
            let type = appTransactionReceiptType(ofCompactJWS: jws) ?? ""
            _ = try writer.addRecord(.init(fileId: fileId, line: location.line, sha256: sha, outcome: .verified, reasonCode: "APP_TRANSACTION",
                                           reason: "signed app transaction (the app's own purchase or download, receiptType \(type)), verified; not an in-app purchase: no money moves",
                                           raw: raw))
            counts.verified += 1
        case .unknown, .otherPayload(nil):
            // A compact JWS of another kind (Apple's test data has payloads of a bundle id
            // and a date alone) is told apart from text that is no JWS at all.
            if isCompactJWS(jws) {
                try reject(fileId: fileId, location: location, sha: sha, code: "UNKNOWN_SIGNED_PAYLOAD",
                           reason: "a compact JWS whose payload is no signed transaction (no transactionId), notification (no notificationType) or renewal info (no autoRenewStatus): nothing here to post or record", raw: raw)
            } else {
                try reject(fileId: fileId, location: location, sha: sha, code: "MALFORMED",
                           reason: "not a compact JWS of a signed transaction or a notification" + (compactJWSProblem(jws).map { ": " + $0 } ?? ""), raw: raw)
            }
        }
    }

    /// Why the file's last line, with no line end after it, does not read, when it was cut
    /// short while the file was being written (read again when the file is read whole); nil
    /// otherwise. Only a JWS that does not hold together (damaged, its signature cut): a whole
    /// one refused for what it says (another app, an untrusted chain) is refused as such.
    static func cutShort(_ prepared: PreparedFile.PreparedSigned) -> String? {
        guard prepared.record.unterminated else { return nil }
        // Base64 text that no compact JWS begins with (its header is base64url of `{"`, `eyJ`)
        // is no signed record cut short: Apple's base64 receipts and Xcode data are refused for
        // what they are, as with a line end.
        let text = prepared.record.text.utf8.filter { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }
        let base64 = !text.isEmpty && text.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "+/=_-".utf8.contains(b)
        }
        if base64 && !text.starts(with: Array("eyJ".utf8)) { return nil }
        switch prepared.verdict {
        case nil: return "no signed payload"
        case .transaction(.failure(let e))?, .notification(.failure(let e))?, .renewalInfo(.failure(let e))?:
            return e.code == "MALFORMED" || e.code == "BAD_SIGNATURE" ? e.description : nil
        // A compact JWS whose payload is of no kind read here, with the whole of its signature
        // (cut inside the header or payload it would not be one; inside the signature, shorter):
        // whole, refused for what it says (UNKNOWN_SIGNED_PAYLOAD), as with a line end after it.
        case .unknown?, .otherPayload?:
            if let jws = prepared.jws, compactJWSHasWholeSignature(jws) { return nil }
            return "not a signed transaction, notification or renewal info"
        default: return nil
        }
    }

    /// How a verified signed record was verified, as its record keeps it (`trace` shows it):
    /// the root its chain led to named, and said when it is not Apple's.
    static func verifiedNote(_ what: String, signedMs: Int64?, anchor: SignedDataAnchor?) -> String {
        let root = anchor.map { $0.isApple ? "the trusted root \($0.name)" : "the trusted root \($0.name), not Apple Root CA - G3 (test data, or not Apple's)" }
            ?? "a trusted root"
        return "\(what): ES256 signature and x5c chain verified to \(root), Apple OIDs present, valid at signedDate \(signedMs.map { Day(epochMilliseconds: $0).description } ?? "(none)")"
    }

    /// Counts a record verified to a root other than Apple's (the night's summary says them).
    mutating func noteAnchor(_ anchor: SignedDataAnchor?, environment: String?) {
        guard let anchor, !anchor.isApple else { return }
        otherRoots[anchor.name, default: (0, 0)].records += 1
        if environment?.lowercased() == "production" { otherRoots[anchor.name, default: (0, 0)].production += 1 }
    }

    mutating func signedTransaction(_ result: Result<SignedTransaction, SignedDataRejection>, jws: String, fileId: Int64,
                                    location: SourceLocation, sha: String, raw: RecordText) throws {
        switch result {
        case .failure(let why):
            try reject(fileId: fileId, location: location, sha: sha, code: why.code, reason: why.description, raw: raw,
                       transactionIds: unverifiedTransactionIds(ofCompactJWS: jws))
        case .success(let t):
            let recordId = try writer.addRecord(.init(fileId: fileId, line: location.line, sha256: sha, outcome: .verified,
                                                      reasonCode: "JWS_VERIFIED", reason: Self.verifiedNote("signed transaction", signedMs: t.signedDateMs, anchor: t.anchor),
                                                      environment: t.environment, raw: raw))
            counts.verified += 1
            noteAnchor(t.anchor, environment: t.environment)
            try observeSigned(t, recordId: recordId, location: location)
        }
    }

    /// False when the transaction is invalid or contradicts the stored one.
    @discardableResult
    mutating func observeSigned(_ t: SignedTransaction, recordId: Int64, location: SourceLocation,
                                refundSaidByCaller: Bool = false) throws -> Bool {
        switch t.observation() {
        case .success(let obs):
            return try observe(obs, recordId: recordId, location: location, refundSaidByCaller: refundSaidByCaller)
        case .failure(let why):
            try openRecordFinding(code: "INVALID_TRANSACTION", transactionId: t.transactionId, recordId: recordId, location: location,
                                  saying: "\(why.message); nothing of this record is taken (no sale, no refund from it)")
            try noteRefused("INVALID_TRANSACTION", transactionId: t.transactionId, recordId: recordId)
            return false
        }
    }

    mutating func notification(_ result: Result<SignedNotification, SignedDataRejection>, jws: String, fileId: Int64,
                               location: SourceLocation, sha: String, raw: RecordText) throws {
        let n: SignedNotification
        switch result {
        case .failure(let why):
            try reject(fileId: fileId, location: location, sha: sha, code: why.code, reason: why.description, raw: raw,
                       transactionIds: unverifiedTransactionIds(ofCompactJWS: jws))
            return
        case .success(let v): n = v
        }
        let type = n.notificationType + (n.subtype.map { "/\($0)" } ?? "")
        let recordId = try writer.addRecord(.init(fileId: fileId, line: location.line, sha256: sha, outcome: .verified,
                                                  reasonCode: "JWS_VERIFIED",
                                                  reason: Self.verifiedNote("notification \(type) \(n.notificationUUID)", signedMs: n.signedDateMs, anchor: n.anchor)
                                                      + (n.transaction == nil ? "; it carries no transaction (a test, a summary, a notice of renewal or consent), so nothing is posted from it" : ""),
                                                  environment: n.environment, raw: raw))
        counts.verified += 1
        // The book is its transaction's (a notification saying Sandbox may carry a production
        // transaction, and one may say no environment at all).
        noteAnchor(n.anchor, environment: n.transaction?.environment ?? n.environment)
        let fresh = try writer.addNotification(uuid: n.notificationUUID, recordId: recordId, runId: runId,
                                               type: n.notificationType, subtype: n.subtype, signedMs: n.signedDateMs,
                                               environment: n.environment, transactionId: n.transaction?.transactionId)
        // notificationUUID: a resent notification changes nothing (it is only linked for the trace).
        guard fresh else {
            // Sent again, a notification is the same (it is only linked for the trace). One
            // saying something else under a UUID read before (another type, another
            // transaction) is not Apple's resend: it asks for nothing as a notification (no
            // reversal), its signed transaction is read as any signed transaction is (a
            // refund it carries posts), and the reuse is said, not passed over.
            if let first = try writer.notification(uuid: n.notificationUUID),
               first.type != n.notificationType || first.subtype != n.subtype || first.transactionId != n.transaction?.transactionId {
                let firstType = first.type + (first.subtype.map { "/\($0)" } ?? "")
                let about = n.transaction?.transactionId ?? first.transactionId ?? n.notificationUUID
                // Said once: the same notification sent again (Apple retries) is the same reuse.
                let said = "notification \(type)\(n.transaction.map { " of transaction \($0.transactionId)" } ?? "") repeats the notificationUUID \(n.notificationUUID) of"
                if try !writer.findingSaid(code: "NOTIFICATION_UUID_REUSED", transactionId: about, containing: said) {
                    try writer.openFinding(code: "NOTIFICATION_UUID_REUSED", transactionId: about, recordId: recordId,
                                           message: "\(location): \(said) \(firstType)\(first.transactionId.map { " of transaction \($0)" } ?? "") read from \(first.location), with other content: Apple sends a notification again unchanged under its UUID, so nothing is asked for by this one as a notification (a refund reversal, a second refund); its signed transaction is read as any signed transaction is (a refund it carries posts). If it asks for more, book that by hand, then dismiss this finding",
                                           runId: runId)
                }
                if let t = n.transaction { _ = try observeSigned(t, recordId: recordId, location: location) }
                return
            }
            if let id = n.transaction?.transactionId { try writer.linkSource(transactionId: id, recordId: recordId) }
            return
        }
        guard let t = n.transaction else { return }
        // The refund the transaction already had, before this record: a REFUND that brings
        // another one after the refund was reversed is a second refund (below).
        let refundedBefore = n.notificationType == "REFUND" ? try writer.transaction(t.transactionId)?.observation.cancellationMs : nil
        // A reversal is requested only by a notification whose transaction agrees with the stored one.
        // A REFUND's other refund date is said below (REFUND_AGAIN or REFUND_AFTER_REVERSAL).
        let agrees = try observeSigned(t, recordId: recordId, location: location, refundSaidByCaller: n.notificationType == "REFUND")
        if agrees, n.notificationType == "REFUND_REVERSED", let env = t.environment, let book = Book(storeEnvironment: env) {
            let reversedMs = n.signedDateMs ?? t.signedDateMs ?? t.purchaseDateMs ?? 0
            let day = Day(epochMilliseconds: reversedMs)
            if let first = try writer.reversalRequest(book: book, transactionId: t.transactionId) {
                // The ledger keeps one reversal per transaction (as one refund): a second
                // REFUND_REVERSED under a new UUID posts nothing. Said, not waited on: after a
                // REFUND_AFTER_REVERSAL booked by hand it is a real one, to be booked by hand too.
                try writer.setStoreRefundShare(transactionId: t.transactionId, share: 0, atMs: reversedMs)
                // Said once per reversal (its signed day): one sent again under a new UUID is the same.
                let again = "reverses transaction \(t.transactionId) again (signed \(day))"
                if try !writer.findingSaid(code: "REVERSAL_REPEATED", transactionId: t.transactionId, containing: again) {
                    try writer.openFinding(code: "REVERSAL_REPEATED", transactionId: t.transactionId, recordId: recordId,
                                           message: "\(location): REFUND_REVERSED \(n.notificationUUID) \(again): its refund reversal was already asked for by REFUND_REVERSED \(first.uuid) (dated \(first.date)); the ledger keeps one reversal per transaction, so nothing is posted from this one. If the transaction was refunded again after its reversal (REFUND_AFTER_REVERSAL), finance books this reversal by hand too",
                                           runId: runId)
                }
            } else {
                try writer.requestReversal(book: book, transactionId: t.transactionId, date: day, notificationUUID: n.notificationUUID)
                // A second refund read before this reversal and dated before it is reversed too;
                // but the refund the ledger holds, dated after it (a later refund read first, the
                // earlier one said as REFUND_AGAIN), stays the store's last word.
                if let held = try writer.transaction(t.transactionId)?.observation, let heldMs = held.cancellationMs,
                   Day(epochMilliseconds: heldMs) > day {
                    try writer.setStoreRefundShare(transactionId: t.transactionId, share: held.revocationPercentage ?? 100_000, atMs: heldMs)
                    // The books post this reversal of that refund all the same: said.
                    try sayRefundAfterItsReversal(t.transactionId, refundMs: heldMs, reversal: (n.notificationUUID, day),
                                                  recordId: recordId, location: location)
                } else {
                    try writer.setStoreRefundShare(transactionId: t.transactionId, share: 0, atMs: reversedMs, onlyOverAnother: true)
                }
                // Whether it waits is known only after the posting stage: its refund may arrive
                // later this night (in this file or another) and post with it.
                reversalsAsked.append(.init(book: book, transactionId: t.transactionId, recordId: recordId,
                                            message: "\(location): REFUND_REVERSED \(n.notificationUUID) waits for the refund it reverses: none is posted for the transaction yet"))
            }
        }
        // A REFUND with another revocationDate for a transaction already refunded whose refund
        // reversal is asked for is a second refund: the ledger posts one refund per transaction
        // (accounting.md), so it is said, for finance to book by hand, not dropped. (A REFUND
        // read after a reversal waiting for it is the refund it reverses, arriving late; one
        // with the refund's own day is that refund sent again: its instant may differ by
        // minutes between sources.)
        if agrees, n.notificationType == "REFUND", let revokedMs = t.revocationDateMs,
           let before = refundedBefore, Day(epochMilliseconds: before) != Day(epochMilliseconds: revokedMs),
           let env = t.environment, let book = Book(storeEnvironment: env) {
            // The store's last word for reconciliation: refunded again (its share).
            let share = t.revocationType == "REFUND_PRORATED" ? t.revocationPercentage ?? 100_000 : 100_000
            let how = share == 100_000 ? "in full" : "\(ExactDecimal(mantissa: share, scale: 3))%"
            let revokedDay = Day(epochMilliseconds: revokedMs)
            // The same second refund said before (another record of it): said once.
            let said = try writer.secondRefundSaid(transactionId: t.transactionId, day: revokedDay)
            if let reversal = try writer.reversalRequest(book: book, transactionId: t.transactionId) {
                // Dated after the reversal, it is the store's last word; on or before it, the
                // reversal the ledger keeps is.
                let after = revokedDay > reversal.date
                if after { try writer.setStoreRefundShare(transactionId: t.transactionId, share: share, atMs: revokedMs) }
                if !said {
                    // (Reconciliation takes the latest-dated word of all, which `trace` lists.)
                    // (Of the reversal's day, the refund may be hours after it: said as it is.)
                    let latest = after ? ""
                        : revokedDay == reversal.date ? ", dated the day of that reversal, which the ledger, comparing a refund and a reversal by day, takes as the later, whatever the hours: reconciliation follows that reversal (trace lists them)"
                        : ", dated before that reversal: reconciliation takes the store's latest-dated word (trace lists them)"
                    try writer.openFinding(code: "REFUND_AFTER_REVERSAL", transactionId: t.transactionId, recordId: recordId,
                                           message: "\(location): REFUND \(n.notificationUUID) refunds transaction \(t.transactionId) again (\(how), revoked \(revokedDay)), a second refund beside the one reversed by REFUND_REVERSED \(reversal.uuid) (dated \(reversal.date))\(latest): the ledger keeps one refund per transaction, so nothing is posted from it; finance must book this refund by hand",
                                           runId: runId)
                }
            } else {
                // No reversal yet: read before its REFUND_REVERSED (the same night, files in
                // another order, or Apple's deliveries out of order), this is a second refund all
                // the same; or a record contradicting the first. Either way it is said, not taken.
                try writer.setStoreRefundShare(transactionId: t.transactionId, share: share, atMs: revokedMs)
                if !said {
                    try writer.openFinding(code: "REFUND_AGAIN", transactionId: t.transactionId, recordId: recordId,
                                           message: "\(location): REFUND \(n.notificationUUID) reports transaction \(t.transactionId) refunded \(how) on \(revokedDay), but the ledger holds its refund of \(Day(epochMilliseconds: before)) (kept): nothing is posted from it. If Apple reversed the first refund (REFUND_REVERSED), this is a second refund, which finance books by hand",
                                           runId: runId)
                }
            }
        }
        // A REFUND whose transaction carries no refund date posts nothing: said, not silent
        // (resolved when a refund of the transaction posts).
        if agrees, n.notificationType == "REFUND", t.revocationDateMs == nil {
            try writer.openFinding(code: "REFUND_NOT_DATED", transactionId: t.transactionId, recordId: recordId,
                                   message: "\(location): REFUND \(n.notificationUUID) carries a transaction with no revocationDate: no refund is posted until a record of the transaction reports one",
                                   runId: runId)
        }
    }
}
