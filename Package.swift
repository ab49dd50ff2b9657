// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Aviary",
    products: [
        .executable(name: "aviary", targets: ["aviary"]),
        .library(name: "Allocators", targets: ["Allocators"]),
        .library(name: "ClientEngine", targets: ["ClientEngine"]),
        .library(name: "ClientFeatures", targets: ["ClientFeatures"]),
        .library(name: "ExperimentServer", targets: ["ExperimentServer"]),
        .library(name: "Simulation", targets: ["Simulation"]),
        .library(name: "Randomness", targets: ["Randomness"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CGSL",
            pkgConfig: "gsl",
            providers: [.apt(["libgsl-dev"])]
        ),
        .target(name: "CMemoryHints"),
        .target(name: "Randomness", dependencies: ["CGSL"]),
        .target(name: "Allocators", dependencies: ["Randomness"]),
        .target(name: "ClientEngine", dependencies: ["Allocators", "Randomness"]),
        .target(name: "ClientFeatures", dependencies: ["ClientEngine", "Allocators", "Randomness"]),
        .target(name: "ExperimentServer", dependencies: ["Allocators", "ClientEngine"]),
        .target(
            name: "Simulation",
            dependencies: [
                "Allocators", "ClientEngine", "CMemoryHints", "ExperimentServer", "Randomness",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .target(
            name: "AviaryCommands",
            dependencies: [
                "Simulation", "Allocators", "ClientEngine", "ClientFeatures",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "aviary", dependencies: ["AviaryCommands"]),
        .testTarget(name: "RandomnessTests", dependencies: ["Randomness"]),
        .testTarget(name: "AllocatorsTests", dependencies: ["Allocators", "Randomness"]),
        .testTarget(name: "ClientEngineTests", dependencies: ["ClientEngine", "Allocators", "Randomness"]),
        .testTarget(name: "ClientFeaturesTests", dependencies: ["ClientFeatures", "ClientEngine", "Allocators", "Randomness"]),
        .testTarget(name: "ExperimentServerTests", dependencies: ["ExperimentServer", "ClientEngine", "Allocators"]),
        .testTarget(name: "SimulationTests", dependencies: ["Simulation", "Allocators", "ClientEngine", "ExperimentServer", "Randomness"]),
        .testTarget(name: "AviaryCommandsTests", dependencies: ["AviaryCommands", "Simulation"]),
    ]
)

// Every Swift target gets the same language settings, as in swift-log.
for target in package.targets where target.type != .system && target.name != "CMemoryHints" {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
