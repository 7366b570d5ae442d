import APNs
import APNsSimulator
import Foundation

/// The two payload checks, each against `JSONSerialization`.
enum PayloadFuzz {
    static let guardStandard = PayloadGuard(limit: .standard)

    /// The guard passes only what `JSONSerialization` reads as an object of `aps` (with an integer `badge`
    /// and/or `content-available` 1), `acct` and `st` strings, within 4096 bytes.
    static func guardAgainstFoundation(_ bytes: Data) {
        let passed: Bool
        do {
            try guardStandard.inspect(bytes)
            passed = true
        } catch {
            passed = false
        }
        guard passed else { return }
        guard bytes.count <= 4096 else { violated("the guard passed \(bytes.count) bytes") }
        guard let object = (try? JSONSerialization.jsonObject(with: bytes)) as? [String: Any] else {
            violated("the guard passed what JSONSerialization does not read as an object")
        }
        guard Set(object.keys).isSubset(of: ["aps", "acct", "st"]) else { violated("a key outside aps/acct/st") }
        if let aps = object["aps"] {
            guard let aps = aps as? [String: Any], Set(aps.keys).isSubset(of: ["badge", "content-available"]),
                !aps.isEmpty
            else { violated("aps is not badge/content-available") }
            if let badge = aps["badge"] {
                guard let number = badge as? NSNumber, number.intValue >= 0,
                    Double(number.intValue) == number.doubleValue
                else { violated("badge is not a non-negative integer") }
            }
            if let available = aps["content-available"] {
                guard (available as? NSNumber)?.doubleValue == 1 else {
                    violated("content-available is not 1")
                }
            }
        }
        for key in ["acct", "st"] where object[key] != nil {
            guard let text = object[key] as? String, (1...64).contains(text.utf8.count) else {
                violated("\(key) is not a short string")
            }
        }
    }

    /// Wherever the byte-level scan decides, it says what `JSONSerialization` says.
    static func scanAgainstFoundation(_ bytes: Data) {
        guard let scanned = PayloadCheck.scan(bytes) else { return }
        let reference = PayloadCheck.foundationCheck(bytes)
        switch (scanned, reference) {
        case (.notAnObject, .notAnObject): return
        case (.object(nil), .object): return
        case (.object(let a), .object(let b)) where a == b: return
        default: violated("scan \(scanned) but JSONSerialization \(reference)")
        }
    }
}
