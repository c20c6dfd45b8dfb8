import CloudletCore
import Testing

/// A field value as a test argument, with a short name (the 1 MiB sample would otherwise be printed in full).
struct Sample: Sendable, CustomTestStringConvertible {
    let value: FieldValue

    init(_ value: FieldValue) { self.value = value }

    var testDescription: String {
        let text = String(describing: value)
        return text.count <= 80 ? text : String(text.prefix(77)) + "…"
    }

    static let all: [Sample] = Samples.allScalars.map(Sample.init)
}
