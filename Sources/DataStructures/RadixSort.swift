/// A stable least-significant-digit radix sort on an unsigned integer key, a byte a pass.
///
/// One pass counts every byte of every key; a byte that is the same in all keys (the top bytes
/// of a window's device numbers, of an update's arrival times) costs no pass. The fleet kernel
/// sorts a window's events by device, and the experiment server an update's feedback by arrival
/// time, with it: a comparison sort of either cost several times more. `public` and
/// `@inlinable` for the reason ``MinHeap`` gives.
public enum RadixSort {
    /// Sorts `elements` by `key`, keeping the order of elements with equal keys.
    ///
    /// - Parameters:
    ///   - elements: What to sort.
    ///   - scratch: A buffer the sort may use and leave holding anything; keep it between calls
    ///     to spare its allocation, or pass an empty array.
    ///   - key: The key to sort by, an unsigned integer; read once per element per pass.
    /// - Complexity: O(*n* · *b* + 256 · *b*) for *n* elements and *b* bytes of key that differ.
    @inlinable
    public static func sort<Element, Key: FixedWidthInteger & UnsignedInteger>(
        _ elements: inout [Element], scratch: inout [Element], by key: (Element) -> Key
    ) {
        let count = elements.count
        guard count > 1 else { return }
        let bytes = Key.bitWidth / 8
        var counts = [Int](repeating: 0, count: bytes << 8)
        let first = key(elements[0])
        var differing: Key = 0
        counts.withUnsafeMutableBufferPointer { counts in
            for element in elements {
                var k = key(element)
                differing |= k ^ first
                for byte in 0..<bytes {
                    counts[byte << 8 | Int(truncatingIfNeeded: k & 0xff)] += 1
                    k >>= 8
                }
            }
        }
        guard differing != 0 else { return }
        // The scratch buffer needs `count` initialised elements to scatter into.
        if scratch.count != count {
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: elements)
        }
        var inScratch = false
        for byte in 0..<bytes where (differing &>> (byte * 8)) & 0xff != 0 {
            let shift = byte * 8
            counts.withUnsafeMutableBufferPointer { counts in
                var start = 0
                for digit in 0..<256 {
                    let n = counts[byte << 8 | digit]
                    counts[byte << 8 | digit] = start
                    start += n
                }
                func scatter(_ from: UnsafeBufferPointer<Element>, _ to: UnsafeMutableBufferPointer<Element>) {
                    for element in from {
                        let slot = byte << 8 | Int(truncatingIfNeeded: (key(element) &>> shift) & 0xff)
                        to[counts[slot]] = element
                        counts[slot] += 1
                    }
                }
                if inScratch {
                    scratch.withUnsafeBufferPointer { from in elements.withUnsafeMutableBufferPointer { to in scatter(from, to) } }
                } else {
                    elements.withUnsafeBufferPointer { from in scratch.withUnsafeMutableBufferPointer { to in scatter(from, to) } }
                }
            }
            inScratch.toggle()
        }
        if inScratch { swap(&elements, &scratch) }
    }
}
