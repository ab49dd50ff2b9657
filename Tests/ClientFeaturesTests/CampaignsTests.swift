import ClientFeatures
import ExperimentModel
import Foundation
import Randomness
import Testing

private let device = DeviceAttributes(appVersion: "2.4.1", os: "iOS", osVersion: "9.1", deviceType: "iPhone7,1")
private let identity = CampaignClientConfiguration(accountID: "10", appKey: "cccf243b", libraryVersion: "1.4.4")

private func campaignJSON(
    id: Int, status: String = "RUNNING", weights: [Double] = [50, 50],
    goals: [JSONValue] = [["id": 1, "identifier": "signup"]], segment: JSONValue? = nil
) -> JSONValue {
    var campaign: [String: JSONValue] = [
        "id": .number(Double(id)), "name": .string("Campaign \(id)"), "status": .string(status),
        "variations": .array(weights.enumerated().map { index, weight in
            ["id": .number(Double(index + 1)), "name": .string(index == 0 ? "Control" : "Variation-\(index)"),
             "weight": .number(weight)]
        }),
        "goals": .array(goals),
    ]
    if let segment { campaign["segment_object"] = segment }
    return .object(campaign)
}

private func client(_ campaigns: [JSONValue], attributes: DeviceAttributes = device, deviceID: String = "1F4140267B59")
    -> CampaignClient
{
    var client = CampaignClient(state: CampaignClientState(deviceID: deviceID), attributes: attributes, configuration: identity)
    client.applySettings(.array(campaigns), at: 0)
    return client
}

struct CampaignSettingsParsingTests {
    @Test func parsesCampaignsInPayloadOrder() throws {
        let payload: JSONValue = .array([
            campaignJSON(id: 34, weights: [20, 80], segment: ["attribute": "os", "operator": "equals", "value": "iOS"]),
            campaignJSON(id: 29, status: "PAUSED", goals: [["id": 7, "name": "purchase"]]),
            campaignJSON(id: 37, status: "EXCLUDED"),
        ])
        let campaigns = try Campaign.parseSettings(payload)
        #expect(campaigns.map(\.id) == [34, 29, 37])
        #expect(campaigns.map(\.status) == [.running, .paused, .excluded])
        #expect(campaigns[0].variations == [
            CampaignVariation(id: 1, name: "Control", weight: 20), CampaignVariation(id: 2, name: "Variation-1", weight: 80),
        ])
        #expect(campaigns[0].control.name == "Control")
        #expect(campaigns[0].segment == .condition(try #require(SegmentCondition(attribute: .os, comparison: .equals, operand: "iOS"))))
        #expect(campaigns[1].goals == [CampaignGoal(id: 7, identifier: "purchase")])
        #expect(campaigns[2].segment == nil)
    }

    @Test func acceptsAnObjectWithACampaignsArray() throws {
        let campaigns = try Campaign.parseSettings(["campaigns": [campaignJSON(id: 5)]])
        #expect(campaigns.map(\.id) == [5])
    }

    @Test func parsesNestedSegmentExpressions() throws {
        let segment: JSONValue = ["and": [
            ["attribute": "app_version", "operator": "version_gte", "value": "2.1"],
            ["or": [
                ["custom_attribute": "plan", "operator": "equals", "value": "pro"],
                ["not": ["attribute": "device_type", "operator": "contains", "value": "iPad"]],
            ]],
        ]]
        let campaign = try #require(try Campaign.parseSettings([campaignJSON(id: 1, segment: segment)]).first)
        guard case .all(let parts)? = campaign.segment, case .any(let alternatives) = parts[1] else {
            Issue.record("expected and(…, or(…))")
            return
        }
        #expect(parts.count == 2)
        #expect(alternatives.count == 2)
    }

    @Test(arguments: [
        (JSONValue.string("nope"), "(root)"),
        (["campaigns": 3] as JSONValue, "campaigns"),
        ([campaignJSON(id: 1, status: "STOPPED")] as JSONValue, "[0].status"),
        ([campaignJSON(id: 1), campaignJSON(id: 2, weights: [50, -1])] as JSONValue, "[1].variations[1].weight"),
        ([["status": "RUNNING", "variations": []]] as JSONValue, "[0].id"),
        ([["id": 1.5, "status": "RUNNING"]] as JSONValue, "[0].id"),
        ([campaignJSON(id: 1), campaignJSON(id: 1)] as JSONValue, "[1].id"),
        ([["id": 1, "status": "RUNNING", "variations": []]] as JSONValue, "[0].variations"),
        ([campaignJSON(id: 1, weights: [0, 0])] as JSONValue, "[0].variations"),
        ([campaignJSON(id: 1, goals: [["id": 1]])] as JSONValue, "[0].goals[0].identifier"),
        ([campaignJSON(id: 1, goals: [["id": 1, "identifier": "a"], ["id": 1, "identifier": "b"]])] as JSONValue,
         "[0].goals[1].id"),
        ([campaignJSON(id: 1, segment: ["and": [
            ["attribute": "os", "operator": "equals", "value": "iOS"],
            ["attribute": "os", "operator": "greater", "value": "iOS"],
        ]])] as JSONValue, "[0].segment_object.and[1].operator"),
        ([campaignJSON(id: 1, segment: ["attribute": "app_version", "operator": "version_gte", "value": "two"])] as JSONValue,
         "[0].segment_object.value"),
        ([campaignJSON(id: 1, segment: ["custom_attribute": "plan", "operator": "regex", "value": "(unclosed"])] as JSONValue,
         "[0].segment_object.value"),
        ([campaignJSON(id: 1, segment: ["attribute": "carrier", "operator": "equals", "value": "x"])] as JSONValue,
         "[0].segment_object.attribute"),
        ([campaignJSON(id: 1, segment: ["or": []])] as JSONValue, "[0].segment_object.or"),
        ([campaignJSON(id: 1, segment: ["and": [], "or": []])] as JSONValue, "[0].segment_object"),
    ])
    func malformedSettingsAreRejectedNamingThePath(payload: JSONValue, path: String) {
        #expect {
            _ = try Campaign.parseSettings(payload)
        } throws: { error in
            (error as? SettingsError)?.path == path
        }
    }

    @Test func pausedCampaignMayHaveOnlyZeroWeights() throws {
        let campaigns = try Campaign.parseSettings([campaignJSON(id: 1, status: "PAUSED", weights: [0, 0])])
        #expect(campaigns.count == 1)
    }

    @Test func errorMessageShowsWhatWasFound() {
        #expect {
            _ = try Campaign.parseSettings([campaignJSON(id: 1, status: "STOPPED")])
        } throws: { error in
            String(describing: error) == #"[0].status: expected RUNNING, PAUSED or EXCLUDED, found "STOPPED""#
        }
    }

    @Test func rejectedSettingsKeepTheLastGoodOnes() throws {
        var client = client([campaignJSON(id: 34)])
        let result = client.applySettings([campaignJSON(id: 34, status: "BROKEN")], at: 9)
        guard case .failure(let error) = result else {
            Issue.record("expected a rejection")
            return
        }
        #expect(error.path == "[0].status")
        #expect(client.campaigns.map(\.status) == [.running])
        #expect(client.lastRejection?.error == error)
        #expect(client.lastRejection?.receivedAt == 9)
    }

    /// Settings read once and handed to many clients leave each as reading them itself would.
    @Test func settingsReadOnceApplyAsIfEachClientReadThem() throws {
        let good: JSONValue = [campaignJSON(id: 34, weights: [0, 100]), campaignJSON(id: 29, status: "PAUSED")]
        let bad: JSONValue = [campaignJSON(id: 34), campaignJSON(id: 34)]
        var shared = client([campaignJSON(id: 1)]), own = client([campaignJSON(id: 1)])
        let parsed = Result { () throws(SettingsError) in try Campaign.parseSettings(good) }
        #expect(shared.applySettings(parsed: parsed, at: 3) == own.applySettings(good, at: 3))
        #expect(shared.campaigns == own.campaigns && shared.campaigns.map(\.id) == [34, 29])
        var rng = Xoshiro256(seed: 1)
        #expect(shared.variation(forCampaign: 34, at: 4, using: &rng).variation?.id == 2)
        let rejected = Result { () throws(SettingsError) in try Campaign.parseSettings(bad) }
        #expect(shared.applySettings(parsed: rejected, at: 5) == own.applySettings(bad, at: 5))
        #expect(shared.lastRejection == own.lastRejection)
        #expect(shared.lastRejection?.error.path == "[1].id")
        #expect(shared.campaigns.map(\.id) == [34, 29])
    }
}

struct SemanticVersionTests {
    @Test(arguments: [
        ("2.9", "2.10"), ("2.1", "2.1.1"), ("1.9.9", "2"), ("3.0.0-beta", "3.0.0"), ("3.0.0-alpha", "3.0.0-beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-1", "1.0.0-alpha"), ("1.0.0-alpha", "1.0.0-alpha.1"),
    ])
    func ordersVersionsSemantically(lower: String, higher: String) throws {
        let l = try #require(SemanticVersion(lower))
        let h = try #require(SemanticVersion(higher))
        #expect(l < h)
        #expect(!(h < l))
        #expect(l != h)
    }

    @Test func missingComponentsCountAsZeroAndBuildMetadataIsIgnored() throws {
        #expect(SemanticVersion("2.1") == SemanticVersion("2.1.0"))
        #expect(SemanticVersion("2.1.0+build.7") == SemanticVersion("2.1"))
        #expect(Set([try #require(SemanticVersion("2.1")), try #require(SemanticVersion("2.1.0"))]).count == 1)
        #expect(SemanticVersion("10.3.1-rc.1")?.description == "10.3.1-rc.1")
    }

    @Test(arguments: ["", "two", "1..2", "1.-2", "1.2-", "v1.2", " 1.2", "1.2.x"])
    func rejectsTextThatIsNotAVersion(text: String) {
        #expect(SemanticVersion(text) == nil)
    }
}

struct SegmentTests {
    private func condition(_ attribute: SegmentAttribute, _ comparison: SegmentOperator, _ operand: String) -> SegmentCondition {
        SegmentCondition(attribute: attribute, comparison: comparison, operand: operand)!
    }

    private let pro = DeviceAttributes(
        appVersion: "2.10.0", os: "iOS", osVersion: "9.1", deviceType: "iPhone7,1", custom: ["plan": "pro-annual"])

    @Test func stringOperatorsCompareExactly() {
        #expect(condition(.os, .equals, "iOS").matches(pro))
        #expect(!condition(.os, .equals, "ios").matches(pro))
        #expect(condition(.os, .notEquals, "Android").matches(pro))
        #expect(condition(.deviceType, .contains, "iPhone").matches(pro))
        #expect(!condition(.deviceType, .notContains, "iPhone").matches(pro))
        #expect(condition(.custom("plan"), .matchesRegex, "^pro-(annual|monthly)$").matches(pro))
        #expect(!condition(.custom("plan"), .matchesRegex, "^pro$").matches(pro))
    }

    @Test func versionOperatorsCompareNumericallyNotAsText() {
        // As text "2.10.0" < "2.9"; as versions it is later.
        #expect(condition(.appVersion, .versionGreaterThanOrEqual, "2.9").matches(pro))
        #expect(condition(.appVersion, .versionGreaterThan, "2.9.9").matches(pro))
        #expect(!condition(.appVersion, .versionLessThan, "2.9").matches(pro))
        #expect(condition(.appVersion, .versionLessThanOrEqual, "2.10").matches(pro))
        #expect(condition(.appVersion, .versionEquals, "2.10").matches(pro))
        #expect(condition(.osVersion, .versionGreaterThanOrEqual, "9").matches(pro))
        #expect(!condition(.osVersion, .versionGreaterThanOrEqual, "9.2").matches(pro))
    }

    @Test func versionOperatorOnACustomAttributeThatIsNotAVersionNeverMatches() {
        #expect(!condition(.custom("plan"), .versionGreaterThanOrEqual, "1").matches(pro))
        #expect(!condition(.custom("plan"), .versionLessThanOrEqual, "1").matches(pro))
    }

    @Test func missingCustomAttributeNeverMatches() {
        #expect(!condition(.custom("team"), .equals, "x").matches(pro))
        #expect(!condition(.custom("team"), .notEquals, "x").matches(pro))
    }

    @Test func invalidOperandsAreRefused() {
        #expect(SegmentCondition(attribute: .appVersion, comparison: .versionGreaterThan, operand: "latest") == nil)
        #expect(SegmentCondition(attribute: .os, comparison: .matchesRegex, operand: "[") == nil)
    }

    @Test func combinatorsFollowBooleanLogic() {
        let yes = SegmentExpression.condition(condition(.os, .equals, "iOS"))
        let no = SegmentExpression.condition(condition(.os, .equals, "Android"))
        #expect(SegmentExpression.all([yes, yes]).matches(pro))
        #expect(!SegmentExpression.all([yes, no]).matches(pro))
        #expect(SegmentExpression.any([no, yes]).matches(pro))
        #expect(!SegmentExpression.any([no, no]).matches(pro))
        #expect(SegmentExpression.not(no).matches(pro))
        #expect(SegmentExpression.all([yes, .any([no, .not(no)])]).matches(pro))
    }
}

struct CampaignClientTests {
    @Test func enrolmentEmitsParticipationOnceAndStaysSticky() throws {
        var client = client([campaignJSON(id: 34)])
        var rng = Xoshiro256(seed: 1)
        let first = client.variation(forCampaign: 34, at: 100, using: &rng)
        #expect(first.reason == .enrolled)
        let event = try #require(first.events.first)
        #expect(first.events.count == 1)
        #expect(event.kind == .participation)
        #expect(event.endpoint == "l.gif")
        #expect(event.experimentID == 34)
        #expect(event.combination == first.variation?.id)

        for time in [101.0, 200, 5000] {
            let again = client.variation(forCampaign: 34, at: time, using: &rng)
            #expect(again.variation == first.variation)
            #expect(again.reason == .alreadyEnrolled)
            #expect(again.events.isEmpty)
        }
        #expect(client.currentCombination == [34: try #require(first.variation).id])
    }

    @Test func participationEventCarriesTheSeedsFields() throws {
        var client = client([campaignJSON(id: 34, weights: [0, 100])])
        client.startSession()
        var rng = Xoshiro256(seed: 2)
        let event = try #require(client.variation(forCampaign: 34, at: 1443187441.5, using: &rng).events.first)
        #expect(event.parameters == [
            "experiment_id": "34", "account_id": "10", "combination": "2", "u": "1F4140267B59", "s": "2",
            "ed": #"{"av":"2.4.1","dt":"iPhone7,1","i":"cccf243b","lt":1443187441.5,"os":"9.1","v":"1.4.4"}"#,
        ])
        #expect(event.goalID == nil)
        #expect(event.revenue == nil)
    }

    @Test func goalIsReportedOncePerGoalWithRevenue() throws {
        var client = client([campaignJSON(id: 34, goals: [["id": 1, "identifier": "signup"], ["id": 2, "identifier": "buy"]])])
        var rng = Xoshiro256(seed: 3)
        let enrolled = client.variation(forCampaign: 34, at: 10, using: &rng)
        client.startSession()

        let bought = client.triggerGoal("buy", revenue: 9.99, at: 50)
        let event = try #require(bought.first)
        #expect(bought.count == 1)
        #expect(event.kind == .goal)
        #expect(event.endpoint == "c.gif")
        #expect(event.goalID == 2)
        #expect(event.combination == enrolled.variation?.id)
        #expect(event.sessionNumber == 2)
        #expect(event.extraData.joinedAt == 10, "lt is when the user joined, not when the goal fired")
        #expect(event.parameters["r"] == "9.99")
        #expect(event.parameters["goal_id"] == "2")

        #expect(client.triggerGoal("buy", revenue: 5, at: 60).isEmpty)
        #expect(client.triggerGoal("buy", at: 70).isEmpty)
        let signup = client.triggerGoal("signup", at: 80)
        #expect(signup.map(\.goalID) == [1])
        #expect(signup.first?.parameters["r"] == nil)
        #expect(client.triggerGoal("unknown", at: 90).isEmpty)
    }

    @Test func goalOfACampaignTheUserIsNotPartOfIsNotReported() {
        var client = client([campaignJSON(id: 34)])
        #expect(client.triggerGoal("signup", at: 1).isEmpty)
        var rng = Xoshiro256(seed: 4)
        _ = client.variation(forCampaign: 34, at: 2, using: &rng)
        #expect(client.triggerGoal("signup", at: 3).count == 1, "a goal before enrolment does not count as reported")
    }

    @Test func sharedGoalIdentifierReportsOncePerEnrolledCampaign() {
        var client = client([campaignJSON(id: 34), campaignJSON(id: 35), campaignJSON(id: 36)])
        var rng = Xoshiro256(seed: 5)
        _ = client.variation(forCampaign: 34, at: 1, using: &rng)
        _ = client.variation(forCampaign: 36, at: 1, using: &rng)
        #expect(client.triggerGoal("signup", at: 2).map(\.experimentID) == [34, 36])
        #expect(client.triggerGoal("signup", at: 3).isEmpty)
    }

    @Test func pausedCampaignShowsControlToNewcomersWithoutEnrollingOrDrawing() {
        var client = client([campaignJSON(id: 34, status: "PAUSED", weights: [0, 100])])
        var rng = Xoshiro256(seed: 6)
        let before = rng
        let outcome = client.variation(forCampaign: 34, at: 1, using: &rng)
        #expect(outcome.variation?.id == 1)
        #expect(outcome.reason == .paused)
        #expect(outcome.events.isEmpty)
        #expect(client.currentCombination.isEmpty)
        #expect(client.state.memberships.isEmpty)
        var untouched = before
        #expect(rng.next() == untouched.next(), "no random draw for a paused campaign")
    }

    @Test func pausedCampaignKeepsParticipantsVariationAndSendsNothing() throws {
        var client = client([campaignJSON(id: 34, weights: [0, 100])])
        var rng = Xoshiro256(seed: 7)
        _ = client.variation(forCampaign: 34, at: 1, using: &rng)
        client.applySettings([campaignJSON(id: 34, status: "PAUSED", weights: [0, 100])], at: 2)

        let outcome = client.variation(forCampaign: 34, at: 3, using: &rng)
        #expect(outcome.variation?.id == 2)
        #expect(outcome.reason == .paused)
        #expect(outcome.events.isEmpty)
        #expect(client.currentCombination == [34: 2])
        #expect(client.triggerGoal("signup", at: 4).isEmpty, "no goal events while paused")

        client.applySettings([campaignJSON(id: 34, weights: [0, 100])], at: 5)
        #expect(client.variation(forCampaign: 34, at: 6, using: &rng).events.isEmpty, "participation was already sent")
        #expect(client.triggerGoal("signup", at: 7).count == 1, "the goal is reported once running again")
    }

    @Test func excludedCampaignShowsControlAndReportsZeroInCombination() {
        var client = client([campaignJSON(id: 34, status: "EXCLUDED", weights: [0, 100]), campaignJSON(id: 35, weights: [0, 100])])
        var rng = Xoshiro256(seed: 8)
        let outcome = client.variation(forCampaign: 34, at: 1, using: &rng)
        #expect(outcome.variation?.id == 1)
        #expect(outcome.reason == .excluded)
        #expect(outcome.events.isEmpty)
        _ = client.variation(forCampaign: 35, at: 1, using: &rng)
        #expect(client.currentCombination == [34: 0, 35: 2])
        #expect(client.currentCombinationText == #"{"34":0,"35":2}"#)
        #expect(client.triggerGoal("signup", at: 2).map(\.experimentID) == [35])
    }

    @Test func campaignExcludedAfterEnrolmentReportsZeroAndShowsControl() {
        var client = client([campaignJSON(id: 34, weights: [0, 100])])
        var rng = Xoshiro256(seed: 9)
        _ = client.variation(forCampaign: 34, at: 1, using: &rng)
        client.applySettings([campaignJSON(id: 34, status: "EXCLUDED", weights: [0, 100])], at: 2)
        #expect(client.currentCombination == [34: 0])
        #expect(client.variation(forCampaign: 34, at: 3, using: &rng).variation?.id == 1)
        #expect(client.triggerGoal("signup", at: 4).isEmpty)
    }

    @Test func deviceOutsideTheSegmentSeesControlAndIsNotEnrolled() {
        let segment: JSONValue = ["attribute": "app_version", "operator": "version_gte", "value": "2.10"]
        var client = client([campaignJSON(id: 34, weights: [0, 100], segment: segment)])
        var rng = Xoshiro256(seed: 10)
        let outcome = client.variation(forCampaign: 34, at: 1, using: &rng)
        #expect(outcome.variation?.id == 1)
        #expect(outcome.reason == .notInSegment)
        #expect(outcome.events.isEmpty)
        #expect(client.currentCombination.isEmpty)
        #expect(client.triggerGoal("signup", at: 2).isEmpty)

        // After an update to 2.10.0 (later than 2.4.1 and than 2.9 despite sorting first as text)
        // the device qualifies and is enrolled on its next request.
        client.attributes.appVersion = "2.10.0"
        let enrolled = client.variation(forCampaign: 34, at: 3, using: &rng)
        #expect(enrolled.reason == .enrolled)
        #expect(enrolled.variation?.id == 2)
        #expect(enrolled.events.first?.extraData.appVersion == "2.10.0")

        // Leaving the segment later does not undo the enrolment.
        client.attributes.appVersion = "1.0"
        #expect(client.variation(forCampaign: 34, at: 4, using: &rng).reason == .alreadyEnrolled)
    }

    @Test func segmentOnCustomAttributesAndOSDecidesEligibility() {
        let segment: JSONValue = ["and": [
            ["attribute": "os", "operator": "equals", "value": "iOS"],
            ["or": [
                ["custom_attribute": "plan", "operator": "equals", "value": "pro"],
                ["attribute": "os_version", "operator": "version_lte", "value": "8.4"],
            ]],
        ]]
        var rng = Xoshiro256(seed: 11)
        var free = client([campaignJSON(id: 1, segment: segment)])
        #expect(free.variation(forCampaign: 1, at: 0, using: &rng).reason == .notInSegment)

        var proDevice = device
        proDevice.custom["plan"] = "pro"
        var pro = client([campaignJSON(id: 1, segment: segment)], attributes: proDevice)
        #expect(pro.variation(forCampaign: 1, at: 0, using: &rng).reason == .enrolled)

        var android = proDevice
        android.os = "Android"
        var other = client([campaignJSON(id: 1, segment: segment)], attributes: android)
        #expect(other.variation(forCampaign: 1, at: 0, using: &rng).reason == .notInSegment)
    }

    @Test func unknownCampaignReturnsNoVariation() {
        var client = client([campaignJSON(id: 34)])
        var rng = Xoshiro256(seed: 12)
        let outcome = client.variation(forCampaign: 99, at: 0, using: &rng)
        #expect(outcome.variation == nil)
        #expect(outcome.reason == .unknownCampaign)
        #expect(outcome.events.isEmpty)
    }

    @Test func sessionStartIncrementsTheSessionNumber() {
        var client = client([campaignJSON(id: 34)])
        #expect(client.sessionNumber == 1)
        #expect(client.startSession() == 2)
        #expect(client.startSession() == 3)
        var rng = Xoshiro256(seed: 13)
        #expect(client.variation(forCampaign: 34, at: 0, using: &rng).events.first?.sessionNumber == 3)
    }

    /// Enrolments read, write, compare and persist as the dictionary they stand for.
    @Test func membershipsBehaveAsADictionary() throws {
        let a = CampaignMembership(variationID: 2, joinedAt: 1, sessionNumber: 1)
        let b = CampaignMembership(variationID: 1, joinedAt: 5, sessionNumber: 3)
        var memberships = CampaignMemberships()
        #expect(memberships.isEmpty && memberships[34] == nil)
        memberships[34] = a
        memberships[29] = b
        memberships[7] = a
        memberships[7] = nil
        #expect(memberships.count == 2 && memberships[34] == a && memberships[29] == b && memberships[7] == nil)
        memberships[34] = b
        let dictionary: [Int: CampaignMembership] = [29: b, 34: b]
        #expect(memberships.dictionary == dictionary)
        // Enrolment order does not matter to equality, hashing or the persisted form.
        let other: CampaignMemberships = [34: b, 29: b]
        #expect(memberships == other && memberships.hashValue == other.hashValue)
        #expect(memberships != [34: b])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(try encoder.encode(memberships) == encoder.encode(dictionary))
        #expect(try JSONDecoder().decode(CampaignMemberships.self, from: encoder.encode(dictionary)) == memberships)
    }

    @Test func persistedStateKeepsEnrolmentAndReportedGoalsAcrossLaunches() throws {
        var first = client([campaignJSON(id: 34)])
        var rng = Xoshiro256(seed: 14)
        let assigned = first.variation(forCampaign: 34, at: 1, using: &rng).variation
        _ = first.triggerGoal("signup", at: 2)

        let saved = try JSONEncoder().encode(first.state)
        let restored = try JSONDecoder().decode(CampaignClientState.self, from: saved)
        var second = CampaignClient(state: restored, attributes: device, configuration: identity)
        second.applySettings([campaignJSON(id: 34)], at: 3)
        second.startSession()

        let again = second.variation(forCampaign: 34, at: 4, using: &rng)
        #expect(again.variation == assigned)
        #expect(again.events.isEmpty)
        #expect(second.triggerGoal("signup", at: 5).isEmpty)
        #expect(second.sessionNumber == 2)
    }

    @Test func settingsRequestCarriesTheCombination() throws {
        var client = client([campaignJSON(id: 34, weights: [0, 100]), campaignJSON(id: 37, status: "EXCLUDED")])
        var rng = Xoshiro256(seed: 15)
        _ = client.variation(forCampaign: 34, at: 0, using: &rng)
        let parameters = client.settingsRequestParameters(using: &rng)
        #expect(parameters["k"] == #"{"34":2,"37":0}"#)
        #expect(parameters["a"] == "10")
        #expect(parameters["u"] == "1F4140267B59")
        #expect(parameters["dt"] == "iPhone7,1")
        let r = try #require(parameters["r"].flatMap { Double($0) })
        #expect((0..<1).contains(r))
    }

    @Test func weightedAssignmentMatchesWeights() {
        // 20 000 fresh devices draw from weights 20/30/50 with one seeded stream. Each share is a
        // binomial proportion with standard error sqrt(p(1 − p)/n): 0.0028, 0.0032 and 0.0035.
        // The tolerance is 5 standard errors.
        let weights = [20.0, 30, 50]
        let n = 20_000
        var rng = Xoshiro256(seed: 20_240_601)
        var counts: [Int: Int] = [:]
        let settings: JSONValue = [campaignJSON(id: 1, weights: weights)]
        for index in 0..<n {
            var device = CampaignClient(
                state: CampaignClientState(deviceID: "device-\(index)"), attributes: device, configuration: identity)
            device.applySettings(settings, at: 0)
            if let id = device.variation(forCampaign: 1, at: 0, using: &rng).variation?.id {
                counts[id, default: 0] += 1
            }
        }
        #expect(counts.values.reduce(0, +) == n)
        for (index, weight) in weights.enumerated() {
            let p = weight / 100
            let share = Double(counts[index + 1, default: 0]) / Double(n)
            let tolerance = 5 * (p * (1 - p) / Double(n)).squareRoot()
            #expect(abs(share - p) < tolerance, "variation \(index + 1): \(share) vs \(p)")
        }
    }

    @Test func zeroWeightVariationIsNeverAssigned() {
        var rng = Xoshiro256(seed: 16)
        for index in 0..<500 {
            var device = client([campaignJSON(id: 1, weights: [0, 1, 0, 1])], deviceID: "d\(index)")
            let id = device.variation(forCampaign: 1, at: 0, using: &rng).variation?.id
            #expect(id == 2 || id == 4)
        }
    }
}
