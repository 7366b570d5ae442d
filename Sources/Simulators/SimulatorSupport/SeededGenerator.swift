/// A SplitMix64 random generator: tiny, fast and fully determined by its seed, so a simulator's faults
/// replay exactly for the same seed and the same requests.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator; `nil` picks a random seed.
    public init(seed: UInt64?) { state = seed ?? UInt64.random(in: .min ... .max) }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform draw from `0..<1` (53 bits).
    public mutating func nextUnit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
