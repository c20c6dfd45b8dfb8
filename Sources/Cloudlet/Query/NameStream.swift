import CloudletCore
import CloudletStorage

/// Candidate record names in ascending byte order, one at a time: what a query with no sort walks when its
/// candidates come from index postings. An index files the names under one value key in name order, so the
/// postings of several keys merge (OR, the fields of `self CONTAINS`, a NEAR circle's cells) or intersect
/// (CONTAINS_ALL_TOKENS, LIST_CONTAINS_ALL) as they are read, and a page stops after its matches instead of
/// collecting and sorting every candidate first.
///
/// Streams are positioned on their first name when made; ``current`` is nil once one is done.
protocol NameStream: AnyObject {
    /// The name the stream is at; nil after the last.
    var current: String? { get }
    /// Moves to the next name.
    func advance() throws
    /// Moves forward to the first name at least `name` (in byte order); stays if the current one is already there.
    func seek(atLeast name: String) throws
}

extension NameStream {
    /// ``NameStream/seek(atLeast:)`` by stepping: for streams that cannot jump.
    func stepForward(to name: String) throws {
        while let n = current, NameOrder.compare(n, name) < 0 { try advance() }
    }
}

/// Record names compared as the key directory orders them: by their UTF-8 bytes (Swift's `String` comparison
/// folds canonically equivalent names together, which two records' keys never are).
enum NameOrder {
    static func compare(_ a: String, _ b: String) -> Int {
        // Native strings (what index keys decode to) are contiguous UTF-8: one memcmp, without a copy.
        let inPlace = a.utf8.withContiguousStorageIfAvailable { pa in
            b.utf8.withContiguousStorageIfAvailable { pb in LSMKey.compare(pa, pb) }
        }
        if let inPlace, let c = inPlace { return c }
        return LSMKey.compare(Array(a.utf8), Array(b.utf8))
    }
}

/// The names one index cursor yields (the records filed under one value key, in name order).
final class PostingStream: NameStream {
    private var cursor: IndexCursor
    private(set) var current: String?

    init(_ cursor: IndexCursor) throws {
        self.cursor = cursor
        current = try self.cursor.nextName()
    }

    func advance() throws { current = try cursor.nextName() }

    /// Jumps in the tree (whole blocks and runs skipped by binary search) when the cursor walks one value key.
    func seek(atLeast name: String) throws {
        guard let n = current, NameOrder.compare(n, name) < 0 else { return }
        guard cursor.seeksByName else { return try stepForward(to: name) }
        try cursor.seek(name: name)
        current = try cursor.nextName()
    }
}

/// The names of a key-directory cursor over the type index (`zone · 03 · type · name`), past its prefix.
final class TypeNameStream: NameStream {
    private var cursor: KeyDirectory.KeyCursor
    private let prefixCount: Int
    private(set) var current: String?

    init(_ cursor: KeyDirectory.KeyCursor, prefixCount: Int) throws {
        self.cursor = cursor
        self.prefixCount = prefixCount
        try advance()
    }

    func advance() throws {
        current = try cursor.nextKey().map { String(decoding: $0[prefixCount...], as: UTF8.self) }
    }

    func seek(atLeast name: String) throws { try stepForward(to: name) }
}

/// Names gathered beforehand and sorted by ``NameOrder``: the records a prefix search term finds, which the
/// full-text index files token by token rather than in one name order.
final class SortedNameStream: NameStream {
    private let names: [String]
    private var at = 0

    init(_ names: [String]) { self.names = names }

    var current: String? { at < names.count ? names[at] : nil }

    func advance() throws { at += 1 }

    func seek(atLeast name: String) throws {
        var (lo, hi) = (at, names.count)
        while lo < hi {
            let mid = (lo + hi) / 2
            if NameOrder.compare(names[mid], name) < 0 { lo = mid + 1 } else { hi = mid }
        }
        at = lo
    }
}

/// Every name of any child, once.
final class UnionStream: NameStream {
    private let children: [any NameStream]
    private(set) var current: String?

    init(_ children: [any NameStream]) {
        self.children = children
        settle()
    }

    func advance() throws {
        guard let c = current else { return }
        for child in children where child.current.map({ NameOrder.compare($0, c) == 0 }) ?? false { try child.advance() }
        settle()
    }

    func seek(atLeast name: String) throws {
        guard let c = current, NameOrder.compare(c, name) < 0 else { return }
        for child in children { try child.seek(atLeast: name) }
        settle()
    }

    private func settle() {
        current = nil
        for child in children {
            guard let n = child.current else { continue }
            if current.map({ NameOrder.compare(n, $0) < 0 }) ?? true { current = n }
        }
    }
}

/// The names every child has: a leapfrog merge join — each child seeks to the largest name the others are at,
/// jumping over the entries in between (a posting's cursor skips whole blocks and runs) instead of stepping through
/// them, until all agree.
final class IntersectionStream: NameStream {
    private let children: [any NameStream]
    private(set) var current: String?

    init(_ children: [any NameStream]) throws {
        self.children = children
        try settle()
    }

    func advance() throws {
        guard current != nil, let first = children.first else { return }
        try first.advance()
        try settle()
    }

    func seek(atLeast name: String) throws {
        guard let c = current, NameOrder.compare(c, name) < 0, let first = children.first else { return }
        try first.seek(atLeast: name)
        try settle()
    }

    private func settle() throws {
        current = nil
        guard !children.isEmpty else { return }
        // The largest name any child is at: no common name comes before it.
        var target: String?
        for child in children {
            guard let n = child.current else { return }
            if target.map({ NameOrder.compare(n, $0) > 0 }) ?? true { target = n }
        }
        // Each child in turn seeks to the target; one that lands past it raises the target, and the round goes on
        // until a full turn of children all stand on it.
        var agreed = 0
        var i = 0
        while agreed < children.count {
            let child = children[i]
            try child.seek(atLeast: target!)
            guard let n = child.current else { return }
            if NameOrder.compare(n, target!) == 0 {
                agreed += 1
            } else {
                target = n
                agreed = 1
            }
            i = (i + 1) % children.count
        }
        current = target
    }
}
