import Testing
import ClientEngine

/// A channel fed inputs at chosen times, as a client drives it: ask, start, answer or time out.
struct RequestChannelTests {
    @Test func aNewChannelStartsAWantedRequestAtOnce() {
        let channel = RequestChannel()
        #expect(channel.requestInFlight == nil && channel.deadline == nil)
        #expect(channel.retryAt == -.infinity)
        #expect(channel.next(wantedAt: 5, at: 5) == .start)
        #expect(channel.next(wantedAt: 5, at: 4) == .wake(at: 5))
        #expect(channel.next(wantedAt: nil, at: 4) == .idle)
    }

    @Test func aRequestInFlightIsWaitedForUntilItsDeadlineWhateverIsWanted() {
        var channel = RequestChannel()
        channel.start(RequestID(3), deadline: 40)
        #expect(channel.requestInFlight == RequestID(3))
        #expect(channel.deadline == 40 && channel.retryAt == nil)
        for wanted in [nil, -Double.infinity, 12] {
            #expect(channel.next(wantedAt: wanted, at: 20) == .wake(at: 40))
        }
        #expect(!channel.isOverdue(at: 39.9))
        #expect(channel.isOverdue(at: 40))
    }

    @Test func onlyTheRequestInFlightIsAwaited() {
        var channel = RequestChannel()
        #expect(!channel.isAwaiting(RequestID(0)))
        #expect(!channel.isAwaiting(RequestID(1)))
        channel.start(RequestID(1), deadline: 10)
        #expect(channel.isAwaiting(RequestID(1)))
        #expect(!channel.isAwaiting(RequestID(2)) && !channel.isAwaiting(RequestID(0)))
        channel.finish(notBefore: -.infinity)
        #expect(!channel.isAwaiting(RequestID(1)))
    }

    @Test func theLargestRequestNumberFitsAndIsAwaited() {
        var channel = RequestChannel()
        let last = RequestID(UInt64(UInt32.max))
        channel.start(last, deadline: 1)
        #expect(channel.requestInFlight == last && channel.isAwaiting(last))
        #expect(!channel.isAwaiting(RequestID(UInt64(UInt32.max) + 1)))
    }

    /// After a failure the next request waits for both the retry time and the client's wish,
    /// whichever comes later.
    @Test(arguments: [(wanted: 50.0, due: 60.0), (wanted: 70, due: 70), (wanted: -Double.infinity, due: 60.0)])
    func aFinishedRequestsNextWaitsForTheLaterOfWantedAndRetry(wanted: Double, due: Double) {
        var channel = RequestChannel()
        channel.start(RequestID(1), deadline: 30)
        channel.finish(notBefore: 60)
        #expect(channel.requestInFlight == nil && channel.deadline == nil)
        #expect(channel.retryAt == 60)
        #expect(channel.next(wantedAt: wanted, at: 55) == .wake(at: due))
        #expect(channel.next(wantedAt: wanted, at: due) == .start)
        #expect(channel.next(wantedAt: nil, at: due) == .idle)
    }

    @Test func aSuccessLetsTheNextStartAtOnce() {
        var channel = RequestChannel()
        channel.start(RequestID(1), deadline: 30)
        channel.finish(notBefore: -.infinity)
        #expect(channel.next(wantedAt: 2, at: 2) == .start)
    }

    @Test func waivingTheBackoffLetsAnIdleChannelStartAtOnce() {
        var channel = RequestChannel()
        channel.start(RequestID(1), deadline: 30)
        channel.finish(notBefore: 1_000)
        channel.waiveBackoff()
        #expect(channel.retryAt == -.infinity)
        #expect(channel.next(wantedAt: 40, at: 40) == .start)
    }

    /// A request in flight keeps its deadline: the retry time is set when it finishes.
    @Test func waivingTheBackoffLeavesARequestInFlight() {
        var channel = RequestChannel()
        channel.start(RequestID(4), deadline: 30)
        channel.waiveBackoff()
        #expect(channel.requestInFlight == RequestID(4) && channel.deadline == 30)
        #expect(channel.isOverdue(at: 30))
    }

    @Test func resetForgetsTheRequestInFlightAndTheBackoff() {
        var channel = RequestChannel()
        channel.start(RequestID(1), deadline: 30)
        channel.finish(notBefore: 500)
        channel.start(RequestID(2), deadline: 530)
        channel.reset()
        #expect(channel == RequestChannel())
        #expect(!channel.isAwaiting(RequestID(2)) && !channel.isOverdue(at: 1_000))
        #expect(channel.next(wantedAt: 0, at: 0) == .start)
    }

    /// A full cycle: a timeout, a backoff, a retry that is answered.
    @Test func aTimedOutRequestIsRetriedAfterItsBackoff() {
        var channel = RequestChannel()
        #expect(channel.next(wantedAt: 0, at: 0) == .start)
        channel.start(RequestID(1), deadline: 30)
        #expect(channel.next(wantedAt: 0, at: 10) == .wake(at: 30))
        #expect(channel.isOverdue(at: 30))
        channel.finish(notBefore: 30 + 8)
        #expect(channel.next(wantedAt: 0, at: 30) == .wake(at: 38))
        #expect(channel.next(wantedAt: 0, at: 38) == .start)
        channel.start(RequestID(2), deadline: 68)
        #expect(!channel.isAwaiting(RequestID(1)))
        #expect(channel.isAwaiting(RequestID(2)))
        channel.finish(notBefore: -.infinity)
        #expect(channel.next(wantedAt: 100, at: 40) == .wake(at: 100))
    }

    /// The engine packs a 4-byte field into the rest of a channel's last word
    /// (`ClientEngine+Storage.swift`).
    @Test func aChannelTakesTwelveBytes() {
        #expect(MemoryLayout<RequestChannel>.size == 12)
    }
}
