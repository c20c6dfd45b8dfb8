import CloudletStorage
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension StoreInspector {
    /// Warnings for store files and directories that others than the owner may read or write (a mode with group or
    /// other bits: files should be 0600 and directories 0700, as Cloudlet creates them). The store holds users'
    /// records and the hashes of their tokens. Nothing is reported for a store that is not on the real file system.
    func permissionFindings() -> [VerifyReport.Finding] {
        var st = stat()
        guard lstat(path, &st) == 0 else { return [] }
        var out: [VerifyReport.Finding] = []
        func check(_ file: String) {
            var s = stat()
            guard lstat(file, &s) == 0 else { return }
            let kind = s.st_mode & S_IFMT
            guard kind == S_IFREG || kind == S_IFDIR else { return }
            let mode = s.st_mode & 0o777
            guard mode & 0o077 != 0 else { return }
            let wanted = kind == S_IFDIR ? "0700" : "0600"
            out.append(VerifyReport.Finding(
                severity: .warning, partition: VerifyReport.catalogPartition, file: file, offset: nil,
                message: "\(kind == S_IFDIR ? "directory" : "file") has mode \(String(mode, radix: 8, uppercase: false).leftPadded(to: 4)): "
                    + "others than its owner may \(mode & 0o022 != 0 ? "write" : "read") it; `chmod \(wanted.dropFirst()) \(file)`"))
        }
        check(path)
        if let walker = FileManager.default.enumerator(atPath: path) {
            while let relative = walker.nextObject() as? String { check(path + "/" + relative) }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
