import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open files (`ulimit -n`), which bounds a live process's connections:
/// the server's and the load generator's. Here, below both.
package enum OpenFileLimit {
    /// Raises the soft limit to the hard one: the default soft limit (often 1,024) would refuse
    /// connections long before the machine did. With `liftingHardLimit`, as load tools do (wrk,
    /// Locust), a process that may (root) also lifts the hard limit to the kernel's ceiling; a
    /// server does not, since its connection cap follows the limit. Returns the limit now in force.
    @discardableResult
    package static func raise(liftingHardLimit: Bool) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return current }
        var wanted = limit
        wanted.rlim_cur = limit.rlim_max
        // A process with CAP_SYS_RESOURCE may lift the hard limit too, up to fs.nr_open.
        if liftingHardLimit, let ceiling = kernelCeiling(), ceiling > limit.rlim_max {
            var lifted = wanted
            lifted.rlim_max = ceiling
            lifted.rlim_cur = ceiling
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lifted) == 0 { return current }
        }
        if limit.rlim_cur < limit.rlim_max { _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &wanted) }
        return current
    }

    /// The limit in force now.
    package static var current: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        // RLIM_INFINITY reads as a huge number; the kernel caps descriptors far below it.
        return Int(min(limit.rlim_cur, rlim_t(Int32.max)))
    }

    private static func kernelCeiling() -> rlim_t? {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/nr_open", encoding: .utf8) else { return nil }
        return rlim_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
