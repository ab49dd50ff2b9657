import Synchronization

/// Set once to stop a live run early (Ctrl-C); what was measured until then is kept.
///
/// `Sendable`: an atomic flag.
package final class StopFlag: Sendable {
    private let flag = Atomic(false)

    package init() {}

    package func stop() {
        flag.store(true, ordering: .relaxed)
    }

    package var isSet: Bool { flag.load(ordering: .relaxed) }
}
