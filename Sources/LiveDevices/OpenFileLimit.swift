import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open files, which bounds a live run's connections: each is a socket
/// here, and with the embedded server and the fault proxy in the same process, up to four.
public enum OpenFileLimit {
    /// Raises the soft limit to the hard one, and the hard one to the kernel's ceiling where the
    /// process may (root), as load tools do (wrk, Locust): the default soft limit (often 1,024)
    /// would refuse connections long before the server did. Returns the limit now in force.
    @discardableResult
    public static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        var wanted = limit
        wanted.rlim_cur = limit.rlim_max
        // A process with CAP_SYS_RESOURCE may lift the hard limit too, up to fs.nr_open.
        if let ceiling = kernelCeiling(), ceiling > limit.rlim_max {
            var lifted = wanted
            lifted.rlim_max = ceiling
            lifted.rlim_cur = ceiling
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lifted) == 0 { return Int(ceiling) }
        }
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &wanted) == 0 { return Int(wanted.rlim_cur) }
        return Int(limit.rlim_cur)
    }

    /// The limit in force now.
    public static var current: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(min(limit.rlim_cur, rlim_t(Int.max / 2)))
    }

    private static func kernelCeiling() -> rlim_t? {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/nr_open", encoding: .utf8) else { return nil }
        return rlim_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
