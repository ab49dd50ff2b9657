import ExperimentModel
import Foundation
import Randomness

/// Carries an engine's requests to a server: HTTP in an app, an in-memory fake in tests.
///
/// Implementations are `Sendable` so a driver can call them from its own isolation.
public protocol Transport: Sendable {
    /// Sends `request` and returns the server's response, or the transport failure.
    func send(_ request: Request) async -> Response
}

/// Runs a ``ClientEngine`` in real time for an app: it feeds the engine the current time,
/// performs the requests it asks for through a ``Transport`` and applies the responses.
///
/// This is the only part of the module that reads a clock, and it reads the injected `clock`
/// closure, so tests stay deterministic. Requests are performed one after another; while one is
/// awaited, the app's calls still run (the actor is reentrant) and see a consistent engine.
///
/// `EngineDriver` is `Sendable`: it is an actor that owns its engine.
public actor EngineDriver<Store: EventStore> {
    private var engine: ClientEngine<Store>
    private let transport: any Transport
    private let clock: @Sendable () -> Double
    private var generator: Xoshiro256

    /// A clock reading seconds since 1970 from the system's wall clock, for apps.
    public static var wallClock: @Sendable () -> Double {
        { Date().timeIntervalSince1970 }
    }

    /// Creates a driver that owns `engine`.
    ///
    /// - Parameters:
    ///   - engine: The engine to run; the driver becomes its only owner.
    ///   - transport: Performs the engine's requests.
    ///   - seed: Seeds the generator for variant assignment draws.
    ///   - clock: Returns the current time in seconds, on the same scale as the engine's times.
    public init(engine: sending ClientEngine<Store>, transport: any Transport, seed: StreamSeed, clock: @escaping @Sendable () -> Double) {
        self.engine = engine
        self.transport = transport
        self.clock = clock
        self.generator = seed.makeGenerator()
    }

    /// See ``ClientEngine/viewVariant(_:at:using:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment is unknown.
    public func viewVariant(_ experimentID: String) throws(ClientError) -> VariantView {
        try engine.viewVariant(experimentID, at: clock(), using: &generator)
    }

    /// See ``ClientEngine/viewVariant(_:forcing:at:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment or variant is unknown.
    public func viewVariant(_ experimentID: String, forcing variantID: String) throws(ClientError) -> VariantView {
        try engine.viewVariant(experimentID, forcing: variantID, at: clock())
    }

    /// See ``ClientEngine/recordConversion(_:variant:value:at:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment or variant is unknown.
    public func recordConversion(_ experimentID: String, variant variantID: String? = nil, value: Double = 1) throws(ClientError) -> ConversionResult {
        try engine.recordConversion(experimentID, variant: variantID, value: value, at: clock())
    }

    /// See ``ClientEngine/experimentMetadata(_:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment is unknown.
    public func experimentMetadata(_ experimentID: String) throws(ClientError) -> JSONValue {
        try engine.experimentMetadata(experimentID)
    }

    /// See ``ClientEngine/variantMetadata(_:_:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment or variant is unknown.
    public func variantMetadata(_ experimentID: String, _ variantID: String) throws(ClientError) -> JSONValue {
        try engine.variantMetadata(experimentID, variantID)
    }

    /// See ``ClientEngine/clearCache(_:at:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment is unknown.
    public func clearCache(_ experimentID: String? = nil) throws(ClientError) {
        try engine.clearCache(experimentID, at: clock())
    }

    /// See ``ClientEngine/appVersionChanged(to:at:)``.
    public func appVersionChanged(to version: String) {
        engine.appVersionChanged(to: version, at: clock())
    }

    /// See ``ClientEngine/connectivityChanged(isOnline:at:)``.
    public func connectivityChanged(isOnline: Bool) {
        engine.connectivityChanged(isOnline: isOnline, at: clock())
    }

    /// Whether the engine serves the defaults because data was never retrieved.
    public var isOfflineMode: Bool { engine.isOfflineMode }
    /// The number of events waiting for acknowledgement.
    public var queueDepth: Int { engine.queueDepth }
    /// The version of the downloaded experiment data, if any.
    public var dataVersion: Int? { engine.dataVersion }

    /// Performs every request the engine wants now, applying each response.
    ///
    /// - Returns: when the engine next wants to run, or `nil` if it waits for input.
    @discardableResult
    public func runDueWork() async -> Double? {
        while true {
            switch engine.nextAction(at: clock()) {
            case .send(let request):
                let response = await transport.send(request)
                engine.handle(response, to: request.id, at: clock())
            case .wake(let time):
                return time
            case .idle:
                return nil
            }
        }
    }

    /// Runs the engine until the task is cancelled or `sleep` throws, sleeping between wakes.
    ///
    /// - Parameters:
    ///   - idlePoll: Seconds to sleep when the engine waits only for input, so that events an
    ///     app queues are picked up.
    ///   - sleep: Sleeps for the given number of seconds; an app passes
    ///     `{ try await Task.sleep(for: .seconds($0)) }`, a test advances a fake clock.
    public func run(idlePoll: Double = 1, sleep: @Sendable (Double) async throws -> Void) async {
        while !Task.isCancelled {
            let wake = await runDueWork()
            let delay = wake.map { max(0, $0 - clock()) } ?? idlePoll
            do {
                try await sleep(min(delay, idlePoll))
            } catch {
                return
            }
        }
    }
}
