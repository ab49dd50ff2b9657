// swift-tools-version: 6.1
import PackageDescription

// An `aviary` with one allocator Aviary does not ship: softmax (Boltzmann) exploration.
// Build it with its own scratch path, so that it leaves the main build alone:
//   swift build --package-path Examples/CustomAllocator --scratch-path .build-examples --product custom-aviary
// The executable is Aviary's command line, `aviary`, with softmax added; it is named
// `custom-aviary` because a product named `aviary` would collide with Aviary's own.
let package = Package(
    name: "CustomAllocator",
    products: [
        .executable(name: "custom-aviary", targets: ["CustomAviary"]),
    ],
    dependencies: [
        // No `Live` trait: the example needs neither the HTTP server nor the HTTP client.
        .package(name: "Aviary", path: "../.."),
    ],
    targets: [
        .target(name: "Softmax", dependencies: [
            .product(name: "Allocators", package: "Aviary"),
            .product(name: "ExperimentModel", package: "Aviary"),
            .product(name: "Randomness", package: "Aviary"),
        ]),
        .executableTarget(name: "CustomAviary", dependencies: [
            "Softmax",
            .product(name: "AviaryCommands", package: "Aviary"),
        ]),
    ]
)
