import Foundation

/// Access to the files in `templates/`, shipped with the tool as resources.
public enum LedgerTemplates {
    /// The example workspace (`iapledger.toml` and `rules/`) that `iapledger init` copies.
    public static func workspaceDirectory() -> URL? {
        Bundle.module.url(forResource: "workspace", withExtension: nil)
    }

    /// A shipped workbook layout (`workspace/layouts/finance.toml`, ...): the default when a
    /// workspace has no `layouts/<name>` of its own.
    public static func layoutURL(_ fileName: String) -> URL? {
        workspaceDirectory()?.appendingPathComponent("layouts").appendingPathComponent(fileName)
    }
}
