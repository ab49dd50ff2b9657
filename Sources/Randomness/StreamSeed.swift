/// A 64-bit seed for one independent random stream, derived from a run's master seed.
///
/// Streams form a tree: the master seed names the run, and each purpose (a replicate, a role such
/// as `"arrivals"` or `"allocator"`, a device index) derives a child by hashing the parent with
/// the label. A child depends only on its parent and its own label, so adding a device, a role or
/// an allocator never shifts any other stream.
///
/// Labels are hashed with FNV-1a rather than `Hasher`, whose seed changes from one process to the
/// next; the mixing step is the SplitMix64 finalizer, a bijection on 64-bit values.
///
/// `StreamSeed` is `Sendable`: it is a plain value.
public struct StreamSeed: Hashable, Sendable, CustomStringConvertible {
    /// The seed's 64 bits.
    public let value: UInt64

    /// Creates the root of a stream tree from a master seed.
    public init(_ master: UInt64) {
        value = master
    }

    /// Derives the child stream named `label`.
    public func derive(_ label: String) -> StreamSeed {
        StreamSeed(raw: Self.combine(value, Self.fnv1a64(label)))
    }

    /// A label hashed once, for deriving many children with it (one per device, say).
    public struct Label: Sendable {
        @usableFromInline let hash: UInt64

        init(hash: UInt64) {
            self.hash = hash
        }

        /// The label `name`; `seed.derive(Label(name))` equals `seed.derive(name)`.
        public init(_ name: String) {
            hash = StreamSeed.fnv1a64(name)
        }
    }

    /// Derives the child stream with a prepared label, as deriving with its name would.
    @inline(__always)
    public func derive(_ label: Label) -> StreamSeed {
        StreamSeed(raw: Self.combine(value, label.hash))
    }

    /// Derives the child stream with the numeric label `index` (a replicate, a device, an arm).
    public func derive(_ index: Int) -> StreamSeed {
        StreamSeed(raw: Self.combine(value, UInt64(bitPattern: Int64(index)) &+ 0x5851_F42D_4C95_7F2D))
    }

    /// This seed with its share of every derivation done once (see ``Prepared``).
    @inlinable public var prepared: Prepared { Prepared(key: Self.mix(value &+ SplitMix64.gamma)) }

    /// A seed as its children see it: deriving from it takes one mixing step fewer than from
    /// the seed itself, and its 64-bit ``key`` stands for the seed in storage. For a fleet that
    /// keeps one key per device and derives the device's streams from it as they are used.
    public struct Prepared: Sendable {
        /// The seed's part of every child it derives.
        public let key: UInt64

        /// The seed a ``StreamSeed/prepared`` value with this key came from, as its children see it.
        @inlinable public init(key: UInt64) {
            self.key = key
        }

        /// The child named by `label`: `seed.prepared.derive(label) == seed.derive(label)`.
        @inlinable @inline(__always)
        public func derive(_ label: Label) -> StreamSeed {
            StreamSeed(raw: StreamSeed.mix(key ^ label.hash))
        }
    }

    /// A fast generator seeded from this stream.
    public func makeGenerator() -> Xoshiro256 {
        Xoshiro256(seed: value)
    }

    /// A seed suitable for generators that reject zero (GSL's `gsl_rng_set` treats 0 as its default).
    public var nonZeroValue: UInt64 {
        value == 0 ? 0x9E37_79B9_7F4A_7C15 : value
    }

    public var description: String { String(value) }

    @usableFromInline init(raw: UInt64) {
        value = raw
    }

    @inline(__always)
    static func combine(_ parent: UInt64, _ label: UInt64) -> UInt64 {
        // The first mixing step is the parent's alone: what `prepared` does once.
        StreamSeed(raw: parent).prepared.derive(Label(hash: label)).value
    }

    /// The SplitMix64 output function (Stafford's variant 13).
    @inlinable @inline(__always)
    static func mix(_ x: UInt64) -> UInt64 {
        var z = x
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Exposes the mixing function to tests that pin the derivation.
    package static func mixForTesting(_ x: UInt64) -> UInt64 { mix(x) }

    /// Exposes the label hash to tests that pin the derivation.
    package static func fnvForTesting(_ s: String) -> UInt64 { fnv1a64(s) }

    static func fnv1a64(_ string: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in string.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }
}
