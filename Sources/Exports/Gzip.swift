import CGzip

/// One zlib stream in gzip framing (RFC 1952), on the system's zlib. The `z_stream` lives at a
/// fixed address, as zlib requires: its state points back to the stream it was started with.
/// Not `Sendable`: one reader or writer owns it.
final class ZlibStream {
    enum Direction { case inflate, deflate }

    /// What one call to zlib did.
    struct Step {
        var consumed: Int
        var produced: Int
        /// zlib's status: `Z_OK`, `Z_STREAM_END`, `Z_BUF_ERROR` (no progress possible) or an error.
        var status: Int32
    }

    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let direction: Direction
    /// The status of the start; `Z_OK` for a stream that can be used.
    let started: Int32

    /// A gzip stream: `inflate` reads members (the header and trailer checked by zlib),
    /// `deflate` writes them at level 6 with zlib's default window and memory level.
    init(_ direction: Direction) {
        self.direction = direction
        stream.initialize(to: z_stream())
        // 15 + 16: a 32 KiB window, gzip's header and trailer rather than zlib's.
        switch direction {
        case .inflate: started = CGzip_inflateInit2(stream, 15 + 16)
        case .deflate: started = CGzip_deflateInit2(stream, 6, 15 + 16, 8)
        }
    }

    deinit {
        if started == Z_OK {
            switch direction {
            case .inflate: _ = inflateEnd(stream)
            case .deflate: _ = deflateEnd(stream)
            }
        }
        stream.deallocate()
    }

    /// Starts a new member, keeping the allocated state.
    func reset() -> Int32 {
        switch direction {
        case .inflate: inflateReset(stream)
        case .deflate: deflateReset(stream)
        }
    }

    /// Feeds `input` and fills `output` as far as zlib goes in one call, with `flush`
    /// (`Z_NO_FLUSH`, `Z_FINISH`). Both must be under 4 GiB.
    func step(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer, flush: Int32) -> Step {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(input.count)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = UInt32(output.count)
        let status = direction == .inflate ? inflate(stream, flush) : deflate(stream, flush)
        let step = Step(consumed: input.count - Int(stream.pointee.avail_in), produced: output.count - Int(stream.pointee.avail_out), status: status)
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        return step
    }

    /// zlib's message for the last error, or its status number.
    func message(_ status: Int32) -> String {
        stream.pointee.msg.map { String(cString: $0) } ?? "zlib status \(status)"
    }
}

/// A gzip stream, decompressed as it is fed, member after member (RFC 1952 §2.2: "A gzip
/// file consists of a series of members").
///
/// The stream is complete when its last member reached its end: zlib has then checked the
/// member's CRC-32 and length (`ISIZE`) against what it decompressed, so a stream cut short, or
/// cut inside its trailer, is never taken for a whole one.
struct GzipStream {
    private let zlib = ZlibStream(.inflate)
    private var output = [UInt8](repeating: 0, count: ExportSources.chunkSize)
    private var filled = 0
    private let name: String
    /// Members that reached their end.
    private var members = 0
    /// The last member fed reached its end: more bytes start another.
    private var atMemberEnd = false
    /// Bytes the current member has decompressed to.
    private var memberLength = 0
    /// The bytes after the last member were not gzip (padding, a torn append): ignored, as
    /// `gunzip` ignores trailing garbage.
    private var trailingGarbage = false

    init(name: String) throws(ExportError) {
        self.name = name
        guard zlib.started == Z_OK else {
            throw ExportError(file: name, problem: "cannot start gzip decompression: \(zlib.message(zlib.started))")
        }
    }

    /// Whether the stream ended with a whole member.
    var complete: Bool { trailingGarbage ? members > 0 : atMemberEnd }

    /// Decompresses `input` into `consumer`; `false` if the consumer stopped.
    mutating func feed<C: ByteConsumer>(_ input: UnsafeRawBufferPointer, into consumer: inout C) throws -> Bool {
        guard !trailingGarbage else { return true }
        let zlib = self.zlib
        var offset = 0
        while offset < input.count {
            if atMemberEnd {
                let status = zlib.reset()
                guard status == Z_OK else { throw ExportError(file: name, problem: "gzip decompression failed: \(zlib.message(status))") }
                atMemberEnd = false
                memberLength = 0
            }
            let start = filled
            let step = output.withUnsafeMutableBytes { output in
                zlib.step(UnsafeRawBufferPointer(rebasing: input[offset...]), UnsafeMutableRawBufferPointer(rebasing: output[start...]), flush: Z_NO_FLUSH)
            }
            offset += step.consumed
            filled += step.produced
            memberLength += step.produced
            switch step.status {
            case Z_STREAM_END:
                members += 1
                atMemberEnd = true
            case Z_OK where step.consumed > 0 || step.produced > 0:
                break
            case Z_DATA_ERROR where members > 0 && memberLength == 0:
                trailingGarbage = true
                return try flush(into: &consumer)
            case Z_DATA_ERROR:
                throw ExportError(file: name, problem: "corrupt gzip data (\(zlib.message(step.status))): the file is damaged or not gzip")
            default:
                throw ExportError(file: name, problem: "gzip decompression failed: \(zlib.message(step.status))")
            }
            if filled == output.count, !(try flush(into: &consumer)) { return false }
        }
        return try flush(into: &consumer)
    }

    private mutating func flush<C: ByteConsumer>(into consumer: inout C) throws -> Bool {
        guard filled > 0 else { return true }
        let count = filled
        filled = 0
        return try output.withUnsafeBytes { try consumer.consume(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }
}

/// Gzip written through zlib's deflate: one stream fed line by line, or one whole member per
/// call (`finishing`), the stream reset between members.
final class GzipWriter {
    private let zlib = ZlibStream(.deflate)
    private let name: String
    private var output = [UInt8](repeating: 0, count: 1 << 16)
    /// A member was finished: the next one starts with a reset (a new header).
    private var finished = false

    init(name: String) throws(ExportError) {
        self.name = name
        guard zlib.started == Z_OK else {
            throw ExportError(file: name, problem: "cannot start gzip compression: \(zlib.message(zlib.started))")
        }
    }

    /// Compresses `bytes` into `out`; `finishing` ends the member with them.
    func compress(_ bytes: [UInt8], finishing: Bool, into out: inout [UInt8]) throws(ExportError) {
        if finished {
            let status = zlib.reset()
            guard status == Z_OK else { throw ExportError(file: name, problem: "gzip compression failed: \(zlib.message(status))") }
            finished = false
        }
        try run(bytes, finishing ? Z_FINISH : Z_NO_FLUSH, into: &out)
        if finishing { finished = true }
    }

    /// Ends the stream's member into `out`.
    func finish(into out: inout [UInt8]) throws(ExportError) {
        guard !finished else { return }
        try run([], Z_FINISH, into: &out)
        finished = true
    }

    /// Deflates `input` with `flush` until zlib has taken all of it and, finishing, written
    /// the member's trailer.
    private func run(_ input: [UInt8], _ flush: Int32, into out: inout [UInt8]) throws(ExportError) {
        let zlib = self.zlib
        var offset = 0
        while true {
            let step = input.withUnsafeBytes { input in
                output.withUnsafeMutableBytes { output in
                    zlib.step(UnsafeRawBufferPointer(rebasing: input[offset...]), output, flush: flush)
                }
            }
            offset += step.consumed
            out.append(contentsOf: output[..<step.produced])
            switch step.status {
            case Z_STREAM_END where flush == Z_FINISH:
                return
            case Z_OK, Z_BUF_ERROR:
                // zlib stops early only with its output full; otherwise it has taken everything.
                if flush != Z_FINISH, step.produced < output.count { return }
                if step.consumed == 0, step.produced == 0 {
                    throw ExportError(file: name, problem: "gzip compression made no progress: \(zlib.message(step.status))")
                }
            default:
                throw ExportError(file: name, problem: "gzip compression failed: \(zlib.message(step.status))")
            }
        }
    }
}
