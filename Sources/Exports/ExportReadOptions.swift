/// How ``ExportReader`` reads an export: its format, where the experiment and the variant
/// are, and how much damage it tolerates.
///
/// `Sendable`: a plain value.
public struct ExportReadOptions: Sendable {
    /// The export's format; `nil` detects it from the content (``ExportDetection``).
    public var format: ExportFormat?
    /// Property names tried in order for the experiment's id: apps and A/B SDKs name it
    /// differently (Aviary's vendor wire `experiment`, Optimizely `experiment_id`,
    /// PostHog `$feature_flag`, Statsig/LaunchDarkly `flag_key`, Amplitude Experiment
    /// `Experiment name`).
    public var experimentProperties: [String]
    /// Property names tried in order for the variant.
    public var variantProperties: [String]
    /// The fraction of malformed lines that stops the read (checked from the 1,000th line on,
    /// and at the end): a few damaged lines are counted and skipped, a wrong format is not
    /// read as mostly-missing data.
    public var maxBadFraction: Double
    /// Seconds to subtract from Mixpanel's `time`: projects created before 2023 export it in
    /// the project's time zone (e.g. −28,800 for US Pacific standard time, 19,800 for India).
    public var mixpanelTimeZoneOffset: Double

    /// The experiment property names tried by default.
    public static let defaultExperimentProperties = ["experiment", "experiment_id", "experiment_name", "$feature_flag", "flag_key", "Experiment name"]
    /// The variant property names tried by default.
    public static let defaultVariantProperties = ["variant", "variation_id", "variation_name", "$feature_flag_response", "Variant name"]

    /// Options with every field given; the defaults detect the format, try the usual
    /// property names and stop at 1 % malformed lines.
    public init(format: ExportFormat? = nil, experimentProperties: [String] = defaultExperimentProperties,
                variantProperties: [String] = defaultVariantProperties, maxBadFraction: Double = 0.01, mixpanelTimeZoneOffset: Double = 0) {
        self.format = format
        self.experimentProperties = experimentProperties
        self.variantProperties = variantProperties
        self.maxBadFraction = maxBadFraction
        self.mixpanelTimeZoneOffset = mixpanelTimeZoneOffset
    }
}
