import Foundation

/// The files in `templates/workspace`, compiled into the tool (SwiftPM's `embedInCode`): the
/// example workspace that `iapledger init` writes and the shipped workbook layouts. A test
/// holds them equal to the files in the repository.
public enum LedgerTemplates {
    /// Every file of the example workspace, by its path under `templates/workspace/`.
    public static let workspaceFiles: [(path: String, bytes: [UInt8])] = [
        ("iapledger.toml", PackageResources.iapledger_toml),
        ("rules/storefronts.csv", PackageResources.storefronts_csv),
        ("rules/prices.csv", PackageResources.prices_csv),
        ("rules/products.csv", PackageResources.products_csv),
        ("rules/fx.csv", PackageResources.fx_csv),
        ("layouts/finance.toml", PackageResources.finance_toml),
        ("layouts/sandbox.toml", PackageResources.sandbox_toml),
        ("layouts/reconciliation.toml", PackageResources.reconciliation_toml),
    ]

    /// One file of the example workspace (`rules/fx.csv`, `layouts/finance.toml`), nil if none.
    public static func workspaceFile(_ path: String) -> Data? {
        workspaceFiles.first { $0.path == path }.map { Data($0.bytes) }
    }

    /// A shipped workbook layout (`finance.toml`, ...): the default when a workspace has no
    /// `layouts/<name>` of its own.
    public static func layout(_ fileName: String) -> Data? { workspaceFile("layouts/\(fileName)") }
}
