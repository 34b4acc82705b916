import Foundation

/// RFC 3339 date-times (`2026-12-05T02:00:00Z`, `2026-12-05T03:00:00.250+01:00`), as the API's
/// query parameters and the command line take them (RFC 3339 §5.6, with `T` and an offset).
package enum RFC3339 {
    /// The instant `text` names, or nil when it is not an RFC 3339 `date-time` (§5.6): exactly
    /// `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `±HH:MM`; the day must exist in its
    /// month, hours 00–23, minutes 00–59, seconds 00–60 (60: a leap second, counted as the next
    /// second), offset hours 00–23. Read byte by byte: Foundation's `ISO8601DateFormatter`
    /// accepts far more on Linux (`ZZ`, `2026-02-30`, `24:00:00`, `+99:00`, one-digit fields).
    package static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }
        func expect(_ allowed: UInt8...) -> Bool {
            guard index < bytes.count, allowed.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
            expect(0x54, 0x74), let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A), let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day), (0...23).contains(hour), (0...59).contains(minute),
            (0...60).contains(second)
        else { return nil }
        var fraction = 0.0
        if index < bytes.count, bytes[index] == 0x2E {
            index += 1
            var scale = 0.1
            let first = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > first else { return nil }
        }
        var offset = 0
        if expect(0x5A, 0x7A) {
            offset = 0
        } else {
            guard index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D else { return nil }
            let sign = bytes[index] == 0x2D ? -1 : 1
            index += 1
            guard let hours = digits(2), expect(0x3A), let minutes = digits(2), (0...23).contains(hours), (0...59).contains(minutes) else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        }
        guard index == bytes.count else { return nil }
        let seconds = daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// `date` in UTC with milliseconds (`2026-12-05T02:00:00.000Z`).
    package static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
