import CloudletCore
import Foundation
import Testing

// Foundation has a Predicate and a Comparator too; in this test module the names mean Cloudlet's.
typealias Predicate = CloudletCore.Predicate
typealias Comparator = CloudletCore.Comparator

/// The NSPredicate-style parser: what each spelling means, and that errors say where and why.
@Suite struct PredicateFormatTests {
    func parse(_ f: String, _ args: any PredicateArgument...) throws -> Predicate {
        try Predicate(format: f, arguments: args)
    }

    func c(_ field: String, _ op: Comparator, _ v: FieldValue, distance: Double? = nil) -> Predicate {
        .comparison(Comparison(field, op, v, distance: distance))
    }

    @Test(arguments: [
        ("a = 1", Comparator.equals), ("a == 1", .equals), ("a != 1", .notEquals), ("a <> 1", .notEquals),
        ("a < 1", .lessThan), ("a <= 1", .lessThanOrEquals), ("a =< 1", .lessThanOrEquals), ("a > 1", .greaterThan),
        ("a >= 1", .greaterThanOrEquals), ("a => 1", .greaterThanOrEquals),
    ])
    func basicComparisons(format: String, comparator: Comparator) throws {
        #expect(try parse(format) == c("a", comparator, .int64(1)))
    }

    @Test func valuesLiteralsAndArguments() throws {
        #expect(try parse("name == 'x y'") == c("name", .equals, "x y"))
        #expect(try parse("name == \"it\\'s\"") == c("name", .equals, "it's"))
        #expect(try parse("n == -2.5") == c("n", .equals, .double(-2.5)))
        #expect(try parse("n == 1e-3") == c("n", .equals, .double(0.001)))
        #expect(try parse("n == 2E+2") == c("n", .equals, .double(200)))
        #expect(try parse("flag == TRUE") == c("flag", .equals, .int64(1)))
        #expect(try parse("flag == NO") == c("flag", .equals, .int64(0)))
        #expect(try parse("%K == %@", "kind", "book") == c("kind", .equals, "book"))
        let d = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(try parse("due < %@", d) == c("due", .lessThan, .timestamp(1_700_000_000_000)))
        #expect(
            try parse("due < CAST(0, 'NSDate')") == c("due", .lessThan, .timestamp(978_307_200_000)))
        #expect(
            try parse("due < CAST('2001-01-01T00:00:00Z', 'NSDate')") == c("due", .lessThan, .timestamp(978_307_200_000)))
        guard case .comparison(let now) = try parse("due < now()"), case .timestamp(let ms) = now.value else {
            Issue.record("now() did not parse to a timestamp")
            return
        }
        #expect(abs(Double(ms) / 1000 - Date().timeIntervalSince1970) < 60)
    }

    @Test func systemFieldsAreNormalized() throws {
        #expect(try parse("creationDate > 5") == c("createdTimestamp", .greaterThan, .int64(5)))
        #expect(try parse("recordID == %@", RecordID(recordName: "r1")) == c("recordName", .equals, .reference(Reference(recordName: "r1"))))
        #expect(try parse("___modTime < 5") == c("modifiedTimestamp", .lessThan, .int64(5)))
    }

    @Test func listsAndMembership() throws {
        #expect(try parse("a IN {1, 2}") == c("a", .in, .list(.int64, [1, 2])))
        #expect(try parse("a IN %@", ["x", "y"]) == c("a", .in, .list(.string, ["x", "y"])))
        #expect(try parse("a IN {1, 2.5}") == c("a", .in, .list(.double, [.double(1), .double(2.5)])))
        #expect(try parse("tags CONTAINS 'x'") == c("tags", .listContains, "x"))
        #expect(try parse("'x' IN tags") == c("tags", .listContains, "x"))
        #expect(try parse("%@ IN tags", "x") == c("tags", .listContains, "x"))
        #expect(try parse("7 IN nums") == c("nums", .listContains, .int64(7)))
        #expect(try parse("ANY tags == 'x'") == c("tags", .listContains, "x"))
        #expect(try parse("SOME tags IN {'x'}") == c("tags", .listContainsAny, .list(.string, ["x"])))
        #expect(try parse("ANY tags BEGINSWITH 'x'") == c("tags", .listMemberBeginsWith, "x"))
        #expect(try parse("NOT ANY tags == 'x'") == c("tags", .notListContains, "x"))
    }

    @Test func betweenBeginsWithFullTextAndDistance() throws {
        #expect(
            try parse("n BETWEEN {1, 5}")
                == .and([c("n", .greaterThanOrEquals, .int64(1)), c("n", .lessThanOrEquals, .int64(5))]))
        #expect(try parse("name BEGINSWITH 'ab'") == c("name", .beginsWith, "ab"))
        #expect(try parse("NOT name BEGINSWITH 'ab'") == c("name", .notBeginsWith, "ab"))
        #expect(try parse("self CONTAINS 'coffee'") == c(fullTextField, .containsAnyTokens, "coffee"))
        #expect(try parse("SELF contains %@", "tea") == c(fullTextField, .containsAnyTokens, "tea"))
        #expect(try parse("ALL tokenize(%@, 'Cdl') IN allTokens", "bob smith") == c(fullTextField, .containsAllTokens, "bob smith"))
        #expect(try parse("ANY tokenize('bob', 'Cdl') IN allTokens") == c(fullTextField, .containsAnyTokens, "bob"))
        let here = Location(latitude: 48.85, longitude: 2.35)
        // CloudKit reads the radius in kilometres.
        #expect(
            try parse("distanceToLocation:fromLocation:(place, %@) < 5", here)
                == c("place", .near, .location(here), distance: 5))
        #expect(
            try parse("distanceToLocation:fromLocation:(%K, %@) <= %@", "place", here, 2.5)
                == c("place", .near, .location(here), distance: 2.5))
    }

    @Test func compoundsAndPrecedence() throws {
        let a = c("a", .equals, .int64(1)), b = c("b", .equals, .int64(2)), d = c("d", .equals, .int64(3))
        #expect(try parse("a == 1 AND b == 2 OR d == 3") == .or([.and([a, b]), d]))
        #expect(try parse("a == 1 && (b == 2 || d == 3)") == .and([a, .or([b, d])]))
        #expect(try parse("TRUEPREDICATE") == .all)
        #expect(try parse("FALSEPREDICATE") == Predicate.none)
        #expect(try parse("NOT TRUEPREDICATE") == Predicate.none)
        #expect(try parse("!(a == 1)") == c("a", .notEquals, .int64(1)))
        #expect(try parse("NOT (a == 1 OR b == 2)") == .not(.or([a, b])))
    }

    /// Each bad format with the offset the error must point at and words its message must contain.
    @Test(arguments: [
        ("a == ", 5, "expected a value"),
        ("a ~ 1", 2, "unexpected character"),
        ("a == 'open", 5, "unterminated string"),
        ("a == 1 b == 2", 7, "expected AND, OR or the end"),
        ("(a == 1", 7, "')'"),
        ("a IN 5", 2, "IN needs a list"),
        ("a BETWEEN {1}", 2, "BETWEEN needs a list of two values"),
        ("NOT (a == 1 AND b == 2)", 0, "NOT cannot negate an AND"),
        ("NOT a BETWEEN {1, 2}", 0, "NOT cannot negate BETWEEN"),
        ("NOT self CONTAINS 'x'", 0, "full-text"),
        ("name ENDSWITH 'x'", 5, "ENDSWITH is not supported"),
        ("name LIKE 'x*'", 5, "LIKE is not supported"),
        ("ALL tags == 'x'", 0, "ALL is not supported"),
        ("ANY tags < 3", 9, "ANY supports"),
        ("a IN {1, 'x'}", 5, "one type"),
        ("a == %@", 5, "%@ has no argument"),
        ("AND == 1", 0, "keyword AND"),
        ("distanceToLocation:fromLocation:(p, 'x') < 5", 36, "needs a location"),
        ("a == 1 AND b == {1, 2", 21, "'}'"),
        ("a % 1", 2, "expected %@ or %K"),
        ("self CONTAINS 5", 14, "needs a string"),
        ("due < CAST('tomorrow', 'NSDate')", 11, "ISO 8601"),
    ])
    func errorsSayWhereAndWhy(format: String, offset: Int, words: String) {
        do {
            let p = try Predicate(format: format)
            Issue.record("\(format) parsed as \(p)")
        } catch let wrapped as CloudletError {
            #expect(wrapped.code == .invalidArguments)
            guard let e = wrapped.cause as? PredicateSyntaxError else {
                Issue.record("no syntax error in \(wrapped)")
                return
            }
            #expect(e.offset == offset, "\(format): \(e.description)")
            #expect(e.message.contains(words), "\(format): \(e.description)")
            #expect(e.description.contains("offset \(offset)"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    /// Found by `fuzz-predicate` (docs/fuzzing.md): the milliseconds of a date beyond ±292 million years do not fit
    /// a timestamp's Int64, and converting them trapped the process.
    @Test(arguments: [
        "modified > CAST(6000000\(String(repeating: "2", count: 120))00, 'NSDate')", "modified > CAST(1e300, 'NSDate')",
        "modified > CAST(-9223372036854775807, 'NSDate')", "modified > CAST(9223372036854775, 'NSDate')",
    ])
    func castOfADateOutsideTheTimestampRangeIsAnErrorNotATrap(format: String) {
        let e = #expect(throws: CloudletError.self) { try Predicate(format: format) }
        #expect(e?.code == .invalidArguments)
        #expect((e?.cause as? PredicateSyntaxError)?.offset == 16)
        #expect(e?.message.contains("outside the range of a timestamp") == true, "\(String(describing: e))")
    }

    @Test func castOfAFarDateATimestampHoldsParses() throws {
        // 9e15 s after 2001 is 9.000000978e18 ms after 1970, under Int64.max (9.22e18).
        let far = try #require(FieldValue.checkedDate(Date(timeIntervalSinceReferenceDate: 9e15)))
        #expect(try parse("due < CAST(9000000000000000, 'NSDate')") == c("due", .lessThan, far))
    }

    /// Found by `fuzz-predicate` (docs/fuzzing.md): the parser is recursive, and 20,000 opening parentheses
    /// overflowed its stack; nesting now stops at 32 levels with an error at the level past it.
    @Test(arguments: [
        (String(repeating: "(", count: 20_000) + "a == 1", 32), (String(repeating: "NOT ", count: 20_000) + "a == 1", 128),
        (String(repeating: "!", count: 20_000) + "a == 1", 32), ("a IN " + String(repeating: "{", count: 20_000), 37),
    ])
    func deepNestingIsAnErrorNotAStackOverflow(format: String, offset: Int) {
        let e = #expect(throws: CloudletError.self) { try Predicate(format: format) }
        #expect(e?.code == .invalidArguments)
        #expect((e?.cause as? PredicateSyntaxError)?.offset == offset, "\(String(describing: e))")
        #expect(e?.message.contains("nest deeper than 32 levels") == true, "\(String(describing: e))")
    }

    @Test func nestingOf32LevelsParses() throws {
        // 30 parentheses, a NOT and one more parenthesis: 32 levels.
        let nested = String(repeating: "(", count: 30) + "NOT (a == 1 OR b == 2" + String(repeating: ")", count: 31)
        #expect(try parse(nested) == .not(.or([c("a", .equals, .int64(1)), c("b", .equals, .int64(2))])))
    }

    @Test func unusedArgumentsAreAnError() {
        let e = #expect(throws: CloudletError.self) { try Predicate(format: "a == 1", "extra") }
        #expect(e?.code == .invalidArguments && e?.cause is PredicateSyntaxError)
    }
}

@Suite struct CloudletErrorMatchingTests {
    @Test func aCatchClauseMatchesByCode() {
        func fail(_ code: CloudletError.Code) throws { throw CloudletError(code, "x") }
        var matched = ""
        do { try fail(.zoneNotFound) } catch CloudletError.Code.unknownItem { matched = "unknownItem" } catch CloudletError.Code.zoneNotFound {
            matched = "zoneNotFound"
        } catch { matched = "other" }
        #expect(matched == "zoneNotFound")
        do { try fail(.io) } catch CloudletError.Code.zoneNotFound { matched = "zoneNotFound" } catch { matched = "other" }
        #expect(matched == "other")
        #expect(!(CloudletError.Code.io ~= CancellationError()))
    }
}
