import Allocators
import Benchmark
import CThompsonBaseline
import ExperimentModel
import Randomness

// Every benchmark runs a million operations per measured iteration (`scalingFactor: .mega`), so
// the figures read directly as nanoseconds per operation and operations per second. Each
// iteration starts from a freshly built allocator with the same seeds, so every iteration does
// the same work and the spread between iterations is the machine's, not the workload's.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .cpuTotal, .mallocCountTotal],
        timeUnits: .nanoseconds,
        warmupIterations: 1,
        scalingFactor: .mega,
        maxDuration: .seconds(3),
        maxIterations: 30
    )

    for variants in [2, 10] {
        let rates = BenchmarkWorkload.conversionRates(variants: variants)
        registerAssignments("uniform", variants: variants, rates: rates) {
            try UniformSplit(variantCount: variants, seed: BenchmarkWorkload.allocatorSeed)
        }
        registerAssignments("epsilon-greedy", variants: variants, rates: rates) {
            try EpsilonGreedy(variantCount: variants, epsilon: 0.1, seed: BenchmarkWorkload.allocatorSeed)
        }
        registerAssignments("thompson", variants: variants, rates: rates) {
            try ThompsonSampling(variantCount: variants, seed: BenchmarkWorkload.allocatorSeed)
        }
        registerAssignments("ucb1", variants: variants, rates: rates) {
            try UCB1(variantCount: variants, seed: BenchmarkWorkload.allocatorSeed)
        }
        // An A/A test at a strict level, so the whole iteration stays in the exploration phase,
        // where every recorded view runs the significance test: the allocator's costly phase.
        // (With the A/B rates it would commit after a few thousand views and then do nothing.)
        registerAssignments(
            "explore-then-commit",
            variants: variants,
            rates: Array(repeating: BenchmarkWorkload.baseRate, count: variants)
        ) {
            try ExploreThenCommit(variantCount: variants, significance: 1e-6, seed: BenchmarkWorkload.allocatorSeed)
        }
    }

    // The same two-variant Thompson step as "Assign thompson 2 variants", written in C straight
    // against GSL: two mt19937 Beta draws, argmax, a xoshiro256** Bernoulli outcome, an α/β update.
    Benchmark("ThompsonStep C-GSL baseline 2 variants") { benchmark in
        let rates = BenchmarkWorkload.conversionRates(variants: 2)
        // The same seeds as the Swift run, so both walk the same sequence of draws and outcomes.
        guard let baseline = cthompson_baseline_create(
            BenchmarkWorkload.allocatorSeed.nonZeroValue, BenchmarkWorkload.outcomeSeed.value, rates[0], rates[1]
        ) else {
            fatalError("cthompson_baseline_create failed: GSL could not allocate a generator")
        }
        benchmark.startMeasurement()
        blackHole(cthompson_baseline_run(baseline, UInt64(benchmark.scaledIterations.count)))
        benchmark.stopMeasurement()
        cthompson_baseline_destroy(baseline)
    }

    for variants in [2, 10] {
        // The Myna device side: a cached snapshot and the device's own fast generator.
        let snapshot = evenSnapshot(variants: variants)
        Benchmark("SnapshotSample \(variants) variants") { benchmark in
            var generator = BenchmarkWorkload.outcomeSeed.makeGenerator()
            benchmark.startMeasurement()
            sampleAssignments(from: snapshot, using: &generator, iterations: benchmark.scaledIterations)
            benchmark.stopMeasurement()
        }
    }

    // Contextual allocators: 4 variants, 8 two-valued attributes (256 segments, 9 features), a
    // device's segment drawn afresh for each operation. A thousand operations per iteration:
    // a choice costs microseconds, not nanoseconds.
    let contexts = try! ContextSpace(valueCounts: Array(repeating: 2, count: 8))
    let contextualRates = BenchmarkWorkload.conversionRates(variants: 4)
    let contextual: [(String, @Sendable () throws -> any Allocator)] = [
        ("linucb", { try LinUCB(variantCount: 4, contexts: contexts, seed: BenchmarkWorkload.allocatorSeed) }),
        ("linear-thompson", { try LinearThompsonSampling(variantCount: 4, contexts: contexts, seed: BenchmarkWorkload.allocatorSeed) }),
        ("epsilon-greedy-ridge", { try RidgeEpsilonGreedy(variantCount: 4, contexts: contexts, epsilon: 0.1, seed: BenchmarkWorkload.allocatorSeed) }),
        ("inverse-gap", { try InverseGapWeighting(variantCount: 4, contexts: contexts, seed: BenchmarkWorkload.allocatorSeed) }),
        ("tree-thompson", { try TreeThompsonSampling(variantCount: 4, contexts: contexts, seed: BenchmarkWorkload.allocatorSeed) }),
    ]
    for (name, make) in contextual {
        // The server deciding every view (Conductrics style, immediate feedback): a choice in
        // the device's segment, then its view and outcome learnt, so every choice refreshes the
        // models first.
        Benchmark("ContextualAssign \(name) 4 variants 256 segments", configuration: .init(scalingFactor: .kilo)) { benchmark in
            var allocator = try! make()
            var outcomes = BenchmarkWorkload.outcomeSeed.makeGenerator()
            benchmark.startMeasurement()
            runContextualAssignments(&allocator, contexts: contexts.count, rates: contextualRates, outcomes: &outcomes, iterations: benchmark.scaledIterations)
            benchmark.stopMeasurement()
        }
        // The server deciding between two updates of a clock cadence: choices only, from a
        // model that learnt 10,000 views.
        Benchmark("ContextualChoose \(name) 4 variants 256 segments", configuration: .init(scalingFactor: .kilo)) { benchmark in
            var allocator = try! make()
            var outcomes = BenchmarkWorkload.outcomeSeed.makeGenerator()
            runContextualAssignments(&allocator, contexts: contexts.count, rates: contextualRates, outcomes: &outcomes, iterations: 0..<10_000)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(allocator.choose(context: outcomes.nextIndex(below: contexts.count))) }
            benchmark.stopMeasurement()
        }
    }
    // The Myna device side of a contextual policy: the cached snapshot looked up in the
    // device's segment.
    Benchmark("ContextualSnapshotSample 4 variants 256 segments") { benchmark in
        let snapshot = try! PolicySnapshot(contextWeights: (0..<contexts.count).map { c in (0..<4).map { Double(($0 + c) % 4 + 1) } })
        var generator = BenchmarkWorkload.outcomeSeed.makeGenerator()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(snapshot.sample(context: generator.nextIndex(below: 256), using: &generator))
        }
        benchmark.stopMeasurement()
    }

    // A posterior after about a thousand views at 5 %: both Gamma draws inside gsl_ran_beta take
    // the Marsaglia–Tsang path, as they do for every posterior past its first few conversions.
    let betaA = 50.0
    let betaB = 950.0
    Benchmark("BetaDraw GSLRandom.beta") { benchmark in
        let random = GSLRandom(seed: BenchmarkWorkload.allocatorSeed)
        benchmark.startMeasurement()
        drawBetas(from: random, a: betaA, b: betaB, iterations: benchmark.scaledIterations)
        benchmark.stopMeasurement()
    }
    Benchmark("BetaDraw C-GSL gsl_ran_beta") { benchmark in
        guard let baseline = cthompson_baseline_create(BenchmarkWorkload.allocatorSeed.nonZeroValue, 0, 0, 0) else {
            fatalError("cthompson_baseline_create failed: GSL could not allocate a generator")
        }
        benchmark.startMeasurement()
        blackHole(cthompson_baseline_beta_draws(baseline, UInt64(benchmark.scaledIterations.count), betaA, betaB))
        benchmark.stopMeasurement()
        cthompson_baseline_destroy(baseline)
    }
}

/// The fixed inputs shared by the benchmarks, so Swift and C runs see the same workload.
enum BenchmarkWorkload {
    /// The control's conversion rate.
    static let baseRate = 0.05

    static let allocatorSeed = StreamSeed(2026).derive("allocator")
    static let outcomeSeed = StreamSeed(2026).derive("outcomes")

    /// True conversion rates: 5 % and 6 % for two variants, so the learners find the better one
    /// quickly; for more, the control at 5 % and each further variant 0.2 points better.
    static func conversionRates(variants: Int) -> [Double] {
        if variants == 2 { return [baseRate, 0.06] }
        return (0..<variants).map { baseRate + 0.002 * Double($0) }
    }
}

/// Registers "Assign <name> <variants> variants": one `choose()` and one `record(.outcome)` per
/// operation, the outcome a Bernoulli trial at the chosen variant's true rate.
func registerAssignments<A: Allocator>(
    _ name: String,
    variants: Int,
    rates: [Double],
    make: @escaping @Sendable () throws -> A
) {
    Benchmark("Assign \(name) \(variants) variants") { benchmark in
        var allocator: A
        do {
            allocator = try make()
        } catch {
            fatalError("benchmark allocator '\(name)' rejected its parameters: \(error)")
        }
        var outcomes = BenchmarkWorkload.outcomeSeed.makeGenerator()
        rates.withUnsafeBufferPointer { rates in
            benchmark.startMeasurement()
            runAssignments(&allocator, conversionRates: rates, outcomes: &outcomes, iterations: benchmark.scaledIterations)
            benchmark.stopMeasurement()
        }
    }
}

/// The simulator's hot loop: generic over the allocator, so each call is specialised for a
/// concrete type and nothing goes through an existential.
@inline(never)
func runAssignments<A: Allocator>(
    _ allocator: inout A,
    conversionRates: UnsafeBufferPointer<Double>,
    outcomes: inout Xoshiro256,
    iterations: Range<Int>
) {
    for _ in iterations {
        let variant = allocator.choose()
        let converted = outcomes.nextBernoulli(conversionRates[variant])
        allocator.record(.outcome(variant, converted: converted))
        blackHole(variant)
    }
}

/// A choice in a random segment, its view and its outcome learnt, per iteration.
@inline(never)
func runContextualAssignments(_ allocator: inout any Allocator, contexts: Int, rates: [Double], outcomes: inout Xoshiro256, iterations: Range<Int>) {
    for _ in iterations {
        let context = outcomes.nextIndex(below: contexts)
        let variant = allocator.choose(context: context)
        allocator.record(.view(variant, context: context))
        if outcomes.nextBernoulli(rates[variant]) { allocator.record(.conversion(variant, context: context)) }
    }
}

@inline(never)
func sampleAssignments(from snapshot: PolicySnapshot, using generator: inout Xoshiro256, iterations: Range<Int>) {
    for _ in iterations {
        blackHole(snapshot.sample(using: &generator))
    }
}

@inline(never)
func drawBetas(from random: GSLRandom, a: Double, b: Double, iterations: Range<Int>) {
    for _ in iterations {
        blackHole(random.beta(a, b))
    }
}

func evenSnapshot(variants: Int) -> PolicySnapshot {
    do {
        return try PolicySnapshot(weights: Array(repeating: 1, count: variants))
    } catch {
        fatalError("benchmark snapshot rejected its weights: \(error)")
    }
}
