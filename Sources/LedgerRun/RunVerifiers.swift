import Foundation
import LedgerCore
import LedgerRead
import LedgerStore
import LedgerVerify

/// The verifiers `verify` checks each run's records again with: the bundle ids of the config
/// that run kept and the roots it recorded verifying signed data to (`run_input`), not the
/// config on disk now. A bundle id retired since (an app renamed) or a root taken out of
/// `trusted_roots` (a test root, once the app is live) is a change of config, not tampering:
/// checked against today's config, every record it let in would be said to no longer verify.
///
/// A run that kept no config (before schema v26) is checked by the bundle ids on disk; one that
/// recorded no roots (before v22), by the roots on disk. A root is found by its fingerprint:
/// Apple Root CA - G3 (built in), the certificate kept in the ledger (`input_text`, from this
/// version on), or a certificate `trusted_roots` names now. One found nowhere is said
/// (`notes`): the signed records its run read are checked against the roots it still can.
final class RunVerifiers: @unchecked Sendable {
    struct Pair {
        let receipts: ReceiptVerifier
        let signed: SignedDataVerifier
    }

    let current: Pair
    private(set) var byRun: [Int64: Pair] = [:]
    /// Roots `trusted_roots` names that cannot be read: said, not a problem of the ledger (the
    /// records are checked against the copies the ledger kept).
    private(set) var notes: [String] = []

    func forRun(_ runId: Int64) -> Pair { byRun[runId] ?? current }

    init(config: WorkspaceConfig, workspace: Workspace, reader: LedgerReader) throws {
        // Today's roots, each that can be read (a root file gone stops no check of the runs
        // that recorded another).
        let (onDisk, unreadableRoots) = try NightlyRun.readTrustedRoots(config: config, workspace: workspace)
        let apple = onDisk[0].der
        let unreadable = Set(unreadableRoots.map(\.name))
        let currentKey = Self.key(bundleIds: config.bundleIds, roots: onDisk.map { Hashing.sha256Hex($0.der) })
        current = Pair(receipts: ReceiptVerifier(bundleIds: config.bundleIds),
                       signed: try SignedDataVerifier(trustedRootsDER: onDisk.map(\.der), bundleIds: config.bundleIds))
        for r in unreadableRoots {
            notes.append("trusted_roots names \(r.name), which cannot be read (\(r.why)); the signed records of the runs that verified to it are checked against the copy the ledger kept (the next night stops on it)")
        }
        var byFingerprint: [String: Data] = [:]
        for r in onDisk { byFingerprint[Hashing.sha256Hex(r.der)] = r.der }
        var made: [String: Pair] = [currentKey: current]
        var missingSaid = Set<String>()
        // Bundle ids and roots earlier nights verified with that the config no longer names:
        // said (a change of config, not of the ledger), with the nights.
        var retired: [String: (first: Int64, last: Int64)] = [:]
        func retire(_ what: String, _ runId: Int64) { retired[what] = (retired[what]?.first ?? runId, runId) }
        let currentFingerprints = Set(onDisk.map { Hashing.sha256Hex($0.der) })
        for runId in try reader.finishedRunIds() {
            var bundleIds = config.bundleIds
            if let text = try Self.keptConfig(of: runId, reader: reader),
               let c = try? ConfigReader.parse(text, displayPath: "iapledger.toml (kept)") { bundleIds = c.bundleIds }
            for id in Set(bundleIds).subtracting(config.bundleIds) { retire("bundle_ids no longer lists \(id)", runId) }
            var ders = onDisk.map(\.der)
            if let recorded = try reader.runRoots(runId) {
                ders = []
                for root in recorded {
                    if !currentFingerprints.contains(root.sha256) && !unreadable.contains(root.name) {
                        retire("trusted_roots no longer names the root \(root.name)", runId)
                    }
                    if let der = byFingerprint[root.sha256] { ders.append(der); continue }
                    if let kept = try reader.inputText(sha256: root.sha256) {
                        let der = Data(kept)
                        byFingerprint[root.sha256] = der
                        ders.append(der)
                        continue
                    }
                    if missingSaid.insert(root.sha256).inserted {
                        // Said, not a problem: the run may have verified nothing to it; a record
                        // that needed it fails below, for that.
                        notes.append("run \(runId) trusted the root \(root.name) (SHA-256 \(root.sha256)), which the ledger does not hold (versions before 2026-11-27 kept no root) and trusted_roots no longer names: the signed records of the runs that trusted it are checked against the roots they still can, and one that needed it is said not to verify; name the certificate in trusted_roots again to check them")
                    }
                }
                if ders.isEmpty { ders = [apple] }
            }
            let key = Self.key(bundleIds: bundleIds, roots: ders.map { Hashing.sha256Hex($0) })
            if key == currentKey { continue }
            if made[key] == nil {
                made[key] = Pair(receipts: ReceiptVerifier(bundleIds: bundleIds),
                                 signed: try SignedDataVerifier(trustedRootsDER: ders, bundleIds: bundleIds))
            }
            byRun[runId] = made[key]
        }
        for (what, runs) in retired.sorted(by: { $0.key < $1.key }) {
            notes.append("iapledger.toml's \(what), which \(runs.first == runs.last ? "run \(runs.first)" : "runs \(runs.first) to \(runs.last)") verified records with: their records are checked by the config and roots those runs kept, as they verified them")
        }
    }

    static func key(bundleIds: [String], roots: [String]) -> String {
        Set(bundleIds).sorted().joined(separator: "\u{1F}") + "\u{1E}" + Set(roots).sorted().joined(separator: "\u{1F}")
    }

    /// The config run `runId` kept, as text; nil when it kept none.
    static func keptConfig(of runId: Int64, reader: LedgerReader) throws -> String? {
        guard try reader.keepsInputTexts(),
              let file = try reader.runFiles(runId).first(where: { $0.path == "iapledger.toml" }),
              let bytes = try reader.inputText(sha256: file.sha256) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
