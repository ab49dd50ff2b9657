import Allocators
import ClientFeatures
import ExperimentModel
import ExperimentServer
import Foundation
import NIOCore
import Testing
import WireFormat
import Yams
@testable import LiveServer

/// `aviary serve`'s routes for devices written against other services: VWO's mobile API
/// (`GET /mobile`, `/l.gif`, `/c.gif`) read by the real campaign parser, and MSActiveConfig's
/// download (`GET /activeconfig/user/{user}`) read by the real ``ActiveConfig``.
struct DeviceRoutesTests {
    /// `path` with `pairs` as its query, each value percent-encoded as a VWO device encodes it.
    static func url(_ path: String, _ pairs: [(String, String)]) -> String {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return path + "?" + pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: unreserved)!)" }.joined(separator: "&")
    }

    /// A participation pixel of campaign `experiment`, variation `combination`, from device `u`.
    static func participation(_ experiment: String = "1", _ combination: String = "2", u: String = "device-1", ed: String? = nil) -> [(String, String)] {
        var pairs = [("experiment_id", experiment), ("account_id", "10"), ("combination", combination), ("u", u), ("s", "1"), ("random", "0.42")]
        if let ed { pairs.append(("ed", ed)) }
        return pairs
    }

    /// A goal pixel: a participation's parameters, `goal_id` and, unless `nil`, the revenue `r`.
    static func goal(_ goal: String = "1", r: String? = nil, u: String = "device-1", ed: String? = nil) -> [(String, String)] {
        var pairs = participation(u: u, ed: ed) + [("goal_id", goal)]
        if let r { pairs.append(("r", r)) }
        return pairs
    }

    // MARK: - VWO

    @Test func settingsAreTheServedExperimentsAsRunningCampaigns() async throws {
        try await RouterHarness.withRoutes { service, routes in
            // The README's sample URL's parameters.
            let answer = try await routes.get(Self.url("/mobile", [
                ("a", "10"), ("dt", "x86_64"), ("i", "cccf243b3e2b18b4bdfbad0a8d2b1f2b"), ("k", #"{"34":"2","29":"1"}"#), ("os", "9.1"),
                ("r", "0.1312175181839697"), ("u", "1F4140267B594340AFEA983544A8E985"), ("v", "1.4.4"),
            ]))
            #expect(answer.status == 200)
            #expect(answer.contentType == "application/json")
            let campaigns = try Campaign.parseSettings(JSONValue(parsing: answer.body))
            let data = service.publishedData()
            #expect(campaigns.map(\.id) == [1, 2])
            #expect(campaigns.map(\.name) == ["checkout", "feed"])
            for (campaign, experiment) in zip(campaigns, data.experiments) {
                #expect(campaign.status == .running)
                #expect(campaign.variations.map(\.id) == Array(1...experiment.variants.count))
                #expect(campaign.variations.map(\.name) == experiment.variants.map(\.id))
                #expect(abs(campaign.variations.reduce(0) { $0 + $1.weight } - 100) < 1e-9)
                for (variation, weight) in zip(campaign.variations, experiment.snapshot.weights) {
                    #expect(abs(variation.weight - weight * 100) < 1e-9)
                }
                #expect(campaign.goals == [CampaignGoal(id: 1, identifier: experiment.id)])
                #expect(campaign.segment == nil)
            }

            let anonymous = try await routes.get("/mobile?a=10&i=k")
            #expect(anonymous.status == 400)
            #expect(anonymous.json["field"] as? String == "u")
        }
    }

    @Test func aParticipationSentAgainIsIngestedOnce() async throws {
        try await RouterHarness.withRoutes { service, routes in
            // The README's example extra data.
            let ed = #"{"i":"39c9fe3503ba2887a1584451a0158b3c","lt":1443187441.434723,"av":"1.0","os":"8.2","dt":"x86_64"}"#
            let path = Self.url("/l.gif", Self.participation(ed: ed))
            let first = try await routes.get(path)
            #expect(first.status == 200)
            #expect(first.contentType == "image/gif")
            #expect(first.ingested == "1")
            #expect(first.body.count == 43 && first.body.starts(with: Array("GIF89a".utf8)) && first.body.last == 0x3B)
            #expect(Array(first.body) == ExperimentHTTPServer.transparentGIF)
            let again = try await routes.get(path)
            #expect(again.status == 200)
            #expect(again.contentType == "image/gif")
            #expect(again.ingested == "0")
            // Once per campaign: the same device's participation is one whatever else changes.
            let otherSession = try await routes.get(Self.url("/l.gif", Self.participation(ed: #"{"lt":1443187500}"#)))
            #expect(otherSession.ingested == "0")

            let green = try await routes.results("checkout", "green")
            #expect(green["participations"] as? Int == 1)
            #expect(green["value"] as? Double == 0)
            let control = try await routes.results("checkout", "control")
            #expect(control["participations"] as? Int == 0)
            #expect(service.stats().eventsAccepted == 1)
            #expect(service.stats().duplicatesIgnored == 2)
            #expect(service.ingestedCount([Wire.eventID(vendorKey: "vwo:device-1:1:l")]) == 1)
        }
    }

    @Test func aGoalIsWorthItsRevenue() async throws {
        try await RouterHarness.withRoutes { service, routes in
            let first = try await routes.get(Self.url("/c.gif", Self.goal(r: "3.99")))
            #expect(first.status == 200)
            #expect(first.contentType == "image/gif")
            #expect(first.ingested == "1")
            var green = try await routes.results("checkout", "green")
            #expect(green["goals"] as? Int == 1)
            #expect(green["value"] as? Double == 3.99)
            // Once per goal: a repeat counts once, another goal of the campaign again.
            #expect(try await routes.get(Self.url("/c.gif", Self.goal(r: "3.99"))).ingested == "0")
            #expect(try await routes.get(Self.url("/c.gif", Self.goal("2"))).ingested == "1")
            green = try await routes.results("checkout", "green")
            #expect(green["goals"] as? Int == 2)
            // A goal without revenue is worth 1.
            #expect(abs((green["value"] as? Double ?? 0) - 4.99) < 1e-9)
            #expect(service.ingestedCount([Wire.eventID(vendorKey: "vwo:device-1:1:g1"), Wire.eventID(vendorKey: "vwo:device-1:1:g2")]) == 2)
        }
    }

    @Test func anExactEventIDInTheExtraDataDeduplicatesExactly() async throws {
        try await RouterHarness.withRoutes { service, routes in
            let first = try await routes.get(Self.url("/l.gif", Self.participation(ed: #"{"id":"42#7","lt":1760000000}"#)))
            #expect(first.ingested == "1")
            // The id, not the pixel, is the event: another campaign's pixel under it is a repeat.
            let same = try await routes.get(Self.url("/l.gif", Self.participation("2", "3", u: "device-2", ed: #"{"id":"42#7"}"#)))
            #expect(same.status == 200)
            #expect(same.ingested == "0")
            // And each id is its own event, even for the pixel's own campaign.
            let next = try await routes.get(Self.url("/l.gif", Self.participation(ed: #"{"id":"42#8"}"#)))
            #expect(next.ingested == "1")
            #expect(service.ingestedCount([EventID(device: 42, sequence: 7), EventID(device: 42, sequence: 8)]) == 2)
            // An id not in the exact form (a leading zero) is not an id: the pixel's key is used.
            let loose = try await routes.get(Self.url("/l.gif", Self.participation(u: "device-3", ed: #"{"id":"042#9"}"#)))
            #expect(loose.ingested == "1")
            #expect(service.ingestedCount([EventID(device: 42, sequence: 9)]) == 0)
            #expect(service.ingestedCount([Wire.eventID(vendorKey: "vwo:device-3:1:l")]) == 1)
            // As an HTML form encodes it (Python's urlencode, URLSearchParams): `+` for a space.
            let form = "/l.gif?experiment_id=2&combination=1&u=device+4&ed=%7B%22lt%22%3A+1760000000%2C+%22id%22%3A+%2242%2310%22%7D"
            #expect(try await routes.get(form).ingested == "1")
            #expect(service.ingestedCount([EventID(device: 42, sequence: 10)]) == 1)
            #expect(service.stats().eventsAccepted == 4)
        }
    }

    @Test func badPixelsAreRefusedNamingTheField() async throws {
        try await RouterHarness.withRoutes { service, routes in
            let without = { (name: String, pairs: [(String, String)]) in pairs.filter { $0.0 != name } }
            let with = { (name: String, value: String, pairs: [(String, String)]) in without(name, pairs) + [(name, value)] }
            let cases: [(String, [(String, String)], String, Int)] = [
                ("/l.gif", without("experiment_id", Self.participation()), "experiment_id", 400),
                ("/l.gif", Self.participation("0"), "experiment_id", 400),
                ("/l.gif", Self.participation("3"), "experiment_id", 400),
                ("/l.gif", Self.participation("one"), "experiment_id", 400),
                ("/l.gif", without("combination", Self.participation()), "combination", 400),
                ("/l.gif", Self.participation("1", "3"), "combination", 400),
                ("/l.gif", Self.participation("1", "0"), "combination", 400),
                ("/l.gif", Self.participation("2", "4"), "combination", 400),
                ("/l.gif", without("u", Self.participation()), "u", 400),
                ("/l.gif", Self.participation(u: ""), "u", 400),
                ("/l.gif", Self.participation(u: String(repeating: "u", count: 257)), "u", 422),
                ("/c.gif", without("goal_id", Self.goal()), "goal_id", 400),
                ("/c.gif", Self.goal("0"), "goal_id", 400),
                ("/c.gif", Self.goal("-1"), "goal_id", 400),
                ("/c.gif", Self.goal("signup"), "goal_id", 400),
                ("/c.gif", Self.goal(r: "abc"), "r", 400),
                ("/c.gif", Self.goal(r: "inf"), "r", 400),
                ("/c.gif", Self.goal(r: "nan"), "r", 400),
                ("/c.gif", Self.goal(r: "0x1p3"), "r", 400),
                ("/c.gif", Self.goal(r: ""), "r", 400),
                ("/c.gif", Self.goal(r: "1e12"), "r", 422),
                ("/l.gif", Self.participation(ed: "{"), "ed", 400),
                ("/l.gif", Self.participation(ed: "[1]"), "ed", 400),
                ("/l.gif", Self.participation(ed: "lt=5"), "ed", 400),
                ("/l.gif", Self.participation(ed: #"{"lt":"yesterday"}"#), "ed.lt", 400),
                ("/l.gif", Self.participation(ed: #"{"lt":5e9}"#), "ed.lt", 422),
                ("/l.gif", Self.participation(ed: #"{"av":""# + String(repeating: "x", count: 5000) + #""}"#), "ed", 422),
                ("/c.gif", with("ed", "{", Self.goal(r: "abc")), "ed", 400),
            ]
            for (path, pairs, field, status) in cases {
                let answer = try await routes.get(Self.url(path, pairs))
                #expect(answer.status == status, "\(path) \(pairs)")
                #expect(answer.contentType == "application/json")
                #expect(answer.json["field"] as? String == field, "\(path) \(pairs): \(String(decoding: answer.body, as: UTF8.self))")
                #expect((answer.json["expected"] as? String)?.isEmpty == false)
            }
            #expect(service.stats().eventsAccepted == 0)
            #expect(service.stats().batches == 0)
        }
    }

    @Test func overCapacityAPixelIsRefusedWithRetryAfter() async throws {
        // One event's work (1 s at 1 event/s) never fits a 0.5 s backlog.
        let capacity = Capacity(eventsPerSecond: 1, maxConcurrent: 1, maxBacklog: 0.5)
        try await RouterHarness.withRoutes(capacity: capacity) { service, routes in
            let answer = try await routes.get(Self.url("/l.gif", Self.participation()))
            #expect(answer.status == 503)
            #expect(answer.contentType == "application/json")
            #expect(answer.header("Retry-After") != nil)
            #expect(service.stats().rejectedOverCapacity == 1)
            #expect(service.stats().eventsAccepted == 0)
        }
    }

    @Test func withClientKeysTheAppKeyIsTheClientKey() async throws {
        let keys = APIKeys(clientKeys: ["key-one", "key-two"])
        try await RouterHarness.withRoutes(keys: keys) { service, routes in
            for (i, status) in [(nil, 401), ("", 401), ("key-on", 401), ("key-two", 200)] as [(String?, Int)] {
                let pairs = [("a", "10"), ("u", "d1")] + (i.map { [("i", $0)] } ?? [])
                let answer = try await routes.get(Self.url("/mobile", pairs))
                #expect(answer.status == status, "i = \(i ?? "none")")
                if status == 401 { #expect(answer.json["field"] as? String == "i") }
            }
            for (ed, status) in [(nil, 401), (#"{"lt":1}"#, 401), (#"{"i":7}"#, 401), (#"{"i":"key-one "}"#, 401), (#"{"i":"key-one"}"#, 200)] as [(String?, Int)] {
                let answer = try await routes.get(Self.url("/l.gif", Self.participation(ed: ed)))
                #expect(answer.status == status, "ed = \(ed ?? "none")")
                if status == 401 { #expect(answer.json["field"] as? String == "ed.i") }
            }
            // The key is checked before anything else is looked at.
            let probe = try await routes.get(Self.url("/l.gif", Self.participation("99")))
            #expect(probe.status == 401)
            let goal = try await routes.get(Self.url("/c.gif", Self.goal(r: "2", ed: #"{"i":"key-two"}"#)))
            #expect(goal.status == 200 && goal.ingested == "1")

            let refused = try await routes.get("/activeconfig/user/alice")
            #expect(refused.status == 401)
            #expect(refused.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            #expect(try await routes.get("/activeconfig/user/alice", headers: ["Authorization": "Bearer key-on"]).status == 401)
            #expect(try await routes.get("/activeconfig/user/alice", headers: ["Authorization": "Bearer key-one"]).status == 200)
            #expect(service.stats().eventsAccepted == 2)
        }
    }

    @Test func theDocumentDescribesTheDeviceRoutes() throws {
        let keyed = OpenAPIDocument.yaml(experiments: ExperimentServiceTests.experiments, keys: APIKeys(clientKeys: ["k"]))
        let document = try #require(try Yams.load(yaml: keyed) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: Any])
        func operation(_ path: String) throws -> [String: Any] {
            try #require((paths[path] as? [String: Any])?["get"] as? [String: Any], "\(path)")
        }
        for path in ["/mobile", "/l.gif", "/c.gif"] {
            // The app key is a query parameter (or inside one): no scheme can state it.
            let security = try #require(try operation(path)["security"] as? [Any], "\(path)")
            #expect(security.isEmpty, "\(path)")
            let responses = try #require(try operation(path)["responses"] as? [String: Any], "\(path)")
            #expect(Set(responses.keys).isSuperset(of: ["200", "400", "401", "422"]), "\(path)")
        }
        let pixel = try #require(((document["components"] as? [String: Any])?["responses"] as? [String: Any])?["Pixel"] as? [String: Any])
        #expect((pixel["content"] as? [String: Any])?["image/gif"] != nil)
        #expect((pixel["headers"] as? [String: Any])?["aviary-ingested"] != nil)
        let activeConfig = try operation("/activeconfig/user/{user}")
        #expect((activeConfig["security"] as? [[String: Any]])?.first?["clientKey"] != nil)
        // Campaign ids run to the experiments served (2), variation ids to the most variants (3).
        let parameters = try #require((document["components"] as? [String: Any])?["parameters"] as? [String: Any])
        #expect(((parameters["VWOCampaign"] as? [String: Any])?["schema"] as? [String: Any])?["maximum"] as? Int == 2)
        #expect(((parameters["VWOCombination"] as? [String: Any])?["schema"] as? [String: Any])?["maximum"] as? Int == 3)
    }

    // MARK: - MSActiveConfig

    @Test func aConfigurationParsesWithActiveConfig() async throws {
        try await RouterHarness.withRoutes { service, routes in
            let user = "alice smith"
            let answer = try await routes.get("/activeconfig/user/alice%20smith")
            #expect(answer.status == 200)
            #expect(answer.contentType == "application/json")
            let payload = try JSONValue(parsing: answer.body)
            let configuration = try ConfigurationState(parsing: payload)
            #expect(configuration.meta.formatVersion == "1.0")
            // YYYY-MM-DDTHH:MM:SS.fffZ, the server's clock now.
            let text = Array(configuration.meta.creationTimeText)
            #expect(text.count == 24 && text[10] == "T" && text[19] == "." && text[23] == "Z", "\(configuration.meta.creationTimeText)")
            let created = try #require(configuration.meta.creationTime)
            #expect(abs(created - Date().timeIntervalSince1970) < 60)
            let data = service.publishedData()
            #expect(configuration.meta.otherKeys == ["policy_version": .number(Double(data.version))])
            #expect(configuration.sections.keys.sorted() == ["Experiments"])
            let section = try #require(configuration.sections["Experiments"])
            #expect(section.keys.sorted() == ["checkout", "feed"])
            for experiment in data.experiments {
                let names = experiment.variants.indices.map { $0 == 0 ? "v0_baseline" : "v\($0)" }
                let value = try #require(section.string(experiment.id))
                #expect(names.contains(value), "\(experiment.id): \(value)")
                // The variant the published weights give at the user's bucket.
                let variant = experiment.snapshot.variant(forUniform: ExperimentHTTPServer.bucket(user: user, experiment: experiment.id))
                #expect(value == names[variant])
            }
            // The client takes it as a download for that user.
            var config = ActiveConfig(initialSharedConfiguration: nil, userID: user)
            let outcome = config.apply(payload: payload, forUser: user, at: created)
            #expect(outcome.error == nil)
            #expect(config["Experiments"].string("checkout") == section.string("checkout"))

            let long = try await routes.get("/activeconfig/user/" + String(repeating: "u", count: 257))
            #expect(long.status == 422)
            #expect(long.json["field"] as? String == "user")
        }
    }

    @Test func aUserKeepsTheirVariantWhileThePolicyStands() async throws {
        try await RouterHarness.withRoutes { service, routes in
            for user in ["user-1", "user-2", "9F4140267B594340AFEA983544A8E985"] {
                let first = try ConfigurationState(parsing: JSONValue(parsing: try await routes.get("/activeconfig/user/\(user)").body))
                let second = try ConfigurationState(parsing: JSONValue(parsing: try await routes.get("/activeconfig/user/\(user)").body))
                #expect(first.meta.otherKeys["policy_version"] == second.meta.otherKeys["policy_version"])
                #expect(first.sections == second.sections, "\(user)")
            }
        }
    }

    /// Over fixed users the variants' shares are the published weights: each user's bucket is a
    /// uniform draw, so the number of users in a variant of weight w is binomial (N, w), its
    /// share within 5 standard errors, 5·√(w(1−w)/N), of w (at N = 2000: ±0.055 for w = 0.6,
    /// ±0.034 for w = 0.1). The users are fixed, so the check is deterministic: it fails only if
    /// the hash does not spread users evenly.
    @Test func variantSharesFollowThePublishedWeights() async throws {
        let banner = ExperimentDefinition(id: "banner", variants: ["a", "b", "c"].map { VariantDefinition(id: $0) })
        // A fixed split: the policy stands however many downloads there are.
        let configuration = ServerConfiguration(experiments: [banner], allocator: try AllocatorSpec(parsing: "uniform(split=60/30/10)"), seed: 7)
        // 2025-10-09T08:53:20Z.
        let service = try ExperimentService(configuration, clock: { 1_760_000_000 })
        let weights = [0.6, 0.3, 0.1]
        let data = service.publishedData()
        for (published, weight) in zip(data.experiments[0].snapshot.weights, weights) { #expect(abs(published - weight) < 1e-12) }
        try await RouterHarness.withRoutes(service) { routes in
            let settings = try Campaign.parseSettings(JSONValue(parsing: try await routes.get("/mobile?u=d1").body))
            let percent = try #require(settings.first).variations.map(\.weight)
            #expect(zip(percent, [60.0, 30, 10]).allSatisfy { abs($0 - $1) < 1e-9 }, "\(percent)")

            let users = 2000
            var counts = [0, 0, 0]
            for n in 0..<users {
                let answer = try await routes.get("/activeconfig/user/user-\(n)")
                let configuration = try ConfigurationState(parsing: JSONValue(parsing: answer.body))
                #expect(configuration.meta.creationTimeText == "2025-10-09T08:53:20.000Z")
                #expect(configuration.meta.otherKeys["policy_version"] == .number(Double(data.version)))
                let value = try #require(configuration.sections["Experiments"]?.string("banner"))
                let variant = try #require(["v0_baseline", "v1", "v2"].firstIndex(of: value))
                counts[variant] += 1
            }
            for (count, weight) in zip(counts, weights) {
                let share = Double(count) / Double(users)
                #expect(abs(share - weight) <= 5 * (weight * (1 - weight) / Double(users)).squareRoot(), "\(counts)")
            }
        }
    }
}
