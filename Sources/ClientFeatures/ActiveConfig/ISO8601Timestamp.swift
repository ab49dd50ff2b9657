/// A strict reader for the ISO-8601 timestamps the exchange format uses.
///
/// Written by hand rather than with `DateFormatter` so that the result never depends on the
/// process's locale or time zone.
enum ISO8601Timestamp {
    /// Seconds since the Unix epoch, or `nil` if `text` is not `YYYY-MM-DDTHH:MM[:SS[.fff]]`
    /// followed by `Z` or a `±HH:MM` / `±HHMM` offset.
    static func seconds(from text: String) -> Double? {
        // Read in place: every downloaded configuration's creation time passes here.
        var text = text
        return text.withUTF8 { seconds(fromUTF8: $0) }
    }

    /// A time split into the fields of its text, to the millisecond rounded down.
    struct CivilTime {
        var year, month, day, hour, minute, second, milli: Int

        init(_ seconds: Double) {
            self.init(millis: Int((seconds * 1000).rounded(.down)))
        }

        init(millis: Int) {
            // Whole days rounded down, so that a time before the epoch has a day of its own
            // and fields that count up from its midnight.
            let (days, dayMillis) = floorDivision(millis, 86_400_000)
            // Hinnant's civil_from_days.
            let z = days + 719_468
            let era = floorDivision(z, 146_097).quotient
            let dayOfEra = z - era * 146_097
            let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
            let shiftedMonth = (5 * dayOfYear + 2) / 153
            day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
            month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
            year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
            (hour, minute, second, milli) = (dayMillis / 3_600_000, dayMillis / 60_000 % 60, dayMillis / 1000 % 60, dayMillis % 1000)
        }
    }

    /// The quotient rounded down, and the remainder that leaves (never negative).
    static func floorDivision(_ value: Int, _ divisor: Int) -> (quotient: Int, remainder: Int) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// `seconds` as `YYYY-MM-DDTHH:MM:SS.fffZ` (24 bytes, kept inline), or `nil` when its year
    /// is outside 0–9999.
    static func inlineText(for seconds: Double) -> ShortText? {
        inlineText(forMillis: Int((seconds * 1000).rounded(.down)))
    }

    /// The milliseconds since the epoch whose text ``inlineText(forMillis:)`` writes: years
    /// 0–9999.
    static let inlineMillis = (daysSinceEpoch(year: 0, month: 1, day: 1) * 86_400_000)..<(daysSinceEpoch(year: 10_000, month: 1, day: 1) * 86_400_000)

    /// What ``seconds(fromUTF8:)`` reads from the text of `millis`, one of ``inlineMillis``,
    /// without writing the text: the reader's own steps (``Reading``) on the same fields, so the
    /// two agree to the bit.
    static func secondsReadBack(fromMillis millis: Int) -> Double {
        let (minutes, rest) = floorDivision(millis, 60_000)
        let milli = rest % 1000
        var reading = Reading(wholeSecond: rest / 1000)
        reading.add(fractionDigit: milli / 100)
        reading.add(fractionDigit: milli / 10 % 10)
        reading.add(fractionDigit: milli % 10)
        return reading.seconds(afterMinutes: minutes)
    }

    /// The seconds of a time as the reader adds them up: the whole second, then each digit of
    /// the fraction at its place, then the minutes since the epoch.
    struct Reading {
        private var second: Double
        private var scale = 0.1

        init(wholeSecond: Int) {
            second = Double(wholeSecond)
        }

        mutating func add(fractionDigit digit: Int) {
            second += Double(digit) * scale
            scale /= 10
        }

        func seconds(afterMinutes minutes: Int) -> Double {
            Double(minutes) * 60 + second
        }
    }

    /// ``inlineText(for:)`` of a whole number of milliseconds since the epoch.
    static func inlineText(forMillis millis: Int) -> ShortText? {
        let time = CivilTime(millis: millis)
        guard (0...9999).contains(time.year) else { return nil }
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &words) { bytes in
            var at = 0
            func put(_ value: Int, _ width: Int, _ then: Unicode.Scalar) {
                var rest = value
                for place in stride(from: width - 1, through: 0, by: -1) {
                    bytes[at + place] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                bytes[at + width] = UInt8(ascii: then)
                at += width + 1
            }
            put(time.year, 4, "-")
            put(time.month, 2, "-")
            put(time.day, 2, "T")
            put(time.hour, 2, ":")
            put(time.minute, 2, ":")
            put(time.second, 2, ".")
            put(time.milli, 3, "Z")
        }
        return ShortText(words: words, count: 24)
    }

    static func seconds(fromUTF8 bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        var scanner = Scanner(bytes)
        guard let year = scanner.digits(4), scanner.take(UInt8(ascii: "-")),
              let month = scanner.digits(2), scanner.take(UInt8(ascii: "-")),
              let day = scanner.digits(2), scanner.take(UInt8(ascii: "T")) || scanner.take(UInt8(ascii: " ")),
              let hour = scanner.digits(2), scanner.take(UInt8(ascii: ":")),
              let minute = scanner.digits(2)
        else { return nil }
        var reading = Reading(wholeSecond: 0)
        var second = 0
        if scanner.take(UInt8(ascii: ":")) {
            guard let whole = scanner.digits(2) else { return nil }
            second = whole
            reading = Reading(wholeSecond: whole)
            if scanner.take(UInt8(ascii: ".")) {
                var sawDigit = false
                while let digit = scanner.digit() {
                    reading.add(fractionDigit: digit)
                    sawDigit = true
                }
                guard sawDigit else { return nil }
            }
        }
        var offsetMinutes = 0
        if scanner.take(UInt8(ascii: "Z")) {
            offsetMinutes = 0
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.digits(2) else { return nil }
            _ = scanner.take(UInt8(ascii: ":"))
            guard let offsetMins = scanner.digits(2), offsetHours < 24, offsetMins < 60 else { return nil }
            offsetMinutes = sign * (offsetHours * 60 + offsetMins)
        } else {
            return nil
        }
        guard scanner.atEnd, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second < 61
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return reading.seconds(afterMinutes: days * 1440 + hour * 60 + minute - offsetMinutes)
    }

    /// Days from 1970-01-01 to the given proleptic Gregorian date (Hinnant's `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        var atEnd: Bool { index == bytes.count }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func digit() -> Int? {
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
                return nil
            }
            defer { index += 1 }
            return Int(bytes[index] - UInt8(ascii: "0"))
        }

        mutating func digits(_ count: Int) -> Int? {
            var value = 0
            for _ in 0..<count {
                guard let d = digit() else { return nil }
                value = value * 10 + d
            }
            return value
        }

        mutating func sign() -> Int? {
            if take(UInt8(ascii: "+")) { return 1 }
            if take(UInt8(ascii: "-")) { return -1 }
            return nil
        }
    }
}
