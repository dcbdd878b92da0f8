// Platform-independent pseudo-random numbers for the demo generator.
//
// The demo must be byte-identical for a given seed on every machine, so it never touches
// the system generator: SplitMix64 expands seeds and hashes indexes, xoshiro256** draws
// the stream. Both are the published reference algorithms (Vigna, Blackman).

/// SplitMix64: a seed expander and a stateless 64-bit mixer.
struct DemoSplitMix64 {
    var state: UInt64

    init(_ seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return DemoSplitMix64.mix(state)
    }

    /// The SplitMix64 finalizer: a good hash of one 64-bit value.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// xoshiro256**: the generator behind every random choice of the demo.
struct DemoRandom {
    private var s0: UInt64, s1: UInt64, s2: UInt64, s3: UInt64

    init(seed: UInt64, stream: UInt64) {
        var expander = DemoSplitMix64(seed ^ DemoSplitMix64.mix(stream &+ 0x5DEE_CE66))
        s0 = expander.next(); s1 = expander.next(); s2 = expander.next(); s3 = expander.next()
        if s0 | s1 | s2 | s3 == 0 { s0 = 1 }
    }

    @inline(__always)
    mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3
        s2 ^= t
        s3 = (s3 << 45) | (s3 >> 19)
        return result
    }

    /// A uniform integer in `0..<bound` (Lemire's multiply-high; bias is negligible here).
    @inline(__always)
    mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0, "below(0)")
        return Int(UInt64(bound).multipliedFullWidth(by: next()).high)
    }

    /// A uniform integer in `low...high`.
    @inline(__always)
    mutating func inRange(_ low: Int, _ high: Int) -> Int {
        return low + below(high - low + 1)
    }

    /// True with probability `basisPoints / 10_000`.
    @inline(__always)
    mutating func chance(_ basisPoints: Int) -> Bool {
        return below(10_000) < basisPoints
    }

    /// An index into `weights`, each drawn with probability proportional to its weight.
    mutating func weighted(_ weights: [Int], total: Int) -> Int {
        var roll = below(total)
        for (index, weight) in weights.enumerated() {
            if roll < weight { return index }
            roll -= weight
        }
        return weights.count - 1
    }
}
