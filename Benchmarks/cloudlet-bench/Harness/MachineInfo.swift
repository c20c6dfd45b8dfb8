import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the numbers were measured: cores, kernel, and the disk and filesystem under the data directory (Linux
/// `/sys` and `/proc`; fields it cannot find are left out). Printed above the table and kept with results.
struct MachineInfo: Sendable, Encodable {
    var date: String
    var cores: Int
    var kernel: String
    /// `vda, 256 GiB, rotational=1 (virtio 0x1af4)`.
    var disk: String?
    /// `ext4 on /`.
    var filesystem: String?

    init(dataPath: String) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        date = formatter.string(from: Date())
        cores = ProcessInfo.processInfo.activeProcessorCount
        var u = utsname()
        uname(&u)
        kernel = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        disk = Self.disk(of: dataPath)
        filesystem = Self.filesystem(of: dataPath)
    }

    var summary: String {
        ["\(cores) cores", "Linux \(kernel)", disk.map { "disk \($0)" }, filesystem].compactMap { $0 }
            .joined(separator: ", ")
    }

    private static func read(_ path: String) -> String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func disk(of path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFF)
        let minor = (dev & 0xFF) | ((dev >> 12) & ~0xFF)
        let sys = "/sys/dev/block/\(major):\(minor)"
        guard let uevent = read(sys + "/uevent"),
            let name = uevent.split(separator: "\n").first(where: { $0.hasPrefix("DEVNAME=") })?.dropFirst(8)
        else { return nil }
        // A partition's queue and device details are its parent disk's.
        let base = FileManager.default.fileExists(atPath: sys + "/partition") ? sys + "/.." : sys
        var parts = [String(name)]
        if let sectors = read(sys + "/size").flatMap(Double.init) {
            parts.append(String(format: "%.0f GiB", sectors * 512 / 1_073_741_824))
        }
        if let rotational = read(base + "/queue/rotational") { parts.append("rotational=\(rotational)") }
        if let model = read(base + "/device/model"), !model.isEmpty {
            parts.append(model)
        } else if let vendor = read(base + "/device/vendor") {
            parts.append("vendor \(vendor)")
        }
        return parts.joined(separator: ", ")
    }

    private static func filesystem(of path: String) -> String? {
        guard let mounts = read("/proc/mounts") else { return nil }
        let real = (path as NSString).resolvingSymlinksInPath
        var best: (mount: String, type: String)?
        for line in mounts.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count >= 3 else { continue }
            let mount = String(f[1])
            let inside = mount == "/" || real == mount || real.hasPrefix(mount + "/")
            if inside && mount.count > (best?.mount.count ?? -1) { best = (mount, String(f[2])) }
        }
        return best.map { "\($0.type) on \($0.mount)" }
    }
}
