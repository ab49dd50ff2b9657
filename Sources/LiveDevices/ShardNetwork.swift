import Simulation

/// How a shard's devices reach the server.
///
/// `Sendable`: plain values.
package struct ShardNetwork: Sendable {
    /// The server on each route (route 0 the fleet's, one more for each partition).
    var endpoints: [Endpoint]
    var connections: Scenario.Connections
    /// Pooled: the shard's connections to each route.
    var poolSize: Int
    /// Per device: give each device its own source address on 127.0.0.0/8, so that a million
    /// devices reconnecting do not run out of one address's ephemeral ports.
    var spreadsSources: Bool
    /// Picks a device's route from its number in the fleet.
    var route: @Sendable (Int) -> Int
    /// Per device: the connections a shard may have open at once, so that the process stays
    /// within its limit on open files (each connection takes a socket here, and one or two
    /// more in the embedded server and the fault proxy). Requests beyond it wait for a socket.
    var socketCap = Int.max

    package init(endpoints: [Endpoint], connections: Scenario.Connections, poolSize: Int, spreadsSources: Bool, socketCap: Int = .max, route: @escaping @Sendable (Int) -> Int) {
        self.endpoints = endpoints
        self.connections = connections
        self.poolSize = poolSize
        self.spreadsSources = spreadsSources
        self.socketCap = socketCap
        self.route = route
    }
}
