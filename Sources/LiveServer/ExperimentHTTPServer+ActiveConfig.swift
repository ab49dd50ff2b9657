import ExperimentModel
import Foundation
import Hummingbird
import NIOCore
import WireFormat

/// MSActiveConfig's download, `GET /activeconfig/user/{user}` (the URL its README gives
/// `MSJSONURLRequestActiveConfigDownloader`), answered in its Configuration Exchange Format:
///
/// ```json
/// {"meta": {"format_version_string": "1.0", "creation_time": "2025-10-09T08:53:20.250Z", "policy_version": 7},
///  "config_sections": {"Experiments": {"settings": {"checkout": {"value": "v1"}}}}}
/// ```
///
/// One section, `Experiments`, holds one setting per served experiment, its value the user's
/// variant by index: `v0_baseline` for the first (the control group), `v1`, `v2`… for the
/// others, since an app's remote values are typed when it is built while a scenario names its
/// variants freely. `meta.policy_version` is the version of the policy that chose them.
///
/// The variant is a percentage rollout of the published policy (the one `GET /v1/experiments`
/// serves): the user's fixed bucket in the experiment (``bucket(user:experiment:)``) mapped
/// through the policy's cumulative weights. So a user keeps their variant while the policy
/// stands, and moves only when an update moves a boundary past their bucket; a download is a
/// pure function of the user and the policy, cheap and cacheable, and what the allocator learns
/// comes from the events the app reports, not from downloads.
///
/// With client keys, a bearer client key, as on `GET /v1/experiments`.
extension ExperimentHTTPServer {
    /// Adds the route to `api`, the group that asks for a client key.
    func addActiveConfigRoutes(to api: RouterGroup<BasicRequestContext>) {
        let service = self.service
        api.get("/activeconfig/user/:user") { _, context in
            do throws(APIError) {
                let user = Self.decoded(context.parameters.get("user") ?? "")
                try Bounds.check(user, length: Bounds.nameLength, field: "user")
                return Self.json(200, Wire.encode(Self.activeConfiguration(for: user, data: service.publishedData(), at: service.clock())))
            } catch {
                return Self.failure(error)
            }
        }
    }

    /// `user`'s configuration under the policy `data` publishes, created at `now` (seconds since
    /// 1970).
    static func activeConfiguration(for user: String, data: ExperimentData, at now: Double) -> JSONValue {
        var settings: [String: JSONValue] = [:]
        for experiment in data.experiments {
            let variant = experiment.snapshot.variant(forUniform: bucket(user: user, experiment: experiment.id))
            settings[experiment.id] = ["value": .string(variant == 0 ? "v0_baseline" : "v\(variant)")]
        }
        var created = ByteBuffer()
        Wire.writeISO8601(milliseconds: Int64((now * 1000).rounded(.down)), into: &created)
        return [
            "meta": [
                "format_version_string": "1.0",
                "creation_time": .string(String(buffer: created)),
                "policy_version": .number(Double(data.version)),
            ],
            "config_sections": ["Experiments": ["settings": .object(settings)]],
        ]
    }

    /// The user's bucket in an experiment: a uniform in [0, 1) that depends on the user and the
    /// experiment alone (the same in every process), and is independent across experiments, so
    /// that one experiment's variant says nothing about another's.
    static func bucket(user: String, experiment: String) -> Double {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in user.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        // 0xFF never occurs in UTF-8: ("ab", "c") and ("a", "bc") hash apart.
        hash = (hash ^ 0xFF) &* 0x0000_0100_0000_01b3
        for byte in experiment.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        // FNV-1a alone spreads short keys poorly into the high bits; SplitMix64's finaliser mixes.
        var z = hash &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        z ^= z >> 31
        return Double(z >> 11) * 0x1.0p-53
    }
}
