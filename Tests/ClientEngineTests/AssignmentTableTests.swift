import Allocators
import ExperimentModel
import Randomness
import Testing
@testable import ClientEngine

struct AssignmentTableTests {
    @Test func inlineAndSpilledSlotsAreIndependent() {
        var table = AssignmentTable(count: 5)
        #expect(!table.isEmpty && table.count == 5)
        let values: [UInt32] = [0x8000_0002, 0xFFFF_FFFF, 7, 0, 0x4000_0001]
        for (index, value) in values.enumerated() { table[index] = value }
        #expect((0..<5).map { table[$0] } == values)
        // Rewriting one inline slot leaves its neighbour alone.
        table[0] = 1
        #expect(table[1] == 0xFFFF_FFFF)
        table[1] = 0
        #expect(table[0] == 1 && table[2] == 7)
        #expect(AssignmentTable().isEmpty)
    }

    /// Five experiments: two in the engine itself, three in the spilled buffer.
    static let wide = ExperimentData(version: 1, experiments: (0..<5).map { e in
        ExperimentDefinition(id: "e\(e)", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b"), VariantDefinition(id: "c")])
    })

    @Test func everyExperimentKeepsItsOwnStickyVariantAndConversion() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(dataTTL: 100), data: Self.wide)
        let forced = [2, 0, 1, 2, 1]
        for (e, variant) in forced.enumerated() {
            _ = engine.viewVariant(experiment: e, forcing: variant, at: 1)
        }
        #expect(try engine.recordConversion("e3", at: 2) == .recorded)
        var generator = Xoshiro256(seed: 3)
        for (e, variant) in forced.enumerated() {
            #expect(engine.viewVariant(experiment: e, at: 3, using: &generator).variant == variant)
            #expect(engine.assignedVariant(experiment: e) == variant)
        }
        #expect(try engine.recordConversion("e3", at: 4) == .duplicate)
        #expect(try engine.recordConversion("e4", at: 4) == .recorded)

        // A republication keeps the layout and so the table; a reordering carries it by id.
        let republished = ExperimentData(version: 2, experiments: Self.wide.experiments, replacing: Self.wide)
        var fetch = try #require(engine.pump(at: 100).requests.first { $0.isFetch })
        engine.handle(.experimentData(republished), to: fetch.id, at: 100)
        #expect((0..<5).map { engine.assignedVariant(experiment: $0) } == forced)
        let reversed = ExperimentData(version: 3, experiments: Self.wide.experiments.reversed())
        fetch = try #require(engine.pump(at: 200).requests.first { $0.isFetch })
        engine.handle(.experimentData(reversed), to: fetch.id, at: 200)
        #expect((0..<5).map { engine.assignedVariant(experiment: $0) } == forced.reversed())
        #expect(try engine.recordConversion("e3", at: 201) == .duplicate)
        #expect(try engine.recordConversion("e0", at: 201) == .recorded)
    }

    @Test func layoutsAreSharedOnlyWhenTheyMatch() {
        let first = Self.wide
        let republished = ExperimentData(version: 2, experiments: first.experiments, replacing: first)
        #expect(republished.hasSameLayout(as: first))
        // Built apart but with the same ids: found the same by comparing them.
        #expect(ExperimentData(version: 9, experiments: first.experiments).hasSameLayout(as: first))
        let renamed = ExperimentData(version: 3, experiments: first.experiments.dropLast() + [
            ExperimentDefinition(id: "e4", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b"), VariantDefinition(id: "z")]),
        ], replacing: republished)
        #expect(!renamed.hasSameLayout(as: republished))
        #expect(!ExperimentData(version: 4, experiments: first.experiments.reversed(), replacing: first).hasSameLayout(as: first))
        #expect(!ExperimentData(version: 5, experiments: Array(first.experiments.prefix(4)), replacing: first).hasSameLayout(as: first))
    }
}

struct EngineFootprintTests {
    /// A fleet holds ten million engines, each inside its device: at 10 M devices every byte of
    /// an engine is 10 MB of the run's memory, and the project's budget is 272 bytes per device
    /// with the kernel's fields included. A field added to the engine has to earn its bytes.
    @Test func anEngineFitsItsBudget() {
        #expect(MemoryLayout<ClientEngine<InMemoryEventStore>>.stride <= 136)
        // The table and the store are laid out inside the engine by their sizes, so a 4-byte
        // field follows each in the padding its stride would waste.
        #expect(MemoryLayout<InMemoryEventStore>.size <= 20)
        #expect(MemoryLayout<AssignmentTable>.size == 20)
    }

    /// What a view and a fetch touch ends at the device id; a fleet prefetches up to there, so
    /// that prefix must stay within three cache lines.
    @Test func theHotFieldsFitThreeCacheLines() throws {
        let hotEnd = try #require(MemoryLayout<ClientEngine<InMemoryEventStore>>.offset(of: \.deviceID)) + MemoryLayout<UInt64>.size
        #expect(hotEnd <= 3 * 64)
    }
}
