/// The CRC-32 checksum (IEEE 802.3, reflected polynomial 0xEDB88320) that guards each record
/// of a ``FileEventStore`` log.
struct CRC32 {
    private static let table: [UInt32] = (0..<256).map { index -> UInt32 in
        var crc = UInt32(index)
        for _ in 0..<8 {
            crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
        }
        return crc
    }

    private var state: UInt32 = 0xFFFF_FFFF

    mutating func update(_ bytes: ArraySlice<UInt8>) {
        var crc = state
        Self.table.withUnsafeBufferPointer { table in
            for byte in bytes {
                crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
            }
        }
        state = crc
    }

    var value: UInt32 { state ^ 0xFFFF_FFFF }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }
}
