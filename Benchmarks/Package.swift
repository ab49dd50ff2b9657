// swift-tools-version: 6.1
import PackageDescription

// Aviary's benchmarks, a package of their own so the benchmark dependency never reaches the
// library's users. Each benchmark suite is an executable target in a folder of this directory
// (package-benchmark finds suites by their parent folder being named `Benchmarks`); add a suite
// by adding a folder and a `suite(...)` line below.
let package = Package(
    name: "AviaryBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "Aviary", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The bare-C reference the Swift allocators are measured against.
        .target(
            name: "CThompsonBaseline",
            path: "CThompsonBaseline",
            linkerSettings: [.linkedLibrary("gsl"), .linkedLibrary("gslcblas")]
        ),
        suite(
            "AllocatorBenchmarks",
            dependencies: [
                .product(name: "Allocators", package: "Aviary"),
                .product(name: "ExperimentModel", package: "Aviary"),
                .product(name: "Randomness", package: "Aviary"),
                "CThompsonBaseline",
            ]
        ),
        suite(
            "FleetBenchmarks",
            dependencies: [
                .product(name: "Reports", package: "Aviary"),
                .product(name: "Simulation", package: "Aviary"),
            ]
        ),
        suite(
            "FitBenchmarks",
            dependencies: [
                .product(name: "Exports", package: "Aviary"),
                .product(name: "Fitting", package: "Aviary"),
                .product(name: "Simulation", package: "Aviary"),
            ]
        ),
        suite(
            "QueueBenchmarks",
            dependencies: [
                .product(name: "ClientEngine", package: "Aviary"),
                .product(name: "ExperimentModel", package: "Aviary"),
            ]
        ),
    ]
)

/// A package-benchmark suite: an executable in `Benchmarks/<name>/` wired to the plugin.
func suite(_ name: String, dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: dependencies + [.product(name: "Benchmark", package: "benchmark")],
        path: name,
        swiftSettings: [.enableUpcomingFeature("ExistentialAny")],
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}
