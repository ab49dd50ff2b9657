import Allocators
import ClientEngine
import ExperimentModel
import ExperimentServer
import Randomness

/// How one seed's client library runs on a device, simulated or live: the seam between the
/// kernel that owns time, users and the network, and the client code it drives.
///
/// A style has two halves, and neither calls back into the kernel:
/// - its **client half** works on one device's ``Client`` and answers with what the client
///   wants next (``DeviceEffect``: send this request, wake me at t, idle), as
///   ``ClientEngine/nextAction(at:)`` does. The fleet's kernel drives it on the virtual clock
///   (``FleetReplicate``), live mode on the wall clock, over real sockets.
/// - its **server half** turns a request that reached the simulated server into a reply
///   (``ServerAnswer``); the kernel owns the network, the server's capacity, the reply's
///   journey back and the timeouts.
///
/// The kernel calls, for one device:
/// 1. ``startSession(_:device:environment:metrics:counters:at:)`` as a session begins, then the views
///    (at once, or when its answer says);
/// 2. ``view(_:of:device:environment:counters:using:at:)`` for each experiment, with the
///    view's potential outcomes;
/// 3. ``convert(_:experiment:variant:device:environment:metrics:counters:at:)`` when a shown
///    variant converts;
/// 4. ``nextEffect(_:device:environment:metrics:counters:at:)`` whenever the app runs, until
///    the client waits; each request it sends is put on the network, served, and its fate told
///    back through ``carried(_:_:client:device:environment:metrics:counters:at:)``;
/// 5. ``deliver(_:to:device:environment:metrics:counters:at:)`` when an answer arrives;
/// 6. ``tally(_:server:into:)`` and ``close(_:into:)`` once, at the horizon.
///
/// The hooks are static and the kernel is generic over its style, so each style's event loop
/// is specialised: a style costs nothing in another style's run.
package protocol DeviceStyle {
    /// A device's client library and what the style keeps beside it.
    associatedtype Client
    /// What the client sends.
    associatedtype Request
    /// What comes back to a device.
    associatedtype Reply
    /// What the style works out once per replicate from the scenario (codes, schedules).
    associatedtype Shared = Void
    /// The style's own counters: its columns of `summary.csv`.
    associatedtype Counters: StyleCounters = NoCounters

    /// Works out ``Shared`` from the scenario.
    static func makeShared(_ scenario: Scenario) -> Shared

    /// The client of device `index` (the fleet's numbering) at time 0.
    static func makeClient(device index: Int, seed: StreamSeed, online: Bool, environment: StyleEnvironment<Self>) -> Client

    // MARK: Client half

    /// A session begins. Returns when its views happen, and what the app sends first.
    static func startSession(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> SessionStart<Request>

    /// One view of an experiment. Returns what the device shows now, or `nil` when the view
    /// waits for the server; the view then comes back from ``takeDecided(_:)``.
    static func view(_ view: PendingView, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout Counters, using assignment: inout DeviceRandom, at now: Double) -> Shown?

    /// The weight the policy `client` drew from gave `variant` of experiment `e` in `context`,
    /// and when that policy was published: the propensity the device logs with a drawn view.
    static func drawnWeight(of client: borrowing Client, experiment e: Int, variant: Int, context: Int) -> (weight: Double, issuedAt: Double)?

    /// The goals the server credited to `client`'s decisions since the last call, where the
    /// server decides and the run logs decisions (``StyleEnvironment/logsDecisions``).
    static func takeCreditedGoals(_ client: inout Client) -> [CreditedGoal]

    /// A view whose screen may not load before the user leaves: the variant it will show,
    /// drawn or recalled, with no view logged yet. Only the styles that model a variant's own
    /// behaviour (``Scenario/VariantBehaviour``) implement it; the scenario refuses it elsewhere.
    static func assign(experiment e: Int, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout Counters, using assignment: inout DeviceRandom, at now: Double) -> Shown?

    /// The screen of experiment `e`'s assigned variant loaded: the view is logged, with
    /// `extraEvents` more events of the variant's own.
    static func loaded(experiment e: Int, extraEvents: Int, of client: inout Client, at now: Double)

    /// The app logs one of its own analytics events (``Scenario/AppEvents``): `type` indexes
    /// ``Scenario/AppEvents/names``.
    static func logAppEvent(_ client: inout Client, type: Int, at now: Double)

    /// The user converted on `variant`, which the device showed.
    static func convert(_ client: inout Client, experiment e: Int, variant: Int, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double)

    /// The app runs: what the client wants next. Called until it answers a wake or idle.
    static func nextEffect(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> DeviceEffect<Request>

    /// What became of a request the client sent, as far as the app can tell at once.
    static func carried(_ request: Request, _ fate: Carried<Reply>, client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double)

    /// An answer reaches the device.
    static func deliver(_ reply: Reply, to client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double)

    /// A view that waited and is now decided (by an answer or a timeout), if any.
    static func takeDecided(_ client: inout Client) -> DecidedView?

    /// The app is killed: what the client had not persisted is lost. `server` says which
    /// events the server has, so that an event it took in is not counted lost.
    static func crash(_ client: inout Client, metrics: inout FleetMetrics, server: borrowing some IngestionRecord, at now: Double)

    /// The app was updated to `version`.
    static func appVersionChanged(_ client: inout Client, to version: String, at now: Double)

    /// The app runs with the device's link `online`: a client that tracks the network learns
    /// here of any change since it last ran.
    static func noticeLink(_ client: inout Client, online: Bool, at now: Double)

    /// Events waiting on the device to be sent.
    static func queueDepth(_ client: borrowing Client) -> Int

    /// The bytes at the start of ``Client`` that a session reads, for prefetching; the whole
    /// client by default.
    static var hotClientBytes: Int { get }

    /// Asks the memory system for the heap state `client` keeps outside its record (a
    /// library's lists), once the record is at hand: the kernel calls it a few events before
    /// the device's. Nothing by default. (Through a pointer, in place: a borrowed client was
    /// copied whole, retaining, and so reading, the very lists to be asked for.)
    static func prefetchHeapState(of client: UnsafeMutablePointer<Client>)

    // MARK: Server half

    /// What the simulated server makes of `request`, arrived at `arrival`. State the server
    /// keeps per device (a sticky decision, a bucket) lives in the device's client for
    /// locality; the server half alone reads and writes it.
    static func serve<A>(_ request: Request, from client: inout Client, device: DeviceFacts, server: inout ExperimentServer<A>, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at arrival: Double) -> ServerAnswer<Reply>

    /// The reply the app gets when `request` cannot reach the server, or `nil` if the app
    /// learns of it at once (``carried(_:_:client:device:environment:metrics:counters:at:)``).
    static func refusal(for request: Request) -> Reply?

    /// The reply to a request the server turned away with `backlog` seconds of work ahead of
    /// it, or `nil` if the app learns of it at once.
    static func rejection(for request: Request, backlog: Double, capacity: Capacity) -> Reply?

    /// The reply to a request answered with `status` (and `retryAfter` seconds, if given) by
    /// a collector in a status outage, or `nil` if the app learns of it at once. By default,
    /// the style's ``rejection(for:backlog:capacity:)`` with that status.
    static func answer(for request: Request, status: Int, retryAfter: Double?) -> Reply?

    /// Orders a device's replies due at the same time; asked once per reply scheduled.
    static func replyOrder(for request: Request, client: inout Client) -> UInt8

    /// Whether the kernel counts a request that will get no answer as a timeout when it is
    /// lost (the client times it out itself, unseen), rather than the client counting its own
    /// timeouts when it gives up.
    static var countsLostRequestsAsTimeouts: Bool { get }

    // MARK: Totals

    /// Adds one device's totals that only its client knows.
    static func tally(_ client: borrowing Client, server: borrowing some IngestionRecord, into metrics: inout FleetMetrics)

    /// Adds the style's counters and the totals that follow from them.
    static func close(_ counters: Counters, into metrics: inout FleetMetrics)
}

/// What a server has taken in, as a device's totals ask: the simulated server, or live
/// mode's view of a real one.
package protocol IngestionRecord {
    /// Whether the server has ingested the event.
    func hasIngested(_ id: EventID) -> Bool
    /// Events the server ingested, each once.
    var eventsAccepted: Int { get }
    /// Events it was sent again and recognised.
    var duplicatesIgnored: Int { get }
}

extension ExperimentServer: IngestionRecord {}

/// What a device's client asks for when it has done what it can.
package enum DeviceEffect<Request> {
    /// Put this request on the network, then ask again.
    case send(Request)
    /// Views the client waited on are decided (``DeviceStyle/takeDecided(_:)``): show them,
    /// then ask again.
    case decided
    /// Run the app again at this time (if the app may run then).
    case wake(at: Double)
    /// Nothing to do until something happens.
    case idle
}

/// How a session's views begin.
package enum SessionStart<Request> {
    /// The views happen now.
    case viewsNow
    /// The app waits for data: if the server can be reached, the client runs first and the
    /// views happen at this time; otherwise they happen now.
    case awaitData(until: Double)
    /// The app sends `request` first; the views happen at `viewsAt` (now if `nil`), or at
    /// `ifRefused` when the request cannot leave the device.
    case send(Request, viewsAt: Double?, ifRefused: Double?)
}

/// What became of a request on the simulated network and server, as far as the app can tell
/// when it sends it.
package enum Carried<Reply> {
    /// It could not reach the server (no network, a refusing outage or partition).
    case refused
    /// The server never had it and no answer will come.
    case unanswered
    /// The server turned it away for lack of capacity, or answered it with an error status
    /// in a status outage.
    case turnedAway
    /// The server took it and answered `reply`, which reaches the device at `answerAt`
    /// (`nil` when the answer is lost).
    case taken(Reply, answerAt: Double?)
    /// It is on a real socket (live mode): its answer, or a failure, is delivered when it comes.
    case inFlight
}

/// What the simulated server does with a request that reached it.
package enum ServerAnswer<Reply> {
    /// It answers at once.
    case reply(Reply)
    /// The request carries `events`: they go through the server's capacity, and `acknowledged`
    /// leaves when they are processed (or the style's rejection when turned away).
    case events([Event], acknowledged: Reply)
    /// No answer (a request the server does not know).
    case none
}

/// What the device shows on a view.
package struct Shown {
    package var variant: Int
    /// The in-app default (offline mode, a fallback), not an assignment.
    package var isDefault: Bool
    /// The variant was drawn for this view from the policy the device holds (not recalled
    /// from a sticky assignment): a decision an off-policy evaluation reads.
    package var isDraw: Bool

    package init(variant: Int, isDefault: Bool, isDraw: Bool = false) {
        self.variant = variant
        self.isDefault = isDefault
        self.isDraw = isDraw
    }
}

/// A view that waited for the server and is now decided.
package struct DecidedView {
    package var view: PendingView
    package var shown: Shown
    /// Where the server drew the variant for this view (``Shown/isDraw``), the weight its
    /// policy gave it and when that policy was published; kept only where the run logs
    /// decisions.
    package var drawn: (weight: Double, issuedAt: Double)? = nil
}

/// A goal the server credited to a device's decision (server-side decisions), kept where the
/// run logs decisions: the server's log knows the decision's reward only through these.
package struct CreditedGoal {
    package var experiment: Int
    package var variant: Int
    package var time: Double
}

/// What the kernel tells a client of its device.
package struct DeviceFacts {
    /// The device's index in its replicate (its shard's numbering in a split fleet).
    package var local: Int
    /// The device's index in the whole fleet: its id wherever devices are told apart (its
    /// events' ids, its requests), so that no two shards' devices share one.
    package var fleet: Int
    /// Whether the device's link is up.
    package var online: Bool
    /// The app is in the foreground until then.
    package var foregroundUntil: Double
    /// The device's segment of the scenario's attributes: the context a contextual policy is
    /// evaluated in (0 without attributes).
    package var context: Int
}

/// What a style's halves read of the run: the client's settings, the engine profile, what the
/// style worked out once, and the seeds its clients derive from.
///
/// The client's settings and the profile sit behind one reference. The environment is passed
/// to every call the kernel makes of a style, and with the scenario inline it was 824 bytes,
/// which the compiler copied whole wherever it passed it by value (a protocol witness calling
/// the version of its requirement it had specialised).
package struct StyleEnvironment<Style: DeviceStyle> {
    private final class Settings: Sendable {
        let client: Scenario.Client
        let profile: EngineProfile

        init(client: Scenario.Client, profile: EngineProfile) {
            self.client = client
            self.profile = profile
        }
    }

    private let settings: Settings
    package let shared: Style.Shared
    package let replicateSeed: StreamSeed
    /// Variants per experiment.
    package let variantCounts: [Int]
    /// Whether the run logs every drawn decision (``DecisionLog``): a style whose server
    /// decides then keeps, for each draw, the weight the server drew it with.
    package var logsDecisions = false

    package init(scenario: Scenario, profile: EngineProfile, replicateSeed: StreamSeed) {
        self.settings = Settings(client: scenario.client, profile: profile)
        self.shared = Style.makeShared(scenario)
        self.replicateSeed = replicateSeed
        self.variantCounts = scenario.experiments.map(\.rates.count)
    }

    /// The client's settings.
    package var client: Scenario.Client { settings.client }
    /// The engine profile the style's clients share.
    package var profile: EngineProfile { settings.profile }
}

/// A style's own counters, each a column of `summary.csv`.
package protocol StyleCounters {
    /// The columns, in order.
    static var names: [String] { get }
    /// The values, in the order of ``names``.
    var values: [Int] { get }
    init()
}

/// The counters of a style that has none.
package struct NoCounters: StyleCounters {
    package static var names: [String] { [] }
    package var values: [Int] { [] }
    package init() {}
}

/// When a session's views happen.
enum ViewTiming {
    case now
    /// The app waits (for experiment data, say) and shows the views at this time.
    case at(Double)
}

/// A view the kernel has drawn the outcomes of: which variants would convert, and after what
/// delay. The style says what the device shows, now or when the server has answered.
package struct PendingView {
    package var device: Int
    package var experiment: Int
    /// Bit `v` is set when variant `v` would convert on this view.
    package var convertsMask: UInt64
    /// Seconds from the view to the conversion, if there is one.
    package var delay: Double
}

extension DeviceStyle where Shared == Void {
    package static func makeShared(_ scenario: Scenario) {}
}

extension DeviceStyle {
    /// Not known: the server decides, or the device draws from weights of its own.
    package static func drawnWeight(of client: borrowing Client, experiment e: Int, variant: Int, context: Int) -> (weight: Double, issuedAt: Double)? { nil }

    /// None: the server decides nothing.
    @inline(__always)
    package static func takeCreditedGoals(_ client: inout Client) -> [CreditedGoal] { [] }

    package static func carried(_ request: Request, _ fate: Carried<Reply>, client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {}
    @inline(__always)
    package static func takeDecided(_ client: inout Client) -> DecidedView? { nil }
    package static func assign(experiment e: Int, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout Counters, using assignment: inout DeviceRandom, at now: Double) -> Shown? {
        preconditionFailure("\(Self.self) does not model a variant's own behaviour; the scenario refuses it")
    }
    package static func loaded(experiment e: Int, extraEvents: Int, of client: inout Client, at now: Double) {}
    package static func logAppEvent(_ client: inout Client, type: Int, at now: Double) {
        preconditionFailure("\(Self.self) does not model app events; the scenario refuses them")
    }
    package static func crash(_ client: inout Client, metrics: inout FleetMetrics, server: borrowing some IngestionRecord, at now: Double) {}
    package static func appVersionChanged(_ client: inout Client, to version: String, at now: Double) {}
    @inline(__always)
    package static func noticeLink(_ client: inout Client, online: Bool, at now: Double) {}
    package static func queueDepth(_ client: borrowing Client) -> Int { 0 }
    package static var hotClientBytes: Int { MemoryLayout<Client>.size }
    @inline(__always)
    package static func prefetchHeapState(of client: UnsafeMutablePointer<Client>) {}
    package static func rejection(for request: Request, backlog: Double, capacity: Capacity) -> Reply? { nil }
    package static func answer(for request: Request, status: Int, retryAfter: Double?) -> Reply? {
        // A backlog as long as the wait makes the styles that send Retry-After send this one.
        let door = Capacity(eventsPerSecond: 1, maxConcurrent: 0, maxBacklog: 0, rejectStatus: status, retryAfter: retryAfter != nil)
        return rejection(for: request, backlog: retryAfter ?? 0, capacity: door)
    }
    package static var countsLostRequestsAsTimeouts: Bool { true }
    package static func tally(_ client: borrowing Client, server: borrowing some IngestionRecord, into metrics: inout FleetMetrics) {}
    package static func close(_ counters: Counters, into metrics: inout FleetMetrics) {
        for (name, value) in zip(Counters.names, counters.values) { metrics.styleCounters[name, default: 0] += value }
    }
}
