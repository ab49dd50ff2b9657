import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The files an export writer appends lines to, kept open by path, buffered, and gzipped as
/// the vendor does: one stream a file, or one member a line (PostHog).
///
/// At most ``openLimit`` files stay open; a file closed to make room is reopened to append,
/// which for gzip starts another member (RFC 1952 allows a series of them, and the reader
/// takes it). Not `Sendable`: one writer owns it.
final class OutputFiles {
    enum Compression {
        case none
        case gzip
        /// A gzip member per line, concatenated (PostHog's JSON lines transformer).
        case gzipPerLine
    }

    let directory: URL
    private var open: [String: OutputFile] = [:]
    private var lastUse: [String: Int] = [:]
    private var clock = 0
    /// Every file written, in the order first opened.
    private(set) var paths: [String] = []
    private var known: Set<String> = []
    static let openLimit = 16

    init(directory: URL) throws(ExportError) {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw ExportError(file: directory.path, problem: "cannot create the folder: \(error.localizedDescription)")
        }
    }

    /// Appends `line` (its newline included) to the file at `path`, relative to the directory.
    func append(_ line: [UInt8], to path: String, _ compression: Compression) throws(ExportError) {
        let file: OutputFile
        if let existing = open[path] {
            file = existing
        } else {
            if open.count >= Self.openLimit, let oldest = lastUse.min(by: { $0.value < $1.value })?.key {
                try open.removeValue(forKey: oldest)?.close()
                lastUse[oldest] = nil
            }
            let url = directory.appendingPathComponent(path)
            do {
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            } catch {
                throw ExportError(file: url.path, problem: "cannot create the folder: \(error.localizedDescription)")
            }
            file = try OutputFile(url, compression, truncate: !known.contains(path))
            open[path] = file
            if known.insert(path).inserted { paths.append(path) }
        }
        clock += 1
        lastUse[path] = clock
        try file.write(line)
    }

    /// Closes every file; the files written, in the order first opened.
    func closeAll() throws(ExportError) -> [URL] {
        for (_, file) in open.sorted(by: { $0.key < $1.key }) { try file.close() }
        open.removeAll()
        lastUse.removeAll()
        return paths.map { directory.appendingPathComponent($0) }
    }
}

/// One file being written: a buffer of lines, compressed as they go out. The corresponding C
/// functions are `open`, `write` and `close`.
final class OutputFile {
    private var descriptor: Int32
    private let url: URL
    private let compression: OutputFiles.Compression
    private let gzip: GzipWriter?
    private var pending: [UInt8] = []
    private static let bufferSize = 1 << 20

    init(_ url: URL, _ compression: OutputFiles.Compression, truncate: Bool) throws(ExportError) {
        self.url = url
        self.compression = compression
        descriptor = Glibc.open(url.path, O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0o644)
        guard descriptor >= 0 else { throw ExportError(file: url.path, problem: "cannot create: \(String(cString: strerror(errno)))") }
        gzip = compression == .none ? nil : try GzipWriter(name: url.path)
        pending.reserveCapacity(Self.bufferSize)
    }

    deinit {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
    }

    func write(_ line: [UInt8]) throws(ExportError) {
        switch compression {
        case .none:
            pending.append(contentsOf: line)
        case .gzip:
            try gzip!.compress(line, finishing: false, into: &pending)
        case .gzipPerLine:
            try gzip!.compress(line, finishing: true, into: &pending)
        }
        if pending.count >= Self.bufferSize { try drain() }
    }

    func close() throws(ExportError) {
        guard descriptor >= 0 else { return }
        if compression == .gzip { try gzip!.finish(into: &pending) }
        try drain()
        _ = Glibc.close(descriptor)
        descriptor = -1
    }

    private func drain() throws(ExportError) {
        var offset = 0
        while offset < pending.count {
            let n = pending.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, pending.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ExportError(file: url.path, problem: "cannot write: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        pending.removeAll(keepingCapacity: true)
    }
}
