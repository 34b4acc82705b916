import HTTPCommon
import Testing

@Suite("HTTP header fields in one buffer")
struct HTTPHeadersTests {
    @Test("fields keep their order and spelling; names compare in any ASCII case, values exactly")
    func lookUps() {
        var headers: HTTPHeaders = ["Content-Type": "application/json", "X-Empty": "", "accept": "a"]
        headers.add("Accept", "b")
        headers.add("", "no name")
        #expect(headers.count == 5)
        #expect(headers["content-TYPE"] == "application/json")
        #expect(headers["X-Empty"] == "")
        #expect(headers["Accept"] == "a")
        #expect(headers.values(for: "ACCEPT") == ["a", "b"])
        #expect(headers.firstValue("accept")! == ("a", true))
        #expect(headers.firstValue("Content-Type")! == ("application/json", false))
        #expect(headers["Accepts"] == nil && headers["Accep"] == nil)
        // `[` and `{` differ only by 0x20, but are not letters: not the same name.
        #expect(HTTPHeaders([("a[", "1")])["a{"] == nil)
        #expect(headers.containsName(ofLength: 7) && !headers.containsName(ofLength: 9))
        #expect(headers.map(\.name) == ["Content-Type", "X-Empty", "accept", "Accept", ""])
        #expect(headers.map(\.value) == ["application/json", "", "a", "b", "no name"])
        #expect(headers.fieldBytes == headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
    }

    @Test("set replaces every field of the name, remove drops them all, removeAll empties; copies stay apart")
    func changes() {
        var headers: HTTPHeaders = ["A": "1", "B": "2"]
        headers.add("a", "3")
        let copy = headers
        headers.set("A", "4")
        #expect(headers.map(\.name) == ["B", "A"] && headers["a"] == "4")
        headers.remove("b")
        #expect(headers.count == 1 && headers["B"] == nil)
        #expect(copy.count == 3 && copy.values(for: "A") == ["1", "3"])
        headers.removeAll(keepingCapacity: true)
        #expect(headers.count == 0 && headers["A"] == nil && headers.map(\.name).isEmpty)
        headers.add("C", "é")
        #expect(headers["c"] == "é" && headers.fieldBytes == 1 + 2 + 4)
        #expect(copy == HTTPHeaders([("a", "1"), ("b", "2"), ("A", "3")]))
        #expect(copy != HTTPHeaders([("A", "1"), ("B", "2"), ("a", "4")]))
    }

    @Test("withFirstValue lends the first value's bytes where they lie, says whether the name repeats, nil when absent")
    func borrowedValue() {
        var headers: HTTPHeaders = ["Authorization": "Bearer trk_a_b", "X-Empty": ""]
        func lent(_ name: String) -> ([UInt8], Bool)? {
            headers.withFirstValue(name) { value, repeated in
                var bytes: [UInt8] = []
                for index in value.indices { bytes.append(value[index]) }
                return (bytes, repeated)
            }
        }
        #expect(lent("authorization").map { $0.0 } == Array("Bearer trk_a_b".utf8))
        #expect(lent("Authorization")?.1 == false)
        #expect(lent("x-empty").map { $0.0 } == [])
        #expect(lent("Authorizatio") == nil && lent("Missing") == nil)
        headers.add("AUTHORIZATION", "second")
        #expect(lent("Authorization").map { $0.0 } == Array("Bearer trk_a_b".utf8))
        #expect(lent("Authorization")?.1 == true)
    }
    @Test("a name is found at any length, 63 bytes and past it too, and not after its field is removed")
    func namesOfEveryLength() {
        let long = String(repeating: "n", count: 63), longer = String(repeating: "m", count: 70)
        var headers: HTTPHeaders = ["A": "1", "Request-Timeout": "2"]
        headers.add(long, "3")
        headers.add(longer.uppercased(), "4")
        #expect(headers[long] == "3" && headers[longer] == "4" && headers["a"] == "1")
        #expect(headers[String(repeating: "m", count: 64)] == nil && headers[String(repeating: "n", count: 71)] == nil)
        #expect(headers.containsName(ofLength: 63) && headers.containsName(ofLength: 70) && !headers.containsName(ofLength: 64))
        #expect(headers.containsName(ofLength: 15) && !headers.containsName(ofLength: 16))
        headers.remove("request-timeout")
        #expect(!headers.containsName(ofLength: 15) && headers["Request-Timeout"] == nil)
        headers.remove(long)
        #expect(headers.containsName(ofLength: 70) && !headers.containsName(ofLength: 63) && headers[longer] == "4")
        headers.removeAll(keepingCapacity: true)
        #expect(!headers.containsName(ofLength: 1) && !headers.containsName(ofLength: 70) && headers["A"] == nil)
    }

    @Test("fields written into reserved room are the fields add appends; too little room appends nothing")
    func fieldsWrittenInPlace() {
        let fields: [(String, String)] = [("Host", "example"), ("Content-Type", "application/json"), ("X-Empty", "")]
        func write(_ headers: inout HTTPHeaders, room: Int) -> Bool {
            headers.appendFields(room: room) { writer in
                for (name, value) in fields {
                    var name = name, value = value
                    name.withUTF8 { name in value.withUTF8 { value in writer.add(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value)) } }
                }
            }
        }
        let needed = fields.reduce(0) { $0 + HTTPHeaders.FieldWriter.entryBytes(name: $1.0.utf8.count, value: $1.1.utf8.count) }
        var written: HTTPHeaders = ["A": "1"]
        #expect(write(&written, room: needed))
        #expect(written == HTTPHeaders([("A", "1")] + fields) && written.count == 4)
        #expect(written["content-type"] == "application/json" && written["x-empty"] == "" && written.containsName(ofLength: 7))
        var short: HTTPHeaders = ["A": "1"]
        #expect(!write(&short, room: needed - 1))
        #expect(short == ["A": "1"] && short.count == 1 && !short.containsName(ofLength: 4))
    }
}
