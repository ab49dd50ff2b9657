import ClientFeatures
import ExperimentModel
import Testing

/// Builds an exchange-format payload from sections of settings.
private func payload(
    version: String = "1.0",
    created: String = "2012-08-20T19:36Z",
    extraMeta: [String: JSONValue] = [:],
    _ sections: [String: [String: JSONValue]]
) -> JSONValue {
    var meta: [String: JSONValue] = ["format_version_string": .string(version), "creation_time": .string(created)]
    meta.merge(extraMeta) { _, new in new }
    let sectionValues = sections.mapValues { settings -> JSONValue in
        .object(["settings": .object(settings.mapValues { .object(["value": $0]) })])
    }
    return .object(["meta": .object(meta), "config_sections": .object(sectionValues)])
}

struct ConfigurationParsingTests {
    @Test func parsesSeedExampleWithEveryValueKind() throws {
        let text = """
        { "meta": { "format_version_string": "1.0", "creation_time": "2012-08-20T19:36Z",
                    "other_meta_key": "arbitrary objects with other relevant information" },
          "config_sections": { "ConfigSection1": { "settings": {
              "Text": { "value": "This can be a a string" },
              "Count": { "value": 3 },
              "Ratio": { "value": 0.25 },
              "Enabled": { "value": true },
              "List": { "value": [1, 2] },
              "Object": { "value": { "a": "b" } } } } } }
        """
        let state = try ConfigurationState(parsing: JSONValue(parsing: text))
        #expect(state.meta.formatVersion == "1.0")
        #expect(state.meta.creationTimeText == "2012-08-20T19:36Z")
        #expect(state.meta.otherKeys["other_meta_key"] == "arbitrary objects with other relevant information")
        let section = try #require(state.sections["ConfigSection1"])
        #expect(section.string("Text") == "This can be a a string")
        #expect(section.int("Count") == 3)
        #expect(section.double("Ratio") == 0.25)
        #expect(section.bool("Enabled") == true)
        #expect(section.array("List") == [1, 2])
        #expect(section.object("Object") == ["a": "b"])
    }

    @Test func creationTimeIsParsedAsSecondsSinceEpoch() {
        // 2012-08-20 is day 15_572 after 1970-01-01; 19:36 adds 70_560 s.
        let meta = ConfigurationMeta(formatVersion: "1.0", creationTimeText: "2012-08-20T19:36Z")
        let expected: Double = 15_572 * 86_400 + 70_560
        #expect(meta.creationTime == expected)
    }

    @Test(arguments: [
        ("1970-01-01T00:00Z", 0.0),
        ("1970-01-01T00:00:01.5Z", 1.5),
        ("2000-02-29T12:00:00+02:00", 951_818_400.0),
        ("1969-12-31T23:59-00:01", 0.0),
    ])
    func creationTimeAcceptsSecondsFractionsAndOffsets(text: String, seconds: Double) {
        #expect(ConfigurationMeta(formatVersion: "1", creationTimeText: text).creationTime == seconds)
    }

    /// Short texts are kept inline and long ones as strings; either way the text is kept exactly
    /// and two metas with the same text are equal.
    @Test(arguments: [
        "", "2012-08-20T19:36Z", "2012-08-20T19:36:05.123Z", "2012-08-20T19:36:05.1234Z", "hier à 19 h 36 ✓",
        "a creation time written out in words, far too long to be kept inline",
    ])
    func creationTimeTextIsKeptExactly(text: String) {
        let meta = ConfigurationMeta(formatVersion: "1.0", creationTimeText: text)
        #expect(meta.creationTimeText == text)
        #expect(meta.dictionary["creation_time"] == .string(text))
        let same = ConfigurationMeta(formatVersion: "1.0", creationTimeText: String(decoding: Array(text.utf8), as: UTF8.self))
        #expect(meta == same && meta.hashValue == same.hashValue)
        #expect(meta != ConfigurationMeta(formatVersion: "1.0", creationTimeText: text + "0"))
    }

    /// 2000 is a leap year; 3650 days is the longest horizon of a scenario. Past 9999 the text
    /// is written out the long way.
    static let creationTimes: [(Double, String)] = [
        (0, "1970-01-01T00:00:00.000Z"), (3599.999, "1970-01-01T00:59:59.999Z"), (3599.9999, "1970-01-01T00:59:59.999Z"),
        (31_581_296.789, "1971-01-01T12:34:56.789Z"), (951_868_799.5, "2000-02-29T23:59:59.500Z"),
        (315_360_000, "1979-12-30T00:00:00.000Z"), (253_402_300_799.999, "9999-12-31T23:59:59.999Z"),
        (253_402_300_800, "10000-01-01T00:00:00.000Z"),
    ]

    @Test(arguments: creationTimes)
    func creationTimesAreWrittenInTheExchangeFormatsForm(seconds: Double, text: String) {
        #expect(ConfigurationMeta.creationTimeText(for: seconds) == text)
        // A meta stamped with the time is the meta of its text.
        let stamped = ConfigurationMeta(formatVersion: "1.0", creationTime: seconds, otherKeys: ["policy_version": 3])
        let read = ConfigurationMeta(formatVersion: "1.0", creationTimeText: text, otherKeys: ["policy_version": 3])
        #expect(stamped.creationTimeText == text)
        #expect(stamped.creationTime == read.creationTime)
        #expect(stamped == read && stamped.hashValue == read.hashValue)
    }

    @Test(arguments: [0.0, 3599.999, 86_400 * 366 + 45_296.789, 86_400 * 3650 - 0.0005])
    func creationTimesReadBackToTheMillisecond(seconds: Double) throws {
        let created = try #require(ConfigurationMeta(formatVersion: "1.0", creationTime: seconds).creationTime)
        #expect(created <= seconds && seconds - created < 0.001)
    }

    @Test func aStampedMetaIsTheMetaOfItsTextAcrossTheYears() {
        // Received with a text of its own, then stamped again and again, as a service stamps
        // its downloads: every stamp reads as the meta of its text would.
        let received = ConfigurationMeta(formatVersion: "1.0", creationTimeText: "yesterday", otherKeys: ["policy_version": 3])
        var last = received
        for i in 0..<5000 {
            // Spread over years 1970–9999, with every millisecond of a second and times just
            // short of the next millisecond.
            let seconds = 253_402_300_799.0 * Double(i) / 4999 + Double(i % 1000) / 1000 + (i % 2 == 0 ? 0 : 0.0009999)
            let text = ConfigurationMeta.creationTimeText(for: seconds)
            let read = ConfigurationMeta(formatVersion: "1.0", creationTimeText: text, otherKeys: ["policy_version": 3])
            let stamped = (i % 2 == 0 ? received : last).stamped(creationTime: seconds)
            #expect(stamped.creationTimeText == text, "\(seconds)")
            #expect(stamped.creationTime == read.creationTime, "\(seconds)")
            #expect(stamped == read && stamped.hashValue == read.hashValue, "\(seconds)")
            #expect(stamped.dictionary == read.dictionary)
            #expect(stamped != last && stamped == last.stamped(creationTime: seconds))
            last = stamped
        }
        // Past year 9999 the text is written out the long way, as the service writes it.
        let far = received.stamped(creationTime: 253_402_300_800)
        #expect(far.creationTimeText == "10000-01-01T00:00:00.000Z" && far.otherKeys == received.otherKeys)
    }

    @Test(arguments: [
        (-62_167_219_200.0, "0000-01-01T00:00:00.000Z"), (-62_167_219_200.001, "-0001-12-31T23:59:59.999Z"),
        (-86_400.0005, "1969-12-30T23:59:59.999Z"), (-0.5, "1969-12-31T23:59:59.500Z"),
        (-0.0005, "1969-12-31T23:59:59.999Z"), (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400.25, "2000-02-29T00:00:00.250Z"), (253_402_300_799.9999, "9999-12-31T23:59:59.999Z"),
    ])
    func aStampedMetaAtTheEdgesOfTheYearsIsTheMetaOfItsText(seconds: Double, text: String) {
        // Before the epoch the fields count up from the day's midnight, as the text's reader
        // counts them, so the time read back is still the millisecond at or before `seconds`.
        let stamped = ConfigurationMeta(formatVersion: "1.0", creationTime: seconds)
        let read = ConfigurationMeta(formatVersion: "1.0", creationTimeText: text)
        #expect(stamped.creationTimeText == text)
        #expect(stamped.creationTime == read.creationTime)
        #expect(stamped == read && stamped.hashValue == read.hashValue)
        if let created = stamped.creationTime {
            #expect(created <= seconds && seconds - created < 0.001)
        }
    }

    @Test(arguments: ["yesterday", "2012-08-20", "2012-13-01T00:00Z", "2013-02-29T00:00Z", "2012-08-20T19:36"])
    func creationTimeThatIsNotISO8601IsKeptAsTextOnly(text: String) throws {
        let state = try ConfigurationState(parsing: payload(created: text, [:]))
        #expect(state.meta.creationTimeText == text)
        #expect(state.meta.creationTime == nil)
    }

    @Test(arguments: [
        (JSONValue.array([]), "(root)"),
        (["config_sections": [:]] as JSONValue, "meta"),
        (["meta": ["creation_time": "x"], "config_sections": [:]] as JSONValue, "meta.format_version_string"),
        (["meta": ["format_version_string": "1", "creation_time": 5], "config_sections": [:]] as JSONValue,
         "meta.creation_time"),
        (["meta": ["format_version_string": "1", "creation_time": "x"]] as JSONValue, "config_sections"),
        (["meta": ["format_version_string": "1", "creation_time": "x"], "config_sections": ["S": 1]] as JSONValue,
         "config_sections.S"),
        (["meta": ["format_version_string": "1", "creation_time": "x"], "config_sections": ["S": [:]]] as JSONValue,
         "config_sections.S.settings"),
        (["meta": ["format_version_string": "1", "creation_time": "x"],
          "config_sections": ["S": ["settings": ["K": "bare"]]]] as JSONValue,
         "config_sections.S.settings.K"),
        (["meta": ["format_version_string": "1", "creation_time": "x"],
          "config_sections": ["S": ["settings": ["K": ["other": 1]]]]] as JSONValue,
         "config_sections.S.settings.K.value"),
        (["meta": ["format_version_string": "1", "creation_time": "x"],
          "config_sections": ["S": ["settings": ["K": ["value": nil]]]]] as JSONValue,
         "config_sections.S.settings.K.value"),
    ])
    func malformedPayloadIsRejectedNamingThePath(payload: JSONValue, path: String) {
        #expect {
            _ = try ConfigurationState(parsing: payload)
        } throws: { error in
            (error as? SettingsError)?.path == path
        }
    }

    @Test func errorMessageSaysWhatWasExpectedAndFound() {
        let bad: JSONValue = ["meta": ["format_version_string": 1, "creation_time": "x"], "config_sections": [:]]
        #expect {
            _ = try ConfigurationState(parsing: bad)
        } throws: { error in
            // The value found is quoted as it was written, so the log line shows it.
            String(describing: error) == "meta.format_version_string: expected a string, found 1"
        }
    }

    @Test func exchangeFormatRoundTrips() throws {
        let original = try ConfigurationState(
            parsing: payload(extraMeta: ["group": "B"], ["A": ["x": 1, "y": ["z"]], "B": [:]]))
        #expect(try ConfigurationState(parsing: original.exchangeFormat) == original)
    }
}

struct ConfigSectionTests {
    let section = ConfigSection(name: "S", settings: [
        "text": "hello", "whole": 4, "fraction": 2.5, "flag": false, "list": ["a"], "object": ["k": 1],
    ])

    @Test func gettersReturnNilForMissingKeys() {
        #expect(section.string("missing") == nil)
        #expect(section.bool("missing") == nil)
        #expect(section.int("missing") == nil)
        #expect(section.double("missing") == nil)
        #expect(section.array("missing") == nil)
        #expect(section.object("missing") == nil)
        #expect(section["missing"] == nil)
    }

    @Test func gettersReturnNilForValuesOfAnotherType() {
        #expect(section.string("whole") == nil)
        #expect(section.bool("whole") == nil)
        #expect(section.int("text") == nil)
        #expect(section.int("fraction") == nil)
        #expect(section.double("flag") == nil)
        #expect(section.array("object") == nil)
        #expect(section.object("list") == nil)
    }

    @Test func gettersReturnValuesOfTheirOwnType() {
        #expect(section.string("text") == "hello")
        #expect(section.bool("flag") == false)
        #expect(section.int("whole") == 4)
        #expect(section.double("whole") == 4)
        #expect(section.double("fraction") == 2.5)
        #expect(section.array("list") == ["a"])
        #expect(section.object("object") == ["k": 1])
        #expect(section["text"] == "hello")
        #expect(section.keys == ["flag", "fraction", "list", "object", "text", "whole"])
    }
}

struct ActiveConfigTests {
    let bootstrap = try! ConfigurationState(parsing: payload(version: "0.9", ["AppFeatures": ["Enabled": false]]))

    @Test func bootstrappedConfigurationIsUsedUntilADownloadSucceeds() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        #expect(config["AppFeatures"].bool("Enabled") == false)
        #expect(config.currentMeta?["format_version_string"] == "0.9")

        let request = config.downloadNewConfig(at: 10)
        #expect(config["AppFeatures"].bool("Enabled") == false, "asking for a download changes nothing")
        let outcome = config.apply(payload: payload(["AppFeatures": ["Enabled": true]]), forUser: request.userID, at: 12)
        #expect(outcome.update != nil)
        #expect(config["AppFeatures"].bool("Enabled") == true)
        #expect(config.store.hasPersistedConfiguration(forUser: nil))
    }

    @Test func downloadRequestsAreNumberedAndCarryTheUser() {
        var config = ActiveConfig(initialSharedConfiguration: nil, userID: "u1")
        let first = config.downloadNewConfig(at: 1)
        let second = config.downloadNewConfig(at: 2)
        #expect(first.sequence == 0)
        #expect(first.userID == "u1")
        #expect(first.requestedAt == 1)
        #expect(second.sequence == 1)
    }

    @Test func missingSectionReadsAsEmpty() {
        let config = ActiveConfig(initialSharedConfiguration: nil)
        #expect(config.current == nil)
        #expect(config.currentMeta == nil)
        #expect(config["Anything"].isEmpty)
        #expect(config["Anything"].bool("Enabled") == nil)
    }

    @Test func listenersAreNotifiedOnlyForChangedSections() throws {
        var config = ActiveConfig(initialSharedConfiguration: nil)
        let first = payload(["A": ["x": 1], "B": ["y": "same"], "C": ["z": true]])
        _ = config.apply(payload: first, forUser: nil, at: 0)
        let a = config.registerListener(forSectionName: "A")
        let b = config.registerListener(forSectionName: "B")
        let c = config.registerListener(forSectionName: "C")
        let d = config.registerListener(forSectionName: "D")

        // A modified, B untouched, C removed, D added.
        let second = payload(created: "2012-08-21T00:00Z", ["A": ["x": 2], "B": ["y": "same"], "D": ["w": [1]]])
        let update = try #require(config.apply(payload: second, forUser: nil, at: 5).update)
        #expect(update.changes.map(\.name) == ["A", "C", "D"])
        #expect(update.changes.map(\.kind) == [.modified, .removed, .added])
        #expect(update.notifications.map(\.listener) == [a, c, d])
        #expect(!update.notifications.contains { $0.listener == b })
        #expect(update.notifications[0].section.int("x") == 2)
        #expect(update.notifications[1].section.isEmpty)
        #expect(update.appliedAt == 5)
    }

    @Test func identicalPayloadNotifiesNobody() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        _ = config.registerListener(forSectionName: "AppFeatures")
        let same = payload(created: "2013-01-01T00:00Z", ["AppFeatures": ["Enabled": false]])
        let update = try #require(config.apply(payload: same, forUser: nil, at: 1).update)
        #expect(update.changes.isEmpty)
        #expect(update.notifications.isEmpty)
        #expect(update.meta?["creation_time"] == "2013-01-01T00:00Z", "the meta still updates")
    }

    /// A configuration read once and handed to many clients under each one's own meta leaves
    /// each as reading its own payload would: the same current configuration, updates,
    /// notifications and persisted copy.
    @Test func aConfigurationReadOnceAppliesAsItsPayloadWould() throws {
        let sections: [String: [String: JSONValue]] = ["AppFeatures": ["Enabled": true, "Limit": 3], "Other": ["x": "y"]]
        let read = try ConfigurationState(parsing: payload(created: "2012-08-20T19:36Z", extraMeta: ["policy_version": 4], sections))
        for created in ["2013-01-01T00:00Z", "2013-01-02T06:30:00.250Z"] {
            var parsing = ActiveConfig(initialSharedConfiguration: bootstrap), shared = parsing
            _ = parsing.registerListener(forSectionName: "AppFeatures")
            _ = shared.registerListener(forSectionName: "AppFeatures")
            let own = parsing.apply(payload: payload(created: created, extraMeta: ["policy_version": 4], sections), forUser: nil, at: 7)
            let meta = ConfigurationMeta(formatVersion: "1.0", creationTimeText: created, otherKeys: ["policy_version": 4])
            let given = shared.apply(read.replacingMeta(with: meta), forUser: nil, at: 7)
            #expect(given == own)
            #expect(shared.current == parsing.current)
            #expect(shared.store == parsing.store)
            #expect(given.update?.notifications.count == 1)
        }
        #expect(read.replacingMeta(with: read.meta) == read)
    }

    @Test func addedOrRemovedSettingCountsAsAChange() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        let listener = config.registerListener(forSectionName: "AppFeatures")
        let added = try #require(config.apply(
            payload: payload(["AppFeatures": ["Enabled": false, "Limit": 3]]), forUser: nil, at: 1).update)
        #expect(added.notifications.map(\.listener) == [listener])
        let removed = try #require(config.apply(
            payload: payload(["AppFeatures": ["Limit": 3]]), forUser: nil, at: 2).update)
        #expect(removed.notifications.map(\.listener) == [listener])
    }

    @Test func severalListenersOnOneSectionAreNotifiedInRegistrationOrder() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        let first = config.registerListener(forSectionName: "AppFeatures")
        let second = config.registerListener(forSectionName: "AppFeatures")
        let update = try #require(config.apply(
            payload: payload(["AppFeatures": ["Enabled": true]]), forUser: nil, at: 1).update)
        #expect(update.notifications.map(\.listener) == [first, second])
    }

    @Test func removedListenerIsNoLongerNotified() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        let kept = config.registerListener(forSectionName: "AppFeatures")
        let dropped = config.registerListener(forSectionName: "AppFeatures")
        config.removeListener(dropped)
        let update = try #require(config.apply(
            payload: payload(["AppFeatures": ["Enabled": true]]), forUser: nil, at: 1).update)
        #expect(update.notifications.map(\.listener) == [kept])
    }

    @Test func malformedPayloadKeepsLastGoodConfigurationAndRecordsTheReason() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        _ = config.apply(payload: payload(["AppFeatures": ["Enabled": true]]), forUser: nil, at: 1)
        let good = config.current

        var broken = payload(["AppFeatures": ["Enabled": false]])
        if case .object(var root) = broken {
            root["config_sections"] = ["AppFeatures": ["settings": ["Enabled": ["val": false]]]]
            broken = .object(root)
        }
        let outcome = config.apply(payload: broken, forUser: nil, at: 2)
        let error = try #require(outcome.error)
        #expect(error.path == "config_sections.AppFeatures.settings.Enabled.value")
        #expect(config.current == good)
        #expect(config["AppFeatures"].bool("Enabled") == true)
        #expect(config.store.lastKnownConfiguration(forUser: nil) == good)
        let rejection = try #require(config.lastRejection)
        #expect(rejection.error == error)
        #expect(rejection.userID == nil)
        #expect(rejection.receivedAt == 2)
    }

    @Test func textThatIsNotJSONIsRejectedAtTheRoot() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        let outcome = config.apply(payloadText: "{ not json", forUser: nil, at: 3)
        #expect(outcome.error?.path == "(root)")
        #expect(config.lastRejection?.receivedAt == 3)
        #expect(config.current == bootstrap)
    }

    @Test func validPayloadTextIsApplied() {
        var config = ActiveConfig(initialSharedConfiguration: nil)
        let text = #"{"meta":{"format_version_string":"1.0","creation_time":"t"},"config_sections":{"S":{"settings":{"k":{"value":7}}}}}"#
        #expect(config.apply(payloadText: text, forUser: nil, at: 0).update?.changedSectionNames == ["S"])
        #expect(config["S"].int("k") == 7)
    }

    @Test func metaIsReadableAfterEachUpdate() {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap)
        _ = config.apply(payload: payload(extraMeta: ["ab_group": "B"], [:]), forUser: nil, at: 1)
        #expect(config.currentMeta?["ab_group"] == "B")
        #expect(config.currentMeta?["format_version_string"] == "1.0")
        _ = config.apply(payload: payload(version: "2.0", extraMeta: ["ab_group": "C"], [:]), forUser: nil, at: 2)
        #expect(config.currentMeta?["ab_group"] == "C")
        #expect(config.currentMeta?["format_version_string"] == "2.0")
        #expect(config.current?.meta.creationTime != nil)
    }

    @Test func payloadForAnotherUserIsPersistedButNotApplied() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap, userID: "alice")
        let outcome = config.apply(payload: payload(["AppFeatures": ["Enabled": true]]), forUser: "bob", at: 1)
        #expect(outcome == .storedForOtherUser("bob"))
        #expect(config["AppFeatures"].bool("Enabled") == false)
        #expect(config.store.hasPersistedConfiguration(forUser: "bob"))
        #expect(!config.store.hasPersistedConfiguration(forUser: "alice"))
    }

    @Test func switchingUserLoadsThatUsersConfigurationAndNotifiesChanges() throws {
        var config = ActiveConfig(initialSharedConfiguration: bootstrap, userID: "alice")
        let listener = config.registerListener(forSectionName: "AppFeatures")
        _ = config.apply(payload: payload(["AppFeatures": ["Enabled": true]]), forUser: "bob", at: 1)

        let switchedToBob = config.switchUser(to: "bob", at: 2)
        let toBob = try #require(switchedToBob)
        #expect(config.userID == "bob")
        #expect(config["AppFeatures"].bool("Enabled") == true)
        #expect(toBob.notifications.map(\.listener) == [listener])

        // Carol has nothing persisted, so she gets the bootstrapped configuration.
        let switchedToCarol = config.switchUser(to: "carol", at: 3)
        let toCarol = try #require(switchedToCarol)
        #expect(config["AppFeatures"].bool("Enabled") == false)
        #expect(toCarol.changedSectionNames == ["AppFeatures"])
    }

    @Test func switchingToAUserWithoutAnyConfigurationRemovesEverySection() throws {
        var config = ActiveConfig(initialSharedConfiguration: nil)
        _ = config.apply(payload: payload(["S": ["k": 1]]), forUser: nil, at: 0)
        let listener = config.registerListener(forSectionName: "S")
        let switched = config.switchUser(to: "new", at: 1)
        let update = try #require(switched)
        #expect(update.changes.map(\.kind) == [.removed])
        #expect(update.notifications.map(\.listener) == [listener])
        #expect(update.meta == nil)
        #expect(config.current == nil)
        #expect(config.switchUser(to: "other", at: 2) == nil, "nothing to remove the second time")
    }

    @Test func storeReturnsEachUsersOwnConfigurationBeforeTheBootstrap() throws {
        var store = InMemoryConfigStore(initialSharedConfiguration: bootstrap)
        let mine = try ConfigurationState(parsing: payload(["Mine": [:]]))
        store.persist(mine, forUser: "me")
        #expect(store.lastKnownConfiguration(forUser: "me") == mine)
        #expect(store.lastKnownConfiguration(forUser: "you") == bootstrap)
        #expect(store.lastKnownConfiguration(forUser: nil) == bootstrap)
    }
}
