import Foundation

/// Process-wide settings a server with thousands of connections needs.
public enum ProcessResources {
    /// Raises the soft open-file limit to the hard limit (each notification stream holds a socket)
    /// and returns the new soft limit.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return Int(clamping: limit.rlim_cur)
    }
}
