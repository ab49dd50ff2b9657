import Foundation

/// Which build of aviary is running, so that `aviary merge` refuses shards of different builds
/// (a changed allocator or kernel changes the numbers, and a merge of both would be neither run).
///
/// The package has no version number that changes with the code, so the identity is the
/// executable itself: the GNU build ID the linker writes into the ELF file (a hash of its
/// contents, read from the program headers in a few kilobytes), or, where there is none, a
/// hash of the whole file.
enum BuildIdentity {
    /// This process's build, computed once.
    static let current: String = {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        guard let handle = FileHandle(forReadingAtPath: path) else { return "unknown" }
        defer { try? handle.close() }
        if let id = gnuBuildID(handle) { return "gnu-build-id:" + id }
        return (try? handle.seek(toOffset: 0)).flatMap { _ in try? handle.readToEnd() }.map { "fnv1a64:" + fnv1a($0) } ?? "unknown"
    }()

    /// The hexadecimal GNU build ID of an ELF64 little-endian file, or `nil` when it has none.
    ///
    /// The notes are found as the loader finds them: the program header table (`e_phoff`,
    /// `e_phentsize`, `e_phnum`), its `PT_NOTE` segments, and in them a note of type
    /// `NT_GNU_BUILD_ID` (3) named `GNU`.
    static func gnuBuildID(_ handle: FileHandle) -> String? {
        func read(_ offset: UInt64, _ count: Int) -> [UInt8]? {
            guard (try? handle.seek(toOffset: offset)) != nil, let data = try? handle.read(upToCount: count), data.count == count else { return nil }
            return [UInt8](data)
        }
        func integer(_ bytes: [UInt8], _ at: Int, _ size: Int) -> UInt64 {
            (0..<size).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        // "\x7fELF", 64-bit (class 2), little-endian (data 1).
        guard let header = read(0, 64), header[0..<4].elementsEqual([0x7f, 0x45, 0x4c, 0x46]), header[4] == 2, header[5] == 1 else { return nil }
        let tableOffset = integer(header, 0x20, 8), entrySize = Int(integer(header, 0x36, 2)), entries = Int(integer(header, 0x38, 2))
        guard entrySize >= 56, entries > 0, let table = read(tableOffset, entrySize * entries) else { return nil }
        for e in 0..<entries where integer(table, e * entrySize, 4) == 4 {
            let offset = integer(table, e * entrySize + 0x08, 8), size = Int(integer(table, e * entrySize + 0x20, 8))
            guard size <= 1 << 20, let notes = read(offset, size) else { continue }
            var at = 0
            while at + 12 <= notes.count {
                let nameSize = Int(integer(notes, at, 4)), descSize = Int(integer(notes, at + 4, 4)), type = integer(notes, at + 8, 4)
                let name = at + 12, desc = name + (nameSize + 3) / 4 * 4
                guard desc + descSize <= notes.count else { break }
                if type == 3, nameSize == 4, notes[name..<name + 4].elementsEqual([0x47, 0x4e, 0x55, 0]) {
                    return notes[desc..<desc + descSize].map { String(format: "%02x", $0) }.joined()
                }
                at = desc + (descSize + 3) / 4 * 4
            }
        }
        return nil
    }

    /// The 64-bit FNV-1a hash of `data`, eight bytes at a time, as 16 hexadecimal digits.
    static func fnv1a(_ data: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        data.withUnsafeBytes { raw in
            let words = raw.count / 8
            for i in 0..<words { hash = (hash ^ raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) &* 0x0000_0100_0000_01b3 }
            for i in (words * 8)..<raw.count { hash = (hash ^ UInt64(raw[i])) &* 0x0000_0100_0000_01b3 }
        }
        return String(format: "%016llx", hash)
    }
}
