import Foundation
import Testing
import TokenRelayBase

/// RFC 3339 §5.6 `date-time`, as `GET /v1/audit`'s `since`/`until` and `audit export --since`
/// take it: exactly that grammar, with real days and times (a new user sent `ZZ`, `2026-02-30` and
/// `+99:00` and got 200).
@Suite("RFC 3339 date-times")
struct RFC3339Tests {
    @Test("A date-time with Z, an offset or a fraction names its instant")
    func accepted() {
        #expect(RFC3339.parse("2026-12-05T04:00:00Z")?.timeIntervalSince1970 == 1_796_443_200)
        #expect(RFC3339.parse("2026-12-05t04:00:00z")?.timeIntervalSince1970 == 1_796_443_200)
        #expect(RFC3339.parse("2026-12-05T05:30:00+01:30")?.timeIntervalSince1970 == 1_796_443_200)
        #expect(RFC3339.parse("2026-12-04T23:00:00-05:00")?.timeIntervalSince1970 == 1_796_443_200)
        #expect(RFC3339.parse("2026-12-05T04:00:00.250Z")?.timeIntervalSince1970 == 1_796_443_200.25)
        #expect(RFC3339.parse("2024-02-29T00:00:00Z")?.timeIntervalSince1970 == 1_709_164_800)
        #expect(RFC3339.parse("1970-01-01T00:00:00Z")?.timeIntervalSince1970 == 0)
    }

    @Test(
        "Anything else is refused",
        arguments: [
            "2026-12-05T04:00:00ZZ", "2026-02-30T04:00:00Z", "2025-02-29T00:00:00Z", "2026-12-05T24:00:00Z", "2026-12-05T04:60:00Z",
            "2026-12-05T04:00:00+99:00", "2026-12-05T04:00:00+24:00", "2026-12-05T04:00:00+0100", "2026-12-05T04:00:00+01",
            "2026-2-5T4:0:0Z", "+002026-12-05T04:00:00Z", "99999-12-05T04:00:00Z", "2026-12-05T04:00:00", "2026-12-05", "2026-12-05 04:00:00Z",
            "2026-12-05T04:00:00.Z", "2026-13-05T04:00:00Z", "", "yesterday", "2026-12-05T04:00:00Z ",
        ])
    func refused(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }
}
