/// Replaces a file crash-safely, on any ``FileSystem``: the new content is written to a temp file next to it
/// (`path` + ``temporarySuffix``), which ``commit()`` fdatasyncs, closes and renames over `path`, then fsyncs the
/// directory. After a crash `path` holds the old content or the new one, never a mix. A temp file left by a crash
/// or a failure is the caller's to ignore or clean up; the next replacement of the same file overwrites it.
///
/// The one way the package replaces a file: store metadata, checkpoints, the compaction marker and
/// `cloudlet-tool export --output`. For content at hand, ``FileSystem/replaceFile(_:with:)`` does it in one call;
/// for content written in pieces:
///
/// ```swift
/// let replacement = try FileReplacement(replacing: path, fileSystem: fs)
/// try replacement.file.write(part, at: 0)  // …and more, at increasing offsets
/// try replacement.commit()
/// ```
public final class FileReplacement: Sendable {
    /// What the temp file's name adds to the replaced file's.
    public static let temporarySuffix = ".tmp"

    /// The file being replaced.
    public let path: String
    /// `path` + ``temporarySuffix``.
    public let temporaryPath: String
    /// The temp file, empty and open for writing; ``commit()`` closes it.
    public let file: any File
    private let fileSystem: any FileSystem

    /// Creates (or empties) the temp file for a new version of `path`. The directory must exist.
    public init(replacing path: String, fileSystem: any FileSystem = PosixFileSystem()) throws(FileSystemError) {
        self.path = path
        temporaryPath = path + Self.temporarySuffix
        self.fileSystem = fileSystem
        file = try fileSystem.open(temporaryPath, options: [.create, .truncate])
    }

    /// Makes what was written to ``file`` durable and puts it in place of `path`. On a failure before the rename the
    /// temp file is closed and `path` is untouched; a failed directory fsync comes with
    /// ``FileReplacementError/replaced`` set.
    public func commit() throws(FileReplacementError) {
        do throws(FileSystemError) {
            do throws(FileSystemError) { try file.fdatasync() } catch {
                try? file.close()
                throw error
            }
            try file.close()
            CrashPoint.reached("replace.synced")
            try fileSystem.rename(temporaryPath, to: path)
        } catch {
            throw FileReplacementError(error: error, replaced: false)
        }
        CrashPoint.reached("replace.renamed")
        do throws(FileSystemError) { try fileSystem.fsyncDirectory(Path.parent(path)) } catch {
            throw FileReplacementError(error: error, replaced: true)
        }
    }
}

/// A failed ``FileReplacement``: the file-system call that failed, and whether the new content had already taken
/// the old one's place.
public struct FileReplacementError: Error, Sendable, CustomStringConvertible {
    /// The call that failed.
    public var error: FileSystemError
    /// True when only the directory fsync failed: the rename happened, but a crash may still bring back either
    /// version, so a caller that depends on which one is there must stop trusting the file's state.
    public var replaced: Bool

    public init(error: FileSystemError, replaced: Bool) {
        self.error = error
        self.replaced = replaced
    }

    public var description: String { error.description }
}

extension FileSystem {
    /// Replaces the file at `path` with `bytes` crash-safely (see ``FileReplacement``).
    public func replaceFile(_ path: String, with bytes: [UInt8]) throws(FileReplacementError) {
        let replacement: FileReplacement
        do throws(FileSystemError) {
            replacement = try FileReplacement(replacing: path, fileSystem: self)
        } catch {
            throw FileReplacementError(error: error, replaced: false)
        }
        do throws(FileSystemError) { try replacement.file.write(bytes, at: 0) } catch {
            try? replacement.file.close()
            throw FileReplacementError(error: error, replaced: false)
        }
        try replacement.commit()
    }
}
