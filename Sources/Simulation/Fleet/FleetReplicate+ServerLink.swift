import Allocators
import ClientEngine
import ExperimentModel
import ExperimentServer
import Histogram

extension FleetReplicate {
    /// The server receives a batch of `events` at `arrival`: it takes them in if its capacity
    /// allows (and ingests them when processed), or turns the request away.
    mutating func receive(_ batch: [Event], at arrival: Double) -> CapacityQueue.Admission {
        var completion = arrival
        if let capacity = scenario.server.capacity {
            let admission = capacityQueue.admit(events: batch.count, at: arrival, capacity: capacity)
            guard case .admitted(let done) = admission else {
                metrics.rejectedRequests += 1
                return admission
            }
            completion = done
            metrics.peakServerBacklog = max(metrics.peakServerBacklog, (completion - arrival) * capacity.eventsPerSecond)
        }
        ingest(batch, at: completion)
        metrics.batches += 1
        return .admitted(completion: completion)
    }

    /// The server ingests `batch`; each event's queue latency is measured from its creation.
    mutating func ingest(_ batch: [Event], at ingested: Double) {
        Self.serverIngests(batch, at: ingested, server: &server, metrics: &metrics)
    }

    /// Takes the server and the metrics apart from the replicate, so that the server's callback
    /// records into the latency histogram in place.
    private static func serverIngests(_ batch: [Event], at ingested: Double, server: inout ExperimentServer<A>, metrics: inout FleetMetrics) {
        let result = server.ingest(batch, at: ingested) { event in
            _ = metrics.queueLatency.record(UInt64(max(0, (ingested - event.createdAt) * 1000).rounded()))
        }
        metrics.acceptedEvents += result.accepted
    }
}

/// The server's ingestion capacity model: it processes events at a fixed rate, first in, first
/// out, holding at most so many requests and so much work; beyond that it turns requests away.
struct CapacityQueue {
    /// What the server does with a batch.
    enum Admission {
        /// It is processed by `completion`.
        case admitted(completion: Double)
        /// It is turned away; `backlog` seconds of work were ahead of it.
        case rejected(backlog: Double)
    }

    /// When the server's backlog clears.
    private(set) var freeAt = 0.0
    /// The completion times of the requests the server holds, in increasing order.
    private var completions: [Double] = []
    private var head = 0

    mutating func admit(events: Int, at arrival: Double, capacity: Scenario.Capacity) -> Admission {
        while head < completions.count && completions[head] <= arrival { head += 1 }
        if head > 4096 && head * 2 > completions.count {
            completions.removeFirst(head)
            head = 0
        }
        let backlog = max(0, freeAt - arrival)
        let work = Double(events) / capacity.eventsPerSecond
        if completions.count - head >= capacity.maxConcurrent || backlog + work > capacity.maxBacklog {
            return .rejected(backlog: backlog)
        }
        let completion = max(arrival, freeAt) + work
        freeAt = completion
        completions.append(completion)
        return .admitted(completion: completion)
    }

    /// Events the server has accepted but not yet processed.
    func backlog(at now: Double, capacity: Scenario.Capacity?) -> Double {
        guard let capacity else { return 0 }
        return max(0, freeAt - now) * capacity.eventsPerSecond
    }
}
