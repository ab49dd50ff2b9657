/// Text of up to 24 UTF-8 bytes kept in the value itself, longer text as a `String`.
///
/// A creation time (`2012-08-20T19:36:05.123Z`, 24 bytes) is too long for a `String`'s own
/// storage, so each downloaded configuration carried a heap buffer of its own, and replacing a
/// device's configuration freed it: in a fleet, a cache miss per download for memory nothing
/// else touches. Any text that fits is kept inline, so two equal texts have equal storage.
struct ShortText: Hashable, Sendable {
    private enum Storage: Hashable, Sendable {
        case inline(UInt64, UInt64, UInt64, count: UInt8)
        case string(String)
    }

    private let storage: Storage

    init(_ text: String) {
        guard text.utf8.count <= 24 else {
            storage = .string(text)
            return
        }
        var text = text
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = text.withUTF8 { bytes in
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
            return bytes.count
        }
        storage = .inline(words.0, words.1, words.2, count: UInt8(count))
    }

    /// Text of `count` bytes, at most 24, laid out in `words` as their memory holds them.
    init(words: (UInt64, UInt64, UInt64), count: Int) {
        storage = .inline(words.0, words.1, words.2, count: UInt8(count))
    }

    /// Calls `body` with the text's UTF-8 bytes.
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        switch storage {
        case .string(let text):
            var text = text
            return text.withUTF8(body)
        case .inline(let a, let b, let c, let count):
            var words = (a, b, c)
            return withUnsafeBytes(of: &words) { raw in body(UnsafeBufferPointer(rebasing: raw.bindMemory(to: UInt8.self)[..<Int(count)])) }
        }
    }

    var string: String {
        switch storage {
        case .string(let text):
            return text
        case .inline(let a, let b, let c, let count):
            var words = (a, b, c)
            return withUnsafeBytes(of: &words) { raw in
                String(decoding: raw.prefix(Int(count)), as: UTF8.self)
            }
        }
    }
}
