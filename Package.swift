// swift-tools-version: 6.1
import PackageDescription

// The modules a simulation spends its time in are optimised in debug builds too: the tests
// drive simulated fleets through them by the million events, and a debug `aviary run` is the
// README's first command. On 2 cores the test suite's CPU time falls from about 980 s to 660 s
// and the default scenario's debug run from 83 s to 31 s (the same CSVs), for about a minute
// more of compiling. Everything else (commands, reports, live modules, tests) stays -Onone for
// the debugger.
let optimisedInDebug: [SwiftSetting] = [.unsafeFlags(["-O"], .when(configuration: .debug))]

let package = Package(
    name: "Aviary",
    products: [
        .executable(name: "aviary", targets: ["aviary"]),
        .library(name: "ExperimentModel", targets: ["ExperimentModel"]),
        .library(name: "Allocators", targets: ["Allocators"]),
        .library(name: "ClientEngine", targets: ["ClientEngine"]),
        .library(name: "ClientFeatures", targets: ["ClientFeatures"]),
        .library(name: "ExperimentServer", targets: ["ExperimentServer"]),
        .library(name: "Simulation", targets: ["Simulation"]),
        .library(name: "Reports", targets: ["Reports"]),
        .library(name: "Randomness", targets: ["Randomness"]),
        .library(name: "Analysis", targets: ["Analysis"]),
        .library(name: "Exports", targets: ["Exports"]),
        .library(name: "Fitting", targets: ["Fitting"]),
        // The command line as a library, for packages that build their own `aviary` with
        // allocators of their own (Examples/CustomAllocator).
        .library(name: "AviaryCommands", targets: ["AviaryCommands"]),
    ],
    traits: [
        .trait(
            name: "Live",
            description: "aviary serve and aviary loadtest --live: a real HTTP server (Hummingbird, TLS, Prometheus metrics) and real devices over sockets (SwiftNIO, swift-nio-ssl; async-http-client for HTTPTransport)."
        ),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // `swift package generate-documentation` (scripts/docs); a plugin, so no build of aviary compiles it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Vendors' exports (aviary fit, run --export): Amplitude's zips through ZIPFoundation,
        // Snowplow's warehouse CSV through CSV.swift (gzip through the system's zlib, CGzip).
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        .package(url: "https://github.com/yaslab/CSV.swift", from: "2.5.2"),
        // Live mode only (trait `Live`): a plain `swift build --product aviary` never builds these.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The live server's gzipped request bodies.
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Without its default trait, ExternalLoading: the server loads no external references.
        .package(url: "https://github.com/mattpolzin/OpenAPIKit", from: "6.4.0", traits: []),
    ],
    targets: [
        .systemLibrary(
            name: "CGSL",
            pkgConfig: "gsl",
            providers: [.apt(["libgsl-dev"])]
        ),
        // zlib's inflate and deflate for the vendors' gzipped exports: the system's zlib, so
        // that a build without the Live trait compiles no SwiftNIO.
        .systemLibrary(
            name: "CGzip",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(name: "CMemoryHints"),
        // Fixed-point text for reports, by the C library's own printf.
        .target(name: "CDecimalText"),
        // The heap and the radix sort of the fleet kernel, the experiment server and the live
        // timers, and the prefetch of an array's storage; no product. Its API is public and @inlinable so that callers specialise it.
        .target(name: "DataStructures", dependencies: ["CMemoryHints"], swiftSettings: optimisedInDebug),
        .target(name: "Randomness", swiftSettings: optimisedInDebug),
        // The vocabulary devices, servers and allocators share: experiment data, events, policy
        // snapshots. Below all three, so the device SDK never links an allocator (or GSL).
        .target(name: "ExperimentModel", dependencies: ["Randomness"], swiftSettings: optimisedInDebug),
        // What an experiment concludes: estimators, tests and sample-ratio checks over what a
        // server ingested, the same code for the fleet, the bare bandit and the live server.
        .target(name: "Analysis", dependencies: ["CGSL", "ExperimentModel"], swiftSettings: optimisedInDebug),
        .target(name: "Allocators", dependencies: ["Analysis", "ExperimentModel", "Randomness", "CGSL"], swiftSettings: optimisedInDebug),
        .target(name: "ClientEngine", dependencies: ["ExperimentModel", "Randomness"], swiftSettings: optimisedInDebug),
        .target(name: "ClientFeatures", dependencies: ["DataStructures", "ExperimentModel", "Randomness"], swiftSettings: optimisedInDebug),
        .target(name: "ExperimentServer", dependencies: ["Allocators", "DataStructures", "ExperimentModel"], swiftSettings: optimisedInDebug),
        .target(
            name: "Simulation",
            dependencies: [
                "Allocators", "Analysis", "ClientEngine", "ClientFeatures", "CMemoryHints", "DataStructures", "ExperimentModel", "ExperimentServer", "Randomness",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: optimisedInDebug
        ),
        // What a run writes for analysts: the CSV tables, the SVG charts and report.html, and
        // the merge of a sweep's shards. Above the kernel, so live devices link no HTML.
        .target(
            name: "Reports",
            dependencies: [
                "Analysis", "CDecimalText", "ExperimentModel", "Simulation",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        // Analytics vendors' raw event exports, both ways: read for fitting, written from a
        // simulated fleet for the round trip. Knows no kernel and no scenario.
        .target(
            name: "Exports",
            dependencies: [
                "CGzip",
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "CSV", package: "CSV.swift"),
            ]
        ),
        // A scenario calibrated to a team's own fleet from its export: mergeable sketches,
        // the estimators, fit.csv and fit.html. Writes a Scenario; knows no kernel.
        .target(name: "Fitting", dependencies: ["Analysis", "Exports", "Reports", "Simulation", "Randomness"]),
        // The HTTP API's bodies, below both the server and the load generator (trait `Live`).
        .target(
            name: "WireFormat",
            dependencies: ["ExperimentModel", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .target(
            name: "LiveServer",
            dependencies: [
                "Allocators", "Analysis", "ExperimentModel", "ExperimentServer", "Randomness", "WireFormat",
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "OpenAPIKit30", package: "OpenAPIKit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
            ],
            resources: [.copy("openapi.yaml")]
        ),
        .target(
            name: "LiveDevices",
            dependencies: [
                "Allocators", "Analysis", "ClientEngine", "ClientFeatures", "DataStructures", "ExperimentModel", "Randomness", "Simulation", "WireFormat",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // A live run put together: the embedded server, the fault proxy, the network namespace,
        // the routes and sockets built before the devices run over them (trait `Live`).
        .target(
            name: "LiveRuns",
            dependencies: [
                "Analysis", "ExperimentModel", "ExperimentServer", "LiveDevices", "LiveServer", "Randomness", "Reports", "Simulation", "WireFormat",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .target(
            name: "AviaryCommands",
            dependencies: [
                "Simulation", "Allocators", "Analysis", "ClientEngine", "Exports", "ExperimentModel", "Fitting", "Reports",
                .target(name: "LiveServer", condition: .when(traits: ["Live"])),
                .target(name: "LiveDevices", condition: .when(traits: ["Live"])),
                .target(name: "LiveRuns", condition: .when(traits: ["Live"])),
                .target(name: "WireFormat", condition: .when(traits: ["Live"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "aviary", dependencies: ["AviaryCommands"]),
        .testTarget(name: "RandomnessTests", dependencies: ["Randomness"]),
        .testTarget(name: "DataStructuresTests", dependencies: ["DataStructures"]),
        .testTarget(name: "ExperimentModelTests", dependencies: ["ExperimentModel", "Randomness"]),
        .testTarget(name: "AnalysisTests", dependencies: ["Analysis", "ExperimentModel", "Randomness"]),
        .testTarget(name: "ExportsTests", dependencies: ["Exports"]),
        .testTarget(name: "FittingTests", dependencies: ["Fitting", "Exports", "Simulation", "Randomness"]),
        .testTarget(name: "AllocatorsTests", dependencies: ["Allocators", "ExperimentModel", "Randomness"]),
        .testTarget(name: "ClientEngineTests", dependencies: ["ClientEngine", "ExperimentModel", "Allocators", "Randomness"]),
        .testTarget(name: "ClientFeaturesTests", dependencies: ["ClientFeatures", "ExperimentModel", "Allocators", "Randomness"]),
        .testTarget(name: "ExperimentServerTests", dependencies: ["ExperimentServer", "ExperimentModel", "Allocators", "Randomness"]),
        .testTarget(name: "SimulationTests", dependencies: ["Simulation", "Analysis", "ExperimentModel", "Allocators", "ClientEngine", "ExperimentServer", "Randomness", "Reports"]),
        .testTarget(
            name: "AviaryCommandsTests",
            dependencies: [
                "AviaryCommands", "ExperimentModel", "Allocators", "Reports", "Simulation",
                .target(name: "LiveServer", condition: .when(traits: ["Live"])),
            ]
        ),
        .testTarget(
            name: "LiveTests",
            dependencies: [
                "LiveServer", "LiveDevices", "LiveRuns", "WireFormat", "ExperimentServer", "ExperimentModel", "ClientEngine", "Allocators", "Reports", "Simulation",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ]
)

// Every Swift target gets the same language settings, as in swift-log.
for target in package.targets where target.type != .system && !["CMemoryHints", "CDecimalText"].contains(target.name) {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
