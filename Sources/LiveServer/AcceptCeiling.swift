import HummingbirdCore

/// Stops accepting while the sockets open reach a ceiling a little above the cap, so that
/// `accept` never fails for want of descriptors: on Linux that failure ends the listener.
struct AcceptCeiling: AvailableConnectionsDelegate {
    let ceiling: Int
    private var sockets = 0

    init(ceiling: Int) {
        self.ceiling = ceiling
    }

    mutating func connectionOpened() { sockets += 1 }
    mutating func connectionClosed() { sockets -= 1 }
    func isAcceptingNewConnections() -> Bool { sockets < ceiling }
}
