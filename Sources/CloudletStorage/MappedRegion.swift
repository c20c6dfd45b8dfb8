#if canImport(Glibc)
import Glibc
#endif

/// The first ``count`` bytes of a file mapped read-only and shared (`mmap(PROT_READ, MAP_SHARED)`): reads of it are
/// loads from the page cache, with no system call and no copy into a buffer of ours. Unmapped when the last
/// reference goes, so a reader holding one keeps reading safely while its owner drops it (``Log`` does on close, on
/// a compaction's swap, and past its bound on mappings).
///
/// Only for files that never shrink while mapped (a log segment while its log is open): touching a page past the
/// file's end raises SIGBUS, and so does a disk error while a page is read in (a `pread` would return `EIO`).
/// Bytes the file has not reached yet may be mapped (``count`` may exceed the file's size) but must not be read.
public final class MappedRegion: @unchecked Sendable {
    /// The first mapped byte; immutable, valid until deinit.
    public let base: UnsafeRawPointer
    /// Bytes mapped.
    public let count: Int

    /// Maps `count` bytes of descriptor `fd` from offset 0, with `MADV_RANDOM` (point reads: a page read in from the
    /// disk brings no read-ahead with it). Nil if `mmap` fails.
    init?(fd: Int32, count: Int) {
        guard count > 0 else { return nil }
        guard let p = mmap(nil, count, PROT_READ, MAP_SHARED, fd, 0), p != MAP_FAILED else { return nil }
        _ = madvise(p, count, MADV_RANDOM)
        base = UnsafeRawPointer(p)
        self.count = count
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), count) }

    /// A copy of `count` bytes at `offset` (which the caller checked lie inside the file's written bytes).
    func bytes(at offset: Int, count: Int) -> [UInt8] {
        precondition(offset >= 0 && count >= 0 && offset + count <= self.count, "read outside a mapped region")
        return [UInt8](UnsafeRawBufferPointer(start: base + offset, count: count))
    }
}
