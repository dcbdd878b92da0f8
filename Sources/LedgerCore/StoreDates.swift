/// Bounds on what store data can plausibly hold. A value outside them is a broken record
/// (kept as a finding or rejected, with the reason), never posted, and never let near
/// arithmetic that could overflow.
public enum StoreDates {
    /// 2008-01-01T00:00:00Z (the App Store opened in July 2008).
    public static let earliestMs: Int64 = 1_199_145_600_000
    /// 2100-01-01T00:00:00Z, exclusive.
    public static let endMs: Int64 = 4_102_444_800_000

    /// Inside 2008-2099.
    public static func plausible(_ ms: Int64) -> Bool { ms >= earliestMs && ms < endMs }

    /// The largest signed price accepted, in milliunits: 10 billion units of any currency, far
    /// above any App Store price, and small enough that no figure or sum of figures derived from
    /// it can overflow 64-bit minor units.
    public static let maxPriceMilliunits: Int64 = 10_000_000_000_000
}
