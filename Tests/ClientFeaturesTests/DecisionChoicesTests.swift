import Testing
import ClientFeatures

struct DecisionChoicesTests {
    @Test func singleListKeepsOrderAndFallsBackToFirst() throws {
        let choices = try DecisionChoices(parsing: "a,b,c")
        #expect(!choices.isMultiple)
        #expect(choices.facets.count == 1)
        #expect(choices.facets[0].name == nil)
        #expect(choices.facets[0].options == ["a", "b", "c"])
        #expect(choices.fallback == .single("a"))
        #expect(choices.description == "a,b,c")
    }

    @Test func singleChoiceIsAllowed() throws {
        let choices = try DecisionChoices(parsing: "only")
        #expect(choices.facets[0].options == ["only"])
    }

    @Test func codesMayUseDashUnderscoreAndDot() throws {
        let choices = try DecisionChoices(parsing: "old-v1,new_v2,x.3")
        #expect(choices.facets[0].options == ["old-v1", "new_v2", "x.3"])
    }

    @Test func namedDecisionsParseInOrderAndFallBackToEachFirstChoice() throws {
        let choices = try DecisionChoices(parsing: "color:red,blue/size:sm,md,lg", multiple: true)
        #expect(choices.isMultiple)
        #expect(choices.facets.map(\.name) == ["color", "size"])
        #expect(choices.facets.map(\.options) == [["red", "blue"], ["sm", "md", "lg"]])
        #expect(choices.fallback == .multiple(["color": "red", "size": "sm"]))
        #expect(choices.description == "color:red,blue/size:sm,md,lg")
    }

    @Test func acceptsOnlySelectionsOfOfferedCodes() throws {
        let single = try DecisionChoices(parsing: "a,b")
        #expect(single.accepts(.single("b")))
        #expect(!single.accepts(.single("c")))
        #expect(!single.accepts(.multiple(["x": "a"])))

        let multiple = try DecisionChoices(parsing: "color:red,blue/size:sm,md", multiple: true)
        #expect(multiple.accepts(.multiple(["color": "blue", "size": "md"])))
        #expect(!multiple.accepts(.multiple(["color": "blue"])))
        #expect(!multiple.accepts(.multiple(["color": "green", "size": "md"])))
        #expect(!multiple.accepts(.multiple(["color": "blue", "size": "md", "shape": "x"])))
        #expect(!multiple.accepts(.single("red")))
    }

    @Test func selectionAccessorsAndDescription() {
        let multiple = DecisionSelection.multiple(["size": "md", "color": "red"])
        #expect(multiple[decision: "color"] == "red")
        #expect(multiple[decision: "shape"] == nil)
        #expect(multiple.code == nil)
        #expect(multiple.description == "color:red/size:md")
        #expect(DecisionSelection.single("b").code == "b")
        #expect(DecisionSelection.single("b")[decision: "b"] == nil)
    }

    static let malformed: [(text: String, multiple: Bool, message: String)] = [
        ("", false, "choices are empty"),
        ("a,,b", false, "empty choice at position 2 in \"a,,b\""),
        ("a,", false, "empty choice at position 2 in \"a,\""),
        (",a", false, "empty choice at position 1 in \",a\""),
        ("a,b,a", false, "duplicate choice \"a\" in \"a,b,a\""),
        ("a b,c", false, "choice \"a b\" in \"a b,c\" contains a space"),
        ("a,b?", false, "choice \"b?\" in \"a,b?\" contains '?'"),
        ("color:red,blue", false, "choice \"color:red\" in \"color:red,blue\" contains ':'"),
        ("a/b", false, "choice \"a/b\" in \"a/b\" contains '/'"),
        ("", true, "choices are empty"),
        ("color:red,blue/size", true, "decision \"size\" in \"color:red,blue/size\" has no ':'"),
        ("color:red:blue", true, "decision \"color:red:blue\" in \"color:red:blue\" has more than one ':'"),
        (":red,blue", true, "decision \":red,blue\" at position 1 in \":red,blue\" has no name before ':'"),
        ("color:", true, "decision \"color\" in \"color:\" has no choices after ':'"),
        ("color:red/color:blue", true, "duplicate decision name \"color\" in \"color:red/color:blue\""),
        ("color:red,red", true, "duplicate choice \"red\" of decision \"color\" in \"color:red,red\""),
        ("color:red,/size:sm", true, "empty choice at position 2 of decision \"color\" in \"color:red,/size:sm\""),
        ("color:red//size:sm", true, "empty decision at position 2 in \"color:red//size:sm\""),
        ("color:red/", true, "empty decision at position 2 in \"color:red/\""),
        ("col or:red", true, "decision name \"col or\" in \"col or:red\" contains a space"),
        ("color:r\u{E9}d", true, "choice \"r\u{E9}d\" of decision \"color\" in \"color:r\u{E9}d\" contains '\u{E9}'"),
    ]

    @Test(arguments: malformed.indices)
    func malformedListIsRejectedNamingTheOffendingPart(index: Int) {
        let vector = Self.malformed[index]
        do {
            let parsed = try DecisionChoices(parsing: vector.text, multiple: vector.multiple)
            Issue.record("\"\(vector.text)\" parsed as \(parsed)")
        } catch {
            #expect(error.message.contains(vector.message), "got: \(error.message)")
        }
    }
}
