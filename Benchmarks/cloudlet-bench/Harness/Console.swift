#if canImport(Glibc)
import Glibc
#endif

/// Writes to stderr without touching Glibc's `stderr` global (not concurrency-safe in Swift 6), and draws a
/// one-line progress status when stderr is a terminal.
enum Console {
    static let stderrIsTerminal = isatty(2) == 1

    static func error(_ text: String) {
        writeAll(2, text + "\n")
    }

    /// Replaces the progress line (terminal only); `nil` clears it.
    static func progress(_ text: String?) {
        guard stderrIsTerminal else { return }
        writeAll(2, "\r\u{1B}[K" + (text ?? ""))
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += n
            }
        }
    }
}
