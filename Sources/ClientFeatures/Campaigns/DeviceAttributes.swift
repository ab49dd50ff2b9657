/// What a device reports about itself, for segmentation and for the events' extra data.
///
/// `DeviceAttributes` is `Sendable`: it is a plain value.
public struct DeviceAttributes: Hashable, Codable, Sendable {
    /// The app's version, e.g. `2.4.1` (`av`).
    public var appVersion: String
    /// The operating system's name, e.g. `iOS`.
    public var os: String
    /// The operating system's version, e.g. `9.1` (`os` in the events).
    public var osVersion: String
    /// The hardware model, e.g. `iPhone7,1` (`dt`).
    public var deviceType: String
    /// App-defined attributes, e.g. `["plan": "pro"]`.
    public var custom: [String: String]

    /// Creates a device description.
    ///
    /// - Parameters:
    ///   - appVersion: The app's version.
    ///   - os: The operating system's name.
    ///   - osVersion: The operating system's version.
    ///   - deviceType: The hardware model.
    ///   - custom: App-defined attributes.
    public init(appVersion: String, os: String, osVersion: String, deviceType: String, custom: [String: String] = [:]) {
        self.appVersion = appVersion
        self.os = os
        self.osVersion = osVersion
        self.deviceType = deviceType
        self.custom = custom
    }
}
