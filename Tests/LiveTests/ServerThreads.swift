import NIOCore
import NIOPosix

/// Threads of their own for the servers the tests start in this process.
///
/// Swift Testing runs every target's tests at once on Swift's global concurrent executor, a
/// thread per core; CPU-bound simulation tests can hold all of them for minutes. A server whose
/// requests waited for those threads would answer late, and a test's timeout would measure the
/// other tests. `aviary serve` runs in a process of its own, as do the servers of the live tests
/// that start `aviary`; these threads give the in-process servers the same footing.
///
/// `Sendable`: it holds only an event loop group, which is `Sendable`.
final class ServerThreads: TaskExecutor {
    /// The threads every in-process test server shares.
    static let shared = ServerThreads()

    private let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loops.next().execute { job.runSynchronously(on: executor) }
    }
}
