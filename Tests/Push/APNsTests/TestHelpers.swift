import Foundation

@testable import APNs

/// A deterministic random source (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A random source that always returns the same value (0 or all ones pin jitter to its bounds).
struct ConstantGenerator: RandomNumberGenerator {
    var value: UInt64

    mutating func next() -> UInt64 { value }
}

/// A 64-character hex device token derived from `index`.
func testDeviceToken(_ index: Int) -> DeviceToken {
    try! DeviceToken(String(repeating: "ab", count: 28) + String(format: "%08x", index))
}

let testTopic = try! APNsTopic("com.example.signalfetch")
