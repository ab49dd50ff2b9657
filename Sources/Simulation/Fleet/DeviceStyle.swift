import Allocators
import ClientEngine
import Randomness

/// How one seed's client library runs on a simulated device: the seam between the fleet's
/// kernel and the client code it drives.
///
/// The kernel (``FleetReplicate``) owns time, users and the network: it decides when sessions
/// start, which variants would convert (potential outcomes), when the app may run and what the
/// network does to a request. A style owns what the app's client library does with that: what a
/// view shows, what a conversion sends, which requests leave the device and what the answers
/// change. Every hook takes the fleet `inout`, so a style reads the device and the scenario and
/// uses the kernel's network (``FleetReplicate/transmit(from:at:)``) and reports
/// (``FleetReplicate/show(_:variant:isDefault:at:)``) without copying anything.
///
/// The hooks are static and the fleet is generic over its style, so each style's event loop is
/// specialised: a style costs nothing in another style's run.
///
/// The kernel calls, for one device:
/// 1. ``startSession(_:crashes:in:at:)`` as a session begins, then the views (at once, or when
///    the hook's answer says);
/// 2. ``view(_:in:at:)`` for each experiment, with the view's potential outcomes;
/// 3. ``convert(_:experiment:variant:in:at:)`` when a shown variant converts;
/// 4. ``run(_:in:at:)`` whenever the app runs (after a session's views, on a wake it asked for,
///    on an answer, when the network returns), to send what the client wants sent;
/// 5. ``deliver(_:to:in:at:)`` when an answer reaches the device;
/// 6. ``finish(_:into:)`` once, at the horizon, for the totals only the clients know.
protocol DeviceStyle {
    /// A device's client library and what the style keeps beside it.
    associatedtype Client
    /// What the simulated network carries back to a device.
    associatedtype Reply
    /// What the style works out once per replicate from the scenario (codes, schedules).
    associatedtype Shared = Void

    /// Works out ``Shared`` from the scenario.
    static func makeShared(_ scenario: Scenario) -> Shared

    /// The client of device `index` at time 0.
    static func makeClient<A>(device index: Int, seed: StreamSeed, online: Bool, in fleet: inout FleetReplicate<A, Self>) -> Client

    /// A session begins. Returns when its views happen: now, or later (the app waits for data).
    static func startSession<A>(_ d: Int, crashes: Bool, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> ViewTiming

    /// One view of an experiment. Returns the variant shown now, or `nil` when the view waits
    /// for the server; the style then calls ``FleetReplicate/show(_:variant:isDefault:at:)``
    /// with `view` when it knows.
    static func view<A>(_ view: PendingView, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> (variant: Int, isDefault: Bool)?

    /// The user converted on `variant`, which the device showed.
    static func convert<A>(_ d: Int, experiment e: Int, variant: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double)

    /// The app runs: the client sends what it wants to send and asks for a wake if it needs one.
    static func run<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double)

    /// An answer reaches device `d`.
    static func deliver<A>(_ reply: Reply, to d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double)

    /// The app is killed: what the client had not persisted is lost.
    static func crash<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double)

    /// The app was updated to `version`.
    static func appVersionChanged<A>(_ d: Int, to version: String, in fleet: inout FleetReplicate<A, Self>, at now: Double)

    /// The app runs with the device's link as it is now: a client that tracks the network
    /// learns here of any change since it last ran.
    static func noticeLink<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double)

    /// The bytes at the start of ``Client`` that a session reads, for prefetching; the whole
    /// client by default.
    static var hotClientBytes: Int { get }

    /// Events waiting on the device to be sent.
    static func queueDepth(_ client: borrowing Client) -> Int

    /// Adds the totals only the clients and the server know.
    static func finish<A>(_ fleet: borrowing FleetReplicate<A, Self>, into metrics: inout FleetMetrics)
}

/// When a session's views happen.
enum ViewTiming {
    case now
    /// The app waits (for experiment data, say) and shows the views at this time.
    case at(Double)
}

/// A view the kernel has drawn the outcomes of: which variants would convert, and after what
/// delay. The style says what the device shows, now or when the server has answered.
struct PendingView {
    var device: Int
    var experiment: Int
    /// Bit `v` is set when variant `v` would convert on this view.
    var convertsMask: UInt64
    /// Seconds from the view to the conversion, if there is one.
    var delay: Double
}

extension DeviceStyle where Shared == Void {
    static func makeShared(_ scenario: Scenario) {}
}

extension DeviceStyle {
    static func crash<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {}
    static func appVersionChanged<A>(_ d: Int, to version: String, in fleet: inout FleetReplicate<A, Self>, at now: Double) {}
    static func queueDepth(_ client: borrowing Client) -> Int { 0 }
    static var hotClientBytes: Int { MemoryLayout<Client>.size }
    static func noticeLink<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {}
}
