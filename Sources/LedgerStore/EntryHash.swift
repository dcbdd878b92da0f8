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
        let f = e.figures
        var s = "entry \(entryId)|\(e.book.rawValue)|\(e.transactionId)|\(e.kind.rawValue)|\(e.date)|\(e.originalDate)|\(e.late ? 1 : 0)|"
        s += "\(e.productId)|\(e.storefront)|\(f.currency)|\(f.reportingCurrency)|\(f.grossMinor)|\(f.taxMinor)|\(f.netMinor)|"
        s += "\(f.commissionMinor)|\(f.proceedsMinor)|\(f.grossReportingMinor)|\(f.netReportingMinor)|\(f.commissionReportingMinor)|\(f.proceedsReportingMinor)|"
        s += "\(e.refundPercentage.map(String.init) ?? "-")|\(rulesJSON)\n"
        for p in e.postings {
            s += "posting \(p.account)|\(p.currency)|\(p.amountMinor)|\(p.reportingAmountMinor)\n"
        }
        return s
    }

    public static func hash(previous: String, entryId: Int64, entry: EntryDraft, rulesJSON: String) -> String {
        Hashing.sha256Hex(Data((previous + "\n" + canonical(entryId: entryId, entry: entry, rulesJSON: rulesJSON)).utf8))
    }
}
