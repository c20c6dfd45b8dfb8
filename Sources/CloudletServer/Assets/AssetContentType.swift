/// The `Content-Type` of an asset download (`docs/assets.md`, *Content types*). The store keeps no type with a file
/// (a file is only its bytes, named by their hash), so the type is worked out when the file is served:
/// 1. from the extension of the file name the client put in place of CloudKit's `${f}` placeholder (the last
///    segment of the download URL), when it is one of ``byExtension``;
/// 2. otherwise from the file's first bytes, for the formats photo and video apps store (``sniff(_:)``);
/// 3. otherwise `application/octet-stream`.
///
/// Only *passive* types are ever answered: the files are served from the server's own origin, so a type a browser
/// would run (HTML, SVG, XML, JavaScript) would let anyone who can upload a file run script there. Such names get
/// `application/octet-stream`, and every download carries `X-Content-Type-Options: nosniff` so that a browser does
/// not guess a type of its own.
enum AssetContentType {
    static let fallback = "application/octet-stream"

    /// How many of a file's first bytes ``sniff(_:)`` looks at.
    static let sniffLength = 16

    /// File name extensions (lowercase) and their types.
    static let byExtension: [String: String] = [
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "bmp": "image/bmp", "tif": "image/tiff",
        "tiff": "image/tiff", "pdf": "application/pdf", "mp4": "video/mp4", "m4v": "video/mp4",
        "mov": "video/quicktime", "webm": "video/webm", "m4a": "audio/mp4", "mp3": "audio/mpeg", "wav": "audio/wav",
        "ogg": "audio/ogg", "txt": "text/plain; charset=utf-8", "csv": "text/csv; charset=utf-8",
        "json": "application/json", "zip": "application/zip", "gz": "application/gzip", "bin": fallback,
    ]

    /// The type of the file named `fileName` (the download URL's last segment, percent-decoded) whose first bytes
    /// `head` returns (called only when the name does not tell).
    static func of(fileName: String, head: () -> [UInt8]) -> String {
        if let type = fromExtension(fileName) { return type }
        return sniff(head()) ?? fallback
    }

    /// The type the extension of `fileName` names, if it is in ``byExtension``. `${f}` itself (a URL used as
    /// given) and names without an extension name none.
    static func fromExtension(_ fileName: String) -> String? {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else { return nil }
        return byExtension[fileName[fileName.index(after: dot)...].lowercased()]
    }

    /// The type of a file that starts with `head` (its first ``sniffLength`` bytes, fewer for a shorter file), by
    /// the signature of JPEG, PNG, GIF, WebP, PDF and the ISO media files (HEIC/HEIF, AVIF, MP4, QuickTime, M4A).
    static func sniff(_ head: [UInt8]) -> String? {
        func starts(_ prefix: String, at offset: Int = 0) -> Bool {
            let p = Array(prefix.utf8)
            return head.count >= offset + p.count && Array(head[offset..<offset + p.count]) == p
        }
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts("GIF87a") || starts("GIF89a") { return "image/gif" }
        if starts("RIFF"), starts("WEBP", at: 8) { return "image/webp" }
        if starts("%PDF-") { return "application/pdf" }
        if starts("ftyp", at: 4), head.count >= 12 {  // an ISO base media file: its major brand says which
            switch String(decoding: head[8..<12], as: UTF8.self) {
            case "heic", "heix", "hevc", "hevx", "heim", "heis": return "image/heic"
            case "mif1", "msf1": return "image/heif"
            case "avif", "avis": return "image/avif"
            case "qt  ": return "video/quicktime"
            case "M4A ": return "audio/mp4"
            default: return "video/mp4"
            }
        }
        return nil
    }
}
