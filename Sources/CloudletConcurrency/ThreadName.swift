#if canImport(Glibc)
import Glibc
#endif

/// Names the calling thread in the kernel (what `top -H`, gdb, `/proc` and crash reports show).
///
/// Not `Thread.current.name = …`: Foundation on Linux applies that only once the creating thread has stored the new
/// thread's handle, so a thread naming itself first thing can lose the race and keep the name it inherited from its
/// creator (a cooperative or Dispatch thread's); its getter reads the caller's kernel name, not the thread's.
public enum ThreadName {
    /// Sets the calling thread's name (the kernel keeps its first 15 bytes).
    public static func setCurrent(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The calling thread's name as the kernel has it.
    public static var current: String {
        let fd = open("/proc/thread-self/comm", O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return "" }
        return String(decoding: buffer[..<n], as: UTF8.self).trimmingSuffix("\n")
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
