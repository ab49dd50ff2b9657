import Allocators
import ClientEngine
import ExperimentModel
import ExperimentServer
import Histogram

extension FleetReplicate {
    /// The server receives a batch of `events` at `arrival`: it takes them in if its capacity
    /// allows (and ingests them when processed), or turns the request away.
    ///
    /// - Parameter sent: When the device sent the request, for the delivery log.
    mutating func receive(_ batch: [Event], at arrival: Double, sent: Double, from d: Int) -> CapacityQueue.Admission {
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
        if deliveryLog != nil {
            // Taken out for the call, which holds the server and the metrics.
            var log = deliveryLog.take()!, analyst = inference.take()
            let device = deviceRange.lowerBound + d
            Self.serverIngests(batch, at: completion, server: &server, metrics: &metrics) { event in
                log.delivered(event, device: device, sent: sent, received: completion)
                analyst?.ingested(event)
            }
            deliveryLog = log
            inference = analyst
        } else {
            ingest(batch, at: completion)
        }
        metrics.batches += 1
        return .admitted(completion: completion)
    }

    /// The server ingests `batch`; each event's queue latency is measured from its creation.
    mutating func ingest(_ batch: [Event], at ingested: Double) {
        if inference == nil {
            Self.serverIngests(batch, at: ingested, server: &server, metrics: &metrics)
        } else {
            Self.serverIngests(batch, at: ingested, server: &server, metrics: &metrics, inference: &inference!)
        }
    }

    /// Takes the server and the metrics apart from the replicate, so that the server's callback
    /// records into the latency histogram in place.
    private static func serverIngests(_ batch: [Event], at ingested: Double, server: inout ExperimentServer<A>, metrics: inout FleetMetrics) {
        let result = server.ingest(batch, at: ingested) { event in
            _ = metrics.queueLatency.record(UInt64(max(0, (ingested - event.createdAt) * 1000).rounded()))
        }
        metrics.acceptedEvents += result.accepted
    }

    /// The same, with `also` called for each event the server accepts.
    private static func serverIngests(_ batch: [Event], at ingested: Double, server: inout ExperimentServer<A>, metrics: inout FleetMetrics, also: (Event) -> Void) {
        let result = server.ingest(batch, at: ingested) { event in
            _ = metrics.queueLatency.record(UInt64(max(0, (ingested - event.createdAt) * 1000).rounded()))
            also(event)
        }
        metrics.acceptedEvents += result.accepted
    }

    /// The same, with the analyst's ledger taking in each event the server accepts.
    private static func serverIngests(_ batch: [Event], at ingested: Double, server: inout ExperimentServer<A>, metrics: inout FleetMetrics,
                                      inference: inout FleetInference) {
        let result = server.ingest(batch, at: ingested) { event in
            _ = metrics.queueLatency.record(UInt64(max(0, (ingested - event.createdAt) * 1000).rounded()))
            inference.ingested(event)
        }
        metrics.acceptedEvents += result.accepted
    }
}
