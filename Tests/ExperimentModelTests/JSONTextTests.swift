import Foundation
import Testing
@testable import ExperimentModel

/// Hand-written JSON strings must read back as the text they were made from.
struct JSONTextTests {
    @Test(arguments: ["plain", "", "say \"hi\"", "back\\slash", "tab\tline\nreturn\r", "bell\u{07}nul\u{00}", "é ✓ 🐦"])
    func aStringReadsBackAsItsText(text: String) throws {
        let literal = JSONText.string(text)
        let decoded = try JSONDecoder().decode(String.self, from: Data(literal.utf8))
        #expect(decoded == text)
    }

    @Test func plainTextIsOnlyQuoted() {
        #expect(JSONText.string("button-a") == "\"button-a\"")
        #expect(JSONText.string("\u{01}") == "\"\\u0001\"")
    }
}
