import Simulation

/// A sample mean with a two-sided 95 % Student-t confidence interval.
public struct MeanInterval: Hashable, Sendable {
    /// The sample mean.
    public let mean: Double
    /// Half the width of the 95 % interval; 0 for a single observation (no spread is known).
    public let halfWidth: Double
    /// The number of observations.
    public let count: Int

    /// Summarises `values`.
    ///
    /// - Precondition: `values` is not empty.
    public init(_ values: [Double]) {
        precondition(!values.isEmpty, "a mean needs at least one value")
        let mean = values.reduce(0, +) / Double(values.count)
        self.count = values.count
        self.mean = mean
        guard values.count > 1 else {
            halfWidth = 0
            return
        }
        let variance = values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(values.count - 1)
        halfWidth = studentT975(degreesOfFreedom: values.count - 1) * (variance / Double(values.count)).squareRoot()
    }

    /// The interval's lower end.
    public var lower: Double { mean - halfWidth }
    /// The interval's upper end.
    public var upper: Double { mean + halfWidth }
}

/// The 0.975 quantile of Student's t distribution: exact table values to 30 degrees of freedom,
/// then the Cornish–Fisher expansion, which is within 1e-4 beyond that.
func studentT975(degreesOfFreedom df: Int) -> Double {
    let table: [Double] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ]
    precondition(df >= 1, "degrees of freedom must be at least 1")
    if df <= table.count { return table[df - 1] }
    let z = 1.959963984540054
    let n = Double(df)
    let z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z
    return z + (z3 + z) / (4 * n) + (5 * z5 + 16 * z3 + 3 * z) / (96 * n * n) + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * n * n * n)
}
