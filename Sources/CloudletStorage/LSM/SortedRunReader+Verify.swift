import CloudletCore

/// A defect ``SortedRunReader/verify()`` found: the file, the byte offset of the damaged block (or structure),
/// and what is wrong.
public struct SortedRunFinding: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var offset: UInt64
    public var problem: String

    public init(path: String, offset: UInt64, problem: String) {
        self.path = path
        self.offset = offset
        self.problem = problem
    }

    public var description: String { "sorted run \(path) offset \(offset): \(problem)" }
}

extension SortedRunReader {
    /// Reads every data block (around the cache) and checks it: trailer CRC, decompression, entry structure, keys
    /// strictly increasing within and across blocks and within their separators, entry kinds, the bloom filter
    /// holding every key, and the totals against the properties. Returns what it found (empty: the run is sound);
    /// reading goes on with the next block after a damaged one.
    public func verify() -> [SortedRunFinding] {
        var findings: [SortedRunFinding] = []
        func note(_ offset: UInt64, _ problem: String) {
            findings.append(SortedRunFinding(path: path, offset: offset, problem: problem))
        }
        var previous: [UInt8]?
        var entries: UInt64 = 0
        var tombstones: UInt64 = 0
        var maxSequence: UInt64 = 0
        var first: [UInt8]?
        let index: RunIndex
        do { index = try runIndex() } catch let error as CloudletError {
            note(0, error.message)
            return findings
        } catch {
            note(0, "\(error)")
            return findings
        }
        let separators = index.separators
        let filter: RunFilter
        do { filter = try self.filter() } catch let error as CloudletError {
            note(footer.filter.offset, error.message)
            return findings
        } catch {
            note(footer.filter.offset, "\(error)")
            return findings
        }
        for (i, handle) in index.handles.enumerated() {
            do {
                let contents = try Self.readBlockContents(file, path, handle)  // once, in order: no mapping
                var cursor = BlockCursor(try Self.block(contents, path, handle))
                do throws(Block.Defect) { try cursor.seekToFirst() } catch { throw defect(error, block: i) }
                var restart = 0
                let block = cursor.block
                var offsetInBlock = 0
                if cursor.current == nil { note(handle.offset, "empty data block") }
                while let current = cursor.current {
                    if restart < block.restartCount && block.restart(restart) == offsetInBlock { restart += 1 }
                    let key = current.key
                    if let previous, LSMKey.compare(key, previous) <= 0 {
                        note(handle.offset, "key \(LSMKey.printable(key)) does not follow the previous key")
                    }
                    if separators.compare(i, key) < 0 {
                        note(handle.offset, "key \(LSMKey.printable(key)) is past the block's separator")
                    }
                    if !filter.mayContain(key) { note(footer.filter.offset, "bloom filter misses \(LSMKey.printable(key))") }
                    let entry = try self.entry(key: key, value: cursor.value, block: i)
                    entries += 1
                    if entry.isTombstone { tombstones += 1 }
                    maxSequence = max(maxSequence, entry.sequence)
                    if first == nil { first = key }
                    previous = key
                    offsetInBlock = current.next
                    do throws(Block.Defect) { try cursor.advance() } catch { throw defect(error, block: i) }
                }
                if restart != block.restartCount { note(handle.offset, "restart points do not start entries") }
            } catch let error as CloudletError {
                note(handle.offset, error.message)
            } catch {
                note(handle.offset, "\(error)")
            }
        }
        if findings.isEmpty {
            let p = properties
            if entries != p.entryCount || tombstones != p.tombstoneCount || maxSequence != p.maxSequence
                || (first ?? []) != p.smallestKey || (previous ?? []) != p.largestKey
            {
                note(footer.properties.offset, "properties disagree with the entries")
            }
        }
        return findings
    }

    /// Opens and verifies the run at `path`; a file that does not even open is one finding.
    public static func verify(path: String, fileSystem: any FileSystem = PosixFileSystem()) -> [SortedRunFinding] {
        do {
            let reader = try SortedRunReader(path: path, fileNumber: 0, fileSystem: fileSystem)
            defer { reader.close() }
            return reader.verify()
        } catch {
            let message = (error as? CloudletError)?.message ?? "\(error)"
            return [SortedRunFinding(path: path, offset: 0, problem: message)]
        }
    }

    private static func block(_ contents: [UInt8], _ path: String, _ handle: BlockHandle) throws -> Block {
        do throws(Block.Defect) { return try Block(contents) } catch {
            throw CloudletError.corruption(run: path, offset: handle.offset, error.reason)
        }
    }
}
