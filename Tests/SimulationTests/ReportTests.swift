import Foundation
import Randomness
import Testing
@testable import Reports
@testable import Simulation

struct CSVTableTests {
    @Test func quotesOnlyFieldsWithCommasQuotesOrLineBreaks() {
        var table = CSVTable(columns: ["plain", "with, comma", "quote"])
        table.append([.text("a"), .text("b,c"), .text("say \"hi\"")])
        table.append([.text("line\nbreak"), .text("cr\rhere"), .text("")])
        table.append([.integer(-3), .decimal(2.5, places: 2), .text("x y")])
        let expected = "plain,\"with, comma\",quote\n"
            + "a,\"b,c\",\"say \"\"hi\"\"\"\n"
            + "\"line\nbreak\",\"cr\rhere\",\n"
            + "-3,2.5,x y\n"
        #expect(table.text == expected)
    }

    @Test func roundTripsThroughAnRFC4180Reader() {
        let fields = ["a", "b,c", "\"", "\"\"x\"", "multi\nline", ",", "", " spaced "]
        var table = CSVTable(columns: fields.indices.map { "c\($0)" })
        table.append(fields.map { .text($0) })
        let rows = parseCSV(table.text)
        #expect(rows.count == 2)
        #expect(rows.last == fields)
    }

    @Test func writesTheTextToAFile() throws {
        var table = CSVTable(columns: ["x"])
        table.append([.number(0.125)])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-\(UUID().uuidString).csv")
        defer { try? FileManager.default.removeItem(at: url) }
        try table.write(to: url)
        #expect(try String(contentsOf: url, encoding: .utf8) == "x\n0.125\n")
    }

    /// A strict RFC 4180 reader: quoted fields may hold commas, doubled quotes and line breaks.
    func parseCSV(_ text: String) -> [[String]] {
        var rows: [[String]] = [], row: [String] = [], field = ""
        var quoted = false, index = text.startIndex
        while index < text.endIndex {
            let c = text[index]
            index = text.index(after: index)
            if quoted {
                if c == "\"" {
                    if index < text.endIndex && text[index] == "\"" {
                        field.append("\"")
                        index = text.index(after: index)
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(c)
                }
            } else if c == "\"" {
                quoted = true
            } else if c == "," {
                row.append(field)
                field = ""
            } else if c == "\n" {
                row.append(field)
                rows.append(row)
                row = []
                field = ""
            } else {
                field.append(c)
            }
        }
        return rows
    }
}

struct FormatDecimalTests {
    @Test(arguments: [
        (0.1 + 0.2, 6, "0.3"), (2.0, 6, "2"), (1.5, 6, "1.5"), (-1.25, 6, "-1.25"), (1e20, 6, "100000000000000000000"),
        (1e-7, 6, "0"), (-1e-7, 6, "0"), (-0.0, 6, "0"), (-0.4, 0, "0"), (1234.5678, 0, "1235"), (0.0005, 3, "0.001"),
        (123_456_789.125, 3, "123456789.125"), (Double.leastNonzeroMagnitude, 6, "0"), (-2.5e-10, 3, "0"),
    ])
    func printsPlainDecimals(x: Double, places: Int, expected: String) {
        #expect(formatDecimal(x, places: places) == expected)
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func missingValuesAreEmptyCells(x: Double) {
        #expect(formatDecimal(x, places: 6) == "")
        #expect(CSVCell.number(x).text == "")
    }

    @Test func neverPrintsAnExponentOrNegativeZero() throws {
        // Powers of ten across the whole range of Double, both signs, several precisions.
        for exponent in -320...300 {
            for sign in [1.0, -1.0] {
                for places in [0, 3, 6] {
                    let text = formatDecimal(sign * pow(10, Double(exponent)) * 1.2345, places: places)
                    #expect(!text.contains("e") && !text.contains("E"), "\(exponent) \(places): \(text)")
                    let value = try #require(Double(text), "\(exponent) \(places): \(text)")
                    #expect(value != 0 || text == "0", "\(exponent) \(places): \(text)")
                    #expect(!text.hasSuffix("."), "\(text)")
                    #expect(!(text.contains(".") && text.hasSuffix("0")), "\(text)")
                }
            }
        }
    }
}

struct MeanIntervalTests {
    @Test func matchesAHandComputedInterval() {
        // mean 2.5; sample variance ((1.5² + 0.5²) × 2) / 3 = 5/3; standard error √(5/3 / 4) = 0.645497;
        // t(0.975, 3 df) = 3.182, so the half-width is 2.053972.
        let m = MeanInterval([1, 2, 3, 4])
        #expect(m.mean == 2.5)
        #expect(m.count == 4)
        #expect(abs(m.halfWidth - 3.182 * (5.0 / 12).squareRoot()) < 1e-12)
        #expect(abs(m.halfWidth - 2.053972) < 1e-6)
        #expect(abs(m.lower - (2.5 - 2.053972)) < 1e-6)
        #expect(abs(m.upper - (2.5 + 2.053972)) < 1e-6)
    }

    @Test func twoValuesUseTwelvePointSevenOhSix() {
        // mean 11, sample sd √2 (deviations ±1), standard error 1, t(0.975, 1 df) = 12.706.
        let m = MeanInterval([10, 12])
        #expect(m.mean == 11)
        #expect(abs(m.halfWidth - 12.706) < 1e-12)
    }

    @Test func oneValueHasNoSpread() {
        let m = MeanInterval([7.5])
        #expect(m.mean == 7.5)
        #expect(m.halfWidth == 0)
        #expect(m.lower == 7.5 && m.upper == 7.5)
    }

    @Test func equalValuesHaveZeroWidth() {
        let m = MeanInterval([3, 3, 3, 3, 3])
        #expect(m.mean == 3)
        #expect(m.halfWidth == 0)
    }

    @Test func studentQuantilesMatchTablesBeyondThirtyDegreesOfFreedom() {
        // Reference values of t(0.975, df) from standard tables.
        #expect(studentT975(degreesOfFreedom: 30) == 2.042)
        #expect(abs(studentT975(degreesOfFreedom: 40) - 2.0211) < 2e-4)
        #expect(abs(studentT975(degreesOfFreedom: 60) - 2.0003) < 2e-4)
        #expect(abs(studentT975(degreesOfFreedom: 120) - 1.9799) < 2e-4)
        #expect(abs(studentT975(degreesOfFreedom: 100_000) - 1.95996) < 1e-4)
    }
}

struct FleetReportTests {
    /// The documented columns of `summary.csv`, in order.
    static let documentedSummaryColumns = [
        "scenario", "allocator", "replicate", "seed", "devices", "sessions", "views", "conversions", "conversion_rate",
        "expected_regret", "realized_regret", "best_variant_share", "default_views", "conversions_recorded",
        "events_created", "events_acked", "events_pending", "events_dropped", "duplicates_ignored",
        "requests", "timeouts", "crashes",
        "queue_latency_p50_s", "queue_latency_p95_s", "queue_latency_p99_s", "queue_latency_max_s",
        "assignments_per_second", "wall_seconds",
    ]

    @Test func summaryHasExactlyTheDocumentedColumnsInOrder() throws {
        let scenario = try Tiny.scenario(["population": "population:\n  devices: 30", "allocators": "allocators:\n  - uniform\n  - ucb1"])
        let runs = Tiny.run(scenario)
        let summary = FleetReport.summary(scenario, runs)
        #expect(summary.columns == Self.documentedSummaryColumns)
        #expect(FleetReport.summaryColumns == Self.documentedSummaryColumns)
        #expect(summary.text.split(separator: "\n").first.map(String.init) == Self.documentedSummaryColumns.joined(separator: ","))
        #expect(summary.rows.count == 4)
        #expect(summary.rows.allSatisfy { $0.count == Self.documentedSummaryColumns.count })
        #expect(summary.column("allocator") == ["uniform", "uniform", "ucb1", "ucb1"])
        #expect(summary.column("replicate") == ["0", "1", "0", "1"])
        #expect(summary.column("devices") == ["30", "30", "30", "30"])
        #expect(summary.column("scenario") == ["tiny", "tiny", "tiny", "tiny"])
    }

    @Test func timeseriesHasOneRowPerSampleAndVariant() throws {
        let scenario = try Tiny.scenario(["population": "population:\n  devices: 30", "replicates": "replicates: 1"])
        let runs = Tiny.run(scenario)
        let table = FleetReport.timeseries(scenario, runs)
        // 3 days at 6 h steps: samples at 6 h … 72 h, twelve of them, two variants each.
        #expect(table.rows.count == 12 * 2)
        #expect(table.column("time_hours").first == "6")
        #expect(table.column("time_hours").last == "72")
        #expect(Set(table.column("variant")) == ["control", "green"])
        // Cumulative views at the end match the summary's views.
        let summary = FleetReport.summary(scenario, runs)
        let last = table.column("cumulative_views").suffix(2).compactMap { Int($0) }.reduce(0, +)
        #expect(String(last) == summary.column("views").first)
        // Variant shares at a sample add up to 1.
        let shares = table.column("variant_share").suffix(2).compactMap(Double.init)
        #expect(abs(shares.reduce(0, +) - 1) < 1e-5)
    }

    @Test func comparisonHasOneRowPerAllocatorAndMetricWithZeroDifferenceForTheBaseline() throws {
        let scenario = try Tiny.scenario(["population": "population:\n  devices: 30", "allocators": "allocators:\n  - uniform\n  - ucb1"])
        let table = FleetReport.comparison(scenario, Tiny.run(scenario))
        #expect(table.columns == ["scenario", "allocator", "baseline", "metric", "replicates", "mean", "ci95_low", "ci95_high",
                                  "difference_from_baseline", "difference_ci95_low", "difference_ci95_high"])
        #expect(table.rows.count == 2 * FleetReport.comparisonMetrics.count)
        #expect(Set(table.column("baseline")) == ["uniform"])
        let baselineRows = table.rows.filter { $0[1] == "uniform" }
        #expect(baselineRows.allSatisfy { $0[8] == "0" || $0[8] == "" })
    }
}

struct FixedPointTests {
    /// The reports' numbers were written with `String(format:)`, then trimmed; they must read
    /// the same now.
    /// Values drawn at random over many magnitudes (seeded), plus the cases where rounding or
    /// the sign is delicate: ties, negative zero, subnormals, the largest double, and values
    /// whose text does not fit a small buffer.
    @Test func writesWhatStringFormatWrites() {
        var generator = SplitMix64(seed: StreamSeed(20261127))
        var values: [Double] = [
            0, -0.0, -0.04, -0.4, 0.5, 1.5, 2.5, -2.5, 0.125, 10, 100, -1000, 0.0625, 1.05, 2.675, 1e-7, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
            .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
            .infinity, -.infinity, .nan, 123_456_789.987_654_321, 9.999_999_5, 0.049_999_999_999_999_996,
        ]
        for _ in 0..<20_000 {
            let magnitude = Double(Int(generator.next() % 40)) - 20
            let sign: Double = generator.next() & 1 == 0 ? 1 : -1
            values.append(sign * Double(generator.next() >> 11) / Double(1 << 53) * pow(10, magnitude))
        }
        var mismatches: [String] = []
        for value in values {
            for places in [0, 1, 2, 3, 4, 6, 9, 17, 330] {
                let expected = String(format: "%.\(places)f", value)
                let written = fixedPoint(value, places: places)
                if written != expected { mismatches.append("\(value) at \(places) places: \(written), not \(expected)") }
                // What the reports wrote: the text above less the zeros ending its fraction
                // and a bare point, and "-0" as "0".
                var trimmed = expected
                if trimmed.contains(".") {
                    while trimmed.hasSuffix("0") { trimmed.removeLast() }
                    if trimmed.hasSuffix(".") { trimmed.removeLast() }
                }
                if trimmed == "-0" { trimmed = "0" }
                let writtenTrimmed = trimmedFixedPoint(value, places: places)
                if writtenTrimmed != trimmed { mismatches.append("\(value) at \(places) places, trimmed: \(writtenTrimmed), not \(trimmed)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }
}
