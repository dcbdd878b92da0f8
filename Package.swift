// swift-tools-version:6.0
// iapledger: nightly in-app-purchase books. Targets follow the pipeline:
// read -> verify -> post -> store -> (reconcile) -> report -> write -> (trace),
// orchestrated by LedgerRun and driven by the thin `iapledger` executable.
import PackageDescription

let package = Package(
    name: "iapledger",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "iapledger", targets: ["iapledger"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        // Tests only: reads the written .xlsx files back.
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
    ],
    targets: [
        // libxlsxwriter from Debian's libxlsxwriter-dev, found through pkg-config.
        .systemLibrary(
            name: "CXlsxWriter",
            pkgConfig: "xlsxwriter",
            providers: [.apt(["libxlsxwriter-dev"])]
        ),
        // zlib from Debian's zlib1g-dev, for the gzip journal export.
        .systemLibrary(name: "CGzip", providers: [.apt(["zlib1g-dev"])]),
        // Zstandard (Debian's libzstd-dev): the source records' text, compressed in the ledger.
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        // The system SQLite's process-wide settings (sqlite3_config is variadic: a C wrapper).
        .systemLibrary(name: "CSQLiteTuning", providers: [.apt(["libsqlite3-dev"])]),
        // glibc's malloc.h (malloc_trim): the read stage hands memory back after each big file.
        .systemLibrary(name: "CMalloc"),
        // sys/xattr.h: report files take the default ACL of the folder they are renamed into.
        .systemLibrary(name: "CXattr"),
        // Money, exact decimals, currencies, days, and the domain types every stage shares.
        .target(name: "LedgerCore", dependencies: [
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        // Read: workspace config, rules CSVs, receipt responses, signed data, orders.
        .target(name: "LedgerRead", dependencies: [
            "LedgerCore",
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        // Verify: receipt status outcomes, bundle and environment checks, JWS chains.
        .target(name: "LedgerVerify", dependencies: [
            "LedgerCore", "LedgerRead",
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "Crypto", package: "swift-crypto"),
        ], resources: [.embedInCode("Roots/AppleRootCA-G3.der")]),
        // Post: the accounting contract as pure functions (transaction + rules -> entries).
        .target(name: "LedgerPost", dependencies: ["LedgerCore"]),
        // Reconcile: store transactions against the backend's credits (pure functions).
        .target(name: "LedgerReconcile", dependencies: ["LedgerCore"]),
        // Store: the only target that talks to SQLite (through GRDB).
        .target(name: "LedgerStore", dependencies: [
            "LedgerCore", "LedgerReconcile", "CZstd", "CSQLiteTuning",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
        ]),
        // Report: plain-data report models (trial balance, journal, run info), laid out by the
        // layout files (TOML) shipped in `templates/` or kept in the workspace.
        .target(name: "LedgerReport", dependencies: [
            "LedgerCore", "LedgerStore", "LedgerReconcile", "LedgerTemplates",
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        // Write: the only target that talks to libxlsxwriter.
        .target(name: "LedgerWrite", dependencies: [
            "LedgerCore", "LedgerReport", "CXlsxWriter", "CGzip", "CXattr",
            // Reading a finished workbook back whole before it is put in place (`XLSXCheck`).
            .product(name: "ZIPFoundation", package: "ZIPFoundation"),
        ]),
        // Demo: a seeded generator of realistic workspaces.
        .target(name: "LedgerDemo", dependencies: ["LedgerCore"]),
        // Templates: the example workspace (config, rules) and report layouts, kept in the
        // top-level `templates/` folder and compiled into the binary (a copied binary needs no
        // resource folder beside it, and never reads another build's).
        .target(name: "LedgerTemplates", path: "templates",
                exclude: ["README.md"],
                sources: ["LedgerTemplates.swift"],
                resources: [
                    .embedInCode("workspace/iapledger.toml"),
                    .embedInCode("workspace/rules/storefronts.csv"), .embedInCode("workspace/rules/prices.csv"),
                    .embedInCode("workspace/rules/products.csv"), .embedInCode("workspace/rules/fx.csv"),
                    .embedInCode("workspace/layouts/finance.toml"), .embedInCode("workspace/layouts/sandbox.toml"),
                    .embedInCode("workspace/layouts/reconciliation.toml"),
                ]),
        // Run: the nightly pipeline and the workspace commands.
        .target(name: "LedgerRun", dependencies: [
            "LedgerCore", "LedgerRead", "LedgerVerify", "LedgerPost", "LedgerStore", "LedgerReconcile",
            "LedgerReport", "LedgerWrite", "LedgerDemo", "LedgerTemplates", "CMalloc",
            // Reading a workbook's sheet names back (trace checks the sheet it names is there).
            .product(name: "ZIPFoundation", package: "ZIPFoundation"),
        ]),
        .executableTarget(name: "iapledger", dependencies: [
            "LedgerRun", "LedgerCore", "LedgerStore", "LedgerReport",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The benchmark `make bench` runs: generates a workspace, times a night and an
        // incremental night, and compares workbook writing with libxlsxwriter's C API.
        .executableTarget(name: "iapledger-bench", dependencies: [
            "LedgerRun", "LedgerCore", "LedgerStore", "LedgerReport", "LedgerWrite", "CXlsxWriter",
            // GRDB for the store floor only: SQLite copying a night's rows, no iapledger code.
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "X509", package: "swift-certificates"),
        ], path: "Benchmarks/IAPLedgerBench"),
        .testTarget(name: "IAPLedgerTests", dependencies: [
            "LedgerCore", "LedgerRead", "LedgerVerify", "LedgerPost", "LedgerStore", "LedgerReconcile",
            "LedgerReport", "LedgerWrite", "LedgerDemo", "LedgerRun", "LedgerTemplates", "CXattr",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "ZIPFoundation", package: "ZIPFoundation"),
        ], resources: [.copy("Fixtures")]),
    ],
    swiftLanguageModes: [.v5]
)
