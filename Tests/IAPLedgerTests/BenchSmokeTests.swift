import Foundation
import XCTest

/// `make bench` is not part of `make test` (a million transactions take minutes), so its
/// binary is run here at a small size: a change that breaks the benchmark fails the suite, not
/// the next benchmark (schema v35's guards refused the store floor's copy of findings, and the
/// benchmark stopped after night 1). Nothing here is timed.
final class BenchSmokeTests: XCTestCase {
    func testTheBenchmarkRunsBothNightsAndTheirFloorsAtASmallSize() throws {
        let bench = TraceAndCLITests.binary.deletingLastPathComponent().appendingPathComponent("iapledger-bench")
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: bench.path), "iapledger-bench is built beside the tests (swift build --build-tests builds every product)")
        let dir = Resilience.scratch("bench")
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try Resilience.cli(["--transactions", "1500", "--seed", "5", "--dir", dir.appendingPathComponent("workspace").path, "--skip-writer-comparison"],
                                   binary: bench)
        let text = r.out + r.err
        XCTAssertEqual(r.status, 0, text)
        for heading in ["== night 1: iapledger run", "== store floor, night 1:", "== night 2 (incremental): iapledger run", "== store floor, night 2:"] {
            XCTAssertTrue(text.contains(heading), "\(heading) in:\n\(text)")
        }
    }
}
