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
        var s = ""
        append(entryId: entryId, entry: e, rulesJSON: rulesJSON, to: &s)
        return s
    }

    /// `canonical`, appended to `s` field by field into one buffer (an entry a million times a night).
    static func append(entryId: Int64, entry e: EntryDraft, rulesJSON: String, to s: inout String) {
        let f = e.figures
        s.reserveCapacity(s.utf8.count + rulesJSON.utf8.count + 256 + 64 * e.postings.count)
        s += "entry "; s += String(entryId)
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
    }

    public static func hash(previous: String, entryId: Int64, entry: EntryDraft, rulesJSON: String) -> String {
        var text = previous
        text += "\n"
        append(entryId: entryId, entry: entry, rulesJSON: rulesJSON, to: &text)
        return text.withUTF8 { Hashing.sha256Hex(UnsafeRawBufferPointer($0)) }
    }
}
