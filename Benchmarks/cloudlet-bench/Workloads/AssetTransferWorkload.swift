import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletServer
import Foundation

/// `asset-upload-*`, `asset-download-*`: files POSTed to asset upload URLs, or GET from download URLs, of an
/// in-process `cloudlet serve` over loopback; MB/s (10^6 bytes). An upload is streamed to disk, hashed and
/// fdatasync'd before it is answered: compare with `disk-seqwrite` (the same bytes written and synced once). A
/// download run starts with the files dropped from the page cache: compare with `disk-seqread` (and, for 1 MB
/// files, with `disk-fileread-1m`: each file cold, as here).
/// Every upload is of different bytes (no deduplication). The note gives the process's resident memory growth
/// over the uploads (server and client in one process; the client's buffer is allocated before).
final class AssetTransferWorkload: Workload {
    enum Direction: String { case upload, download }

    let name: String
    let engine = "cloudlet"
    let role = EngineRole.subject
    let unit = "MB/s"
    var latencyOf: String { "one \(label(size)) file \(direction == .upload ? "uploaded (POST → receipt)" : "downloaded (GET)")" }

    let direction: Direction
    let size: Int
    let count: Int
    private var store: CloudletStore?
    private var server: Server?
    private var urls: [String] = []
    /// The stored files the download URLs name, dropped from the page cache before each run.
    private var files: [String] = []
    private var body: [UInt8] = []

    init(direction: Direction, size: Int, count: Int) {
        self.direction = direction
        self.size = size
        self.count = count
        name = "asset-\(direction.rawValue)-\(size >= 1_000_000 ? "\(size / 1_000_000)m" : "\(size / 1000)k")"
    }

    private func label(_ bytes: Int) -> String { bytes >= 1_000_000 ? "\(bytes / 1_000_000) MB" : "\(bytes / 1000) kB" }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        var rng = SplitMix64(state: UInt64(size))
        body = (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let maxSize = Int64(size) + 1
        let (store, server, query) = try ThreadBridge.wait { () async throws -> (CloudletStore, Server, String) in
            let store = try await CloudletStore.open(at: dir + "/store", configuration: StoreConfiguration(durability: .fsync))
            let credentials = Credentials(store: store)
            let api = try await credentials.createAPIToken(container: "iCloud.com.example.bench")
            let web = try await credentials.createUser(name: "bench").webAuthToken
            var config = ServerConfiguration()
            config.port = 0
            config.log = nil
            config.maxAssetSize = maxSize
            let server = try Server(store: store, configuration: config)
            try server.start()
            return (store, server, "ckAPIToken=\(api)&ckWebAuthToken=\(web)")
        }
        (self.store, self.server) = (store, server)
        let base = "/database/1/iCloud.com.example.bench/development/private/"
        for i in 0..<count {
            let tokens = try Self.request(
                port: server.port, "POST", base + "assets/upload?" + query,
                body: Array(#"{"tokens":[{"recordType":"File","fieldName":"data"}]}"#.utf8))
            let upload = try Self.member("url", in: tokens)
            guard direction == .download else {
                urls.append(upload)
                continue
            }
            stamp(i)
            let single = try Self.request(port: server.port, "POST", Self.path(upload), body: body)
            let file = String(decoding: single, as: UTF8.self)
            guard let start = file.range(of: #"{"singleFile":"#), file.hasSuffix("}") else {
                throw BenchError(.io, "upload answered \(file.prefix(300))")
            }
            let dict = file[start.upperBound..<file.index(before: file.endIndex)]
            let saved = try Self.request(
                port: server.port, "POST", base + "records/modify?" + query,
                body: Array(
                    #"{"operations":[{"operationType":"create","record":{"recordName":"f\#(i)","recordType":"File","fields":{"data":{"value":\#(dict),"type":"ASSETID"}}}}]}"#
                        .utf8))
            urls.append(try Self.member("downloadURL", in: saved).replacingOccurrences(of: "${f}", with: "f.bin"))
            files.append(try store.assetFile(AssetReference(fileChecksum: try Self.member("fileChecksum", in: saved), size: Int64(size))))
        }
    }

    /// Makes upload `i`'s bytes unique (its first 8 bytes).
    private func stamp(_ i: Int) {
        withUnsafeBytes(of: UInt64(i).littleEndian) { for (k, b) in $0.enumerated() where k < body.count { body[k] = b } }
    }

    func run() throws -> RunMeasurement {
        guard let server else { preconditionFailure("run() without setUp()") }
        // Downloads read from the disk, as `disk-seqread` does (the files were just written: they are in the cache).
        for f in files { _ = try PosixFile(readingFrom: f).dropCachedPages() }
        let before = try ProcessMemory.current()
        let cpuBefore = (process: CPUClock.seconds(thread: false), client: CPUClock.seconds(thread: true))
        var latencies: [Double] = []
        let clock = Stopwatch()
        for (i, url) in urls.enumerated() {
            let t = Stopwatch()
            switch direction {
            case .upload:
                stamp(i + 1_000_000)
                let answer = try Self.request(port: server.port, "POST", Self.path(url), body: body)
                _ = try Self.member("fileChecksum", in: answer)
            case .download:
                let got = try Self.exchange(port: server.port, "GET", Self.path(url), body: nil, keep: false)
                guard got.length == size else { throw BenchError(.io, "downloaded \(got.length) of \(size) bytes") }
            }
            latencies.append(t.elapsed)
        }
        let seconds = clock.elapsed
        let after = try ProcessMemory.current()
        let growth = Double(after.peakBytes - before.peakBytes) / 1e6
        // CPU per MB, less sensitive to a loaded machine than MB/s: the process's minus the calling thread's (the
        // client: its sends and receives, loopback's kernel work mostly with them) is the server's.
        let megabytes = Double(size * count) / 1e6
        let process = CPUClock.seconds(thread: false) - cpuBefore.process
        let client = CPUClock.seconds(thread: true) - cpuBefore.client
        let cpu = String(
            format: "server CPU %.2f ms/MB, client CPU %.2f ms/MB", (process - client) * 1e3 / megabytes, client * 1e3 / megabytes)
        return RunMeasurement(
            operations: megabytes, seconds: seconds, latencies: latencies,
            note: direction == .upload
                ? "\(name): \(cpu); peak resident memory grew \(String(format: "%.1f", max(growth, 0))) MB over \(label(size * count)) uploaded"
                : "\(name): \(cpu)")
    }

    func tearDown() throws {
        server?.stop()
        if let store { try ThreadBridge.wait { try await store.close() } }
        (store, server, urls, files) = (nil, nil, [], [])
    }

    // MARK: - A minimal HTTP/1.1 client over one connection per request

    private static func path(_ url: String) -> String {
        guard let r = url.range(of: "://"), let slash = url[r.upperBound...].firstIndex(of: "/") else { return url }
        return String(url[slash...])
    }

    /// The string value of `"key":"…"` in a JSON response.
    private static func member(_ key: String, in response: [UInt8]) throws -> String {
        let text = String(decoding: response, as: UTF8.self)
        guard let start = text.range(of: "\"\(key)\":\""), let end = text[start.upperBound...].firstIndex(of: "\"") else {
            throw BenchError(.io, "no \(key) in \(text.prefix(300))")
        }
        return String(text[start.upperBound..<end])
    }

    /// Sends a request and returns the response body (a non-200/206 status throws).
    private static func request(port: Int, _ method: String, _ path: String, body: [UInt8]?) throws -> [UInt8] {
        try exchange(port: port, method, path, body: body, keep: true).body
    }

    /// Sends a request; returns the response body if `keep` (else it is read and dropped in 1 MiB pieces) and its
    /// length.
    private static func exchange(
        port: Int, _ method: String, _ path: String, body: [UInt8]?, keep: Bool
    ) throws -> (body: [UInt8], length: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError(.io, "socket: errno \(errno)") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw BenchError(.io, "connect: errno \(errno)") }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if let body { head += "Content-Length: \(body.count)\r\n" }
        try sendAll(fd, Array((head + "\r\n").utf8))
        if let body { try sendAll(fd, body) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var got: [UInt8] = []
        var headerEnd: Int?
        var bodyBytes = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { throw BenchError(.io, "recv: errno \(errno)") }
            if n == 0 { break }
            if headerEnd == nil {
                got += buffer[0..<n]
                if let end = find(got, [13, 10, 13, 10]) {
                    headerEnd = end + 4
                    bodyBytes = got.count - end - 4
                    if !keep { got.removeLast(got.count - end - 4) }
                }
            } else {
                bodyBytes += n
                if keep { got += buffer[0..<n] }
            }
        }
        guard let end = headerEnd else { throw BenchError(.io, "no response to \(method) \(path)") }
        let status = String(decoding: got[0..<min(12, got.count)], as: UTF8.self)
        guard status.hasPrefix("HTTP/1.1 200") || status.hasPrefix("HTTP/1.1 206") else {
            throw BenchError(.io, "\(method) answered \(String(decoding: got.prefix(400), as: UTF8.self))")
        }
        return (keep ? Array(got[end...]) : [], bodyBytes)
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, min($0.count, 1 << 20), Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw BenchError(.io, "send: errno \(errno)") }
            offset += n
        }
    }

    private static func find(_ hay: [UInt8], _ needle: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<i + needle.count]) == needle {
            return i
        }
        return nil
    }
}
