import CloudletWire
import Testing

@testable import CloudletServer

/// The JSON parser and writer: exact numbers, escapes, strictness, and errors with offsets.
@Suite struct JSONParserTests {
    func parse(_ s: String) throws(JSONParser.Error) -> JSONValue { try JSONParser.parse(Array(s.utf8)) }

    @Test func parsesEveryKindOfValue() throws {
        let v = try parse(#" {"a":[1,-2.5e3,true,false,null,"x"],"b":{"c":"d"},"e":[]} "#)
        #expect(v["a"] == .array([
            .number(JSONNumber(text: "1", isInteger: true)), .number(JSONNumber(text: "-2.5e3", isInteger: false)), .bool(true),
            .bool(false), .null, .string("x"),
        ]))
        #expect(v["b"]?["c"]?.stringValue == "d")
        #expect(v["e"] == .array([]))
        #expect(v["missing"] == nil)
    }

    @Test func integersKeepEveryDigitAndFractionsAreNotIntegers() throws {
        #expect(try parse("9223372036854775807").numberValue?.int64 == Int64.max)
        #expect(try parse("-9223372036854775808").numberValue?.int64 == Int64.min)
        #expect(try parse("9007199254740993").numberValue?.int64 == 9_007_199_254_740_993)
        #expect(try parse("9223372036854775808").numberValue?.int64 == nil)  // out of range: not silently rounded
        #expect(try parse("1.0").numberValue?.isInteger == false)
        #expect(try parse("1e2").numberValue?.int64 == nil)
        #expect(try parse("0.1").numberValue?.double == 0.1)
    }

    @Test func nestedObjectsKeepTheirOwnMembers() throws {
        // Members are gathered on one stack for all open objects; each object must get exactly its own.
        let v = try parse(#"{"a":{"b":1,"c":{"d":"é"},"e":[]},"f":[{"g":1},{},{"g":2,"h":{"i":null}}],"j":true}"#)
        let o = try #require(v.objectValue)
        #expect(o.keys.sorted() == ["a", "f", "j"])
        let a = try #require(o["a"]?.objectValue)
        #expect(a.keys.sorted() == ["b", "c", "e"])
        #expect(a["c"]?.objectValue?.keys.sorted() == ["d"])
        #expect(a["c"]?.objectValue?["d"]?.stringValue == "é")
        let f = try #require(o["f"]?.arrayValue)
        #expect(f.map { $0.objectValue?.keys.sorted() ?? ["?"] } == [["g"], [], ["g", "h"]])
        #expect(f[2].objectValue?["h"]?.objectValue?.keys.sorted() == ["i"])
        // A duplicate inside an inner object is found there, with the offset of the repeated key.
        do {
            _ = try parse(#"{"x":1,"y":{"x":1,"z":2,"x":3}}"#)
            Issue.record("accepted a duplicate key")
        } catch {
            #expect(error.description.contains("duplicate key \"x\" in an object at byte 24"), "\(error)")
        }
    }

    @Test func unescapesStrings() throws {
        #expect(try parse(#""a\"b\\c\/d\n\t\u00e9\ud83d\ude00""#).stringValue == "a\"b\\c/d\n\té😀")
        #expect(try parse("\"héllo ✓\"").stringValue == "héllo ✓")
    }

    @Test(arguments: [
        ("", "unexpected end of input"), ("{", "expected a string key"), (#"{"a" 1}"#, "expected ':'"),
        ("[1,]", "unexpected character ']'"), ("01", "leading zero"), ("1.", "expected a digit after '.'"),
        ("-", "expected a digit"), ("tru", "unexpected end of input in 'true'"), ("nul l", "invalid literal"),
        (#""abc"#, "unterminated string"), ("\"a\u{01}\"", "control character"), (#""\x""#, "invalid escape"),
        (#""\ud800""#, "unpaired surrogate"), (#"{"a":1,"a":2}"#, "duplicate key \"a\""), ("1 2", "unexpected data after"),
        (String(repeating: "[", count: 65) + String(repeating: "]", count: 65), "nesting deeper than 64"),
    ])
    func rejectsMalformedInputSayingWhere(_ input: String, _ message: String) {
        do {
            _ = try parse(input)
            Issue.record("accepted \(input)")
        } catch {
            #expect(error.description.contains(message), "\(input): \(error)")
            #expect(error.description.contains("at byte"))
        }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test func writerEscapesAndRoundTrips() throws {
        var w = JSONWriter()
        w.object { w in
            w.member("s", "q\"\\\n\u{01}é")
            w.member("edges", "\tplain run\r")
            w.member("i", Int64.min)
            w.key("d")
            w.double(0.1)
            w.key("nan")
            w.double(.nan)
            w.key("l")
            w.array { w in
                w.bool(true)
                w.null()
                w.object { _ in }
            }
        }
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text == #"{"s":"q\"\\\n\u0001é","edges":"\tplain run\r","i":-9223372036854775808,"d":0.1,"nan":"NaN","l":[true,null,{}]}"#)
        let back = try JSONParser.parse(w.bytes)
        #expect(back["s"]?.stringValue == "q\"\\\n\u{01}é")
        #expect(back["i"]?.numberValue?.int64 == Int64.min)
    }
}
