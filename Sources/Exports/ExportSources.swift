import Foundation
import ZIPFoundation
#if canImport(Glibc)
import Glibc
#endif

/// What the export's files are poured into: their uncompressed bytes, file by file.
protocol ByteConsumer {
    /// A new file (a zip's entry: `archive.zip/entry`) starts.
    mutating func beginFile(_ name: String) throws
    /// The file's next bytes; `false` stops the read.
    mutating func consume(_ chunk: UnsafeRawBufferPointer) throws -> Bool
    /// The file ended; `complete` is `false` when its compressed stream was cut short.
    mutating func endFile(complete: Bool) throws
    /// `bytes` more were read from disk.
    mutating func advance(_ bytes: Int64)
}

/// Reads export files in bounded memory, whatever holds them: plain text, gzip (several
/// concatenated members included, as PostHog writes a member per line: posthog-snowplow.md
/// §P1), a zip of either (Amplitude's Export API), or a folder of any of these.
///
/// The container is told from the first bytes, not the name: S3 may serve gzipped logs
/// decompressed, with their `.gz` name (segment-rudderstack.md §S1.1).
enum ExportSources {
    /// Bytes read from disk, and decompressed, at a time.
    static let chunkSize = 1 << 20

    /// The files a read of `url` covers, in order: `url` itself, or a folder's files
    /// (recursively, sorted by path), without hidden files, manifests and markers.
    static func files(_ url: URL) throws(ExportError) -> (files: [URL], folder: Bool) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw ExportError(file: url.path, problem: "no such file or folder")
        }
        guard isDirectory.boolValue else { return ([url], false) }
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles]) else {
            throw ExportError(file: url.path, problem: "cannot list the folder")
        }
        var found: [(path: String, url: URL)] = []
        let root = url.standardizedFileURL.path
        for case let file as URL in walker {
            guard (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { continue }
            let name = file.lastPathComponent
            // PostHog's manifests and Spark's markers list files; they hold no events.
            if name.hasSuffix("_manifest.json") || name == "_SUCCESS" || name.hasSuffix(".crc") { continue }
            var path = file.standardizedFileURL.path
            if path.hasPrefix(root) { path = String(path.dropFirst(root.count)) }
            found.append((path, file))
        }
        return (found.sorted { $0.path < $1.path }.map(\.url), true)
    }

    /// Pours `url` (one file, not a folder) into `consumer`: a zip entry by entry, a gzip
    /// stream member by member, plain text as it is.
    ///
    /// - Throws: ``ExportError`` for a file that cannot be opened or decompressed, or one in
    ///   a format no reader takes (Parquet, brotli); whatever `consumer` throws.
    static func read<C: ByteConsumer>(_ url: URL, name: String, into consumer: inout C) throws {
        let file = try OpenFile(url, name: name)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { chunk.deallocate() }
        let first = try file.read(into: chunk)
        let magic = Array(chunk[..<min(4, first)])
        if magic.starts(with: [0x50, 0x4B, 0x03, 0x04]) || magic.starts(with: [0x50, 0x4B, 0x05, 0x06]) {
            file.close()
            try readZip(url, name: name, into: &consumer)
            return
        }
        if magic.starts(with: Array("PAR1".utf8)) {
            throw ExportError(file: name, problem: "a Parquet file: export JSON lines (or CSV) instead")
        }
        if url.pathExtension == "br" || url.pathExtension == "zst" || magic.starts(with: [0x28, 0xB5, 0x2F, 0xFD]) {
            throw ExportError(file: name, problem: "compressed with \(url.pathExtension == "br" ? "brotli" : "zstd"), which is not read: decompress it first, or export gzip")
        }
        try consumer.beginFile(name)
        consumer.advance(Int64(first))
        if magic.starts(with: [0x1F, 0x8B]) {
            var gzip = try GzipStream(name: name)
            var count = first
            var more = true
            while more, count > 0 {
                more = try gzip.feed(UnsafeRawBufferPointer(rebasing: chunk[..<count]), into: &consumer)
                guard more else { break }
                count = try file.read(into: chunk)
                consumer.advance(Int64(count))
            }
            try consumer.endFile(complete: !more || gzip.complete)
        } else {
            var more = try consumer.consume(UnsafeRawBufferPointer(rebasing: chunk[..<first]))
            // The rest of a large plain file is mapped a window at a time rather than read: its
            // lines are scanned where the page cache holds them, without a copy.
            var offset = first
            while more, first == chunkSize, let window = file.map(offset: offset, length: mapWindow) {
                defer { window.unmap() }
                more = try consumer.consume(window.bytes)
                consumer.advance(Int64(window.bytes.count))
                offset += window.bytes.count
            }
            while more {
                let count = try file.read(into: chunk, at: offset)
                guard count > 0 else { break }
                offset += count
                consumer.advance(Int64(count))
                more = try consumer.consume(UnsafeRawBufferPointer(rebasing: chunk[..<count]))
            }
            try consumer.endFile(complete: true)
        }
    }

    /// The window of a plain file mapped at a time.
    static let mapWindow = 64 << 20

    /// Pours a zip's file entries, in path order, each as its own file (gzipped or not).
    private static func readZip<C: ByteConsumer>(_ url: URL, name: String, into consumer: inout C) throws {
        let archive: Archive
        do {
            archive = try Archive(url: url, accessMode: .read)
        } catch {
            throw ExportError(file: name, problem: "not a readable zip: \(error)")
        }
        let entries = archive.filter { entry in
            guard entry.type == .file, entry.uncompressedSize > 0 else { return false }
            let parts = entry.path.split(separator: "/")
            return !parts.contains { $0.hasPrefix(".") || $0 == "__MACOSX" }
        }.sorted { $0.path < $1.path }
        var stopped = false
        for entry in entries where !stopped {
            let entryName = name + "/" + entry.path
            try consumer.beginFile(entryName)
            var gzip: GzipStream?
            var sniffed = false
            // The consumer's own errors (the reader's body) pass through as they are; any other
            // error comes from the archive.
            var passed: (any Error)?
            do {
                _ = try archive.extract(entry, bufferSize: chunkSize) { data in
                    // The consumer has seen enough (detection): stop extracting the entry.
                    if stopped { throw StopExtracting() }
                    guard !data.isEmpty else { return }
                    do {
                        if !sniffed {
                            sniffed = true
                            if data.count >= 2, data[data.startIndex] == 0x1F, data[data.startIndex + 1] == 0x8B { gzip = try GzipStream(name: entryName) }
                        }
                        if gzip != nil {
                            stopped = !(try data.withUnsafeBytes { try gzip!.feed($0, into: &consumer) })
                        } else {
                            stopped = !(try data.withUnsafeBytes { try consumer.consume($0) })
                        }
                    } catch {
                        passed = error
                        throw StopExtracting()
                    }
                }
            } catch is StopExtracting {
                if let passed { throw passed }
            } catch {
                throw ExportError(file: entryName, problem: "cannot extract the zip entry: \(error)")
            }
            consumer.advance(Int64(entry.compressedSize))
            try consumer.endFile(complete: stopped || (gzip?.complete ?? true))
        }
    }
}

private struct StopExtracting: Error {}

/// A mapped window of a file. The corresponding C function is `munmap`.
private struct MappedWindow {
    let bytes: UnsafeRawBufferPointer

    func unmap() {
        if let base = bytes.baseAddress { munmap(UnsafeMutableRawPointer(mutating: base), bytes.count) }
    }
}

/// A file open for reading, chunk by chunk. The corresponding C functions are `open`, `read`
/// and `close`.
private final class OpenFile {
    private var descriptor: Int32
    let name: String

    init(_ url: URL, name: String) throws(ExportError) {
        self.name = name
        descriptor = Glibc.open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ExportError(file: name, problem: "cannot open: \(String(cString: strerror(errno)))") }
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
        descriptor = -1
    }

    /// A window of the file mapped into memory, from `offset` (a multiple of the page size)
    /// for up to `length` bytes; `nil` at the end of the file or where mapping fails (the
    /// caller reads instead). The corresponding C functions are `fstat` and `mmap`.
    func map(offset: Int, length: Int) -> MappedWindow? {
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, offset < Int(status.st_size),
              offset % Int(sysconf(Int32(_SC_PAGESIZE))) == 0
        else { return nil }
        let count = min(length, Int(status.st_size) - offset)
        let address = mmap(nil, count, PROT_READ, MAP_PRIVATE | MAP_POPULATE, descriptor, off_t(offset))
        guard let address, address != MAP_FAILED else { return nil }
        return MappedWindow(bytes: UnsafeRawBufferPointer(start: address, count: count))
    }

    /// Fills `buffer` from its start (up to a chunk) from the file, from `offset` if given; the
    /// bytes read (0 at the end).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int? = nil) throws(ExportError) -> Int {
        let size = min(buffer.count, ExportSources.chunkSize)
        var total = 0
        while total < size {
            let space = buffer.baseAddress! + total
            let n = offset.map { Glibc.pread(descriptor, space, size - total, off_t($0 + total)) }
                ?? Glibc.read(descriptor, space, size - total)
            if n < 0 {
                if errno == EINTR { continue }
                throw ExportError(file: name, problem: "cannot read: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            total += n
        }
        return total
    }
}
