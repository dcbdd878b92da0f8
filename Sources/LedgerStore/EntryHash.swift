import Foundation
import LedgerCore

/// The ledger's hash chain: each entry's hash covers its content, its postings and the
/// previous entry's hash, so editing, deleting or reordering any stored entry or posting
/// breaks every hash from there on (`iapledger verify` names the first one).
public enum EntryHash {
    public static let genesis = String(repeating: "0", count: 64)

    /// The canonical text hashed for one entry: one line per field group, integers in
    /// decimal, in a fixed order (never JSON of a dictionary, whose order could vary).
    public static func canonical(entryId: Int64, entry e: EntryDraft, rulesJSON: String) -> String {
        "entry " + String(entryId) + body(entry: e, rulesJSON: rulesJSON)
    }

    /// The canonical text after `entry <id>`, field by field into one buffer (an entry a
    /// million times a night): everything but the id, so it can be made before the entry's
    /// place in the ledger is known (`PreparedEntry`).
    static func body(entry e: EntryDraft, rulesJSON: String) -> String {
        var s = ""
        s.reserveCapacity(rulesJSON.utf8.count + 256 + 64 * e.postings.count)
        let f = e.figures
        for field in [e.book.rawValue, e.transactionId, e.kind.rawValue, e.date.description, e.originalDate.description,
                      e.late ? "1" : "0", e.productId, e.storefront, f.currency, f.reportingCurrency] {
            s += "|"; s += field
        }
        for n in [f.grossMinor, f.taxMinor, f.netMinor, f.commissionMinor, f.proceedsMinor, f.grossReportingMinor,
                  f.netReportingMinor, f.commissionReportingMinor, f.proceedsReportingMinor] {
            s += "|"; s += String(n)
        }
        s += "|"; s += e.refundPercentage.map(String.init) ?? "-"
        s += "|"; s += rulesJSON; s += "\n"
        for p in e.postings {
            s += "posting "; s += p.account; s += "|"; s += p.currency
            s += "|"; s += String(p.amountMinor); s += "|"; s += String(p.reportingAmountMinor); s += "\n"
        }
        return s
    }

    public static func hash(previous: String, entryId: Int64, entry: EntryDraft, rulesJSON: String) -> String {
        hash(previous: previous, entryId: entryId, body: body(entry: entry, rulesJSON: rulesJSON))
    }

    /// The hash of an entry whose canonical text after its id is `body`.
    static func hash(previous: String, entryId: Int64, body: String) -> String {
        var text = previous
        text.reserveCapacity(previous.utf8.count + body.utf8.count + 32)
        text += "\nentry "
        text += String(entryId)
        text += body
        return text.withUTF8 { Hashing.sha256Hex(UnsafeRawBufferPointer($0)) }
    }
}

/// An entry made ready to store: its rules as canonical JSON and its hashed text but for its
/// id and the previous entry's hash, the only parts that need the ledger. The posting stage
/// prepares a batch of sales on a second thread while the writer stores the batch before.
public struct PreparedEntry: Sendable {
    public let entry: EntryDraft
    public let rulesJSON: String
    let hashBody: String
    /// Debits equal credits (checked here, on the preparing thread; `insertEntry` refuses an
    /// entry that is not).
    let isBalanced: Bool
    /// Its postings are the ones its kind's rules give from its amounts, the only ones the
    /// ledger can show for it (checked here too; `insertEntry` refuses an entry whose are not).
    let followsPostingRules: Bool

    public init(_ entry: EntryDraft) {
        self.entry = entry
        rulesJSON = entry.rules.canonicalJSON
        hashBody = EntryHash.body(entry: entry, rulesJSON: rulesJSON)
        isBalanced = entry.isBalanced
        followsPostingRules = entry.followsPostingRules
    }
}
