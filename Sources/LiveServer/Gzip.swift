/// Gzip bodies (RFC 1952 members holding RFC 1951 DEFLATE data), as the vendors' clients send
/// them with `Content-Encoding: gzip` (RudderStack's by default, Segment's and PostHog's when
/// asked). Foundation on Linux has no decompressor and zlib is no dependency of this target, so
/// the decoder is here: the canonical one of Mark Adler's `puff.c`, which decodes a Huffman
/// code a bit at a time; slow next to zlib's tables, and ample for bodies of a megabyte.
///
/// The output is bounded: a body that inflates past the limit stops there, so that a small
/// compressed body cannot fill the server's memory.
enum Gzip {
    /// Why a body cannot be decompressed.
    enum Failure: Error, Equatable {
        /// Not gzip, or damaged: the reason.
        case malformed(String)
        /// It inflates to more than the limit.
        case tooLarge
    }

    /// The bytes `data` inflates to: every member in turn, each one's CRC-32 and length checked.
    ///
    /// - Throws: ``Failure/tooLarge`` past `limit` bytes, ``Failure/malformed(_:)`` otherwise.
    /// - Complexity: O(input + output).
    static func decompress(_ data: some Collection<UInt8>, limit: Int) throws(Failure) -> [UInt8] {
        var reader = Inflater(input: Array(data), limit: limit)
        repeat {
            let start = reader.output.count
            try reader.header()
            try reader.inflate()
            let crc = try reader.alignedWord(), size = try reader.alignedWord()
            guard crc == CRC32.checksum(reader.output[start...]) else { throw .malformed("its CRC-32 does not match its data") }
            guard size == UInt32(truncatingIfNeeded: reader.output.count - start) else { throw .malformed("its length does not match its data") }
        } while reader.position < reader.input.count
        return reader.output
    }
}

/// A DEFLATE stream's state: the input, its bit reader, and the output so far (which the
/// back-references copy from).
private struct Inflater {
    let input: [UInt8]
    let limit: Int
    var position = 0
    var bitBuffer: UInt32 = 0
    var bitCount = 0
    var output: [UInt8] = []

    init(input: [UInt8], limit: Int) {
        self.input = input
        self.limit = limit
    }

    /// A canonical Huffman code as `puff.c` keeps it: how many codes have each length, and the
    /// symbols in code order.
    struct Huffman {
        var counts = [Int](repeating: 0, count: 16)
        var symbols: [Int]

        /// The code of `lengths` (0: the symbol is unused); `nil` when over-subscribed. An
        /// incomplete code is allowed: decoding a code it lacks fails then.
        init?(lengths: ArraySlice<Int>) {
            symbols = [Int](repeating: 0, count: lengths.count)
            for length in lengths { counts[length] += 1 }
            var left = 1
            for length in 1..<16 {
                left = left << 1 - counts[length]
                if left < 0 { return nil }
            }
            var offsets = [Int](repeating: 0, count: 16)
            for length in 1..<15 { offsets[length + 1] = offsets[length] + counts[length] }
            for (symbol, length) in lengths.enumerated() where length != 0 {
                symbols[offsets[length]] = symbol
                offsets[length] += 1
            }
        }
    }

    static let lengthBase = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
    static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    static let distanceBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
    ]
    static let distanceExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]
    /// The order in which a dynamic block lists its code length code's lengths.
    static let lengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
    static let fixed: (literals: Huffman, distances: Huffman) = {
        var lengths = [Int](repeating: 8, count: 288)
        for symbol in 144..<256 { lengths[symbol] = 9 }
        for symbol in 256..<280 { lengths[symbol] = 7 }
        return (Huffman(lengths: lengths[...])!, Huffman(lengths: [Int](repeating: 5, count: 30)[...])!)
    }()

    mutating func byte() throws(Gzip.Failure) -> UInt8 {
        guard position < input.count else { throw .malformed("it ends early") }
        defer { position += 1 }
        return input[position]
    }

    /// The next `count` bits (at most 16), first bit lowest.
    mutating func bits(_ count: Int) throws(Gzip.Failure) -> Int {
        var buffer = bitBuffer
        while bitCount < count {
            buffer |= UInt32(try byte()) << UInt32(bitCount)
            bitCount += 8
        }
        bitBuffer = buffer >> UInt32(count)
        bitCount -= count
        return Int(buffer & (1 << UInt32(count) - 1))
    }

    /// A little-endian 32-bit word at a byte boundary (a member's trailer).
    mutating func alignedWord() throws(Gzip.Failure) -> UInt32 {
        (bitBuffer, bitCount) = (0, 0)
        var word: UInt32 = 0
        for shift in stride(from: 0, to: 32, by: 8) { word |= UInt32(try byte()) << UInt32(shift) }
        return word
    }

    /// A member's header: the magic number, the method, and the optional fields skipped.
    mutating func header() throws(Gzip.Failure) {
        guard try byte() == 0x1F, try byte() == 0x8B else { throw .malformed("it does not start as gzip does (1f 8b)") }
        guard try byte() == 8 else { throw .malformed("its compression method is not DEFLATE") }
        let flags = try byte()
        for _ in 0..<6 { _ = try byte() }  // modification time, extra flags, operating system
        if flags & 0x04 != 0 {
            let length = Int(try byte()) | Int(try byte()) << 8
            for _ in 0..<length { _ = try byte() }
        }
        for flag in [UInt8(0x08), 0x10] where flags & flag != 0 {  // a name, a comment: zero-terminated
            while try byte() != 0 {}
        }
        if flags & 0x02 != 0 { _ = (try byte(), try byte()) }  // the header's CRC-16
    }

    /// One DEFLATE stream, block by block, onto `output`.
    mutating func inflate() throws(Gzip.Failure) {
        var last = false
        while !last {
            last = try bits(1) == 1
            switch try bits(2) {
            case 0: try stored()
            case 1: try codes(Self.fixed.literals, Self.fixed.distances)
            case 2:
                let (literals, distances) = try dynamicCodes()
                try codes(literals, distances)
            default: throw .malformed("a block of the reserved type 3")
            }
        }
    }

    mutating func stored() throws(Gzip.Failure) {
        (bitBuffer, bitCount) = (0, 0)
        let length = Int(try byte()) | Int(try byte()) << 8
        let complement = Int(try byte()) | Int(try byte()) << 8
        guard length == ~complement & 0xFFFF else { throw .malformed("a stored block's length and its complement differ") }
        guard position + length <= input.count else { throw .malformed("it ends early") }
        guard output.count + length <= limit else { throw .tooLarge }
        output.append(contentsOf: input[position..<position + length])
        position += length
    }

    mutating func decode(_ code: Huffman) throws(Gzip.Failure) -> Int {
        var value = 0, first = 0, index = 0
        for length in 1..<16 {
            value |= try bits(1)
            let count = code.counts[length]
            if value - count < first { return code.symbols[index + value - first] }
            index += count
            first = (first + count) << 1
            value <<= 1
        }
        throw .malformed("a code its Huffman table lacks")
    }

    mutating func codes(_ literals: Huffman, _ distances: Huffman) throws(Gzip.Failure) {
        while true {
            let symbol = try decode(literals)
            if symbol < 256 {
                guard output.count < limit else { throw .tooLarge }
                output.append(UInt8(symbol))
                continue
            }
            if symbol == 256 { return }
            let lengthSymbol = symbol - 257
            guard lengthSymbol < Self.lengthBase.count else { throw .malformed("a length symbol out of range") }
            let length = Self.lengthBase[lengthSymbol] + (try bits(Self.lengthExtra[lengthSymbol]))
            let distanceSymbol = try decode(distances)
            guard distanceSymbol < Self.distanceBase.count else { throw .malformed("a distance symbol out of range") }
            let distance = Self.distanceBase[distanceSymbol] + (try bits(Self.distanceExtra[distanceSymbol]))
            guard distance <= output.count else { throw .malformed("a distance back past the start") }
            guard output.count + length <= limit else { throw .tooLarge }
            // Byte by byte: a copy may overlap what it writes (a run).
            for _ in 0..<length { output.append(output[output.count - distance]) }
        }
    }

    mutating func dynamicCodes() throws(Gzip.Failure) -> (Huffman, Huffman) {
        let literalCount = try bits(5) + 257, distanceCount = try bits(5) + 1, codeCount = try bits(4) + 4
        guard literalCount <= 286, distanceCount <= 30 else { throw .malformed("a dynamic block with too many codes") }
        var lengths = [Int](repeating: 0, count: 19)
        for index in 0..<codeCount { lengths[Self.lengthOrder[index]] = try bits(3) }
        guard let lengthCode = Huffman(lengths: lengths[...]) else { throw .malformed("an over-subscribed code length code") }
        lengths = []
        lengths.reserveCapacity(literalCount + distanceCount)
        while lengths.count < literalCount + distanceCount {
            let symbol = try decode(lengthCode)
            var repeated = 0, times = 0
            switch symbol {
            case 0..<16:
                lengths.append(symbol)
                continue
            case 16:
                guard let previous = lengths.last else { throw .malformed("a repeat with no length before it") }
                (repeated, times) = (previous, 3 + (try bits(2)))
            case 17: times = 3 + (try bits(3))
            default: times = 11 + (try bits(7))
            }
            guard lengths.count + times <= literalCount + distanceCount else { throw .malformed("code lengths past the codes' count") }
            lengths += repeatElement(repeated, count: times)
        }
        guard lengths[256] != 0 else { throw .malformed("a block without an end-of-block code") }
        guard let literals = Huffman(lengths: lengths[..<literalCount]), let distances = Huffman(lengths: lengths[literalCount...]) else {
            throw .malformed("an over-subscribed literal or distance code")
        }
        return (literals, distances)
    }
}

/// CRC-32 (ISO 3309, the polynomial 0xEDB88320 reflected), as a gzip trailer holds it.
private enum CRC32 {
    static let table: [UInt32] = (0..<256).map { byte in
        var crc = UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? 0xEDB8_8320 ^ crc >> 1 : crc >> 1 }
        return crc
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ crc >> 8 }
        return ~crc
    }
}
