/// Binary encoding of predicates (in subscriptions and continuation markers): a tag byte per node, comparisons as
/// field · comparator name · value (``RecordCodec`` value encoding) · optional distance.
public enum PredicateCodec {
    public static func encode(_ p: Predicate, into w: inout ByteWriter) {
        switch p {
        case .all: w.u8(0)
        case .none: w.u8(1)
        case .comparison(let c):
            w.u8(2)
            w.string(c.field)
            w.string(c.comparator.rawValue)
            RecordCodec.encode(c.value, into: &w)
            w.bool(c.distance != nil)
            if let d = c.distance { w.f64(d) }
        case .and(let ps), .or(let ps):
            if case .and = p { w.u8(3) } else { w.u8(4) }
            w.varint(ps.count)
            for q in ps { encode(q, into: &w) }
        case .not(let q):
            w.u8(5)
            encode(q, into: &w)
        }
    }

    public static func decode(_ r: inout ByteReader, depth: Int = 0) throws -> Predicate {
        guard depth < 64 else { throw CloudletError.corruption("\(r.what): predicate nested too deeply") }
        let tag = try r.u8()
        switch tag {
        case 0: return .all
        case 1: return .none
        case 2:
            let field = try r.string()
            let name = try r.string()
            guard let comparator = Comparator(rawValue: name) else {
                throw CloudletError.corruption("\(r.what): unknown comparator \(name)")
            }
            let value = try RecordCodec.decodeValue(&r)
            let distance = try r.bool() ? try r.f64() : nil
            return .comparison(Comparison(field, comparator, value, distance: distance))
        case 3, 4:
            let n = try r.length()
            var ps: [Predicate] = []
            for _ in 0..<n { ps.append(try decode(&r, depth: depth + 1)) }
            return tag == 3 ? .and(ps) : .or(ps)
        case 5: return .not(try decode(&r, depth: depth + 1))
        default: throw CloudletError.corruption("\(r.what): unknown predicate tag \(tag)")
        }
    }
}
