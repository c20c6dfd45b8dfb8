@testable import CloudletCore
import Foundation
import Testing

/// `Predicate.matches`: the ground truth every query plan is checked against.
@Suite struct PredicateEvaluationTests {
    let paris = Location(latitude: 48.8566, longitude: 2.3522)
    let versailles = Location(latitude: 48.8049, longitude: 2.1204)  // ~18 km from Paris
    var record: Record {
        var r = Record(recordType: "T", recordName: "r1")
        r["s"] = "Hello World"
        r["n"] = 5
        r["d"] = 2.5
        r["t"] = .timestamp(1000)
        r["b"] = .bytes([1, 2, 3])
        r["loc"] = .location(paris)
        r["ref"] = .reference(Reference(recordName: "target"))
        r["tags"] = .list(.string, ["red", "Green"])
        r["nums"] = .list(.int64, [1, 2, 3])
        r["text"] = "The quick brown Café"
        r.created = RecordStamp(timestamp: 10, userRecordName: "alice", deviceID: "d")
        r.modified = RecordStamp(timestamp: 20, userRecordName: "bob", deviceID: "d")
        return r
    }

    func m(_ field: String, _ op: Comparator, _ v: FieldValue, distance: Double? = nil) -> Bool {
        Predicate.comparison(Comparison(field, op, v, distance: distance)).matches(record)
    }

    @Test func equalityIsCaseInsensitiveForStringsAndCrossesNumberTypes() {
        #expect(m("s", .equals, "hello world"))
        #expect(!m("s", .notEquals, "HELLO WORLD"))
        #expect(m("s", .notEquals, "hello"))
        #expect(m("n", .equals, .double(5.0)))
        #expect(m("d", .equals, .double(2.5)))
        #expect(m("t", .equals, .timestamp(1000)))
        #expect(!m("t", .equals, .int64(1000)), "timestamps and integers do not compare")
        #expect(m("b", .equals, .bytes([1, 2, 3])))
        #expect(m("loc", .equals, .location(paris)))
        #expect(m("ref", .equals, "target"))
        #expect(m("recordName", .equals, .reference(Reference(recordName: "r1"))), "recordID == CKRecord.ID")
        #expect(m("createdUserRecordName", .equals, .reference(Reference(recordName: "alice"))))
        #expect(!m("n", .notEquals, "x"), "NOT_EQUALS needs comparable values")
    }

    @Test func rangesOnEveryOrderedType() {
        #expect(m("n", .lessThan, .int64(6)) && !m("n", .lessThan, .int64(5)))
        #expect(m("n", .lessThanOrEquals, .double(5)) && m("n", .greaterThan, .double(4.5)))
        #expect(m("d", .greaterThanOrEquals, .int64(2)) && !m("d", .greaterThan, .double(2.5)))
        #expect(m("t", .greaterThan, .timestamp(999)) && !m("t", .lessThan, .timestamp(1000)))
        #expect(m("s", .lessThan, "Hello Xavier") && m("s", .greaterThan, "Hello"))
        #expect(m("s", .lessThan, "hello"), "ranges compare by Unicode scalars: 'H' < 'h'")
        #expect(m("b", .lessThan, .bytes([1, 2, 4])) && m("b", .greaterThan, .bytes([1, 2])))
        #expect(m("ref", .lessThan, "u") && m("createdTimestamp", .lessThan, .timestamp(11)))
        #expect(!m("loc", .lessThan, .location(paris)), "locations do not order")
        #expect(!m("tags", .lessThan, "z"), "lists do not order")
    }

    @Test func stringOrderIsByScalarsEvenForCanonicallyEquivalentStrings() {
        let composed = FieldValue.string("\u{E9}")  // é
        let decomposed = FieldValue.string("e\u{301}")  // e + combining acute
        #expect(FieldOrder.compare(composed, decomposed) == 1)
        #expect(FieldOrder.compare(decomposed, composed) == -1)
        #expect(FieldOrder.equal(composed, decomposed), "EQUALS still treats them as equal")
    }

    @Test func membershipAndLists() {
        #expect(m("n", .in, .list(.int64, [4, 5])) && !m("n", .notIn, .list(.int64, [4, 5])))
        #expect(m("s", .in, .list(.string, ["HELLO world"])))
        #expect(m("tags", .listContains, "green") && !m("tags", .notListContains, "green"))
        #expect(m("tags", .notListContains, "blue"))
        #expect(m("nums", .listContainsAny, .list(.int64, [9, 3])) && !m("nums", .notListContainsAny, .list(.int64, [9, 3])))
        #expect(m("nums", .listContainsAll, .list(.int64, [1, 3])) && !m("nums", .listContainsAll, .list(.int64, [1, 4])))
        #expect(m("nums", .notListContainsAll, .list(.int64, [1, 4])))
        #expect(!m("n", .notListContains, .int64(9)), "NOT_LIST_ forms need a list")
    }

    @Test func prefixesAreCaseSensitive() {
        #expect(m("s", .beginsWith, "Hell") && !m("s", .beginsWith, "hell"))
        #expect(m("s", .notBeginsWith, "hell") && !m("n", .notBeginsWith, "x"))
        #expect(m("tags", .listMemberBeginsWith, "Gr") && !m("tags", .listMemberBeginsWith, "gr"))
        #expect(m("tags", .notListMemberBeginsWith, "b"))
        #expect(m("ref", .beginsWith, "tar") == false, "BEGINS_WITH applies to strings")
    }

    @Test func fullTextFoldsCaseAndDiacriticsAndDropsStopWords() {
        #expect(m("text", .containsAnyTokens, "cafe dog"))
        #expect(m("text", .containsAllTokens, "QUICK café"))
        #expect(!m("text", .containsAllTokens, "quick dog"))
        #expect(!m("text", .containsAnyTokens, "the"), "stop words alone match nothing")
        #expect(m("tags", .containsAnyTokens, "green"))
        #expect(m(fullTextField, .containsAllTokens, "hello brown"))
        #expect(!Predicate.comparison(Comparison(fullTextField, .containsAllTokens, "hello brown")).matches(record, searchable: ["text"]))
        #expect(TextTokenizer.tokens("Crème-brûlée, the BEST!") == ["creme", "brulee", "best"])
    }

    /// A word with a `*` right after it searches for every token it begins, folded as tokens are, stop word or not;
    /// a `*` after no word is punctuation.
    @Test func aStarredWordIsAPrefixTerm() throws {
        #expect(TextTokenizer.searchTerms("Swi* the* * x y*z, Crè*") == ["swi*", "the*", "x", "y*", "z", "cre*"])
        #expect(TextTokenizer.searchTerms("no stars here") == ["stars", "here"])
        #expect(TextTokenizer.prefix(of: "swi*") == "swi" && TextTokenizer.prefix(of: "swift") == nil)
        #expect(m("text", .containsAnyTokens, "qui*"))
        #expect(m("text", .containsAllTokens, "QUI* caf*"))
        #expect(!m("text", .containsAllTokens, "qui* dogs*"))
        #expect(m("text", .containsAnyTokens, "dogs* cafe"))
        #expect(!m("text", .containsAnyTokens, "uick*"), "a prefix matches at a token's start only")
        #expect(!m("text", .containsAnyTokens, "qui"), "without its star a word is a whole token")
        #expect(m(fullTextField, .containsAllTokens, "hel* bro*"))
        // The format string's forms pass the words through: the star survives them.
        #expect(try CloudletCore.Predicate(format: "ALL tokenize('QUI* caf*', 'Cdl') IN allTokens").matches(record))
        #expect(try CloudletCore.Predicate(format: "self CONTAINS 'bro*'").matches(record))
        #expect(try !CloudletCore.Predicate(format: "self CONTAINS 'bro'").matches(record))
    }

    /// The ASCII tokenizer gives what Foundation's folding does, on every printable ASCII character and on random
    /// strings of them; a string with any other character takes the general path.
    @Test func asciiTokensEqualTheFoldedTokens() {
        var state: UInt64 = 0x5EED
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        let alphabet = (0x20...0x7E).map { Character(UnicodeScalar(UInt8($0))) } + ["\t", "\n"]
        var samples = alphabet.map { "x\($0)Y\($0)" } + ["", "THE end", "A1b2 C3", "no-stop words, IN fact"]
        for _ in 0..<500 { samples.append(String((0..<Int(next() % 40)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })) }
        for s in samples {
            #expect(TextTokenizer.asciiTokens(s) == TextTokenizer.foldedTokens(s), "\(s.debugDescription)")
        }
        #expect(TextTokenizer.asciiTokens("café") == nil)
    }

    @Test func nearUsesGreatCircleKilometres() {
        #expect(m("loc", .near, .location(versailles), distance: 20))
        #expect(!m("loc", .near, .location(versailles), distance: 15))
        let d = Geo.distanceKilometres(paris, versailles)
        #expect(d > 17 && d < 19)
        #expect(abs(Geo.distanceKilometres(Location(latitude: 0, longitude: 179.5), Location(latitude: 0, longitude: -179.5)) - 111.2) < 0.5)
    }

    @Test func missingFieldsMatchNoComparisonButNotDoes() {
        #expect(!m("absent", .equals, "x"))
        #expect(!m("absent", .notEquals, "x"))
        #expect(!m("absent", .notIn, .list(.string, ["x"])))
        #expect(Predicate.not(.comparison(Comparison("absent", .equals, "x"))).matches(record))
        #expect(Predicate.or([.none, .comparison(Comparison("n", .equals, 5))]).matches(record))
        #expect(!Predicate.and([.all, .comparison(Comparison("n", .equals, 6))]).matches(record))
    }
}
