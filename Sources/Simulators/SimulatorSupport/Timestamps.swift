import Foundation

/// `date` as whole milliseconds since 1970 (rounded down): how every simulator's logs and answers write a time.
public func millisecondsSince1970(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
}
